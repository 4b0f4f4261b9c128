/* SPDX-License-Identifier: Apache-2.0 */
/* weft-test-nccl-refusals: a program built against libnccl.so.2 (the stand-in
 * of nccl/testing/fake_nccl.c) and run with libweft_nccl preloaded, as a user
 * switches PyTorch over. It runs every refuse-then-use case, with and without
 * the fallback to that stand-in, and then asks the stand-in how often it was
 * called with a communicator it did not make: never is the only right answer.
 * Usage: weft-test-nccl-refusals <symbols.txt> <path of the stand-in> */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

#include "nccl_refusals.h"

void fake_nccl_stats(int *calls, int *foreign);

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s <symbols.txt> <fake libnccl.so.2>\n", argv[0]);
		return 2;
	}
	int v = 0;
	if (ncclGetVersion(&v) != ncclSuccess || v == 22899) {
		fprintf(stderr, "ncclGetVersion answered %d: libweft_nccl is not preloaded\n", v);
		return 1;
	}
	static char err[16384];
	int failed = nr_run_all(argv[1], err, sizeof(err));
	if (failed)
		fprintf(stderr, "without the fallback, %d case(s) failed:\n%s", failed, err);

	/* With the fallback on, calls weft refuses may go to the stand-in, on
	 * its own (shadow) communicator only. */
	setenv("WEFT_NCCL_FALLBACK", argv[2], 1);
	setenv("NCCL_NVLS_ENABLE", "0", 1);
	int f2 = nr_run_all(argv[1], err, sizeof(err));
	if (f2)
		fprintf(stderr, "with the fallback, %d case(s) failed:\n%s", f2, err);
	failed += f2;
	ncclComm_t c = NULL;
	int buf[2] = {0, 0};
	if (ncclCommInitAll(&c, 1, NULL) != ncclSuccess) {
		fprintf(stderr, "no one-rank comm: %s\n", ncclGetLastError(NULL));
		return 1;
	}
	/* An operation weft lacks is forwarded; the stand-in writes op * 1000. */
	ncclResult_t r = ncclAllReduce(buf, buf, 2, ncclInt32, (ncclRedOp_t)(ncclNumOps + 1), c, NULL);
	if (r != ncclSuccess || buf[0] != (ncclNumOps + 1) * 1000) {
		fprintf(stderr, "a forwarded allreduce gave %d and {%d, %d}\n", (int)r, buf[0], buf[1]);
		failed++;
	}
	/* What a refused ncclRedOpCreatePreMulSum leaves is never forwarded. */
	int before, after, foreign;
	fake_nccl_stats(&before, &foreign);
	ncclRedOp_t op = ncclSum;
	int s = 2;
	ncclRedOpCreatePreMulSum(&op, &s, (ncclDataType_t)99, ncclScalarHostImmediate, c);
	r = ncclAllReduce(buf, buf, 2, ncclInt32, op, c, NULL);
	fake_nccl_stats(&after, &foreign);
	if (r == ncclSuccess || after != before) {
		fprintf(stderr, "the operation of a refused ncclRedOpCreatePreMulSum gave %d and reached the stand-in %d "
				"time(s)\n", (int)r, after - before);
		failed++;
	}
	ncclCommDestroy(c);
	int calls;
	fake_nccl_stats(&calls, &foreign);
	printf("refuse-then-use: %s; the stand-in libnccl got %d call(s), %d with a communicator it did not make\n",
	       failed ? "FAILED" : "every case passed", calls, foreign);
	return failed || foreign || calls == 0 ? 1 : 0;
}
