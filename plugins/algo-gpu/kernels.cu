/* algo-gpu: the CUDA kernels (LL allreduce, one-shot allreduce and allgather,
 * pipelined reduce-scatter + allgather allreduce, ring-buffer allgather) and
 * their launchers. Ranges come from schedule.h; flags and per-block counters
 * live in device memory and advance here, so graph replays stay in step. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
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
	return (uint64_t *)(a.scr[owner] + a.lay.flags) + ((size_t)kind * WAG_MAX_RANKS + sender) * a.lay.maxb + g;
}

WAG_DEV uint64_t *local_at(const wag_kargs &a, int kind, uint32_t g)
{
	return (uint64_t *)(a.scr[a.rank] + a.lay.local) + (size_t)kind * a.lay.maxb + g;
}

/* Slot of (sender, block, depth slot) in owner's ring at offset base. */
WAG_DEV char *ring_at(const wag_kargs &a, int owner, uint64_t base, int sender, uint32_t g, uint64_t seq)
{
	return a.scr[owner] + base + (((uint64_t)sender * a.lay.maxb + g) * a.lay.depth + seq % a.lay.depth) * a.lay.tile_bytes;
}

/* ---------------------------------------------------------------- sync */

/* Thread 0: wait until *p >= v, polling the peer's abort flag now and then. */
WAG_DEV bool wait_geq(const wag_kargs &a, const uint64_t *p, uint64_t v, int peer)
{
	for (uint32_t n = 0;; n++) {
		if (weft_ld_acquire_sys(p) >= v)
			return true;
		if (n % WEFT_DEV_ABORT_EVERY == WEFT_DEV_ABORT_EVERY - 1 && weft_dev_aborted(a.abort[peer]))
			return false;
	}
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

/* Integers wrap, as two's complement hardware does, instead of overflowing. */
template <> __device__ __forceinline__ int32_t combine<int32_t>(int op, int32_t x, int32_t y)
{
	switch (op) {
	case WEFT_PROD:
		return (int32_t)((uint32_t)x * (uint32_t)y);
	case WEFT_MIN:
		return y < x ? y : x;
	case WEFT_MAX:
		return y > x ? y : x;
	default:
		return (int32_t)((uint32_t)x + (uint32_t)y);
	}
}

template <typename A> WAG_DEV A finish(int op, A x, int n)
{
	return op == WEFT_AVG ? x / (A)n : x;
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
		A acc = Tr<T>::ld(__ldcg(src[0] + j));
#pragma unroll
		for (int q = 1; q < WAG_MAX_RANKS; q++)
			if (q < n)
				acc = combine<A>(op, acc, Tr<T>::ld(__ldcg(src[q] + j)));
		T o = Tr<T>::st(finish<A>(op, acc, n));
		dst[j] = o;
#pragma unroll
		for (int q = 0; q < WAG_MAX_RANKS; q++)
			if (pdst[q])
				pdst[q][j] = o;
	}
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

template <typename T> __global__ void __launch_bounds__(WAG_TPB) k_allreduce_oneshot(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	uint64_t *ep = local_at(a, WAG_L_OS, g);
	uint64_t c = *ep + 1, half = c & 1;
	int me = a.rank, n = a.nranks;
	uint64_t off, len;
	wag_segment(a.count, 16 / sizeof(T), a.nblocks, g, &off, &len);
	const T *in = (const T *)a.in + off;
#pragma unroll
	for (int q = 0; q < WAG_MAX_RANKS; q++)
		if (q < n && q != me)
			copy_range(os_at(a, q, half, me) + off * sizeof(T), in, len * sizeof(T));
	block_signal_peers(a, WAG_F_OS, g, c);
	if (!block_wait_peers(a, WAG_F_OS, g, c))
		return;
	const T *src[WAG_MAX_RANKS];
	T *pdst[WAG_MAX_RANKS];
#pragma unroll
	for (int q = 0; q < WAG_MAX_RANKS; q++) {
		src[q] = q == me ? in : q < n ? (const T *)os_at(a, me, half, q) + off : in;
		pdst[q] = NULL;
	}
	reduce_range<T>(a.op, n, src, (T *)a.out + off, pdst, len, a.vec != 0);
	__syncthreads();
	if (threadIdx.x == 0)
		*ep = c;
}

/* Allgather in bytes: count is one rank's block in bytes. */
__global__ void __launch_bounds__(WAG_TPB) k_allgather_oneshot(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	uint64_t *ep = local_at(a, WAG_L_OS, g);
	uint64_t c = *ep + 1, half = c & 1;
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
	block_signal_peers(a, WAG_F_OS, g, c);
	if (!block_wait_peers(a, WAG_F_OS, g, c))
		return;
#pragma unroll
	for (int q = 0; q < WAG_MAX_RANKS; q++)
		if (q < n && q != me)
			copy_range(out + (uint64_t)q * a.count + off, os_at(a, me, half, q) + off, len);
	__syncthreads();
	if (threadIdx.x == 0)
		*ep = c;
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

/* Allgather in bytes through the allgather ring: s is one rank's block. */
__global__ void __launch_bounds__(WAG_TPB) k_allgather_ring(wag_kargs a)
{
	uint32_t g = blockIdx.x;
	const wag_sched &s = a.s;
	int me = a.rank, n = a.nranks;
	uint64_t nt = wag_block_tiles(&s, g);
	uint64_t ag0 = *local_at(a, WAG_L_AG, g);
	uint64_t D = a.lay.depth;
	const char *in = (const char *)a.in;
	char *out = (char *)a.out;
	char *mine = out + (uint64_t)me * a.count;
	for (uint64_t i = 0; i < nt + 1; i++) {
		if (i < nt) {
			uint64_t t = g + i * s.nblocks, seq = ag0 + i, off, len;
			wag_tile(&s, 0, t, &off, &len);
			if (seq + 1 > D && !block_wait_peers(a, WAG_F_AG_CRED, g, seq + 1 - D))
				return;
#pragma unroll
			for (int q = 0; q < WAG_MAX_RANKS; q++)
				if (q < n && q != me)
					copy_range(ring_at(a, q, a.lay.ag, me, g, seq), in + off, len);
			if (mine != in)
				copy_range(mine + off, in + off, len);
			block_signal_peers(a, WAG_F_AG_READY, g, seq + 1);
		}
		if (i >= 1) {
			uint64_t j = i - 1, t = g + j * s.nblocks, seq = ag0 + j, off, len;
			wag_tile(&s, 0, t, &off, &len);
			if (!block_wait_peers(a, WAG_F_AG_READY, g, seq + 1))
				return;
#pragma unroll
			for (int q = 0; q < WAG_MAX_RANKS; q++)
				if (q < n && q != me)
					copy_range(out + (uint64_t)q * a.count + off, ring_at(a, me, a.lay.ag, q, g, seq), len);
			block_signal_peers(a, WAG_F_AG_CRED, g, seq + 1);
		}
	}
	__syncthreads();
	if (threadIdx.x == 0)
		*local_at(a, WAG_L_AG, g) = ag0 + nt;
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
		default:                                                                           \
			snprintf(err, errlen, "datatype %d has no kernel", (a)->dtype);            \
			return -ENOTSUP;                                                           \
		}                                                                                  \
	} while (0)

extern "C" int wag_launch_allreduce_ll(const struct wag_kargs *a, void *stream, char *err, size_t errlen)
{
	WAG_DISPATCH(k_allreduce_ll, a->nblocks, WAG_LL_TPB, a, (cudaStream_t)stream);
	return launched("allreduce-ll", err, errlen);
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
	k_allgather_ring<<<a->s.nblocks, WAG_TPB, 0, (cudaStream_t)stream>>>(*a);
	return launched("allgather-ring", err, errlen);
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
