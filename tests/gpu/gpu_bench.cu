/* SPDX-License-Identifier: Apache-2.0 */
/* weft-gpu-bench: nvlink figures between two ranks (one process per GPU):
 * copy-engine put bandwidth through the plugin, memory-channel push/pull
 * bandwidth by block count, and LL / semaphore ping-pong latency (one
 * persistent kernel, and one kernel launch per step). CUDA-event timing after
 * warm-up; outputs poisoned and validated on random data.
 * Usage: weft-gpu-bench [bytes]   (default 1 GiB) */
#include <sys/wait.h>
#include <time.h>

#include <weft/device.h>

#include "gpu_common.h"

static size_t g_bytes = (size_t)1 << 30;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Each block copies one contiguous slice: the slices (a multiple of 16
 * bytes) cover every byte, the last one being shorter. */
__global__ void k_copy(char *dst, const char *src, size_t bytes)
{
	size_t per = ((bytes + gridDim.x - 1) / gridDim.x + 15) / 16 * 16;
	size_t lo = per * blockIdx.x;
	if (lo >= bytes)
		return;
	size_t n = lo + per > bytes ? bytes - lo : per;
	weft_dev_copy(dst + lo, src + lo, n, threadIdx.x, blockDim.x);
}

__global__ void k_fill(uint32_t *p, size_t n, uint32_t seed)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		p[i] = (uint32_t)((i + seed) * 2654435761u) ^ seed;
}

/* Checks p[0..n) against the pattern of words base..base+n of seed. */
__global__ void k_check(const uint32_t *p, size_t n, uint32_t seed, unsigned long long *bad, size_t base = 0)
{
	unsigned long long b = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		b += p[i] != ((uint32_t)((i + base + seed) * 2654435761u) ^ seed);
	if (b)
		atomicAdd(bad, b);
}

/* Ping-pong over LL8 packets: rank 0 sends, rank 1 echoes. iters round trips. */
__global__ void k_pp_ll(struct weft_memchan_dev c, int rank, int iters)
{
	uint32_t e = *c.epoch;
	uint64_t *out = (uint64_t *)((char *)c.rsem + 4096);
	const uint64_t *in = (const uint64_t *)((char *)c.sem + 4096);
	uint32_t d;
	for (int i = 0; i < iters; i++) {
		e = e + 1 ? e + 1 : 1;
		if (rank == 0) {
			weft_ll8_write(out, e, e);
			if (weft_ll8_read(in, e, &d, c.abort_flag))
				return;
		} else {
			if (weft_ll8_read(in, e, &d, c.abort_flag))
				return;
			weft_ll8_write(out, d, e);
		}
	}
	*c.epoch = e;
}

/* Ping-pong over semaphores (release/acquire at system scope). */
__global__ void k_pp_sem(struct weft_memchan_dev c, int rank, int iters)
{
	for (int i = 0; i < iters; i++) {
		if (rank == 0) {
			weft_memchan_signal(&c);
			if (weft_memchan_wait(&c))
				return;
		} else {
			if (weft_memchan_wait(&c))
				return;
			weft_memchan_signal(&c);
		}
	}
}

struct bctx {
	struct gmesh mesh;
};

#define ROWS 64
static char g_rows[ROWS][160];
static int g_nrows;
/* Rows print as they come (a later failure keeps them) and again at the end. */
#define ROW(...)                                                        \
	do {                                                            \
		if (g_nrows < ROWS) {                                   \
			snprintf(g_rows[g_nrows], 160, __VA_ARGS__);    \
			printf("%s\n", g_rows[g_nrows++]);              \
			fflush(stdout);                                 \
		}                                                       \
	} while (0)

static int bench_rank(int rank, struct gmesh *m)
{
	g_rank = rank;
	gmesh_keep(m, rank);
	OK(g_load_plugin(WEFT_NVLINK_PLUGIN));
	int n = 0;
	CK(cudaGetDeviceCount(&n));
	int dev = rank % n, peer = 1 - rank;
	CK(cudaSetDevice(dev));
	void *tc, *ep, *mh, *fmh, *rmh, *rfmh, *pdata, *pflags;
	OK(g_open(rank, 2, 0x7000, &tc));
	size_t B = g_bytes;
	char *src, *dst, *flags;
	CK(cudaMalloc(&src, B));
	CK(cudaMalloc(&dst, B)); /* the peer writes here */
	CK(cudaMalloc(&flags, 1 << 20));
	CK(cudaMemset(flags, 0, 1 << 20));
	/* One registration for both halves would be simpler; two show the cache. */
	OK(g_ops->mem_register(tc, dst, B, WEFT_MEM_CUDA, &mh));
	void *smh;
	OK(g_ops->mem_register(tc, src, B, WEFT_MEM_CUDA, &smh));
	OK(g_ops->mem_register(tc, flags, 1 << 20, WEFT_MEM_CUDA, &fmh));
	OK(g_exchange(m, tc, rank, peer, mh, &rmh));
	OK(g_exchange(m, tc, rank, peer, fmh, &rfmh));
	OK(g_ops->mem_map(tc, rmh, &pdata));
	OK(g_ops->mem_map(tc, rfmh, &pflags));
	OK(g_connect(m, tc, rank, peer, &ep));
	char desc[128];
	g_ops->ep_describe(ep, desc, sizeof(desc));
	void *state;
	CK(cudaMalloc(&state, 64));
	CK(cudaMemset(state, 0, 64));
	uint32_t *abort_h, *abort_d;
	CK(cudaHostAlloc((void **)&abort_h, 64, cudaHostAllocMapped));
	*abort_h = 0;
	CK(cudaHostGetDevicePointer((void **)&abort_d, abort_h, 0));
	struct weft_memchan_dev c;
	memset(&c, 0, sizeof(c));
	c.version = WEFT_DEVICE_HANDLE_VERSION;
	c.dst = pdata, c.src = src, c.sem = (uint64_t *)flags, c.rsem = (uint64_t *)pflags;
	c.expected = (uint64_t *)state, c.outbound = (uint64_t *)state + 1, c.epoch = (uint32_t *)((uint64_t *)state + 2);
	c.abort_flag = abort_d;

	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	unsigned long long *bad;
	CK(cudaMalloc(&bad, 8));
	size_t nw = B / 4;
	if (rank == 0)
		printf("%s, %zu MiB per transfer\n", desc, B >> 20);

	/* ---- memory-channel push / pull by block count, one way and both ways */
	int blocks[] = {16, 32, 64, 132, 264};
	for (int both = 0; both < 2; both++)
		for (int pull = 0; pull < 2; pull++)
			for (size_t bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
				int active = both || rank == 0;
				uint32_t seed = (uint32_t)(bi * 7 + pull * 3 + both + 1);
				/* push: I write src -> peer dst. pull: I read peer's src... the
				 * peer's src is not mapped; pull reads the peer's dst, which
				 * the peer fills first. */
				k_fill<<<264, 512, 0, s>>>((uint32_t *)(pull ? dst : src), nw, seed + (uint32_t)rank * 1000);
				CK(cudaStreamSynchronize(s));
				if (!pull)
					CK(cudaMemset(dst, 0xEE, B)); /* poison what the peer writes */
				else
					CK(cudaMemset(src, 0xEE, B));
				CK(cudaDeviceSynchronize());
				if (g_barrier(m, rank))
					GFAIL("barrier");
				float ms = 0;
				int iters = 10;
				if (active) {
					char *to = pull ? src : (char *)pdata;
					const char *from = pull ? (const char *)pdata : src;
					k_copy<<<blocks[bi], 512, 0, s>>>(to, from, B); /* warm-up */
					CK(cudaEventRecord(e0, s));
					for (int i = 0; i < iters; i++)
						k_copy<<<blocks[bi], 512, 0, s>>>(to, from, B);
					CK(cudaEventRecord(e1, s));
					CK(cudaGetLastError());
					CK(cudaEventSynchronize(e1));
					CK(cudaEventElapsedTime(&ms, e0, e1));
				}
				if (g_barrier(m, rank))
					GFAIL("barrier");
				/* validate: push -> my dst holds the peer's pattern; pull -> my src holds it */
				unsigned long long h = 0;
				int expect = both || rank == (pull ? 0 : 1);
				if (expect) {
					CK(cudaMemset(bad, 0, 8));
					k_check<<<264, 512, 0, s>>>((const uint32_t *)(pull ? src : dst), nw,
								    seed + (uint32_t)peer * 1000,
								    bad);
					CK(cudaStreamSynchronize(s));
					CK(cudaMemcpy(&h, bad, 8, cudaMemcpyDeviceToHost));
					if (h)
						GFAIL("%s %s blocks %d: %llu words wrong", pull ? "pull" : "push",
						      both ? "both" : "one", blocks[bi], h);
				}
				double gbs = active ? (double)B * iters / (ms * 1e-3) / 1e9 : 0, peer_gbs = 0;
				size_t tl = sizeof(peer_gbs);
				if (g_swap(m, rank, peer, &gbs, sizeof(gbs), &peer_gbs, &tl))
					GFAIL("swap");
				if (rank == 0)
					ROW("memchan %-4s %-8s blocks %3d x 512: %7.1f GB/s%s",
						 pull ? "pull" : "push", both ? "bothways" : "oneway", blocks[bi],
						 both ? gbs + peer_gbs : gbs, both ? " total" : "");
			}

	/* ---- copy-engine put through the plugin */
	for (int both = 0; both < 2; both++) {
		int active = both || rank == 0;
		k_fill<<<264, 512, 0, s>>>((uint32_t *)src, nw, 99u + (uint32_t)rank);
		CK(cudaMemset(dst, 0xEE, B));
		CK(cudaDeviceSynchronize());
		if (g_barrier(m, rank))
			GFAIL("barrier");
		double t = 0;
		int iters = 10;
		if (active) {
			OK(g_ops->put(ep, rmh, 0, smh, 0, B)); /* warm-up */
			OK(g_flush(ep));
			double t0 = now_s();
			for (int i = 0; i < iters; i++)
				OK(g_ops->put(ep, rmh, 0, smh, 0, B));
			OK(g_flush(ep));
			t = now_s() - t0;
		}
		if (g_barrier(m, rank))
			GFAIL("barrier");
		if (both || rank == 1) {
			CK(cudaMemset(bad, 0, 8));
			k_check<<<264, 512, 0, s>>>((const uint32_t *)dst, nw, 99u + (uint32_t)peer, bad);
			unsigned long long h = 0;
			CK(cudaStreamSynchronize(s));
			CK(cudaMemcpy(&h, bad, 8, cudaMemcpyDeviceToHost));
			if (h)
				GFAIL("copy-engine put: %llu words wrong", h);
		}
		double gbs = active ? (double)B * iters / t / 1e9 : 0, peer_gbs = 0;
		size_t tl = sizeof(peer_gbs);
		if (g_swap(m, rank, peer, &gbs, sizeof(gbs), &peer_gbs, &tl))
			GFAIL("swap");
		if (rank == 0)
			ROW("copy-engine put %-8s: %7.1f GB/s%s", both ? "bothways" : "oneway",
				 both ? gbs + peer_gbs : gbs, both ? " total" : "");
	}

	/* ---- copy engines on the mapped peer buffer (cudaMemcpyAsync), by the
	 * shape of the traffic: push (my src -> peer's dst), pull (peer's dst ->
	 * my src), both GPUs at once; "push+pull" moves half by each on two
	 * streams, as allreduce-ce's pulls and pushes overlap; "push x2" pushes
	 * the same halves on two streams, the control for the stream count. */
	{
		cudaStream_t s2;
		CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
		cudaEvent_t fork, join;
		CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
		CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
		const char *names[] = {"push", "pull", "push+pull", "push x2"};
		size_t h = B / 2 / 16 * 16, hw = h / 4;
		for (int mode = 0; mode < 4; mode++) {
			uint32_t seed = 300u + 10u * (uint32_t)mode;
			/* Both buffers hold my pattern; what the transfers bring in is the peer's. */
			k_fill<<<264, 512, 0, s>>>((uint32_t *)src, nw, seed + (uint32_t)rank);
			k_fill<<<264, 512, 0, s>>>((uint32_t *)dst, nw, seed + (uint32_t)rank);
			CK(cudaStreamSynchronize(s));
			if (g_barrier(m, rank))
				GFAIL("barrier");
			const int iters = 10;
			float ms = 0;
			for (int it = -1; it < iters; it++) {
				if (it == 0)
					CK(cudaEventRecord(e0, s));
				switch (mode) {
				case 0: CK(cudaMemcpyAsync(pdata, src, B, cudaMemcpyDefault, s)); break;
				case 1: CK(cudaMemcpyAsync(src, pdata, B, cudaMemcpyDefault, s)); break;
				default:
					CK(cudaEventRecord(fork, s));
					CK(cudaStreamWaitEvent(s2, fork, 0));
					CK(cudaMemcpyAsync(pdata, src, h, cudaMemcpyDefault, s));
					if (mode == 2)
						CK(cudaMemcpyAsync(src + h, (char *)pdata + h, B - h, cudaMemcpyDefault, s2));
					else
						CK(cudaMemcpyAsync((char *)pdata + h, src + h, B - h, cudaMemcpyDefault, s2));
					CK(cudaEventRecord(join, s2));
					CK(cudaStreamWaitEvent(s, join, 0));
				}
			}
			CK(cudaEventRecord(e1, s));
			CK(cudaEventSynchronize(e1));
			CK(cudaEventElapsedTime(&ms, e0, e1));
			if (g_barrier(m, rank))
				GFAIL("barrier");
			/* push: my dst is the peer's (all of it, or its first half for
			 * push+pull); pull: my src is; push x2: my dst is. */
			CK(cudaMemset(bad, 0, 8));
			uint32_t ps = seed + (uint32_t)peer;
			if (mode == 0 || mode == 3)
				k_check<<<264, 512, 0, s>>>((const uint32_t *)dst, nw, ps, bad);
			else if (mode == 1)
				k_check<<<264, 512, 0, s>>>((const uint32_t *)src, nw, ps, bad);
			else {
				k_check<<<264, 512, 0, s>>>((const uint32_t *)dst, hw, ps, bad);
				k_check<<<264, 512, 0, s>>>((const uint32_t *)(src + h), nw - hw, ps, bad, hw);
			}
			unsigned long long nb = 0;
			CK(cudaStreamSynchronize(s));
			CK(cudaMemcpy(&nb, bad, 8, cudaMemcpyDeviceToHost));
			if (nb)
				GFAIL("copy engine %s: %llu words wrong", names[mode], nb);
			double gbs = (double)B * iters / (ms * 1e-3) / 1e9, peer_gbs = 0;
			size_t tl = sizeof(peer_gbs);
			if (g_swap(m, rank, peer, &gbs, sizeof(gbs), &peer_gbs, &tl))
				GFAIL("swap");
			if (rank == 0)
				ROW("copy engine %-9s both GPUs: %7.1f GB/s total (%.1f + %.1f)", names[mode], gbs + peer_gbs,
				    gbs, peer_gbs);
		}
		CK(cudaEventDestroy(fork));
		CK(cudaEventDestroy(join));
		CK(cudaStreamDestroy(s2));
	}

	/* ---- ping-pong latency */
	for (int kind = 0; kind < 2; kind++) {
		for (int per_launch = 0; per_launch < 2; per_launch++) {
			int iters = per_launch ? 2000 : 20000;
			if (g_barrier(m, rank))
				GFAIL("barrier");
			/* warm-up */
			if (kind == 0)
				k_pp_ll<<<1, 1, 0, s>>>(c, rank, 100);
			else
				k_pp_sem<<<1, 1, 0, s>>>(c, rank, 100);
			CK(cudaEventRecord(e0, s));
			if (!per_launch) {
				if (kind == 0)
					k_pp_ll<<<1, 1, 0, s>>>(c, rank, iters);
				else
					k_pp_sem<<<1, 1, 0, s>>>(c, rank, iters);
			} else {
				for (int i = 0; i < iters; i++) {
					if (kind == 0)
						k_pp_ll<<<1, 1, 0, s>>>(c, rank, 1);
					else
						k_pp_sem<<<1, 1, 0, s>>>(c, rank, 1);
				}
			}
			CK(cudaEventRecord(e1, s));
			CK(cudaGetLastError());
			CK(cudaEventSynchronize(e1));
			float ms = 0;
			CK(cudaEventElapsedTime(&ms, e0, e1));
			if (rank == 0)
				ROW("ping-pong %-13s %-18s: %6.2f us per round trip",
					 kind == 0 ? "LL8" : "sem acq/rel", per_launch ? "launch per step" : "persistent kernel",
					 ms * 1e3 / iters);
		}
	}

	if (rank == 0) {
		printf("\n== weft-gpu-bench results (rank 0's view)\n");
		for (int i = 0; i < g_nrows; i++)
			printf("%s\n", g_rows[i]);
		fflush(stdout);
	}
	g_barrier(m, rank);
	g_ops->disconnect(ep);
	g_ops->mem_release(tc, rmh);
	g_ops->mem_release(tc, rfmh);
	g_ops->mem_deregister(tc, mh);
	g_ops->mem_deregister(tc, smh);
	g_ops->mem_deregister(tc, fmh);
	g_barrier(m, rank);
	g_ops->close(tc);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		g_bytes = strtoull(argv[1], NULL, 0) & ~(size_t)15;
	struct gmesh m;
	if (gmesh_make(&m, 2) != 0)
		return 1;
	pid_t pids[2];
	for (int r = 0; r < 2; r++) {
		pids[r] = fork();
		if (pids[r] == 0)
			_exit(bench_rank(r, &m));
	}
	for (int a = 0; a < 2; a++)
		for (int b = 0; b < 2; b++)
			if (a != b)
				close(m.fd[a][b]);
	int bad = 0;
	for (int r = 0; r < 2; r++) {
		int st = 0;
		waitpid(pids[r], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "weft-gpu-bench: rank %d failed (status %d)\n", r, st);
			bad = 1;
		}
	}
	return bad;
}
