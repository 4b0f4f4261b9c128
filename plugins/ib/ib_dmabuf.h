/* SPDX-License-Identifier: Apache-2.0 */
/* ib plugin: dma-buf export of CUDA memory through the CUDA driver, loaded at
 * run time. Needs neither verbs nor cuda.h, so a GPU test compiles
 * ib_dmabuf.c alone and calls it on real device memory. */
#ifndef WEFT_IB_DMABUF_H
#define WEFT_IB_DMABUF_H

#include <stddef.h>
#include <stdint.h>

/* The driver calls the export makes, one member per CUDA function (named in
 * the comment). CUresult, CUdevice and the enums are ints in the driver's ABI,
 * CUdeviceptr is an unsigned long long and CUcontext a pointer, so these are
 * the functions' own types without cuda.h. The real table is dlsym'd from
 * libcuda.so.1; a test passes a double to ibp_set_cuda. */
struct ibp_cuda_ops {
	int (*init)(unsigned flags);                                                /* cuInit */
	int (*get_error_name)(int err, const char **name);                          /* cuGetErrorName */
	int (*get_error_string)(int err, const char **text);                        /* cuGetErrorString */
	int (*device_get_count)(int *count);                                        /* cuDeviceGetCount */
	int (*device_get)(int *dev, int ordinal);                                   /* cuDeviceGet */
	int (*device_get_attribute)(int *value, int attr, int dev);                 /* cuDeviceGetAttribute */
	int (*pointer_get_attribute)(void *data, int attr, unsigned long long ptr); /* cuPointerGetAttribute */
	int (*primary_ctx_retain)(void **ctx, int dev);                             /* cuDevicePrimaryCtxRetain */
	int (*primary_ctx_release)(int dev);                                        /* cuDevicePrimaryCtxRelease_v2 */
	int (*ctx_push_current)(void *ctx);                                         /* cuCtxPushCurrent_v2 */
	int (*ctx_pop_current)(void **ctx);                                         /* cuCtxPopCurrent_v2 */
	int (*mem_get_handle_for_address_range)(void *handle, unsigned long long dptr, size_t size, int type,
						unsigned long long flags); /* cuMemGetHandleForAddressRange */
};

/* The values of cuda.h this file uses (CUDA 11.7 and later agree on them;
 * tests/gpu/test_ib_dmabuf_gpu.c checks them against cuda.h). */
#define IBP_CUDA_SUCCESS 0
#define IBP_CUDA_ERROR_INVALID_VALUE 1
#define IBP_CUDA_ERROR_NO_DEVICE 100
#define IBP_CUDA_ERROR_NOT_SUPPORTED 801
#define IBP_CU_POINTER_ATTRIBUTE_CONTEXT 1
#define IBP_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define IBP_CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124
#define IBP_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1

/* A dma-buf fd for the host pages around [ptr, ptr + len): the fd covers
 * [base, base + size), base and size aligned to the host page, and ptr is at
 * offset (ptr - base) inside it. */
struct ibp_dmabuf {
	int fd;
	int device; /* CUDA device ordinal of the memory */
	uint64_t base;
	uint64_t size;
	uint64_t offset;
};

/* Exports CUDA memory as a dma-buf. The first call of a process loads
 * libcuda.so.1 and runs cuInit, so that a process which forks before
 * registering leaves CUDA untouched for its children. Returns 0 and fills
 * *out; the caller owns out->fd and closes it (an MR made from it keeps its
 * own reference). Errors, each with a one-line reason in why (naming the
 * failing call and the driver's error): -ENOTSUP where dma-buf is not
 * available here (no driver, no device, a device or driver without dma-buf,
 * CUDA initialized before a fork), -EINVAL for a pointer that is not CUDA
 * memory or a range the driver refuses, -WEFT_ERR_TRANSPORT for any other
 * driver failure.
 * Thread safety: any thread. Blocking: no. */
int ibp_dmabuf_export(const void *ptr, size_t len, struct ibp_dmabuf *out, char *why, size_t whylen);

/* Number of CUDA devices here that report CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
 * (0 with the reason in why), initializing the driver as the export does.
 * Thread safety: any thread. */
int ibp_dmabuf_devices(char *why, size_t whylen);

/* Test hook (internal): drive the export through a CUDA-driver double. NULL
 * restores the real libcuda.so.1. Either way the next call starts afresh, as
 * in a new process. */
void ibp_set_cuda(const struct ibp_cuda_ops *ops);

#endif /* WEFT_IB_DMABUF_H */
