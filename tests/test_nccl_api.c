/* SPDX-License-Identifier: Apache-2.0 */
/* libweft_nccl against NCCL 2.30.7's API (nccl/nccl-2.30.7-api.txt), in one
 * process: each of the file's 64 functions and its pnccl twin found with
 * dlsym in the library (the prototypes themselves are compiled against
 * weft's nccl.h by test_nccl_api_protos.c, generated from the same file);
 * ncclConfig_t of the layouts of NCCL 2.14, 2.17, 2.27, 2.30 and a later one,
 * read by their size and version; ncclGetVersion; the parameter calls on
 * weft's registry; revoke, suspend and memory statistics on a one-rank comm. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "testlib.h"

/* ------------------------------------------------------------- exports */

/* The function names of the api file's prototype lines. */
static int api_names(char names[][64], int max)
{
	char *text = wt_read_file(WEFT_NCCL_API_FILE);
	ck_assert_msg(text != NULL, "cannot read %s", WEFT_NCCL_API_FILE);
	int n = 0;
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == '#' || !strchr(line, '('))
			continue;
		/* The name is the word right before the first '('. */
		char *paren = strchr(line, '('), *start = paren;
		while (start > line &&
		       (start[-1] == '_' || (start[-1] >= 'a' && start[-1] <= 'z') ||
			(start[-1] >= 'A' && start[-1] <= 'Z') || (start[-1] >= '0' && start[-1] <= '9')))
			start--;
		ck_assert_int_lt(n, max);
		ck_assert_msg(paren - start > 4 && paren - start < 64 && !strncmp(start, "nccl", 4),
			      "cannot read a function name in: %s", line);
		memcpy(names[n], start, (size_t)(paren - start));
		names[n][paren - start] = '\0';
		n++;
	}
	free(text);
	return n;
}

START_TEST(exports_of_the_api_file)
{
	static char names[128][64];
	int n = api_names(names, 128);
	ck_assert_int_eq(n, 64); /* the file's own count of NCCL 2.30.7's functions */
	void *lib = dlopen(WEFT_NCCL_LIB, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(lib != NULL, "dlopen %s: %s", WEFT_NCCL_LIB, dlerror());
	int missing = 0;
	for (int i = 0; i < n; i++) {
		char twin[80];
		snprintf(twin, sizeof(twin), "p%.63s", names[i]);
		void *f = dlsym(lib, names[i]), *p = dlsym(lib, twin);
		if (!f || !p) {
			fprintf(stderr, "libweft_nccl lacks %s\n", !f ? names[i] : twin);
			missing++;
		} else if (f != p) {
			fprintf(stderr, "%s and %s are different functions\n", names[i], twin);
			missing++;
		}
	}
	ck_assert_msg(missing == 0, "%d of the api file's functions or twins are missing (listed above)", missing);
	dlclose(lib);
}
END_TEST

START_TEST(version_served)
{
	int v = 0;
	ck_assert_int_eq(ncclGetVersion(&v), ncclSuccess);
	ck_assert_int_eq(v, NCCL_VERSION(2, 30, 7));
	ck_assert_int_eq(NCCL_VERSION_CODE, 23007);
	ck_assert_str_eq(ncclGetErrorString(ncclTimeout), "timeout");
}
END_TEST

/* --------------------------------------------------------------- configs
 * Older headers' ncclConfig_t, as those releases defined them: a program
 * built against one hands the library exactly such a struct. */
struct cfg_v21400 { /* NCCL 2.14 to 2.16 */
	size_t size;
	unsigned int magic, version;
	int blocking;
};
struct cfg_v21700 { /* NCCL 2.18 to 2.24 (2.17 lacked splitShare) */
	size_t size;
	unsigned int magic, version;
	int blocking, cgaClusterSize, minCTAs, maxCTAs;
	const char *netName;
	int splitShare;
};
struct cfg_v22700 { /* NCCL 2.27 */
	size_t size;
	unsigned int magic, version;
	int blocking, cgaClusterSize, minCTAs, maxCTAs;
	const char *netName;
	int splitShare, trafficClass;
	const char *commName;
	int collnetEnable, CTAPolicy, shrinkShare, nvlsCTAs;
};
struct cfg_v23100 { /* NCCL 2.31: 2.30's and five fields weft does not know */
	ncclConfig_t v23000;
	int launchOrderImplicit, numRmaSig, rmaEagerInit, hostCftMode, nvlsHostMode;
};
_Static_assert(sizeof(struct cfg_v21400) == 24, "2.14's layout");
_Static_assert(sizeof(struct cfg_v21700) == 48, "2.18's layout");
_Static_assert(sizeof(struct cfg_v22700) == 72, "2.27's layout");
_Static_assert(offsetof(struct cfg_v22700, commName) == offsetof(ncclConfig_t, commName), "2.27's commName");

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Inits a one-rank comm with cfg; checks the result is want (ncclSuccess
 * for a blocking init, ncclInProgress for a non-blocking one), waits for a
 * non-blocking one, and destroys it. */
static void init_with(void *cfg, ncclResult_t want, const char *what)
{
	ncclUniqueId id;
	ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
	ncclComm_t c = NULL;
	ncclResult_t r = ncclCommInitRankConfig(&c, 1, id, 0, (ncclConfig_t *)cfg);
	ck_assert_msg(r == want, "%s: init returned %d (%s), want %d; last error: %s", what, (int)r,
		      ncclGetErrorString(r), (int)want, ncclGetLastError(NULL));
	if (r != ncclSuccess && r != ncclInProgress) {
		ck_assert_ptr_null(c);
		return;
	}
	ncclResult_t a = ncclInProgress;
	for (double end = now_s() + 20; a == ncclInProgress && now_s() < end;) {
		ck_assert_int_eq(ncclCommGetAsyncError(c, &a), ncclSuccess);
		struct timespec ts = {0, 1000000}; /* between polls, not a synchronization */
		nanosleep(&ts, NULL);
	}
	ck_assert_msg(a == ncclSuccess, "%s: the comm went to %d", what, (int)a);
	int32_t x = 3;
	ck_assert_int_eq(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, c, NULL), ncclSuccess);
	ck_assert_int_eq(x, 3);
	ck_assert_int_eq(ncclCommDestroy(c), ncclSuccess);
}

/* What the library logs at info level while fn(arg) runs (stderr, taken
 * into a file and back). */
static char *logged_while(void (*fn)(void *), void *arg)
{
	char path[] = "/tmp/weft-nccl-api-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	setenv("WEFT_NCCL_LOG", "info", 1);
	ncclResetDebugInit();
	fflush(stderr);
	int saved = dup(2);
	dup2(fd, 2);
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fd);
	unsetenv("WEFT_NCCL_LOG");
	ncclResetDebugInit();
	char *text = wt_read_file(path);
	unlink(path);
	ck_assert_ptr_nonnull(text);
	return text;
}

static void init_blocking(void *cfg)
{
	init_with(cfg, ncclSuccess, "logged init");
}

START_TEST(config_layouts)
{
	/* 2.14: blocking only. */
	struct cfg_v21400 a = {sizeof(a), NCCL_API_MAGIC, NCCL_VERSION(2, 14, 3), 0};
	init_with(&a, ncclInProgress, "2.14 layout, non-blocking");
	a.blocking = NCCL_CONFIG_UNDEF_INT;
	init_with(&a, ncclSuccess, "2.14 layout, blocking by default");
	a.blocking = 7;
	init_with(&a, ncclInvalidArgument, "2.14 layout, blocking 7");
	ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "blocking is 7"));
	/* A version before configs existed, and a struct smaller than any. */
	a.blocking = 0;
	a.version = NCCL_VERSION(2, 13, 4);
	init_with(&a, ncclInvalidArgument, "version 2.13");
	ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "since NCCL 2.14"));
	a.version = NCCL_VERSION(2, 14, 3);
	a.size = 16;
	init_with(&a, ncclInvalidArgument, "16 bytes");
	ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "smallest"));

	/* 2.18's: splitShare and the CTA fields, accepted and ignored. */
	struct cfg_v21700 b = {sizeof(b), NCCL_API_MAGIC, NCCL_VERSION(2, 18, 5), 0, 2, 1, 8, "Socket", 1};
	init_with(&b, ncclInProgress, "2.18 layout, non-blocking");

	/* 2.27's: commName is read, from a 2.27 config only. */
	struct cfg_v22700 c;
	memset(&c, 0, sizeof(c));
	c.size = sizeof(c);
	c.magic = NCCL_API_MAGIC;
	c.version = NCCL_VERSION(2, 27, 7);
	c.blocking = NCCL_CONFIG_UNDEF_INT;
	c.commName = "layout-2.27";
	char *log = logged_while(init_blocking, &c);
	ck_assert_msg(strstr(log, "comm layout-2.27"), "the 2.27 config's commName is not in the log:\n%s", log);
	free(log);
	/* The same struct said to come from 2.26: its commName is not the
	 * caller's (2.26 had none), so it is not read. */
	c.version = NCCL_VERSION(2, 26, 2);
	c.commName = "not-in-2.26";
	log = logged_while(init_blocking, &c);
	ck_assert_msg(!strstr(log, "not-in-2.26"), "a 2.26 config's bytes past its fields were read:\n%s", log);
	free(log);
	/* A 2.18-sized struct claiming 2.27: what lies past its size is not its
	 * own, and is not read either. */
	struct {
		struct cfg_v21700 cfg;
		const char *beyond[4];
	} d;
	memset(&d, 0, sizeof(d));
	d.cfg = (struct cfg_v21700){.size = sizeof(d.cfg),
				    .magic = NCCL_API_MAGIC,
				    .version = NCCL_VERSION(2, 27, 7),
				    .blocking = NCCL_CONFIG_UNDEF_INT};
	for (int i = 0; i < 4; i++)
		d.beyond[i] = "past-the-size";
	log = logged_while(init_blocking, &d);
	ck_assert_msg(!strstr(log, "past-the-size"), "bytes past the config's size were read:\n%s", log);
	free(log);

	/* 2.30's own, and a later layout whose trailing fields are ignored. */
	ncclConfig_t e = NCCL_CONFIG_INITIALIZER;
	e.blocking = 0;
	init_with(&e, ncclInProgress, "2.30 layout, non-blocking");
	struct cfg_v23100 f;
	f.v23000 = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
	f.v23000.size = sizeof(f);
	f.v23000.version = NCCL_VERSION(2, 31, 0);
	f.v23000.blocking = 0;
	f.launchOrderImplicit = f.numRmaSig = f.rmaEagerInit = f.hostCftMode = f.nvlsHostMode = 0x5a5a5a5a;
	init_with(&f, ncclInProgress, "2.31 layout, non-blocking");
}
END_TEST

/* ------------------------------------------------------------ parameters */

START_TEST(parameters)
{
	setenv("WEFT_CORE_FIFO_DEPTH", "77", 1);
	setenv("WEFT_CORE_STALL_WARN", "2.5", 1);
	ncclParamHandle_t depth = NULL, dotted = NULL, maxmsg = NULL, check = NULL, stall = NULL, trust = NULL,
			  ifname = NULL;
	ck_assert_int_eq(ncclParamBind(&depth, "WEFT_CORE_FIFO_DEPTH"), ncclSuccess);
	ck_assert_int_eq(ncclParamBind(&dotted, "core.fifo_depth"), ncclSuccess);
	ck_assert_ptr_eq(depth, dotted); /* one handle per parameter */
	ck_assert_int_eq(ncclParamBind(&maxmsg, "WEFT_CORE_BOOTSTRAP_MAX_MSG"), ncclSuccess);
	ck_assert_int_eq(ncclParamBind(&check, "WEFT_CORE_CHECK_CALLS"), ncclSuccess);
	ck_assert_int_eq(ncclParamBind(&stall, "WEFT_CORE_STALL_WARN"), ncclSuccess);
	ck_assert_int_eq(ncclParamBind(&trust, "WEFT_CORE_PLUGIN_TRUST"), ncclSuccess);
	ck_assert_int_eq(ncclParamBind(&ifname, "WEFT_CORE_BOOTSTRAP_IFNAME"), ncclSuccess);

	int8_t i8 = 0;
	int32_t i32 = 0;
	int64_t i64 = 0;
	uint64_t u64 = 0;
	uint8_t u8 = 9;
	ck_assert_int_eq(ncclParamGetI8(depth, &i8), ncclSuccess);
	ck_assert_int_eq(ncclParamGetI32(depth, &i32), ncclSuccess);
	ck_assert_int_eq(ncclParamGetI64(depth, &i64), ncclSuccess);
	ck_assert_int_eq(i8, 77);
	ck_assert_int_eq(i32, 77);
	ck_assert_int_eq(i64, 77);
	/* The value in force: a change of the variable shows at the next read. */
	setenv("WEFT_CORE_FIFO_DEPTH", "-3", 1);
	ck_assert_int_eq(ncclParamGetI8(depth, &i8), ncclSuccess);
	ck_assert_int_eq(i8, -3);
	ck_assert_int_eq(ncclParamGetU8(depth, &u8), ncclInvalidArgument);
	ck_assert_int_eq(u8, 9);
	setenv("WEFT_CORE_FIFO_DEPTH", "77", 1);
	ck_assert_int_eq(ncclParamGetU64(maxmsg, &u64), ncclSuccess);
	ck_assert_uint_eq(u64, 64ull << 20);
	ck_assert_int_eq(ncclParamGetI32(maxmsg, &i32), ncclSuccess); /* 64M fits */
	ck_assert_int_eq(ncclParamGetU8(check, &u8), ncclSuccess);
	ck_assert_uint_eq(u8, 1);
	ck_assert_int_eq(ncclParamGetI64(stall, &i64), ncclInvalidArgument); /* a DOUBLE */
	ck_assert_int_eq(ncclParamGetI64(trust, &i64), ncclInvalidArgument); /* a STRING */

	const char *s = NULL;
	ck_assert_int_eq(ncclParamGetStr(depth, &s), ncclSuccess);
	ck_assert_str_eq(s, "77");
	ck_assert_int_eq(ncclParamGetStr(stall, &s), ncclSuccess);
	ck_assert_str_eq(s, "2.5");
	ck_assert_int_eq(ncclParamGetStr(trust, &s), ncclSuccess);
	ck_assert_str_eq(s, "strict");
	ck_assert_int_eq(ncclParamGetStr(ifname, &s), ncclSuccess);
	ck_assert_str_eq(s, ""); /* unset */

	unsigned char raw[64];
	int len = 0;
	ck_assert_int_eq(ncclParamGet(depth, raw, sizeof(raw), &len), ncclSuccess);
	ck_assert_int_eq(len, 8);
	memcpy(&i64, raw, 8);
	ck_assert_int_eq(i64, 77);
	double d = 0;
	ck_assert_int_eq(ncclParamGet(stall, raw, sizeof(raw), &len), ncclSuccess);
	ck_assert_int_eq(len, 8);
	memcpy(&d, raw, 8);
	ck_assert(d == 2.5);
	ck_assert_int_eq(ncclParamGet(trust, raw, sizeof(raw), &len), ncclSuccess);
	ck_assert_int_eq(len, 7);
	ck_assert_str_eq((char *)raw, "strict");

	int vlen = 0;
	ck_assert_int_eq(ncclParamGetParameter("WEFT_CORE_FIFO_DEPTH", &s, &vlen), ncclSuccess);
	ck_assert_str_eq(s, "77");
	ck_assert_int_eq(vlen, 2);
	ck_assert_int_eq(ncclParamGetParameter("NCCL_DEBUG", &s, &vlen), ncclInvalidArgument);
	ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "weft does not read NCCL's"));

	const char **keys = NULL;
	int nkeys = 0;
	ck_assert_int_eq(ncclParamGetAllParameterKeys(&keys, &nkeys), ncclSuccess);
	ck_assert_int_gt(nkeys, 10);
	int seen = 0;
	for (int i = 0; i < nkeys; i++) {
		ck_assert_msg(!strncmp(keys[i], "WEFT_", 5), "key %s", keys[i]);
		seen += !strcmp(keys[i], "WEFT_CORE_FIFO_DEPTH") || !strcmp(keys[i], "WEFT_CORE_PEER_TIMEOUT");
		/* Each key binds. */
		ncclParamHandle_t h = NULL;
		ck_assert_msg(ncclParamBind(&h, keys[i]) == ncclSuccess, "%s does not bind", keys[i]);
	}
	ck_assert_int_eq(seen, 2);
}
END_TEST

static void dump(void *arg)
{
	(void)arg;
	ncclParamDumpAll();
}

START_TEST(parameter_dump)
{
	/* To stdout, as NCCL's. */
	char path[] = "/tmp/weft-nccl-dump-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	setenv("WEFT_CORE_FIFO_DEPTH", "91", 1);
	fflush(stdout);
	int saved = dup(1);
	dup2(fd, 1);
	dump(NULL);
	dup2(saved, 1);
	close(saved);
	close(fd);
	char *text = wt_read_file(path);
	unlink(path);
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(strstr(text, "core.fifo_depth = 91  (env WEFT_CORE_FIFO_DEPTH)"), "dump:\n%.2000s", text);
	free(text);
}
END_TEST

/* ------------------------------------------------ revoke, suspend, stats */

static ncclComm_t one_rank(void)
{
	ncclUniqueId id;
	ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
	ncclComm_t c = NULL;
	ck_assert_int_eq(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
	return c;
}

START_TEST(revoke_then_shrink)
{
	ncclComm_t c = one_rank();
	ck_assert_int_eq(ncclCommRevoke(NULL, 0), ncclSuccess); /* as NCCL */
	ck_assert_int_eq(ncclCommRevoke(c, 1), ncclInvalidArgument);
	ck_assert_int_eq(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT), ncclSuccess);
	ck_assert_int_eq(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT), ncclInvalidArgument);
	int32_t x = 4;
	ck_assert_int_eq(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, c, NULL), ncclInvalidUsage);
	ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "revoked"));
	ck_assert_int_eq(ncclSignal(0, 0, 0, 0, c, NULL), ncclInvalidUsage);
	ncclResult_t a = ncclInternalError;
	ck_assert_int_eq(ncclCommGetAsyncError(c, &a), ncclSuccess);
	ck_assert_int_eq(a, ncclSuccess); /* revoked and quiet */
	ck_assert_int_eq(ncclCommFinalize(c), ncclInvalidUsage);
	ncclComm_t s = c;
	ck_assert_int_eq(ncclCommSplit(c, 0, 0, &s, NULL), ncclInvalidUsage);
	ck_assert_ptr_null(s);
	ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "ncclCommShrink"));
	/* Shrink still makes a comm of the ranks. */
	ck_assert_int_eq(ncclCommShrink(c, NULL, 0, &s, NULL, NCCL_SHRINK_DEFAULT), ncclSuccess);
	ck_assert_int_eq(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, s, NULL), ncclSuccess);
	ck_assert_int_eq(x, 4);
	ck_assert_int_eq(ncclCommDestroy(c), ncclSuccess);
	ck_assert_int_eq(ncclCommDestroy(s), ncclSuccess);
}
END_TEST

START_TEST(suspend_and_stats)
{
	ncclComm_t c = one_rank();
	ck_assert_int_eq(ncclCommSuspend(c, 0), ncclSuccess); /* nothing asked to be released */
	ck_assert_int_eq(ncclCommSuspend(c, NCCL_SUSPEND_MEM), ncclInvalidUsage);
	ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "NCCL_MEM_MANAGER_DISABLE"));
	ck_assert_int_eq(ncclCommResume(c), ncclSuccess);
	uint64_t v = 7;
	ck_assert_int_eq(ncclCommMemStats(c, ncclStatGpuMemSuspended, &v), ncclSuccess);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(ncclCommMemStats(c, ncclStatGpuMemPersist, &v), ncclInvalidUsage);
	ck_assert_int_eq(ncclCommMemStats(c, ncclStatGpuMemSuspend, &v), ncclInvalidUsage);
	ck_assert_int_eq(ncclCommMemStats(c, ncclStatGpuMemTotal, NULL), ncclInvalidArgument);
	int32_t x = 5;
	ck_assert_int_eq(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, c, NULL), ncclSuccess);
	ck_assert_int_eq(ncclCommDestroy(c), ncclSuccess);
}
END_TEST

int main(void)
{
	setenv("WEFT_CORE_PEER_TIMEOUT", "5", 0);
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "30", 0);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	Suite *s = suite_create("nccl_api");
	TCase *u = tcase_create("unit");
	tcase_set_timeout(u, 60);
	tcase_add_test(u, exports_of_the_api_file);
	tcase_add_test(u, version_served);
	tcase_add_test(u, config_layouts);
	tcase_add_test(u, parameters);
	tcase_add_test(u, parameter_dump);
	tcase_add_test(u, revoke_then_shrink);
	tcase_add_test(u, suspend_and_stats);
	suite_add_tcase(s, u);
	return wt_run_suite(s);
}
