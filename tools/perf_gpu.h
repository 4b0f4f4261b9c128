/* SPDX-License-Identifier: Apache-2.0 */
/* The interface between weft-perf and its GPU half, libweft-perf-gpu.so
 * (tools/perf_gpu.cu), which weft-perf dlopens for --op put|pingpong --mem cuda
 * so that weft-perf itself never links CUDA. */
#ifndef WEFT_TOOLS_PERF_GPU_H
#define WEFT_TOOLS_PERF_GPU_H

#include <stddef.h>
#include <stdint.h>

#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever struct weft_perf_gpu_args or a prototype below changes: a
 * library of another version is refused by name. */
#define WEFT_PERF_GPU_ABI 1
#define WEFT_PERF_GPU_LIB_NAME "libweft-perf-gpu.so"

enum weft_perf_gpu_op { WEFT_PERF_GPU_PUT = 1, WEFT_PERF_GPU_PINGPONG = 2 };

/* Sizes when neither -b nor -e is given: the bandwidth rows at 1 GiB, the
 * ping-pong from one LL packet's payload to 64 KiB. */
#define WEFT_PERF_GPU_PUT_BYTES ((uint64_t)1 << 30)
#define WEFT_PERF_GPU_PINGPONG_MIN 4
#define WEFT_PERF_GPU_PINGPONG_MAX ((uint64_t)64 << 10)

/* weft-perf's options, as far as the GPU benchmarks use them. */
struct weft_perf_gpu_args {
	uint32_t abi; /* WEFT_PERF_GPU_ABI */
	int op;       /* enum weft_perf_gpu_op */
	uint64_t min_bytes, max_bytes, step_bytes, factor;
	int sizes_set; /* -b or -e given (else min/max are the defaults above) */
	int warmup, iters, check;
	uint64_t seed;
	const char *transport; /* --transport, else NULL: "nvlink" */
};

/* Whether this process can run the benchmarks: 0, or -ENODEV with a reason
 * in why. Call it in a child process when the caller forks ranks later: it
 * initializes CUDA. */
typedef int (*weft_perf_gpu_probe_fn)(uint32_t abi, char *why, size_t len);
/* Selects the GPU of local_rank (local_rank modulo the device count), before
 * the rank's communicator is created: the nvlink transport uses the current
 * device. 0, or -ENODEV with a reason in why. */
typedef int (*weft_perf_gpu_rank_setup_fn)(int local_rank, char *why, size_t len);
/* Runs the benchmark on every rank of comm (ranks 0 and 1 measure, the others
 * wait at the end); rank 0 prints the tables. 0 or a negative error already
 * reported on stderr; *wrong (rank 0) is the number of wrong bytes found. */
typedef int (*weft_perf_gpu_run_fn)(const struct weft_perf_gpu_args *args, weft_comm_t *comm, uint64_t *wrong);

#define WEFT_PERF_GPU_PROBE "weft_perf_gpu_probe"
#define WEFT_PERF_GPU_RANK_SETUP "weft_perf_gpu_rank_setup"
#define WEFT_PERF_GPU_RUN "weft_perf_gpu_run"

#ifdef __cplusplus
}
#endif
#endif
