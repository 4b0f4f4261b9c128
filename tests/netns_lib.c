/* SPDX-License-Identifier: Apache-2.0 */
/* Network namespaces for tests (netns_lib.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "netns_lib.h"
#include "testlib.h"

static struct wt_netns *g_made; /* what the signal handler and atexit remove */

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int st;
	char *out = wt_run_capture(cmd, &st);
	int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	if (!ok)
		fprintf(stderr, "netns: '%s' failed: %s\n", cmd, out ? out : "");
	free(out);
	return ok ? 0 : -1;
}

const char *wt_netns_unavailable(void)
{
	if (geteuid() != 0)
		return "not root (network namespaces need CAP_SYS_ADMIN)";
	int st;
	char *out = wt_run_capture("ip netns list", &st);
	free(out);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return "`ip netns` is unavailable";
	return NULL;
}

void wt_netns_cleanup(struct wt_netns *n)
{
	if (!n || getpid() != n->owner)
		return;
	for (int i = 0; i < 2; i++)
		if (n->have[i]) {
			/* Deleting a namespace deletes the veth end in it, and with it the pair. */
			sh("ip netns delete %s", n->ns[i]);
			n->have[i] = 0;
		}
}

static void cleanup_at_exit(void)
{
	wt_netns_cleanup(g_made);
}

static void on_signal(int sig)
{
	wt_netns_cleanup(g_made);
	signal(sig, SIG_DFL);
	raise(sig);
}

int wt_netns_setup(struct wt_netns *n, const char *tag)
{
	unsigned pid = (unsigned)getpid();
	unsigned x = (pid / 64) % 256, y = pid % 64;
	memset(n, 0, sizeof(*n));
	n->owner = (int)pid;
	for (int i = 0; i < 2; i++) {
		snprintf(n->ns[i], sizeof(n->ns[i]), "wt%.3s%u%c", tag, pid, 'a' + i);
		snprintf(n->veth[i], sizeof(n->veth[i]), "w%c%u%c", tag[0], pid % 10000000u, 'a' + i);
		snprintf(n->addr[i], sizeof(n->addr[i]), "10.250.%u.%u", x, 4 * y + 1 + (unsigned)i);
	}
	g_made = n;
	atexit(cleanup_at_exit);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	for (int i = 0; i < 2; i++) {
		if (sh("ip netns add %s", n->ns[i]) < 0)
			return -1;
		n->have[i] = 1;
	}
	if (sh("ip link add %s netns %s type veth peer name %s netns %s", n->veth[0], n->ns[0], n->veth[1], n->ns[1]) < 0)
		return -1;
	for (int i = 0; i < 2; i++)
		if (sh("ip -n %s addr add %s/30 dev %s", n->ns[i], n->addr[i], n->veth[i]) < 0 ||
		    sh("ip -n %s link set %s up", n->ns[i], n->veth[i]) < 0 || sh("ip -n %s link set lo up", n->ns[i]) < 0)
			return -1;
	/* UCX lists a network device only once it is fully up (carrier on, no
	 * address still tentative): wait for that, as a host would at boot. */
	for (int tries = 0; tries < 200; tries++) {
		int ready = 0;
		for (int i = 0; i < 2; i++) {
			char cmd[256];
			int st;
			snprintf(cmd, sizeof(cmd), "ip -n %s -o link show dev %s; ip -n %s -o addr show dev %s", n->ns[i],
				 n->veth[i], n->ns[i], n->veth[i]);
			char *out = wt_run_capture(cmd, &st);
			if (out && strstr(out, "state UP") && !strstr(out, "tentative"))
				ready++;
			free(out);
		}
		if (ready == 2)
			return 0;
		usleep(50000);
	}
	fprintf(stderr, "netns: the veth pair did not come up within 10 s\n");
	return -1;
}

int wt_netns_enter(const struct wt_netns *n, int i)
{
	char path[128];
	snprintf(path, sizeof(path), "/var/run/netns/%s", n->ns[i]);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "open %s: %s\n", path, strerror(errno));
		return -1;
	}
	int rc = setns(fd, CLONE_NEWNET);
	close(fd);
	if (rc < 0) {
		fprintf(stderr, "setns %s: %s\n", n->ns[i], strerror(errno));
		return -1;
	}
	if (unshare(CLONE_NEWNS) < 0 || mount("", "/", NULL, MS_SLAVE | MS_REC, NULL) < 0) {
		fprintf(stderr, "private mount namespace: %s\n", strerror(errno));
		return -1;
	}
	if (umount2("/sys", MNT_DETACH) < 0 && errno != EINVAL) {
		fprintf(stderr, "umount /sys: %s\n", strerror(errno));
		return -1;
	}
	if (mount(n->ns[i], "/sys", "sysfs", 0, NULL) < 0) {
		fprintf(stderr, "mount sysfs: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

void wt_netns_env(const struct wt_netns *n, int i)
{
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", n->addr[i], 1);
	setenv("WEFT_OFI_ADDR", n->addr[i], 1);
	setenv("WEFT_OFI_IFACE", n->veth[i], 1);
	setenv("WEFT_UCX_NET_DEVICES", n->veth[i], 1);
}

int wt_netns_skip(const char *why)
{
	const char *req = getenv("WEFT_REQUIRE_NETNS");
	if (req && strcmp(req, "1") == 0) {
		fprintf(stderr, "netns: FAIL: %s (WEFT_REQUIRE_NETNS=1)\n", why);
		return 1;
	}
	printf("netns: SKIP: %s\n", why);
	return WT_SKIP;
}

int wt_netns_prepare(struct wt_netns *n, const char *tag)
{
	const char *why = wt_netns_unavailable();
	if (why)
		return wt_netns_skip(why);
	if (wt_netns_setup(n, tag) < 0) {
		wt_netns_cleanup(n);
		return wt_netns_skip("cannot create network namespaces and a veth pair here");
	}
	return 0;
}

int wt_id_pipe_open(struct wt_id_pipe *p, int readers)
{
	p->readers = readers;
	return pipe(p->fd);
}

void wt_id_pipe_close(struct wt_id_pipe *p)
{
	close(p->fd[0]);
	close(p->fd[1]);
}

int wt_id_share(struct wt_id_pipe *p, int maker, struct weft_unique_id *id)
{
	if (maker) {
		close(p->fd[0]);
		int rc = weft_get_unique_id(id);
		/* Each reader takes one copy; a copy is smaller than PIPE_BUF, so
		 * no two readers' reads interleave. */
		for (int k = 0; k < p->readers && rc == 0; k++)
			if (write(p->fd[1], id, sizeof(*id)) != (ssize_t)sizeof(*id))
				rc = -EIO;
		close(p->fd[1]);
		return rc;
	}
	close(p->fd[1]);
	size_t got = 0;
	while (got < sizeof(*id)) {
		ssize_t r = read(p->fd[0], (char *)id + got, sizeof(*id) - got);
		if (r <= 0)
			return -EIO;
		got += (size_t)r;
	}
	close(p->fd[0]);
	return 0;
}
