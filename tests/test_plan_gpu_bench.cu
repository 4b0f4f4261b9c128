/* SPDX-License-Identifier: Apache-2.0 */
/* weft-plan-gpu-bench: what algo-plan's device interpreter costs over a
 * native kernel doing the same work (issue 31's one-GPU benchmark). A
 * one-rank allreduce plan of local operations, written here: each of its
 * threadblocks copies its slice of the input's first half to the output,
 * copies its slice of the second half to scratch, then reduces that scratch
 * slice (one source) into the output's second half. The native kernel does
 * the same with the same blocks, threads and slices (geom.h). Both run on
 * float buffers from 1 KiB to the largest size given (default 1 GiB),
 * checked once each, timed plain (host calls back to back) and in a
 * captured graph of 20 calls; each row says whether the interpreter stays
 * within the issue's target (at most 10% slower from 1 MiB up, at most
 * 1.5 us below). Then a breakdown of the plan's call at a few sizes, to
 * tell where its time goes: the nodes one call adds to a graph, each node
 * timed alone, the interpreter kernel as launched and in variants (the
 * plan's own thread count, references resolved op by op as before, no
 * operations at all), and the clock64() stamps the kernel writes per phase.
 * Usage: weft-plan-gpu-bench [max_bytes [threadblocks]]. Exits 77 without a
 * GPU (1 with WEFT_REQUIRE_GPU=1), 1 on a wrong result. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include <weft/weft.h>

#include "dev.h"
#include "geom.h"

#define CK(call)                                                                               \
	do {                                                                                   \
		cudaError_t e_ = (call);                                                       \
		if (e_ != cudaSuccess) {                                                       \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,          \
				cudaGetErrorString(e_));                                       \
			exit(1);                                                               \
		}                                                                              \
	} while (0)
#define OK(call)                                                                               \
	do {                                                                                   \
		int r_ = (call);                                                               \
		if (r_ != 0) {                                                                 \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,          \
				weft_strerror(r_));                                            \
			exit(1);                                                               \
		}                                                                              \
	} while (0)

#define GRAPH_CALLS 20
#define REPS 21 /* timings are the median of REPS runs */

/* The plan's work with the plan's slices: chunk 0 of 2 of the input to the
 * output, chunk 1 to scratch, then scratch to the output's chunk 1. */
static __device__ void slice_copy(char *dst, const char *src, uint64_t bytes)
{
	uint64_t nv = bytes / 16;
	for (uint64_t i = threadIdx.x; i < nv; i += blockDim.x)
		((uint4 *)dst)[i] = __ldcg((const uint4 *)src + i);
}

__global__ void __launch_bounds__(1024, 1) k_native(const char *in, char *out, char *scr, uint64_t bytes)
{
	/* Every buffer of the plan is cut as its input: scratch chunk 0 as input chunk 0. */
	uint64_t o0, l0, o1, l1;
	wp_ref_range(16, bytes, 2, 0, 1, blockIdx.x, gridDim.x, &o0, &l0);
	wp_ref_range(16, bytes, 2, 1, 1, blockIdx.x, gridDim.x, &o1, &l1);
	uint64_t l = l0 < l1 ? l0 : l1;
	slice_copy(out + o0, in + o0, l0);
	__syncthreads();
	slice_copy(scr + o0, in + o1, l);
	__syncthreads();
	slice_copy(out + o1, scr + o0, l);
}

static char *write_plan(const char *dir, int ntb)
{
	size_t cap = 4096 + (size_t)ntb * 1024, n = 0;
	char *s = (char *)malloc(cap);
	n += snprintf(s + n, cap - n,
		      "{\"name\":\"local_1r\",\"collective\":\"allreduce\",\"protocol\":\"Simple\",\"inplace\":false,"
		      "\"num_threads_per_block\":1024,\"buffer_alignment\":16,\"gpus\":[{\"id\":0,\"input_chunks\":2,"
		      "\"output_chunks\":2,\"scratch_chunks\":1,\"channels\":[],\"remote_buffers\":[],\"threadblocks\":[");
	for (int t = 0; t < ntb; t++)
		n += snprintf(s + n, cap - n,
			      "%s{\"id\":%d,\"channels\":[],\"ops\":["
			      "{\"name\":\"copy\",\"src_buff\":[{\"type\":\"i\",\"index\":0,\"size\":1}],"
			      "\"dst_buff\":[{\"type\":\"o\",\"index\":0,\"size\":1}],\"tbg_info\":{\"tb_id\":%d,\"tbg_size\":%d}},"
			      "{\"name\":\"copy\",\"src_buff\":[{\"type\":\"i\",\"index\":1,\"size\":1}],"
			      "\"dst_buff\":[{\"type\":\"s\",\"index\":0,\"size\":1}],\"tbg_info\":{\"tb_id\":%d,\"tbg_size\":%d}},"
			      "{\"name\":\"re\",\"src_buff\":[{\"type\":\"s\",\"index\":0,\"size\":1}],"
			      "\"dst_buff\":[{\"type\":\"o\",\"index\":1,\"size\":1}],\"tbg_info\":{\"tb_id\":%d,\"tbg_size\":%d}}"
			      "]}",
			      t ? "," : "", t, t, ntb, t, ntb, t, ntb);
	n += snprintf(s + n, cap - n, "]}]}\n");
	char path[512];
	snprintf(path, sizeof(path), "%s/local_1r.json", dir);
	FILE *f = fopen(path, "w");
	if (!f || fputs(s, f) < 0 || fclose(f)) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
	free(s);
	snprintf(path, sizeof(path), "%s/bench.conf", dir);
	f = fopen(path, "w");
	if (!f || fprintf(f, "[algo-plan]\nplans = %s\n[algorithm]\nrequire algo-plan/local_1r when coll=allreduce and size=1K..\n",
			  dir) < 0 ||
	    fclose(f)) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
	return strdup(path);
}

struct bench {
	weft_comm_t *comm;
	cudaStream_t st;
	char *in, *out, *scr;
	int ntb;
};

static void run_plan(struct bench *b, uint64_t bytes)
{
	OK(weft_allreduce(b->in, b->out, bytes / 4, WEFT_FLOAT32, WEFT_SUM, b->comm, b->st));
}

static void run_native(struct bench *b, uint64_t bytes)
{
	k_native<<<b->ntb, 1024, 0, b->st>>>(b->in, b->out, b->scr, bytes);
	CK(cudaGetLastError());
}

/* Microseconds a call: iters calls back to back, or, with graph, replays of
 * a graph of GRAPH_CALLS calls. */
static double time_us(struct bench *b, uint64_t bytes, void (*fn)(struct bench *, uint64_t), int iters, int graph)
{
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	cudaGraphExec_t exec = NULL;
	if (graph) {
		cudaGraph_t g;
		CK(cudaStreamBeginCapture(b->st, cudaStreamCaptureModeRelaxed));
		for (int i = 0; i < GRAPH_CALLS; i++)
			fn(b, bytes);
		CK(cudaStreamEndCapture(b->st, &g));
		CK(cudaGraphInstantiate(&exec, g, 0));
		CK(cudaGraphDestroy(g));
		iters = (iters + GRAPH_CALLS - 1) / GRAPH_CALLS;
		CK(cudaGraphLaunch(exec, b->st)); /* warm */
	} else {
		for (int i = 0; i < 3; i++)
			fn(b, bytes);
	}
	CK(cudaEventRecord(e0, b->st));
	for (int i = 0; i < iters; i++) {
		if (graph)
			CK(cudaGraphLaunch(exec, b->st));
		else
			fn(b, bytes);
	}
	CK(cudaEventRecord(e1, b->st));
	CK(cudaEventSynchronize(e1));
	float ms = 0;
	CK(cudaEventElapsedTime(&ms, e0, e1));
	if (exec)
		CK(cudaGraphExecDestroy(exec));
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	return 1000.0 * ms / ((double)iters * (graph ? GRAPH_CALLS : 1));
}

static int check(struct bench *b, uint64_t bytes, char *h_in, char *h_out, const char *who)
{
	CK(cudaMemsetAsync(b->out, 0xa5, bytes, b->st));
	if (!strcmp(who, "plan"))
		run_plan(b, bytes);
	else
		run_native(b, bytes);
	CK(cudaMemcpyAsync(h_out, b->out, bytes, cudaMemcpyDeviceToHost, b->st));
	CK(cudaStreamSynchronize(b->st));
	if (memcmp(h_in, h_out, bytes)) {
		fprintf(stderr, "%s: %llu bytes: the output differs from the input\n", who, (unsigned long long)bytes);
		return 1;
	}
	return 0;
}

/* ------------------------------------------------------------ breakdown */
/* The driver's calls for kernel nodes: the interpreter lives in the pack's
 * own copy of the CUDA runtime, so its function is known here only as the
 * driver's handle. */
typedef CUresult (*kget_t)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *);
typedef CUresult (*kadd_t)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_KERNEL_NODE_PARAMS *);
typedef CUresult (*fname_t)(const char **, CUfunction);
static kget_t k_get;
static kadd_t k_add;
static fname_t f_name;

static void *driver_fn(const char *sym)
{
	void *f = NULL;
	cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	if (cudaGetDriverEntryPointByVersion(sym, &f, 12030, cudaEnableDefault, &q) != cudaSuccess ||
	    q != cudaDriverEntryPointSuccess || !f) {
		(void)cudaGetLastError();
		printf("# no breakdown: the driver has no %s\n", sym);
		return NULL;
	}
	return f;
}

/* One node of a captured call, replayed alone: a kernel with its
 * arguments (the interpreter's: a copy of its wpd_args), a copy or a set. */
struct node {
	cudaGraphNodeType type;
	CUDA_KERNEL_NODE_PARAMS kp;
	const char *name;
	struct wpd_args args; /* the interpreter's, where name says k_plan */
	int interp;
	cudaMemcpy3DParms mp;
	cudaMemsetParams sp;
};

static const char *node_type(cudaGraphNodeType t)
{
	switch (t) {
	case cudaGraphNodeTypeKernel: return "kernel";
	case cudaGraphNodeTypeMemcpy: return "memcpy";
	case cudaGraphNodeTypeMemset: return "memset";
	case cudaGraphNodeTypeEventRecord: return "event record";
	case cudaGraphNodeTypeWaitEvent: return "event wait";
	case cudaGraphNodeTypeHost: return "host function";
	default: return "other";
	}
}

/* The nodes one plan call adds to a graph (malloc'd; *n of them), and the
 * graph, which holds the arguments of kernels other than the interpreter. */
static struct node *capture_call(struct bench *b, uint64_t bytes, size_t *n, cudaGraph_t *gp)
{
	cudaGraph_t g;
	CK(cudaStreamBeginCapture(b->st, cudaStreamCaptureModeRelaxed));
	run_plan(b, bytes);
	CK(cudaStreamEndCapture(b->st, &g));
	CK(cudaGraphGetNodes(g, NULL, n));
	cudaGraphNode_t *gn = (cudaGraphNode_t *)calloc(*n + 1, sizeof(*gn));
	struct node *out = (struct node *)calloc(*n + 1, sizeof(*out));
	CK(cudaGraphGetNodes(g, gn, n));
	for (size_t i = 0; i < *n; i++) {
		struct node *x = &out[i];
		CK(cudaGraphNodeGetType(gn[i], &x->type));
		if (x->type == cudaGraphNodeTypeKernel) {
			if (k_get((CUgraphNode)gn[i], &x->kp) != CUDA_SUCCESS || f_name(&x->name, x->kp.func) != CUDA_SUCCESS)
				x->name = "?";
			x->interp = strstr(x->name, "k_plan") != NULL;
			if (x->interp)
				memcpy(&x->args, x->kp.kernelParams[0], sizeof(x->args));
		} else if (x->type == cudaGraphNodeTypeMemcpy) {
			CK(cudaGraphMemcpyNodeGetParams(gn[i], &x->mp));
		} else if (x->type == cudaGraphNodeTypeMemset) {
			CK(cudaGraphMemsetNodeGetParams(gn[i], &x->sp));
		}
	}
	free(gn);
	*gp = g;
	return out;
}

/* A graph of GRAPH_CALLS copies of node x, one after the other; NULL for a
 * kind this cannot replay. */
static cudaGraphExec_t graph_of(struct node *x)
{
	cudaGraph_t g;
	cudaGraphNode_t prev = NULL, cur = NULL;
	void *params[1] = {&x->args};
	CUDA_KERNEL_NODE_PARAMS kp = x->kp;
	if (x->interp)
		kp.kernelParams = params;
	CK(cudaGraphCreate(&g, 0));
	for (int i = 0; i < GRAPH_CALLS; i++) {
		size_t nd = prev ? 1 : 0;
		if (x->type == cudaGraphNodeTypeKernel) {
			if (k_add((CUgraphNode *)&cur, (CUgraph)g, (const CUgraphNode *)&prev, nd, &kp) != CUDA_SUCCESS)
				break;
		} else if (x->type == cudaGraphNodeTypeMemcpy) {
			CK(cudaGraphAddMemcpyNode(&cur, g, &prev, nd, &x->mp));
		} else if (x->type == cudaGraphNodeTypeMemset) {
			CK(cudaGraphAddMemsetNode(&cur, g, &prev, nd, &x->sp));
		} else {
			break;
		}
		prev = cur;
	}
	cudaGraphExec_t e = NULL;
	if (prev)
		CK(cudaGraphInstantiate(&e, g, 0));
	CK(cudaGraphDestroy(g));
	return e;
}

static int cmp_dbl(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

/* Microseconds a node: the median of REPS runs of iters graph launches. */
static double time_node(struct bench *b, struct node *x, int iters)
{
	cudaGraphExec_t e = graph_of(x);
	if (!e)
		return -1;
	cudaEvent_t e0, e1;
	double t[REPS];
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaGraphLaunch(e, b->st)); /* warm */
	for (int r = 0; r < REPS; r++) {
		CK(cudaEventRecord(e0, b->st));
		for (int i = 0; i < iters; i++)
			CK(cudaGraphLaunch(e, b->st));
		CK(cudaEventRecord(e1, b->st));
		CK(cudaEventSynchronize(e1));
		float ms = 0;
		CK(cudaEventElapsedTime(&ms, e0, e1));
		t[r] = 1000.0 * ms / ((double)iters * GRAPH_CALLS);
	}
	qsort(t, REPS, sizeof(t[0]), cmp_dbl);
	CK(cudaGraphExecDestroy(e));
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	return t[REPS / 2];
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

/* One call of the interpreter with its stamps: per phase, the median and
 * the largest of the blocks' cycles. */
static void print_stamps(struct bench *b, struct node *x)
{
	size_t n = (size_t)x->kp.gridDimX * WPD_STAMPS;
	uint64_t *d, *h = (uint64_t *)calloc(n, sizeof(*h)), *col = (uint64_t *)calloc(x->kp.gridDimX, sizeof(*col));
	int khz = 0;
	CK(cudaMalloc(&d, n * sizeof(*d)));
	CK(cudaMemset(d, 0, n * sizeof(*d)));
	cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
	struct node y = *x;
	y.args.stamps = d;
	cudaGraphExec_t e = graph_of(&y);
	CK(cudaGraphLaunch(e, b->st));
	CK(cudaStreamSynchronize(b->st));
	CK(cudaGraphExecDestroy(e));
	CK(cudaMemcpy(h, d, n * sizeof(*h), cudaMemcpyDeviceToHost));
	static const char *names[WPD_STAMPS] = {"entry", "args, image staged", "references resolved"};
	printf("#   stamps (cycles a block, median / max of %u blocks; us at %.2f GHz):\n", x->kp.gridDimX, khz / 1e6);
	for (int k = 1; k < WPD_STAMPS; k++) {
		unsigned used = 0;
		for (unsigned blk = 0; blk < x->kp.gridDimX; blk++) {
			const uint64_t *s = h + (size_t)blk * WPD_STAMPS;
			uint64_t prev = 0;
			for (int j = k - 1; j >= 0 && !prev; j--)
				prev = s[j];
			if (s[k] && prev)
				col[used++] = s[k] - prev;
		}
		if (!used)
			continue;
		qsort(col, used, sizeof(*col), cmp_u64);
		char label[48];
		if (k >= WPD_ST_OP0 && k < WPD_ST_END)
			snprintf(label, sizeof(label), "operation %d done", k - WPD_ST_OP0 + 1);
		printf("#     %-22s %9llu %9llu  %7.2f us\n", k == WPD_ST_END ? "end" : names[k] ? names[k] : label,
		       (unsigned long long)col[used / 2], (unsigned long long)col[used - 1],
		       khz ? col[used / 2] / (khz / 1e3) : 0.0);
	}
	free(h);
	free(col);
	cudaFree(d);
}

/* Where a plan call's time goes at one size: its nodes alone, the kernel's
 * variants, its stamps, against the native kernel. */
static void breakdown(struct bench *b, uint64_t bytes, int iters)
{
	size_t n = 0;
	cudaGraph_t g;
	struct node *nodes = capture_call(b, bytes, &n, &g), *k = NULL;
	printf("# breakdown at %llu bytes: one call is %zu graph node(s)\n", (unsigned long long)bytes, n);
	for (size_t i = 0; i < n; i++) {
		struct node *x = &nodes[i];
		double t = time_node(b, x, iters);
		printf("#   node %zu: %s", i, node_type(x->type));
		if (x->type == cudaGraphNodeTypeKernel)
			printf(" %s, %u x %u threads, %u bytes of dynamic shared memory", x->name, x->kp.gridDimX,
			       x->kp.blockDimX, x->kp.sharedMemBytes);
		if (t < 0)
			printf(": not replayed\n");
		else
			printf(": %.2f us alone\n", t);
		if (x->interp && !k)
			k = x;
	}
	printf("#   native kernel alone: %.2f us\n", time_us(b, bytes, run_native, iters * GRAPH_CALLS, 1));
	if (!k) {
		printf("#   no interpreter kernel among the nodes\n");
		free(nodes);
		CK(cudaGraphDestroy(g));
		return;
	}
	struct node v = *k;
	v.kp.blockDimX = 1024; /* the plan's num_threads_per_block */
	printf("#   interpreter with the plan's 1024 threads: %.2f us\n", time_node(b, &v, iters));
	v = *k;
	v.args.img = NULL;
	v.kp.sharedMemBytes = WPD_IMG_REFS + v.args.rng_cap * (unsigned)sizeof(struct wpd_refloc);
	printf("#   interpreter without the threadblocks' images (ops from global memory): %.2f us\n",
	       time_node(b, &v, iters));
	v.args.rng_cap = 0;
	v.kp.sharedMemBytes = 0;
	printf("#   interpreter without images, resolving references op by op: %.2f us\n", time_node(b, &v, iters));
	v.kp.blockDimX = 1024;
	printf("#   that with 1024 threads (the interpreter before these changes, bar staging): %.2f us\n",
	       time_node(b, &v, iters));
	/* No operations: images (or threadblocks) of zeros. */
	size_t zbytes = (size_t)k->kp.gridDimX * (k->args.img ? k->args.img_stride : sizeof(struct wpd_tb));
	void *empty;
	CK(cudaMalloc(&empty, zbytes));
	CK(cudaMemset(empty, 0, zbytes));
	v = *k;
	if (v.args.img)
		v.args.img = (const char *)empty;
	else
		v.args.tbs = (const struct wpd_tb *)empty;
	printf("#   interpreter with no operations (launch, prologue, end): %.2f us\n", time_node(b, &v, iters));
	CK(cudaFree(empty));
	printf("#   threadblock images: %s, %u bytes a block\n", k->args.img ? "yes" : "no", k->args.img_stride);
	print_stamps(b, k);
	free(nodes);
	CK(cudaGraphDestroy(g));
}

int main(int argc, char **argv)
{
	uint64_t max = argc > 1 ? strtoull(argv[1], NULL, 0) : (1ull << 30);
	int ntb = argc > 2 ? atoi(argv[2]) : 64;
	int ndev = 0;
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		const char *req = getenv("WEFT_REQUIRE_GPU");
		fprintf(stderr, "%s: no CUDA device\n", req && !strcmp(req, "1") ? "FAIL" : "SKIP");
		return req && !strcmp(req, "1") ? 1 : 77;
	}
	if (max < 1024 || ntb < 1 || ntb > 1024) {
		fprintf(stderr, "usage: weft-plan-gpu-bench [max_bytes (>= 1024) [threadblocks (1..1024)]]\n");
		return 2;
	}
	char tmpl[] = "/tmp/weft-plan-bench-XXXXXX";
	if (!mkdtemp(tmpl)) {
		perror("mkdtemp");
		return 1;
	}
	char *conf = write_plan(tmpl, ntb);
	setenv("WEFT_CONFIG", conf, 1);
	struct bench b;
	memset(&b, 0, sizeof(b));
	b.ntb = ntb;
	struct weft_unique_id id;
	CK(cudaSetDevice(0));
	OK(weft_get_unique_id(&id));
	OK(weft_comm_create(&id, 1, 0, &b.comm));
	CK(cudaStreamCreateWithFlags(&b.st, cudaStreamNonBlocking));
	CK(cudaMalloc(&b.in, max));
	CK(cudaMalloc(&b.out, max));
	CK(cudaMalloc(&b.scr, max / 2 + 16));
	char *h_in, *h_out;
	CK(cudaMallocHost(&h_in, max));
	CK(cudaMallocHost(&h_out, max));
	uint64_t x = 88172645463325252ull;
	for (uint64_t i = 0; i < max / 4; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		((float *)h_in)[i] = (float)(int)(x % 2001) - 1000.0f;
	}
	CK(cudaMemcpy(b.in, h_in, max, cudaMemcpyHostToDevice));
	printf("# one rank, %d threadblocks of 1024 threads; float; us a call (plain: host calls back to back; "
	       "graph: %d calls a graph)\n",
	       ntb, GRAPH_CALLS);
	printf("# target: the plan at most 10%% slower from 1 MiB up, at most 1.5 us slower below\n");
	printf("%12s %10s %10s %8s %10s %10s %8s  %s\n", "bytes", "native", "plan", "plain", "native-g", "plan-g",
	       "graph", "verdict (graph)");
	int bad = 0;
	for (uint64_t bytes = 1024; bytes <= max; bytes *= 4) {
		if (check(&b, bytes, h_in, h_out, "native") || check(&b, bytes, h_in, h_out, "plan")) {
			bad = 1;
			break;
		}
		int iters = bytes <= (1u << 20) ? 2000 : bytes <= (64u << 20) ? 200 : 20;
		double n = time_us(&b, bytes, run_native, iters, 0), p = time_us(&b, bytes, run_plan, iters, 0);
		double ng = time_us(&b, bytes, run_native, iters, 1), pg = time_us(&b, bytes, run_plan, iters, 1);
		int ok = bytes >= (1u << 20) ? pg <= 1.1 * ng : pg - ng <= 1.5;
		printf("%12llu %10.2f %10.2f %+7.1f%% %10.2f %10.2f %+7.1f%%  %s\n", (unsigned long long)bytes, n, p,
		       100.0 * (p - n) / n, ng, pg, 100.0 * (pg - ng) / ng, ok ? "within" : "OVER");
		fflush(stdout);
	}
	k_get = (kget_t)driver_fn("cuGraphKernelNodeGetParams");
	k_add = (kadd_t)driver_fn("cuGraphAddKernelNode");
	f_name = (fname_t)driver_fn("cuFuncGetName");
	int drv = k_get && k_add && f_name;
	for (uint64_t bytes = 1024; drv && !bad && bytes <= max && bytes <= (16u << 20); bytes *= 32)
		breakdown(&b, bytes, bytes <= (1u << 20) ? 50 : 5);
	OK(weft_comm_destroy(b.comm));
	cudaFree(b.in);
	cudaFree(b.out);
	cudaFree(b.scr);
	unlink(conf);
	char path[600];
	snprintf(path, sizeof(path), "%s/local_1r.json", tmpl);
	unlink(path);
	rmdir(tmpl);
	free(conf);
	return bad;
}
