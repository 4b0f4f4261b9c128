/* SPDX-License-Identifier: Apache-2.0 */
/* ofi plugin: the table of calls that decide device memory (struct
 * ofi_sys_ops): libfabric's, and the CUDA driver's pointer lookup, which is
 * loaded at run time so that the plugin needs no CUDA to build or load. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "ofi.h"

static int s_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		     const struct fi_info *hints, struct fi_info **info)
{
	return fi_getinfo(version, node, service, flags, hints, info);
}

static int s_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain, void *context)
{
	return fi_domain(fabric, info, domain, context);
}

static int s_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep, void *context)
{
	return fi_endpoint(domain, info, ep, context);
}

static int s_mr_regattr(struct fid_domain *domain, const struct fi_mr_attr *attr, uint64_t flags, struct fid_mr **mr)
{
	return fi_mr_regattr(domain, attr, flags, mr);
}

/* The driver's own types and values (cuda.h), so that nothing here needs the
 * CUDA headers: CUresult is an int, CUdeviceptr 64 bits. */
#define OFI_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
typedef int (*ofi_cu_init_fn)(unsigned int flags);
typedef int (*ofi_cu_ptr_attr_fn)(void *data, int attribute, unsigned long long ptr);
typedef int (*ofi_cu_err_str_fn)(int res, const char **str);

static struct {
	pthread_once_t once;
	ofi_cu_ptr_attr_fn ptr_attr;
	ofi_cu_err_str_fn err_str;
	char why[192]; /* why ptr_attr is NULL */
} cu = {.once = PTHREAD_ONCE_INIT};

/* The driver stays loaded for the life of the process: CUDA memory exists
 * only where a runtime already has it loaded, so this only adds a reference. */
static void cu_load(void)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(cu.why, sizeof(cu.why), "no CUDA driver: %s", dlerror());
		return;
	}
	ofi_cu_init_fn init = (ofi_cu_init_fn)dlsym(lib, "cuInit");
	ofi_cu_ptr_attr_fn ptr_attr = (ofi_cu_ptr_attr_fn)dlsym(lib, "cuPointerGetAttribute");
	cu.err_str = (ofi_cu_err_str_fn)dlsym(lib, "cuGetErrorString");
	if (!init || !ptr_attr) {
		snprintf(cu.why, sizeof(cu.why), "libcuda.so.1 lacks cuInit or cuPointerGetAttribute");
		return;
	}
	int rc = init(0);
	if (rc != 0) {
		const char *s = NULL;
		if (cu.err_str)
			cu.err_str(rc, &s);
		snprintf(cu.why, sizeof(cu.why), "cuInit failed: %s (CUresult %d)", s ? s : "unknown error", rc);
		return;
	}
	cu.ptr_attr = ptr_attr;
}

static int s_cuda_device(const void *ptr, int *dev)
{
	pthread_once(&cu.once, cu_load);
	if (!cu.ptr_attr) {
		OFI_ERR("mem_register: cannot find the CUDA device of %p: %s", ptr, cu.why);
		return -ENOTSUP;
	}
	int ord = -1;
	int rc = cu.ptr_attr(&ord, OFI_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (unsigned long long)(uintptr_t)ptr);
	if (rc != 0) {
		const char *s = NULL;
		if (cu.err_str)
			cu.err_str(rc, &s);
		OFI_ERR("mem_register: %p is no CUDA memory: cuPointerGetAttribute(DEVICE_ORDINAL) failed: %s "
			"(CUresult %d)",
			ptr, s ? s : "unknown error", rc);
		return -EINVAL;
	}
	*dev = ord;
	return 0;
}

static const struct ofi_sys_ops ofi_sys_real = {
	.getinfo = s_getinfo,
	.domain = s_domain,
	.endpoint = s_endpoint,
	.mr_regattr = s_mr_regattr,
	.cuda_device = s_cuda_device,
};

const struct ofi_sys_ops *ofi_sys = &ofi_sys_real;

#ifdef WEFT_TEST_HOOKS
void ofi_set_sys_ops(const struct ofi_sys_ops *ops)
{
	ofi_sys = ops ? ops : &ofi_sys_real;
}
#endif
