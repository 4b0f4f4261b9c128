/* SPDX-License-Identifier: Apache-2.0 */
/* libweft_nccl on device buffers, 2 forked ranks sharing the first GPU (or one
 * GPU each where there are two): ncclMemAlloc gives VMM memory with a POSIX
 * fd handle (what nvlink exports and algo-gpu's direct paths map without the
 * legacy-IPC remap case), ncclMemFree refuses pointers it did not make;
 * allreduce on ncclMemAlloc buffers freed and allocated again between calls;
 * allreduce in windows (ncclCommWindowRegister), out of place and in place,
 * 1 MiB through allreduce-direct (WEFT_ALGO_GPU_DIRECT_ALLREDUCE_MIN=1M, set
 * by tests/gpu.cmake), against a host reference on random data; and a rank
 * whose in-place buffer lies at another offset of the window, or outside it:
 * every rank gets an error, from the call or from the communicator right
 * after. Skips (77) without a GPU unless WEFT_REQUIRE_GPU=1. */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nccl.h>

#include "../nccl_check.h"
#include "../testlib.h"
#include "gpu_common.h"

#define NR 2
#define COUNT (256 * 1024 + 3) /* int32: a little over 1 MiB, an odd tail */
#define JOB_TIMEOUT 120

static ncclUniqueId g_id;
static int g_ndev;

#define CUOK(call)                                                                                \
	do {                                                                                      \
		cudaError_t e_ = (call);                                                          \
		RCHECK(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));               \
	} while (0)

static int init(int rank, ncclComm_t *comm)
{
	CUOK(cudaSetDevice(rank % (g_ndev > 0 ? g_ndev : 1)));
	NOK(ncclCommInitRank(comm, NR, g_id, rank));
	return 0;
}

/* Fills n elements at dev with round k's data of this rank. */
static int fill(int rank, int32_t *dev, size_t n, int k, int32_t *h)
{
	for (size_t i = 0; i < n; i++)
		h[i] = wt_nccl_data(rank, i, k);
	CUOK(cudaMemcpy(dev, h, n * sizeof(*h), cudaMemcpyHostToDevice));
	return 0;
}

static int check(int rank, const int32_t *dev, size_t n, int k, int32_t *h, const char *what)
{
	CUOK(cudaMemcpy(h, dev, n * sizeof(*h), cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < n; i++) {
		int32_t want = 0;
		for (int r = 0; r < NR; r++)
			want += wt_nccl_data(r, i, k);
		RCHECK(h[i] == want, "%s: [%zu] = %d, want %d", what, i, h[i], want);
	}
	return 0;
}

/* ncclMemAlloc's memory: device memory whose allowed handle types include
 * POSIX file descriptors; refusals of foreign and freed pointers. */
static int memalloc_rank(int rank, int n, void *arg)
{
	(void)n;
	(void)arg;
	CUOK(cudaSetDevice(rank % (g_ndev > 0 ? g_ndev : 1)));
	void *p = NULL, *plain = NULL, *f = NULL;
	NOK(ncclMemAlloc(&p, 3 * 1000 * 1000 + 1));
	CUOK(cudaMemset(p, 7, 3 * 1000 * 1000 + 1));
	enum cudaDriverEntryPointQueryResult q;
	CUOK(cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", &f, 12000, cudaEnableDefault, &q));
	RCHECK(f && q == cudaDriverEntryPointSuccess, "no cuPointerGetAttribute");
	CUresult (*attr)(void *, CUpointer_attribute, CUdeviceptr) = (CUresult(*)(void *, CUpointer_attribute,
										    CUdeviceptr))f;
	unsigned long long handles = 0;
	int legacy = 1;
	RCHECK(attr(&handles, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS,
	       "cuPointerGetAttribute(ALLOWED_HANDLE_TYPES) failed");
	RCHECK(handles & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, "ncclMemAlloc memory has handle types 0x%llx, "
	       "no POSIX fd: not VMM memory peers can map", handles);
	RCHECK(attr(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, (CUdeviceptr)(uintptr_t)p) ==
		       CUDA_SUCCESS && !legacy, "ncclMemAlloc memory is legacy cudaMalloc memory");
	CUOK(cudaMalloc(&plain, 4096));
	RCHECK(ncclMemFree(plain) == ncclInvalidArgument, "ncclMemFree took cudaMalloc memory");
	RCHECK(strstr(ncclGetLastError(NULL), "not returned by ncclMemAlloc"), "message: %s", ncclGetLastError(NULL));
	CUOK(cudaFree(plain));
	NOK(ncclMemFree(p));
	RCHECK(ncclMemFree(p) == ncclInvalidArgument, "ncclMemFree freed the same memory twice");
	NOK(ncclMemFree(NULL));
	return 0;
}

/* Allreduce on ncclMemAlloc buffers, freed and allocated again between
 * calls (the addresses come back: peers map the new memory afresh). */
static int realloc_rank(int rank, int n, void *arg)
{
	(void)n;
	(void)arg;
	ncclComm_t comm = NULL;
	if (init(rank, &comm))
		return 1;
	int32_t *h = malloc(COUNT * sizeof(*h));
	RCHECK(h, "out of memory");
	for (int round = 0; round < 3; round++) {
		void *s = NULL, *r = NULL;
		NOK(ncclMemAlloc(&s, COUNT * sizeof(int32_t)));
		NOK(ncclMemAlloc(&r, COUNT * sizeof(int32_t)));
		if (fill(rank, s, COUNT, round, h))
			return 1;
		NOK(ncclAllReduce(s, r, COUNT, ncclInt32, ncclSum, comm, NULL));
		if (check(rank, r, COUNT, round, h, "ncclMemAlloc buffers"))
			return 1;
		NOK(ncclMemFree(s));
		NOK(ncclMemFree(r));
	}
	NOK(ncclCommDestroy(comm));
	free(h);
	return 0;
}

/* Windows: 4 blocks of COUNT in one ncclMemAlloc buffer; mode 1 moves rank
 * 1's in-place buffer to block 3, mode 2 outside the window. */
static int window_rank(int rank, int n, void *arg)
{
	(void)n;
	int mode = *(const int *)arg;
	ncclComm_t comm = NULL;
	if (init(rank, &comm))
		return 1;
	size_t blk = COUNT * sizeof(int32_t);
	int32_t *w = NULL, *plain = NULL, *h = malloc(blk);
	RCHECK(h, "out of memory");
	NOK(ncclMemAlloc((void **)&w, 4 * blk));
	CUOK(cudaMalloc((void **)&plain, blk));
	ncclWindow_t win = NULL;
	NOK(ncclCommWindowRegister(comm, w, 4 * blk, &win, NCCL_WIN_COLL_SYMMETRIC));
	for (int it = 0; it < 3; it++) {
		if (fill(rank, w, COUNT, 10 + it, h))
			return 1;
		NOK(ncclAllReduce(w, w + COUNT, COUNT, ncclInt32, ncclSum, comm, NULL));
		if (check(rank, w + COUNT, COUNT, 10 + it, h, "out of place in a window"))
			return 1;
		if (fill(rank, w + 2 * COUNT, COUNT, 20 + it, h))
			return 1;
		NOK(ncclAllReduce(w + 2 * COUNT, w + 2 * COUNT, COUNT, ncclInt32, ncclSum, comm, NULL));
		if (check(rank, w + 2 * COUNT, COUNT, 20 + it, h, "in place in a window"))
			return 1;
	}
	int32_t *mine = w + 2 * COUNT;
	if (rank == 1)
		mine = mode == 1 ? w + 3 * COUNT : plain;
	ncclResult_t r = ncclAllReduce(mine, mine, COUNT, ncclInt32, ncclSum, comm, NULL);
	cudaDeviceSynchronize(); /* the kernel ends once the comm fails, or completes */
	if (wt_nccl_fails(rank, comm, r, mode == 1 ? "rank 1 at another offset" : "rank 1 outside the window"))
		return 1;
	ncclCommAbort(comm);
	free(h);
	return 0;
}

START_TEST(memalloc_is_vmm)
{
	int bad = wt_fork_ranks(1, memalloc_rank, NULL, JOB_TIMEOUT);
	ck_assert_msg(bad == 0, "the rank failed");
}
END_TEST

START_TEST(memalloc_allreduce)
{
	ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
	int bad = wt_fork_ranks(NR, realloc_rank, NULL, JOB_TIMEOUT);
	ck_assert_msg(bad == 0, "%d of %d ranks failed", bad, NR);
}
END_TEST

START_TEST(allreduce_in_windows)
{
	int mode = _i + 1;
	ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
	int bad = wt_fork_ranks(NR, window_rank, &mode, JOB_TIMEOUT);
	ck_assert_msg(bad == 0, "%d of %d ranks failed", bad, NR);
}
END_TEST

int main(void)
{
	/* CUDA must not be initialized here, before the ranks fork. */
	int rc = g_gpu_present_forked(&g_ndev);
	if (rc != 0)
		return rc;
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	setenv("WEFT_CORE_PEER_TIMEOUT", "5", 0);
	printf("%d CUDA device(s)\n", g_ndev);
	Suite *s = suite_create("nccl_win_gpu");
	TCase *tc = tcase_create("gpu");
	tcase_set_timeout(tc, JOB_TIMEOUT + 30);
	tcase_add_test(tc, memalloc_is_vmm);
	tcase_add_test(tc, memalloc_allreduce);
	tcase_add_loop_test(tc, allreduce_in_windows, 0, 2);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
