/* SPDX-License-Identifier: Apache-2.0 */
/* weft-plugin-check (tools/weft-plugin-check.c) run as a vendor runs it, on
 * plugin files of this build (tests/plugincheck.cmake names them): what it
 * prints, its reports and its exit status. Cases (CK_RUN_CASE):
 *   usage      --list, bad arguments, a file the core would not load, a file
 *              built for another ABI major, a file that crashes in its init;
 *   lazyflush  a transport whose flush returns before the target landed
 *              anything fails the remote-completion checks every time, and
 *              the same transport with a correct flush passes them; crashes
 *              are named; the TAP and JSON reports;
 *   shm        passes, quietly; the same-process skeleton cannot run (77);
 *   hosts      --hosts 2 by the test host identity: ofi and ucx pass over
 *              tcp between the hosts and shared memory within one, shm
 *              cannot run (77, no rank on another host), algo-host's
 *              algorithms pass on a comm spanning hosts;
 *   netns      --hosts 2 in network namespaces (root and ip netns; skips
 *              otherwise, fails under WEFT_REQUIRE_NETNS=1): ofi, ucx and
 *              algo-host over the veth; the namespaces are gone after the
 *              run, and after a SIGTERM in the middle of one. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "netns_lib.h"
#include "testlib.h"

#define LAZY_RUNS 20

/* Runs the tool with args (a shell fragment, env assignments may come
 * first), returns its output; *code is its exit status. */
static char *tool(int *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *tool(int *code, const char *fmt, ...)
{
	char *args, *cmd;
	va_list ap;
	va_start(ap, fmt);
	ck_assert_int_ge(vasprintf(&args, fmt, ap), 0);
	va_end(ap);
	const char *env = strchr(args, '|');
	/* "ENV=1 ENV2=2 | args": the part before | goes before the tool. */
	if (env)
		ck_assert_int_ge(asprintf(&cmd, "%.*s %s %s", (int)(env - args), args, PC_TOOL, env + 1), 0);
	else
		ck_assert_int_ge(asprintf(&cmd, "%s %s", PC_TOOL, args), 0);
	int st = 0;
	char *out = wt_run_capture(cmd, &st);
	ck_assert_ptr_nonnull(out);
	*code = WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
	printf("$ %s\n(exit %d)\n%s", cmd, *code, out);
	free(args);
	free(cmd);
	return out;
}

static int count_lines(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = s; *p;) {
		size_t len = strcspn(p, "\n");
		if (!needle || (memmem(p, len, needle, strlen(needle)) != NULL))
			n++;
		p += len + (p[len] == '\n');
	}
	return n;
}

#define HAS(out, text) ck_assert_msg(strstr((out), (text)) != NULL, "output lacks \"%s\"", (text))
#define LACKS(out, text) ck_assert_msg(strstr((out), (text)) == NULL, "output has \"%s\"", (text))

/* The report a run wrote into dir (malloc'd; the test fails without it). */
static char *report(const char *dir, const char *name)
{
	char *path;
	ck_assert_int_ge(asprintf(&path, "%s/%s", dir, name), 0);
	char *text = wt_read_file(path);
	ck_assert_msg(text != NULL, "no report %s", path);
	free(path);
	return text;
}

/* ---------------------------------------------------------------- usage */
START_TEST(list_and_refusals)
{
	int rc;
	char *out = tool(&rc, "--list");
	ck_assert_int_eq(rc, 0);
	HAS(out, "put/flush remote completion");
	HAS(out, "port/flush remote completion");
	HAS(out, "connect");
	HAS(out, "cuda/put");
	free(out);

	/* The numbered plan of a file: connect, then the selected check. */
	out = tool(&rc, "--list --np 2,3 --check 'put/flush remote*' %s", PC_LAZY);
	ck_assert_int_eq(rc, 0);
	HAS(out, "transport 'lazyflush'");
	HAS(out, "\n2 put/flush remote completion np=2\n");
	HAS(out, "\n4 put/flush remote completion np=3\n");
	HAS(out, "\n1..4\n");
	free(out);

	out = tool(&rc, "--np 1 %s", PC_LAZY);
	ck_assert_int_eq(rc, 2);
	HAS(out, "--np wants rank counts");
	free(out);
	out = tool(&rc, "--check no-such-check %s", PC_LAZY);
	ck_assert_int_eq(rc, 2);
	HAS(out, "no check matches 'no-such-check'");
	free(out);
	out = tool(&rc, "%s", "/nonexistent/libweft-x.so");
	ck_assert_int_eq(rc, 2);
	HAS(out, "is not a file");
	free(out);
	out = tool(&rc, "%s", "--bogus x");
	ck_assert_int_eq(rc, 2);
	free(out);

	/* Refused by the registry: exit 2 and the registry's own reason. */
	out = tool(&rc, "%s", PC_ABI1);
	ck_assert_int_eq(rc, 2);
	HAS(out, "was rejected by the registry: built for ABI 1.2, core speaks");
	free(out);

	/* A plugin that dies in weft_plugin_init is a crash, named. */
	out = tool(&rc, "%s", PC_CRASHINIT);
	ck_assert_int_eq(rc, 1);
	HAS(out, "CRASHED while loading");
	HAS(out, "SIGSEGV");
	free(out);
}
END_TEST

/* ------------------------------------------------------------ lazyflush */
START_TEST(lazy_flush_fails_every_time)
{
	int failed = 0;
	for (int i = 0; i < LAZY_RUNS; i++) {
		int rc;
		char *out = tool(&rc, "--np 2 --check 'put/flush remote completion' %s", PC_LAZY);
		/* Named from its descriptor, and its sibling that crashes in init
		 * was not loaded. */
		HAS(out, "transport 'lazyflush'");
		LACKS(out, "CRASHED");
		HAS(out, "ok 1 connect np=2\n");
		if (rc == 1 && strstr(out, "not ok 2 put/flush remote completion np=2\n") &&
		    strstr(out, "weft_flush returned 0 while the target was stopped"))
			failed++;
		free(out);
	}
	printf("plugincheck: the lazy flush failed %d of %d runs\n", failed, LAZY_RUNS);
	ck_assert_int_eq(failed, LAZY_RUNS);

	int rc;
	char *out = tool(&rc, "--np 2 --check 'port/flush remote completion' %s", PC_LAZY);
	ck_assert_int_eq(rc, 1);
	HAS(out, "not ok 2 port/flush remote completion np=2\n");
	HAS(out, "weft_port_flush returned 0 while the target was stopped");
	free(out);
}
END_TEST

START_TEST(correct_flush_passes)
{
	/* The same transport waiting for the target's acknowledgements: its
	 * flush completes once the stopped target is continued. */
	int rc;
	char *out = tool(&rc, "WEFT_LAZYFLUSH_CORRECT=1 | -v --np 2,3 --check 'flush remote completion' %s", PC_LAZY);
	ck_assert_int_eq(rc, 0);
	HAS(out, "ok 2 put/flush remote completion np=2\n");
	HAS(out, "ok 3 port/flush remote completion np=2\n");
	HAS(out, "ok 6 port/flush remote completion np=3\n");
	HAS(out, "after the target was continued (it waited for the target's progress)");
	HAS(out, "passed: 6 checks passed, 0 skipped");
	free(out);
}
END_TEST

START_TEST(crashes_are_named)
{
	int rc;
	char *out = tool(&rc, "WEFT_LAZYFLUSH_CRASH=connect | --np 2 --check sizes %s", PC_LAZY);
	ck_assert_int_eq(rc, 1);
	HAS(out, "not ok 1 connect np=2\n  # CRASHED: rank ");
	HAS(out, "died of SIGSEGV (signal 11)");
	LACKS(out, "could not connect");
	HAS(out, "ok 2 put/sizes np=2 # SKIP connect np=2 did not pass");
	free(out);
	out = tool(&rc, "WEFT_LAZYFLUSH_CRASH=put | --np 2 --check sizes %s", PC_LAZY);
	ck_assert_int_eq(rc, 1);
	HAS(out, "not ok 2 put/sizes np=2\n  # CRASHED: rank ");
	free(out);
}
END_TEST

START_TEST(reports)
{
	char *dir = wt_mkdtemp("plugincheck");
	ck_assert_ptr_nonnull(dir);
	int rc;
	char *out = tool(&rc, "--np 2 --check 'put/flush remote completion' --tap %s/r.tap --json %s/r.json %s", dir, dir,
			 PC_LAZY);
	ck_assert_int_eq(rc, 1);
	free(out);
	char *tap = report(dir, "r.tap");
	printf("TAP:\n%s", tap);
	HAS(tap, "TAP version 13\n1..2\n");
	HAS(tap, "ok 1 - connect np=2\n");
	HAS(tap, "not ok 2 - put/flush remote completion np=2\n  ---\n  status: fail\n  message: \"rank 0: weft_flush returned 0");
	HAS(tap, "  output: |\n");
	free(tap);
	char *json = report(dir, "r.json");
	printf("JSON:\n%s", json);
	HAS(json, "\"targets\": [{\"name\": \"lazyflush\", \"kind\": \"transport\"");
	HAS(json, "\"check\": \"put/flush remote completion\", \"np\": 2, \"status\": \"fail\"");
	HAS(json, "\"summary\": {\"pass\": 1, \"fail\": 1, \"crash\": 0, \"timeout\": 0, \"skip\": 0}");
	HAS(json, "\"exit\": 1\n}\n");
	free(json);

	/* --report: the report alone on stdout. */
	char *cmd;
	ck_assert_int_ge(asprintf(&cmd, "%s --report json --np 2 --check abort %s 2>/dev/null", PC_TOOL, PC_SHM), 0);
	int st;
	char *only = wt_run_capture(cmd, &st);
	free(cmd);
	ck_assert_ptr_nonnull(only);
	ck_assert_msg(only[0] == '{', "stdout is not the JSON report alone:\n%s", only);
	HAS(only, "\"exit\": 0");
	free(only);
	wt_rmdir(dir);
	free(dir);
}
END_TEST

/* ------------------------------------------------------------------ shm */
START_TEST(shm_passes_quietly)
{
	int rc;
	char *out = tool(&rc, "--np 2 %s", PC_SHM);
	ck_assert_int_eq(rc, 0);
	HAS(out, "transport 'shm'");
	HAS(out, "\nok 5 put/flush remote completion np=2\n");
	HAS(out, "\nok 8 port/flush remote completion np=2\n");
	HAS(out, "'shm' passed");
	/* The expected errors of bad arguments, peer killed and abort stay in
	 * the checks' own output. */
	ck_assert_int_eq(count_lines(out, " error "), 0);
	ck_assert_int_le(count_lines(out, NULL), 20);
	free(out);
}
END_TEST

START_TEST(skeleton_cannot_run)
{
	if (access(PC_SKELETON, R_OK) != 0) {
		printf("plugincheck: %s not built (example_plugin_skeleton makes it)\n", PC_SKELETON);
		return;
	}
	int rc;
	char *out = tool(&rc, "--np 2 %s", PC_SKELETON);
	ck_assert_int_eq(rc, 77);
	HAS(out, "transport 'skeleton'");
	HAS(out, "ok 1 connect np=2 # SKIP");
	HAS(out, "SKIPPED: nothing could run here");
	free(out);
}
END_TEST

/* ---------------------------------------------------------------- hosts */
#define HOSTS_ID "--hosts 2 --hosts-mode identity"
/* The checks that cross hosts at every rank: data, remote completion
 * (round k goes from rank k to k+1, on the other host), a dead peer. */
#define HOSTS_CHECKS "--check put/sizes --check 'put/flush remote completion' --check 'peer killed'"

/* The line of out that starts with prefix holds needle (a connection's
 * description, printed by the check with -v). */
static void line_has(const char *out, const char *prefix, const char *needle)
{
	const char *line = strstr(out, prefix);
	ck_assert_msg(line != NULL, "output lacks \"%s\"", prefix);
	size_t ll = strcspn(line, "\n");
	ck_assert_msg(memmem(line, ll, needle, strlen(needle)) != NULL, "\"%.*s\" lacks \"%s\"", (int)ll, line, needle);
}

static int built(const char *path, const char *what)
{
	if (path[0])
		return 1;
	printf("plugincheck: %s is not built here: not checked\n", what);
	return 0;
}

/* The tool, given these options and the shm file, refuses them (exit 2)
 * saying why. */
static void refused(const char *opts, const char *why)
{
	int rc;
	char *out = tool(&rc, "%s %s", opts, PC_SHM);
	ck_assert_int_eq(rc, 2);
	HAS(out, why);
	free(out);
}

START_TEST(hosts_usage)
{
	refused("--hosts 3", "--hosts wants 1 or 2");
	refused("--hosts 2 --hosts-mode vm", "--hosts-mode wants netns or identity");
	refused("--hosts-mode identity", "give --hosts 2 with it");
	refused("--jobs 0", "--jobs wants 1 to 16 checks at once, not '0'");
	refused("--jobs 2x", "--jobs wants 1 to 16");
	int rc;
	char *out = tool(&rc, "--help");
	ck_assert_int_eq(rc, 0);
	HAS(out, "--hosts N");
	HAS(out, "--hosts-mode M");
	HAS(out, "--jobs J");
	free(out);
}
END_TEST

/* Where namespaces cannot be made the tool says why and takes the host
 * identity, or, told --hosts-mode netns, stops with exit 2 and the reason.
 * An ip that refuses netns add stands in for a machine that does. */
START_TEST(hosts_fall_back)
{
	char *dir = wt_mkdtemp("plugincheck-ip");
	ck_assert_ptr_nonnull(dir);
	free(wt_write_file(dir, "ip",
			   "#!/bin/sh\necho 'mount --make-shared /run/netns failed: Operation not permitted'\n"
			   "exit 1\n"));
	char *ip;
	ck_assert_int_ge(asprintf(&ip, "%s/ip", dir), 0);
	ck_assert_int_eq(chmod(ip, 0755), 0);
	int rc;
	char *out = tool(&rc, "PATH=%s:$PATH | --hosts 2 --np 2 %s", dir, PC_SHM);
	ck_assert_int_eq(rc, 77);
	HAS(out, geteuid() == 0 ? "# two hosts: test host identity (netns refused: 'ip netns add wpc"
				: "# two hosts: test host identity (not root)");
	if (geteuid() == 0)
		HAS(out, "failed: mount --make-shared /run/netns failed: Operation not permitted): WEFT_TEST_HOST_ID");
	HAS(out, "it reaches no rank on another host");
	free(out);
	out = tool(&rc, "PATH=%s:$PATH | --hosts 2 --hosts-mode netns --np 2 %s", dir, PC_SHM);
	ck_assert_int_eq(rc, 2);
	HAS(out, "--hosts-mode netns: cannot make two network namespaces: ");
	LACKS(out, "\nok 1 ");
	free(out);
	free(ip);
	wt_rmdir(dir);
	free(dir);
}
END_TEST

/* A network transport between two hosts by the test host identity: every
 * check passes at 2 and 4 ranks, rank 0 reaches rank 1 (the other host)
 * over tcp and rank 2 (its own) over shared memory. */
static void network_on_two_hosts(const char *file, const char *name, const char *other, const char *same)
{
	int rc;
	char *out = tool(&rc, "-v " HOSTS_ID " --np 2,4 " HOSTS_CHECKS " %s", file);
	ck_assert_int_eq(rc, 0);
	HAS(out, "# two hosts: test host identity (--hosts-mode identity): WEFT_TEST_HOST_ID=r % 2, over 127.0.0.1\n");
	HAS(out, "\nok 1 connect np=2\n");
	HAS(out, "\nok 5 connect np=4\n");
	HAS(out, "\nok 8 peer killed np=4\n");
	HAS(out, "passed: 8 checks passed, 0 skipped");
	char want[128];
	snprintf(want, sizeof(want), "%s connection to rank 1 (the other host): ", name);
	line_has(out, want, other);
	snprintf(want, sizeof(want), "%s connection to rank 2 (this host): ", name);
	line_has(out, want, same);
	HAS(out, "the hosts are simulated on one machine");
	free(out);
}

START_TEST(ofi_on_two_hosts)
{
	if (built(PC_OFI, "libweft-ofi.so"))
		network_on_two_hosts(PC_OFI, "ofi", "provider=tcp", "provider=shm");
}
END_TEST

START_TEST(ucx_on_two_hosts)
{
	/* UCX names its transports: tcp on lo across, shared memory within. */
	if (built(PC_UCX, "libweft-ucx.so"))
		network_on_two_hosts(PC_UCX, "ucx", "transports=tcp/lo classes=tcp ", "classes=shm ");
}
END_TEST

START_TEST(shm_reaches_no_other_host)
{
	char *dir = wt_mkdtemp("plugincheck-hosts");
	ck_assert_ptr_nonnull(dir);
	int rc;
	char *out = tool(&rc, HOSTS_ID " --np 2,4 --tap %s/r.tap --json %s/r.json %s", dir, dir, PC_SHM);
	ck_assert_int_eq(rc, 77);
	HAS(out, "\nok 1 connect np=2 # SKIP rank ");
	HAS(out, "through 'shm': No route to host: it reaches no rank on another host");
	HAS(out, "'shm' SKIPPED: nothing could run here (rank ");
	LACKS(out, "not ok");
	free(out);
	/* The reports say how the hosts were made. */
	char *tap = report(dir, "r.tap");
	HAS(tap, "TAP version 13\n1..24\n# two hosts: test host identity (--hosts-mode identity)");
	free(tap);
	char *json = report(dir, "r.json");
	HAS(json, "\"hosts\": 2, \"hosts_mode\": \"identity\"");
	free(json);
	wt_rmdir(dir);
	free(dir);
}
END_TEST

/* A pack on a comm spanning hosts: the core joins the hosts with a
 * network transport and each host's ranks with shm (its debug log says
 * which, for every connection the algorithms make). */
static void pack_on_two_hosts(const char *mode)
{
	int rc;
	char *out = tool(&rc,
			 "WEFT_LOG_FILE=/dev/stderr WEFT_LOG_LEVEL=debug | -v --hosts 2 --hosts-mode %s --np 4 "
			 "--check allreduce-rsag/dtypes-ops --check allgather-direct/sizes %s",
			 mode, PC_ALGO_HOST);
	ck_assert_int_eq(rc, 0);
	HAS(out, "# two hosts: ");
	HAS(out, "\nok 2 allreduce-rsag/dtypes-ops np=4\n");
	HAS(out, "\nok 3 allgather-direct/sizes np=4\n");
	HAS(out, "'algo-host' passed: 3 checks passed, 0 skipped");
	HAS(out, " (other-host peer, host memory)");
	HAS(out, "through shm (same-host peer, host memory)");
	LACKS(out, "through shm (other-host");
	free(out);
}

START_TEST(pack_on_two_hosts_identity)
{
	if (built(PC_ALGO_HOST, "libweft-algo-host.so"))
		pack_on_two_hosts("identity");
}
END_TEST

/* ---------------------------------------------------------------- netns */
/* The namespaces a run named on its '# two hosts:' line, "a b". */
static void ns_names(const char *out, char *names, size_t len)
{
	const char *at = strstr(out, "# two hosts: network namespaces ");
	ck_assert_msg(at != NULL, "no '# two hosts: network namespaces' line");
	at += strlen("# two hosts: network namespaces ");
	int k = (int)strcspn(at, "/");
	int m = (int)strcspn(at + k + 1, " ");
	snprintf(names, len, "%.*s %.*s", k, at, m, at + k + 1);
}

static void ns_gone(const char *names)
{
	int st;
	char *list = wt_run_capture("ip netns list", &st);
	ck_assert_ptr_nonnull(list);
	char a[64], b[64];
	ck_assert_int_eq(sscanf(names, "%63s %63s", a, b), 2);
	ck_assert_msg(strstr(list, a) == NULL && strstr(list, b) == NULL, "%s or %s is still there:\n%s", a, b, list);
	printf("plugincheck: %s and %s are gone\n", a, b);
	free(list);
}

static void network_over_veth(const char *file, const char *name, const char *other)
{
	int rc;
	char *out = tool(&rc, "-v --hosts 2 --hosts-mode netns --np 2,4 --check put/sizes %s", file);
	ck_assert_int_eq(rc, 0);
	HAS(out, "\nok 4 put/sizes np=4\n");
	char names[160];
	ns_names(out, names, sizeof(names));
	char want[200];
	snprintf(want, sizeof(want), "%s connection to rank 1 (the other host): ", name);
	line_has(out, want, other);
	const char *line = strstr(out, want);
	size_t ll = strcspn(line, "\n");
	ck_assert_msg(memmem(line, ll, "127.0.0.1", 9) == NULL && memmem(line, ll, "tcp/lo", 6) == NULL,
		      "rank 0 to 1 went over loopback: %.*s", (int)ll, line);
	free(out);
	ns_gone(names);
}

START_TEST(ofi_over_veth)
{
	/* libfabric's tcp to the other namespace's veth address. */
	if (built(PC_OFI, "libweft-ofi.so"))
		network_over_veth(PC_OFI, "ofi", "peer=fi_sockaddr_in://10.251.");
}
END_TEST

START_TEST(ucx_over_veth)
{
	/* UCX's tcp on this namespace's veth (named as the namespace). */
	if (built(PC_UCX, "libweft-ucx.so"))
		network_over_veth(PC_UCX, "ucx", "transports=tcp/wpc");
}
END_TEST

START_TEST(pack_on_two_hosts_netns)
{
	if (built(PC_ALGO_HOST, "libweft-algo-host.so"))
		pack_on_two_hosts("netns");
}
END_TEST

/* SIGTERM while a check runs: the tool says so, exits 1, and removes its
 * namespaces. */
START_TEST(netns_removed_after_a_signal)
{
	const char *net = PC_OFI[0] ? PC_OFI : PC_UCX;
	if (!built(net, "a network transport (ofi, ucx)"))
		return;
	char *dir = wt_mkdtemp("plugincheck-sig");
	ck_assert_ptr_nonnull(dir);
	char *log, *cmd;
	ck_assert_int_ge(asprintf(&log, "%s/out", dir), 0);
	ck_assert_int_ge(asprintf(&cmd,
				  "exec %s --hosts 2 --hosts-mode netns --np 4 --check 'remote completion' %s >%s 2>&1",
				  PC_TOOL, net, log),
			 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	char *out = NULL;
	int running = 0;
	for (int i = 0; i < 600 && !running; i++) {
		usleep(50000);
		free(out);
		out = wt_read_file(log);
		running = out && strstr(out, "\nok 1 connect np=4\n") != NULL;
	}
	ck_assert_msg(running, "the run did not get past connect:\n%s", out ? out : "");
	ck_assert_int_eq(kill(pid, SIGTERM), 0);
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	free(out);
	out = wt_read_file(log);
	printf("%s(exit %d)\n", out, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	HAS(out, "interrupted by SIGTERM");
	char names[160];
	ns_names(out, names, sizeof(names));
	ns_gone(names);
	free(out);
	free(log);
	free(cmd);
	wt_rmdir(dir);
	free(dir);
}
END_TEST

/* Whether this machine lets us make network namespaces: NULL, or why not. */
static const char *netns_refused(void)
{
	static char why[512];
	if (geteuid() != 0)
		return "not root (network namespaces need CAP_SYS_ADMIN)";
	int st;
	char name[32], *cmd;
	snprintf(name, sizeof(name), "wpct%d", (int)getpid());
	if (asprintf(&cmd, "ip netns add %s && ip netns delete %s", name, name) < 0)
		return "out of memory";
	char *out = wt_run_capture(cmd, &st);
	free(cmd);
	int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	snprintf(why, sizeof(why), "ip netns add refused: %.*s", out ? (int)strcspn(out, "\n") : 0, out ? out : "");
	free(out);
	return ok ? NULL : why;
}

int main(void)
{
	/* The test plugins die by SIGSEGV on purpose, and the checker must see
	 * the signal: under ASan its handler would turn that into exit 1. */
	const char *asan = getenv("ASAN_OPTIONS");
	char opts[1024];
	snprintf(opts, sizeof(opts), "%s%shandle_segv=0", asan ? asan : "", asan && *asan ? ":" : "");
	setenv("ASAN_OPTIONS", opts, 1);
	/* The netns case needs namespaces; without them it skips, saying why. */
	const char *only = getenv("CK_RUN_CASE");
	const char *why = only && strcmp(only, "netns") == 0 ? netns_refused() : NULL;
	if (why)
		return wt_netns_skip(why);
	Suite *s = suite_create("plugincheck");
	TCase *tc = tcase_create("usage");
	tcase_add_test(tc, list_and_refusals);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	tc = tcase_create("lazyflush");
	tcase_add_test(tc, lazy_flush_fails_every_time);
	tcase_add_test(tc, correct_flush_passes);
	tcase_add_test(tc, crashes_are_named);
	tcase_add_test(tc, reports);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	tc = tcase_create("shm");
	tcase_add_test(tc, shm_passes_quietly);
	tcase_add_test(tc, skeleton_cannot_run);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	tc = tcase_create("hosts");
	tcase_add_test(tc, hosts_usage);
	tcase_add_test(tc, hosts_fall_back);
	tcase_add_test(tc, ofi_on_two_hosts);
	tcase_add_test(tc, ucx_on_two_hosts);
	tcase_add_test(tc, shm_reaches_no_other_host);
	tcase_add_test(tc, pack_on_two_hosts_identity);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	tc = tcase_create("netns");
	tcase_add_test(tc, ofi_over_veth);
	tcase_add_test(tc, ucx_over_veth);
	tcase_add_test(tc, pack_on_two_hosts_netns);
	tcase_add_test(tc, netns_removed_after_a_signal);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
