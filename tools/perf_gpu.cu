/* SPDX-License-Identifier: Apache-2.0 */
/* weft-perf's GPU half (libweft-perf-gpu.so, dlopen'ed by weft-perf for --op
 * put|pingpong --mem cuda): memory-channel and copy-engine benchmarks between
 * the GPUs of ranks 0 and 1, through weft's public API (weft.h, device.h) only. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <weft/device.h>
#include <weft/weft.h>

#include "perf_gpu.h"

#define PG_API extern "C" __attribute__((visibility("default")))

/* Tags of the pair's own bootstrap messages (weft-perf's are 0x7065/0x7066). */
#define TAG_SYNC 0x7067u
#define TAG_RESULT 0x7068u
/* Ping-pong: round trips per -n iteration (a microsecond each: -n 20 alone
 * would time the launch, not the link). */
#define PP_STEPS 100
/* Launch-per-step ping-pong: launches enqueued ahead of the GPU at most. */
#define PP_CHUNK 256
/* Memory-channel put: threads per block, and the block counts of the sweep. */
#define BW_THREADS 512
static const int bw_blocks[] = {16, 32, 64, 132, 264};
#define NBLOCKS (int)(sizeof(bw_blocks) / sizeof(bw_blocks[0]))
/* The anchors' flag round trips between persistent kernels on two H200s,
 * printed beside ours (quoted in docs/perf/2026-11-30-h200x2-ll-and-copy-engine.md). */
#define ANCHOR_RELAXED_US 1.25
#define ANCHOR_ACQREL_US 2.39

/* One rank's end of the benchmark. The registered region is laid out as
 * [0, half) where the peer's data lands, [half, 2 half) what this rank sends
 * (pushes, or the peer pulls), then [ll_off, len) the LL packets the peer
 * writes (ping-pong only). */
struct pg {
	const struct weft_perf_gpu_args *a;
	weft_comm_t *comm;
	int rank, peer;
	double timeout_s;
	weft_conn_t *conn;
	char desc[256];
	char gpu[64];
	char *buf;
	size_t half, ll_off, len;
	weft_mem_t *mem;
	weft_rmem_t *rmem;
	weft_sem_t *sem;
	weft_rsem_t *rsem;
	weft_memchan_t *ch;
	struct weft_memchan_dev h;
	cudaStream_t s;
	cudaEvent_t ev[2];
	unsigned long long *d_wrong;
	int *d_status;
};

/* ----------------------------------------------------------------- errors */

static int pg_fail(const struct pg *p, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int pg_fail(const struct pg *p, int rc, const char *fmt, ...)
{
	char what[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	fprintf(stderr, "weft-perf: rank %d: %s: %s\n", p->rank, what, weft_strerror(rc));
	fflush(stderr);
	return rc;
}

static int cu_fail(const struct pg *p, cudaError_t e, const char *what)
{
	fprintf(stderr, "weft-perf: rank %d: %s: %s\n", p->rank, what, cudaGetErrorString(e));
	fflush(stderr);
	return -EIO;
}

#define CU(call)                                                                                                   \
	do {                                                                                                       \
		cudaError_t e_ = (call);                                                                           \
		if (e_ != cudaSuccess)                                                                             \
			return cu_fail(p, e_, #call);                                                              \
	} while (0)
#define WF(call)                                                                                                   \
	do {                                                                                                       \
		int r_ = (call);                                                                                   \
		if (r_ != 0)                                                                                       \
			return pg_fail(p, r_, "%s", #call);                                                        \
	} while (0)

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Waits, bounded, for the stream's work. When it does not finish in time (a
 * kernel waiting for a peer that never answers), the communicator is aborted:
 * that raises the abort flag every device wait polls, so the kernels return. */
static int wait_done(struct pg *p, cudaEvent_t ev, const char *what)
{
	double t0 = now_s();
	for (;;) {
		cudaError_t e = ev ? cudaEventQuery(ev) : cudaStreamQuery(p->s);
		if (e == cudaSuccess)
			break;
		if (e != cudaErrorNotReady)
			return cu_fail(p, e, what);
		if (now_s() - t0 > p->timeout_s) {
			fprintf(stderr,
				"weft-perf: rank %d: %s did not finish within %.0f s (WEFT_PERF_GPU_TIMEOUT); the peer "
				"stopped answering? aborting the communicator\n",
				p->rank, what, p->timeout_s);
			weft_comm_abort(p->comm);
			double t1 = now_s();
			while (cudaStreamQuery(p->s) == cudaErrorNotReady && now_s() - t1 < 10)
				usleep(1000);
			return -ETIMEDOUT;
		}
		usleep(50);
	}
	return 0;
}

/* After the kernels are done: whether one of them left a wait on the abort flag. */
static int check_status(struct pg *p, const char *what)
{
	int st = 0;
	CU(cudaMemcpy(&st, p->d_status, sizeof(st), cudaMemcpyDeviceToHost));
	if (st != 0)
		return pg_fail(p, -WEFT_ERR_ABORTED, "%s: a kernel left its wait (the communicator was aborted or the "
				  "peer died)", what);
	return 0;
}

/* Ranks 0 and 1 meet over the bootstrap (the other ranks take no part). */
static int pair_sync(struct pg *p)
{
	char b = 1;
	int rc;
	if (p->rank == 0) {
		if ((rc = weft_comm_send(p->comm, 1, TAG_SYNC, &b, 1)) == 0)
			rc = weft_comm_recv(p->comm, 1, TAG_SYNC, &b, 1);
	} else {
		if ((rc = weft_comm_recv(p->comm, 0, TAG_SYNC, &b, 1)) == 0)
			rc = weft_comm_send(p->comm, 0, TAG_SYNC, &b, 1);
	}
	return rc ? pg_fail(p, rc, "synchronizing ranks 0 and 1") : 0;
}

/* Rank 1's figure and wrong count, to rank 0. */
struct result {
	double t;
	uint64_t wrong;
};

static int gather_result(struct pg *p, const struct result *mine, struct result *peer)
{
	int rc;
	if (p->rank == 1)
		rc = weft_comm_send(p->comm, 0, TAG_RESULT, mine, sizeof(*mine));
	else
		rc = weft_comm_recv(p->comm, 1, TAG_RESULT, peer, sizeof(*peer));
	return rc ? pg_fail(p, rc, "sending the results to rank 0") : 0;
}

/* ---------------------------------------------------------------- kernels */

__device__ __forceinline__ uint64_t pg_mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* Random bytes of a seed: 8-byte word i is pg_mix(seed ^ i). p is 8-byte aligned. */
__global__ void k_fill(unsigned char *p, uint64_t bytes, uint64_t seed)
{
	uint64_t nw = (bytes + 7) / 8;
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < nw; i += (uint64_t)gridDim.x * blockDim.x) {
		uint64_t v = pg_mix(seed ^ i);
		if (8 * i + 8 <= bytes) {
			((uint64_t *)p)[i] = v;
		} else {
			for (uint64_t k = 0; 8 * i + k < bytes; k++)
				p[8 * i + k] = (unsigned char)(v >> (8 * k));
		}
	}
}

/* Adds the bytes of p that differ from k_fill's to *wrong. */
__global__ void k_count(const unsigned char *p, uint64_t bytes, uint64_t seed, unsigned long long *wrong)
{
	uint64_t nw = (bytes + 7) / 8;
	unsigned long long bad = 0;
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < nw; i += (uint64_t)gridDim.x * blockDim.x) {
		uint64_t v = pg_mix(seed ^ i), g;
		if (8 * i + 8 <= bytes) {
			g = ((const uint64_t *)p)[i];
			if (g != v)
				for (int k = 0; k < 8; k++)
					bad += ((g >> (8 * k)) & 0xff) != ((v >> (8 * k)) & 0xff);
		} else {
			for (uint64_t k = 0; 8 * i + k < bytes; k++)
				bad += p[8 * i + k] != (unsigned char)(v >> (8 * k));
		}
	}
	if (bad)
		atomicAdd(wrong, bad);
}

/* Memory-channel bandwidth: each block copies one contiguous slice of 16-byte
 * multiples. Push: this rank's send area to the peer's landing area. Pull: the
 * peer's send area into this rank's landing area. */
__global__ void k_bw(struct weft_memchan_dev c, int pull, uint64_t bytes, uint64_t send_off)
{
	uint64_t per = ((bytes + gridDim.x - 1) / gridDim.x + 15) / 16 * 16;
	uint64_t lo = per * blockIdx.x;
	if (lo >= bytes)
		return;
	uint64_t n = bytes - lo < per ? bytes - lo : per;
	if (pull)
		weft_memchan_get(&c, send_off + lo, lo, n, threadIdx.x, blockDim.x);
	else
		weft_memchan_put(&c, lo, send_off + lo, n, threadIdx.x, blockDim.x);
}

/* 4-byte word i of a buffer of `bytes` (the last one may be partial). */
__device__ __forceinline__ uint32_t ld_word(const unsigned char *p, uint64_t i, uint64_t bytes)
{
	uint64_t off = 4 * i;
	if (off + 4 <= bytes)
		return *(const uint32_t *)(p + off);
	uint32_t v = 0;
	for (uint64_t k = 0; off + k < bytes; k++)
		v |= (uint32_t)p[off + k] << (8 * k);
	return v;
}

__device__ __forceinline__ void st_word(unsigned char *p, uint64_t i, uint64_t bytes, uint32_t v)
{
	uint64_t off = 4 * i;
	if (off + 4 <= bytes) {
		*(uint32_t *)(p + off) = v;
		return;
	}
	for (uint64_t k = 0; off + k < bytes; k++)
		p[off + k] = (unsigned char)(v >> (8 * k));
}

/* Ping-pong over LL8 packets (4 data bytes + a 4-byte flag in one store),
 * `steps` round trips: rank 0 sends its send area as packets into the peer's
 * packet area and waits for them back; rank 1 echoes each packet as it comes.
 * Both store what they receive into their landing area (what an LL receive
 * does), which the data check reads. Flags are epochs of the channel (device
 * memory), one per step, so launches follow each other without any reset.
 * Up to one packet per thread (4 KiB with 1024 threads) the step is the
 * latency path: rank 0 loads the next step's word while the echo is on its
 * way, and both ranks forward before storing locally. */
__global__ void k_pp_ll(struct weft_memchan_dev c, int rank, uint64_t steps, uint64_t bytes, uint64_t send_off,
			uint64_t ll_off, int *status)
{
	uint64_t npk = bytes ? (bytes + 3) / 4 : 1;
	uint64_t *out = (uint64_t *)((char *)c.dst + ll_off);
	const uint64_t *in = (const uint64_t *)((const char *)c.src + ll_off);
	const unsigned char *snd = (const unsigned char *)c.src + send_off;
	unsigned char *rcv = (unsigned char *)c.src;
	uint32_t e = *c.epoch;
	int aborted = 0;
	if (npk <= blockDim.x) {
		uint64_t i = threadIdx.x;
		int mine = i < npk;
		uint32_t w = rank == 0 && mine ? ld_word(snd, i, bytes) : 0, d = 0;
		for (uint64_t s = 0; s < steps && mine; s++) {
			e = e + 1 ? e + 1 : 1;
			if (rank == 0) {
				weft_ll8_write(out + i, w, e);
				w = ld_word(snd, i, bytes); /* the next step's, in flight during the wait */
			}
			if (weft_ll8_read(in + i, e, &d, c.abort_flag) != WEFT_DEV_OK) {
				aborted = 1;
				break;
			}
			if (rank == 1)
				weft_ll8_write(out + i, d, e);
			st_word(rcv, i, bytes, d);
		}
	} else {
		for (uint64_t s = 0; s < steps && !aborted; s++) {
			e = e + 1 ? e + 1 : 1;
			if (rank == 0)
				for (uint64_t i = threadIdx.x; i < npk; i += blockDim.x)
					weft_ll8_write(out + i, ld_word(snd, i, bytes), e);
			for (uint64_t i = threadIdx.x; i < npk; i += blockDim.x) {
				uint32_t d;
				if (weft_ll8_read(in + i, e, &d, c.abort_flag) != WEFT_DEV_OK) {
					aborted = 1;
					break;
				}
				if (rank == 1)
					weft_ll8_write(out + i, d, e);
				st_word(rcv, i, bytes, d);
			}
		}
	}
	if (aborted)
		*status = 1;
	__syncthreads();
	if (threadIdx.x == 0 && !aborted)
		*c.epoch = e;
}

/* Ping-pong over the channel's semaphores: rank 0 puts its send area into the
 * peer's landing area (none with size 0) and signals (release, system scope);
 * rank 1 waits (acquire), puts what it got back and signals. */
__global__ void k_pp_sem(struct weft_memchan_dev c, int rank, uint64_t steps, uint64_t bytes, uint64_t send_off,
			 int *status)
{
	__shared__ int bad;
	if (threadIdx.x == 0)
		bad = 0;
	__syncthreads();
	for (uint64_t s = 0; s < steps; s++) {
		if (rank == 1) {
			if (threadIdx.x == 0 && weft_memchan_wait(&c) != WEFT_DEV_OK)
				bad = 1;
			__syncthreads();
			if (bad)
				break;
		}
		if (bytes) {
			weft_memchan_put(&c, 0, rank == 0 ? send_off : 0, bytes, threadIdx.x, blockDim.x);
			__syncthreads();
		}
		if (threadIdx.x == 0) {
			if (bytes)
				__threadfence_system();
			weft_memchan_signal(&c);
			if (rank == 0 && weft_memchan_wait(&c) != WEFT_DEV_OK)
				bad = 1;
		}
		__syncthreads();
		if (bad)
			break;
	}
	if (threadIdx.x == 0 && bad)
		*status = 1;
}

/* ------------------------------------------------------------------ setup */

static int pg_setup(struct pg *p, uint64_t max_bytes)
{
	const char *tp = p->a->transport ? p->a->transport : "nvlink";
	int dev = -1;
	CU(cudaGetDevice(&dev));
	/* The device weft-perf selected before the communicator existed. */
	CU(cudaSetDevice(dev));
	CU(cudaStreamCreateWithFlags(&p->s, cudaStreamNonBlocking));
	CU(cudaEventCreate(&p->ev[0]));
	CU(cudaEventCreate(&p->ev[1]));
	CU(cudaMalloc(&p->d_wrong, sizeof(*p->d_wrong)));
	CU(cudaMalloc(&p->d_status, sizeof(*p->d_status)));
	CU(cudaMemset(p->d_status, 0, sizeof(*p->d_status)));

	int rc = weft_connect(p->comm, p->peer, tp, &p->conn);
	if (rc != 0)
		return pg_fail(p, rc, "weft_connect to rank %d over '%s' (the GPU benchmarks need a transport that maps "
				  "peer GPU memory: nvlink)", p->peer, tp);
	if (weft_conn_describe(p->conn, p->desc, sizeof(p->desc)) != 0)
		snprintf(p->desc, sizeof(p->desc), "%s", weft_conn_transport(p->conn));
	p->desc[sizeof(p->desc) - 1] = '\0';

	/* Which GPU each rank drives, for the header (rank 1's goes to rank 0). */
	char bus[32] = "?";
	if (cudaDeviceGetPCIBusId(bus, sizeof(bus), dev) != cudaSuccess)
		snprintf(bus, sizeof(bus), "?");
	snprintf(p->gpu, sizeof(p->gpu), "device %d (PCI %s)", dev, bus);
	p->half = (max_bytes + 4095) / 4096 * 4096;
	if (p->half == 0)
		p->half = 4096;
	p->ll_off = 2 * p->half;
	size_t ll = 0;
	if (p->a->op == WEFT_PERF_GPU_PINGPONG)
		ll = ((max_bytes + 3) / 4 + 1) * 8;
	p->len = p->ll_off + (ll + 4095) / 4096 * 4096;
	cudaError_t e = cudaMalloc(&p->buf, p->len);
	if (e != cudaSuccess) {
		p->buf = NULL;
		return cu_fail(p, e, "cudaMalloc of the benchmark's buffer (-e sets the largest size)");
	}
	/* Zero: LL packets of fresh memory carry flag 0, which no epoch is. */
	CU(cudaMemset(p->buf, 0, p->len));
	CU(cudaDeviceSynchronize());
	struct cudaPointerAttributes pa;
	CU(cudaPointerGetAttributes(&pa, p->buf));
	if (pa.type != cudaMemoryTypeDevice || pa.device != dev)
		return pg_fail(p, -EINVAL, "the benchmark's buffer is not device memory of GPU %d (type %d, device %d)",
			       dev, (int)pa.type, pa.device);
	WF(weft_mem_register(p->comm, p->buf, p->len, WEFT_MEM_CUDA, &p->mem));
	WF(weft_mem_exchange(p->mem, p->peer, &p->rmem));
	WF(weft_sem_create_on(p->comm, WEFT_MEM_CUDA, &p->sem));
	WF(weft_sem_exchange(p->sem, p->peer, &p->rsem));
	WF(weft_memchan_create(p->conn, p->rmem, p->mem, p->sem, p->rsem, &p->ch));
	WF(weft_memchan_device_handle(p->ch, &p->h));
	if (p->h.version != WEFT_DEVICE_HANDLE_VERSION || p->h.dst_len < p->len || !p->h.dst || !p->h.epoch)
		return pg_fail(p, -WEFT_ERR_MISMATCH, "weft_memchan_device_handle: version %u, %" PRIu64
				  " bytes mapped (want version %d, %zu bytes)", p->h.version, p->h.dst_len,
				  WEFT_DEVICE_HANDLE_VERSION, p->len);
	return 0;
}

/* Undoes what pg_setup did, in reverse; the peer no longer touches this
 * rank's memory (the caller met it after the last transfer). */
static int pg_teardown(struct pg *p, int quiet)
{
	int rc = 0, r;
	/* After a failure (and the abort it caused) every call may say so: once is enough. */
	if (quiet)
		rc = -WEFT_ERR_ABORTED;
	/* A kernel that never left its wait (it polls the abort flag, so this is
	 * a bug) would make every cudaFree hang, the channel's included: leave it
	 * all to the end of the process. */
	if (p->s && cudaStreamQuery(p->s) == cudaErrorNotReady) {
		fprintf(stderr, "weft-perf: rank %d: a kernel is still running; its channel and buffers stay\n", p->rank);
		return rc ? rc : -EBUSY;
	}
	if ((r = weft_memchan_destroy(p->ch)) != 0)
		rc = rc ? rc : pg_fail(p, r, "weft_memchan_destroy");
	if ((r = weft_rsem_release(p->rsem)) != 0)
		rc = rc ? rc : pg_fail(p, r, "weft_rsem_release");
	if ((r = weft_sem_destroy(p->sem)) != 0)
		rc = rc ? rc : pg_fail(p, r, "weft_sem_destroy");
	if ((r = weft_rmem_release(p->rmem)) != 0)
		rc = rc ? rc : pg_fail(p, r, "weft_rmem_release");
	if ((r = weft_mem_deregister(p->mem)) != 0)
		rc = rc ? rc : pg_fail(p, r, "weft_mem_deregister");
	if ((r = weft_conn_close(p->conn)) != 0)
		rc = rc ? rc : pg_fail(p, r, "weft_conn_close");
	if (p->buf)
		cudaFree(p->buf);
	if (p->d_wrong)
		cudaFree(p->d_wrong);
	if (p->d_status)
		cudaFree(p->d_status);
	for (int k = 0; k < 2; k++)
		if (p->ev[k])
			cudaEventDestroy(p->ev[k]);
	if (p->s)
		cudaStreamDestroy(p->s);
	return rc;
}

/* ------------------------------------------------------------------ sizes */

static uint64_t next_size(const struct weft_perf_gpu_args *a, uint64_t s)
{
	if (a->factor > 1)
		return s ? (s > UINT64_MAX / a->factor ? UINT64_MAX : s * a->factor) : 1;
	return s > UINT64_MAX - a->step_bytes ? UINT64_MAX : s + a->step_bytes;
}

/* The sweep: weft-perf resolved the defaults (perf_gpu.h). */
static void sweep(const struct weft_perf_gpu_args *a, uint64_t *lo, uint64_t *hi)
{
	*lo = a->min_bytes;
	*hi = a->max_bytes;
}

static uint64_t seed_of(const struct pg *p, uint64_t size, int cell, int sender)
{
	uint64_t x = p->a->seed ^ (size * 0x100000001B3ull) ^ ((uint64_t)cell << 40) ^ ((uint64_t)sender << 56);
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static void fmt_gbs(char *out, size_t len, double gbs)
{
	snprintf(out, len, "%8.1f", gbs);
}

/* Random bytes of the sender's seed into this rank's send area, and the
 * poison into its landing area; waits for both. */
static int prep_buffers(struct pg *p, uint64_t size, uint64_t send_seed, int fill, int poison)
{
	if (fill && size) {
		k_fill<<<264, 512, 0, p->s>>>((unsigned char *)p->buf + p->half, size, send_seed);
		CU(cudaGetLastError());
	}
	if (poison && size)
		CU(cudaMemsetAsync(p->buf, 0xff, size, p->s));
	CU(cudaMemsetAsync(p->d_status, 0, sizeof(int), p->s));
	CU(cudaStreamSynchronize(p->s));
	return 0;
}

/* Wrong bytes of this rank's landing area against the sender's seed. */
static int count_landed(struct pg *p, uint64_t size, uint64_t seed, uint64_t *wrong)
{
	unsigned long long h = 0;
	*wrong = 0;
	if (!size)
		return 0;
	CU(cudaMemsetAsync(p->d_wrong, 0, sizeof(*p->d_wrong), p->s));
	k_count<<<264, 512, 0, p->s>>>((const unsigned char *)p->buf, size, seed, p->d_wrong);
	CU(cudaGetLastError());
	CU(cudaStreamSynchronize(p->s));
	CU(cudaMemcpy(&h, p->d_wrong, sizeof(h), cudaMemcpyDeviceToHost));
	*wrong = h;
	return 0;
}

/* The end of a bandwidth cell: once both ranks are done, the receivers
 * count wrong bytes, and rank 0 gets the bandwidth (all bytes moved over the
 * slower rank's time t) and the wrong bytes of both. */
static int bw_cell_result(struct pg *p, uint64_t size, int both, int receives, uint64_t peer_seed, double t,
			  double *gbs, uint64_t *wrong)
{
	const struct weft_perf_gpu_args *a = p->a;
	int rc;
	if ((rc = pair_sync(p)) != 0)
		return rc;
	struct result mine = {t, 0}, peer = {0, 0};
	if (receives && a->check && (rc = count_landed(p, size, peer_seed, &mine.wrong)) != 0)
		return rc;
	if ((rc = gather_result(p, &mine, &peer)) != 0)
		return rc;
	if (p->rank == 0) {
		double tt = mine.t > peer.t ? mine.t : peer.t;
		*gbs = tt > 0 ? (double)size * a->iters * (both ? 2 : 1) / tt / 1e9 : 0;
		*wrong = mine.wrong + peer.wrong;
	}
	return 0;
}

/* ------------------------------------------------ put: memory channel */

/* One cell: `blocks` blocks of memory-channel copies of size bytes, push or
 * pull, one way (rank 0's data to rank 1) or both ways at once. Returns on
 * rank 0 the bandwidth (GB/s, all bytes moved over the slowest rank's time)
 * and the wrong bytes of both ranks. */
static int bw_memchan_cell(struct pg *p, uint64_t size, int pull, int both, int blocks, int cell, double *gbs,
			   uint64_t *wrong)
{
	const struct weft_perf_gpu_args *a = p->a;
	/* Who sends data, and who runs the kernel (the reader when pulling). */
	int sends = both || p->rank == 0, receives = both || p->rank == 1;
	int active = both || p->rank == (pull ? 1 : 0);
	uint64_t my_seed = seed_of(p, size, cell, p->rank), peer_seed = seed_of(p, size, cell, p->peer);
	int rc;
	if ((rc = prep_buffers(p, size, my_seed, sends, receives)) != 0 || (rc = pair_sync(p)) != 0)
		return rc;
	float ms = 0;
	/* Warm-up, then both ranks start the timed launches together: with both
	 * directions at once, a rank that starts late would run partly alone. */
	if (active && size) {
		for (int i = 0; i < a->warmup; i++)
			k_bw<<<blocks, BW_THREADS, 0, p->s>>>(p->h, pull, size, p->half);
		CU(cudaGetLastError());
		if ((rc = wait_done(p, NULL, "the warm-up copy kernels")) != 0)
			return rc;
	}
	if ((rc = pair_sync(p)) != 0)
		return rc;
	if (active && size) {
		CU(cudaEventRecord(p->ev[0], p->s));
		for (int i = 0; i < a->iters; i++)
			k_bw<<<blocks, BW_THREADS, 0, p->s>>>(p->h, pull, size, p->half);
		CU(cudaEventRecord(p->ev[1], p->s));
		CU(cudaGetLastError());
		if ((rc = wait_done(p, p->ev[1], "the memory-channel copy kernels")) != 0)
			return rc;
		CU(cudaEventElapsedTime(&ms, p->ev[0], p->ev[1]));
	}
	/* Every write has landed once both kernels are done. */
	return bw_cell_result(p, size, both, receives, peer_seed, active ? ms * 1e-3 : 0, gbs, wrong);
}

/* ------------------------------------------------ put: copy engine */

/* One cell of the copy-engine rows: -n weft_put of size bytes, one weft_flush,
 * timed on the host from the first put to the completed flush. */
static int bw_port_cell(struct pg *p, uint64_t size, int both, int cell, double *gbs, uint64_t *wrong)
{
	const struct weft_perf_gpu_args *a = p->a;
	int sends = both || p->rank == 0, receives = both || p->rank == 1;
	uint64_t my_seed = seed_of(p, size, cell, p->rank), peer_seed = seed_of(p, size, cell, p->peer);
	int rc;
	/* The copy engine's stream does not wait for ours: prep_buffers synchronizes. */
	if ((rc = prep_buffers(p, size, my_seed, sends, receives)) != 0 || (rc = pair_sync(p)) != 0)
		return rc;
	double t = 0;
	if (sends && size) {
		for (int i = 0; i < a->warmup; i++)
			WF(weft_put(p->conn, p->rmem, 0, p->mem, p->half, size));
		WF(weft_flush(p->conn));
	}
	/* Both ranks start timing together (as bw_memchan_cell). */
	if ((rc = pair_sync(p)) != 0)
		return rc;
	if (sends && size) {
		double t0 = now_s();
		for (int i = 0; i < a->iters; i++)
			WF(weft_put(p->conn, p->rmem, 0, p->mem, p->half, size));
		WF(weft_flush(p->conn));
		t = now_s() - t0;
	}
	return bw_cell_result(p, size, both, receives, peer_seed, t, gbs, wrong);
}

static void table_footer(const struct pg *p, uint64_t wrong, double best, const char *best_what)
{
	if (p->rank != 0)
		return;
	printf("# Out of bounds values : %" PRIu64 " %s\n", wrong, wrong ? "FAILED" : "OK");
	printf("# Best %s : %.1f GB/s\n#\n", best_what, best);
	fflush(stdout);
}

static int run_put(struct pg *p, uint64_t *wrong_total)
{
	const struct weft_perf_gpu_args *a = p->a;
	uint64_t lo, hi;
	sweep(a, &lo, &hi);
	int rc = 0, cell = 0;
	char c[NBLOCKS][16];

	for (int both = 0; both < 2 && rc == 0; both++)
		for (int pull = 0; pull < 2 && rc == 0; pull++) {
			uint64_t wrong_t = 0;
			double best = 0;
			if (p->rank == 0) {
				printf("# memory channel, %s, %s: %s; %d threads a block, one contiguous slice each "
				       "(weft_memchan_%s, 16-byte vectors); CUDA events over -n %d launches after -w %d\n",
				       pull ? "pull" : "push", both ? "both ways at once" : "one way",
				       both ? "rank 0 <-> rank 1, GB/s of both directions together over the slower rank's time"
					    : pull ? "rank 1 reads rank 0's buffer (GPU0 -> GPU1)"
						   : "rank 0 writes rank 1's buffer (GPU0 -> GPU1)",
				       BW_THREADS, pull ? "get" : "put", a->iters, a->warmup);
				printf("# %10s", "size");
				for (int b = 0; b < NBLOCKS; b++) {
					snprintf(c[b], sizeof(c[b]), "%d blk", bw_blocks[b]);
					printf("  %8s", c[b]);
				}
				printf("  %6s\n# %10s", "#wrong", "(B)");
				for (int b = 0; b < NBLOCKS; b++)
					printf("  %8s", "(GB/s)");
				printf("  %6s\n", "");
				fflush(stdout);
			}
			for (uint64_t size = lo; size <= hi; size = next_size(a, size)) {
				double gbs[NBLOCKS] = {0};
				uint64_t wrong = 0;
				for (int b = 0; b < NBLOCKS && rc == 0; b++) {
					uint64_t w = 0;
					rc = bw_memchan_cell(p, size, pull, both, bw_blocks[b], cell++, &gbs[b], &w);
					wrong += w;
				}
				if (rc != 0)
					break;
				if (p->rank == 0) {
					printf("%12" PRIu64, size);
					for (int b = 0; b < NBLOCKS; b++) {
						fmt_gbs(c[b], sizeof(c[b]), gbs[b]);
						printf("  %8s", c[b]);
						best = gbs[b] > best ? gbs[b] : best;
					}
					if (a->check)
						printf("  %6" PRIu64 "\n", wrong);
					else
						printf("  %6s\n", "N/A");
					fflush(stdout);
				}
				wrong_t += wrong;
				if (size == hi || next_size(a, size) <= size)
					break;
			}
			if (rc == 0)
				table_footer(p, wrong_t, best, "bandwidth");
			*wrong_total += wrong_t;
		}

	for (int both = 0; both < 2 && rc == 0; both++) {
		uint64_t wrong_t = 0;
		double best = 0;
		if (p->rank == 0) {
			printf("# port channel (copy engine), %s: weft_put x -n %d + weft_flush over %s; host clock from the "
			       "first put to the completed flush%s\n",
			       both ? "both ways at once" : "one way (rank 0 -> rank 1)", a->iters,
			       weft_conn_transport(p->conn),
			       both ? "; GB/s of both directions together over the slower rank's time" : "");
			printf("# %10s  %8s  %6s\n# %10s  %8s  %6s\n", "size", "bw", "#wrong", "(B)", "(GB/s)", "");
			fflush(stdout);
		}
		for (uint64_t size = lo; size <= hi; size = next_size(a, size)) {
			double gbs = 0;
			uint64_t wrong = 0;
			if ((rc = bw_port_cell(p, size, both, cell++, &gbs, &wrong)) != 0)
				break;
			if (p->rank == 0) {
				if (a->check)
					printf("%12" PRIu64 "  %8.1f  %6" PRIu64 "\n", size, gbs, wrong);
				else
					printf("%12" PRIu64 "  %8.1f  %6s\n", size, gbs, "N/A");
				fflush(stdout);
				best = gbs > best ? gbs : best;
			}
			wrong_t += wrong;
			if (size == hi || next_size(a, size) <= size)
				break;
		}
		if (rc == 0)
			table_footer(p, wrong_t, best, "bandwidth");
		*wrong_total += wrong_t;
	}
	return rc;
}

/* ------------------------------------------------------------- ping-pong */

enum pp_mode { PP_LL_KERNEL, PP_LL_LAUNCH, PP_SEM_KERNEL, PP_SEM_LAUNCH, PP_MODES };
static const char *const pp_names[PP_MODES] = {"LL8 kern", "LL8 lnch", "sem kern", "sem lnch"};

static unsigned pp_threads(uint64_t size)
{
	uint64_t npk = size ? (size + 3) / 4 : 1;
	uint64_t t = (npk + 31) / 32 * 32;
	return t > 1024 ? 1024 : (unsigned)t;
}

static void pp_launch(struct pg *p, int sem, uint64_t steps, uint64_t size)
{
	unsigned th = pp_threads(size);
	if (sem)
		k_pp_sem<<<1, th, 0, p->s>>>(p->h, p->rank, steps, size, p->half, p->d_status);
	else
		k_pp_ll<<<1, th, 0, p->s>>>(p->h, p->rank, steps, size, p->half, p->ll_off, p->d_status);
}

/* `launches` launches of `steps` round trips each, at most two chunks of
 * PP_CHUNK launches ahead of the GPU, so that a peer that never answers cannot
 * block the host in a full launch queue. */
static int pp_enqueue(struct pg *p, int sem, uint64_t launches, uint64_t steps, uint64_t size, cudaEvent_t chunk[2])
{
	int rc;
	for (uint64_t i = 0, k = 0; i < launches; k++) {
		for (uint64_t j = 0; j < PP_CHUNK && i < launches; j++, i++)
			pp_launch(p, sem, steps, size);
		CU(cudaGetLastError());
		CU(cudaEventRecord(chunk[k % 2], p->s));
		if (k > 0 && (rc = wait_done(p, chunk[(k + 1) % 2], "the ping-pong kernels")) != 0)
			return rc;
	}
	return 0;
}

/* One mode of one size: -w warm-up and -n timed iterations of PP_STEPS round
 * trips; half the mean round trip in us (the same on both ranks; rank 0's). */
static int pp_time(struct pg *p, enum pp_mode m, uint64_t size, cudaEvent_t chunk[2], double *us)
{
	const struct weft_perf_gpu_args *a = p->a;
	int sem = m == PP_SEM_KERNEL || m == PP_SEM_LAUNCH, per_launch = m == PP_LL_LAUNCH || m == PP_SEM_LAUNCH;
	uint64_t warm = (uint64_t)a->warmup * PP_STEPS, timed = (uint64_t)a->iters * PP_STEPS;
	int rc;
	if ((rc = prep_buffers(p, 0, 0, 0, 0)) != 0 || (rc = pair_sync(p)) != 0)
		return rc;
	if (per_launch) {
		if ((rc = pp_enqueue(p, sem, warm, 1, size, chunk)) != 0)
			return rc;
	} else if (warm) {
		pp_launch(p, sem, warm, size);
	}
	CU(cudaEventRecord(p->ev[0], p->s));
	if (per_launch) {
		if ((rc = pp_enqueue(p, sem, timed, 1, size, chunk)) != 0)
			return rc;
	} else {
		pp_launch(p, sem, timed, size);
	}
	CU(cudaEventRecord(p->ev[1], p->s));
	CU(cudaGetLastError());
	if ((rc = wait_done(p, p->ev[1], "the ping-pong kernels")) != 0 ||
	    (rc = check_status(p, "the ping-pong kernels")) != 0)
		return rc;
	float ms = 0;
	CU(cudaEventElapsedTime(&ms, p->ev[0], p->ev[1]));
	*us = ms * 1e3 / (double)timed / 2;
	return 0;
}

/* One checked round trip of each kind: rank 0's random bytes, landing areas
 * poisoned on both ranks; rank 1 must hold them after the first half, rank 0
 * after the echo. Wrong bytes of both ranks, on rank 0. */
static int pp_check(struct pg *p, int sem, uint64_t size, int cell, uint64_t *wrong)
{
	uint64_t seed = seed_of(p, size, cell, 0);
	int rc;
	if ((rc = prep_buffers(p, size, seed, p->rank == 0, 1)) != 0 || (rc = pair_sync(p)) != 0)
		return rc;
	pp_launch(p, sem, 1, size);
	CU(cudaGetLastError());
	if ((rc = wait_done(p, NULL, "the checked ping-pong")) != 0 || (rc = check_status(p, "the checked ping-pong")) != 0)
		return rc;
	struct result mine = {0, 0}, peer = {0, 0};
	if ((rc = count_landed(p, size, seed, &mine.wrong)) != 0 || (rc = pair_sync(p)) != 0)
		return rc;
	if ((rc = gather_result(p, &mine, &peer)) != 0)
		return rc;
	*wrong = mine.wrong + peer.wrong;
	return 0;
}

static int run_pingpong(struct pg *p, uint64_t *wrong_total)
{
	const struct weft_perf_gpu_args *a = p->a;
	uint64_t lo, hi;
	sweep(a, &lo, &hi);
	cudaEvent_t chunk[2] = {NULL, NULL};
	int rc = 0, cell = 0;
	double first[PP_MODES] = {0};
	uint64_t first_size = 0, wrong_t = 0;
	int have_first = 0;

	if (p->rank == 0) {
		printf("# pingpong: GPU0 -> GPU1 -> GPU0 over a memory channel, one block a side; time is HALF the round "
		       "trip (as the host pingpong), mean over -n %d x %d round trips after -w %d x %d, CUDA events\n",
		       a->iters, PP_STEPS, a->warmup, PP_STEPS);
		printf("#   LL8 kern: LL8 packets (4 data bytes + flag in one 8-byte store; the data carries its own "
		       "flag), one persistent kernel\n");
		printf("#   LL8 lnch: the same, one kernel launch per round trip\n");
		printf("#   sem kern: weft_memchan_put + weft_memchan_signal (release, system scope) / "
		       "weft_memchan_wait (acquire), one persistent kernel\n");
		printf("#   sem lnch: the same, one kernel launch per round trip\n");
		printf("# anchors (bare flag ROUND trip, same machine kind): %.2f us relaxed, %.2f us release/acquire; "
		       "issue 4's target: LL round trip <= 1.4 us\n",
		       ANCHOR_RELAXED_US, ANCHOR_ACQREL_US);
		printf("# %10s", "size");
		for (int m = 0; m < PP_MODES; m++)
			printf("  %8s", pp_names[m]);
		printf("  %6s\n# %10s", "#wrong", "(B)");
		for (int m = 0; m < PP_MODES; m++)
			printf("  %8s", "(us)");
		printf("  %6s\n", "");
		fflush(stdout);
	}
	CU(cudaEventCreateWithFlags(&chunk[0], cudaEventDisableTiming));
	if (cudaEventCreateWithFlags(&chunk[1], cudaEventDisableTiming) != cudaSuccess) {
		cudaEventDestroy(chunk[0]);
		return cu_fail(p, cudaErrorMemoryAllocation, "cudaEventCreateWithFlags");
	}
	/* One untimed pass of every mode first: the first launches of a process
	 * (module loading, the first peer accesses) would land in the first row. */
	for (int m = 0; m < PP_MODES && rc == 0; m++) {
		double ignored;
		rc = pp_time(p, (enum pp_mode)m, lo, chunk, &ignored);
	}
	for (uint64_t size = lo; size <= hi && rc == 0; size = next_size(a, size)) {
		double us[PP_MODES] = {0};
		uint64_t wrong = 0;
		for (int m = 0; m < PP_MODES && rc == 0; m++)
			rc = pp_time(p, (enum pp_mode)m, size, chunk, &us[m]);
		for (int sem = 0; sem < 2 && rc == 0 && a->check; sem++) {
			uint64_t w = 0;
			rc = pp_check(p, sem, size, cell++, &w);
			wrong += w;
		}
		if (rc != 0)
			break;
		if (p->rank == 0) {
			printf("%12" PRIu64, size);
			for (int m = 0; m < PP_MODES; m++)
				printf("  %8.2f", us[m]);
			if (a->check)
				printf("  %6" PRIu64 "\n", wrong);
			else
				printf("  %6s\n", "N/A");
			fflush(stdout);
		}
		if (!have_first) {
			memcpy(first, us, sizeof(first));
			first_size = size;
			have_first = 1;
		}
		wrong_t += wrong;
		if (size == hi || next_size(a, size) <= size)
			break;
	}
	cudaEventDestroy(chunk[0]);
	cudaEventDestroy(chunk[1]);
	if (rc == 0 && p->rank == 0) {
		printf("# Out of bounds values : %" PRIu64 " %s\n", wrong_t, wrong_t ? "FAILED" : "OK");
		printf("# Round trip at %" PRIu64 " B: LL8 persistent %.2f us (anchor %.2f relaxed, target <= 1.4), "
		       "launch per step %.2f us; sem persistent %.2f us (anchor %.2f release/acquire), launch per step "
		       "%.2f us\n#\n",
		       first_size, 2 * first[PP_LL_KERNEL], ANCHOR_RELAXED_US, 2 * first[PP_LL_LAUNCH],
		       2 * first[PP_SEM_KERNEL], ANCHOR_ACQREL_US, 2 * first[PP_SEM_LAUNCH]);
		fflush(stdout);
	}
	*wrong_total += wrong_t;
	return rc;
}

/* ------------------------------------------------------------ entry points */

PG_API int weft_perf_gpu_probe(uint32_t abi, char *why, size_t len)
{
	if (abi != WEFT_PERF_GPU_ABI) {
		snprintf(why, len, "%s speaks interface version %d, weft-perf %u (install matching builds)",
			 WEFT_PERF_GPU_LIB_NAME, WEFT_PERF_GPU_ABI, abi);
		return -WEFT_ERR_ABI;
	}
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n < 1) {
		snprintf(why, len, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
		return -ENODEV;
	}
	return 0;
}

PG_API int weft_perf_gpu_rank_setup(int local_rank, char *why, size_t len)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e == cudaSuccess && n < 1)
		e = cudaErrorNoDevice;
	if (e == cudaSuccess)
		e = cudaSetDevice(local_rank % n);
	/* cudaFree(0) makes the primary context current, where the transport finds it. */
	if (e == cudaSuccess)
		e = cudaFree(0);
	if (e != cudaSuccess) {
		snprintf(why, len, "local rank %d: %s", local_rank, cudaGetErrorString(e));
		return -ENODEV;
	}
	return 0;
}

PG_API int weft_perf_gpu_run(const struct weft_perf_gpu_args *a, weft_comm_t *comm, uint64_t *wrong)
{
	struct pg pg;
	struct pg *p = &pg;
	memset(p, 0, sizeof(*p));
	p->a = a;
	p->comm = comm;
	p->rank = weft_comm_rank(comm);
	p->peer = 1 - p->rank;
	p->timeout_s = 60;
	const char *t = getenv("WEFT_PERF_GPU_TIMEOUT");
	if (t && *t) {
		char *end;
		double v = strtod(t, &end);
		if (*end || !(v > 0)) {
			fprintf(stderr, "weft-perf: WEFT_PERF_GPU_TIMEOUT='%s' is not a positive number of seconds\n", t);
			return -EINVAL;
		}
		p->timeout_s = v;
	}
	if (a->abi != WEFT_PERF_GPU_ABI)
		return pg_fail(p, -WEFT_ERR_ABI, "%s: interface version %u, want %d", WEFT_PERF_GPU_LIB_NAME, a->abi,
			       WEFT_PERF_GPU_ABI);
	uint64_t total = 0;
	int rc = 0;
	if (p->rank < 2) {
		uint64_t lo, hi;
		sweep(a, &lo, &hi);
		rc = pg_setup(p, hi);
		char peer_gpu[sizeof(p->gpu)] = "?";
		if (rc == 0) {
			rc = p->rank == 1 ? weft_comm_send(comm, 0, TAG_RESULT, p->gpu, sizeof(p->gpu))
					  : weft_comm_recv(comm, 1, TAG_RESULT, peer_gpu, sizeof(peer_gpu));
			peer_gpu[sizeof(peer_gpu) - 1] = '\0';
			if (rc)
				pg_fail(p, rc, "sending the device names to rank 0");
		}
		if (rc == 0 && p->rank == 0) {
			printf("# rank 0: %s; rank 1: %s\n", p->gpu, peer_gpu);
			printf("# transport: %s (rank 0 -> rank 1: %s); sizes %" PRIu64 " to %" PRIu64 " B%s\n",
			       weft_conn_transport(p->conn), p->desc, lo, hi,
			       a->sizes_set ? "" : " (the default sweep; -b/-e choose)");
			printf("#\n");
			fflush(stdout);
		}
		if (rc == 0)
			rc = a->op == WEFT_PERF_GPU_PUT ? run_put(p, &total) : run_pingpong(p, &total);
		/* The peer may still read this rank's memory (pull) until both are done. */
		if (rc == 0)
			rc = pair_sync(p);
		if (rc != 0) {
			/* The peer may wait in a kernel or a bootstrap call: end it now. */
			weft_comm_abort(comm);
		}
		int trc = pg_teardown(p, rc != 0);
		rc = rc ? rc : trc;
	}
	if (rc == 0 && (rc = weft_comm_barrier(comm)) != 0)
		pg_fail(p, rc, "weft_comm_barrier");
	if (rc == 0)
		*wrong = total;
	return rc;
}
