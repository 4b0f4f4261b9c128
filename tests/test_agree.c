/* SPDX-License-Identifier: Apache-2.0 */
/* Calls that disagree across ranks: two forked ranks make a call that differs
 * in one field (count, type, operation, root, collective, send/recv size) or
 * one rank skips a call. Each must return -WEFT_ERR_MISMATCH on both ranks
 * within 2 s, never success with wrong data and never a hang, and the
 * communicator stays failed. A rank that waits on no peer in the call (a
 * broadcast root, a pure sender) has no wrong data to return: its call may
 * succeed, and then its next call fails within the same 2 s. A rank that destroys the communicator while its
 * peer waits in a call makes that call fail with -WEFT_ERR_PEER, and the
 * destroy returns within 10 s. Also: with [core] check_calls = 0 a
 * disagreeing call is not caught (the check is what catches it). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <weft/weft.h>

#include "testlib.h"

static struct weft_unique_id g_id;

enum kase {
	K_COUNT,    /* 1,000 against 2,000 elements */
	K_F32_I32,  /* float32 against int32 */
	K_F32_F64,  /* float32 against float64 */
	K_SUM_MAX,  /* sum against max */
	K_ROOT,     /* broadcast from root 0 against root 1 */
	K_P2P,      /* 1,000 bytes sent, 500 expected */
	K_SIZE,     /* 1,000 against 524,288 elements */
	K_COLL,     /* allreduce against allgather */
	K_SKIP,     /* rank 1 skips an allreduce */
	K_NKASE
};

static const char *const kase_name[] = {"count 1000/2000",  "float32/int32", "float32/float64",
					"sum/max",          "roots 0/1",     "p2p 1000/500 bytes",
					"1000/524288 elems", "allreduce/allgather", "skipped call"};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define BIG (524288u)

/* The call this rank makes for the case (rank 0 the reference shape). */
static int disagree(enum kase k, int rank, weft_comm_t *comm, void *a, void *b)
{
	int r1 = rank == 1;
	switch (k) {
	case K_COUNT:
		return weft_allreduce(a, b, r1 ? 2000 : 1000, WEFT_FLOAT32, WEFT_SUM, comm, NULL);
	case K_F32_I32:
		return weft_allreduce(a, b, 1000, r1 ? WEFT_INT32 : WEFT_FLOAT32, WEFT_SUM, comm, NULL);
	case K_F32_F64:
		return weft_allreduce(a, b, 1000, r1 ? WEFT_FLOAT64 : WEFT_FLOAT32, WEFT_SUM, comm, NULL);
	case K_SUM_MAX:
		return weft_allreduce(a, b, 1000, WEFT_FLOAT32, r1 ? WEFT_MAX : WEFT_SUM, comm, NULL);
	case K_ROOT:
		return weft_broadcast(a, a, 1000, WEFT_FLOAT32, r1, comm, NULL);
	case K_P2P:
		if (rank == 0)
			return weft_send(a, 1000, WEFT_UINT8, 1, comm, NULL);
		return weft_recv(b, 500, WEFT_UINT8, 0, comm, NULL);
	case K_SIZE:
		return weft_allreduce(a, b, r1 ? BIG : 1000, WEFT_FLOAT32, WEFT_SUM, comm, NULL);
	case K_COLL:
		if (r1)
			return weft_allgather(a, b, 1000, WEFT_FLOAT32, comm, NULL);
		return weft_allreduce(a, b, 1000, WEFT_FLOAT32, WEFT_SUM, comm, NULL);
	case K_SKIP: {
		/* Rank 0: an allreduce, then an allgather; rank 1 only the latter. */
		int rc = 0;
		if (!r1 && (rc = weft_allreduce(a, b, 1000, WEFT_FLOAT32, WEFT_SUM, comm, NULL)) != 0)
			return rc;
		return weft_allgather(a, b, 1000, WEFT_FLOAT32, comm, NULL);
	}
	default:
		return -1;
	}
}

struct job {
	enum kase k;
	int check; /* [core] check_calls */
};

static int rank_main(int rank, int nranks, void *arg)
{
	const struct job *j = arg;
	weft_comm_t *comm = NULL;
	if (!j->check)
		setenv("WEFT_CORE_CHECK_CALLS", "0", 1);
	if (weft_comm_create(&g_id, nranks, rank, &comm) != 0)
		return 2;
	size_t bytes = (size_t)BIG * 8 * 2;
	void *a = calloc(1, bytes), *b = calloc(1, bytes);
	if (!a || !b)
		return 3;
	/* One call that agrees first, so that connections are made. */
	if (weft_allreduce(a, b, 16, WEFT_FLOAT32, WEFT_SUM, comm, NULL) != 0)
		return 4;
	double t0 = now_s();
	int rc = disagree(j->k, rank, comm, a, b);
	double dt = now_s() - t0;
	if (!j->check) {
		/* Without the check, the count case completes "successfully":
		 * what the check exists to catch. The ranks part without a
		 * goodbye owed to the other's state. */
		weft_comm_abort(comm);
		weft_comm_destroy(comm);
		return rc == 0 ? 0 : 20;
	}
	int waits_on_none = j->k == K_ROOT || (j->k == K_P2P && rank == 0);
	if (rc == 0 && waits_on_none) {
		/* The next call finds the disagreement (in band, or from the
		 * peer's heartbeat). */
		rc = weft_allreduce(a, b, 16, WEFT_FLOAT32, WEFT_SUM, comm, NULL);
		dt = now_s() - t0;
	}
	if (rc != -WEFT_ERR_MISMATCH) {
		fprintf(stderr, "rank %d, %s: %d (%s) after %.2f s, not WEFT_ERR_MISMATCH\n", rank, kase_name[j->k],
			rc, weft_strerror(rc), dt);
		return 10;
	}
	if (dt > 2.0) {
		fprintf(stderr, "rank %d, %s: mismatch found after %.2f s\n", rank, kase_name[j->k], dt);
		return 11;
	}
	/* Failed for good: a later call that agrees fails too. */
	rc = weft_allreduce(a, b, 16, WEFT_FLOAT32, WEFT_SUM, comm, NULL);
	if (rc != -WEFT_ERR_MISMATCH) {
		fprintf(stderr, "rank %d, %s: the next call gave %d\n", rank, kase_name[j->k], rc);
		return 12;
	}
	/* weft_last_error speaks of the disagreement, even on a rank that
	 * learnt of it from another thread (the heartbeats). */
	char msg[600];
	if (weft_last_error(msg, sizeof(msg)) == 0 || (!strstr(msg, "disagree") && !strstr(msg, "differ"))) {
		fprintf(stderr, "rank %d, %s: weft_last_error says '%s'\n", rank, kase_name[j->k], msg);
		return 13;
	}
	weft_comm_destroy(comm);
	free(a);
	free(b);
	return 0;
}

static void run_case(enum kase k, int check)
{
	struct job j = {.k = k, .check = check};
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	int bad = wt_fork_ranks(2, rank_main, &j, 30);
	ck_assert_msg(bad == 0, "%s: %d rank(s) failed", kase_name[k], bad);
}

START_TEST(calls_disagree)
{
	run_case((enum kase)_i, 1);
}
END_TEST

START_TEST(unchecked_count_passes_silently)
{
	run_case(K_COUNT, 0);
}
END_TEST

/* Rank 1 destroys the communicator without making the call rank 0 waits in. */
static int destroy_main(int rank, int nranks, void *arg)
{
	(void)arg;
	weft_comm_t *comm = NULL;
	if (weft_comm_create(&g_id, nranks, rank, &comm) != 0)
		return 2;
	float x[16] = {0}, y[16];
	if (weft_allreduce(x, y, 16, WEFT_FLOAT32, WEFT_SUM, comm, NULL) != 0)
		return 3;
	double t0 = now_s();
	if (rank == 1) {
		usleep(200 * 1000);
		weft_comm_destroy(comm);
		if (now_s() - t0 > 10.2) {
			fprintf(stderr, "rank 1: destroy took %.2f s\n", now_s() - t0);
			return 4;
		}
		return 0;
	}
	int rc = weft_allreduce(x, y, 16, WEFT_FLOAT32, WEFT_SUM, comm, NULL);
	double dt = now_s() - t0;
	weft_comm_destroy(comm);
	if (rc != -WEFT_ERR_PEER || dt > 3.0) {
		fprintf(stderr, "rank 0: %d (%s) after %.2f s, not WEFT_ERR_PEER\n", rc, weft_strerror(rc), dt);
		return 5;
	}
	return 0;
}

START_TEST(destroy_while_peer_waits)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, destroy_main, NULL, 30), 0);
}
END_TEST

int main(void)
{
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 1);
	setenv("WEFT_CORE_PLUGINS", "shm,algo-host", 1);
	setenv("WEFT_CORE_HEARTBEAT_INTERVAL", "0.2", 1);
	setenv("WEFT_CORE_PEER_TIMEOUT", "20", 1);
	Suite *s = suite_create("agree");
	TCase *tc = tcase_create("agree");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, calls_disagree, 0, K_NKASE);
	tcase_add_test(tc, unchecked_count_passes_silently);
	tcase_add_test(tc, destroy_while_peer_waits);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
