/* SPDX-License-Identifier: Apache-2.0 */
/* GPU tests of the algo-gpu pack through the public API: every collective
 * (allreduce, allgather, reduce-scatter, reduce, broadcast, alltoall) and
 * send/recv in groups and alone, on cudaMalloc buffers with a stream, forked
 * ranks (one per GPU, or several per GPU for 3 and 4 ranks), integer-valued
 * random data of every datatype and op checked bit for bit against a CPU
 * reference, outputs poisoned first and guarded past their end, in place and
 * out of place, and a captured graph of every collective replayed 1,000 times
 * with new data each time. Skips (77) without a GPU unless WEFT_REQUIRE_GPU=1. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <weft/info.h>
#include <weft/weft.h>

/* testlib is C without extern "C" guards. */
extern "C" {
#include "netns_lib.h"
#include "testlib.h"
}

static struct weft_unique_id g_id;
static int g_ndev;
static int g_rank = -1;
/* WAG_TEST_HOSTS: rank r sits on test host WAG_TEST_HOSTS[r % len] (a
 * letter each); WAG_TEST_EXPECT: a part of the name every checked call's
 * algorithm must have (the cross-host entries: "-hier"). */
static const char *g_hosts, *g_expect;
/* WAG_TEST_NETNS=1: hosts a and b are network namespaces joined by a veth
 * pair (root); rank 0 makes the unique id inside its namespace. */
static int g_netns;
static struct wt_netns g_ns;
static struct wt_id_pipe g_pipe;

#define RFAIL(...)                                                                 \
	do {                                                                       \
		fprintf(stderr, "[rank %d] %s:%d: ", g_rank, __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__);                                      \
		fputc('\n', stderr);                                               \
		return 1;                                                          \
	} while (0)
#define CK(call)                                                                      \
	do {                                                                          \
		cudaError_t e_ = (call);                                              \
		if (e_ != cudaSuccess)                                                \
			RFAIL("%s: %s", #call, cudaGetErrorString(e_));               \
	} while (0)
#define OK(call)                                                                      \
	do {                                                                          \
		int r_ = (call);                                                      \
		if (r_ != 0)                                                          \
			RFAIL("%s: %s", #call, weft_strerror(r_));                    \
	} while (0)

/* ------------------------------------------------------------- data */

__host__ __device__ static uint32_t hash3(uint32_t seed, uint32_t rank, uint64_t i)
{
	uint64_t x = (uint64_t)seed * 0x9E3779B97F4A7C15ull ^ (uint64_t)rank * 0xC2B2AE3D27D4EB4Full ^ i;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (uint32_t)x;
}

/* Small integers, exact in every tested type; products stay within 2^ranks. */
__host__ __device__ static int gen(uint32_t seed, int rank, uint64_t i, int op)
{
	uint32_t h = hash3(seed, (uint32_t)rank, i);
	if (op == WEFT_PROD) {
		static const int v[4] = {1, 2, -1, 1};
		return v[h % 4];
	}
	return (int)(h % 17) - 8;
}

template <typename T> struct H;
template <> struct H<float> {
	typedef float A;
	static const enum weft_datatype type = WEFT_FLOAT32;
	static __host__ __device__ float from(A x) { return x; }
	static __host__ __device__ A to(float x) { return x; }
};
template <> struct H<double> {
	typedef double A;
	static const enum weft_datatype type = WEFT_FLOAT64;
	static __host__ __device__ double from(A x) { return x; }
	static __host__ __device__ A to(double x) { return x; }
};
template <> struct H<int32_t> {
	typedef int32_t A;
	static const enum weft_datatype type = WEFT_INT32;
	static __host__ __device__ int32_t from(A x) { return x; }
	static __host__ __device__ A to(int32_t x) { return x; }
};
template <> struct H<__half> {
	typedef float A;
	static const enum weft_datatype type = WEFT_FLOAT16;
	static __host__ __device__ __half from(A x) { return __float2half_rn(x); }
	static __host__ __device__ A to(__half x) { return __half2float(x); }
};
template <> struct H<__nv_bfloat16> {
	typedef float A;
	static const enum weft_datatype type = WEFT_BFLOAT16;
	static __host__ __device__ __nv_bfloat16 from(A x) { return __float2bfloat16_rn(x); }
	static __host__ __device__ A to(__nv_bfloat16 x) { return __bfloat162float(x); }
};

/* Integers of the same width as the pack (which wraps): int8 and uint8 wrap
 * through the conversion back to A; wider ones never overflow with this data
 * (|sum| <= 64, |product| <= 256) except unsigned, which wraps by definition. */
#define H_SAME(T, D)                                                                     \
	template <> struct H<T> {                                                        \
		typedef T A;                                                             \
		static const enum weft_datatype type = D;                                \
		static __host__ __device__ T from(A x) { return x; }                     \
		static __host__ __device__ A to(T x) { return x; }                       \
	};
H_SAME(int8_t, WEFT_INT8)
H_SAME(uint8_t, WEFT_UINT8)
H_SAME(uint32_t, WEFT_UINT32)
H_SAME(int64_t, WEFT_INT64)
H_SAME(uint64_t, WEFT_UINT64)
/* fp8 accumulates in float and rounds once, with cuda_fp8.h's conversion
 * (host and device implement the same rounding). */
template <> struct H<__nv_fp8_e4m3> {
	typedef float A;
	static const enum weft_datatype type = WEFT_FP8_E4M3;
	static __host__ __device__ __nv_fp8_e4m3 from(A x) { return __nv_fp8_e4m3(x); }
	static __host__ __device__ A to(__nv_fp8_e4m3 x) { return (float)x; }
};
template <> struct H<__nv_fp8_e5m2> {
	typedef float A;
	static const enum weft_datatype type = WEFT_FP8_E5M2;
	static __host__ __device__ __nv_fp8_e5m2 from(A x) { return __nv_fp8_e5m2(x); }
	static __host__ __device__ A to(__nv_fp8_e5m2 x) { return (float)x; }
};

template <typename A> static A h_combine(int op, A x, A y)
{
	switch (op) {
	case WEFT_PROD:
		return (A)(x * y);
	case WEFT_MIN:
		return y < x ? y : x;
	case WEFT_MAX:
		return y > x ? y : x;
	default:
		return (A)(x + y);
	}
}

/* What every rank must hold at element i: in rank order, accumulated as the
 * pack accumulates (float for 16-bit floats), rounded once. */
template <typename T> static T reference(uint32_t seed, int n, uint64_t i, int op)
{
	typedef typename H<T>::A A;
	A acc = H<T>::to(H<T>::from((A)gen(seed, 0, i, op)));
	for (int q = 1; q < n; q++)
		acc = h_combine<A>(op, acc, H<T>::to(H<T>::from((A)gen(seed, q, i, op))));
	if (op == WEFT_AVG)
		acc = (A)(acc / (A)n);
	return H<T>::from(acc);
}

#define GUARD 64 /* elements past the end that must stay poisoned */

struct ctx {
	int rank, n;
	weft_comm_t *comm;
	cudaStream_t st;
	void *dsend, *drecv; /* device buffers large enough for every case */
	char *hbuf, *hout;
	size_t cap; /* bytes */
};

/* The last call went to an algorithm whose name holds g_expect. */
static int served(const struct ctx *c, const char *what)
{
	const char *a = weft_info_last_algorithm(c->comm);
	if (g_expect && *g_expect && (!a || !strstr(a, g_expect)))
		RFAIL("%s was served by %s, not by an algorithm named *%s*", what, a ? a : "(none)", g_expect);
	return 0;
}

template <typename T> static int check_allreduce(struct ctx *c, size_t count, int op, int inplace, uint32_t seed)
{
	size_t es = sizeof(T), bytes = count * es, gbytes = (count + GUARD) * es;
	if (gbytes > c->cap)
		RFAIL("case too large");
	T *h = (T *)c->hbuf;
	for (size_t i = 0; i < count; i++)
		h[i] = H<T>::from((typename H<T>::A)gen(seed, c->rank, i, op));
	CK(cudaMemsetAsync(c->drecv, 0xA5, gbytes, c->st));
	CK(cudaMemcpyAsync(inplace ? c->drecv : c->dsend, h, bytes, cudaMemcpyHostToDevice, c->st));
	OK(weft_allreduce(inplace ? c->drecv : c->dsend, c->drecv, count, H<T>::type, (enum weft_redop)op, c->comm,
			  c->st));
	if (count && served(c, "allreduce"))
		return 1;
	CK(cudaMemcpyAsync(c->hout, c->drecv, gbytes, cudaMemcpyDeviceToHost, c->st));
	CK(cudaStreamSynchronize(c->st));
	const T *o = (const T *)c->hout;
	for (size_t i = 0; i < count; i++) {
		T want = reference<T>(seed, c->n, i, op);
		if (memcmp(&o[i], &want, es) != 0)
			RFAIL("allreduce %s %s count %zu %s: element %zu is %g, want %g", weft_datatype_name(H<T>::type),
			      weft_redop_name((enum weft_redop)op), count, inplace ? "in place" : "out of place", i,
			      (double)H<T>::to(o[i]), (double)H<T>::to(want));
	}
	for (size_t b = bytes; b < gbytes; b++)
		if ((unsigned char)c->hout[b] != 0xA5)
			RFAIL("allreduce %s count %zu wrote past the end (byte %zu)", weft_datatype_name(H<T>::type), count,
			      b - bytes);
	return 0;
}

static int check_allgather(struct ctx *c, size_t count, enum weft_datatype type, int inplace, uint32_t seed)
{
	size_t es = weft_datatype_size(type), blk = count * es, total = blk * (size_t)c->n, gtotal = total + GUARD;
	if (gtotal > c->cap)
		RFAIL("case too large");
	for (size_t b = 0; b < blk; b++)
		c->hbuf[b] = (char)hash3(seed, (uint32_t)c->rank, b);
	CK(cudaMemsetAsync(c->drecv, 0xA5, gtotal, c->st));
	char *send = inplace ? (char *)c->drecv + (size_t)c->rank * blk : (char *)c->dsend;
	CK(cudaMemcpyAsync(send, c->hbuf, blk, cudaMemcpyHostToDevice, c->st));
	OK(weft_allgather(send, c->drecv, count, type, c->comm, c->st));
	CK(cudaMemcpyAsync(c->hout, c->drecv, gtotal, cudaMemcpyDeviceToHost, c->st));
	CK(cudaStreamSynchronize(c->st));
	for (int q = 0; q < c->n; q++)
		for (size_t b = 0; b < blk; b++)
			if (c->hout[(size_t)q * blk + b] != (char)hash3(seed, (uint32_t)q, b))
				RFAIL("allgather %s count %zu %s: byte %zu of rank %d's block is wrong",
				      weft_datatype_name(type), count, inplace ? "in place" : "out of place", b, q);
	for (size_t b = total; b < gtotal; b++)
		if ((unsigned char)c->hout[b] != 0xA5)
			RFAIL("allgather count %zu wrote past the end", count);
	return 0;
}

/* Every rank's input is gen(seed, rank, i) over n * count elements; rank r
 * gets the reduction of block r. In place: recvbuf = sendbuf + r * count. */
template <typename T> static int check_reduce_scatter(struct ctx *c, size_t count, int op, int inplace, uint32_t seed)
{
	size_t es = sizeof(T), tot = count * (size_t)c->n, bytes = count * es, gbytes = (tot + GUARD) * es;
	if (gbytes > c->cap)
		RFAIL("case too large");
	T *h = (T *)c->hbuf;
	for (size_t i = 0; i < tot; i++)
		h[i] = H<T>::from((typename H<T>::A)gen(seed, c->rank, i, op));
	CK(cudaMemsetAsync(c->drecv, 0xA5, gbytes, c->st));
	CK(cudaMemcpyAsync(inplace ? c->drecv : c->dsend, h, tot * es, cudaMemcpyHostToDevice, c->st));
	char *out = (char *)c->drecv + (inplace ? (size_t)c->rank * bytes : 0);
	OK(weft_reduce_scatter(inplace ? c->drecv : c->dsend, out, count, H<T>::type, (enum weft_redop)op, c->comm,
			       c->st));
	CK(cudaMemcpyAsync(c->hout, c->drecv, gbytes, cudaMemcpyDeviceToHost, c->st));
	CK(cudaStreamSynchronize(c->st));
	const T *o = (const T *)(c->hout + (inplace ? (size_t)c->rank * bytes : 0));
	for (size_t i = 0; i < count; i++) {
		T want = reference<T>(seed, c->n, (uint64_t)c->rank * count + i, op);
		if (memcmp(&o[i], &want, es) != 0)
			RFAIL("reduce_scatter %s %s count %zu %s: element %zu is %g, want %g", weft_datatype_name(H<T>::type),
			      weft_redop_name((enum weft_redop)op), count, inplace ? "in place" : "out of place", i,
			      (double)H<T>::to(o[i]), (double)H<T>::to(want));
	}
	/* Out of place, nothing past the output; in place, nothing past the input. */
	for (size_t b = inplace ? tot * es : bytes; b < (inplace ? tot * es : bytes) + GUARD * es; b++)
		if ((unsigned char)c->hout[b] != 0xA5)
			RFAIL("reduce_scatter %s count %zu wrote past the end (byte %zu)", weft_datatype_name(H<T>::type), count,
			      b);
	return 0;
}

/* The root gets the reduction; every other rank's recvbuf stays as it was
 * (poison out of place, its input in place). */
template <typename T>
static int check_reduce(struct ctx *c, size_t count, int op, int root, int inplace, uint32_t seed)
{
	size_t es = sizeof(T), bytes = count * es, gbytes = (count + GUARD) * es;
	if (gbytes > c->cap)
		RFAIL("case too large");
	T *h = (T *)c->hbuf;
	for (size_t i = 0; i < count; i++)
		h[i] = H<T>::from((typename H<T>::A)gen(seed, c->rank, i, op));
	CK(cudaMemsetAsync(c->drecv, 0xA5, gbytes, c->st));
	CK(cudaMemcpyAsync(inplace ? c->drecv : c->dsend, h, bytes, cudaMemcpyHostToDevice, c->st));
	OK(weft_reduce(inplace ? c->drecv : c->dsend, c->drecv, count, H<T>::type, (enum weft_redop)op, root, c->comm,
		       c->st));
	CK(cudaMemcpyAsync(c->hout, c->drecv, gbytes, cudaMemcpyDeviceToHost, c->st));
	CK(cudaStreamSynchronize(c->st));
	const T *o = (const T *)c->hout;
	if (c->rank != root && !inplace) {
		for (size_t b = 0; b < gbytes; b++)
			if ((unsigned char)c->hout[b] != 0xA5)
				RFAIL("reduce root %d count %zu: this non-root's recvbuf was written (byte %zu)", root, count, b);
		return 0;
	}
	for (size_t i = 0; i < count; i++) {
		T want = c->rank == root ? reference<T>(seed, c->n, i, op) : h[i];
		if (memcmp(&o[i], &want, es) != 0)
			RFAIL("reduce %s %s root %d count %zu %s: element %zu is %g, want %g", weft_datatype_name(H<T>::type),
			      weft_redop_name((enum weft_redop)op), root, count, inplace ? "in place" : "out of place", i,
			      (double)H<T>::to(o[i]), (double)H<T>::to(want));
	}
	for (size_t b = bytes; b < gbytes; b++)
		if ((unsigned char)c->hout[b] != 0xA5)
			RFAIL("reduce %s count %zu wrote past the end (byte %zu)", weft_datatype_name(H<T>::type), count,
			      b - bytes);
	return 0;
}

/* The root's bytes (hash of the root) reach every rank. */
static int check_broadcast(struct ctx *c, size_t count, enum weft_datatype type, int root, int inplace, uint32_t seed)
{
	size_t bytes = count * weft_datatype_size(type), gbytes = bytes + GUARD;
	if (gbytes > c->cap)
		RFAIL("case too large");
	for (size_t b = 0; b < bytes; b++)
		c->hbuf[b] = (char)hash3(seed, (uint32_t)root, b);
	CK(cudaMemsetAsync(c->drecv, 0xA5, gbytes, c->st));
	if (c->rank == root)
		CK(cudaMemcpyAsync(inplace ? c->drecv : c->dsend, c->hbuf, bytes, cudaMemcpyHostToDevice, c->st));
	OK(weft_broadcast(inplace ? c->drecv : c->dsend, c->drecv, count, type, root, c->comm, c->st));
	CK(cudaMemcpyAsync(c->hout, c->drecv, gbytes, cudaMemcpyDeviceToHost, c->st));
	CK(cudaStreamSynchronize(c->st));
	for (size_t b = 0; b < bytes; b++)
		if (c->hout[b] != c->hbuf[b])
			RFAIL("broadcast %s root %d count %zu %s: byte %zu is wrong", weft_datatype_name(type), root, count,
			      inplace ? "in place" : "out of place", b);
	for (size_t b = bytes; b < gbytes; b++)
		if ((unsigned char)c->hout[b] != 0xA5)
			RFAIL("broadcast count %zu wrote past the end", count);
	return 0;
}

/* Rank r's input byte i is hash(r, i); its output block p must be rank p's
 * input block r. In place: sendbuf == recvbuf. */
static int check_alltoall(struct ctx *c, size_t count, enum weft_datatype type, int inplace, uint32_t seed)
{
	size_t blk = count * weft_datatype_size(type), total = blk * (size_t)c->n, gtotal = total + GUARD;
	if (gtotal > c->cap)
		RFAIL("case too large");
	for (size_t b = 0; b < total; b++)
		c->hbuf[b] = (char)hash3(seed, (uint32_t)c->rank, b);
	CK(cudaMemsetAsync(c->drecv, 0xA5, gtotal, c->st));
	CK(cudaMemcpyAsync(inplace ? c->drecv : c->dsend, c->hbuf, total, cudaMemcpyHostToDevice, c->st));
	OK(weft_alltoall(inplace ? c->drecv : c->dsend, c->drecv, count, type, c->comm, c->st));
	if (count && served(c, "alltoall"))
		return 1;
	CK(cudaMemcpyAsync(c->hout, c->drecv, gtotal, cudaMemcpyDeviceToHost, c->st));
	CK(cudaStreamSynchronize(c->st));
	for (int p = 0; p < c->n; p++)
		for (size_t b = 0; b < blk; b++)
			if (c->hout[(size_t)p * blk + b] != (char)hash3(seed, (uint32_t)p, (size_t)c->rank * blk + b))
				RFAIL("alltoall %s count %zu %s: byte %zu of the block from rank %d is wrong",
				      weft_datatype_name(type), count, inplace ? "in place" : "out of place", b, p);
	for (size_t b = total; b < gtotal; b++)
		if ((unsigned char)c->hout[b] != 0xA5)
			RFAIL("alltoall count %zu wrote past the end", count);
	return 0;
}

/* ----------------------------------------------------------- send/recv
 * Sends and receives of one rank are laid out in dsend / drecv as a list of
 * (peer, bytes) messages; message k from s to d holds hash(seed + k, s * 8 + d, i).
 * The pack launches point-to-point kernels on its own (the core passes no
 * stream), so inputs are synchronized on c->st first and results are complete
 * when the call returns. */

struct msg {
	int peer;
	int is_send;
	size_t bytes;
	size_t off; /* in dsend (send) or drecv (recv) */
	uint32_t tag; /* which message of the pair (k) */
};

static size_t msg_bytes(uint32_t seed, int s, int d, uint32_t k, size_t base)
{
	/* odd sizes that differ per pair and message, the same on both sides */
	return base + hash3(seed + k, (uint32_t)(s * 8 + d), 99) % 97;
}

static int p2p_prepare(struct ctx *c, struct msg *m, int nm, uint32_t seed)
{
	size_t so = 0, ro = 0;
	for (int i = 0; i < nm; i++) {
		size_t *o = m[i].is_send ? &so : &ro;
		m[i].off = *o;
		*o += (m[i].bytes + 255) / 256 * 256 + (i % 3); /* misaligned starts too */
	}
	if (so + GUARD > c->cap || ro + GUARD > c->cap)
		RFAIL("p2p case too large");
	for (int i = 0; i < nm; i++)
		if (m[i].is_send)
			for (size_t b = 0; b < m[i].bytes; b++)
				c->hbuf[m[i].off + b] = (char)hash3(seed + m[i].tag, (uint32_t)(c->rank * 8 + m[i].peer), b);
	CK(cudaMemcpyAsync(c->dsend, c->hbuf, so, cudaMemcpyHostToDevice, c->st));
	CK(cudaMemsetAsync(c->drecv, 0xA5, ro + GUARD, c->st));
	CK(cudaStreamSynchronize(c->st));
	return 0;
}

static int p2p_verify(struct ctx *c, const struct msg *m, int nm, uint32_t seed, const char *what)
{
	size_t ro = 0;
	for (int i = 0; i < nm; i++)
		if (!m[i].is_send && m[i].off + m[i].bytes > ro)
			ro = m[i].off + m[i].bytes;
	CK(cudaMemcpyAsync(c->hout, c->drecv, ro + GUARD, cudaMemcpyDeviceToHost, c->st));
	CK(cudaStreamSynchronize(c->st));
	/* Poison between and after messages must survive. */
	char *seen = (char *)calloc(ro + GUARD, 1);
	if (!seen)
		RFAIL("out of memory");
	for (int i = 0; i < nm; i++) {
		if (m[i].is_send)
			continue;
		for (size_t b = 0; b < m[i].bytes; b++) {
			seen[m[i].off + b] = 1;
			if (c->hout[m[i].off + b] != (char)hash3(seed + m[i].tag, (uint32_t)(m[i].peer * 8 + c->rank), b)) {
				free(seen);
				RFAIL("%s: message %u from rank %d (%zu bytes): byte %zu is wrong", what, m[i].tag, m[i].peer,
				      m[i].bytes, b);
			}
		}
	}
	for (size_t b = 0; b < ro + GUARD; b++)
		if (!seen[b] && (unsigned char)c->hout[b] != 0xA5) {
			free(seen);
			RFAIL("%s: byte %zu outside every message was written", what, b);
		}
	free(seen);
	return 0;
}

static int p2p_post(struct ctx *c, const struct msg *m)
{
	if (m->is_send)
		return weft_send((char *)c->dsend + m->off, m->bytes, WEFT_UINT8, m->peer, c->comm, c->st);
	return weft_recv((char *)c->drecv + m->off, m->bytes, WEFT_UINT8, m->peer, c->comm, c->st);
}

/* One group: every rank sends `per` messages to every rank (itself too) and
 * receives as many from each, sizes around base; the order of the calls
 * differs per rank (receives first on odd ranks). */
static int check_p2p_all(struct ctx *c, size_t base, int per, uint32_t seed)
{
	struct msg m[2 * 8 * 4];
	int nm = 0;
	for (int pass = 0; pass < 2; pass++) {
		int sends = (pass == 0) == (c->rank % 2 == 0);
		for (int q = 0; q < c->n; q++)
			for (int k = 0; k < per; k++) {
				struct msg x = {q, sends, 0, 0, (uint32_t)k};
				x.bytes = sends ? msg_bytes(seed, c->rank, q, (uint32_t)k, base)
						: msg_bytes(seed, q, c->rank, (uint32_t)k, base);
				m[nm++] = x;
			}
	}
	if (p2p_prepare(c, m, nm, seed))
		return 1;
	OK(weft_group_start());
	for (int i = 0; i < nm; i++) {
		int rc = p2p_post(c, &m[i]);
		if (rc) {
			weft_group_end();
			RFAIL("queuing message %d: %s", i, weft_strerror(rc));
		}
	}
	OK(weft_group_end());
	return p2p_verify(c, m, nm, seed, "all-pairs group");
}

/* One group per rank: send to the right, receive from the left (a ring). */
static int check_p2p_shift(struct ctx *c, size_t base, uint32_t seed)
{
	int right = (c->rank + 1) % c->n, left = (c->rank + c->n - 1) % c->n;
	struct msg m[2] = {{right, 1, msg_bytes(seed, c->rank, right, 0, base), 0, 0},
			   {left, 0, msg_bytes(seed, left, c->rank, 0, base), 0, 0}};
	if (p2p_prepare(c, m, 2, seed))
		return 1;
	OK(weft_group_start());
	int r0 = p2p_post(c, &m[0]), r1 = p2p_post(c, &m[1]);
	OK(weft_group_end());
	OK(r0);
	OK(r1);
	return p2p_verify(c, m, 2, seed, "ring shift");
}

/* Without groups: rank 0 sends 3 messages to every other rank one call at a
 * time, which receive them as one group of 3; then every other rank in turn
 * sends 3 messages in one group, which rank 0 receives one call at a time.
 * Large sizes make senders wait for the receivers' credits; the different
 * groupings must still match. */
static int check_p2p_blocking(struct ctx *c, size_t base, uint32_t seed)
{
	struct msg m[2 * 8 * 3];
	int nm = 0;
	for (int q = 1; q < c->n; q++)
		for (int k = 0; k < 3; k++) {
			if (c->rank == 0)
				m[nm++] = (struct msg){q, 1, msg_bytes(seed, 0, q, (uint32_t)k, base), 0, (uint32_t)k};
			else if (c->rank == q)
				m[nm++] = (struct msg){0, 0, msg_bytes(seed, 0, q, (uint32_t)k, base), 0, (uint32_t)k};
		}
	int first_back = nm;
	for (int q = 1; q < c->n; q++)
		for (int k = 0; k < 3; k++) {
			if (c->rank == 0)
				m[nm++] = (struct msg){q, 0, msg_bytes(seed, q, 0, (uint32_t)k, base), 0, (uint32_t)k};
			else if (c->rank == q)
				m[nm++] = (struct msg){0, 1, msg_bytes(seed, q, 0, (uint32_t)k, base), 0, (uint32_t)k};
		}
	if (p2p_prepare(c, m, nm, seed))
		return 1;
	if (c->rank == 0) {
		for (int i = 0; i < nm; i++)
			OK(p2p_post(c, &m[i]));
	} else {
		OK(weft_group_start());
		int rc = 0;
		for (int i = 0; i < first_back; i++)
			rc = rc ? rc : p2p_post(c, &m[i]);
		OK(weft_group_end());
		OK(rc);
		OK(weft_group_start());
		for (int i = first_back; i < nm; i++)
			rc = rc ? rc : p2p_post(c, &m[i]);
		OK(weft_group_end());
		OK(rc);
	}
	return p2p_verify(c, m, nm, seed, "blocking send/recv");
}

static int check_p2p(struct ctx *c, size_t base, uint32_t *seed)
{
	return check_p2p_shift(c, base, (*seed)++) || check_p2p_all(c, base, 2, (*seed)++) ||
	       check_p2p_blocking(c, base, (*seed)++);
}

static int ctx_open(struct ctx *c, int rank, int n, size_t cap)
{
	memset(c, 0, sizeof(*c));
	c->rank = rank;
	c->n = n;
	c->cap = cap;
	g_rank = rank;
	if (g_hosts && *g_hosts) {
		char id[8];
		char h = g_hosts[rank % (int)strlen(g_hosts)];
		snprintf(id, sizeof(id), "h%c", h);
		setenv("WEFT_TEST_HOST_ID", id, 1);
		if (g_netns) {
			int i = h - 'a';
			if (i < 0 || i > 1 || wt_netns_enter(&g_ns, i) < 0)
				RFAIL("cannot enter the namespace of host %c", h);
			setenv("WEFT_CORE_BOOTSTRAP_ADDR", g_ns.addr[i], 1);
			setenv("WEFT_OFI_ADDR", g_ns.addr[i], 1);
			setenv("WEFT_UCX_NET_DEVICES", g_ns.veth[i], 1);
			OK(wt_id_share(&g_pipe, rank == 0, &g_id));
		}
	}
	CK(cudaSetDevice(rank % g_ndev));
	OK(weft_comm_create(&g_id, n, rank, &c->comm));
	CK(cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking));
	CK(cudaMalloc(&c->dsend, cap));
	CK(cudaMalloc(&c->drecv, cap));
	CK(cudaMallocHost((void **)&c->hbuf, cap));
	CK(cudaMallocHost((void **)&c->hout, cap));
	return 0;
}

static int ctx_close(struct ctx *c)
{
	CK(cudaStreamSynchronize(c->st));
	OK(weft_comm_destroy(c->comm));
	cudaFree(c->dsend);
	cudaFree(c->drecv);
	cudaFreeHost(c->hbuf);
	cudaFreeHost(c->hout);
	cudaStreamDestroy(c->st);
	return 0;
}

/* --------------------------------------------------- rank bodies */

static const int ops[] = {WEFT_SUM, WEFT_PROD, WEFT_MIN, WEFT_MAX, WEFT_AVG};

template <typename T> static int all_ops(struct ctx *c, size_t count, uint32_t *seed)
{
	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
		for (int ip = 0; ip < 2; ip++)
			if (check_allreduce<T>(c, count, ops[o], ip, (*seed)++))
				return 1;
	return 0;
}

/* Every reduction collective of one type: each op, in and out of place. */
template <typename T> static int red_ops(struct ctx *c, size_t count, int root, int with_allreduce, uint32_t *seed)
{
	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
		for (int ip = 0; ip < 2; ip++)
			if ((with_allreduce && check_allreduce<T>(c, count, ops[o], ip, (*seed)++)) ||
			    check_reduce_scatter<T>(c, count, ops[o], ip, (*seed)++) ||
			    check_reduce<T>(c, count, ops[o], root, ip, (*seed)++))
				return 1;
	return 0;
}

/* The data movers of one type: broadcast from every root, alltoall. */
static int move_ops(struct ctx *c, size_t count, enum weft_datatype type, uint32_t *seed)
{
	for (int ip = 0; ip < 2; ip++) {
		for (int root = 0; root < c->n; root++)
			if (check_broadcast(c, count, type, root, ip, (*seed)++))
				return 1;
		if (check_alltoall(c, count, type, ip, (*seed)++))
			return 1;
	}
	return 0;
}

#define EVERY_TYPE(F, ...)                                                                                          \
	(F<float>(__VA_ARGS__) || F<__half>(__VA_ARGS__) || F<__nv_bfloat16>(__VA_ARGS__) || F<double>(__VA_ARGS__) || \
	 F<int32_t>(__VA_ARGS__) || F<int8_t>(__VA_ARGS__) || F<uint8_t>(__VA_ARGS__) || F<uint32_t>(__VA_ARGS__) ||    \
	 F<int64_t>(__VA_ARGS__) || F<uint64_t>(__VA_ARGS__) || F<__nv_fp8_e4m3>(__VA_ARGS__) ||                       \
	 F<__nv_fp8_e5m2>(__VA_ARGS__))

static const enum weft_datatype all_types[] = {WEFT_INT8,     WEFT_UINT8,    WEFT_INT32,    WEFT_UINT32,
					      WEFT_INT64,    WEFT_UINT64,   WEFT_FLOAT16,  WEFT_BFLOAT16,
					      WEFT_FLOAT32,  WEFT_FLOAT64,  WEFT_FP8_E4M3, WEFT_FP8_E5M2};

/* A send to this rank itself with no matching receive is refused on every
 * rank (-EINVAL), and nothing is launched. */
static int check_p2p_unmatched_self(struct ctx *c)
{
	OK(weft_group_start());
	int r0 = weft_send(c->dsend, 16, WEFT_UINT8, c->rank, c->comm, c->st);
	int rc = weft_group_end();
	OK(r0);
	if (rc != -EINVAL)
		RFAIL("an unmatched send to itself returned %d, want -EINVAL", rc);
	return 0;
}

/* "In place" send/recv, which NCCL leaves undefined: every rank sends bytes
 * [8, 8 + len) of one buffer to the right and receives from the left into
 * [0, len) of the same buffer, in one group, at a small (LL), a medium and a
 * large size; then only rank 0 does so while the others use separate
 * buffers. Each must get exactly what its left neighbour had before the
 * call, and the tail past what it received keeps its own bytes. */
static int check_p2p_overlap(struct ctx *c, uint32_t *seed)
{
	int right = (c->rank + 1) % c->n, left = (c->rank + c->n - 1) % c->n;
	const size_t lens[] = {4096, 100003, (3u << 20) + 5};
	for (int only0 = 0; only0 < 2; only0++)
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			size_t len = lens[k], total = len + 8 + GUARD;
			uint32_t sd = (*seed)++;
			int mine = !only0 || c->rank == 0; /* this rank's send and receive overlap */
			if (total > c->cap)
				RFAIL("overlap case too large");
			for (size_t b = 0; b < total; b++)
				c->hbuf[b] = (char)hash3(sd, (uint32_t)c->rank, b);
			CK(cudaMemcpyAsync(c->drecv, c->hbuf, total, cudaMemcpyHostToDevice, c->st));
			CK(cudaMemcpyAsync(c->dsend, c->drecv, total, cudaMemcpyDeviceToDevice, c->st));
			CK(cudaStreamSynchronize(c->st));
			char *src = (char *)(mine ? c->drecv : c->dsend) + 8;
			OK(weft_group_start());
			int r0 = weft_send(src, len, WEFT_UINT8, right, c->comm, c->st);
			int r1 = weft_recv(c->drecv, len, WEFT_UINT8, left, c->comm, c->st);
			OK(weft_group_end());
			OK(r0);
			OK(r1);
			CK(cudaMemcpyAsync(c->hout, c->drecv, total, cudaMemcpyDeviceToHost, c->st));
			CK(cudaStreamSynchronize(c->st));
			for (size_t b = 0; b < total; b++) {
				char want = b < len ? (char)hash3(sd, (uint32_t)left, b + 8) : (char)hash3(sd, (uint32_t)c->rank, b);
				if (c->hout[b] != want)
					RFAIL("in-place send/recv of %zu bytes (%s): byte %zu is wrong", len,
					      only0 ? "rank 0 only" : "every rank", b);
			}
		}
	return 0;
}

/* Buffers allocated before and freed after every call, small enough that
 * CUDA packs several into one IPC allocation: a new buffer can sit where a
 * freed one did while a peer still maps the old one ("already mapped" on
 * a second open). Every result must stay exact (the pack releases its idle
 * mappings and maps again, or stages through its scratch). */
static int fresh_buffers(struct ctx *c, uint32_t *seed)
{
	void *ds = c->dsend, *dr = c->drecv;
	size_t cap = c->cap;
	int bad = 0;
	for (int i = 0; i < 16 && !bad; i++) {
		size_t count = ((size_t)4096 << (i % 5)) + (size_t)i; /* floats: 16 KiB .. 256 KiB */
		c->cap = (count * (size_t)c->n + 2 * GUARD) * sizeof(float);
		c->dsend = c->drecv = NULL;
		if (cudaMalloc(&c->dsend, c->cap) != cudaSuccess || cudaMalloc(&c->drecv, c->cap) != cudaSuccess) {
			bad = 1;
			fprintf(stderr, "rank %d: cudaMalloc of %zu bytes failed\n", c->rank, c->cap);
			break;
		}
		bad = check_allreduce<float>(c, count, WEFT_SUM, i % 2, (*seed)++) ||
		      check_allgather(c, count, WEFT_FLOAT32, (i / 2) % 2, (*seed)++) ||
		      check_reduce_scatter<float>(c, count, WEFT_MAX, 0, (*seed)++);
		cudaFree(c->dsend);
		cudaFree(c->drecv);
	}
	c->dsend = ds;
	c->drecv = dr;
	c->cap = cap;
	return bad;
}

/* Sizes in bytes: 0, one element, odd, 64 KiB, 16 MiB, and past both
 * one-shot thresholds with an odd element count. */
static int matrix_rank(int rank, int n, void *arg)
{
	(void)arg;
	struct ctx c;
	if (ctx_open(&c, rank, n, (24u << 20) + 4096))
		return 1;
	uint32_t seed = 1;
	const size_t sizes[] = {0, 1, 3, 1023, 65536, 16u << 20, (20u << 20) + 8};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t b = sizes[s];
		if (all_ops<float>(&c, b / 4 ? b / 4 : b, &seed) || all_ops<__half>(&c, b / 2 ? b / 2 + (b > 1) : b, &seed) ||
		    all_ops<__nv_bfloat16>(&c, b / 2 ? b / 2 - (b > 1) : b, &seed) || all_ops<double>(&c, b / 8, &seed) ||
		    all_ops<int32_t>(&c, b / 4 ? b / 4 + 1 : b, &seed))
			return 1;
		for (int ip = 0; ip < 2; ip++) {
			size_t per = b / (size_t)n / 4;
			if (check_allgather(&c, per ? per + (b & 1) : b, WEFT_FLOAT32, ip, seed++) ||
			    check_allgather(&c, b / (size_t)n / 2 + 1, WEFT_BFLOAT16, ip, seed++) ||
			    check_allgather(&c, b % 7 + 1, WEFT_UINT8, ip, seed++))
				return 1;
		}
	}
	/* Every collective, type and op at small and odd sizes (one-shot paths,
	 * or the rings in the _rings entries); the root moves with the size. */
	const size_t counts[] = {1, 3, 1023, 16411};
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		if (EVERY_TYPE(red_ops, &c, counts[k], (int)(k % 2), 1, &seed))
			return 1;
		for (size_t t = 0; t < sizeof(all_types) / sizeof(all_types[0]); t++)
			if (move_ops(&c, counts[k], all_types[t], &seed))
				return 1;
	}
	/* Past the one-shot thresholds (16 MiB; alltoall 1 MiB): the rings. */
	const size_t big = (4u << 20) + 3; /* float32 elements: 16 MiB + 12 bytes */
	for (int ip = 0; ip < 2; ip++)
		if (check_reduce_scatter<float>(&c, big / 2, WEFT_SUM, ip, seed++) ||
		    check_reduce_scatter<uint8_t>(&c, big * 2 + 1, WEFT_MAX, ip, seed++) ||
		    check_reduce<float>(&c, big, WEFT_SUM, 0, ip, seed++) ||
		    check_reduce<__nv_bfloat16>(&c, big * 2 + 5, WEFT_AVG, 1, ip, seed++) ||
		    check_reduce<int64_t>(&c, big / 2 + 1, WEFT_PROD, 0, ip, seed++) ||
		    check_allreduce<uint8_t>(&c, big * 4 + 7, WEFT_MAX, ip, seed++) ||
		    check_allreduce<__nv_fp8_e5m2>(&c, big * 4 + 1, WEFT_SUM, ip, seed++) ||
		    check_broadcast(&c, big, WEFT_FLOAT32, 0, ip, seed++) ||
		    check_broadcast(&c, big * 4 + 1, WEFT_UINT8, 1, ip, seed++) ||
		    check_alltoall(&c, (1u << 18) + 3, WEFT_FLOAT32, ip, seed++) ||
		    check_alltoall(&c, (big * 4) / 2 + 1, WEFT_INT8, ip, seed++))
			return 1;
	/* Buffers the peers cannot map (managed memory): the copy-engine
	 * algorithms fall back to staging through the pack's scratch, on every
	 * rank at once, and stay exact. */
	{
		void *ds = c.dsend, *dr = c.drecv;
		CK(cudaMallocManaged(&c.dsend, c.cap));
		CK(cudaMallocManaged(&c.drecv, c.cap));
		int bad = check_allreduce<float>(&c, big + 1, WEFT_SUM, 0, seed++) ||
			  check_allreduce<float>(&c, big, WEFT_MAX, 1, seed++) ||
			  check_allgather(&c, big / (size_t)n + 1, WEFT_FLOAT32, 0, seed++) ||
			  check_reduce_scatter<float>(&c, big / (size_t)n, WEFT_SUM, 1, seed++) ||
			  check_broadcast(&c, big, WEFT_FLOAT32, 1, 0, seed++) ||
			  check_alltoall(&c, big / (size_t)n, WEFT_FLOAT32, 0, seed++);
		cudaFree(c.dsend);
		cudaFree(c.drecv);
		c.dsend = ds;
		c.drecv = dr;
		if (bad)
			return 1;
	}
	if (fresh_buffers(&c, &seed))
		return 1;
	/* Send/recv: tiny (LL packets), odd, and 2M (with the _rings entries' 16K slots, more tiles
	 * per block than the ring's depth: senders wait for credit). */
	const size_t bases[] = {1, 4099, (2u << 20) + 3};
	for (size_t k = 0; k < sizeof(bases) / sizeof(bases[0]); k++)
		if (check_p2p(&c, bases[k], &seed))
			return 1;
	if (check_p2p_unmatched_self(&c) || check_p2p_overlap(&c, &seed))
		return 1;
	return ctx_close(&c);
}

/* 3 and 4 ranks: fewer combinations, every size class. */
static int small_matrix_rank(int rank, int n, void *arg)
{
	(void)arg;
	struct ctx c;
	if (ctx_open(&c, rank, n, (24u << 20) + 4096))
		return 1;
	uint32_t seed = 100;
	/* Ranks sharing a GPU are time-sliced, so every wait may cost a slice:
	 * sizes stay modest but still reach every algorithm. */
	const size_t counts[] = {1, 5, 4097, 16384, 100003, (4u << 20) + 3};
	for (size_t s = 0; s < sizeof(counts) / sizeof(counts[0]); s++)
		for (int ip = 0; ip < 2; ip++) {
			/* per-rank blocks stay within the buffers: n * block <= 16 MiB + a bit */
			int big = counts[s] > (1u << 20);
			size_t blk = big ? (1u << 20) + 3 : counts[s];
			int root = (int)(s % (size_t)n);
			if (check_allreduce<float>(&c, counts[s], WEFT_SUM, ip, seed++) ||
			    check_allreduce<__nv_bfloat16>(&c, counts[s], WEFT_MAX, ip, seed++) ||
			    check_allreduce<int32_t>(&c, counts[s], WEFT_AVG, ip, seed++) ||
			    check_allgather(&c, counts[s] / (size_t)n + 1, WEFT_FLOAT32, ip, seed++) ||
			    check_reduce_scatter<float>(&c, blk, WEFT_SUM, ip, seed++) ||
			    check_reduce<float>(&c, counts[s], WEFT_SUM, root, ip, seed++) ||
			    check_broadcast(&c, counts[s], WEFT_FLOAT32, root, ip, seed++) ||
			    check_alltoall(&c, blk, WEFT_FLOAT32, ip, seed++))
				return 1;
			/* Ranks share GPUs here: the other types at the smaller sizes. */
			if (!big && (check_allreduce<int8_t>(&c, counts[s], WEFT_PROD, ip, seed++) ||
				     check_reduce_scatter<__nv_fp8_e4m3>(&c, blk, WEFT_MAX, ip, seed++) ||
				     check_reduce_scatter<uint64_t>(&c, blk / 2 + 1, WEFT_MIN, ip, seed++) ||
				     check_reduce<uint32_t>(&c, counts[s], WEFT_PROD, (root + 1) % n, ip, seed++) ||
				     check_reduce<__half>(&c, counts[s], WEFT_AVG, (root + 2) % n, ip, seed++) ||
				     check_broadcast(&c, counts[s] + 1, WEFT_UINT8, (root + 1) % n, ip, seed++) ||
				     check_alltoall(&c, blk * 2 + 1, WEFT_INT8, ip, seed++)))
				return 1;
		}
	const size_t bases[] = {3, 70001, (1u << 20) + 5};
	for (size_t k = 0; k < sizeof(bases) / sizeof(bases[0]); k++)
		if (check_p2p(&c, bases[k], &seed))
			return 1;
	if (check_p2p_overlap(&c, &seed))
		return 1;
	return ctx_close(&c);
}

__global__ void fill_kernel(float *p, size_t count, const uint32_t *seed, int rank)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
		p[i] = (float)gen(*seed, rank, i, WEFT_SUM);
}

/* A graph holding a small and a medium allreduce, an allgather, a
 * reduce-scatter, a broadcast, an alltoall and a reduce, each fed by a kernel
 * that draws new data from a seed the host changes before every replay:
 * 1,000 replays, each result checked. */
static int graph_rank(int rank, int n, void *arg)
{
	(void)arg;
	struct ctx c;
	const size_t n1 = 1000, n2 = 300001, ng = 4099, nrs = 777, nbc = 1001, na = 333, nred = 555;
	const int bc_root = 1 % n, red_root = 0;
	if (ctx_open(&c, rank, n, (8u << 20)))
		return 1;
	float *in1 = (float *)c.dsend, *in2 = in1 + 1024, *ing = in2 + n2 + 3;
	float *inrs = ing + ng + 5, *inbc = inrs + nrs * n + 1, *ina = inbc + nbc + 2, *inred = ina + na * n + 3;
	float *out1 = (float *)c.drecv, *out2 = out1 + 1024, *outg = out2 + n2 + 3;
	float *outrs = outg + ng * n + 1, *outbc = outrs + nrs + 2, *outa = outbc + nbc + 3, *outred = outa + na * n + 1;
	size_t recv_floats = (size_t)(outred + nred - out1);
	uint32_t *dseed;
	CK(cudaMalloc(&dseed, sizeof(uint32_t)));
	/* Setup (connections, scratch) happens at a comm's first call: not while
	 * capturing. */
	OK(weft_allreduce(in1, out1, n1, WEFT_FLOAT32, WEFT_SUM, c.comm, c.st));
	OK(weft_allreduce(in2, out2, n2, WEFT_FLOAT32, WEFT_SUM, c.comm, c.st));
	OK(weft_allgather(ing, outg, ng, WEFT_FLOAT32, c.comm, c.st));
	OK(weft_reduce_scatter(inrs, outrs, nrs, WEFT_FLOAT32, WEFT_SUM, c.comm, c.st));
	OK(weft_broadcast(inbc, outbc, nbc, WEFT_FLOAT32, bc_root, c.comm, c.st));
	OK(weft_alltoall(ina, outa, na, WEFT_FLOAT32, c.comm, c.st));
	OK(weft_reduce(inred, outred, nred, WEFT_FLOAT32, WEFT_SUM, red_root, c.comm, c.st));
	CK(cudaStreamSynchronize(c.st));
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	CK(cudaStreamBeginCapture(c.st, cudaStreamCaptureModeRelaxed));
	fill_kernel<<<64, 256, 0, c.st>>>(in1, n1, dseed, rank);
	fill_kernel<<<64, 256, 0, c.st>>>(in2, n2, dseed, rank);
	fill_kernel<<<64, 256, 0, c.st>>>(ing, ng, dseed, rank);
	fill_kernel<<<64, 256, 0, c.st>>>(inrs, nrs * n, dseed, rank);
	fill_kernel<<<64, 256, 0, c.st>>>(inbc, nbc, dseed, rank);
	fill_kernel<<<64, 256, 0, c.st>>>(ina, na * n, dseed, rank);
	fill_kernel<<<64, 256, 0, c.st>>>(inred, nred, dseed, rank);
	int r1 = weft_allreduce(in1, out1, n1, WEFT_FLOAT32, WEFT_SUM, c.comm, c.st);
	int r2 = weft_allreduce(in2, out2, n2, WEFT_FLOAT32, WEFT_SUM, c.comm, c.st);
	int r3 = weft_allgather(ing, outg, ng, WEFT_FLOAT32, c.comm, c.st);
	int r4 = weft_reduce_scatter(inrs, outrs, nrs, WEFT_FLOAT32, WEFT_SUM, c.comm, c.st);
	int r5 = weft_broadcast(inbc, outbc, nbc, WEFT_FLOAT32, bc_root, c.comm, c.st);
	int r6 = weft_alltoall(ina, outa, na, WEFT_FLOAT32, c.comm, c.st);
	int r7 = weft_reduce(inred, outred, nred, WEFT_FLOAT32, WEFT_SUM, red_root, c.comm, c.st);
	CK(cudaStreamEndCapture(c.st, &graph));
	OK(r1);
	OK(r2);
	OK(r3);
	OK(r4);
	OK(r5);
	OK(r6);
	OK(r7);
	CK(cudaGraphInstantiate(&exec, graph, 0));
	float *h1 = (float *)c.hout, *h2 = h1 + 1024, *hg = h2 + n2 + 3;
	float *hrs = hg + ng * n + 1, *hbc = hrs + nrs + 2, *ha = hbc + nbc + 3, *hred = ha + na * n + 1;
	for (uint32_t it = 0; it < 1000; it++) {
		uint32_t seed = 7000 + it;
		CK(cudaMemcpyAsync(dseed, &seed, sizeof(seed), cudaMemcpyHostToDevice, c.st));
		CK(cudaMemsetAsync(c.drecv, 0xA5, (recv_floats + 64) * 4, c.st));
		CK(cudaGraphLaunch(exec, c.st));
		CK(cudaMemcpyAsync(c.hout, c.drecv, recv_floats * 4, cudaMemcpyDeviceToHost, c.st));
		CK(cudaStreamSynchronize(c.st));
		for (size_t i = 0; i < n1; i++)
			if (h1[i] != reference<float>(seed, n, i, WEFT_SUM))
				RFAIL("replay %u: small allreduce element %zu is %g", it, i, h1[i]);
		for (size_t i = 0; i < n2; i++)
			if (h2[i] != reference<float>(seed, n, i, WEFT_SUM))
				RFAIL("replay %u: medium allreduce element %zu is %g", it, i, h2[i]);
		for (int q = 0; q < n; q++)
			for (size_t i = 0; i < ng; i++)
				if (hg[(size_t)q * ng + i] != (float)gen(seed, q, i, WEFT_SUM))
					RFAIL("replay %u: allgather rank %d element %zu is %g", it, q, i,
					      hg[(size_t)q * ng + i]);
		for (size_t i = 0; i < nrs; i++)
			if (hrs[i] != reference<float>(seed, n, (uint64_t)rank * nrs + i, WEFT_SUM))
				RFAIL("replay %u: reduce_scatter element %zu is %g", it, i, hrs[i]);
		for (size_t i = 0; i < nbc; i++)
			if (hbc[i] != (float)gen(seed, bc_root, i, WEFT_SUM))
				RFAIL("replay %u: broadcast element %zu is %g", it, i, hbc[i]);
		for (int q = 0; q < n; q++)
			for (size_t i = 0; i < na; i++)
				if (ha[(size_t)q * na + i] != (float)gen(seed, q, (uint64_t)rank * na + i, WEFT_SUM))
					RFAIL("replay %u: alltoall block of rank %d element %zu is %g", it, q, i,
					      ha[(size_t)q * na + i]);
		for (size_t i = 0; i < nred; i++) {
			uint32_t poison;
			memcpy(&poison, &hred[i], 4);
			if (rank == red_root ? hred[i] != reference<float>(seed, n, i, WEFT_SUM) : poison != 0xA5A5A5A5u)
				RFAIL("replay %u: reduce element %zu is %g", it, i, hred[i]);
		}
	}
	CK(cudaGraphExecDestroy(exec));
	CK(cudaGraphDestroy(graph));
	cudaFree(dseed);
	return ctx_close(&c);
}

/* A call the last rank makes differently, on a stream: an allreduce of 1000
 * int32 against float32 (same bytes), or (arg non-NULL) a send/recv ring
 * whose last rank sends one element more. The call returns once enqueued;
 * after the stream is synchronized, the comm's next call returns
 * -WEFT_ERR_MISMATCH on every rank within 2 s, and the call after it too. */
static int mismatch_call(struct ctx *c, int p2p, size_t count, enum weft_datatype t)
{
	if (!p2p)
		return weft_allreduce(c->dsend, c->drecv, count, t, WEFT_SUM, c->comm, c->st);
	int rc = weft_group_start();
	if (rc)
		return rc;
	int r1 = weft_send(c->dsend, count, t, (c->rank + 1) % c->n, c->comm, c->st);
	int r2 = weft_recv(c->drecv, count, t, (c->rank + c->n - 1) % c->n, c->comm, c->st);
	rc = weft_group_end();
	return r1 ? r1 : r2 ? r2 : rc;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int mismatch_rank(int rank, int n, void *arg)
{
	struct ctx c;
	int p2p = arg != NULL, last = rank == n - 1;
	const size_t count = 1000;
	if (ctx_open(&c, rank, n, 1u << 20))
		return 1;
	CK(cudaMemset(c.dsend, 0, c.cap));
	OK(mismatch_call(&c, p2p, count, WEFT_FLOAT32));
	CK(cudaStreamSynchronize(c.st));
	const char *what = p2p ? "send/recv of 1000 against 1001 floats" : "allreduce of float32 against int32";
	int rc = mismatch_call(&c, p2p, count + (p2p && last), last && !p2p ? WEFT_INT32 : WEFT_FLOAT32);
	if (rc != 0 && rc != -WEFT_ERR_MISMATCH)
		RFAIL("%s on a stream returned %s", what, weft_strerror(rc));
	CK(cudaStreamSynchronize(c.st));
	double t0 = now_s();
	while (rc == 0 && now_s() - t0 < 2.0) {
		rc = mismatch_call(&c, p2p, count, WEFT_FLOAT32);
		cudaStreamSynchronize(c.st);
		if (rc == 0)
			usleep(20 * 1000);
	}
	if (rc != -WEFT_ERR_MISMATCH)
		RFAIL("after a %s on a stream, the next calls returned %s within %.1f s, not -WEFT_ERR_MISMATCH", what,
		      weft_strerror(rc), now_s() - t0);
	rc = mismatch_call(&c, p2p, count, WEFT_FLOAT32);
	if (rc != -WEFT_ERR_MISMATCH)
		RFAIL("the call after the failed one returned %s, not -WEFT_ERR_MISMATCH", weft_strerror(rc));
	cudaStreamSynchronize(c.st);
	weft_comm_destroy(c.comm);
	cudaFree(c.dsend);
	cudaFree(c.drecv);
	cudaFreeHost(c.hbuf);
	cudaFreeHost(c.hout);
	cudaStreamDestroy(c.st);
	return 0;
}

/* The copy-engine algorithms (large sizes) captured in a graph: an allreduce,
 * an allgather and a reduce-scatter of new data on every one of 20 replays.
 * Buffers are mapped at capture; replays reuse them. */
static int graph_ce_rank(int rank, int n, void *arg)
{
	(void)arg;
	struct ctx c;
	const size_t nar = (5u << 20) + 7, nag = (3u << 20) + 1, nrs = (2u << 20) + 5;
	if (ctx_open(&c, rank, n, (size_t)(nar + nag * n + nrs * n + 64) * 4))
		return 1;
	float *inar = (float *)c.dsend, *inag = inar + nar + 1, *inrs = inag + nag + 2;
	float *outar = (float *)c.drecv, *outag = outar + nar + 1, *outrs = outag + nag * n + 2;
	size_t recv_floats = (size_t)(outrs + nrs - outar);
	uint32_t *dseed;
	CK(cudaMalloc(&dseed, sizeof(uint32_t)));
	OK(weft_allreduce(inar, outar, 1, WEFT_FLOAT32, WEFT_SUM, c.comm, c.st)); /* setup, not captured */
	CK(cudaStreamSynchronize(c.st));
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	CK(cudaStreamBeginCapture(c.st, cudaStreamCaptureModeGlobal));
	fill_kernel<<<264, 256, 0, c.st>>>(inar, nar, dseed, rank);
	fill_kernel<<<264, 256, 0, c.st>>>(inag, nag, dseed, rank);
	fill_kernel<<<264, 256, 0, c.st>>>(inrs, nrs * n, dseed, rank);
	int r1 = weft_allreduce(inar, outar, nar, WEFT_FLOAT32, WEFT_SUM, c.comm, c.st);
	int r2 = weft_allgather(inag, outag, nag, WEFT_FLOAT32, c.comm, c.st);
	int r3 = weft_reduce_scatter(inrs, outrs, nrs, WEFT_FLOAT32, WEFT_SUM, c.comm, c.st);
	CK(cudaStreamEndCapture(c.st, &graph));
	OK(r1);
	OK(r2);
	OK(r3);
	CK(cudaGraphInstantiate(&exec, graph, 0));
	float *har = (float *)c.hout, *hag = har + nar + 1, *hrs = hag + nag * n + 2;
	for (uint32_t it = 0; it < 20; it++) {
		uint32_t seed = 9100 + it;
		CK(cudaMemcpyAsync(dseed, &seed, sizeof(seed), cudaMemcpyHostToDevice, c.st));
		CK(cudaMemsetAsync(c.drecv, 0xA5, recv_floats * 4, c.st));
		CK(cudaGraphLaunch(exec, c.st));
		CK(cudaMemcpyAsync(c.hout, c.drecv, recv_floats * 4, cudaMemcpyDeviceToHost, c.st));
		CK(cudaStreamSynchronize(c.st));
		for (size_t i = 0; i < nar; i++)
			if (har[i] != reference<float>(seed, n, i, WEFT_SUM))
				RFAIL("replay %u: allreduce element %zu is %g", it, i, har[i]);
		for (int q = 0; q < n; q++)
			for (size_t i = 0; i < nag; i++)
				if (hag[(size_t)q * nag + i] != (float)gen(seed, q, i, WEFT_SUM))
					RFAIL("replay %u: allgather rank %d element %zu is %g", it, q, i,
					      hag[(size_t)q * nag + i]);
		for (size_t i = 0; i < nrs; i++)
			if (hrs[i] != reference<float>(seed, n, (uint64_t)rank * nrs + i, WEFT_SUM))
				RFAIL("replay %u: reduce_scatter element %zu is %g", it, i, hrs[i]);
	}
	CK(cudaGraphExecDestroy(exec));
	CK(cudaGraphDestroy(graph));
	cudaFree(dseed);
	return ctx_close(&c);
}

/* ------------------------------------------------ pre-multiplied sums */

static int run(int n, wt_rank_fn fn, int timeout);

/* Rank q's scalar: 0.25 (exact), 1/3 (rounded to T) or 0.25 * (q + 1); for
 * integers 3, -2 and q + 2. Stored in T. */
template <typename T> static T pm_scalar(int kind, int q)
{
	typedef typename H<T>::A A;
	bool fl = H<T>::type == WEFT_FLOAT16 || H<T>::type == WEFT_BFLOAT16 || H<T>::type == WEFT_FLOAT32 ||
		  H<T>::type == WEFT_FLOAT64 || H<T>::type == WEFT_FP8_E4M3 || H<T>::type == WEFT_FP8_E5M2;
	double v = fl ? (kind == 0 ? 0.25 : kind == 1 ? 1.0 / 3.0 : 0.25 * (q + 1))
		      : (kind == 0 ? 3 : kind == 1 ? -2 : q + 2);
	return H<T>::from((A)v);
}

/* Each rank's product rounded to T (as NCCL rounds it), then summed as the
 * pack sums: accumulated in A in rank order, rounded once. */
template <typename T> static T pm_reference(uint32_t seed, int n, uint64_t i, int kind)
{
	typedef typename H<T>::A A;
	A acc = 0;
	for (int q = 0; q < n; q++) {
		A x = H<T>::to(H<T>::from((A)gen(seed, q, i, WEFT_SUM)));
		A p = H<T>::to(H<T>::from((A)(x * H<T>::to(pm_scalar<T>(kind, q)))));
		acc = q == 0 ? p : (A)(acc + p);
	}
	return H<T>::from(acc);
}

/* One pre-multiplied allreduce, reduce-scatter and reduce of count elements
 * (reduce-scatter: per rank), the scalar on the host or on the device. */
template <typename T> static int check_premul(struct ctx *c, size_t count, int kind, int dev_scalar, uint32_t seed)
{
	size_t es = sizeof(T), tot = count * (size_t)c->n;
	if ((tot + GUARD) * es > c->cap)
		RFAIL("case too large");
	const char *tn = weft_datatype_name(H<T>::type);
	T s = pm_scalar<T>(kind, c->rank), *ds = NULL;
	if (dev_scalar) {
		CK(cudaMalloc(&ds, sizeof(T)));
		CK(cudaMemcpyAsync(ds, &s, sizeof(T), cudaMemcpyHostToDevice, c->st));
	}
	const void *sp = dev_scalar ? (const void *)ds : (const void *)&s;
	enum weft_mem_type sm = dev_scalar ? WEFT_MEM_CUDA : WEFT_MEM_HOST;
	T *h = (T *)c->hbuf;
	for (size_t i = 0; i < tot; i++)
		h[i] = H<T>::from((typename H<T>::A)gen(seed, c->rank, i, WEFT_SUM));
	CK(cudaMemcpyAsync(c->dsend, h, tot * es, cudaMemcpyHostToDevice, c->st));
	for (int coll = 0; coll < 3; coll++) {
		CK(cudaMemsetAsync(c->drecv, 0xA5, (tot + GUARD) * es, c->st));
		int root = c->n - 1, rc;
		if (coll == 0)
			rc = weft_allreduce_premul(c->dsend, c->drecv, count, H<T>::type, sp, sm, c->comm, c->st);
		else if (coll == 1)
			rc = weft_reduce_scatter_premul(c->dsend, c->drecv, count, H<T>::type, sp, sm, c->comm, c->st);
		else
			rc = weft_reduce_premul(c->dsend, c->drecv, count, H<T>::type, sp, sm, root, c->comm, c->st);
		OK(rc);
		CK(cudaMemcpyAsync(c->hout, c->drecv, (count + GUARD) * es, cudaMemcpyDeviceToHost, c->st));
		CK(cudaStreamSynchronize(c->st));
		const T *o = (const T *)c->hout;
		static const char *const names[] = {"allreduce", "reduce_scatter", "reduce"};
		if (coll == 2 && c->rank != root)
			continue;
		for (size_t i = 0; i < count; i++) {
			T want = pm_reference<T>(seed, c->n, coll == 1 ? (uint64_t)c->rank * count + i : i, kind);
			if (memcmp(&o[i], &want, es) != 0)
				RFAIL("premul %s %s scalar kind %d (%s) count %zu: element %zu is %g, want %g", names[coll],
				      tn, kind, dev_scalar ? "device" : "host", count, i, (double)H<T>::to(o[i]),
				      (double)H<T>::to(want));
		}
		for (size_t b = count * es; b < (count + GUARD) * es; b++)
			if ((unsigned char)c->hout[b] != 0xA5)
				RFAIL("premul %s %s count %zu wrote past the end", names[coll], tn, count);
	}
	if (ds)
		CK(cudaFree(ds));
	return 0;
}

template <typename T> static int premul_sizes(struct ctx *c, uint32_t *seed)
{
	/* One-shot and LL sizes, then past the one-shot thresholds. */
	const size_t counts[] = {1, 1023, (1u << 19) + 7};
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
		for (int kind = 0; kind < 3; kind++)
			if (check_premul<T>(c, counts[k], kind, (int)((k + kind) & 1), (*seed)++))
				return 1;
	return 0;
}

static int premul_rank(int rank, int n, void *arg)
{
	(void)arg;
	struct ctx c;
	if (ctx_open(&c, rank, n, (24u << 20) + 4096))
		return 1;
	uint32_t seed = 500;
	if (EVERY_TYPE(premul_sizes, &c, &seed))
		return 1;
	return ctx_close(&c);
}

/* A device scalar in a captured graph is read at each replay: 5 replays,
 * the scalar changed before each, allreduce and reduce-scatter (whose scaled
 * input lives in stream-ordered memory the graph allocates and frees). */
static int premul_graph_rank(int rank, int n, void *arg)
{
	(void)arg;
	struct ctx c;
	const size_t nar = 100003, nrs = 40001;
	if (ctx_open(&c, rank, n, (nar + nrs * (size_t)n + 64) * 4 * 2))
		return 1;
	float *inar = (float *)c.dsend, *inrs = inar + nar + 1;
	float *outar = (float *)c.drecv, *outrs = outar + nar + 1;
	float *ds;
	CK(cudaMalloc(&ds, sizeof(float)));
	float *h = (float *)c.hbuf;
	for (size_t i = 0; i < nar; i++)
		h[i] = (float)gen(77, rank, i, WEFT_SUM);
	for (size_t i = 0; i < nrs * (size_t)n; i++)
		h[nar + 1 + i] = (float)gen(78, rank, i, WEFT_SUM);
	CK(cudaMemcpyAsync(c.dsend, h, (nar + 1 + nrs * (size_t)n) * 4, cudaMemcpyHostToDevice, c.st));
	float s0 = 1.0f;
	CK(cudaMemcpyAsync(ds, &s0, 4, cudaMemcpyHostToDevice, c.st));
	/* Setup happens at the first call, outside the capture. */
	OK(weft_allreduce_premul(inar, outar, nar, WEFT_FLOAT32, ds, WEFT_MEM_CUDA, c.comm, c.st));
	OK(weft_reduce_scatter_premul(inrs, outrs, nrs, WEFT_FLOAT32, ds, WEFT_MEM_CUDA, c.comm, c.st));
	CK(cudaStreamSynchronize(c.st));
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	CK(cudaStreamBeginCapture(c.st, cudaStreamCaptureModeGlobal));
	int r1 = weft_allreduce_premul(inar, outar, nar, WEFT_FLOAT32, ds, WEFT_MEM_CUDA, c.comm, c.st);
	int r2 = weft_reduce_scatter_premul(inrs, outrs, nrs, WEFT_FLOAT32, ds, WEFT_MEM_CUDA, c.comm, c.st);
	CK(cudaStreamEndCapture(c.st, &graph));
	OK(r1);
	OK(r2);
	CK(cudaGraphInstantiate(&exec, graph, 0));
	float *ho = (float *)c.hout;
	for (int it = 0; it < 5; it++) {
		/* Rank q's scalar at replay it: (q + 1) * 0.5^it / 3, rounded to float. */
		float sc = (float)((rank + 1) * ldexp(1.0, -it) / 3.0);
		CK(cudaMemcpyAsync(ds, &sc, 4, cudaMemcpyHostToDevice, c.st));
		CK(cudaMemsetAsync(c.drecv, 0xA5, (nar + 1 + nrs) * 4, c.st));
		CK(cudaGraphLaunch(exec, c.st));
		CK(cudaMemcpyAsync(c.hout, c.drecv, (nar + 1 + nrs) * 4, cudaMemcpyDeviceToHost, c.st));
		CK(cudaStreamSynchronize(c.st));
		for (int part = 0; part < 2; part++) {
			size_t cnt = part ? nrs : nar;
			const float *o = part ? ho + nar + 1 : ho;
			for (size_t i = 0; i < cnt; i++) {
				uint64_t g = part ? (uint64_t)rank * nrs + i : i;
				float acc = 0;
				for (int q = 0; q < n; q++) {
					float sq = (float)((q + 1) * ldexp(1.0, -it) / 3.0);
					float p = (float)gen(part ? 78 : 77, q, g, WEFT_SUM) * sq;
					acc = q == 0 ? p : acc + p;
				}
				if (memcmp(&o[i], &acc, 4) != 0)
					RFAIL("replay %d: %s element %zu is %.9g, want %.9g", it,
					      part ? "reduce_scatter" : "allreduce", i, (double)o[i], (double)acc);
			}
		}
	}
	CK(cudaGraphExecDestroy(exec));
	CK(cudaGraphDestroy(graph));
	CK(cudaFree(ds));
	return ctx_close(&c);
}

START_TEST(two_ranks_premul)
{
	ck_assert_int_eq(run(2, premul_rank, 600), 0);
}
END_TEST

START_TEST(two_ranks_premul_graph)
{
	ck_assert_int_eq(run(2, premul_graph_rank, 300), 0);
}
END_TEST

/* WAG_TEST_TIMEOUT (seconds) bounds each fork of ranks: a hung kernel fails
 * the case instead of stalling the run. */
static int run_arg(int n, wt_rank_fn fn, void *arg, int timeout)
{
	const char *t = getenv("WAG_TEST_TIMEOUT");
	if (t && atoi(t) > 0)
		timeout = atoi(t);
	if (g_netns) {
		if (wt_id_pipe_open(&g_pipe, n - 1) != 0)
			return -1;
		int bad = wt_fork_ranks(n, fn, arg, timeout);
		wt_id_pipe_close(&g_pipe);
		return bad;
	}
	if (weft_get_unique_id(&g_id) != 0)
		return -1;
	return wt_fork_ranks(n, fn, arg, timeout);
}

static int run(int n, wt_rank_fn fn, int timeout)
{
	return run_arg(n, fn, NULL, timeout);
}

START_TEST(two_ranks_matrix)
{
	ck_assert_int_eq(run(2, matrix_rank, 800), 0);
}
END_TEST

START_TEST(two_ranks_graph_replay)
{
	ck_assert_int_eq(run(2, graph_rank, 300), 0);
}
END_TEST

START_TEST(four_ranks_graph_replay)
{
	ck_assert_int_eq(run(4, graph_rank, 600), 0);
}
END_TEST

START_TEST(two_ranks_graph_ce)
{
	ck_assert_int_eq(run(2, graph_ce_rank, 300), 0);
}
END_TEST

START_TEST(two_ranks_mismatch)
{
	ck_assert_int_eq(run(2, mismatch_rank, 120), 0);
}
END_TEST

START_TEST(two_ranks_mismatch_p2p)
{
	static int p2p = 1;
	ck_assert_int_eq(run_arg(2, mismatch_rank, &p2p, 120), 0);
}
END_TEST

START_TEST(three_ranks)
{
	ck_assert_int_eq(run(3, small_matrix_rank, 420), 0);
}
END_TEST

START_TEST(four_ranks)
{
	ck_assert_int_eq(run(4, small_matrix_rank, 420), 0);
}
END_TEST

/* CUDA must not be initialized in the parent before the ranks fork. */
static int probe_gpu(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		int n = 0;
		cudaError_t e = cudaGetDeviceCount(&n);
		_exit(e == cudaSuccess && n > 0 ? 100 + (n > 50 ? 50 : n) : 1);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) >= 100) {
		g_ndev = WEXITSTATUS(st) - 100;
		return 0;
	}
	const char *req = getenv("WEFT_REQUIRE_GPU");
	if (req && strcmp(req, "1") == 0) {
		fprintf(stderr, "FAIL: WEFT_REQUIRE_GPU=1 but no CUDA device\n");
		return 1;
	}
	printf("SKIP: no CUDA device\n");
	return WT_SKIP;
}

int main(void)
{
	int rc = probe_gpu();
	if (rc != 0)
		return rc;
	g_hosts = getenv("WAG_TEST_HOSTS");
	g_expect = getenv("WAG_TEST_EXPECT");
	const char *ns = getenv("WAG_TEST_NETNS");
	if (ns && strcmp(ns, "1") == 0) {
		const char *why = wt_netns_unavailable();
		if (why)
			return wt_netns_skip(why);
		if (wt_netns_setup(&g_ns, "gpu") < 0) {
			wt_netns_cleanup(&g_ns);
			return wt_netns_skip("cannot create network namespaces and a veth pair here");
		}
		g_netns = 1;
		printf("namespaces %s (%s) and %s (%s)\n", g_ns.ns[0], g_ns.addr[0], g_ns.ns[1], g_ns.addr[1]);
	}
	printf("%d CUDA device(s)\n", g_ndev);
	/* One case per ctest entry (CK_RUN_CASE), so each has its own verdict. */
	Suite *s = suite_create("algo_gpu");
	TCase *tc = tcase_create("two");
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, two_ranks_matrix);
	suite_add_tcase(s, tc);
	tc = tcase_create("graph");
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, two_ranks_graph_replay);
	tcase_add_test(tc, two_ranks_graph_ce);
	suite_add_tcase(s, tc);
	tc = tcase_create("premul");
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, two_ranks_premul);
	tcase_add_test(tc, two_ranks_premul_graph);
	suite_add_tcase(s, tc);
	/* The cross-host entries, graphs included (a host node per call). */
	tc = tcase_create("hier");
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, two_ranks_matrix);
	tcase_add_test(tc, two_ranks_premul);
	tcase_add_test(tc, two_ranks_graph_replay);
	tcase_add_test(tc, two_ranks_premul_graph);
	suite_add_tcase(s, tc);
	tc = tcase_create("mismatch");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, two_ranks_mismatch);
	tcase_add_test(tc, two_ranks_mismatch_p2p);
	suite_add_tcase(s, tc);
	tc = tcase_create("multi");
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, three_ranks);
	tcase_add_test(tc, four_ranks);
	tcase_add_test(tc, four_ranks_graph_replay);
	suite_add_tcase(s, tc);
	rc = wt_run_suite(s);
	wt_netns_cleanup(&g_ns);
	return rc;
}
