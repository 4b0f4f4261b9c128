/* SPDX-License-Identifier: Apache-2.0 */
/* The ib plugin's dma-buf export (plugins/ib/ib_dmabuf.c, linked in) on real
 * CUDA memory: the device reports dma-buf, and cudaMalloc memory, aligned or
 * not, from the allocating thread or from one with no current context, comes
 * back as an fd that fstat and lseek accept, at least as large as the pages
 * asked for, and that closes cleanly. Needs no RDMA device. Skips (77)
 * without a GPU unless WEFT_REQUIRE_GPU=1. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "../../plugins/ib/ib_dmabuf.h"
#include "testlib.h"

/* ib_dmabuf.h spells out the few cuda.h values it needs. */
_Static_assert(IBP_CUDA_SUCCESS == CUDA_SUCCESS, "CUDA_SUCCESS");
_Static_assert(IBP_CUDA_ERROR_INVALID_VALUE == CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE");
_Static_assert(IBP_CUDA_ERROR_NO_DEVICE == CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE");
_Static_assert(IBP_CUDA_ERROR_NOT_SUPPORTED == CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED");
_Static_assert(IBP_CU_POINTER_ATTRIBUTE_CONTEXT == CU_POINTER_ATTRIBUTE_CONTEXT, "CU_POINTER_ATTRIBUTE_CONTEXT");
_Static_assert(IBP_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
	       "CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL");
_Static_assert(IBP_CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED == CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
	       "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED");
_Static_assert(IBP_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD == CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
	       "CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD");

#define CK_CUDA(call)                                                                                                 \
	do {                                                                                                          \
		cudaError_t e_ = (call);                                                                              \
		ck_assert_msg(e_ == cudaSuccess, "%s: %s (%s)", #call, cudaGetErrorName(e_), cudaGetErrorString(e_)); \
	} while (0)

#define ALLOC (4u << 20)

static uint64_t page(void)
{
	return (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Prints the kernel's view of a dma-buf fd (exp_name names the exporter). */
static void show_fdinfo(int fd)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "size:", 5) == 0 || strncmp(line, "exp_name:", 9) == 0)
			printf("  fd %d %s", fd, line);
	fclose(f);
}

/* Exports [ptr, ptr + len), checks the range and the fd, closes it. Returns a
 * message, or NULL when all held (for use from a thread without Check). */
static const char *export_and_check(void *ptr, size_t len, int device, char *msg, size_t mlen)
{
	struct ibp_dmabuf d;
	char why[320] = "";
	uint64_t pg = page(), p = (uint64_t)(uintptr_t)ptr;
	uint64_t base = p & ~(pg - 1), end = (p + len + pg - 1) & ~(pg - 1);
	int rc = ibp_dmabuf_export(ptr, len, &d, why, sizeof(why));
	if (rc != 0) {
		snprintf(msg, mlen, "export of %p + %zu: %d: %s", ptr, len, rc, why);
		return msg;
	}
	if (d.fd < 0 || d.base != base || d.size != end - base || d.offset != p - base || d.device != device) {
		snprintf(msg, mlen,
			 "export of %p + %zu: fd %d, base %#llx (want %#llx), size %llu (want %llu), offset %llu, "
			 "device %d (want %d)",
			 ptr, len, d.fd, (unsigned long long)d.base, (unsigned long long)base,
			 (unsigned long long)d.size, (unsigned long long)(end - base), (unsigned long long)d.offset,
			 d.device, device);
		if (d.fd >= 0)
			close(d.fd);
		return msg;
	}
	struct stat sb;
	if (fstat(d.fd, &sb) != 0) {
		snprintf(msg, mlen, "fstat of dma-buf fd %d: %s", d.fd, strerror(errno));
		close(d.fd);
		return msg;
	}
	/* A dma-buf reports its size through lseek(SEEK_END). */
	off_t size = lseek(d.fd, 0, SEEK_END);
	if (size < 0 || (uint64_t)size < d.size) {
		snprintf(msg, mlen, "lseek(SEEK_END) of dma-buf fd %d: %lld (%s), want at least %llu", d.fd,
			 (long long)size, size < 0 ? strerror(errno) : "too small", (unsigned long long)d.size);
		close(d.fd);
		return msg;
	}
	printf("export %p + %zu: fd %d, pages %#llx + %llu, offset %llu, lseek %lld\n", ptr, len, d.fd,
	       (unsigned long long)d.base, (unsigned long long)d.size, (unsigned long long)d.offset, (long long)size);
	show_fdinfo(d.fd);
	if (close(d.fd) != 0) {
		snprintf(msg, mlen, "close of dma-buf fd %d: %s", d.fd, strerror(errno));
		return msg;
	}
	return NULL;
}

START_TEST(device_reports_dmabuf)
{
	/* Before any runtime call: the export's own loader initializes CUDA. */
	char why[320] = "";
	int n = ibp_dmabuf_devices(why, sizeof(why));
	ck_assert_msg(n >= 1, "no CUDA device with dma-buf: %s", why);
	int count = 0;
	CK_CUDA(cudaGetDeviceCount(&count));
	printf("%d of %d CUDA devices report dma-buf\n", n, count);
	ck_assert_int_le(n, count);
}
END_TEST

START_TEST(export_cudamalloc)
{
	int dev = -1;
	CK_CUDA(cudaGetDevice(&dev));
	unsigned char *buf = NULL;
	CK_CUDA(cudaMalloc((void **)&buf, ALLOC));
	size_t pg = (size_t)page();
	char msg[512];
	const struct {
		size_t off, len;
	} cases[] = {
		{0, ALLOC},              /* the whole allocation */
		{0, 1u << 20},           /* aligned */
		{100, 5000},             /* neither end aligned */
		{pg - 1, 2},             /* two bytes across a page boundary */
		{3 * pg + 7, 1},         /* one byte */
		{ALLOC - pg + 1, pg - 1} /* up to the allocation's last byte */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *bad = export_and_check(buf + cases[i].off, cases[i].len, dev, msg, sizeof(msg));
		ck_assert_msg(bad == NULL, "case %zu: %s", i, bad);
	}
	CK_CUDA(cudaFree(buf));
}
END_TEST

struct thread_arg {
	void *ptr;
	size_t len;
	int dev;
	const char *bad;
	char msg[512];
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;
	a->bad = export_and_check(a->ptr, a->len, a->dev, a->msg, sizeof(a->msg));
	return NULL;
}

START_TEST(export_from_thread_without_context)
{
	/* A thread that never made a CUDA call has no current context; the
	 * export makes the memory's own current for the driver call. */
	struct thread_arg a = {0};
	CK_CUDA(cudaGetDevice(&a.dev));
	unsigned char *buf = NULL;
	CK_CUDA(cudaMalloc((void **)&buf, ALLOC));
	a.ptr = buf + 4096 + 12;
	a.len = 65536;
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, thread_main, &a), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(a.bad == NULL, "%s", a.bad);
	CK_CUDA(cudaFree(buf));
}
END_TEST

START_TEST(refuses_host_memory)
{
	CK_CUDA(cudaFree(NULL)); /* initialize the runtime */
	static unsigned char host[8192];
	struct ibp_dmabuf d;
	char why[320] = "";
	ck_assert_int_eq(ibp_dmabuf_export(host + 10, 100, &d, why, sizeof(why)), -EINVAL);
	ck_assert_msg(strstr(why, "cuPointerGetAttribute(DEVICE_ORDINAL)") && strstr(why, "not CUDA memory"), "%s",
		      why);
	printf("host memory refused: %s\n", why);
}
END_TEST

START_TEST(forked_child_refused)
{
	unsigned char *buf = NULL;
	int dev = -1;
	CK_CUDA(cudaGetDevice(&dev));
	CK_CUDA(cudaMalloc((void **)&buf, ALLOC));
	char msg[512];
	const char *bad = export_and_check(buf, 8192, dev, msg, sizeof(msg));
	ck_assert_msg(bad == NULL, "%s", bad);
	fflush(NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* No driver call here: the export refuses first. */
		struct ibp_dmabuf d;
		char why[320] = "";
		int rc = ibp_dmabuf_export(buf, 8192, &d, why, sizeof(why));
		int ok = rc == -ENOTSUP && strstr(why, "a forked child cannot use CUDA") != NULL;
		if (!ok)
			fprintf(stderr, "child: export returned %d: %s\n", rc, why);
		fflush(NULL);
		_exit(ok ? 0 : 1);
	}
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the forked child was not refused (status %d)", st);
	CK_CUDA(cudaFree(buf));
}
END_TEST

START_TEST(small_allocation_tail)
{
	/* The last bytes of an allocation that is not a whole number of pages:
	 * the page-aligned range runs past its end. The driver may export it or
	 * refuse it; a refusal names the call and leaves no fd. Either is printed. */
	int dev = -1;
	CK_CUDA(cudaGetDevice(&dev));
	unsigned char *buf = NULL;
	CK_CUDA(cudaMalloc((void **)&buf, 10000));
	struct ibp_dmabuf d;
	char why[320] = "";
	int rc = ibp_dmabuf_export(buf + 9000, 1000, &d, why, sizeof(why));
	if (rc == 0) {
		char msg[512];
		printf("tail of a 10000-byte allocation: exported (pages %#llx + %llu)\n", (unsigned long long)d.base,
		       (unsigned long long)d.size);
		ck_assert_int_eq(close(d.fd), 0);
		const char *bad = export_and_check(buf + 9000, 1000, dev, msg, sizeof(msg));
		ck_assert_msg(bad == NULL, "%s", bad);
	} else {
		printf("tail of a 10000-byte allocation: refused: %d: %s\n", rc, why);
		ck_assert_msg(rc == -EINVAL || rc == -ENOTSUP, "%d: %s", rc, why);
		ck_assert_msg(strstr(why, "cuMemGetHandleForAddressRange(") != NULL, "%s", why);
	}
	CK_CUDA(cudaFree(buf));
}
END_TEST

/* CUDA must not be initialized in the parent: Check forks each test. */
static int probe_gpu(void)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int n = 0;
		cudaError_t e = cudaGetDeviceCount(&n);
		if (e == cudaSuccess && n > 0)
			_exit(0);
		const char *why = e != cudaSuccess ? cudaGetErrorString(e) : "0 devices";
		const char *req = getenv("WEFT_REQUIRE_GPU");
		if (req && strcmp(req, "1") == 0) {
			fprintf(stderr, "FAIL: WEFT_REQUIRE_GPU=1 but no CUDA device: %s\n", why);
			_exit(1);
		}
		printf("SKIP: no CUDA device (%s)\n", why);
		fflush(stdout);
		_exit(77);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return 1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(void)
{
	int rc = probe_gpu();
	if (rc != 0)
		return rc;
	Suite *s = suite_create("ib_dmabuf_gpu");
	TCase *tc = tcase_create("dmabuf");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, device_reports_dmabuf);
	tcase_add_test(tc, export_cudamalloc);
	tcase_add_test(tc, export_from_thread_without_context);
	tcase_add_test(tc, small_allocation_tail);
	tcase_add_test(tc, refuses_host_memory);
	tcase_add_test(tc, forked_child_refused);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
