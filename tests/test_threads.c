/* SPDX-License-Identifier: Apache-2.0 */
/* Ranks as threads of one process, for ThreadSanitizer (which cannot follow
 * fork after threads): every rank's bootstrap service thread, heartbeats, the
 * port-channel proxy, collectives and several communicators run side by side in
 * one address space over ofi. Also a plain mp test in ordinary builds. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <weft/weft.h>

#include "testlib.h"

#define MAXR 3
#define CHUNK 4096
#define ITERS 20

struct rank_arg {
	int rank, nranks;
	const struct weft_unique_id *id, *id2;
	int (*body)(struct rank_arg *a);
	int rc;
};

static void *rank_thread(void *p)
{
	struct rank_arg *a = p;
	a->rc = a->body(a);
	return NULL;
}

static void run_threads(int n, int (*body)(struct rank_arg *), const struct weft_unique_id *id,
			const struct weft_unique_id *id2)
{
	struct rank_arg a[MAXR];
	for (int r = 0; r < n; r++)
		a[r] = (struct rank_arg){.rank = r, .nranks = n, .id = id, .id2 = id2, .body = body, .rc = -1};
	ck_assert_int_eq(wt_run_threads(n, rank_thread, a, sizeof(a[0])), 0);
	for (int r = 0; r < n; r++)
		ck_assert_msg(a[r].rc == 0, "thread rank %d failed (%d)", r, a[r].rc);
}

/* Port channels to every peer (the proxy thread drains them), then collectives. */
static int ports_and_colls(struct rank_arg *a)
{
	int rank = a->rank, n = a->nranks;
	weft_comm_t *comm = NULL;
	ROK(weft_comm_create(a->id, n, rank, &comm));
	unsigned char *buf = calloc((size_t)n, 2 * CHUNK);
	RCHECK(buf, "no memory");
	weft_mem_t *mem = NULL;
	ROK(weft_mem_register(comm, buf, (size_t)n * 2 * CHUNK, WEFT_MEM_HOST, &mem));
	weft_rmem_t *rmem[MAXR] = {0};
	weft_sem_t *sem[MAXR] = {0};
	weft_rsem_t *rsem[MAXR] = {0};
	weft_conn_t *conn[MAXR] = {0};
	weft_port_t *port[MAXR] = {0};
	/* Every pair in increasing peer order on both sides. */
	for (int p = 0; p < n; p++) {
		if (p == rank)
			continue;
		ROK(weft_mem_exchange(mem, p, &rmem[p]));
		ROK(weft_sem_create(comm, &sem[p]));
		ROK(weft_sem_exchange(sem[p], p, &rsem[p]));
		ROK(weft_connect(comm, p, "ofi", &conn[p]));
		ROK(weft_port_create(conn[p], 0, &port[p]));
	}
	for (int it = 1; it <= ITERS; it++) {
		/* My send area: the first n chunks; the peers' receive area: rank's slot
		 * in the second half. */
		memset(buf + (size_t)rank * CHUNK, (unsigned char)(it * 3 + rank), CHUNK);
		for (int p = 0; p < n; p++) {
			if (p == rank)
				continue;
			ROK(weft_port_put(port[p], rmem[p], (uint64_t)(n + rank) * CHUNK, mem, (uint64_t)rank * CHUNK,
					  CHUNK));
			ROK(weft_port_signal(port[p], rsem[p], (uint64_t)it));
		}
		for (int p = 0; p < n; p++) {
			if (p == rank)
				continue;
			ROK(weft_sem_wait(sem[p], (uint64_t)it));
			unsigned char want = (unsigned char)(it * 3 + p);
			for (int i = 0; i < CHUNK; i++)
				RCHECK(buf[(size_t)(n + p) * CHUNK + i] == want, "iteration %d: byte %d from rank %d", it, i,
				       p);
		}
		for (int p = 0; p < n; p++)
			if (p != rank)
				ROK(weft_port_flush(port[p]));
		/* Nobody rewrites its send chunk before every peer has read: a barrier. */
		ROK(weft_comm_barrier(comm));
	}
	float v[1024];
	for (int it = 0; it < 5; it++) {
		for (int i = 0; i < 1024; i++)
			v[i] = (float)(rank + i);
		ROK(weft_allreduce(v, v, 1024, WEFT_FLOAT32, WEFT_SUM, comm, NULL));
		for (int i = 0; i < 1024; i++)
			RCHECK(v[i] == (float)(n * i + n * (n - 1) / 2), "allreduce element %d = %g", i, v[i]);
	}
	for (int p = 0; p < n; p++) {
		if (p == rank)
			continue;
		ROK(weft_port_destroy(port[p]));
		ROK(weft_conn_close(conn[p]));
		ROK(weft_rsem_release(rsem[p]));
		ROK(weft_sem_destroy(sem[p]));
		ROK(weft_rmem_release(rmem[p]));
	}
	ROK(weft_mem_deregister(mem));
	ROK(weft_comm_destroy(comm));
	free(buf);
	return 0;
}

/* Two communicators per rank, each driven by its own thread at the same time. */
struct side {
	weft_comm_t *comm;
	int rank, n, rc;
};

static void *side_loop(void *p)
{
	struct side *s = p;
	int rank = s->rank;
	s->rc = 0;
	for (int it = 0; it < 20 && !s->rc; it++) {
		int64_t x = rank + it;
		s->rc = weft_allreduce(&x, &x, 1, WEFT_INT64, WEFT_SUM, s->comm, NULL);
		if (!s->rc && x != (int64_t)s->n * it + s->n * (s->n - 1) / 2)
			s->rc = -EBADMSG;
	}
	(void)rank;
	return NULL;
}

static int two_comms(struct rank_arg *a)
{
	int rank = a->rank;
	struct side s[2] = {{.rank = rank, .n = a->nranks}, {.rank = rank, .n = a->nranks}};
	ROK(weft_comm_create(a->id, a->nranks, rank, &s[0].comm));
	ROK(weft_comm_create(a->id2, a->nranks, rank, &s[1].comm));
	pthread_t th;
	RCHECK(pthread_create(&th, NULL, side_loop, &s[1]) == 0, "pthread_create");
	side_loop(&s[0]);
	pthread_join(th, NULL);
	RCHECK(s[0].rc == 0 && s[1].rc == 0, "allreduce loops: %d, %d", s[0].rc, s[1].rc);
	ROK(weft_comm_destroy(s[1].comm));
	ROK(weft_comm_destroy(s[0].comm));
	return 0;
}

/* Liveness: rank 1 waits on a semaphore nobody raises; another thread aborts
 * its comm, which must end the wait. Heartbeats keep flowing meanwhile. */
static void *abort_later(void *p)
{
	usleep(300 * 1000);
	weft_comm_abort(p);
	return NULL;
}

static int abort_wait(struct rank_arg *a)
{
	int rank = a->rank;
	weft_comm_t *comm = NULL;
	ROK(weft_comm_create(a->id, a->nranks, rank, &comm));
	weft_sem_t *sem = NULL;
	ROK(weft_sem_create(comm, &sem));
	if (rank == 1) {
		pthread_t th;
		RCHECK(pthread_create(&th, NULL, abort_later, comm) == 0, "pthread_create");
		int rc = weft_sem_wait(sem, 1);
		pthread_join(th, NULL);
		RCHECK(rc == -WEFT_ERR_ABORTED, "sem_wait returned %d (%s)", rc, weft_strerror(rc));
		RCHECK(weft_comm_barrier(comm) == -WEFT_ERR_ABORTED, "a call after abort");
	} else {
		/* Stays in a blocking exchange with rank 1 until rank 1 leaves. */
		char c;
		int rc = weft_comm_recv(comm, 1, 1, &c, 1);
		RCHECK(rc < 0, "recv from the aborted rank returned %d", rc);
	}
	ROK(weft_sem_destroy(sem));
	weft_comm_destroy(comm);
	return 0;
}

START_TEST(thread_ranks_ports_and_collectives)
{
	struct weft_unique_id id;
	ck_assert_int_eq(weft_get_unique_id(&id), 0);
	run_threads(3, ports_and_colls, &id, NULL);
}
END_TEST

START_TEST(thread_ranks_two_comms)
{
	struct weft_unique_id id, id2;
	ck_assert_int_eq(weft_get_unique_id(&id), 0);
	ck_assert_int_eq(weft_get_unique_id(&id2), 0);
	run_threads(2, two_comms, &id, &id2);
}
END_TEST

START_TEST(thread_ranks_abort_ends_wait)
{
	struct weft_unique_id id;
	ck_assert_int_eq(weft_get_unique_id(&id), 0);
	run_threads(2, abort_wait, &id, NULL);
}
END_TEST

int main(void)
{
	setenv("WEFT_CORE_PEER_TIMEOUT", "5", 0);
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "30", 0);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	char *dir = wt_mkdtemp("threads");
	char *conf = dir ? wt_write_file(dir, "weft.conf", "[transport]\nuse ofi\n") : NULL;
	if (!conf)
		return 1;
	setenv("WEFT_CONFIG", conf, 1);
	Suite *s = suite_create("threads");
	TCase *tc = tcase_create("threads");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, thread_ranks_ports_and_collectives);
	tcase_add_test(tc, thread_ranks_two_comms);
	tcase_add_test(tc, thread_ranks_abort_ends_wait);
	suite_add_tcase(s, tc);
	int rc = wt_run_suite(s);
	wt_rmdir(dir);
	free(conf);
	free(dir);
	return rc;
}
