/* SPDX-License-Identifier: Apache-2.0 */
/* weft-perf --op put|pingpong --mem cuda. Without a GPU (test_perfgpu): the
 * GPU library (libweft-perf-gpu.so) is found beside libweft.so, or named by
 * WEFT_PERF_GPU_LIB; without a device, without the library, or with a library
 * that is not weft-perf's, the run ends with one message and exit 1. On GPUs
 * (test_perfgpu_gpu): small sweeps whose tables pass their data checks. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testlib.h"

static const char *perf(void)
{
	const char *p = getenv("WEFT_TEST_PERF");
	ck_assert_msg(p && *p, "WEFT_TEST_PERF must name the weft-perf binary");
	return p;
}

/* Runs `env ENV weft-perf ARGS` with every GPU hidden, bounded by timeout(1).
 * *code is the exit code, -1 when it did not exit on its own (a crash). */
static char *run(int *code, const char *env, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static char *run(int *code, const char *env, const char *fmt, ...)
{
	char args[1024], cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "env CUDA_VISIBLE_DEVICES= %s timeout -s KILL 60 %s %s </dev/null", env, perf(),
		 args);
	int st = 0;
	char *out = wt_run_capture(cmd, &st);
	ck_assert_ptr_nonnull(out);
	*code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return out;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* No table, no rank started: the refusal comes before anything runs. */
static void assert_nothing_ran(const char *args, const char *out)
{
	ck_assert_msg(!strstr(out, "# Out of bounds") && !strstr(out, "# weft-perf:") && !strstr(out, "rank 0 failed"),
		      "'%s': something ran before the refusal:\n%s", args, out);
}

static const struct {
	const char *args, *op;
} no_gpu_cases[] = {
	{"--np 2 --op put --mem cuda", "put"},
	{"--np 2 --op pingpong --mem cuda", "pingpong"},
	{"--np 2 --op put --mem cuda -b 4 -e 1K -n 2 -w 1", "put"},
	{"--op pingpong --mem cuda", "pingpong"}, /* no --np and no launcher: the GPU is checked first */
	{"--np 3 --op ping-pong --mem cuda --transport nvlink", "pingpong"},
};

/* The library where weft-perf looks for it (when this build made one) and no
 * device: "no CUDA device", once, exit 1. Without the library: that it could
 * not be loaded, naming where it looked. */
START_TEST(no_gpu_fails_with_one_message)
{
	const char *args = no_gpu_cases[_i].args, *lib = getenv("WEFT_TEST_PERF_GPU_LIB");
	char head[128];
	int code;
	char *out = run(&code, "WEFT_PERF_GPU_LIB=", "%s", args);
	ck_assert_msg(code == 1, "'%s' without a GPU exited %d, not 1:\n%s", args, code, out);
	snprintf(head, sizeof(head), "weft-perf: --op %s --mem cuda", no_gpu_cases[_i].op);
	ck_assert_msg(count(out, head) == 1, "'%s': expected one message starting '%s':\n%s", args, head, out);
	if (lib && *lib)
		ck_assert_msg(strstr(out, "no CUDA device"), "'%s': the message does not say there is no CUDA device:\n%s",
			      args, out);
	else
		ck_assert_msg(strstr(out, "libweft-perf-gpu.so") && strstr(out, "could not be loaded"),
			      "'%s': the message does not name the missing library:\n%s", args, out);
	assert_nothing_ran(args, out);
	free(out);
}
END_TEST

START_TEST(missing_library_is_named)
{
	char *dir = wt_mkdtemp("perfgpu");
	char env[1024];
	snprintf(env, sizeof(env), "WEFT_PERF_GPU_LIB=%s/nothere.so", dir);
	int code;
	char *out = run(&code, env, "--np 2 --op put --mem cuda");
	ck_assert_msg(code == 1, "exited %d, not 1:\n%s", code, out);
	ck_assert_msg(strstr(out, env + strlen("WEFT_PERF_GPU_LIB=")) && strstr(out, "could not be loaded"),
		      "the message does not name the library it could not load:\n%s", out);
	assert_nothing_ran("--op put", out);
	free(out);
	wt_rmdir(dir);
	free(dir);
}
END_TEST

/* A file that is no shared object, and a shared object that is not weft-perf's. */
START_TEST(foreign_library_is_refused)
{
	char *dir = wt_mkdtemp("perfgpu");
	char *junk = wt_write_file(dir, "libweft-perf-gpu.so", "\x7f" "ELF but not really\n");
	char env[1024];
	int code;
	snprintf(env, sizeof(env), "WEFT_PERF_GPU_LIB=%s", junk);
	char *out = run(&code, env, "--np 2 --op pingpong --mem cuda");
	ck_assert_msg(code == 1, "a corrupt library: exited %d, not 1:\n%s", code, out);
	ck_assert_msg(strstr(out, junk) && strstr(out, "could not be loaded"), "a corrupt library:\n%s", out);
	assert_nothing_ran("corrupt", out);
	free(out);

	const char *libweft = getenv("WEFT_TEST_LIBWEFT");
	ck_assert_msg(libweft && *libweft, "WEFT_TEST_LIBWEFT must name libweft.so");
	snprintf(env, sizeof(env), "WEFT_PERF_GPU_LIB=%s", libweft);
	out = run(&code, env, "--np 2 --op put --mem cuda");
	ck_assert_msg(code == 1, "libweft.so as the GPU library: exited %d, not 1:\n%s", code, out);
	ck_assert_msg(strstr(out, "weft_perf_gpu_probe") && strstr(out, "not weft-perf's GPU library"),
		      "libweft.so as the GPU library: the message does not say what is wrong:\n%s", out);
	assert_nothing_ran("libweft", out);
	free(out);
	free(junk);
	wt_rmdir(dir);
	free(dir);
}
END_TEST

/* Flags the GPU benchmarks cannot honour: exit 2 naming the flag. */
static const struct {
	const char *args, *names;
} bad_flags[] = {
	{"--np 2 --op put --mem cuda --fresh-buffers", "--fresh-buffers"},
	{"--np 2 --op pingpong --mem cuda --transport nvlink,shm", "--transport"},
	{"--np 2 --op put --mem cuda --graph 2", "--graph"},
	{"--np 1 --op put --mem cuda", "2 ranks"},
};

START_TEST(bad_flags_exit_2)
{
	int code;
	char *out = run(&code, "", "%s", bad_flags[_i].args);
	ck_assert_msg(code == 2, "'%s' exited %d, not 2:\n%s", bad_flags[_i].args, code, out);
	ck_assert_msg(strstr(out, bad_flags[_i].names), "'%s': the message does not name '%s':\n%s",
		      bad_flags[_i].args, bad_flags[_i].names, out);
	free(out);
}
END_TEST

/* The help says where the GPU rows come from. */
START_TEST(help_describes_the_gpu_rows)
{
	int code;
	char *out = run(&code, "", "-h");
	ck_assert_int_eq(code, 0);
	ck_assert_msg(strstr(out, "libweft-perf-gpu.so") && strstr(out, "WEFT_PERF_GPU_TIMEOUT"),
		      "weft-perf -h does not describe --op put|pingpong --mem cuda:\n%s", out);
	free(out);
}
END_TEST

/* ------------------------------------------------------------ on GPUs
 * (test_perfgpu_gpu, label gpu): small sweeps through the real thing, at odd
 * sizes; every table's data check must pass. Without a GPU: skipped, or failed
 * under WEFT_REQUIRE_GPU=1. */

/* Runs weft-perf with the GPUs visible. */
static char *run_gpu(int *code, const char *args)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "timeout -s KILL 240 %s %s </dev/null", perf(), args);
	int st = 0;
	char *out = wt_run_capture(cmd, &st);
	ck_assert_ptr_nonnull(out);
	*code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return out;
}

/* Table rows (lines that are not comments and not empty) and their field counts. */
static int rows(const char *out, int nfields, int *bad_fields, int *zero)
{
	int n = 0;
	*bad_fields = *zero = 0;
	for (const char *l = out; l && *l;) {
		const char *e = strchr(l, '\n');
		size_t len = e ? (size_t)(e - l) : strlen(l);
		if (len && l[0] != '#' && strncmp(l, "weft-perf", 9) != 0) {
			char line[512];
			snprintf(line, sizeof(line), "%.*s", (int)(len < 511 ? len : 511), l);
			/* Between the size and #wrong: times or bandwidths, all positive. */
			double v[16];
			int f = 0;
			for (char *sv, *t = strtok_r(line, " \t", &sv); t; t = strtok_r(NULL, " \t", &sv), f++)
				if (f < 16)
					v[f] = strtod(t, NULL);
			for (int k = 1; k < f - 1 && k < 16; k++)
				if (!(v[k] > 0))
					(*zero)++;
			if (f != nfields)
				(*bad_fields)++;
			n++;
		}
		l = e ? e + 1 : NULL;
	}
	return n;
}

START_TEST(gpu_pingpong_table)
{
	int code, bad, zero;
	char *out = run_gpu(&code, "--np 2 --op pingpong --mem cuda -b 0 -e 4099 -f 64 -n 2 -w 1");
	ck_assert_msg(code == 0, "exited %d:\n%s", code, out);
	/* Sizes 0, 1, 64 and 4096: four rows of size, four times and #wrong. */
	ck_assert_msg(rows(out, 6, &bad, &zero) == 4 && !bad && !zero, "unexpected rows:\n%s", out);
	ck_assert_msg(count(out, "# Out of bounds values : 0 OK") == 1 && !strstr(out, "FAILED"), "data check:\n%s", out);
	ck_assert_msg(strstr(out, "HALF the round trip") && strstr(out, "# Round trip at 0 B"), "header/footer:\n%s", out);
	free(out);
}
END_TEST

START_TEST(gpu_put_tables)
{
	int code, bad, zero;
	/* Sizes 4097, 131104 and 4195328: not multiples of 16, tails included. */
	char *out = run_gpu(&code, "--np 2 --op put --mem cuda -b 4097 -e 5M -f 32 -n 2 -w 1");
	ck_assert_msg(code == 0, "exited %d:\n%s", code, out);
	/* Four memory-channel tables (size, five block counts, #wrong) and two
	 * copy-engine ones (size, GB/s, #wrong), three sizes each. */
	int n = rows(out, 7, &bad, &zero);
	ck_assert_msg(n == 18 && bad == 6 && !zero, "unexpected rows (%d, %d of another width):\n%s", n, bad, out);
	ck_assert_msg(count(out, "# Out of bounds values : 0 OK") == 6 && !strstr(out, "FAILED"), "data check:\n%s",
		      out);
	ck_assert_msg(count(out, "# memory channel, ") == 4 && count(out, "# port channel (copy engine), ") == 2,
		      "table headers:\n%s", out);
	free(out);
}
END_TEST

static int gpu_main(void)
{
	/* Outside a test: no ck_assert here. */
	const char *p = getenv("WEFT_TEST_PERF");
	char cmd[2048];
	if (!p || !*p) {
		fprintf(stderr, "WEFT_TEST_PERF must name the weft-perf binary\n");
		return 1;
	}
	snprintf(cmd, sizeof(cmd), "timeout -s KILL 120 %s --np 2 --op pingpong --mem cuda -b 4 -e 4 -n 1 -w 0 </dev/null",
		 p);
	int st = 0;
	char *out = wt_run_capture(cmd, &st);
	if (!out) {
		fprintf(stderr, "could not run %s\n", p);
		return 1;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(out, "no CUDA device")) {
		const char *req = getenv("WEFT_REQUIRE_GPU");
		int required = req && strcmp(req, "1") == 0;
		printf("%s: weft-perf found no GPU:\n%s", required ? "FAIL (WEFT_REQUIRE_GPU=1)" : "SKIP", out);
		free(out);
		return required ? 1 : WT_SKIP;
	}
	free(out);
	Suite *s = suite_create("perfgpu_gpu");
	TCase *tc = tcase_create("gpu");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, gpu_pingpong_table);
	tcase_add_test(tc, gpu_put_tables);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}

int main(void)
{
	if (getenv("WEFT_TEST_PERFGPU_GPU"))
		return gpu_main();
	Suite *s = suite_create("perfgpu");
	TCase *tc = tcase_create("no_gpu");
	tcase_add_loop_test(tc, no_gpu_fails_with_one_message, 0, (int)(sizeof(no_gpu_cases) / sizeof(no_gpu_cases[0])));
	tcase_add_test(tc, missing_library_is_named);
	tcase_add_test(tc, foreign_library_is_refused);
	tcase_add_loop_test(tc, bad_flags_exit_2, 0, (int)(sizeof(bad_flags) / sizeof(bad_flags[0])));
	tcase_add_test(tc, help_describes_the_gpu_rows);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
