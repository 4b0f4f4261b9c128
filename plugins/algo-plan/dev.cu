/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan: the device interpreter. One CUDA block runs one threadblock of
 * the rank's plan (dev.h's table), all of its threads on each operation in
 * turn; thread 0 alone signals, waits, pushes port triggers and meets the
 * other blocks, and a block barrier follows every operation. Offsets come
 * from geom.h, the CPU interpreter's own arithmetic, computed once a call:
 * the block's threads resolve all of its references into shared memory at
 * the start, since per-operation arithmetic (64-bit divisions) repeated by
 * every thread was most of a small call's time. The call's arguments are
 * staged in shared memory too: taking their address in place made every
 * thread copy them to local memory. Every wait polls the comm's abort flag,
 * so a dead peer or an abort ends the kernel. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>

#include <weft/device.h>
#include <weft/weft.h>

#include "dev.h"
#include "geom.h"

#define WPD_DEV static __device__ __forceinline__

/* What a block keeps for the whole call. */
struct wpd_blk {
	char *scr;     /* this call's half of this rank's scratch */
	int second;    /* this call uses the second halves of double scratch buffers */
	uint32_t flag; /* this call's LL flag */
};

__shared__ int s_stop; /* set by any thread of the block: abort, stop the call */
__shared__ int s_cached; /* this block's references are resolved in s_rng */

/* A reference resolved for the call: its buffer (NULL: none mapped here)
 * and its range (geom.h's wp_ref_range). */
struct wpd_rng {
	char *p;
	uint64_t off, len;
};
static_assert(sizeof(wpd_rng) == sizeof(wpd_refloc), "references resolve in place in an image");
static_assert(sizeof(wpd_tb) <= WPD_IMG_REFS, "a threadblock heads its image");

/* Dynamic shared memory: the threadblock's image (dev.h), or without one
 * the resolved references from WPD_IMG_REFS alike. */
extern __shared__ uint4 s_dyn[];

WPD_DEV wpd_rng *s_rng()
{
	return (wpd_rng *)((char *)s_dyn + WPD_IMG_REFS);
}

WPD_DEV bool poll_abort(const wpd_args &a, uint32_t n)
{
	return n % WEFT_DEV_ABORT_EVERY == WEFT_DEV_ABORT_EVERY - 1 && weft_dev_aborted(a.abort);
}

/* ------------------------------------------------------------- addresses */
WPD_DEV char *local_ptr(const wpd_args &a, const wpd_blk &x, uint32_t type)
{
	return type == WP_GEOM_SCRATCH ? x.scr : a.buf[type];
}

WPD_DEV char *ref_ptr(const wpd_args &a, const wpd_blk &x, const wpd_ref &r)
{
	if (!r.remote)
		return local_ptr(a, x, r.type);
	const wpd_rbuf &b = a.rbufs[r.rbuf];
	if (!b.base)
		return NULL;
	if (b.type == WP_GEOM_SCRATCH)
		return b.base + (x.second ? b.half : 0);
	return b.base + (uint64_t)b.peer * a.vstride[b.type];
}

/* Offsets port triggers name: in the area the port id names. */
WPD_DEV uint64_t port_src_off(const wpd_args &a, const wpd_blk &x, uint32_t type, uint64_t off)
{
	return a.port_base[type] + (type == WP_GEOM_SCRATCH && x.second ? a.scr_half : 0) + off;
}

WPD_DEV uint64_t port_dst_off(const wpd_args &a, const wpd_blk &x, uint32_t rbuf, uint64_t off)
{
	const wpd_rbuf &b = a.rbufs[rbuf];
	if (b.type == WP_GEOM_SCRATCH)
		return (x.second ? b.half : 0) + off;
	return (uint64_t)b.peer * a.vstride[b.type] + off;
}

struct wpd_span {
	uint64_t off, len;
};

/* Reference j of op: its source j, or its destination j - nsrc. */
WPD_DEV const wpd_ref &ref_at(const wpd_op &op, int j)
{
	return j < op.nsrc ? op.src[j] : op.dst[j - op.nsrc];
}

WPD_DEV wpd_rng resolve(const wpd_args &a, const wpd_blk &x, const wpd_ref &r, uint32_t tbg_id, uint32_t tbg_size)
{
	wpd_rng g;
	g.p = ref_ptr(a, x, r);
	wp_ref_range(a.align, a.rank_size, a.nchunks, r.index, r.size, tbg_id, tbg_size, &g.off, &g.len);
	return g;
}

WPD_DEV wpd_rng rng(const wpd_args &a, const wpd_blk &x, const wpd_op &op, int j)
{
	return s_cached ? s_rng()[op.ref0 + j] : resolve(a, x, ref_at(op, j), op.tbg_id, op.tbg_size);
}

/* The part of reference j a step (at, unit) works on. */
WPD_DEV wpd_span span(const wpd_args &a, const wpd_blk &x, const wpd_op &op, int j, uint64_t at, uint64_t unit)
{
	wpd_rng g = rng(a, x, op, j);
	wpd_span s;
	wp_step_clip(g.off, g.len, at, unit, &s.off, &s.len);
	return s;
}

/* Reference j's buffer (NULL: not mapped here). */
WPD_DEV char *rptr(const wpd_args &a, const wpd_blk &x, const wpd_op &op, int j)
{
	return s_cached ? s_rng()[op.ref0 + j].p : ref_ptr(a, x, ref_at(op, j));
}

/* -------------------------------------------------------------- data */
/* Loads past L1: peers write these buffers. */
WPD_DEV void blk_copy(char *dst, const char *src, uint64_t bytes)
{
	if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
		uint64_t nv = bytes / 16;
		for (uint64_t i = threadIdx.x; i < nv; i += blockDim.x)
			((uint4 *)dst)[i] = __ldcg((const uint4 *)src + i);
		for (uint64_t j = nv * 16 + threadIdx.x; j < bytes; j += blockDim.x)
			dst[j] = __ldcg(src + j);
	} else {
		for (uint64_t j = threadIdx.x; j < bytes; j += blockDim.x)
			dst[j] = __ldcg(src + j);
	}
}

/* The type a reduction computes in: floats narrower than float in float,
 * the rest in their own type (integers wrap through their unsigned type). */
template <typename T> struct Tr {
	typedef T A;
	static __device__ A ld(T x) { return x; }
	static __device__ T st(A x) { return x; }
};
template <> struct Tr<__half> {
	typedef float A;
	static __device__ A ld(__half x) { return __half2float(x); }
	static __device__ __half st(A x) { return __float2half_rn(x); }
};
template <> struct Tr<__nv_bfloat16> {
	typedef float A;
	static __device__ A ld(__nv_bfloat16 x) { return __bfloat162float(x); }
	static __device__ __nv_bfloat16 st(A x) { return __float2bfloat16_rn(x); }
};
template <> struct Tr<__nv_fp8_e4m3> {
	typedef float A;
	static __device__ A ld(__nv_fp8_e4m3 x) { return (float)x; }
	static __device__ __nv_fp8_e4m3 st(A x) { return __nv_fp8_e4m3(x); }
};
template <> struct Tr<__nv_fp8_e5m2> {
	typedef float A;
	static __device__ A ld(__nv_fp8_e5m2 x) { return (float)x; }
	static __device__ __nv_fp8_e5m2 st(A x) { return __nv_fp8_e5m2(x); }
};

template <typename A> WPD_DEV A comb(int op, A x, A y)
{
	switch (op) {
	case WEFT_PROD:
		return x * y;
	case WEFT_MIN:
		return y < x ? y : x;
	case WEFT_MAX:
		return y > x ? y : x;
	default:
		return x + y;
	}
}
#define WPD_INT_COMB(S, U)                                                     \
	template <> __device__ __forceinline__ S comb<S>(int op, S x, S y)    \
	{                                                                      \
		switch (op) {                                                  \
		case WEFT_PROD:                                                \
			return (S)(U)((U)x * (U)y);                            \
		case WEFT_MIN:                                                 \
			return y < x ? y : x;                                  \
		case WEFT_MAX:                                                 \
			return y > x ? y : x;                                  \
		default:                                                       \
			return (S)(U)((U)x + (U)y);                            \
		}                                                              \
	}
WPD_INT_COMB(int8_t, uint8_t)
WPD_INT_COMB(uint8_t, uint8_t)
WPD_INT_COMB(int32_t, uint32_t)
WPD_INT_COMB(uint32_t, uint32_t)
WPD_INT_COMB(int64_t, uint64_t)
WPD_INT_COMB(uint64_t, uint64_t)

/* x = x op y, lane by lane, over the bytes of a word (8 or 16 bytes). */
template <typename T, typename W> WPD_DEV void comb_word(int op, W &x, const W &y)
{
	typedef typename Tr<T>::A A;
	T *xv = reinterpret_cast<T *>(&x);
	const T *yv = reinterpret_cast<const T *>(&y);
#pragma unroll
	for (int e = 0; e < (int)(sizeof(W) / sizeof(T)); e++)
		xv[e] = Tr<T>::st(comb<A>(op, Tr<T>::ld(xv[e]), Tr<T>::ld(yv[e])));
}

/* The vectors of one destination from NS sources, the pointers held in
 * registers: the general loop below reloads them from local memory at
 * every vector. */
template <typename T, int NS> WPD_DEV void reduce_vec(int op, char *dst, const char *const *src, uint64_t nv)
{
	const uint4 *s[NS];
#pragma unroll
	for (int i = 0; i < NS; i++)
		s[i] = (const uint4 *)src[i];
	for (uint64_t v = threadIdx.x; v < nv; v += blockDim.x) {
		uint4 acc = __ldcg(s[0] + v);
#pragma unroll
		for (int i = 1; i < NS; i++) {
			uint4 y = __ldcg(s[i] + v);
			comb_word<T>(op, acc, y);
		}
		((uint4 *)dst)[v] = acc;
	}
}

/* dst[i] = src[0] op src[1] op ... for every destination, over bytes
 * (a multiple of the element size), sources in list order. */
template <typename T>
static __device__ __noinline__ void reduce_bytes(int op, char *const *dst, int nd, const char *const *src, int ns,
						 uint64_t bytes)
{
	uintptr_t any = 0;
	for (int i = 0; i < nd; i++)
		any |= (uintptr_t)dst[i];
	for (int i = 0; i < ns; i++)
		any |= (uintptr_t)src[i];
	uint64_t nv = (any & 15) == 0 ? bytes / 16 : 0;
	if (nd == 1 && ns <= 3) {
		if (ns == 1)
			reduce_vec<T, 1>(op, dst[0], src, nv);
		else if (ns == 2)
			reduce_vec<T, 2>(op, dst[0], src, nv);
		else
			reduce_vec<T, 3>(op, dst[0], src, nv);
	} else {
		for (uint64_t v = threadIdx.x; v < nv; v += blockDim.x) {
			uint4 acc = __ldcg((const uint4 *)src[0] + v);
			for (int i = 1; i < ns; i++) {
				uint4 y = __ldcg((const uint4 *)src[i] + v);
				comb_word<T>(op, acc, y);
			}
			for (int i = 0; i < nd; i++)
				((uint4 *)dst[i])[v] = acc;
		}
	}
	uint64_t n = bytes / sizeof(T);
	for (uint64_t e = nv * 16 / sizeof(T) + threadIdx.x; e < n; e += blockDim.x) {
		T acc = ((const T *)src[0])[e];
		for (int i = 1; i < ns; i++)
			comb_word<T>(op, acc, ((const T *)src[i])[e]);
		for (int i = 0; i < nd; i++)
			((T *)dst[i])[e] = acc;
	}
}

#define WPD_BY_TYPE(dtype, fn, ...)                                              \
	switch (dtype) {                                                         \
	case WEFT_INT8: fn<int8_t>(__VA_ARGS__); break;                          \
	case WEFT_UINT8: fn<uint8_t>(__VA_ARGS__); break;                        \
	case WEFT_INT32: fn<int32_t>(__VA_ARGS__); break;                        \
	case WEFT_UINT32: fn<uint32_t>(__VA_ARGS__); break;                      \
	case WEFT_INT64: fn<int64_t>(__VA_ARGS__); break;                        \
	case WEFT_UINT64: fn<uint64_t>(__VA_ARGS__); break;                      \
	case WEFT_FLOAT16: fn<__half>(__VA_ARGS__); break;                       \
	case WEFT_BFLOAT16: fn<__nv_bfloat16>(__VA_ARGS__); break;               \
	case WEFT_FLOAT32: fn<float>(__VA_ARGS__); break;                        \
	case WEFT_FLOAT64: fn<double>(__VA_ARGS__); break;                       \
	case WEFT_FP8_E4M3: fn<__nv_fp8_e4m3>(__VA_ARGS__); break;               \
	default: fn<__nv_fp8_e5m2>(__VA_ARGS__); break;                          \
	}

/* ----------------------------------------------------------- sync (thread 0) */
/* Waits until *p >= v; false when aborted. */
WPD_DEV bool wait_geq(const wpd_args &a, const uint64_t *p, uint64_t v)
{
	for (uint32_t n = 0; weft_ld_acquire_sys(p) < v; n++)
		if (poll_abort(a, n))
			return false;
	return true;
}

/* One more signal on a channel this rank waits on; false when aborted. */
WPD_DEV bool chan_wait(const wpd_args &a, const wpd_op &op, uint32_t ch)
{
	const uint64_t *sem;
	uint64_t *expected;
	if (op.chan == WP_CHAN_PORT) {
		sem = a.pch[ch].sem;
		expected = a.pch[ch].expected;
	} else {
		sem = a.mch[ch].sem;
		expected = a.mch[ch].expected;
	}
	/* A ticket each: blocks of a group waiting on one channel take one signal each. */
	uint64_t want = atomicAdd((unsigned long long *)expected, 1ull) + 1;
	return wait_geq(a, sem, want);
}

/* Raises the peer's token paired with channel ch after every store the
 * block made before (the caller's barrier, then a system fence). */
WPD_DEV bool chan_signal(const wpd_args &a, const wpd_op &op, uint32_t ch)
{
	__threadfence_system();
	if (op.chan != WP_CHAN_PORT) {
		atomicAdd_system((unsigned long long *)a.mch[ch].rsem, 1ull);
		return true;
	}
	const wpd_pch &p = a.pch[ch];
	/* Tokens are set, not added to, by port signals: the lock keeps values
	 * and FIFO slots in one order. */
	for (uint32_t n = 0; atomicCAS(p.lock, 0u, 1u) != 0; n++)
		if (poll_abort(a, n))
			return false;
	__threadfence();
	uint64_t v = *(volatile uint64_t *)p.outbound + 1;
	*(volatile uint64_t *)p.outbound = v;
	uint64_t pos = weft_port_signal(&p.port, p.rsem_id, v);
	__threadfence();
	atomicExch(p.lock, 0u);
	return pos != UINT64_MAX;
}

WPD_DEV bool barrier_wait(const wpd_args &a, uint32_t id, uint32_t ntb)
{
	__threadfence();
	uint64_t *c = &a.ctl->barrier[id];
	uint64_t n = ntb ? ntb : 1;
	uint64_t old = atomicAdd((unsigned long long *)c, 1ull);
	bool ok = wait_geq(a, c, (old / n + 1) * n);
	__threadfence();
	return ok;
}

WPD_DEV bool sem_acquire(const wpd_args &a, uint32_t id)
{
	unsigned long long *s = (unsigned long long *)&a.sems[id];
	for (uint32_t n = 0;; n++) {
		long long v = (long long)weft_ld_acquire_sys((const uint64_t *)s);
		if (v > 0 && atomicCAS(s, (unsigned long long)v, (unsigned long long)(v - 1)) == (unsigned long long)v)
			break;
		if (poll_abort(a, n))
			return false;
	}
	__threadfence();
	return true;
}

/* ---------------------------------------------------------------- ops */
WPD_DEV void stop(const wpd_args &a)
{
	s_stop = 1;
	*(volatile uint32_t *)&a.ctl->status = 1;
}

WPD_DEV void op_copy(const wpd_args &a, const wpd_blk &x, const wpd_op &op, uint64_t at, uint64_t unit)
{
	for (int i = 0; i < op.ndst; i++) {
		int js = op.nsrc == op.ndst ? i : 0, jd = op.nsrc + i;
		wpd_span ss = span(a, x, op, js, at, unit), ds = span(a, x, op, jd, at, unit);
		char *sp = rptr(a, x, op, js), *dp = rptr(a, x, op, jd);
		if (!sp || !dp) {
			stop(a);
			return;
		}
		blk_copy(dp + ds.off, sp + ss.off, ss.len < ds.len ? ss.len : ds.len);
	}
}

WPD_DEV void op_reduce(const wpd_args &a, const wpd_blk &x, const wpd_op &op, uint64_t at, uint64_t unit)
{
	/* One source reduces to a copy: skip the per-type call and its pointer arrays in local memory. */
	if (op.nsrc == 1) {
		op_copy(a, x, op, at, unit);
		return;
	}
	const char *src[WP_MAX_OP_BUFFS];
	char *dst[WP_MAX_OP_BUFFS];
	uint64_t len = 0;
	for (int i = 0; i < op.nsrc; i++) {
		wpd_span s = span(a, x, op, i, at, unit);
		const char *p = rptr(a, x, op, i);
		if (!p) {
			stop(a);
			return;
		}
		src[i] = p + s.off;
		if (i == 0)
			len = s.len;
	}
	for (int i = 0; i < op.ndst; i++) {
		char *p = rptr(a, x, op, op.nsrc + i);
		if (!p) {
			stop(a);
			return;
		}
		dst[i] = p + span(a, x, op, op.nsrc + i, at, unit).off;
	}
	WPD_BY_TYPE(a.dtype, reduce_bytes, a.op, dst, op.ndst, src, op.nsrc, len)
}

/* Port puts (put, pws, pwsf): thread 0 pushes, after the block's stores. */
WPD_DEV void op_port_put(const wpd_args &a, const wpd_blk &x, const wpd_op &op, uint64_t at, uint64_t unit)
{
	if (threadIdx.x)
		return;
	__threadfence_system();
	for (int i = 0; i < op.ndst; i++) {
		const wpd_ref &s = op.src[i], &d = op.dst[i];
		wpd_span ss = span(a, x, op, i, at, unit), ds = span(a, x, op, op.nsrc + i, at, unit);
		const wpd_pch &p = a.pch[op.ch[i]];
		if (ds.len && weft_port_put(&p.port, a.rbufs[d.rbuf].port_id, port_dst_off(a, x, d.rbuf, ds.off),
					    a.port_mem[s.type], port_src_off(a, x, s.type, ss.off),
					    (uint32_t)ds.len) == UINT64_MAX) {
			stop(a);
			return;
		}
		if ((op.kind != WP_OP_PUT && !chan_signal(a, op, op.ch[i])) ||
		    (op.kind == WP_OP_PWSF && weft_port_flush(&p.port) != WEFT_DEV_OK)) {
			stop(a);
			return;
		}
	}
}

/* ------------------------------------------------------------- packets */
/* LL16 (device.h): a packet is 8 data bytes and the flag twice. Scratch
 * holds packets at twice the data's offset; sizes are the data's. */
WPD_DEV uint64_t ld8(const char *p)
{
	return __ldcg((const unsigned long long *)p);
}

WPD_DEV bool pkt_read(const wpd_args &a, const char *p, uint32_t flag, uint64_t *v)
{
	if (weft_ll16_read((const uint4 *)p, flag, v, a.abort) == WEFT_DEV_OK)
		return true;
	s_stop = 1;
	return false;
}

/* repkt, recpkt, respkt, recspkt: per packet, the plain source reduced with
 * the packets of the others (this rank's scratch), into dst[0]; recpkt and
 * recspkt keep the sum as packets in dst[1]; respkt and recspkt send it as
 * packets to the remote destinations after those. */
template <typename T>
static __device__ __noinline__ void pkt_reduce(const wpd_args &a, const wpd_blk &x, const wpd_op &op)
{
	int keep = op.kind == WP_OP_RECPKT || op.kind == WP_OP_RECSPKT;
	int send = op.kind == WP_OP_RESPKT || op.kind == WP_OP_RECSPKT;
	const char *src[WP_MAX_OP_BUFFS];
	char *dst[WP_MAX_OP_BUFFS];
	wpd_span s0 = span(a, x, op, 0, 0, UINT64_MAX);
	const char *plain = rptr(a, x, op, 0);
	for (int i = 1; i < op.nsrc; i++)
		src[i] = x.scr + 2 * span(a, x, op, i, 0, UINT64_MAX).off;
	int nd = send ? op.ndst : keep ? 2 : 1;
	for (int i = 0; i < nd; i++) {
		char *p = rptr(a, x, op, op.nsrc + i);
		if (!p || !plain) {
			stop(a);
			return;
		}
		uint64_t off = span(a, x, op, op.nsrc + i, 0, UINT64_MAX).off;
		dst[i] = p + (i == 0 ? off : 2 * off);
	}
	uint64_t npk = s0.len / 8;
	for (uint64_t k = threadIdx.x; k < npk; k += blockDim.x) {
		uint64_t acc = ld8(plain + s0.off + 8 * k);
		for (int i = 1; i < op.nsrc; i++) {
			uint64_t v;
			if (!pkt_read(a, src[i] + 16 * k, x.flag, &v))
				return;
			comb_word<T>(a.op, acc, v);
		}
		*(uint64_t *)(dst[0] + 8 * k) = acc;
		for (int i = 1; i < nd; i++)
			weft_ll16_write((uint4 *)(dst[i] + 16 * k), acc, x.flag);
	}
}

WPD_DEV void op_packets(const wpd_args &a, const wpd_blk &x, const wpd_op &op)
{
	switch (op.kind) {
	case WP_OP_PPKT:
	case WP_OP_CPKT:
		for (int i = 0; i < (op.kind == WP_OP_CPKT ? 1 : op.ndst); i++) {
			wpd_span s = span(a, x, op, i, 0, UINT64_MAX), d = span(a, x, op, op.nsrc + i, 0, UINT64_MAX);
			if (op.kind == WP_OP_PPKT && op.chan == WP_CHAN_PORT) {
				/* The source holds packets already (cpkt made them): put their bytes. */
				if (threadIdx.x)
					continue;
				__threadfence_system();
				if (weft_port_put(&a.pch[op.ch[i]].port, a.rbufs[op.dst[i].rbuf].port_id,
						  port_dst_off(a, x, op.dst[i].rbuf, 2 * d.off), a.port_mem[op.src[i].type],
						  port_src_off(a, x, op.src[i].type, 2 * s.off),
						  (uint32_t)(2 * s.len)) == UINT64_MAX)
					stop(a);
				continue;
			}
			const char *sp = rptr(a, x, op, i);
			char *dp = rptr(a, x, op, op.nsrc + i);
			if (!sp || !dp) {
				stop(a);
				return;
			}
			for (uint64_t k = threadIdx.x; k < s.len / 8; k += blockDim.x)
				weft_ll16_write((uint4 *)(dp + 2 * d.off + 16 * k), ld8(sp + s.off + 8 * k), x.flag);
		}
		return;
	case WP_OP_UPKT: {
		wpd_span s = span(a, x, op, 0, 0, UINT64_MAX), d = span(a, x, op, op.nsrc, 0, UINT64_MAX);
		char *dp = rptr(a, x, op, op.nsrc);
		if (!dp) {
			stop(a);
			return;
		}
		for (uint64_t k = threadIdx.x; k < s.len / 8; k += blockDim.x) {
			uint64_t v;
			if (!pkt_read(a, x.scr + 2 * s.off + 16 * k, x.flag, &v))
				return;
			*(uint64_t *)(dp + d.off + 8 * k) = v;
		}
		return;
	}
	case WP_OP_RPPKT: {
		wpd_span s = span(a, x, op, 0, 0, UINT64_MAX);
		const char *pk = x.scr + 2 * s.off;
		for (uint64_t k = threadIdx.x; k < s.len / 8; k += blockDim.x) {
			uint64_t v;
			if (!pkt_read(a, pk + 16 * k, x.flag, &v))
				break; /* on to the block barrier below, as every thread */
			for (int i = 0; op.chan != WP_CHAN_PORT && i < op.ndst; i++) {
				char *dp = rptr(a, x, op, op.nsrc + i);
				if (!dp) {
					stop(a);
					return;
				}
				uint64_t doff = span(a, x, op, op.nsrc + i, 0, UINT64_MAX).off;
				weft_ll16_write((uint4 *)(dp + 2 * doff + 16 * k), v, x.flag);
			}
		}
		if (op.chan != WP_CHAN_PORT)
			return;
		/* Port: every packet has arrived (each thread saw its own); forward the bytes. */
		__syncthreads();
		if (threadIdx.x || s_stop)
			return;
		__threadfence_system();
		for (int i = 0; i < op.ndst; i++) {
			wpd_span d = span(a, x, op, op.nsrc + i, 0, UINT64_MAX);
			if (weft_port_put(&a.pch[op.ch[i]].port, a.rbufs[op.dst[i].rbuf].port_id,
					  port_dst_off(a, x, op.dst[i].rbuf, 2 * d.off), a.port_mem[WP_GEOM_SCRATCH],
					  port_src_off(a, x, WP_GEOM_SCRATCH, 2 * s.off), (uint32_t)(2 * s.len)) == UINT64_MAX)
				stop(a);
		}
		return;
	}
	default:
		WPD_BY_TYPE(a.dtype, pkt_reduce, a, x, op)
	}
}

/* One operation (of a pipeline's body: at and unit give its step). Returns,
 * the same in every thread, whether the block must stop: the barrier that
 * ends each operation (bar those marked nosync) also gathers the threads'
 * verdicts. */
WPD_DEV int run_op(const wpd_args &a, const wpd_blk &x, const wpd_op &op, uint64_t at, uint64_t unit)
{
	switch (op.kind) {
	case WP_OP_NOP:
		break;
	case WP_OP_BARRIER:
		if (threadIdx.x == 0 && !barrier_wait(a, op.barrier_id, op.barrier_ntb))
			s_stop = 1;
		break;
	case WP_OP_SIGNAL:
	case WP_OP_RLXSIGNAL:
		__syncthreads();
		for (int i = 0; threadIdx.x == 0 && i < op.nchan; i++)
			if (!chan_signal(a, op, op.ch[i])) {
				s_stop = 1;
				break;
			}
		break;
	case WP_OP_WAIT:
	case WP_OP_RLXWAIT:
		for (int i = 0; threadIdx.x == 0 && i < op.nchan; i++)
			if (!chan_wait(a, op, op.ch[i])) {
				s_stop = 1;
				break;
			}
		break;
	case WP_OP_FLUSH:
		for (int i = 0; threadIdx.x == 0 && i < op.nchan; i++)
			if (weft_port_flush(&a.pch[op.ch[i]].port) != WEFT_DEV_OK) {
				s_stop = 1;
				break;
			}
		break;
	case WP_OP_PUT:
	case WP_OP_PWS:
	case WP_OP_PWSF:
		__syncthreads();
		if (op.chan == WP_CHAN_PORT)
			op_port_put(a, x, op, at, unit);
		else
			op_copy(a, x, op, at, unit);
		break;
	case WP_OP_GET:
	case WP_OP_COPY:
		op_copy(a, x, op, at, unit);
		break;
	case WP_OP_RE:
	case WP_OP_RES:
	case WP_OP_RRE:
	case WP_OP_RRES:
		op_reduce(a, x, op, at, unit);
		break;
	case WP_OP_SEM_ACQUIRE:
		for (int i = 0; threadIdx.x == 0 && i < op.nsems; i++)
			if (!sem_acquire(a, op.sem[i])) {
				s_stop = 1;
				break;
			}
		break;
	case WP_OP_SEM_RELEASE:
		__syncthreads();
		if (threadIdx.x == 0) {
			__threadfence();
			for (int i = 0; i < op.nsems; i++)
				atomicAdd((unsigned long long *)&a.sems[op.sem[i]], 1ull);
		}
		break;
	default: /* the packet operations; the loader refuses the rest */
		op_packets(a, x, op);
		break;
	}
	/* Without a barrier (a local op the next does not depend on), a stop
	 * shows at the next one: s_stop stays set. */
	return op.nosync ? 0 : __syncthreads_or(s_stop);
}

WPD_DEV void stamp(const wpd_args &a, int k)
{
	if (a.stamps && threadIdx.x == 0)
		a.stamps[(uint64_t)blockIdx.x * WPD_STAMPS + k] = clock64();
}

static_assert(sizeof(wpd_args) % 8 == 0, "wpd_args is staged in 8-byte words");

/* Waits for the kernel before this one on the stream to finish, its
 * stores visible (a no-op unless launched as a programmatic dependent, see
 * wpd_launch). Before it, a block touches only what no call writes: the
 * arguments and the plan's tables. */
WPD_DEV void wait_prev_kernel()
{
	asm volatile("griddepcontrol.wait;" ::: "memory");
}

/* Bytes (a multiple of 16) from global to shared memory, WPD_LD_BATCH loads
 * in flight a thread: one at a time, each would wait for the last. */
#define WPD_LD_BATCH 8
WPD_DEV void stage(uint4 *dst, const uint4 *src, uint32_t bytes)
{
	uint32_t n = bytes / 16, step = blockDim.x;
	for (uint32_t w = threadIdx.x; w < n; w += WPD_LD_BATCH * step) {
		uint4 v[WPD_LD_BATCH];
#pragma unroll
		for (int k = 0; k < WPD_LD_BATCH; k++)
			if (w + k * step < n)
				v[k] = __ldg(src + w + k * step);
#pragma unroll
		for (int k = 0; k < WPD_LD_BATCH; k++)
			if (w + k * step < n)
				dst[w + k * step] = v[k];
	}
}

__global__ void __launch_bounds__(1024, 1) k_plan(const wpd_args a)
{
	__shared__ wpd_args sa;
	__shared__ wpd_blk x;
	stamp(a, WPD_ST_ENTRY);
	/* The LL flag is the last call's: wait for it before reading it. */
	if (a.flagged)
		wait_prev_kernel();
	/* Word by word, so the parameter's address is never taken. */
	for (uint32_t w = threadIdx.x; w < sizeof(wpd_args) / 8; w += blockDim.x)
		((uint64_t *)&sa)[w] = ((const uint64_t *)&a)[w];
	/* The image's loads and the flag's go out together: the start waits on one round. */
	if (a.img)
		stage(s_dyn, (const uint4 *)(a.img + (uint64_t)blockIdx.x * a.img_stride), a.img_stride);
	wpd_tb tb;
	if (!a.img)
		tb = a.tbs[blockIdx.x];
	if (threadIdx.x == 0) {
		s_stop = 0;
		s_cached = a.img || tb.nrefs <= a.rng_cap;
		/* Without packets or a double scratch, skip the flag's load here and its count at the end. */
		uint32_t f = a.flagged ? *(volatile uint32_t *)&a.ctl->flag + 1 : 1;
		x.flag = f ? f : 1; /* 0 is the flag of never-written scratch */
		x.second = a.scr_half && !(x.flag & 1);
		x.scr = a.scr + (x.second ? a.scr_half : 0);
	}
	__syncthreads();
	stamp(sa, WPD_ST_ARGS);
	const wpd_op *ops;
	const wpd_refloc *refs;
	if (sa.img) {
		tb = *(const wpd_tb *)s_dyn;
		ops = (const wpd_op *)((const char *)s_dyn + sa.img_ops);
		refs = (const wpd_refloc *)s_rng();
	} else {
		ops = sa.ops + tb.first;
		refs = sa.refs + tb.ref_first;
		/* The ops' first lines, into L1 while the references resolve: every
		 * thread reads them at its op. */
		for (uint32_t i = threadIdx.x; i < tb.nops; i += blockDim.x)
			asm volatile("prefetch.global.L1 [%0];" ::"l"(ops + i));
	}
	/* In an image, reference r resolves into its own slot: each thread reads its slots before writing them. */
	if (s_cached)
		for (uint32_t r = threadIdx.x; r < tb.nrefs; r += blockDim.x) {
			const wpd_refloc l = refs[r];
			s_rng()[r] = resolve(sa, x, l.ref, l.tbg_id, l.tbg_size);
		}
	__syncthreads();
	stamp(sa, WPD_ST_REFS);
	if (!sa.flagged)
		wait_prev_kernel();
	int stopped = 0;
	for (uint32_t pc = 0, n = 0; pc < tb.nops && !stopped; n++) {
		const wpd_op &op = ops[pc];
		if (op.kind != WP_OP_PIPELINE) {
			stopped = run_op(sa, x, op, 0, UINT64_MAX);
			pc++;
		} else {
			uint64_t steps = wp_pipeline_steps(sa.align, sa.rank_size, sa.nchunks, op.num_chunks, op.unit_size);
			for (uint64_t it = 0; it < steps && !stopped; it++)
				for (uint32_t j = 0; j < op.nops && !stopped; j++)
					stopped = run_op(sa, x, ops[pc + 1 + j], it * op.unit_size, op.unit_size);
			pc += 1 + op.nops;
		}
		if (n < WPD_STAMP_OPS)
			stamp(sa, WPD_ST_OP0 + (int)n);
	}
	/* The last block out records the call's flag for the next one. */
	if (threadIdx.x == 0 && sa.flagged) {
		__threadfence();
		if (atomicAdd(&sa.ctl->done, 1u) == gridDim.x - 1) {
			*(volatile uint32_t *)&sa.ctl->flag = x.flag;
			*(volatile uint32_t *)&sa.ctl->done = 0;
			__threadfence();
		}
	}
	stamp(sa, WPD_ST_END);
}

/* ------------------------------------------------------------- launches */
static int cuda_ck(cudaError_t e, const char *what, char *err, size_t errlen)
{
	if (e == cudaSuccess)
		return 0;
	snprintf(err, errlen, "%s: %s", what, cudaGetErrorString(e));
	return -WEFT_ERR_TRANSPORT;
}

extern "C" int wpd_launch(const struct wpd_args *a, uint32_t ntbs, uint32_t threads, void *stream, char *err,
			  size_t errlen)
{
	size_t shm = a->img ? a->img_stride : WPD_IMG_REFS + (size_t)a->rng_cap * sizeof(wpd_rng);
	/* A programmatic dependent launch: the blocks may start as the kernel
	 * before them on the stream ends, and stage the plan meanwhile
	 * (wait_prev_kernel). Where the driver refuses it, a plain launch. */
	cudaLaunchAttribute at = {};
	at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
	at.val.programmaticStreamSerializationAllowed = 1;
	cudaLaunchConfig_t cfg = {};
	cfg.gridDim = dim3(ntbs);
	cfg.blockDim = dim3(threads);
	cfg.dynamicSmemBytes = shm;
	cfg.stream = (cudaStream_t)stream;
	cfg.attrs = &at;
	cfg.numAttrs = 1;
	cudaError_t e = cudaLaunchKernelEx(&cfg, k_plan, *a);
	if (e == cudaErrorNotSupported || e == cudaErrorInvalidValue) {
		(void)cudaGetLastError();
		k_plan<<<ntbs, threads, shm, (cudaStream_t)stream>>>(*a);
		e = cudaGetLastError();
	}
	return cuda_ck(e, "launching the plan interpreter", err, errlen);
}

extern "C" int wpd_cuda_device(int *dev)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0 || cudaGetDevice(dev) != cudaSuccess) {
		(void)cudaGetLastError();
		return -WEFT_ERR_NO_DEVICE;
	}
	return 0;
}

extern "C" int wpd_cuda_set_device(int dev)
{
	return cudaSetDevice(dev) == cudaSuccess ? 0 : -WEFT_ERR_NO_DEVICE;
}

extern "C" int wpd_cuda_copy(void *dst, const void *src, size_t bytes, void *stream, char *err, size_t errlen)
{
	return cuda_ck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream), "cudaMemcpyAsync",
		       err, errlen);
}

extern "C" int wpd_cuda_copy_sync(void *dst, const void *src, size_t bytes, char *err, size_t errlen)
{
	return cuda_ck(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy", err, errlen);
}

extern "C" int wpd_cuda_sync(void *stream, char *err, size_t errlen)
{
	return cuda_ck(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize", err, errlen);
}

extern "C" int wpd_cuda_device_sync(void)
{
	return cudaDeviceSynchronize() == cudaSuccess ? 0 : -WEFT_ERR_TRANSPORT;
}

extern "C" int wpd_cuda_capturing(void *stream, int *yes, char *err, size_t errlen)
{
	cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
	int rc = cuda_ck(cudaStreamIsCapturing((cudaStream_t)stream, &st), "cudaStreamIsCapturing", err, errlen);
	if (rc == 0)
		*yes = st != cudaStreamCaptureStatusNone;
	return rc;
}
