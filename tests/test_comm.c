/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the communicator layer (core/comm.c and friends) beyond what the
 * transport conformance suite checks: several communicators alive at once,
 * several ranks in one process, launcher environments, transport choice when
 * none is named, argument checks of the communicator calls, splits, and one
 * error line for one failed put. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <weft/weft.h>

#include "testlib.h"

#define TP "ofi"
/* With no transport named, same-host peers go to the transport that probes the
 * lowest latency for them: shm (always built, no dependency). */
#define TP_AUTO "shm"

static struct weft_unique_id g_id[2];

/* One round trip on comm: rank 0 and 1 each write 64 bytes tagged with `tag`
 * into the other's buffer and signal; each checks what it got. */
static int ping(weft_comm_t *comm, int rank, const char *transport, unsigned char tag)
{
	int peer = 1 - rank;
	unsigned char buf[2][64];
	memset(buf[0], tag + rank, sizeof(buf[0]));
	memset(buf[1], 0, sizeof(buf[1]));
	weft_mem_t *mem;
	weft_rmem_t *rmem;
	weft_sem_t *sem;
	weft_rsem_t *rsem;
	weft_conn_t *conn;
	ROK(weft_connect(comm, peer, transport, &conn));
	const char *want = transport ? transport : TP_AUTO;
	RCHECK(strcmp(weft_conn_transport(conn), want) == 0, "carried by %s, expected %s", weft_conn_transport(conn),
	       want);
	ROK(weft_mem_register(comm, buf, sizeof(buf), WEFT_MEM_HOST, &mem));
	ROK(weft_mem_exchange(mem, peer, &rmem));
	ROK(weft_sem_create(comm, &sem));
	ROK(weft_sem_exchange(sem, peer, &rsem));
	ROK(weft_put(conn, rmem, 64, mem, 0, 64));
	ROK(weft_flush(conn));
	ROK(weft_signal(conn, rsem, 1));
	ROK(weft_sem_wait(sem, 1));
	for (int i = 0; i < 64; i++)
		RCHECK(buf[1][i] == (unsigned char)(tag + peer), "byte %d is %d, expected %d", i, buf[1][i], tag + peer);
	ROK(weft_flush(conn));
	ROK(weft_comm_barrier(comm));
	ROK(weft_rsem_release(rsem));
	ROK(weft_sem_destroy(sem));
	ROK(weft_rmem_release(rmem));
	ROK(weft_mem_deregister(mem));
	ROK(weft_conn_close(conn));
	return 0;
}

/* ------------------------------------------------- two comms at once */
static int rank_two_comms(int rank, int n, void *arg)
{
	weft_comm_t *a, *b;
	ROK(weft_comm_create(&g_id[0], n, rank, &a));
	/* The second comm numbers the ranks the other way round. */
	ROK(weft_comm_create(&g_id[1], n, 1 - rank, &b));
	RCHECK(weft_comm_rank(b) == 1 - rank, "rank in b");
	/* Interleaved on purpose: a's exchanges must not see b's messages. */
	ROK(ping(a, rank, TP, 10));
	ROK(ping(b, 1 - rank, NULL, 50)); /* NULL: the core chooses by probed latency */
	ROK(ping(a, rank, NULL, 90));
	ROK(weft_comm_destroy(b));
	ROK(ping(a, rank, TP, 130)); /* a is unaffected by b's end */
	ROK(weft_comm_destroy(a));
	return 0;
}

START_TEST(two_comms_alive)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id[0]), 0);
	ck_assert_int_eq(weft_get_unique_id(&g_id[1]), 0);
	ck_assert_int_eq(wt_fork_ranks(2, rank_two_comms, NULL, 60), 0);
}
END_TEST

/* ---------------------------------------------- ranks as threads */
struct thr {
	int rank;
	int rc;
};

static void *thread_rank(void *p)
{
	struct thr *t = p;
	int rank = t->rank;
	weft_comm_t *comm;
	t->rc = weft_comm_create(&g_id[0], 2, rank, &comm);
	if (t->rc == 0) {
		t->rc = ping(comm, rank, TP, 20);
		int rc = weft_comm_destroy(comm);
		if (t->rc == 0)
			t->rc = rc;
	}
	return NULL;
}

static int process_with_two_ranks(int rank, int n, void *arg)
{
	struct thr t[2] = {{.rank = 0}, {.rank = 1}};
	RCHECK(wt_run_threads(2, thread_rank, t, sizeof(t[0])) == 0, "pthread_create");
	RCHECK(t[0].rc == 0 && t[1].rc == 0, "thread ranks returned %d and %d", t[0].rc, t[1].rc);
	return 0;
}

START_TEST(ranks_as_threads)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id[0]), 0);
	/* In a child, so the process holding the root is not the one tested. */
	ck_assert_int_eq(wt_fork_ranks(1, process_with_two_ranks, NULL, 60), 0);
}
END_TEST

/* ------------------------------------------------- launcher env */
static int rank_from_env(int rank, int n, void *arg)
{
	const int *port = arg;
	char v[64];
	unsetenv("OMPI_COMM_WORLD_RANK");
	unsetenv("PMI_RANK");
	unsetenv("SLURM_PROCID");
	snprintf(v, sizeof(v), "%d", rank);
	setenv("RANK", v, 1);
	snprintf(v, sizeof(v), "%d", n);
	setenv("WORLD_SIZE", v, 1);
	snprintf(v, sizeof(v), "127.0.0.1:%d", *port);
	setenv("WEFT_CORE_BOOTSTRAP_ROOT", v, 1);
	setenv("WEFT_CORE_BOOTSTRAP_SECRET", "test-comm-secret", 1);
	weft_comm_t *comm;
	ROK(weft_comm_create_from_env(&comm));
	RCHECK(weft_comm_rank(comm) == rank && weft_comm_size(comm) == n, "rank %d size %d", weft_comm_rank(comm),
	       weft_comm_size(comm));
	ROK(ping(comm, rank, TP, 30));
	ROK(weft_comm_destroy(comm));
	return 0;
}

START_TEST(create_from_env)
{
	int port = wt_free_port();
	ck_assert_int_gt(port, 0);
	ck_assert_int_eq(wt_fork_ranks(2, rank_from_env, &port, 60), 0);
}
END_TEST

START_TEST(create_from_env_without_launcher)
{
	unsetenv("OMPI_COMM_WORLD_RANK");
	unsetenv("PMI_RANK");
	unsetenv("SLURM_PROCID");
	unsetenv("RANK");
	weft_comm_t *comm = NULL;
	ck_assert_int_eq(weft_comm_create_from_env(&comm), -ENOENT);
	ck_assert_ptr_null(comm);
	setenv("RANK", "3", 1);
	setenv("WORLD_SIZE", "2", 1);
	ck_assert_int_eq(weft_comm_create_from_env(&comm), -EINVAL);
	ck_assert_ptr_null(comm);
}
END_TEST

/* ------------------------------------------------- argument checks */
static int rank_args(int rank, int n, void *arg)
{
	weft_comm_t *comm;
	ROK(weft_comm_create(&g_id[0], n, rank, &comm));
	int peer = 1 - rank;
	char b[8] = {0};
	RCHECK(weft_comm_send(comm, peer, 0xFFFF0001u, b, 1) == -EINVAL, "reserved tag accepted");
	RCHECK(weft_comm_send(comm, rank, 1, b, 1) == -EINVAL, "send to self accepted");
	RCHECK(weft_comm_send(comm, 5, 1, b, 1) == -EINVAL, "send to rank 5 accepted");
	RCHECK(weft_comm_recv(comm, peer, 1, NULL, 4) == -EINVAL, "NULL recv buffer accepted");
	RCHECK(weft_comm_allgather(comm, NULL, b, 1) == -EINVAL, "NULL allgather input accepted");
	RCHECK(weft_comm_barrier(NULL) == -EINVAL, "barrier(NULL)");
	RCHECK(weft_comm_rank(NULL) < 0 && weft_comm_size(NULL) < 0 && weft_comm_status(NULL) < 0, "NULL comm");
	/* A user tag near the reserved range still works. */
	uint32_t x = 0xabcd, y = 0;
	ROK(weft_comm_send(comm, peer, 0xFFFEFFFFu, &x, sizeof(x)));
	ROK(weft_comm_recv(comm, peer, 0xFFFEFFFFu, &y, sizeof(y)));
	RCHECK(y == 0xabcd, "got 0x%x", y);
	int all[2] = {0};
	int mine = rank + 100;
	ROK(weft_comm_allgather(comm, &mine, all, sizeof(int)));
	RCHECK(all[0] == 100 && all[1] == 101, "allgather %d %d", all[0], all[1]);
	/* Zero-length registration is allowed and moves nothing. */
	weft_mem_t *m0;
	ROK(weft_mem_register(comm, NULL, 0, WEFT_MEM_HOST, &m0));
	ROK(weft_mem_deregister(m0));
	ROK(weft_comm_destroy(comm));
	return 0;
}

START_TEST(argument_checks)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id[0]), 0);
	ck_assert_int_eq(wt_fork_ranks(2, rank_args, NULL, 60), 0);
	weft_comm_t *comm = NULL;
	ck_assert_int_eq(weft_comm_create(&g_id[0], 2, 2, &comm), -EINVAL);
	ck_assert_int_eq(weft_comm_create(&g_id[0], 0, 0, &comm), -EINVAL);
	ck_assert_int_eq(weft_comm_create(&g_id[0], 2, -1, &comm), -EINVAL);
	ck_assert_int_eq(weft_comm_create(&g_id[0], 2, 0, NULL), -EINVAL);
	ck_assert_ptr_null(comm);
}
END_TEST

/* ---------------------------------------------------------------- split */
/* 4 ranks: odd and even ranks split with keys in reverse order, so the new
 * ranks run backwards; then ranks 0-2 split again while rank 3 opts out. The
 * new comms outlive their parent, and ping over them (ranks 0 and 1). */
static int rank_split(int rank, int n, void *arg)
{
	weft_comm_t *comm, *half, *three;
	ROK(weft_comm_create(&g_id[0], n, rank, &comm));
	ROK(weft_comm_split(comm, rank % 2, -rank, &half));
	RCHECK(half != NULL, "no comm for color %d", rank % 2);
	RCHECK(weft_comm_size(half) == n / 2, "split size %d", weft_comm_size(half));
	/* Keys -rank: the highest parent rank of a color comes first. */
	int want = (n - 2 + rank % 2 - rank) / 2;
	RCHECK(weft_comm_rank(half) == want, "parent rank %d is rank %d of its color, not %d", rank,
	       weft_comm_rank(half), want);
	int32_t me = rank, all[4];
	ROK(weft_comm_allgather(half, &me, all, sizeof(me)));
	for (int i = 0; i < n / 2; i++)
		RCHECK(all[i] == (n - 2 + rank % 2) - 2 * i, "new rank %d is parent rank %d", i, all[i]);
	ROK(weft_comm_split(comm, rank == 3 ? WEFT_SPLIT_NOCOLOR : 7, 0, &three));
	RCHECK((three == NULL) == (rank == 3), "rank %d: comm %p after a split with%s a color", rank, (void *)three,
	       rank == 3 ? "out" : "");
	ROK(weft_comm_destroy(comm));
	if (three) {
		RCHECK(weft_comm_size(three) == 3 && weft_comm_rank(three) == rank, "rank %d: %d of %d", rank,
		       weft_comm_rank(three), weft_comm_size(three));
		if (rank < 2)
			ROK(ping(three, rank, TP, 0x40));
		else
			ROK(weft_comm_barrier(three));
		ROK(weft_comm_destroy(three));
	}
	ROK(weft_comm_barrier(half));
	ROK(weft_comm_destroy(half));
	return 0;
}

START_TEST(split_colors_keys)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id[0]), 0);
	ck_assert_int_eq(wt_fork_ranks(4, rank_split, NULL, 90), 0);
}
END_TEST

/* Bad arguments are refused on the spot, naming the problem, and the
 * caller's thread can read that message back; other threads cannot. */
static void *other_thread(void *p)
{
	*(size_t *)p = weft_last_error(NULL, 0);
	return NULL;
}

START_TEST(split_refusals_and_last_error)
{
	char buf[256];
	weft_comm_t *out = (weft_comm_t *)&buf; /* must come back NULL */
	ck_assert_int_eq(weft_comm_split(NULL, 0, 0, &out), -EINVAL);
	ck_assert_ptr_null(out);
	size_t len = weft_last_error(buf, sizeof(buf));
	ck_assert_msg(strstr(buf, "weft_comm_split: comm is NULL") && len == strlen(buf), "last error '%s' (%zu)", buf,
		      len);
	ck_assert_int_eq(weft_get_unique_id(&g_id[0]), 0);
	weft_comm_t *comm;
	ck_assert_int_eq(weft_comm_create(&g_id[0], 1, 0, &comm), 0);
	ck_assert_int_eq(weft_comm_split(comm, -5, 0, &out), -EINVAL);
	len = weft_last_error(buf, sizeof(buf));
	ck_assert_msg(strstr(buf, "color -5 is negative"), "last error '%s'", buf);
	/* Truncated to the buffer, the full length returned. */
	char small[6];
	ck_assert_uint_eq(weft_last_error(small, sizeof(small)), len);
	ck_assert_str_eq(small, "core:");
	size_t theirs = 1;
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, other_thread, &theirs), 0);
	pthread_join(th, NULL);
	ck_assert_uint_eq(theirs, 0);
	/* One rank alone splits into a comm of itself. */
	ck_assert_int_eq(weft_comm_split(comm, 3, 9, &out), 0);
	ck_assert_int_eq(weft_comm_size(out), 1);
	ck_assert_int_eq(weft_comm_destroy(out), 0);
	ck_assert_int_eq(weft_comm_destroy(comm), 0);
}
END_TEST

/* ------------------------------------------- one failure, one line */
/* What rank 0 tells rank 1 through memory shared across the fork. */
struct one_line {
	volatile int freed; /* rank 1 unmapped its region */
	volatile int done;  /* rank 0 has checked its log and torn down */
	char dir[256];
};

/* Sends this rank's log (its stderr) to dir/rank<r>.log, named in path. */
static int log_to_file(const struct one_line *ol, int rank, char *path, size_t len)
{
	snprintf(path, len, "%s/rank%d.log", ol->dir, rank);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || dup2(fd, 2) < 0)
		return -1;
	close(fd);
	return 0;
}

/* Error lines in the log so far ("weft <pid>:<rank> error <who>: ..."), and
 * the first, copied to first. */
static int error_lines(const char *path, char *first, size_t len)
{
	char *text = wt_read_file(path);
	int n = 0;
	first[0] = '\0';
	for (char *line = text; line && *line;) {
		char *end = strchr(line, '\n');
		if (end)
			*end = '\0';
		if (strncmp(line, "weft ", 5) == 0 && strstr(line, " error ")) {
			if (n++ == 0)
				snprintf(first, len, "%s", line);
		}
		line = end ? end + 1 : line + strlen(line);
	}
	free(text);
	return n;
}

/* Waits (up to 30 s) for a flag the other rank sets. */
static int await(volatile int *flag)
{
	for (int i = 0; i < 3000 && !*flag; i++)
		usleep(10000);
	return *flag ? 0 : -ETIMEDOUT;
}

/* Rank 1's part of both cases: a region to write, unmapped on request, and
 * no teardown talk with a rank whose communicator has failed. */
static int one_line_rank1(struct one_line *ol, weft_comm_t *comm, const char *tp, int unmap)
{
	const int rank = 1;
	weft_conn_t *conn;
	ROK(weft_connect(comm, 0, tp, &conn));
	size_t len = 1 << 16;
	void *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	RCHECK(buf != MAP_FAILED, "mmap");
	weft_mem_t *mem;
	weft_rmem_t *rmem;
	ROK(weft_mem_register(comm, buf, len, WEFT_MEM_HOST, &mem));
	ROK(weft_mem_exchange(mem, 0, &rmem));
	if (unmap) {
		ROK(weft_mem_deregister(mem));
		RCHECK(munmap(buf, len) == 0, "munmap");
	}
	ol->freed = 1;
	ROK(await(&ol->done));
	ROK(weft_comm_abort(comm));
	return 0;
}

/* Rank 0 fails its first put on a connection through tp, as fault says (or
 * as the unmapped target makes it), through a port channel when port is set;
 * its log must then hold exactly one error line, containing want. */
static int one_line_rank0(struct one_line *ol, weft_comm_t *comm, const char *tp, int port, const char *want,
			  const char *log)
{
	const int rank = 0;
	weft_conn_t *conn;
	ROK(weft_connect(comm, 1, tp, &conn));
	static unsigned char buf[1 << 16];
	weft_mem_t *mem;
	weft_rmem_t *rmem;
	ROK(weft_mem_register(comm, buf, sizeof(buf), WEFT_MEM_HOST, &mem));
	ROK(weft_mem_exchange(mem, 1, &rmem));
	ROK(await(&ol->freed));
	int rc;
	if (port) {
		weft_port_t *p;
		ROK(weft_port_create(conn, 0, &p));
		rc = weft_port_put(p, rmem, 0, mem, 0, sizeof(buf));
		if (rc == 0)
			rc = weft_port_flush(p);
	} else {
		rc = weft_put(conn, rmem, 0, mem, 0, sizeof(buf));
	}
	RCHECK(rc == -WEFT_ERR_PEER, "the put returned %d (%s), expected -WEFT_ERR_PEER", rc, weft_strerror(rc));
	char first[512];
	int n = error_lines(log, first, sizeof(first));
	RCHECK(n == 1 && strstr(first, want), "%d error lines for one failure, expected one with '%s'; first: '%s'", n,
	       want, first);
	return 0;
}

struct one_line_case {
	const char *tp;
	int port;
	const char *fault; /* rank 0's WEFT_TEST_FAULT, or NULL: rank 1 unmaps its region */
	const char *want;
};

static const struct one_line_case one_line_cases[] = {
	/* A transport that returns a lost peer and logs nothing: the core names
	 * the peer and the transport. */
	{TP, 0, "put:1:peer", "transport " TP ": put to rank 1 failed: "},
	/* The transport logs the failure in the proxy thread: the proxy stays quiet. */
	{TP_AUTO, 1, NULL, TP_AUTO ": process_vm_writev to rank 1: address "},
};

struct one_line_arg {
	const struct one_line_case *c;
	struct one_line *ol;
};

static int rank_one_line(int rank, int n, void *arg)
{
	const struct one_line_case *c = ((struct one_line_arg *)arg)->c;
	struct one_line *ol = ((struct one_line_arg *)arg)->ol;
	char log[512];
	RCHECK(log_to_file(ol, rank, log, sizeof(log)) == 0, "log file");
	if (rank == 0 && c->fault)
		setenv("WEFT_TEST_FAULT", c->fault, 1);
	weft_comm_t *comm;
	ROK(weft_comm_create(&g_id[0], n, rank, &comm));
	int rc = rank == 0 ? one_line_rank0(ol, comm, c->tp, c->port, c->want, log)
			   : one_line_rank1(ol, comm, c->tp, c->fault == NULL);
	if (rank == 0) {
		weft_comm_abort(comm);
		ol->done = 1;
	}
	weft_comm_destroy(comm);
	return rc;
}

START_TEST(one_failure_one_line)
{
	struct one_line *ol = mmap(NULL, sizeof(*ol), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(ol, MAP_FAILED);
	memset(ol, 0, sizeof(*ol));
	char *dir = wt_mkdtemp("oneline");
	ck_assert_ptr_nonnull(dir);
	snprintf(ol->dir, sizeof(ol->dir), "%s", dir);
	ck_assert_int_eq(weft_get_unique_id(&g_id[0]), 0);
	struct one_line_arg arg = {&one_line_cases[_i], ol};
	int bad = wt_fork_ranks(2, rank_one_line, &arg, 60);
	if (bad) {
		for (int r = 0; r < 2; r++) {
			char path[512];
			snprintf(path, sizeof(path), "%s/rank%d.log", dir, r);
			char *text = wt_read_file(path);
			fprintf(stderr, "---- rank %d log ----\n%s", r, text ? text : "");
			free(text);
		}
	}
	ck_assert_int_eq(bad, 0);
	wt_rmdir(dir);
	free(dir);
	munmap(ol, sizeof(*ol));
}
END_TEST

int main(void)
{
	setenv("WEFT_CORE_PEER_TIMEOUT", "3", 0);
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "20", 0);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	Suite *s = suite_create("comm");
	TCase *tc = tcase_create("comm");
	tcase_add_test(tc, two_comms_alive);
	tcase_add_test(tc, ranks_as_threads);
	tcase_add_test(tc, create_from_env);
	tcase_add_test(tc, create_from_env_without_launcher);
	tcase_add_test(tc, argument_checks);
	tcase_add_test(tc, split_colors_keys);
	tcase_add_test(tc, split_refusals_and_last_error);
	tcase_add_loop_test(tc, one_failure_one_line, 0, (int)(sizeof(one_line_cases) / sizeof(one_line_cases[0])));
	tcase_set_timeout(tc, 90);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
