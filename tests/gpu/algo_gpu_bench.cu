/* SPDX-License-Identifier: Apache-2.0 */
/* algo-gpu benchmark: weft_allreduce and weft_allgather (float16, sum) on two
 * forked ranks, one GPU each, timed like nccl-tests -G 20: 20 calls captured
 * in one CUDA graph, warmed up, each replay timed with CUDA events, the median
 * divided by 20. Results are validated first. When WAG_NCCL_LIB names a
 * libnccl.so.2 (and NCCL_NVLS_ENABLE=0 is set), NCCL runs the same sizes in
 * the same processes with the same timing. Prints: size, us, busbw. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <weft/weft.h>

#define GRAPH_OPS 20
#define MAX_BYTES (1ull << 30)

static int g_rank;

#define FAIL(...)                                                                  \
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
			FAIL("%s: %s", #call, cudaGetErrorString(e_));                \
	} while (0)

/* The NCCL entry points used, loaded at run time (no link dependency). */
typedef struct {
	char internal[128];
} nccl_id_t;
struct nccl {
	void *h;
	int (*get_id)(nccl_id_t *);
	int (*init)(void **, int, nccl_id_t, int);
	int (*allreduce)(const void *, void *, size_t, int, int, void *, cudaStream_t);
	int (*allgather)(const void *, void *, size_t, int, void *, cudaStream_t);
	int (*destroy)(void *);
	int (*version)(int *);
	void *comm;
};
#define NCCL_FLOAT16 6
#define NCCL_SUM 0

static int nccl_load(struct nccl *x, const char *path)
{
	memset(x, 0, sizeof(*x));
	const char *nvls = getenv("NCCL_NVLS_ENABLE");
	if (!nvls || strcmp(nvls, "0") != 0) {
		fprintf(stderr, "NCCL column skipped: NCCL_NVLS_ENABLE=0 is not set\n");
		return -1;
	}
	if (!(x->h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
		fprintf(stderr, "NCCL column skipped: %s\n", dlerror());
		return -1;
	}
	*(void **)&x->get_id = dlsym(x->h, "ncclGetUniqueId");
	*(void **)&x->init = dlsym(x->h, "ncclCommInitRank");
	*(void **)&x->allreduce = dlsym(x->h, "ncclAllReduce");
	*(void **)&x->allgather = dlsym(x->h, "ncclAllGather");
	*(void **)&x->destroy = dlsym(x->h, "ncclCommDestroy");
	*(void **)&x->version = dlsym(x->h, "ncclGetVersion");
	if (!x->get_id || !x->init || !x->allreduce || !x->allgather || !x->destroy) {
		fprintf(stderr, "NCCL column skipped: missing symbols in %s\n", path);
		return -1;
	}
	return 0;
}

__global__ void fill(__half *p, size_t n, int rank)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		p[i] = __float2half((float)((int)((i * 2654435761u + rank * 97u) % 9) - 4));
}

static float expect_sum(size_t i, int n)
{
	float s = 0;
	for (int q = 0; q < n; q++)
		s += (float)((int)((i * 2654435761u + q * 97u) % 9) - 4);
	return s;
}

enum lib { LIB_WEFT, LIB_NCCL };

static int issue(enum lib l, int coll, struct nccl *x, weft_comm_t *comm, void *in, void *out, size_t bytes, int n,
		 cudaStream_t st)
{
	size_t cnt = coll == 0 ? bytes / 2 : bytes / 2 / (size_t)n;
	if (l == LIB_WEFT)
		return coll == 0 ? weft_allreduce(in, out, cnt, WEFT_FLOAT16, WEFT_SUM, comm, st)
				 : weft_allgather(in, out, cnt, WEFT_FLOAT16, comm, st);
	return coll == 0 ? x->allreduce(in, out, cnt, NCCL_FLOAT16, NCCL_SUM, x->comm, st)
			 : x->allgather(in, out, cnt, NCCL_FLOAT16, x->comm, st);
}

static int cmpf(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

/* Median microseconds per call, or a negative value on failure. */
static int time_one(enum lib l, int coll, struct nccl *x, weft_comm_t *comm, void *in, void *out, size_t bytes, int n,
		    cudaStream_t st, float *us)
{
	cudaGraph_t g;
	cudaGraphExec_t ge;
	CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed));
	int rc = 0;
	for (int k = 0; k < GRAPH_OPS && rc == 0; k++)
		rc = issue(l, coll, x, comm, in, out, bytes, n, st);
	CK(cudaStreamEndCapture(st, &g));
	if (rc)
		FAIL("%s %s of %zu B: %d", l == LIB_WEFT ? "weft" : "nccl", coll ? "allgather" : "allreduce", bytes, rc);
	CK(cudaGraphInstantiate(&ge, g, 0));
	int iters = bytes >= (256u << 20) ? 5 : bytes >= (16u << 20) ? 10 : 30;
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int w = 0; w < 3; w++)
		CK(cudaGraphLaunch(ge, st));
	float t[64];
	for (int i = 0; i < iters; i++) {
		CK(cudaEventRecord(e0, st));
		CK(cudaGraphLaunch(ge, st));
		CK(cudaEventRecord(e1, st));
		CK(cudaEventSynchronize(e1));
		CK(cudaEventElapsedTime(&t[i], e0, e1));
	}
	qsort(t, (size_t)iters, sizeof(float), cmpf);
	*us = t[iters / 2] * 1000.0f / GRAPH_OPS;
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	cudaGraphExecDestroy(ge);
	cudaGraphDestroy(g);
	return 0;
}

static int rank_main(int rank, int n, const struct weft_unique_id *id, int sock, const char *nccl_path,
		     const size_t *sizes, int nsizes)
{
	g_rank = rank;
	CK(cudaSetDevice(rank));
	weft_comm_t *comm;
	int rc = weft_comm_create(id, n, rank, &comm);
	if (rc)
		FAIL("weft_comm_create: %s", weft_strerror(rc));
	struct nccl x;
	int have_nccl = 0;
	if (nccl_path && nccl_load(&x, nccl_path) == 0) {
		nccl_id_t nid;
		if (rank == 0) {
			if (x.get_id(&nid) != 0)
				FAIL("ncclGetUniqueId failed");
			for (int q = 1; q < n; q++)
				if (write(sock, &nid, sizeof(nid)) != (ssize_t)sizeof(nid))
					FAIL("id pipe");
		} else if (read(sock, &nid, sizeof(nid)) != (ssize_t)sizeof(nid)) {
			FAIL("id pipe");
		}
		if (x.init(&x.comm, n, nid, rank) != 0)
			FAIL("ncclCommInitRank failed");
		have_nccl = 1;
		int v = 0;
		if (rank == 0 && x.version && x.version(&v) == 0)
			printf("NCCL %d.%d.%d from %s\n", v / 10000, v / 100 % 100, v % 100, nccl_path);
	}
	cudaStream_t st;
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	void *in, *out;
	CK(cudaMalloc(&in, MAX_BYTES));
	CK(cudaMalloc(&out, MAX_BYTES));
	__half *h;
	CK(cudaMallocHost((void **)&h, MAX_BYTES));
	for (int coll = 0; coll < 2; coll++) {
		if (rank == 0)
			printf("\n%s (float16%s), %d ranks, CUDA graph of %d calls, median of replays\n%12s %10s %10s %10s %10s\n",
			       coll ? "allgather" : "allreduce", coll ? ", size = whole output" : ", sum", n, GRAPH_OPS, "bytes",
			       "weft_us", "weft_bw", have_nccl ? "nccl_us" : "-", have_nccl ? "nccl_bw" : "-");
		for (int s = 0; s < nsizes; s++) {
			size_t bytes = sizes[s];
			size_t cnt = coll == 0 ? bytes / 2 : bytes / 2 / (size_t)n;
			/* Validate weft once at this size (sampled for the large ones). */
			fill<<<256, 256, 0, st>>>((__half *)in, cnt, rank);
			CK(cudaMemsetAsync(out, 0xff, bytes, st));
			rc = issue(LIB_WEFT, coll, &x, comm, in, out, bytes, n, st);
			if (rc)
				FAIL("weft %s of %zu B: %s", coll ? "allgather" : "allreduce", bytes, weft_strerror(rc));
			CK(cudaMemcpyAsync(h, out, bytes, cudaMemcpyDeviceToHost, st));
			CK(cudaStreamSynchronize(st));
			size_t step = bytes / 2 > 1000000 ? 997 : 1;
			for (size_t i = 0; i < bytes / 2; i += step) {
				float want = coll == 0 ? expect_sum(i, n)
						       : (float)((int)(((i % cnt) * 2654435761u + (i / cnt) * 97u) % 9) - 4);
				if (__half2float(h[i]) != want)
					FAIL("%s of %zu B: element %zu is %g, want %g", coll ? "allgather" : "allreduce",
					     bytes, i, __half2float(h[i]), want);
			}
			float wus = 0, nus = 0;
			if (time_one(LIB_WEFT, coll, &x, comm, in, out, bytes, n, st, &wus))
				return 1;
			if (have_nccl && time_one(LIB_NCCL, coll, &x, comm, in, out, bytes, n, st, &nus))
				return 1;
			double f = coll == 0 ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
			if (rank == 0) {
				printf("%12zu %10.2f %10.1f", bytes, wus, bytes / (wus * 1e3) * f);
				if (have_nccl)
					printf(" %10.2f %10.1f", nus, bytes / (nus * 1e3) * f);
				printf("\n");
				fflush(stdout);
			}
		}
	}
	CK(cudaStreamSynchronize(st));
	if (have_nccl)
		x.destroy(x.comm);
	weft_comm_destroy(comm);
	return 0;
}

int main(int argc, char **argv)
{
	size_t sizes[32];
	int nsizes = 0;
	size_t maxb = argc > 1 ? strtoull(argv[1], NULL, 0) : MAX_BYTES;
	if (maxb > MAX_BYTES)
		maxb = MAX_BYTES;
	for (size_t b = 1024; b <= maxb && nsizes < 32; b *= 4)
		sizes[nsizes++] = b;
	const int n = 2;
	struct weft_unique_id id;
	if (weft_get_unique_id(&id) != 0) {
		fprintf(stderr, "weft_get_unique_id failed\n");
		return 1;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return 1;
	const char *nccl_path = getenv("WAG_NCCL_LIB");
	pid_t pids[2];
	for (int r = 0; r < n; r++) {
		pids[r] = fork();
		if (pids[r] == 0)
			_exit(rank_main(r, n, &id, sv[r], nccl_path, sizes, nsizes));
	}
	int bad = 0;
	for (int r = 0; r < n; r++) {
		int st = 0;
		waitpid(pids[r], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "rank %d failed (status %d)\n", r, st);
			bad = 1;
		}
	}
	return bad;
}
