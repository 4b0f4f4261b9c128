/* SPDX-License-Identifier: Apache-2.0 */
/* The rank-body check of libweft_nccl's tests: an NCCL call that must
 * succeed, failing the rank with its result and ncclGetLastError. */
#ifndef WEFT_TEST_NCCL_CHECK_H
#define WEFT_TEST_NCCL_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <nccl.h>

#include "testlib.h"

#define NOK(call)                                                                                    \
	do {                                                                                         \
		ncclResult_t r_ = (call);                                                            \
		RCHECK(r_ == ncclSuccess, "%s returned %d (%s; last error: %s)", #call, (int)r_,     \
		       ncclGetErrorString(r_), ncclGetLastError(NULL));                              \
	} while (0)

/* Rank r's element i of round k: pseudo-random int32 that keep sums of a
 * few ranks exact, so every rank can compute the reference of all. */
static inline int32_t wt_nccl_data(int r, size_t i, int k)
{
	uint32_t x = (uint32_t)(r * 7919u + (uint32_t)i * 104729u + (uint32_t)k * 1299709u) ^ 0x9e3779b9u;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return (int32_t)(x % 2000001u) - 1000000;
}

/* A call the ranks made differently must fail on this rank: r, the call's
 * result, or the comm's error within 5 s (the heartbeats compare the calls'
 * signatures). 0 when it failed, else 1 with the rank's message. */
static inline int wt_nccl_fails(int rank, ncclComm_t comm, ncclResult_t r, const char *what)
{
	ncclResult_t async = ncclSuccess;
	for (int t = 0; r == ncclSuccess && t < 100; t++) {
		RCHECK(ncclCommGetAsyncError(comm, &async) == ncclSuccess, "ncclCommGetAsyncError failed");
		if (async != ncclSuccess && async != ncclInProgress)
			break;
		usleep(50000);
	}
	RCHECK(r != ncclSuccess || (async != ncclSuccess && async != ncclInProgress),
	       "%s: no error on this rank (the ranks' calls differ)", what);
	return 0;
}

#endif
