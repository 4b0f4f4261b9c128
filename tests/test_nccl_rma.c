/* SPDX-License-Identifier: Apache-2.0 */
/* libweft_nccl's windows and one-sided calls on host buffers, in forked
 * ranks: ncclCommWindowRegister (windows of a different size on each rank),
 * ncclWinGetUserPtr, ncclPutSignal into every rank's window (itself too) from
 * a window and from a plain buffer, ncclWaitSignal on every rank, a barrier of
 * ncclSignal in a group, counts that accumulate, the refusals that protect a
 * window (past its end, a deregistered one), and ncclCommWindowDeregister;
 * the same queued in groups for two ranks one thread drives. Also
 * ncclCommRevoke of a comm whose allreduce waits, and a shrink after it.
 * The transport is the one WEFT_TRANSPORT_RULES requires (tests/nccl.cmake
 * runs this for shm, ofi and ucx). Also: calls on a non-blocking comm still
 * initializing, a window, a group of collectives and a put, which wait and
 * then succeed. And allreduce in windows (the core's windows), in place and
 * out of place, and ranks whose buffers lie at different offsets, or one
 * outside, failing on every rank. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "nccl_check.h"
#include "testlib.h"

#define JOB_TIMEOUT 60
#define BLK 1000 /* int32 elements each rank puts into each window */

static ncclUniqueId g_id;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int32_t val(int from, int to, int i)
{
	return from * 1000000 + to * 10000 + i;
}

static ncclWaitSignalDesc_t desc(int peer, int n)
{
	return (ncclWaitSignalDesc_t){.opCnt = n, .peer = peer, .sigIdx = 0, .ctx = 0};
}

static int rma_rank(int rank, int n, void *arg)
{
	(void)arg;
	ncclComm_t comm = NULL;
	NOK(ncclCommInitRank(&comm, n, g_id, rank));
	/* Rank r's window holds a block from every rank, and r spare blocks:
	 * the sizes differ, which NCCL allows. */
	size_t wbytes = (size_t)(n + rank) * BLK * sizeof(int32_t);
	int32_t *wbuf = calloc(1, wbytes), *sbuf = calloc((size_t)n, BLK * sizeof(int32_t)),
		*plain = calloc(BLK, sizeof(int32_t));
	RCHECK(wbuf && sbuf && plain, "out of memory");
	ncclWindow_t win = NULL, swin = NULL;
	NOK(ncclCommWindowRegister(comm, wbuf, wbytes, &win, NCCL_WIN_COLL_SYMMETRIC));
	NOK(ncclCommWindowRegister(comm, sbuf, (size_t)n * BLK * sizeof(int32_t), &swin, NCCL_WIN_DEFAULT));
	void *user = NULL;
	NOK(ncclWinGetUserPtr(comm, win, &user));
	RCHECK(user == wbuf, "ncclWinGetUserPtr gave %p, not %p", user, (void *)wbuf);

	/* Every rank writes block `rank` of every rank's window (its own too),
	 * from its send window for even peers and from a plain buffer for odd
	 * ones (registered for the call), then waits for everyone's. */
	for (int p = 0; p < n; p++) {
		int32_t *src = p % 2 ? plain : sbuf + (size_t)p * BLK;
		for (int i = 0; i < BLK; i++)
			src[i] = val(rank, p, i);
		NOK(ncclPutSignal(src, BLK, ncclInt32, p, win, (size_t)rank * BLK * sizeof(int32_t), 0, 0, 0, comm,
				  NULL));
	}
	ncclWaitSignalDesc_t all[16];
	for (int p = 0; p < n; p++)
		all[p] = desc(p, 1);
	NOK(ncclWaitSignal(n, all, comm, NULL));
	for (int p = 0; p < n; p++)
		for (int i = 0; i < BLK; i++)
			RCHECK(wbuf[(size_t)p * BLK + i] == val(p, rank, i), "block of rank %d [%d] = %d, want %d", p,
			       i, wbuf[(size_t)p * BLK + i], val(p, rank, i));
	for (size_t i = (size_t)n * BLK; i < wbytes / sizeof(int32_t); i++)
		RCHECK(wbuf[i] == 0, "a spare element [%zu] was written: %d", i, wbuf[i]);

	/* A barrier of signals in a group (NCCL's example), twice: the second
	 * wait needs the second round, counts accumulate. */
	for (int round = 0; round < 2; round++) {
		NOK(ncclGroupStart());
		for (int p = 0; p < n; p++)
			NOK(ncclSignal(p, 0, 0, 0, comm, NULL));
		NOK(ncclGroupEnd());
		NOK(ncclWaitSignal(n, all, comm, NULL));
	}
	/* Three signals to the next rank, awaited as one count of 3; a put
	 * into the spare room of the last rank's window (its size, not ours). */
	int next = (rank + 1) % n, prev = (rank + n - 1) % n;
	for (int k = 0; k < 3; k++)
		NOK(ncclSignal(next, 0, 0, 0, comm, NULL));
	ncclWaitSignalDesc_t three = desc(prev, 3);
	NOK(ncclWaitSignal(1, &three, comm, NULL));
	if (rank == 0) {
		/* Rank n-1's window has n-1 spare blocks; rank 0's has none. */
		for (int i = 0; i < BLK; i++)
			plain[i] = -i;
		size_t spare = (size_t)(2 * n - 2) * BLK * sizeof(int32_t);
		NOK(ncclPutSignal(plain, BLK, ncclInt32, n - 1, win, spare, 0, 0, 0, comm, NULL));
		RCHECK(ncclPutSignal(plain, BLK, ncclInt32, 1 % n, win, spare + (size_t)BLK * sizeof(int32_t) * (n > 2),
				     0, 0, 0, comm, NULL) == ncclInvalidArgument,
		       "a put past rank 1's window was taken");
		RCHECK(strstr(ncclGetLastError(NULL), "run past"), "message: %s", ncclGetLastError(NULL));
	}
	if (rank == n - 1) {
		ncclWaitSignalDesc_t one = desc(0, 1);
		NOK(ncclWaitSignal(1, &one, comm, NULL));
		size_t at = (size_t)(2 * n - 2) * BLK;
		for (int i = 0; i < BLK; i++)
			RCHECK(wbuf[at + i] == -i, "spare block [%d] = %d", i, wbuf[at + i]);
	}
	/* Everyone is done reading and writing before the windows go. */
	int32_t one = 1, sum = 0;
	NOK(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, comm, NULL));
	RCHECK(sum == n, "allreduce = %d", sum);
	NOK(ncclCommWindowDeregister(comm, swin));
	NOK(ncclCommWindowDeregister(comm, win));
	RCHECK(ncclPutSignal(plain, 1, ncclInt32, next, win, 0, 0, 0, 0, comm, NULL) == ncclInvalidArgument,
	       "a put into a deregistered window was taken");
	NOK(ncclCommDestroy(comm));
	free(wbuf);
	free(sbuf);
	free(plain);
	return 0;
}

START_TEST(windows_and_signals)
{
	int n = 3;
	ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
	int bad = wt_fork_ranks(n, rma_rank, NULL, JOB_TIMEOUT);
	ck_assert_msg(bad == 0, "%d of %d ranks failed", bad, n);
}
END_TEST

/* ------------------------------------------- several ranks, one thread */

/* Two ranks of one process driven by one thread (ncclCommInitAll): the
 * collective registration and the calls are queued in groups and issued at
 * their end, one thread per rank, as NCCL does. The wait's descriptors live
 * in a block that is gone when the group ends. */
START_TEST(one_thread_two_ranks)
{
	ncclComm_t c[2] = {NULL, NULL};
	ck_assert_int_eq(ncclCommInitAll(c, 2, NULL), ncclSuccess);
	int32_t buf[2][8] = {{0}}, src[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};
	ncclWindow_t w[2] = {NULL, NULL};
	ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
	for (int r = 0; r < 2; r++)
		ck_assert_int_eq(ncclCommWindowRegister(c[r], buf[r], sizeof(buf[r]), &w[r], NCCL_WIN_DEFAULT),
				 ncclSuccess);
	/* A signal queued after the registration that sets signals up. */
	for (int r = 0; r < 2; r++)
		ck_assert_int_eq(ncclSignal(1 - r, 0, 0, 0, c[r], NULL), ncclSuccess);
	ck_assert_ptr_null(w[0]); /* filled in at the group's end, as NCCL allows */
	ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
	ck_assert_ptr_nonnull(w[0]);
	ck_assert_ptr_nonnull(w[1]);
	ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
	for (int r = 0; r < 2; r++) {
		ncclWaitSignalDesc_t d = desc(1 - r, 2); /* the signal and the put's */
		ck_assert_int_eq(ncclPutSignal(src[r], 4, ncclInt32, 1 - r, w[r], 4 * sizeof(int32_t) * (size_t)r, 0, 0,
					       0, c[r], NULL),
				 ncclSuccess);
		ck_assert_int_eq(ncclWaitSignal(1, &d, c[r], NULL), ncclSuccess);
	}
	ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(buf[1][i], src[0][i]);
		ck_assert_int_eq(buf[0][4 + i], src[1][i]);
	}
	for (int r = 0; r < 2; r++)
		ck_assert_int_eq(ncclCommWindowDeregister(c[r], w[r]), ncclSuccess);
	ck_assert_int_eq(ncclCommDestroy(c[0]), ncclSuccess);
	ck_assert_int_eq(ncclCommDestroy(c[1]), ncclSuccess);
}
END_TEST

/* --------------------------------------------------- revoke and shrink */

struct blocked {
	ncclComm_t c;
	ncclResult_t r;
	double took;
};

static void *blocked_allreduce(void *arg)
{
	struct blocked *b = arg;
	int32_t x = 1, y = 0;
	double t0 = now_s();
	b->r = ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, b->c, NULL);
	b->took = now_s() - t0;
	return NULL;
}

/* A watchdog's revoke: rank 0's allreduce waits for rank 1, which never
 * joins it; rank 0's other thread revokes the comm, and the allreduce
 * returns. Both ranks revoke, then shrink to a comm of the same ranks and
 * run a checked allreduce there. */
static int revoke_rank(int rank, int n, void *arg)
{
	(void)arg;
	ncclComm_t c = NULL, s = NULL;
	NOK(ncclCommInitRank(&c, n, g_id, rank));
	if (rank == 0) {
		struct blocked b = {.c = c, .r = ncclSuccess};
		pthread_t th;
		RCHECK(pthread_create(&th, NULL, blocked_allreduce, &b) == 0, "no thread");
		usleep(300000); /* the allreduce is waiting by then (the case under test) */
		NOK(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT));
		pthread_join(th, NULL);
		RCHECK(b.r != ncclSuccess, "the allreduce a revoke stopped succeeded");
		RCHECK(b.took < 5, "the allreduce returned %.3f s after it began", b.took);
	} else {
		NOK(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT));
	}
	int32_t x = rank + 1, y = 0;
	RCHECK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, c, NULL) == ncclInvalidUsage, "a revoked comm took a call");
	NOK(ncclCommShrink(c, NULL, 0, &s, NULL, NCCL_SHRINK_DEFAULT));
	NOK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, s, NULL));
	RCHECK(y == n * (n + 1) / 2, "allreduce on the shrunk comm = %d", y);
	NOK(ncclCommDestroy(c));
	NOK(ncclCommDestroy(s));
	return 0;
}

START_TEST(revoke_a_waiting_call)
{
	ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
	int bad = wt_fork_ranks(2, revoke_rank, NULL, JOB_TIMEOUT);
	ck_assert_msg(bad == 0, "%d of 2 ranks failed", bad);
}
END_TEST

/* ----------------------------------------- calls on a comm initializing */

/* Rank 1 inits 0.5 s after rank 0 (the case under test, not a
 * synchronization); rank 0's calls on its non-blocking comm, made at once,
 * wait for the init and succeed, also queued in a group; none of them
 * returns an error for the comm initializing. */
static int init_rank(int rank, int n, void *arg)
{
	(void)arg;
	if (rank == 1)
		usleep(500000);
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	ncclComm_t c = NULL;
	double t0 = now_s();
	ncclResult_t r = ncclCommInitRankConfig(&c, n, g_id, rank, &cfg);
	RCHECK(r == ncclInProgress || r == ncclSuccess, "init returned %d (%s)", (int)r, ncclGetErrorString(r));
	RCHECK(rank != 0 || now_s() - t0 < 0.1, "a non-blocking init took %.3f s", now_s() - t0);
	int32_t buf[64] = {0};
	ncclWindow_t win = NULL;
	r = ncclCommWindowRegister(c, buf, sizeof(buf), &win, NCCL_WIN_DEFAULT);
	RCHECK(r == ncclSuccess, "a window on an initializing comm gave %d (%s): %s", (int)r, ncclGetErrorString(r),
	       ncclGetLastError(NULL));
	int32_t x = rank + 1, y = 0, from = -1, to = rank * 10;
	NOK(ncclGroupStart());
	NOK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, c, NULL));
	NOK(ncclSend(&to, 1, ncclInt32, 1 - rank, c, NULL));
	NOK(ncclRecv(&from, 1, ncclInt32, 1 - rank, c, NULL));
	NOK(ncclPutSignal(&x, 1, ncclInt32, 1 - rank, win, (size_t)rank * sizeof(int32_t), 0, 0, 0, c, NULL));
	r = ncclGroupEnd();
	RCHECK(r == ncclSuccess, "the group gave %d (%s): %s", (int)r, ncclGetErrorString(r), ncclGetLastError(NULL));
	ncclWaitSignalDesc_t d = desc(1 - rank, 1);
	NOK(ncclWaitSignal(1, &d, c, NULL));
	RCHECK(y == 3 && from == (1 - rank) * 10 && buf[1 - rank] == 2 - rank, "allreduce %d, recv %d, put %d", y, from,
	       buf[1 - rank]);
	ncclResult_t a = ncclInProgress;
	NOK(ncclCommGetAsyncError(c, &a));
	RCHECK(a == ncclSuccess, "async error %d", (int)a);
	NOK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, c, NULL)); /* the peer's wait is over before it goes */
	NOK(ncclCommWindowDeregister(c, win));
	NOK(ncclCommDestroy(c));
	return 0;
}

START_TEST(calls_while_initializing)
{
	ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
	int bad = wt_fork_ranks(2, init_rank, NULL, JOB_TIMEOUT);
	ck_assert_msg(bad == 0, "%d of 2 ranks failed", bad);
}
END_TEST

/* ------------------------------------------- collectives in windows */

#define WCOUNT 4099 /* int32 elements per block: not a multiple of anything */

static int wcheck(int rank, const int32_t *got, int n, int k, const char *what)
{
	for (int i = 0; i < WCOUNT; i++) {
		int32_t want = 0;
		for (int r = 0; r < n; r++)
			want += wt_nccl_data(r, (size_t)i, k);
		RCHECK(got[i] == want, "%s: [%d] = %d, want %d", what, i, got[i], want);
	}
	return 0;
}

/* Allreduce out of place and in place in one window, checked; then rank 1
 * moves its in-place buffer to another offset of the window (mode 1) or out
 * of it (mode 2): every rank must fail, as NCCL requires one offset. */
static int win_coll_rank(int rank, int n, void *arg)
{
	int mode = *(const int *)arg;
	ncclComm_t comm = NULL;
	NOK(ncclCommInitRank(&comm, n, g_id, rank));
	size_t blk = (size_t)WCOUNT * sizeof(int32_t);
	int32_t *w = calloc(4, blk), *plain = calloc(1, blk);
	RCHECK(w && plain, "out of memory");
	ncclWindow_t win = NULL;
	NOK(ncclCommWindowRegister(comm, w, 4 * blk, &win, NCCL_WIN_COLL_SYMMETRIC));
	for (int i = 0; i < WCOUNT; i++) {
		w[i] = wt_nccl_data(rank, (size_t)i, 1);
		w[2 * WCOUNT + i] = wt_nccl_data(rank, (size_t)i, 2);
	}
	NOK(ncclAllReduce(w, w + WCOUNT, WCOUNT, ncclInt32, ncclSum, comm, NULL));
	if (wcheck(rank, w + WCOUNT, n, 1, "out of place in a window"))
		return 1;
	NOK(ncclAllReduce(w + 2 * WCOUNT, w + 2 * WCOUNT, WCOUNT, ncclInt32, ncclSum, comm, NULL));
	if (wcheck(rank, w + 2 * WCOUNT, n, 2, "in place in a window"))
		return 1;
	int32_t *mine = w + 2 * WCOUNT;
	if (rank == 1)
		mine = mode == 1 ? w + 3 * WCOUNT : plain;
	ncclResult_t r = ncclAllReduce(mine, mine, WCOUNT, ncclInt32, ncclSum, comm, NULL);
	if (wt_nccl_fails(rank, comm, r, mode == 1 ? "another offset on rank 1" : "rank 1 outside the window"))
		return 1;
	ncclCommAbort(comm);
	free(w);
	free(plain);
	return 0;
}

START_TEST(collectives_in_windows)
{
	int n = 3, mode = _i + 1;
	ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
	int bad = wt_fork_ranks(n, win_coll_rank, &mode, JOB_TIMEOUT);
	ck_assert_msg(bad == 0, "%d of %d ranks failed", bad, n);
}
END_TEST

int main(int argc, char **argv)
{
	setenv("WEFT_CORE_PEER_TIMEOUT", "5", 0);
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "30", 0);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	Suite *s = suite_create("nccl_rma");
	TCase *mp = tcase_create("mp");
	tcase_set_timeout(mp, JOB_TIMEOUT + 30);
	tcase_add_test(mp, windows_and_signals);
	/* Once is enough: it is about the comm, not the transport. */
	if (argc < 2 || strcmp(argv[1], "--rma-only") != 0) {
		tcase_add_test(mp, one_thread_two_ranks);
		tcase_add_test(mp, revoke_a_waiting_call);
		tcase_add_test(mp, calls_while_initializing);
		tcase_add_loop_test(mp, collectives_in_windows, 0, 2);
	}
	suite_add_tcase(s, mp);
	return wt_run_suite(s);
}
