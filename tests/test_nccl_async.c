/* SPDX-License-Identifier: Apache-2.0 */
/* libweft_nccl's non-blocking communicators (ncclConfig_t.blocking = 0), in
 * forked ranks over ofi on loopback: an init that returns ncclInProgress at
 * once while its peer is late (the 2 s delay is the case under test, not a
 * synchronization), ncclCommGetAsyncError turning from ncclInProgress to
 * ncclSuccess, a collective on a comm still initializing that waits and
 * succeeds, the same through a group, an abort during the init, and a
 * non-blocking split. */
#define _GNU_SOURCE
#include <dirent.h>
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

static ncclUniqueId g_id;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Polls ncclCommGetAsyncError until it is no longer ncclInProgress (or
 * deadline_s passes): the last answer, and in *polls how many said
 * ncclInProgress. */
static ncclResult_t poll_ready(ncclComm_t c, double deadline_s, int *polls)
{
	ncclResult_t a = ncclInProgress;
	double end = now_s() + deadline_s;
	*polls = 0;
	while (now_s() < end) {
		if (ncclCommGetAsyncError(c, &a) != ncclSuccess)
			return ncclInternalError;
		if (a != ncclInProgress)
			return a;
		++*polls;
		struct timespec ts = {0, 2000000}; /* between polls, not a synchronization */
		nanosleep(&ts, NULL);
	}
	return a;
}

/* A checked allreduce: rank r adds r + 1 to element i's i. */
static int check_allreduce(int rank, int n, ncclComm_t c)
{
	enum { C = 1031 };
	static int32_t in[C], out[C];
	for (int i = 0; i < C; i++)
		in[i] = i + rank + 1;
	NOK(ncclAllReduce(in, out, C, ncclInt32, ncclSum, c, NULL));
	for (int i = 0; i < C; i++)
		RCHECK(out[i] == n * i + n * (n + 1) / 2, "element %d is %d, want %d", i, out[i], n * i + n * (n + 1) / 2);
	return 0;
}

/* ------------------------------------------------------ a late peer */

static int late_peer_rank(int rank, int n, void *arg)
{
	(void)arg;
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	ncclComm_t c = NULL;
	ncclResult_t a = ncclSuccess;
	if (rank == 0) {
		double t0 = now_s();
		ncclResult_t r = ncclCommInitRankConfig(&c, n, g_id, rank, &cfg);
		double dt = now_s() - t0;
		RCHECK(r == ncclInProgress, "non-blocking init returned %d (%s), want ncclInProgress", (int)r,
		       ncclGetErrorString(r));
		RCHECK(dt < 0.1, "non-blocking init took %.3f s while rank 1 had not called init", dt);
		RCHECK(c != NULL, "non-blocking init gave no comm");
		NOK(ncclCommGetAsyncError(c, &a));
		RCHECK(a == ncclInProgress, "async error %d while rank 1 has not arrived", (int)a);
		/* A collective on the comm still initializing waits, then runs. */
		if (check_allreduce(rank, n, c))
			return 1;
		NOK(ncclCommGetAsyncError(c, &a));
		RCHECK(a == ncclSuccess, "async error %d after the rendezvous", (int)a);
	} else {
		/* The delay the case is about: rank 0 inits, rank 1 comes 2 s later. */
		sleep(2);
		/* This one goes through a group, which ends at once as well. */
		NOK(ncclGroupStart());
		NOK(ncclCommInitRankConfig(&c, n, g_id, rank, &cfg));
		double t0 = now_s();
		ncclResult_t r = ncclGroupEnd();
		RCHECK(r == ncclInProgress || r == ncclSuccess, "ncclGroupEnd of a non-blocking init returned %d (%s)",
		       (int)r, ncclGetErrorString(r));
		RCHECK(now_s() - t0 < 0.1 || r == ncclSuccess, "ncclGroupEnd waited %.3f s", now_s() - t0);
		int polls = 0;
		a = poll_ready(c, 20, &polls);
		RCHECK(a == ncclSuccess, "async error went to %d (%s), want ncclSuccess; last error: %s", (int)a,
		       ncclGetErrorString(a), ncclGetLastError(NULL));
		RCHECK(r == ncclSuccess || polls > 0, "ncclGroupEnd said ncclInProgress but no poll did");
		int cnt = 0, me = -1;
		NOK(ncclCommCount(c, &cnt));
		NOK(ncclCommUserRank(c, &me));
		RCHECK(cnt == n && me == rank, "count %d rank %d", cnt, me);
		if (check_allreduce(rank, n, c))
			return 1;
	}
	NOK(ncclCommDestroy(c));
	return 0;
}

START_TEST(init_late_peer)
{
	ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
	int bad = wt_fork_ranks(2, late_peer_rank, NULL, JOB_TIMEOUT);
	ck_assert_msg(bad == 0, "%d of 2 ranks failed", bad);
}
END_TEST

/* ------------------------------------------------- abort during init */

static int count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Rank 0 aborts its init while rank 1 has not called its own; then rank 1
 * comes (told through a pipe), meets rank 0's init, which ends by tearing
 * its comm down, and sees the comm fail rather than hang. */
static int abort_rank(int rank, int n, void *arg)
{
	int *go = arg;
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	ncclComm_t c = NULL;
	if (rank == 0) {
		close(go[0]);
		int before = count_threads();
		RCHECK(ncclCommInitRankConfig(&c, n, g_id, rank, &cfg) == ncclInProgress, "init did not say in progress");
		RCHECK(count_threads() > before, "no thread runs the init");
		double t0 = now_s();
		NOK(ncclCommAbort(c));
		double dt = now_s() - t0;
		RCHECK(dt < 1.0, "ncclCommAbort during the init took %.3f s", dt);
		char one = 1;
		RCHECK(write(go[1], &one, 1) == 1, "cannot tell rank 1 to come");
		close(go[1]);
		/* The init ends once rank 1 arrives, and takes its threads with it. */
		double end = now_s() + 20;
		int now = count_threads();
		while (now > before && now_s() < end) {
			struct timespec ts = {0, 5000000}; /* between polls, not a synchronization */
			nanosleep(&ts, NULL);
			now = count_threads();
		}
		RCHECK(now <= before, "%d threads run 20 s after the abort, %d before the init", now, before);
		return 0;
	}
	close(go[1]);
	char one = 0;
	RCHECK(read(go[0], &one, 1) == 1, "rank 0 never said to come");
	close(go[0]);
	ncclResult_t r = ncclCommInitRankConfig(&c, n, g_id, rank, &cfg);
	RCHECK(r == ncclInProgress, "init returned %d", (int)r);
	int polls = 0;
	ncclResult_t a = poll_ready(c, 20, &polls);
	RCHECK(a != ncclInProgress, "the init never ended");
	/* Rank 0 left: the init failed, or the comm fails at its first call. */
	if (a == ncclSuccess) {
		int32_t x = 1, y = 0;
		r = ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, c, NULL);
		RCHECK(r != ncclSuccess, "an allreduce with an aborted peer succeeded (%d)", y);
	}
	NOK(ncclCommAbort(c));
	return 0;
}

START_TEST(abort_during_init)
{
	ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
	int go[2];
	ck_assert_int_eq(pipe(go), 0);
	int bad = wt_fork_ranks(2, abort_rank, go, JOB_TIMEOUT);
	close(go[0]);
	close(go[1]);
	ck_assert_msg(bad == 0, "%d of 2 ranks failed", bad);
}
END_TEST

/* ------------------------------------------------- non-blocking split */

static int split_rank(int rank, int n, void *arg)
{
	(void)arg;
	ncclComm_t parent = NULL, child = NULL, none = NULL;
	NOK(ncclCommInitRank(&parent, n, g_id, rank));
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	/* Ranks 0 and 2 of 3 form the child, in reverse order (key); rank 1
	 * takes no color. */
	ncclResult_t r = ncclCommSplit(parent, rank == 1 ? NCCL_SPLIT_NOCOLOR : 7, -rank, rank == 1 ? &none : &child,
				       &cfg);
	if (rank == 1) {
		RCHECK(r == ncclSuccess && none == NULL, "a non-blocking split without color gave %d and %p", (int)r,
		       (void *)none);
	} else {
		RCHECK(r == ncclInProgress || r == ncclSuccess, "non-blocking split returned %d (%s)", (int)r,
		       ncclGetErrorString(r));
		RCHECK(child != NULL, "non-blocking split gave no comm");
		int polls = 0;
		ncclResult_t a = poll_ready(child, 20, &polls);
		RCHECK(a == ncclSuccess, "the split's comm went to %d (%s); last error: %s", (int)a,
		       ncclGetErrorString(a), ncclGetLastError(NULL));
		int cnt = 0, me = -1;
		NOK(ncclCommCount(child, &cnt));
		NOK(ncclCommUserRank(child, &me));
		RCHECK(cnt == 2 && me == (rank == 0 ? 1 : 0), "child: count %d rank %d", cnt, me);
		if (check_allreduce(me, 2, child))
			return 1;
		NOK(ncclCommDestroy(child));
	}
	/* The parent, busy during the split, serves again. */
	if (check_allreduce(rank, n, parent))
		return 1;
	NOK(ncclCommDestroy(parent));
	return 0;
}

START_TEST(split_nonblocking)
{
	ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
	int bad = wt_fork_ranks(3, split_rank, NULL, JOB_TIMEOUT);
	ck_assert_msg(bad == 0, "%d of 3 ranks failed", bad);
}
END_TEST

int main(void)
{
	setenv("WEFT_CORE_PEER_TIMEOUT", "5", 0);
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "30", 0);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	Suite *s = suite_create("nccl_async");
	TCase *mp = tcase_create("mp");
	tcase_set_timeout(mp, JOB_TIMEOUT + 30);
	tcase_add_test(mp, init_late_peer);
	tcase_add_test(mp, abort_during_init);
	tcase_add_test(mp, split_nonblocking);
	suite_add_tcase(s, mp);
	return wt_run_suite(s);
}
