/* SPDX-License-Identifier: Apache-2.0 */
/* libweft_nccl: ncclMemAlloc and ncclMemFree. Memory comes from the CUDA
 * driver's virtual memory calls (cuMemCreate with a POSIX file-descriptor
 * handle type, mapped read-write for the current device), so that nvlink
 * exports it as file descriptors and algo-gpu maps it in its peers without
 * the legacy IPC path's once-per-process limit. The driver is reached as
 * the rest of weft reaches it: through the application's CUDA runtime
 * (cudaGetDriverEntryPointByVersion), else libcuda.so.1 itself; nothing is
 * linked. A device without VMM or fd handles gets cudaMalloc memory, as
 * NCCL gives. NCCL's calls take no communicator, so the allocations made
 * are kept in one process-wide table (locked): ncclMemFree releases exactly
 * what ncclMemAlloc made and refuses any other pointer. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "wn.h"

/* The driver's types this file uses, as cuda.h (CUDA 12 and 13) lays them out. */
typedef unsigned long long wn_cu_ptr;
typedef unsigned long long wn_cu_handle;
struct wn_cu_loc {
	int type; /* CU_MEM_LOCATION_TYPE_DEVICE = 1 */
	int id;
};
struct wn_cu_prop {
	int type;         /* CU_MEM_ALLOCATION_TYPE_PINNED = 1 */
	int handle_types; /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1 */
	struct wn_cu_loc loc;
	void *win32;
	unsigned char compression, rdma;
	unsigned short usage;
	unsigned char reserved[4];
};
struct wn_cu_access {
	struct wn_cu_loc loc;
	int flags; /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 */
};

struct wn_cu {
	int (*init)(unsigned);
	int (*gran)(size_t *, const struct wn_cu_prop *, int);
	int (*reserve)(wn_cu_ptr *, size_t, size_t, wn_cu_ptr, unsigned long long);
	int (*addr_free)(wn_cu_ptr, size_t);
	int (*create)(wn_cu_handle *, size_t, const struct wn_cu_prop *, unsigned long long);
	int (*release)(wn_cu_handle);
	int (*map)(wn_cu_ptr, size_t, size_t, wn_cu_handle, unsigned long long);
	int (*unmap)(wn_cu_ptr, size_t);
	int (*access)(wn_cu_ptr, size_t, const struct wn_cu_access *, size_t);
	int (*errstr)(int, const char **);
	int (*attr)(int *, int, int); /* cuDeviceGetAttribute, optional */
};

/* cuDeviceGetAttribute's numbers (cuda.h, CUDA 12 and 13). */
enum { WN_ATTR_VMM = 102, WN_ATTR_POSIX_FD = 103, WN_ATTR_VMM_RDMA = 110 };

/* One allocation of ncclMemAlloc. */
struct wn_alloc {
	struct wn_alloc *next;
	void *ptr;
	size_t size;         /* reserved and mapped (VMM), or asked (cudaMalloc) */
	wn_cu_handle handle; /* 0: cudaMalloc memory */
};

static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct wn_alloc *allocs;
static struct wn_cu cu;
static int cu_state; /* 0 not looked up, 1 found, -1 not found; under alloc_lock */

/* One driver function, through the runtime's entry points or libcuda's symbols. */
static void *cu_sym(void *lib, const char *name)
{
	typedef int (*entry_fn)(const char *, void **, unsigned, unsigned long long, int *);
	entry_fn entry = (entry_fn)dlsym(RTLD_DEFAULT, "cudaGetDriverEntryPointByVersion");
	void *f = NULL;
	int q = -1;
	if (entry && entry(name, &f, 12000, 0, &q) == 0 && q == 0 && f)
		return f;
	return lib ? dlsym(lib, name) : NULL;
}

/* Looks the driver's VMM calls up once; 0, or -ENOSYS where they are missing. */
static int cu_load(void)
{
	if (cu_state)
		return cu_state > 0 ? 0 : -ENOSYS;
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	cu.init = (int (*)(unsigned))cu_sym(lib, "cuInit");
	cu.gran = (int (*)(size_t *, const struct wn_cu_prop *, int))cu_sym(lib, "cuMemGetAllocationGranularity");
	cu.reserve = (int (*)(wn_cu_ptr *, size_t, size_t, wn_cu_ptr, unsigned long long))cu_sym(lib, "cuMemAddressReserve");
	cu.addr_free = (int (*)(wn_cu_ptr, size_t))cu_sym(lib, "cuMemAddressFree");
	cu.create = (int (*)(wn_cu_handle *, size_t, const struct wn_cu_prop *, unsigned long long))cu_sym(lib, "cuMemCreate");
	cu.release = (int (*)(wn_cu_handle))cu_sym(lib, "cuMemRelease");
	cu.map = (int (*)(wn_cu_ptr, size_t, size_t, wn_cu_handle, unsigned long long))cu_sym(lib, "cuMemMap");
	cu.unmap = (int (*)(wn_cu_ptr, size_t))cu_sym(lib, "cuMemUnmap");
	cu.access = (int (*)(wn_cu_ptr, size_t, const struct wn_cu_access *, size_t))cu_sym(lib, "cuMemSetAccess");
	cu.errstr = (int (*)(int, const char **))cu_sym(lib, "cuGetErrorString");
	cu.attr = (int (*)(int *, int, int))cu_sym(lib, "cuDeviceGetAttribute");
	/* lib stays open: the pointers above may point into it. */
	int ok = cu.init && cu.gran && cu.reserve && cu.addr_free && cu.create && cu.release && cu.map && cu.unmap &&
		 cu.access && cu.init(0) == 0;
	cu_state = ok ? 1 : -1;
	return ok ? 0 : -ENOSYS;
}

static const char *cu_err(int e)
{
	static __thread char buf[48];
	const char *s = NULL;
	if (cu.errstr && cu.errstr(e, &s) == 0 && s)
		return s;
	snprintf(buf, sizeof(buf), "CUDA driver error %d", e);
	return buf;
}

/* Unmaps, releases and frees what vmm_alloc made (a zero handle or
 * mapping is skipped); the first failure's driver code, or 0. */
static int vmm_release(wn_cu_ptr p, size_t size, wn_cu_handle h, int mapped)
{
	int e = 0, r;
	if (mapped && (r = cu.unmap(p, size)) != 0)
		e = r;
	if (h && (r = cu.release(h)) != 0 && !e)
		e = r;
	if (p && (r = cu.addr_free(p, size)) != 0 && !e)
		e = r;
	return e;
}

/* VMM memory of dev: *ptr, the rounded *size and the handle. 0, a driver
 * code, or -ENOSYS where the driver has no VMM calls. */
static int vmm_alloc(int dev, size_t want, void **ptr, size_t *size, wn_cu_handle *handle, const char **step)
{
	struct wn_cu_prop prop = {.type = 1, .handle_types = 1, .loc = {.type = 1, .id = dev}};
	size_t gran = 0;
	wn_cu_ptr p = 0;
	wn_cu_handle h = 0;
	int e;
	if (cu_load() != 0)
		return -ENOSYS;
	int vmm = 1, fd = 1, rdma = 0;
	if (cu.attr && (cu.attr(&vmm, WN_ATTR_VMM, dev) != 0 || cu.attr(&fd, WN_ATTR_POSIX_FD, dev) != 0))
		vmm = fd = 1; /* unknown: cuMemCreate will say */
	if (!vmm || !fd) {
		*step = !vmm ? "the device has no virtual memory management" : "the device exports no POSIX fds";
		return -ENOTSUP;
	}
	/* As NCCL does: the memory may then be registered for GPUDirect RDMA. */
	if (cu.attr && cu.attr(&rdma, WN_ATTR_VMM_RDMA, dev) == 0 && rdma)
		prop.rdma = 1;
	*step = "cuMemGetAllocationGranularity";
	if ((e = cu.gran(&gran, &prop, 1 /* recommended */)) != 0 || gran == 0)
		return e ? e : -EINVAL;
	size_t sz = (want + gran - 1) / gran * gran;
	*step = "cuMemCreate";
	if ((e = cu.create(&h, sz, &prop, 0)) != 0)
		return e;
	*step = "cuMemAddressReserve";
	if ((e = cu.reserve(&p, sz, gran, 0, 0)) != 0) {
		vmm_release(0, sz, h, 0);
		return e;
	}
	*step = "cuMemMap";
	if ((e = cu.map(p, sz, 0, h, 0)) != 0) {
		vmm_release(p, sz, h, 0);
		return e;
	}
	struct wn_cu_access acc = {.loc = {.type = 1, .id = dev}, .flags = 3};
	*step = "cuMemSetAccess";
	if ((e = cu.access(p, sz, &acc, 1)) != 0) {
		vmm_release(p, sz, h, 1);
		return e;
	}
	*ptr = (void *)(uintptr_t)p;
	*size = sz;
	*handle = h;
	return 0;
}

WN_API ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
	typedef int (*get_device_fn)(int *);
	typedef int (*malloc_fn)(void **, size_t);
	if (!ptr) {
		WN_ERROR("ncclMemAlloc: ptr is NULL");
		return ncclInvalidArgument;
	}
	*ptr = NULL;
	if (size == 0) {
		WN_ERROR("ncclMemAlloc: size is 0");
		return ncclInvalidArgument;
	}
	/* The current device is the application runtime's. */
	get_device_fn get = (get_device_fn)dlsym(RTLD_DEFAULT, "cudaGetDevice");
	malloc_fn m = (malloc_fn)dlsym(RTLD_DEFAULT, "cudaMalloc");
	int dev = -1;
	if (!get || !m || get(&dev) != 0) {
		WN_ERROR("ncclMemAlloc: no CUDA runtime or no current device in this process (cudaGetDevice %s); weft "
			 "allocates device memory for the application's current device", get ? "failed" : "not found");
		return ncclInvalidUsage;
	}
	struct wn_alloc *a = calloc(1, sizeof(*a));
	if (!a) {
		WN_ERROR("ncclMemAlloc: out of memory");
		return ncclSystemError;
	}
	pthread_mutex_lock(&alloc_lock);
	const char *step = "";
	int e = vmm_alloc(dev, size, &a->ptr, &a->size, &a->handle, &step);
	if (e != 0) {
		/* Where VMM or fd handles are not to be had, cudaMalloc memory
		 * still crosses processes (CUDA IPC), as with NCCL. */
		WN_INFO("ncclMemAlloc: no VMM memory on device %d (%s%s%s); using cudaMalloc", dev,
			e == -ENOSYS ? "the driver has no VMM calls" : step, e == -ENOSYS || e == -ENOTSUP ? "" : ": ",
			e == -ENOSYS || e == -ENOTSUP ? "" : cu_err(e));
		a->handle = 0;
		a->size = size;
		int err = m(&a->ptr, size);
		if (err != 0) {
			pthread_mutex_unlock(&alloc_lock);
			WN_ERROR("ncclMemAlloc: cudaMalloc(%zu) failed: %s", size, wn_cuda_error_name(err));
			free(a);
			return ncclUnhandledCudaError;
		}
	}
	a->next = allocs;
	allocs = a;
	pthread_mutex_unlock(&alloc_lock);
	*ptr = a->ptr;
	return ncclSuccess;
}
WN_ALIAS(ncclMemAlloc);

WN_API ncclResult_t ncclMemFree(void *ptr)
{
	typedef int (*free_fn)(void *);
	if (!ptr)
		return ncclSuccess;
	pthread_mutex_lock(&alloc_lock);
	struct wn_alloc *a = NULL;
	for (struct wn_alloc **pp = &allocs; *pp; pp = &(*pp)->next)
		if ((*pp)->ptr == ptr) {
			a = *pp;
			*pp = a->next;
			break;
		}
	pthread_mutex_unlock(&alloc_lock);
	if (!a) {
		WN_ERROR("ncclMemFree: %p was not returned by ncclMemAlloc (or was freed already): not freed", ptr);
		return ncclInvalidArgument;
	}
	int e;
	if (a->handle) {
		e = vmm_release((wn_cu_ptr)(uintptr_t)a->ptr, a->size, a->handle, 1);
		if (e != 0)
			WN_ERROR("ncclMemFree: releasing %p (%zu bytes of VMM memory) failed: %s", ptr, a->size, cu_err(e));
	} else {
		free_fn f = (free_fn)dlsym(RTLD_DEFAULT, "cudaFree");
		e = f ? f(ptr) : -1;
		if (e != 0)
			WN_ERROR("ncclMemFree: cudaFree(%p) failed: %s", ptr, f ? wn_cuda_error_name(e) : "no CUDA runtime");
	}
	free(a);
	return e == 0 ? ncclSuccess : ncclUnhandledCudaError;
}
WN_ALIAS(ncclMemFree);
