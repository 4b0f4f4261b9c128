/* SPDX-License-Identifier: Apache-2.0 */
/* Refuse-then-use cases for libweft_nccl, one per function of
 * nccl/symbols.txt: each makes its function refuse and, where it returns a
 * handle (a comm, an operation, a registration, a pointer, a count), passes
 * that handle on and expects a failure with a logged reason, never a
 * different operation. Shared by test_nccl (linked against libweft_nccl) and
 * weft-test-nccl-refusals (linked against the stand-in libnccl.so.2 and run
 * with libweft_nccl preloaded), so neither needs Check. */
#ifndef WEFT_TESTS_NCCL_REFUSALS_H
#define WEFT_TESTS_NCCL_REFUSALS_H

#include <stddef.h>

/* Runs the case of every function that symbols_path lists, in its order.
 * Fails (returns the count of failures, each described in err, one per
 * line) when a listed function has no case, when the table has a case for
 * a function the file does not list, or when a case fails. */
int nr_run_all(const char *symbols_path, char *err, size_t errlen);

#endif
