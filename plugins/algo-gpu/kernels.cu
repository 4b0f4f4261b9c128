/* SPDX-License-Identifier: Apache-2.0 */
/* algo-gpu: the CUDA kernels (allreduce, allgather, reduce-scatter, reduce,
 * broadcast, alltoall: one-shot and pipelined-ring variants; point-to-point
 * rings) and their launchers. Ranges come from schedule.h; flags and per-block
 * counters live in device memory and advance here, so graph replays stay in step. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda.h> /* driver types only: cuPointerGetAttribute is reached through the runtime */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>

#include <weft/weft.h>
#include <weft/device.h>

#include "wag.h"

#define WAG_DEV static __device__ __forceinline__

/* ------------------------------------------------------------- addresses */

WAG_DEV uint64_t *flag_at(const wag_kargs &a, int owner, int kind, int sender, uint32_t g)
{
	return (uint64_t *)(a.scr[owner] + a.lay.flags) + ((size_t)kind * WAG_MAX_RANKS + sender) * a.lay.fb + g;
}

WAG_DEV uint64_t *local_at(const wag_kargs &a, int kind, uint32_t g)
{
	return (uint64_t *)(a.scr[a.rank] + a.lay.local) + (size_t)kind * a.lay.fb + g;
}

/* Slot of (sender, block, depth slot) in owner's ring at offset base. */
WAG_DEV char *ring_at(const wag_kargs &a, int owner, uint64_t base, int sender, uint32_t g, uint64_t seq)
{
	return a.scr[owner] + base + (((uint64_t)sender * a.lay.maxb + g) * a.lay.depth + seq % a.lay.depth) * a.lay.tile_bytes;
}

/* ---------------------------------------------------------------- sync */

/* Whether this rank's kernels found a call whose signatures differ: waits
 * then stop, as for an abort (the host fails the call). */
WAG_DEV bool sig_failed(const wag_kargs &a)
{
	return a.sigerr && a.sigerr[0] != 0;
}

/* Thread 0: wait until *p >= v, polling the peer's abort flag now and then. */
WAG_DEV bool wait_geq(const wag_kargs &a, const uint64_t *p, uint64_t v, int peer)
{
	for (uint32_t n = 0;; n++) {
		if (weft_ld_acquire_sys(p) >= v)
			return true;
		if (n % WEFT_DEV_ABORT_EVERY == WEFT_DEV_ABORT_EVERY - 1 &&
		    (weft_dev_aborted(a.abort[peer]) || sig_failed(a)))
			return false;
	}
}

/* ------------------------------------------------------ call signatures
 * One thread of a sender writes its signature as an LL16 packet (sig_at)
 * with the flag of the data it comes with; the receiving thread reads it
 * after that data, so the packet is there or on its way: no extra round
 * trip, no fence. A difference is recorded in the host-mapped a.sigerr,
 * which the host turns into -WEFT_ERR_MISMATCH (pack.c, wag_sig_status). */

WAG_DEV uint4 *sig_at(const wag_kargs &a, int owner, int fam, int sender, uint64_t slot)
{
	return (uint4 *)(a.scr[owner] + a.lay.sig) + ((uint64_t)fam * WAG_MAX_RANKS + sender) * a.lay.sig_slots +
	       slot % a.lay.sig_slots;
}

WAG_DEV uint32_t sig_flag(uint64_t c)
{
	return (uint32_t)(c % 0xffffffffull) + 1;
}

/* One thread: this rank's signature sig into peer q's slot. */
WAG_DEV void sig_send(const wag_kargs &a, int fam, int q, uint64_t slot, uint32_t flag, uint64_t sig)
{
	if (sig)
		weft_ll16_write(sig_at(a, q, fam, a.rank, slot), sig, flag);
}

/* One thread, after peer q's data of the call: compares q's signature with
 * this rank's (mine). false: they differ, or the comm was aborted. */
WAG_DEV bool sig_check(const wag_kargs &a, int fam, int q, uint64_t slot, uint32_t flag, uint64_t mine)
{
	uint64_t theirs;
	if (!mine)
		return true;
	if (weft_ll16_read(sig_at(a, a.rank, fam, q, slot), flag, &theirs, a.abort[q]) != WEFT_DEV_OK)
		return false;
	if (theirs == mine)
		return true;
	volatile uint64_t *w = a.sigerr;
	if (w && w[0] == 0) {
		w[1] = mine;
		w[2] = (uint64_t)q;
		__threadfence_system();
		w[0] = theirs;
	}
	return false;
}

/* The same to every peer (send), or from every peer: thread q of the block
 * for peer q, so that the peers' packets are waited for at once. */
WAG_DEV void sig_all(const wag_kargs &a, bool send, int fam, uint64_t slot, uint32_t flag)
{
	int q = (int)threadIdx.x;
	if (q >= a.nranks || q == a.rank)
		return;
	if (send)
		sig_send(a, fam, q, slot, flag, a.sig);
	else
		sig_check(a, fam, q, slot, flag, a.sig);
}

/* The block waits until every peer q raised flag (kind, q, g) in this rank's
 * scratch to at least v. false: aborted. */
WAG_DEV bool block_wait_peers(const wag_kargs &a, int kind, uint32_t g, uint64_t v)
{
	__shared__ int ok;
	if (threadIdx.x == 0) {
		int good = 1;
#pragma unroll
		for (int q = 0; q < WAG_MAX_RANKS; q++)
			if (q < a.nranks && q != a.rank && good)
				good = wait_geq(a, flag_at(a, a.rank, kind, q, g), v, q);
		ok = good;
	}
	__syncthreads();
	int r = ok;
	__syncthreads(); /* the next wait may rewrite ok */
	return r != 0;
}

/* The block waits until peer q raised flag (kind, q, g) in this rank's scratch
 * to at least v. false: aborted. */
WAG_DEV bool block_wait_peer(const wag_kargs &a, int kind, int q, uint32_t g, uint64_t v)
{
	__shared__ int ok1;
	if (threadIdx.x == 0)
		ok1 = wait_geq(a, flag_at(a, a.rank, kind, q, g), v, q);
	__syncthreads();
	int r = ok1;
	__syncthreads();
	return r != 0;
}

/* After the block's stores: raise flag (kind, me, g) at peer q to v. */
WAG_DEV void block_signal_peer(const wag_kargs &a, int kind, int q, uint32_t g, uint64_t v)
{
	__syncthreads();
	if (threadIdx.x == 0) {
		__threadfence_system();
		weft_st_release_sys(flag_at(a, q, kind, a.rank, g), v);
	}
}

/* After the block's stores: raise flag (kind, me, g) at every peer to v,
 * releasing every store the block made before (barrier, then a system fence). */
WAG_DEV void block_signal_peers(const wag_kargs &a, int kind, uint32_t g, uint64_t v)
{
	__syncthreads();
	if (threadIdx.x == 0) {
		__threadfence_system();
#pragma unroll
		for (int q = 0; q < WAG_MAX_RANKS; q++)
			if (q < a.nranks && q != a.rank)
				weft_st_release_sys(flag_at(a, q, kind, a.rank, g), v);
	}
}

/* ---------------------------------------------------------------- data */

/* Copies with the block's threads; loads bypass L1 (data written by peers). */
WAG_DEV void copy_range(void *dst, const void *src, uint64_t bytes)
{
	if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
		uint4 *d = (uint4 *)dst;
		const uint4 *s = (const uint4 *)src;
		uint64_t nv = bytes / 16, i = threadIdx.x, nt = blockDim.x;
		for (; i + 3 * nt < nv; i += 4 * nt) {
			uint4 x0 = __ldcg(s + i), x1 = __ldcg(s + i + nt), x2 = __ldcg(s + i + 2 * nt),
			      x3 = __ldcg(s + i + 3 * nt);
			d[i] = x0;
			d[i + nt] = x1;
			d[i + 2 * nt] = x2;
			d[i + 3 * nt] = x3;
		}
		for (; i < nv; i += nt)
			d[i] = __ldcg(s + i);
		for (uint64_t j = nv * 16 + threadIdx.x; j < bytes; j += nt)
			((char *)dst)[j] = __ldcg((const char *)src + j);
	} else {
		weft_dev_copy(dst, src, bytes, threadIdx.x, blockDim.x);
	}
}

template <typename T> struct Tr;
template <> struct Tr<float> {
	typedef float A;
	static __device__ A ld(float x) { return x; }
	static __device__ float st(A x) { return x; }
};
template <> struct Tr<double> {
	typedef double A;
	static __device__ A ld(double x) { return x; }
	static __device__ double st(A x) { return x; }
};
template <> struct Tr<int32_t> {
	typedef int32_t A;
	static __device__ A ld(int32_t x) { return x; }
	static __device__ int32_t st(A x) { return x; }
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
/* Integers accumulate in their own type (wrapping); fp8 in float, rounded
 * once (saturating to the largest finite value, as cuda_fp8.h converts). */
#define WAG_TR_SAME(T)                                                  \
	template <> struct Tr<T> {                                      \
		typedef T A;                                            \
		static __device__ A ld(T x) { return x; }               \
		static __device__ T st(A x) { return x; }               \
	};
WAG_TR_SAME(int8_t)
WAG_TR_SAME(uint8_t)
WAG_TR_SAME(uint32_t)
WAG_TR_SAME(int64_t)
WAG_TR_SAME(uint64_t)
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

/* One element loaded past L1 (peers write these buffers); fp8 has no
 * __ldcg of its own, so its byte is loaded and reinterpreted. */
template <typename T> WAG_DEV T ld_elem(const T *p)
{
	return __ldcg(p);
}
template <> __device__ __forceinline__ __nv_fp8_e4m3 ld_elem<__nv_fp8_e4m3>(const __nv_fp8_e4m3 *p)
{
	__nv_fp8_e4m3 r;
	r.__x = __ldcg((const unsigned char *)p);
	return r;
}
template <> __device__ __forceinline__ __nv_fp8_e5m2 ld_elem<__nv_fp8_e5m2>(const __nv_fp8_e5m2 *p)
{
	__nv_fp8_e5m2 r;
	r.__x = __ldcg((const unsigned char *)p);
	return r;
}

template <typename A> WAG_DEV A combine(int op, A x, A y)
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

/* Integers wrap, as two's complement hardware does, instead of overflowing:
 * sums and products in the unsigned type of the same width, truncated back. */
#define WAG_INT_COMBINE(S, U)                                                           \
	template <> __device__ __forceinline__ S combine<S>(int op, S x, S y)          \
	{                                                                               \
		switch (op) {                                                           \
		case WEFT_PROD:                                                         \
			return (S)(U)((U)x * (U)y);                                     \
		case WEFT_MIN:                                                          \
			return y < x ? y : x;                                           \
		case WEFT_MAX:                                                          \
			return y > x ? y : x;                                           \
		default:                                                                \
			return (S)(U)((U)x + (U)y);                                     \
		}                                                                       \
	}
WAG_INT_COMBINE(int8_t, uint8_t)
WAG_INT_COMBINE(uint8_t, uint8_t)
WAG_INT_COMBINE(int32_t, uint32_t)
WAG_INT_COMBINE(uint32_t, uint32_t)
WAG_INT_COMBINE(int64_t, uint64_t)
WAG_INT_COMBINE(uint64_t, uint64_t)

template <typename A> WAG_DEV A finish(int op, A x, int n)
{
	return op == WEFT_AVG ? (A)(x / (A)n) : x;
}

/* dst (and every non-NULL pdst[q]) = src[0] op src[1] op ... in rank order,
 * over len elements. 16-byte vectors when vec (all pointers aligned). */
template <typename T>
WAG_DEV void reduce_range(int op, int n, const T *const (&src)[WAG_MAX_RANKS], T *dst, T *const (&pdst)[WAG_MAX_RANKS],
			  uint64_t len, bool vec)
{
	typedef typename Tr<T>::A A;
	constexpr int E = 16 / sizeof(T);
	uint64_t nv = vec ? len / E : 0;
	for (uint64_t i = threadIdx.x; i < nv; i += blockDim.x) {
		A acc[E];
		{
			uint4 v = __ldcg((const uint4 *)src[0] + i);
			const T *t = reinterpret_cast<const T *>(&v);
#pragma unroll
			for (int e = 0; e < E; e++)
				acc[e] = Tr<T>::ld(t[e]);
		}
#pragma unroll
		for (int q = 1; q < WAG_MAX_RANKS; q++)
			if (q < n) {
				uint4 v = __ldcg((const uint4 *)src[q] + i);
				const T *t = reinterpret_cast<const T *>(&v);
#pragma unroll
				for (int e = 0; e < E; e++)
					acc[e] = combine<A>(op, acc[e], Tr<T>::ld(t[e]));
			}
		uint4 o;
		T *ot = reinterpret_cast<T *>(&o);
#pragma unroll
		for (int e = 0; e < E; e++)
			ot[e] = Tr<T>::st(finish<A>(op, acc[e], n));
		((uint4 *)dst)[i] = o;
#pragma unroll
		for (int q = 0; q < WAG_MAX_RANKS; q++)
			if (pdst[q])
				((uint4 *)pdst[q])[i] = o;
	}
	for (uint64_t j = nv * E + threadIdx.x; j < len; j += blockDim.x) {
		A acc = Tr<T>::ld(ld_elem(src[0] + j));
#pragma unroll
		for (int q = 1; q < WAG_MAX_RANKS; q++)
			if (q < n)
				acc = combine<A>(op, acc, Tr<T>::ld(ld_elem(src[q] + j)));
		T o = Tr<T>::st(finish<A>(op, acc, n));
		dst[j] = o;
#pragma unroll
		for (int q = 0; q < WAG_MAX_RANKS; q++)
			if (pdst[q])
				pdst[q][j] = o;
	}
}

/* reduce_range with U vectors of every source in flight per thread: the
 * direct kernels read peers' memory, whose latency (about a microsecond over
 * NVLink) one load per thread at a time cannot cover. The tail goes through
 * reduce_range. */
template <typename T, int U>
WAG_DEV void reduce_range_deep(int op, int n, const T *const (&src)[WAG_MAX_RANKS], T *dst,
			       T *const (&pdst)[WAG_MAX_RANKS], uint64_t len, bool vec)
{
	typedef typename Tr<T>::A A;
	constexpr int E = 16 / sizeof(T);
	uint64_t nv = vec ? len / E : 0, step = (uint64_t)blockDim.x * U, full = nv / step * step;
	for (uint64_t b = threadIdx.x; b < full; b += step) {
		A acc[U][E];
		uint4 v[U];
#pragma unroll
		for (int u = 0; u < U; u++)
			v[u] = __ldcg((const uint4 *)src[0] + b + (uint64_t)u * blockDim.x);
#pragma unroll
		for (int u = 0; u < U; u++) {
			const T *t = reinterpret_cast<const T *>(&v[u]);
#pragma unroll
			for (int e = 0; e < E; e++)
				acc[u][e] = Tr<T>::ld(t[e]);
		}
#pragma unroll
		for (int q = 1; q < WAG_MAX_RANKS; q++)
			if (q < n) {
#pragma unroll
				for (int u = 0; u < U; u++)
					v[u] = __ldcg((const uint4 *)src[q] + b + (uint64_t)u * blockDim.x);
#pragma unroll
				for (int u = 0; u < U; u++) {
					const T *t = reinterpret_cast<const T *>(&v[u]);
#pragma unroll
					for (int e = 0; e < E; e++)
						acc[u][e] = combine<A>(op, acc[u][e], Tr<T>::ld(t[e]));
				}
			}
#pragma unroll
		for (int u = 0; u < U; u++) {
			uint4 o;
			T *ot = reinterpret_cast<T *>(&o);
#pragma unroll
			for (int e = 0; e < E; e++)
				ot[e] = Tr<T>::st(finish<A>(op, acc[u][e], n));
			uint64_t at = b + (uint64_t)u * blockDim.x;
			((uint4 *)dst)[at] = o;
#pragma unroll
			for (int q = 0; q < WAG_MAX_RANKS; q++)
				if (pdst[q])
					((uint4 *)pdst[q])[at] = o;
		}
	}
	uint64_t done = full * E;
	const T *s2[WAG_MAX_RANKS];
	T *p2[WAG_MAX_RANKS];
#pragma unroll
	for (int q = 0; q < WAG_MAX_RANKS; q++) {
		s2[q] = src[q] + done;
		p2[q] = pdst[q] ? pdst[q] + done : NULL;
	}
	reduce_range<T>(op, n, s2, dst + done, p2, len - done, vec);
}

/* ------------------------------------------------------- LL allreduce
 * One 8-byte packet per thread: pushed with its flag to every peer's LL area
 * (half = epoch parity, slot = this rank), then every rank's packet read in
 * rank order and reduced. Packet k always belongs to block k / WAG_LL_TPB, so
 * a block's epoch counter is the same on every rank. */

WAG_DEV uint64_t load_bytes(const void *base, uint64_t off, uint32_t nb)
{
	const char *p = (const char *)base + off;
	if (nb == 8 && ((uintptr_t)p & 7) == 0)
		return *(const uint64_t *)p;
	uint64_t v = 0;
	for (uint32_t i = 0; i < nb; i++)
		v |= (uint64_t)(unsigned char)p[i] << (8 * i);
	return v;
}

WAG_DEV void store_bytes(void *base, uint64_t off, uint32_t nb, uint64_t v)
{
	char *p = (char *)base + off;
	if (nb == 8 && ((uintptr_t)p & 7) == 0) {
		*(uint64_t *)p = v;
		return;
	}
	for (uint32_t i = 0; i < nb; i++)
		p[i] = (char)(v >> (8 * i));
}

template <typename T> __global__ void __launch_bounds__(WAG_LL_TPB) k_allreduce_ll(wag_kargs a)
{
	typedef typename Tr<T>::A A;
	constexpr int E = 8 / sizeof(T);
	uint32_t g = blockIdx.x;
	uint64_t *ep = local_at(a, WAG_L_LL, g);
	uint64_t c = *ep + 1;
	uint32_t flag = (uint32_t)(c % 0xffffffffull) + 1;
	uint64_t half = c & 1;
	uint64_t bytes = a.count * sizeof(T);
	uint64_t k = (uint64_t)g * WAG_LL_TPB + threadIdx.x;
	int me = a.rank, n = a.nranks;
	if (g == 0)
		sig_all(a, true, WAG_S_LL, half, flag);
	if (k * 8 < bytes) {
		uint64_t boff = k * 8;
		uint32_t nb = bytes - boff < 8 ? (uint32_t)(bytes - boff) : 8;
		uint64_t mine = load_bytes(a.in, boff, nb);
#pragma unroll
		for (int q = 0; q < WAG_MAX_RANKS; q++)
			if (q < n && q != me)
				weft_ll16_write((uint4 *)(a.scr[q] + a.lay.ll + (half * n + me) * a.lay.ll_slot) + k, mine, flag);
		A acc[E];
		bool ok = true;
#pragma unroll
		for (int q = 0; q < WAG_MAX_RANKS; q++) {
			if (q >= n)
				break;
			uint64_t v = mine;
			if (q != me && ok)
				ok = weft_ll16_read((const uint4 *)(a.scr[me] + a.lay.ll + (half * n + q) * a.lay.ll_slot) + k,
						    flag, &v, a.abort[q]) == WEFT_DEV_OK;
			const T *t = reinterpret_cast<const T *>(&v);
#pragma unroll
			for (int e = 0; e < E; e++)
				acc[e] = q == 0 ? Tr<T>::ld(t[e]) : combine<A>(a.op, acc[e], Tr<T>::ld(t[e]));
		}
		uint64_t o = 0;
		T *ot = reinterpret_cast<T *>(&o);
#pragma unroll
		for (int e = 0; e < E; e++)
			ot[e] = Tr<T>::st(finish<A>(a.op, acc[e], n));
		if (ok)
			store_bytes(a.out, boff, nb, o);
	}
	if (g == 0)
		sig_all(a, false, WAG_S_LL, half, flag);
	__syncthreads();
	if (threadIdx.x == 0)
		*ep = c;
}

/* ------------------------------------------- LL exchanges (small sizes)
 * The LL allreduce's scheme for the other collectives that swap one message
 * with every peer: thread k moves packet k of the message for each peer (an
 * allgather sends its input to all, an alltoall and a reduce-scatter block q
 * to peer q), then reads packet k of every peer's message and delivers it.
 * Each call sends to and receives from every peer on every block launched,
 * so the LL epochs (shared with allreduce-ll) stay in step on every rank.
 * a.count is the message per peer: bytes (move), elements (reduce-scatter). */

WAG_DEV uint4 *ll_slot_at(const wag_kargs &a, int owner, uint64_t half, int sender)
{
	return (uint4 *)(a.scr[owner] + a.lay.ll + (half * a.nranks + sender) * a.lay.ll_slot);
}

/* a.mode: WAG_LL_ALLGATHER, WAG_LL_ALLTOALL or WAG_LL_BROADCAST. A broadcast
 * keeps the exchange symmetric (the non-roots send empty packets, and every
 * rank reads every peer's): that is what keeps the epochs safe, and costs
 * nothing a small broadcast would notice. */
__global__ void __launch_bounds__(WAG_LL_TPB) k_ll_move(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	uint64_t *ep = local_at(a, WAG_L_LL, g);
	uint64_t c = *ep + 1;
	uint32_t flag = (uint32_t)(c % 0xffffffffull) + 1;
	uint64_t half = c & 1, m = a.count;
	uint64_t k = (uint64_t)g * WAG_LL_TPB + threadIdx.x;
	int me = a.rank, n = a.nranks, a2a = a.mode == WAG_LL_ALLTOALL, bc = a.mode == WAG_LL_BROADCAST;
	int sends = !bc || me == a.root;
	const char *in = (const char *)a.in;
	char *out = (char *)a.out;
	if (g == 0)
		sig_all(a, true, WAG_S_LL, half, flag);
	if (k * 8 < m) {
		uint64_t boff = k * 8;
		uint32_t nb = m - boff < 8 ? (uint32_t)(m - boff) : 8;
		uint64_t bcv = bc && sends ? load_bytes(in, boff, nb) : 0;
#pragma unroll
		for (int q = 0; q < WAG_MAX_RANKS; q++)
			if (q < n && q != me)
				weft_ll16_write(ll_slot_at(a, q, half, me) + k,
						bc ? bcv : load_bytes(in + (a2a ? (uint64_t)q * m : 0), boff, nb), flag);
		/* Own part (in place it is already there: same bytes). */
		if (!bc)
			store_bytes(out + (uint64_t)me * m, boff, nb,
				    load_bytes(in + (a2a ? (uint64_t)me * m : 0), boff, nb));
		else if (sends && out != in)
			store_bytes(out, boff, nb, bcv);
#pragma unroll
		for (int q = 0; q < WAG_MAX_RANKS; q++) {
			uint64_t v;
			if (q < n && q != me &&
			    weft_ll16_read(ll_slot_at(a, me, half, q) + k, flag, &v, a.abort[q]) == WEFT_DEV_OK &&
			    (!bc || q == a.root))
				store_bytes(out + (bc ? 0 : (uint64_t)q * m), boff, nb, v);
		}
	}
	if (g == 0)
		sig_all(a, false, WAG_S_LL, half, flag);
	__syncthreads();
	if (threadIdx.x == 0)
		*ep = c;
}

/* Reduce-scatter: block q of the input goes to peer q; the own block is
 * reduced in rank order from the peers' packets and the own input. */
template <typename T> __global__ void __launch_bounds__(WAG_LL_TPB) k_reduce_scatter_ll(wag_kargs a)
{
	typedef typename Tr<T>::A A;
	constexpr int E = 8 / sizeof(T);
	uint32_t g = blockIdx.x;
	uint64_t *ep = local_at(a, WAG_L_LL, g);
	uint64_t c = *ep + 1;
	uint32_t flag = (uint32_t)(c % 0xffffffffull) + 1;
	uint64_t half = c & 1, m = a.count * sizeof(T);
	uint64_t k = (uint64_t)g * WAG_LL_TPB + threadIdx.x;
	int me = a.rank, n = a.nranks;
	const char *in = (const char *)a.in;
	if (g == 0)
		sig_all(a, true, WAG_S_LL, half, flag);
	if (k * 8 < m) {
		uint64_t boff = k * 8;
		uint32_t nb = m - boff < 8 ? (uint32_t)(m - boff) : 8;
#pragma unroll
		for (int q = 0; q < WAG_MAX_RANKS; q++)
			if (q < n && q != me)
				weft_ll16_write(ll_slot_at(a, q, half, me) + k, load_bytes(in + (uint64_t)q * m, boff, nb), flag);
		uint64_t mine = load_bytes(in + (uint64_t)me * m, boff, nb);
		A acc[E];
		bool ok = true;
#pragma unroll
		for (int q = 0; q < WAG_MAX_RANKS; q++) {
			if (q >= n)
				break;
			uint64_t v = mine;
			if (q != me && ok)
				ok = weft_ll16_read(ll_slot_at(a, me, half, q) + k, flag, &v, a.abort[q]) == WEFT_DEV_OK;
			const T *t = reinterpret_cast<const T *>(&v);
#pragma unroll
			for (int e = 0; e < E; e++)
				acc[e] = q == 0 ? Tr<T>::ld(t[e]) : combine<A>(a.op, acc[e], Tr<T>::ld(t[e]));
		}
		uint64_t o = 0;
		T *ot = reinterpret_cast<T *>(&o);
#pragma unroll
		for (int e = 0; e < E; e++)
			ot[e] = Tr<T>::st(finish<A>(a.op, acc[e], n));
		if (ok)
			store_bytes(a.out, boff, nb, o);
	}
	if (g == 0)
		sig_all(a, false, WAG_S_LL, half, flag);
	__syncthreads();
	if (threadIdx.x == 0)
		*ep = c;
}

/* --------------------------------------------------- one-shot kernels
 * Block g pushes segment g of this rank's input into every peer's one-shot
 * area (half = epoch parity, slot = this rank), raises its flag there, waits
 * for every peer's flag of block g, then reduces (or, for allgather, copies)
 * segment g of every rank. No grid-wide barrier: blocks only wait for the
 * same block of their peers. */

WAG_DEV char *os_at(const wag_kargs &a, int owner, uint64_t half, int sender)
{
	return a.scr[owner] + a.lay.os + (half * a.nranks + sender) * a.lay.os_slot;
}

/* The epoch of this one-shot call: the same on every block (os_done keeps the
 * counters equal), so a call writes one half of every peer's one-shot area.
 * Why it must be one: the writes of call c land in the half that call c-2
 * read, and only call c-1's wait on the peer (which then had started c-1, so
 * finished c-2 entirely, every block) makes that safe; per-block epochs
 * would let a call with fewer blocks reuse a half another block still reads. */
WAG_DEV uint64_t os_epoch(const wag_kargs &a, uint32_t g)
{
	return *local_at(a, WAG_L_OS, g) + 1;
}

/* End of a one-shot call: every block records the epoch; block 0 also for the
 * blocks this call did not launch (no block of this kernel reads those). */
WAG_DEV void os_done(const wag_kargs &a, uint32_t g, uint64_t c)
{
	__syncthreads();
	if (threadIdx.x == 0) {
		*local_at(a, WAG_L_OS, g) = c;
		if (g == 0)
			for (uint32_t b = a.nblocks; b < a.lay.maxb; b++)
				*local_at(a, WAG_L_OS, b) = c;
	}
}

template <typename T> __global__ void __launch_bounds__(WAG_TPB) k_allreduce_oneshot(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	uint64_t c = os_epoch(a, g), half = c & 1;
	int me = a.rank, n = a.nranks;
	uint64_t off, len;
	wag_segment(a.count, 16 / sizeof(T), a.nblocks, g, &off, &len);
	const T *in = (const T *)a.in + off;
#pragma unroll
	for (int q = 0; q < WAG_MAX_RANKS; q++)
		if (q < n && q != me)
			copy_range(os_at(a, q, half, me) + off * sizeof(T), in, len * sizeof(T));
	if (g == 0)
		sig_all(a, true, WAG_S_OS, half, sig_flag(c));
	block_signal_peers(a, WAG_F_OS, g, c);
	if (!block_wait_peers(a, WAG_F_OS, g, c))
		return;
	if (g == 0)
		sig_all(a, false, WAG_S_OS, half, sig_flag(c));
	const T *src[WAG_MAX_RANKS];
	T *pdst[WAG_MAX_RANKS];
#pragma unroll
	for (int q = 0; q < WAG_MAX_RANKS; q++) {
		src[q] = q == me ? in : q < n ? (const T *)os_at(a, me, half, q) + off : in;
		pdst[q] = NULL;
	}
	reduce_range<T>(a.op, n, src, (T *)a.out + off, pdst, len, a.vec != 0);
	os_done(a, g, c);
}

/* Allgather in bytes: count is one rank's block in bytes. */
__global__ void __launch_bounds__(WAG_TPB) k_allgather_oneshot(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	uint64_t c = os_epoch(a, g), half = c & 1;
	int me = a.rank, n = a.nranks;
	uint64_t off, len;
	wag_segment(a.count, 16, a.nblocks, g, &off, &len);
	const char *in = (const char *)a.in + off;
	char *out = (char *)a.out;
#pragma unroll
	for (int q = 0; q < WAG_MAX_RANKS; q++)
		if (q < n && q != me)
			copy_range(os_at(a, q, half, me) + off, in, len);
	char *mine = out + (uint64_t)me * a.count + off;
	if (mine != in)
		copy_range(mine, in, len);
	if (g == 0)
		sig_all(a, true, WAG_S_OS, half, sig_flag(c));
	block_signal_peers(a, WAG_F_OS, g, c);
	if (!block_wait_peers(a, WAG_F_OS, g, c))
		return;
	if (g == 0)
		sig_all(a, false, WAG_S_OS, half, sig_flag(c));
#pragma unroll
	for (int q = 0; q < WAG_MAX_RANKS; q++)
		if (q < n && q != me)
			copy_range(out + (uint64_t)q * a.count + off, os_at(a, me, half, q) + off, len);
	os_done(a, g, c);
}

/* ------------------------------------------ pipelined rings (large sizes)
 * Each block walks its tiles (schedule.h) in a software pipeline: in
 * iteration i it sends tile i, reduces tile i-1 (and pushes the result), and
 * receives the results of tile i-2. Ring slots are reused after the peer
 * acknowledged them (credit flags); every wait depends only on a peer's
 * earlier iterations, so with depth >= 2 no cycle of waits can form. */

template <typename T> __global__ void __launch_bounds__(WAG_TPB) k_allreduce_rsag(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	const wag_sched &s = a.s;
	int me = a.rank, n = a.nranks;
	uint64_t nt = wag_block_tiles(&s, g);
	uint64_t rs0 = *local_at(a, WAG_L_RS, g), ag0 = *local_at(a, WAG_L_AG, g);
	uint64_t D = a.lay.depth;
	const T *in = (const T *)a.in;
	T *out = (T *)a.out;
	for (uint64_t i = 0; i < nt + 2; i++) {
		if (i < nt) { /* reduce-scatter: tile t of block q goes to q */
			uint64_t t = g + i * s.nblocks, seq = rs0 + i;
			if (seq + 1 > D && !block_wait_peers(a, WAG_F_RS_CRED, g, seq + 1 - D))
				return;
			if (g == 0 && i == 0)
				sig_all(a, true, WAG_S_RS, seq, sig_flag(seq));
#pragma unroll
			for (int q = 0; q < WAG_MAX_RANKS; q++)
				if (q < n && q != me) {
					uint64_t off, len;
					wag_tile(&s, q, t, &off, &len);
					copy_range(ring_at(a, q, a.lay.rs, me, g, seq), in + off, len * sizeof(T));
				}
			block_signal_peers(a, WAG_F_RS_READY, g, seq + 1);
		}
		if (i >= 1 && i - 1 < nt) { /* reduce own tile, push the result */
			uint64_t j = i - 1, t = g + j * s.nblocks, seq = rs0 + j, aseq = ag0 + j;
			if (!block_wait_peers(a, WAG_F_RS_READY, g, seq + 1))
				return;
			if (g == 0 && j == 0)
				sig_all(a, false, WAG_S_RS, seq, sig_flag(seq));
			if (aseq + 1 > D && !block_wait_peers(a, WAG_F_AG_CRED, g, aseq + 1 - D))
				return;
			uint64_t off, len;
			wag_tile(&s, me, t, &off, &len);
			const T *src[WAG_MAX_RANKS];
			T *pdst[WAG_MAX_RANKS];
#pragma unroll
			for (int q = 0; q < WAG_MAX_RANKS; q++) {
				src[q] = q < n && q != me ? (const T *)ring_at(a, me, a.lay.rs, q, g, seq) : in + off;
				pdst[q] = q < n && q != me ? (T *)ring_at(a, q, a.lay.ag, me, g, aseq) : NULL;
			}
			reduce_range<T>(a.op, n, src, out + off, pdst, len, a.vec != 0);
			block_signal_peers(a, WAG_F_RS_CRED, g, seq + 1);
			if (threadIdx.x == 0)
#pragma unroll
				for (int q = 0; q < WAG_MAX_RANKS; q++)
					if (q < n && q != me)
						weft_st_release_sys(flag_at(a, q, WAG_F_AG_READY, me, g), aseq + 1);
		}
		if (i >= 2 && i - 2 < nt) { /* allgather: everyone's reduced tile */
			uint64_t j = i - 2, t = g + j * s.nblocks, aseq = ag0 + j;
			if (!block_wait_peers(a, WAG_F_AG_READY, g, aseq + 1))
				return;
#pragma unroll
			for (int q = 0; q < WAG_MAX_RANKS; q++)
				if (q < n && q != me) {
					uint64_t off, len;
					wag_tile(&s, q, t, &off, &len);
					copy_range(out + off, ring_at(a, me, a.lay.ag, q, g, aseq), len * sizeof(T));
				}
			block_signal_peers(a, WAG_F_AG_CRED, g, aseq + 1);
		}
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		*local_at(a, WAG_L_RS, g) = rs0 + nt;
		*local_at(a, WAG_L_AG, g) = ag0 + nt;
	}
}

/* Allgather in bytes through the allgather ring: s is one rank's block. As
 * alltoall (A2A): peer q gets block q of the input instead of the whole input;
 * in place works because block g reads tile t of every input block (sending
 * it) in an earlier iteration than it writes tile t of the output blocks. */
template <bool A2A> __global__ void __launch_bounds__(WAG_TPB) k_allgather_ring(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	const wag_sched &s = a.s;
	int me = a.rank, n = a.nranks;
	uint64_t nt = wag_block_tiles(&s, g);
	uint64_t ag0 = *local_at(a, WAG_L_AG, g);
	uint64_t D = a.lay.depth;
	const char *in = (const char *)a.in;
	char *out = (char *)a.out;
	char *mine = out + wag_peer_block(a.count, me);
	for (uint64_t i = 0; i < nt + 1; i++) {
		if (i < nt) {
			uint64_t t = g + i * s.nblocks, seq = ag0 + i, off, len;
			wag_tile(&s, 0, t, &off, &len);
			if (seq + 1 > D && !block_wait_peers(a, WAG_F_AG_CRED, g, seq + 1 - D))
				return;
			if (g == 0 && i == 0)
				sig_all(a, true, WAG_S_AG, seq, sig_flag(seq));
#pragma unroll
			for (int q = 0; q < WAG_MAX_RANKS; q++)
				if (q < n && q != me)
					copy_range(ring_at(a, q, a.lay.ag, me, g, seq),
						   in + (A2A ? wag_peer_block(a.count, q) : 0) + off, len);
			const char *own = in + (A2A ? wag_peer_block(a.count, me) : 0);
			if (mine != own)
				copy_range(mine + off, own + off, len);
			block_signal_peers(a, WAG_F_AG_READY, g, seq + 1);
		}
		if (i >= 1) {
			uint64_t j = i - 1, t = g + j * s.nblocks, seq = ag0 + j, off, len;
			wag_tile(&s, 0, t, &off, &len);
			if (!block_wait_peers(a, WAG_F_AG_READY, g, seq + 1))
				return;
			if (g == 0 && j == 0)
				sig_all(a, false, WAG_S_AG, seq, sig_flag(seq));
#pragma unroll
			for (int q = 0; q < WAG_MAX_RANKS; q++)
				if (q < n && q != me)
					copy_range(out + wag_peer_block(a.count, q) + off, ring_at(a, me, a.lay.ag, q, g, seq),
						   len);
			block_signal_peers(a, WAG_F_AG_CRED, g, seq + 1);
		}
	}
	__syncthreads();
	if (threadIdx.x == 0)
		*local_at(a, WAG_L_AG, g) = ag0 + nt;
}

/* ------------------------------------------ reduce-scatter, reduce, broadcast,
 * alltoall. One-shot variants share the one-shot area and epoch (os_epoch):
 * every block of every rank raises its flag at every peer and waits for every
 * peer's, also where it moves nothing (a non-root of broadcast, the root of
 * reduce), so each call is the step that makes the next call's writes safe.
 * Ring variants share the reduce-scatter (RS) or allgather (AG) ring with the
 * allreduce and allgather kernels: per block one sequence number per tile,
 * READY raised by the writer at the readers it wrote to, CRED raised by every
 * reader after reading, and by every rank at the end for the whole call (what
 * it read nothing of counts as consumed), so writers of later calls, which
 * wait for CRED from every peer, see every rank's credit. */

/* Reduce-scatter, one-shot: count is one rank's block (elements). Block g
 * pushes segment g of block q of the input to peer q, then reduces segment g
 * of its own block from every rank in rank order. */
template <typename T> __global__ void __launch_bounds__(WAG_TPB) k_reduce_scatter_oneshot(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	uint64_t c = os_epoch(a, g), half = c & 1;
	int me = a.rank, n = a.nranks;
	uint64_t off, len;
	wag_segment(a.count, 16 / sizeof(T), a.nblocks, g, &off, &len);
	const T *in = (const T *)a.in;
#pragma unroll
	for (int q = 0; q < WAG_MAX_RANKS; q++)
		if (q < n && q != me)
			copy_range(os_at(a, q, half, me) + off * sizeof(T), in + wag_peer_block(a.count, q) + off,
				   len * sizeof(T));
	if (g == 0)
		sig_all(a, true, WAG_S_OS, half, sig_flag(c));
	block_signal_peers(a, WAG_F_OS, g, c);
	if (!block_wait_peers(a, WAG_F_OS, g, c))
		return;
	if (g == 0)
		sig_all(a, false, WAG_S_OS, half, sig_flag(c));
	const T *mine = in + wag_peer_block(a.count, me) + off;
	const T *src[WAG_MAX_RANKS];
	T *pdst[WAG_MAX_RANKS];
#pragma unroll
	for (int q = 0; q < WAG_MAX_RANKS; q++) {
		src[q] = q < n && q != me ? (const T *)os_at(a, me, half, q) + off : mine;
		pdst[q] = NULL;
	}
	reduce_range<T>(a.op, n, src, (T *)a.out + off, pdst, len, a.vec != 0);
	os_done(a, g, c);
}

/* Reduce, one-shot: every non-root pushes segment g to the root; the root
 * reduces it in rank order. recvbuf is touched on the root only. */
template <typename T> __global__ void __launch_bounds__(WAG_TPB) k_reduce_oneshot(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	uint64_t c = os_epoch(a, g), half = c & 1;
	int me = a.rank, n = a.nranks, root = a.root;
	uint64_t off, len;
	wag_segment(a.count, 16 / sizeof(T), a.nblocks, g, &off, &len);
	const T *in = (const T *)a.in + off;
	if (wag_reduce_sends(me, root, root))
		copy_range(os_at(a, root, half, me) + off * sizeof(T), in, len * sizeof(T));
	if (g == 0)
		sig_all(a, true, WAG_S_OS, half, sig_flag(c));
	block_signal_peers(a, WAG_F_OS, g, c);
	if (!block_wait_peers(a, WAG_F_OS, g, c))
		return;
	if (g == 0)
		sig_all(a, false, WAG_S_OS, half, sig_flag(c));
	if (me == root) {
		const T *src[WAG_MAX_RANKS];
		T *pdst[WAG_MAX_RANKS];
#pragma unroll
		for (int q = 0; q < WAG_MAX_RANKS; q++) {
			src[q] = q < n && q != me ? (const T *)os_at(a, me, half, q) + off : in;
			pdst[q] = NULL;
		}
		reduce_range<T>(a.op, n, src, (T *)a.out + off, pdst, len, a.vec != 0);
	}
	os_done(a, g, c);
}

/* Broadcast, one-shot, in bytes: the root pushes segment g to every peer. */
__global__ void __launch_bounds__(WAG_TPB) k_broadcast_oneshot(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	uint64_t c = os_epoch(a, g), half = c & 1;
	int me = a.rank, n = a.nranks, root = a.root;
	uint64_t off, len;
	wag_segment(a.count, 16, a.nblocks, g, &off, &len);
	char *out = (char *)a.out + off;
	if (me == root) {
		const char *in = (const char *)a.in + off;
#pragma unroll
		for (int q = 0; q < WAG_MAX_RANKS; q++)
			if (q < n && wag_bcast_sends(me, root, q))
				copy_range(os_at(a, q, half, me) + off, in, len);
		if (out != in)
			copy_range(out, in, len);
	}
	if (g == 0)
		sig_all(a, true, WAG_S_OS, half, sig_flag(c));
	block_signal_peers(a, WAG_F_OS, g, c);
	if (!block_wait_peers(a, WAG_F_OS, g, c))
		return;
	if (g == 0)
		sig_all(a, false, WAG_S_OS, half, sig_flag(c));
	if (me != root)
		copy_range(out, os_at(a, me, half, root) + off, len);
	os_done(a, g, c);
}

/* Alltoall, one-shot, in bytes: count is one block. Block g pushes segment g
 * of input block q to peer q, then copies segment g of what each peer sent
 * into output block q; in place works since the same block reads segment g of
 * input block q before it writes segment g of output block q. */
__global__ void __launch_bounds__(WAG_TPB) k_alltoall_oneshot(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	uint64_t c = os_epoch(a, g), half = c & 1;
	int me = a.rank, n = a.nranks;
	uint64_t off, len;
	wag_segment(a.count, 16, a.nblocks, g, &off, &len);
	const char *in = (const char *)a.in;
	char *out = (char *)a.out;
#pragma unroll
	for (int q = 0; q < WAG_MAX_RANKS; q++)
		if (q < n && q != me)
			copy_range(os_at(a, q, half, me) + off, in + wag_peer_block(a.count, q) + off, len);
	if (out != in)
		copy_range(out + wag_peer_block(a.count, me) + off, in + wag_peer_block(a.count, me) + off, len);
	if (g == 0)
		sig_all(a, true, WAG_S_OS, half, sig_flag(c));
	block_signal_peers(a, WAG_F_OS, g, c);
	if (!block_wait_peers(a, WAG_F_OS, g, c))
		return;
	if (g == 0)
		sig_all(a, false, WAG_S_OS, half, sig_flag(c));
#pragma unroll
	for (int q = 0; q < WAG_MAX_RANKS; q++)
		if (q < n && q != me)
			copy_range(out + wag_peer_block(a.count, q) + off, os_at(a, me, half, q) + off, len);
	os_done(a, g, c);
}

/* Reduce-scatter through the RS ring: s tiles one rank's block. Iteration i
 * sends tile i of every peer's block to that peer and reduces tile i-1 of the
 * own block, as the first half of k_allreduce_rsag. */
template <typename T> __global__ void __launch_bounds__(WAG_TPB) k_reduce_scatter_ring(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	const wag_sched &s = a.s;
	int me = a.rank, n = a.nranks;
	uint64_t nt = wag_block_tiles(&s, g);
	uint64_t rs0 = *local_at(a, WAG_L_RS, g);
	uint64_t D = a.lay.depth;
	const T *in = (const T *)a.in;
	T *out = (T *)a.out;
	for (uint64_t i = 0; i < nt + 1; i++) {
		if (i < nt) {
			uint64_t t = g + i * s.nblocks, seq = rs0 + i, off, len;
			wag_tile(&s, 0, t, &off, &len);
			if (seq + 1 > D && !block_wait_peers(a, WAG_F_RS_CRED, g, seq + 1 - D))
				return;
			if (g == 0 && i == 0)
				sig_all(a, true, WAG_S_RS, seq, sig_flag(seq));
#pragma unroll
			for (int q = 0; q < WAG_MAX_RANKS; q++)
				if (q < n && q != me)
					copy_range(ring_at(a, q, a.lay.rs, me, g, seq), in + wag_peer_block(a.count, q) + off,
						   len * sizeof(T));
			block_signal_peers(a, WAG_F_RS_READY, g, seq + 1);
		}
		if (i >= 1) {
			uint64_t j = i - 1, t = g + j * s.nblocks, seq = rs0 + j, off, len;
			wag_tile(&s, 0, t, &off, &len);
			if (!block_wait_peers(a, WAG_F_RS_READY, g, seq + 1))
				return;
			if (g == 0 && j == 0)
				sig_all(a, false, WAG_S_RS, seq, sig_flag(seq));
			const T *src[WAG_MAX_RANKS];
			T *pdst[WAG_MAX_RANKS];
#pragma unroll
			for (int q = 0; q < WAG_MAX_RANKS; q++) {
				src[q] = q < n && q != me ? (const T *)ring_at(a, me, a.lay.rs, q, g, seq)
							  : in + wag_peer_block(a.count, me) + off;
				pdst[q] = NULL;
			}
			reduce_range<T>(a.op, n, src, out + off, pdst, len, a.vec != 0);
			block_signal_peers(a, WAG_F_RS_CRED, g, seq + 1);
		}
	}
	__syncthreads();
	if (threadIdx.x == 0)
		*local_at(a, WAG_L_RS, g) = rs0 + nt;
}

/* Reduce through the RS ring: every non-root sends each tile to the root
 * (waiting only for the root's credit), the root reduces it in rank order. At
 * the end every rank credits every peer for the whole call. */
template <typename T> __global__ void __launch_bounds__(WAG_TPB) k_reduce_ring(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	const wag_sched &s = a.s;
	int me = a.rank, n = a.nranks, root = a.root;
	uint64_t nt = wag_block_tiles(&s, g);
	uint64_t rs0 = *local_at(a, WAG_L_RS, g);
	uint64_t D = a.lay.depth;
	const T *in = (const T *)a.in;
	for (uint64_t i = 0; i < nt; i++) {
		uint64_t t = g + i * s.nblocks, seq = rs0 + i, off, len;
		wag_tile(&s, 0, t, &off, &len);
		if (me != root) {
			if (seq + 1 > D && !block_wait_peer(a, WAG_F_RS_CRED, root, g, seq + 1 - D))
				return;
			if (g == 0 && i == 0 && threadIdx.x == 0)
				sig_send(a, WAG_S_RS, root, seq, sig_flag(seq), a.sig);
			if (wag_reduce_sends(me, root, root))
				copy_range(ring_at(a, root, a.lay.rs, me, g, seq), in + off, len * sizeof(T));
			block_signal_peer(a, WAG_F_RS_READY, root, g, seq + 1);
		} else {
			if (!block_wait_peers(a, WAG_F_RS_READY, g, seq + 1))
				return;
			if (g == 0 && i == 0)
				sig_all(a, false, WAG_S_RS, seq, sig_flag(seq));
			const T *src[WAG_MAX_RANKS];
			T *pdst[WAG_MAX_RANKS];
#pragma unroll
			for (int q = 0; q < WAG_MAX_RANKS; q++) {
				src[q] = q < n && q != me ? (const T *)ring_at(a, me, a.lay.rs, q, g, seq) : in + off;
				pdst[q] = NULL;
			}
			reduce_range<T>(a.op, n, src, (T *)a.out + off, pdst, len, a.vec != 0);
			block_signal_peers(a, WAG_F_RS_CRED, g, seq + 1);
		}
	}
	block_signal_peers(a, WAG_F_RS_CRED, g, rs0 + nt);
	if (threadIdx.x == 0)
		*local_at(a, WAG_L_RS, g) = rs0 + nt;
}

/* Broadcast through the AG ring, in bytes: the root writes each tile into
 * every peer's ring (after every peer's credit), the others copy it out and
 * credit the root. */
__global__ void __launch_bounds__(WAG_TPB) k_broadcast_ring(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	const wag_sched &s = a.s;
	int me = a.rank, n = a.nranks, root = a.root;
	uint64_t nt = wag_block_tiles(&s, g);
	uint64_t ag0 = *local_at(a, WAG_L_AG, g);
	uint64_t D = a.lay.depth;
	const char *in = (const char *)a.in;
	char *out = (char *)a.out;
	for (uint64_t i = 0; i < nt; i++) {
		uint64_t t = g + i * s.nblocks, seq = ag0 + i, off, len;
		wag_tile(&s, 0, t, &off, &len);
		if (me == root) {
			if (seq + 1 > D && !block_wait_peers(a, WAG_F_AG_CRED, g, seq + 1 - D))
				return;
			if (g == 0 && i == 0)
				sig_all(a, true, WAG_S_AG, seq, sig_flag(seq));
#pragma unroll
			for (int q = 0; q < WAG_MAX_RANKS; q++)
				if (q < n && wag_bcast_sends(me, root, q))
					copy_range(ring_at(a, q, a.lay.ag, me, g, seq), in + off, len);
			if (out != in)
				copy_range(out + off, in + off, len);
			block_signal_peers(a, WAG_F_AG_READY, g, seq + 1);
		} else {
			if (!block_wait_peer(a, WAG_F_AG_READY, root, g, seq + 1))
				return;
			if (g == 0 && i == 0 && threadIdx.x == 0)
				sig_check(a, WAG_S_AG, root, seq, sig_flag(seq), a.sig);
			copy_range(out + off, ring_at(a, me, a.lay.ag, root, g, seq), len);
			block_signal_peer(a, WAG_F_AG_CRED, root, g, seq + 1);
		}
	}
	block_signal_peers(a, WAG_F_AG_CRED, g, ag0 + nt);
	if (threadIdx.x == 0)
		*local_at(a, WAG_L_AG, g) = ag0 + nt;
}

/* ------------------------------------------------------ point to point
 * One channel per (peer, direction) of the batch, plus one for copies to this
 * rank itself, each with pblocks CUDA blocks that run at once (so sends and
 * receives of a batch progress together and no order of the calls can
 * deadlock). Channel block h walks the channel's entries in batch order and
 * moves their tiles h, h + pblocks, ... (schedule.h) through the P2P ring of
 * (sender, h) in the receiver's scratch, one sequence number per tile: the
 * sender waits for the receiver's credit of the slot, writes it and raises
 * READY; the receiver waits for READY, copies out and raises CRED. Entries of
 * up to p2p_ll_max bytes go as LL16 packets into a ring of their own (only
 * packets ever land there, so a stale slot never shows the awaited flag): no
 * READY, the flag comes from the tile's sequence number. Large entries move
 * in p2p_tile slots, the rest in tile_bytes (schedule.h). Sequence counters
 * are per (direction, peer, h), so batches of any grouping match. */

WAG_DEV char *p2p_slot(const wag_kargs &a, int owner, int sender, uint32_t h, uint64_t seq)
{
	return a.scr[owner] + a.lay.p2p +
	       (((uint64_t)sender * a.lay.pblocks + h) * a.lay.depth + seq % a.lay.depth) * a.lay.p2p_tile;
}

WAG_DEV uint4 *p2p_ll_slot(const wag_kargs &a, int owner, int sender, uint32_t h, uint64_t seq)
{
	return (uint4 *)(a.scr[owner] + a.lay.p2p_ll +
			 (((uint64_t)sender * a.lay.pblocks + h) * a.lay.depth + seq % a.lay.depth) * a.lay.p2p_ll_slot);
}

static_assert(WAG_TPB * 8 == WAG_P2P_LL_TILE, "an LL tile row is one 8-byte packet per thread");

WAG_DEV uint64_t *p2p_counter(const wag_kargs &a, int dir, int peer, uint32_t h)
{
	return (uint64_t *)(a.scr[a.rank] + a.lay.p2p_local) + ((size_t)dir * WAG_MAX_RANKS + peer) * a.lay.fb + h;
}

__global__ void __launch_bounds__(WAG_TPB) k_p2p(wag_kargs a, wag_p2p_args p)
{
	uint32_t P = a.lay.pblocks, ch = blockIdx.x / P, h = blockIdx.x % P;
	int peer = p.ch_peer[ch], kind = p.ch_kind[ch], me = a.rank;
	uint64_t D = a.lay.depth;
	uint64_t *ctr = kind == WAG_P2P_SELF ? NULL
					     : p2p_counter(a, kind == WAG_P2P_SEND ? WAG_P2P_TX : WAG_P2P_RX, peer, h);
	uint64_t seq = ctr ? *ctr : 0;
	for (uint32_t k = 0; k < p.nops; k++) {
		if (p.ops[k].peer != peer || p.ops[k].kind != kind)
			continue;
		char *buf = p.ops[k].buf;
		const char *src = p.ops[k].src;
		uint64_t bytes = p.ops[k].bytes;
		uint64_t T = wag_p2p_entry_tile(bytes, a.lay.p2p_ll_max, a.lay.tile_bytes, a.lay.p2p_tile, P);
		bool ll = bytes <= a.lay.p2p_ll_max;
		uint64_t nt = wag_p2p_block_tiles(bytes, T, P, h);
		for (uint64_t i = 0; i < nt; i++) {
			uint64_t off, len;
			wag_p2p_tile(bytes, T, P, h, i, &off, &len);
			if (kind == WAG_P2P_SELF) {
				if (buf != src)
					copy_range(buf + off, src + off, len);
				continue;
			}
			uint32_t flag = (uint32_t)(seq % 0xffffffffull) + 1;
			/* An entry's signature goes with its first tile (block 0's); a
			 * receiver whose entry differs stops there (its sizes may too). */
			bool first = h == 0 && i == 0;
			if (kind == WAG_P2P_SEND) {
				if (seq + 1 > D && !block_wait_peer(a, WAG_F_P2P_CRED, peer, h, seq + 1 - D))
					return;
				if (first && threadIdx.x == 0)
					sig_send(a, WAG_S_P2P, peer, seq, flag, p.ops[k].sig);
				if (ll) {
					/* The packets carry their flag: no READY. */
					uint4 *slot = p2p_ll_slot(a, peer, me, h, seq);
					for (uint64_t j = threadIdx.x; j * 8 < len; j += blockDim.x) {
						uint32_t nb = len - j * 8 < 8 ? (uint32_t)(len - j * 8) : 8;
						weft_ll16_write(slot + j, load_bytes(buf + off, j * 8, nb), flag);
					}
				} else {
					copy_range(p2p_slot(a, peer, me, h, seq), buf + off, len);
					block_signal_peer(a, WAG_F_P2P_READY, peer, h, seq + 1);
				}
			} else if (ll) {
				if (first && __syncthreads_or(threadIdx.x == 0 &&
							      !sig_check(a, WAG_S_P2P, peer, seq, flag, p.ops[k].sig)))
					return;
				const uint4 *slot = p2p_ll_slot(a, me, peer, h, seq);
				uint64_t v;
				int bad = 0;
				for (uint64_t j = threadIdx.x; j * 8 < len && !bad; j += blockDim.x) {
					uint32_t nb = len - j * 8 < 8 ? (uint32_t)(len - j * 8) : 8;
					if (weft_ll16_read(slot + j, flag, &v, a.abort[peer]) == WEFT_DEV_OK)
						store_bytes(buf + off, j * 8, nb, v);
					else
						bad = 1;
				}
				if (__syncthreads_or(bad))
					return;
				block_signal_peer(a, WAG_F_P2P_CRED, peer, h, seq + 1);
			} else {
				if (!block_wait_peer(a, WAG_F_P2P_READY, peer, h, seq + 1))
					return;
				if (first && __syncthreads_or(threadIdx.x == 0 &&
							      !sig_check(a, WAG_S_P2P, peer, seq, flag, p.ops[k].sig)))
					return;
				copy_range(buf + off, p2p_slot(a, me, peer, h, seq), len);
				block_signal_peer(a, WAG_F_P2P_CRED, peer, h, seq + 1);
			}
			seq++;
		}
	}
	__syncthreads();
	if (threadIdx.x == 0 && ctr)
		*ctr = seq;
}

/* ------------------------------------------ copy-engine schedules (ce.c)
 * Data moves on the copy engines; kernels only bracket a call with barriers
 * and reduce chunks the engines pulled in. */

/* One thread: raise (CE, me) at every peer to the next epoch, then wait for
 * every peer's. The epoch lives in device memory (graph replays keep step);
 * every copy-engine call runs exactly two of these on every rank. */
__global__ void k_ce_barrier(wag_kargs a)
{
	uint64_t *ctr = local_at(a, WAG_L_CE, 0);
	uint64_t c = *ctr + 1;
	int me = a.rank, n = a.nranks;
	__threadfence_system();
#pragma unroll
	for (int q = 0; q < WAG_MAX_RANKS; q++)
		if (q < n && q != me)
			weft_st_release_sys(flag_at(a, q, WAG_F_CE, me, 0), c);
	*ctr = c;
#pragma unroll
	for (int q = 0; q < WAG_MAX_RANKS; q++)
		if (q < n && q != me && !wait_geq(a, flag_at(a, me, WAG_F_CE, q, 0), c, q))
			return;
}

/* The value of chunk-arrival flags: the copy-engine epoch (odd between a
 * call's two barriers, and rising) above the chunk number, so a flag of an
 * earlier call or an earlier chunk is always smaller. */
WAG_DEV uint64_t ce_data_value(const wag_kargs &a, uint64_t seq)
{
	return (*local_at(a, WAG_L_CE, 0) << 24) + seq;
}

/* One thread, after the copy engine pushed chunk seq - 1 of peer's block on
 * this stream: the copy is complete when this kernel runs; the release makes
 * it visible with the flag. */
__global__ void k_ce_signal(wag_kargs a)
{
	__threadfence_system();
	weft_st_release_sys(flag_at(a, a.red.peer, WAG_F_CE_DATA, a.rank, 0), ce_data_value(a, a.red.seq));
}

template <typename T> __global__ void __launch_bounds__(WAG_TPB) k_ce_reduce(wag_kargs a)
{
	if (a.red.seq) {
		int bad = 0;
		if (threadIdx.x == 0) {
			uint64_t v = ce_data_value(a, a.red.seq);
#pragma unroll
			for (int q = 0; q < WAG_MAX_RANKS; q++)
				if (q < a.nranks && q != a.rank && !wait_geq(a, flag_at(a, a.rank, WAG_F_CE_DATA, q, 0), v, q))
					bad = 1;
		}
		if (__syncthreads_or(bad))
			return;
	}
	uint64_t off, len;
	wag_segment(a.red.count, 16 / sizeof(T), gridDim.x, blockIdx.x, &off, &len);
	const T *src[WAG_MAX_RANKS];
	T *pdst[WAG_MAX_RANKS];
#pragma unroll
	for (int q = 0; q < WAG_MAX_RANKS; q++) {
		src[q] = (const T *)a.red.src[q < a.nranks ? q : 0] + off;
		pdst[q] = NULL;
	}
	reduce_range<T>(a.op, a.nranks, src, (T *)a.red.dst + off, pdst, len, a.red.vec != 0);
}

/* ------------------------------------------------ direct kernels (ce.c)
 * The GPU threads read and write the peers' buffers of the call themselves
 * (mapped once per set of buffers, ce.c): no staging, one kernel per call.
 * Block g of every rank meets block g of every peer twice: at the start (the
 * peer's inputs are ready and its outputs may be written: both follow from
 * the peer's stream having reached this call) and at the end (the peer has
 * finished reading this rank's inputs and writing its outputs, so the call's
 * results are complete when the kernel ends and the buffers may be reused).
 * Flag values 2c-1 and 2c for the block's c-th direct call; every rank
 * launches the same blocks for a call, so the per-block counters agree. */

/* false: aborted. The start (odd v) orders nothing of this kernel's: what
 * the peers read was written before it began, and is in this GPU's memory
 * by then, so a relaxed store will do; the end releases every store of the
 * block (the peers' outputs). */
WAG_DEV bool direct_meet(const wag_kargs &a, uint32_t g, uint64_t v)
{
	if (v & 1) {
		if (threadIdx.x == 0)
#pragma unroll
			for (int q = 0; q < WAG_MAX_RANKS; q++)
				if (q < a.nranks && q != a.rank)
					weft_st_relaxed_sys(flag_at(a, q, WAG_F_DIRECT, a.rank, g), v);
	} else {
		block_signal_peers(a, WAG_F_DIRECT, g, v);
	}
	return block_wait_peers(a, WAG_F_DIRECT, g, v);
}

/* Allreduce: this rank reduces its block (wag_block) of every rank's input,
 * segment g of it in block g, and writes the result into every rank's output.
 * Reduce-scatter: this rank's block of every input into its own output. */
template <typename T> __global__ void __launch_bounds__(WAG_TPB) k_direct_reduce(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	uint64_t c = *local_at(a, WAG_L_DIRECT, g) + 1;
	int me = a.rank, n = a.nranks, ar = a.d.mode == WAG_D_ALLREDUCE;
	uint64_t bo, bl, off, len;
	if (ar)
		wag_block(a.count, n, me, 16 / sizeof(T), &bo, &bl);
	else
		bo = (uint64_t)me * a.count, bl = a.count;
	wag_segment(bl, 16 / sizeof(T), a.nblocks, g, &off, &len);
	if (!direct_meet(a, g, 2 * c - 1))
		return;
	const T *src[WAG_MAX_RANKS];
	T *pdst[WAG_MAX_RANKS];
#pragma unroll
	for (int q = 0; q < WAG_MAX_RANKS; q++) {
		int r = q < n ? q : me;
		src[q] = (const T *)(r == me ? (const char *)a.in : a.d.in[r]) + bo + off;
		pdst[q] = ar && q < n && q != me ? (T *)a.d.out[q] + bo + off : NULL;
	}
	T *dst = (T *)a.out + (ar ? bo : 0) + off;
	reduce_range_deep<T, 4>(a.op, n, src, dst, pdst, len, a.vec != 0);
	if (!direct_meet(a, g, 2 * c))
		return;
	if (threadIdx.x == 0)
		*local_at(a, WAG_L_DIRECT, g) = c;
}

/* Data movers, in bytes (count: one rank's block; broadcast: the vector).
 * Allgather: this rank's input into every output at its slot. Alltoall: its
 * block q into rank q's output at its slot. Broadcast: every non-root reads
 * the root's input into its output. */
__global__ void __launch_bounds__(WAG_TPB) k_direct_move(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	uint64_t c = *local_at(a, WAG_L_DIRECT, g) + 1;
	int me = a.rank, n = a.nranks, mode = a.d.mode;
	uint64_t off, len, B = a.count;
	wag_segment(B, 16, a.nblocks, g, &off, &len);
	if (!direct_meet(a, g, 2 * c - 1))
		return;
	const char *in = (const char *)a.in;
	char *out = (char *)a.out;
	if (mode == WAG_D_BROADCAST) {
		const char *from = me == a.root ? in : a.d.in[a.root];
		if (out != from)
			copy_range(out + off, from + off, len);
	} else {
		int a2a = mode == WAG_D_ALLTOALL;
		/* The peers first (remote stores), starting past this rank so that
		 * ranks do not all write to the same peer at once. */
		for (int i = 1; i <= n; i++) {
			int q = (me + i) % n;
			const char *from = in + (a2a ? (uint64_t)q * B : 0) + off;
			char *to = (q == me ? out : a.d.out[q]) + (uint64_t)me * B + off;
			if (to != from)
				copy_range(to, from, len);
		}
	}
	if (!direct_meet(a, g, 2 * c))
		return;
	if (threadIdx.x == 0)
		*local_at(a, WAG_L_DIRECT, g) = c;
}

/* A pre-multiplied sum's first step: out = in * scalar, each product rounded
 * to the element type as NCCL's is (16-bit floats and fp8 multiply exactly
 * in float, then round once; integers wrap). A device scalar is read when the
 * kernel runs, so each replay of a captured graph sees its current value. */
template <typename T>
__global__ void __launch_bounds__(WAG_TPB) k_premul(const T *in, T *out, uint64_t n, const T *sdev, uint64_t sbits)
{
	typedef typename Tr<T>::A A;
	T sv;
	if (sdev)
		sv = *sdev;
	else
		memcpy(&sv, &sbits, sizeof(sv));
	const A s = Tr<T>::ld(sv);
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
		out[i] = Tr<T>::st(combine<A>(WEFT_PROD, Tr<T>::ld(in[i]), s));
}

/* ------------------------------------------------------------ launchers */

static int launched(const char *what, char *err, size_t errlen)
{
	cudaError_t e = cudaGetLastError();
	if (e == cudaSuccess)
		return 0;
	snprintf(err, errlen, "%s: kernel launch failed: %s", what, cudaGetErrorString(e));
	return -WEFT_ERR_TRANSPORT;
}

#define WAG_DISPATCH(kern, grid, tpb, a, st)                                                       \
	do {                                                                                       \
		switch ((a)->dtype) {                                                              \
		case WEFT_FLOAT16:                                                                 \
			kern<__half><<<grid, tpb, 0, st>>>(*(a));                                  \
			break;                                                                     \
		case WEFT_BFLOAT16:                                                                \
			kern<__nv_bfloat16><<<grid, tpb, 0, st>>>(*(a));                           \
			break;                                                                     \
		case WEFT_FLOAT32:                                                                 \
			kern<float><<<grid, tpb, 0, st>>>(*(a));                                   \
			break;                                                                     \
		case WEFT_FLOAT64:                                                                 \
			kern<double><<<grid, tpb, 0, st>>>(*(a));                                  \
			break;                                                                     \
		case WEFT_INT32:                                                                   \
			kern<int32_t><<<grid, tpb, 0, st>>>(*(a));                                 \
			break;                                                                     \
		case WEFT_INT8:                                                                    \
			kern<int8_t><<<grid, tpb, 0, st>>>(*(a));                                  \
			break;                                                                     \
		case WEFT_UINT8:                                                                   \
			kern<uint8_t><<<grid, tpb, 0, st>>>(*(a));                                 \
			break;                                                                     \
		case WEFT_UINT32:                                                                  \
			kern<uint32_t><<<grid, tpb, 0, st>>>(*(a));                                \
			break;                                                                     \
		case WEFT_INT64:                                                                   \
			kern<int64_t><<<grid, tpb, 0, st>>>(*(a));                                 \
			break;                                                                     \
		case WEFT_UINT64:                                                                  \
			kern<uint64_t><<<grid, tpb, 0, st>>>(*(a));                                \
			break;                                                                     \
		case WEFT_FP8_E4M3:                                                                \
			kern<__nv_fp8_e4m3><<<grid, tpb, 0, st>>>(*(a));                           \
			break;                                                                     \
		case WEFT_FP8_E5M2:                                                                \
			kern<__nv_fp8_e5m2><<<grid, tpb, 0, st>>>(*(a));                           \
			break;                                                                     \
		default:                                                                           \
			snprintf(err, errlen, "datatype %d has no kernel", (a)->dtype);            \
			return -ENOTSUP;                                                           \
		}                                                                                  \
	} while (0)

/* One launch per element type: X(T) for the type dtype names. */
#define WAG_EACH_TYPE(dtype, X)                                                 \
	do {                                                                    \
		switch (dtype) {                                                \
		case WEFT_FLOAT16: X(__half); break;                            \
		case WEFT_BFLOAT16: X(__nv_bfloat16); break;                    \
		case WEFT_FLOAT32: X(float); break;                             \
		case WEFT_FLOAT64: X(double); break;                            \
		case WEFT_INT32: X(int32_t); break;                             \
		case WEFT_INT8: X(int8_t); break;                               \
		case WEFT_UINT8: X(uint8_t); break;                             \
		case WEFT_UINT32: X(uint32_t); break;                           \
		case WEFT_INT64: X(int64_t); break;                             \
		case WEFT_UINT64: X(uint64_t); break;                           \
		case WEFT_FP8_E4M3: X(__nv_fp8_e4m3); break;                    \
		case WEFT_FP8_E5M2: X(__nv_fp8_e5m2); break;                    \
		default:                                                        \
			snprintf(err, errlen, "datatype %d has no kernel", dtype); \
			return -ENOTSUP;                                        \
		}                                                               \
	} while (0)

static uint32_t grid_for(uint64_t n, uint32_t max_blocks)
{
	uint64_t want = (n + WAG_TPB - 1) / WAG_TPB;
	return want < max_blocks ? (uint32_t)(want ? want : 1) : max_blocks;
}

#define WAG_PREMUL(T)                                                                                      \
	k_premul<T><<<grid, WAG_TPB, 0, st>>>((const T *)in, (T *)out, n, (const T *)scalar_dev, scalar_bits)

extern "C" int wag_launch_premul(int dtype, const void *in, void *out, uint64_t n, const void *scalar_dev,
				 uint64_t scalar_bits, uint32_t max_blocks, void *stream, char *err, size_t errlen)
{
	uint32_t grid = grid_for(n, max_blocks);
	cudaStream_t st = (cudaStream_t)stream;
	WAG_EACH_TYPE(dtype, WAG_PREMUL);
	return launched("pre-multiplied sum's scaling", err, errlen);
}

/* The cross-host executor's steps (xhost.c): dst = dst op src, where src may
 * be a landing slot in registered host memory (read over PCIe), and an
 * average's division, each element rounded to its type once per step. */
template <typename T> __global__ void __launch_bounds__(WAG_TPB) k_hx_reduce(T *dst, const T *src, uint64_t n, int op)
{
	typedef typename Tr<T>::A A;
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
		dst[i] = Tr<T>::st(combine<A>(op, Tr<T>::ld(dst[i]), Tr<T>::ld(src[i])));
}

template <typename T> __global__ void __launch_bounds__(WAG_TPB) k_hx_divide(T *buf, uint64_t n, int nranks)
{
	typedef typename Tr<T>::A A;
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
		buf[i] = Tr<T>::st(finish<A>(WEFT_AVG, Tr<T>::ld(buf[i]), nranks));
}

#define WAG_HX_REDUCE(T) k_hx_reduce<T><<<grid, WAG_TPB, 0, st>>>((T *)dst, (const T *)src, n, op)
#define WAG_HX_DIVIDE(T) k_hx_divide<T><<<grid, WAG_TPB, 0, st>>>((T *)buf, n, nranks)

extern "C" int wag_launch_hx_reduce(int dtype, int op, void *dst, const void *src, uint64_t n, uint32_t max_blocks,
				    void *stream, char *err, size_t errlen)
{
	uint32_t grid = grid_for(n, max_blocks);
	cudaStream_t st = (cudaStream_t)stream;
	WAG_EACH_TYPE(dtype, WAG_HX_REDUCE);
	return launched("cross-host reduction", err, errlen);
}

extern "C" int wag_launch_hx_divide(int dtype, void *buf, uint64_t n, int nranks, uint32_t max_blocks, void *stream,
				    char *err, size_t errlen)
{
	uint32_t grid = grid_for(n, max_blocks);
	cudaStream_t st = (cudaStream_t)stream;
	WAG_EACH_TYPE(dtype, WAG_HX_DIVIDE);
	return launched("cross-host average", err, errlen);
}

extern "C" int wag_launch_allreduce_ll(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	WAG_DISPATCH(k_allreduce_ll, a->nblocks, WAG_LL_TPB, a, (cudaStream_t)stream);
	return launched("allreduce-ll", err, errlen);
}

extern "C" int wag_launch_ll_move(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	k_ll_move<<<a->nblocks, WAG_LL_TPB, 0, (cudaStream_t)stream>>>(*a);
	static const char *const name[] = {"allgather-ll", "alltoall-ll", "broadcast-ll"};
	return launched(name[a->mode], err, errlen);
}

extern "C" int wag_launch_reduce_scatter_ll(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	WAG_DISPATCH(k_reduce_scatter_ll, a->nblocks, WAG_LL_TPB, a, (cudaStream_t)stream);
	return launched("reduce-scatter-ll", err, errlen);
}

extern "C" int wag_launch_allreduce_oneshot(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	WAG_DISPATCH(k_allreduce_oneshot, a->nblocks, WAG_TPB, a, (cudaStream_t)stream);
	return launched("allreduce-oneshot", err, errlen);
}

extern "C" int wag_launch_allreduce_rsag(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	WAG_DISPATCH(k_allreduce_rsag, a->s.nblocks, WAG_TPB, a, (cudaStream_t)stream);
	return launched("allreduce-rsag", err, errlen);
}

extern "C" int wag_launch_allgather_oneshot(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	k_allgather_oneshot<<<a->nblocks, WAG_TPB, 0, (cudaStream_t)stream>>>(*a);
	return launched("allgather-oneshot", err, errlen);
}

extern "C" int wag_launch_allgather_ring(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	k_allgather_ring<false><<<a->s.nblocks, WAG_TPB, 0, (cudaStream_t)stream>>>(*a);
	return launched("allgather-ring", err, errlen);
}

extern "C" int wag_launch_reduce_scatter_oneshot(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	WAG_DISPATCH(k_reduce_scatter_oneshot, a->nblocks, WAG_TPB, a, (cudaStream_t)stream);
	return launched("reduce-scatter-oneshot", err, errlen);
}

extern "C" int wag_launch_reduce_scatter_ring(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	WAG_DISPATCH(k_reduce_scatter_ring, a->s.nblocks, WAG_TPB, a, (cudaStream_t)stream);
	return launched("reduce-scatter-ring", err, errlen);
}

extern "C" int wag_launch_reduce_oneshot(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	WAG_DISPATCH(k_reduce_oneshot, a->nblocks, WAG_TPB, a, (cudaStream_t)stream);
	return launched("reduce-oneshot", err, errlen);
}

extern "C" int wag_launch_reduce_ring(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	WAG_DISPATCH(k_reduce_ring, a->s.nblocks, WAG_TPB, a, (cudaStream_t)stream);
	return launched("reduce-ring", err, errlen);
}

extern "C" int wag_launch_broadcast_oneshot(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	k_broadcast_oneshot<<<a->nblocks, WAG_TPB, 0, (cudaStream_t)stream>>>(*a);
	return launched("broadcast-oneshot", err, errlen);
}

extern "C" int wag_launch_broadcast_ring(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	k_broadcast_ring<<<a->s.nblocks, WAG_TPB, 0, (cudaStream_t)stream>>>(*a);
	return launched("broadcast-ring", err, errlen);
}

extern "C" int wag_launch_alltoall_oneshot(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	k_alltoall_oneshot<<<a->nblocks, WAG_TPB, 0, (cudaStream_t)stream>>>(*a);
	return launched("alltoall-oneshot", err, errlen);
}

extern "C" int wag_launch_alltoall_ring(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	k_allgather_ring<true><<<a->s.nblocks, WAG_TPB, 0, (cudaStream_t)stream>>>(*a);
	return launched("alltoall-ring", err, errlen);
}

extern "C" int wag_launch_p2p(const struct wag_kargs *a, const struct wag_p2p_args *p, void *stream, char *err,
			      size_t errlen)
{
	k_p2p<<<p->nch * a->lay.pblocks, WAG_TPB, 0, (cudaStream_t)stream>>>(*a, *p);
	return launched("sendrecv-ring", err, errlen);
}

extern "C" int wag_cuda_is_device_ptr(const void *ptr)
{
	cudaPointerAttributes at;
	if (cudaPointerGetAttributes(&at, ptr) != cudaSuccess) {
		(void)cudaGetLastError(); /* not a CUDA pointer: clear the sticky-free error */
		return 0;
	}
	return at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged;
}

extern "C" int wag_cuda_get_device(int *dev)
{
	return cudaGetDevice(dev) == cudaSuccess ? 0 : -WEFT_ERR_NO_DEVICE;
}

extern "C" int wag_cuda_set_device(int dev)
{
	return cudaSetDevice(dev) == cudaSuccess ? 0 : -WEFT_ERR_NO_DEVICE;
}

extern "C" int wag_cuda_sync_stream(void *stream, char *err, size_t errlen)
{
	cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
	if (e == cudaSuccess)
		return 0;
	snprintf(err, errlen, "stream synchronize: %s", cudaGetErrorString(e));
	return -WEFT_ERR_TRANSPORT;
}

extern "C" int wag_cuda_device_sync(void)
{
	return cudaDeviceSynchronize() == cudaSuccess ? 0 : -WEFT_ERR_TRANSPORT;
}

extern "C" int wag_cuda_sm_count(int dev, int *n)
{
	return cudaDeviceGetAttribute(n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess ? 0 : -WEFT_ERR_NO_DEVICE;
}

extern "C" int wag_launch_ce_barrier(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	k_ce_barrier<<<1, 1, 0, (cudaStream_t)stream>>>(*a);
	return launched("copy-engine barrier", err, errlen);
}

extern "C" int wag_launch_ce_reduce(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	WAG_DISPATCH(k_ce_reduce, a->nblocks, WAG_TPB, a, (cudaStream_t)stream);
	return launched("copy-engine reduce", err, errlen);
}

extern "C" int wag_launch_ce_signal(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	k_ce_signal<<<1, 1, 0, (cudaStream_t)stream>>>(*a);
	return launched("copy-engine chunk signal", err, errlen);
}

extern "C" int wag_launch_direct(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	if (a->d.mode == WAG_D_ALLREDUCE || a->d.mode == WAG_D_REDUCE_SCATTER) {
		WAG_DISPATCH(k_direct_reduce, a->nblocks, WAG_TPB, a, (cudaStream_t)stream);
		return launched(a->d.mode == WAG_D_ALLREDUCE ? "allreduce-direct" : "reduce-scatter-direct", err, errlen);
	}
	k_direct_move<<<a->nblocks, WAG_TPB, 0, (cudaStream_t)stream>>>(*a);
	return launched("direct data movement", err, errlen);
}

static int cuda_ck(cudaError_t e, const char *what, char *err, size_t errlen)
{
	if (e == cudaSuccess)
		return 0;
	snprintf(err, errlen, "%s: %s", what, cudaGetErrorString(e));
	return -WEFT_ERR_TRANSPORT;
}

extern "C" int wag_cuda_stream_new(void **stream, char *err, size_t errlen)
{
	cudaStream_t s;
	int rc = cuda_ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", err, errlen);
	if (rc == 0)
		*stream = s;
	return rc;
}

extern "C" void wag_cuda_stream_free(void *stream)
{
	if (stream)
		cudaStreamDestroy((cudaStream_t)stream);
}

extern "C" int wag_cuda_event_new(void **event, char *err, size_t errlen)
{
	cudaEvent_t e;
	int rc = cuda_ck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags", err, errlen);
	if (rc == 0)
		*event = e;
	return rc;
}

extern "C" void wag_cuda_event_free(void *event)
{
	if (event)
		cudaEventDestroy((cudaEvent_t)event);
}

extern "C" int wag_cuda_record(void *event, void *stream, char *err, size_t errlen)
{
	return cuda_ck(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream), "cudaEventRecord", err, errlen);
}

extern "C" int wag_cuda_wait(void *stream, void *event, char *err, size_t errlen)
{
	return cuda_ck(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0), "cudaStreamWaitEvent", err,
		       errlen);
}

extern "C" int wag_cuda_event_sync(void *event, char *err, size_t errlen)
{
	return cuda_ck(cudaEventSynchronize((cudaEvent_t)event), "cudaEventSynchronize", err, errlen);
}

extern "C" int wag_cuda_copy(void *dst, const void *src, size_t bytes, void *stream, char *err, size_t errlen)
{
	return cuda_ck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream), "cudaMemcpyAsync", err,
		       errlen);
}

extern "C" int wag_cuda_host_register(void *p, size_t bytes, char *err, size_t errlen)
{
	int dev = 0, ok = 0;
	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&ok, cudaDevAttrCanUseHostPointerForRegisteredMem, dev) != cudaSuccess || !ok) {
		snprintf(err, errlen, "this GPU cannot use registered host memory at its host address");
		return -ENOTSUP;
	}
	return cuda_ck(cudaHostRegister(p, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped),
		       "cudaHostRegister", err, errlen);
}

extern "C" void wag_cuda_host_unregister(void *p)
{
	cudaHostUnregister(p);
}

extern "C" int wag_cuda_alloc_async(void **p, size_t bytes, void *stream, char *err, size_t errlen)
{
	return cuda_ck(cudaMallocAsync(p, bytes, (cudaStream_t)stream), "cudaMallocAsync", err, errlen);
}

extern "C" int wag_cuda_free_async(void *p, void *stream, char *err, size_t errlen)
{
	return cuda_ck(cudaFreeAsync(p, (cudaStream_t)stream), "cudaFreeAsync", err, errlen);
}

extern "C" int wag_cuda_capturing(void *stream, int *yes, char *err, size_t errlen)
{
	cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
	int rc = cuda_ck(cudaStreamIsCapturing((cudaStream_t)stream, &st), "cudaStreamIsCapturing", err, errlen);
	if (rc == 0)
		*yes = st == cudaStreamCaptureStatusActive;
	return rc;
}

/* cuPointerGetAttribute, reached through the runtime (libcuda is never linked). */
typedef CUresult (*wag_ptr_attr_fn)(void *, CUpointer_attribute, CUdeviceptr);

extern "C" int wag_cuda_buffer(const void *ptr, uint64_t *id, int *shareable)
{
	static wag_ptr_attr_fn fn;
	static int looked;
	if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
		void *f = NULL;
		cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
		if (cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", &f, 12000, cudaEnableDefault, &q) !=
			    cudaSuccess ||
		    q != cudaDriverEntryPointSuccess)
			f = NULL;
		(void)cudaGetLastError();
		__atomic_store_n(&fn, (wag_ptr_attr_fn)f, __ATOMIC_RELAXED);
		__atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
	}
	wag_ptr_attr_fn f = __atomic_load_n(&fn, __ATOMIC_RELAXED);
	cudaPointerAttributes at;
	if (!f || cudaPointerGetAttributes(&at, ptr) != cudaSuccess || at.type != cudaMemoryTypeDevice) {
		(void)cudaGetLastError();
		return -ENOENT;
	}
	CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
	unsigned long long bid = 0, handles = 0;
	int legacy = 0;
	if (f(&bid, CU_POINTER_ATTRIBUTE_BUFFER_ID, p) != CUDA_SUCCESS)
		return -ENOENT;
	if (f(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p) != CUDA_SUCCESS)
		legacy = 0;
	if (f(&handles, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, p) != CUDA_SUCCESS)
		handles = 0;
	*id = bid;
	*shareable = legacy || (handles & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0;
	return 0;
}

extern "C" int wag_cuda_host_register_capture(void *p, size_t bytes, char *err, size_t errlen)
{
	/* Registering is not captured and does not touch the capturing stream,
	 * but a global-mode capture forbids it on every thread: relaxed for
	 * this thread alone, for this call. */
	cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
	int rc = cuda_ck(cudaThreadExchangeStreamCaptureMode(&mode), "cudaThreadExchangeStreamCaptureMode", err, errlen);
	if (rc)
		return rc;
	rc = wag_cuda_host_register(p, bytes, err, errlen);
	(void)cudaThreadExchangeStreamCaptureMode(&mode);
	return rc;
}

extern "C" int wag_cuda_host_fn(void *stream, void (*fn)(void *), void *arg, char *err, size_t errlen)
{
	return cuda_ck(cudaLaunchHostFunc((cudaStream_t)stream, fn, arg), "cudaLaunchHostFunc", err, errlen);
}
