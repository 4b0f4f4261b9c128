/* SPDX-License-Identifier: Apache-2.0 */
/* The check binaries' shared parts (keep_crashes.h): the crash-keeping
 * sigaction and signal, the rank runner and its verdict, simulated hosts. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <weft/info.h>
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

__attribute__((format(printf, 2, 3))) static void note_fail(int rank, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	kc_vnote(rank, 0, "", fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------ simulated hosts */
#define MAX_HOSTS 2

static struct {
	int n;      /* 1 or 2 */
	int nns;    /* --netns given: network namespaces */
	int set_up; /* the forking process is in host 0's namespace */
	char ns[MAX_HOSTS][64], addr[MAX_HOSTS][INET_ADDRSTRLEN], dev[MAX_HOSTS][16];
	char text[512];
} hosts = {.n = 1};

static int name_ok(const char *s, size_t max)
{
	size_t n = strlen(s);
	if (n == 0 || n >= max)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' ||
		      *s == '_' || *s == '.'))
			return 0;
	return 1;
}

int kc_hosts_arg(const char *opt, const char *val)
{
	if (strcmp(opt, "--hosts") == 0) {
		if (strcmp(val, "1") != 0 && strcmp(val, "2") != 0) {
			fprintf(stderr, "--hosts wants 1 or 2, not '%s'\n", val);
			return -1;
		}
		hosts.n = atoi(val);
		return 0;
	}
	if (strcmp(opt, "--netns") != 0)
		return 1;
	char ns[64], addr[64], dev[64];
	struct in_addr a;
	if (hosts.nns == MAX_HOSTS || sscanf(val, "%63[^,],%63[^,],%63s", ns, addr, dev) != 3 ||
	    !name_ok(ns, sizeof(hosts.ns[0])) || !name_ok(dev, sizeof(hosts.dev[0])) ||
	    inet_pton(AF_INET, addr, &a) != 1) {
		fprintf(stderr, "--netns wants NAMESPACE,IPv4-ADDRESS,DEVICE (at most %d), not '%s'\n", MAX_HOSTS, val);
		return -1;
	}
	int i = hosts.nns++;
	/* name_ok and inet_pton bounded them */
	memcpy(hosts.ns[i], ns, strlen(ns) + 1);
	memcpy(hosts.addr[i], addr, strlen(addr) + 1);
	memcpy(hosts.dev[i], dev, strlen(dev) + 1);
	return 0;
}

int kc_hosts_ready(void)
{
	if (hosts.nns && hosts.nns != hosts.n) {
		fprintf(stderr,
			"--netns is given %d times for %d hosts: once per host, or not at "
			"all\n",
			hosts.nns, hosts.n);
		return -1;
	}
	if (hosts.n == 1)
		hosts.text[0] = '\0';
	else if (hosts.nns)
		snprintf(hosts.text, sizeof(hosts.text),
			 "rank r on host r %% 2: network namespaces %s (%s on %s) and %s "
			 "(%s on %s)",
			 hosts.ns[0], hosts.addr[0], hosts.dev[0], hosts.ns[1], hosts.addr[1], hosts.dev[1]);
	else
		snprintf(hosts.text, sizeof(hosts.text),
			 "rank r on host r %% 2: the test host identity "
			 "(WEFT_TEST_HOST_ID=r %% 2), over 127.0.0.1");
	return 0;
}

int kc_hosts(void)
{
	return hosts.n;
}

int kc_host_of(int rank)
{
	return rank % hosts.n;
}

const char *kc_hosts_text(void)
{
	return hosts.text;
}

static int enter_netns(int h, char *why, size_t len)
{
	char path[128];
	snprintf(path, sizeof(path), "/var/run/netns/%s", hosts.ns[h]);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, len, "open %s: %s", path, strerror(errno));
		return -1;
	}
	int rc = setns(fd, CLONE_NEWNET);
	int err = errno;
	close(fd);
	if (rc < 0) {
		snprintf(why, len, "setns into network namespace %s: %s", hosts.ns[h], strerror(err));
		return -1;
	}
	return 0;
}

/* As `ip netns exec` does: a private mount namespace with /sys mounted
 * again, so /sys/class/net (where UCX finds its devices) shows this network
 * namespace's interfaces. */
static int private_sys(int h, char *why, size_t len)
{
	if (unshare(CLONE_NEWNS) < 0 || mount("", "/", NULL, MS_SLAVE | MS_REC, NULL) < 0) {
		snprintf(why, len, "a private mount namespace: %s", strerror(errno));
		return -1;
	}
	if (umount2("/sys", MNT_DETACH) < 0 && errno != EINVAL) {
		snprintf(why, len, "umount /sys: %s", strerror(errno));
		return -1;
	}
	if (mount(hosts.ns[h], "/sys", "sysfs", 0, NULL) < 0) {
		snprintf(why, len, "mount sysfs on /sys: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* In the forking process, before the id: the root listens in host 0. */
static int hosts_setup(char *why, size_t len)
{
	if (hosts.n == 1 || !hosts.nns || hosts.set_up)
		return 0;
	if (enter_netns(0, why, len) != 0)
		return -1;
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", hosts.addr[0], 1);
	hosts.set_up = 1;
	return 0;
}

/* In a rank, before its body. */
static int hosts_enter(int rank, char *why, size_t len)
{
	if (hosts.n == 1)
		return 0;
	int h = kc_host_of(rank);
	if (!hosts.nns) {
		char label[16];
		snprintf(label, sizeof(label), "%d", h);
		setenv("WEFT_TEST_HOST_ID", label, 1);
		setenv("WEFT_UCX_NET_DEVICES", "lo", 0);
		return 0;
	}
	if (enter_netns(h, why, len) != 0 || private_sys(h, why, len) != 0)
		return -1;
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", hosts.addr[h], 1);
	setenv("WEFT_UCX_NET_DEVICES", hosts.dev[h], 1);
	setenv("WEFT_OFI_ADDR", hosts.addr[h], 1);
	setenv("WEFT_OFI_IFACE", hosts.dev[h], 1);
	return 0;
}

/* The peer classes the core gives come from weft_info_print_transport_choice,
 * the one public place that names them ("  peer P (other-host):"). */
int kc_hosts_verify(weft_comm_t *comm, char *why, size_t len)
{
	if (hosts.n == 1)
		return 0;
	char *text = NULL;
	size_t tl = 0;
	FILE *f = open_memstream(&text, &tl);
	if (!f) {
		snprintf(why, len, "open_memstream: %s", strerror(errno));
		return -1;
	}
	weft_info_print_transport_choice(f, comm, 0, WEFT_MEM_HOST);
	fclose(f);
	int me = weft_comm_rank(comm), n = weft_comm_size(comm), rc = 0;
	for (int p = 0; p < n && rc == 0; p++) {
		if (p == me)
			continue;
		char key[32];
		snprintf(key, sizeof(key), "\n  peer %d (", p);
		const char *at = text ? strstr(text, key) : NULL;
		if (!at) {
			snprintf(why, len, "weft_info_print_transport_choice names no class for rank %d", p);
			rc = -1;
			break;
		}
		int other = strncmp(at + strlen(key), "other-host", 10) == 0;
		int want = kc_host_of(p) != kc_host_of(me);
		if (other == want)
			continue;
		if (!want)
			snprintf(why, len,
				 "rank %d was placed on this rank's host %d, but the core sees "
				 "it on another",
				 p, kc_host_of(me));
		else if (hosts.nns)
			snprintf(why, len,
				 "rank %d was placed on host %d (network namespace %s), but the "
				 "core sees it on "
				 "this rank's host %d",
				 p, kc_host_of(p), hosts.ns[kc_host_of(p)], kc_host_of(me));
		else
			snprintf(why, len,
				 "rank %d was placed on host %d (WEFT_TEST_HOST_ID=%d), but the "
				 "core sees it on "
				 "this rank's host %d: a libweft built without WEFT_TEST_HOOKS "
				 "ignores WEFT_TEST_HOST_ID "
				 "(--hosts-mode netns needs none)",
				 p, kc_host_of(p), kc_host_of(p), kc_host_of(me));
		rc = -1;
	}
	free(text);
	return rc;
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

/* In a rank: waits until the parent has forked every rank (EOF on the pipe).
 * The root of the ranks' rendezvous is a thread of the parent; a rank that
 * reached it while the parent still forked could have it allocating during a
 * fork, and under a sanitizer a later child then inherits the allocator's
 * lock held and hangs in its first malloc (docs/reliability.md). */
static void kc_start_gate(int gate[2])
{
	char c;
	close(gate[1]);
	while (read(gate[0], &c, 1) < 0 && errno == EINTR)
		;
	close(gate[0]);
}

/* Forks the ranks and waits for them: status[r] is rank r's wait status,
 * KC_HUNG or KC_KILLED. 0, or -1 when fork failed (*res says so). */
static int fork_wait(const struct kc_run *run, int *status, struct kc_result *res)
{
	int n = run->n;
	pid_t pids[KC_MAX_RANKS];
	int stopped[KC_MAX_RANKS] = {0};
	int gate[2];
	if (pipe(gate) != 0) {
		snprintf(res->reason, sizeof(res->reason), "pipe: %s", strerror(errno));
		res->status = KC_FAIL;
		return -1;
	}
	fflush(NULL);
	for (int r = 0; r < n; r++) {
		status[r] = KC_HUNG;
		pid_t pid = fork();
		if (pid == 0) {
			/* A rank must never outlive the check that made it. */
			alarm((unsigned)run->timeout_s + 5);
			kc_start_gate(gate);
			kc_keep_crashes();
			char why[512];
			if (hosts_enter(r, why, sizeof(why)) != 0) {
				note_fail(r, "cannot place this rank on host %d: %s", kc_host_of(r), why);
				_exit(KC_FAIL);
			}
			int rc = run->fn(r, n, run->arg);
			fflush(NULL);
			_exit(rc == 0 ? 0 : (rc < 0 ? 1 : rc & 0xff));
		}
		if (pid < 0) {
			snprintf(res->reason, sizeof(res->reason), "fork: %s", strerror(errno));
			res->status = KC_FAIL;
			close(gate[0]);
			close(gate[1]);
			kill_all(r, pids, status, KC_KILLED);
			return -1;
		}
		pids[r] = pid;
	}
	close(gate[0]);
	close(gate[1]); /* every rank is forked: they may start */
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
	char why[512];
	if (hosts_setup(why, sizeof(why)) != 0) {
		snprintf(res->reason, sizeof(res->reason), "cannot enter host 0 for the bootstrap's root: %s", why);
		return res->status = KC_FAIL;
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
