/* SPDX-License-Identifier: Apache-2.0 */
/* Compile check of include/weft/device.h under HIP (AMD): kernels that call
 * every device function the way a collective would. Built for gfx90a by
 * plugins/xgmi/CMakeLists.txt; never run here (no AMD GPU anywhere). The same
 * file compiles under nvcc (it includes nothing HIP-specific itself). */
#include <weft/device.h>

/* Memory channel: push a block, signal, wait for the peer's block, pull it
 * back (the pull half of a ping-pong), relaxed flags for pure barriers. */
extern "C" __global__ void weft_hip_memchan(const struct weft_memchan_dev *c, uint64_t bytes, int *status)
{
	uint32_t tid = threadIdx.x, n = blockDim.x;
	weft_memchan_put(c, 0, 0, bytes, tid, n);
	__syncthreads();
	if (tid == 0) {
		weft_memchan_signal(c);
		status[0] = weft_memchan_wait(c);
	}
	__syncthreads();
	weft_memchan_get(c, bytes, bytes, bytes, tid, n);
	__syncthreads();
	if (tid == 0) {
		weft_memchan_signal_relaxed(c);
		status[1] = weft_memchan_wait_relaxed(c);
		status[2] = weft_memchan_poll(c);
		status[3] = weft_dev_aborted(c->abort_flag);
	}
}

/* Raw system-scope accessors and the group copy on unaligned ranges. */
extern "C" __global__ void weft_hip_raw(uint64_t *a, uint64_t *b, char *dst, const char *src, uint64_t bytes)
{
	if (threadIdx.x == 0) {
		uint64_t v = weft_ld_acquire_sys(a) + weft_ld_relaxed_sys(b);
		weft_st_relaxed_sys(b, v);
		weft_st_release_sys(a, v + 1);
	}
	weft_dev_copy(dst + 1, src + 1, bytes, threadIdx.x, blockDim.x);
	weft_dev_copy(dst + 3, src + 7, bytes, threadIdx.x, blockDim.x);
}

/* LL8 and LL16: write to the peer's packets, read our own, one epoch per use. */
extern "C" __global__ void weft_hip_ll(const struct weft_memchan_dev *c, uint32_t npkt, uint64_t *out, int *status)
{
	__shared__ uint32_t epoch;
	if (threadIdx.x == 0)
		epoch = weft_ll_epoch_next(c);
	__syncthreads();
	uint64_t *dst8 = (uint64_t *)c->dst;
	const uint64_t *src8 = (const uint64_t *)c->src;
	uint4 *dst16 = (uint4 *)((char *)c->dst + 8 * (uint64_t)npkt);
	const uint4 *src16 = (const uint4 *)((const char *)c->src + 8 * (uint64_t)npkt);
	int st = WEFT_DEV_OK;
	for (uint32_t i = threadIdx.x; i < npkt; i += blockDim.x) {
		weft_ll8_write(dst8 + i, i * 3u, epoch);
		weft_ll16_write(dst16 + i, (uint64_t)i << 33 | i, epoch);
		uint32_t d8 = 0;
		uint64_t d16 = 0;
		st |= weft_ll8_read(src8 + i, epoch, &d8, c->abort_flag);
		st |= weft_ll16_read(src16 + i, epoch, &d16, c->abort_flag);
		out[i] = d8 + d16;
	}
	if (st != WEFT_DEV_OK)
		atomicOr(status, st);
	__syncthreads();
	if (threadIdx.x == 0)
		weft_ll_epoch_commit(c, epoch);
}

/* Port channel: GPU-initiated put + signal, then a flush that waits. */
extern "C" __global__ void weft_hip_port(const struct weft_port_dev *p, uint32_t dst_id, uint32_t src_id,
					 uint32_t len, int *status)
{
	uint64_t a = weft_port_put(p, dst_id, (uint64_t)threadIdx.x * len, src_id, (uint64_t)threadIdx.x * len, len);
	uint64_t b = weft_port_signal(p, dst_id, threadIdx.x + 1);
	uint64_t c = weft_port_push(p, WEFT_TRIG_SIGNAL | (uint64_t)src_id << 4, 7);
	if (a == UINT64_MAX || b == UINT64_MAX || c == UINT64_MAX)
		atomicOr(status, WEFT_DEV_ABORTED);
	__syncthreads();
	if (threadIdx.x == 0)
		atomicOr(status, weft_port_flush(p));
}
