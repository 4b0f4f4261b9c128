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
 *   shm        passes, quietly; the same-process skeleton cannot run (77). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
		/* Named from its descriptor, not from the file (libweft-tp-lazyflush.so),
		 * and its sibling that crashes in init was not loaded. */
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
	char *path;
	ck_assert_int_ge(asprintf(&path, "%s/r.tap", dir), 0);
	char *tap = wt_read_file(path);
	free(path);
	ck_assert_ptr_nonnull(tap);
	printf("TAP:\n%s", tap);
	HAS(tap, "TAP version 13\n1..2\n");
	HAS(tap, "ok 1 - connect np=2\n");
	HAS(tap, "not ok 2 - put/flush remote completion np=2\n  ---\n  status: fail\n  message: \"rank 0: weft_flush returned 0");
	HAS(tap, "  output: |\n");
	free(tap);
	ck_assert_int_ge(asprintf(&path, "%s/r.json", dir), 0);
	char *json = wt_read_file(path);
	free(path);
	ck_assert_ptr_nonnull(json);
	printf("JSON:\n%s", json);
	HAS(json, "\"targets\": [{\"name\": \"lazyflush\", \"kind\": \"transport\"");
	HAS(json, "\"check\": \"put/flush remote completion\", \"np\": 2, \"status\": \"fail\"");
	HAS(json, "\"summary\": {\"pass\": 1, \"fail\": 1, \"crash\": 0, \"timeout\": 0, \"skip\": 0}");
	HAS(json, "\"exit\": 1\n}\n");
	free(json);

	/* --report: the report alone on stdout. */
	ck_assert_int_ge(asprintf(&path, "%s --report json --np 2 --check abort %s 2>/dev/null", PC_TOOL, PC_SHM), 0);
	int st;
	char *only = wt_run_capture(path, &st);
	free(path);
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

int main(void)
{
	/* The test plugins die by SIGSEGV on purpose, and the checker must see
	 * the signal: under ASan its handler would turn that into exit 1. */
	const char *asan = getenv("ASAN_OPTIONS");
	char opts[1024];
	snprintf(opts, sizeof(opts), "%s%shandle_segv=0", asan ? asan : "", asan && *asan ? ":" : "");
	setenv("ASAN_OPTIONS", opts, 1);
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
	return wt_run_suite(s);
}
