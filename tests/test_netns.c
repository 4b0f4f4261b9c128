/* SPDX-License-Identifier: Apache-2.0 */
/* Two "hosts" on one machine: network namespaces joined by a veth pair, one
 * rank in each, the bootstrap on the veth addresses and a connection through
 * the transport named by WEFT_TEST_TRANSPORT (ofi or ucx) that must really run
 * over tcp on the veth, not shared memory and not loopback. Needs root and
 * `ip netns`; skips (77) without them unless WEFT_REQUIRE_NETNS=1. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <weft/weft.h>

#include "testlib.h"

/* Names and addresses unique per test process, so ctest -j never collides:
 * namespaces wt<transport><pid>a/b, veths w<t><pid>a/b, 10.250.X.(4Y+1 | 4Y+2)/30. */
static char ns_name[2][32], veth[2][16], ip_addr[2][20];
static const char *transport = "ucx";
static int have_ns[2];
static pid_t main_pid; /* only the process that made the namespaces removes them */

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

static void cleanup(void)
{
	if (getpid() != main_pid)
		return;
	for (int i = 0; i < 2; i++) {
		if (have_ns[i]) {
			/* Deleting a namespace deletes the veth end in it, and with it the pair. */
			sh("ip netns delete %s", ns_name[i]);
			have_ns[i] = 0;
		}
	}
}

static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int setup_netns(void)
{
	unsigned pid = (unsigned)getpid();
	unsigned x = (pid / 64) % 256, y = pid % 64;
	for (int i = 0; i < 2; i++) {
		snprintf(ns_name[i], sizeof(ns_name[i]), "wt%.3s%u%c", transport, pid, 'a' + i);
		snprintf(veth[i], sizeof(veth[i]), "w%c%u%c", transport[0], pid % 10000000u, 'a' + i);
		snprintf(ip_addr[i], sizeof(ip_addr[i]), "10.250.%u.%u", x, 4 * y + 1 + (unsigned)i);
	}
	for (int i = 0; i < 2; i++) {
		if (sh("ip netns add %s", ns_name[i]) < 0)
			return -1;
		have_ns[i] = 1;
	}
	if (sh("ip link add %s netns %s type veth peer name %s netns %s", veth[0], ns_name[0], veth[1], ns_name[1]) < 0)
		return -1;
	for (int i = 0; i < 2; i++) {
		if (sh("ip -n %s addr add %s/30 dev %s", ns_name[i], ip_addr[i], veth[i]) < 0 ||
		    sh("ip -n %s link set %s up", ns_name[i], veth[i]) < 0 ||
		    sh("ip -n %s link set lo up", ns_name[i]) < 0)
			return -1;
	}
	/* UCX lists a network device only once it is fully up (carrier on, no
	 * address still tentative): wait for that, as a host would at boot. */
	for (int tries = 0; tries < 200; tries++) {
		int ready = 0;
		for (int i = 0; i < 2; i++) {
			char cmd[256];
			int st;
			snprintf(cmd, sizeof(cmd), "ip -n %s -o link show dev %s; ip -n %s -o addr show dev %s", ns_name[i],
				 veth[i], ns_name[i], veth[i]);
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

static int enter_ns(int i)
{
	char path[128];
	snprintf(path, sizeof(path), "/var/run/netns/%s", ns_name[i]);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "open %s: %s\n", path, strerror(errno));
		return -1;
	}
	int rc = setns(fd, CLONE_NEWNET);
	close(fd);
	if (rc < 0) {
		fprintf(stderr, "setns %s: %s\n", ns_name[i], strerror(errno));
		return -1;
	}
	/* As `ip netns exec` does: a private mount namespace with /sys remounted,
	 * so that /sys/class/net (where UCX finds its devices) shows this
	 * namespace's interfaces. */
	if (unshare(CLONE_NEWNS) < 0 || mount("", "/", NULL, MS_SLAVE | MS_REC, NULL) < 0) {
		fprintf(stderr, "private mount namespace: %s\n", strerror(errno));
		return -1;
	}
	if (umount2("/sys", MNT_DETACH) < 0 && errno != EINVAL) {
		fprintf(stderr, "umount /sys: %s\n", strerror(errno));
		return -1;
	}
	if (mount(ns_name[i], "/sys", "sysfs", 0, NULL) < 0) {
		fprintf(stderr, "mount sysfs: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static unsigned char pat(uint64_t seed, uint64_t i)
{
	uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (i * 0xBF58476D1CE4E5B9ull);
	x ^= x >> 29;
	x *= 0x94D049BB133111EBull;
	return (unsigned char)(x >> 32);
}

struct ns_arg {
	int idpipe[2];
};

#define BUF (8u << 20)

static int rank_main(int rank, int n, void *argp)
{
	struct ns_arg *a = argp;
	if (enter_ns(rank) < 0)
		return 2;
	/* The bootstrap and the transport's tcp on this namespace's veth, nothing
	 * else (ofi binds tcp to the bootstrap's address by default). */
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", ip_addr[rank], 1);
	if (strcmp(transport, "ucx") == 0)
		setenv("WEFT_UCX_NET_DEVICES", veth[rank], 1);
	struct weft_unique_id id;
	if (rank == 0) {
		close(a->idpipe[0]);
		ROK(weft_get_unique_id(&id));
		RCHECK(write(a->idpipe[1], &id, sizeof(id)) == (ssize_t)sizeof(id), "write id");
		close(a->idpipe[1]);
	} else {
		close(a->idpipe[1]);
		size_t got = 0;
		while (got < sizeof(id)) {
			ssize_t r = read(a->idpipe[0], (char *)&id + got, sizeof(id) - got);
			RCHECK(r > 0, "read id");
			got += (size_t)r;
		}
		close(a->idpipe[0]);
	}
	weft_comm_t *comm;
	ROK(weft_comm_create(&id, n, rank, &comm));
	int peer = 1 - rank;
	weft_conn_t *conn;
	ROK(weft_connect(comm, peer, transport, &conn));
	unsigned char *src = NULL, *dst = NULL;
	RCHECK(posix_memalign((void **)&src, 4096, BUF) == 0 && posix_memalign((void **)&dst, 4096, BUF) == 0, "alloc");
	memset(dst, 0, BUF);
	for (uint64_t i = 0; i < BUF; i++)
		src[i] = pat((uint64_t)rank, i);
	weft_mem_t *msrc, *mdst;
	ROK(weft_mem_register(comm, src, BUF, WEFT_MEM_HOST, &msrc));
	ROK(weft_mem_register(comm, dst, BUF, WEFT_MEM_HOST, &mdst));
	weft_rmem_t *rdst;
	ROK(weft_mem_exchange(mdst, peer, &rdst));
	weft_sem_t *sem;
	weft_rsem_t *rsem;
	ROK(weft_sem_create(comm, &sem));
	ROK(weft_sem_exchange(sem, peer, &rsem));
	/* Both directions at once: many puts at odd offsets, then the signal. */
	static const size_t sizes[] = {1, 7, 4097, 65539, (1u << 20) + 3, (5u << 20) + 11};
	uint64_t off = 1;
	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		ROK(weft_put(conn, rdst, off, msrc, off, sizes[k]));
		off += sizes[k] + 13;
	}
	ROK(weft_signal(conn, rsem, 1));
	ROK(weft_sem_wait(sem, 1));
	off = 1;
	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		for (uint64_t i = off; i < off + sizes[k]; i++)
			RCHECK(dst[i] == pat((uint64_t)peer, i), "put %u: byte %llu differs when the signal arrived", k,
			       (unsigned long long)i);
		RCHECK(dst[off + sizes[k]] == 0, "put %u wrote past its end", k);
		off += sizes[k] + 13;
	}
	ROK(weft_flush(conn));
	char desc[1024];
	ROK(weft_conn_describe(conn, desc, sizeof(desc)));
	printf("netns: rank %d (%s in %s): %s\n", rank, ip_addr[rank], ns_name[rank], desc);
	if (strcmp(transport, "ucx") == 0) {
		char want[64];
		snprintf(want, sizeof(want), "tcp/%s", veth[rank]);
		RCHECK(strstr(desc, " classes=tcp ") && strstr(desc, want), "UCX did not carry this over tcp on %s: %s",
		       veth[rank], desc);
		RCHECK(!strstr(desc, "tcp/lo"), "tcp over loopback across namespaces: %s", desc);
	} else {
		/* ofi: the provider must be tcp, and the peer's address the other
		 * namespace's veth address, so neither shm nor loopback carried it. */
		RCHECK(strstr(desc, "provider=tcp") != NULL, "libfabric did not use its tcp provider: %s", desc);
		RCHECK(strstr(desc, ip_addr[peer]) != NULL, "the peer is not reached at %s: %s", ip_addr[peer], desc);
	}
	ROK(weft_comm_barrier(comm));
	ROK(weft_rsem_release(rsem));
	ROK(weft_sem_destroy(sem));
	ROK(weft_rmem_release(rdst));
	ROK(weft_mem_deregister(msrc));
	ROK(weft_mem_deregister(mdst));
	ROK(weft_conn_close(conn));
	ROK(weft_comm_destroy(comm));
	free(src);
	free(dst);
	return 0;
}

START_TEST(transport_over_veth)
{
	struct ns_arg a;
	ck_assert_int_eq(pipe(a.idpipe), 0);
	int bad = wt_fork_ranks(2, rank_main, &a, 100);
	close(a.idpipe[0]);
	close(a.idpipe[1]);
	ck_assert_msg(bad == 0, "%d rank(s) failed", bad);
}
END_TEST

static int skip(const char *why)
{
	const char *req = getenv("WEFT_REQUIRE_NETNS");
	if (req && strcmp(req, "1") == 0) {
		fprintf(stderr, "netns: FAIL: %s (WEFT_REQUIRE_NETNS=1)\n", why);
		return 1;
	}
	printf("netns: SKIP: %s\n", why);
	return WT_SKIP;
}

int main(void)
{
	const char *t = getenv("WEFT_TEST_TRANSPORT");
	if (t && *t)
		transport = t;
	if (geteuid() != 0)
		return skip("not root (network namespaces need CAP_SYS_ADMIN)");
	int st;
	char *out = wt_run_capture("ip netns list", &st);
	free(out);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return skip("`ip netns` is unavailable");
	main_pid = getpid();
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	atexit(cleanup);
	if (setup_netns() < 0) {
		cleanup();
		return skip("cannot create network namespaces and a veth pair here");
	}
	/* The ranks share no host id (one per network namespace), so the
	 * transports treat each other as other hosts. */
	setenv("WEFT_CORE_PEER_TIMEOUT", "10", 0);
	Suite *s = suite_create("netns");
	TCase *tc = tcase_create("veth");
	tcase_set_timeout(tc, 110);
	tcase_add_test(tc, transport_over_veth);
	suite_add_tcase(s, tc);
	int rc = wt_run_suite(s);
	cleanup();
	return rc;
}
