/* SPDX-License-Identifier: Apache-2.0 */
/* Plugins built for an older minor of the ABI on this core: the transport
 * skeleton and a small pack (tests/plugins/pack_0_2.c), both compiled against
 * the frozen 0.2 header (tests/abi/0.2), load as 0.2 and work. Two ranks of
 * one process (threads) put, signal and flush through the 0.2 transport and
 * run an allreduce through the 0.2 pack; a pre-multiplied sum (ABI 0.3) is
 * never handed to the 0.2 pack, which aborts if it is: it goes to algo-host,
 * which declares it, and fails with -ENOTSUP where a rule requires the 0.2
 * algorithm. The plugins' folder comes in WEFT_TEST_ABI02_DIR. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/info.h>
#include <weft/weft.h>

#include "testlib.h"

#define NB (64u << 10)

struct ab_run {
	struct weft_unique_id id;
	int rank;
	int rc;
	char where[160];
	char algo_sum[96], algo_premul[96];
};

#define STEP(call)                                                                  \
	do {                                                                        \
		int rc_ = (call);                                                   \
		if (rc_ != 0) {                                                     \
			r->rc = rc_;                                                \
			snprintf(r->where, sizeof(r->where), "%s", #call);          \
			goto out;                                                   \
		}                                                                   \
	} while (0)

static void *rank_main(void *arg)
{
	struct ab_run *r = arg;
	const int me = r->rank, peer = 1 - me;
	weft_comm_t *comm = NULL;
	weft_conn_t *conn = NULL;
	weft_mem_t *mem = NULL;
	weft_rmem_t *rmem = NULL;
	weft_sem_t *sem = NULL;
	weft_rsem_t *rsem = NULL;
	unsigned char *buf = calloc(2, NB);
	int32_t v[3], out[3];
	if (!buf) {
		r->rc = -ENOMEM;
		return NULL;
	}
	for (unsigned i = 0; i < NB; i++)
		buf[i] = (unsigned char)(i * 13 + me);
	STEP(weft_comm_create(&r->id, 2, me, &comm));
	/* The 0.2 transport, by name: one put of 64 KiB each way. */
	STEP(weft_mem_register(comm, buf, 2 * NB, WEFT_MEM_HOST, &mem));
	STEP(weft_mem_exchange(mem, peer, &rmem));
	STEP(weft_sem_create(comm, &sem));
	STEP(weft_sem_exchange(sem, peer, &rsem));
	STEP(weft_connect(comm, peer, "skeleton", &conn));
	STEP(weft_put(conn, rmem, NB, mem, 0, NB));
	STEP(weft_signal(conn, rsem, 1));
	STEP(weft_flush(conn));
	STEP(weft_sem_wait(sem, 1));
	for (unsigned i = 0; i < NB; i++)
		if (buf[NB + i] != (unsigned char)(i * 13 + peer)) {
			r->rc = -EBADMSG;
			snprintf(r->where, sizeof(r->where), "byte %u from the peer through the 0.2 transport", i);
			goto out;
		}
	STEP(weft_comm_barrier(comm));
	/* The 0.2 pack, preferred by the config's rule, serves the plain sum. */
	for (int i = 0; i < 3; i++)
		v[i] = (me + 1) * (i + 1);
	STEP(weft_allreduce(v, out, 3, WEFT_INT32, WEFT_SUM, comm, NULL));
	snprintf(r->algo_sum, sizeof(r->algo_sum), "%s", weft_info_last_algorithm(comm));
	for (int i = 0; i < 3; i++)
		if (out[i] != 3 * (i + 1)) {
			r->rc = -EBADMSG;
			snprintf(r->where, sizeof(r->where), "sum element %d is %d", i, out[i]);
			goto out;
		}
	/* The pre-multiplied sum passes it by for a pack that declares it. */
	int32_t s = me + 2;
	STEP(weft_allreduce_premul(v, out, 3, WEFT_INT32, &s, WEFT_MEM_HOST, comm, NULL));
	snprintf(r->algo_premul, sizeof(r->algo_premul), "%s", weft_info_last_algorithm(comm));
	for (int i = 0; i < 3; i++)
		if (out[i] != 2 * 1 * (i + 1) + 3 * 2 * (i + 1)) {
			r->rc = -EBADMSG;
			snprintf(r->where, sizeof(r->where), "pre-multiplied sum element %d is %d", i, out[i]);
			goto out;
		}
out:
	if (r->rc && comm)
		weft_comm_abort(comm);
	weft_conn_close(conn);
	weft_rsem_release(rsem);
	weft_sem_destroy(sem);
	weft_rmem_release(rmem);
	weft_mem_deregister(mem);
	weft_comm_destroy(comm);
	free(buf);
	return NULL;
}

static char *conf_dir;

static void use_plugins(const char *rules)
{
	const char *dir = getenv("WEFT_TEST_ABI02_DIR");
	ck_assert_msg(dir && *dir, "WEFT_TEST_ABI02_DIR is not set");
	ck_assert_int_eq(setenv("WEFT_PLUGIN_PATH", dir, 1), 0);
	conf_dir = wt_mkdtemp("abi");
	ck_assert_ptr_nonnull(conf_dir);
	char *conf = wt_write_file(conf_dir, "weft.conf", rules);
	ck_assert_ptr_nonnull(conf);
	ck_assert_int_eq(setenv("WEFT_CONFIG", conf, 1), 0);
	free(conf);
}

static void run_two(struct ab_run r[2])
{
	ck_assert_int_eq(weft_get_unique_id(&r[0].id), 0);
	r[1].id = r[0].id;
	r[1].rank = 1;
	ck_assert_int_eq(wt_run_threads(2, rank_main, r, sizeof(r[0])), 0);
}

START_TEST(loads_as_0_2)
{
	use_plugins("");
	ck_assert_int_eq(weft_info_load(), 0);
	struct weft_info_plugin ents[64];
	int n = weft_info_plugins(ents, 64), found = 0;
	ck_assert_int_le(n, 64);
	for (int i = 0; i < n; i++) {
		const struct weft_info_plugin *e = &ents[i];
		if (!e->name || (strcmp(e->name, "skeleton") != 0 && strcmp(e->name, "abi02") != 0))
			continue;
		ck_assert_msg(e->state == WEFT_INFO_LOADED, "%s: not loaded: %s", e->name, e->reason ? e->reason : "?");
		ck_assert_msg(e->abi_major == 0 && e->abi_minor == 2, "%s: ABI %u.%u, built for 0.2", e->name,
			      e->abi_major, e->abi_minor);
		found++;
	}
	ck_assert_int_eq(found, 2);
}
END_TEST

START_TEST(run_on_this_core)
{
	use_plugins("[algorithm]\nprefer abi02/allreduce-gather\n");
	struct ab_run r[2];
	memset(r, 0, sizeof(r));
	run_two(r);
	for (int i = 0; i < 2; i++) {
		ck_assert_msg(r[i].rc == 0, "rank %d: %s: %s", i, r[i].where, weft_strerror(r[i].rc));
		ck_assert_str_eq(r[i].algo_sum, "abi02/allreduce-gather");
		ck_assert_msg(strncmp(r[i].algo_premul, "algo-host/", 10) == 0,
			      "the pre-multiplied sum ran on %s, not on algo-host", r[i].algo_premul);
	}
	wt_rmdir(conf_dir);
	free(conf_dir);
}
END_TEST

START_TEST(premul_never_reaches_0_2)
{
	/* Required, the 0.2 algorithm is the only candidate: the call fails
	 * instead of handing it WEFT_PREMUL_SUM. */
	use_plugins("[algorithm]\nrequire abi02/allreduce-gather when coll=allreduce\n");
	struct weft_unique_id id;
	ck_assert_int_eq(weft_get_unique_id(&id), 0);
	weft_comm_t *comm = NULL;
	ck_assert_int_eq(weft_comm_create(&id, 1, 0, &comm), 0);
	int32_t v = 5, out = 0, s = 3;
	ck_assert_int_eq(weft_allreduce(&v, &out, 1, WEFT_INT32, WEFT_SUM, comm, NULL), 0);
	ck_assert_int_eq(out, 5);
	ck_assert_int_eq(weft_allreduce_premul(&v, &out, 1, WEFT_INT32, &s, WEFT_MEM_HOST, comm, NULL), -ENOTSUP);
	ck_assert_int_eq(out, 5);
	ck_assert_int_eq(weft_comm_destroy(comm), 0);
	wt_rmdir(conf_dir);
	free(conf_dir);
}
END_TEST

int main(void)
{
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	Suite *s = suite_create("abi");
	TCase *tc = tcase_create("abi02");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, loads_as_0_2);
	tcase_add_test(tc, run_on_this_core);
	tcase_add_test(tc, premul_never_reaches_0_2);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
