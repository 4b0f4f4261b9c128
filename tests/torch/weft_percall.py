#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Per-call time of a 4-byte all_reduce through torch.distributed (issue 33
# item 5): the backend named by argv[1] ("weft", the Python package's, or
# "nccl", ProcessGroupNCCL, run with libweft_nccl.so preloaded to measure
# weft under it), on the devices named after it ("cpu", "cuda"). Each rank
# times every call alone (a CUDA call is synchronized before the clock
# stops) and rank 0 prints the median and quartiles, after checking that the
# sum came back right. Start it under torchrun with 2 ranks, as
# tools/gpu-check.sh pycost does.
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist


def main():
    backend = sys.argv[1] if len(sys.argv) > 1 else "weft"
    devs = sys.argv[2:] or ["cpu"]
    iters = int(os.environ.get("WEFT_PERCALL_ITERS", "5000"))
    if backend == "weft":
        import weft.torch_backend  # noqa: F401 (registers the backend)
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if "cuda" in devs:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    dist.init_process_group(backend)
    bad = 0
    for d in devs:
        x = torch.ones(1, dtype=torch.float32, device=d)
        times = []
        for i in range(iters + iters // 10):
            x.fill_(1.0)
            if d == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            if d == "cuda":
                torch.cuda.synchronize()
            if i >= iters // 10:
                times.append(time.perf_counter() - t0)
        if x.item() != float(n):
            print("rank %d: %s %s all_reduce gave %s, not %d" % (rank, backend, d, x.item(), n), flush=True)
            bad += 1
        if rank == 0:
            q = statistics.quantiles(times, n=4)
            print("percall: backend %s, %s, all_reduce 4 B, %d ranks: median %.1f us (quartiles %.1f-%.1f), %d calls"
                  % (backend, d, n, 1e6 * statistics.median(times), 1e6 * q[0], 1e6 * q[2], len(times)),
                  flush=True)
    dist.destroy_process_group()
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
