#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# PyTorch on weft: every c10d collective the NCCL backend offers, run through
# libweft_nccl.so (LD_PRELOAD) and checked against a CPU reference on random
# integer-valued data. Start it with
#   LD_PRELOAD=build/lib/libweft_nccl.so.2 MASTER_ADDR=127.0.0.1 NCCL_NVLS_ENABLE=0 \
#     torchrun --nproc-per-node 2 --master-addr 127.0.0.1 tests/torch/weft_torch_check.py
# tools/gpu-check.sh's torch stage does exactly that. Exit status 0 only when
# every check passed and weft (not a real NCCL) answered.
import ctypes
import os
import sys

import torch
import torch.distributed as dist

failures = []


def log(msg):
    print(f"[rank {os.environ.get('RANK', '?')}] {msg}", flush=True)


def check(name, got, want):
    got = got.detach().to("cpu")
    if got.shape != want.shape or not torch.equal(got, want):
        bad = (got != want).sum().item() if got.shape == want.shape else "shape"
        failures.append(name)
        log(f"FAIL {name}: {bad} wrong elements")
    else:
        log(f"ok   {name}")


def weft_answers():
    """ncclGetVersion as the process resolves it, and the file it comes from."""
    lib = ctypes.CDLL(None)
    v = ctypes.c_int(0)
    try:
        lib.ncclGetVersion(ctypes.byref(v))
    except AttributeError:
        return 0, "no ncclGetVersion in the global scope"

    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

    info = DlInfo()
    addr = ctypes.cast(lib.ncclGetVersion, ctypes.c_void_p)
    ctypes.CDLL("libc.so.6").dladdr(addr, ctypes.byref(info))
    return v.value, (info.dli_fname or b"?").decode()


def inputs(rank, world, n, seed, dtype):
    # Every rank can build every rank's input: the reference needs them all.
    out = []
    for r in range(world):
        g = torch.Generator().manual_seed(seed * 1000 + r)
        out.append(torch.randint(-8, 9, (n,), generator=g).to(dtype))
    return out


def run(world, rank, dev, group, tag, seed):
    n = 4096 * world + 3 * world  # not a power of two: odd tails
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int32):
        xs = inputs(rank, world, n, seed, dtype)
        sfx = f"{tag} {str(dtype).split('.')[1]}"

        t = xs[rank].to(dev)
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)
        check(f"all_reduce sum {sfx}", t, torch.stack(xs).sum(0).to(dtype))

        t = xs[rank].to(dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
        check(f"all_reduce max {sfx}", t, torch.stack(xs).max(0).values)

        out = torch.full((world * n,), 77, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(out, xs[rank].to(dev), group=group)
        check(f"all_gather_into_tensor {sfx}", out, torch.cat(xs))

        out = torch.full((n // world,), 77, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(out, xs[rank].to(dev), op=dist.ReduceOp.SUM, group=group)
        want = torch.stack(xs).sum(0).to(dtype).chunk(world)[rank]
        check(f"reduce_scatter_tensor {sfx}", out, want)

        if dtype in (torch.float32, torch.float16):
            # Pre-multiplied sums (FSDP's gradient divide factor): a Python
            # float (ncclScalarHostImmediate) and a device tensor
            # (ncclScalarDevice); the scalar is taken in dtype, as NCCL does,
            # each product rounds to dtype, then the sum.
            # Not bfloat16: PyTorch hands NCCL a float32 scalar for it, of
            # which NCCL's API (and so weft's) reads the 2 bytes of a bfloat16.
            for f in (0.25, 1.0 / 3.0):
                fd = torch.tensor(f, dtype=dtype)  # 1/3 is 0.33325 in float16
                want_ar = torch.stack([(x * fd).to(dtype) for x in xs]).sum(0).to(dtype)
                for kind, factor in (("host", f), ("device", torch.tensor(f, dtype=dtype, device=dev))):
                    op = dist._make_nccl_premul_sum(factor)
                    t = xs[rank].to(dev)
                    dist.all_reduce(t, op=op, group=group)
                    check(f"all_reduce premul_sum {f:.3g} ({kind}) {sfx}", t, want_ar)
                    out = torch.full((n // world,), 77, dtype=dtype, device=dev)
                    dist.reduce_scatter_tensor(out, xs[rank].to(dev), op=op, group=group)
                    check(f"reduce_scatter_tensor premul_sum {f:.3g} ({kind}) {sfx}", out,
                          want_ar.chunk(world)[rank])
            t = xs[rank].to(dev)
            dist.all_reduce(t, op=dist.ReduceOp.AVG, group=group)
            check(f"all_reduce avg {sfx}", t, (torch.stack(xs).sum(0).to(dtype) / world).to(dtype))

        root = world - 1
        t = xs[rank].to(dev)
        dist.broadcast(t, src=dist.get_global_rank(group, root) if group else root, group=group)
        check(f"broadcast {sfx}", t, xs[root])

        out = torch.full((n,), 77, dtype=dtype, device=dev)
        dist.all_to_all_single(out, xs[rank].to(dev), group=group)
        want = torch.cat([x.chunk(world)[rank] for x in xs])
        check(f"all_to_all_single {sfx}", out, want)

        # send/recv around the ring, posted together so no order can deadlock.
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        gl = (lambda r: dist.get_global_rank(group, r)) if group else (lambda r: r)
        got = torch.full((n,), 77, dtype=dtype, device=dev)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, xs[rank].to(dev), gl(nxt), group),
                                       dist.P2POp(dist.irecv, got, gl(prv), group)])
        for q in reqs:
            q.wait()
        check(f"send/recv {sfx}", got, xs[prv])

        dist.barrier(group=group, device_ids=[dev.index])
    torch.cuda.synchronize(dev)


def graph_allreduce(world, rank, dev):
    n = 1 << 16
    static = torch.zeros(n, dtype=torch.float32, device=dev)
    s = torch.cuda.Stream(device=dev)
    s.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(s):
        for _ in range(3):  # warm-up outside capture, as PyTorch recommends
            dist.all_reduce(static)
    torch.cuda.current_stream(dev).wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        dist.all_reduce(static)
    wrong = 0
    for it in range(50):  # new data every replay
        xs = inputs(rank, world, n, 900 + it, torch.float32)
        static.copy_(xs[rank].to(dev))
        g.replay()
        torch.cuda.synchronize(dev)
        wrong += not torch.equal(static.cpu(), torch.stack(xs).sum(0))
    if wrong:
        failures.append("graph all_reduce")
        log(f"FAIL graph all_reduce: {wrong} of 50 replays wrong")
    else:
        log("ok   graph all_reduce: 50 replays with new data")


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        log("refusing to run: NCCL_NVLS_ENABLE=0 must be set (no NVLink multicast)")
        return 2
    dev = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    version, origin = weft_answers()
    log(f"ncclGetVersion {version} from {origin}")
    if "weft_nccl" not in origin:
        log("FAIL: the NCCL API does not resolve to libweft_nccl (is LD_PRELOAD set?)")
        return 1
    dist.init_process_group("nccl", device_id=dev)

    run(world, rank, dev, None, "world", 1)
    # A second group over the same ranks, in reverse order, used at the same
    # time as the first from another stream.
    other = dist.new_group(list(reversed(range(world))))
    side = torch.cuda.Stream(device=dev)
    a = torch.full((1 << 20,), float(rank + 1), device=dev)
    with torch.cuda.stream(side):
        b = torch.full((1 << 20,), float(10 * (rank + 1)), device=dev)
        dist.all_reduce(b, group=other)
    dist.all_reduce(a)
    torch.cuda.synchronize(dev)
    tot = world * (world + 1) / 2
    check("two groups at once: world", a, torch.full((1 << 20,), tot))
    check("two groups at once: new_group", b, torch.full((1 << 20,), 10 * tot))
    run(world, rank, dev, other, "new_group", 2)

    graph_allreduce(world, rank, dev)

    dist.destroy_process_group()
    if failures:
        log(f"{len(failures)} checks failed: {', '.join(failures[:10])}")
        return 1
    log("all checks passed on weft")
    return 0


if __name__ == "__main__":
    sys.exit(main())
