/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of include/weft/kit.h: every type and operation of the
 * reductions against a scalar reference, the narrow float conversions (fp8
 * against a reference that searches for the nearest code), the bounded
 * little-endian reader and writer, parameter binding through a fake core,
 * and the names of error codes. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/kit.h>

#include "testlib.h"

static float bits_f(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint32_t f_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

/* A small deterministic generator, so a failure repeats. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
	uint64_t x = rng_state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* ------------------------------------------------------ fp8 references */

/* The value of an fp8 code, by its definition (NaN as NAN). */
static double fp8_value(int e5m2, uint8_t v)
{
	int sign = v & 0x80 ? -1 : 1;
	if (e5m2) {
		int e = (v >> 2) & 31, m = v & 3;
		if (e == 31)
			return m ? NAN : sign * INFINITY;
		return sign * (e ? ldexp(4 + m, e - 17) : ldexp(m, -16));
	}
	int e = (v >> 3) & 15, m = v & 7;
	if (e == 15 && m == 7)
		return NAN;
	return sign * (e ? ldexp(8 + m, e - 10) : ldexp(m, -9));
}

/* The nearest code to f by search over every finite code, ties to the even
 * code, magnitudes at or past the largest finite saturating to it, NaN to
 * 0x7f: what __NV_SATFINITE specifies. */
static uint8_t fp8_nearest(int e5m2, float f)
{
	if (isnan(f))
		return 0x7f;
	uint8_t sign = signbit(f) ? 0x80 : 0;
	double a = fabs((double)f);
	int top = e5m2 ? 0x7b : 0x7e;
	if (a >= fp8_value(e5m2, (uint8_t)top))
		return (uint8_t)(sign | top);
	int c = 0;
	while (c + 1 <= top && fp8_value(e5m2, (uint8_t)(c + 1)) <= a)
		c++;
	double lo = a - fp8_value(e5m2, (uint8_t)c), hi = fp8_value(e5m2, (uint8_t)(c + 1)) - a;
	int r = lo < hi ? c : hi < lo ? c + 1 : (c % 2 == 0 ? c : c + 1);
	return (uint8_t)(sign | r);
}

static uint8_t kit_to_fp8(int e5m2, float f)
{
	return e5m2 ? weft_kit_float_to_fp8_e5m2(f) : weft_kit_float_to_fp8_e4m3(f);
}

static float kit_from_fp8(int e5m2, uint8_t v)
{
	return e5m2 ? weft_kit_fp8_e5m2_to_float(v) : weft_kit_fp8_e4m3_to_float(v);
}

static void check_fp8(int e5m2, float f)
{
	uint8_t got = kit_to_fp8(e5m2, f), want = fp8_nearest(e5m2, f);
	ck_assert_msg(got == want, "%s of %a (0x%08x): 0x%02x, expected 0x%02x", e5m2 ? "e5m2" : "e4m3", (double)f,
		      f_bits(f), got, want);
}

START_TEST(fp8_decode)
{
	for (int k = 0; k < 2; k++)
		for (int v = 0; v < 256; v++) {
			double want = fp8_value(k, (uint8_t)v);
			float got = kit_from_fp8(k, (uint8_t)v);
			if (isnan(want))
				ck_assert_msg(isnan(got), "code 0x%02x is %g, not NaN", v, (double)got);
			else
				ck_assert_msg((double)got == want && !signbit(got) == !signbit(want),
					      "%s 0x%02x: %a, expected %a", k ? "e5m2" : "e4m3", v, (double)got, want);
		}
	ck_assert_float_eq(weft_kit_fp8_e4m3_to_float(0x7e), 448.0f);
	ck_assert_float_eq(weft_kit_fp8_e4m3_to_float(0x01), ldexpf(1, -9));
	ck_assert_float_eq(weft_kit_fp8_e5m2_to_float(0x7b), 57344.0f);
	ck_assert(isinf(weft_kit_fp8_e5m2_to_float(0xfc)) && weft_kit_fp8_e5m2_to_float(0xfc) < 0);
	ck_assert(isnan(weft_kit_fp8_e4m3_to_float(0xff)));
	ck_assert(isnan(weft_kit_fp8_e5m2_to_float(0x7d)));
}
END_TEST

START_TEST(fp8_round_trip)
{
	/* Every finite code survives fp8 -> float -> fp8; e4m3's NaNs come back
	 * as 0x7f, e5m2's as 0x7f, and its infinities saturate. */
	for (int k = 0; k < 2; k++)
		for (int v = 0; v < 256; v++) {
			uint8_t back = kit_to_fp8(k, kit_from_fp8(k, (uint8_t)v));
			double val = fp8_value(k, (uint8_t)v);
			uint8_t want = isnan(val) ? 0x7f : isinf(val) ? (uint8_t)((v & 0x80) | 0x7b) : (uint8_t)v;
			ck_assert_msg(back == want, "%s 0x%02x came back as 0x%02x", k ? "e5m2" : "e4m3", v, back);
		}
}
END_TEST

START_TEST(fp8_edges)
{
	/* NaN of either sign, quiet or signalling, is 0x7f. */
	static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xffffffffu};
	for (size_t i = 0; i < sizeof(nans) / sizeof(nans[0]); i++) {
		ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(bits_f(nans[i])), 0x7f);
		ck_assert_uint_eq(weft_kit_float_to_fp8_e5m2(bits_f(nans[i])), 0x7f);
	}
	/* Saturation, infinity included. */
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(INFINITY), 0x7e);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(-INFINITY), 0xfe);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(448.0f), 0x7e);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(464.0f), 0x7e);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(-1e30f), 0xfe);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(432.0f), 0x7e); /* tie of 416 and 448: even */
	ck_assert_uint_eq(weft_kit_float_to_fp8_e5m2(INFINITY), 0x7b);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e5m2(-INFINITY), 0xfb);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e5m2(57344.0f), 0x7b);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e5m2(61440.0f), 0x7b);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e5m2(1e9f), 0x7b);
	/* Ties to even among normals: e4m3's ulp at 1 is 1/8, e5m2's 1/4. */
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(1.0f + 1.0f / 16), 0x38);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(1.0f + 3.0f / 16), 0x3a);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(1.0f + 1.0f / 16 + 1.0f / 1024), 0x39);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e5m2(1.0f + 1.0f / 8), 0x3c);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e5m2(1.0f + 3.0f / 8), 0x3e);
	/* Subnormals and their ties: 2^-10 is half e4m3's unit (to 0), 3 * 2^-10
	 * a tie of 1 and 2 units (to 2); 2^-6 is the smallest normal. */
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(ldexpf(1, -10)), 0x00);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(ldexpf(1, -10) * 1.0001f), 0x01);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(3 * ldexpf(1, -10)), 0x02);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(ldexpf(1, -9)), 0x01);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(ldexpf(1, -6)), 0x08);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(ldexpf(15, -10)), 0x08); /* 7.5 units: tie, to 8 */
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(-ldexpf(5, -10)), 0x82); /* 2.5 units: to 2 */
	ck_assert_uint_eq(weft_kit_float_to_fp8_e5m2(ldexpf(1, -17)), 0x00);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e5m2(3 * ldexpf(1, -17)), 0x02);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e5m2(ldexpf(1, -16)), 0x01);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e5m2(ldexpf(1, -14)), 0x04);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(-0.0f), 0x80);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e5m2(-0.0f), 0x80);
	ck_assert_uint_eq(weft_kit_float_to_fp8_e4m3(ldexpf(1, -40)), 0x00);
}
END_TEST

START_TEST(fp8_against_search)
{
	/* Every code, the midpoints between neighbours, a float ulp either side
	 * of each of those, then random floats of every magnitude. */
	for (int k = 0; k < 2; k++) {
		int top = k ? 0x7b : 0x7e;
		for (int c = 0; c <= top + 1; c++) {
			double lo = fp8_value(k, (uint8_t)c);
			double hi = c < top ? fp8_value(k, (uint8_t)(c + 1)) : lo * 1.0625;
			float pts[] = {(float)lo, (float)((lo + hi) / 2)};
			for (int p = 0; p < 2; p++) {
				if (isnan(pts[p]) || isinf(pts[p]))
					continue;
				for (int sgn = 0; sgn < 2; sgn++) {
					float f = sgn ? -pts[p] : pts[p];
					check_fp8(k, f);
					check_fp8(k, nextafterf(f, INFINITY));
					check_fp8(k, nextafterf(f, -INFINITY));
				}
			}
		}
		for (int i = 0; i < 200000; i++)
			check_fp8(k, bits_f((uint32_t)rng()));
		for (int i = 0; i < 200000; i++) /* magnitudes fp8 holds */
			check_fp8(k, ldexpf((float)(rng() % 100000) / 1000.0f, (int)(rng() % 40) - 24));
	}
}
END_TEST

/* ------------------------------------------------ half and bfloat16 */

START_TEST(half_conversions)
{
	/* Every half that is not a NaN survives half -> float -> half. */
	for (uint32_t h = 0; h < 0x10000; h++) {
		if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
			continue;
		uint16_t back = weft_kit_float_to_half(weft_kit_half_to_float((uint16_t)h));
		ck_assert_msg(back == h, "half 0x%04x came back as 0x%04x", h, back);
	}
	ck_assert_float_eq(weft_kit_half_to_float(0x3c00), 1.0f);
	ck_assert_float_eq(weft_kit_half_to_float(0xc000), -2.0f);
	ck_assert_float_eq(weft_kit_half_to_float(0x7bff), 65504.0f);
	ck_assert_float_eq(weft_kit_half_to_float(0x0001), ldexpf(1.0f, -24));
	/* Ties go to the even neighbour, others to the nearest. */
	ck_assert_uint_eq(weft_kit_float_to_half(1.0f + ldexpf(1.0f, -11)), 0x3c00);
	ck_assert_uint_eq(weft_kit_float_to_half(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02);
	ck_assert_uint_eq(weft_kit_float_to_half(1.0f + ldexpf(1.0f, -11) + ldexpf(1.0f, -20)), 0x3c01);
	ck_assert_uint_eq(weft_kit_float_to_half(65504.0f), 0x7bff);
	ck_assert_uint_eq(weft_kit_float_to_half(65519.0f), 0x7bff);
	ck_assert_uint_eq(weft_kit_float_to_half(65520.0f), 0x7c00);
	ck_assert_uint_eq(weft_kit_float_to_half(-1e9f), 0xfc00);
	ck_assert_uint_eq(weft_kit_float_to_half(bits_f(0x7f800000u)), 0x7c00);
	uint16_t nan = weft_kit_float_to_half(bits_f(0x7fc00000u));
	ck_assert_msg((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff), "NaN became 0x%04x", nan);
	/* Subnormals: 2^-25 is a tie between 0 and 2^-24 (goes to 0), 3 * 2^-25
	 * a tie between 2^-24 and 2^-23 (goes to 2^-23). */
	ck_assert_uint_eq(weft_kit_float_to_half(ldexpf(1.0f, -25)), 0x0000);
	ck_assert_uint_eq(weft_kit_float_to_half(3 * ldexpf(1.0f, -25)), 0x0002);
	ck_assert_uint_eq(weft_kit_float_to_half(ldexpf(1.0f, -14)), 0x0400);
	ck_assert_uint_eq(weft_kit_float_to_half(-0.0f), 0x8000);
}
END_TEST

START_TEST(bf16_conversions)
{
	for (uint32_t h = 0; h < 0x10000; h++) {
		if ((h & 0x7f80) == 0x7f80 && (h & 0x7f))
			continue;
		uint16_t back = weft_kit_float_to_bf16(weft_kit_bf16_to_float((uint16_t)h));
		ck_assert_msg(back == h, "bfloat16 0x%04x came back as 0x%04x", h, back);
	}
	ck_assert_uint_eq(weft_kit_float_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3f80);
	ck_assert_uint_eq(weft_kit_float_to_bf16(1.0f + 3 * ldexpf(1.0f, -8)), 0x3f82);
	ck_assert_uint_eq(weft_kit_float_to_bf16(bits_f(0x7f7fffffu)), 0x7f80);
	uint16_t nan = weft_kit_float_to_bf16(bits_f(0x7f800001u));
	ck_assert_msg((nan & 0x7f80) == 0x7f80 && (nan & 0x7f), "NaN became 0x%04x", nan);
}
END_TEST

/* --------------------------------------------------------- reductions */

/* Element i of a buffer of t, widened to double (narrow floats by their
 * conversion, tested above), and the reference combination of two. */
static double get_elem(enum weft_datatype t, const void *p, size_t i)
{
	switch (t) {
	case WEFT_INT8: return ((const int8_t *)p)[i];
	case WEFT_UINT8: return ((const uint8_t *)p)[i];
	case WEFT_INT32: return ((const int32_t *)p)[i];
	case WEFT_UINT32: return ((const uint32_t *)p)[i];
	case WEFT_INT64: return (double)((const int64_t *)p)[i];
	case WEFT_UINT64: return (double)((const uint64_t *)p)[i];
	case WEFT_FLOAT16: return weft_kit_half_to_float(((const uint16_t *)p)[i]);
	case WEFT_BFLOAT16: return weft_kit_bf16_to_float(((const uint16_t *)p)[i]);
	case WEFT_FLOAT32: return ((const float *)p)[i];
	case WEFT_FLOAT64: return ((const double *)p)[i];
	case WEFT_FP8_E4M3: return weft_kit_fp8_e4m3_to_float(((const uint8_t *)p)[i]);
	default: return weft_kit_fp8_e5m2_to_float(((const uint8_t *)p)[i]);
	}
}

/* The reference result of element i, written into out (one element). The
 * integers are computed in their own unsigned width, so they wrap. */
#define REF_INT(T, U)                                                              \
	do {                                                                       \
		T x = ((const T *)a)[i], y = ((const T *)b)[i], r;                 \
		switch (op) {                                                      \
		case WEFT_PROD: r = (T)((U)x * (U)y); break;                       \
		case WEFT_MIN: r = y < x ? y : x; break;                           \
		case WEFT_MAX: r = y > x ? y : x; break;                           \
		default: r = (T)((U)x + (U)y); break;                              \
		}                                                                  \
		memcpy(out, &r, sizeof(r));                                        \
	} while (0)

static float ref_opf(enum weft_redop op, float x, float y)
{
	switch (op) {
	case WEFT_PROD: return x * y;
	case WEFT_MIN: return y < x ? y : x;
	case WEFT_MAX: return y > x ? y : x;
	default: return x + y;
	}
}

static void ref_elem(enum weft_datatype t, enum weft_redop op, const void *a, const void *b, size_t i, void *out)
{
	switch (t) {
	case WEFT_INT8: REF_INT(int8_t, uint8_t); break;
	case WEFT_UINT8: REF_INT(uint8_t, uint8_t); break;
	case WEFT_INT32: REF_INT(int32_t, uint32_t); break;
	case WEFT_UINT32: REF_INT(uint32_t, uint32_t); break;
	case WEFT_INT64: REF_INT(int64_t, uint64_t); break;
	case WEFT_UINT64: REF_INT(uint64_t, uint64_t); break;
	case WEFT_FLOAT32: REF_INT(float, float); break;
	case WEFT_FLOAT64: REF_INT(double, double); break;
	case WEFT_FLOAT16: {
		uint16_t r = weft_kit_float_to_half(ref_opf(op, (float)get_elem(t, a, i), (float)get_elem(t, b, i)));
		memcpy(out, &r, 2);
		break;
	}
	case WEFT_BFLOAT16: {
		uint16_t r = weft_kit_float_to_bf16(ref_opf(op, (float)get_elem(t, a, i), (float)get_elem(t, b, i)));
		memcpy(out, &r, 2);
		break;
	}
	default: {
		uint8_t r = fp8_nearest(t == WEFT_FP8_E5M2, ref_opf(op, (float)get_elem(t, a, i), (float)get_elem(t, b, i)));
		memcpy(out, &r, 1);
		break;
	}
	}
}

/* Equal bits, or both NaN. */
static int same_elem(enum weft_datatype t, const void *x, const void *y, size_t i)
{
	size_t es = weft_kit_datatype_size(t);
	if (memcmp((const char *)x + i * es, (const char *)y + i * es, es) == 0)
		return 1;
	int integer = t <= WEFT_UINT64;
	return !integer && isnan(get_elem(t, x, i)) && isnan(get_elem(t, y, i));
}

/* Random elements: any bits for the integers and narrow floats (their NaNs
 * and infinities included), moderate finite values for float and double so
 * that products stay meaningful. */
static void fill_random(enum weft_datatype t, void *p, size_t n)
{
	size_t es = weft_kit_datatype_size(t);
	for (size_t i = 0; i < n; i++) {
		if (t == WEFT_FLOAT32) {
			((float *)p)[i] = (float)((int64_t)(rng() % 2000001) - 1000000) / 1024.0f;
		} else if (t == WEFT_FLOAT64) {
			((double *)p)[i] = (double)((int64_t)(rng() % 2000001) - 1000000) / 1024.0;
		} else {
			uint64_t r = rng();
			memcpy((char *)p + i * es, &r, es);
		}
	}
}

static const size_t counts[] = {1, 7, 4097};

START_TEST(reduce_every_type_and_op)
{
	for (int ti = 0; ti < WEFT_DATATYPE_COUNT; ti++) {
		enum weft_datatype t = (enum weft_datatype)ti;
		size_t es = weft_kit_datatype_size(t);
		ck_assert_uint_ne(es, 0);
		for (int oi = 0; oi < WEFT_REDOP_COUNT; oi++) {
			enum weft_redop op = (enum weft_redop)oi;
			ck_assert(weft_kit_reduce_supported(t, op));
			for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
				size_t n = counts[ci];
				/* Exact sizes, so that ASan catches a loop that runs past n. */
				char *a = malloc(n * es), *b = malloc(n * es), *want = malloc(n * es);
				char *d = malloc(n * es), *d2 = malloc(n * es);
				ck_assert(a && b && want && d && d2);
				fill_random(t, a, n);
				fill_random(t, b, n);
				for (size_t i = 0; i < n; i++)
					ref_elem(t, op, a, b, i, want + i * es);
				/* dst = dst op src */
				memcpy(d, a, n * es);
				weft_kit_reduce(t, op, d, b, n);
				for (size_t i = 0; i < n; i++)
					ck_assert_msg(same_elem(t, d, want, i), "reduce %d op %d n %zu element %zu: %g op %g",
						      ti, oi, n, i, get_elem(t, a, i), get_elem(t, b, i));
				/* dst = a op b, out of place and in place on either input */
				ck_assert_int_eq(weft_kit_reduce3(t, op, d, a, b, n), 0);
				memcpy(d2, b, n * es);
				ck_assert_int_eq(weft_kit_reduce3(t, op, d2, a, d2, n), 0);
				for (size_t i = 0; i < n; i++) {
					ck_assert_msg(same_elem(t, d, want, i), "reduce3 %d op %d n %zu element %zu", ti,
						      oi, n, i);
					ck_assert_msg(same_elem(t, d2, want, i), "reduce3 in place %d op %d element %zu",
						      ti, oi, i);
				}
				memcpy(d2, a, n * es);
				ck_assert_int_eq(weft_kit_reduce3(t, op, d2, d2, b, n), 0);
				for (size_t i = 0; i < n; i++)
					ck_assert(same_elem(t, d2, want, i));
				free(a), free(b), free(want), free(d), free(d2);
			}
		}
	}
	/* Unknown types and ops are refused and touch nothing. */
	int x = 5, y = 7;
	ck_assert(!weft_kit_reduce_supported(WEFT_DATATYPE_COUNT, WEFT_SUM));
	ck_assert(!weft_kit_reduce_supported(WEFT_INT32, WEFT_REDOP_COUNT));
	ck_assert(!weft_kit_reduce_supported(WEFT_INT32, (enum weft_redop)-1));
	ck_assert_int_eq(weft_kit_reduce3(WEFT_DATATYPE_COUNT, WEFT_SUM, &x, &x, &y, 1), -ENOTSUP);
	weft_kit_reduce(WEFT_INT32, WEFT_REDOP_COUNT, &x, &y, 1);
	ck_assert_int_eq(x, 5);
}
END_TEST

START_TEST(reduce_known_values)
{
	int8_t a[3] = {100, -128, 7}, b[3] = {100, -1, -7};
	weft_kit_reduce(WEFT_INT8, WEFT_SUM, a, b, 3); /* wraps instead of undefined behaviour */
	ck_assert_int_eq(a[0], -56);
	ck_assert_int_eq(a[1], 127);
	ck_assert_int_eq(a[2], 0);
	int32_t s[2] = {-7, 9};
	weft_kit_finish(WEFT_INT32, WEFT_AVG, s, 2, 2);
	ck_assert_int_eq(s[0], -3); /* integer division truncates */
	ck_assert_int_eq(s[1], 4);
	uint64_t m[2] = {5, UINT64_MAX}, n2[2] = {9, 1};
	weft_kit_reduce(WEFT_UINT64, WEFT_MIN, m, n2, 2);
	ck_assert_uint_eq(m[0], 5);
	ck_assert_uint_eq(m[1], 1);
	uint16_t h[2] = {weft_kit_float_to_half(1000.0f), weft_kit_float_to_half(-3.0f)};
	uint16_t g[2] = {weft_kit_float_to_half(24.0f), weft_kit_float_to_half(5.0f)};
	weft_kit_reduce(WEFT_FLOAT16, WEFT_SUM, h, g, 2);
	ck_assert_float_eq(weft_kit_half_to_float(h[0]), 1024.0f);
	ck_assert_float_eq(weft_kit_half_to_float(h[1]), 2.0f);
	weft_kit_reduce(WEFT_FLOAT16, WEFT_PROD, h, g, 2);
	ck_assert_float_eq(weft_kit_half_to_float(h[0]), 24576.0f);
	ck_assert_float_eq(weft_kit_half_to_float(h[1]), 10.0f);
	uint16_t bf[1] = {weft_kit_float_to_bf16(3.0f)};
	weft_kit_finish(WEFT_BFLOAT16, WEFT_AVG, bf, 1, 4);
	ck_assert_float_eq(weft_kit_bf16_to_float(bf[0]), 0.75f);
	double d[1] = {2.0}, e[1] = {-8.5};
	weft_kit_reduce(WEFT_FLOAT64, WEFT_MAX, d, e, 1);
	ck_assert_double_eq(d[0], 2.0);
	/* fp8: 1.5 + 2.5 = 4; 448 + 448 saturates; 1 + 1/16 rounds back to 1. */
	uint8_t f8[3] = {weft_kit_float_to_fp8_e4m3(1.5f), 0x7e, 0x38};
	uint8_t g8[3] = {weft_kit_float_to_fp8_e4m3(2.5f), 0x7e, weft_kit_float_to_fp8_e4m3(0.0625f)};
	weft_kit_reduce(WEFT_FP8_E4M3, WEFT_SUM, f8, g8, 3);
	ck_assert_float_eq(weft_kit_fp8_e4m3_to_float(f8[0]), 4.0f);
	ck_assert_uint_eq(f8[1], 0x7e);
	ck_assert_uint_eq(f8[2], 0x38);
	uint8_t e5[2] = {weft_kit_float_to_fp8_e5m2(-3.0f), weft_kit_float_to_fp8_e5m2(40000.0f)};
	uint8_t e6[2] = {weft_kit_float_to_fp8_e5m2(2.0f), weft_kit_float_to_fp8_e5m2(40000.0f)};
	weft_kit_reduce(WEFT_FP8_E5M2, WEFT_MIN, e5, e6, 2);
	ck_assert_float_eq(weft_kit_fp8_e5m2_to_float(e5[0]), -3.0f);
	weft_kit_reduce(WEFT_FP8_E5M2, WEFT_SUM, e5, e6, 2);
	ck_assert_float_eq(weft_kit_fp8_e5m2_to_float(e5[0]), -1.0f);
	ck_assert_uint_eq(e5[1], 0x7b); /* 80000 saturates */
	ck_assert(weft_kit_reduce_supported(WEFT_FP8_E4M3, WEFT_SUM));
	ck_assert(weft_kit_reduce_supported(WEFT_FP8_E5M2, WEFT_MAX));
	ck_assert(weft_kit_reduce_supported(WEFT_FP8_E5M2, WEFT_PREMUL_SUM));
}
END_TEST

START_TEST(scale_and_finish)
{
	for (int ti = 0; ti < WEFT_DATATYPE_COUNT; ti++) {
		enum weft_datatype t = (enum weft_datatype)ti;
		size_t es = weft_kit_datatype_size(t);
		for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
			size_t n = counts[ci];
			char *x = malloc(n * es), *d = malloc(n * es), *want = malloc(n * es);
			unsigned char s[8];
			ck_assert(x && d && want);
			fill_random(t, x, n);
			fill_random(t, s, 1);
			/* The reference of a scale is a product with a buffer of scalars. */
			char *sv = malloc(n * es);
			ck_assert(sv);
			for (size_t i = 0; i < n; i++)
				memcpy(sv + i * es, s, es);
			for (size_t i = 0; i < n; i++)
				ref_elem(t, WEFT_PROD, x, sv, i, want + i * es);
			ck_assert_int_eq(weft_kit_scale(t, d, x, s, n), 0);
			for (size_t i = 0; i < n; i++)
				ck_assert_msg(same_elem(t, d, want, i), "scale type %d n %zu element %zu", ti, n, i);
			ck_assert_int_eq(weft_kit_scale(t, x, x, s, n), 0); /* in place */
			for (size_t i = 0; i < n; i++)
				ck_assert(same_elem(t, x, want, i));
			/* finish: AVG divides by the rank count in the element type. */
			memcpy(d, x, n * es);
			weft_kit_finish(t, WEFT_AVG, d, n, 3);
			for (size_t i = 0; i < n; i++) {
				unsigned char r[8];
				switch (t) {
#define DIV3(T)                                            \
	do {                                               \
		T v_ = ((const T *)x)[i];                  \
		v_ = (T)(v_ / (T)3);                       \
		memcpy(r, &v_, sizeof(v_));                \
	} while (0)
				case WEFT_INT8: DIV3(int8_t); break;
				case WEFT_UINT8: DIV3(uint8_t); break;
				case WEFT_INT32: DIV3(int32_t); break;
				case WEFT_UINT32: DIV3(uint32_t); break;
				case WEFT_INT64: DIV3(int64_t); break;
				case WEFT_UINT64: DIV3(uint64_t); break;
				case WEFT_FLOAT32: DIV3(float); break;
				case WEFT_FLOAT64: DIV3(double); break;
#undef DIV3
				case WEFT_FLOAT16: {
					uint16_t v = weft_kit_float_to_half((float)get_elem(t, x, i) / 3.0f);
					memcpy(r, &v, 2);
					break;
				}
				case WEFT_BFLOAT16: {
					uint16_t v = weft_kit_float_to_bf16((float)get_elem(t, x, i) / 3.0f);
					memcpy(r, &v, 2);
					break;
				}
				default:
					r[0] = fp8_nearest(t == WEFT_FP8_E5M2, (float)get_elem(t, x, i) / 3.0f);
					break;
				}
				ck_assert_msg(same_elem(t, d + i * es, r, 0), "finish type %d element %zu", ti, i);
			}
			/* Any other op, or one rank, leaves the data alone. */
			memcpy(d, x, n * es);
			weft_kit_finish(t, WEFT_SUM, d, n, 3);
			weft_kit_finish(t, WEFT_AVG, d, n, 1);
			ck_assert(memcmp(d, x, n * es) == 0);
			free(x), free(d), free(want), free(sv);
		}
	}
	int v = 1;
	ck_assert_int_eq(weft_kit_scale(WEFT_DATATYPE_COUNT, &v, &v, &v, 1), -ENOTSUP);
}
END_TEST

/* ------------------------------------------------ little-endian codecs */

START_TEST(le_reader)
{
	static const unsigned char msg[] = {0x01, 0x34, 0x12, 0x78, 0x56, 0x34, 0x12, 0xaa, 0xbb};
	/* An exact-size heap copy, so ASan sees any read past its end. */
	unsigned char *buf = malloc(sizeof(msg));
	ck_assert_ptr_nonnull(buf);
	memcpy(buf, msg, sizeof(msg));
	struct weft_kit_rd rd = weft_kit_rd_init(buf, sizeof(msg));
	ck_assert_uint_eq(weft_kit_rd_u8(&rd), 0x01);
	ck_assert_uint_eq(weft_kit_rd_u16(&rd), 0x1234);
	ck_assert_uint_eq(weft_kit_rd_u32(&rd), 0x12345678);
	ck_assert_uint_eq(weft_kit_rd_left(&rd), 2);
	ck_assert_int_eq(rd.err, 0);
	/* Two bytes left: a u32 fails, returns 0 and leaves everything after it
	 * failing too, even a read that would fit. */
	ck_assert_uint_eq(weft_kit_rd_u32(&rd), 0);
	ck_assert_int_eq(rd.err, -WEFT_ERR_PROTOCOL);
	ck_assert_uint_eq(weft_kit_rd_u8(&rd), 0);
	ck_assert_uint_eq(weft_kit_rd_left(&rd), 0);
	unsigned char out[4] = {9, 9, 9, 9};
	weft_kit_rd_bytes(&rd, out, sizeof(out));
	ck_assert(out[0] == 0 && out[3] == 0);

	rd = weft_kit_rd_init(buf, sizeof(msg));
	ck_assert_uint_eq(weft_kit_rd_u64(&rd), 0xaa12345678123401ull);
	weft_kit_rd_bytes(&rd, out, 1);
	ck_assert_uint_eq(out[0], 0xbb);
	ck_assert_uint_eq(weft_kit_rd_left(&rd), 0);
	ck_assert_int_eq(rd.err, 0);
	ck_assert_uint_eq(weft_kit_rd_u8(&rd), 0);
	ck_assert_int_eq(rd.err, -WEFT_ERR_PROTOCOL);
	/* A length that would wrap the offset is refused, not trusted. */
	rd = weft_kit_rd_init(buf, sizeof(msg));
	ck_assert_ptr_null(weft_kit_rd_take(&rd, SIZE_MAX));
	rd = weft_kit_rd_init(NULL, 100);
	ck_assert_uint_eq(weft_kit_rd_u16(&rd), 0);
	ck_assert_int_eq(rd.err, -WEFT_ERR_PROTOCOL);
	free(buf);

	ck_assert_uint_eq(weft_kit_le_get16(msg + 1), 0x1234);
	ck_assert_uint_eq(weft_kit_le_get32(msg + 3), 0x12345678);
	ck_assert_uint_eq(weft_kit_le_get64(msg + 1), 0xbbaa123456781234ull);
}
END_TEST

START_TEST(le_writer)
{
	unsigned char *buf = malloc(7);
	ck_assert_ptr_nonnull(buf);
	struct weft_kit_wr wr = weft_kit_wr_init(buf, 7);
	weft_kit_wr_u16(&wr, 0xbeef);
	weft_kit_wr_u32(&wr, 0x01020304);
	ck_assert_int_eq(wr.err, 0);
	weft_kit_wr_u16(&wr, 0xffff); /* one byte left: nothing written */
	ck_assert_int_eq(wr.err, -ENOSPC);
	weft_kit_wr_u64(&wr, 1);
	ck_assert_uint_eq(wr.off, 16); /* what the whole message needs */
	static const unsigned char want[6] = {0xef, 0xbe, 0x04, 0x03, 0x02, 0x01};
	ck_assert(memcmp(buf, want, 6) == 0);

	wr = weft_kit_wr_init(buf, 7);
	weft_kit_wr_u8(&wr, 7);
	weft_kit_wr_bytes(&wr, NULL, 2);
	weft_kit_wr_bytes(&wr, "abcd", 4);
	ck_assert_int_eq(wr.err, 0);
	ck_assert_uint_eq(wr.off, 7);
	ck_assert(memcmp(buf, "\x07\0\0abcd", 7) == 0);
	/* Sizing pass: no buffer, every byte counted. */
	wr = weft_kit_wr_init(NULL, 0);
	weft_kit_wr_u64(&wr, 0);
	weft_kit_wr_u32(&wr, 0);
	ck_assert_uint_eq(wr.off, 12);
	ck_assert_int_eq(wr.err, -ENOSPC);
	free(buf);

	unsigned char p[8];
	weft_kit_le_put64(p, 0x0807060504030201ull);
	ck_assert(memcmp(p, "\x01\x02\x03\x04\x05\x06\x07\x08", 8) == 0);
	weft_kit_le_put16(p, 0x1122);
	weft_kit_le_put32(p + 2, 0x33445566);
	ck_assert(memcmp(p, "\x22\x11\x66\x55\x44\x33", 6) == 0);
}
END_TEST

/* ------------------------------------------------------- parameters */

/* A fake core: declarations are recorded, param_get parses the text the test
 * set for a key (as if from the environment), else the declared default. */
#define FK_MAX 32
static struct {
	struct weft_param_decl decl[FK_MAX];
	char key[FK_MAX][32], def[FK_MAX][64];
	int ndecl;
	int declare_rc;  /* what param_declare returns (0, -EEXIST, ...) */
	const char *set_key[8], *set_val[8];
	int nset;
	char log[16][512];
	int nlog;
} fk;

static void fk_log(struct weft_plugin *self, enum weft_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void fk_log(struct weft_plugin *self, enum weft_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (fk.nlog < 16)
		vsnprintf(fk.log[fk.nlog++], sizeof(fk.log[0]), fmt, ap);
	va_end(ap);
}

static int fk_declare(struct weft_plugin *self, const struct weft_param_decl *d)
{
	if (fk.declare_rc)
		return fk.declare_rc;
	ck_assert_int_lt(fk.ndecl, FK_MAX);
	int i = fk.ndecl++;
	fk.decl[i] = *d;
	snprintf(fk.key[i], sizeof(fk.key[i]), "%s", d->key);
	snprintf(fk.def[i], sizeof(fk.def[i]), "%s", d->default_value ? d->default_value : "");
	fk.decl[i].key = fk.key[i];
	fk.decl[i].default_value = d->default_value ? fk.def[i] : NULL;
	return 0;
}

static int fk_get(struct weft_plugin *self, const char *section, const char *key, enum weft_param_type type,
		  void *out, enum weft_param_source *source)
{
	int di = -1;
	for (int i = 0; i < fk.ndecl; i++)
		if (strcmp(fk.key[i], key) == 0)
			di = i;
	if (di < 0)
		return -ENOENT;
	if (fk.decl[di].type != type)
		return -EINVAL;
	const char *text = fk.decl[di].default_value;
	enum weft_param_source src = WEFT_PARAM_SRC_DEFAULT;
	for (int i = 0; i < fk.nset; i++)
		if (strcmp(fk.set_key[i], key) == 0) {
			text = fk.set_val[i];
			src = WEFT_PARAM_SRC_ENV;
		}
	switch (type) {
	case WEFT_PARAM_INT: *(int64_t *)out = strtoll(text, NULL, 0); break;
	case WEFT_PARAM_SIZE: *(uint64_t *)out = strtoull(text, NULL, 0); break;
	case WEFT_PARAM_BOOL: *(int *)out = strcmp(text, "1") == 0; break;
	case WEFT_PARAM_DOUBLE: *(double *)out = strtod(text, NULL); break;
	case WEFT_PARAM_STRING: *(const char **)out = text; break;
	}
	if (source)
		*source = src;
	return 0;
}

static void *fk_alloc(size_t n)
{
	return malloc(n);
}

static void *fk_calloc(size_t n, size_t b)
{
	return calloc(n, b);
}

static const struct weft_core_api fk_core = {
	.size = sizeof(struct weft_core_api),
	.log = fk_log,
	.param_declare = fk_declare,
	.param_get = fk_get,
	.alloc = fk_alloc,
	.calloc = fk_calloc,
	.free = free,
};

static void fk_reset(void)
{
	memset(&fk, 0, sizeof(fk));
}

static void fk_set(const char *key, const char *val)
{
	fk.set_key[fk.nset] = key;
	fk.set_val[fk.nset++] = val;
}

static int fk_logged(const char *needle)
{
	for (int i = 0; i < fk.nlog; i++)
		if (strstr(fk.log[i], needle))
			return 1;
	return 0;
}

struct settings {
	int64_t depth;
	int32_t slots;
	uint64_t chunk;
	size_t small;
	int map;
	double ratio;
	const char *transport;
	char devices[8];
	char order[16];
	int mode;
};

static const char *const signal_names[] = {"auto", "atomic", "imm", NULL};
static const char *const order_names[] = {"flush", "fence", NULL};

static const struct weft_kit_param rows[] = {
	WEFT_KIT_P_INT("depth", struct settings, depth, "4", 2, 16, "Ring slots."),
	WEFT_KIT_P_INT("slots", struct settings, slots, "8", INT64_MIN, INT64_MAX, "Slots (an int32 field)."),
	WEFT_KIT_P_SIZE("chunk", struct settings, chunk, "4096", 4096, 1u << 26, "Bytes per chunk."),
	WEFT_KIT_P_SIZE("small-max", struct settings, small, "0", 0, UINT64_MAX, "Largest small call."),
	WEFT_KIT_P_BOOL("map", struct settings, map, "1", "Map peers."),
	WEFT_KIT_P_DOUBLE("ratio", struct settings, ratio, "0.5", 0.0, 1.0, "A fraction."),
	WEFT_KIT_P_STRING("transport", struct settings, transport, NULL, NULL, "Transport."),
	WEFT_KIT_P_STRBUF("devices", struct settings, devices, NULL, NULL, "Devices."),
	WEFT_KIT_P_STRBUF("order", struct settings, order, "flush", order_names, "Signal order."),
	WEFT_KIT_P_ENUM("signal", struct settings, mode, "auto", signal_names, "Signal mode."),
};

START_TEST(params_declare_and_load)
{
	fk_reset();
	ck_assert_int_eq(weft_kit_params_declare(&fk_core, "test", rows, WEFT_KIT_NROWS(rows)), 0);
	ck_assert_int_eq(fk.ndecl, (int)WEFT_KIT_NROWS(rows));
	ck_assert_str_eq(fk.decl[0].key, "depth");
	ck_assert_int_eq(fk.decl[0].type, WEFT_PARAM_INT);
	ck_assert_str_eq(fk.decl[0].help, "Ring slots.");
	ck_assert_str_eq(fk.decl[0].section, "test");
	ck_assert_int_eq(fk.decl[2].type, WEFT_PARAM_SIZE);
	ck_assert_int_eq(fk.decl[9].type, WEFT_PARAM_STRING); /* an enum is a string to the core */
	ck_assert_ptr_null(fk.decl[6].default_value);

	/* Defaults. */
	struct settings s;
	memset(&s, 0x5a, sizeof(s));
	ck_assert_int_eq(weft_kit_params_load(&fk_core, "test", rows, WEFT_KIT_NROWS(rows), &s), 0);
	ck_assert_int_eq(s.depth, 4);
	ck_assert_int_eq(s.slots, 8);
	ck_assert_uint_eq(s.chunk, 4096);
	ck_assert_uint_eq(s.small, 0);
	ck_assert_int_eq(s.map, 1);
	ck_assert_double_eq(s.ratio, 0.5);
	ck_assert_ptr_null(s.transport);
	ck_assert_str_eq(s.devices, "");
	ck_assert_str_eq(s.order, "flush");
	ck_assert_int_eq(s.mode, 0);
	ck_assert_int_eq(fk.nlog, 0);

	/* Values set in range, an enum by name, an empty enum-like string. */
	fk_set("depth", "16");
	fk_set("chunk", "65536");
	fk_set("transport", "ofi");
	fk_set("devices", "mlx5_0");
	fk_set("signal", "imm");
	fk_set("order", "");
	fk_set("map", "0");
	ck_assert_int_eq(weft_kit_params_load(&fk_core, "test", rows, WEFT_KIT_NROWS(rows), &s), 0);
	ck_assert_int_eq(s.depth, 16);
	ck_assert_uint_eq(s.chunk, 65536);
	ck_assert_str_eq(s.transport, "ofi");
	ck_assert_str_eq(s.devices, "mlx5_0");
	ck_assert_int_eq(s.mode, 2);
	ck_assert_str_eq(s.order, "flush");
	ck_assert_int_eq(s.map, 0);

	/* Declaring again (a harness initializing the file twice) is fine. */
	fk.declare_rc = -EEXIST;
	ck_assert_int_eq(weft_kit_params_declare(&fk_core, "test", rows, WEFT_KIT_NROWS(rows)), 0);
	fk.declare_rc = -ENOMEM;
	ck_assert_int_eq(weft_kit_params_declare(&fk_core, "test", rows, WEFT_KIT_NROWS(rows)), -ENOMEM);
	ck_assert(fk_logged("cannot declare parameter test.depth"));
}
END_TEST

START_TEST(params_refusals)
{
	fk_reset();
	ck_assert_int_eq(weft_kit_params_declare(&fk_core, "algo-host", rows, WEFT_KIT_NROWS(rows)), 0);
	struct settings s;
	/* Each bad value is named by its environment name, with the value and
	 * what is allowed; every one is reported, the first error returned. */
	fk_set("depth", "1");
	fk_set("slots", "0x10000000000"); /* within the row's bounds, not the int32 field's */
	fk_set("chunk", "100");
	fk_set("ratio", "1.5");
	fk_set("signal", "fast");
	fk_set("order", "later");
	fk_set("devices", "mlx5_0:1,mlx5_1:1");
	ck_assert_int_eq(weft_kit_params_load(&fk_core, "algo-host", rows, WEFT_KIT_NROWS(rows), &s),
			 -WEFT_ERR_CONFIG);
	ck_assert_int_eq(fk.nlog, 7);
	ck_assert_msg(fk_logged("parameter algo-host.depth=1 is out of range 2..16 (from WEFT_ALGO_HOST_DEPTH)"), "%s",
		      fk.log[0]);
	ck_assert_msg(fk_logged("algo-host.slots=1099511627776 is out of range -2147483648..2147483647"), "%s",
		      fk.log[1]);
	ck_assert_msg(fk_logged("algo-host.chunk=100 is out of range 4096..67108864 (from WEFT_ALGO_HOST_CHUNK)"), "%s",
		      fk.log[2]);
	ck_assert_msg(fk_logged("algo-host.ratio=1.5 is out of range 0..1"), "%s", fk.log[3]);
	ck_assert_msg(fk_logged("algo-host.devices is too long (17 bytes, at most 7)"), "%s", fk.log[4]);
	ck_assert_msg(fk_logged("algo-host.order='later' is none of flush, fence"), "%s", fk.log[5]);
	ck_assert_msg(fk_logged("parameter algo-host.signal='fast' is none of auto, atomic, imm (from "
				"WEFT_ALGO_HOST_SIGNAL)"),
		      "%s", fk.log[6]);

	/* A default out of bounds says so, and where to set it. */
	static const struct weft_kit_param bad_default[] = {
		WEFT_KIT_P_INT("depth", struct settings, depth, "1", 2, 16, "Ring slots."),
	};
	fk_reset();
	ck_assert_int_eq(weft_kit_params_declare(&fk_core, "t", bad_default, 1), 0);
	ck_assert_int_eq(weft_kit_params_load(&fk_core, "t", bad_default, 1, &s), -WEFT_ERR_CONFIG);
	ck_assert_msg(fk_logged("t.depth=1 is out of range 2..16 (its default; set WEFT_T_DEPTH or [t] depth)"), "%s",
		      fk.log[0]);

	/* A row never declared: param_get's -ENOENT, named. */
	fk_reset();
	ck_assert_int_eq(weft_kit_params_load(&fk_core, "t", bad_default, 1, &s), -ENOENT);
	ck_assert(fk_logged("cannot read parameter t.depth"));

	/* Rows the kit cannot load are refused when declared. */
	static const struct weft_kit_param bad_rows[][1] = {
		{WEFT_KIT_P_ENUM("signal", struct settings, mode, "never", signal_names, "Default not a name.")},
		{WEFT_KIT_P_ENUM("signal", struct settings, mode, NULL, signal_names, "No default.")},
		{WEFT_KIT_P_ENUM("signal", struct settings, depth, "auto", signal_names, "An int64 field.")},
		{WEFT_KIT_P_STRING("order", struct settings, order, "flush", NULL, "An array for a pointer.")},
		{WEFT_KIT_P_DOUBLE("ratio", struct settings, slots, "0.5", 0.0, 1.0, "An int for a double.")},
	};
	for (size_t i = 0; i < sizeof(bad_rows) / sizeof(bad_rows[0]); i++) {
		fk_reset();
		ck_assert_int_eq(weft_kit_params_declare(&fk_core, "t", bad_rows[i], 1), -EINVAL);
		ck_assert_int_eq(fk.ndecl, 0);
		ck_assert(fk_logged("the row is malformed"));
	}
	ck_assert_int_eq(weft_kit_params_declare(NULL, "t", rows, 1), -EINVAL);
	ck_assert_int_eq(weft_kit_params_load(&fk_core, NULL, rows, 1, &s), -EINVAL);
}
END_TEST

START_TEST(param_env_name)
{
	char buf[64];
	weft_kit_param_env("algo-host", "poll_us", buf, sizeof(buf));
	ck_assert_str_eq(buf, "WEFT_ALGO_HOST_POLL_US");
	weft_kit_param_env("ib", "small-max", buf, sizeof(buf));
	ck_assert_str_eq(buf, "WEFT_IB_SMALL_MAX");
	weft_kit_param_env("ib", "a_very_long_key_name", buf, 10);
	ck_assert_str_eq(buf, "WEFT_IB_A");
}
END_TEST

/* ------------------------------------------------------- error names */

START_TEST(error_names)
{
	ck_assert_str_eq(weft_kit_errname(-EAGAIN), "EAGAIN");
	ck_assert_str_eq(weft_kit_errname(EAGAIN), "EAGAIN");
	ck_assert_str_eq(weft_kit_errname(-ENOTSUP), "ENOTSUP");
	ck_assert_str_eq(weft_kit_errname(-ECONNRESET), "ECONNRESET");
	ck_assert_str_eq(weft_kit_errname(-ETIMEDOUT), "ETIMEDOUT");
	ck_assert_str_eq(weft_kit_errname(-WEFT_ERR_PEER), "WEFT_ERR_PEER");
	ck_assert_str_eq(weft_kit_errname(-WEFT_ERR_CONFIG), "WEFT_ERR_CONFIG");
	ck_assert_str_eq(weft_kit_errname(0), "0");
	ck_assert_str_eq(weft_kit_errname(-9999), "unknown");
	ck_assert_str_eq(weft_kit_errname(-WEFT_ERR_LAST), "unknown");
	/* Every code of weft's own has a name, and the core's words. */
	for (int c = WEFT_ERR_FIRST; c < WEFT_ERR_LAST; c++) {
		ck_assert_msg(strncmp(weft_kit_errname(-c), "WEFT_ERR_", 9) == 0, "code %d: %s", c,
			      weft_kit_errname(-c));
		ck_assert_str_eq(weft_kit_strerror(-c), weft_strerror(-c));
	}
	ck_assert_str_eq(weft_kit_strerror(0), weft_strerror(0));
	ck_assert_str_eq(weft_kit_strerror(-ENOMEM), strerror(ENOMEM));
	ck_assert_str_eq(weft_kit_strerror(ENOMEM), strerror(ENOMEM));
	ck_assert_str_eq(weft_kit_strerror(-WEFT_ERR_LAST), "unknown error");
	/* Every errno below 134 either has its name or reads "unknown": no two
	 * codes share a name (aliases aside, which share a value). */
	for (int a = 1; a < 134; a++)
		for (int b = a + 1; b < 134; b++)
			if (strcmp(weft_kit_errname(a), "unknown") != 0)
				ck_assert_msg(strcmp(weft_kit_errname(a), weft_kit_errname(b)) != 0, "%d and %d: %s",
					      a, b, weft_kit_errname(a));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("kit");
	TCase *tc = tcase_create("conversions");
	tcase_add_test(tc, fp8_decode);
	tcase_add_test(tc, fp8_round_trip);
	tcase_add_test(tc, fp8_edges);
	tcase_add_test(tc, fp8_against_search);
	tcase_add_test(tc, half_conversions);
	tcase_add_test(tc, bf16_conversions);
	suite_add_tcase(s, tc);
	tc = tcase_create("reductions");
	tcase_add_test(tc, reduce_every_type_and_op);
	tcase_add_test(tc, reduce_known_values);
	tcase_add_test(tc, scale_and_finish);
	suite_add_tcase(s, tc);
	tc = tcase_create("codecs");
	tcase_add_test(tc, le_reader);
	tcase_add_test(tc, le_writer);
	suite_add_tcase(s, tc);
	tc = tcase_create("params");
	tcase_add_test(tc, params_declare_and_load);
	tcase_add_test(tc, params_refusals);
	tcase_add_test(tc, param_env_name);
	suite_add_tcase(s, tc);
	tc = tcase_create("errors");
	tcase_add_test(tc, error_names);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
