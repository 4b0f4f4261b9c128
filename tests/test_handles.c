/* SPDX-License-Identifier: Apache-2.0 */
/* Communicator handles from outside (issue 29 item 7): a destroyed, twice
 * destroyed or made-up handle gets -EINVAL from every public call, without
 * anything read through it (ASan sees no use after free); a second thread
 * entering a call on a communicator another thread is inside gets -EBUSY,
 * and may call again once that call returned. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft/weft.h>

#include "testlib.h"

#define JOB_TIMEOUT_S 60

static struct weft_unique_id g_id;

/* Every public call that takes a communicator, on handle c; each must say
 * -EINVAL. Returns the number that did not. */
static int calls_refuse(weft_comm_t *c, int rank)
{
	int bad = 0;
	int v = 1, w = 0;
	char buf[64];
	weft_conn_t *conn = NULL;
	weft_mem_t *mem = NULL;
	weft_rmem_t *rmem = NULL;
	weft_sem_t *sem = NULL;
	weft_comm_t *nc = NULL;
	weft_window_t *win = NULL;
	void *p = NULL;
#define REFUSES(call)                                                                          \
	do {                                                                                   \
		int rc_ = (call);                                                              \
		if (rc_ != -EINVAL) {                                                          \
			fprintf(stderr, "rank %d: %s gave %d, not -EINVAL\n", rank, #call, rc_); \
			bad++;                                                                 \
		}                                                                              \
	} while (0)
	REFUSES(weft_comm_destroy(c));
	REFUSES(weft_comm_abort(c));
	REFUSES(weft_comm_rank(c));
	REFUSES(weft_comm_size(c));
	REFUSES(weft_comm_status(c));
	REFUSES(weft_comm_barrier(c));
	REFUSES(weft_comm_allgather(c, &v, buf, sizeof(v)));
	REFUSES(weft_comm_send(c, 0, 1, &v, sizeof(v)));
	REFUSES(weft_comm_recv(c, 0, 1, &v, sizeof(v)));
	REFUSES(weft_comm_split(c, 0, 0, &nc));
	REFUSES(weft_connect(c, 0, NULL, &conn));
	REFUSES(weft_mem_register(c, buf, sizeof(buf), WEFT_MEM_HOST, &mem));
	REFUSES(weft_mem_import(c, 0, buf, sizeof(buf), &rmem));
	REFUSES(weft_window_register(c, buf, sizeof(buf), WEFT_MEM_HOST, &win));
	REFUSES(weft_sem_create(c, &sem));
	REFUSES(weft_mem_alloc(c, WEFT_MEM_HOST, 64, &p));
	REFUSES(weft_allreduce(&v, &w, 1, WEFT_INT32, WEFT_SUM, c, NULL));
	REFUSES(weft_allgather(&v, buf, 1, WEFT_INT32, c, NULL));
	REFUSES(weft_broadcast(&v, &w, 1, WEFT_INT32, 0, c, NULL));
	REFUSES(weft_send(&v, 1, WEFT_INT32, 0, c, NULL));
#undef REFUSES
	return bad;
}

/* Destroyed once and twice: every call refuses, deterministically, and so
 * does deregistering a window the destroy released. */
static int destroyed_rank(int rank, int n, void *arg)
{
	(void)arg;
	weft_comm_t *comm = NULL;
	int rc = weft_comm_create(&g_id, n, rank, &comm);
	RCHECK(rc == 0, "weft_comm_create: %s", weft_strerror(rc));
	/* A window the destroy released: deregistering it later is refused. */
	static char wbuf[4096];
	weft_window_t *win = NULL, *win2 = NULL;
	rc = weft_window_register(comm, wbuf, sizeof(wbuf), WEFT_MEM_HOST, &win);
	RCHECK(rc == 0, "weft_window_register: %s", weft_strerror(rc));
	rc = weft_window_register(comm, wbuf, 1024, WEFT_MEM_HOST, &win2);
	RCHECK(rc == 0, "weft_window_register (second): %s", weft_strerror(rc));
	RCHECK(weft_window_deregister(win2) == 0, "deregistering a live window failed");
	RCHECK(weft_window_deregister(win2) == -EINVAL, "a second deregister did not say -EINVAL");
	RCHECK(weft_comm_destroy(comm) == 0, "the first destroy failed");
	RCHECK(weft_window_deregister(win) == -EINVAL, "deregistering a window of a destroyed comm did not say -EINVAL");
	RCHECK(calls_refuse(comm, rank) == 0, "a call took a destroyed communicator");
	RCHECK(weft_comm_destroy(comm) == -EINVAL, "a third destroy did not say -EINVAL");
	/* A handle nothing ever made: a pointer into the caller's own memory. */
	long fake[64];
	memset(fake, 0x5a, sizeof(fake));
	RCHECK(calls_refuse((weft_comm_t *)fake, rank) == 0, "a call took a made-up handle");
	return 0;
}

START_TEST(destroyed_handle_refused)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, destroyed_rank, NULL, JOB_TIMEOUT_S), 0);
}
END_TEST

struct busy {
	weft_comm_t *comm;
	int rc;
	volatile int inside;
};

/* Blocks in a receive until the peer sends. */
static void *blocked_recv(void *arg)
{
	struct busy *b = arg;
	int x = 0;
	b->inside = 1;
	b->rc = weft_comm_recv(b->comm, 1, 5, &x, sizeof(x));
	if (b->rc == 0 && x != 42)
		b->rc = -EIO;
	return NULL;
}

/* Rank 0: one thread waits in a receive; the main thread's calls on the same
 * communicator are refused with -EBUSY until rank 1 sends (1.5 s in), then
 * work again. */
static int busy_rank(int rank, int n, void *arg)
{
	(void)arg;
	weft_comm_t *comm = NULL;
	int rc = weft_comm_create(&g_id, n, rank, &comm);
	RCHECK(rc == 0, "weft_comm_create: %s", weft_strerror(rc));
	if (rank == 1) {
		int x = 42;
		usleep(1500 * 1000);
		RCHECK(weft_comm_send(comm, 0, 5, &x, sizeof(x)) == 0, "send");
		RCHECK(weft_comm_barrier(comm) == 0, "barrier");
		RCHECK(weft_comm_destroy(comm) == 0, "destroy");
		return 0;
	}
	struct busy b = {.comm = comm};
	pthread_t t;
	RCHECK(pthread_create(&t, NULL, blocked_recv, &b) == 0, "pthread_create");
	while (!b.inside)
		usleep(1000);
	usleep(200 * 1000); /* the thread is inside weft_comm_recv by now */
	int v = 1, w = 0, x = 7;
	RCHECK((rc = weft_comm_barrier(comm)) == -EBUSY, "barrier beside a call gave %d", rc);
	RCHECK((rc = weft_allreduce(&v, &w, 1, WEFT_INT32, WEFT_SUM, comm, NULL)) == -EBUSY,
	       "allreduce beside a call gave %d", rc);
	RCHECK((rc = weft_comm_send(comm, 1, 9, &x, sizeof(x))) == -EBUSY, "send beside a call gave %d", rc);
	RCHECK((rc = weft_comm_destroy(comm)) == -EBUSY, "destroy beside a call gave %d", rc);
	/* Queries (and abort, not tried here) are for any thread. */
	RCHECK(weft_comm_rank(comm) == 0 && weft_comm_status(comm) == 0, "a query beside a call failed");
	pthread_join(t, NULL);
	RCHECK(b.rc == 0, "the receiving thread's call failed: %d", b.rc);
	RCHECK(weft_comm_barrier(comm) == 0, "barrier after the other thread's call returned");
	RCHECK(weft_comm_destroy(comm) == 0, "destroy");
	return 0;
}

START_TEST(second_thread_busy)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, busy_rank, NULL, JOB_TIMEOUT_S), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("handles");
	TCase *tc = tcase_create("handles");
	tcase_add_test(tc, destroyed_handle_refused);
	tcase_add_test(tc, second_thread_busy);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
