/* SPDX-License-Identifier: Apache-2.0 */
/* ib plugin: CUDA memory as dma-buf fds (cuMemGetHandleForAddressRange), for
 * ibv_reg_dmabuf_mr. libcuda.so.1 is loaded on first use, so the plugin needs
 * no CUDA at build or load time. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <weft/weft.h>

#include "ib_dmabuf.h"

#define CUDA_LIB "libcuda.so.1"

/* The driver is loaded and initialized once per process, as libcuda itself
 * is: this state is process-wide, guarded by its lock, and records which
 * process ran cuInit so that a forked child refuses instead of calling into a
 * driver it cannot use. */
static struct {
	pthread_mutex_t lock;
	const struct ibp_cuda_ops *hook; /* a test's double, or NULL */
	pid_t pid;                       /* the process that tried; 0: none yet */
	int rc;                          /* 0: usable; -ENOTSUP: not, for the reason in why */
	char why[256];
	struct ibp_cuda_ops real;
	const struct ibp_cuda_ops *cu; /* &real or hook, once rc is 0 */
} st = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const struct {
	const char *sym;
	size_t off;
} syms[] = {
	{"cuInit", offsetof(struct ibp_cuda_ops, init)},
	{"cuGetErrorName", offsetof(struct ibp_cuda_ops, get_error_name)},
	{"cuGetErrorString", offsetof(struct ibp_cuda_ops, get_error_string)},
	{"cuDeviceGetCount", offsetof(struct ibp_cuda_ops, device_get_count)},
	{"cuDeviceGet", offsetof(struct ibp_cuda_ops, device_get)},
	{"cuDeviceGetAttribute", offsetof(struct ibp_cuda_ops, device_get_attribute)},
	{"cuPointerGetAttribute", offsetof(struct ibp_cuda_ops, pointer_get_attribute)},
	{"cuDevicePrimaryCtxRetain", offsetof(struct ibp_cuda_ops, primary_ctx_retain)},
	{"cuDevicePrimaryCtxRelease_v2", offsetof(struct ibp_cuda_ops, primary_ctx_release)},
	{"cuCtxPushCurrent_v2", offsetof(struct ibp_cuda_ops, ctx_push_current)},
	{"cuCtxPopCurrent_v2", offsetof(struct ibp_cuda_ops, ctx_pop_current)},
	{"cuMemGetHandleForAddressRange", offsetof(struct ibp_cuda_ops, mem_get_handle_for_address_range)},
};

static void say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t len, const char *fmt, ...)
{
	if (!why || len == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

/* "CUDA_ERROR_INVALID_VALUE (invalid argument)", from the driver's own tables. */
static const char *cu_err(const struct ibp_cuda_ops *cu, int r, char *buf, size_t len)
{
	const char *name = NULL, *text = NULL;
	if (cu->get_error_name(r, &name) != IBP_CUDA_SUCCESS)
		name = NULL;
	if (cu->get_error_string(r, &text) != IBP_CUDA_SUCCESS)
		text = NULL;
	if (name)
		snprintf(buf, len, "%s (%s)", name, text ? text : "no description");
	else
		snprintf(buf, len, "CUresult %d", r);
	return buf;
}

/* Fills st.cu from the hook or from libcuda.so.1 and runs cuInit. Called with
 * st.lock held, once per process. */
static int load_and_init(char *why, size_t len)
{
	const struct ibp_cuda_ops *cu = st.hook;
	if (!cu) {
		void *h = dlopen(CUDA_LIB, RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			const char *e = dlerror();
			say(why, len, "the CUDA driver is not loadable (%s)", e ? e : CUDA_LIB);
			return -ENOTSUP;
		}
		for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
			void *fn = dlsym(h, syms[i].sym);
			if (!fn) {
				say(why, len, "%s has no %s (a driver older than CUDA 11.7)", CUDA_LIB, syms[i].sym);
				dlclose(h);
				return -ENOTSUP;
			}
			memcpy((char *)&st.real + syms[i].off, &fn, sizeof(fn));
		}
		/* Kept open for the life of the process: the driver cannot be unloaded
		 * once initialized. */
		cu = &st.real;
	} else {
		for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
			void *fn;
			memcpy(&fn, (const char *)cu + syms[i].off, sizeof(fn));
			if (!fn) {
				say(why, len, "%s has no %s (a driver older than CUDA 11.7)", CUDA_LIB, syms[i].sym);
				return -ENOTSUP;
			}
		}
	}
	int r = cu->init(0);
	if (r != IBP_CUDA_SUCCESS) {
		char e[160];
		if (r == IBP_CUDA_ERROR_NO_DEVICE)
			say(why, len, "no CUDA device (cuInit: %s)", cu_err(cu, r, e, sizeof(e)));
		else
			say(why, len, "cuInit failed: %s", cu_err(cu, r, e, sizeof(e)));
		return -ENOTSUP;
	}
	st.cu = cu;
	return 0;
}

/* The driver table for this process, loading and initializing it the first
 * time; -ENOTSUP with the reason when there is none. */
static int driver(const struct ibp_cuda_ops **cu, char *why, size_t len)
{
	pthread_mutex_lock(&st.lock);
	pid_t me = getpid();
	int rc;
	if (st.pid != me && st.pid != 0 && st.rc == 0) {
		say(why, len,
		    "CUDA was initialized in process %d, which forked this one; a forked child cannot use CUDA "
		    "(initialize it after the fork)",
		    (int)st.pid);
		pthread_mutex_unlock(&st.lock);
		return -ENOTSUP;
	}
	if (st.pid != me) {
		st.pid = me;
		st.why[0] = '\0';
		st.rc = load_and_init(st.why, sizeof(st.why));
	}
	rc = st.rc;
	if (rc == 0)
		*cu = st.cu;
	else
		say(why, len, "%s", st.why);
	pthread_mutex_unlock(&st.lock);
	return rc;
}

void ibp_set_cuda(const struct ibp_cuda_ops *ops)
{
	pthread_mutex_lock(&st.lock);
	st.hook = ops;
	st.pid = 0;
	st.rc = 0;
	st.cu = NULL;
	pthread_mutex_unlock(&st.lock);
}

/* cuMemGetHandleForAddressRange needs a current context on the calling
 * thread, which a registering or proxy thread may not have: the memory's own
 * context is pushed for the call (the device's primary one for memory that
 * belongs to none, as cuMemCreate's), and popped after. */
static int export_range(const struct ibp_cuda_ops *cu, int dev, uint64_t p, struct ibp_dmabuf *d, char *why, size_t len)
{
	char e[160];
	void *ctx = NULL;
	bool primary = false;
	int fd = -1;
	int r = cu->pointer_get_attribute(&ctx, IBP_CU_POINTER_ATTRIBUTE_CONTEXT, p);
	if (r != IBP_CUDA_SUCCESS || !ctx) {
		ctx = NULL;
		if ((r = cu->primary_ctx_retain(&ctx, dev)) != IBP_CUDA_SUCCESS) {
			say(why, len, "cuDevicePrimaryCtxRetain(device %d) failed: %s", dev,
			    cu_err(cu, r, e, sizeof(e)));
			return -WEFT_ERR_TRANSPORT;
		}
		primary = true;
	}
	int rc = 0;
	if ((r = cu->ctx_push_current(ctx)) != IBP_CUDA_SUCCESS) {
		say(why, len, "cuCtxPushCurrent failed: %s", cu_err(cu, r, e, sizeof(e)));
		rc = -WEFT_ERR_TRANSPORT;
		goto err_release;
	}
	r = cu->mem_get_handle_for_address_range(&fd, (unsigned long long)d->base, (size_t)d->size,
						 IBP_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
	if (r != IBP_CUDA_SUCCESS) {
		say(why, len, "cuMemGetHandleForAddressRange(0x%llx, %llu bytes, DMA_BUF_FD) failed: %s",
		    (unsigned long long)d->base, (unsigned long long)d->size, cu_err(cu, r, e, sizeof(e)));
		rc = r == IBP_CUDA_ERROR_NOT_SUPPORTED   ? -ENOTSUP
		     : r == IBP_CUDA_ERROR_INVALID_VALUE ? -EINVAL
							 : -WEFT_ERR_TRANSPORT;
	} else if (fd < 0) {
		say(why, len, "cuMemGetHandleForAddressRange(0x%llx, %llu bytes, DMA_BUF_FD) returned fd %d",
		    (unsigned long long)d->base, (unsigned long long)d->size, fd);
		rc = -WEFT_ERR_TRANSPORT;
	}
	void *popped = NULL;
	if ((r = cu->ctx_pop_current(&popped)) != IBP_CUDA_SUCCESS && rc == 0) {
		say(why, len, "cuCtxPopCurrent failed: %s", cu_err(cu, r, e, sizeof(e)));
		rc = -WEFT_ERR_TRANSPORT;
	}
err_release:
	if (primary && (r = cu->primary_ctx_release(dev)) != IBP_CUDA_SUCCESS && rc == 0) {
		say(why, len, "cuDevicePrimaryCtxRelease(device %d) failed: %s", dev, cu_err(cu, r, e, sizeof(e)));
		rc = -WEFT_ERR_TRANSPORT;
	}
	if (rc == 0)
		d->fd = fd;
	else if (fd >= 0)
		close(fd);
	return rc;
}

int ibp_dmabuf_export(const void *ptr, size_t len, struct ibp_dmabuf *out, char *why, size_t whylen)
{
	const struct ibp_cuda_ops *cu;
	char e[160];
	int rc, r;
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t p = (uint64_t)(uintptr_t)ptr;
	if (!ptr || len == 0 || !out) {
		say(why, whylen, "%s", !ptr ? "NULL pointer" : len == 0 ? "zero length" : "NULL argument");
		return -EINVAL;
	}
	if (pg <= 0 || (pg & (pg - 1)) != 0)
		pg = 4096;
	if (p > UINT64_MAX - (uint64_t)pg || len > UINT64_MAX - (uint64_t)pg - p) {
		say(why, whylen, "%p + %zu bytes wraps around", ptr, len);
		return -EINVAL;
	}
	if ((rc = driver(&cu, why, whylen)) < 0)
		return rc;
	int ordinal = -1;
	r = cu->pointer_get_attribute(&ordinal, IBP_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p);
	if (r != IBP_CUDA_SUCCESS) {
		say(why, whylen, "cuPointerGetAttribute(DEVICE_ORDINAL) of %p failed: %s: not CUDA memory", ptr,
		    cu_err(cu, r, e, sizeof(e)));
		return -EINVAL;
	}
	int dev = -1;
	if ((r = cu->device_get(&dev, ordinal)) != IBP_CUDA_SUCCESS) {
		say(why, whylen, "cuDeviceGet(%d) failed: %s", ordinal, cu_err(cu, r, e, sizeof(e)));
		return -WEFT_ERR_TRANSPORT;
	}
	int supported = 0;
	r = cu->device_get_attribute(&supported, IBP_CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev);
	if (r != IBP_CUDA_SUCCESS) {
		/* A driver that predates the attribute answers CUDA_ERROR_INVALID_VALUE. */
		say(why, whylen, "cuDeviceGetAttribute(DMA_BUF_SUPPORTED) of CUDA device %d failed: %s", ordinal,
		    cu_err(cu, r, e, sizeof(e)));
		return -ENOTSUP;
	}
	if (!supported) {
		say(why, whylen, "CUDA device %d does not support dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)",
		    ordinal);
		return -ENOTSUP;
	}
	/* The driver exports whole host pages: the range grows to page bounds and
	 * the buffer sits at an offset inside the fd. */
	struct ibp_dmabuf d = {.fd = -1, .device = ordinal};
	d.base = p & ~((uint64_t)pg - 1);
	d.size = ((p + len + (uint64_t)pg - 1) & ~((uint64_t)pg - 1)) - d.base;
	d.offset = p - d.base;
	if ((rc = export_range(cu, dev, p, &d, why, whylen)) < 0)
		return rc;
	*out = d;
	return 0;
}

int ibp_dmabuf_devices(char *why, size_t whylen)
{
	const struct ibp_cuda_ops *cu;
	char e[160];
	int n = 0, r;
	if (driver(&cu, why, whylen) < 0)
		return 0;
	if ((r = cu->device_get_count(&n)) != IBP_CUDA_SUCCESS) {
		say(why, whylen, "cuDeviceGetCount failed: %s", cu_err(cu, r, e, sizeof(e)));
		return 0;
	}
	int count = 0;
	bool failed = false;
	for (int i = 0; i < n; i++) {
		int dev = -1, supported = 0;
		if ((r = cu->device_get(&dev, i)) != IBP_CUDA_SUCCESS) {
			say(why, whylen, "cuDeviceGet(%d) failed: %s", i, cu_err(cu, r, e, sizeof(e)));
			failed = true;
			continue;
		}
		r = cu->device_get_attribute(&supported, IBP_CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev);
		if (r != IBP_CUDA_SUCCESS) {
			say(why, whylen, "cuDeviceGetAttribute(DMA_BUF_SUPPORTED) of CUDA device %d failed: %s", i,
			    cu_err(cu, r, e, sizeof(e)));
			failed = true;
			continue;
		}
		if (supported)
			count++;
	}
	if (n == 0)
		say(why, whylen, "no CUDA device (cuDeviceGetCount: 0)");
	else if (count == 0 && !failed)
		say(why, whylen, "no CUDA device of %d supports dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)",
		    n);
	return count;
}
