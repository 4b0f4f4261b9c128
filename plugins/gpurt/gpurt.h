/* SPDX-License-Identifier: Apache-2.0 */
/* gpurt: the one layer through which GPU plugins reach the GPU runtime and
 * driver. Every call returns 0 or a negative code and logs the runtime's own
 * error string, so plugins never see vendor types or codes. One interface,
 * two backends: gpurt.c (runtime-neutral) is linked with either gpurt_cuda.c
 * (nvlink, GPU tests) or gpurt_hip.c (xgmi). Compiled into each GPU plugin
 * (and the GPU tests), never a plugin of its own. Where a call's comment names
 * a CUDA function, the HIP backend uses its hip* twin. */
#ifndef WEFT_GPURT_H
#define WEFT_GPURT_H

#include <stddef.h>
#include <stdint.h>

#include <weft/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where log lines go: a plugin passes its core table; NULL writes to stderr
 * (tests). who prefixes every line ("nvlink"). */
void grt_set_logger(const struct weft_core_api *core, const char *who);

/* Loads the driver's entry points through the runtime (the driver library is
 * never linked). -WEFT_ERR_NO_DEVICE when no driver or no device is present
 * (logged at info level only: a host without GPUs is normal). Idempotent. */
int grt_init(void);
/* A short reason after grt_init failed ("no CUDA driver", ...). */
const char *grt_init_error(void);

int grt_device_count(int *n);
int grt_set_device(int dev);
int grt_get_device(int *dev);
/* Name ("NVIDIA H200") and PCI bus id ("0000:18:00.0") of a device. */
int grt_device_name(int dev, char *name, size_t len);
int grt_device_pci(int dev, char *pci, size_t len);
/* Peer access between two devices: *access 1 when dev can map peer's memory,
 * *link the link type as best known ("nvlink" when native atomics work across
 * it, else "pcie"), *rank the driver's performance rank (lower is better). */
int grt_p2p_info(int dev, int peer, int *access, const char **link, int *rank);
/* Enables the current device's access to peer's memory; already enabled is 0. */
int grt_enable_peer(int peer);

/* Streams and events: opaque pointers to the runtime's objects. */
int grt_stream_create(void **stream);
void grt_stream_destroy(void *stream);
int grt_stream_sync(void *stream);
int grt_event_create(void **event); /* timing disabled: cheapest to record and test */
int grt_event_create_timed(void **event);
void grt_event_destroy(void *event);
int grt_event_record(void *event, void *stream);
/* 0 when done, -EAGAIN while not yet. */
int grt_event_query(void *event);
int grt_event_sync(void *event);
int grt_event_elapsed(void *start, void *end, float *ms);

/* Copies on a stream (any direction; unified addressing decides). */
int grt_memcpy_async(void *dst, const void *src, size_t len, void *stream);
int grt_memcpy(void *dst, const void *src, size_t len);
/* Complete when it returns: a memset on the legacy stream would otherwise
 * race with work on non-blocking streams (a fresh buffer read as zeros later). */
int grt_memset(void *dst, int value, size_t len);
/* Writes a 64-bit value to device-visible memory in stream order. */
int grt_write_value64(void *stream, void *addr, uint64_t value);

/* Device memory. */
int grt_malloc(void **ptr, size_t bytes);
void grt_free(void *ptr);
/* Pinned host memory mapped into every device: *host and *dev views. */
int grt_host_alloc_mapped(size_t bytes, void **host, void **dev);
void grt_host_free(void *host);

/* What a pointer is. */
enum grt_mem_kind { GRT_MEM_UNKNOWN = 0, GRT_MEM_HOST = 1, GRT_MEM_DEVICE = 2, GRT_MEM_MANAGED = 3 };
struct grt_ptr_info {
	enum grt_mem_kind kind;
	int device;          /* owning device, -1 for host memory */
	uintptr_t base;      /* start of the allocation (VMM: of the mapped chunk) */
	size_t size;         /* its size */
	uint64_t buffer_id;  /* process-wide unique id of the allocation */
	int legacy_ipc;      /* 1 when cudaIpcGetMemHandle works on it (cudaMalloc) */
	int vmm_fd;          /* 1 when a VMM allocation exportable as a POSIX fd */
};
int grt_ptr_info(const void *ptr, struct grt_ptr_info *info);

/* Legacy CUDA IPC (cudaMalloc allocations). The handle is GRT_IPC_HANDLE_BYTES. */
#define GRT_IPC_HANDLE_BYTES 64
int grt_ipc_get(void *base, void *handle);
/* -EEXIST (not logged): the allocation is mapped in this process already
 * (CUDA opens an IPC allocation once per process). */
int grt_ipc_open(const void *handle, void **ptr);
int grt_ipc_close(void *ptr);

/* VMM (cuMemCreate) allocations exported as POSIX file descriptors. */
/* The mapped chunk holding ptr: [*base, *base + *size). */
int grt_vmm_range(const void *ptr, uintptr_t *base, size_t *size);
/* Exports the physical allocation mapped at chunk base as a new fd. */
int grt_vmm_export_fd(uintptr_t base, int *fd);
/* Imports an fd of a peer's chunk of `size` bytes, maps it at a fresh address
 * readable and writable by device dev. */
int grt_vmm_import_fd(int fd, size_t size, int dev, void **ptr);
/* Reserves and maps several imported chunks back to back (a buffer spanning
 * chunks). fds[i] of sizes[i]; *ptr is the start of the first. */
int grt_vmm_import_fds(const int *fds, const size_t *sizes, int n, int dev, void **ptr);
/* Unmaps n chunks mapped back to back at ptr and frees the address range. */
int grt_vmm_unmap(void *ptr, const size_t *sizes, int n);
/* Allocates VMM memory exportable as fds, in `nchunks` separate physical
 * chunks mapped contiguously (tests, expandable-segment style). */
int grt_vmm_alloc(size_t bytes, int nchunks, int dev, void **ptr, size_t *total);
int grt_vmm_free(void *ptr, size_t total, int nchunks);
/* The allocation granularity of dev. */
int grt_vmm_granularity(int dev, size_t *gran);

#ifdef __cplusplus
}
#endif
#endif
