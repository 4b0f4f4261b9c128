/* SPDX-License-Identifier: Apache-2.0 */
/* weft: the plugin author's support kit. Header-only (static inline), so a
 * plugin still links nothing of the core: names of error codes, element-wise
 * reductions of every weft type on host memory, little-endian wire codecs with
 * bounds, and parameters bound to the fields of a struct. Pure functions,
 * callable from any thread, none blocking; docs/plugin-abi.md section 11. */
#ifndef WEFT_KIT_H
#define WEFT_KIT_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==================================================================== errors */

/* The symbolic name of a code: "EAGAIN", "WEFT_ERR_PEER", "0" for success,
 * "unknown" for a code weft does not know. Either sign is taken (-EAGAIN and
 * EAGAIN name the same code). The string is static. */
static inline const char *weft_kit_errname(int rc)
{
	int e = rc < 0 ? -rc : rc;
	switch (e) {
	case 0: return "0";
	case WEFT_ERR_PLUGIN: return "WEFT_ERR_PLUGIN";
	case WEFT_ERR_ABI: return "WEFT_ERR_ABI";
	case WEFT_ERR_CONFIG: return "WEFT_ERR_CONFIG";
	case WEFT_ERR_PEER: return "WEFT_ERR_PEER";
	case WEFT_ERR_ABORTED: return "WEFT_ERR_ABORTED";
	case WEFT_ERR_PROTOCOL: return "WEFT_ERR_PROTOCOL";
	case WEFT_ERR_AUTH: return "WEFT_ERR_AUTH";
	case WEFT_ERR_TRANSPORT: return "WEFT_ERR_TRANSPORT";
	case WEFT_ERR_NO_DEVICE: return "WEFT_ERR_NO_DEVICE";
	case WEFT_ERR_MISMATCH: return "WEFT_ERR_MISMATCH";
	/* The errno values weft and its libraries return. Aliases (EWOULDBLOCK,
	 * EOPNOTSUPP, EDEADLOCK) share a value with the name given here. */
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case ESRCH: return "ESRCH";
	case EINTR: return "EINTR";
	case EIO: return "EIO";
	case ENXIO: return "ENXIO";
	case E2BIG: return "E2BIG";
	case EBADF: return "EBADF";
	case ECHILD: return "ECHILD";
	case EAGAIN: return "EAGAIN";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	case EFAULT: return "EFAULT";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case EXDEV: return "EXDEV";
	case ENODEV: return "ENODEV";
	case ENOTDIR: return "ENOTDIR";
	case EISDIR: return "EISDIR";
	case EINVAL: return "EINVAL";
	case ENFILE: return "ENFILE";
	case EMFILE: return "EMFILE";
	case ENOTTY: return "ENOTTY";
	case EFBIG: return "EFBIG";
	case ENOSPC: return "ENOSPC";
	case ESPIPE: return "ESPIPE";
	case EROFS: return "EROFS";
	case EPIPE: return "EPIPE";
	case ERANGE: return "ERANGE";
	case EDEADLK: return "EDEADLK";
	case ENAMETOOLONG: return "ENAMETOOLONG";
	case ENOSYS: return "ENOSYS";
	case ENOTEMPTY: return "ENOTEMPTY";
	case ELOOP: return "ELOOP";
	case ENOMSG: return "ENOMSG";
	case ENODATA: return "ENODATA";
	case ETIME: return "ETIME";
	case EPROTO: return "EPROTO";
	case EBADMSG: return "EBADMSG";
	case EOVERFLOW: return "EOVERFLOW";
	case ENOTSOCK: return "ENOTSOCK";
	case EMSGSIZE: return "EMSGSIZE";
	case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
	case ENOTSUP: return "ENOTSUP";
#if defined(EOPNOTSUPP) && EOPNOTSUPP != ENOTSUP
	case EOPNOTSUPP: return "EOPNOTSUPP";
#endif
	case EAFNOSUPPORT: return "EAFNOSUPPORT";
	case EADDRINUSE: return "EADDRINUSE";
	case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
	case ENETDOWN: return "ENETDOWN";
	case ENETUNREACH: return "ENETUNREACH";
	case ENETRESET: return "ENETRESET";
	case ECONNABORTED: return "ECONNABORTED";
	case ECONNRESET: return "ECONNRESET";
	case ENOBUFS: return "ENOBUFS";
	case EISCONN: return "EISCONN";
	case ENOTCONN: return "ENOTCONN";
	case ESHUTDOWN: return "ESHUTDOWN";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ECONNREFUSED: return "ECONNREFUSED";
	case EHOSTDOWN: return "EHOSTDOWN";
	case EHOSTUNREACH: return "EHOSTUNREACH";
	case EALREADY: return "EALREADY";
	case EINPROGRESS: return "EINPROGRESS";
	case ECANCELED: return "ECANCELED";
	case EOWNERDEAD: return "EOWNERDEAD";
	case ENOTRECOVERABLE: return "ENOTRECOVERABLE";
	default: return "unknown";
	}
}

/* A human-readable description, the words of the core's weft_strerror (which
 * plugins cannot link): weft's own codes by their meaning, errno values by
 * strerror. Either sign is taken. The string is static. */
static inline const char *weft_kit_strerror(int rc)
{
	int e = rc < 0 ? -rc : rc;
	switch (e) {
	case 0: return "success";
	case WEFT_ERR_PLUGIN: return "plugin could not be loaded or is missing";
	case WEFT_ERR_ABI: return "plugin ABI major mismatch";
	case WEFT_ERR_CONFIG: return "invalid configuration";
	case WEFT_ERR_PEER: return "peer failed";
	case WEFT_ERR_ABORTED: return "communicator aborted";
	case WEFT_ERR_PROTOCOL: return "malformed message from a peer";
	case WEFT_ERR_AUTH: return "peer failed authentication";
	case WEFT_ERR_TRANSPORT: return "transport failure";
	case WEFT_ERR_NO_DEVICE: return "no device";
	case WEFT_ERR_MISMATCH: return "ranks disagree";
	default: break;
	}
	/* glibc's table is constant for known codes (as the core's relies on). */
	return e < WEFT_ERR_FIRST ? strerror(e) : "unknown error";
}

/* ================================================== little-endian wire codecs
 * Fixed-offset accessors for a buffer whose length the caller has checked,
 * and a reader and a writer that check it themselves. Every wire format of
 * the tree is little-endian whatever the host; compilers turn these shifts
 * into single loads and stores on little-endian machines. */

static inline uint16_t weft_kit_le_get16(const void *p)
{
	const unsigned char *b = (const unsigned char *)p;
	return (uint16_t)(b[0] | (b[1] << 8));
}

static inline uint32_t weft_kit_le_get32(const void *p)
{
	const unsigned char *b = (const unsigned char *)p;
	return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}

static inline uint64_t weft_kit_le_get64(const void *p)
{
	const unsigned char *b = (const unsigned char *)p;
	return (uint64_t)weft_kit_le_get32(b) | ((uint64_t)weft_kit_le_get32(b + 4) << 32);
}

static inline void weft_kit_le_put16(void *p, uint16_t v)
{
	unsigned char *b = (unsigned char *)p;
	b[0] = (unsigned char)v;
	b[1] = (unsigned char)(v >> 8);
}

static inline void weft_kit_le_put32(void *p, uint32_t v)
{
	unsigned char *b = (unsigned char *)p;
	b[0] = (unsigned char)v;
	b[1] = (unsigned char)(v >> 8);
	b[2] = (unsigned char)(v >> 16);
	b[3] = (unsigned char)(v >> 24);
}

static inline void weft_kit_le_put64(void *p, uint64_t v)
{
	unsigned char *b = (unsigned char *)p;
	weft_kit_le_put32(b, (uint32_t)v);
	weft_kit_le_put32(b + 4, (uint32_t)(v >> 32));
}

/* A reader over [p, p+len): each read takes the next field. A read past the
 * end reads nothing, returns 0, and sets err to -WEFT_ERR_PROTOCOL (what a
 * malformed peer message is); once err is set every later read does the
 * same, so a parser reads all its fields and checks err once. */
struct weft_kit_rd {
	const unsigned char *p;
	size_t len, off;
	int err;
};

static inline struct weft_kit_rd weft_kit_rd_init(const void *buf, size_t len)
{
	struct weft_kit_rd rd;
	rd.p = (const unsigned char *)buf;
	rd.len = buf ? len : 0;
	rd.off = 0;
	rd.err = 0;
	return rd;
}

/* The next n bytes, or NULL (err set) when fewer are left. */
static inline const unsigned char *weft_kit_rd_take(struct weft_kit_rd *rd, size_t n)
{
	if (rd->err || n > rd->len - rd->off) {
		rd->err = -WEFT_ERR_PROTOCOL;
		return NULL;
	}
	const unsigned char *at = rd->p + rd->off;
	rd->off += n;
	return at;
}

static inline uint8_t weft_kit_rd_u8(struct weft_kit_rd *rd)
{
	const unsigned char *b = weft_kit_rd_take(rd, 1);
	return b ? b[0] : 0;
}

static inline uint16_t weft_kit_rd_u16(struct weft_kit_rd *rd)
{
	const unsigned char *b = weft_kit_rd_take(rd, 2);
	return b ? weft_kit_le_get16(b) : 0;
}

static inline uint32_t weft_kit_rd_u32(struct weft_kit_rd *rd)
{
	const unsigned char *b = weft_kit_rd_take(rd, 4);
	return b ? weft_kit_le_get32(b) : 0;
}

static inline uint64_t weft_kit_rd_u64(struct weft_kit_rd *rd)
{
	const unsigned char *b = weft_kit_rd_take(rd, 8);
	return b ? weft_kit_le_get64(b) : 0;
}

/* Copies the next n bytes into out; past the end, zero-fills out instead. */
static inline void weft_kit_rd_bytes(struct weft_kit_rd *rd, void *out, size_t n)
{
	const unsigned char *b = weft_kit_rd_take(rd, n);
	if (b)
		memcpy(out, b, n);
	else if (n)
		memset(out, 0, n);
}

/* Bytes not yet read (0 once err is set). */
static inline size_t weft_kit_rd_left(const struct weft_kit_rd *rd)
{
	return rd->err ? 0 : rd->len - rd->off;
}

/* A writer into [p, p+len), the same way round: a write past the end writes
 * nothing and sets err to -ENOSPC (the answer a serialize op gives for a
 * short buffer), off still counting the bytes the whole message needs. */
struct weft_kit_wr {
	unsigned char *p;
	size_t len, off;
	int err;
};

static inline struct weft_kit_wr weft_kit_wr_init(void *buf, size_t len)
{
	struct weft_kit_wr wr;
	wr.p = (unsigned char *)buf;
	wr.len = buf ? len : 0;
	wr.off = 0;
	wr.err = 0;
	return wr;
}

/* Where the next n bytes go, or NULL (err set) when they do not fit. */
static inline unsigned char *weft_kit_wr_take(struct weft_kit_wr *wr, size_t n)
{
	size_t at = wr->off;
	wr->off = n > SIZE_MAX - at ? SIZE_MAX : at + n;
	if (wr->err || at > wr->len || n > wr->len - at) {
		wr->err = -ENOSPC;
		return NULL;
	}
	return wr->p + at;
}

static inline void weft_kit_wr_u8(struct weft_kit_wr *wr, uint8_t v)
{
	unsigned char *b = weft_kit_wr_take(wr, 1);
	if (b)
		b[0] = v;
}

static inline void weft_kit_wr_u16(struct weft_kit_wr *wr, uint16_t v)
{
	unsigned char *b = weft_kit_wr_take(wr, 2);
	if (b)
		weft_kit_le_put16(b, v);
}

static inline void weft_kit_wr_u32(struct weft_kit_wr *wr, uint32_t v)
{
	unsigned char *b = weft_kit_wr_take(wr, 4);
	if (b)
		weft_kit_le_put32(b, v);
}

static inline void weft_kit_wr_u64(struct weft_kit_wr *wr, uint64_t v)
{
	unsigned char *b = weft_kit_wr_take(wr, 8);
	if (b)
		weft_kit_le_put64(b, v);
}

/* Copies n bytes from src; src NULL writes n zero bytes. */
static inline void weft_kit_wr_bytes(struct weft_kit_wr *wr, const void *src, size_t n)
{
	unsigned char *b = weft_kit_wr_take(wr, n);
	if (b && n) {
		if (src)
			memcpy(b, src, n);
		else
			memset(b, 0, n);
	}
}

/* ============================================================== conversions
 * Every narrow float converts through float, rounding to nearest even. */

static inline float weft_kit__bits_float(uint32_t bits)
{
	float f;
	memcpy(&f, &bits, sizeof(f));
	return f;
}

static inline uint32_t weft_kit__float_bits(float f)
{
	uint32_t x;
	memcpy(&x, &f, sizeof(x));
	return x;
}

/* IEEE half. */
static inline float weft_kit_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
	if (exp == 0) /* zero or subnormal: mant * 2^-24, exact in float */
		return weft_kit__bits_float(weft_kit__float_bits((float)mant * 5.9604644775390625e-8f) | sign);
	if (exp == 31)
		return weft_kit__bits_float(sign | 0x7f800000u | (mant << 13));
	return weft_kit__bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

static inline uint16_t weft_kit_float_to_half(float f)
{
	uint32_t x = weft_kit__float_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
	uint32_t a = x & 0x7fffffffu;
	if (a >= 0x7f800000u) /* inf stays inf; NaN stays a quiet NaN */
		return (uint16_t)(sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u));
	if (a >= 0x477ff000u) /* 65520 and up round to inf */
		return (uint16_t)(sign | 0x7c00u);
	if (a < 0x38800000u) {
		/* Below the smallest normal half: adding 0.5 puts the half's
		 * subnormal unit (2^-24) in the float's last mantissa bit, and the
		 * FPU rounds to nearest even for us. */
		uint32_t b = weft_kit__float_bits(weft_kit__bits_float(a) + 0.5f);
		return (uint16_t)(sign | (uint16_t)(b - 0x3f000000u));
	}
	/* Normal: rebias the exponent (-112 << 23) and round to nearest even on
	 * the 13 bits that go. */
	uint32_t odd = (a >> 13) & 1u;
	a += 0xc8000fffu + odd;
	return (uint16_t)(sign | (uint16_t)(a >> 13));
}

/* bfloat16: the top half of a float. */
static inline float weft_kit_bf16_to_float(uint16_t h)
{
	return weft_kit__bits_float((uint32_t)h << 16);
}

static inline uint16_t weft_kit_float_to_bf16(float f)
{
	uint32_t x = weft_kit__float_bits(f);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40u); /* keep NaN a NaN */
	x += 0x7fffu + ((x >> 16) & 1u);
	return (uint16_t)(x >> 16);
}

/* fp8 E4M3, the "fn" variant of NVIDIA and OCP: bias 7, no infinity,
 * 0x7f/0xff NaN, largest finite 448 (0x7e), subnormal unit 2^-9. From float
 * as CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) does:
 * nearest even, anything of magnitude 448 or more (infinity too) saturates
 * to +-448, NaN becomes 0x7f whatever its sign. */
static inline float weft_kit_fp8_e4m3_to_float(uint8_t v)
{
	uint32_t sign = (uint32_t)(v & 0x80u) << 24;
	uint32_t exp = (v >> 3) & 0xfu, mant = v & 0x7u;
	if ((v & 0x7fu) == 0x7fu)
		return weft_kit__bits_float(0x7fc00000u);
	if (exp == 0) /* zero or subnormal: mant * 2^-9 */
		return weft_kit__bits_float(weft_kit__float_bits((float)mant * 0.001953125f) | sign);
	return weft_kit__bits_float(sign | ((exp + 120u) << 23) | (mant << 20));
}

static inline uint8_t weft_kit_float_to_fp8_e4m3(float f)
{
	uint32_t x = weft_kit__float_bits(f);
	uint8_t sign = (uint8_t)((x >> 24) & 0x80u);
	uint32_t a = x & 0x7fffffffu;
	if (a > 0x7f800000u)
		return 0x7f;
	if (a >= 0x43e00000u) /* 448 and up: the largest finite */
		return (uint8_t)(sign | 0x7eu);
	if (a < 0x3c800000u) {
		/* Below 2^-6, the smallest normal: 16384 has an ulp of 2^-9, the
		 * subnormal unit, so the sum's last mantissa bits count units,
		 * rounded to nearest even by the FPU (8 units is 2^-6 itself). */
		uint32_t b = weft_kit__float_bits(weft_kit__bits_float(a) + 16384.0f);
		return (uint8_t)(sign | (uint8_t)(b - 0x46800000u));
	}
	/* Normal: round to nearest even on the 20 bits that go (a carry moves
	 * into the exponent, as it should), then rebias (127 - 7). */
	a += 0x7ffffu + ((a >> 20) & 1u);
	a -= 120u << 23;
	return (uint8_t)(sign | (uint8_t)(a >> 20));
}

/* fp8 E5M2: IEEE-like, bias 15, infinity 0x7c, NaN above it, largest finite
 * 57344 (0x7b), subnormal unit 2^-16. From float as CUDA's
 * __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2): nearest even,
 * magnitudes of 57344 and more (infinity too) saturate to +-57344, NaN
 * becomes 0x7f. */
static inline float weft_kit_fp8_e5m2_to_float(uint8_t v)
{
	uint32_t sign = (uint32_t)(v & 0x80u) << 24;
	uint32_t exp = (v >> 2) & 0x1fu, mant = v & 0x3u;
	if (exp == 31)
		return weft_kit__bits_float(mant ? 0x7fc00000u : sign | 0x7f800000u);
	if (exp == 0) /* zero or subnormal: mant * 2^-16 */
		return weft_kit__bits_float(weft_kit__float_bits((float)mant * 1.52587890625e-5f) | sign);
	return weft_kit__bits_float(sign | ((exp + 112u) << 23) | (mant << 21));
}

static inline uint8_t weft_kit_float_to_fp8_e5m2(float f)
{
	uint32_t x = weft_kit__float_bits(f);
	uint8_t sign = (uint8_t)((x >> 24) & 0x80u);
	uint32_t a = x & 0x7fffffffu;
	if (a > 0x7f800000u)
		return 0x7f;
	if (a >= 0x47600000u) /* 57344 and up: the largest finite */
		return (uint8_t)(sign | 0x7bu);
	if (a < 0x38800000u) {
		/* Below 2^-14: 128 has an ulp of 2^-16, the subnormal unit. */
		uint32_t b = weft_kit__float_bits(weft_kit__bits_float(a) + 128.0f);
		return (uint8_t)(sign | (uint8_t)(b - 0x43000000u));
	}
	a += 0xfffffu + ((a >> 21) & 1u);
	a -= 112u << 23;
	return (uint8_t)(sign | (uint8_t)(a >> 21));
}

/* ================================================================ reductions
 * On host memory, every weft type and operation. Results are what NCCL's
 * host-side references give: integers wrap, floats round once per step, the
 * narrow floats (float16, bfloat16, fp8) are widened to float, combined and
 * rounded back to nearest even at each step (fp8 saturating, as above). The
 * loops are written for the vectorizer: on GCC before 12 build the file that
 * calls them with -ftree-loop-vectorize -fvect-cost-model=dynamic
 * (plugins/algo-host/CMakeLists.txt says why). */

/* Bytes per element; 0 for an unknown type (weft_datatype_size's table). */
static inline size_t weft_kit_datatype_size(enum weft_datatype t)
{
	switch (t) {
	case WEFT_INT8: case WEFT_UINT8: case WEFT_FP8_E4M3: case WEFT_FP8_E5M2: return 1;
	case WEFT_FLOAT16: case WEFT_BFLOAT16: return 2;
	case WEFT_INT32: case WEFT_UINT32: case WEFT_FLOAT32: return 4;
	case WEFT_INT64: case WEFT_UINT64: case WEFT_FLOAT64: return 8;
	default: return 0;
	}
}

/* Whether the functions below serve (t, op): every type of weft.h with every
 * operation. A pre-multiplied sum (WEFT_PREMUL_SUM) runs as weft_kit_scale of
 * each input, then WEFT_SUM. */
static inline int weft_kit_reduce_supported(enum weft_datatype t, enum weft_redop op)
{
	return (int)op >= 0 && op < WEFT_REDOP_COUNT && weft_kit_datatype_size(t) != 0;
}

/* Integers add and multiply in the unsigned type of the same width, so that
 * overflow wraps instead of being undefined. d = d op s, or with three
 * operands d = a op b (d may be a or b: element i reads both before it
 * writes). AVG sums; weft_kit_finish divides. */
#define WEFT_KIT__REDUCE(name, T, U)                                                                   \
	static inline void weft_kit__red_##name(enum weft_redop op, T *d, const T *s, size_t n)       \
	{                                                                                              \
		switch (op) {                                                                          \
		case WEFT_PROD:                                                                        \
			for (size_t i = 0; i < n; i++)                                                 \
				d[i] = (T)((U)((U)d[i] * (U)s[i]));                                    \
			break;                                                                         \
		case WEFT_MIN:                                                                         \
			for (size_t i = 0; i < n; i++)                                                 \
				d[i] = s[i] < d[i] ? s[i] : d[i];                                      \
			break;                                                                         \
		case WEFT_MAX:                                                                         \
			for (size_t i = 0; i < n; i++)                                                 \
				d[i] = s[i] > d[i] ? s[i] : d[i];                                      \
			break;                                                                         \
		default: /* sum, avg, premul_sum */                                                    \
			for (size_t i = 0; i < n; i++)                                                 \
				d[i] = (T)((U)d[i] + (U)s[i]);                                         \
			break;                                                                         \
		}                                                                                      \
	}                                                                                              \
	static inline void weft_kit__red3_##name(enum weft_redop op, T *d, const T *a, const T *b,    \
						 size_t n)                                             \
	{                                                                                              \
		switch (op) {                                                                          \
		case WEFT_PROD:                                                                        \
			for (size_t i = 0; i < n; i++)                                                 \
				d[i] = (T)((U)((U)a[i] * (U)b[i]));                                    \
			break;                                                                         \
		case WEFT_MIN:                                                                         \
			for (size_t i = 0; i < n; i++)                                                 \
				d[i] = b[i] < a[i] ? b[i] : a[i];                                      \
			break;                                                                         \
		case WEFT_MAX:                                                                         \
			for (size_t i = 0; i < n; i++)                                                 \
				d[i] = b[i] > a[i] ? b[i] : a[i];                                      \
			break;                                                                         \
		default:                                                                               \
			for (size_t i = 0; i < n; i++)                                                 \
				d[i] = (T)((U)a[i] + (U)b[i]);                                         \
			break;                                                                         \
		}                                                                                      \
	}

WEFT_KIT__REDUCE(i8, int8_t, uint8_t)
WEFT_KIT__REDUCE(u8, uint8_t, uint8_t)
WEFT_KIT__REDUCE(i32, int32_t, uint32_t)
WEFT_KIT__REDUCE(u32, uint32_t, uint32_t)
WEFT_KIT__REDUCE(i64, int64_t, uint64_t)
WEFT_KIT__REDUCE(u64, uint64_t, uint64_t)
WEFT_KIT__REDUCE(f32, float, float)
WEFT_KIT__REDUCE(f64, double, double)

#undef WEFT_KIT__REDUCE

static inline float weft_kit__op_float(enum weft_redop op, float a, float b)
{
	switch (op) {
	case WEFT_PROD: return a * b;
	case WEFT_MIN: return b < a ? b : a;
	case WEFT_MAX: return b > a ? b : a;
	default: return a + b;
	}
}

/* The narrow floats: one element widened to float, and back. */
static inline float weft_kit__narrow_get(enum weft_datatype t, const void *p, size_t i)
{
	switch (t) {
	case WEFT_FLOAT16: return weft_kit_half_to_float(((const uint16_t *)p)[i]);
	case WEFT_BFLOAT16: return weft_kit_bf16_to_float(((const uint16_t *)p)[i]);
	case WEFT_FP8_E4M3: return weft_kit_fp8_e4m3_to_float(((const uint8_t *)p)[i]);
	default: return weft_kit_fp8_e5m2_to_float(((const uint8_t *)p)[i]);
	}
}

static inline void weft_kit__narrow_put(enum weft_datatype t, void *p, size_t i, float v)
{
	switch (t) {
	case WEFT_FLOAT16: ((uint16_t *)p)[i] = weft_kit_float_to_half(v); break;
	case WEFT_BFLOAT16: ((uint16_t *)p)[i] = weft_kit_float_to_bf16(v); break;
	case WEFT_FP8_E4M3: ((uint8_t *)p)[i] = weft_kit_float_to_fp8_e4m3(v); break;
	default: ((uint8_t *)p)[i] = weft_kit_float_to_fp8_e5m2(v); break;
	}
}

/* d = a op b for one narrow float type (d may be a or b), rounding once per
 * element; one loop per type, so that no element pays for choosing it. */
#define WEFT_KIT__REDUCE_NARROW(name, S, to_float, from_float)                                          \
	static inline void weft_kit__red3_##name(enum weft_redop op, S *d, const S *a, const S *b, size_t n) \
	{                                                                                               \
		for (size_t i = 0; i < n; i++)                                                          \
			d[i] = from_float(weft_kit__op_float(op, to_float(a[i]), to_float(b[i])));      \
	}

WEFT_KIT__REDUCE_NARROW(f16, uint16_t, weft_kit_half_to_float, weft_kit_float_to_half)
WEFT_KIT__REDUCE_NARROW(bf16, uint16_t, weft_kit_bf16_to_float, weft_kit_float_to_bf16)
WEFT_KIT__REDUCE_NARROW(e4m3, uint8_t, weft_kit_fp8_e4m3_to_float, weft_kit_float_to_fp8_e4m3)
WEFT_KIT__REDUCE_NARROW(e5m2, uint8_t, weft_kit_fp8_e5m2_to_float, weft_kit_float_to_fp8_e5m2)

static inline void weft_kit__red3_narrow(enum weft_datatype t, enum weft_redop op, void *d, const void *a,
					 const void *b, size_t n)
{
	switch (t) {
	case WEFT_FLOAT16:
		weft_kit__red3_f16(op, (uint16_t *)d, (const uint16_t *)a, (const uint16_t *)b, n);
		break;
	case WEFT_BFLOAT16:
		weft_kit__red3_bf16(op, (uint16_t *)d, (const uint16_t *)a, (const uint16_t *)b, n);
		break;
	case WEFT_FP8_E4M3:
		weft_kit__red3_e4m3(op, (uint8_t *)d, (const uint8_t *)a, (const uint8_t *)b, n);
		break;
	default:
		weft_kit__red3_e5m2(op, (uint8_t *)d, (const uint8_t *)a, (const uint8_t *)b, n);
		break;
	}
}

#undef WEFT_KIT__REDUCE_NARROW

/* dst[i] = a[i] op b[i] over n elements of t; dst may be a or b. AVG (and
 * PREMUL_SUM) sum. Returns 0, or -ENOTSUP for a type or op weft does not
 * name, having done nothing. */
static inline int weft_kit_reduce3(enum weft_datatype t, enum weft_redop op, void *dst, const void *a,
				   const void *b, size_t n)
{
	if (!weft_kit_reduce_supported(t, op))
		return -ENOTSUP;
	switch (t) {
	case WEFT_INT8: weft_kit__red3_i8(op, (int8_t *)dst, (const int8_t *)a, (const int8_t *)b, n); break;
	case WEFT_UINT8: weft_kit__red3_u8(op, (uint8_t *)dst, (const uint8_t *)a, (const uint8_t *)b, n); break;
	case WEFT_INT32: weft_kit__red3_i32(op, (int32_t *)dst, (const int32_t *)a, (const int32_t *)b, n); break;
	case WEFT_UINT32:
		weft_kit__red3_u32(op, (uint32_t *)dst, (const uint32_t *)a, (const uint32_t *)b, n);
		break;
	case WEFT_INT64: weft_kit__red3_i64(op, (int64_t *)dst, (const int64_t *)a, (const int64_t *)b, n); break;
	case WEFT_UINT64:
		weft_kit__red3_u64(op, (uint64_t *)dst, (const uint64_t *)a, (const uint64_t *)b, n);
		break;
	case WEFT_FLOAT32: weft_kit__red3_f32(op, (float *)dst, (const float *)a, (const float *)b, n); break;
	case WEFT_FLOAT64: weft_kit__red3_f64(op, (double *)dst, (const double *)a, (const double *)b, n); break;
	default: weft_kit__red3_narrow(t, op, dst, a, b, n); break;
	}
	return 0;
}

/* dst[i] = dst[i] op src[i] over n elements of t. AVG (and PREMUL_SUM) sum;
 * an unknown type or op does nothing (check weft_kit_reduce_supported). */
static inline void weft_kit_reduce(enum weft_datatype t, enum weft_redop op, void *dst, const void *src, size_t n)
{
	if (!weft_kit_reduce_supported(t, op))
		return;
	switch (t) {
	case WEFT_INT8: weft_kit__red_i8(op, (int8_t *)dst, (const int8_t *)src, n); break;
	case WEFT_UINT8: weft_kit__red_u8(op, (uint8_t *)dst, (const uint8_t *)src, n); break;
	case WEFT_INT32: weft_kit__red_i32(op, (int32_t *)dst, (const int32_t *)src, n); break;
	case WEFT_UINT32: weft_kit__red_u32(op, (uint32_t *)dst, (const uint32_t *)src, n); break;
	case WEFT_INT64: weft_kit__red_i64(op, (int64_t *)dst, (const int64_t *)src, n); break;
	case WEFT_UINT64: weft_kit__red_u64(op, (uint64_t *)dst, (const uint64_t *)src, n); break;
	case WEFT_FLOAT32: weft_kit__red_f32(op, (float *)dst, (const float *)src, n); break;
	case WEFT_FLOAT64: weft_kit__red_f64(op, (double *)dst, (const double *)src, n); break;
	default: weft_kit__red3_narrow(t, op, dst, dst, src, n); break;
	}
}

#define WEFT_KIT__SCALE(T, U)                                             \
	do {                                                              \
		T s_, *d_ = (T *)dst;                                     \
		const T *x_ = (const T *)src;                             \
		memcpy(&s_, scalar, sizeof(s_));                          \
		for (size_t i_ = 0; i_ < n; i_++)                         \
			d_[i_] = (T)((U)x_[i_] * (U)s_);                  \
	} while (0)

/* dst[i] = src[i] * scalar, the input of a pre-multiplied sum: scalar is one
 * element of t (its bytes, any alignment); dst may be src. Integers wrap,
 * floats round once, narrow floats through float (the product of two of them
 * is exact there, so the one rounding is NCCL's). Returns 0, or -ENOTSUP for
 * a type weft does not name. */
static inline int weft_kit_scale(enum weft_datatype t, void *dst, const void *src, const void *scalar, size_t n)
{
	switch (t) {
	case WEFT_INT8: WEFT_KIT__SCALE(int8_t, uint8_t); return 0;
	case WEFT_UINT8: WEFT_KIT__SCALE(uint8_t, uint8_t); return 0;
	case WEFT_INT32: WEFT_KIT__SCALE(int32_t, uint32_t); return 0;
	case WEFT_UINT32: WEFT_KIT__SCALE(uint32_t, uint32_t); return 0;
	case WEFT_INT64: WEFT_KIT__SCALE(int64_t, uint64_t); return 0;
	case WEFT_UINT64: WEFT_KIT__SCALE(uint64_t, uint64_t); return 0;
	case WEFT_FLOAT32: WEFT_KIT__SCALE(float, float); return 0;
	case WEFT_FLOAT64: WEFT_KIT__SCALE(double, double); return 0;
	case WEFT_FLOAT16: case WEFT_BFLOAT16: case WEFT_FP8_E4M3: case WEFT_FP8_E5M2: {
		float s = weft_kit__narrow_get(t, scalar, 0);
		for (size_t i = 0; i < n; i++)
			weft_kit__narrow_put(t, dst, i, weft_kit__narrow_get(t, src, i) * s);
		return 0;
	}
	default:
		return -ENOTSUP;
	}
}

#undef WEFT_KIT__SCALE

#define WEFT_KIT__DIV(T)                                     \
	do {                                                 \
		T *q_ = (T *)dst;                            \
		for (size_t i_ = 0; i_ < n; i_++)            \
			q_[i_] = (T)(q_[i_] / (T)nranks);    \
	} while (0)

/* The end of a reduction over nranks inputs: for AVG, dst[i] /= nranks in
 * the element type (integers: integer division; narrow floats: through float,
 * rounded once). Any other op, or nranks <= 1, leaves dst alone. */
static inline void weft_kit_finish(enum weft_datatype t, enum weft_redop op, void *dst, size_t n, int nranks)
{
	if (op != WEFT_AVG || nranks <= 1)
		return;
	switch (t) {
	case WEFT_INT8: WEFT_KIT__DIV(int8_t); break;
	case WEFT_UINT8: WEFT_KIT__DIV(uint8_t); break;
	case WEFT_INT32: WEFT_KIT__DIV(int32_t); break;
	case WEFT_UINT32: WEFT_KIT__DIV(uint32_t); break;
	case WEFT_INT64: WEFT_KIT__DIV(int64_t); break;
	case WEFT_UINT64: WEFT_KIT__DIV(uint64_t); break;
	case WEFT_FLOAT32: WEFT_KIT__DIV(float); break;
	case WEFT_FLOAT64: WEFT_KIT__DIV(double); break;
	case WEFT_FLOAT16: case WEFT_BFLOAT16: case WEFT_FP8_E4M3: case WEFT_FP8_E5M2:
		for (size_t i = 0; i < n; i++)
			weft_kit__narrow_put(t, dst, i, weft_kit__narrow_get(t, dst, i) / (float)nranks);
		break;
	default:
		break;
	}
}

#undef WEFT_KIT__DIV

/* ================================================================ parameters
 * A table of rows, one per parameter, each naming the field of a struct its
 * value lands in: weft_kit_params_declare declares them all (in
 * weft_plugin_init), weft_kit_params_load reads them all into a struct,
 * checking bounds and names, and logs what is wrong by the parameter's
 * environment name (WEFT_<SECTION>_<KEY>), its value and what is allowed.
 * Make rows with the WEFT_KIT_P_* macros below. */

enum weft_kit_param_kind {
	WEFT_KIT_PARAM_INT,    /* WEFT_PARAM_INT into a signed integer field (int64_t, int, ...), within min.i..max.i */
	WEFT_KIT_PARAM_SIZE,   /* WEFT_PARAM_SIZE into an unsigned field (uint64_t, size_t, unsigned), min.u..max.u */
	WEFT_KIT_PARAM_BOOL,   /* WEFT_PARAM_BOOL into an int or a bool: 0 or 1 */
	WEFT_KIT_PARAM_DOUBLE, /* WEFT_PARAM_DOUBLE into a double, within min.d..max.d */
	WEFT_KIT_PARAM_STRING, /* WEFT_PARAM_STRING into a const char *: the core's copy (lives until exit), NULL when unset */
	WEFT_KIT_PARAM_STRBUF, /* WEFT_PARAM_STRING copied into a char array: "" when unset; too long is an error */
	WEFT_KIT_PARAM_ENUM    /* WEFT_PARAM_STRING that must be one of names, into an int (or enum): its index */
};

union weft_kit_bound {
	int64_t i;
	uint64_t u;
	double d;
};

struct weft_kit_param {
	const char *key;           /* [a-z0-9_-]+ */
	enum weft_kit_param_kind kind;
	const char *default_value; /* text, as weft_param_decl's; NULL: unset (strings only) */
	const char *help;          /* one sentence, shown by weft-info -c */
	size_t offset;             /* of the field in the struct weft_kit_params_load fills */
	size_t field_size;         /* sizeof that field */
	union weft_kit_bound min, max; /* INT, SIZE, DOUBLE: inclusive bounds */
	/* ENUM: the accepted values, NULL-terminated. STRING and STRBUF: NULL
	 * for any text, else the accepted values likewise. An unset or empty
	 * value takes the default where names are given. */
	const char *const *names;
};

#define WEFT_KIT__FIELD(type, field) offsetof(type, field), sizeof(((type *)0)->field)

/* Rows (C99 designated initializers; C++ from C++20). `type` is the struct
 * the values land in, `field` its member. */
#define WEFT_KIT_P_INT(key, type, field, def, lo, hi, help) \
	{(key), WEFT_KIT_PARAM_INT, (def), (help), WEFT_KIT__FIELD(type, field), {.i = (lo)}, {.i = (hi)}, NULL}
#define WEFT_KIT_P_SIZE(key, type, field, def, lo, hi, help) \
	{(key), WEFT_KIT_PARAM_SIZE, (def), (help), WEFT_KIT__FIELD(type, field), {.u = (lo)}, {.u = (hi)}, NULL}
#define WEFT_KIT_P_BOOL(key, type, field, def, help) \
	{(key), WEFT_KIT_PARAM_BOOL, (def), (help), WEFT_KIT__FIELD(type, field), {.i = 0}, {.i = 1}, NULL}
#define WEFT_KIT_P_DOUBLE(key, type, field, def, lo, hi, help) \
	{(key), WEFT_KIT_PARAM_DOUBLE, (def), (help), WEFT_KIT__FIELD(type, field), {.d = (lo)}, {.d = (hi)}, NULL}
#define WEFT_KIT_P_STRING(key, type, field, def, names, help) \
	{(key), WEFT_KIT_PARAM_STRING, (def), (help), WEFT_KIT__FIELD(type, field), {.i = 0}, {.i = 0}, (names)}
#define WEFT_KIT_P_STRBUF(key, type, field, def, names, help) \
	{(key), WEFT_KIT_PARAM_STRBUF, (def), (help), WEFT_KIT__FIELD(type, field), {.i = 0}, {.i = 0}, (names)}
#define WEFT_KIT_P_ENUM(key, type, field, def, names, help) \
	{(key), WEFT_KIT_PARAM_ENUM, (def), (help), WEFT_KIT__FIELD(type, field), {.i = 0}, {.i = 0}, (names)}

/* WEFT_<SECTION>_<KEY>, upper-cased, '-' as '_': the name users set. */
static inline void weft_kit_param_env(const char *section, const char *key, char *buf, size_t len)
{
	const char *parts[4] = {"WEFT_", section ? section : "", "_", key ? key : ""};
	size_t at = 0;
	if (!len)
		return;
	/* By hand, not snprintf: a short buffer truncates without a warning. */
	for (int k = 0; k < 4; k++)
		for (const char *c = parts[k]; *c && at + 1 < len; c++)
			buf[at++] = *c >= 'a' && *c <= 'z' ? (char)(*c - 'a' + 'A') : *c == '-' ? '_' : *c;
	buf[at] = '\0';
}

static inline enum weft_param_type weft_kit__param_type(enum weft_kit_param_kind k)
{
	switch (k) {
	case WEFT_KIT_PARAM_INT: return WEFT_PARAM_INT;
	case WEFT_KIT_PARAM_SIZE: return WEFT_PARAM_SIZE;
	case WEFT_KIT_PARAM_BOOL: return WEFT_PARAM_BOOL;
	case WEFT_KIT_PARAM_DOUBLE: return WEFT_PARAM_DOUBLE;
	default: return WEFT_PARAM_STRING;
	}
}

/* The index of v in names, or -1. */
static inline int weft_kit__name_index(const char *const *names, const char *v)
{
	for (int i = 0; names && names[i]; i++)
		if (v && strcmp(names[i], v) == 0)
			return i;
	return -1;
}

/* "a, b, c" into buf. */
static inline void weft_kit__name_list(const char *const *names, char *buf, size_t len)
{
	size_t at = 0;
	buf[0] = '\0';
	for (int i = 0; names && names[i] && at < len; i++) {
		int w = snprintf(buf + at, len - at, "%s%s", i ? ", " : "", names[i]);
		if (w < 0)
			break;
		at += (size_t)w;
	}
}

/* Declares n rows in section (the plugin's name; not NULL). -EEXIST (the file
 * initialized twice, as a test harness may do) leaves the first declaration
 * standing. A row the kit cannot load (an ENUM without a default, a default
 * outside names, a field of a size its kind does not take) is refused here,
 * -EINVAL. Returns 0, or the first error, logged with the parameter's name. */
static inline int weft_kit_params_declare(const struct weft_core_api *core, const char *section,
					  const struct weft_kit_param *rows, size_t n)
{
	if (!core || !section || (n && !rows))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		const struct weft_kit_param *r = &rows[i];
		size_t fs = r->field_size;
		int ok;
		switch (r->kind) {
		case WEFT_KIT_PARAM_INT:
		case WEFT_KIT_PARAM_SIZE: ok = fs == 1 || fs == 2 || fs == 4 || fs == 8; break;
		case WEFT_KIT_PARAM_BOOL: ok = fs == 1 || fs == sizeof(int); break;
		case WEFT_KIT_PARAM_DOUBLE: ok = fs == sizeof(double); break;
		case WEFT_KIT_PARAM_STRING: ok = fs == sizeof(const char *); break;
		case WEFT_KIT_PARAM_STRBUF: ok = fs >= 1; break;
		case WEFT_KIT_PARAM_ENUM: ok = fs == sizeof(int) && r->names && r->default_value; break;
		default: ok = 0; break;
		}
		if (ok && r->names && r->default_value && weft_kit__name_index(r->names, r->default_value) < 0)
			ok = 0;
		if (!ok) {
			core->log(core->self, WEFT_LOG_ERROR,
				  "parameter %s.%s: the row is malformed (kind %d, a %zu-byte field, default %s)", section,
				  r->key ? r->key : "?", (int)r->kind, fs, r->default_value ? r->default_value : "unset");
			return -EINVAL;
		}
		struct weft_param_decl d;
		memset(&d, 0, sizeof(d));
		d.size = sizeof(d);
		d.section = section;
		d.key = r->key;
		d.type = weft_kit__param_type(r->kind);
		d.default_value = r->default_value;
		d.help = r->help;
		if (r->kind == WEFT_KIT_PARAM_INT || r->kind == WEFT_KIT_PARAM_SIZE ||
		    r->kind == WEFT_KIT_PARAM_DOUBLE) {
			d.bounded = 1;
			memcpy(&d.min, &r->min, sizeof(d.min));
			memcpy(&d.max, &r->max, sizeof(d.max));
		} else if (r->kind != WEFT_KIT_PARAM_BOOL) {
			d.names = r->names;
		}
		int rc = core->param_declare(core->self, &d);
		if (rc < 0 && rc != -EEXIST) {
			core->log(core->self, WEFT_LOG_ERROR, "cannot declare parameter %s.%s: %s", section, r->key,
				  weft_kit_strerror(rc));
			return rc;
		}
	}
	return 0;
}

/* What param_get writes, by the parameter's type. */
union weft_kit__value {
	int64_t i;
	uint64_t u;
	int b;
	double d;
	const char *s;
};

/* 1 when the operator set section.key (in the file or the environment), 0
 * when it has its default or cannot be read: a value that was set must be
 * honoured, where a default may fall back. */
static inline int weft_kit_param_is_set(const struct weft_core_api *core, const char *section, const char *key,
					enum weft_param_type type)
{
	union weft_kit__value v;
	enum weft_param_source src = WEFT_PARAM_SRC_DEFAULT;
	return core && core->param_get(core->self, section, key, type, &v, &src) == 0 && src != WEFT_PARAM_SRC_DEFAULT;
}

/* Where a value came from, for the error message: "(from WEFT_X_Y)". */
static inline void weft_kit__param_origin(const char *section, const char *key, enum weft_param_source src,
					  char *buf, size_t len)
{
	char env[128];
	weft_kit_param_env(section, key, env, sizeof(env));
	switch (src) {
	case WEFT_PARAM_SRC_ENV: snprintf(buf, len, "from %s", env); break;
	case WEFT_PARAM_SRC_FILE:
		snprintf(buf, len, "from the config file's [%s] %s; %s overrides it", section, key, env);
		break;
	default: snprintf(buf, len, "its default; set %s or [%s] %s", env, section, key); break;
	}
}

/* A value already within the field's range into a field of 1, 2, 4 or 8
 * bytes (little- or big-endian alike: it goes through the field's type). */
static inline void weft_kit__store_int(void *f, size_t fs, int64_t v)
{
	int32_t x4 = (int32_t)v;
	int16_t x2 = (int16_t)v;
	int8_t x1 = (int8_t)v;
	memcpy(f, fs == 8 ? (const void *)&v : fs == 4 ? (const void *)&x4 : fs == 2 ? (const void *)&x2 : &x1, fs);
}

static inline void weft_kit__store_uint(void *f, size_t fs, uint64_t v)
{
	uint32_t x4 = (uint32_t)v;
	uint16_t x2 = (uint16_t)v;
	uint8_t x1 = (uint8_t)v;
	memcpy(f, fs == 8 ? (const void *)&v : fs == 4 ? (const void *)&x4 : fs == 2 ? (const void *)&x2 : &x1, fs);
}

/* Loads one row into obj; 0 or -WEFT_ERR_CONFIG (logged). */
static inline int weft_kit__param_load(const struct weft_core_api *core, const char *section,
				       const struct weft_kit_param *r, void *obj)
{
	union weft_kit__value v;
	char origin[256], allowed[256];
	enum weft_param_source src = WEFT_PARAM_SRC_DEFAULT;
	void *f = (char *)obj + r->offset;
	memset(&v, 0, sizeof(v));
	int rc = core->param_get(core->self, section, r->key, weft_kit__param_type(r->kind), &v, &src);
	if (rc < 0) {
		core->log(core->self, WEFT_LOG_ERROR, "cannot read parameter %s.%s: %s", section, r->key,
			  weft_kit_strerror(rc));
		return rc;
	}
	weft_kit__param_origin(section, r->key, src, origin, sizeof(origin));
	switch (r->kind) {
	case WEFT_KIT_PARAM_INT: {
		/* The row's bounds, narrowed to what the field holds. */
		int64_t lo = r->min.i, hi = r->max.i;
		if (r->field_size < 8) {
			int64_t fmax = (int64_t)((UINT64_C(1) << (8 * r->field_size - 1)) - 1);
			lo = lo < -fmax - 1 ? -fmax - 1 : lo;
			hi = hi > fmax ? fmax : hi;
		}
		if (v.i < lo || v.i > hi) {
			core->log(core->self, WEFT_LOG_ERROR, "parameter %s.%s=%lld is out of range %lld..%lld (%s)",
				  section, r->key, (long long)v.i, (long long)lo, (long long)hi, origin);
			return -WEFT_ERR_CONFIG;
		}
		weft_kit__store_int(f, r->field_size, v.i);
		return 0;
	}
	case WEFT_KIT_PARAM_SIZE: {
		uint64_t lo = r->min.u, hi = r->max.u;
		if (r->field_size < 8 && hi > (UINT64_C(1) << (8 * r->field_size)) - 1)
			hi = (UINT64_C(1) << (8 * r->field_size)) - 1;
		if (v.u < lo || v.u > hi) {
			core->log(core->self, WEFT_LOG_ERROR, "parameter %s.%s=%llu is out of range %llu..%llu (%s)",
				  section, r->key, (unsigned long long)v.u, (unsigned long long)lo,
				  (unsigned long long)hi, origin);
			return -WEFT_ERR_CONFIG;
		}
		weft_kit__store_uint(f, r->field_size, v.u);
		return 0;
	}
	case WEFT_KIT_PARAM_BOOL:
		if (r->field_size == 1) {
			unsigned char x = v.b != 0;
			memcpy(f, &x, 1);
		} else {
			int x = v.b != 0;
			memcpy(f, &x, sizeof(x));
		}
		return 0;
	case WEFT_KIT_PARAM_DOUBLE:
		if (!(v.d >= r->min.d && v.d <= r->max.d)) {
			core->log(core->self, WEFT_LOG_ERROR, "parameter %s.%s=%g is out of range %g..%g (%s)", section,
				  r->key, v.d, r->min.d, r->max.d, origin);
			return -WEFT_ERR_CONFIG;
		}
		memcpy(f, &v.d, sizeof(v.d));
		return 0;
	default:
		break;
	}
	/* The string kinds. */
	const char *s = v.s;
	if (r->names && (!s || !*s))
		s = r->default_value;
	int idx = weft_kit__name_index(r->names, s);
	if (r->names && s && idx < 0) {
		weft_kit__name_list(r->names, allowed, sizeof(allowed));
		core->log(core->self, WEFT_LOG_ERROR, "parameter %s.%s='%s' is none of %s (%s)", section, r->key, s,
			  allowed, origin);
		return -WEFT_ERR_CONFIG;
	}
	if (r->kind == WEFT_KIT_PARAM_ENUM) {
		memcpy(f, &idx, sizeof(idx));
	} else if (r->kind == WEFT_KIT_PARAM_STRING) {
		memcpy(f, &s, sizeof(s));
	} else {
		size_t sl = s ? strlen(s) : 0;
		if (sl >= r->field_size) {
			core->log(core->self, WEFT_LOG_ERROR, "parameter %s.%s is too long (%zu bytes, at most %zu) (%s)",
				  section, r->key, sl, r->field_size - 1, origin);
			return -WEFT_ERR_CONFIG;
		}
		if (sl)
			memcpy(f, s, sl);
		((char *)f)[sl] = '\0';
	}
	return 0;
}

/* Reads the n rows of section into the fields of obj, which must be the
 * struct the rows were made for. Every row is read, and every bad value
 * logged (once per load) with what is allowed, so a user sees all their
 * mistakes at once. Returns 0, or the first error: -WEFT_ERR_CONFIG for a
 * value out of bounds or not among names, or param_get's own error (-ENOENT
 * for a row never declared). On error obj may hold some of the values:
 * load into a struct that is thrown away on failure. */
static inline int weft_kit_params_load(const struct weft_core_api *core, const char *section,
				       const struct weft_kit_param *rows, size_t n, void *obj)
{
	if (!core || !section || !obj || (n && !rows))
		return -EINVAL;
	int first = 0;
	for (size_t i = 0; i < n; i++) {
		int rc = weft_kit__param_load(core, section, &rows[i], obj);
		if (rc < 0 && first == 0)
			first = rc;
	}
	return first;
}

/* The number of rows of a static table. */
#define WEFT_KIT_NROWS(rows) (sizeof(rows) / sizeof((rows)[0]))

/* ================================================================ logging
 * A line through the core, which prefixes it with the plugin's name (so the
 * format carries none). Below error, nothing is evaluated or formatted when
 * the level is off; errors always go through, since the core keeps the last
 * one for weft_last_error. */
#define WEFT_KIT_LOG(core, level, ...)                                                                \
	do {                                                                                            \
		const struct weft_core_api *weft_kit_c_ = (core);                                       \
		enum weft_log_level weft_kit_l_ = (level);                                              \
		if (weft_kit_l_ <= WEFT_LOG_ERROR || !weft_kit_c_->log_enabled ||                         \
		    weft_kit_c_->log_enabled(weft_kit_c_->self, weft_kit_l_))                           \
			weft_kit_c_->log(weft_kit_c_->self, weft_kit_l_, __VA_ARGS__);                  \
	} while (0)

/* =========================================================== call signatures
 * ABI 0.3: struct weft_coll_args.sig, the 64 bits every rank's call must
 * match (docs/plugin-abi.md, "Call signatures"). The core packs them; a pack
 * sends its own with its first flag, packet or message to each peer it waits
 * on, compares what it receives with weft_kit_sig_diff, and on a difference
 * returns -WEFT_ERR_MISMATCH after logging both with weft_kit_sig_describe.
 *   bits  0-15  the call's number: per communicator for collectives, per
 *               pair of ranks for send/recv (low 16 bits)
 *   bits 16-19  the collective + 1 (so a signature is never 0)
 *   bits 20-24  the datatype
 *   bits 25-28  the operation
 *   bits 29-40  root + 1, 0 for none (low 12 bits)
 *   bits 41-63  23 bits of a hash of the count (send/recv: of the byte counts
 *               between the pair, in order, each direction), and for a call
 *               whose buffers lie in windows, of the windows and offsets
 * A signature of 0 means the check is off ([core] check_calls = 0). */
#define WEFT_KIT_SIG_SEQ(s) ((unsigned)((s) & 0xffffu))
#define WEFT_KIT_SIG_COLL(s) ((int)(((s) >> 16) & 0xfu) - 1)
#define WEFT_KIT_SIG_DTYPE(s) ((int)(((s) >> 20) & 0x1fu))
#define WEFT_KIT_SIG_OP(s) ((int)(((s) >> 25) & 0xfu))
#define WEFT_KIT_SIG_ROOT(s) ((int)(((s) >> 29) & 0xfffu) - 1)
#define WEFT_KIT_SIG_SIZE(s) ((uint64_t)(s) >> 41)

/* Whether a collective reduces (has an operation): allreduce, reduce-scatter
 * and reduce. */
static inline int weft_kit_coll_reduces(enum weft_collective c)
{
	return c == WEFT_COLL_ALLREDUCE || c == WEFT_COLL_REDUCE_SCATTER || c == WEFT_COLL_REDUCE;
}

/* A collective's name for logs ("allreduce", "reduce_scatter", "sendrecv"),
 * "?" for a value weft does not name. */
static inline const char *weft_kit_coll_name(int c)
{
	static const char *const colls[] = {"allreduce", "allgather", "reduce_scatter", "broadcast",
					    "reduce",    "alltoall",  "sendrecv"};
	return c >= 0 && c < (int)(sizeof(colls) / sizeof(colls[0])) ? colls[c] : "?";
}

/* Mixes v into h (a 64-bit finalizer, so near counts land far apart). */
static inline uint64_t weft_kit_sig_mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	return h ^ (h >> 31);
}

static inline uint64_t weft_kit_sig_make(uint64_t seq, int coll, int dtype, int op, int root, uint64_t size_hash)
{
	return (seq & 0xffffu) | ((uint64_t)((coll + 1) & 0xf) << 16) | ((uint64_t)(dtype & 0x1f) << 20) |
	       ((uint64_t)(op & 0xf) << 25) | ((uint64_t)((root + 1) & 0xfff) << 29) |
	       ((size_hash & 0x7fffffull) << 41);
}

/* The first field in which two signatures differ ("call number",
 * "collective", "datatype", "operation", "root", "count or window"), or NULL. */
static inline const char *weft_kit_sig_diff(uint64_t a, uint64_t b)
{
	if (WEFT_KIT_SIG_COLL(a) != WEFT_KIT_SIG_COLL(b))
		return "collective";
	if (WEFT_KIT_SIG_SEQ(a) != WEFT_KIT_SIG_SEQ(b))
		return "call number";
	if (WEFT_KIT_SIG_DTYPE(a) != WEFT_KIT_SIG_DTYPE(b))
		return "datatype";
	if (WEFT_KIT_SIG_OP(a) != WEFT_KIT_SIG_OP(b))
		return "operation";
	if (WEFT_KIT_SIG_ROOT(a) != WEFT_KIT_SIG_ROOT(b))
		return "root";
	if (WEFT_KIT_SIG_SIZE(a) != WEFT_KIT_SIG_SIZE(b))
		return "count or window";
	return NULL;
}

/* "call 17: allreduce float32 sum, count #3a2f1" (the count is a hash). */
static inline void weft_kit_sig_describe(uint64_t s, char *buf, size_t len)
{
	static const char *const types[] = {"int8",     "uint8",   "int32",   "uint32",  "int64",    "uint64",
					    "float16",  "bfloat16", "float32", "float64", "fp8_e4m3", "fp8_e5m2"};
	static const char *const ops[] = {"sum", "prod", "min", "max", "avg", "premul_sum"};
	int c = WEFT_KIT_SIG_COLL(s), t = WEFT_KIT_SIG_DTYPE(s), o = WEFT_KIT_SIG_OP(s), r = WEFT_KIT_SIG_ROOT(s);
	const char *cn = weft_kit_coll_name(c);
	const char *tn = t < 12 ? types[t] : "?";
	const char *on = o < 6 ? ops[o] : "?";
	int reducing = weft_kit_coll_reduces((enum weft_collective)c);
	char root[16] = "";
	if (r >= 0)
		snprintf(root, sizeof(root), " root %d", r);
	if (c == WEFT_COLL_SENDRECV)
		snprintf(buf, len, "call %u: %s, bytes #%06llx", WEFT_KIT_SIG_SEQ(s), cn,
			 (unsigned long long)WEFT_KIT_SIG_SIZE(s));
	else
		snprintf(buf, len, "call %u: %s %s%s%s%s, count #%06llx", WEFT_KIT_SIG_SEQ(s), cn, tn,
			 reducing ? " " : "", reducing ? on : "", root,
			 (unsigned long long)WEFT_KIT_SIG_SIZE(s));
}

#ifdef __cplusplus
}
#endif
#endif /* WEFT_KIT_H */
