/* SPDX-License-Identifier: Apache-2.0 */
/* gpurt, CUDA backend: the runtime is linked statically; driver functions
 * are looked up at run time through cudaGetDriverEntryPointByVersion so that
 * nothing links libcuda and a plugin loads on hosts without a driver. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "gpurt_impl.h"

/* Maps a runtime error to weft's codes, logging it with the runtime's text. */
static int rt_err(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	if (e == cudaErrorNotReady)
		return -EAGAIN;
	cudaGetLastError(); /* clear sticky-free errors so later calls start clean */
	switch (e) {
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
		return grt__err(GRT_ERRC_NO_DEVICE, what, cudaGetErrorString(e), NULL);
	case cudaErrorMemoryAllocation:
		return grt__err(GRT_ERRC_NOMEM, what, cudaGetErrorString(e), NULL);
	case cudaErrorInvalidValue:
	case cudaErrorInvalidDevicePointer:
		return grt__err(GRT_ERRC_INVAL, what, cudaGetErrorString(e), NULL);
	default:
		return grt__err(GRT_ERRC_OTHER, what, cudaGetErrorString(e), cudaGetErrorName(e));
	}
}
#define RT(call, what) rt_err((call), (what))

/* ------------------------------------------------------ driver entry points */
struct drv {
	CUresult (*GetErrorString)(CUresult, const char **);
	CUresult (*PointerGetAttribute)(void *, CUpointer_attribute, CUdeviceptr);
	CUresult (*MemGetAddressRange)(CUdeviceptr *, size_t *, CUdeviceptr);
	CUresult (*MemRetainAllocationHandle)(CUmemGenericAllocationHandle *, void *);
	CUresult (*MemRelease)(CUmemGenericAllocationHandle);
	CUresult (*MemExportToShareableHandle)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
					       unsigned long long);
	CUresult (*MemImportFromShareableHandle)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
	CUresult (*MemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*MemAddressFree)(CUdeviceptr, size_t);
	CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*MemUnmap)(CUdeviceptr, size_t);
	CUresult (*MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
	CUresult (*MemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
	CUresult (*MemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
	CUresult (*StreamWriteValue64)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
};

static struct drv d;

static int drv_err(CUresult r, const char *what)
{
	if (r == CUDA_SUCCESS)
		return 0;
	const char *s = NULL;
	if (d.GetErrorString)
		d.GetErrorString(r, &s);
	char code[32];
	snprintf(code, sizeof(code), "CUresult %d", (int)r);
	enum grt__err_class c = r == CUDA_ERROR_OUT_OF_MEMORY ? GRT_ERRC_NOMEM
				: r == CUDA_ERROR_INVALID_VALUE ? GRT_ERRC_INVAL
				: r == CUDA_ERROR_NOT_SUPPORTED ? GRT_ERRC_NOTSUP
								: GRT_ERRC_OTHER;
	return grt__err(c, what, s, code);
}
#define DRV(call, what) drv_err((call), (what))

static int lookup(const char *sym, void **fn, int required, char *err, size_t len)
{
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	cudaError_t e = cudaGetDriverEntryPointByVersion(sym, fn, 12000, cudaEnableDefault, &q);
	if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !*fn) {
		*fn = NULL;
		if (required) {
			snprintf(err, len, "driver lacks %s (%s)", sym,
				 e != cudaSuccess ? cudaGetErrorString(e) : "symbol not found");
			cudaGetLastError();
			return -WEFT_ERR_NO_DEVICE;
		}
	}
	return 0;
}

int grt__rt_init(char *err, size_t len)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n == 0) {
		snprintf(err, len, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
		cudaGetLastError();
		return -WEFT_ERR_NO_DEVICE;
	}
	struct {
		const char *sym;
		void **fn;
		int required;
	} t[] = {
		{"cuGetErrorString", (void **)&d.GetErrorString, 1},
		{"cuPointerGetAttribute", (void **)&d.PointerGetAttribute, 1},
		{"cuMemGetAddressRange", (void **)&d.MemGetAddressRange, 1},
		{"cuMemRetainAllocationHandle", (void **)&d.MemRetainAllocationHandle, 1},
		{"cuMemRelease", (void **)&d.MemRelease, 1},
		{"cuMemExportToShareableHandle", (void **)&d.MemExportToShareableHandle, 1},
		{"cuMemImportFromShareableHandle", (void **)&d.MemImportFromShareableHandle, 1},
		{"cuMemAddressReserve", (void **)&d.MemAddressReserve, 1},
		{"cuMemAddressFree", (void **)&d.MemAddressFree, 1},
		{"cuMemMap", (void **)&d.MemMap, 1},
		{"cuMemUnmap", (void **)&d.MemUnmap, 1},
		{"cuMemSetAccess", (void **)&d.MemSetAccess, 1},
		{"cuMemCreate", (void **)&d.MemCreate, 1},
		{"cuMemGetAllocationGranularity", (void **)&d.MemGetAllocationGranularity, 1},
		{"cuStreamWriteValue64", (void **)&d.StreamWriteValue64, 0},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int rc = lookup(t[i].sym, t[i].fn, t[i].required, err, len);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* --------------------------------------------------------------- devices */
int grt_device_count(int *n)
{
	int rc = grt_init();
	if (rc != 0)
		return rc;
	return RT(cudaGetDeviceCount(n), "cudaGetDeviceCount");
}

int grt_set_device(int dev)
{
	return RT(cudaSetDevice(dev), "cudaSetDevice");
}

int grt_get_device(int *dev)
{
	return RT(cudaGetDevice(dev), "cudaGetDevice");
}

int grt_device_name(int dev, char *name, size_t len)
{
	struct cudaDeviceProp p;
	int rc = RT(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
	if (rc == 0)
		snprintf(name, len, "%s", p.name);
	return rc;
}

int grt_device_pci(int dev, char *pci, size_t len)
{
	char buf[32];
	int rc = RT(cudaDeviceGetPCIBusId(buf, sizeof(buf), dev), "cudaDeviceGetPCIBusId");
	if (rc == 0)
		snprintf(pci, len, "%s", buf);
	return rc;
}

int grt_p2p_info(int dev, int peer, int *access, const char **link, int *rank)
{
	int a = 0, atom = 0, r = 0;
	int rc = RT(cudaDeviceCanAccessPeer(&a, dev, peer), "cudaDeviceCanAccessPeer");
	if (rc != 0)
		return rc;
	if (a) {
		rc = RT(cudaDeviceGetP2PAttribute(&atom, cudaDevP2PAttrNativeAtomicSupported, dev, peer),
			"cudaDeviceGetP2PAttribute(atomics)");
		if (rc == 0)
			rc = RT(cudaDeviceGetP2PAttribute(&r, cudaDevP2PAttrPerformanceRank, dev, peer),
				"cudaDeviceGetP2PAttribute(rank)");
		if (rc != 0)
			return rc;
	}
	*access = a;
	/* Native atomics across the link exist over NVLink, not over PCIe. */
	*link = !a ? "none" : atom ? "nvlink" : "pcie";
	*rank = r;
	return 0;
}

int grt_enable_peer(int peer)
{
	cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
	if (e == cudaErrorPeerAccessAlreadyEnabled) {
		cudaGetLastError();
		return 0;
	}
	return RT(e, "cudaDeviceEnablePeerAccess");
}

/* ------------------------------------------------------- streams, events */
int grt_stream_create(void **stream)
{
	cudaStream_t s;
	int rc = RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
	if (rc == 0)
		*stream = s;
	return rc;
}

void grt_stream_destroy(void *stream)
{
	if (stream)
		RT(cudaStreamDestroy((cudaStream_t)stream), "cudaStreamDestroy");
}

int grt_stream_sync(void *stream)
{
	return RT(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize");
}

int grt_event_create(void **event)
{
	cudaEvent_t e;
	int rc = RT(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
	if (rc == 0)
		*event = e;
	return rc;
}

int grt_event_create_timed(void **event)
{
	cudaEvent_t e;
	int rc = RT(cudaEventCreate(&e), "cudaEventCreate");
	if (rc == 0)
		*event = e;
	return rc;
}

void grt_event_destroy(void *event)
{
	if (event)
		RT(cudaEventDestroy((cudaEvent_t)event), "cudaEventDestroy");
}

int grt_event_record(void *event, void *stream)
{
	return RT(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream), "cudaEventRecord");
}

int grt_event_query(void *event)
{
	return RT(cudaEventQuery((cudaEvent_t)event), "cudaEventQuery");
}

int grt_event_sync(void *event)
{
	return RT(cudaEventSynchronize((cudaEvent_t)event), "cudaEventSynchronize");
}

int grt_event_elapsed(void *start, void *end, float *ms)
{
	return RT(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end), "cudaEventElapsedTime");
}

/* ------------------------------------------------------------------ copies */
int grt_memcpy_async(void *dst, const void *src, size_t len, void *stream)
{
	return RT(cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, (cudaStream_t)stream), "cudaMemcpyAsync");
}

int grt_memcpy(void *dst, const void *src, size_t len)
{
	return RT(cudaMemcpy(dst, src, len, cudaMemcpyDefault), "cudaMemcpy");
}

int grt_memset(void *dst, int value, size_t len)
{
	int rc = RT(cudaMemset(dst, value, len), "cudaMemset");
	return rc ? rc : RT(cudaStreamSynchronize(0), "cudaStreamSynchronize");
}

int grt__rt_write_value64(void *stream, void *addr, uint64_t value)
{
	if (d.StreamWriteValue64) {
		CUresult r = d.StreamWriteValue64((CUstream)stream, (CUdeviceptr)(uintptr_t)addr, value, 0);
		if (r == CUDA_SUCCESS)
			return 0;
		if (r != CUDA_ERROR_NOT_SUPPORTED)
			return DRV(r, "cuStreamWriteValue64");
		d.StreamWriteValue64 = NULL; /* fall back for good */
	}
	return -ENOTSUP; /* gpurt.c copies the value instead */
}

/* ------------------------------------------------------------------ memory */
int grt_malloc(void **ptr, size_t bytes)
{
	return RT(cudaMalloc(ptr, bytes), "cudaMalloc");
}

void grt_free(void *ptr)
{
	if (ptr)
		RT(cudaFree(ptr), "cudaFree");
}

int grt_host_alloc_mapped(size_t bytes, void **host, void **dev)
{
	void *h, *dv;
	int rc = RT(cudaHostAlloc(&h, bytes, cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
	if (rc != 0)
		return rc;
	rc = RT(cudaHostGetDevicePointer(&dv, h, 0), "cudaHostGetDevicePointer");
	if (rc != 0) {
		cudaFreeHost(h);
		return rc;
	}
	memset(h, 0, bytes);
	*host = h;
	*dev = dv;
	return 0;
}

void grt_host_free(void *host)
{
	if (host)
		RT(cudaFreeHost(host), "cudaFreeHost");
}

int grt_ptr_info(const void *ptr, struct grt_ptr_info *info)
{
	if (grt_init() != 0)
		return -ENOENT;
	struct cudaPointerAttributes a;
	cudaError_t e = cudaPointerGetAttributes(&a, ptr);
	if (e != cudaSuccess) {
		cudaGetLastError();
		return -ENOENT;
	}
	struct grt_ptr_info o = {.kind = GRT_MEM_UNKNOWN, .device = -1};
	switch (a.type) {
	case cudaMemoryTypeHost:
		o.kind = GRT_MEM_HOST;
		break;
	case cudaMemoryTypeDevice:
		o.kind = GRT_MEM_DEVICE;
		o.device = a.device;
		break;
	case cudaMemoryTypeManaged:
		o.kind = GRT_MEM_MANAGED;
		o.device = a.device;
		break;
	default:
		*info = o;
		return 0;
	}
	if (o.kind == GRT_MEM_DEVICE && d.PointerGetAttribute) {
		CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
		unsigned long long id = 0;
		int legacy = 0;
		unsigned long long handles = 0;
		if (d.PointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p) == CUDA_SUCCESS)
			o.buffer_id = id;
		if (d.PointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p) ==
		    CUDA_SUCCESS)
			o.legacy_ipc = legacy;
		if (d.PointerGetAttribute(&handles, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, p) == CUDA_SUCCESS)
			o.vmm_fd = !legacy && (handles & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0;
		CUdeviceptr base = 0;
		size_t size = 0;
		if (d.MemGetAddressRange(&base, &size, p) == CUDA_SUCCESS) {
			o.base = (uintptr_t)base;
			o.size = size;
		}
	}
	*info = o;
	return 0;
}

/* -------------------------------------------------------------- legacy IPC */
int grt_ipc_get(void *base, void *handle)
{
	cudaIpcMemHandle_t h;
	_Static_assert(sizeof(h) == GRT_IPC_HANDLE_BYTES, "IPC handle size");
	int rc = RT(cudaIpcGetMemHandle(&h, base), "cudaIpcGetMemHandle");
	if (rc == 0)
		memcpy(handle, &h, sizeof(h));
	return rc;
}

int grt_ipc_open(const void *handle, void **ptr)
{
	cudaIpcMemHandle_t h;
	memcpy(&h, handle, sizeof(h));
	cudaError_t e = cudaIpcOpenMemHandle(ptr, h, cudaIpcMemLazyEnablePeerAccess);
	if (e == cudaErrorAlreadyMapped) {
		/* CUDA maps an exported allocation once per process: the caller
		 * says what that means for it. */
		cudaGetLastError();
		return -EEXIST;
	}
	return RT(e, "cudaIpcOpenMemHandle");
}

int grt_ipc_close(void *ptr)
{
	return RT(cudaIpcCloseMemHandle(ptr), "cudaIpcCloseMemHandle");
}

/* --------------------------------------------------------------------- VMM */
int grt_vmm_range(const void *ptr, uintptr_t *base, size_t *size)
{
	if (grt_init() != 0)
		return -WEFT_ERR_NO_DEVICE;
	/* The driver has two answers (cuMemGetAddressRange and the RANGE_*
	 * pointer attributes); one of them may be the whole address reservation
	 * rather than the mapping of one physical chunk. A chunk is never larger
	 * than its reservation, so the smaller valid answer is the chunk. */
	CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr, b1 = 0, b2 = 0;
	size_t s1 = 0, s2 = 0;
	int ok1 = d.MemGetAddressRange(&b1, &s1, p) == CUDA_SUCCESS && s1 > 0;
	int ok2 = d.PointerGetAttribute(&b2, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p) == CUDA_SUCCESS &&
		  d.PointerGetAttribute(&s2, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p) == CUDA_SUCCESS && s2 > 0;
	if (!ok1 && !ok2)
		return DRV(d.MemGetAddressRange(&b1, &s1, p), "cuMemGetAddressRange");
	if (ok1 && ok2 && (b1 != b2 || s1 != s2))
		grt__log(WEFT_LOG_DEBUG, "VMM range of %p: cuMemGetAddressRange %#llx+%zu, attributes %#llx+%zu", ptr,
		     (unsigned long long)b1, s1, (unsigned long long)b2, s2);
	if (!ok1 || (ok2 && s2 < s1)) {
		b1 = b2;
		s1 = s2;
	}
	*base = (uintptr_t)b1;
	*size = s1;
	return 0;
}

int grt_vmm_export_fd(uintptr_t base, int *fd)
{
	if (grt_init() != 0)
		return -WEFT_ERR_NO_DEVICE;
	CUmemGenericAllocationHandle h;
	int rc = DRV(d.MemRetainAllocationHandle(&h, (void *)base), "cuMemRetainAllocationHandle");
	if (rc != 0)
		return rc;
	int f = -1;
	rc = DRV(d.MemExportToShareableHandle(&f, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
		 "cuMemExportToShareableHandle");
	d.MemRelease(h);
	if (rc == 0)
		*fd = f;
	return rc;
}

static int set_access(CUdeviceptr p, size_t size, int dev)
{
	CUmemAccessDesc a = {0};
	a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a.location.id = dev;
	a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	return DRV(d.MemSetAccess(p, size, &a, 1), "cuMemSetAccess");
}

int grt_vmm_import_fds(const int *fds, const size_t *sizes, int n, int dev, void **ptr)
{
	if (grt_init() != 0)
		return -WEFT_ERR_NO_DEVICE;
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += sizes[i];
	CUdeviceptr va = 0;
	int rc = DRV(d.MemAddressReserve(&va, total, 0, 0, 0), "cuMemAddressReserve");
	if (rc != 0)
		return rc;
	size_t off = 0;
	int i;
	for (i = 0; i < n; i++) {
		CUmemGenericAllocationHandle h;
		rc = DRV(d.MemImportFromShareableHandle(&h, (void *)(uintptr_t)fds[i],
							CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
			 "cuMemImportFromShareableHandle");
		if (rc != 0)
			break;
		rc = DRV(d.MemMap(va + off, sizes[i], 0, h, 0), "cuMemMap");
		d.MemRelease(h); /* the mapping keeps the physical memory alive */
		if (rc != 0)
			break;
		off += sizes[i];
	}
	if (rc == 0)
		rc = set_access(va, total, dev);
	if (rc != 0) {
		for (size_t o = 0, j = 0; o < off; o += sizes[j++])
			d.MemUnmap(va + o, sizes[j]);
		d.MemAddressFree(va, total);
		return rc;
	}
	*ptr = (void *)(uintptr_t)va;
	return 0;
}

int grt_vmm_unmap(void *ptr, const size_t *sizes, int n)
{
	if (grt_init() != 0)
		return -WEFT_ERR_NO_DEVICE;
	CUdeviceptr va = (CUdeviceptr)(uintptr_t)ptr;
	size_t off = 0;
	int rc = 0;
	for (int i = 0; i < n; i++) {
		int r = DRV(d.MemUnmap(va + off, sizes[i]), "cuMemUnmap");
		rc = rc ? rc : r;
		off += sizes[i];
	}
	int r = DRV(d.MemAddressFree(va, off), "cuMemAddressFree");
	return rc ? rc : r;
}

int grt_vmm_granularity(int dev, size_t *gran)
{
	if (grt_init() != 0)
		return -WEFT_ERR_NO_DEVICE;
	CUmemAllocationProp p = {0};
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	return DRV(d.MemGetAllocationGranularity(gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
		   "cuMemGetAllocationGranularity");
}

int grt_vmm_alloc(size_t bytes, int nchunks, int dev, void **ptr, size_t *total)
{
	size_t gran;
	int rc = grt_vmm_granularity(dev, &gran);
	if (rc != 0)
		return rc;
	if (nchunks < 1)
		nchunks = 1;
	size_t chunk = grt__vmm_chunk(bytes, nchunks, gran);
	size_t all = chunk * (size_t)nchunks;
	CUdeviceptr va = 0;
	rc = DRV(d.MemAddressReserve(&va, all, 0, 0, 0), "cuMemAddressReserve");
	if (rc != 0)
		return rc;
	CUmemAllocationProp p = {0};
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	int i;
	for (i = 0; i < nchunks; i++) {
		CUmemGenericAllocationHandle h;
		rc = DRV(d.MemCreate(&h, chunk, &p, 0), "cuMemCreate");
		if (rc != 0)
			break;
		rc = DRV(d.MemMap(va + (size_t)i * chunk, chunk, 0, h, 0), "cuMemMap");
		d.MemRelease(h);
		if (rc != 0)
			break;
	}
	if (rc == 0)
		rc = set_access(va, all, dev);
	if (rc != 0) {
		for (int j = 0; j < i; j++)
			d.MemUnmap(va + (size_t)j * chunk, chunk);
		d.MemAddressFree(va, all);
		return rc;
	}
	*ptr = (void *)(uintptr_t)va;
	*total = all;
	return 0;
}
