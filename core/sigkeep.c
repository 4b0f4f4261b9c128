/* SPDX-License-Identifier: Apache-2.0 */
/* Signal dispositions kept across plugin code (sigkeep.h). */
#include <signal.h>
#include <string.h>

#include <weft/weft.h>

#include "config.h"
#include "log.h"
#include "sigkeep.h"

/* SIGKILL and SIGSTOP cannot be caught; 32 and up belong to the threads
 * library and to real-time users. */
static const char *sig_name(int sig)
{
	static const char *const names[WEFT__SIGKEEP_N] = {
		[SIGHUP] = "HUP",   [SIGINT] = "INT",     [SIGQUIT] = "QUIT", [SIGILL] = "ILL",     [SIGTRAP] = "TRAP",
		[SIGABRT] = "ABRT", [SIGBUS] = "BUS",     [SIGFPE] = "FPE",   [SIGUSR1] = "USR1",   [SIGSEGV] = "SEGV",
		[SIGUSR2] = "USR2", [SIGPIPE] = "PIPE",   [SIGALRM] = "ALRM", [SIGTERM] = "TERM",   [SIGCHLD] = "CHLD",
		[SIGCONT] = "CONT", [SIGTSTP] = "TSTP",   [SIGTTIN] = "TTIN", [SIGTTOU] = "TTOU",   [SIGURG] = "URG",
		[SIGXCPU] = "XCPU", [SIGXFSZ] = "XFSZ",   [SIGVTALRM] = "VTALRM", [SIGPROF] = "PROF",
		[SIGWINCH] = "WINCH", [SIGIO] = "IO",     [SIGPWR] = "PWR",   [SIGSYS] = "SYS",
	};
	return sig > 0 && sig < WEFT__SIGKEEP_N && names[sig] ? names[sig] : "?";
}

static int keepable(int sig)
{
	return sig != SIGKILL && sig != SIGSTOP;
}

static int same(const struct sigaction *a, const struct sigaction *b)
{
	/* The handler and whether it takes siginfo decide what runs; the
	 * union's two members share storage, so comparing sa_sigaction with
	 * SA_SIGINFO covers both. */
	if ((a->sa_flags & SA_SIGINFO) != (b->sa_flags & SA_SIGINFO))
		return 0;
	if (a->sa_flags & SA_SIGINFO)
		return a->sa_sigaction == b->sa_sigaction;
	return a->sa_handler == b->sa_handler;
}

static int keep_library_handlers(void)
{
	int v = 0;
	/* A bad value was reported where the configuration is read; the
	 * default (restore) holds then. */
	if (weft__param_get("core", "keep_library_signal_handlers", WEFT_PARAM_BOOL, &v, NULL) != 0)
		return 0;
	return v;
}

void weft__sigkeep_save(struct weft__sigkeep *k)
{
	memset(k, 0, sizeof(*k));
	if (keep_library_handlers())
		return;
	k->on = 1;
	for (int s = 1; s < WEFT__SIGKEEP_N; s++)
		if (keepable(s))
			sigaction(s, NULL, &k->act[s]);
}

static const char *disposition(const struct sigaction *a)
{
	if (!(a->sa_flags & SA_SIGINFO) && a->sa_handler == SIG_DFL)
		return "default";
	if (!(a->sa_flags & SA_SIGINFO) && a->sa_handler == SIG_IGN)
		return "ignored";
	return "a handler";
}

int weft__sigkeep_restore(const struct weft__sigkeep *k, const char *who)
{
	if (!k->on)
		return 0;
	int n = 0;
	for (int s = 1; s < WEFT__SIGKEEP_N; s++) {
		struct sigaction now;
		if (!keepable(s) || sigaction(s, NULL, &now) != 0 || same(&now, &k->act[s]))
			continue;
		if (sigaction(s, &k->act[s], NULL) != 0) {
			WEFT_WARN("%s changed SIG%s's disposition, and putting it back failed", who, sig_name(s));
			continue;
		}
		WEFT_INFO("%s installed %s for SIG%s; put back %s (core.keep_library_signal_handlers = 1 keeps "
			  "it)",
			  who, disposition(&now), sig_name(s), disposition(&k->act[s]));
		n++;
	}
	return n;
}
