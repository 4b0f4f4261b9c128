#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The torch.distributed backend "weft" (python/weft/torch_backend.py): every
# c10d collective through init_process_group("weft") on CPU and CUDA tensors
# against references computed from every rank's random input, PREMUL_SUM and
# AVG, BAND refused by name, an async all_reduce on a side
# stream checked after wait(), new_group, a mismatch coming back as WeftError,
# and DDP (and, on CUDA with torch 2.4 or later, FSDP2) steps against one
# process training on the whole batch, and prints the median time of a 4-byte
# all_reduce through the backend (issue 33 item 5). Start it with
#   PYTHONPATH=python WEFT_LIB=build/lib/libweft.so \
#     torchrun --nproc-per-node 2 --master-addr 127.0.0.1 tests/torch/weft_pg_check.py
# (tools/gpu-check.sh pgtorch). Ranks share GPU LOCAL_RANK % device_count.
# Without CUDA only the CPU half runs, unless WEFT_REQUIRE_GPU=1 (then it
# fails). Exit status 0 only when every check passed.
import os
import sys
import traceback

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as C10D

import weft
import weft.torch_backend as wtb

failures = []
passed = [0]
RANK = int(os.environ.get("RANK", "0"))
TORCH = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2])  # (major, minor)


def log(msg):
    print("[rank %d] %s" % (RANK, msg), flush=True)


def check(name, got, want, exact=True):
    got = got.detach().cpu()
    want = want.detach().cpu()
    ok = got.shape == want.shape and got.dtype == want.dtype and (
        torch.equal(got, want) if exact else torch.allclose(got.double(), want.double(), rtol=1e-5, atol=1e-6))
    if ok:
        passed[0] += 1
    else:
        failures.append(name)
        bad = (got != want).sum().item() if got.shape == want.shape else "shape %s vs %s" % (
            tuple(got.shape), tuple(want.shape))
        log("FAIL %s: %s wrong (got %s, want %s)" % (name, bad, got.flatten()[:6].tolist(),
                                                      want.flatten()[:6].tolist()))


def raises(name, exc, fn, words=()):
    try:
        fn()
    except exc as e:
        if all(w in str(e) for w in words):
            passed[0] += 1
            return e
        failures.append(name)
        log("FAIL %s: %s does not name %s" % (name, e, words))
        return e
    except Exception as e:  # noqa: BLE001 (any other exception is the failure reported)
        failures.append(name)
        log("FAIL %s: %s instead of %s" % (name, type(e).__name__, exc.__name__))
        return e
    failures.append(name)
    log("FAIL %s: no exception" % name)
    return None


def inputs(world, shape, seed, dtype):
    """Every rank's input (each rank builds all: the references need them);
    small integers, so that sums and products are exact in every type."""
    out = []
    for r in range(world):
        g = torch.Generator().manual_seed(seed * 1000 + r)
        out.append(torch.randint(-6, 7, shape, generator=g).to(dtype))
    return out


def reference(op, xs):
    acc = xs[0].clone()
    for x in xs[1:]:
        if op in ("sum", "avg"):
            acc = acc + x
        elif op == "prod":
            acc = acc * x
        elif op == "min":
            acc = torch.minimum(acc, x)
        else:
            acc = torch.maximum(acc, x)
    if op == "avg":
        acc = (acc / len(xs)).to(xs[0].dtype) if xs[0].is_floating_point() else torch.div(
            acc, len(xs), rounding_mode="trunc")
    return acc


OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}


def collectives(dev, world, rank):
    tag = dev.type
    seed = [0]

    def data(shape, dtype):
        seed[0] += 1
        xs = inputs(world, shape, seed[0], dtype)
        return xs, xs[rank].to(dev, copy=True)  # a copy: the reference keeps xs

    for dtype in (torch.float32, torch.int32, torch.bfloat16, torch.float64):
        for name, op in OPS.items():
            if name == "avg" and not dtype.is_floating_point:
                continue
            xs, t = data((5, 7), dtype)
            dist.all_reduce(t, op=op)
            check("%s all_reduce %s %s" % (tag, name, dtype), t, reference(name, xs))
    # PREMUL_SUM: each rank's own factor, a float and a tensor on the tensors' device.
    if hasattr(dist, "_make_nccl_premul_sum"):
        for kind in ("float", "tensor"):
            xs, t = data((33,), torch.float32)
            f = [float(r + 2) for r in range(world)]
            fac = f[rank] if kind == "float" else torch.tensor(f[rank], device=dev)
            try:
                dist.all_reduce(t, op=dist._make_nccl_premul_sum(fac))
            except NotImplementedError as e:
                if TORCH >= (2, 0):
                    raise
                log("skip PREMUL_SUM: %s" % e)
                break
            check("%s all_reduce premul_sum %s" % (tag, kind), t, sum(x * f[r] for r, x in enumerate(xs)))
            xs, t = data((world * 8,), torch.float32)
            out = torch.empty(8, device=dev)
            dist.reduce_scatter_tensor(out, t, op=dist._make_nccl_premul_sum(fac))
            want = sum(x * f[r] for r, x in enumerate(xs))[rank * 8:(rank + 1) * 8]
            check("%s reduce_scatter_tensor premul_sum %s" % (tag, kind), out, want)
    xs, t = data((world * 6,), torch.float32)
    out = torch.empty(6, device=dev)
    dist.reduce_scatter_tensor(out, t, op=dist.ReduceOp.AVG)
    check("%s reduce_scatter_tensor avg" % tag, out, reference("avg", xs)[rank * 6:(rank + 1) * 6])
    raises("%s all_reduce BAND refused" % tag, ValueError,
           lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32, device=dev), op=dist.ReduceOp.BAND),
           ("BAND",))

    # all_reduce_coalesced
    xs1, t1 = data((10,), torch.float32)
    xs2, t2 = data((3, 3), torch.float32)
    dist.group.WORLD.allreduce_coalesced([t1, t2], C10D.AllreduceCoalescedOptions()).wait()
    check("%s allreduce_coalesced 0" % tag, t1, reference("sum", xs1))
    check("%s allreduce_coalesced 1" % tag, t2, reference("sum", xs2))

    # broadcast, reduce
    for root in range(world):
        xs, t = data((17,), torch.int64)
        dist.broadcast(t, src=root)
        check("%s broadcast root %d" % (tag, root), t, xs[root])
        xs, t = data((17,), torch.float32)
        dist.reduce(t, dst=root, op=dist.ReduceOp.MAX)
        if rank == root:
            check("%s reduce max root %d" % (tag, root), t, reference("max", xs))

    # all_gather (list), all_gather_into_tensor, their coalesced form
    xs, t = data((4, 3), torch.float32)
    outs = [torch.full((4, 3), -1.0, device=dev) for _ in range(world)]
    dist.all_gather(outs, t)
    for r in range(world):
        check("%s all_gather block %d" % (tag, r), outs[r], xs[r])
    xs, t = data((9,), torch.int32)
    out = torch.empty(world * 9, dtype=torch.int32, device=dev)
    dist.all_gather_into_tensor(out, t)
    check("%s all_gather_into_tensor" % tag, out, torch.cat(xs))
    xa, ta = data((5,), torch.float32)
    xb, tb = data((2, 2), torch.float32)
    oa = torch.empty(world * 5, device=dev)
    ob = torch.empty(world * 2, 2, device=dev)
    dist.group.WORLD.allgather_into_tensor_coalesced([oa, ob], [ta, tb], C10D.AllgatherOptions()).wait()
    check("%s allgather_into_tensor_coalesced 0" % tag, oa, torch.cat(xa))
    check("%s allgather_into_tensor_coalesced 1" % tag, ob, torch.cat(xb))

    # reduce_scatter (list), reduce_scatter_tensor, their coalesced form
    xs = [inputs(world, (6,), 900 + p, torch.float32) for p in range(world)]  # xs[p][r]: rank r's block p
    out = torch.empty(6, device=dev)
    dist.reduce_scatter(out, [xs[p][rank].to(dev) for p in range(world)], op=dist.ReduceOp.SUM)
    check("%s reduce_scatter" % tag, out, reference("sum", xs[rank]))
    xs, t = data((world * 4,), torch.int64)
    out = torch.empty(4, dtype=torch.int64, device=dev)
    dist.reduce_scatter_tensor(out, t, op=dist.ReduceOp.MIN)
    check("%s reduce_scatter_tensor min" % tag, out, reference("min", xs)[rank * 4:(rank + 1) * 4])
    xa, ta = data((world * 3,), torch.float32)
    xb, tb = data((world * 2, 2), torch.float32)
    oa, ob = torch.empty(3, device=dev), torch.empty(2, 2, device=dev)
    opts = C10D.ReduceScatterOptions()
    opts.reduceOp = dist.ReduceOp.SUM
    dist.group.WORLD.reduce_scatter_tensor_coalesced([oa, ob], [ta, tb], opts).wait()
    check("%s reduce_scatter_tensor_coalesced 0" % tag, oa, reference("sum", xa)[rank * 3:(rank + 1) * 3])
    check("%s reduce_scatter_tensor_coalesced 1" % tag, ob, reference("sum", xb)[rank * 2:(rank + 1) * 2])

    # all_to_all (list, uneven sizes), all_to_all_single (even, then uneven splits)
    sizes = [[1 + (r + p) % 3 for p in range(world)] for r in range(world)]  # rank r sends sizes[r][p] to p
    blocks = [[inputs(1, (sizes[r][p],), 500 + r * world + p, torch.float32)[0] for p in range(world)]
              for r in range(world)]
    outs = [torch.empty(sizes[p][rank], device=dev) for p in range(world)]
    dist.all_to_all(outs, [b.to(dev) for b in blocks[rank]])
    for p in range(world):
        check("%s all_to_all from %d" % (tag, p), outs[p], blocks[p][rank])
    xs, t = data((world * 5,), torch.float32)
    out = torch.empty(world * 5, device=dev)
    dist.all_to_all_single(out, t)
    check("%s all_to_all_single" % tag, out, torch.cat([xs[p][rank * 5:(rank + 1) * 5] for p in range(world)]))
    inp = torch.cat(blocks[rank]).to(dev)
    out = torch.empty(sum(sizes[p][rank] for p in range(world)), device=dev)
    dist.all_to_all_single(out, inp, output_split_sizes=[sizes[p][rank] for p in range(world)],
                           input_split_sizes=sizes[rank])
    check("%s all_to_all_single uneven" % tag, out, torch.cat([blocks[p][rank] for p in range(world)]))

    # gather, scatter
    root = world - 1
    xs, t = data((7,), torch.float32)
    outs = [torch.empty(7, device=dev) for _ in range(world)] if rank == root else None
    dist.gather(t, gather_list=outs, dst=root)
    if rank == root:
        for r in range(world):
            check("%s gather from %d" % (tag, r), outs[r], xs[r])
    xs = inputs(world, (7,), 77, torch.float32)  # xs[p]: what root sends rank p
    out = torch.empty(7, device=dev)
    dist.scatter(out, scatter_list=[x.to(dev) for x in xs] if rank == root else None, src=root)
    check("%s scatter" % tag, out, xs[rank])

    # send/recv around a ring, and isend/irecv
    xs, t = data((11,), torch.float32)
    got = torch.empty(11, device=dev)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    if rank % 2 == 0:
        dist.send(t, nxt)
        dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(t, nxt)
    check("%s send/recv" % tag, got, xs[prv])
    xs, t = data((11,), torch.int64)
    got = torch.empty(11, dtype=torch.int64, device=dev)
    if rank % 2 == 0:
        dist.isend(t, nxt).wait()
        dist.irecv(got, prv).wait()
    else:
        dist.irecv(got, prv).wait()
        dist.isend(t, nxt).wait()
    check("%s isend/irecv" % tag, got, xs[prv])
    # Every rank sends before it receives: the pair meets only because the
    # batch goes to weft as one group (large enough to be no eager send).
    xs, t = data((1 << 22,), torch.float32)
    got = torch.empty(1 << 22, device=dev)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, nxt), dist.P2POp(dist.irecv, got, prv)])
    for q in reqs:
        q.wait()
    check("%s batch_isend_irecv, sends first" % tag, got, xs[prv])

    # async all_reduce and its future
    xs, t = data((1000,), torch.float32)
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    check("%s async all_reduce" % tag, t, reference("sum", xs))
    check("%s async all_reduce future" % tag, w.get_future().wait()[0], reference("sum", xs))
    dist.barrier()
    passed[0] += 1


def side_stream(dev, world, rank):
    """An all_reduce issued on a side stream behind a long kernel: after
    wait() the default stream sees its result although the host never
    waited, and the future's value is the output."""
    n = 1 << 20
    xs = inputs(world, (n,), 4242, torch.float32)
    t = xs[rank].to(dev)
    side = torch.cuda.Stream(device=dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU time before the all_reduce
        work = dist.all_reduce(t, async_op=True)
    done_early = work.is_completed()
    work.wait()  # the default stream now waits for the side stream's event
    got = t.clone()  # on the default stream
    check("cuda async all_reduce on a side stream", got, reference("sum", xs))
    if done_early:
        log("note: the side stream's work had completed before wait()")
    fut = work.get_future()
    check("cuda side-stream future value", fut.wait()[0], reference("sum", xs))
    t.record_stream(side)


def groups(dev, world, rank):
    # Every rank: split from the world's communicator.
    g = dist.new_group(list(range(world)))
    xs = inputs(world, (8,), 31, torch.float32)
    t = xs[rank].to(dev, copy=True)
    dist.all_reduce(t, group=g)
    check("%s new_group(all) all_reduce" % dev.type, t, reference("sum", xs))
    if not isinstance(g, wtb.WeftProcessGroup):
        failures.append("new_group is a %s" % type(g).__name__)
    # Each rank alone, then ranks 1.. (a group created through the store).
    for r in range(world):
        gr = dist.new_group([r])
        if rank == r:
            # No other rank waits on this one: a failure is reported, and the ranks stay in step.
            try:
                t = torch.arange(5.0, device=dev)
                dist.all_reduce(t, group=gr)
                check("%s new_group([%d]) all_reduce" % (dev.type, r), t, torch.arange(5.0))
            except Exception:  # noqa: BLE001
                failures.append("%s new_group([%d])" % (dev.type, r))
                log("FAIL %s new_group([%d]) all_reduce raised:\n%s" % (dev.type, r, traceback.format_exc()))
    if world > 2:
        rest = list(range(1, world))
        gr = dist.new_group(rest)
        if rank in rest:
            t = torch.ones(3, device=dev)
            dist.all_reduce(t, group=gr)
            check("%s new_group(1..) all_reduce" % dev.type, t, torch.full((3,), float(world - 1)))


def mismatch(world, rank):
    """Counts that differ across ranks raise WeftError naming the mismatch
    (host tensors: algo-gpu's kernels do not compare signatures yet)."""
    g = dist.new_group(list(range(world)))
    e = raises("cpu all_reduce with counts that differ", weft.WeftError,
               lambda: dist.all_reduce(torch.zeros(4 + rank), group=g))
    if e is not None and isinstance(e, weft.WeftError):
        if e.symbol != "WEFT_ERR_MISMATCH":
            failures.append("mismatch symbol")
            log("FAIL mismatch: %s" % e)


def small_model(dev, seed):
    """A small model and an identical reference copy, on dev."""
    import copy

    import torch.nn as nn
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3)).to(dev)
    return model, copy.deepcopy(model)


def train(what, wrapped, model, ref, dev, world, rank, seed, full=lambda p: p):
    """Three SGD steps of wrapped (model distributed), each rank on its
    slice of the batch, against ref trained on the whole batch in this
    process; then model's parameters (full() gathers a shard) against ref's."""
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.1)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    per = 4
    for step in range(3):
        g = torch.Generator().manual_seed(seed + step)
        x = torch.randn(world * per, 12, generator=g).to(dev)
        y = torch.randn(world * per, 3, generator=g).to(dev)
        opt.zero_grad()
        ((wrapped(x[rank * per:(rank + 1) * per]) - y[rank * per:(rank + 1) * per]) ** 2).mean().backward()
        opt.step()
        ropt.zero_grad()
        ((ref(x) - y) ** 2).mean().backward()
        ropt.step()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        check("%s %s %s after 3 steps" % (dev.type, what, name), full(p), q, exact=False)


def ddp(dev, world, rank):
    from torch.nn.parallel import DistributedDataParallel as DDP

    model, ref = small_model(dev, 5)
    dmodel = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    train("ddp", dmodel, model, ref, dev, world, rank, 100)


def fsdp2(dev, world, rank):
    """fully_shard on each Linear, then on the model."""
    import torch.nn as nn
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(dev.type, (world,))
    model, ref = small_model(dev, 7)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    train("fsdp2", model, model, ref, dev, world, rank, 200, full=lambda p: p.full_tensor())


def percall(devs):
    """Prints (checks nothing) the median time of a 4-byte all_reduce
    through the backend, per device: on CUDA the call alone (enqueued) and
    the call with a stream synchronization (completed)."""
    import time
    x = [torch.ones(1, device=d) for d in devs]
    for d, t in zip(devs, x):
        for sync in ((False, True) if d.type == "cuda" else (False,)):
            times = []
            for i in range(1100):
                t0 = time.perf_counter()
                dist.all_reduce(t)
                if sync:
                    torch.cuda.current_stream(d).synchronize()
                if i >= 100:
                    times.append(time.perf_counter() - t0)
            if d.type == "cuda" and not sync:
                torch.cuda.synchronize(d)
            times.sort()
            if RANK == 0:
                log("per call: all_reduce of 4 B on %s%s, median %.1f us over %d calls"
                    % (d.type, " (synchronized)" if sync else (" (enqueued)" if d.type == "cuda" else ""),
                       times[len(times) // 2] * 1e6, len(times)))
    dist.barrier()


def main():
    local = int(os.environ.get("LOCAL_RANK", "0"))
    devs = [torch.device("cpu")]
    if torch.cuda.is_available():
        # Before the communicator exists, so that weft sees this rank's GPU.
        dev = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        devs.append(dev)
    elif os.environ.get("WEFT_REQUIRE_GPU") == "1":
        log("FAIL: WEFT_REQUIRE_GPU=1 and torch sees no CUDA device")
        return 1
    dist.init_process_group("weft")
    world, rank = dist.get_world_size(), dist.get_rank()
    pg = dist.group.WORLD
    if not isinstance(pg, wtb.WeftProcessGroup):
        log("FAIL: the world group is a %s, not weft's" % type(pg).__name__)
        return 1
    log("weft %s from %s, torch %s, %d ranks" % (".".join(map(str, weft.version())), weft.library_path(),
                                                 torch.__version__, world))
    steps = []
    for dev in devs:
        steps.append(("%s collectives" % dev.type, collectives, (dev, world, rank)))
        if dev.type == "cuda":
            steps.append(("side stream", side_stream, (dev, world, rank)))
        steps += [("%s ddp" % dev.type, ddp, (dev, world, rank)), ("%s groups" % dev.type, groups, (dev, world, rank))]
        if dev.type == "cuda" and TORCH >= (2, 4):
            steps.append(("fsdp2", fsdp2, (dev, world, rank)))
    steps.append(("per call", percall, (devs,)))
    steps.append(("mismatch", mismatch, (world, rank)))
    for name, fn, args in steps:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 (reported, and the run fails)
            failures.append(name)
            log("FAIL %s raised:\n%s" % (name, traceback.format_exc()))
            # The ranks may now be out of step: stop here rather than hang.
            break
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    log("%d checks passed, %d failed%s" % (passed[0], len(failures),
                                           (": " + ", ".join(failures[:10])) if failures else ""))
    if not failures:
        dist.destroy_process_group()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
