/* SPDX-License-Identifier: Apache-2.0 */
/* The rank-body check of libweft_nccl's tests: an NCCL call that must
 * succeed, failing the rank with its result and ncclGetLastError. */
#ifndef WEFT_TEST_NCCL_CHECK_H
#define WEFT_TEST_NCCL_CHECK_H

#include <nccl.h>

#include "testlib.h"

#define NOK(call)                                                                                    \
	do {                                                                                         \
		ncclResult_t r_ = (call);                                                            \
		RCHECK(r_ == ncclSuccess, "%s returned %d (%s; last error: %s)", #call, (int)r_,     \
		       ncclGetErrorString(r_), ncclGetLastError(NULL));                              \
	} while (0)

#endif
