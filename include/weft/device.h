/* SPDX-License-Identifier: Apache-2.0 */
/* weft: device-side channels. The structs are plain C, filled on the host by
 * weft_memchan_device_handle / weft_port_device_handle and copied to the GPU;
 * the functions (compiled only under nvcc, or clang/hipcc compiling HIP for
 * AMD GPUs: __HIP__, __HIP_PLATFORM_AMD__) let kernels move data and synchronize
 * without the host. Every wait also polls the communicator's host-mapped
 * abort flag, so a kernel never outlives a dead peer. */
#ifndef WEFT_DEVICE_H
#define WEFT_DEVICE_H

#include <stdint.h>

#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_DEVICE_HANDLE_VERSION 1

/* A memory channel as a kernel sees it. State that changes inside kernels
 * (the next expected token, the last value signalled, the LL epoch) lives in
 * device memory owned by the channel, so a captured graph replays any number
 * of times and nothing is ever reset. */
struct weft_memchan_dev {
	uint32_t version;        /* WEFT_DEVICE_HANDLE_VERSION */
	uint32_t flags;
	void *dst;               /* the peer's region, mapped into this GPU */
	uint64_t dst_len;
	void *src;               /* this rank's region */
	uint64_t src_len;
	uint64_t *sem;           /* this rank's token, raised by the peer */
	uint64_t *rsem;          /* the peer's token, mapped */
	uint64_t *expected;      /* device memory: last value waited for on sem */
	uint64_t *outbound;      /* device memory: last value signalled to rsem */
	uint32_t *epoch;         /* device memory: LL packet epoch, advanced per use */
	volatile uint32_t *abort_flag; /* host-mapped; non-zero: stop waiting */
};

/* A port channel's FIFO as a kernel sees it. The triggers are those of
 * core/port.c: two 64-bit words, word 0 written last with release order,
 * never 0, low 4 bits the kind. */
struct weft_port_dev {
	uint32_t version;
	uint32_t depth;          /* slots */
	uint64_t *head;          /* device-side reservation counter */
	volatile uint64_t *tail; /* host-mapped: slots the proxy has consumed */
	volatile uint64_t *done; /* host-mapped: one past the last completed flush position */
	uint64_t *slots;         /* host-mapped: depth x 2 words */
	volatile uint32_t *abort_flag;
};

/* Host side: the small integers a port trigger names objects by (a kernel
 * passes them to weft_port_put / weft_port_signal below). Valid while the
 * object lives. Errors: -EINVAL (NULL). Thread safety: any thread. Blocking: no.
 * A port whose weft_port_device_handle was called takes triggers from kernels
 * only: host pushes return -EBUSY; weft_port_destroy then waits until the
 * proxy consumed what kernels pushed (they must have finished) and the
 * transport completed it. */
WEFT_API int weft_mem_port_id(const weft_mem_t *mem, uint32_t *id);
WEFT_API int weft_rmem_port_id(const weft_rmem_t *rmem, uint32_t *id);
WEFT_API int weft_rsem_port_id(const weft_rsem_t *rsem, uint32_t *id);

/* Trigger kinds and fields, as in core/port.c. */
#define WEFT_TRIG_PUT 1u
#define WEFT_TRIG_SIGNAL 2u
#define WEFT_TRIG_FLUSH 3u

/* Return codes of device waits. */
#define WEFT_DEV_OK 0
#define WEFT_DEV_ABORTED 1

#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__)
#define WEFT_DEV_CUDA 1
#elif defined(__HIP__)
/* clang compiling HIP: the device side is AMD's (HIP on NVIDIA is nvcc). */
#define WEFT_DEV_HIP 1
#include <hip/hip_runtime.h>
#if !defined(__HIP_PLATFORM_AMD__)
#error "weft/device.h: HIP compilation without __HIP_PLATFORM_AMD__"
#endif
#endif

#if defined(WEFT_DEV_CUDA) || defined(WEFT_DEV_HIP)
/* ------------------------------------------------------- device functions */
#define WEFT_DEV static __device__ __forceinline__

/* Polls of the abort flag: one every this many spins (the flag crosses PCIe). */
#define WEFT_DEV_ABORT_EVERY 1024

/* The memory-model layer: system-scope loads and stores (the peer GPU and the
 * host see them) and reads of host-written words. CUDA: PTX; AMD: the
 * compiler's HIP atomics at system scope, which on gfx9 emit the cache
 * writeback/invalidate that release/acquire need across xGMI and PCIe.
 * WEFT_DEV_LD_HOST32/64 read a word the host (or the proxy) writes. */
#if defined(WEFT_DEV_CUDA)
#define WEFT_DEV_LD_HOST32(p) (*(p))
#define WEFT_DEV_LD_HOST64(p) (*(p))

WEFT_DEV uint64_t weft_ld_acquire_sys(const uint64_t *p)
{
	uint64_t v;
	asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
}

WEFT_DEV uint64_t weft_ld_relaxed_sys(const uint64_t *p)
{
	uint64_t v;
	asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
}

WEFT_DEV void weft_st_release_sys(uint64_t *p, uint64_t v)
{
	asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

WEFT_DEV void weft_st_relaxed_sys(uint64_t *p, uint64_t v)
{
	asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
#else /* WEFT_DEV_HIP */
#define WEFT_DEV_LD_HOST32(p)                                                                                         \
	__hip_atomic_load((const uint32_t *)(uintptr_t)(p), __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM)
#define WEFT_DEV_LD_HOST64(p)                                                                                         \
	__hip_atomic_load((const uint64_t *)(uintptr_t)(p), __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM)

WEFT_DEV uint64_t weft_ld_acquire_sys(const uint64_t *p)
{
	return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
}

WEFT_DEV uint64_t weft_ld_relaxed_sys(const uint64_t *p)
{
	return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}

WEFT_DEV void weft_st_release_sys(uint64_t *p, uint64_t v)
{
	__hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}

WEFT_DEV void weft_st_relaxed_sys(uint64_t *p, uint64_t v)
{
	__hip_atomic_store(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
#endif

WEFT_DEV int weft_dev_aborted(const volatile uint32_t *flag)
{
	return flag != NULL && WEFT_DEV_LD_HOST32(flag) != 0;
}

/* Copies bytes from src to dst with the threads [tid, nthreads) of a group:
 * 16-byte vectors when both sides share their alignment modulo 16 (head and
 * tail bytewise), 4-byte words or bytes otherwise. Any size, any alignment. */
WEFT_DEV void weft_dev_copy(void *dst, const void *src, uint64_t bytes, uint32_t tid, uint32_t nthreads)
{
	char *d = (char *)dst;
	const char *s = (const char *)src;
	uintptr_t da = (uintptr_t)d, sa = (uintptr_t)s;
	if ((da & 15) == (sa & 15)) {
		uint64_t head = (16 - (da & 15)) & 15;
		if (head > bytes)
			head = bytes;
		for (uint64_t i = tid; i < head; i += nthreads)
			d[i] = s[i];
		uint64_t nvec = (bytes - head) / 16;
		uint4 *dv = (uint4 *)(d + head);
		const uint4 *sv = (const uint4 *)(s + head);
		uint64_t i = tid;
		/* Four loads in flight before the first store. */
		for (; i + 3 * (uint64_t)nthreads < nvec; i += 4 * (uint64_t)nthreads) {
			uint4 a = sv[i], b = sv[i + nthreads], c = sv[i + 2 * nthreads], e = sv[i + 3 * nthreads];
			dv[i] = a;
			dv[i + nthreads] = b;
			dv[i + 2 * nthreads] = c;
			dv[i + 3 * nthreads] = e;
		}
		for (; i < nvec; i += nthreads)
			dv[i] = sv[i];
		uint64_t done = head + nvec * 16;
		for (uint64_t j = done + tid; j < bytes; j += nthreads)
			d[j] = s[j];
	} else if ((da & 3) == (sa & 3)) {
		uint64_t head = (4 - (da & 3)) & 3;
		if (head > bytes)
			head = bytes;
		for (uint64_t i = tid; i < head; i += nthreads)
			d[i] = s[i];
		uint64_t nw = (bytes - head) / 4;
		for (uint64_t i = tid; i < nw; i += nthreads)
			((uint32_t *)(d + head))[i] = ((const uint32_t *)(s + head))[i];
		for (uint64_t j = head + nw * 4 + tid; j < bytes; j += nthreads)
			d[j] = s[j];
	} else {
		for (uint64_t i = tid; i < bytes; i += nthreads)
			d[i] = s[i];
	}
}

/* Memory channel: write src[src_off..] to the peer's dst[dst_off..] (push). */
WEFT_DEV void weft_memchan_put(const struct weft_memchan_dev *c, uint64_t dst_off, uint64_t src_off, uint64_t bytes,
			       uint32_t tid, uint32_t nthreads)
{
	weft_dev_copy((char *)c->dst + dst_off, (const char *)c->src + src_off, bytes, tid, nthreads);
}

/* Read the peer's dst[dst_off..] into src[src_off..] (pull). */
WEFT_DEV void weft_memchan_get(const struct weft_memchan_dev *c, uint64_t dst_off, uint64_t src_off, uint64_t bytes,
			       uint32_t tid, uint32_t nthreads)
{
	weft_dev_copy((char *)c->src + src_off, (const char *)c->dst + dst_off, bytes, tid, nthreads);
}

/* Raise the peer's token by one, after every store this thread made (and, with
 * a barrier before it, its group's): release at system scope. One thread. */
WEFT_DEV void weft_memchan_signal(const struct weft_memchan_dev *c)
{
	uint64_t v = *c->outbound + 1;
	*c->outbound = v;
	weft_st_release_sys(c->rsem, v);
}

/* As signal, without ordering earlier stores (flags that carry no data). */
WEFT_DEV void weft_memchan_signal_relaxed(const struct weft_memchan_dev *c)
{
	uint64_t v = *c->outbound + 1;
	*c->outbound = v;
	weft_st_relaxed_sys(c->rsem, v);
}

/* Non-blocking: 1 when the peer's next signal has arrived (and consumes it). */
WEFT_DEV int weft_memchan_poll(const struct weft_memchan_dev *c)
{
	uint64_t want = *c->expected + 1;
	if (weft_ld_acquire_sys(c->sem) < want)
		return 0;
	*c->expected = want;
	return 1;
}

/* Waits for the peer's next signal; acquire: its data is visible after. One
 * thread. WEFT_DEV_ABORTED when the communicator was aborted or a peer died. */
WEFT_DEV int weft_memchan_wait(const struct weft_memchan_dev *c)
{
	uint64_t want = *c->expected + 1;
	for (uint32_t n = 0;; n++) {
		if (weft_ld_acquire_sys(c->sem) >= want)
			break;
		if (n % WEFT_DEV_ABORT_EVERY == WEFT_DEV_ABORT_EVERY - 1 && weft_dev_aborted(c->abort_flag))
			return WEFT_DEV_ABORTED;
	}
	*c->expected = want;
	return WEFT_DEV_OK;
}

WEFT_DEV int weft_memchan_wait_relaxed(const struct weft_memchan_dev *c)
{
	uint64_t want = *c->expected + 1;
	for (uint32_t n = 0;; n++) {
		if (weft_ld_relaxed_sys(c->sem) >= want)
			break;
		if (n % WEFT_DEV_ABORT_EVERY == WEFT_DEV_ABORT_EVERY - 1 && weft_dev_aborted(c->abort_flag))
			return WEFT_DEV_ABORTED;
	}
	*c->expected = want;
	return WEFT_DEV_OK;
}

/* ------------------------------------------------------------- LL packets
 * Data and flag travel in one store, so a reader that sees the flag sees the
 * data: no fence, no separate signal. Flags are epochs (never 0, the value of
 * fresh memory). An epoch is taken once per use of a packet buffer:
 * weft_ll_epoch_next by one thread, shared with the group, weft_ll_epoch_commit
 * after the group is done. */
WEFT_DEV uint32_t weft_ll_epoch_next(const struct weft_memchan_dev *c)
{
	uint32_t e = *c->epoch + 1;
	return e ? e : 1;
}

WEFT_DEV void weft_ll_epoch_commit(const struct weft_memchan_dev *c, uint32_t e)
{
	*c->epoch = e;
}

/* 8-byte packet: 4 data bytes + 4 flag bytes. AMD: one 64-bit system-scope
 * store (data in the low word, at the lower address, as on CUDA). */
WEFT_DEV void weft_ll8_write(uint64_t *pkt, uint32_t data, uint32_t flag)
{
#if defined(WEFT_DEV_CUDA)
	asm volatile("st.volatile.global.v2.u32 [%0], {%1, %2};" ::"l"(pkt), "r"(data), "r"(flag) : "memory");
#else
	weft_st_relaxed_sys(pkt, (uint64_t)data | (uint64_t)flag << 32);
#endif
}

/* Waits until pkt carries flag; returns WEFT_DEV_OK and the data in *data. */
WEFT_DEV int weft_ll8_read(const uint64_t *pkt, uint32_t flag, uint32_t *data, const volatile uint32_t *abort_flag)
{
	uint32_t d, f;
	for (uint32_t n = 0;; n++) {
#if defined(WEFT_DEV_CUDA)
		asm volatile("ld.volatile.global.v2.u32 {%0, %1}, [%2];" : "=r"(d), "=r"(f) : "l"(pkt) : "memory");
#else
		uint64_t v = weft_ld_relaxed_sys(pkt);
		d = (uint32_t)v;
		f = (uint32_t)(v >> 32);
#endif
		if (f == flag)
			break;
		if (n % WEFT_DEV_ABORT_EVERY == WEFT_DEV_ABORT_EVERY - 1 && weft_dev_aborted(abort_flag))
			return WEFT_DEV_ABORTED;
	}
	*data = d;
	return WEFT_DEV_OK;
}

/* 16-byte packet: 2 x (4 data + 4 flag), 8 data bytes per store. Each half
 * carries its own flag, so AMD, which has no 128-bit atomic store, writes the
 * halves as two 64-bit system-scope stores: a reader that sees both flags has
 * both halves, whatever order they land in. */
WEFT_DEV void weft_ll16_write(uint4 *pkt, uint64_t data, uint32_t flag)
{
#if defined(WEFT_DEV_CUDA)
	asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(pkt), "r"((uint32_t)data), "r"(flag),
		     "r"((uint32_t)(data >> 32)), "r"(flag)
		     : "memory");
#else
	uint64_t *h = (uint64_t *)pkt;
	weft_st_relaxed_sys(h, (data & 0xffffffffu) | (uint64_t)flag << 32);
	weft_st_relaxed_sys(h + 1, (data >> 32) | (uint64_t)flag << 32);
#endif
}

WEFT_DEV int weft_ll16_read(const uint4 *pkt, uint32_t flag, uint64_t *data, const volatile uint32_t *abort_flag)
{
	uint32_t a, f1, b, f2;
	for (uint32_t n = 0;; n++) {
#if defined(WEFT_DEV_CUDA)
		asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
			     : "=r"(a), "=r"(f1), "=r"(b), "=r"(f2)
			     : "l"(pkt)
			     : "memory");
#else
		const uint64_t *h = (const uint64_t *)pkt;
		uint64_t lo = weft_ld_relaxed_sys(h), hi = weft_ld_relaxed_sys(h + 1);
		a = (uint32_t)lo;
		f1 = (uint32_t)(lo >> 32);
		b = (uint32_t)hi;
		f2 = (uint32_t)(hi >> 32);
#endif
		if (f1 == flag && f2 == flag)
			break;
		if (n % WEFT_DEV_ABORT_EVERY == WEFT_DEV_ABORT_EVERY - 1 && weft_dev_aborted(abort_flag))
			return WEFT_DEV_ABORTED;
	}
	*data = (uint64_t)a | (uint64_t)b << 32;
	return WEFT_DEV_OK;
}

/* ----------------------------------------------------------- port channel */
/* Pushes one trigger; waits only while the FIFO is full. Returns its position
 * (for flush), or UINT64_MAX when aborted. */
WEFT_DEV uint64_t weft_port_push(const struct weft_port_dev *p, uint64_t w0, uint64_t w1)
{
	unsigned long long h = atomicAdd((unsigned long long *)p->head, 1ull);
	for (uint32_t n = 0; h - WEFT_DEV_LD_HOST64(p->tail) >= p->depth; n++)
		if (n % WEFT_DEV_ABORT_EVERY == WEFT_DEV_ABORT_EVERY - 1 && weft_dev_aborted(p->abort_flag))
			return UINT64_MAX;
	uint64_t *slot = p->slots + 2 * (h % p->depth);
	weft_st_relaxed_sys(slot + 1, w1);
	weft_st_release_sys(slot, w0);
	return h;
}

/* put of len bytes from the registered memory with id src_id at src_off to the
 * peer's imported region dst_id at dst_off (ids: the core's, below 2^14;
 * offsets and len below 4 GiB). */
WEFT_DEV uint64_t weft_port_put(const struct weft_port_dev *p, uint32_t dst_id, uint64_t dst_off, uint32_t src_id,
				uint64_t src_off, uint32_t len)
{
	uint64_t w0 = WEFT_TRIG_PUT | (uint64_t)dst_id << 4 | (uint64_t)src_id << 18 | (uint64_t)len << 32;
	return weft_port_push(p, w0, (dst_off & 0xffffffffu) | src_off << 32);
}

WEFT_DEV uint64_t weft_port_signal(const struct weft_port_dev *p, uint32_t rsem_id, uint64_t value)
{
	return weft_port_push(p, WEFT_TRIG_SIGNAL | (uint64_t)rsem_id << 4, value);
}

/* Pushes a flush and waits until the proxy has completed it. */
WEFT_DEV int weft_port_flush(const struct weft_port_dev *p)
{
	uint64_t pos = weft_port_push(p, WEFT_TRIG_FLUSH, 0);
	if (pos == UINT64_MAX)
		return WEFT_DEV_ABORTED;
	for (uint32_t n = 0; WEFT_DEV_LD_HOST64(p->done) <= pos; n++)
		if (n % WEFT_DEV_ABORT_EVERY == WEFT_DEV_ABORT_EVERY - 1 && weft_dev_aborted(p->abort_flag))
			return WEFT_DEV_ABORTED;
	return WEFT_DEV_OK;
}
#endif /* WEFT_DEV_CUDA || WEFT_DEV_HIP */
#endif /* WEFT_DEVICE_H */
