#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The cost of one call through the Python package: the median time of
# comm.allreduce on a one-element float32 array, 2 forked ranks over shm,
# out of place (a new array per call) and in place (out=x).
# Usage: python3 percall.py [--iters N] (libweft.so as the package finds it,
# e.g. WEFT_LIB=build/lib/libweft.so). Prints one line per variant.
import argparse
import multiprocessing
import os
import statistics
import time

import numpy as np

import weft


def rank(r, n, iters, q, res):
    os.environ.setdefault("WEFT_CORE_PLUGINS", "shm,algo-host")
    os.environ.setdefault("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1")
    if r == 0:
        uid = weft.get_unique_id()
        for _ in range(n - 1):
            q.put(uid)
    else:
        uid = q.get(timeout=30)
    with weft.Comm(uid, r, n) as comm:
        x = np.ones(1, np.float32)
        out = {}
        for name, call in (("out of place", lambda: comm.allreduce(x)),
                           ("in place", lambda: comm.allreduce(x, out=x))):
            for _ in range(max(100, iters // 10)):  # connections, caches, the algorithm's state
                call()
            comm.barrier()
            t = []
            for _ in range(iters):
                t0 = time.perf_counter_ns()
                call()
                t.append(time.perf_counter_ns() - t0)
            out[name] = t
        alg = comm.last_algorithm()
    if r == 0:
        res.put((out, alg))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--iters", type=int, default=20000)
    args = ap.parse_args()
    ctx = multiprocessing.get_context("fork")
    q, res = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=rank, args=(r, 2, args.iters, q, res)) for r in range(2)]
    for p in procs:
        p.start()
    out, alg = res.get(timeout=600)
    for p in procs:
        p.join()
    print("libweft: %s; algorithm: %s; %d calls each, 2 ranks, shm" % (weft.library_path(), alg, args.iters))
    for name, t in out.items():
        t.sort()
        print("allreduce 1 x float32 %-12s median %.2f us  (p10 %.2f, p90 %.2f)"
              % (name, statistics.median(t) / 1e3, t[len(t) // 10] / 1e3, t[len(t) * 9 // 10] / 1e3))


if __name__ == "__main__":
    main()
