/* GPU tests of the algo-gpu pack through the public API: weft_allreduce and
 * weft_allgather on cudaMalloc buffers with a stream, forked ranks (one per
 * GPU, or several per GPU for 3 and 4 ranks), integer-valued random data
 * checked bit for bit against a CPU reference, outputs poisoned first and
 * guarded past their end, in place and out of place, and a captured graph
 * replayed 1,000 times with new data each time. Skips (77) without a GPU
 * unless WEFT_REQUIRE_GPU=1. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <weft/weft.h>

/* testlib is C without extern "C" guards. */
extern "C" {
#include "testlib.h"
}

static struct weft_unique_id g_id;
static int g_ndev;
static int g_rank = -1;

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

template <typename A> static A h_combine(int op, A x, A y)
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

/* What every rank must hold at element i: in rank order, accumulated as the
 * pack accumulates (float for 16-bit floats), rounded once. */
template <typename T> static T reference(uint32_t seed, int n, uint64_t i, int op)
{
	typedef typename H<T>::A A;
	A acc = H<T>::to(H<T>::from((A)gen(seed, 0, i, op)));
	for (int q = 1; q < n; q++)
		acc = h_combine<A>(op, acc, H<T>::to(H<T>::from((A)gen(seed, q, i, op))));
	if (op == WEFT_AVG)
		acc = acc / (A)n;
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

static int ctx_open(struct ctx *c, int rank, int n, size_t cap)
{
	memset(c, 0, sizeof(*c));
	c->rank = rank;
	c->n = n;
	c->cap = cap;
	g_rank = rank;
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
	/* Refusals: a type or op the pack lacks is -ENOTSUP, never a wrong result. */
	int rc = weft_allreduce(c.dsend, c.drecv, 16, WEFT_INT8, WEFT_SUM, c.comm, c.st);
	if (rc != -ENOTSUP)
		RFAIL("int8 allreduce returned %d, want -ENOTSUP", rc);
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
		for (int ip = 0; ip < 2; ip++)
			if (check_allreduce<float>(&c, counts[s], WEFT_SUM, ip, seed++) ||
			    check_allreduce<__nv_bfloat16>(&c, counts[s], WEFT_MAX, ip, seed++) ||
			    check_allreduce<int32_t>(&c, counts[s], WEFT_AVG, ip, seed++) ||
			    check_allgather(&c, counts[s] / (size_t)n + 1, WEFT_FLOAT32, ip, seed++))
				return 1;
	return ctx_close(&c);
}

__global__ void fill_kernel(float *p, size_t count, const uint32_t *seed, int rank)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
		p[i] = (float)gen(*seed, rank, i, WEFT_SUM);
}

/* A graph holding a small and a medium allreduce and an allgather, each fed
 * by a kernel that draws new data from a seed the host changes before every
 * replay: 1,000 replays, each result checked. */
static int graph_rank(int rank, int n, void *arg)
{
	(void)arg;
	struct ctx c;
	const size_t n1 = 1000, n2 = 300001, ng = 4099;
	if (ctx_open(&c, rank, n, (8u << 20)))
		return 1;
	float *in1 = (float *)c.dsend, *in2 = in1 + 1024, *ing = in2 + n2 + 3;
	float *out1 = (float *)c.drecv, *out2 = out1 + 1024, *outg = out2 + n2 + 3;
	uint32_t *dseed;
	CK(cudaMalloc(&dseed, sizeof(uint32_t)));
	/* Setup (connections, scratch) happens at a comm's first call: not while
	 * capturing. */
	OK(weft_allreduce(in1, out1, n1, WEFT_FLOAT32, WEFT_SUM, c.comm, c.st));
	OK(weft_allreduce(in2, out2, n2, WEFT_FLOAT32, WEFT_SUM, c.comm, c.st));
	OK(weft_allgather(ing, outg, ng, WEFT_FLOAT32, c.comm, c.st));
	CK(cudaStreamSynchronize(c.st));
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	CK(cudaStreamBeginCapture(c.st, cudaStreamCaptureModeRelaxed));
	fill_kernel<<<64, 256, 0, c.st>>>(in1, n1, dseed, rank);
	fill_kernel<<<64, 256, 0, c.st>>>(in2, n2, dseed, rank);
	fill_kernel<<<64, 256, 0, c.st>>>(ing, ng, dseed, rank);
	int r1 = weft_allreduce(in1, out1, n1, WEFT_FLOAT32, WEFT_SUM, c.comm, c.st);
	int r2 = weft_allreduce(in2, out2, n2, WEFT_FLOAT32, WEFT_SUM, c.comm, c.st);
	int r3 = weft_allgather(ing, outg, ng, WEFT_FLOAT32, c.comm, c.st);
	CK(cudaStreamEndCapture(c.st, &graph));
	OK(r1);
	OK(r2);
	OK(r3);
	CK(cudaGraphInstantiate(&exec, graph, 0));
	float *h1 = (float *)c.hout, *h2 = h1 + 1024, *hg = h2 + n2 + 3;
	for (uint32_t it = 0; it < 1000; it++) {
		uint32_t seed = 7000 + it;
		CK(cudaMemcpyAsync(dseed, &seed, sizeof(seed), cudaMemcpyHostToDevice, c.st));
		CK(cudaMemsetAsync(c.drecv, 0xA5, (n2 + 1024 + 3 + ng * n + 64) * 4, c.st));
		CK(cudaGraphLaunch(exec, c.st));
		CK(cudaMemcpyAsync(c.hout, c.drecv, (n2 + 1024 + 3 + ng * n) * 4, cudaMemcpyDeviceToHost, c.st));
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
	}
	CK(cudaGraphExecDestroy(exec));
	CK(cudaGraphDestroy(graph));
	cudaFree(dseed);
	return ctx_close(&c);
}

/* WAG_TEST_TIMEOUT (seconds) bounds each fork of ranks: a hung kernel fails
 * the case instead of stalling the run. */
static int run(int n, wt_rank_fn fn, int timeout)
{
	const char *t = getenv("WAG_TEST_TIMEOUT");
	if (t && atoi(t) > 0)
		timeout = atoi(t);
	if (weft_get_unique_id(&g_id) != 0)
		return -1;
	return wt_fork_ranks(n, fn, NULL, timeout);
}

START_TEST(two_ranks_matrix)
{
	ck_assert_int_eq(run(2, matrix_rank, 400), 0);
}
END_TEST

START_TEST(two_ranks_graph_replay)
{
	ck_assert_int_eq(run(2, graph_rank, 300), 0);
}
END_TEST

START_TEST(three_ranks)
{
	ck_assert_int_eq(run(3, small_matrix_rank, 300), 0);
}
END_TEST

START_TEST(four_ranks)
{
	ck_assert_int_eq(run(4, small_matrix_rank, 300), 0);
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
	suite_add_tcase(s, tc);
	tc = tcase_create("multi");
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, three_ranks);
	tcase_add_test(tc, four_ranks);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
