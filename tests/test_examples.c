/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of examples/plugin-skeleton as a transport: two ranks of one process
 * (threads) connect through it and move data with put/signal/flush, exactly as
 * an application would. The plugin is built by the example_plugin_skeleton test
 * (tests/examples.cmake); its folder comes in WEFT_TEST_SKELETON_DIR. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "testlib.h"

#define SK_BYTES (1u << 20)

struct sk_run {
	struct weft_unique_id id;
	int rank;
	char describe[256];
	int rc;            /* first failure, 0 when the rank did everything */
	const char *where; /* the call that failed */
};

/* Points the registry at the skeleton's folder, before the first weft call of
 * this (forked) test process. */
static void use_skeleton(void)
{
	const char *dir = getenv("WEFT_TEST_SKELETON_DIR");
	ck_assert_msg(dir && *dir, "WEFT_TEST_SKELETON_DIR is not set");
	ck_assert_int_eq(setenv("WEFT_PLUGIN_PATH", dir, 1), 0);
}

#define STEP(call) \
	do { \
		int rc_ = (call); \
		if (rc_ != 0) { \
			r->rc = rc_; \
			r->where = #call; \
			goto out; \
		} \
	} while (0)

/* Rank 0 puts 1 MiB into rank 1's buffer and signals; rank 1 waits for the
 * token and checks every byte; then the roles swap for the reply. */
static void *rank_main(void *arg)
{
	struct sk_run *r = arg;
	const int me = r->rank, peer = 1 - r->rank;
	weft_comm_t *comm = NULL;
	weft_conn_t *conn = NULL;
	weft_mem_t *mem = NULL;
	weft_rmem_t *rmem = NULL;
	weft_sem_t *sem = NULL;
	weft_rsem_t *rsem = NULL;
	unsigned char *buf = malloc(2 * SK_BYTES); /* [0, N): outgoing, [N, 2N): incoming */
	if (!buf) {
		r->rc = -ENOMEM;
		r->where = "malloc";
		return NULL;
	}
	for (size_t i = 0; i < SK_BYTES; i++) {
		buf[i] = (unsigned char)(i * 7 + me * 13 + 1);
		buf[SK_BYTES + i] = 0;
	}

	STEP(weft_comm_create(&r->id, 2, me, &comm));
	STEP(weft_connect(comm, peer, "skeleton", &conn));
	STEP(weft_conn_describe(conn, r->describe, sizeof(r->describe)));
	STEP(weft_mem_register(comm, buf, 2 * SK_BYTES, WEFT_MEM_HOST, &mem));
	STEP(weft_mem_exchange(mem, peer, &rmem));
	STEP(weft_sem_create(comm, &sem));
	STEP(weft_sem_exchange(sem, peer, &rsem));

	for (int round = 0; round < 2; round++) {
		if (round == me) {
			STEP(weft_put(conn, rmem, SK_BYTES, mem, 0, SK_BYTES));
			STEP(weft_signal(conn, rsem, (uint64_t)round + 1));
			STEP(weft_flush(conn));
		} else {
			STEP(weft_sem_wait(sem, (uint64_t)round + 1));
			for (size_t i = 0; i < SK_BYTES; i++) {
				unsigned char want = (unsigned char)(i * 7 + peer * 13 + 1);
				if (buf[SK_BYTES + i] != want) {
					fprintf(stderr, "rank %d: byte %zu is %u, expected %u\n", me, i,
						buf[SK_BYTES + i], want);
					r->rc = -EIO;
					r->where = "checking the received bytes";
					goto out;
				}
			}
		}
	}
	STEP(weft_comm_barrier(comm));
out:
	weft_rsem_release(rsem);
	weft_sem_destroy(sem);
	weft_rmem_release(rmem);
	weft_mem_deregister(mem);
	weft_conn_close(conn);
	weft_comm_destroy(comm);
	free(buf);
	return NULL;
}

/* Runs fn as ranks 0 and 1 of one communicator, one thread each. */
static void run_two_ranks(void *(*fn)(void *), struct sk_run runs[2])
{
	memset(runs, 0, 2 * sizeof(runs[0]));
	ck_assert_int_eq(weft_get_unique_id(&runs[0].id), 0);
	runs[1].id = runs[0].id;
	runs[1].rank = 1;
	ck_assert_int_eq(wt_run_threads(2, fn, runs, sizeof(runs[0])), 0);
}

START_TEST(skeleton_moves_data)
{
	use_skeleton();
	struct sk_run runs[2];
	run_two_ranks(rank_main, runs);
	for (int i = 0; i < 2; i++)
		ck_assert_msg(runs[i].rc == 0, "rank %d: %s failed: %s", i, runs[i].where ? runs[i].where : "?",
			      weft_strerror(runs[i].rc));
	/* The connection really is the skeleton's (its ep_describe line). */
	ck_assert_str_eq(runs[0].describe, "memcpy peer=1");
	ck_assert_str_eq(runs[1].describe, "memcpy peer=0");
}
END_TEST

/* Each rank asks for the skeleton by name; rc records what weft_connect said. */
static void *connect_main(void *arg)
{
	struct sk_run *r = arg;
	weft_comm_t *comm = NULL;
	weft_conn_t *conn = NULL;
	r->rc = weft_comm_create(&r->id, 2, r->rank, &comm);
	r->where = "weft_comm_create";
	if (r->rc == 0) {
		r->rc = weft_connect(comm, 1 - r->rank, "skeleton", &conn);
		r->where = "weft_connect";
		if (r->rc == 0 || conn != NULL)
			r->where = "weft_connect succeeded or wrote conn";
		weft_conn_close(conn);
	}
	weft_comm_destroy(comm);
	return NULL;
}

/* Disabled through its parameter, the plugin does not load, and naming it in
 * weft_connect is an error that says so, not a silent fallback. */
START_TEST(skeleton_disabled_is_an_error)
{
	use_skeleton();
	ck_assert_int_eq(setenv("WEFT_SKELETON_ENABLE", "0", 1), 0);
	struct sk_run runs[2];
	run_two_ranks(connect_main, runs);
	for (int i = 0; i < 2; i++)
		ck_assert_msg(runs[i].rc == -WEFT_ERR_PLUGIN && strcmp(runs[i].where, "weft_connect") == 0,
			      "rank %d: expected weft_connect to fail with %s; %s returned %d (%s)", i,
			      weft_strerror(-WEFT_ERR_PLUGIN), runs[i].where, runs[i].rc, weft_strerror(runs[i].rc));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("examples");
	TCase *tc = tcase_create("skeleton");
	tcase_add_test(tc, skeleton_moves_data);
	tcase_add_test(tc, skeleton_disabled_is_an_error);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
