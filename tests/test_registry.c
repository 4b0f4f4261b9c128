/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of core/registry.c, core/plugin_api.c and weft-info: what a user sees
 * when plugin files are broken, duplicated, shadowed, required, older or newer.
 * Most cases run weft-info as a user would; the ABI cases load in-process (each
 * Check test runs in its own forked process, so each gets a fresh registry). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "registry.h"
#include "testlib.h"

#ifndef RT_PLUGIN_BASE
#error "RT_PLUGIN_BASE (the folder holding plugins-<case>/) must be defined"
#endif
#ifndef RT_INTREE_DIR
#error "RT_INTREE_DIR (the build tree's plugin folder) must be defined"
#endif
#ifndef RT_WEFT_INFO
#error "RT_WEFT_INFO (path of weft-info) must be defined"
#endif

/* The folder of one case's test plugins, built by tests/registry.cmake. */
static char *case_dir(const char *name)
{
	char *p;
	ck_assert_int_ge(asprintf(&p, "%s/plugins-%s", RT_PLUGIN_BASE, name), 0);
	return p;
}

/* Runs weft-info with extra environment assignments and arguments; returns its
 * combined output and writes its exit code (-1: killed by a signal). */
static char *run_info(const char *env, const char *args, int *code)
{
	char *cmd;
	ck_assert_int_ge(asprintf(&cmd, "env %s '%s' %s", env ? env : "", RT_WEFT_INFO, args ? args : ""), 0);
	int st = 0;
	char *out = wt_run_capture(cmd, &st);
	ck_assert_ptr_nonnull(out);
	*code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	if (*code == -1)
		fprintf(stderr, "'%s' died of signal %d; output:\n%s\n", cmd, WTERMSIG(st), out);
	free(cmd);
	return out;
}

/* Asserts that out contains needle, printing out when it does not. */
#define ASSERT_HAS(out, needle) \
	ck_assert_msg(strstr((out), (needle)) != NULL, "expected \"%s\" in output:\n%s", (needle), (out))
#define ASSERT_HASNT(out, needle) \
	ck_assert_msg(strstr((out), (needle)) == NULL, "did not expect \"%s\" in output:\n%s", (needle), (out))

/* The line of out that contains needle, copied into buf ("" if none). */
static const char *line_with(const char *out, const char *needle, char *buf, size_t len)
{
	const char *p = strstr(out, needle);
	buf[0] = '\0';
	if (!p)
		return buf;
	const char *b = p;
	while (b > out && b[-1] != '\n')
		b--;
	const char *e = strchr(p, '\n');
	size_t n = e ? (size_t)(e - b) : strlen(b);
	if (n >= len)
		n = len - 1;
	memcpy(buf, b, n);
	buf[n] = '\0';
	return buf;
}

static void write_bytes(const char *path, const unsigned char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* ----------------------------------------------------------- bad files */

START_TEST(garbage_file_is_named_with_reason)
{
	char *dir = wt_mkdtemp("reg-garbage");
	ck_assert_ptr_nonnull(dir);
	unsigned char junk[4096];
	srand((unsigned)getpid());
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)rand();
	char *bogus, *elfish;
	ck_assert_int_ge(asprintf(&bogus, "%s/libweft-bogus.so", dir), 0);
	ck_assert_int_ge(asprintf(&elfish, "%s/libweft-elfish.so", dir), 0);
	write_bytes(bogus, junk, sizeof(junk));
	/* A file that starts like an ELF object and then is garbage. */
	memcpy(junk, "\177ELF\002\001\001", 7);
	write_bytes(elfish, junk, sizeof(junk));
	/* Not files at all: a folder and a FIFO (which dlopen would block on). */
	char *folder, *fifo;
	ck_assert_int_ge(asprintf(&folder, "%s/libweft-folder.so", dir), 0);
	ck_assert_int_ge(asprintf(&fifo, "%s/libweft-fifo.so", dir), 0);
	ck_assert_int_eq(mkdir(folder, 0755), 0);
	ck_assert_int_eq(mkfifo(fifo, 0644), 0);

	char *env;
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s'", dir), 0);
	int code;
	char *out = run_info(env, NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	char line[2048];
	ck_assert_msg(strstr(out, "not loaded") != NULL, "no 'not loaded' section:\n%s", out);
	line_with(strstr(out, "not loaded"), bogus, line, sizeof(line));
	ck_assert_msg(strstr(line, "REJECTED") && strstr(line, "is no ELF file"),
		      "summary line for %s lacks its reason: '%s'", bogus, line);
	line_with(strstr(out, "not loaded"), elfish, line, sizeof(line));
	ck_assert_msg(strstr(line, "REJECTED") && strstr(line, "is no shared object") == NULL &&
			      (strstr(line, "another") || strstr(line, "truncated") || strstr(line, "program headers")),
		      "summary line for %s lacks its reason: '%s'", elfish, line);
	line_with(strstr(out, "not loaded"), folder, line, sizeof(line));
	ck_assert_msg(strstr(line, "REJECTED") && strstr(line, "is not a regular file"), "folder: '%s'", line);
	line_with(strstr(out, "not loaded"), fifo, line, sizeof(line));
	ck_assert_msg(strstr(line, "REJECTED") && strstr(line, "is not a regular file"), "fifo: '%s'", line);
	free(folder);
	free(fifo);
	free(out);
	free(env);
	free(bogus);
	free(elfish);
	wt_rmdir(dir);
	free(dir);
}
END_TEST

/* Runs weft-info over one case folder; expects exit 0 and every needle. */
static void expect_info(const char *cas, const char *const *needles)
{
	char *dir = case_dir(cas);
	char *env;
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s' WEFT_LOG_LEVEL=info", dir), 0);
	int code;
	char *out = run_info(env, NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	for (int i = 0; needles[i]; i++)
		ASSERT_HAS(out, needles[i]);
	free(out);
	free(env);
	free(dir);
}

/* Every in-tree plugin cut at 16 lengths, from 64 bytes to its size less
 * one: each is refused before dlopen (which would die of SIGBUS reading past
 * the end), with a reason naming the truncation, and weft-info exits 0. */
START_TEST(truncated_plugins_refused)
{
	char *dir = wt_mkdtemp("reg-trunc");
	ck_assert_ptr_nonnull(dir);
	DIR *d = opendir(RT_INTREE_DIR);
	ck_assert_ptr_nonnull(d);
	struct dirent *de;
	int nplugins = 0, ncut = 0;
	char names[64][128];
	while ((de = readdir(d)) != NULL && nplugins < 64) {
		size_t nl = strlen(de->d_name);
		if (strncmp(de->d_name, "libweft-", 8) != 0 || nl < 4 || strcmp(de->d_name + nl - 3, ".so") != 0)
			continue;
		char *src;
		ck_assert_int_ge(asprintf(&src, "%s/%s", RT_INTREE_DIR, de->d_name), 0);
		struct stat sst;
		ck_assert_int_eq(stat(src, &sst), 0);
		size_t len = (size_t)sst.st_size;
		unsigned char *data = malloc(len);
		FILE *f = fopen(src, "rb");
		ck_assert_msg(data && f && len > 65 && fread(data, 1, len, f) == len, "cannot read %s", src);
		fclose(f);
		snprintf(names[nplugins], sizeof(names[0]), "%.*s", (int)(nl - 3), de->d_name + 8);
		for (int k = 0; k < 16; k++) {
			/* Geometric steps from 64 to len - 1, so the header, the program
			 * headers, the segments and the section table all get cut. */
			size_t cut = (size_t)(64.0 * pow((double)(len - 1) / 64.0, k / 15.0));
			cut = cut < 64 ? 64 : cut > len - 1 ? len - 1 : cut;
			char *dst;
			ck_assert_int_ge(asprintf(&dst, "%s/libweft-cut-%s-%02d.so", dir, names[nplugins], k), 0);
			write_bytes(dst, data, cut);
			free(dst);
			ncut++;
		}
		nplugins++;
		free(data);
		free(src);
	}
	closedir(d);
	ck_assert_msg(nplugins >= 1, "no in-tree plugin in %s", RT_INTREE_DIR);
	char *env;
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s'", dir), 0);
	int code;
	char *out = run_info(env, NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	const char *summary = strstr(out, "not loaded");
	ck_assert_msg(summary, "no 'not loaded' section:\n%s", out);
	char line[2048];
	for (int p = 0; p < nplugins; p++)
		for (int k = 0; k < 16; k++) {
			char *path;
			ck_assert_int_ge(asprintf(&path, "%s/libweft-cut-%s-%02d.so:", dir, names[p], k), 0);
			line_with(summary, path, line, sizeof(line));
			ck_assert_msg(strstr(line, "REJECTED") && strstr(line, "is truncated"), "%s: '%s'", path, line);
			free(path);
		}
	printf("truncated_plugins_refused: %d cuts of %d plugins, each refused\n", ncut, nplugins);
	free(out);
	free(env);
	wt_rmdir(dir);
	free(dir);
}
END_TEST

START_TEST(unresolved_symbol_quotes_dlerror)
{
	char *f;
	ck_assert_int_ge(asprintf(&f, "REJECTED %s/plugins-unresolved/libweft-rt-unresolved.so: cannot be loaded",
				  RT_PLUGIN_BASE), 0);
	const char *needles[] = {f, "undefined symbol: rt_symbol_nobody_defines", NULL};
	expect_info("unresolved", needles);
	free(f);
}
END_TEST

START_TEST(no_init_symbol)
{
	char *f;
	ck_assert_int_ge(asprintf(&f, "REJECTED %s/plugins-noinit/libweft-rt-noinit.so: exports no weft_plugin_init",
				  RT_PLUGIN_BASE), 0);
	const char *needles[] = {f, NULL};
	expect_info("noinit", needles);
	free(f);
}
END_TEST

START_TEST(init_returns_null)
{
	char *f;
	ck_assert_int_ge(asprintf(&f, "REJECTED %s/plugins-initnull/libweft-rt-initnull.so: weft_plugin_init returned NULL",
				  RT_PLUGIN_BASE), 0);
	/* The plugin's own log line, tagged with the file's name during init. */
	const char *needles[] = {f, "rt-initnull: declining to load", NULL};
	expect_info("initnull", needles);
	free(f);
}
END_TEST

START_TEST(abi_major_refused_naming_both)
{
	char *f, *why;
	ck_assert_int_ge(asprintf(&f, "REJECTED %s/plugins-abi1/libweft-rt-abi1.so", RT_PLUGIN_BASE), 0);
	ck_assert_int_ge(asprintf(&why, "built for ABI 1.2, core speaks %d.%d", WEFT_PLUGIN_ABI_MAJOR,
				  WEFT_PLUGIN_ABI_MINOR), 0);
	const char *needles[] = {f, why, NULL};
	expect_info("abi1", needles);
	free(f);
	free(why);
}
END_TEST

START_TEST(missing_required_op_named)
{
	char *f;
	ck_assert_int_ge(asprintf(&f, "REJECTED %s/plugins-missingop/libweft-rt-missingop.so ('rt-missingop')",
				  RT_PLUGIN_BASE), 0);
	const char *needles[] = {f, "lacks the required op 'put'", NULL};
	expect_info("missingop", needles);
	free(f);
}
END_TEST

START_TEST(bad_descriptors_refused_one_by_one)
{
	char *f;
	ck_assert_int_ge(asprintf(&f, "%s/plugins-baddesc/libweft-rt-baddesc.so", RT_PLUGIN_BASE), 0);
	const char *needles[] = {
		"rt-baddesc       transport",
		"descriptor 1 has size 4, too small to hold its ABI version",
		"descriptor 2 has size 16, smaller than",
		"descriptor 3 has no name",
		"descriptor 4 has the bad name 'Bad_Name'",
		"'rt-baddesc-badkind' has unknown kind 7",
		"'rt-baddesc-noops' has no ops table",
		"'rt-baddesc-tinyops' has a transport ops table of size 8",
		"descriptor 8 names 'rt-baddesc': a file's further descriptors are named 'rt-baddesc-<suffix>'",
		"rt-baddesc-second transport",
		"the name 'rt-baddesc-second' is already used by an earlier descriptor of the same file",
		NULL,
	};
	expect_info("baddesc", needles);
	free(f);
}
END_TEST

/* ------------------------------------------------------ names and order */

/* Two files of one folder claiming one name: neither may, since a plugin's
 * first descriptor takes its file's name (libweft-rt-dup-a.so: 'rt-dup-a'),
 * so neither the order of file names nor of loading decides anything. */
START_TEST(names_must_match_their_file)
{
	char *dir = case_dir("dup");
	char *a, *b;
	ck_assert_int_ge(asprintf(&a, "REJECTED %s/libweft-rt-dup-a.so: its first descriptor names 'rt-dup', not "
				  "'rt-dup-a': a plugin's first descriptor takes the name of its file",
				  dir), 0);
	ck_assert_int_ge(asprintf(&b, "REJECTED %s/libweft-rt-dup-b.so: its first descriptor names 'rt-dup', not "
				  "'rt-dup-b'",
				  dir), 0);
	const char *needles[] = {a, b, NULL};
	expect_info("dup", needles);
	free(a);
	free(b);
	free(dir);
}
END_TEST

static void check_shadow(const char *first, const char *second)
{
	char *d1 = case_dir(first), *d2 = case_dir(second);
	char *env, *loaded, *shadowed, *desc, *other;
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s:%s' WEFT_LOG_LEVEL=info", d1, d2), 0);
	ck_assert_int_ge(asprintf(&loaded, "rt-shadow        transport ABI %d.%-3d %s/libweft-rt-shadow.so",
				  WEFT_PLUGIN_ABI_MAJOR, WEFT_PLUGIN_ABI_MINOR, d1), 0);
	ck_assert_int_ge(asprintf(&shadowed, "SHADOWED %s/libweft-rt-shadow.so ('rt-shadow'): 'rt-shadow' from "
				  "%s/libweft-rt-shadow.so comes first in the search path", d2, d1), 0);
	ck_assert_int_ge(asprintf(&desc, "rt-%s-describe", first), 0);
	ck_assert_int_ge(asprintf(&other, "rt-%s-describe", second), 0);
	int code;
	char *out = run_info(env, NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	ASSERT_HAS(out, loaded);
	ASSERT_HAS(out, shadowed);
	/* Another file under a loaded name is a warning, naming both. */
	char *warn;
	ck_assert_int_ge(asprintf(&warn, "warn core: plugin %s/libweft-rt-shadow.so shadowed: 'rt-shadow' from "
				  "%s/libweft-rt-shadow.so comes first",
				  d2, d1),
			 0);
	ASSERT_HAS(out, warn);
	free(warn);
	/* describe comes from the copy that won; the other one's init never ran
	 * (its init log line would name its describe text). */
	ASSERT_HAS(out, desc);
	ASSERT_HASNT(out, other);
	free(out);
	free(other);
	free(env);
	free(loaded);
	free(shadowed);
	free(desc);
	free(d1);
	free(d2);
}

START_TEST(same_name_in_two_folders_is_shadowed)
{
	/* Both orders: the search path decides, not the folder names. */
	check_shadow("shadow1", "shadow2");
	check_shadow("shadow2", "shadow1");
}
END_TEST

/* The same file reached twice (a link to it in a later folder, as
 * weft-plugin-check makes) is shadowed without a warning. */
START_TEST(same_file_twice_is_quiet)
{
	char *d1 = case_dir("shadow1"), *dir = wt_mkdtemp("reg-samefile"), *src, *dst, *env;
	ck_assert_int_ge(asprintf(&src, "%s/libweft-rt-shadow.so", d1), 0);
	ck_assert_int_ge(asprintf(&dst, "%s/libweft-rt-shadow.so", dir), 0);
	ck_assert_int_eq(symlink(src, dst), 0);
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s:%s'", d1, dir), 0);
	int code;
	char *out = run_info(env, NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	ASSERT_HAS(out, "SHADOWED");
	ASSERT_HASNT(out, "warn core: plugin");
	free(out);
	unlink(dst);
	wt_rmdir(dir);
	free(dir);
	free(src);
	free(dst);
	free(env);
	free(d1);
}
END_TEST

START_TEST(other_file_cannot_take_a_loaded_name)
{
	/* A user's libweft-rt-shadow-alt.so whose descriptor says 'rt-shadow'
	 * does not stand in for the real one: it is refused for its name, and
	 * the real one stays loaded. */
	char *d1 = case_dir("shadow1"), *d3 = case_dir("shadow3");
	char *env, *refused;
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s:%s'", d3, d1), 0);
	ck_assert_int_ge(asprintf(&refused, "REJECTED %s/libweft-rt-shadow-alt.so: its first descriptor names "
				  "'rt-shadow', not 'rt-shadow-alt'",
				  d3), 0);
	int code;
	char *out = run_info(env, NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	ASSERT_HAS(out, refused);
	ASSERT_HAS(out, "rt-shadow1-describe");
	free(out);
	free(env);
	free(refused);
	free(d1);
	free(d3);
}
END_TEST

START_TEST(search_path_order_and_empty_entries)
{
	char *g = case_dir("good"), *s = case_dir("shadow1");
	char *env, *want;
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='::%s::%s:'", g, s), 0);
	ck_assert_int_ge(asprintf(&want, "search path: %s:%s:", g, s), 0);
	int code;
	char *out = run_info(env, NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	ASSERT_HAS(out, want);
	/* The folder beside libweft.so comes next (here the build tree's lib/weft). */
	char line[4096];
	line_with(out, "search path: ", line, sizeof(line));
	ck_assert_msg(strlen(line) > strlen(want) && strstr(line + strlen(want), "/weft"),
		      "no <libdir>/weft after the WEFT_PLUGIN_PATH folders in '%s'", line);
	free(out);
	free(env);
	free(want);
	free(g);
	free(s);
}
END_TEST

/* --------------------------------------------------------------- require */

START_TEST(required_missing_plugin_is_an_error)
{
	char *g = case_dir("good");
	char *env;
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s' WEFT_CORE_REQUIRE='rt-good, rt-missing'", g), 0);
	int code;
	char *out = run_info(env, NULL, &code);
	ck_assert_msg(code == 2, "weft-info exited %d, not 2:\n%s", code, out);
	ASSERT_HAS(out, "required plugin 'rt-missing' (core.require) was not found");
	ASSERT_HASNT(out, "required plugin 'rt-good'");
	/* What could be printed still was. */
	ASSERT_HAS(out, "rt-good          transport");
	free(out);
	free(env);

	/* The same through a config file. */
	char *tmp = wt_mkdtemp("reg-require");
	char *conf = wt_write_file(tmp, "weft.conf", "[core]\nrequire = rt-good,rt-absent\n");
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s' WEFT_CONFIG='%s'", g, conf), 0);
	out = run_info(env, NULL, &code);
	ck_assert_msg(code == 2, "weft-info exited %d, not 2:\n%s", code, out);
	ASSERT_HAS(out, "required plugin 'rt-absent' (core.require) was not found");
	free(out);
	free(env);

	/* Only present plugins required: success. */
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s' WEFT_CORE_REQUIRE=rt-good,rt-good-algos", g), 0);
	out = run_info(env, NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	free(out);
	free(env);
	free(conf);
	wt_rmdir(tmp);
	free(tmp);
	free(g);
}
END_TEST

START_TEST(required_misspelled_suggests_closest)
{
	char *g = case_dir("good");
	char *env;
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s' WEFT_CORE_REQUIRE=rt-godo", g), 0);
	int code;
	char *out = run_info(env, NULL, &code);
	ck_assert_msg(code == 2, "weft-info exited %d, not 2:\n%s", code, out);
	ASSERT_HAS(out, "'rt-godo'");
	ASSERT_HAS(out, "did you mean 'rt-good'?");
	free(out);
	free(env);
	free(g);
}
END_TEST

START_TEST(required_rejected_plugin_gives_reason)
{
	char *d = case_dir("initnull"), *m = case_dir("missingop");
	char *env;
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s:%s' WEFT_CORE_REQUIRE=rt-initnull", d, m), 0);
	int code;
	char *out = run_info(env, NULL, &code);
	ck_assert_msg(code == 2, "weft-info exited %d, not 2:\n%s", code, out);
	ASSERT_HAS(out, "required plugin 'rt-initnull' (core.require) did not load");
	ASSERT_HAS(out, "weft_plugin_init returned NULL");
	free(out);
	free(env);

	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s:%s' WEFT_CORE_REQUIRE=rt-missingop", d, m), 0);
	out = run_info(env, NULL, &code);
	ck_assert_msg(code == 2, "weft-info exited %d, not 2:\n%s", code, out);
	ASSERT_HAS(out, "required plugin 'rt-missingop' (core.require) did not load");
	ASSERT_HAS(out, "lacks the required op 'put'");
	free(out);
	free(env);
	free(d);
	free(m);
}
END_TEST

/* ------------------------------------------------------- [core] plugins */

/* weft-info with WEFT_PLUGIN_PATH at the good case and WEFT_CORE_PLUGINS=sel. */
static char *info_with_plugins(const char *dir, const char *sel, const char *extra, int *code)
{
	char *env;
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s' WEFT_CORE_PLUGINS='%s' %s", dir, sel, extra ? extra : ""),
			 0);
	char *out = run_info(env, NULL, code);
	free(env);
	return out;
}

START_TEST(plugins_list_keeps_files_out)
{
	char *g = case_dir("good");
	char line[1024];
	int code;
	/* Excluded: shown with the reason, its descriptors absent, the rest loads. */
	char *out = info_with_plugins(g, "^rt-good", NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	line_with(out, "libweft-rt-good.so", line, sizeof(line));
	ck_assert_msg(strstr(line, "EXCLUDED") && strstr(line, "excluded by core.plugins = '^rt-good'"),
		      "rt-good's line is '%s':\n%s", line, out);
	ASSERT_HASNT(out, "rt-good-algos    algorithm");
	ASSERT_HASNT(out, "init of rt-good"); /* its init never ran */
	ASSERT_HAS(out, "shm              transport");
	free(out);
	/* Allow-only: that file and nothing else. */
	out = info_with_plugins(g, "rt-good", NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	ASSERT_HAS(out, "rt-good-algos    algorithm");
	line_with(out, "libweft-shm.so", line, sizeof(line));
	ck_assert_msg(strstr(line, "EXCLUDED"), "shm's line is '%s':\n%s", line, out);
	free(out);
	/* none: nothing loads, and that is no error. */
	out = info_with_plugins(g, "none", NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	ASSERT_HAS(out, "plugins (0 loaded)");
	free(out);
	/* A name no file has: a warning with the closest name. */
	out = info_with_plugins(g, "^rt-godo", NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	ASSERT_HAS(out, "names 'rt-godo', which no plugin file in the search path has; did you mean 'rt-good'?");
	free(out);
	/* The file form. */
	char *tmp = wt_mkdtemp("reg-plugins");
	char *conf = wt_write_file(tmp, "weft.conf", "[core]\nplugins = ^rt-good, shm\n[shm]\n");
	char *env;
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s' WEFT_CONFIG='%s'", g, conf), 0);
	out = run_info(env, NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	line_with(out, "libweft-shm.so", line, sizeof(line));
	ck_assert_msg(strstr(line, "EXCLUDED"), "shm's line is '%s':\n%s", line, out);
	/* An excluded plugin's section stays a known one. */
	ASSERT_HASNT(out, "unknown section [shm]");
	free(out);
	free(env);
	free(conf);
	wt_rmdir(tmp);
	free(tmp);
	free(g);
}
END_TEST

START_TEST(plugins_list_bad_values_fail)
{
	char *g = case_dir("good");
	static const struct {
		const char *sel, *msg;
	} bad[] = {
		{"rt-good,none", "'none' stands alone"},
		{"^none", "'none' stands alone"},
		{"^", "names no plugin"},
		{"rt good", "'rt good' is not a plugin name"},
		{"shm,^ucx", "'^ucx' is not a plugin name"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int code;
		char *out = info_with_plugins(g, bad[i].sel, NULL, &code);
		ck_assert_msg(code == 2, "plugins = '%s': weft-info exited %d, not 2:\n%s", bad[i].sel, code, out);
		ASSERT_HAS(out, bad[i].msg);
		ASSERT_HAS(out, "the value of core.plugins is invalid");
		free(out);
	}
	/* Required and excluded at once: the two settings disagree. */
	int code;
	char *out = info_with_plugins(g, "^rt-good", "WEFT_CORE_REQUIRE=rt-good", &code);
	ck_assert_msg(code == 2, "weft-info exited %d, not 2:\n%s", code, out);
	ASSERT_HAS(out, "required plugin 'rt-good' (core.require) is excluded by core.plugins = '^rt-good'");
	free(out);
	free(g);
}
END_TEST

/* weft-info with WEFT_PLUGIN_PATH=dir (and extra environment): its output. */
static char *info_at(const char *dir, const char *extra)
{
	char *env;
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s' %s", dir, extra ? extra : ""), 0);
	int code;
	char *out = run_info(env, NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	free(env);
	return out;
}

/* Copies rt-good into folder, with the file's mode. */
static char *put_plugin(const char *folder, mode_t mode)
{
	char *src, *dst, *cmd, *good = case_dir("good");
	ck_assert_int_ge(asprintf(&src, "%s/libweft-rt-good.so", good), 0);
	free(good);
	ck_assert_int_ge(asprintf(&dst, "%s/libweft-rt-good.so", folder), 0);
	ck_assert_int_ge(asprintf(&cmd, "cp '%s' '%s'", src, dst), 0);
	int st;
	free(wt_run_capture(cmd, &st));
	ck_assert_int_eq(st, 0);
	ck_assert_int_eq(chmod(dst, mode), 0);
	free(src);
	free(cmd);
	return dst;
}

/* A plugin file or folder that someone other than root or this user can
 * change is refused, with the reason; so is one below a folder writable by
 * others without the sticky bit; plugin_trust = relaxed loads it, warning. */
START_TEST(untrusted_plugin_files_refused)
{
	char *base = wt_mkdtemp("reg-trust"), *open_dir, *inner, *f, *need;
	ck_assert_int_ge(asprintf(&open_dir, "%s/open", base), 0);
	ck_assert_int_ge(asprintf(&inner, "%s/open/plugins", base), 0);
	ck_assert_int_eq(mkdir(open_dir, 0755), 0);
	ck_assert_int_eq(mkdir(inner, 0755), 0);
	const char *loaded = "rt-good          transport";

	/* Writable by others, then by its group. */
	f = put_plugin(inner, 0666);
	char *out = info_at(inner, NULL);
	ck_assert_int_ge(asprintf(&need, "REJECTED %s: not trusted: the file is writable by others", f), 0);
	ASSERT_HAS(out, need);
	ASSERT_HASNT(out, loaded);
	free(out);
	free(need);
	out = info_at(inner, "WEFT_CORE_PLUGIN_TRUST=relaxed");
	ASSERT_HAS(out, loaded);
	ASSERT_HAS(out, "loaded although the file is writable by others (core.plugin_trust = relaxed)");
	free(out);
	ck_assert_int_eq(chmod(f, 0664), 0);
	out = info_at(inner, NULL);
	ASSERT_HAS(out, "not trusted: the file is writable by its group");
	free(out);

	/* The file is fine; its folder is not. */
	ck_assert_int_eq(chmod(f, 0644), 0);
	ck_assert_int_eq(chmod(inner, 0777), 0);
	out = info_at(inner, NULL);
	ck_assert_int_ge(asprintf(&need, "not trusted: its folder %s is writable by others", inner), 0);
	ASSERT_HAS(out, need);
	free(out);
	free(need);

	/* A folder above, writable by others: refused without the sticky bit,
	 * accepted with it (as /tmp). */
	ck_assert_int_eq(chmod(inner, 0755), 0);
	ck_assert_int_eq(chmod(open_dir, 0777), 0);
	out = info_at(inner, NULL);
	ck_assert_int_ge(asprintf(&need, "the folder %s above it is writable by others without the sticky bit", open_dir),
			 0);
	ASSERT_HAS(out, need);
	free(out);
	free(need);
	ck_assert_int_eq(chmod(open_dir, 01777), 0);
	out = info_at(inner, NULL);
	ASSERT_HAS(out, loaded);
	free(out);

	/* Owned by another user: only root can make such a file here. */
	if (geteuid() == 0) {
		ck_assert_int_eq(chown(f, 65534, 65534), 0);
		out = info_at(inner, NULL);
		ASSERT_HAS(out, "not trusted: the file is owned by neither root nor this process's user");
		free(out);
	} else {
		printf("SKIP: the ownership case needs root to give a file away\n");
	}
	ck_assert_int_eq(chmod(open_dir, 0755), 0);
	free(f);
	free(open_dir);
	free(inner);
	wt_rmdir(base);
	free(base);
}
END_TEST

/* A copy of libweft.so and weft-info installed outside the build no longer
 * searches the build's plugin folder (anyone who can create that path would
 * choose the copy's code); relative WEFT_PLUGIN_PATH entries are ignored with
 * a warning. */
START_TEST(installed_copy_skips_build_folder)
{
	char *dir = wt_mkdtemp("rt-install");
	char *cmd;
	ck_assert_int_ge(asprintf(&cmd,
				  "mkdir -p '%s/bin' '%s/lib' && cp -L '%s' '%s/bin/' && "
				  "for f in $(dirname '%s')/libweft.so*; do cp -L \"$f\" '%s/lib/'; done",
				  dir, dir, RT_WEFT_INFO, dir, RT_INTREE_DIR, dir),
			 0);
	int st = 0;
	char *out = wt_run_capture(cmd, &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "copying failed:\n%s", out);
	free(out);
	free(cmd);
	ck_assert_int_ge(asprintf(&cmd, "env WEFT_PLUGIN_PATH=rel/plugins '%s/bin/weft-info'", dir), 0);
	out = wt_run_capture(cmd, &st);
	ck_assert_msg(WIFEXITED(st), "the copy of weft-info died:\n%s", out);
	ASSERT_HASNT(out, RT_INTREE_DIR);
	ASSERT_HAS(out, "WEFT_PLUGIN_PATH entry 'rel/plugins' is relative: ignored");
	free(out);
	free(cmd);
	/* The build's own weft-info still finds the build's plugins. */
	int code;
	out = run_info(NULL, NULL, &code);
	ASSERT_HAS(out, RT_INTREE_DIR);
	free(out);
	wt_rmdir(dir);
	free(dir);
}
END_TEST

/* A one-rank communicator over the in-tree plugins with plugins = sel. */
static weft_comm_t *comm_with_plugins(const char *sel)
{
	ck_assert_int_eq(setenv("WEFT_PLUGIN_PATH", RT_INTREE_DIR, 1), 0);
	if (sel)
		ck_assert_int_eq(setenv("WEFT_CORE_PLUGINS", sel, 1), 0);
	struct weft_unique_id id;
	weft_comm_t *comm = NULL;
	ck_assert_int_eq(weft_get_unique_id(&id), 0);
	ck_assert_int_eq(weft_comm_create(&id, 1, 0, &comm), 0);
	return comm;
}

/* An excluded plugin is never opened: nothing it links is mapped, and no
 * signal handler of its libraries is installed. */
START_TEST(plugins_excluded_never_opened)
{
	unsigned long long before = wt_caught_signals();
	weft_comm_t *comm = comm_with_plugins("^ucx,ofi,ib,xgmi,nvlink,algo-gpu");
	ck_assert_msg(!wt_mapped("libucs") && !wt_mapped("libucp") && !wt_mapped("libfabric"),
		      "an excluded plugin's library is mapped");
	ck_assert_msg(!wt_mapped("libweft-ucx.so"), "libweft-ucx.so is mapped although excluded");
	unsigned long long after = wt_caught_signals();
	ck_assert_msg(after == before, "caught signals changed from %llx to %llx", before, after);
	ck_assert_int_eq(weft_comm_destroy(comm), 0);
}
END_TEST

/* The same program with ucx allowed and its libraries' handlers kept: UCX's
 * libraries are mapped and have installed handlers (what the exclusion above
 * keeps out is really there otherwise; UCX 1.13 catches SIGSEGV, SIGBUS,
 * SIGTERM and more). Without keep_library_signal_handlers the core puts the
 * process's own back: tests/test_signals.c. */
START_TEST(plugins_allowed_ucx_is_mapped)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/libweft-ucx.so", RT_INTREE_DIR);
	if (access(path, R_OK) != 0) {
		printf("SKIP: %s not built\n", path);
		return;
	}
	ck_assert_int_eq(setenv("WEFT_CORE_KEEP_LIBRARY_SIGNAL_HANDLERS", "1", 1), 0);
	unsigned long long before = wt_caught_signals();
	weft_comm_t *comm = comm_with_plugins("shm,ucx");
	ck_assert_msg(wt_mapped("libucs"), "libucs is not mapped with the ucx plugin allowed");
	ck_assert_msg(wt_caught_signals() != before, "no signal handler came with UCX (mask %llx)", before);
	ck_assert_int_eq(weft_comm_destroy(comm), 0);
}
END_TEST

/* ------------------------------------------------------------- ABI growth */

/* Loads one case folder in this (forked) process; returns its loaded entry. */
static const struct weft__plugin_entry *load_case(const char *cas, const char *name)
{
	char *dir = case_dir(cas);
	ck_assert_int_eq(setenv("WEFT_PLUGIN_PATH", dir, 1), 0);
	ck_assert_int_eq(weft__registry_load(), 0);
	const struct weft__plugin_entry *const *e = NULL;
	int n = weft__registry_entries(&e);
	const struct weft__plugin_entry *found = NULL;
	for (int i = 0; i < n; i++)
		if (e[i]->name && strcmp(e[i]->name, name) == 0 && strncmp(e[i]->path, dir, strlen(dir)) == 0)
			found = e[i];
	ck_assert_msg(found != NULL, "no entry '%s' from %s", name, dir);
	free(dir);
	return found;
}

START_TEST(newer_minor_loads)
{
	const struct weft__plugin_entry *e = load_case("newminor", "rt-newminor");
	ck_assert_msg(e->state == WEFT_PLUGIN_LOADED, "rt-newminor not loaded: %s", e->reason ? e->reason : "");
	ck_assert_int_eq(e->abi_major, WEFT_PLUGIN_ABI_MAJOR);
	ck_assert_int_eq(e->abi_minor, 99);
	const struct weft_transport_ops *t = e->ops;
	char buf[128];
	ck_assert_int_eq(WEFT_CALL_OP(t, struct weft_transport_ops, describe, NULL, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "rt-newminor-describe");

	int code;
	char *env;
	char *dir = case_dir("newminor");
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s'", dir), 0);
	char *out = run_info(env, NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	ASSERT_HAS(out, "rt-newminor      transport ABI 0.99");
	ASSERT_HAS(out, "rt-newminor-describe");
	free(out);
	free(env);
	free(dir);
}
END_TEST

START_TEST(older_plugin_without_new_ops_loads)
{
	const struct weft__plugin_entry *e = load_case("old", "rt-old");
	ck_assert_msg(e->state == WEFT_PLUGIN_LOADED, "rt-old not loaded: %s", e->reason ? e->reason : "");
	ck_assert_int_eq(e->abi_minor, 0);
	const struct weft_transport_ops *t = e->ops;
	ck_assert_uint_lt(t->size, sizeof(struct weft_transport_ops));
	/* The ops of ABI 0.1 lie past its table: the checking macro must say
	 * -ENOSYS without reading them (they abort if called). */
	char buf[64];
	int n = 4;
	struct weft_tp_device dev[4];
	ck_assert_int_eq(WEFT_CALL_OP(t, struct weft_transport_ops, describe, NULL, buf, sizeof(buf)), -ENOSYS);
	ck_assert_int_eq(WEFT_CALL_OP(t, struct weft_transport_ops, probe, dev, &n), -ENOSYS);
	ck_assert_int_eq(WEFT_CALL_OP(t, struct weft_transport_ops, ep_describe, NULL, buf, sizeof(buf)), -ENOSYS);
	/* Its 0.0 ops sit where the core's struct expects them. */
	void *tc = NULL;
	struct weft_tp_open_args args = {.size = sizeof(args), .rank = 0, .nranks = 1};
	ck_assert_int_eq(WEFT_CALL_OP(t, struct weft_transport_ops, open, &args, &tc), 0);
	ck_assert_ptr_eq(tc, (void *)0x01d);
	/* The services table it was given stays usable after init. */
	ck_assert_ptr_nonnull(e->core);
	ck_assert_uint_eq(e->core->size, sizeof(struct weft_core_api));
	ck_assert_int_eq(e->core->core_version, weft_get_version());
	void *mem = e->core->calloc(4, 16);
	ck_assert_ptr_nonnull(mem);
	e->core->free(mem);
	ck_assert_int_eq(e->core->log_enabled(e->core->self, WEFT_LOG_ERROR), 1);

	/* weft-info shows it, without a describe line, and does not crash. */
	int code;
	char *env;
	char *dir = case_dir("old");
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s'", dir), 0);
	char *out = run_info(env, NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	ASSERT_HAS(out, "rt-old           transport ABI 0.0");
	free(out);
	free(env);
	free(dir);
}
END_TEST

/* ----------------------------------------------------- registry object */

static void *load_thread(void *arg)
{
	*(int *)arg = weft__registry_load();
	return NULL;
}

START_TEST(loaded_once_from_any_thread)
{
	char *g = case_dir("good");
	ck_assert_int_eq(setenv("WEFT_PLUGIN_PATH", g, 1), 0);
	int rc[8];
	ck_assert_int_eq(wt_run_threads(8, load_thread, rc, sizeof(rc[0])), 0);
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(rc[i], 0);
	const struct weft__plugin_entry *const *e = NULL;
	int n = weft__registry_entries(&e);
	int good = 0;
	for (int i = 0; i < n; i++)
		if (e[i]->name && strcmp(e[i]->name, "rt-good") == 0)
			good++;
	ck_assert_int_eq(good, 1);

	/* A later call keeps the first result, whatever the environment says now. */
	char *d = case_dir("dup");
	ck_assert_int_eq(setenv("WEFT_PLUGIN_PATH", d, 1), 0);
	ck_assert_int_eq(setenv("WEFT_CORE_REQUIRE", "rt-nowhere", 1), 0);
	ck_assert_int_eq(weft__registry_load(), 0);
	ck_assert_int_eq(weft__registry_entries(&e), n);
	char *path = weft__registry_search_path();
	ck_assert_ptr_nonnull(path);
	ck_assert_msg(strncmp(path, g, strlen(g)) == 0, "search path '%s' does not start with %s", path, g);
	free(path);
	free(d);
	free(g);
}
END_TEST

/* -------------------------------------------------------------- weft-info */

START_TEST(info_config_shows_plugin_parameter)
{
	char *g = case_dir("good");
	char *env;
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s' WEFT_RT_GOOD_DEPTH=7 WEFT_LOG_LEVEL=info", g), 0);
	int code;
	char *out = run_info(env, "-c", &code);
	ck_assert_msg(code == 0, "weft-info -c exited %d:\n%s", code, out);
	/* The plugin read it back through core->param_get during init. */
	ASSERT_HAS(out, "rt-good: depth 7 from env");
	char line[1024];
	line_with(out, "rt-good.depth", line, sizeof(line));
	ck_assert_msg(strstr(line, "7") && strstr(line, "env"), "rt-good.depth line '%s' lacks value 7 from env:\n%s",
		      line, out);
	free(out);
	free(env);

	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s' WEFT_LOG_LEVEL=info", g), 0);
	out = run_info(env, "--config", &code);
	ck_assert_msg(code == 0, "weft-info --config exited %d:\n%s", code, out);
	line_with(out, "rt-good.depth", line, sizeof(line));
	ck_assert_msg(strstr(line, "4") && strstr(line, "default"),
		      "rt-good.depth line '%s' lacks the default 4:\n%s", line, out);
	ASSERT_HAS(out, "Queue depth of the test transport.");
	/* The plugin logged during init through core->log, tagged by its file. */
	ASSERT_HAS(out, "rt-good: init of rt-good");
	free(out);
	free(env);
	free(g);
}
END_TEST

START_TEST(info_lists_plugins_and_kinds)
{
	char *g = case_dir("good");
	char *env, *want;
	ck_assert_int_ge(asprintf(&env, "WEFT_PLUGIN_PATH='%s'", g), 0);
	ck_assert_int_ge(asprintf(&want, "rt-good          transport ABI %d.%-3d %s/libweft-rt-good.so",
				  WEFT_PLUGIN_ABI_MAJOR, WEFT_PLUGIN_ABI_MINOR, g), 0);
	int code;
	char *out = run_info(env, NULL, &code);
	ck_assert_msg(code == 0, "weft-info exited %d:\n%s", code, out);
	ASSERT_HAS(out, "weft 0.");
	ASSERT_HAS(out, "config: ");
	ASSERT_HAS(out, want);
	ASSERT_HAS(out, "      rt-good-describe");
	ASSERT_HAS(out, "rt-good-algos    algorithm");
	free(out);
	free(env);
	free(want);
	free(g);
}
END_TEST

START_TEST(info_config_syntax_error_names_file_and_line)
{
	char *tmp = wt_mkdtemp("reg-badconf");
	char *conf = wt_write_file(tmp, "broken.conf", "[core]\n# a comment\nthis line is not a key = value or [section\n");
	char *env, *where;
	ck_assert_int_ge(asprintf(&env, "WEFT_CONFIG='%s'", conf), 0);
	ck_assert_int_ge(asprintf(&where, "%s:3", conf), 0);
	int code;
	char *out = run_info(env, "-c", &code);
	ck_assert_msg(code != 0 && code != -1, "weft-info -c exited %d with a broken config:\n%s", code, out);
	ASSERT_HAS(out, where);
	free(out);
	free(env);
	free(where);
	free(conf);
	wt_rmdir(tmp);
	free(tmp);
}
END_TEST

/* The rules' environment forms as weft-info shows them: -c names the
 * variable as their source, --select cites "VARIABLE:N", a bad one exits 2. */
START_TEST(info_rules_from_environment)
{
	int code;
	char *out = run_info("WEFT_TRANSPORT_RULES='forbid ucx; require shm when peer=same-host'", "-c", &code);
	ck_assert_msg(code == 0, "weft-info -c exited %d:\n%s", code, out);
	ASSERT_HAS(out, "[transport]  (env WEFT_TRANSPORT_RULES)\n  rule 1: forbid ucx\n  rule 2: require shm when "
			"peer=same-host\n");
	free(out);
	out = run_info("WEFT_CORE_PLUGINS=shm,algo-host WEFT_TRANSPORT_RULES='require shm'", "--select --np 2", &code);
	ck_assert_msg(code == 0, "weft-info --select exited %d:\n%s", code, out);
	ASSERT_HAS(out, "required by WEFT_TRANSPORT_RULES:1");
	free(out);
	out = run_info("WEFT_CORE_PLUGINS=shm,algo-host "
		       "WEFT_ALGORITHM_RULES='use algo-host/allreduce-rsag when coll=allreduce and size=..4K'",
		       "--select --np 2", &code);
	ck_assert_msg(code == 0, "weft-info --select exited %d:\n%s", code, out);
	ASSERT_HAS(out, "(rule WEFT_ALGORITHM_RULES:1)");
	free(out);
	out = run_info("WEFT_ALGORITHM_RULES='use algo-host/x;use'", "-c", &code);
	ck_assert_msg(code == 2, "weft-info -c exited %d, not 2:\n%s", code, out);
	ASSERT_HAS(out, "WEFT_ALGORITHM_RULES, rule 2 ('use'): bad rule in [algorithm]");
	free(out);
}
END_TEST

/* The liveness values' bounds: outside them weft-info exits 2 naming the
 * value and its range, and a communicator is not created; at the edges
 * both are fine. */
START_TEST(info_liveness_bounds)
{
	static const struct {
		const char *env, *msg;
	} bad[] = {
		{"WEFT_CORE_HEARTBEAT_INTERVAL=1e-9", "heartbeat_interval (WEFT_CORE_HEARTBEAT_INTERVAL) is 1e-09 s; it must "
						      "lie in [0.01, peer_timeout / 3 = 6.66667] s"},
		{"WEFT_CORE_HEARTBEAT_INTERVAL=1e9", "is 1e+09 s; it must lie in [0.01, peer_timeout / 3"},
		{"WEFT_CORE_PEER_TIMEOUT=0.05 WEFT_CORE_HEARTBEAT_INTERVAL=0.01",
		 "peer_timeout (WEFT_CORE_PEER_TIMEOUT) is 0.05 s; it must lie in [0.1, 86400] s"},
		{"WEFT_CORE_PEER_TIMEOUT=100000", "is 100000 s; it must lie in [0.1, 86400] s"},
		{"WEFT_CORE_PEER_TIMEOUT=2", "is 1 s; it must lie in [0.01, peer_timeout / 3 = 0.666667] s"},
	};
	int code;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *out = run_info(bad[i].env, NULL, &code);
		ck_assert_msg(code == 2, "%s: weft-info exited %d, not 2:\n%s", bad[i].env, code, out);
		ASSERT_HAS(out, bad[i].msg);
		free(out);
	}
	char *out = run_info("WEFT_CORE_PEER_TIMEOUT=0.1 WEFT_CORE_HEARTBEAT_INTERVAL=0.01", NULL, &code);
	ck_assert_msg(code == 0, "the lower edges: weft-info exited %d:\n%s", code, out);
	free(out);
	out = run_info("WEFT_CORE_PEER_TIMEOUT=86400 WEFT_CORE_HEARTBEAT_INTERVAL=28800", NULL, &code);
	ck_assert_msg(code == 0, "the upper edges: weft-info exited %d:\n%s", code, out);
	free(out);
	/* Creation refuses the same. */
	ck_assert_int_eq(setenv("WEFT_CORE_HEARTBEAT_INTERVAL", "1e-9", 1), 0);
	struct weft_unique_id id;
	weft_comm_t *comm = NULL;
	int rc = weft_get_unique_id(&id);
	if (rc == 0)
		rc = weft_comm_create(&id, 1, 0, &comm);
	ck_assert_msg(rc == -WEFT_ERR_CONFIG, "a 1e-9 s heartbeat gave %d, not -WEFT_ERR_CONFIG", rc);
	ck_assert_ptr_null(comm);
}
END_TEST

/* A value that is set must be honoured (issue 30 item 2): one its type, its
 * declared bounds or names refuse, or a rule naming no transport, makes
 * weft-info exit 2 naming file:line or the variable, and fails creation. */
START_TEST(set_values_honoured_or_refused)
{
	static const struct {
		const char *conf, *env, *msg;
	} bad[] = {
		{"[shm]\nmap = yess\n", NULL, ":2: map = 'yess': not a boolean"},
		{"[ofi]\nmax_inflight = 0\n", NULL, ":2: max_inflight = '0': outside 1..16777216"},
		{NULL, "WEFT_OFI_MAX_INFLIGHT=0", "WEFT_OFI_MAX_INFLIGHT='0': outside 1..16777216"},
		{NULL, "WEFT_OFI_SIGNAL_ORDER=sometimes", "not one of: auto, ordered, wait"},
		{"[transport]\nuse ofii\n", NULL, ":2: [transport] names 'ofii', which is no transport; did you mean 'ofi'?"},
	};
	char *tmp = wt_mkdtemp("reg-values");
	int code;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *conf = bad[i].conf ? wt_write_file(tmp, "weft.conf", bad[i].conf) : NULL, *env;
		ck_assert_int_ge(asprintf(&env, "%s%s%s %s", conf ? "WEFT_CONFIG='" : "", conf ? conf : "", conf ? "'" : "",
					  bad[i].env ? bad[i].env : ""),
				 0);
		char *out = run_info(env, NULL, &code);
		ck_assert_msg(code == 2, "%s: weft-info exited %d, not 2:\n%s", env, code, out);
		ASSERT_HAS(out, bad[i].msg);
		free(out);
		free(env);
		free(conf);
	}
	wt_rmdir(tmp);
	free(tmp);
	/* Creation refuses them too: a bad value, and a provider that is set but
	 * cannot open (it fell back to tcp before); then the control. */
	static const char *const envs[][2] = {{"WEFT_SHM_MAP", "yess"}, {"WEFT_OFI_PROVIDER_LOCAL", "shmm"}, {NULL, NULL}};
	for (int i = 0; i < 3; i++) {
		if (envs[i][0])
			ck_assert_int_eq(setenv(envs[i][0], envs[i][1], 1), 0);
		struct weft_unique_id id;
		weft_comm_t *comm = NULL;
		int rc = weft_get_unique_id(&id);
		if (rc == 0)
			rc = weft_comm_create(&id, 1, 0, &comm);
		if (envs[i][0]) {
			ck_assert_msg(rc == -WEFT_ERR_CONFIG, "%s=%s gave %d, not -WEFT_ERR_CONFIG", envs[i][0], envs[i][1],
				      rc);
			ck_assert_ptr_null(comm);
			unsetenv(envs[i][0]);
		} else {
			ck_assert_int_eq(rc, 0);
			ck_assert_int_eq(weft_comm_destroy(comm), 0);
		}
	}
}
END_TEST

/* One mistake, one message (issue 30 item 3): a broken file opens no plugin,
 * so none logs the parameters it cannot read; the message names the real
 * mistake. */
START_TEST(one_mistake_one_message)
{
	static const struct {
		const char *conf, *msg;
	} bad[] = {
		{"[transprot]\nuse shm\n", ":1: unknown section [transprot]; did you mean [transport]? (line 2, 'use shm', "
					     "is a rule"},
		{"[OFI]\nmax_inflight = 4\n", ":1: bad section header '[OFI]': names are lower case; did you mean '[ofi]'?"},
		{"[core\npeer_timeout = 3\n", ":1: bad section header '[core': no closing ']'"},
	};
	char *tmp = wt_mkdtemp("reg-onemsg");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *conf = wt_write_file(tmp, "weft.conf", bad[i].conf), *env;
		ck_assert_int_ge(asprintf(&env, "WEFT_CONFIG='%s'", conf), 0);
		int code;
		char *out = run_info(env, NULL, &code);
		ck_assert_msg(code == 2, "%s: weft-info exited %d, not 2:\n%s", bad[i].conf, code, out);
		ASSERT_HAS(out, bad[i].msg);
		int errors = 0;
		for (const char *p = out; (p = strstr(p, " error ")); p++)
			errors++;
		ck_assert_msg(errors == 1, "%d error lines for one mistake:\n%s", errors, out);
		free(out);
		free(env);
		free(conf);
	}
	wt_rmdir(tmp);
	free(tmp);
}
END_TEST

START_TEST(info_options)
{
	int code;
	char *out = run_info(NULL, "--version", &code);
	ck_assert_int_eq(code, 0);
	char want[64];
	snprintf(want, sizeof(want), "weft-info %d.%d.%d\n", WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR, WEFT_VERSION_PATCH);
	ASSERT_HAS(out, want);
	snprintf(want, sizeof(want), "core %d.%d.%d", weft_get_version() / 10000, weft_get_version() / 100 % 100,
		 weft_get_version() % 100);
	ASSERT_HAS(out, want);
	free(out);

	out = run_info(NULL, "--help", &code);
	ck_assert_int_eq(code, 0);
	ASSERT_HAS(out, "--config");
	ASSERT_HAS(out, "WEFT_PLUGIN_PATH");
	free(out);

	out = run_info(NULL, "--frobnicate", &code);
	ck_assert_int_eq(code, 2);
	ASSERT_HAS(out, "unknown option '--frobnicate'");
	free(out);
}
END_TEST

static Suite *registry_suite(void)
{
	Suite *s = suite_create("registry");
	TCase *tc = tcase_create("load");
	tcase_add_test(tc, garbage_file_is_named_with_reason);
	tcase_add_test(tc, truncated_plugins_refused);
	tcase_add_test(tc, unresolved_symbol_quotes_dlerror);
	tcase_add_test(tc, no_init_symbol);
	tcase_add_test(tc, init_returns_null);
	tcase_add_test(tc, abi_major_refused_naming_both);
	tcase_add_test(tc, missing_required_op_named);
	tcase_add_test(tc, bad_descriptors_refused_one_by_one);
	tcase_add_test(tc, names_must_match_their_file);
	tcase_add_test(tc, same_name_in_two_folders_is_shadowed);
	tcase_add_test(tc, same_file_twice_is_quiet);
	tcase_add_test(tc, other_file_cannot_take_a_loaded_name);
	tcase_add_test(tc, search_path_order_and_empty_entries);
	tcase_add_test(tc, required_missing_plugin_is_an_error);
	tcase_add_test(tc, required_misspelled_suggests_closest);
	tcase_add_test(tc, required_rejected_plugin_gives_reason);
	tcase_add_test(tc, newer_minor_loads);
	tcase_add_test(tc, older_plugin_without_new_ops_loads);
	tcase_add_test(tc, loaded_once_from_any_thread);
	tcase_add_test(tc, plugins_list_keeps_files_out);
	tcase_add_test(tc, plugins_list_bad_values_fail);
	tcase_add_test(tc, plugins_excluded_never_opened);
	tcase_add_test(tc, plugins_allowed_ucx_is_mapped);
	suite_add_tcase(s, tc);
	TCase *info = tcase_create("weft-info");
	tcase_add_test(info, info_config_shows_plugin_parameter);
	tcase_add_test(info, info_lists_plugins_and_kinds);
	tcase_add_test(info, info_config_syntax_error_names_file_and_line);
	tcase_add_test(info, info_options);
	tcase_add_test(info, info_rules_from_environment);
	tcase_add_test(info, info_liveness_bounds);
	tcase_add_test(info, set_values_honoured_or_refused);
	tcase_add_test(info, one_mistake_one_message);
	tcase_add_test(info, installed_copy_skips_build_folder);
	tcase_add_test(info, untrusted_plugin_files_refused);
	suite_add_tcase(s, info);
	return s;
}

int main(void)
{
	/* Each case must load a fresh registry: that needs Check's fork mode. */
	const char *fork_mode = getenv("CK_FORK");
	if (fork_mode && strcmp(fork_mode, "no") == 0) {
		fprintf(stderr, "test_registry needs CK_FORK unset or yes: the registry loads once per process\n");
		return WT_SKIP;
	}
	return wt_run_suite(registry_suite());
}
