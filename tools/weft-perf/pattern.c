/* SPDX-License-Identifier: Apache-2.0 */
/* The data weft-perf moves: every rank can compute every rank's input, so
 * each checks its own output; the half-precision types are converted here
 * without a compiler's _Float16. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <weft/weft.h>

#include "wp.h"

uint64_t wp_splitmix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* ---------------------------------------------------- half-precision types */

static uint16_t f32_to_f16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
	int e = (int)((x >> 23) & 0xff);
	if (e == 0xff)
		return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
	int exp = e - 127 + 15;
	if (exp >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (exp <= 0) {
		if (exp < -10)
			return (uint16_t)sign;
		mant |= 0x800000u;
		unsigned shift = (unsigned)(14 - exp);
		uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
		h++; /* a carry into the exponent is the correct rounding, up to infinity */
	return (uint16_t)h;
}

static float f16_to_f32(uint16_t h)
{
	unsigned sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
	float v;
	if (exp == 0)
		v = ldexpf((float)mant, -24);
	else if (exp == 31)
		v = mant ? NAN : INFINITY;
	else
		v = ldexpf((float)(mant | 0x400), (int)exp - 25);
	return sign ? -v : v;
}

static uint16_t f32_to_bf16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fffu + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t h)
{
	uint32_t x = (uint32_t)h << 16;
	float f;
	memcpy(&f, &x, 4);
	return f;
}

/* Stores v (an integer value, or a float result) as element i of buf. Integer
 * types keep the low bits (two's complement wrap), as the reduction would. */
static void store(const struct type_info *t, void *buf, size_t i, double v, uint64_t iv)
{
	switch (t->type) {
	case WEFT_INT8: ((int8_t *)buf)[i] = (int8_t)(uint8_t)iv; break;
	case WEFT_UINT8: ((uint8_t *)buf)[i] = (uint8_t)iv; break;
	case WEFT_INT32: ((int32_t *)buf)[i] = (int32_t)(uint32_t)iv; break;
	case WEFT_UINT32: ((uint32_t *)buf)[i] = (uint32_t)iv; break;
	case WEFT_INT64: ((int64_t *)buf)[i] = (int64_t)iv; break;
	case WEFT_UINT64: ((uint64_t *)buf)[i] = iv; break;
	case WEFT_FLOAT16: ((uint16_t *)buf)[i] = f32_to_f16((float)v); break;
	case WEFT_BFLOAT16: ((uint16_t *)buf)[i] = f32_to_bf16((float)v); break;
	case WEFT_FLOAT32: ((float *)buf)[i] = (float)v; break;
	case WEFT_FLOAT64: ((double *)buf)[i] = v; break;
	default: break;
	}
}

static double load_f(const struct type_info *t, const void *buf, size_t i)
{
	switch (t->type) {
	case WEFT_FLOAT16: return f16_to_f32(((const uint16_t *)buf)[i]);
	case WEFT_BFLOAT16: return bf16_to_f32(((const uint16_t *)buf)[i]);
	case WEFT_FLOAT32: return ((const float *)buf)[i];
	case WEFT_FLOAT64: return ((const double *)buf)[i];
	default: return 0;
	}
}

/* ----------------------------------------------------------- data pattern
 * Every rank can compute every rank's input from (seed, rank, index), so each
 * verifies its own output against a reference computed locally. Values are
 * small non-negative integers: reductions of them are exact in every type and
 * in any order (products use 1 and 2 only, so they stay powers of two). */
void wp_pattern_init(struct pattern *p, const struct opts *o, int nranks, uint64_t size)
{
	p->t = o->type;
	p->op = o->op;
	p->reduces = wp_colls[o->coll].reduces;
	/* A different pattern per size, so a stale result of the previous size is wrong. */
	p->seed = wp_splitmix64(o->seed ^ (size * 0x100000001B3ull));
	double lim = o->type->limit;
	if (!p->reduces) {
		/* Below the type's largest value: all ones is the poison. */
		p->range = lim >= 256 ? 256 : (uint64_t)lim;
	} else {
		/* Keep the sum of all ranks within the exact range; avg needs the sum too. */
		double r = floor(lim / nranks);
		p->range = r >= 9 ? 9 : r >= 1 ? (uint64_t)r + 1 : 1;
	}
}

static inline uint64_t pattern_val(const struct pattern *p, int rank, uint64_t i)
{
	uint64_t h = wp_splitmix64(p->seed ^ ((uint64_t)(rank + 1) << 48) ^ i);
	if (p->reduces && p->op == WEFT_PROD)
		return 1 + (h & 1);
	return h % p->range;
}

/* Writes rank's input elements [first, first+n) into buf[0..n). */
void wp_pattern_fill(const struct pattern *p, void *buf, int rank, uint64_t first, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v = pattern_val(p, rank, first + i);
		store(p->t, buf, i, (double)v, v);
	}
}

/* The reduction over all ranks of element idx, stored as element i of buf. */
void wp_pattern_reduce(const struct pattern *p, void *buf, size_t i, int nranks, uint64_t idx)
{
	uint64_t acc = pattern_val(p, 0, idx);
	for (int r = 1; r < nranks; r++) {
		uint64_t v = pattern_val(p, r, idx);
		switch (p->op) {
		case WEFT_SUM:
		case WEFT_AVG: acc += v; break;
		case WEFT_PROD: acc *= v; break; /* wraps like the integer types do */
		case WEFT_MIN: acc = v < acc ? v : acc; break;
		case WEFT_MAX: acc = v > acc ? v : acc; break;
		default: break;
		}
	}
	double f = (double)acc;
	if (p->op == WEFT_PROD && p->t->is_float) {
		/* The product of 1s and 2s is 2^k; uint64 wraps past 2^63, so count the 2s. */
		int k = 0;
		for (int r = 0; r < nranks; r++)
			k += pattern_val(p, r, idx) == 2;
		f = ldexp(1.0, k);
	}
	if (p->op == WEFT_AVG) {
		f /= nranks;
		acc /= (uint64_t)nranks;
	}
	store(p->t, buf, i, f, acc);
}

/* Counts elements of got that differ from want. Exact, except the average of
 * floating-point types, where the division may round either way. */
uint64_t wp_count_wrong(const struct type_info *t, enum weft_redop op, int reduces, const void *got,
			const void *want, size_t n)
{
	uint64_t wrong = 0;
	if (reduces && op == WEFT_AVG && t->is_float) {
		double tol = t->type == WEFT_FLOAT16 ? 2e-3 : t->type == WEFT_BFLOAT16 ? 1.6e-2
			     : t->type == WEFT_FLOAT32 ? 2.5e-7 : 1e-15;
		for (size_t i = 0; i < n; i++) {
			double g = load_f(t, got, i), w = load_f(t, want, i);
			if (!(fabs(g - w) <= tol * fabs(w)))
				wrong++;
		}
		return wrong;
	}
	const unsigned char *a = got, *b = want;
	for (size_t i = 0; i < n; i++)
		if (memcmp(a + i * t->size, b + i * t->size, t->size) != 0)
			wrong++;
	return wrong;
}

/* Fills with a value the pattern never produces (NaN for floats, all ones for
 * integers, whose patterns stay far below it). */
void wp_poison(void *buf, size_t bytes)
{
	memset(buf, 0xff, bytes);
}
