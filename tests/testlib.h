/* Shared test helpers: forking real ranks, temporary files, environment. */
#ifndef WEFT_TESTLIB_H
#define WEFT_TESTLIB_H

#include <check.h>
#include <stddef.h>
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

/* Runs a Check suite and returns the process exit code (0 when all passed). */
int wt_run_suite(Suite *s);

/* Exit code that ctest counts as "skipped". */
#define WT_SKIP 77

#endif
