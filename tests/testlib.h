/* SPDX-License-Identifier: Apache-2.0 */
/* Shared test helpers: forking real ranks, temporary files, environment. */
#ifndef WEFT_TESTLIB_H
#define WEFT_TESTLIB_H

#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* Body of one rank. Returns 0 on success; anything else fails the run. */
typedef int (*wt_rank_fn)(int rank, int nranks, void *arg);

/* Forks nranks children running fn; waits up to timeout_s for all, then kills
 * the rest with SIGKILL. Returns the number of ranks that did not exit 0 (a
 * rank killed by the timeout counts). Messages name each failing rank. */
int wt_fork_ranks(int nranks, wt_rank_fn fn, void *arg, int timeout_s);

/* As wt_fork_ranks, but reports each child's raw wait status in status[rank]
 * (-1 for a rank killed at the timeout) instead of counting. */
int wt_fork_ranks_status(int nranks, wt_rank_fn fn, void *arg, int timeout_s, int *status);

/* Runs fn on n threads, thread i given (char *)args + i * size, and joins them
 * all. Returns 0, or pthread_create's error once the threads started are joined. */
int wt_run_threads(int n, void *(*fn)(void *), void *args, size_t size);

/* A fresh directory under $TMPDIR (or /tmp), removed by wt_rmdir. Returns a
 * malloc'd path. */
char *wt_mkdtemp(const char *tag);
void wt_rmdir(const char *path);

/* Writes text to dir/name; returns the malloc'd full path. */
char *wt_write_file(const char *dir, const char *name, const char *text);

/* Reads a whole file into a malloc'd NUL-terminated string; NULL on failure. */
char *wt_read_file(const char *path);

/* Runs a shell command, capturing stdout+stderr into a malloc'd string; returns
 * its exit status (as system(3)) in *status. */
char *wt_run_capture(const char *cmd, int *status);

/* A TCP port on 127.0.0.1 that was free a moment ago, outside the kernel's
 * ephemeral range where it has one below it. */
int wt_free_port(void);

/* The standard signals (1-31) this process has a handler for (SigCgt of
 * /proc/self/status; glibc keeps 32 and 33 for its threads); ~0 when it
 * cannot be read. */
unsigned long long wt_caught_signals(void);

/* Whether a file whose path contains lib is mapped into this process. */
int wt_mapped(const char *lib);

/* Runs a Check suite and returns the process exit code (0 when all passed). */
int wt_run_suite(Suite *s);

/* In a rank body (a wt_rank_fn, or anything with an int `rank` in scope that
 * returns int): print the failed condition with the rank, file, line and the
 * message, and return 1. ROK checks a weft call for 0 and names its error. */
#define RCHECK(cond, ...)                                                                                    \
	do {                                                                                                 \
		if (!(cond)) {                                                                               \
			fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", rank, __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                                        \
			fputc('\n', stderr);                                                                 \
			return 1;                                                                            \
		}                                                                                            \
	} while (0)
#define ROK(call)                                                                        \
	do {                                                                             \
		int rc_ = (call);                                                        \
		RCHECK(rc_ == 0, "%s returned %d (%s)", #call, rc_, weft_strerror(rc_)); \
	} while (0)

/* Exit code that ctest counts as "skipped". */
#define WT_SKIP 77

#endif
