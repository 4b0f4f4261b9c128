/* SPDX-License-Identifier: Apache-2.0 */
/* Linked against "libnccl.so.2" (the stand-in): prints which NCCL answered,
 * so tests can see libweft_nccl take its place through LD_LIBRARY_PATH
 * (lib/nccl/libnccl.so.2) or LD_PRELOAD. */
#include <stdio.h>

#include "nccl.h"

int main(void)
{
	int v = 0;
	ncclResult_t r = ncclGetVersion(&v);
	printf("ncclGetVersion: %d (result %d)\n", v, (int)r);
	return r == ncclSuccess ? 0 : 1;
}
