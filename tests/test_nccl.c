/* SPDX-License-Identifier: Apache-2.0 */
/* libweft_nccl (nccl/): the NCCL 2.30 API on weft. Exported symbols against
 * nccl/symbols.txt, ncclConfig_t's layout, versions and error strings,
 * refusals, the fallback's NVLS guard; forked 2- and 3-rank jobs over ofi
 * checking every collective, grouped send/recv and ncclCommSplit against
 * references from seeded data; ncclCommInitAll with 2 ranks in one process;
 * a killed peer seen through ncclCommGetAsyncError. */
#define _GNU_SOURCE
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nccl.h>

#include "nccl_refusals.h"
#include "nccl_check.h"
#include "testlib.h"

#define JOB_TIMEOUT 120

/* ------------------------------------------------------- layout (LP64)
 * NCCL 2.30's ncclConfig_v23000, field by field: an application built
 * against NVIDIA's header hands this library exactly these offsets (older
 * layouts: tests/test_nccl_api.c). */
_Static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId is 128 bytes");
_Static_assert(offsetof(ncclConfig_t, size) == 0, "size");
_Static_assert(offsetof(ncclConfig_t, magic) == 8, "magic");
_Static_assert(offsetof(ncclConfig_t, version) == 12, "version");
_Static_assert(offsetof(ncclConfig_t, blocking) == 16, "blocking");
_Static_assert(offsetof(ncclConfig_t, cgaClusterSize) == 20, "cgaClusterSize");
_Static_assert(offsetof(ncclConfig_t, minCTAs) == 24, "minCTAs");
_Static_assert(offsetof(ncclConfig_t, maxCTAs) == 28, "maxCTAs");
_Static_assert(offsetof(ncclConfig_t, netName) == 32, "netName");
_Static_assert(offsetof(ncclConfig_t, splitShare) == 40, "splitShare");
_Static_assert(offsetof(ncclConfig_t, trafficClass) == 44, "trafficClass");
_Static_assert(offsetof(ncclConfig_t, commName) == 48, "commName");
_Static_assert(offsetof(ncclConfig_t, collnetEnable) == 56, "collnetEnable");
_Static_assert(offsetof(ncclConfig_t, CTAPolicy) == 60, "CTAPolicy");
_Static_assert(offsetof(ncclConfig_t, shrinkShare) == 64, "shrinkShare");
_Static_assert(offsetof(ncclConfig_t, nvlsCTAs) == 68, "nvlsCTAs");
_Static_assert(offsetof(ncclConfig_t, nChannelsPerNetPeer) == 72, "nChannelsPerNetPeer");
_Static_assert(offsetof(ncclConfig_t, nvlinkCentricSched) == 76, "nvlinkCentricSched");
_Static_assert(offsetof(ncclConfig_t, graphUsageMode) == 80, "graphUsageMode");
_Static_assert(offsetof(ncclConfig_t, numRmaCtx) == 84, "numRmaCtx");
_Static_assert(offsetof(ncclConfig_t, maxP2pPeers) == 88, "maxP2pPeers");
_Static_assert(offsetof(ncclConfig_t, graphStreamOrdering) == 92, "graphStreamOrdering");
_Static_assert(sizeof(ncclConfig_t) == 96, "ncclConfig_t is 96 bytes");
_Static_assert(sizeof(ncclWaitSignalDesc_t) == 16, "ncclWaitSignalDesc_t is 4 ints");
_Static_assert(sizeof(ncclSimInfo_t) == 24, "ncclSimInfo_t is 24 bytes");
_Static_assert(sizeof(ncclRedOp_t) == 4 && ncclMaxRedOp == 0x7fffffff, "ncclRedOp_t stays 4 bytes");

START_TEST(config_layout)
{
	/* The same checks at run time, so that a failure says which field moved. */
	static const struct {
		const char *name;
		size_t off, want;
	} f[] = {
		{"magic", offsetof(ncclConfig_t, magic), 8},
		{"blocking", offsetof(ncclConfig_t, blocking), 16},
		{"netName", offsetof(ncclConfig_t, netName), 32},
		{"commName", offsetof(ncclConfig_t, commName), 48},
		{"nvlinkCentricSched", offsetof(ncclConfig_t, nvlinkCentricSched), 76},
		{"graphStreamOrdering", offsetof(ncclConfig_t, graphStreamOrdering), 92},
	};
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		ck_assert_msg(f[i].off == f[i].want, "%s at %zu, NCCL 2.30 has it at %zu", f[i].name, f[i].off,
			      f[i].want);
	ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
	ck_assert_uint_eq(c.size, sizeof(ncclConfig_t));
	ck_assert_uint_eq(c.magic, 0xcafebeef);
	ck_assert_uint_eq(c.version, 23007);
	ck_assert_int_eq(c.blocking, INT_MIN);
	ck_assert_ptr_null(c.netName);
	ck_assert_ptr_null(c.commName);
	ck_assert_int_eq(c.nvlinkCentricSched, INT_MIN);
	ck_assert_int_eq(c.graphStreamOrdering, INT_MIN);
	ncclSimInfo_t si = NCCL_SIM_INFO_INITIALIZER;
	ck_assert_uint_eq(si.magic, 0x74685283);
	ck_assert(si.estimatedTime == NCCL_UNDEF_FLOAT);
}
END_TEST

START_TEST(version_and_errors)
{
	int v = 0;
	ck_assert_int_eq(ncclGetVersion(&v), ncclSuccess);
	ck_assert_int_eq(v, 23007);
	ck_assert_int_eq(NCCL_VERSION_CODE, 23007);
	ck_assert_int_eq(NCCL_VERSION(2, 30, 7), 23007);
	ck_assert_int_eq(NCCL_VERSION(2, 8, 4), 2804);
	ck_assert_int_eq(ncclGetVersion(NULL), ncclInvalidArgument);
	ck_assert_int_eq(ncclBfloat16, 9);
	ck_assert_int_eq(ncclFloat8e4m3, 10);
	ck_assert_int_eq(ncclFloat8e5m2, 11);
	ck_assert_int_eq(ncclNumTypes, 12);
	ck_assert_int_eq(ncclAvg, 4);
	ck_assert_int_eq(ncclNumOps, 5);
	ck_assert_int_eq(ncclInProgress, 7);
	ck_assert_int_eq(ncclTimeout, 8);
	ck_assert_int_eq(ncclNumResults, 9);
	for (int r = 0; r < ncclNumResults; r++) {
		const char *s = ncclGetErrorString((ncclResult_t)r);
		ck_assert_ptr_nonnull(s);
		for (int q = 0; q < r; q++)
			ck_assert_msg(strcmp(s, ncclGetErrorString((ncclResult_t)q)) != 0, "results %d and %d read the same",
				      q, r);
	}
	ck_assert_str_eq(ncclGetErrorString(ncclSuccess), "no error");
	ck_assert_str_eq(ncclGetErrorString((ncclResult_t)99), "unknown result code");
	/* The last error names what went wrong. */
	ck_assert_int_eq(ncclCommCount(NULL, &v), ncclInvalidArgument);
	ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "ncclCommCount: comm is NULL"));
}
END_TEST

/* ------------------------------------------------------------ symbols */

static int in_list(char **list, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(list[i], name) == 0)
			return 1;
	return 0;
}

START_TEST(exported_symbols)
{
	char *text = wt_read_file(WEFT_NCCL_SYMBOLS);
	ck_assert_ptr_nonnull(text);
	char *want[128];
	int nwant = 0;
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (line[0] && line[0] != '#') {
			ck_assert_int_lt(nwant, 128);
			want[nwant++] = line;
		}
	ck_assert_int_eq(nwant, 65); /* NCCL 2.30.7's 64 functions and ncclAllToAllv */

	int st = 0;
	char *out = wt_run_capture("nm -D --defined-only '" WEFT_NCCL_LIB "'", &st);
	ck_assert_ptr_nonnull(out);
	ck_assert_msg(st == 0, "nm failed: %s", out);
	char *have[256];
	int nhave = 0;
	for (char *save = NULL, *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char addr[64], type[8], name[128];
		if (sscanf(line, "%63s %7s %127s", addr, type, name) != 3)
			continue;
		ck_assert_msg(strncmp(name, "nccl", 4) == 0 || strncmp(name, "pnccl", 5) == 0,
			      "libweft_nccl exports %s, which is not an NCCL name", name);
		ck_assert_msg(type[0] == 'T', "%s is exported as '%s', not as a function", name, type);
		ck_assert_int_lt(nhave, 256);
		have[nhave++] = strdup(line + (strstr(line, name) - line));
		const char *base = name[0] == 'p' ? name + 1 : name;
		ck_assert_msg(in_list(want, nwant, base), "%s is exported but is not in nccl/symbols.txt", name);
	}
	for (int i = 0; i < nwant; i++) {
		char p[160];
		snprintf(p, sizeof(p), "p%s", want[i]);
		ck_assert_msg(in_list(have, nhave, want[i]), "NCCL 2.30's %s is not exported", want[i]);
		ck_assert_msg(in_list(have, nhave, p), "%s (the profiling twin) is not exported", p);
	}
	ck_assert_int_eq(nhave, 2 * nwant);
	for (int i = 0; i < nhave; i++)
		free(have[i]);
	free(out);
	free(text);
}
END_TEST

/* ------------------------------------------------------------ refusals */

START_TEST(refused_without_comm)
{
	ncclRedOp_t op = ncclSum;
	int x = 2;
	ck_assert_int_eq(ncclRedOpCreatePreMulSum(&op, &x, ncclInt32, ncclScalarHostImmediate, NULL), ncclInvalidArgument);
	ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "ncclRedOpCreatePreMulSum: comm is NULL"));
	ck_assert_int_ne(op, ncclSum); /* a value no collective takes, never a plain sum */
	ck_assert_int_eq(ncclRedOpDestroy(ncclNumOps, NULL), ncclInvalidArgument);
	ck_assert_int_eq(ncclCommShrink(NULL, NULL, 0, NULL, NULL, 0), ncclInvalidArgument);
	/* No CUDA runtime in this process: device memory is refused, not faked. */
	void *p = NULL;
	ck_assert_int_eq(ncclMemAlloc(&p, 4096), ncclInvalidUsage);
	ck_assert_ptr_null(p);
	ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "no CUDA runtime"));
	ck_assert_int_eq(ncclMemFree(NULL), ncclSuccess);
	/* The simulation ends the group (so later calls are not queued forever). */
	ncclSimInfo_t si = NCCL_SIM_INFO_INITIALIZER;
	ck_assert_int_eq(ncclGroupSimulateEnd(&si), ncclInvalidUsage); /* no group open */
	ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
	ck_assert_int_eq(ncclGroupSimulateEnd(&si), ncclInvalidUsage);
	ck_assert_int_eq(ncclGroupEnd(), ncclInvalidUsage); /* the group is over */
	ncclComm_t two[2] = {NULL, NULL};
	ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
	ck_assert_int_eq(ncclCommInitAll(two, 2, NULL), ncclInvalidUsage);
	ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
	ck_assert_ptr_null(two[0]);
	/* Bad arguments are refused before anything is queued. */
	ncclComm_t c = NULL;
	ncclUniqueId id;
	memset(&id, 0, sizeof(id));
	ck_assert_int_eq(ncclCommInitRank(&c, 2, id, 2), ncclInvalidArgument);
	ck_assert_int_eq(ncclCommInitRank(NULL, 2, id, 0), ncclInvalidArgument);
	ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
	bad.magic = 0;
	ck_assert_int_eq(ncclCommInitRankConfig(&c, 1, id, 0, &bad), ncclInvalidArgument);
	ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "NCCL_CONFIG_INITIALIZER"));
	ck_assert_ptr_null(c);
	ck_assert_int_eq(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, NULL, NULL), ncclInvalidArgument);
	ck_assert_int_eq(ncclCommDestroy(NULL), ncclSuccess);
}
END_TEST

/* Every function of nccl/symbols.txt refuses, and what it hands back makes
 * the next call fail by name (tests/nccl_refusals.c). */
START_TEST(refuse_then_use)
{
	static char err[16384];
	int failed = nr_run_all(WEFT_NCCL_SYMBOLS, err, sizeof(err));
	ck_assert_msg(failed == 0, "%d refuse-then-use failure(s):\n%s", failed, err);
}
END_TEST

/* A one-rank comm in this process, for calls that need a live comm. */
static ncclComm_t one_rank_comm(void)
{
	ncclComm_t c = NULL;
	ck_assert_int_eq(ncclCommInitAll(&c, 1, NULL), ncclSuccess);
	ck_assert_ptr_nonnull(c);
	return c;
}

/* An allreduce with an operation weft lacks, the call the fallback takes:
 * refused, with a logged reason containing want. */
static void refused_op(ncclComm_t c, const char *want)
{
	int x = 1;
	ck_assert_int_eq(ncclAllReduce(&x, &x, 1, ncclInt32, (ncclRedOp_t)(ncclNumOps + 1), c, NULL),
			 ncclInvalidArgument);
	ck_assert_msg(strstr(ncclGetLastError(NULL), want), "message: %s (want '%s')", ncclGetLastError(NULL), want);
	ck_assert_int_eq(x, 1);
}

START_TEST(fallback_needs_nvls_off)
{
	ncclComm_t c = one_rank_comm();
	unsetenv("WEFT_NCCL_FALLBACK");
	refused_op(c, "was not made by ncclRedOpCreatePreMulSum");

	setenv("WEFT_NCCL_FALLBACK", "/nonexistent/libnccl.so.2", 1);
	unsetenv("NCCL_NVLS_ENABLE");
	refused_op(c, "NCCL_NVLS_ENABLE=0 is not");
	setenv("NCCL_NVLS_ENABLE", "1", 1);
	refused_op(c, "NCCL_NVLS_ENABLE=0");
	/* With NVLS off the library is looked for, and its absence named. */
	setenv("NCCL_NVLS_ENABLE", "0", 1);
	refused_op(c, "/nonexistent/libnccl.so.2 cannot be loaded");
	/* And a path to libweft_nccl itself is not taken for a real NCCL. */
	setenv("WEFT_NCCL_FALLBACK", WEFT_NCCL_LIB, 1);
	refused_op(c, "libweft_nccl itself");
	/* Every message still names the operation weft lacks. */
	refused_op(c, "was not made by ncclRedOpCreatePreMulSum");
	unsetenv("WEFT_NCCL_FALLBACK");
	unsetenv("NCCL_NVLS_ENABLE");
	int n = 0, r = -1, d = -2;
	ck_assert_int_eq(ncclCommCount(c, &n), ncclSuccess);
	ck_assert_int_eq(ncclCommUserRank(c, &r), ncclSuccess);
	ck_assert_int_eq(ncclCommCuDevice(c, &d), ncclSuccess);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(r, 0);
	ck_assert_int_eq(d, 0); /* devlist NULL: rank i is device i */
	ck_assert_int_eq(ncclCommDestroy(c), ncclSuccess);
}
END_TEST

/* ------------------------------------------------------------ forked jobs */

static ncclUniqueId g_id;

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Element i of rank r's input for test `seed`: an integer in [-1000, 1000]. */
static int64_t val(uint64_t seed, int r, size_t i)
{
	return (int64_t)(mix64(seed * 1000003u + (uint64_t)r * 0x51ed2705ull + i * 0x2545f491ull) % 2001) - 1000;
}

static int collectives(int rank, int n, ncclComm_t comm)
{
	enum { C = 1031 };
	size_t blocks = n > 3 ? (size_t)n : 3; /* the ring below uses three blocks */
	int32_t *a = malloc(C * blocks * sizeof(int32_t)), *b = malloc(C * blocks * sizeof(int32_t));
	int64_t *l = malloc(C * sizeof(int64_t));
	float *f = malloc(C * sizeof(float));
	double *d = malloc(C * sizeof(double));
	RCHECK(a && b && l && f && d, "out of memory");

	/* allreduce: int32 sum out of place, int64 max in place, float min. */
	for (size_t i = 0; i < C; i++) {
		a[i] = (int32_t)val(1, rank, i);
		l[i] = val(2, rank, i);
		f[i] = (float)val(3, rank, i);
	}
	NOK(ncclAllReduce(a, b, C, ncclInt32, ncclSum, comm, NULL));
	NOK(ncclAllReduce(l, l, C, ncclInt64, ncclMax, comm, NULL));
	NOK(ncclAllReduce(f, f, C, ncclFloat32, ncclMin, comm, NULL));
	for (size_t i = 0; i < C; i++) {
		int64_t s = 0, mx = INT64_MIN, mn = INT64_MAX;
		for (int r = 0; r < n; r++) {
			s += val(1, r, i);
			mx = val(2, r, i) > mx ? val(2, r, i) : mx;
			mn = val(3, r, i) < mn ? val(3, r, i) : mn;
		}
		RCHECK(b[i] == s, "allreduce sum [%zu] = %d, want %lld", i, b[i], (long long)s);
		RCHECK(l[i] == mx, "allreduce max [%zu] = %lld, want %lld", i, (long long)l[i], (long long)mx);
		RCHECK(f[i] == (float)mn, "allreduce min [%zu] = %g, want %lld", i, f[i], (long long)mn);
	}

	/* allgather int32. */
	for (size_t i = 0; i < C; i++)
		a[i] = (int32_t)val(4, rank, i);
	NOK(ncclAllGather(a, b, C, ncclInt32, comm, NULL));
	for (int r = 0; r < n; r++)
		for (size_t i = 0; i < C; i++)
			RCHECK(b[(size_t)r * C + i] == val(4, r, i), "allgather block %d [%zu] = %d", r, i, b[r * C + i]);

	/* broadcast from the last rank, double; and the deprecated in-place ncclBcast from rank 0. */
	int root = n - 1;
	for (size_t i = 0; i < C; i++)
		d[i] = rank == root ? (double)val(5, root, i) : -1.0;
	NOK(ncclBroadcast(d, d, C, ncclFloat64, root, comm, NULL));
	for (size_t i = 0; i < C; i++)
		RCHECK(d[i] == (double)val(5, root, i), "broadcast [%zu] = %g", i, d[i]);
	for (size_t i = 0; i < C; i++)
		a[i] = rank == 0 ? (int32_t)val(6, 0, i) : 0;
	NOK(ncclBcast(a, C, ncclInt32, 0, comm, NULL));
	for (size_t i = 0; i < C; i++)
		RCHECK(a[i] == val(6, 0, i), "bcast [%zu] = %d", i, a[i]);

	/* reduce-scatter uint32 sum (values shifted positive). */
	uint32_t *u = (uint32_t *)a, *ur = (uint32_t *)b;
	for (size_t i = 0; i < (size_t)n * C; i++)
		u[i] = (uint32_t)(val(7, rank, i) + 1000);
	NOK(ncclReduceScatter(u, ur, C, ncclUint32, ncclSum, comm, NULL));
	for (size_t i = 0; i < C; i++) {
		uint64_t s = 0;
		for (int r = 0; r < n; r++)
			s += (uint64_t)(val(7, r, (size_t)rank * C + i) + 1000);
		RCHECK(ur[i] == s, "reduce_scatter [%zu] = %u, want %llu", i, ur[i], (unsigned long long)s);
	}

	/* reduce int32 sum to rank 1 % n. */
	int rroot = 1 % n;
	for (size_t i = 0; i < C; i++)
		a[i] = (int32_t)val(8, rank, i);
	NOK(ncclReduce(a, b, C, ncclInt32, ncclSum, rroot, comm, NULL));
	if (rank == rroot)
		for (size_t i = 0; i < C; i++) {
			int64_t s = 0;
			for (int r = 0; r < n; r++)
				s += val(8, r, i);
			RCHECK(b[i] == s, "reduce [%zu] = %d, want %lld", i, b[i], (long long)s);
		}

	/* all-to-all: block p of rank r's input goes to rank p. */
	enum { A = 37 };
	for (size_t i = 0; i < (size_t)n * A; i++)
		a[i] = (int32_t)val(9, rank, i);
	NOK(ncclAlltoAll(a, b, A, ncclInt32, comm, NULL));
	for (int p = 0; p < n; p++)
		for (size_t i = 0; i < A; i++)
			RCHECK(b[(size_t)p * A + i] == val(9, p, (size_t)rank * A + i), "alltoall from %d [%zu]", p, i);

	/* v-alltoall (RCCL's ncclAllToAllv): rank r sends (r + 2p) % 5 elements to p. */
	{
		size_t sc[16], sd[16], rc[16], rd[16], so = 0, ro = 0;
		RCHECK(n <= 16, "v-alltoall case: at most 16 ranks");
		for (int p = 0; p < n; p++) {
			sc[p] = (size_t)(rank + 2 * p) % 5;
			sd[p] = so;
			so += sc[p];
			rc[p] = (size_t)(p + 2 * rank) % 5;
			rd[p] = ro;
			ro += rc[p];
		}
		for (size_t i = 0; i < so; i++)
			a[i] = (int32_t)val(12, rank, i);
		for (size_t i = 0; i < ro + 4; i++)
			b[i] = -1;
		NOK(ncclAllToAllv(a, sc, sd, b, rc, rd, ncclInt32, comm, NULL));
		for (int p = 0; p < n; p++) {
			size_t at = 0; /* where p's block for this rank starts in p's input */
			for (int q = 0; q < rank; q++)
				at += (size_t)(p + 2 * q) % 5;
			for (size_t i = 0; i < rc[p]; i++)
				RCHECK(b[rd[p] + i] == val(12, p, at + i), "alltoallv from %d [%zu] = %d", p, i, b[rd[p] + i]);
		}
		RCHECK(b[ro] == -1, "alltoallv wrote past its output");
	}

	/* gather to rank 0, scatter from the last rank. */
	for (size_t i = 0; i < A; i++)
		a[i] = (int32_t)val(10, rank, i);
	NOK(ncclGather(a, b, A, ncclInt32, 0, comm, NULL));
	if (rank == 0)
		for (int p = 0; p < n; p++)
			for (size_t i = 0; i < A; i++)
				RCHECK(b[(size_t)p * A + i] == val(10, p, i), "gather from %d [%zu]", p, i);
	for (size_t i = 0; i < (size_t)n * A; i++)
		a[i] = (int32_t)val(11, root, i);
	NOK(ncclScatter(a, b, A, ncclInt32, root, comm, NULL));
	for (size_t i = 0; i < A; i++)
		RCHECK(b[i] == val(11, root, (size_t)rank * A + i), "scatter [%zu]", i);

	/* Send/recv in a group: a ring both ways plus a message to itself. */
	int right = (rank + 1) % n, left = (rank + n - 1) % n;
	int32_t *s1 = a, *s2 = a + C, *s3 = a + 2 * C, *r1 = b, *r2 = b + C, *r3 = b + 2 * C;
	RCHECK(n >= 2, "ring needs two ranks");
	for (size_t i = 0; i < C / 3; i++) {
		s1[i] = (int32_t)val(12, rank, i);
		s2[i] = (int32_t)val(13, rank, i);
		s3[i] = (int32_t)val(14, rank, i);
	}
	NOK(ncclGroupStart());
	NOK(ncclRecv(r1, C / 3, ncclInt32, left, comm, NULL));
	NOK(ncclSend(s1, C / 3, ncclInt32, right, comm, NULL));
	NOK(ncclSend(s2, C / 3, ncclInt32, left, comm, NULL));
	NOK(ncclRecv(r2, C / 3, ncclInt32, right, comm, NULL));
	NOK(ncclSend(s3, C / 3, ncclInt32, rank, comm, NULL));
	NOK(ncclRecv(r3, C / 3, ncclInt32, rank, comm, NULL));
	NOK(ncclGroupEnd());
	for (size_t i = 0; i < C / 3; i++) {
		RCHECK(r1[i] == val(12, left, i), "recv from left [%zu]", i);
		RCHECK(r2[i] == val(13, right, i), "recv from right [%zu]", i);
		RCHECK(r3[i] == val(14, rank, i), "recv from self [%zu]", i);
	}

	/* Refusals on a live comm: nothing runs, nothing hangs. */
	RCHECK(ncclAllReduce(a, b, 4, (ncclDataType_t)99, ncclSum, comm, NULL) == ncclInvalidArgument, "bad type");
	RCHECK(ncclAllReduce(a, b, 4, ncclInt32, (ncclRedOp_t)(ncclNumOps + 3), comm, NULL) == ncclInvalidArgument,
	       "dynamic op");
	RCHECK(strstr(ncclGetLastError(comm), "not made by ncclRedOpCreatePreMulSum"), "message: %s", ncclGetLastError(comm));
	RCHECK(ncclBroadcast(a, b, 4, ncclInt32, n, comm, NULL) == ncclInvalidArgument, "root out of range");

	/* An allreduce after the refusals still lines up on every rank. */
	a[0] = rank + 1;
	NOK(ncclAllReduce(a, b, 1, ncclInt32, ncclSum, comm, NULL));
	RCHECK(b[0] == n * (n + 1) / 2, "allreduce after refusals = %d", b[0]);
	free(a);
	free(b);
	free(l);
	free(f);
	free(d);
	return 0;
}

static int split(int rank, int n, ncclComm_t comm)
{
	/* Even and odd ranks, in reverse order of parent rank (key = -rank). */
	ncclComm_t sub = NULL;
	NOK(ncclCommSplit(comm, rank % 2, -rank, &sub, NULL));
	RCHECK(sub, "no comm for color %d", rank % 2);
	int members[8], m = 0;
	for (int p = n - 1; p >= 0; p--)
		if (p % 2 == rank % 2)
			members[m++] = p;
	int cnt = 0, me = -1;
	NOK(ncclCommCount(sub, &cnt));
	NOK(ncclCommUserRank(sub, &me));
	RCHECK(cnt == m, "split comm has %d ranks, want %d", cnt, m);
	RCHECK(members[me] == rank, "split rank %d is parent rank %d, want %d", me, members[me], rank);
	int32_t x = rank * 10 + 1, y = 0, want = 0;
	for (int i = 0; i < m; i++)
		want += members[i] * 10 + 1;
	NOK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, sub, NULL));
	RCHECK(y == want, "allreduce on split comm = %d, want %d", y, want);
	/* Broadcast from the sub-comm's rank 0, the highest parent rank of the color. */
	int32_t z = rank;
	NOK(ncclBroadcast(&z, &z, 1, ncclInt32, 0, sub, NULL));
	RCHECK(z == members[0], "broadcast on split comm = %d, want %d", z, members[0]);
	/* Destroyed before the parent is used again: weft progresses a comm's
	 * transport only while waiting on that comm, so the root of this
	 * broadcast must not block on the parent while its data is in flight
	 * (see docs/nccl-compat.md, limitations). */
	NOK(ncclCommDestroy(sub));

	/* The last rank stays out of a second split; a config is accepted. */
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.commName = "rest";
	ncclComm_t rest = (ncclComm_t)&cfg; /* must be overwritten */
	NOK(ncclCommSplit(comm, rank == n - 1 ? NCCL_SPLIT_NOCOLOR : 7, 0, &rest, &cfg));
	if (rank == n - 1) {
		RCHECK(rest == NULL, "NCCL_SPLIT_NOCOLOR gave a comm");
	} else {
		RCHECK(rest, "no comm");
		NOK(ncclCommCount(rest, &cnt));
		RCHECK(cnt == n - 1, "rest has %d ranks", cnt);
		x = 1;
		NOK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, rest, NULL));
		RCHECK(y == n - 1, "allreduce on rest = %d", y);
		NOK(ncclCommDestroy(rest));
	}
	return 0;
}

/* Pre-multiplied sums on host buffers, as PyTorch and FSDP call them: each
 * rank's input times its scalar, rounded to the element type, then summed
 * in rank order (algo-host's order). 0.25 is exact; 1/3 rounds. */
static float fl(double d)
{
	return (float)d;
}

static int premul(int rank, int n, ncclComm_t comm)
{
	enum { C = 517 };
	float *in = malloc(C * (size_t)n * sizeof(float)), *out = malloc(C * (size_t)n * sizeof(float));
	RCHECK(in && out, "out of memory");
	const float scalars[2] = {0.25f, fl(1.0 / 3.0)};
	for (int k = 0; k < 2; k++) {
		/* PyTorch's variable starts at ncclSum; creation must replace it. */
		ncclRedOp_t op = ncclSum;
		float s = scalars[k];
		NOK(ncclRedOpCreatePreMulSum(&op, &s, ncclFloat32, ncclScalarHostImmediate, comm));
		RCHECK((int)op >= ncclNumOps, "created operation %d", (int)op);
		s = 1000.0f; /* host-immediate: the value at creation counts */
		for (size_t i = 0; i < C * (size_t)n; i++)
			in[i] = (float)val(40 + (uint64_t)k, rank, i);
		NOK(ncclAllReduce(in, out, C, ncclFloat32, op, comm, NULL));
		for (size_t i = 0; i < C; i++) {
			float want = 0;
			for (int r = 0; r < n; r++)
				want = r == 0 ? (float)val(40 + (uint64_t)k, 0, i) * scalars[k]
					      : want + (float)val(40 + (uint64_t)k, r, i) * scalars[k];
			RCHECK(memcmp(&out[i], &want, sizeof(want)) == 0, "premul %g allreduce [%zu]: %.9g, want %.9g",
			       (double)scalars[k], i, (double)out[i], (double)want);
		}
		NOK(ncclReduceScatter(in, out, C, ncclFloat32, op, comm, NULL));
		for (size_t i = 0; i < C; i++) {
			size_t g = (size_t)rank * C + i;
			float want = 0;
			for (int r = 0; r < n; r++)
				want = r == 0 ? (float)val(40 + (uint64_t)k, 0, g) * scalars[k]
					      : want + (float)val(40 + (uint64_t)k, r, g) * scalars[k];
			RCHECK(memcmp(&out[i], &want, sizeof(want)) == 0, "premul reduce-scatter [%zu]", i);
		}
		memset(out, 0, C * sizeof(float));
		NOK(ncclReduce(in, out, C, ncclFloat32, op, 0, comm, NULL));
		if (rank == 0)
			for (size_t i = 0; i < C; i++) {
				float want = 0;
				for (int r = 0; r < n; r++)
					want = r == 0 ? (float)val(40 + (uint64_t)k, 0, i) * scalars[k]
						      : want + (float)val(40 + (uint64_t)k, r, i) * scalars[k];
				RCHECK(memcmp(&out[i], &want, sizeof(want)) == 0, "premul reduce [%zu]", i);
			}
		/* The operation serves the datatype it was made for only. */
		RCHECK(ncclAllReduce(in, out, C, ncclFloat64, op, comm, NULL) == ncclInvalidArgument, "type mismatch");
		RCHECK(strstr(ncclGetLastError(NULL), "was made for datatype"), "message: %s", ncclGetLastError(NULL));
		NOK(ncclRedOpDestroy(op, comm));
		RCHECK(ncclAllReduce(in, out, C, ncclFloat32, op, comm, NULL) == ncclInvalidArgument, "destroyed op");
		RCHECK(ncclRedOpDestroy(op, comm) == ncclInvalidArgument, "destroyed twice");
	}
	/* Each rank its own scalar, int32, in a group whose operation is destroyed
	 * before the group ends (PyTorch destroys it right after the call). */
	int32_t iv[4] = {rank + 1, -(rank + 1), 7, 0}, io[4] = {0}, is = rank + 2;
	ncclRedOp_t op = ncclSum;
	NOK(ncclRedOpCreatePreMulSum(&op, &is, ncclInt32, ncclScalarHostImmediate, comm));
	NOK(ncclGroupStart());
	NOK(ncclAllReduce(iv, io, 4, ncclInt32, op, comm, NULL));
	NOK(ncclRedOpDestroy(op, comm));
	NOK(ncclGroupEnd());
	int32_t w0 = 0, w2 = 0;
	for (int r = 0; r < n; r++) {
		w0 += (r + 1) * (r + 2);
		w2 += 7 * (r + 2);
	}
	RCHECK(io[0] == w0 && io[1] == -w0 && io[2] == w2 && io[3] == 0, "grouped int32: %d %d %d %d", io[0], io[1],
	       io[2], io[3]);
	/* A device scalar for host buffers needs the application's CUDA runtime
	 * (none here): the call refuses, naming it. */
	NOK(ncclRedOpCreatePreMulSum(&op, &is, ncclInt32, ncclScalarDevice, comm));
	RCHECK(ncclAllReduce(iv, io, 4, ncclInt32, op, comm, NULL) != ncclSuccess, "device scalar without CUDA");
	RCHECK(strstr(ncclGetLastError(NULL), "no CUDA runtime"), "message: %s", ncclGetLastError(NULL));
	NOK(ncclRedOpDestroy(op, comm));
	free(in);
	free(out);
	return 0;
}

static int job_rank(int rank, int n, void *arg)
{
	ncclComm_t comm = NULL;
	NOK(ncclCommInitRank(&comm, n, g_id, rank));
	int cnt = 0, me = -1;
	ncclResult_t async = ncclInternalError;
	NOK(ncclCommCount(comm, &cnt));
	NOK(ncclCommUserRank(comm, &me));
	NOK(ncclCommGetAsyncError(comm, &async));
	RCHECK(cnt == n && me == rank && async == ncclSuccess, "count %d rank %d async %d", cnt, me, (int)async);
	if (collectives(rank, n, comm) || premul(rank, n, comm) || split(rank, n, comm))
		return 1; /* leaving without destroy: the peers see a dead peer, not a hang */
	NOK(ncclCommFinalize(comm));
	NOK(ncclCommDestroy(comm));
	return 0;
}

static void run_job(int n)
{
	ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
	int bad = wt_fork_ranks(n, job_rank, NULL, JOB_TIMEOUT);
	ck_assert_msg(bad == 0, "%d of %d ranks failed", bad, n);
}

START_TEST(np2_collectives_split)
{
	run_job(2);
}
END_TEST

START_TEST(np3_collectives_split)
{
	run_job(3);
}
END_TEST

/* ------------------------------------------- several ranks, one process */

START_TEST(init_all_two_ranks)
{
	ncclComm_t c[2] = {NULL, NULL};
	int devs[2] = {5, 3};
	ck_assert_int_eq(ncclCommInitAll(c, 2, devs), ncclSuccess);
	for (int i = 0; i < 2; i++) {
		int n = 0, r = -1, d = -1;
		ck_assert_int_eq(ncclCommCount(c[i], &n), ncclSuccess);
		ck_assert_int_eq(ncclCommUserRank(c[i], &r), ncclSuccess);
		ck_assert_int_eq(ncclCommCuDevice(c[i], &d), ncclSuccess);
		ck_assert_int_eq(n, 2);
		ck_assert_int_eq(r, i);
		ck_assert_int_eq(d, devs[i]);
	}
	/* One thread drives both ranks through groups, as NCCL programs do. */
	enum { C = 4099 };
	int64_t in[2][C], out[2][C], g[2][2 * C];
	for (int r = 0; r < 2; r++)
		for (size_t i = 0; i < C; i++)
			in[r][i] = val(20, r, i);
	ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
	for (int r = 0; r < 2; r++)
		ck_assert_int_eq(ncclAllReduce(in[r], out[r], C, ncclInt64, ncclSum, c[r], NULL), ncclSuccess);
	for (int r = 0; r < 2; r++)
		ck_assert_int_eq(ncclAllGather(in[r], g[r], C, ncclInt64, c[r], NULL), ncclSuccess);
	ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
	for (int r = 0; r < 2; r++)
		for (size_t i = 0; i < C; i++) {
			ck_assert_int_eq(out[r][i], val(20, 0, i) + val(20, 1, i));
			ck_assert_int_eq(g[r][i], val(20, 0, i));
			ck_assert_int_eq(g[r][C + i], val(20, 1, i));
		}
	/* Swap buffers with send/recv, one group for both ranks. */
	ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
	for (int r = 0; r < 2; r++) {
		ck_assert_int_eq(ncclSend(in[r], C, ncclInt64, 1 - r, c[r], NULL), ncclSuccess);
		ck_assert_int_eq(ncclRecv(out[r], C, ncclInt64, 1 - r, c[r], NULL), ncclSuccess);
	}
	ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
	for (int r = 0; r < 2; r++)
		for (size_t i = 0; i < C; i++)
			ck_assert_int_eq(out[r][i], val(20, 1 - r, i));
	/* Destroyed one after the other from this thread, as NCCL programs do. */
	ck_assert_int_eq(ncclCommDestroy(c[0]), ncclSuccess);
	ck_assert_int_eq(ncclCommDestroy(c[1]), ncclSuccess);
}
END_TEST

/* -------------------------------------------------------- a dead peer */

static int dead_peer_rank(int rank, int n, void *arg)
{
	ncclComm_t comm = NULL;
	NOK(ncclCommInitRank(&comm, n, g_id, rank));
	int32_t x = 1, y = 0;
	NOK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL));
	RCHECK(y == n, "first allreduce = %d", y);
	if (rank == 1)
		raise(SIGKILL);
	/* Rank 0: every later call fails (no hang), and the comm says why. */
	ncclResult_t r = ncclSuccess;
	for (int i = 0; i < 50 && r == ncclSuccess; i++)
		r = ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL);
	RCHECK(r != ncclSuccess, "allreduce with a dead peer succeeded");
	ncclResult_t async = ncclSuccess;
	NOK(ncclCommGetAsyncError(comm, &async));
	RCHECK(async == ncclRemoteError, "async error %d (%s), want ncclRemoteError", (int)async,
	       ncclGetErrorString(async));
	RCHECK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL) != ncclSuccess, "a later call succeeded");
	NOK(ncclCommAbort(comm));
	return 0;
}

START_TEST(dead_peer)
{
	ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
	int st[2];
	ck_assert_int_eq(wt_fork_ranks_status(2, dead_peer_rank, NULL, JOB_TIMEOUT, st), 0);
	ck_assert_msg(WIFEXITED(st[0]) && WEXITSTATUS(st[0]) == 0, "rank 0 status 0x%x", st[0]);
	ck_assert_msg(WIFSIGNALED(st[1]) && WTERMSIG(st[1]) == SIGKILL, "rank 1 status 0x%x", st[1]);
}
END_TEST

/* ------------------------------------------- fallback to a "real" NCCL */

static int fallback_rank(int rank, int n, void *arg)
{
	setenv("WEFT_NCCL_FALLBACK", WEFT_NCCL_FAKE, 1);
	setenv("NCCL_NVLS_ENABLE", "0", 1);
	ncclComm_t comm = NULL;
	NOK(ncclCommInitRank(&comm, n, g_id, rank));
	/* Collectives weft serves never touch the fallback. */
	int32_t x = rank + 1, y[2] = {0, 0};
	NOK(ncclAllReduce(&x, y, 1, ncclInt32, ncclSum, comm, NULL));
	RCHECK(y[0] == n * (n + 1) / 2, "allreduce = %d", y[0]);
	/* Nor do windows, which weft serves itself. */
	char buf[4096];
	ncclWindow_t win = NULL;
	void *user = NULL;
	NOK(ncclCommWindowRegister(comm, buf, sizeof(buf), &win, NCCL_WIN_DEFAULT));
	NOK(ncclWinGetUserPtr(comm, win, &user));
	RCHECK(user == buf, "the window's user pointer is %p, not %p", user, (void *)buf);
	NOK(ncclCommWindowDeregister(comm, win));
	/* An operation weft lacks goes to the real library, on a shadow comm
	 * made from rank 0's id (the fake answers op*1000+rank, and a hash of
	 * its comm's id in the second element). */
	int32_t two[2] = {x, x};
	ncclRedOp_t dyn = (ncclRedOp_t)(ncclNumOps + 1);
	NOK(ncclAllReduce(two, y, 2, ncclInt32, dyn, comm, NULL));
	RCHECK(y[0] == (int)dyn * 1000 + rank, "forwarded allreduce gave %d", y[0]);
	int32_t hashes[4] = {0};
	NOK(ncclAllGather(&y[1], hashes, 1, ncclInt32, comm, NULL));
	for (int r = 1; r < n; r++)
		RCHECK(hashes[r] == hashes[0], "rank %d's shadow comm has another id", r);
	NOK(ncclCommDestroy(comm));
	return 0;
}

START_TEST(fallback_forwards)
{
	ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
	int bad = wt_fork_ranks(2, fallback_rank, NULL, JOB_TIMEOUT);
	ck_assert_msg(bad == 0, "%d of 2 ranks failed", bad);
}
END_TEST

int main(void)
{
	setenv("WEFT_CORE_PEER_TIMEOUT", "5", 0);
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "30", 0);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	Suite *s = suite_create("nccl");
	TCase *u = tcase_create("unit");
	tcase_add_test(u, config_layout);
	tcase_add_test(u, version_and_errors);
	tcase_add_test(u, exported_symbols);
	tcase_add_test(u, refused_without_comm);
	tcase_add_test(u, refuse_then_use);
	tcase_add_test(u, fallback_needs_nvls_off);
	suite_add_tcase(s, u);
	TCase *mp = tcase_create("mp");
	tcase_set_timeout(mp, JOB_TIMEOUT + 30);
	tcase_add_test(mp, np2_collectives_split);
	tcase_add_test(mp, np3_collectives_split);
	tcase_add_test(mp, init_all_two_ranks);
	tcase_add_test(mp, dead_peer);
	tcase_add_test(mp, fallback_forwards);
	suite_add_tcase(s, mp);
	return wt_run_suite(s);
}
