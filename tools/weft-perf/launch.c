/* SPDX-License-Identifier: Apache-2.0 */
/* Launching the benchmark's ranks: one per process under a launcher
 * (mpirun, srun, torchrun), or --np N forked here, each bootstrapped from a
 * unique id, with a parent that never hangs on a failed rank. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <weft/weft.h>

#include "cudart_dl.h"
#include "wp.h"

/* Seconds the --np parent lets the other ranks exit on their own after one failed. */
#define FAIL_GRACE_S 30

/* One rank in this process, its peers found through the launcher's
 * environment. Returns the exit status. */
int wp_run_one_process(const struct opts *o)
{
	weft_comm_t *comm = NULL;
	void *stream = NULL;
	if (wp_cuda_rank_setup(o, cudart_dl_local_rank(0), &stream) != 0)
		return 1;
	int rc = weft_comm_create_from_env(&comm);
	if (rc == -ENOENT) {
		fprintf(stderr, "weft-perf: no launcher environment found (mpirun, srun or torchrun); "
				"run under a launcher, or pass --np N to fork N local ranks\n");
		return EXIT_USAGE;
	}
	if (rc != 0) {
		wp_fail(NULL, rc, "weft_comm_create_from_env");
		wp_cuda_rank_teardown(stream);
		return 1;
	}
	rc = wp_run_rank(o, comm, stream);
	if (rc < 0) {
		/* Tell the peers at once rather than through their liveness timeout. */
		weft_comm_abort(comm);
	}
	int drc = weft_comm_destroy(comm);
	if (rc == 0 && drc != 0)
		rc = wp_fail(NULL, drc, "weft_comm_destroy");
	wp_cuda_rank_teardown(stream);
	return rc == 0 ? 0 : 1;
}

/* Rank `rank` of --np, in the process wp_run_forked forked for it. */
static int child_main(const struct opts *o, const struct weft_unique_id *id, int rank)
{
	weft_comm_t *comm = NULL;
	void *stream = NULL;
	if (wp_cuda_rank_setup(o, rank, &stream) != 0)
		return 1;
	int rc = weft_comm_create(id, o->np, rank, &comm);
	if (rc != 0) {
		struct run r = {.rank = rank};
		wp_fail(&r, rc, "weft_comm_create (rank %d of %d)", rank, o->np);
		wp_cuda_rank_teardown(stream);
		return 1;
	}
	rc = wp_run_rank(o, comm, stream);
	if (rc < 0)
		weft_comm_abort(comm);
	int drc = weft_comm_destroy(comm);
	if (rc == 0 && drc != 0) {
		struct run r = {.rank = rank};
		rc = wp_fail(&r, drc, "weft_comm_destroy");
	}
	wp_cuda_rank_teardown(stream);
	return rc == 0 ? 0 : 1;
}

static void describe_status(int st, char *buf, size_t len)
{
	if (WIFEXITED(st))
		snprintf(buf, len, "exit code %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(buf, len, "status 0x%x", st);
}

/* A signal that asks the --np parent to stop (SIGINT, SIGTERM, SIGHUP). */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

/* --np: the parent makes the unique id, forks the ranks, and waits; when one
 * fails, the rest get FAIL_GRACE_S seconds to notice and exit before they are
 * killed, so that the parent never hangs. */
int wp_run_forked(const struct opts *o)
{
	struct weft_unique_id id;
	int rc = weft_get_unique_id(&id);
	if (rc != 0) {
		wp_fail(NULL, rc, "weft_get_unique_id");
		return 1;
	}
	pid_t *pids = calloc((size_t)o->np, sizeof(*pids));
	int *done = calloc((size_t)o->np, sizeof(*done));
	if (!pids || !done) {
		fprintf(stderr, "weft-perf: out of memory\n");
		return 1;
	}
	fflush(stdout);
	fflush(stderr);
	pid_t parent = getpid();
	struct sigaction sa = {.sa_handler = on_stop_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	int nforked = 0, failed = 0;
	for (int i = 0; i < o->np; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			fprintf(stderr, "weft-perf: fork of rank %d failed: %s\n", i, strerror(errno));
			failed++;
			break;
		}
		if (pid == 0) {
			/* A rank must not outlive the parent (killed by a timeout, say):
			 * nobody would wait for it, and it may be blocked for good. */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(1);
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			signal(SIGHUP, SIG_DFL);
			int crc = child_main(o, &id, i);
			fflush(stdout);
			fflush(stderr);
			_exit(crc);
		}
		pids[i] = pid;
		nforked++;
	}
	int left = nforked;
	double fail_since = failed ? wp_now_us() : 0;
	while (left > 0) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);
		if (pid < 0 && errno != EINTR)
			break;
		if (pid <= 0) {
			if (stop_signal) {
				/* Stopped from outside: take the ranks down with us. */
				fprintf(stderr, "weft-perf: %s; stopping the ranks\n", strsignal(stop_signal));
				for (int i = 0; i < nforked; i++)
					if (!done[i])
						kill(pids[i], SIGKILL);
				while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
					;
				free(pids);
				free(done);
				return 128 + stop_signal;
			}
			if (fail_since > 0 && wp_now_us() - fail_since > FAIL_GRACE_S * 1e6) {
				for (int i = 0; i < nforked; i++)
					if (!done[i]) {
						fprintf(stderr, "weft-perf: rank %d still running %d s after a rank failed; killing it\n",
							i, FAIL_GRACE_S);
						kill(pids[i], SIGKILL);
					}
				fail_since = wp_now_us() + 1e12; /* kill once */
			}
			usleep(20000);
			continue;
		}
		int i;
		for (i = 0; i < nforked && pids[i] != pid; i++)
			;
		if (i == nforked)
			continue;
		done[i] = 1;
		left--;
		if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			char how[128];
			describe_status(st, how, sizeof(how));
			fprintf(stderr, "weft-perf: rank %d failed (%s)\n", i, how);
			failed++;
			if (fail_since == 0)
				fail_since = wp_now_us();
		}
	}
	free(pids);
	free(done);
	return failed ? 1 : 0;
}
