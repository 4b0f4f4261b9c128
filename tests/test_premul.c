/* SPDX-License-Identifier: Apache-2.0 */
/* Pre-multiplied sums on host buffers (weft_allreduce_premul,
 * weft_reduce_scatter_premul, weft_reduce_premul) through algo-host: forked
 * ranks, every type (fp8 too), in place and out of place, bit for bit
 * against a reference computed here that rounds each product to the element
 * type (as NCCL does) and then sums in rank order (the pack's order). Scalars
 * 0.25 (exact), 1/3 (rounded), and one per rank; the scalar of a grouped call
 * is the value at the call; and the refusals: a plain call given
 * WEFT_PREMUL_SUM, a NULL scalar, a device scalar for host buffers. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "testlib.h"

#define JOB_TIMEOUT 120
#define COUNT 1037 /* odd: the pack's chunking leaves a tail */

static struct weft_unique_id g_id;

/* ------------------------------------------------ element encodings
 * Written here, not taken from the pack: half through the compiler's
 * _Float16, bfloat16 by rounding the float's bits to nearest even. */

static uint16_t to_bf16(double d)
{
	float f = (float)d; /* the values used are exact in float */
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static double from_bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint16_t to_half(double d)
{
	_Float16 h = (_Float16)(float)d;
	uint16_t u;
	memcpy(&u, &h, sizeof(u));
	return u;
}

static double from_half(uint16_t u)
{
	_Float16 h;
	memcpy(&h, &u, sizeof(h));
	return (double)h;
}

/* fp8 by its definition: a code's value, and the nearest code to a value
 * (ties to the even code, saturating at the largest finite one, as CUDA's
 * __NV_SATFINITE conversion), found by search. No NaN occurs here. */
static double fp8_value(int e5m2, unsigned v)
{
	double sign = v & 0x80 ? -1 : 1;
	if (e5m2) {
		int e = (v >> 2) & 31, m = v & 3;
		return sign * (e ? ldexp(4 + m, e - 17) : ldexp(m, -16));
	}
	int e = (v >> 3) & 15, m = v & 7;
	return sign * (e ? ldexp(8 + m, e - 10) : ldexp(m, -9));
}

static uint8_t to_fp8(int e5m2, double d)
{
	unsigned top = e5m2 ? 0x7b : 0x7e, c = 0;
	uint8_t sign = d < 0 ? 0x80 : 0;
	double a = fabs(d);
	if (a >= fp8_value(e5m2, top))
		return (uint8_t)(sign | top);
	while (fp8_value(e5m2, c + 1) <= a)
		c++;
	double lo = a - fp8_value(e5m2, c), hi = fp8_value(e5m2, c + 1) - a;
	return (uint8_t)(sign | (lo < hi ? c : hi < lo ? c + 1 : c % 2 ? c + 1 : c));
}

static const enum weft_datatype types[] = {WEFT_INT8,     WEFT_UINT8,    WEFT_INT32,   WEFT_UINT32,
					   WEFT_INT64,    WEFT_UINT64,   WEFT_FLOAT16, WEFT_BFLOAT16,
					   WEFT_FLOAT32,  WEFT_FLOAT64,  WEFT_FP8_E4M3, WEFT_FP8_E5M2};
#define NTYPES (int)(sizeof(types) / sizeof(types[0]))

static int is_float(enum weft_datatype t)
{
	return t == WEFT_FLOAT16 || t == WEFT_BFLOAT16 || t == WEFT_FLOAT32 || t == WEFT_FLOAT64 ||
	       t == WEFT_FP8_E4M3 || t == WEFT_FP8_E5M2;
}

/* Rounds a double to the element type and back: what storing it there keeps. */
static double round_to(enum weft_datatype t, double d)
{
	switch (t) {
	case WEFT_FLOAT16: return from_half(to_half(d));
	case WEFT_BFLOAT16: return from_bf16(to_bf16(d));
	case WEFT_FLOAT32: return (double)(float)d;
	case WEFT_FP8_E4M3: return fp8_value(0, to_fp8(0, d));
	case WEFT_FP8_E5M2: return fp8_value(1, to_fp8(1, d));
	default: return d;
	}
}

static void put_float(enum weft_datatype t, void *buf, size_t i, double d)
{
	switch (t) {
	case WEFT_FLOAT16: ((uint16_t *)buf)[i] = to_half(d); break;
	case WEFT_BFLOAT16: ((uint16_t *)buf)[i] = to_bf16(d); break;
	case WEFT_FLOAT32: ((float *)buf)[i] = (float)d; break;
	case WEFT_FP8_E4M3: ((uint8_t *)buf)[i] = to_fp8(0, d); break;
	case WEFT_FP8_E5M2: ((uint8_t *)buf)[i] = to_fp8(1, d); break;
	default: ((double *)buf)[i] = d; break;
	}
}

/* Integers: the value's low bits in the type's width (two's complement). */
static void put_int(enum weft_datatype t, void *buf, size_t i, uint64_t v)
{
	switch (weft_datatype_size(t)) {
	case 1: ((uint8_t *)buf)[i] = (uint8_t)v; break;
	case 4: ((uint32_t *)buf)[i] = (uint32_t)v; break;
	default: ((uint64_t *)buf)[i] = v; break;
	}
}

/* The scalar kinds: 0.25 and 1/3 on every rank, or 0.25 * (rank + 1). For
 * integers: 3, -2 (wrapping in unsigned types) and rank + 2. */
enum { S_QUARTER, S_THIRD, S_PER_RANK, S_KINDS };

static double scalar_of(enum weft_datatype t, int kind, int rank)
{
	if (is_float(t))
		return round_to(t, kind == S_QUARTER ? 0.25 : kind == S_THIRD ? 1.0 / 3.0 : 0.25 * (rank + 1));
	return kind == S_QUARTER ? 3 : kind == S_THIRD ? -2 : rank + 2;
}

/* Rank r's element i: small integers, so that float products and sums of
 * them stay exact in double and only the roundings to the type matter. */
static int64_t input(int rank, size_t i, int kind)
{
	return (int64_t)((i * 7 + (size_t)rank * 13 + (size_t)kind * 5) % 211) - 105;
}

static void fill(enum weft_datatype t, void *buf, size_t n, size_t base, int rank, int kind)
{
	for (size_t i = 0; i < n; i++) {
		int64_t v = input(rank, base + i, kind);
		if (is_float(t))
			put_float(t, buf, i, (double)v);
		else
			put_int(t, buf, i, (uint64_t)v);
	}
}

/* The expected element: each rank's input as stored (fp8 rounds even these
 * integers) times its scalar, rounded to the type, summed in rank order,
 * each partial sum rounded; integers wrap in the type's width. */
static void expect(enum weft_datatype t, void *buf, size_t i, size_t global, int nranks, int kind)
{
	if (is_float(t)) {
		double acc = 0;
		for (int r = 0; r < nranks; r++) {
			double p = round_to(t, round_to(t, (double)input(r, global, kind)) * scalar_of(t, kind, r));
			acc = r == 0 ? p : round_to(t, acc + p);
		}
		put_float(t, buf, i, acc);
	} else {
		uint64_t acc = 0;
		for (int r = 0; r < nranks; r++)
			acc += (uint64_t)input(r, global, kind) * (uint64_t)(int64_t)scalar_of(t, kind, r);
		put_int(t, buf, i, acc);
	}
}

static void scalar_bytes(enum weft_datatype t, int kind, int rank, unsigned char out[8])
{
	memset(out, 0, 8);
	double s = scalar_of(t, kind, rank);
	if (is_float(t))
		put_float(t, out, 0, s);
	else
		put_int(t, out, 0, (uint64_t)(int64_t)s);
}

/* One call of each collective, in place (ip) or not, checked bit for bit. */
static int check_one(int rank, int n, weft_comm_t *comm, enum weft_datatype t, int kind, int ip)
{
	size_t es = weft_datatype_size(t);
	unsigned char s[8];
	scalar_bytes(t, kind, rank, s);
	size_t total = (size_t)COUNT * (size_t)n;
	unsigned char *in = malloc(total * es), *out = malloc(total * es), *want = malloc(total * es);
	RCHECK(in && out && want, "out of memory");
	const char *tn = weft_datatype_name(t);

	/* allreduce */
	fill(t, in, COUNT, 0, rank, kind);
	memset(out, 0xa5, COUNT * es);
	if (ip)
		memcpy(out, in, COUNT * es);
	ROK(weft_allreduce_premul(ip ? out : in, out, COUNT, t, s, WEFT_MEM_HOST, comm, NULL));
	for (size_t i = 0; i < COUNT; i++)
		expect(t, want, i, i, n, kind);
	RCHECK(memcmp(out, want, COUNT * es) == 0, "allreduce %s scalar kind %d%s differs", tn, kind,
	       ip ? " in place" : "");

	/* reduce-scatter: rank r gets block r */
	fill(t, in, total, 0, rank, kind);
	memset(out, 0xa5, total * es);
	unsigned char *rout = ip ? in + (size_t)rank * COUNT * es : out;
	ROK(weft_reduce_scatter_premul(in, rout, COUNT, t, s, WEFT_MEM_HOST, comm, NULL));
	for (size_t i = 0; i < COUNT; i++)
		expect(t, want, i, (size_t)rank * COUNT + i, n, kind);
	RCHECK(memcmp(rout, want, COUNT * es) == 0, "reduce-scatter %s scalar kind %d%s differs", tn, kind,
	       ip ? " in place" : "");

	/* reduce to the last rank; the others' output is not touched */
	int root = n - 1;
	fill(t, in, COUNT, 0, rank, kind);
	memset(out, 0xa5, COUNT * es);
	if (ip && rank == root)
		memcpy(out, in, COUNT * es);
	ROK(weft_reduce_premul(ip && rank == root ? out : in, out, COUNT, t, s, WEFT_MEM_HOST, root, comm, NULL));
	if (rank == root) {
		for (size_t i = 0; i < COUNT; i++)
			expect(t, want, i, i, n, kind);
		RCHECK(memcmp(out, want, COUNT * es) == 0, "reduce %s scalar kind %d%s differs", tn, kind,
		       ip ? " in place" : "");
	} else {
		for (size_t b = 0; b < COUNT * es; b++)
			RCHECK(out[b] == 0xa5, "reduce wrote byte %zu of a non-root's output", b);
	}
	free(in);
	free(out);
	free(want);
	return 0;
}

static int grid_rank(int rank, int n, void *arg)
{
	weft_comm_t *comm = NULL;
	ROK(weft_comm_create(&g_id, n, rank, &comm));
	for (int ti = 0; ti < NTYPES; ti++)
		for (int kind = 0; kind < S_KINDS; kind++)
			for (int ip = 0; ip < 2; ip++)
				if (check_one(rank, n, comm, types[ti], kind, ip))
					return 1;
	ROK(weft_comm_destroy(comm));
	return 0;
}

START_TEST(grid_np2)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, grid_rank, NULL, JOB_TIMEOUT), 0);
}
END_TEST

START_TEST(grid_np3)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(3, grid_rank, NULL, JOB_TIMEOUT), 0);
}
END_TEST

/* A grouped call keeps the scalar it was given, whatever the caller's
 * variable holds by the group's end; refusals leave the output alone. */
static int group_and_refusals_rank(int rank, int n, void *arg)
{
	weft_comm_t *comm = NULL;
	ROK(weft_comm_create(&g_id, n, rank, &comm));
	float in[4] = {1, 2, 3, 4}, out[4] = {0}, s = 0.5f;
	ROK(weft_group_start());
	ROK(weft_allreduce_premul(in, out, 4, WEFT_FLOAT32, &s, WEFT_MEM_HOST, comm, NULL));
	s = 100.0f;
	ROK(weft_group_end());
	for (int i = 0; i < 4; i++)
		RCHECK(out[i] == 0.5f * (float)(i + 1) * (float)n, "grouped element %d is %g", i, (double)out[i]);

	memset(out, 0, sizeof(out));
	RCHECK(weft_allreduce(in, out, 4, WEFT_FLOAT32, WEFT_PREMUL_SUM, comm, NULL) == -EINVAL,
	       "a plain allreduce took WEFT_PREMUL_SUM");
	RCHECK(weft_allreduce_premul(in, out, 4, WEFT_FLOAT32, NULL, WEFT_MEM_HOST, comm, NULL) == -EINVAL,
	       "a NULL scalar was taken");
	RCHECK(weft_allreduce_premul(in, out, 4, WEFT_FLOAT32, &s, WEFT_MEM_CUDA, comm, NULL) == -EINVAL,
	       "a device scalar was taken for host buffers");
	for (int i = 0; i < 4; i++)
		RCHECK(out[i] == 0, "a refused call wrote its output");
	/* fp8 is served: 1.0 (0x38) times 0.5 (0x30) on each of the two ranks. */
	unsigned char f8[4] = {0x38, 0x38, 0x38, 0x38}, f8o[4] = {0}, f8s = 0x30;
	ROK(weft_allreduce_premul(f8, f8o, 4, WEFT_FP8_E4M3, &f8s, WEFT_MEM_HOST, comm, NULL));
	for (int i = 0; i < 4; i++)
		RCHECK(f8o[i] == 0x38, "fp8 element %d is 0x%02x, expected 0x38 (1.0)", i, f8o[i]);
	ROK(weft_comm_destroy(comm));
	return 0;
}

START_TEST(group_and_refusals)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, group_and_refusals_rank, NULL, JOB_TIMEOUT), 0);
}
END_TEST

int main(void)
{
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	Suite *s = suite_create("premul");
	TCase *tc = tcase_create("host");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, grid_np2);
	tcase_add_test(tc, grid_np3);
	tcase_add_test(tc, group_and_refusals);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
