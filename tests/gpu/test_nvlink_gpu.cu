/* SPDX-License-Identifier: Apache-2.0 */
/* GPU tests of the nvlink transport and device.h, one process per rank (rank r
 * on device r % count; 3 and 4 ranks share GPUs): copy-engine put of 1 B to
 * 1 GiB at odd offsets (cudaMalloc and two-chunk VMM buffers), stream-ordered
 * signals, kernel-driven put/get with release/acquire signals, LL packets in a
 * graph replayed 1000 times, and a kernel that a dead peer must not strand. */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include <weft/device.h>

extern "C" {
#include "testlib.h"
}
#include "gpu_common.h"

static int g_ndev;

struct targ {
	struct gmesh mesh;
	int vmm;
	pid_t pid0;
};

/* A device buffer of either kind. */
struct gbuf {
	void *p;
	size_t len, total;
	int vmm;
};

static int gbuf_alloc(struct gbuf *b, size_t len, int vmm, int dev)
{
	b->len = len;
	b->vmm = vmm;
	if (vmm)
		return grt_vmm_alloc(len, 2, dev, &b->p, &b->total);
	b->total = len;
	return cudaMalloc(&b->p, len) == cudaSuccess ? 0 : -ENOMEM;
}

static void gbuf_free(struct gbuf *b)
{
	if (b->vmm)
		grt_vmm_free(b->p, b->total, 2);
	else
		cudaFree(b->p);
}

static int rank_setup(struct targ *a, int rank, int nranks, int *dev)
{
	g_rank = rank;
	gmesh_keep(&a->mesh, rank);
	OK(g_load_plugin(WEFT_NVLINK_PLUGIN));
	int n = 0;
	CK(cudaGetDeviceCount(&n));
	*dev = rank % n;
	CK(cudaSetDevice(*dev));
	return 0;
}

/* -------------------------------------------------- copy-engine put sizes */
static uint64_t token_read(const void *dptr)
{
	uint64_t v = 0;
	cudaMemcpy(&v, dptr, 8, cudaMemcpyDeviceToHost);
	return v;
}

#define BIG ((size_t)1 << 30)
static const struct {
	size_t len, doff, soff;
} g_cases[] = {
	{1, 0, 0}, {1, 7, 3}, {3, 1, 5}, {4096, 0, 0}, {4096 + 3, 13, 1}, {65537, 64, 3},
	{(1u << 20) + 7, 5, 11}, {(64u << 20) + 3, 1, 2}, {BIG, 0, 0}, {BIG - 64, 33, 17},
};

static int put_rank(int rank, int nranks, void *arg)
{
	struct targ *a = (struct targ *)arg;
	int dev;
	OK(rank_setup(a, rank, nranks, &dev));
	void *tc, *ep, *mh, *tmh, *rmh, *rtmh;
	OK(g_open(rank, nranks, 0x1000 + (uint64_t)a->vmm, &tc));
	struct gbuf buf;
	OK(gbuf_alloc(&buf, BIG + 64, a->vmm, dev));
	if (a->vmm && rank == 0) {
		uintptr_t b0 = 0, b1 = 0;
		size_t s0 = 0, s1 = 0;
		OK(grt_vmm_range(buf.p, &b0, &s0));
		OK(grt_vmm_range((char *)buf.p + buf.total - 1, &b1, &s1));
		printf("VMM buffer %p+%zu: chunks %#lx+%zu and %#lx+%zu\n", buf.p, buf.total, (unsigned long)b0, s0,
		       (unsigned long)b1, s1);
		if (b0 == b1)
			GFAIL("the driver reports one range for a two-chunk buffer");
	}
	void *tok;
	CK(cudaMalloc(&tok, 4096));
	CK(cudaMemset(tok, 0, 4096));
	OK(g_ops->mem_register(tc, buf.p, buf.len, WEFT_MEM_CUDA, &mh));
	OK(g_ops->mem_register(tc, tok, 4096, WEFT_MEM_CUDA, &tmh));
	int peer = 1 - rank;
	OK(g_exchange(&a->mesh, tc, rank, peer, mh, &rmh));
	OK(g_exchange(&a->mesh, tc, rank, peer, tmh, &rtmh));
	/* The registration cache: a second registration inside the same buffer
	 * serializes the same export. */
	void *mh2;
	OK(g_ops->mem_register(tc, (char *)buf.p + 4096, 8192, WEFT_MEM_CUDA, &mh2));
	OK(g_ops->mem_deregister(tc, mh2));
	OK(g_connect(&a->mesh, tc, rank, peer, &ep));
	char desc[128];
	OK(g_ops->ep_describe(ep, desc, sizeof(desc)));
	if (!strstr(desc, "nvlink GPU"))
		GFAIL("ep_describe says '%s'", desc);
	if (rank == 0)
		printf("%s (%s buffers)\n", desc, a->vmm ? "VMM, 2 chunks" : "cudaMalloc");
	unsigned char *host = (unsigned char *)malloc(BIG + 64), *back = (unsigned char *)malloc(BIG + 64);
	if (!host || !back)
		GFAIL("host memory");
	size_t ncase = sizeof(g_cases) / sizeof(g_cases[0]);
	for (size_t i = 0; i < ncase; i++) {
		size_t len = g_cases[i].len, doff = g_cases[i].doff, soff = g_cases[i].soff;
		uint64_t seed = 0x9e3779b97f4a7c15ull * (i + 1) + (uint64_t)a->vmm;
		char ack = 0;
		if (rank == 1) {
			CK(cudaMemset(buf.p, 0xA5, buf.len)); /* poison */
			CK(cudaDeviceSynchronize());
		}
		if (g_barrier(&a->mesh, rank))
			GFAIL("barrier");
		if (rank == 0) {
			g_fill(host, len, seed);
			CK(cudaMemcpy((char *)buf.p + soff, host, len, cudaMemcpyHostToDevice));
			/* From pageable memory cudaMemcpy may return before the DMA lands,
			 * and the transport's stream does not wait for the legacy stream. */
			CK(cudaDeviceSynchronize());
			OK(g_ops->put(ep, rmh, doff, mh, soff, len));
			OK(g_ops->signal(ep, rtmh, 0, i + 1));
			OK(g_flush(ep));
			if (g_recvall(a->mesh.fd[0][1], &ack, 1))
				GFAIL("no ack for case %zu", i);
		} else {
			time_t t0 = time(NULL);
			while (token_read(tok) < i + 1)
				if (time(NULL) - t0 > 60)
					GFAIL("token %zu never arrived", i + 1);
			size_t lo = doff ? doff - 1 : 0, hi = doff + len + 1 <= buf.len ? doff + len + 1 : buf.len;
			CK(cudaMemcpy(back + lo, (char *)buf.p + lo, hi - lo, cudaMemcpyDeviceToHost));
			g_fill(host, len, seed);
			if (memcmp(back + doff, host, len) != 0) {
				size_t k = 0;
				while (back[doff + k] == host[k])
					k++;
				GFAIL("case %zu (len %zu, dst off %zu): byte %zu differs (%02x, expected %02x)", i, len,
				      doff, k, back[doff + k], host[k]);
			}
			if ((doff && back[doff - 1] != 0xA5) || (doff + len < buf.len && back[doff + len] != 0xA5))
				GFAIL("case %zu: the put wrote outside [%zu, %zu)", i, doff, doff + len);
			if (g_sendall(a->mesh.fd[1][0], &ack, 1))
				GFAIL("ack");
		}
	}
	free(host);
	free(back);
	OK(g_ops->disconnect(ep));
	OK(g_ops->mem_release(tc, rmh));
	OK(g_ops->mem_release(tc, rtmh));
	OK(g_ops->mem_deregister(tc, mh));
	OK(g_ops->mem_deregister(tc, tmh));
	g_barrier(&a->mesh, rank); /* peers unmap before the memory goes */
	g_ops->close(tc);
	gbuf_free(&buf);
	cudaFree(tok);
	return 0;
}

static int run_ranks(int n, wt_rank_fn fn, int vmm, int timeout)
{
	struct targ a;
	memset(&a, 0, sizeof(a));
	a.vmm = vmm;
	if (gmesh_make(&a.mesh, n) != 0)
		return -1;
	int bad = wt_fork_ranks(n, fn, &a, timeout);
	for (int x = 0; x < n; x++)
		for (int y = 0; y < n; y++)
			if (x != y)
				close(a.mesh.fd[x][y]);
	return bad;
}

START_TEST(test_put_cudamalloc)
{
	ck_assert_int_eq(run_ranks(2, put_rank, 0, 240), 0);
}
END_TEST

START_TEST(test_put_vmm_two_chunks)
{
	ck_assert_int_eq(run_ranks(2, put_rank, 1, 240), 0);
}
END_TEST

/* ----------------------------------------------------- device channels */
struct dchan {
	void *tc, *ep;
	void *data, *flags;        /* local: data buffer, flags page (token at 0, LL area at 4096) */
	void *mh, *fmh, *rmh, *rfmh;
	void *pdata, *pflags;      /* the peer's, mapped */
	struct weft_memchan_dev h; /* host copy */
	void *state;
	uint32_t *abort_host;
};

#define DATA_BYTES ((size_t)64 << 20)
#define FLAGS_BYTES ((size_t)1 << 20)

static int dchan_setup(struct targ *a, int rank, int peer, uint64_t tag, struct dchan *c)
{
	OK(g_open(rank, a->mesh.n, tag, &c->tc));
	CK(cudaMalloc(&c->data, DATA_BYTES));
	CK(cudaMalloc(&c->flags, FLAGS_BYTES));
	CK(cudaMemset(c->flags, 0, FLAGS_BYTES));
	CK(cudaMalloc(&c->state, 64));
	CK(cudaMemset(c->state, 0, 64));
	void *dflag;
	CK(cudaHostAlloc((void **)&c->abort_host, 64, cudaHostAllocMapped));
	*c->abort_host = 0;
	CK(cudaHostGetDevicePointer(&dflag, c->abort_host, 0));
	OK(g_ops->mem_register(c->tc, c->data, DATA_BYTES, WEFT_MEM_CUDA, &c->mh));
	OK(g_ops->mem_register(c->tc, c->flags, FLAGS_BYTES, WEFT_MEM_CUDA, &c->fmh));
	OK(g_exchange(&a->mesh, c->tc, rank, peer, c->mh, &c->rmh));
	OK(g_exchange(&a->mesh, c->tc, rank, peer, c->fmh, &c->rfmh));
	OK(g_ops->mem_map(c->tc, c->rmh, &c->pdata));
	OK(g_ops->mem_map(c->tc, c->rfmh, &c->pflags));
	OK(g_connect(&a->mesh, c->tc, rank, peer, &c->ep));
	memset(&c->h, 0, sizeof(c->h));
	c->h.version = WEFT_DEVICE_HANDLE_VERSION;
	c->h.dst = c->pdata;
	c->h.dst_len = DATA_BYTES;
	c->h.src = c->data;
	c->h.src_len = DATA_BYTES;
	c->h.sem = (uint64_t *)c->flags;
	c->h.rsem = (uint64_t *)c->pflags;
	c->h.expected = (uint64_t *)c->state;
	c->h.outbound = (uint64_t *)c->state + 1;
	c->h.epoch = (uint32_t *)((uint64_t *)c->state + 2);
	c->h.abort_flag = (volatile uint32_t *)dflag;
	return 0;
}

static void dchan_teardown(struct targ *a, int rank, struct dchan *c)
{
	g_ops->disconnect(c->ep);
	g_ops->mem_release(c->tc, c->rmh);
	g_ops->mem_release(c->tc, c->rfmh);
	g_ops->mem_deregister(c->tc, c->mh);
	g_ops->mem_deregister(c->tc, c->fmh);
	g_barrier(&a->mesh, rank);
	g_ops->close(c->tc);
	cudaFree(c->data);
	cudaFree(c->flags);
	cudaFree(c->state);
	cudaFreeHost(c->abort_host);
}

__device__ __forceinline__ uint32_t pat(uint64_t round, uint64_t i)
{
	uint64_t x = (round + 1) * 0x9e3779b97f4a7c15ull ^ (i * 0xbf58476d1ce4e5b9ull);
	x ^= x >> 31;
	return (uint32_t)x;
}

/* Rank 0 pushes `rounds` patterns (odd size and offset) and signals; rank 1
 * waits, checks the bytes, pulls its own copy back from rank 0 and acks. */
__global__ void k_signal_order(struct weft_memchan_dev c, int rank, int rounds, size_t bytes, unsigned long long *errors)
{
	__shared__ int status;
	const size_t off = 3;
	for (int r = 0; r < rounds; r++) {
		if (rank == 0) {
			unsigned char *s = (unsigned char *)c.src + off;
			for (size_t i = threadIdx.x; i < bytes; i += blockDim.x)
				s[i] = (unsigned char)pat(r, i);
			__syncthreads();
			weft_memchan_put(&c, off + 1, off, bytes, threadIdx.x, blockDim.x);
			__syncthreads();
			if (threadIdx.x == 0) {
				__threadfence_system();
				weft_memchan_signal(&c);
				status = weft_memchan_wait(&c);
			}
			__syncthreads();
			if (status != WEFT_DEV_OK)
				return;
		} else {
			if (threadIdx.x == 0)
				status = weft_memchan_wait(&c);
			__syncthreads();
			if (status != WEFT_DEV_OK)
				return;
			const unsigned char *d = (const unsigned char *)c.src + off + 1;
			unsigned long long bad = 0;
			for (size_t i = threadIdx.x; i < bytes; i += blockDim.x)
				bad += d[i] != (unsigned char)pat(r, i);
			/* get: pull rank 0's source into a second local area and check it. */
			const size_t goff = (32u << 20) + 5;
			weft_memchan_get(&c, off, goff, bytes, threadIdx.x, blockDim.x);
			__syncthreads();
			const unsigned char *g = (const unsigned char *)c.src + goff;
			for (size_t i = threadIdx.x; i < bytes; i += blockDim.x)
				bad += g[i] != (unsigned char)pat(r, i);
			if (bad)
				atomicAdd(errors, bad);
			__syncthreads();
			if (threadIdx.x == 0) {
				__threadfence_system();
				weft_memchan_signal(&c);
			}
		}
	}
	(void)0;
}

static int signal_rank(int rank, int nranks, void *arg)
{
	struct targ *a = (struct targ *)arg;
	int dev;
	OK(rank_setup(a, rank, nranks, &dev));
	struct dchan c;
	OK(dchan_setup(a, rank, 1 - rank, 0x2000, &c));
	unsigned long long *err;
	CK(cudaMalloc(&err, 8));
	CK(cudaMemset(err, 0, 8));
	if (g_barrier(&a->mesh, rank))
		GFAIL("barrier");
	k_signal_order<<<1, 1024>>>(c.h, rank, 50, (1u << 20) + 13, err);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	unsigned long long e = 0;
	CK(cudaMemcpy(&e, err, 8, cudaMemcpyDeviceToHost));
	if (e)
		GFAIL("%llu bytes wrong after signal/wait", e);
	dchan_teardown(a, rank, &c);
	return 0;
}

START_TEST(test_memchan_signal_order)
{
	ck_assert_int_eq(run_ranks(2, signal_rank, 0, 120), 0);
}
END_TEST

/* LL round trip: rank 0 writes an LL8 and an LL16 packet per lane into rank 1's
 * LL area, rank 1 checks and answers with the data plus one. Epochs advance in
 * device memory, so each graph replay carries new data. */
__global__ void k_ll(struct weft_memchan_dev c, int rank, unsigned long long *errors, unsigned long long *aborted)
{
	__shared__ uint32_t ep;
	if (threadIdx.x == 0)
		ep = weft_ll_epoch_next(&c);
	__syncthreads();
	uint32_t e = ep, lane = threadIdx.x;
	uint64_t *out8 = (uint64_t *)((char *)c.rsem + 4096) + lane;
	uint4 *out16 = (uint4 *)((char *)c.rsem + 8192) + lane;
	const uint64_t *in8 = (const uint64_t *)((char *)c.sem + 4096) + lane;
	const uint4 *in16 = (const uint4 *)((char *)c.sem + 8192) + lane;
	uint32_t want = pat(e, lane);
	uint64_t want16 = (uint64_t)pat(e, lane + 1000) << 32 | pat(e, lane + 2000);
	uint32_t d8;
	uint64_t d16;
	if (rank == 0) {
		weft_ll8_write(out8, want, e);
		weft_ll16_write(out16, want16, e);
		if (weft_ll8_read(in8, e, &d8, c.abort_flag) || weft_ll16_read(in16, e, &d16, c.abort_flag)) {
			atomicAdd(aborted, 1);
			return;
		}
		if (d8 != want + 1 || d16 != want16 + 1)
			atomicAdd(errors, 1);
	} else {
		if (weft_ll8_read(in8, e, &d8, c.abort_flag) || weft_ll16_read(in16, e, &d16, c.abort_flag)) {
			atomicAdd(aborted, 1);
			return;
		}
		if (d8 != want || d16 != want16)
			atomicAdd(errors, 1);
		weft_ll8_write(out8, d8 + 1, e);
		weft_ll16_write(out16, d16 + 1, e);
	}
	__syncthreads();
	if (threadIdx.x == 0)
		weft_ll_epoch_commit(&c, e);
}

static int ll_rank(int rank, int nranks, void *arg)
{
	struct targ *a = (struct targ *)arg;
	int dev;
	OK(rank_setup(a, rank, nranks, &dev));
	struct dchan c;
	OK(dchan_setup(a, rank, 1 - rank, 0x3000, &c));
	unsigned long long *cnt;
	CK(cudaMalloc(&cnt, 16));
	CK(cudaMemset(cnt, 0, 16));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	cudaGraph_t g;
	cudaGraphExec_t ge;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
	k_ll<<<1, 64, 0, s>>>(c.h, rank, cnt, cnt + 1);
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphInstantiate(&ge, g, 0));
	if (g_barrier(&a->mesh, rank))
		GFAIL("barrier");
	for (int i = 0; i < 1000; i++)
		CK(cudaGraphLaunch(ge, s));
	CK(cudaStreamSynchronize(s));
	unsigned long long h[2];
	CK(cudaMemcpy(h, cnt, 16, cudaMemcpyDeviceToHost));
	uint32_t epoch = 0;
	CK(cudaMemcpy(&epoch, c.h.epoch, 4, cudaMemcpyDeviceToHost));
	if (h[0] || h[1] || epoch != 1000)
		GFAIL("LL graph: %llu wrong packets, %llu aborted, epoch %u after 1000 replays", h[0], h[1], epoch);
	cudaGraphExecDestroy(ge);
	cudaGraphDestroy(g);
	cudaStreamDestroy(s);
	dchan_teardown(a, rank, &c);
	return 0;
}

START_TEST(test_ll_graph_replay)
{
	ck_assert_int_eq(run_ranks(2, ll_rank, 0, 120), 0);
}
END_TEST

/* A peer dies while this rank's kernel waits: the host sees the death (its
 * socket closes), raises the abort flag, and the kernel returns. */
__global__ void k_wait(struct weft_memchan_dev c, int *result)
{
	*result = weft_memchan_wait(&c);
}

static int abort_rank(int rank, int nranks, void *arg)
{
	struct targ *a = (struct targ *)arg;
	int dev;
	OK(rank_setup(a, rank, nranks, &dev));
	struct dchan c;
	OK(dchan_setup(a, rank, 1 - rank, 0x4000, &c));
	if (g_barrier(&a->mesh, rank))
		GFAIL("barrier");
	if (rank == 1 && g_recvall(a->mesh.fd[1][0], &a->pid0, sizeof(a->pid0)))
		GFAIL("no pid from rank 0");
	if (rank == 0) {
		pid_t me = getpid();
		g_sendall(a->mesh.fd[0][1], &me, sizeof(me));
		raise(SIGKILL); /* dies without a word */
		return 1;
	}
	int *res, *dres;
	CK(cudaHostAlloc((void **)&res, sizeof(int), cudaHostAllocMapped));
	CK(cudaHostGetDevicePointer((void **)&dres, res, 0));
	*res = -1;
	k_wait<<<1, 1>>>(c.h, dres);
	CK(cudaGetLastError());
	/* The parent holds the other socket ends, so death shows in /proc. */
	char path[64], st[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)a->pid0);
	for (time_t t0 = time(NULL);;) {
		FILE *f = fopen(path, "r");
		char state = 'X';
		if (f) {
			if (fgets(st, sizeof(st), f)) {
				char *q = strrchr(st, ')');
				if (q && q[1])
					state = q[2];
			}
			fclose(f);
		}
		if (state == 'Z' || state == 'X')
			break;
		if (time(NULL) - t0 > 30)
			GFAIL("rank 0 is still alive");
		usleep(1000);
	}
	usleep(200000);
	if (*(volatile int *)res != -1)
		GFAIL("the kernel returned before the abort flag was raised");
	__atomic_store_n(c.abort_host, 1, __ATOMIC_RELEASE);
	CK(cudaDeviceSynchronize());
	if (*res != WEFT_DEV_ABORTED)
		GFAIL("the waiting kernel returned %d, expected WEFT_DEV_ABORTED", *res);
	/* The survivor's host calls still answer (the peer's mapping outlives it). */
	int rc = g_ops->flush(c.ep);
	if (rc != 0)
		GFAIL("flush after the peer died: %d", rc);
	return 0;
}

START_TEST(test_peer_death_aborts_kernel)
{
	struct targ a;
	memset(&a, 0, sizeof(a));
	ck_assert_int_eq(gmesh_make(&a.mesh, 2), 0);
	int st[2];
	wt_fork_ranks_status(2, abort_rank, &a, 60, st);
	for (int x = 0; x < 2; x++)
		for (int y = 0; y < 2; y++)
			if (x != y)
				close(a.mesh.fd[x][y]);
	ck_assert_msg(WIFSIGNALED(st[0]) && WTERMSIG(st[0]) == SIGKILL, "rank 0 did not die as planned");
	ck_assert_msg(WIFEXITED(st[1]) && WEXITSTATUS(st[1]) == 0, "the survivor failed (status %d)", st[1]);
}
END_TEST

/* Several processes per GPU: a ring of puts among n ranks. */
static int ring_rank(int rank, int nranks, void *arg)
{
	struct targ *a = (struct targ *)arg;
	int dev;
	OK(rank_setup(a, rank, nranks, &dev));
	void *tc, *mh, *tmh, *ep_next = NULL, *rmh_next = NULL, *rt_next = NULL;
	OK(g_open(rank, nranks, 0x5000 + (uint64_t)nranks, &tc));
	int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
	const size_t len = (4u << 20) + 3;
	void *buf, *tok;
	CK(cudaMalloc(&buf, 2 * len + 64));
	CK(cudaMalloc(&tok, 64));
	CK(cudaMemset(tok, 0, 64));
	OK(g_ops->mem_register(tc, buf, 2 * len + 64, WEFT_MEM_CUDA, &mh));
	OK(g_ops->mem_register(tc, tok, 64, WEFT_MEM_CUDA, &tmh));
	/* Pairwise exchanges in an order that cannot deadlock: lower rank first. */
	for (int p = 0; p < nranks; p++) {
		if (p == rank || (p != next && p != prev))
			continue;
		void *r, *rt, *ep;
		OK(g_exchange(&a->mesh, tc, rank, p, mh, &r));
		OK(g_exchange(&a->mesh, tc, rank, p, tmh, &rt));
		OK(g_connect(&a->mesh, tc, rank, p, &ep));
		if (p == next)
			rmh_next = r, rt_next = rt, ep_next = ep;
	}
	unsigned char *h = (unsigned char *)malloc(len), *b = (unsigned char *)malloc(len);
	g_fill(h, len, 77 + (uint64_t)rank);
	CK(cudaMemcpy(buf, h, len, cudaMemcpyHostToDevice));
	CK(cudaDeviceSynchronize());
	if (!ep_next)
		GFAIL("no endpoint to rank %d", next);
	OK(g_ops->put(ep_next, rmh_next, len + 64, mh, 0, len));
	OK(g_ops->signal(ep_next, rt_next, 0, 1));
	OK(g_flush(ep_next));
	time_t t0 = time(NULL);
	while (token_read(tok) < 1)
		if (time(NULL) - t0 > 60)
			GFAIL("no token from rank %d", prev);
	CK(cudaMemcpy(b, (char *)buf + len + 64, len, cudaMemcpyDeviceToHost));
	g_fill(h, len, 77 + (uint64_t)prev);
	if (memcmp(b, h, len) != 0)
		GFAIL("data from rank %d differs", prev);
	free(h);
	free(b);
	g_barrier(&a->mesh, rank);
	return 0;
}

START_TEST(test_ring_3_ranks)
{
	ck_assert_int_eq(run_ranks(3, ring_rank, 0, 120), 0);
}
END_TEST

START_TEST(test_ring_4_ranks)
{
	ck_assert_int_eq(run_ranks(4, ring_rank, 0, 120), 0);
}
END_TEST

/* CUDA must not be initialized in the parent before the ranks fork: the probe
 * runs in a child of its own. */
static int probe_gpu(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		int n = 0;
		int rc = g_gpu_present(&n);
		_exit(rc == 0 ? 100 + (n > 50 ? 50 : n) : rc);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st))
		return 1;
	int code = WEXITSTATUS(st);
	if (code >= 100) {
		g_ndev = code - 100;
		return 0;
	}
	return code;
}

int main(void)
{
	int rc = probe_gpu();
	if (rc != 0)
		return rc;
	printf("%d CUDA device(s)\n", g_ndev);
	Suite *s = suite_create("nvlink_gpu");
	TCase *tc = tcase_create("nvlink");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_put_cudamalloc);
	tcase_add_test(tc, test_put_vmm_two_chunks);
	tcase_add_test(tc, test_memchan_signal_order);
	tcase_add_test(tc, test_ll_graph_replay);
	tcase_add_test(tc, test_peer_death_aborts_kernel);
	tcase_add_test(tc, test_ring_3_ranks);
	tcase_add_test(tc, test_ring_4_ranks);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
