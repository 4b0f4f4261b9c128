/* SPDX-License-Identifier: Apache-2.0 */
/* The rendezvous from outside (issue 29 items 4 and 9): a stranger with no
 * secret who floods the root with idle connections cannot stop a job from
 * starting, and a rank that reuses an id whose rendezvous is over is told so
 * at once instead of waiting for the bootstrap timeout. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <weft/weft.h>

#include "bootstrap.h"
#include "testlib.h"

#define NRANKS 4
#define NOFILE 256       /* the root's and every rank's RLIMIT_NOFILE */
#define STRANGER_CONNS 1000
#define JOB_TIMEOUT_S 60

static struct weft_unique_id g_id;
static double *g_create_s; /* shared with the ranks: each one's create time */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static int set_nofile(rlim_t n)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < n)
		rl.rlim_max = n; /* only root may raise it; the caller checks */
	rl.rlim_cur = n;
	return setrlimit(RLIMIT_NOFILE, &rl);
}

static uint16_t root_port(const struct weft_unique_id *id)
{
	struct weft__unique_id_layout u;
	memcpy(&u, id->internal, sizeof(u));
	return ntohs(u.port);
}

static int stranger_connect(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The stranger: holds STRANGER_CONNS idle connections to the root, sending
 * nothing, and opens a new one for each the root closes, until stop is
 * readable (the parent closed its end). Writes its count of connections made
 * to out. */
static void stranger(uint16_t port, int ready, int stop, int out)
{
	static struct pollfd pfd[STRANGER_CONNS + 1];
	long made = 0;
	if (set_nofile(STRANGER_CONNS + 64) != 0) {
		perror("stranger: setrlimit");
		_exit(1);
	}
	for (int i = 0; i < STRANGER_CONNS; i++) {
		pfd[i] = (struct pollfd){.fd = stranger_connect(port), .events = POLLIN};
		made += pfd[i].fd >= 0;
	}
	pfd[STRANGER_CONNS] = (struct pollfd){.fd = stop, .events = POLLIN};
	char c = 1;
	if (write(ready, &c, 1) != 1)
		_exit(1);
	for (;;) {
		if (poll(pfd, STRANGER_CONNS + 1, 100) < 0 && errno != EINTR)
			_exit(1);
		if (pfd[STRANGER_CONNS].revents)
			break;
		for (int i = 0; i < STRANGER_CONNS; i++) {
			if (pfd[i].fd >= 0 && !pfd[i].revents)
				continue;
			char buf[64];
			if (pfd[i].fd >= 0 && recv(pfd[i].fd, buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno == EAGAIN)
				continue;
			/* Shed or closed (or never opened): top it up. */
			if (pfd[i].fd >= 0)
				close(pfd[i].fd);
			pfd[i].fd = stranger_connect(port);
			made += pfd[i].fd >= 0;
		}
	}
	if (write(out, &made, sizeof(made)) != sizeof(made))
		_exit(1);
	_exit(0);
}

static int rank_job(int rank, int n, void *arg)
{
	(void)arg;
	weft_comm_t *comm = NULL;
	double t0 = now_s();
	int rc = weft_comm_create(&g_id, n, rank, &comm);
	g_create_s[rank] = now_s() - t0;
	RCHECK(rc == 0, "weft_comm_create: %s", weft_strerror(rc));
	int v = rank + 1, sum = 0;
	ROK(weft_allreduce(&v, &sum, 1, WEFT_INT32, WEFT_SUM, comm, NULL));
	RCHECK(sum == n * (n + 1) / 2, "allreduce: %d", sum);
	ROK(weft_comm_destroy(comm));
	return 0;
}

/* The flooded job. Every rank is forked before the flood begins (a process
 * must not fork while the root's thread may hold an allocator lock, which a
 * sanitizer's allocator leaves locked in the child): rank 0 starts the
 * stranger, waits until it holds its connections, and lets the others go;
 * once every create has returned (the allreduce), it stops the stranger. */
static int g_go[2];
static long *g_made;

static int rank_flooded(int rank, int n, void *arg)
{
	(void)arg;
	char c = 1;
	int stop[2] = {-1, -1}, out[2] = {-1, -1};
	pid_t s = -1;
	close(g_go[1 - (rank == 0)]);
	if (rank == 0) {
		int ready[2];
		RCHECK(pipe(ready) == 0 && pipe(stop) == 0 && pipe(out) == 0, "pipe");
		s = fork();
		RCHECK(s >= 0, "fork");
		if (s == 0) {
			close(ready[0]);
			close(stop[1]);
			close(out[0]);
			stranger(root_port(&g_id), ready[1], stop[0], out[1]);
		}
		close(ready[1]);
		close(stop[0]);
		close(out[1]);
		RCHECK(read(ready[0], &c, 1) == 1, "the stranger did not start");
		for (int i = 1; i < n; i++)
			RCHECK(write(g_go[1], &c, 1) == 1, "go");
	} else {
		RCHECK(read(g_go[0], &c, 1) == 1, "no go");
	}
	int rc = rank_job(rank, n, NULL);
	if (rank == 0) {
		close(stop[1]);
		int st = 0;
		RCHECK(read(out[0], g_made, sizeof(*g_made)) == sizeof(*g_made), "the stranger's count");
		RCHECK(waitpid(s, &st, 0) == s && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the stranger failed");
	}
	return rc;
}

/* Sends this process's stderr (and its children's) to path; returns the
 * saved descriptor for stderr_back. */
static int stderr_to(const char *path)
{
	fflush(stderr);
	int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
	ck_assert(saved >= 0 && fd >= 0);
	dup2(fd, 2);
	close(fd);
	return saved;
}

/* Puts stderr back and returns what went to path (malloc'd). */
static char *stderr_back(int saved, const char *path)
{
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	char *text = wt_read_file(path);
	ck_assert_ptr_nonnull(text);
	return text;
}

static double slowest(void)
{
	double m = 0;
	for (int i = 0; i < NRANKS; i++)
		if (g_create_s[i] > m)
			m = g_create_s[i];
	return m;
}

static int count_lines(const char *text, const char *a)
{
	int n = 0;
	for (const char *p = text; p && (p = strstr(p, a)); p += strlen(a))
		n++;
	return n;
}

START_TEST(flood_at_root)
{
	if (set_nofile(NOFILE) != 0)
		ck_abort_msg("cannot set RLIMIT_NOFILE to %d: %s", NOFILE, strerror(errno));
	g_create_s = mmap(NULL, NRANKS * sizeof(double) + sizeof(long), PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(g_create_s, MAP_FAILED);
	g_made = (long *)(g_create_s + NRANKS);

	/* The normal time, with nobody in the way. */
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(NRANKS, rank_job, NULL, JOB_TIMEOUT_S), 0);
	double normal = slowest();

	/* The root's warnings go to a file, to count them. */
	char *dir = wt_mkdtemp("flood");
	char log[512];
	snprintf(log, sizeof(log), "%s/root.log", dir);
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	int saved = stderr_to(log);

	ck_assert(pipe(g_go) == 0);
	double t0 = now_s(), c0 = cpu_s();
	int failed = wt_fork_ranks(NRANKS, rank_flooded, NULL, JOB_TIMEOUT_S);
	double wall = now_s() - t0, cpu = cpu_s() - c0;
	close(g_go[0]);
	close(g_go[1]);
	long made = *g_made;
	char *text = stderr_back(saved, log);
	int lines = count_lines(text, "bootstrap root");
	fprintf(stderr,
		"flood: %ld stranger connections; create %.2f s (normal %.2f s); root process %.1f%% of a core over "
		"%.1f s; %d root lines\n",
		made, slowest(), normal, 100.0 * cpu / wall, wall, lines);
	ck_assert_msg(failed == 0, "%d ranks failed under the flood:\n%s", failed, text);
	ck_assert_msg(made >= STRANGER_CONNS, "the stranger made only %ld connections", made);
	ck_assert_msg(slowest() <= normal + 10.0, "create took %.2f s under the flood, %.2f s without", slowest(),
		      normal);
	/* One line a second after a burst of 8; each names how many it held back. */
	ck_assert_msg(lines <= 8 + (int)wall + 2, "%d lines about strangers in %.1f s:\n%s", lines, wall, text);
	ck_assert_msg(strstr(text, "more such lines not shown"), "no count of held-back lines:\n%s", text);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	ck_assert_msg(cpu <= 0.05 * wall, "the root's process used %.1f%% of a core while flooded", 100.0 * cpu / wall);
#endif
	free(text);
	wt_rmdir(dir);
	free(dir);
	munmap(g_create_s, NRANKS * sizeof(double) + sizeof(long));
}
END_TEST

/* Creates with g_id, expecting -EALREADY within 5 s (the timeout is 20 s). */
static int rank_reuse(int rank, int n, void *arg)
{
	(void)arg;
	weft_comm_t *comm = NULL;
	double t0 = now_s();
	int rc = weft_comm_create(&g_id, n, rank, &comm);
	RCHECK(rc == -EALREADY, "create with a used id: %d (%s)", rc, weft_strerror(rc));
	RCHECK(now_s() - t0 < 5.0, "the refusal took %.1f s", now_s() - t0);
	return 0;
}

START_TEST(reused_id_is_refused)
{
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "20", 1);
	g_create_s = mmap(NULL, NRANKS * sizeof(double), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(g_create_s, MAP_FAILED);
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, rank_job, NULL, JOB_TIMEOUT_S), 0);
	char *dir = wt_mkdtemp("reuse");
	char log[512];
	snprintf(log, sizeof(log), "%s/ranks.log", dir);
	int saved = stderr_to(log);
	int failed = wt_fork_ranks(2, rank_reuse, NULL, JOB_TIMEOUT_S);
	char *text = stderr_back(saved, log);
	ck_assert_msg(failed == 0, "%s", text);
	ck_assert_msg(count_lines(text, "ended the rendezvous: the rendezvous for this id is over") == 2,
		      "not both ranks were told why:\n%s", text);
	free(text);
	wt_rmdir(dir);
	free(dir);
	munmap(g_create_s, NRANKS * sizeof(double));
	unsetenv("WEFT_CORE_BOOTSTRAP_TIMEOUT");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rendezvous");
	TCase *tc = tcase_create("outside");
	tcase_add_test(tc, flood_at_root);
	tcase_add_test(tc, reused_id_is_refused);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
