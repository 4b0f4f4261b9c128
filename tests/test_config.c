/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of core/config.c and core/rules.c: the file, the environment, typed
 * parameters and their sources, unknown-name warnings and the rule grammar.
 * The config loads once per process, so every case runs in its own fork. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <weft/weft.h>

#include "cfgtext.h"
#include "config.h"
#include "rules.h"
#include "testlib.h"

static char *dir;      /* this test's own directory */
static char *log_path; /* WEFT_LOG_FILE: what the user would see on stderr */
static char *conf_path; /* the file use_conf wrote, owned here */

static void setup(void)
{
	dir = wt_mkdtemp("config");
	ck_assert_ptr_nonnull(dir);
	ck_assert_int_ne(asprintf(&log_path, "%s/log", dir), -1);
	/* The log reads these at first use, which is inside this forked test. */
	setenv("WEFT_LOG_FILE", log_path, 1);
	setenv("WEFT_LOG_LEVEL", "warn", 1);
}

static void teardown(void)
{
	wt_rmdir(dir);
	free(dir);
	free(log_path);
	free(conf_path);
}

/* Writes text as this test's config file and points WEFT_CONFIG at it.
 * Returns its path, freed by teardown. */
static const char *use_conf(const char *text)
{
	free(conf_path);
	conf_path = wt_write_file(dir, "weft.conf", text);
	ck_assert_ptr_nonnull(conf_path);
	setenv("WEFT_CONFIG", conf_path, 1);
	return conf_path;
}

static char *log_text(void)
{
	char *t = wt_read_file(log_path);
	return t ? t : strdup("");
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static int declare(const char *owner, const char *section, const char *key, enum weft_param_type t,
		   const char *def)
{
	struct weft_param_decl d = {.size = sizeof(d), .section = section, .key = key,
	 .type = t, .default_value = def, .help = "test parameter"};
	return weft__param_declare(owner, &d);
}

static char *print_all(void)
{
	/* Static: gcc's -Wdangling-pointer takes the stream's pointer to these
	 * for a pointer into this frame and warns at -O3. */
	static char *buf;
	static size_t len;
	buf = NULL;
	len = 0;
	FILE *f = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(f);
	weft__config_print(f);
	fclose(f);
	return buf;
}

/* ------------------------------------------------------------ precedence */

START_TEST(test_precedence_and_sources)
{
	const char *path = use_conf("[core]\nfifo_depth = 77\npeer_timeout = 5\n");
	setenv("WEFT_CORE_PEER_TIMEOUT", "7.5", 1);
	ck_assert_int_eq(weft__config_load(), 0);
	ck_assert_str_eq(weft__config_path(), path);

	int64_t depth = 0;
	double pt = 0, hb = 0;
	const char *root = "x";
	enum weft_param_source src = -1;
	ck_assert_int_eq(weft__param_get("core", "fifo_depth", WEFT_PARAM_INT, &depth, &src), 0);
	ck_assert_int_eq(depth, 77);
	ck_assert_int_eq(src, WEFT_PARAM_SRC_FILE);
	ck_assert_int_eq(weft__param_get("core", "peer_timeout", WEFT_PARAM_DOUBLE, &pt, &src), 0);
	ck_assert_double_eq(pt, 7.5);
	ck_assert_int_eq(src, WEFT_PARAM_SRC_ENV);
	ck_assert_int_eq(weft__param_get("core", "heartbeat_interval", WEFT_PARAM_DOUBLE, &hb, &src), 0);
	ck_assert_double_eq(hb, 1.0);
	ck_assert_int_eq(src, WEFT_PARAM_SRC_DEFAULT);
	ck_assert_int_eq(weft__param_get("core", "bootstrap_root", WEFT_PARAM_STRING, &root, &src), 0);
	ck_assert_ptr_null(root);
	ck_assert_int_eq(src, WEFT_PARAM_SRC_DEFAULT);
	uint64_t maxmsg = 0;
	ck_assert_int_eq(weft__param_get("core", "bootstrap_max_msg", WEFT_PARAM_SIZE, &maxmsg, NULL), 0);
	ck_assert_uint_eq(maxmsg, 64ull << 20);

	/* An empty variable counts as unset: the file's value shows again. */
	setenv("WEFT_CORE_PEER_TIMEOUT", "", 1);
	ck_assert_int_eq(weft__param_get("core", "peer_timeout", WEFT_PARAM_DOUBLE, &pt, &src), 0);
	ck_assert_double_eq(pt, 5.0);
	ck_assert_int_eq(src, WEFT_PARAM_SRC_FILE);
	setenv("WEFT_CORE_PEER_TIMEOUT", "7.5", 1);

	char *out = print_all();
	char want[1024];
	snprintf(want, sizeof(want), "core.fifo_depth = 77  (file %s:2)\n", path);
	ck_assert_msg(strstr(out, want), "missing '%s' in:\n%s", want, out);
	ck_assert_msg(strstr(out, "core.peer_timeout = 7.5  (env WEFT_CORE_PEER_TIMEOUT)\n"), "%s", out);
	ck_assert_msg(strstr(out, "core.heartbeat_interval = 1  (default)\n"), "%s", out);
	ck_assert_msg(strstr(out, "core.bootstrap_root = (unset)  (default)\n"), "%s", out);
	ck_assert_msg(strstr(out, "core.bootstrap_max_msg = 64M  (default)\n    "), "%s", out);
	/* Every core parameter is there, with a help line, in sorted order. */
	const char *keys[] = {"bootstrap_addr", "bootstrap_ifname", "bootstrap_max_msg", "bootstrap_root",
			      "bootstrap_secret", "bootstrap_timeout", "fifo_depth", "heartbeat_interval",
			      "peer_timeout", "require"};
	const char *prev = out;
	char k[128];
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		snprintf(k, sizeof(k), "core.%s = ", keys[i]);
		const char *at = strstr(out, k);
		ck_assert_msg(at && at >= prev, "%s missing or out of order in:\n%s", k, out);
		const char *nl = strchr(at, '\n');
		ck_assert_msg(nl && strncmp(nl + 1, "    ", 4) == 0 && nl[5] != '\n', "no help for %s", k);
		prev = at;
	}
	free(out);
}
END_TEST

START_TEST(test_plugin_section_precedence)
{
	use_conf("[algo-host]\nchunk = 2M\n");
	ck_assert_int_eq(declare("algo-host", "algo-host", "chunk", WEFT_PARAM_SIZE, "1M"), 0);
	ck_assert_int_eq(declare("algo-host", "algo-host", "ring-depth", WEFT_PARAM_INT, "4"), 0);
	uint64_t c = 0;
	int64_t d = 0;
	enum weft_param_source src;
	ck_assert_int_eq(weft__param_get("algo-host", "chunk", WEFT_PARAM_SIZE, &c, &src), 0);
	ck_assert_uint_eq(c, 2u << 20);
	ck_assert_int_eq(src, WEFT_PARAM_SRC_FILE);
	setenv("WEFT_ALGO_HOST_CHUNK", "512K", 1);
	setenv("WEFT_ALGO_HOST_RING_DEPTH", "8", 1);
	ck_assert_int_eq(weft__param_get("algo-host", "chunk", WEFT_PARAM_SIZE, &c, &src), 0);
	ck_assert_uint_eq(c, 512u << 10);
	ck_assert_int_eq(src, WEFT_PARAM_SRC_ENV);
	ck_assert_int_eq(weft__param_get("algo-host", "ring-depth", WEFT_PARAM_INT, &d, &src), 0);
	ck_assert_int_eq(d, 8);
	ck_assert_int_eq(src, WEFT_PARAM_SRC_ENV);
}
END_TEST

/* ------------------------------------------------------------ types */

struct value_case {
	enum weft_param_type type;
	const char *text;
	int ok;
	int64_t i;
	uint64_t u;
	double d;
};

static const struct value_case value_cases[] = {
	{.type = WEFT_PARAM_INT, .text = "42", .ok = 1, .i = 42},
	{.type = WEFT_PARAM_INT, .text = "-17", .ok = 1, .i = -17},
	{.type = WEFT_PARAM_INT, .text = "0x1F", .ok = 1, .i = 31},
	{.type = WEFT_PARAM_INT, .text = "-0x10", .ok = 1, .i = -16},
	{.type = WEFT_PARAM_INT, .text = "010", .ok = 1, .i = 10},
	{.type = WEFT_PARAM_INT, .text = " 5 ", .ok = 1, .i = 5},
	{.type = WEFT_PARAM_INT, .text = "9223372036854775807", .ok = 1, .i = INT64_MAX},
	{.type = WEFT_PARAM_INT, .text = "-9223372036854775808", .ok = 1, .i = INT64_MIN},
	{.type = WEFT_PARAM_INT, .text = "9223372036854775808", .ok = 0},
	{.type = WEFT_PARAM_INT, .text = "abc", .ok = 0},
	{.type = WEFT_PARAM_INT, .text = "12abc", .ok = 0},
	{.type = WEFT_PARAM_INT, .text = "1.5", .ok = 0},
	{.type = WEFT_PARAM_INT, .text = "0x", .ok = 0},
	{.type = WEFT_PARAM_INT, .text = "-", .ok = 0},
	{.type = WEFT_PARAM_SIZE, .text = "4096", .ok = 1, .u = 4096},
	{.type = WEFT_PARAM_SIZE, .text = "4K", .ok = 1, .u = 4096},
	{.type = WEFT_PARAM_SIZE, .text = "4k", .ok = 1, .u = 4096},
	{.type = WEFT_PARAM_SIZE, .text = "2M", .ok = 1, .u = 2u << 20},
	{.type = WEFT_PARAM_SIZE, .text = "3G", .ok = 1, .u = 3ull << 30},
	{.type = WEFT_PARAM_SIZE, .text = "1T", .ok = 1, .u = 1ull << 40},
	{.type = WEFT_PARAM_SIZE, .text = "1KiB", .ok = 1, .u = 1024},
	{.type = WEFT_PARAM_SIZE, .text = "2mib", .ok = 1, .u = 2u << 20},
	{.type = WEFT_PARAM_SIZE, .text = "5GiB", .ok = 1, .u = 5ull << 30},
	{.type = WEFT_PARAM_SIZE, .text = "0x100", .ok = 1, .u = 256},
	{.type = WEFT_PARAM_SIZE, .text = "0", .ok = 1},
	{.type = WEFT_PARAM_SIZE, .text = "-1", .ok = 0},
	{.type = WEFT_PARAM_SIZE, .text = "1X", .ok = 0},
	{.type = WEFT_PARAM_SIZE, .text = "1.5M", .ok = 0},
	{.type = WEFT_PARAM_SIZE, .text = "99999999999T", .ok = 0},
	{.type = WEFT_PARAM_SIZE, .text = "18446744073709551616", .ok = 0},
	{.type = WEFT_PARAM_SIZE, .text = "M", .ok = 0},
	{.type = WEFT_PARAM_BOOL, .text = "1", .ok = 1, .i = 1},
	{.type = WEFT_PARAM_BOOL, .text = "0", .ok = 1},
	{.type = WEFT_PARAM_BOOL, .text = "true", .ok = 1, .i = 1},
	{.type = WEFT_PARAM_BOOL, .text = "FALSE", .ok = 1},
	{.type = WEFT_PARAM_BOOL, .text = "yes", .ok = 1, .i = 1},
	{.type = WEFT_PARAM_BOOL, .text = "no", .ok = 1},
	{.type = WEFT_PARAM_BOOL, .text = "On", .ok = 1, .i = 1},
	{.type = WEFT_PARAM_BOOL, .text = "off", .ok = 1},
	{.type = WEFT_PARAM_BOOL, .text = "2", .ok = 0},
	{.type = WEFT_PARAM_BOOL, .text = "maybe", .ok = 0},
	{.type = WEFT_PARAM_DOUBLE, .text = "1.5", .ok = 1, .d = 1.5},
	{.type = WEFT_PARAM_DOUBLE, .text = "-2e3", .ok = 1, .d = -2000.0},
	{.type = WEFT_PARAM_DOUBLE, .text = "7", .ok = 1, .d = 7.0},
	{.type = WEFT_PARAM_DOUBLE, .text = "abc", .ok = 0},
	{.type = WEFT_PARAM_DOUBLE, .text = "inf", .ok = 0},
	{.type = WEFT_PARAM_DOUBLE, .text = "nan", .ok = 0},
	{.type = WEFT_PARAM_DOUBLE, .text = "1.5s", .ok = 0},
	{.type = WEFT_PARAM_DOUBLE, .text = "1e999", .ok = 0},
};

/* One case per forked run: a bad value is logged once per parameter, so each
 * case checks its own log line. */
START_TEST(test_typed_values)
{
	const struct value_case *c = &value_cases[_i];
	static const char *const key_of[] = {"an-int", "a-size", "a-bool", "a-double", "a-string"};
	use_conf("[myplug]\n");
	ck_assert_int_eq(declare("myplug", "myplug", "an-int", WEFT_PARAM_INT, "3"), 0);
	ck_assert_int_eq(declare("myplug", "myplug", "a-size", WEFT_PARAM_SIZE, "1K"), 0);
	ck_assert_int_eq(declare("myplug", "myplug", "a-bool", WEFT_PARAM_BOOL, "no"), 0);
	ck_assert_int_eq(declare("myplug", "myplug", "a-double", WEFT_PARAM_DOUBLE, "0.5"), 0);
	char env[64];
	ck_assert_int_eq(weft__param_env_name("myplug", key_of[c->type], env, sizeof(env)), 0);
	setenv(env, c->text, 1);
	union {
		int64_t i;
		uint64_t u;
		int b;
		double d;
	} v = {.i = 12345};
	enum weft_param_source src = WEFT_PARAM_SRC_DEFAULT;
	int rc = weft__param_get("myplug", key_of[c->type], c->type, &v, &src);
	if (c->ok) {
		ck_assert_msg(rc == 0, "'%s' as type %d: rc %d", c->text, c->type, rc);
		ck_assert_int_eq(src, WEFT_PARAM_SRC_ENV);
		switch (c->type) {
		case WEFT_PARAM_INT: ck_assert_int_eq(v.i, c->i); break;
		case WEFT_PARAM_SIZE: ck_assert_uint_eq(v.u, c->u); break;
		case WEFT_PARAM_BOOL: ck_assert_int_eq(v.b, (int)c->i); break;
		case WEFT_PARAM_DOUBLE: ck_assert_double_eq(v.d, c->d); break;
		default: break;
		}
	} else {
		ck_assert_msg(rc == -WEFT_ERR_CONFIG, "'%s' as type %d parsed (rc %d)", c->text, c->type, rc);
		ck_assert_int_eq(v.i, 12345); /* out untouched on error */
		/* Still an error on the next get, but logged only once. */
		ck_assert_int_eq(weft__param_get("myplug", key_of[c->type], c->type, &v, &src), -WEFT_ERR_CONFIG);
		char *log = log_text();
		char want[128];
		snprintf(want, sizeof(want), "%s='%s'", env, c->text);
		ck_assert_msg(count(log, want) == 1, "want '%s' once in log:\n%s", want, log);
		free(log);
	}
}
END_TEST

START_TEST(test_string_and_file_bad_value)
{
	const char *path = use_conf("[myplug]\n\nlevel = high\nname = \"  padded # kept \"\n");
	ck_assert_int_eq(declare("myplug", "myplug", "level", WEFT_PARAM_INT, "1"), 0);
	ck_assert_int_eq(declare("myplug", "myplug", "name", WEFT_PARAM_STRING, NULL), 0);
	int64_t lvl;
	ck_assert_int_eq(weft__param_get("myplug", "level", WEFT_PARAM_INT, &lvl, NULL), -WEFT_ERR_CONFIG);
	char *log = log_text();
	char want[512];
	snprintf(want, sizeof(want), "%s:3: level = 'high': not an integer", path);
	ck_assert_msg(strstr(log, want), "want '%s' in log:\n%s", want, log);
	free(log);
	const char *name = NULL;
	enum weft_param_source src;
	ck_assert_int_eq(weft__param_get("myplug", "name", WEFT_PARAM_STRING, &name, &src), 0);
	ck_assert_str_eq(name, "  padded # kept ");
	ck_assert_int_eq(src, WEFT_PARAM_SRC_FILE);
	/* An environment string stays valid after the variable changes. */
	const char *a = NULL, *b = NULL;
	setenv("WEFT_MYPLUG_NAME", "first", 1);
	ck_assert_int_eq(weft__param_get("myplug", "name", WEFT_PARAM_STRING, &a, &src), 0);
	ck_assert_int_eq(src, WEFT_PARAM_SRC_ENV);
	setenv("WEFT_MYPLUG_NAME", "second-value-that-is-longer", 1);
	ck_assert_int_eq(weft__param_get("myplug", "name", WEFT_PARAM_STRING, &b, &src), 0);
	ck_assert_str_eq(a, "first");
	ck_assert_str_eq(b, "second-value-that-is-longer");
}
END_TEST

/* ------------------------------------------------------------ declarations */

START_TEST(test_declare_errors)
{
	use_conf("");
	char env[64];
	ck_assert_int_eq(weft__param_env_name("algo-host", "chunk", env, sizeof(env)), 0);
	ck_assert_str_eq(env, "WEFT_ALGO_HOST_CHUNK");
	ck_assert_int_eq(weft__param_env_name("algo-host", "chunk", env, 20), -ENOSPC);
	ck_assert_int_eq(weft__param_env_name("algo-host", "chunk", env, 21), 0);

	ck_assert_int_eq(declare("algo-host", "algo-host", "chunk", WEFT_PARAM_SIZE, "1M"), 0);
	/* Same section and key, and two spellings that map to the same variable. */
	ck_assert_int_eq(declare("other", "algo-host", "chunk", WEFT_PARAM_SIZE, "1M"), -EEXIST);
	ck_assert_int_eq(declare("algo", "algo", "host-chunk", WEFT_PARAM_INT, "1"), -EEXIST);
	ck_assert_int_eq(declare("algo", "algo", "host_chunk", WEFT_PARAM_INT, "1"), -EEXIST);
	ck_assert_int_eq(declare("algo-host", "algo-host", "CHUNK", WEFT_PARAM_INT, "1"), -EINVAL);
	/* The core's parameters are there before any plugin can take their names. */
	ck_assert_int_eq(declare("evil", "core", "fifo_depth", WEFT_PARAM_INT, "1"), -EEXIST);
	ck_assert_int_eq(declare("p", "Bad", "k", WEFT_PARAM_INT, "1"), -EINVAL);
	ck_assert_int_eq(declare("p", "a_b", "k", WEFT_PARAM_INT, "1"), -EINVAL);
	ck_assert_int_eq(declare("p", "p", "", WEFT_PARAM_INT, "1"), -EINVAL);
	ck_assert_int_eq(declare("p", "p", "k k", WEFT_PARAM_INT, "1"), -EINVAL);
	ck_assert_int_eq(declare("p", "p", "k", WEFT_PARAM_INT, "one"), -EINVAL);
	ck_assert_int_eq(declare("p", "p", "k", WEFT_PARAM_SIZE, "-4"), -EINVAL);
	ck_assert_int_eq(declare("p", "p", "k", WEFT_PARAM_BOOL, NULL), -EINVAL);
	ck_assert_int_eq(declare("p", "p", "k", (enum weft_param_type)9, "1"), -EINVAL);
	ck_assert_int_eq(declare("p", "log", "level", WEFT_PARAM_STRING, NULL), -EINVAL);
	ck_assert_int_eq(weft__param_declare("p", NULL), -EINVAL);
	struct weft_param_decl small = {.size = 4, .section = "p", .key = "k",
	 .type = WEFT_PARAM_INT, .default_value = "1", .help = "h"};
	ck_assert_int_eq(weft__param_declare("p", &small), -EINVAL);
	/* None of the refused ones exists now. */
	int64_t i;
	ck_assert_int_eq(weft__param_get("p", "k", WEFT_PARAM_INT, &i, NULL), -ENOENT);
	ck_assert_int_eq(weft__param_get("algo", "host-chunk", WEFT_PARAM_INT, &i, NULL), -ENOENT);
	/* Asking with the wrong type. */
	ck_assert_int_eq(weft__param_get("algo-host", "chunk", WEFT_PARAM_INT, &i, NULL), -EINVAL);
	ck_assert_int_eq(declare("p", "p", "k", WEFT_PARAM_INT, "1"), 0);
	ck_assert_int_eq(weft__param_get("p", "k", WEFT_PARAM_INT, &i, NULL), 0);
	ck_assert_int_eq(i, 1);
}
END_TEST

/* ------------------------------------------------------------ syntax errors */

struct syntax_case {
	const char *text;
	int line;
	const char *what;
};

static const struct syntax_case syntax_cases[] = {
	{"[core]\nfifo_depth = 1\nthis is wrong\n", 3, "expected 'key = value', found 'this is wrong'"},
	{"fifo_depth = 1\n", 1, "outside any section"},
	{"# c\n[core\n", 2, "bad section header"},
	{"[Core]\n", 1, "bad section header '[Core]'"},
	{"[core] x\n", 1, "text after ']'"},
	{"[]\n", 1, "bad section header"},
	{"[core]\na = 1\n\na = 2\n", 4, "duplicate key 'a' in [core] (first set on line 2)"},
	{"[core]\n= 5\n", 2, "missing key"},
	{"[core]\nBad Key = 1\n", 2, "bad key 'Bad Key'"},
	{"[core]\nx = \"abc\n", 2, "unterminated quoted value"},
	{"[core]\nx = \"abc\" def\n", 2, "text after the closing quote"},
	{"[transport]\nuse tcp\nuse tcp when size=abc\n", 3, "'abc'"},
	{"[algorithm]\n\nprefer ring when coll=allreduse\n", 3, "'allreduse'"},
	{"[transport]\nallow tcp\n", 2, "'allow'"},
};

START_TEST(test_syntax_error)
{
	const struct syntax_case *c = &syntax_cases[_i];
	const char *path = use_conf(c->text);
	ck_assert_int_eq(weft__config_load(), -WEFT_ERR_CONFIG);
	/* Later calls return the first result. */
	ck_assert_int_eq(weft__config_load(), -WEFT_ERR_CONFIG);
	char *log = log_text();
	char want[512];
	snprintf(want, sizeof(want), "%s:%d: ", path, c->line);
	ck_assert_msg(strstr(log, want), "want '%s' in log:\n%s", want, log);
	ck_assert_msg(strstr(log, c->what), "want '%s' in log:\n%s", c->what, log);
	/* A broken file yields no value, not a silent default. */
	int64_t d;
	ck_assert_int_eq(weft__param_get("core", "fifo_depth", WEFT_PARAM_INT, &d, NULL), -WEFT_ERR_CONFIG);
	free(log);
}
END_TEST

START_TEST(test_long_line)
{
	size_t n = 5000;
	char *text = malloc(n + 64);
	strcpy(text, "[core]\nrequire = ");
	size_t o = strlen(text);
	memset(text + o, 'a', n);
	strcpy(text + o + n, "\n");
	const char *path = use_conf(text);
	ck_assert_int_eq(weft__config_load(), -WEFT_ERR_CONFIG);
	char *log = log_text();
	char want[512];
	snprintf(want, sizeof(want), "%s:2: line is longer than 4096 bytes", path);
	ck_assert_msg(strstr(log, want), "want '%s' in log:\n%s", want, log);
	free(log);
	free(text);
}
END_TEST

START_TEST(test_nul_byte)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/bin.conf", dir);
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	static const char data[] = "[core]\nfifo_depth = 1\nrequire = a\0b\n";
	fwrite(data, 1, sizeof(data) - 1, f);
	fclose(f);
	setenv("WEFT_CONFIG", path, 1);
	ck_assert_int_eq(weft__config_load(), -WEFT_ERR_CONFIG);
	char *log = log_text();
	char want[1100];
	snprintf(want, sizeof(want), "%s:3: NUL byte", path);
	ck_assert_msg(strstr(log, want), "want '%s' in log:\n%s", want, log);
	free(log);
}
END_TEST

START_TEST(test_missing_config)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/does-not-exist.conf", dir);
	setenv("WEFT_CONFIG", path, 1);
	ck_assert_int_eq(weft__config_load(), -WEFT_ERR_CONFIG);
	char *log = log_text();
	ck_assert_msg(strstr(log, path) && strstr(log, "WEFT_CONFIG") && strstr(log, "No such file"), "log:\n%s",
		      log);
	free(log);
	/* Still the first result, even with the file now there. */
	free(wt_write_file(dir, "does-not-exist.conf", "[core]\n"));
	ck_assert_int_eq(weft__config_load(), -WEFT_ERR_CONFIG);
}
END_TEST

START_TEST(test_config_is_directory)
{
	setenv("WEFT_CONFIG", dir, 1);
	ck_assert_int_eq(weft__config_load(), -WEFT_ERR_CONFIG);
	char *log = log_text();
	ck_assert_msg(strstr(log, dir) && strstr(log, "directory"), "log:\n%s", log);
	free(log);
}
END_TEST

START_TEST(test_home_default)
{
	char sub[1024];
	unsetenv("WEFT_CONFIG");
	setenv("HOME", dir, 1);
	snprintf(sub, sizeof(sub), "%s/.config", dir);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	snprintf(sub, sizeof(sub), "%s/.config/weft", dir);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	conf_path = wt_write_file(sub, "weft.conf", "[core]\nfifo_depth = 9\n");
	ck_assert_ptr_nonnull(conf_path);
	ck_assert_int_eq(weft__config_load(), 0);
	ck_assert_str_eq(weft__config_path(), conf_path);
	int64_t d;
	ck_assert_int_eq(weft__param_get("core", "fifo_depth", WEFT_PARAM_INT, &d, NULL), 0);
	ck_assert_int_eq(d, 9);
}
END_TEST

START_TEST(test_no_default_file)
{
	/* Neither default file exists: not an error, and no path. */
	if (access("/etc/weft.conf", F_OK) == 0)
		return; /* this machine has one; the home case above covers the search */
	unsetenv("WEFT_CONFIG");
	setenv("HOME", dir, 1);
	ck_assert_int_eq(weft__config_load(), 0);
	ck_assert_ptr_null(weft__config_path());
	int64_t d;
	enum weft_param_source src;
	ck_assert_int_eq(weft__param_get("core", "fifo_depth", WEFT_PARAM_INT, &d, &src), 0);
	ck_assert_int_eq(d, 1024);
	ck_assert_int_eq(src, WEFT_PARAM_SRC_DEFAULT);
}
END_TEST

/* ------------------------------------------------------------ file forms */

START_TEST(test_crlf_comments_no_newline)
{
	const char *path = use_conf("# comment\r\n; another\r\n\r\n  [core]  \r\n"
			      "fifo_depth = 5   # inline\r\n"
			      "[myplug]\r\n"
			      "name = \"a b # c\"\r\n"
			      "path = /x;y#z\r\n"
			      "\tflag=on");
	ck_assert_int_eq(weft__config_load(), 0);
	ck_assert_int_eq(declare("myplug", "myplug", "name", WEFT_PARAM_STRING, NULL), 0);
	ck_assert_int_eq(declare("myplug", "myplug", "path", WEFT_PARAM_STRING, NULL), 0);
	ck_assert_int_eq(declare("myplug", "myplug", "flag", WEFT_PARAM_BOOL, "off"), 0);
	int64_t d = 0;
	const char *s = NULL;
	int b = 0;
	enum weft_param_source src;
	ck_assert_int_eq(weft__param_get("core", "fifo_depth", WEFT_PARAM_INT, &d, &src), 0);
	ck_assert_int_eq(d, 5);
	ck_assert_int_eq(weft__param_get("myplug", "name", WEFT_PARAM_STRING, &s, &src), 0);
	ck_assert_str_eq(s, "a b # c");
	ck_assert_int_eq(weft__param_get("myplug", "path", WEFT_PARAM_STRING, &s, &src), 0);
	ck_assert_str_eq(s, "/x;y#z");
	ck_assert_int_eq(weft__param_get("myplug", "flag", WEFT_PARAM_BOOL, &b, &src), 0);
	ck_assert_int_eq(b, 1);
	ck_assert_int_eq(src, WEFT_PARAM_SRC_FILE);
	char *out = print_all();
	char want[1024];
	snprintf(want, sizeof(want), "myplug.flag = on  (file %s:9)", path);
	ck_assert_msg(strstr(out, want), "want '%s' in:\n%s", want, out);
	snprintf(want, sizeof(want), "core.fifo_depth = 5  (file %s:5)", path);
	ck_assert_msg(strstr(out, want), "want '%s' in:\n%s", want, out);
	free(out);
}
END_TEST

/* A path that is no regular file fails at once, naming what it is; a FIFO
 * is never waited on (without a writer, opening it would block for ever).
 * /dev/null reads as an empty file. */
START_TEST(test_config_not_a_regular_file)
{
	char *fifo;
	ck_assert_int_ge(asprintf(&fifo, "%s/fifo.conf", dir), 0);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	setenv("WEFT_CONFIG", fifo, 1);
	ck_assert_int_eq(weft__config_load(), -WEFT_ERR_CONFIG);
	char *log = log_text();
	char want[1024];
	snprintf(want, sizeof(want), "%s: cannot read config file named by WEFT_CONFIG: it is a FIFO", fifo);
	ck_assert_msg(strstr(log, want), "want '%s' in:\n%s", want, log);
	free(log);
	free(fifo);
}
END_TEST

START_TEST(test_config_dev_null)
{
	setenv("WEFT_CONFIG", "/dev/null", 1);
	ck_assert_int_eq(weft__config_load(), 0);
	ck_assert_int_eq(weft__config_section_lines("transport", NULL, NULL), 0);
}
END_TEST

START_TEST(test_empty_file)
{
	const char *path = use_conf("");
	ck_assert_int_eq(weft__config_load(), 0);
	ck_assert_str_eq(weft__config_path(), path);
	double t;
	enum weft_param_source src;
	ck_assert_int_eq(weft__param_get("core", "bootstrap_timeout", WEFT_PARAM_DOUBLE, &t, &src), 0);
	ck_assert_double_eq(t, 30.0);
	ck_assert_int_eq(src, WEFT_PARAM_SRC_DEFAULT);
	const char *const *lines;
	const int *linenos;
	ck_assert_int_eq(weft__config_section_lines("transport", &lines, &linenos), 0);
}
END_TEST

START_TEST(test_rule_sections)
{
	use_conf("[transport]\n# prefer the fast one\nuse shm when peer=same-host\r\n"
		 "forbid tcp   ; no tcp at all\n"
		 "[core]\nfifo_depth = 8\n"
		 "[algorithm]\nprefer algo-host/ring when coll=allreduce and size=1M..\n");
	ck_assert_int_eq(weft__config_load(), 0);
	const char *const *lines;
	const int *linenos;
	ck_assert_int_eq(weft__config_section_lines("transport", &lines, &linenos), 2);
	ck_assert_str_eq(lines[0], "use shm when peer=same-host");
	ck_assert_int_eq(linenos[0], 3);
	ck_assert_str_eq(lines[1], "forbid tcp");
	ck_assert_int_eq(linenos[1], 4);
	ck_assert_int_eq(weft__config_section_lines("algorithm", &lines, &linenos), 1);
	ck_assert_str_eq(lines[0], "prefer algo-host/ring when coll=allreduce and size=1M..");
	ck_assert_int_eq(linenos[0], 8);
	const char *algo_line = lines[0];
	ck_assert_int_eq(weft__config_section_lines("core", &lines, &linenos), 0);
	ck_assert_int_eq(weft__config_section_lines("nosuch", &lines, &linenos), 0);
	struct weft__rule r;
	char err[256];
	ck_assert_int_eq(weft__rule_parse(algo_line, &r, err, sizeof(err)), 0);
	ck_assert_str_eq(r.target, "algo-host/ring");
}
END_TEST

/* WEFT_<SECTION>_RULES replaces that section of the file (the other stays),
 * numbered by place; weft-info -c's print names the variable. */
START_TEST(test_rule_sections_from_env)
{
	const char *path = use_conf("[transport]\nforbid ucx\n[algorithm]\nprefer algo-host/ring when size=1M..\n");
	setenv("WEFT_TRANSPORT_RULES", " use shm when peer=same-host ;; require ofi when peer=other-host ", 1);
	ck_assert_int_eq(weft__config_load(), 0);
	const char *const *lines;
	const int *linenos;
	ck_assert_int_eq(weft__config_section_lines("transport", &lines, &linenos), 2);
	ck_assert_str_eq(lines[0], "use shm when peer=same-host");
	ck_assert_int_eq(linenos[0], 1);
	ck_assert_str_eq(lines[1], "require ofi when peer=other-host");
	ck_assert_int_eq(linenos[1], 3); /* its place in the variable, the empty one counted */
	ck_assert_str_eq(weft__config_rules_origin("transport"), "WEFT_TRANSPORT_RULES");
	ck_assert_int_eq(weft__config_section_lines("algorithm", &lines, &linenos), 1);
	ck_assert_int_eq(linenos[0], 4);
	ck_assert_str_eq(weft__config_rules_origin("algorithm"), path);
	char *out = print_all();
	ck_assert_msg(strstr(out, "[transport]  (env WEFT_TRANSPORT_RULES)\n  rule 1: use shm when peer=same-host\n"
				  "  rule 3: require ofi when peer=other-host\n"),
		      "%s", out);
	char want[1024];
	snprintf(want, sizeof(want), "[algorithm]  (file %s)\n  line 4: prefer algo-host/ring when size=1M..\n", path);
	ck_assert_msg(strstr(out, want), "want '%s' in:\n%s", want, out);
	ck_assert_ptr_null(strstr(out, "forbid ucx"));
	free(out);
	/* Not a parameter of [transport]: no unknown-variable warning. */
	weft__config_warn_unknown(NULL, 0);
	char *log = log_text();
	ck_assert_msg(!strstr(log, "WEFT_TRANSPORT_RULES"), "%s", log);
	free(log);
}
END_TEST

/* Set but empty: the section has no rules at all. */
START_TEST(test_rule_sections_env_empty)
{
	use_conf("[transport]\nforbid ucx\n");
	setenv("WEFT_TRANSPORT_RULES", "", 1);
	ck_assert_int_eq(weft__config_load(), 0);
	ck_assert_int_eq(weft__config_section_lines("transport", NULL, NULL), 0);
	ck_assert_str_eq(weft__config_rules_origin("transport"), "WEFT_TRANSPORT_RULES");
}
END_TEST

START_TEST(test_rule_sections_env_bad)
{
	use_conf("[core]\nfifo_depth = 8\n");
	setenv("WEFT_ALGORITHM_RULES", "use algo-host/ring; frobnicate algo-host/x", 1);
	ck_assert_int_eq(weft__config_load(), -WEFT_ERR_CONFIG);
	char *log = log_text();
	ck_assert_msg(strstr(log, "WEFT_ALGORITHM_RULES, rule 2 ('frobnicate algo-host/x'): bad rule in [algorithm]: "
				  "unknown action 'frobnicate'"),
		      "%s", log);
	free(log);
}
END_TEST

/* ------------------------------------------------------------ unknown names */

START_TEST(test_unknown_names_warn)
{
	const char *path = use_conf("[core]\npeer_timout = 3\n[algo-hots]\nx = 1\n[myplug]\nchunk_sz = 4\n"
			      "chunk_size = 8\n[zzzzzzzz]\n");
	ck_assert_int_eq(weft__config_load(), 0);
	ck_assert_int_eq(declare("myplug", "myplug", "chunk_size", WEFT_PARAM_SIZE, "1K"), 0);
	setenv("WEFT_CORE_HEARTBEAT_INTERVL", "2", 1);
	setenv("WEFT_MYPLUG_CHUNKSIZE", "2", 1);
	setenv("WEFT_TEST_SOMETHING", "1", 1);
	setenv("WEFT_NCCL_THING", "1", 1);
	setenv("WEFT_REQUIRE_GPU", "0", 1);
	setenv("WEFT_CORE_FIFO_DEPTH", "12", 1); /* a real one: no warning */
	/* algo-host declares nothing here, as a plugin excluded by core.plugins:
	 * its variables cannot be judged, so none is called wrong. */
	setenv("WEFT_ALGO_HOST_NET_DEVICES", "lo", 1);
	const char *known[] = {"myplug", "algo-host"};
	weft__config_warn_unknown(known, 2);
	weft__config_warn_unknown(known, 2); /* warns once */
	char *log = log_text();
	char want[1024];
	snprintf(want, sizeof(want), "%s:2: unknown key 'peer_timout' in [core]; did you mean 'peer_timeout'?", path);
	ck_assert_msg(count(log, want) == 1, "want '%s' once in log:\n%s", want, log);
	snprintf(want, sizeof(want), "%s:3: unknown section [algo-hots]; did you mean 'algo-host'?", path);
	ck_assert_msg(count(log, want) == 1, "want '%s' once in log:\n%s", want, log);
	snprintf(want, sizeof(want), "%s:6: unknown key 'chunk_sz' in [myplug]; did you mean 'chunk_size'?", path);
	ck_assert_msg(count(log, want) == 1, "want '%s' once in log:\n%s", want, log);
	snprintf(want, sizeof(want), "%s:8: unknown section [zzzzzzzz]", path);
	ck_assert_msg(count(log, want) == 1, "want '%s' once in log:\n%s", want, log);
	ck_assert_msg(count(log, "WEFT_CORE_HEARTBEAT_INTERVL is not a parameter of [core]; did you mean "
				 "'WEFT_CORE_HEARTBEAT_INTERVAL'?") == 1,
		      "log:\n%s", log);
	ck_assert_msg(count(log, "WEFT_MYPLUG_CHUNKSIZE is not a parameter of [myplug]; did you mean "
				 "'WEFT_MYPLUG_CHUNK_SIZE'?") == 1,
		      "log:\n%s", log);
	/* Keys of unknown sections are not reported one by one; known keys never. */
	ck_assert_msg(!strstr(log, "'x'") && !strstr(log, "'chunk_size' in") && !strstr(log, "FIFO_DEPTH"),
		      "log:\n%s", log);
	ck_assert_msg(!strstr(log, "WEFT_TEST_SOMETHING") && !strstr(log, "WEFT_NCCL_THING") &&
			      !strstr(log, "WEFT_REQUIRE_GPU") && !strstr(log, "WEFT_LOG_FILE") &&
			      !strstr(log, "WEFT_ALGO_HOST_NET_DEVICES"),
		      "log:\n%s", log);
	unsetenv("WEFT_ALGO_HOST_NET_DEVICES");
	free(log);
}
END_TEST

START_TEST(test_env_longest_prefix)
{
	use_conf("");
	ck_assert_int_eq(declare("algo", "algo", "depth", WEFT_PARAM_INT, "1"), 0);
	ck_assert_int_eq(declare("algo-host", "algo-host", "chunk", WEFT_PARAM_SIZE, "1M"), 0);
	setenv("WEFT_ALGO_HOST_CHUNKK", "1", 1);
	const char *known[] = {"algo", "algo-host"};
	weft__config_warn_unknown(known, 2);
	char *log = log_text();
	ck_assert_msg(strstr(log, "WEFT_ALGO_HOST_CHUNKK is not a parameter of [algo-host]; did you mean "
				  "'WEFT_ALGO_HOST_CHUNK'?"),
		      "log:\n%s", log);
	free(log);
}
END_TEST

/* ------------------------------------------------------------ rules */

START_TEST(test_rule_parse_ok)
{
	struct weft__rule r;
	char err[256];
	r.lineno = 12;
	ck_assert_int_eq(weft__rule_parse("use algo-host/ring when coll=allreduce and size=1M.. and mem=host", &r,
					  err, sizeof(err)),
			 0);
	ck_assert_int_eq(r.action, WEFT_RULE_USE);
	ck_assert_str_eq(r.target, "algo-host/ring");
	ck_assert_uint_eq(r.colls, 1u << WEFT_COLL_ALLREDUCE);
	ck_assert_uint_eq(r.size_lo, 1u << 20);
	ck_assert_uint_eq(r.size_hi, UINT64_MAX);
	ck_assert_int_eq(r.ranks_lo, 0);
	ck_assert_int_eq(r.ranks_hi, INT_MAX);
	ck_assert_uint_eq(r.mem_types, 1u << WEFT_MEM_HOST);
	ck_assert_uint_eq(r.peer_classes, 0);
	ck_assert_int_eq(r.lineno, 12);

	ck_assert_int_eq(weft__rule_parse("  forbid   tcp  ", &r, err, sizeof(err)), 0);
	ck_assert_int_eq(r.action, WEFT_RULE_FORBID);
	ck_assert_str_eq(r.target, "tcp");
	ck_assert_uint_eq(r.colls, 0);
	ck_assert_uint_eq(r.size_lo, 0);
	ck_assert_uint_eq(r.size_hi, UINT64_MAX);

	ck_assert_int_eq(weft__rule_parse("prefer x when coll=reduce-scatter,reduce_scatter,reducescatter,broadcast,"
					  "reduce,alltoall,sendrecv,allgather and ranks=2..8 and size=..64KiB "
					  "and peer=same-process,other-host and mem=cuda,hip",
					  &r, err, sizeof(err)),
			 0);
	ck_assert_int_eq(r.action, WEFT_RULE_PREFER);
	ck_assert_uint_eq(r.colls, ((1u << WEFT_COLL_COUNT) - 1) & ~(1u << WEFT_COLL_ALLREDUCE));
	ck_assert_int_eq(r.ranks_lo, 2);
	ck_assert_int_eq(r.ranks_hi, 8);
	ck_assert_uint_eq(r.size_lo, 0);
	ck_assert_uint_eq(r.size_hi, 64u << 10);
	ck_assert_uint_eq(r.peer_classes, (1u << WEFT_PEER_SAME_PROCESS) | (1u << WEFT_PEER_OTHER_HOST));
	ck_assert_uint_eq(r.mem_types, (1u << WEFT_MEM_CUDA) | (1u << WEFT_MEM_HIP));

	ck_assert_int_eq(weft__rule_parse("require ofi when size=4K and ranks=4", &r, err, sizeof(err)), 0);
	ck_assert_int_eq(r.action, WEFT_RULE_REQUIRE);
	ck_assert_uint_eq(r.size_lo, 4096);
	ck_assert_uint_eq(r.size_hi, 4096);
	ck_assert_int_eq(r.ranks_lo, 4);
	ck_assert_int_eq(r.ranks_hi, 4);
	ck_assert_int_eq(weft__rule_parse("use a when size=1K..2K", &r, NULL, 0), 0);
	ck_assert_uint_eq(r.size_lo, 1024);
	ck_assert_uint_eq(r.size_hi, 2048);
}
END_TEST

struct rule_bad {
	const char *line;
	const char *word;
};

static const struct rule_bad rule_bad_cases[] = {
	{"", "empty rule"},
	{"   ", "empty rule"},
	{"allow tcp", "'allow'"},
	{"use", "needs a target"},
	{"use tcp if size=1", "'if'"},
	{"use tcp when", "'when'"},
	{"use tcp when size=1K and", "'and'"},
	{"use tcp when size=1K size=2K", "'size=2K'"},
	{"use tcp when size = 1K", "'size'"},
	{"use tcp when bytes=1K", "'bytes'"},
	{"use tcp when sise=1K", "did you mean 'size'?"},
	{"use tcp when coll=allreduse", "'allreduse'"},
	{"use tcp when coll=allreduse", "did you mean 'allreduce'?"},
	{"use tcp when coll=allreduce,,reduce", "empty item"},
	{"use tcp when coll=", "needs a value"},
	{"use tcp when mem=gpu", "'gpu'"},
	{"use tcp when peer=remote", "'remote'"},
	{"use tcp when size=abc", "'abc'"},
	{"use tcp when size=-1", "'-1'"},
	{"use tcp when size=2M..1M", "empty range"},
	{"use tcp when size=1..2..3", "'1..2..3'"},
	{"use tcp when ranks=x..4", "'x'"},
	{"use tcp when ranks=99999999999", "'99999999999'"},
	{"use tcp when ranks=8..2", "empty range"},
	{"use tcp when size=1K and size=2K", "'size' given twice"},
	{"use Tcp!", "'Tcp!'"},
	{"use a/b/c", "'a/b/c'"},
	{"use when size=1", "'when'"},
	{"use aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "longer than 63"},
};

START_TEST(test_rule_parse_errors)
{
	const struct rule_bad *c = &rule_bad_cases[_i];
	struct weft__rule r;
	memset(&r, 0x5a, sizeof(r));
	char err[256] = "";
	ck_assert_int_eq(weft__rule_parse(c->line, &r, err, sizeof(err)), -WEFT_ERR_CONFIG);
	ck_assert_msg(strstr(err, c->word), "rule '%s': want '%s' in '%s'", c->line, c->word, err);
	ck_assert_uint_eq(r.size_lo, 0x5a5a5a5a5a5a5a5aull); /* out untouched on error */
	/* A tiny or missing buffer is safe. */
	char tiny[4];
	ck_assert_int_eq(weft__rule_parse(c->line, &r, tiny, sizeof(tiny)), -WEFT_ERR_CONFIG);
	ck_assert_int_eq(weft__rule_parse(c->line, &r, NULL, 0), -WEFT_ERR_CONFIG);
}
END_TEST

START_TEST(test_rule_long_word)
{
	char line[2048];
	snprintf(line, sizeof(line), "use tcp when size=");
	size_t o = strlen(line);
	memset(line + o, '9', 1000);
	line[o + 1000] = '\0';
	struct weft__rule r;
	char err[256];
	ck_assert_int_eq(weft__rule_parse(line, &r, err, sizeof(err)), -WEFT_ERR_CONFIG);
	ck_assert_msg(strstr(err, "too long"), "%s", err);
	ck_assert_int_eq(weft__rule_parse(NULL, &r, err, sizeof(err)), -EINVAL);
}
END_TEST

START_TEST(test_rule_matches)
{
	struct weft__rule r;
	char err[256];
	ck_assert_int_eq(weft__rule_parse("use x when coll=allreduce,broadcast and size=1K..1M and ranks=2.. "
					  "and mem=host and peer=same-host",
					  &r, err, sizeof(err)),
			 0);
	struct weft__rule_query q = {WEFT_COLL_ALLREDUCE, 4096, 4, WEFT_MEM_HOST, WEFT_PEER_SAME_HOST};
	ck_assert_int_eq(weft__rule_matches(&r, &q), 1);
	struct weft__rule_query t = q;
	t.coll = WEFT_COLL_ALLGATHER;
	ck_assert_int_eq(weft__rule_matches(&r, &t), 0);
	t = q;
	t.coll = WEFT_COLL_BROADCAST;
	ck_assert_int_eq(weft__rule_matches(&r, &t), 1);
	t = q;
	t.bytes = 1023;
	ck_assert_int_eq(weft__rule_matches(&r, &t), 0);
	t.bytes = 1024;
	ck_assert_int_eq(weft__rule_matches(&r, &t), 1);
	t.bytes = 1u << 20;
	ck_assert_int_eq(weft__rule_matches(&r, &t), 1);
	t.bytes = (1u << 20) + 1;
	ck_assert_int_eq(weft__rule_matches(&r, &t), 0);
	t = q;
	t.nranks = 1;
	ck_assert_int_eq(weft__rule_matches(&r, &t), 0);
	t.nranks = 1000;
	ck_assert_int_eq(weft__rule_matches(&r, &t), 1);
	t = q;
	t.mem_type = WEFT_MEM_CUDA;
	ck_assert_int_eq(weft__rule_matches(&r, &t), 0);
	t = q;
	t.peer_class = WEFT_PEER_OTHER_HOST;
	ck_assert_int_eq(weft__rule_matches(&r, &t), 0);
	/* Fields left at -1 / 0 match whatever the rule says. */
	struct weft__rule_query any = {-1, 0, -1, -1, -1};
	ck_assert_int_eq(weft__rule_matches(&r, &any), 1);
	/* A rule without conditions matches every question. */
	ck_assert_int_eq(weft__rule_parse("forbid tcp", &r, err, sizeof(err)), 0);
	ck_assert_int_eq(weft__rule_matches(&r, &q), 1);
	ck_assert_int_eq(weft__rule_matches(&r, &any), 1);
	ck_assert_int_eq(weft__rule_matches(NULL, &q), 0);
}
END_TEST

START_TEST(test_edit_distance)
{
	ck_assert_int_eq(weft__edit_distance("kitten", "sitting"), 3);
	ck_assert_int_eq(weft__edit_distance("flaw", "lawn"), 2);
	ck_assert_int_eq(weft__edit_distance("", "abc"), 3);
	ck_assert_int_eq(weft__edit_distance("abc", ""), 3);
	ck_assert_int_eq(weft__edit_distance("chunk", "chunk"), 0);
	ck_assert_int_eq(weft__edit_distance("chunk", "chunks"), 1);
	ck_assert_int_eq(weft__edit_distance(NULL, "ab"), 2);
	/* A swap of neighbours is one edit; case does not count. */
	ck_assert_int_eq(weft__edit_distance("oif", "ofi"), 1);
	ck_assert_int_eq(weft__edit_distance("oif", "ib"), 2);
	ck_assert_int_eq(weft__edit_distance("transprot", "transport"), 1);
	ck_assert_int_eq(weft__edit_distance("OFI", "ofi"), 0);
	ck_assert_str_eq(weft__cfg_closest("oif", (const char *const[]){"ib", "ofi", "shm"}, 3), "ofi");
	ck_assert_str_eq(weft__cfg_closest("OFI", (const char *const[]){"ib", "ofi", "shm"}, 3), "ofi");
}
END_TEST

/* ------------------------------------------------------------ threads */

static void *get_many(void *arg)
{
	intptr_t bad = 0;
	for (int i = 0; i < 2000; i++) {
		int64_t d = 0;
		const char *s = NULL;
		if (weft__config_load() != 0 ||
		    weft__param_get("core", "fifo_depth", WEFT_PARAM_INT, &d, NULL) != 0 || d != 33 ||
		    weft__param_get("core", "require", WEFT_PARAM_STRING, &s, NULL) != 0 || !s ||
		    strcmp(s, "tcp,shm") != 0)
			bad++;
	}
	return (void *)bad;
}

START_TEST(test_threads)
{
	use_conf("[core]\nfifo_depth = 33\nrequire = tcp,shm\n");
	pthread_t th[8];
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, get_many, NULL), 0);
	for (int i = 0; i < 8; i++) {
		void *bad;
		pthread_join(th[i], &bad);
		ck_assert_int_eq((intptr_t)bad, 0);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_precedence_and_sources);
	tcase_add_test(tc, test_plugin_section_precedence);
	tcase_add_loop_test(tc, test_typed_values, 0, (int)(sizeof(value_cases) / sizeof(value_cases[0])));
	tcase_add_test(tc, test_string_and_file_bad_value);
	tcase_add_test(tc, test_declare_errors);
	tcase_add_loop_test(tc, test_syntax_error, 0, (int)(sizeof(syntax_cases) / sizeof(syntax_cases[0])));
	tcase_add_test(tc, test_long_line);
	tcase_add_test(tc, test_nul_byte);
	tcase_add_test(tc, test_missing_config);
	tcase_add_test(tc, test_config_is_directory);
	tcase_add_test(tc, test_home_default);
	tcase_add_test(tc, test_no_default_file);
	tcase_add_test(tc, test_crlf_comments_no_newline);
	tcase_add_test(tc, test_empty_file);
	tcase_add_test(tc, test_rule_sections);
	tcase_add_test(tc, test_config_not_a_regular_file);
	tcase_add_test(tc, test_config_dev_null);
	tcase_add_test(tc, test_rule_sections_from_env);
	tcase_add_test(tc, test_rule_sections_env_empty);
	tcase_add_test(tc, test_rule_sections_env_bad);
	tcase_add_test(tc, test_unknown_names_warn);
	tcase_add_test(tc, test_env_longest_prefix);
	tcase_add_test(tc, test_rule_parse_ok);
	tcase_add_loop_test(tc, test_rule_parse_errors, 0, (int)(sizeof(rule_bad_cases) / sizeof(rule_bad_cases[0])));
	tcase_add_test(tc, test_rule_long_word);
	tcase_add_test(tc, test_rule_matches);
	tcase_add_test(tc, test_edit_distance);
	tcase_add_test(tc, test_threads);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
