/* SPDX-License-Identifier: Apache-2.0 */
/* algo-host: element-wise reductions for every type weft.h names except fp8,
 * and the float16 / bfloat16 conversions (round to nearest even). */
#include <errno.h>
#include <string.h>

#include "ah.h"

float ah_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
	uint32_t bits;
	if (exp == 0) {
		/* Zero or subnormal: mant * 2^-24, exact in float. */
		float v = (float)mant * 5.9604644775390625e-8f;
		memcpy(&bits, &v, sizeof(bits));
		bits |= sign;
	} else if (exp == 31) {
		bits = sign | 0x7f800000u | (mant << 13);
	} else {
		bits = sign | ((exp + 112u) << 23) | (mant << 13);
	}
	float f;
	memcpy(&f, &bits, sizeof(f));
	return f;
}

uint16_t ah_float_to_half(float f)
{
	uint32_t x;
	memcpy(&x, &f, sizeof(x));
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
	uint32_t a = x & 0x7fffffffu;
	if (a >= 0x7f800000u) /* inf stays inf; NaN stays a quiet NaN */
		return sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u);
	if (a >= 0x477ff000u) /* 65520 and up round to inf */
		return sign | 0x7c00u;
	if (a < 0x38800000u) {
		/* Below the smallest normal half: adding 0.5 puts the half's subnormal
		 * unit (2^-24) in the float's last mantissa bit, and the FPU rounds to
		 * nearest even for us. */
		float v;
		memcpy(&v, &a, sizeof(v));
		v += 0.5f;
		uint32_t b;
		memcpy(&b, &v, sizeof(b));
		return sign | (uint16_t)(b - 0x3f000000u);
	}
	/* Normal: rebias the exponent (-112 << 23) and round to nearest even on the
	 * 13 bits that go. */
	uint32_t odd = (a >> 13) & 1u;
	a += 0xc8000fffu + odd;
	return sign | (uint16_t)(a >> 13);
}

float ah_bf16_to_float(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;
	memcpy(&f, &bits, sizeof(f));
	return f;
}

uint16_t ah_float_to_bf16(float f)
{
	uint32_t x;
	memcpy(&x, &f, sizeof(x));
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40u); /* keep NaN a NaN */
	x += 0x7fffu + ((x >> 16) & 1u);
	return (uint16_t)(x >> 16);
}

int ah_reduce_supported(enum weft_datatype t, enum weft_redop op)
{
	/* A pre-multiplied sum runs as a sum after ah_scale (algos.c). */
	if ((int)op < 0 || op >= WEFT_REDOP_COUNT)
		return 0;
	switch (t) {
	case WEFT_INT8: case WEFT_UINT8: case WEFT_INT32: case WEFT_UINT32: case WEFT_INT64: case WEFT_UINT64:
	case WEFT_FLOAT16: case WEFT_BFLOAT16: case WEFT_FLOAT32: case WEFT_FLOAT64:
		return 1;
	default:
		return 0; /* fp8: no conversion here yet */
	}
}

/* Integers add and multiply in the unsigned type of the same width, so that
 * overflow wraps instead of being undefined. */
#define AH_INT_REDUCE(T, U)                                                             \
	static void red_##T(enum weft_redop op, T *d, const T *s, size_t n)             \
	{                                                                               \
		switch (op) {                                                           \
		case WEFT_SUM:                                                          \
		case WEFT_AVG:                                                          \
			for (size_t i = 0; i < n; i++)                                  \
				d[i] = (T)((U)d[i] + (U)s[i]);                          \
			break;                                                          \
		case WEFT_PROD:                                                         \
			for (size_t i = 0; i < n; i++)                                  \
				d[i] = (T)((U)((U)d[i] * (U)s[i]));                     \
			break;                                                          \
		case WEFT_MIN:                                                          \
			for (size_t i = 0; i < n; i++)                                  \
				d[i] = s[i] < d[i] ? s[i] : d[i];                       \
			break;                                                          \
		case WEFT_MAX:                                                          \
			for (size_t i = 0; i < n; i++)                                  \
				d[i] = s[i] > d[i] ? s[i] : d[i];                       \
			break;                                                          \
		default:                                                                \
			break;                                                          \
		}                                                                       \
	}

AH_INT_REDUCE(int8_t, uint8_t)
AH_INT_REDUCE(uint8_t, uint8_t)
AH_INT_REDUCE(int32_t, uint32_t)
AH_INT_REDUCE(uint32_t, uint32_t)
AH_INT_REDUCE(int64_t, uint64_t)
AH_INT_REDUCE(uint64_t, uint64_t)

#define AH_FLOAT_REDUCE(T)                                                              \
	static void red_##T(enum weft_redop op, T *d, const T *s, size_t n)             \
	{                                                                               \
		switch (op) {                                                           \
		case WEFT_SUM:                                                          \
		case WEFT_AVG:                                                          \
			for (size_t i = 0; i < n; i++)                                  \
				d[i] = d[i] + s[i];                                     \
			break;                                                          \
		case WEFT_PROD:                                                         \
			for (size_t i = 0; i < n; i++)                                  \
				d[i] = d[i] * s[i];                                     \
			break;                                                          \
		case WEFT_MIN:                                                          \
			for (size_t i = 0; i < n; i++)                                  \
				d[i] = s[i] < d[i] ? s[i] : d[i];                       \
			break;                                                          \
		case WEFT_MAX:                                                          \
			for (size_t i = 0; i < n; i++)                                  \
				d[i] = s[i] > d[i] ? s[i] : d[i];                       \
			break;                                                          \
		default:                                                                \
			break;                                                          \
		}                                                                       \
	}

typedef float float_t_;
typedef double double_t_;
AH_FLOAT_REDUCE(float_t_)
AH_FLOAT_REDUCE(double_t_)

static float op_f(enum weft_redop op, float a, float b)
{
	switch (op) {
	case WEFT_PROD:
		return a * b;
	case WEFT_MIN:
		return b < a ? b : a;
	case WEFT_MAX:
		return b > a ? b : a;
	default:
		return a + b;
	}
}

/* 16-bit floats: widen to float, reduce, round back once per step. */
static void red_half(enum weft_redop op, uint16_t *d, const uint16_t *s, size_t n, int bf)
{
	for (size_t i = 0; i < n; i++) {
		float a = bf ? ah_bf16_to_float(d[i]) : ah_half_to_float(d[i]);
		float b = bf ? ah_bf16_to_float(s[i]) : ah_half_to_float(s[i]);
		float r = op_f(op, a, b);
		d[i] = bf ? ah_float_to_bf16(r) : ah_float_to_half(r);
	}
}

void ah_reduce(enum weft_datatype t, enum weft_redop op, void *dst, const void *src, size_t n)
{
	switch (t) {
	case WEFT_INT8: red_int8_t(op, dst, src, n); break;
	case WEFT_UINT8: red_uint8_t(op, dst, src, n); break;
	case WEFT_INT32: red_int32_t(op, dst, src, n); break;
	case WEFT_UINT32: red_uint32_t(op, dst, src, n); break;
	case WEFT_INT64: red_int64_t(op, dst, src, n); break;
	case WEFT_UINT64: red_uint64_t(op, dst, src, n); break;
	case WEFT_FLOAT16: red_half(op, dst, src, n, 0); break;
	case WEFT_BFLOAT16: red_half(op, dst, src, n, 1); break;
	case WEFT_FLOAT32: red_float_t_(op, dst, src, n); break;
	case WEFT_FLOAT64: red_double_t_(op, dst, src, n); break;
	default: break;
	}
}

/* d = a op b in one pass (d may be a or b itself: element i reads both inputs
 * before it writes), where the copy-then-reduce of two inputs takes two. */
#define AH_REDUCE3(T, U)                                                                \
	static void red3_##T(enum weft_redop op, T *d, const T *a, const T *b, size_t n) \
	{                                                                               \
		switch (op) {                                                           \
		case WEFT_SUM:                                                          \
		case WEFT_AVG:                                                          \
			for (size_t i = 0; i < n; i++)                                  \
				d[i] = (T)((U)a[i] + (U)b[i]);                          \
			break;                                                          \
		case WEFT_PROD:                                                         \
			for (size_t i = 0; i < n; i++)                                  \
				d[i] = (T)((U)((U)a[i] * (U)b[i]));                     \
			break;                                                          \
		case WEFT_MIN:                                                          \
			for (size_t i = 0; i < n; i++)                                  \
				d[i] = b[i] < a[i] ? b[i] : a[i];                       \
			break;                                                          \
		case WEFT_MAX:                                                          \
			for (size_t i = 0; i < n; i++)                                  \
				d[i] = b[i] > a[i] ? b[i] : a[i];                       \
			break;                                                          \
		default:                                                                \
			break;                                                          \
		}                                                                       \
	}

AH_REDUCE3(int32_t, uint32_t)
AH_REDUCE3(uint32_t, uint32_t)
AH_REDUCE3(int64_t, uint64_t)
AH_REDUCE3(uint64_t, uint64_t)
AH_REDUCE3(float_t_, float_t_)
AH_REDUCE3(double_t_, double_t_)

int ah_reduce3(enum weft_datatype t, enum weft_redop op, void *dst, const void *a, const void *b, size_t n)
{
	switch (t) {
	case WEFT_INT32: red3_int32_t(op, dst, a, b, n); return 0;
	case WEFT_UINT32: red3_uint32_t(op, dst, a, b, n); return 0;
	case WEFT_INT64: red3_int64_t(op, dst, a, b, n); return 0;
	case WEFT_UINT64: red3_uint64_t(op, dst, a, b, n); return 0;
	case WEFT_FLOAT32: red3_float_t_(op, dst, a, b, n); return 0;
	case WEFT_FLOAT64: red3_double_t_(op, dst, a, b, n); return 0;
	default: return -ENOTSUP;
	}
}

/* dst[i] = src[i] * s in the element type: integers wrap (in the unsigned
 * type), floats round once, 16-bit floats through float (the product of two
 * of them is exact there, so one rounding is NCCL's). */
#define AH_INT_SCALE(T, U)                                                      \
	do {                                                                    \
		T s_, *d_ = dst;                                                \
		const T *x_ = src;                                              \
		memcpy(&s_, scalar, sizeof(s_));                                \
		for (size_t i_ = 0; i_ < n; i_++)                               \
			d_[i_] = (T)((U)x_[i_] * (U)s_);                        \
	} while (0)

int ah_scale(enum weft_datatype t, void *dst, const void *src, const unsigned char *scalar, size_t n)
{
	switch (t) {
	case WEFT_INT8: AH_INT_SCALE(int8_t, uint8_t); return 0;
	case WEFT_UINT8: AH_INT_SCALE(uint8_t, uint8_t); return 0;
	case WEFT_INT32: AH_INT_SCALE(int32_t, uint32_t); return 0;
	case WEFT_UINT32: AH_INT_SCALE(uint32_t, uint32_t); return 0;
	case WEFT_INT64: AH_INT_SCALE(int64_t, uint64_t); return 0;
	case WEFT_UINT64: AH_INT_SCALE(uint64_t, uint64_t); return 0;
	case WEFT_FLOAT32: AH_INT_SCALE(float, float); return 0;
	case WEFT_FLOAT64: AH_INT_SCALE(double, double); return 0;
	case WEFT_FLOAT16:
	case WEFT_BFLOAT16: {
		int bf = t == WEFT_BFLOAT16;
		uint16_t sh, *d = dst;
		const uint16_t *x = src;
		memcpy(&sh, scalar, sizeof(sh));
		float s = bf ? ah_bf16_to_float(sh) : ah_half_to_float(sh);
		for (size_t i = 0; i < n; i++) {
			float v = (bf ? ah_bf16_to_float(x[i]) : ah_half_to_float(x[i])) * s;
			d[i] = bf ? ah_float_to_bf16(v) : ah_float_to_half(v);
		}
		return 0;
	}
	default:
		return -ENOTSUP;
	}
}

#define AH_DIV(T, p, n, k)                               \
	do {                                             \
		T *q_ = (T *)(p);                        \
		for (size_t i_ = 0; i_ < (n); i_++)      \
			q_[i_] = (T)(q_[i_] / (T)(k));   \
	} while (0)

void ah_finish(enum weft_datatype t, enum weft_redop op, void *dst, size_t n, int nranks)
{
	if (op != WEFT_AVG || nranks <= 1)
		return;
	switch (t) {
	case WEFT_INT8: AH_DIV(int8_t, dst, n, nranks); break;
	case WEFT_UINT8: AH_DIV(uint8_t, dst, n, nranks); break;
	case WEFT_INT32: AH_DIV(int32_t, dst, n, nranks); break;
	case WEFT_UINT32: AH_DIV(uint32_t, dst, n, nranks); break;
	case WEFT_INT64: AH_DIV(int64_t, dst, n, nranks); break;
	case WEFT_UINT64: AH_DIV(uint64_t, dst, n, nranks); break;
	case WEFT_FLOAT32: AH_DIV(float, dst, n, nranks); break;
	case WEFT_FLOAT64: AH_DIV(double, dst, n, nranks); break;
	case WEFT_FLOAT16:
	case WEFT_BFLOAT16: {
		int bf = t == WEFT_BFLOAT16;
		uint16_t *q = dst;
		for (size_t i = 0; i < n; i++) {
			float v = (bf ? ah_bf16_to_float(q[i]) : ah_half_to_float(q[i])) / (float)nranks;
			q[i] = bf ? ah_float_to_bf16(v) : ah_float_to_half(v);
		}
		break;
	}
	default:
		break;
	}
}
