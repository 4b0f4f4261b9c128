/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan's device interpreter as an operator uses it: a config names the
 * plans folder and a `require` rule hands the collective to one plan; forked
 * ranks sharing the GPUs (rank r on GPU r % count, so two or more ranks per
 * GPU on one) call it on cudaMalloc buffers with a stream, four calls of
 * growing and shrinking size on random int32 data, each checked element by
 * element against the collective's definition, the output poisoned first and
 * guarded past its end, and weft_info_last_algorithm naming the plan. Covered:
 * MSCCL++ 0.9's 8 plans without multicast (in place, as they declare), the
 * project's memory-channel plans for 2, 3 and 4 ranks (out of place) and its
 * port-channel plans for 2, prod, min and max, a captured graph replayed 5
 * times with new inputs, a peer that dies while the kernel waits (the
 * stream must still drain), and device calls refused where nvlink is
 * forbidden (host buffers still served). Skips (77) without a GPU unless
 * WEFT_REQUIRE_GPU=1. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <weft/info.h>
#include <weft/weft.h>

extern "C" {
#include "testlib.h"
}

#define PG_TIMEOUT_S 240
#define PG_GUARD 64 /* bytes past the output that must stay poisoned */

static struct weft_unique_id g_id;
static int g_ndev;
static int g_rank = -1;
static char *g_dir;

/* The plan under test. */
static const char *g_plan, *g_coll;
static int g_inplace;
static enum weft_redop g_op;

#define PFAIL(...)                                                                \
	do {                                                                      \
		fprintf(stderr, "[rank %d] %s: %s:%d: ", g_rank, g_plan, __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__);                                     \
		fputc('\n', stderr);                                              \
		return 1;                                                         \
	} while (0)
#define CK(call)                                                                  \
	do {                                                                      \
		cudaError_t e_ = (call);                                          \
		if (e_ != cudaSuccess)                                            \
			PFAIL("%s: %s", #call, cudaGetErrorString(e_));           \
	} while (0)
#define OK(call)                                                                  \
	do {                                                                      \
		int r_ = (call);                                                  \
		if (r_ != 0)                                                      \
			PFAIL("%s: %s", #call, weft_strerror(r_));                \
	} while (0)

/* ------------------------------------------------------------- data */
__host__ __device__ static int32_t pg_val(uint32_t seed, int r, uint64_t i)
{
	uint64_t x = (uint64_t)seed * 0x9e3779b97f4a7c15ull ^ (uint64_t)r << 40 ^ i;
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 29;
	return (int32_t)(x % 41) - 20;
}

/* Element e of rank `rank`'s output after the call. */
static int32_t pg_want(uint32_t seed, int rank, int n, size_t count, size_t e)
{
	if (!strcmp(g_coll, "allgather"))
		return pg_val(seed, (int)(e / count), e % count);
	if (!strcmp(g_coll, "alltoall"))
		return pg_val(seed, (int)(e / count), (size_t)rank * count + e % count);
	size_t at = !strcmp(g_coll, "reducescatter") ? (size_t)rank * count + e : e;
	int32_t acc = pg_val(seed, 0, at);
	for (int r = 1; r < n; r++) {
		int32_t v = pg_val(seed, r, at);
		switch (g_op) {
		case WEFT_PROD: acc = (int32_t)((uint32_t)acc * (uint32_t)v); break;
		case WEFT_MIN: acc = v < acc ? v : acc; break;
		case WEFT_MAX: acc = v > acc ? v : acc; break;
		default: acc = (int32_t)((uint32_t)acc + (uint32_t)v); break;
		}
	}
	return acc;
}

/* Sizes every plan's chunks divide (int32, 16-byte alignment, up to 16
 * chunks, 3 ranks): the areas grow twice, LL calls of different sizes follow
 * each other. */
static const size_t pg_counts[] = {192 * 21, 192, 192 * 343, 192 * 5};
#define PG_CALLS ((int)(sizeof(pg_counts) / sizeof(pg_counts[0])))
#define PG_MAX_COUNT (192 * 343)

struct pg_ctx {
	int rank, n;
	weft_comm_t *comm;
	cudaStream_t st;
	int32_t *din, *dout, *hin, *hout;
	size_t cap; /* bytes of each buffer */
};

struct pg_call {
	int ag, rs, a2a;
	size_t nin, nout; /* elements */
	int32_t *send;    /* device: where the input goes (in place: the rank's view of the output) */
};

static struct pg_call pg_shape(const struct pg_ctx *c, size_t count)
{
	struct pg_call k;
	k.ag = !strcmp(g_coll, "allgather");
	k.rs = !strcmp(g_coll, "reducescatter");
	k.a2a = !strcmp(g_coll, "alltoall");
	k.nin = k.rs || k.a2a ? count * (size_t)c->n : count;
	k.nout = k.ag || k.a2a ? count * (size_t)c->n : count;
	k.send = !g_inplace ? c->din : k.ag ? c->dout + (size_t)c->rank * count : c->dout;
	return k;
}

static int pg_launch(struct pg_ctx *c, const struct pg_call *k, size_t count)
{
	if (k->ag)
		return weft_allgather(k->send, c->dout, count, WEFT_INT32, c->comm, c->st);
	if (k->rs)
		return weft_reduce_scatter(k->send, c->dout, count, WEFT_INT32, g_op, c->comm, c->st);
	if (k->a2a)
		return weft_alltoall(k->send, c->dout, count, WEFT_INT32, c->comm, c->st);
	return weft_allreduce(k->send, c->dout, count, WEFT_INT32, g_op, c->comm, c->st);
}

/* Reads the output back and checks it and the guard past it. */
static int pg_check(struct pg_ctx *c, const struct pg_call *k, size_t count, uint32_t seed, const char *what)
{
	CK(cudaMemcpyAsync(c->hout, c->dout, k->nout * 4 + PG_GUARD, cudaMemcpyDeviceToHost, c->st));
	CK(cudaStreamSynchronize(c->st));
	for (size_t e = 0; e < k->nout; e++) {
		int32_t want = pg_want(seed, c->rank, c->n, count, e);
		if (c->hout[e] != want)
			PFAIL("%s, %zu elements: element %zu of %zu is %d, want %d", what, count, e, k->nout, c->hout[e],
			      want);
	}
	for (size_t b = 0; b < PG_GUARD; b++)
		if (((unsigned char *)(c->hout + k->nout))[b] != 0xa5)
			PFAIL("%s, %zu elements: the call wrote past the output (byte %zu)", what, count, b);
	char want[128];
	snprintf(want, sizeof(want), "algo-plan/%s", g_plan);
	const char *algo = weft_info_last_algorithm(c->comm);
	if (!algo || strcmp(algo, want))
		PFAIL("%s was served by %s, not %s", what, algo ? algo : "(none)", want);
	return 0;
}

/* One call: input from the host, output poisoned, run, checked. */
static int pg_one(struct pg_ctx *c, size_t count, uint32_t seed)
{
	struct pg_call k = pg_shape(c, count);
	CK(cudaMemsetAsync(c->dout, 0xa5, k.nout * 4 + PG_GUARD, c->st));
	for (size_t i = 0; i < k.nin; i++)
		c->hin[i] = pg_val(seed, c->rank, i);
	CK(cudaMemcpyAsync(k.send, c->hin, k.nin * 4, cudaMemcpyHostToDevice, c->st));
	int rc = pg_launch(c, &k, count);
	if (rc)
		PFAIL("%zu elements: %s", count, weft_strerror(rc));
	return pg_check(c, &k, count, seed, "call");
}

static int pg_open(struct pg_ctx *c, int rank, int n)
{
	memset(c, 0, sizeof(*c));
	c->rank = rank;
	c->n = n;
	g_rank = rank;
	c->cap = (size_t)PG_MAX_COUNT * 4 * (size_t)n + 4096;
	CK(cudaSetDevice(rank % g_ndev));
	OK(weft_comm_create(&g_id, n, rank, &c->comm));
	CK(cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking));
	CK(cudaMalloc(&c->din, c->cap));
	CK(cudaMalloc(&c->dout, c->cap));
	CK(cudaMallocHost(&c->hin, c->cap));
	CK(cudaMallocHost(&c->hout, c->cap));
	return 0;
}

static int pg_close(struct pg_ctx *c)
{
	CK(cudaStreamSynchronize(c->st));
	OK(weft_comm_destroy(c->comm));
	cudaFree(c->din);
	cudaFree(c->dout);
	cudaFreeHost(c->hin);
	cudaFreeHost(c->hout);
	cudaStreamDestroy(c->st);
	return 0;
}

static int rank_calls(int rank, int n, void *arg)
{
	(void)arg;
	struct pg_ctx c;
	if (pg_open(&c, rank, n))
		return 1;
	for (int i = 0; i < PG_CALLS; i++)
		if (pg_one(&c, pg_counts[i], 100 + (uint32_t)i))
			return 1;
	return pg_close(&c);
}

/* ------------------------------------------------------------- graphs */
__global__ void k_fill(int32_t *p, size_t n, const uint32_t *seed, int rank)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		p[i] = pg_val(*seed, rank, i);
}

/* A captured graph of a fill kernel (new data from a seed the host changes)
 * and the call, replayed 5 times, each result checked. The first call sizes
 * the plan's areas: nothing is set up while capturing. */
static int rank_graph(int rank, int n, void *arg)
{
	(void)arg;
	struct pg_ctx c;
	const size_t count = 192 * 21;
	if (pg_open(&c, rank, n) || pg_one(&c, count, 1))
		return 1;
	struct pg_call k = pg_shape(&c, count);
	uint32_t *dseed;
	CK(cudaMalloc(&dseed, sizeof(*dseed)));
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	CK(cudaStreamBeginCapture(c.st, cudaStreamCaptureModeRelaxed));
	k_fill<<<32, 256, 0, c.st>>>(k.send, k.nin, dseed, rank);
	int rc = pg_launch(&c, &k, count);
	CK(cudaStreamEndCapture(c.st, &graph));
	OK(rc);
	CK(cudaGraphInstantiate(&exec, graph, 0));
	for (uint32_t it = 0; it < 5; it++) {
		uint32_t seed = 7000 + it;
		CK(cudaMemcpyAsync(dseed, &seed, sizeof(seed), cudaMemcpyHostToDevice, c.st));
		CK(cudaMemsetAsync(c.dout, 0xa5, k.nout * 4 + PG_GUARD, c.st));
		CK(cudaGraphLaunch(exec, c.st));
		char what[64];
		snprintf(what, sizeof(what), "graph replay %u", it);
		if (pg_check(&c, &k, count, seed, what))
			return 1;
	}
	/* A plain call after the replays still finds the ranks in step. */
	if (pg_one(&c, count, 99))
		return 1;
	CK(cudaGraphExecDestroy(exec));
	CK(cudaGraphDestroy(graph));
	cudaFree(dseed);
	return pg_close(&c);
}

/* ------------------------------------------------------ a peer that dies */
/* After one good call, rank 1 is killed while rank 0's kernel waits for its
 * first signal (the one-shot plan signals, then waits, before touching the
 * peer's memory): the kernel must leave its wait (the comm's abort flag),
 * the stream drain within the peer timeout, and the comm report the dead
 * peer. */
static int rank_dies(int rank, int n, void *arg)
{
	(void)arg;
	struct pg_ctx c;
	const size_t count = 192 * 21;
	if (pg_open(&c, rank, n) || pg_one(&c, count, 1))
		return 1;
	OK(weft_comm_barrier(c.comm));
	if (rank == 1) {
		usleep(500000); /* rank 0's kernel is waiting by now */
		raise(SIGKILL);
		return 1;
	}
	struct pg_call k = pg_shape(&c, count);
	time_t t0 = time(NULL);
	int rc = pg_launch(&c, &k, count);
	cudaError_t e = cudaStreamSynchronize(c.st);
	long secs = (long)(time(NULL) - t0);
	if (e != cudaSuccess)
		PFAIL("the stream did not drain cleanly: %s", cudaGetErrorString(e));
	if (secs > 30) /* core.peer_timeout is 5 s in this test's config */
		PFAIL("the kernel took %ld s to notice the dead peer", secs);
	int st = weft_comm_status(c.comm);
	if (st == 0)
		PFAIL("the call returned %d and the comm still reports no error with rank 1 gone", rc);
	fprintf(stderr, "[rank 0] rank 1 gone: the call returned %s, the stream drained after %ld s, the comm "
			"reports %s\n", weft_strerror(rc), secs, weft_strerror(st));
	weft_comm_destroy(c.comm);
	return 0;
}

/* ------------------------------------------------- no nvlink, no device */
/* With nvlink forbidden, the plan's memory channels cannot be built on
 * device buffers: the call the rule gives the plan is refused, -ENOTSUP,
 * and the output stays as it was; host buffers still run over shm. */
static int rank_refused(int rank, int n, void *arg)
{
	(void)arg;
	struct pg_ctx c;
	const size_t count = 192 * 21;
	if (pg_open(&c, rank, n))
		return 1;
	struct pg_call k = pg_shape(&c, count);
	CK(cudaMemsetAsync(c.dout, 0x5a, k.nout * 4, c.st));
	int rc = pg_launch(&c, &k, count);
	CK(cudaStreamSynchronize(c.st));
	if (rc != -ENOTSUP)
		PFAIL("a device call with nvlink forbidden returned %d (%s), want -ENOTSUP", rc, weft_strerror(rc));
	CK(cudaMemcpy(c.hout, c.dout, k.nout * 4, cudaMemcpyDeviceToHost));
	for (size_t e = 0; e < k.nout; e++)
		if (((uint32_t *)c.hout)[e] != 0x5a5a5a5au)
			PFAIL("the refused call wrote element %zu", e);
	int32_t hin[192], hout[192];
	for (int i = 0; i < 192; i++)
		hin[i] = rank + 1;
	OK(weft_allreduce(hin, hout, 192, WEFT_INT32, WEFT_SUM, c.comm, NULL));
	for (int i = 0; i < 192; i++)
		if (hout[i] != n * (n + 1) / 2)
			PFAIL("host buffers: element %d is %d, want %d", i, hout[i], n * (n + 1) / 2);
	return pg_close(&c);
}

/* ------------------------------------------------------------- cases */
static void use_plan(const char *dir, const char *plan, const char *coll, int inplace, const char *extra)
{
	static const struct {
		const char *plan, *weft;
	} names[] = {{"reducescatter", "reduce_scatter"}};
	const char *wc = coll;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(coll, names[i].plan))
			wc = names[i].weft;
	char text[1024];
	snprintf(text, sizeof(text), "[algo-plan]\nplans = %s\n[algorithm]\nrequire algo-plan/%s when coll=%s\n%s", dir,
		 plan, wc, extra ? extra : "");
	char *conf = wt_write_file(g_dir, "plan.conf", text);
	ck_assert_int_eq(setenv("WEFT_CONFIG", conf, 1), 0);
	free(conf);
	g_plan = plan;
	g_coll = coll;
	g_inplace = inplace;
}

static void fork_n(int n, wt_rank_fn fn)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_msg(wt_fork_ranks(n, fn, NULL, PG_TIMEOUT_S) == 0, "%s on %d ranks: a rank failed (see above)",
		      g_plan, n);
}

static const char *const mscclpp_plans[] = {
	"allreduce", "allreduce_packet", "reduce", "reduce_pack", "reduce_pack_tbg", "reduce_tbg",
	"transfer_pack", "transfer_pack_tbg",
};

static void use_mscclpp(const char *plan)
{
	use_plan(PLAN_DATA_DIR, plan, strncmp(plan, "transfer", 8) ? "allreduce" : "allgather", 1, NULL);
}

START_TEST(mscclpp_plan_on_device)
{
	use_mscclpp(mscclpp_plans[_i]);
	g_op = WEFT_SUM;
	fork_n(2, rank_calls);
}
END_TEST

/* The project's own plans on device buffers: memory channels (nvlink) for
 * 2, 3 and 4 ranks, port channels (the core's proxy) for 2. */
static const char *const own_plans[] = {
	"allreduce_ring_2r_simple_mem", "allreduce_ring_2r_ll_mem", "allreduce_oneshot_2r_simple_mem",
	"allreduce_oneshot_2r_ll_mem", "allgather_ring_2r_simple_mem", "allgather_ring_2r_ll_mem",
	"reducescatter_ring_2r_simple_mem", "reducescatter_ring_2r_ll_mem", "alltoall_ring_2r_simple_mem",
	"alltoall_ring_2r_ll_mem", "allreduce_ring_3r_simple_mem", "allreduce_ring_3r_ll_mem",
	"allreduce_oneshot_3r_simple_mem", "allreduce_oneshot_3r_ll_mem", "allreduce_ring_4r_simple_mem",
	"allreduce_ring_4r_ll_mem", "allreduce_oneshot_4r_simple_mem", "allreduce_oneshot_4r_ll_mem",
	"allgather_ring_4r_simple_mem", "allgather_ring_4r_ll_mem", "reducescatter_ring_4r_simple_mem",
	"reducescatter_ring_4r_ll_mem", "alltoall_ring_4r_simple_mem", "alltoall_ring_4r_ll_mem",
};
static const char *const port_plans[] = {
	"allreduce_ring_2r_simple_port", "allreduce_ring_2r_ll_port", "allreduce_oneshot_2r_simple_port",
	"allreduce_oneshot_2r_ll_port",
};

static void run_own(const char *plan, wt_rank_fn fn)
{
	char coll[32];
	snprintf(coll, sizeof(coll), "%.*s", (int)strcspn(plan, "_"), plan);
	use_plan(PLAN_OWN_DIR, plan, coll, 0, NULL);
	g_op = WEFT_SUM;
	fork_n(atoi(strstr(plan, "r_") - 1), fn);
}

START_TEST(own_plan_on_device)
{
	run_own(own_plans[_i], rank_calls);
}
END_TEST

START_TEST(own_port_plan_on_device)
{
	run_own(port_plans[_i], rank_calls);
}
END_TEST

START_TEST(plan_applies_the_calls_reduction)
{
	static const enum weft_redop ops[] = {WEFT_PROD, WEFT_MIN, WEFT_MAX};
	if (_i < 3)
		use_mscclpp(_i % 2 ? "reduce_pack" : "allreduce");
	else
		use_plan(PLAN_OWN_DIR, "allreduce_ring_3r_ll_mem", "allreduce", 0, NULL);
	g_op = ops[_i % 3];
	fork_n(_i < 3 ? 2 : 3, rank_calls);
}
END_TEST

/* Graphs: an in-place Simple plan, an LL plan with a double scratch buffer,
 * an own ring on 3 ranks, a port plan. */
static const char *const graph_plans[] = {"allreduce", "allreduce_packet", "allreduce_ring_3r_ll_mem",
					  "allreduce_ring_2r_simple_port"};

START_TEST(graph_replays)
{
	g_op = WEFT_SUM;
	if (_i < 2) {
		use_mscclpp(graph_plans[_i]);
		fork_n(2, rank_graph);
	} else {
		run_own(graph_plans[_i], rank_graph);
	}
}
END_TEST

START_TEST(no_nvlink_refuses_device_calls)
{
	use_plan(PLAN_OWN_DIR, "allreduce_ring_2r_simple_mem", "allreduce", 0, "[transport]\nforbid nvlink\n");
	g_op = WEFT_SUM;
	fork_n(2, rank_refused);
}
END_TEST

START_TEST(dead_peer_ends_the_kernel)
{
	use_plan(PLAN_OWN_DIR, "allreduce_oneshot_2r_simple_mem", "allreduce", 0, "[core]\npeer_timeout = 5\n");
	g_op = WEFT_SUM;
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	int st[2] = {0, 0};
	wt_fork_ranks_status(2, rank_dies, NULL, PG_TIMEOUT_S, st);
	ck_assert_msg(st[0] != -1 && WIFEXITED(st[0]) && WEXITSTATUS(st[0]) == 0,
		      "rank 0 did not come through its peer's death (status %d, see above)", st[0]);
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
	if (req && !strcmp(req, "1")) {
		fprintf(stderr, "FAIL: WEFT_REQUIRE_GPU=1 but no CUDA device\n");
		return 1;
	}
	printf("SKIP: no CUDA device\n");
	return WT_SKIP;
}

int main(void)
{
	int rc = probe_gpu();
	if (rc)
		return rc;
	printf("%d CUDA device(s)\n", g_ndev);
	g_dir = wt_mkdtemp("plan-gpu");
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	/* One case per ctest entry (CK_RUN_CASE), so each has its own verdict. */
	Suite *s = suite_create("plan_gpu");
	TCase *tc = tcase_create("mscclpp");
	tcase_set_timeout(tc, PG_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, mscclpp_plan_on_device, 0, (int)(sizeof(mscclpp_plans) / sizeof(mscclpp_plans[0])));
	tcase_add_loop_test(tc, plan_applies_the_calls_reduction, 0, 4);
	tcase_add_test(tc, no_nvlink_refuses_device_calls);
	suite_add_tcase(s, tc);
	tc = tcase_create("own");
	tcase_set_timeout(tc, PG_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, own_plan_on_device, 0, (int)(sizeof(own_plans) / sizeof(own_plans[0])));
	suite_add_tcase(s, tc);
	tc = tcase_create("port");
	tcase_set_timeout(tc, PG_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, own_port_plan_on_device, 0, (int)(sizeof(port_plans) / sizeof(port_plans[0])));
	suite_add_tcase(s, tc);
	tc = tcase_create("graph");
	tcase_set_timeout(tc, PG_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, graph_replays, 0, (int)(sizeof(graph_plans) / sizeof(graph_plans[0])));
	tcase_add_test(tc, dead_peer_ends_the_kernel);
	suite_add_tcase(s, tc);
	rc = wt_run_suite(s);
	wt_rmdir(g_dir);
	return rc;
}
