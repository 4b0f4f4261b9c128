/* SPDX-License-Identifier: Apache-2.0 */
/* The xgmi plugin on a host without an AMD GPU (CI): it loads, weft-info lists
 * it and says "no AMD GPU"; and the HIP test kernel of include/weft/device.h
 * was compiled to AMD GPU code for the configured architecture. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"

#ifndef WEFT_INFO_PATH
#error "WEFT_INFO_PATH must name the built weft-info"
#endif

/* Kernels of tests/hip/device_api.hip, each calling part of device.h. */
static const char *const kernels[] = {"weft_hip_memchan", "weft_hip_raw", "weft_hip_ll", "weft_hip_port"};

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	struct stat st;
	char *buf = NULL;
	if (fstat(fileno(f), &st) == 0 && st.st_size > 0 && (buf = malloc((size_t)st.st_size)) != NULL &&
	    fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		free(buf);
		buf = NULL;
	}
	if (buf)
		*len = (size_t)st.st_size;
	fclose(f);
	return buf;
}

static int contains(const char *buf, size_t len, const char *s)
{
	return memmem(buf, len, s, strlen(s)) != NULL;
}

START_TEST(test_info_lists_xgmi)
{
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "WEFT_PLUGIN_PATH='%s' '%s'", WEFT_XGMI_PLUGIN_DIR, WEFT_INFO_PATH);
	int st = 0;
	char *out = wt_run_capture(cmd, &st);
	ck_assert_ptr_nonnull(out);
	ck_assert_msg(st == 0, "weft-info failed (%d):\n%s", st, out);
	const char *line = strstr(out, "libweft-xgmi.so");
	ck_assert_msg(line != NULL && strstr(out, "xgmi ") != NULL, "weft-info does not list xgmi:\n%s", out);
	int nodev = strstr(out, "no AMD GPU") != NULL;
	if (access("/dev/kfd", F_OK) != 0) {
		ck_assert_msg(nodev, "no /dev/kfd here, yet weft-info does not say \"no AMD GPU\":\n%s", out);
	} else {
		/* An AMD GPU host: either a device list or, without a usable runtime, the same text. */
		ck_assert_msg(nodev || strstr(out, "AMD GPU") != NULL,
			      "weft-info says neither what xgmi found nor that it found nothing:\n%s", out);
	}
	free(out);
}
END_TEST

/* Without ROCm installed (the runtime library absent): the plugin still loads,
 * and says why it found no AMD GPU. */
START_TEST(test_info_without_rocm)
{
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "WEFT_PLUGIN_PATH='%s' '%s'", WEFT_XGMI_NOROCM_DIR, WEFT_INFO_PATH);
	int st = 0;
	char *out = wt_run_capture(cmd, &st);
	ck_assert_ptr_nonnull(out);
	ck_assert_msg(st == 0, "weft-info failed (%d):\n%s", st, out);
	ck_assert_msg(strstr(out, "xgmi-norocm/libweft-xgmi.so\n") != NULL,
		      "weft-info did not load the test copy of xgmi:\n%s", out);
	ck_assert_msg(strstr(out, "no AMD GPU (libamdhip64-weft-test-absent.so") != NULL,
		      "weft-info does not say that the HIP runtime is missing:\n%s", out);
	free(out);
}
END_TEST

/* The offload bundle names its targets in its header: the object must hold
 * code for the configured architecture, and the kernels by name. */
START_TEST(test_kernel_object_built)
{
	size_t len = 0;
	char *obj = read_file(WEFT_HIP_KERNEL_OBJ, &len);
	ck_assert_msg(obj != NULL, "the HIP test kernel %s was not built (or is empty)", WEFT_HIP_KERNEL_OBJ);
	ck_assert_msg(contains(obj, len, "__CLANG_OFFLOAD_BUNDLE__"), "%s is no clang offload bundle",
		      WEFT_HIP_KERNEL_OBJ);
	ck_assert_msg(contains(obj, len, "amdgcn-amd-amdhsa--" WEFT_HIP_ARCH),
		      "%s holds no code object for " WEFT_HIP_ARCH, WEFT_HIP_KERNEL_OBJ);
	for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++)
		ck_assert_msg(contains(obj, len, kernels[i]), "%s lacks kernel %s", WEFT_HIP_KERNEL_OBJ, kernels[i]);
	free(obj);
}
END_TEST

/* With roc-obj-ls: the tool's own listing of the bundle names the target. */
START_TEST(test_kernel_roc_obj_ls)
{
	if (WEFT_ROC_OBJ_LS[0] == '\0')
		return; /* the tool is absent: test_kernel_object_built read the bundle itself */
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "'%s' '%s' 2>&1", WEFT_ROC_OBJ_LS, WEFT_HIP_KERNEL_OBJ);
	int st = 0;
	char *out = wt_run_capture(cmd, &st);
	ck_assert_ptr_nonnull(out);
	ck_assert_msg(st == 0 && strstr(out, "amdgcn-amd-amdhsa--" WEFT_HIP_ARCH) != NULL,
		      "roc-obj-ls lists no " WEFT_HIP_ARCH " code object (%d):\n%s", st, out);
	free(out);
}
END_TEST

/* The offload bundle itself (clang's format: magic, u64 count, then per entry
 * u64 offset, u64 size, u64 triple length, triple; offsets from the magic):
 * the entry for the architecture is an AMDGPU ELF (e_machine 224) that
 * defines every kernel. Read here so no LLVM tool is needed. */
static const char *bundle_entry(const char *obj, size_t len, const char *triple, size_t *size)
{
	static const char magic[] = "__CLANG_OFFLOAD_BUNDLE__";
	const char *b = memmem(obj, len, magic, sizeof(magic) - 1);
	if (!b)
		return NULL;
	size_t avail = len - (size_t)(b - obj), at = sizeof(magic) - 1;
	uint64_t n, off, sz, tl;
	if (avail < at + 8)
		return NULL;
	memcpy(&n, b + at, 8);
	at += 8;
	for (uint64_t i = 0; i < n && n < 64; i++) {
		if (avail - at < 24)
			return NULL;
		memcpy(&off, b + at, 8);
		memcpy(&sz, b + at + 8, 8);
		memcpy(&tl, b + at + 16, 8);
		at += 24;
		if (tl > avail - at)
			return NULL;
		if (tl == strlen(triple) && memcmp(b + at, triple, tl) == 0) {
			if (off > avail || sz > avail - off)
				return NULL;
			*size = sz;
			return b + off;
		}
		at += tl;
	}
	return NULL;
}

START_TEST(test_kernel_code_object)
{
	size_t len = 0, colen = 0;
	char *obj = read_file(WEFT_HIP_KERNEL_OBJ, &len);
	ck_assert_msg(obj != NULL, "the HIP test kernel %s was not built (or is empty)", WEFT_HIP_KERNEL_OBJ);
	const char *co = bundle_entry(obj, len, "hipv4-amdgcn-amd-amdhsa--" WEFT_HIP_ARCH, &colen);
	ck_assert_msg(co != NULL, "%s: no well-formed bundle entry for " WEFT_HIP_ARCH, WEFT_HIP_KERNEL_OBJ);
	ck_assert_msg(colen > 64 && memcmp(co, "\177ELF", 4) == 0, "the " WEFT_HIP_ARCH " code object is not an ELF file");
	uint16_t machine;
	memcpy(&machine, co + 18, sizeof(machine));
	ck_assert_msg(machine == 224, "the code object's e_machine is %u, not EM_AMDGPU (224)", machine);
	for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++)
		ck_assert_msg(contains(co, colen, kernels[i]), "the " WEFT_HIP_ARCH " code lacks kernel %s", kernels[i]);
	free(obj);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("xgmi_nodev");
	TCase *tc = tcase_create("info");
	tcase_add_test(tc, test_info_lists_xgmi);
	tcase_add_test(tc, test_info_without_rocm);
	suite_add_tcase(s, tc);
	TCase *tk = tcase_create("kernel");
	tcase_add_test(tk, test_kernel_object_built);
	tcase_add_test(tk, test_kernel_roc_obj_ls);
	tcase_add_test(tk, test_kernel_code_object);
	suite_add_tcase(s, tk);
	return wt_run_suite(s);
}
