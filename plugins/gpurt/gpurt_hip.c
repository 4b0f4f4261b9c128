/* SPDX-License-Identifier: Apache-2.0 */
/* gpurt, HIP backend (AMD GPUs, ROCm): every runtime function is taken with
 * dlopen/dlsym from libamdhip64 of the major version compiled against, so the
 * plugin loads, and says "no AMD GPU", on hosts without ROCm. Never run on AMD
 * hardware: compiled against Debian's ROCm 5.2 headers only. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>

#include "gpurt_impl.h"

#define GRT_STR2(x) #x
#define GRT_STR(x) GRT_STR2(x)
/* The soname of the runtime the headers describe: structs such as
 * hipPointerAttribute_t and enum values changed between ROCm majors, so a
 * different major must not be loaded in its place. */
#ifndef GRT_HIP_LIB /* a test builds a copy that looks for a library no host has */
#define GRT_HIP_LIB "libamdhip64.so." GRT_STR(HIP_VERSION_MAJOR)
#endif

/* hipExtGetLinkTypeAndHopCount's link types are HSA's hsa_amd_link_info_type_t. */
#define GRT_HIP_LINK_PCIE 2 /* HSA_AMD_LINK_INFO_TYPE_PCIE */
#define GRT_HIP_LINK_XGMI 4 /* HSA_AMD_LINK_INFO_TYPE_XGMI */

/* The runtime's functions, typed from its own declarations. */
#define GRT_HIP_FN(name) __typeof__(hip##name) *name
static struct {
	void *lib;
	GRT_HIP_FN(GetDeviceCount);
	GRT_HIP_FN(GetErrorString);
	GRT_HIP_FN(GetErrorName);
	GRT_HIP_FN(GetLastError);
	GRT_HIP_FN(SetDevice);
	GRT_HIP_FN(GetDevice);
	GRT_HIP_FN(DeviceGetName);
	GRT_HIP_FN(DeviceGetPCIBusId);
	GRT_HIP_FN(DeviceCanAccessPeer);
	GRT_HIP_FN(DeviceGetP2PAttribute);
	GRT_HIP_FN(ExtGetLinkTypeAndHopCount); /* optional */
	GRT_HIP_FN(DeviceEnablePeerAccess);
	GRT_HIP_FN(StreamCreateWithFlags);
	GRT_HIP_FN(StreamDestroy);
	GRT_HIP_FN(StreamSynchronize);
	GRT_HIP_FN(EventCreateWithFlags);
	GRT_HIP_FN(EventCreate);
	GRT_HIP_FN(EventDestroy);
	GRT_HIP_FN(EventRecord);
	GRT_HIP_FN(EventQuery);
	GRT_HIP_FN(EventSynchronize);
	GRT_HIP_FN(EventElapsedTime);
	GRT_HIP_FN(MemcpyAsync);
	GRT_HIP_FN(Memcpy);
	GRT_HIP_FN(Memset);
	GRT_HIP_FN(StreamWriteValue64); /* optional */
	GRT_HIP_FN(Malloc);
	GRT_HIP_FN(Free);
	GRT_HIP_FN(HostMalloc);
	GRT_HIP_FN(HostGetDevicePointer);
	GRT_HIP_FN(HostFree);
	GRT_HIP_FN(PointerGetAttributes);
	GRT_HIP_FN(PointerGetAttribute); /* optional */
	GRT_HIP_FN(MemGetAddressRange);
	GRT_HIP_FN(IpcGetMemHandle);
	GRT_HIP_FN(IpcOpenMemHandle);
	GRT_HIP_FN(IpcCloseMemHandle);
} h;

/* Maps a runtime error to weft's codes, logging it with the runtime's text. */
static int rt_err(hipError_t e, const char *what)
{
	if (e == hipSuccess)
		return 0;
	if (e == hipErrorNotReady)
		return -EAGAIN;
	h.GetLastError(); /* clear the last error so later calls start clean */
	switch (e) {
	case hipErrorNoDevice:
	case hipErrorInsufficientDriver:
		return grt__err(GRT_ERRC_NO_DEVICE, what, h.GetErrorString(e), NULL);
	case hipErrorOutOfMemory:
		return grt__err(GRT_ERRC_NOMEM, what, h.GetErrorString(e), NULL);
	case hipErrorInvalidValue:
	case hipErrorInvalidDevicePointer:
		return grt__err(GRT_ERRC_INVAL, what, h.GetErrorString(e), NULL);
	case hipErrorNotSupported:
		return grt__err(GRT_ERRC_NOTSUP, what, h.GetErrorString(e), NULL);
	default:
		return grt__err(GRT_ERRC_OTHER, what, h.GetErrorString(e), h.GetErrorName(e));
	}
}
#define RT(call, what) rt_err((call), (what))

int grt__rt_init(char *err, size_t len)
{
	dlerror();
	void *lib = dlopen(GRT_HIP_LIB, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *why = dlerror();
		snprintf(err, len, "%s", why ? why : GRT_HIP_LIB " not found");
		return -WEFT_ERR_NO_DEVICE;
	}
	struct {
		const char *sym;
		void **fn;
		int required;
	} t[] = {
#define GRT_SYM(name, req) {"hip" #name, (void **)&h.name, req}
		GRT_SYM(GetDeviceCount, 1),
		GRT_SYM(GetErrorString, 1),
		GRT_SYM(GetErrorName, 1),
		GRT_SYM(GetLastError, 1),
		GRT_SYM(SetDevice, 1),
		GRT_SYM(GetDevice, 1),
		GRT_SYM(DeviceGetName, 1),
		GRT_SYM(DeviceGetPCIBusId, 1),
		GRT_SYM(DeviceCanAccessPeer, 1),
		GRT_SYM(DeviceGetP2PAttribute, 1),
		GRT_SYM(ExtGetLinkTypeAndHopCount, 0),
		GRT_SYM(DeviceEnablePeerAccess, 1),
		GRT_SYM(StreamCreateWithFlags, 1),
		GRT_SYM(StreamDestroy, 1),
		GRT_SYM(StreamSynchronize, 1),
		GRT_SYM(EventCreateWithFlags, 1),
		GRT_SYM(EventCreate, 1),
		GRT_SYM(EventDestroy, 1),
		GRT_SYM(EventRecord, 1),
		GRT_SYM(EventQuery, 1),
		GRT_SYM(EventSynchronize, 1),
		GRT_SYM(EventElapsedTime, 1),
		GRT_SYM(MemcpyAsync, 1),
		GRT_SYM(Memcpy, 1),
		GRT_SYM(Memset, 1),
		GRT_SYM(StreamWriteValue64, 0),
		GRT_SYM(Malloc, 1),
		GRT_SYM(Free, 1),
		GRT_SYM(HostMalloc, 1),
		GRT_SYM(HostGetDevicePointer, 1),
		GRT_SYM(HostFree, 1),
		GRT_SYM(PointerGetAttributes, 1),
		GRT_SYM(PointerGetAttribute, 0),
		GRT_SYM(MemGetAddressRange, 1),
		GRT_SYM(IpcGetMemHandle, 1),
		GRT_SYM(IpcOpenMemHandle, 1),
		GRT_SYM(IpcCloseMemHandle, 1),
#undef GRT_SYM
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		*t[i].fn = dlsym(lib, t[i].sym);
		if (!*t[i].fn && t[i].required) {
			snprintf(err, len, "%s lacks %s", GRT_HIP_LIB, t[i].sym);
			goto err_close;
		}
	}
	int n = 0;
	hipError_t e = h.GetDeviceCount(&n);
	if (e != hipSuccess || n == 0) {
		snprintf(err, len, "%s", e != hipSuccess ? h.GetErrorString(e) : "0 devices");
		h.GetLastError();
		goto err_close;
	}
	h.lib = lib;
	return 0;
err_close:
	/* The runtime stays loaded: unloading ROCm's runtime after it started its
	 * threads is not safe, and a failed init is never retried anyway. */
	memset(&h, 0, sizeof(h));
	return -WEFT_ERR_NO_DEVICE;
}

/* Every entry point below needs the table: a call before a successful
 * grt_init is refused rather than jumping through NULL. */
#define NEED_RT()                                                                                                   \
	do {                                                                                                        \
		if (grt_init() != 0)                                                                                \
			return -WEFT_ERR_NO_DEVICE;                                                                 \
	} while (0)
#define NEED_RT_VOID()                                                                                              \
	do {                                                                                                        \
		if (grt_init() != 0)                                                                                \
			return;                                                                                     \
	} while (0)

/* --------------------------------------------------------------- devices */
int grt_device_count(int *n)
{
	NEED_RT();
	return RT(h.GetDeviceCount(n), "hipGetDeviceCount");
}

int grt_set_device(int dev)
{
	NEED_RT();
	return RT(h.SetDevice(dev), "hipSetDevice");
}

int grt_get_device(int *dev)
{
	NEED_RT();
	return RT(h.GetDevice(dev), "hipGetDevice");
}

int grt_device_name(int dev, char *name, size_t len)
{
	NEED_RT();
	char buf[256];
	/* hipDeviceGetName, not hipGetDeviceProperties: the properties struct
	 * changed layout between ROCm majors. */
	int rc = RT(h.DeviceGetName(buf, (int)sizeof(buf), dev), "hipDeviceGetName");
	if (rc == 0)
		snprintf(name, len, "%s", buf);
	return rc;
}

int grt_device_pci(int dev, char *pci, size_t len)
{
	NEED_RT();
	char buf[32];
	int rc = RT(h.DeviceGetPCIBusId(buf, (int)sizeof(buf), dev), "hipDeviceGetPCIBusId");
	if (rc == 0)
		snprintf(pci, len, "%s", buf);
	return rc;
}

int grt_p2p_info(int dev, int peer, int *access, const char **link, int *rank)
{
	NEED_RT();
	int a = 0, atom = 0, r = 0;
	int rc = RT(h.DeviceCanAccessPeer(&a, dev, peer), "hipDeviceCanAccessPeer");
	if (rc != 0)
		return rc;
	const char *l = "none";
	if (a) {
		rc = RT(h.DeviceGetP2PAttribute(&r, hipDevP2PAttrPerformanceRank, dev, peer),
			"hipDeviceGetP2PAttribute(rank)");
		if (rc != 0)
			return rc;
		uint32_t type = 0, hops = 0;
		if (h.ExtGetLinkTypeAndHopCount && h.ExtGetLinkTypeAndHopCount(dev, peer, &type, &hops) == hipSuccess) {
			/* The runtime names the link: xGMI (Infinity Fabric) or PCIe. */
			l = type == GRT_HIP_LINK_XGMI ? "xgmi" : "pcie";
		} else {
			h.GetLastError();
			/* Without the link query: native atomics across the link mean xGMI. */
			rc = RT(h.DeviceGetP2PAttribute(&atom, hipDevP2PAttrNativeAtomicSupported, dev, peer),
				"hipDeviceGetP2PAttribute(atomics)");
			if (rc != 0)
				return rc;
			l = atom ? "xgmi" : "pcie";
		}
	}
	*access = a;
	*link = l;
	*rank = r;
	return 0;
}

int grt_enable_peer(int peer)
{
	NEED_RT();
	hipError_t e = h.DeviceEnablePeerAccess(peer, 0);
	if (e == hipErrorPeerAccessAlreadyEnabled) {
		h.GetLastError();
		return 0;
	}
	return RT(e, "hipDeviceEnablePeerAccess");
}

/* ------------------------------------------------------- streams, events */
int grt_stream_create(void **stream)
{
	NEED_RT();
	hipStream_t s;
	int rc = RT(h.StreamCreateWithFlags(&s, hipStreamNonBlocking), "hipStreamCreate");
	if (rc == 0)
		*stream = s;
	return rc;
}

void grt_stream_destroy(void *stream)
{
	NEED_RT_VOID();
	if (stream)
		RT(h.StreamDestroy((hipStream_t)stream), "hipStreamDestroy");
}

int grt_stream_sync(void *stream)
{
	NEED_RT();
	return RT(h.StreamSynchronize((hipStream_t)stream), "hipStreamSynchronize");
}

int grt_event_create(void **event)
{
	NEED_RT();
	hipEvent_t e;
	int rc = RT(h.EventCreateWithFlags(&e, hipEventDisableTiming), "hipEventCreate");
	if (rc == 0)
		*event = e;
	return rc;
}

int grt_event_create_timed(void **event)
{
	NEED_RT();
	hipEvent_t e;
	int rc = RT(h.EventCreate(&e), "hipEventCreate");
	if (rc == 0)
		*event = e;
	return rc;
}

void grt_event_destroy(void *event)
{
	NEED_RT_VOID();
	if (event)
		RT(h.EventDestroy((hipEvent_t)event), "hipEventDestroy");
}

int grt_event_record(void *event, void *stream)
{
	NEED_RT();
	return RT(h.EventRecord((hipEvent_t)event, (hipStream_t)stream), "hipEventRecord");
}

int grt_event_query(void *event)
{
	NEED_RT();
	return RT(h.EventQuery((hipEvent_t)event), "hipEventQuery");
}

int grt_event_sync(void *event)
{
	NEED_RT();
	return RT(h.EventSynchronize((hipEvent_t)event), "hipEventSynchronize");
}

int grt_event_elapsed(void *start, void *end, float *ms)
{
	NEED_RT();
	return RT(h.EventElapsedTime(ms, (hipEvent_t)start, (hipEvent_t)end), "hipEventElapsedTime");
}

/* ------------------------------------------------------------------ copies */
int grt_memcpy_async(void *dst, const void *src, size_t len, void *stream)
{
	NEED_RT();
	return RT(h.MemcpyAsync(dst, src, len, hipMemcpyDefault, (hipStream_t)stream), "hipMemcpyAsync");
}

int grt_memcpy(void *dst, const void *src, size_t len)
{
	NEED_RT();
	return RT(h.Memcpy(dst, src, len, hipMemcpyDefault), "hipMemcpy");
}

int grt_memset(void *dst, int value, size_t len)
{
	NEED_RT();
	int rc = RT(h.Memset(dst, value, len), "hipMemset");
	return rc ? rc : RT(h.StreamSynchronize((hipStream_t)0), "hipStreamSynchronize");
}

int grt__rt_write_value64(void *stream, void *addr, uint64_t value)
{
	if (!h.StreamWriteValue64)
		return -ENOTSUP;
	hipError_t e = h.StreamWriteValue64((hipStream_t)stream, addr, value, 0);
	if (e == hipErrorNotSupported) {
		h.GetLastError();
		h.StreamWriteValue64 = NULL; /* fall back for good */
		return -ENOTSUP;
	}
	return RT(e, "hipStreamWriteValue64");
}

/* ------------------------------------------------------------------ memory */
int grt_malloc(void **ptr, size_t bytes)
{
	NEED_RT();
	return RT(h.Malloc(ptr, bytes), "hipMalloc");
}

void grt_free(void *ptr)
{
	NEED_RT_VOID();
	if (ptr)
		RT(h.Free(ptr), "hipFree");
}

int grt_host_alloc_mapped(size_t bytes, void **host, void **dev)
{
	NEED_RT();
	void *hp, *dv;
	/* Coherent (fine-grained) by default in ROCm: device stores and host
	 * loads meet without explicit flushes, which the FIFO and flags need. */
	int rc = RT(h.HostMalloc(&hp, bytes, hipHostMallocMapped | hipHostMallocPortable), "hipHostMalloc");
	if (rc != 0)
		return rc;
	rc = RT(h.HostGetDevicePointer(&dv, hp, 0), "hipHostGetDevicePointer");
	if (rc != 0) {
		h.HostFree(hp);
		return rc;
	}
	memset(hp, 0, bytes);
	*host = hp;
	*dev = dv;
	return 0;
}

void grt_host_free(void *host)
{
	NEED_RT_VOID();
	if (host)
		RT(h.HostFree(host), "hipHostFree");
}

int grt_ptr_info(const void *ptr, struct grt_ptr_info *info)
{
	if (grt_init() != 0)
		return -ENOENT;
	hipPointerAttribute_t a;
	hipError_t e = h.PointerGetAttributes(&a, ptr);
	if (e != hipSuccess) {
		h.GetLastError(); /* ROCm 5 answers hipErrorInvalidValue for unregistered host memory */
		return -ENOENT;
	}
	struct grt_ptr_info o = {.kind = GRT_MEM_UNKNOWN, .device = -1};
	if (a.isManaged) {
		o.kind = GRT_MEM_MANAGED;
		o.device = a.device;
	} else if (a.memoryType == hipMemoryTypeDevice) {
		o.kind = GRT_MEM_DEVICE;
		o.device = a.device;
	} else if (a.memoryType == hipMemoryTypeHost) {
		o.kind = GRT_MEM_HOST;
	} else {
		*info = o;
		return 0;
	}
	if (o.kind == GRT_MEM_DEVICE) {
		hipDeviceptr_t base = NULL;
		size_t size = 0;
		if (h.MemGetAddressRange(&base, &size, (hipDeviceptr_t)(uintptr_t)ptr) == hipSuccess) {
			o.base = (uintptr_t)base;
			o.size = size;
		} else {
			h.GetLastError();
		}
		unsigned long long id = 0;
		if (h.PointerGetAttribute &&
		    h.PointerGetAttribute(&id, HIP_POINTER_ATTRIBUTE_BUFFER_ID, (hipDeviceptr_t)(uintptr_t)ptr) ==
			    hipSuccess)
			o.buffer_id = id;
		else
			h.GetLastError();
		/* hipMalloc memory is what hipIpcGetMemHandle exports; the export
		 * itself is the check (it fails on anything else, with a message). */
		o.legacy_ipc = o.base != 0;
		o.vmm_fd = 0; /* VMM export is not implemented for HIP (see below) */
	}
	*info = o;
	return 0;
}

/* -------------------------------------------------------------- legacy IPC */
int grt_ipc_get(void *base, void *handle)
{
	NEED_RT();
	hipIpcMemHandle_t ih;
	_Static_assert(sizeof(ih) == GRT_IPC_HANDLE_BYTES, "IPC handle size");
	int rc = RT(h.IpcGetMemHandle(&ih, base), "hipIpcGetMemHandle");
	if (rc == 0)
		memcpy(handle, &ih, sizeof(ih));
	return rc;
}

int grt_ipc_open(const void *handle, void **ptr)
{
	NEED_RT();
	hipIpcMemHandle_t ih;
	memcpy(&ih, handle, sizeof(ih));
	return RT(h.IpcOpenMemHandle(ptr, ih, hipIpcMemLazyEnablePeerAccess), "hipIpcOpenMemHandle");
}

int grt_ipc_close(void *ptr)
{
	NEED_RT();
	return RT(h.IpcCloseMemHandle(ptr), "hipIpcCloseMemHandle");
}

/* --------------------------------------------------------------------- VMM
 * Not implemented for HIP: ROCm 5's hipMemCreate family cannot export POSIX
 * fds, and nothing here could test it. Callers get -ENOTSUP, and grt_ptr_info
 * never reports vmm_fd, so the xgmi plugin never asks. */
int grt_vmm_range(const void *ptr, uintptr_t *base, size_t *size)
{
	return -ENOTSUP;
}

int grt_vmm_export_fd(uintptr_t base, int *fd)
{
	return -ENOTSUP;
}

int grt_vmm_import_fds(const int *fds, const size_t *sizes, int n, int dev, void **ptr)
{
	return -ENOTSUP;
}

int grt_vmm_unmap(void *ptr, const size_t *sizes, int n)
{
	return -ENOTSUP;
}

int grt_vmm_alloc(size_t bytes, int nchunks, int dev, void **ptr, size_t *total)
{
	return -ENOTSUP;
}

int grt_vmm_granularity(int dev, size_t *gran)
{
	return -ENOTSUP;
}
