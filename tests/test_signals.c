/* SPDX-License-Identifier: Apache-2.0 */
/* Signal dispositions (issue 29 item 6): the libraries that the ucx and ofi
 * plugins bring in install handlers for fatal signals and SIGHUP when they
 * load or open. The core puts back what the process had, so a rank catches
 * the signals the same program catches without weft, a crash ends it by its
 * signal and SIGHUP ends it ([core] keep_library_signal_handlers = 1 keeps the
 * libraries' handlers, the control case). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <weft/weft.h>

#include "testlib.h"

#define JOB_TIMEOUT_S 90

static struct weft_unique_id g_id;

/* A communicator of two with ucx, ofi and shm open, each proven by a
 * connection to the peer, and one checked allreduce over them. */
static int comm_all_transports(int rank, int n, weft_comm_t **out)
{
	weft_comm_t *comm = NULL;
	int rc = weft_comm_create(&g_id, n, rank, &comm);
	RCHECK(rc == 0, "weft_comm_create: %s", weft_strerror(rc));
	const char *tps[] = {"ucx", "ofi", "shm"};
	for (int i = 0; i < 3; i++) {
		weft_conn_t *c = NULL;
		rc = weft_connect(comm, 1 - rank, tps[i], &c);
		RCHECK(rc == 0, "weft_connect over %s: %s", tps[i], weft_strerror(rc));
		RCHECK(weft_conn_close(c) == 0, "weft_conn_close over %s", tps[i]);
	}
	RCHECK(wt_mapped("libucs") && wt_mapped("libfabric"), "UCX or libfabric is not mapped");
	int v = rank + 1, sum = 0;
	rc = weft_allreduce(&v, &sum, 1, WEFT_INT32, WEFT_SUM, comm, NULL);
	RCHECK(rc == 0 && sum == 3, "allreduce: rc %d sum %d", rc, sum);
	*out = comm;
	return 0;
}

/* The mask a rank had before weft equals the mask after create, a collective
 * and destroy; arg non-NULL: the libraries' handlers are kept, and the mask
 * must then differ (what the default puts back is really installed). */
static int mask_rank(int rank, int n, void *arg)
{
	unsigned long long before = wt_caught_signals();
	weft_comm_t *comm = NULL;
	if (comm_all_transports(rank, n, &comm) != 0)
		return 1;
	unsigned long long during = wt_caught_signals();
	RCHECK(weft_comm_destroy(comm) == 0, "weft_comm_destroy");
	unsigned long long after = wt_caught_signals();
	if (arg) {
		RCHECK(during != before, "with keep_library_signal_handlers = 1 no library installed a handler (%llx)",
		       before);
		return 0;
	}
	RCHECK(during == before && after == before,
	       "caught signals before weft %llx, with a communicator %llx, after destroy %llx", before, during, after);
	return 0;
}

START_TEST(mask_unchanged)
{
	unsetenv("WEFT_CORE_KEEP_LIBRARY_SIGNAL_HANDLERS");
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, mask_rank, NULL, JOB_TIMEOUT_S), 0);
}
END_TEST

START_TEST(mask_kept_on_request)
{
	setenv("WEFT_CORE_KEEP_LIBRARY_SIGNAL_HANDLERS", "1", 1);
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, mask_rank, "keep", JOB_TIMEOUT_S), 0);
	unsetenv("WEFT_CORE_KEEP_LIBRARY_SIGNAL_HANDLERS");
}
END_TEST

/* An invalid write, through a pointer the compiler cannot see through. */
static void crash(void)
{
	volatile int *volatile p = (int *)16;
	*p = 1;
}

static int crash_plain(int rank, int n, void *arg)
{
	(void)rank, (void)n, (void)arg;
	crash();
	return 0;
}

/* Rank 1 dies by *arg once both ranks are past every library's setup; rank 0
 * sees it go and exits normally. Rank 1 waits for rank 0's word, not only the
 * barrier: a peer's death fails the communicator, and rank 1 can leave the
 * barrier before rank 0 has taken rank 1's part of it. */
static int sig_after_weft(int rank, int n, void *arg)
{
	weft_comm_t *comm = NULL;
	if (comm_all_transports(rank, n, &comm) != 0)
		return 1;
	RCHECK(weft_comm_barrier(comm) == 0, "barrier");
	char x = 1;
	if (rank == 1) {
		RCHECK(weft_comm_recv(comm, 0, 2, &x, 1) == 0, "rank 0's word");
		int sig = *(const int *)arg;
		if (sig == SIGSEGV)
			crash();
		else
			raise(sig);
		return 0;
	}
	RCHECK(weft_comm_send(comm, 1, 2, &x, 1) == 0, "word to rank 1");
	int rc = weft_comm_recv(comm, 1, 1, &x, 1);
	RCHECK(rc < 0, "rank 1 answered instead of dying");
	weft_comm_destroy(comm);
	return 0;
}

static const char *status_text(int st, char *buf, size_t len)
{
	if (st == -1)
		snprintf(buf, len, "killed at the timeout");
	else if (WIFSIGNALED(st))
		snprintf(buf, len, "signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(buf, len, "exit %d", WEXITSTATUS(st));
	return buf;
}

/* A crash ends a rank as it ends the same program without weft: by SIGSEGV
 * (or, under a sanitizer, as the sanitizer's own handler ends it). */
START_TEST(segv_ends_as_without_weft)
{
	int base[2], with[2];
	char a[64], b[64];
	wt_fork_ranks_status(2, crash_plain, NULL, JOB_TIMEOUT_S, base);
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	int sig = SIGSEGV;
	wt_fork_ranks_status(2, sig_after_weft, &sig, JOB_TIMEOUT_S, with);
	ck_assert_msg(with[0] == 0, "rank 0 ended by %s", status_text(with[0], a, sizeof(a)));
	ck_assert_msg(with[1] == base[1], "rank 1 ended by %s after weft, by %s without", status_text(with[1], a, sizeof(a)),
		      status_text(base[1], b, sizeof(b)));
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	ck_assert_msg(WIFSIGNALED(with[1]) && WTERMSIG(with[1]) == SIGSEGV, "rank 1 ended by %s",
		      status_text(with[1], a, sizeof(a)));
#endif
}
END_TEST

/* SIGHUP's default ends a process; UCX's handler keeps it running. */
START_TEST(sighup_ends_rank)
{
	int st[2];
	char a[64];
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	int sig = SIGHUP;
	wt_fork_ranks_status(2, sig_after_weft, &sig, JOB_TIMEOUT_S, st);
	ck_assert_msg(st[0] == 0, "rank 0 ended by %s", status_text(st[0], a, sizeof(a)));
	ck_assert_msg(WIFSIGNALED(st[1]) && WTERMSIG(st[1]) == SIGHUP, "rank 1 ended by %s, not SIGHUP",
		      status_text(st[1], a, sizeof(a)));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("signals");
	TCase *tc = tcase_create("dispositions");
	tcase_add_test(tc, mask_unchanged);
	tcase_add_test(tc, mask_kept_on_request);
	tcase_add_test(tc, segv_ends_as_without_weft);
	tcase_add_test(tc, sighup_ends_rank);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
