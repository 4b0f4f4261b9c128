/* SPDX-License-Identifier: Apache-2.0 */
/* Smoke tests of weft-perf as a user runs it: flags and their errors, the put
 * and ping-pong tables, the collective tables (nccl-tests' columns, bus
 * bandwidth factors, #wrong == 0), and that a killed rank ends the run. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

static const char *perf(void)
{
	const char *p = getenv("WEFT_TEST_PERF");
	ck_assert_msg(p && *p, "WEFT_TEST_PERF must name the weft-perf binary");
	return p;
}

/* Runs weft-perf with args (bounded by timeout(1)); returns its output and sets
 * *code to its exit code (-1 when it did not exit normally). */
static char *run(int *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *run(int *code, const char *fmt, ...)
{
	char args[1024], cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "timeout -s KILL 240 %s %s", perf(), args);
	int st = 0;
	char *out = wt_run_capture(cmd, &st);
	ck_assert_ptr_nonnull(out);
	*code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return out;
}

/* The table rows: lines that are not comments and have at least `min` fields. */
#define MAX_ROWS 64
#define MAX_FIELDS 16
struct table {
	int nrows;
	int nf[MAX_ROWS];
	char f[MAX_ROWS][MAX_FIELDS][32];
};

static void parse_rows(const char *out, struct table *t)
{
	memset(t, 0, sizeof(*t));
	const char *line = out;
	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char buf[512];
		if (len >= sizeof(buf))
			len = sizeof(buf) - 1;
		memcpy(buf, line, len);
		buf[len] = '\0';
		/* Rows start with blanks and a digit; log lines ("weft ...") do not. */
		char *p = buf;
		while (*p == ' ')
			p++;
		if (*p >= '0' && *p <= '9' && t->nrows < MAX_ROWS) {
			int n = 0;
			for (char *save, *tok = strtok_r(buf, " \t", &save); tok && n < MAX_FIELDS;
			     tok = strtok_r(NULL, " \t", &save))
				snprintf(t->f[t->nrows][n++], sizeof(t->f[0][0]), "%s", tok);
			t->nf[t->nrows++] = n;
		}
		line = end ? end + 1 : NULL;
	}
}

static void assert_header(const char *out, int nranks)
{
	char want[64];
	ck_assert_msg(strstr(out, "# weft-perf: weft "), "no version line in:\n%s", out);
	ck_assert_msg(strstr(out, "# command: "), "no command line in:\n%s", out);
	ck_assert_msg(strstr(out, "# date: "), "no date line in:\n%s", out);
	snprintf(want, sizeof(want), "# nranks %d ", nranks);
	ck_assert_msg(strstr(out, want), "no '%s' in:\n%s", want, out);
	ck_assert_msg(strstr(out, "# transport: "), "no transport line in:\n%s", out);
	ck_assert_msg(strstr(out, "# Out of bounds values : 0 OK"), "data errors or no footer in:\n%s", out);
}

/* ------------------------------------------------------------------- flags */

START_TEST(help_lists_every_flag)
{
	int code;
	char *out = run(&code, "-h");
	ck_assert_int_eq(code, 0);
	static const char *const flags[] = {"-b", "-e", "-f", "-d", "-o", "-w", "-n", "-c", "-r", "--collective",
					    "--op", "--transport", "--np", "--mem", "--fresh-buffers", "--graph", "--peer", "--repeat",
					    "default"};
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		ck_assert_msg(strstr(out, flags[i]), "help does not mention %s:\n%s", flags[i], out);
	free(out);
}
END_TEST

/* Each bad invocation exits 2 and names what is wrong. */
static const struct {
	const char *args, *names;
} bad_flags[] = {
	{"--bogus", "--bogus"},
	{"-b 12Q", "-b"},
	{"-e", "-e"},
	{"-d fp7", "fp7"},
	{"-o mean", "mean"},
	{"-c 3", "-c"},
	{"-n 0", "-n"},
	{"-f x", "-f"},
	{"--collective allsum", "allsum"},
	{"--op get", "get"},
	{"--op put --collective all_reduce", "--collective"},
	{"--graph 2", "--graph"},
	{"--mem cuda --graph 0", "--graph"},
	{"--mem cuda --graph 2 --op put", "--graph"},
	{"--mem cuda --graph 2 --fresh-buffers", "--graph"},
	{"--peer nccl", "--peer"},
	{"--mem cuda --peer mpi", "mpi"},
	{"--repeat 0", "--repeat"},
	{"--mem disk", "disk"},
	{"--np 0", "--np"},
	{"--np 1 --op put", "2 ranks"},
	{"-b 1M -e 1K", "-b"},
	{"--np 2 --collective broadcast -r 2", "-r"},
	{"stray", "stray"},
};

START_TEST(bad_flag_exits_2)
{
	int code;
	char *out = run(&code, "%s", bad_flags[_i].args);
	ck_assert_msg(code == 2, "'%s' exited %d, not 2:\n%s", bad_flags[_i].args, code, out);
	ck_assert_msg(strstr(out, bad_flags[_i].names), "'%s': the message does not name '%s':\n%s",
		      bad_flags[_i].args, bad_flags[_i].names, out);
	free(out);
}
END_TEST

/* Device memory where the CUDA runtime finds no GPU (CI): one clear message
 * and exit 1 before any rank starts. Where a GPU exists: a checked table. */
START_TEST(mem_cuda_needs_a_gpu)
{
	int code;
	char *out = run(&code, "--np 2 --mem cuda -b 1K -e 4K -n 2 -w 1 2>&1 </dev/null");
	if (code == 0) {
		ck_assert_msg(strstr(out, "mem: cuda") && strstr(out, "# Out of bounds values : 0 OK"),
			      "--mem cuda ran but its table is not right:\n%s", out);
	} else {
		ck_assert_msg(code == 1, "--mem cuda without a GPU exited %d, not 1:\n%s", code, out);
		const char *m = strstr(out, "weft-perf: --mem cuda: ");
		ck_assert_msg(m && strstr(m + 1, "weft-perf: --mem cuda: ") == NULL,
			      "expected one '--mem cuda:' message naming what is missing:\n%s", out);
		ck_assert_msg(strstr(out, "CUDA runtime") || strstr(out, "cuda"), "message does not name CUDA:\n%s", out);
	}
	free(out);
}
END_TEST

START_TEST(sizes_take_suffixes)
{
	/* Accepted sizes get past parsing: with no launcher the run stops there (exit 2). */
	int code;
	char *out = run(&code, "-b 1k -e 2KiB -f 2 2>&1 </dev/null");
	ck_assert_msg(strstr(out, "no launcher") != NULL, "unexpected output:\n%s", out);
	ck_assert_int_eq(code, 2);
	free(out);
}
END_TEST

/* -------------------------------------------------------------- primitives */

static void check_prim_table(const char *out, const struct table *t, int first, int n, const long *sizes)
{
	for (int i = 0; i < n; i++) {
		int r = first + i;
		ck_assert_msg(r < t->nrows, "missing row %d in:\n%s", r, out);
		ck_assert_msg(t->nf[r] == 4, "row %d has %d fields, not 4:\n%s", r, t->nf[r], out);
		ck_assert_msg(atol(t->f[r][0]) == sizes[i], "row %d is size %s, not %ld:\n%s", r, t->f[r][0],
			      sizes[i], out);
		ck_assert_msg(atof(t->f[r][1]) > 0, "row %d: time %s:\n%s", r, t->f[r][1], out);
		ck_assert_msg(atof(t->f[r][2]) >= 0, "row %d: bandwidth %s:\n%s", r, t->f[r][2], out);
		ck_assert_msg(!strcmp(t->f[r][3], "0"), "row %d: #wrong %s:\n%s", r, t->f[r][3], out);
	}
}

static const char *const prim_cases[] = {
	"--op put -b 1K -e 64K -f 4 -n 3 -w 1",
	"--op pingpong -b 1K -e 64K -f 4 -n 3 -w 1",
	"--op put -b 1K -e 64K -f 4 -n 3 -w 1 --fresh-buffers",
	"--op pingpong -b 1K -e 64K -f 4 -n 3 -w 1 --fresh-buffers",
	"--op put -b 1 -e 64K -f 4 -n 3 -w 1 --np 3",
};

START_TEST(prim_table)
{
	int code;
	const char *args = prim_cases[_i];
	int np = strstr(args, "--np 3") ? 3 : 2;
	char *out = run(&code, "%s%s", strstr(args, "--np") ? "" : "--np 2 ", args);
	ck_assert_msg(code == 0, "'%s' exited %d:\n%s", args, code, out);
	assert_header(out, np);
	struct table t;
	parse_rows(out, &t);
	if (strstr(args, "-b 1 ")) {
		static const long sz[] = {1, 4, 16, 64, 256, 1024, 4096, 16384, 65536};
		check_prim_table(out, &t, 0, 9, sz);
		ck_assert_int_eq(t.nrows, 9);
	} else {
		static const long sz[] = {1024, 4096, 16384, 65536};
		check_prim_table(out, &t, 0, 4, sz);
		ck_assert_int_eq(t.nrows, 4);
	}
	free(out);
}
END_TEST

START_TEST(prim_one_table_per_transport)
{
	int code;
	char *out = run(&code, "--np 2 --op put -b 4K -e 8K -n 2 -w 0 --transport ofi,ofi");
	ck_assert_msg(code == 0, "exited %d:\n%s", code, out);
	struct table t;
	parse_rows(out, &t);
	static const long sz[] = {4096, 8192};
	check_prim_table(out, &t, 0, 2, sz);
	check_prim_table(out, &t, 2, 2, sz);
	ck_assert_int_eq(t.nrows, 4);
	int tables = 0;
	for (const char *p = out; (p = strstr(p, "# transport: ofi")); p++)
		tables++;
	ck_assert_msg(tables == 2, "%d transport lines, not 2:\n%s", tables, out);
	free(out);
}
END_TEST

/* The header names what carries the collectives: algo-host's own transport
 * when its parameter names one, not the core's default choice (issue 30
 * item 5). */
START_TEST(coll_header_names_algo_host_transport)
{
	int code;
	setenv("WEFT_ALGO_HOST_TRANSPORT", "ofi", 1);
	char *out = run(&code, "--np 2 --collective allreduce -b 1K -e 1K -n 1 -w 0");
	unsetenv("WEFT_ALGO_HOST_TRANSPORT");
	ck_assert_msg(code == 0, "exited %d:\n%s", code, out);
	ck_assert_msg(strstr(out, "# transport: ofi"), "the header does not say ofi:\n%s", out);
	free(out);
}
END_TEST

START_TEST(prim_check_off_says_na)
{
	int code;
	char *out = run(&code, "--np 2 --op pingpong -b 1K -e 1K -n 2 -w 0 -c 0");
	ck_assert_msg(code == 0, "exited %d:\n%s", code, out);
	struct table t;
	parse_rows(out, &t);
	ck_assert_int_eq(t.nrows, 1);
	ck_assert_str_eq(t.f[0][3], "N/A");
	free(out);
}
END_TEST

START_TEST(unknown_transport_fails_naming_it)
{
	int code;
	char *out = run(&code, "--np 2 --op put -b 1K -e 1K --transport nosuch");
	ck_assert_msg(code == 1, "exited %d, not 1:\n%s", code, out);
	ck_assert_msg(strstr(out, "nosuch"), "the error does not name the transport:\n%s", out);
	ck_assert_msg(strstr(out, "rank 0 failed") || strstr(out, "rank 1 failed"), "no failed rank named:\n%s", out);
	free(out);
}
END_TEST

/* ------------------------------------------------------------- collectives */

struct coll_case {
	const char *args;
	int np;
	const char *type; /* as printed */
	size_t ts;
	const char *redop; /* as printed */
	int root;
	int split;      /* 1: count is per rank (all_gather, reduce_scatter, alltoall) */
	double busbw_f; /* numerator of the bus bandwidth factor: 0 = 1, 1 = (n-1)/n, 2 = 2(n-1)/n */
};

static const struct coll_case coll_cases[] = {
	{"--collective all_reduce", 2, "float", 4, "sum", -1, 0, 2},
	{"--collective allreduce -d half", 3, "half", 2, "sum", -1, 0, 2},
	{"--collective all_reduce -d bfloat16 -o avg", 4, "bfloat16", 2, "avg", -1, 0, 2},
	{"--collective all_reduce -d int8 -o prod", 3, "int8", 1, "prod", -1, 0, 2},
	{"--collective all_reduce -d uint64 -o max", 3, "uint64", 8, "max", -1, 0, 2},
	{"--collective all_reduce -d double -o min", 2, "double", 8, "min", -1, 0, 2},
	{"--collective all_reduce -d int32 -o avg", 3, "int32", 4, "avg", -1, 0, 2},
	{"--collective all_reduce -d float32 --fresh-buffers", 3, "float", 4, "sum", -1, 0, 2},
	{"--collective all_gather", 3, "float", 4, "none", -1, 1, 1},
	{"--collective allgather -d uint8", 4, "uint8", 1, "none", -1, 1, 1},
	{"--collective reduce_scatter", 3, "float", 4, "sum", -1, 1, 1},
	{"--collective reducescatter -d half -o max", 4, "half", 2, "max", -1, 1, 1},
	{"--collective broadcast -r 1", 3, "float", 4, "none", 1, 0, 0},
	{"--collective reduce -r 2 -d int64", 3, "int64", 8, "sum", 2, 0, 0},
	{"--collective alltoall", 3, "float", 4, "none", -1, 1, 1},
	{"--collective sendrecv", 3, "float", 4, "none", -1, 0, 0},
};

START_TEST(coll_table)
{
	const struct coll_case *c = &coll_cases[_i];
	static const long sizes[] = {1024, 4096, 16384, 65536};
	int code;
	char *out = run(&code, "--np %d -b 1K -e 64K -f 4 -n 3 -w 1 %s", c->np, c->args);
	ck_assert_msg(code == 0, "'%s' exited %d:\n%s", c->args, code, out);
	assert_header(out, c->np);
	ck_assert_msg(strstr(out, "# Avg bus bandwidth"), "no average line:\n%s", out);
	struct table t;
	parse_rows(out, &t);
	ck_assert_msg(t.nrows == 4, "%d rows, not 4:\n%s", t.nrows, out);
	double f = c->busbw_f == 2 ? 2.0 * (c->np - 1) / c->np : c->busbw_f == 1 ? (double)(c->np - 1) / c->np : 1;
	for (int r = 0; r < 4; r++) {
		ck_assert_msg(t.nf[r] == 13, "row %d has %d fields:\n%s", r, t.nf[r], out);
		long size = atol(t.f[r][0]), count = atol(t.f[r][1]);
		if (c->split) {
			/* nccl-tests: size / type / ranks elements each, aligned down to 16 bytes. */
			long per = (long)(sizes[r] / c->ts / c->np) & ~(long)(16 / c->ts - 1);
			ck_assert_msg(count == per && size == per * c->np * (long)c->ts,
				      "row %d: size %ld count %ld for a %ld-byte request:\n%s", r, size, count, sizes[r],
				      out);
		} else {
			ck_assert_msg(size == sizes[r] && count == sizes[r] / (long)c->ts,
				      "row %d: size %ld count %ld:\n%s", r, size, count, out);
		}
		ck_assert_str_eq(t.f[r][2], c->type);
		ck_assert_str_eq(t.f[r][3], c->redop);
		ck_assert_int_eq(atoi(t.f[r][4]), c->root);
		for (int k = 5; k <= 9; k += 4) {
			double us = atof(t.f[r][k]), algbw = atof(t.f[r][k + 1]), busbw = atof(t.f[r][k + 2]);
			ck_assert_msg(us > 0, "row %d: time %s:\n%s", r, t.f[r][k], out);
			/* Both are printed with 2 decimals; algbw is size / time. The time's
			 * rounding (up to 0.005 us) moves size / time by algbw * 0.005 / us,
			 * which matters for the shortest calls. */
			ck_assert_msg(fabs(algbw - size / (us * 1e3)) <= 0.006 + algbw * (1e-3 + 0.005 / us),
				      "row %d: algbw %s for %ld B in %s us:\n%s", r, t.f[r][k + 1], size, t.f[r][k], out);
			ck_assert_msg(fabs(busbw - algbw * f) <= 0.011 + 1e-3 * busbw,
				      "row %d: busbw %s is not %.3f x algbw %s:\n%s", r, t.f[r][k + 2], f, t.f[r][k + 1],
				      out);
			ck_assert_msg(!strcmp(t.f[r][k + 3], "0"), "row %d: #wrong %s:\n%s", r, t.f[r][k + 3], out);
		}
	}
	free(out);
}
END_TEST

START_TEST(coll_pinning_another_transport_is_refused)
{
	int code;
	char *out = run(&code, "--np 2 -b 1K -e 1K --collective all_reduce --transport nosuch");
	ck_assert_msg(code == 1, "exited %d, not 1:\n%s", code, out);
	ck_assert_msg(strstr(out, "--transport nosuch"), "the error does not name the flag:\n%s", out);
	free(out);
}
END_TEST

/* ------------------------------------------------------------- no hang */

/* The pids whose parent is ppid. */
static int children_of(pid_t ppid, pid_t *out, int max)
{
	int n = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < max) {
		char path[300], buf[512];
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = '\0';
		/* pid (comm) state ppid: comm may hold blanks, so start after the last ')'. */
		char *p = strrchr(buf, ')');
		int pp = 0;
		char st;
		if (p && sscanf(p + 1, " %c %d", &st, &pp) == 2 && pp == ppid)
			out[n++] = atoi(e->d_name);
	}
	closedir(d);
	return n;
}

START_TEST(killed_rank_ends_the_run)
{
	char *dir = wt_mkdtemp("perf-kill");
	char log[512];
	snprintf(log, sizeof(log), "%s/out.log", dir);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(perf(), "weft-perf", "--np", "2", "--op", "pingpong", "-b", "64", "-e", "64", "-w", "0", "-n",
		      "2000000000", "-c", "0", (char *)NULL);
		_exit(127);
	}
	/* Wait until both ranks run and the table has started: the comm is up. */
	pid_t kids[8];
	int nk = 0;
	char *text = NULL;
	for (int i = 0; i < 600; i++) {
		free(text);
		text = wt_read_file(log);
		nk = children_of(pid, kids, 8);
		if (nk == 2 && text && strstr(text, "#wrong"))
			break;
		usleep(100000);
	}
	ck_assert_msg(nk == 2 && text && strstr(text, "#wrong"), "the run did not start:\n%s", text ? text : "");
	free(text);
	/* Rank 1 is the child that is not rank 0; rank 0 is forked first. */
	pid_t victim = kids[0] > kids[1] ? kids[0] : kids[1];
	ck_assert_int_eq(kill(victim, SIGKILL), 0);

	int st = 0;
	pid_t w = 0;
	for (int i = 0; i < 900 && w == 0; i++) {
		w = waitpid(pid, &st, WNOHANG);
		if (w == 0)
			usleep(100000);
	}
	if (w == 0) {
		kill(pid, SIGKILL);
		for (int i = 0; i < 2; i++)
			kill(kids[i], SIGKILL);
		waitpid(pid, &st, 0);
	}
	text = wt_read_file(log);
	ck_assert_msg(w == pid, "weft-perf still ran 90 s after rank 1 was killed:\n%s", text);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit status 0x%x, not exit code 1:\n%s", st, text);
	ck_assert_msg(strstr(text, "rank 1 failed (killed by signal 9"), "rank 1's death not reported:\n%s", text);
	ck_assert_msg(strstr(text, "rank 0 failed (exit code 1)"), "rank 0 did not fail by itself:\n%s", text);
	ck_assert_msg(!strstr(text, "killing it"), "rank 0 had to be killed:\n%s", text);
	free(text);
	wt_rmdir(dir);
	free(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("perf");
	TCase *tc = tcase_create("flags");
	tcase_add_test(tc, help_lists_every_flag);
	tcase_add_test(tc, coll_header_names_algo_host_transport);
	tcase_add_loop_test(tc, bad_flag_exits_2, 0, (int)(sizeof(bad_flags) / sizeof(bad_flags[0])));
	tcase_add_test(tc, sizes_take_suffixes);
	tcase_add_test(tc, mem_cuda_needs_a_gpu);
	suite_add_tcase(s, tc);

	tc = tcase_create("primitives");
	tcase_add_loop_test(tc, prim_table, 0, (int)(sizeof(prim_cases) / sizeof(prim_cases[0])));
	tcase_add_test(tc, prim_one_table_per_transport);
	tcase_add_test(tc, prim_check_off_says_na);
	tcase_add_test(tc, unknown_transport_fails_naming_it);
	tcase_add_test(tc, killed_rank_ends_the_run);
	suite_add_tcase(s, tc);

	if (getenv("WEFT_TEST_PERF_COLL")) {
		tc = tcase_create("collectives");
		tcase_add_loop_test(tc, coll_table, 0, (int)(sizeof(coll_cases) / sizeof(coll_cases[0])));
		tcase_add_test(tc, coll_pinning_another_transport_is_refused);
		suite_add_tcase(s, tc);
	}
	return wt_run_suite(s);
}
