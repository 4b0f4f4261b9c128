/* SPDX-License-Identifier: Apache-2.0 */
/* What the check binaries share (weft-conformance, weft-pack-conformance and
 * weft-plugin-check): crashes that stay crashes, and forked ranks waited for
 * with a bound, judged, and each placed on its simulated host. */
#ifndef WEFT_TOOLS_KEEP_CRASHES_H
#define WEFT_TOOLS_KEEP_CRASHES_H

#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>

#include <weft/weft.h>

/* A check's outcome; also the exit status of a suite binary's --run. */
enum { KC_PASS = 0, KC_FAIL = 1, KC_USAGE = 2, KC_CRASH = 3, KC_SKIP = 77 };

#define KC_MAX_RANKS 16
#define KC_HUNG (-1)   /* wait status of a rank killed at the timeout */
#define KC_KILLED (-2) /* of a rank killed after a watcher's or another rank's failure */

struct kc_result {
	int status;
	char reason[1024];
};

/* ------------------------------------------------- crashes stay crashes
 * Libraries that plugins pull in may catch SIGSEGV and its kin to print a
 * backtrace and exit(1) (UCX's libucs does, as does libpsm2 under
 * libfabric), which would make a crash look like a plain failure. This
 * module defines sigaction and signal, which those libraries bind to when
 * the binary exports them (ENABLE_EXPORTS); after kc_keep_crashes they keep
 * the default action of SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT in this
 * process (a handler for them is refused quietly), so the process dies by
 * the signal and the checker names it. */
void kc_keep_crashes(void);

/* "SIGSEGV", or "signal N" for a signal without a name. Not reentrant. */
const char *kc_signame(int sig);

/* ---------------------------------------------- the first failure of a run
 * A page shared between the process that forks the ranks and the ranks, so
 * that a check's one-line reason is the first failure (or skip) a rank saw,
 * not a count of failed ranks. */
struct kc_note {
	int fail_claimed, skip_claimed;
	int flag; /* a check's own: pack abort sets it once rank 0's aborted call returned */
	char fail[1024], skip[1024];
};

/* The run's page in kc_run_ranks and the ranks it forks; NULL elsewhere. */
extern struct kc_note *kc_note;

/* Prints "rank R: WHERE(skipped: |check failed: )MESSAGE" on stderr and,
 * when it is the run's first of its kind, keeps "rank R: MESSAGE" in kc_note. */
void kc_vnote(int rank, int skip, const char *where, const char *fmt, va_list ap);

/* ------------------------------------------------------ forking ranks */
typedef int (*kc_rank_fn)(int rank, int n, void *arg);

/* Called between polls while the ranks run, so the forking process can act
 * on them (stop and continue one). stopped[r] is set when rank r reported a
 * stop; pids[r] is 0 once rank r is reaped. 0 to be called again, 1 when done
 * watching, -1 after writing a failure into *res (the ranks are then killed). */
typedef int (*kc_watch_fn)(void *arg, int n, const pid_t *pids, int *stopped, struct kc_result *res);

struct kc_run {
	int n;         /* ranks, 2 to KC_MAX_RANKS */
	kc_rank_fn fn; /* a rank's body: 0 pass, KC_SKIP, else a failure */
	void *arg;
	int timeout_s;     /* for all ranks; each also gets alarm(timeout_s + 5) */
	kc_watch_fn watch; /* may be NULL */
	void *warg;
	int victim;                /* a rank expected to die of SIGKILL, or -1 */
	double fail_grace_s;       /* > 0: once a rank noted a failure, the others get this long */
	struct weft_unique_id *id; /* filled with a fresh id (and root) before the ranks fork */
};

/* Makes a fresh id, forks the ranks (each placed on its host, see below),
 * waits for them and judges, in order: a rank that died by a signal (a
 * crash), a watcher's failure, the first failure a rank noted, a rank that
 * hung, a rank that exited non-zero silently, a skip, a victim that lived.
 * Returns res->status with res->reason filled (empty on a pass). */
int kc_run_ranks(const struct kc_run *run, struct kc_result *res);

/* ------------------------------------------------------ simulated hosts
 * With --hosts 2 a suite binary puts rank r on host r % 2. Two ways:
 *  - network namespaces (--netns NS,ADDR,DEV once per host, made by
 *    weft-plugin-check): the forking process enters host 0's namespace, so
 *    the bootstrap's root listens on its veth address; each rank enters its
 *    host's namespace with a private /sys (as `ip netns exec` does) and binds
 *    the bootstrap, ucx (WEFT_UCX_NET_DEVICES) and ofi (WEFT_OFI_ADDR,
 *    WEFT_OFI_IFACE) to its veth;
 *  - the test host identity (no --netns): each rank sets WEFT_TEST_HOST_ID to
 *    its host's index, which a core built with WEFT_TEST_HOOKS appends to its
 *    host identity; everything stays on 127.0.0.1 (and ucx on lo unless
 *    WEFT_UCX_NET_DEVICES says otherwise). */

/* Takes "--hosts N" or "--netns NS,ADDR,DEV": 0, -1 for a bad value (said on
 * stderr), 1 when opt is neither. */
int kc_hosts_arg(const char *opt, const char *val);

/* After the arguments: 0, or -1 when they do not fit together (said). */
int kc_hosts_ready(void);

/* The number of hosts (1 unless --hosts 2), and the host of a rank. */
int kc_hosts(void);
int kc_host_of(int rank);

/* One line describing the placement, "" with one host. */
const char *kc_hosts_text(void);

/* In a rank, on its comm: 0 when the core sees every peer on the host it was
 * placed on (other-host exactly for peers of the other host), else -1 with
 * why. Always 0 with one host. */
int kc_hosts_verify(weft_comm_t *comm, char *why, size_t len);

#endif
