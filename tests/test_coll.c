/* SPDX-License-Identifier: Apache-2.0 */
/* Collectives end to end: forked ranks (2, 3, 4) call every collective of
 * weft.h over the ofi transport through the algo-host pack and check results
 * against references each rank computes from every rank's seeded input:
 * the type x operation grid, in place and out of place, counts 0, 1, odd and
 * 64 Ki elements, 64 MiB, fused send/recv groups, refusals (device memory,
 * bad arguments), tiny slots (flow control) and selection by an [algorithm] rule. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft/info.h>
#include <weft/weft.h>

#include "coll.h"
#include "testlib.h"

#define JOB_TIMEOUT 150

static struct weft_unique_id g_id;

/* ------------------------------------------------------------- data
 * Element i of rank r's input is an integer drawn from a range chosen per type
 * and operation so that every sum and product over 4 ranks is exact in the
 * element type: the reference is then exact integer arithmetic. */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void range_of(enum weft_datatype t, enum weft_redop op, int64_t *lo, int64_t *hi)
{
	static const int64_t prod[WEFT_DATATYPE_COUNT][2] = {
		[WEFT_INT8] = {-3, 3},       [WEFT_UINT8] = {0, 3},    [WEFT_INT32] = {-100, 100},
		[WEFT_UINT32] = {0, 100},    [WEFT_INT64] = {-1000, 1000}, [WEFT_UINT64] = {0, 1000},
		[WEFT_FLOAT16] = {-5, 5},    [WEFT_BFLOAT16] = {-3, 3}, [WEFT_FLOAT32] = {-60, 60},
		[WEFT_FLOAT64] = {-1000, 1000}, [WEFT_FP8_E4M3] = {-2, 2}, [WEFT_FP8_E5M2] = {-2, 2},
	};
	static const int64_t other[WEFT_DATATYPE_COUNT][2] = {
		[WEFT_INT8] = {-30, 30},     [WEFT_UINT8] = {0, 60},   [WEFT_INT32] = {-1000000, 1000000},
		[WEFT_UINT32] = {0, 1000000}, [WEFT_INT64] = {-1000000000000, 1000000000000},
		[WEFT_UINT64] = {0, 1000000000000000}, [WEFT_FLOAT16] = {-200, 200}, [WEFT_BFLOAT16] = {-32, 32},
		[WEFT_FLOAT32] = {-1000000, 1000000}, [WEFT_FLOAT64] = {-1000000000000, 1000000000000},
		[WEFT_FP8_E4M3] = {-2, 2}, [WEFT_FP8_E5M2] = {-2, 2},
	};
	const int64_t *r = op == WEFT_PROD ? prod[t] : other[t];
	*lo = r[0];
	*hi = r[1];
}

static int64_t value(enum weft_datatype t, enum weft_redop op, uint64_t seed, int rank, size_t i)
{
	int64_t lo, hi;
	range_of(t, op, &lo, &hi);
	uint64_t x = mix64(seed * 1000003u + (uint64_t)rank * 0x51ed2705ull + (uint64_t)i * 0x2545f491ull);
	return lo + (int64_t)(x % (uint64_t)(hi - lo + 1));
}

/* Exact for the small integers used here (|v| < 2048). */
static uint16_t half_of_int(int64_t v)
{
	if (v == 0)
		return 0;
	uint16_t sign = v < 0 ? 0x8000 : 0;
	uint64_t a = (uint64_t)(v < 0 ? -v : v);
	int e = 63 - __builtin_clzll(a);
	uint16_t m = (uint16_t)(((a << 10) >> e) & 0x3ff);
	return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | m);
}

static double half_to_double(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
	return (h & 0x8000) ? -v : v;
}

static uint16_t bf16_of_int(int64_t v)
{
	float f = (float)v;
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return (uint16_t)(u >> 16); /* exact: small integers have no low mantissa bits */
}

static double bf16_to_double(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* fp8 of small integers, exact for the few used here (|v| <= 8): an
 * integer's leading bit sets the exponent, the next bits the mantissa. */
static uint8_t fp8_of_int(int e5m2, int64_t v)
{
	if (v == 0)
		return 0;
	uint8_t sign = v < 0 ? 0x80 : 0;
	uint64_t a = (uint64_t)(v < 0 ? -v : v);
	int e = 63 - __builtin_clzll(a), mb = e5m2 ? 2 : 3;
	uint8_t m = (uint8_t)(((a << mb) >> e) & ((1u << mb) - 1));
	return (uint8_t)(sign | (uint8_t)((e + (e5m2 ? 15 : 7)) << mb) | m);
}

static double fp8_to_double(int e5m2, uint8_t v)
{
	int mb = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
	int e = (v & 0x7f) >> mb, m = v & ((1 << mb) - 1);
	double x = e == 0 ? ldexp(m, 1 - bias - mb) : ldexp((1 << mb) + m, e - bias - mb);
	return (v & 0x80) ? -x : x;
}

static void store(enum weft_datatype t, void *buf, size_t i, int64_t v)
{
	switch (t) {
	case WEFT_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
	case WEFT_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
	case WEFT_FP8_E4M3: ((uint8_t *)buf)[i] = fp8_of_int(0, v); break;
	case WEFT_FP8_E5M2: ((uint8_t *)buf)[i] = fp8_of_int(1, v); break;
	case WEFT_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case WEFT_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
	case WEFT_INT64: ((int64_t *)buf)[i] = v; break;
	case WEFT_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
	case WEFT_FLOAT16: ((uint16_t *)buf)[i] = half_of_int(v); break;
	case WEFT_BFLOAT16: ((uint16_t *)buf)[i] = bf16_of_int(v); break;
	case WEFT_FLOAT32: ((float *)buf)[i] = (float)v; break;
	case WEFT_FLOAT64: ((double *)buf)[i] = (double)v; break;
	default: break;
	}
}

static int is_float(enum weft_datatype t)
{
	return t == WEFT_FLOAT16 || t == WEFT_BFLOAT16 || t == WEFT_FLOAT32 || t == WEFT_FLOAT64 ||
	       t == WEFT_FP8_E4M3 || t == WEFT_FP8_E5M2;
}

static double load_f(enum weft_datatype t, const void *buf, size_t i)
{
	switch (t) {
	case WEFT_FLOAT16: return half_to_double(((const uint16_t *)buf)[i]);
	case WEFT_BFLOAT16: return bf16_to_double(((const uint16_t *)buf)[i]);
	case WEFT_FLOAT32: return ((const float *)buf)[i];
	case WEFT_FP8_E4M3: return fp8_to_double(0, ((const uint8_t *)buf)[i]);
	case WEFT_FP8_E5M2: return fp8_to_double(1, ((const uint8_t *)buf)[i]);
	default: return ((const double *)buf)[i];
	}
}

static int64_t load_i(enum weft_datatype t, const void *buf, size_t i)
{
	switch (t) {
	case WEFT_INT8: return ((const int8_t *)buf)[i];
	case WEFT_UINT8: return ((const uint8_t *)buf)[i];
	case WEFT_INT32: return ((const int32_t *)buf)[i];
	case WEFT_UINT32: return ((const uint32_t *)buf)[i];
	case WEFT_INT64: return ((const int64_t *)buf)[i];
	default: return (int64_t)((const uint64_t *)buf)[i];
	}
}

/* Rank r's input, elements [0, count). */
static void fill(enum weft_datatype t, enum weft_redop op, uint64_t seed, int rank, void *buf, size_t count)
{
	for (size_t i = 0; i < count; i++)
		store(t, buf, i, value(t, op, seed, rank, i));
}

/* Checks buf[0, count) against the reduction over all ranks of elements
 * [base, base+count). Returns 0 or 1 after printing the first difference. */
static int check_reduced(int rank, const char *what, enum weft_datatype t, enum weft_redop op, uint64_t seed, int n,
			 const void *buf, size_t base, size_t count)
{
	for (size_t j = 0; j < count; j++) {
		size_t i = base + j;
		int64_t acc = value(t, op, seed, 0, i);
		for (int r = 1; r < n; r++) {
			int64_t v = value(t, op, seed, r, i);
			switch (op) {
			case WEFT_PROD: acc *= v; break;
			case WEFT_MIN: acc = v < acc ? v : acc; break;
			case WEFT_MAX: acc = v > acc ? v : acc; break;
			default: acc += v; break;
			}
		}
		int ok;
		double got_f = 0, want_f = 0;
		int64_t got_i = 0, want_i = 0;
		if (is_float(t)) {
			got_f = load_f(t, buf, j);
			if (op == WEFT_AVG) {
				want_f = (double)acc / n;
				/* What rounding to the type may lose, relative. */
				double tol = t == WEFT_FLOAT16    ? 1e-3
					     : t == WEFT_BFLOAT16 ? 8e-3
					     : t == WEFT_FLOAT32  ? 1e-6
					     : t == WEFT_FP8_E4M3 ? 0.0625
					     : t == WEFT_FP8_E5M2 ? 0.125
								  : 1e-12;
				ok = fabs(got_f - want_f) <= tol * fmax(1.0, fabs(want_f));
			} else {
				want_f = (double)acc;
				ok = got_f == want_f;
			}
		} else {
			got_i = load_i(t, buf, j);
			want_i = op == WEFT_AVG ? acc / n : acc;
			ok = got_i == want_i;
		}
		if (!ok) {
			if (is_float(t))
				fprintf(stderr, "rank %d: %s %s/%s: element %zu is %.9g, want %.9g\n", rank, what,
					weft_datatype_name(t), weft_redop_name(op), i, got_f, want_f);
			else
				fprintf(stderr, "rank %d: %s %s/%s: element %zu is %" PRId64 ", want %" PRId64 "\n", rank,
					what, weft_datatype_name(t), weft_redop_name(op), i, got_i, want_i);
			return 1;
		}
	}
	return 0;
}

static void *xalloc(size_t bytes)
{
	void *p = malloc(bytes ? bytes : 1);
	if (p)
		memset(p, 0xa5, bytes); /* stale bytes, so a missing write shows */
	return p;
}

/* ------------------------------------------------------- reductions */

static int do_allreduce(int rank, int n, weft_comm_t *comm, enum weft_datatype t, enum weft_redop op, size_t count,
			int inplace, uint64_t seed)
{
	size_t es = weft_datatype_size(t);
	char *in = xalloc(count * es), *out = inplace ? in : xalloc(count * es);
	RCHECK(in && out, "out of memory");
	fill(t, op, seed, rank, in, count);
	ROK(weft_allreduce(in, out, count, t, op, comm, NULL));
	int bad = check_reduced(rank, inplace ? "allreduce in place" : "allreduce", t, op, seed, n, out, 0, count);
	if (!inplace) {
		/* The input is left alone. */
		char *ref = xalloc(count * es);
		fill(t, op, seed, rank, ref, count);
		if (!bad && memcmp(ref, in, count * es) != 0) {
			fprintf(stderr, "rank %d: allreduce changed its input\n", rank);
			bad = 1;
		}
		free(ref);
		free(out);
	}
	free(in);
	return bad;
}

static int do_reduce_scatter(int rank, int n, weft_comm_t *comm, enum weft_datatype t, enum weft_redop op,
			     size_t rc, int inplace, uint64_t seed)
{
	size_t es = weft_datatype_size(t);
	char *in = xalloc((size_t)n * rc * es);
	RCHECK(in, "out of memory");
	fill(t, op, seed, rank, in, (size_t)n * rc);
	char *out = inplace ? in + (size_t)rank * rc * es : xalloc(rc * es);
	RCHECK(out, "out of memory");
	ROK(weft_reduce_scatter(in, out, rc, t, op, comm, NULL));
	int bad = check_reduced(rank, inplace ? "reduce_scatter in place" : "reduce_scatter", t, op, seed, n, out,
				(size_t)rank * rc, rc);
	if (!inplace)
		free(out);
	free(in);
	return bad;
}

static int do_reduce(int rank, int n, weft_comm_t *comm, enum weft_datatype t, enum weft_redop op, size_t count,
		     int root, int inplace, uint64_t seed)
{
	size_t es = weft_datatype_size(t);
	char *in = xalloc(count * es), *out = inplace ? in : xalloc(count * es);
	RCHECK(in && out, "out of memory");
	fill(t, op, seed, rank, in, count);
	char *keep = xalloc(count * es);
	memcpy(keep, out, count * es);
	ROK(weft_reduce(in, out, count, t, op, root, comm, NULL));
	int bad = 0;
	if (rank == root)
		bad = check_reduced(rank, inplace ? "reduce in place" : "reduce", t, op, seed, n, out, 0, count);
	else if (!inplace && memcmp(keep, out, count * es) != 0) {
		fprintf(stderr, "rank %d: reduce wrote recvbuf on a rank that is not the root\n", rank);
		bad = 1;
	}
	free(keep);
	if (!inplace)
		free(out);
	free(in);
	return bad;
}

/* -------------------------------------------------- data movement */

static int expect_bytes(int rank, const char *what, enum weft_datatype t, const void *got, const void *want,
			size_t bytes)
{
	if (memcmp(got, want, bytes) == 0)
		return 0;
	size_t i = 0;
	while (((const unsigned char *)got)[i] == ((const unsigned char *)want)[i])
		i++;
	fprintf(stderr, "rank %d: %s of %s: byte %zu of %zu differs\n", rank, what, weft_datatype_name(t), i, bytes);
	return 1;
}

static int do_allgather(int rank, int n, weft_comm_t *comm, enum weft_datatype t, size_t count, int inplace,
			uint64_t seed)
{
	size_t es = weft_datatype_size(t), blk = count * es;
	char *out = xalloc((size_t)n * blk), *want = xalloc((size_t)n * blk);
	RCHECK(out && want, "out of memory");
	for (int p = 0; p < n; p++)
		fill(t, WEFT_SUM, seed, p, want + (size_t)p * blk, count);
	char *in = inplace ? out + (size_t)rank * blk : xalloc(blk);
	fill(t, WEFT_SUM, seed, rank, in, count);
	ROK(weft_allgather(in, out, count, t, comm, NULL));
	int bad = expect_bytes(rank, inplace ? "allgather in place" : "allgather", t, out, want, (size_t)n * blk);
	if (!inplace)
		free(in);
	free(out);
	free(want);
	return bad;
}

static int do_broadcast(int rank, int n, weft_comm_t *comm, enum weft_datatype t, size_t count, int root,
			int inplace, uint64_t seed)
{
	size_t es = weft_datatype_size(t);
	char *buf = xalloc(count * es), *want = xalloc(count * es), *src = NULL;
	RCHECK(buf && want, "out of memory");
	fill(t, WEFT_SUM, seed, root, want, count);
	if (rank == root) {
		src = inplace ? buf : xalloc(count * es);
		fill(t, WEFT_SUM, seed, root, src, count);
	}
	ROK(weft_broadcast(rank == root ? src : NULL, buf, count, t, root, comm, NULL));
	int bad = expect_bytes(rank, inplace ? "broadcast in place" : "broadcast", t, buf, want, count * es);
	if (src != buf)
		free(src);
	free(buf);
	free(want);
	return bad;
}

static int do_alltoall(int rank, int n, weft_comm_t *comm, enum weft_datatype t, size_t count, int inplace,
		       uint64_t seed)
{
	size_t es = weft_datatype_size(t), blk = count * es;
	char *in = xalloc((size_t)n * blk), *want = xalloc((size_t)n * blk);
	RCHECK(in && want, "out of memory");
	/* Rank r's send buffer is its seeded vector of n * count elements; block p
	 * of it goes to rank p. */
	fill(t, WEFT_SUM, seed, rank, in, (size_t)n * count);
	char *tmp = xalloc((size_t)n * blk);
	for (int p = 0; p < n; p++) {
		fill(t, WEFT_SUM, seed, p, tmp, (size_t)n * count);
		memcpy(want + (size_t)p * blk, tmp + (size_t)rank * blk, blk);
	}
	free(tmp);
	char *out = inplace ? in : xalloc((size_t)n * blk);
	ROK(weft_alltoall(in, out, count, t, comm, NULL));
	int bad = expect_bytes(rank, inplace ? "alltoall in place" : "alltoall", t, out, want, (size_t)n * blk);
	if (!inplace)
		free(out);
	free(in);
	free(want);
	return bad;
}

/* ---------------------------------------------------------- windows */

#define WN 1001 /* int32 elements per block */

static int32_t wval(int r, int i)
{
	return (int32_t)((r * 7919 + i * 104729) % 200001) - 100000;
}

/* weft_window_register: local refusals; a rank whose part cannot be
 * registered fails the registration on every rank; windows whose parts
 * differ in size; allreduce and allgather in them, checked; then rank 1's
 * allgather output at another offset: every rank fails (the signature folds
 * the offsets in). The comm goes with its windows still registered. */
static int windows(int rank, int n, weft_comm_t *comm)
{
	size_t blk = WN * sizeof(int32_t), len = (size_t)(2 + n + rank) * blk;
	int32_t *w = calloc(1, len);
	weft_window_t *win = NULL, *bad = NULL;
	RCHECK(w, "out of memory");
	RCHECK(weft_window_register(comm, NULL, len, WEFT_MEM_HOST, &win) == -EINVAL, "a NULL pointer was taken");
	RCHECK(weft_window_register(comm, w, 0, WEFT_MEM_HOST, &win) == -EINVAL, "length 0 was taken");
	RCHECK(weft_window_register(comm, w, len, WEFT_MEM_HOST, NULL) == -EINVAL, "a NULL out-pointer was taken");
	/* No transport of this comm reaches CUDA memory: rank 1's part fails. */
	int rc = weft_window_register(comm, w, len, rank == 1 ? WEFT_MEM_CUDA : WEFT_MEM_HOST, &bad);
	RCHECK(rc != 0 && bad == NULL, "a registration that failed on rank 1 returned %d here", rc);
	ROK(weft_window_register(comm, w, len, WEFT_MEM_HOST, &win));
	ROK(weft_comm_barrier(comm));
	for (int i = 0; i < WN; i++)
		w[i] = wval(rank, i);
	ROK(weft_allreduce(w, w + WN, WN, WEFT_INT32, WEFT_SUM, comm, NULL));
	ROK(weft_allgather(w, w + 2 * WN, WN, WEFT_INT32, comm, NULL));
	for (int i = 0; i < WN; i++) {
		int32_t sum = 0;
		for (int r = 0; r < n; r++) {
			sum += wval(r, i);
			RCHECK(w[(size_t)(2 + r) * WN + i] == wval(r, i), "allgather: block %d [%d] = %d", r, i,
			       w[(size_t)(2 + r) * WN + i]);
		}
		RCHECK(w[WN + i] == sum, "allreduce: [%d] = %d, want %d", i, w[WN + i], sum);
	}
	/* Rank 1's output one block on: still within every rank's part. */
	rc = weft_allgather(w, w + (rank == 1 ? 3 : 2) * WN, WN, WEFT_INT32, comm, NULL);
	for (int t = 0; rc == 0 && t < 100 && weft_comm_status(comm) == 0; t++)
		usleep(50000);
	RCHECK(rc != 0 || weft_comm_status(comm) != 0, "rank 1's other offset gave no error here");
	free(w);
	return 0;
}

/* ------------------------------------------------------------ jobs */

enum {
	JOB_GRID = 1,   /* type x op grid, data movement at several counts */
	JOB_BIG = 2,    /* 64 MiB */
	JOB_TINY = 4,   /* 4 KiB chunks, two slots: flow control everywhere */
	JOB_RULE = 8,   /* an [algorithm] rule pins the large allreduce for small sizes */
	JOB_GROUPS = 16, /* fused send/recv, refusals, argument errors */
	JOB_V = 32,      /* alltoallv and allgatherv, uneven counts, gaps, in place */
	JOB_WIN = 64     /* windows: refusals, collectives in them, offsets that differ */
};

struct job {
	int flags;
	uint64_t seed;
};

static int grid(int rank, int n, weft_comm_t *comm, uint64_t seed)
{
	static const size_t counts[] = {0, 1, 1001, 65536};
	int ci_n = (int)(sizeof(counts) / sizeof(counts[0]));
	for (int t = 0; t < WEFT_DATATYPE_COUNT; t++) {
		for (int op = 0; op < WEFT_PREMUL_SUM; op++) /* the plain ones; premul has its own test */
			for (int ci = 0; ci < ci_n; ci++)
				for (int ip = 0; ip < 2; ip++) {
					uint64_t s = seed + (uint64_t)(t * 1000 + op * 100 + ci * 10 + ip);
					if (do_allreduce(rank, n, comm, t, op, counts[ci], ip, s))
						return 1;
					/* The other reductions at every count but the largest, which
					 * the allreduce covers. */
					if (ci == ci_n - 1 && (t + op) % 3)
						continue;
					if (do_reduce_scatter(rank, n, comm, t, op, counts[ci], ip, s + 1))
						return 1;
					if (do_reduce(rank, n, comm, t, op, counts[ci], (t + op + ci) % n, ip, s + 2))
						return 1;
				}
	}
	static const enum weft_datatype moved[] = {WEFT_UINT8, WEFT_FLOAT16, WEFT_INT32, WEFT_FLOAT64, WEFT_FP8_E4M3};
	for (size_t k = 0; k < sizeof(moved) / sizeof(moved[0]); k++)
		for (int ci = 0; ci < ci_n; ci++)
			for (int ip = 0; ip < 2; ip++) {
				uint64_t s = seed + 7000 + k * 100 + (uint64_t)ci * 10 + (uint64_t)ip;
				if (do_allgather(rank, n, comm, moved[k], counts[ci], ip, s) ||
				    do_broadcast(rank, n, comm, moved[k], counts[ci], (int)(k + (size_t)ci) % n, ip, s) ||
				    do_alltoall(rank, n, comm, moved[k], counts[ci], ip, s))
					return 1;
			}
	/* The default choice: one-shot for small allreduces, rs+ag for large ones. */
	ROK(do_allreduce(rank, n, comm, WEFT_FLOAT32, WEFT_SUM, 256, 0, seed));
	const char *a = weft_info_last_algorithm(comm);
	RCHECK(a && strcmp(a, "algo-host/allreduce-oneshot") == 0, "1 KiB allreduce ran %s", a ? a : "(none)");
	ROK(do_allreduce(rank, n, comm, WEFT_FLOAT32, WEFT_SUM, 262144, 0, seed));
	a = weft_info_last_algorithm(comm);
	RCHECK(a && strcmp(a, "algo-host/allreduce-rsag") == 0, "1 MiB allreduce ran %s", a ? a : "(none)");
	return 0;
}

static int big(int rank, int n, weft_comm_t *comm, uint64_t seed)
{
	size_t count = (64u << 20) / 4;
	if (do_allreduce(rank, n, comm, WEFT_FLOAT32, WEFT_SUM, count, 0, seed) ||
	    do_allreduce(rank, n, comm, WEFT_INT32, WEFT_MAX, count, 1, seed + 1) ||
	    do_alltoall(rank, n, comm, WEFT_UINT8, (64u << 20) / (size_t)n, 1, seed + 2))
		return 1;
	return 0;
}

/* Many small chunks through two slots per peer: every collective waits for
 * "slot free" and reuses staging after a flush many times per call. */
static int tiny(int rank, int n, weft_comm_t *comm, uint64_t seed)
{
	static const size_t counts[] = {1001, 100003};
	for (int ci = 0; ci < 2; ci++)
		for (int ip = 0; ip < 2; ip++) {
			uint64_t s = seed + (uint64_t)(ci * 10 + ip);
			size_t c = counts[ci];
			if (do_allreduce(rank, n, comm, WEFT_FLOAT32, WEFT_SUM, c, ip, s) ||
			    do_allreduce(rank, n, comm, WEFT_BFLOAT16, WEFT_MAX, c, ip, s) ||
			    do_reduce_scatter(rank, n, comm, WEFT_INT64, WEFT_SUM, c / 3, ip, s) ||
			    do_reduce(rank, n, comm, WEFT_FLOAT64, WEFT_PROD, c, n - 1, ip, s) ||
			    do_allgather(rank, n, comm, WEFT_INT32, c, ip, s) ||
			    do_broadcast(rank, n, comm, WEFT_UINT8, c * 7, 1 % n, ip, s) ||
			    do_alltoall(rank, n, comm, WEFT_FLOAT16, c, ip, s))
				return 1;
		}
	return 0;
}

/* Every rank sends to the right and receives from the left in one group. */
static int ring(int rank, int n, weft_comm_t *comm, size_t count, uint64_t seed)
{
	int right = (rank + 1) % n, left = (rank + n - 1) % n;
	int32_t *s = xalloc(count * 4), *r = xalloc(count * 4), *want = xalloc(count * 4);
	RCHECK(s && r && want, "out of memory");
	fill(WEFT_INT32, WEFT_SUM, seed, rank, s, count);
	fill(WEFT_INT32, WEFT_SUM, seed, left, want, count);
	ROK(weft_group_start());
	ROK(weft_send(s, count, WEFT_INT32, right, comm, NULL));
	ROK(weft_recv(r, count, WEFT_INT32, left, comm, NULL));
	ROK(weft_group_end());
	int bad = expect_bytes(rank, "ring send/recv", WEFT_INT32, r, want, count * 4);
	free(s);
	free(r);
	free(want);
	return bad;
}

static int groups(int rank, int n, weft_comm_t *comm, uint64_t seed)
{
	if (ring(rank, n, comm, 1, seed) || ring(rank, n, comm, 1001, seed + 1) ||
	    ring(rank, n, comm, (3u << 20) / 2, seed + 2))
		return 1;

	/* Both directions, a message to ourselves and a queued allreduce, in one
	 * nested group; nothing runs before the outermost end. */
	int right = (rank + 1) % n, left = (rank + n - 1) % n;
	size_t c = 70001;
	uint8_t *toR = xalloc(c), *toL = xalloc(c * 2), *fromL = xalloc(c), *fromR = xalloc(c * 2);
	uint8_t *self_s = xalloc(333), *self_r = xalloc(333), *want = xalloc(c * 2);
	double *ar = xalloc(100 * sizeof(double));
	RCHECK(toR && toL && fromL && fromR && self_s && self_r && want && ar, "out of memory");
	fill(WEFT_UINT8, WEFT_SUM, seed + 10, rank, toR, c);
	fill(WEFT_UINT8, WEFT_SUM, seed + 11, rank, toL, c * 2);
	fill(WEFT_UINT8, WEFT_SUM, seed + 12, rank, self_s, 333);
	fill(WEFT_FLOAT64, WEFT_SUM, seed + 13, rank, ar, 100);
	memset(fromR, 0, c * 2);
	ROK(weft_group_start());
	ROK(weft_recv(fromL, c, WEFT_UINT8, left, comm, NULL));
	ROK(weft_group_start());
	ROK(weft_send(toR, c, WEFT_UINT8, right, comm, NULL));
	ROK(weft_allreduce(ar, ar, 100, WEFT_FLOAT64, WEFT_SUM, comm, NULL));
	ROK(weft_group_end());
	RCHECK(ar[0] == (double)value(WEFT_FLOAT64, WEFT_SUM, seed + 13, rank, 0), "a queued allreduce ran early");
	if (n > 2) {
		/* With two ranks left == right, and the pair's order would mix the two
		 * streams; the ring above covers two ranks. */
		ROK(weft_send(toL, c * 2, WEFT_UINT8, left, comm, NULL));
		ROK(weft_recv(fromR, c * 2, WEFT_UINT8, right, comm, NULL));
	}
	ROK(weft_send(self_s, 333, WEFT_UINT8, rank, comm, NULL));
	ROK(weft_recv(self_r, 333, WEFT_UINT8, rank, comm, NULL));
	ROK(weft_group_end());
	fill(WEFT_UINT8, WEFT_SUM, seed + 10, left, want, c);
	RCHECK(!expect_bytes(rank, "group recv from left", WEFT_UINT8, fromL, want, c), "see above");
	if (n > 2) {
		fill(WEFT_UINT8, WEFT_SUM, seed + 11, right, want, c * 2);
		RCHECK(!expect_bytes(rank, "group recv from right", WEFT_UINT8, fromR, want, c * 2), "see above");
	}
	RCHECK(!expect_bytes(rank, "group self send", WEFT_UINT8, self_r, self_s, 333), "see above");
	RCHECK(!check_reduced(rank, "grouped allreduce", WEFT_FLOAT64, WEFT_SUM, seed + 13, n, ar, 0, 100), "see above");
	free(toR), free(toL), free(fromL), free(fromR), free(self_s), free(self_r), free(want), free(ar);

	/* Outside a group: rank 0 sends 3 MiB to rank 1, blocking on both sides. */
	size_t big = 3u << 20;
	uint8_t *b = xalloc(big), *w = xalloc(big);
	RCHECK(b && w, "out of memory");
	fill(WEFT_UINT8, WEFT_SUM, seed + 20, 0, w, big);
	if (rank == 0)
		ROK(weft_send(w, big, WEFT_UINT8, 1, comm, NULL));
	else if (rank == 1)
		ROK(weft_recv(b, big, WEFT_UINT8, 0, comm, NULL));
	if (rank == 1)
		RCHECK(!expect_bytes(rank, "send/recv outside a group", WEFT_UINT8, b, w, big), "see above");
	free(b);
	free(w);

	/* Refusals, the same on every rank so no rank falls out of step. */
	uint8_t x[64] = {0}, y[64];
	ROK(weft_allgather(x, y, 64 / n, WEFT_FP8_E4M3, comm, NULL)); /* moving fp8 is fine */
	ROK(weft_allreduce(x, y, 64, WEFT_FP8_E4M3, WEFT_SUM, comm, NULL)); /* reduced too (the grid checks values) */
	struct weft_coll_args da = {.size = sizeof(da), .coll = WEFT_COLL_ALLREDUCE, .sendbuf = x, .recvbuf = y,
				    .count = 16, .dtype = WEFT_FLOAT32, .op = WEFT_SUM, .mem_type = WEFT_MEM_CUDA,
				    .bytes = 64};
	RCHECK(weft__coll_execute(comm, &da) == -ENOTSUP, "an allreduce of CUDA memory found an algorithm");
	RCHECK(weft_allreduce(x, y, 4, (enum weft_datatype)42, WEFT_SUM, comm, NULL) == -EINVAL, "bad type");
	RCHECK(weft_allreduce(x, y, 4, WEFT_FLOAT32, (enum weft_redop)9, comm, NULL) == -EINVAL, "bad op");
	RCHECK(weft_allreduce(NULL, y, 4, WEFT_FLOAT32, WEFT_SUM, comm, NULL) == -EINVAL, "NULL sendbuf");
	RCHECK(weft_broadcast(x, y, 4, WEFT_FLOAT32, n, comm, NULL) == -EINVAL, "root out of range");
	RCHECK(weft_send(x, 4, WEFT_FLOAT32, -1, comm, NULL) == -EINVAL, "peer out of range");
	/* Counts whose bytes lie beyond any address space (near 2^64 without
	 * overflowing it, and 2^58) on a 64-byte buffer: refused, not copied. */
	RCHECK(weft_allreduce(x, y, SIZE_MAX / 4 - 1, WEFT_FLOAT32, WEFT_SUM, comm, NULL) == -EINVAL, "bytes near 2^64");
	RCHECK(weft_allgather(x, y, ((size_t)1 << 58) / 4 / (size_t)n, WEFT_FLOAT32, comm, NULL) == -EINVAL,
	       "an allgather of 2^58 bytes");
	RCHECK(weft_broadcast(x, y, SIZE_MAX - 1, WEFT_UINT8, 0, comm, NULL) == -EINVAL, "a broadcast near 2^64 bytes");
	RCHECK(weft_group_end() == -EINVAL, "group_end without start");
	/* Count 0 does nothing, and after all that the comm still works. */
	ROK(weft_allreduce(NULL, NULL, 0, WEFT_FLOAT32, WEFT_SUM, comm, NULL));
	return do_allreduce(rank, n, comm, WEFT_INT64, WEFT_SUM, 4097, 1, seed + 30);
}

static int rule(int rank, int n, weft_comm_t *comm, uint64_t seed)
{
	ROK(do_allreduce(rank, n, comm, WEFT_FLOAT32, WEFT_SUM, 256, 0, seed));
	const char *a = weft_info_last_algorithm(comm);
	RCHECK(a && strcmp(a, "algo-host/allreduce-rsag") == 0, "the rule did not pick rs+ag for 1 KiB: %s",
	       a ? a : "(none)");
	ROK(do_allreduce(rank, n, comm, WEFT_INT8, WEFT_MIN, 3, 1, seed + 1));
	a = weft_info_last_algorithm(comm);
	RCHECK(a && strcmp(a, "algo-host/allreduce-rsag") == 0, "3 B allreduce ran %s", a ? a : "(none)");
	/* Above the rule's range priority decides again. */
	ROK(do_allreduce(rank, n, comm, WEFT_FLOAT32, WEFT_SUM, 4096, 0, seed + 2));
	a = weft_info_last_algorithm(comm);
	RCHECK(a && strcmp(a, "algo-host/allreduce-oneshot") == 0, "16 KiB allreduce ran %s", a ? a : "(none)");
	if (rank == 0) {
		char *out = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&out, &len);
		RCHECK(f, "open_memstream");
		weft_info_print_algorithm_choice(f, n, WEFT_MEM_HOST);
		fclose(f);
		RCHECK(strstr(out, "algo-host/allreduce-rsag") && strstr(out, "(rule /") && strstr(out, ".conf:2)"),
		       "weft-info's view does not show the rule:\n%s", out);
		free(out);
	}
	return 0;
}

/* ------------------------------------------------------ v-collectives */
#define VPOISON 0xa5a5a5a5u

/* Element i of what rank `from` sends rank `to`. */
static uint32_t vval(uint64_t seed, int from, int to, size_t i)
{
	return (uint32_t)mix64(seed ^ ((uint64_t)from << 48) ^ ((uint64_t)to << 40) ^ i);
}

/* Rank p sends rank q (p * 5 + q * 3 + seed) % 7 * 301 elements, zeros included;
 * every block sits after a gap of 3 poisoned elements. */
static size_t vcount(uint64_t seed, int p, int q)
{
	return (size_t)((p * 5 + q * 3 + (int)(seed % 7)) % 7) * 301;
}

static int vcolls(int rank, int n, weft_comm_t *comm, uint64_t seed)
{
	size_t sc[16], sd[16], rcn[16], rd[16], stot = 0, rtot = 0;
	for (int p = 0; p < n; p++) {
		sd[p] = stot + 3;
		sc[p] = vcount(seed, rank, p);
		stot = sd[p] + sc[p];
		rd[p] = rtot + 3;
		rcn[p] = vcount(seed, p, rank);
		rtot = rd[p] + rcn[p];
	}
	uint32_t *sb = malloc((stot + 3) * 4), *rb = malloc((rtot + 3) * 4);
	RCHECK(sb && rb, "out of memory");
	for (size_t i = 0; i < stot + 3; i++)
		sb[i] = VPOISON;
	for (int p = 0; p < n; p++)
		for (size_t i = 0; i < sc[p]; i++)
			sb[sd[p] + i] = vval(seed, rank, p, i);
	for (size_t i = 0; i < rtot + 3; i++)
		rb[i] = VPOISON;
	ROK(weft_alltoallv(sb, sc, sd, rb, rcn, rd, WEFT_UINT32, comm, NULL));
	for (int p = 0; p < n; p++)
		for (size_t i = 0; i < rcn[p]; i++)
			RCHECK(rb[rd[p] + i] == vval(seed, p, rank, i), "alltoallv: element %zu from rank %d is %#x", i,
			       p, rb[rd[p] + i]);
	for (int p = 0; p <= n; p++)
		for (size_t i = (p ? rd[p - 1] + rcn[p - 1] : 0); i < (p < n ? rd[p] : rtot + 3); i++)
			RCHECK(rb[i] == VPOISON, "alltoallv wrote element %zu, in a gap", i);
	/* Allgatherv: rank p contributes vcount(seed, p, p) elements, out of place
	 * and then in place (the own block already at its displacement). */
	rtot = 0;
	for (int p = 0; p < n; p++) {
		rcn[p] = vcount(seed, p, p);
		rd[p] = rtot + 3;
		rtot = rd[p] + rcn[p];
	}
	free(rb);
	rb = malloc((rtot + 3) * 4);
	RCHECK(rb, "out of memory");
	for (int inplace = 0; inplace < 2; inplace++) {
		for (size_t i = 0; i < rtot + 3; i++)
			rb[i] = VPOISON;
		const uint32_t *src = sb + sd[rank];
		if (inplace) {
			for (size_t i = 0; i < rcn[rank]; i++)
				rb[rd[rank] + i] = sb[sd[rank] + i];
			src = rb + rd[rank];
		}
		ROK(weft_allgatherv(src, rcn[rank], rb, rcn, rd, WEFT_UINT32, comm, NULL));
		for (int p = 0; p < n; p++)
			for (size_t i = 0; i < rcn[p]; i++)
				RCHECK(rb[rd[p] + i] == vval(seed, p, p, i), "allgatherv%s: element %zu of rank %d is %#x",
				       inplace ? " in place" : "", i, p, rb[rd[p] + i]);
		RCHECK(rb[0] == VPOISON && rb[rd[0] - 1] == VPOISON, "allgatherv wrote the leading gap");
	}
	/* Refusals, on every rank alike, before anything is queued. */
	size_t bad = rcn[rank] + 1;
	RCHECK(weft_allgatherv(sb, bad, rb, rcn, rd, WEFT_UINT32, comm, NULL) == -EINVAL,
	       "allgatherv accepted an own count that disagrees with recvcounts");
	RCHECK(weft_alltoallv(sb, NULL, sd, rb, rcn, rd, WEFT_UINT32, comm, NULL) == -EINVAL, "NULL sendcounts");
	RCHECK(weft_allgatherv(sb, rcn[rank], rb, rcn, NULL, WEFT_UINT32, comm, NULL) == -EINVAL, "NULL displs");
	size_t huge[16];
	for (int p = 0; p < n; p++)
		huge[p] = SIZE_MAX / 2;
	RCHECK(weft_allgatherv(sb, rcn[rank], rb, rcn, huge, WEFT_UINT32, comm, NULL) == -EINVAL,
	       "a displacement past the address space accepted");
	char msg[200];
	weft_last_error(msg, sizeof(msg));
	RCHECK(strstr(msg, "too large"), "the refusal said '%s'", msg);
	free(sb);
	free(rb);
	/* The comm still works after the refusals. */
	return weft_comm_barrier(comm);
}

static int rank_main(int rank, int n, void *arg)
{
	const struct job *j = arg;
	if (j->flags & JOB_TINY) {
		setenv("WEFT_ALGO_HOST_CHUNK", "4K", 1);
		setenv("WEFT_ALGO_HOST_SCRATCH", "8K", 1);
	}
	weft_comm_t *comm = NULL;
	ROK(weft_comm_create(&g_id, n, rank, &comm));
	int bad = 0;
	if (!bad && (j->flags & JOB_GRID))
		bad = grid(rank, n, comm, j->seed);
	if (!bad && (j->flags & JOB_GROUPS))
		bad = groups(rank, n, comm, j->seed + 100000);
	if (!bad && (j->flags & JOB_BIG))
		bad = big(rank, n, comm, j->seed + 200000);
	if (!bad && (j->flags & JOB_TINY))
		bad = tiny(rank, n, comm, j->seed + 300000);
	if (!bad && (j->flags & JOB_V))
		bad = vcolls(rank, n, comm, j->seed + 500000);
	if (!bad && (j->flags & JOB_RULE))
		bad = rule(rank, n, comm, j->seed + 400000);
	if (!bad && (j->flags & JOB_WIN))
		bad = windows(rank, n, comm);
	/* A failing rank leaves without destroying its comm: the peers then see a
	 * dead peer within WEFT_CORE_PEER_TIMEOUT instead of waiting for it. */
	if (bad)
		return bad;
	/* The windows job leaves its comm failed on purpose. */
	int rc = weft_comm_destroy(comm);
	RCHECK(rc == 0 || (j->flags & JOB_WIN), "weft_comm_destroy returned %d (%s)", rc, weft_strerror(rc));
	return 0;
}

static void run_job(int n, int flags)
{
	struct job j = {.flags = flags, .seed = (uint64_t)n * 7919u + (uint64_t)flags};
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	int bad = wt_fork_ranks(n, rank_main, &j, JOB_TIMEOUT);
	ck_assert_msg(bad == 0, "%d of %d ranks failed (flags 0x%x)", bad, n, flags);
}

START_TEST(np2_grid_groups)
{
	run_job(2, JOB_GRID | JOB_GROUPS | JOB_V);
}
END_TEST

START_TEST(np3_windows)
{
	run_job(3, JOB_WIN);
}
END_TEST

START_TEST(np3_grid_big)
{
	run_job(3, JOB_GRID | JOB_BIG);
}
END_TEST

START_TEST(np4_grid_groups)
{
	run_job(4, JOB_GRID | JOB_GROUPS | JOB_V);
}
END_TEST

START_TEST(np3_tiny_slots_groups)
{
	run_job(3, JOB_TINY | JOB_GROUPS | JOB_V);
}
END_TEST

START_TEST(np2_rule)
{
	char *dir = wt_mkdtemp("coll-rule");
	ck_assert_ptr_nonnull(dir);
	char *path = wt_write_file(dir, "weft.conf",
				   "[algorithm]\n"
				   "use algo-host/allreduce-rsag when coll=allreduce and size=..8K\n");
	ck_assert_ptr_nonnull(path);
	setenv("WEFT_CONFIG", path, 1);
	run_job(2, JOB_RULE);
	wt_rmdir(dir);
	free(path);
	free(dir);
}
END_TEST

int main(void)
{
	setenv("WEFT_CORE_PEER_TIMEOUT", "5", 0);
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "30", 0);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	Suite *s = suite_create("coll");
	TCase *tc = tcase_create("host");
	tcase_set_timeout(tc, JOB_TIMEOUT + 30);
	tcase_add_test(tc, np2_rule);
	tcase_add_test(tc, np3_windows);
	tcase_add_test(tc, np2_grid_groups);
	tcase_add_test(tc, np3_tiny_slots_groups);
	tcase_add_test(tc, np3_grid_big);
	tcase_add_test(tc, np4_grid_groups);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
