/* SPDX-License-Identifier: Apache-2.0 */
/* libweft_nccl's ncclCommShrink and ncclCommGrow in forked ranks over ofi on
 * loopback: 4 ranks of which rank 2 is killed during an allreduce, the three
 * others shrinking the failed comm (NCCL_SHRINK_ABORT) and checking an
 * allreduce on the new one; a shrink of a healthy comm (NCCL_SHRINK_DEFAULT)
 * that leaves the parent usable; exclude lists that differ or name bad ranks,
 * refused on every rank with the reason logged; 2 ranks grown to 3 with the
 * id of ncclCommGetUniqueId, which serves once. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nccl.h>

#include "nccl_check.h"
#include "testlib.h"

#define JOB_TIMEOUT 60

static ncclUniqueId g_id;

/* r is ncclInvalidArgument and the last error names the reason. */
#define NREFUSED(call, needle)                                                                           \
	do {                                                                                             \
		ncclResult_t r_ = (call);                                                                \
		const char *e_ = ncclGetLastError(NULL);                                                 \
		RCHECK(r_ == ncclInvalidArgument, "%s returned %d (%s), want ncclInvalidArgument", #call, \
		       (int)r_, ncclGetErrorString(r_));                                                  \
		RCHECK(e_ && strstr(e_, needle), "%s: the last error '%s' lacks '%s'", #call,             \
		       e_ ? e_ : "(none)", needle);                                                       \
	} while (0)

/* A checked allreduce on c, of which this is rank me of n: the contribution
 * of each rank is tagged with `who`, its rank in the job that started it
 * (so a survivor's contribution shows as its own and not another's). */
static int check_allreduce(int rank, int me, int n, const int *who, ncclComm_t c)
{
	enum { C = 2053 };
	static int64_t in[C], out[C];
	for (int i = 0; i < C; i++)
		in[i] = (int64_t)i * 1000 + (1 << who[me]);
	NOK(ncclAllReduce(in, out, C, ncclInt64, ncclSum, c, NULL));
	int64_t mask = 0;
	for (int k = 0; k < n; k++)
		mask += 1 << who[k];
	for (int i = 0; i < C; i++)
		RCHECK(out[i] == (int64_t)i * 1000 * n + mask, "element %d is %lld, want %lld", i, (long long)out[i],
		       (long long)((int64_t)i * 1000 * n + mask));
	return 0;
}

static int check_comm(int rank, ncclComm_t c, int want_n, int want_rank)
{
	int n = 0, me = -1;
	NOK(ncclCommCount(c, &n));
	NOK(ncclCommUserRank(c, &me));
	RCHECK(n == want_n && me == want_rank, "count %d rank %d, want %d and %d", n, me, want_n, want_rank);
	return 0;
}

/* ------------------------------------------------- shrink after a death */

static volatile int g_in_call;

static void *killer(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&g_in_call, __ATOMIC_ACQUIRE))
		sched_yield();
	raise(SIGKILL);
	return NULL;
}

static int death_rank(int rank, int n, void *arg)
{
	(void)arg;
	ncclComm_t comm = NULL, nc = NULL;
	NOK(ncclCommInitRank(&comm, n, g_id, rank));
	const int all[4] = {0, 1, 2, 3};
	if (check_allreduce(rank, rank, n, all, comm))
		return 1;
	/* A large allreduce, during which rank 2 dies. */
	enum { BIG = 1 << 20 };
	float *big = calloc(BIG, sizeof(float));
	RCHECK(big != NULL, "out of memory");
	if (rank == 2) {
		pthread_t th;
		RCHECK(pthread_create(&th, NULL, killer, NULL) == 0, "no killer thread");
		__atomic_store_n(&g_in_call, 1, __ATOMIC_RELEASE);
	}
	ncclResult_t r = ncclAllReduce(big, big, BIG, ncclFloat32, ncclSum, comm, NULL);
	RCHECK(rank != 2, "rank 2 outlived its SIGKILL (allreduce returned %d)", (int)r);
	free(big);
	/* A list that keeps the dead rank is refused on every survivor. */
	RCHECK(ncclCommShrink(comm, NULL, 0, &nc, NULL, NCCL_SHRINK_ABORT) == ncclRemoteError && nc == NULL,
	       "a shrink keeping the dead rank did not fail as a remote error");
	RCHECK(strstr(ncclGetLastError(NULL), "rank 2, which the exclude list keeps, has died"), "last error '%s'",
	       ncclGetLastError(NULL));
	/* The survivors leave out rank 2, whether their allreduce saw the death
	 * or finished first, through a rendezvous of their own. */
	int ex[1] = {2};
	NOK(ncclCommShrink(comm, ex, 1, &nc, NULL, NCCL_SHRINK_ABORT));
	int me = rank < 2 ? rank : rank - 1;
	if (check_comm(rank, nc, 3, me))
		return 1;
	const int who[3] = {0, 1, 3};
	if (check_allreduce(rank, me, 3, who, nc) || check_allreduce(rank, me, 3, who, nc))
		return 1;
	/* The parent was aborted by the shrink: it refuses, then goes. */
	int32_t x = 1, y = 0;
	RCHECK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL) != ncclSuccess,
	       "the aborted parent still runs an allreduce");
	NOK(ncclCommAbort(comm));
	NOK(ncclCommDestroy(nc));
	return 0;
}

START_TEST(shrink_after_death)
{
	ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
	int st[4];
	ck_assert_int_eq(wt_fork_ranks_status(4, death_rank, NULL, JOB_TIMEOUT, st), 0);
	for (int r = 0; r < 4; r++)
		if (r == 2)
			ck_assert_msg(WIFSIGNALED(st[r]) && WTERMSIG(st[r]) == SIGKILL, "rank 2 status 0x%x", st[r]);
		else
			ck_assert_msg(WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "rank %d status 0x%x", r, st[r]);
}
END_TEST

/* ------------------------------------- a healthy shrink, and refusals */

static int healthy_rank(int rank, int n, void *arg)
{
	(void)arg;
	ncclComm_t comm = NULL, nc = NULL;
	NOK(ncclCommInitRank(&comm, n, g_id, rank));
	const int all[3] = {0, 1, 2};
	/* Refused on every rank: lists that differ (rank 2 leaves out rank 0,
	 * which calls), then lists each bad on its own rank, then a bad flag. */
	int none[1] = {0}, zero[1] = {0};
	NREFUSED(ncclCommShrink(comm, rank == 2 ? zero : none, rank == 2 ? 1 : 0, &nc, NULL, 0), "differ");
	RCHECK(nc == NULL, "a refused shrink left a comm");
	int bad0[1] = {7}, bad1[1] = {1}, bad2[2] = {1, 1};
	if (rank == 0)
		NREFUSED(ncclCommShrink(comm, bad0, 1, &nc, NULL, 0), "is not a rank of the communicator");
	else if (rank == 1)
		NREFUSED(ncclCommShrink(comm, bad1, 1, &nc, NULL, 0), "is the calling rank");
	else
		NREFUSED(ncclCommShrink(comm, bad2, 2, &nc, NULL, 0), "is listed twice");
	NREFUSED(ncclCommShrink(comm, NULL, 0, &nc, NULL, 5), "shrinkFlags");
	if (rank != 1) {
		/* Then a good one on the same parent, where what the refused ones
		 * left unread is skipped: ranks 0 and 2 leave out rank 1, which
		 * lives and does not call. */
		int ex[1] = {1};
		NOK(ncclCommShrink(comm, ex, 1, &nc, NULL, NCCL_SHRINK_DEFAULT));
		int me = rank / 2;
		const int who[2] = {0, 2};
		if (check_comm(rank, nc, 2, me) || check_allreduce(rank, me, 2, who, nc))
			return 1;
		NOK(ncclCommDestroy(nc));
	}
	/* NCCL_SHRINK_DEFAULT left the parent usable, with rank 1 in it. */
	if (check_allreduce(rank, rank, n, all, comm))
		return 1;
	NOK(ncclCommDestroy(comm));
	return 0;
}

START_TEST(shrink_healthy_and_refusals)
{
	ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
	int bad = wt_fork_ranks(3, healthy_rank, NULL, JOB_TIMEOUT);
	ck_assert_msg(bad == 0, "%d of 3 ranks failed", bad);
}
END_TEST

/* ----------------------------------------------------------- grow 2 -> 3 */

/* Ranks 0 and 1 make a comm; rank 0 (the coordinator) makes a grow id and
 * hands it through a pipe to rank 2, which joins. */
static int grow_rank(int rank, int n, void *arg)
{
	int *pipefd = arg;
	ncclComm_t parent = NULL, nc = NULL;
	ncclUniqueId gid;
	const int who[3] = {0, 1, 2};
	if (rank < 2) {
		close(pipefd[0]);
		NOK(ncclCommInitRank(&parent, 2, g_id, rank));
		if (check_allreduce(rank, rank, 2, who, parent))
			return 1;
		if (rank == 0) {
			NOK(ncclCommGetUniqueId(parent, &gid));
			RCHECK(write(pipefd[1], &gid, sizeof(gid)) == (ssize_t)sizeof(gid), "cannot hand the id over");
		}
		close(pipefd[1]);
		NOK(ncclCommGrow(parent, n, rank == 0 ? &gid : NULL, -1, &nc, NULL));
	} else {
		close(pipefd[1]);
		RCHECK(read(pipefd[0], &gid, sizeof(gid)) == (ssize_t)sizeof(gid), "no id from the coordinator");
		close(pipefd[0]);
		NOK(ncclCommGrow(NULL, n, &gid, rank, &nc, NULL));
	}
	if (check_comm(rank, nc, 3, rank) || check_allreduce(rank, rank, 3, who, nc))
		return 1;
	/* The id served once: a second use is refused, by the existing ranks
	 * together (the coordinator knows it spent it) and by a new rank at
	 * the id's rendezvous. */
	ncclComm_t again = NULL;
	if (rank < 2) {
		ncclResult_t r = ncclCommGrow(parent, n, rank == 0 ? &gid : NULL, -1, &again, NULL);
		const char *e = ncclGetLastError(NULL);
		RCHECK(r == ncclInvalidArgument && again == NULL, "a second grow with the id returned %d", (int)r);
		RCHECK(strstr(e, rank == 0 ? "served a grow already" : "refused its arguments"), "last error '%s'", e);
		if (rank == 0) {
			/* A new id may be made now, and only one at a time. */
			ncclUniqueId id2;
			NOK(ncclCommGetUniqueId(parent, &id2));
			RCHECK(ncclCommGetUniqueId(parent, &id2) == ncclInvalidUsage, "a second unused id was made");
			RCHECK(strstr(ncclGetLastError(NULL), "not been used"), "last error '%s'", ncclGetLastError(NULL));
		}
	} else {
		ncclResult_t r = ncclCommGrow(NULL, n, &gid, rank, &again, NULL);
		const char *e = ncclGetLastError(NULL);
		RCHECK(r != ncclSuccess && again == NULL, "a second join with the id succeeded");
		RCHECK(strstr(e, "served a grow already"), "last error '%s'", e);
	}
	/* The grown comm still serves (and the root of the id lived until here). */
	if (check_allreduce(rank, rank, 3, who, nc))
		return 1;
	NOK(ncclCommDestroy(nc));
	if (parent)
		NOK(ncclCommDestroy(parent));
	return 0;
}

START_TEST(grow_two_to_three)
{
	ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	int bad = wt_fork_ranks(3, grow_rank, p, JOB_TIMEOUT);
	close(p[0]);
	close(p[1]);
	ck_assert_msg(bad == 0, "%d of 3 ranks failed", bad);
}
END_TEST

int main(void)
{
	setenv("WEFT_CORE_PEER_TIMEOUT", "5", 0);
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "30", 0);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	Suite *s = suite_create("nccl_reshape");
	TCase *mp = tcase_create("mp");
	tcase_set_timeout(mp, JOB_TIMEOUT + 30);
	tcase_add_test(mp, shrink_after_death);
	tcase_add_test(mp, shrink_healthy_and_refusals);
	tcase_add_test(mp, grow_two_to_three);
	suite_add_tcase(s, mp);
	return wt_run_suite(s);
}
