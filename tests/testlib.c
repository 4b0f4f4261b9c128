/* SPDX-License-Identifier: Apache-2.0 */
/* Shared test helpers: forking real ranks, temporary files, environment. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <execinfo.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* WT_BACKTRACE=1: a rank that crashes or outlives its alarm prints where
 * its thread was (addresses in each library, for addr2line) before dying
 * of that signal, so a failure on a remote machine names its place. */
static int g_trace_rank = -1; /* -2 in the parent when WT_BACKTRACE=1 */

static void trace_signal(int sig)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "rank %d: signal %d, backtrace:\n", g_trace_rank, sig);
	if (write(2, line, (size_t)n) < 0) {
		/* nothing more to say */
	}
	void *frames[48];
	backtrace_symbols_fd(frames, backtrace(frames, 48), 2);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void trace_install(int rank)
{
	const char *e = getenv("WT_BACKTRACE");
	if (!e || strcmp(e, "1") != 0)
		return;
	void *warm[2];
	backtrace(warm, 2); /* loads the unwinder now, not inside the handler */
	g_trace_rank = rank;
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGALRM};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], trace_signal);
}

int wt_fork_ranks_status(int nranks, wt_rank_fn fn, void *arg, int timeout_s, int *status)
{
	pid_t *pids = calloc((size_t)nranks, sizeof(*pids));
	if (!pids)
		return -1;
	const char *bt = getenv("WT_BACKTRACE");
	if (bt && strcmp(bt, "1") == 0)
		g_trace_rank = -2;
	/* Ranks start once every one is forked: a rendezvous root that is a
	 * thread of this process, serving a rank during a later fork, could
	 * leave that child a sanitizer allocator lock held (docs/reliability.md). */
	int gate[2];
	if (pipe(gate) != 0) {
		fprintf(stderr, "pipe: %s\n", strerror(errno));
		free(pids);
		return -1;
	}
	fflush(NULL);
	for (int r = 0; r < nranks; r++) {
		pid_t pid = fork();
		if (pid == 0) {
			/* A rank must never outlive the test that made it. */
			alarm((unsigned)timeout_s + 5);
			free(pids); /* the parent's; LeakSanitizer would count it at a rank's exit */
			char c;
			close(gate[1]);
			while (read(gate[0], &c, 1) < 0 && errno == EINTR)
				;
			close(gate[0]);
			trace_install(r);
			int rc = fn(r, nranks, arg);
			fflush(NULL);
			_exit(rc == 0 ? 0 : (rc < 0 ? 1 : rc & 0xff));
		}
		if (pid < 0) {
			fprintf(stderr, "fork: %s\n", strerror(errno));
			close(gate[0]);
			close(gate[1]);
			for (int k = 0; k < r; k++)
				kill(pids[k], SIGKILL);
			for (int k = 0; k < r; k++)
				waitpid(pids[k], NULL, 0);
			free(pids);
			return -1;
		}
		pids[r] = pid;
	}
	close(gate[0]);
	close(gate[1]);
	for (int r = 0; r < nranks; r++)
		status[r] = -1;
	int left = nranks;
	double deadline = now_s() + timeout_s;
	while (left > 0 && now_s() < deadline) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);
		if (pid > 0) {
			for (int r = 0; r < nranks; r++)
				if (pids[r] == pid) {
					status[r] = st;
					pids[r] = 0;
					left--;
				}
		} else {
			usleep(2000);
		}
	}
	for (int r = 0; r < nranks; r++)
		if (pids[r] > 0) {
			fprintf(stderr, "rank %d did not finish within %d s; killing it\n", r, timeout_s);
			if (g_trace_rank == -2) {
				/* Its handler prints the backtrace, then it dies of SIGALRM. */
				kill(pids[r], SIGALRM);
				usleep(500000);
			}
			kill(pids[r], SIGKILL);
			waitpid(pids[r], NULL, 0);
		}
	free(pids);
	return 0;
}

int wt_fork_ranks(int nranks, wt_rank_fn fn, void *arg, int timeout_s)
{
	int *st = calloc((size_t)nranks, sizeof(*st));
	if (!st || wt_fork_ranks_status(nranks, fn, arg, timeout_s, st) != 0) {
		free(st);
		return nranks;
	}
	int bad = 0;
	for (int r = 0; r < nranks; r++) {
		if (st[r] == -1) {
			bad++;
		} else if (WIFSIGNALED(st[r])) {
			fprintf(stderr, "rank %d died of signal %d\n", r, WTERMSIG(st[r]));
			bad++;
		} else if (WEXITSTATUS(st[r]) != 0) {
			fprintf(stderr, "rank %d exited %d\n", r, WEXITSTATUS(st[r]));
			bad++;
		}
	}
	free(st);
	return bad;
}

char *wt_mkdtemp(const char *tag)
{
	const char *base = getenv("TMPDIR");
	char *path;
	if (asprintf(&path, "%s/weft-%s-XXXXXX", base && *base ? base : "/tmp", tag) < 0)
		return NULL;
	if (!mkdtemp(path)) {
		free(path);
		return NULL;
	}
	return path;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(p);
}

void wt_rmdir(const char *path)
{
	if (path)
		nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

char *wt_write_file(const char *dir, const char *name, const char *text)
{
	char *path;
	if (asprintf(&path, "%s/%s", dir, name) < 0)
		return NULL;
	FILE *f = fopen(path, "w");
	if (!f) {
		free(path);
		return NULL;
	}
	fputs(text, f);
	fclose(f);
	return path;
}

char *wt_read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	size_t k;
	while (buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
		n += k;
		if (cap - n - 1 == 0) {
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	fclose(f);
	if (buf)
		buf[n] = '\0';
	return buf;
}

char *wt_run_capture(const char *cmd, int *status)
{
	char *full;
	if (asprintf(&full, "( %s ) 2>&1", cmd) < 0)
		return NULL;
	FILE *p = popen(full, "r");
	free(full);
	if (!p)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	size_t k;
	while (buf && (k = fread(buf + n, 1, cap - n - 1, p)) > 0) {
		n += k;
		if (cap - n - 1 == 0) {
			char *nb = realloc(buf, cap * 2);
			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	if (buf)
		buf[n] = '\0';
	int st = pclose(p);
	if (status)
		*status = st;
	return buf;
}

/* Binds a TCP socket to 127.0.0.1:port (0: any) and closes it. Returns the
 * port it got, or -1. */
static int bind_port(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int got = -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		got = ntohs(a.sin_port);
	close(fd);
	return got;
}

int wt_run_threads(int n, void *(*fn)(void *), void *args, size_t size)
{
	pthread_t th[64];
	int started = 0, err = n > 64 ? EINVAL : 0;
	while (!err && started < n) {
		err = pthread_create(&th[started], NULL, fn, (char *)args + (size_t)started * size);
		if (!err)
			started++;
	}
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	return err;
}

/* A port the kernel never hands out as an ephemeral one (below
 * ip_local_port_range): a port that bind(0) returned and the test released
 * could be taken by any connect() of a test running beside it (ctest -j)
 * before the test's root binds it again (seen in CI: EADDRINUSE). Random
 * candidates, so concurrent tests rarely try the same one; bind(0) only when
 * none of them is free. */
int wt_free_port(void)
{
	static unsigned state;
	int lo = 32768;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	if (f) {
		if (fscanf(f, "%d", &lo) != 1)
			lo = 32768;
		fclose(f);
	}
	if (!state)
		state = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
	if (lo > 11000) {
		for (int i = 0; i < 64; i++) {
			state = state * 1103515245u + 12345u;
			int port = 10000 + (int)((state >> 8) % (unsigned)(lo - 10000));
			if (bind_port(port) == port)
				return port;
		}
	}
	return bind_port(0);
}

int wt_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

unsigned long long wt_caught_signals(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return ~0ull;
	char line[256];
	unsigned long long mask = 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "SigCgt:", 7) == 0)
			mask = strtoull(line + 7, NULL, 16);
	fclose(f);
	return mask & 0x7fffffffull;
}

int wt_mapped(const char *lib)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return 0;
	char line[1024];
	int found = 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, lib) != NULL;
	fclose(f);
	return found;
}
