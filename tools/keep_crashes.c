/* SPDX-License-Identifier: Apache-2.0 */
/* The check binaries' shared parts (keep_crashes.h): the crash-keeping
 * sigaction and signal, the rank runner and its verdict. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <weft/weft.h>

#include "keep_crashes.h"

/* ------------------------------------------------- crashes stay crashes */
static int keep_crashes;

void kc_keep_crashes(void)
{
	keep_crashes = 1;
}

static int crash_signal(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGABRT;
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	int (*real)(int, const struct sigaction *, struct sigaction *);
	void *sym = dlsym(RTLD_NEXT, "sigaction");
	if (!sym) {
		errno = ENOSYS;
		return -1;
	}
	memcpy(&real, &sym, sizeof(real));
	if (keep_crashes && act && crash_signal(sig) && act->sa_handler != SIG_DFL)
		return real(sig, NULL, old); /* refused quietly: the caller sees success */
	return real(sig, act, old);
}

sighandler_t signal(int sig, sighandler_t handler)
{
	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, &old) != 0)
		return SIG_ERR;
	return old.sa_handler;
}

const char *kc_signame(int sig)
{
	static char buf[32];
	const char *abbrev = sigabbrev_np(sig);
	if (abbrev)
		snprintf(buf, sizeof(buf), "SIG%s", abbrev);
	else
		snprintf(buf, sizeof(buf), "signal %d", sig);
	return buf;
}

/* ---------------------------------------------- the first failure of a run */
struct kc_note *kc_note;

void kc_vnote(int rank, int skip, const char *where, const char *fmt, va_list ap)
{
	char msg[900];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	fprintf(stderr, "rank %d: %s%s%s\n", rank, where ? where : "", skip ? "skipped: " : "check failed: ", msg);
	if (!kc_note)
		return;
	int *claim = skip ? &kc_note->skip_claimed : &kc_note->fail_claimed;
	if (__atomic_exchange_n(claim, 1, __ATOMIC_ACQ_REL) == 0)
		snprintf(skip ? kc_note->skip : kc_note->fail, sizeof(kc_note->fail), "rank %d: %s", rank, msg);
}

/* ------------------------------------------------------ forking ranks */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void kill_all(int n, pid_t *pids, int *status, int as)
{
	for (int r = 0; r < n; r++)
		if (pids[r] > 0)
			kill(pids[r], SIGKILL);
	for (int r = 0; r < n; r++)
		if (pids[r] > 0) {
			waitpid(pids[r], NULL, 0);
			pids[r] = 0;
			status[r] = as;
		}
}

/* Forks the ranks and waits for them: status[r] is rank r's wait status,
 * KC_HUNG or KC_KILLED. 0, or -1 when fork failed (*res says so). */
static int fork_wait(const struct kc_run *run, int *status, struct kc_result *res)
{
	int n = run->n;
	pid_t pids[KC_MAX_RANKS];
	int stopped[KC_MAX_RANKS] = {0};
	fflush(NULL);
	for (int r = 0; r < n; r++) {
		status[r] = KC_HUNG;
		pid_t pid = fork();
		if (pid == 0) {
			/* A rank must never outlive the check that made it. */
			alarm((unsigned)run->timeout_s + 5);
			kc_keep_crashes();
			int rc = run->fn(r, n, run->arg);
			fflush(NULL);
			_exit(rc == 0 ? 0 : (rc < 0 ? 1 : rc & 0xff));
		}
		if (pid < 0) {
			snprintf(res->reason, sizeof(res->reason), "fork: %s", strerror(errno));
			res->status = KC_FAIL;
			kill_all(r, pids, status, KC_KILLED);
			return -1;
		}
		pids[r] = pid;
	}
	int left = n, watching = run->watch != NULL, graced = 0;
	double deadline = now_s() + run->timeout_s;
	while (left > 0 && now_s() < deadline) {
		for (int r = 0; r < n; r++) {
			int st;
			if (pids[r] <= 0 || waitpid(pids[r], &st, WNOHANG | WUNTRACED) != pids[r])
				continue;
			if (WIFSTOPPED(st)) {
				stopped[r] = 1;
				continue;
			}
			status[r] = st;
			pids[r] = 0;
			left--;
		}
		if (watching) {
			int w = run->watch(run->warg, n, pids, stopped, res);
			if (w != 0)
				watching = 0;
			if (w < 0) {
				kill_all(n, pids, status, KC_KILLED);
				left = 0;
			}
		}
		/* After a failure the others may wait on the failed rank: they get
		 * the grace, not the whole timeout. */
		if (run->fail_grace_s > 0 && kc_note->fail_claimed && deadline > now_s() + run->fail_grace_s) {
			deadline = now_s() + run->fail_grace_s;
			graced = 1;
		}
		usleep(watching ? 200 : 2000);
	}
	for (int r = 0; r < n; r++)
		if (pids[r] > 0 && !graced)
			fprintf(stderr, "rank %d did not finish within %d s; killing it\n", r, run->timeout_s);
	kill_all(n, pids, status, graced ? KC_KILLED : KC_HUNG);
	return 0;
}

static void verdict(const struct kc_run *run, const int *status, struct kc_result *res)
{
	int n = run->n, victim = run->victim;
	int crashed = -1, hung = -1, exited = -1, skipped = -1;
	for (int r = 0; r < n; r++) {
		int st = status[r];
		if (st == KC_KILLED || r == victim)
			continue;
		if (st == KC_HUNG || (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)) {
			if (hung < 0)
				hung = r;
		} else if (WIFSIGNALED(st)) {
			if (crashed < 0)
				crashed = r;
		} else if (WEXITSTATUS(st) == KC_SKIP) {
			if (skipped < 0)
				skipped = r;
		} else if (WEXITSTATUS(st) != 0 && exited < 0) {
			exited = r;
		}
	}
	char *why = res->reason;
	size_t wl = sizeof(res->reason);
	if (crashed >= 0) {
		int sig = WTERMSIG(status[crashed]);
		int k = snprintf(why, wl, "rank %d died of %s (signal %d)", crashed, kc_signame(sig), sig);
		for (int r = crashed + 1; r < n && k > 0 && (size_t)k < wl; r++)
			if (r != victim && status[r] != KC_KILLED && status[r] != KC_HUNG && WIFSIGNALED(status[r]) &&
			    WTERMSIG(status[r]) != SIGALRM)
				k += snprintf(why + k, wl - (size_t)k, "; rank %d of %s", r,
					      kc_signame(WTERMSIG(status[r])));
		res->status = KC_CRASH;
	} else if (res->status != KC_PASS) {
		/* the watcher's reason stands */
	} else if (kc_note->fail_claimed) {
		snprintf(why, wl, "%s", kc_note->fail);
		res->status = KC_FAIL;
	} else if (hung >= 0) {
		snprintf(why, wl, "rank %d did not finish within %d s", hung, run->timeout_s);
		res->status = KC_FAIL;
	} else if (exited >= 0) {
		snprintf(why, wl, "rank %d exited %d", exited, WEXITSTATUS(status[exited]));
		res->status = KC_FAIL;
	} else if (skipped >= 0) {
		snprintf(why, wl, "%s", kc_note->skip_claimed ? kc_note->skip : "a rank skipped");
		res->status = KC_SKIP;
	} else if (victim >= 0 && status[victim] != KC_KILLED &&
		   (status[victim] == KC_HUNG || !WIFSIGNALED(status[victim]) || WTERMSIG(status[victim]) != SIGKILL)) {
		snprintf(why, wl, "the victim, rank %d, did not die of SIGKILL (wait status 0x%x)", victim,
			 (unsigned)status[victim]);
		res->status = KC_FAIL;
	}
}

int kc_run_ranks(const struct kc_run *run, struct kc_result *res)
{
	memset(res, 0, sizeof(*res));
	if (run->n < 2 || run->n > KC_MAX_RANKS) {
		snprintf(res->reason, sizeof(res->reason), "%d ranks: from 2 to %d", run->n, KC_MAX_RANKS);
		return res->status = KC_USAGE;
	}
	if (weft_get_unique_id(run->id) != 0) {
		snprintf(res->reason, sizeof(res->reason), "weft_get_unique_id failed");
		return res->status = KC_FAIL;
	}
	struct kc_note *note = mmap(NULL, sizeof(*note), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (note == MAP_FAILED) {
		snprintf(res->reason, sizeof(res->reason), "mmap: %s", strerror(errno));
		return res->status = KC_FAIL;
	}
	kc_note = note;
	int status[KC_MAX_RANKS];
	if (fork_wait(run, status, res) == 0)
		verdict(run, status, res);
	kc_note = NULL;
	munmap(note, sizeof(*note));
	return res->status;
}
