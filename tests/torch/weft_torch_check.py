#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# PyTorch on weft, as a user would run it: every c10d collective the NCCL
# backend offers on every dtype it maps, pre-multiplied sums and averages,
# coalesced calls, two groups at once, a CUDA graph, functional collectives
# under torch.compile, DDP and FSDP2 training steps, all through
# libweft_nccl.so (LD_PRELOAD), each checked against a reference computed in
# this script. Start it with
#   LD_PRELOAD=build/lib/libweft_nccl.so.2 MASTER_ADDR=127.0.0.1 NCCL_NVLS_ENABLE=0 \
#     torchrun --nproc-per-node 2 --master-addr 127.0.0.1 tests/torch/weft_torch_check.py
# tools/gpu-check.sh's torch stage does exactly that, with both ranks on one
# GPU (WEFT_TORCH_GPUS=1: weft allows it, NCCL would not), then again with
# TORCH_NCCL_USE_COMM_NONBLOCKING=1, which runs a shorter set (see main).
# Every check prints PASS or FAIL with its name, the last line counts them;
# exit status 0 only when all passed and weft (not a real NCCL) answered.
import ctypes
import os
import sys
import time

import torch
import torch.distributed as dist

import weft_torch_train as train


class Report:
    def __init__(self):
        self.passed, self.failed = 0, []

    def result(self, name, ok, why=""):
        if ok:
            self.passed += 1
            log(f"PASS {name}")
        else:
            self.failed.append(name)
            log(f"FAIL {name}: {why}")

    def check(self, name, got, want, tol=None):
        """Exact unless tol (a tensor of allowed absolute errors) is given."""
        got = host(got)
        if got.shape != want.shape:
            return self.result(name, False, f"shape {tuple(got.shape)}, want {tuple(want.shape)}")
        if tol is None:
            bad = int((got != want).sum()) if got.dtype == want.dtype else got.numel()
        else:
            bad = int(((got.double() - want.double()).abs() > tol).sum())
        self.result(name, bad == 0, f"{bad} of {got.numel()} elements wrong")

    def guard(self, name, fn, *args):
        """Runs one section; an exception (an API this torch lacks, a refused
        call) fails it by name and lets the next section run."""
        t0 = time.monotonic()
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - any failure is reported as such
            self.result(name, False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            return None
        finally:
            if time.monotonic() - t0 >= 1:  # where the stage's time goes
                log(f"time {name}: {time.monotonic() - t0:.1f} s")


rep = Report()


def log(msg):
    print(f"[rank {os.environ.get('RANK', '?')}] {msg}", flush=True)


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


# float8 is only moved here (what weft reduces in it is the algorithm packs'
# choice): made and compared as uint8 bit patterns, as CPU torch lacks most
# float8 operators.
CARRIED = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n))
FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
INTS = (torch.int8, torch.uint8, torch.int32, torch.int64)
EPS = {torch.float32: 2.0**-24, torch.float64: 2.0**-53, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}


def name_of(dtype):
    return str(dtype).split(".")[1]


# Operation names for check names (str() of a ReduceOp differs across versions).
OPS = {dist.ReduceOp.SUM: "sum", dist.ReduceOp.PRODUCT: "prod", dist.ReduceOp.MIN: "min", dist.ReduceOp.MAX: "max"}


def inputs(world, n, seed, dtype, lo=-8, hi=9):
    """Every rank's input (each rank builds all: the reference needs them).
    Small integers: sums of a few are exact in every type."""
    out = []
    for r in range(world):
        g = torch.Generator().manual_seed(seed * 1000 + r)
        if dtype == torch.bool:
            out.append(torch.randint(0, 2, (n,), generator=g).bool())
        elif dtype in CARRIED:  # any bit pattern: only moved, compared bitwise
            out.append(torch.randint(0, 256, (n,), generator=g).to(torch.uint8))
        else:
            out.append(torch.randint(lo, hi, (n,), generator=g).to(dtype))
    return out


def host(t):
    """t on the host, CARRIED types as their uint8 bit patterns."""
    t = t.detach().cpu()
    return t.view(torch.uint8) if t.dtype in CARRIED else t


def dev_tensor(x, dtype, dev):
    """x as a device tensor of dtype (x holds uint8 bit patterns for CARRIED)."""
    t = x.to(dev, copy=True)
    return t.view(dtype) if dtype in CARRIED else t


def seq_sum(terms, dtype):
    """Sum in dtype, one rounding per addition, rank order, as NCCL's
    reduction rounds. With more than two ranks the algorithm's order may
    differ: the check then allows what two orders of world - 1 roundings
    can differ by."""
    acc = terms[0].to(dtype)
    for t in terms[1:]:
        acc = (acc.float() + t.float()).to(dtype) if dtype != torch.float64 else acc + t
    world = len(terms)
    tol = 2 * (world - 1) * EPS[dtype] * torch.stack([t.double().abs() for t in terms]).sum(0) if world > 2 else None
    return acc, tol


class Ctx:
    def __init__(self, world, rank, dev, group, tag):
        # rank in the group: inputs and chunks are the group's ranks'
        self.world, self.dev, self.group, self.tag = world, dev, group, tag
        self.rank = dist.get_rank(group) if group else rank

    def glob(self, r):
        return dist.get_global_rank(self.group, r) if self.group else r


def reductions(c, dtype, seed, n):
    """all_reduce, reduce and reduce_scatter with SUM, PROD, MIN and MAX."""
    w, rank, dev, grp = c.world, c.rank, c.dev, c.group
    sfx = f"{c.tag} {name_of(dtype)}"
    xs = inputs(w, n, seed, dtype)
    ps = inputs(w, n, seed + 50, dtype, -2, 3)  # products of a few stay exact
    # The reference reduces in a wide type, then wraps or rounds to dtype as
    # the collective's element type does (integers wrap, small sums are exact).
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    want = {
        dist.ReduceOp.SUM: (xs, lambda s: s.to(wide).sum(0).to(dtype)),
        dist.ReduceOp.PRODUCT: (ps, lambda s: s.to(wide).prod(0).to(dtype)),
        dist.ReduceOp.MIN: (xs, lambda s: s.min(0).values),
        dist.ReduceOp.MAX: (xs, lambda s: s.max(0).values),
    }
    for op, (src, red) in want.items():
        opn = OPS[op]
        ref = red(torch.stack(src))
        t = src[rank].to(dev, copy=True)
        dist.all_reduce(t, op=op, group=grp)
        rep.check(f"all_reduce {opn} {sfx}", t, ref)
        root = (seed + 1) % w
        t = src[rank].to(dev, copy=True)
        dist.reduce(t, dst=c.glob(root), op=op, group=grp)
        if rank == root:  # only the root's buffer is defined
            rep.check(f"reduce {opn} to {root} {sfx}", t, ref)
        out = torch.full((n // w,), 77, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(out, src[rank].to(dev, copy=True), op=op, group=grp)
        rep.check(f"reduce_scatter_tensor {opn} {sfx}", out, ref.chunk(w)[rank])
    out = torch.full((n // w,), 77, dtype=dtype, device=dev)
    dist.reduce_scatter(out, [x.to(dev, copy=True) for x in xs[rank].chunk(w)], op=dist.ReduceOp.SUM, group=grp)
    rep.check(f"reduce_scatter (list) sum {sfx}", out, want[dist.ReduceOp.SUM][1](torch.stack(xs)).chunk(w)[rank])


def average(c, dtype, seed, n):
    """AVG: NCCL multiplies each input by 1/nranks in dtype, then sums."""
    w, rank, dev, grp = c.world, c.rank, c.dev, c.group
    sfx = f"{c.tag} {name_of(dtype)}"
    xs = inputs(w, n, seed, dtype)
    inv = torch.tensor(1.0 / w, dtype=dtype)
    ref, tol = seq_sum([(x * inv).to(dtype) for x in xs], dtype)
    t = xs[rank].to(dev, copy=True)
    dist.all_reduce(t, op=dist.ReduceOp.AVG, group=grp)
    rep.check(f"all_reduce avg {sfx}", t, ref, tol)
    out = torch.full((n // w,), 77, dtype=dtype, device=dev)
    dist.reduce_scatter_tensor(out, xs[rank].to(dev, copy=True), op=dist.ReduceOp.AVG, group=grp)
    rep.check(f"reduce_scatter_tensor avg {sfx}", out, ref.chunk(w)[rank],
              None if tol is None else tol.chunk(w)[rank])


def premul(c, dtype, seed, n):
    """Pre-multiplied sums (FSDP's gradient divide factor): a Python float
    (ncclScalarHostImmediate) and a device tensor (ncclScalarDevice); the
    scalar is taken in dtype, as NCCL does, each product rounds to dtype,
    then the sum. bfloat16: premul_bf16."""
    w, rank, dev, grp = c.world, c.rank, c.dev, c.group
    sfx = f"{c.tag} {name_of(dtype)}"
    xs = inputs(w, n, seed, dtype)
    for f in (0.25, 1.0 / 3.0):
        fd = torch.tensor(f, dtype=dtype)  # 1/3 is 0.33325 in float16
        ref, tol = seq_sum([(x * fd).to(dtype) for x in xs], dtype)
        for kind, factor in (("host", f), ("device", torch.tensor(f, dtype=dtype, device=dev))):
            op = dist._make_nccl_premul_sum(factor)
            nm = f"premul_sum {f:.3g} ({kind}) {sfx}"
            t = xs[rank].to(dev, copy=True)
            dist.all_reduce(t, op=op, group=grp)
            rep.check(f"all_reduce {nm}", t, ref, tol)
            out = torch.full((n // w,), 77, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(out, xs[rank].to(dev, copy=True), op=op, group=grp)
            rep.check(f"reduce_scatter_tensor {nm}", out, ref.chunk(w)[rank],
                      None if tol is None else tol.chunk(w)[rank])
            t = xs[rank].to(dev, copy=True)
            dist.reduce(t, dst=c.glob(0), op=op, group=grp)
            if rank == 0:
                rep.check(f"reduce {nm}", t, ref, tol)


def premul_bf16(c, seed, n):
    """premul_sum on bfloat16 with a Python float. PyTorch 2.11 passes NCCL a
    float for it (pytorch#190745), of which NCCL reads the low two bytes; a
    fixed torch passes a bfloat16. Either is right for weft: it must give
    exactly what NCCL gives with that argument, and the check says which.
    Returns whether this torch has the bug (FSDP2's bf16 check needs it)."""
    w, rank, dev = c.world, c.rank, c.dev
    xs = inputs(w, n, seed, torch.bfloat16)
    f = 1.0 / 3.0
    cands = {}
    for bug, s in ((False, f), (True, train.bf16_scalar_nccl_reads(f))):
        sd = torch.tensor(s, dtype=torch.bfloat16)
        cands[bug] = seq_sum([(x * sd).to(torch.bfloat16) for x in xs], torch.bfloat16)
    t = xs[rank].to(dev, copy=True)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(f), group=c.group)
    got = t.cpu().double()
    for bug, (ref, tol) in cands.items():
        if bool(((got - ref.double()).abs() <= (0 if tol is None else tol)).all()):
            rep.result(f"all_reduce premul_sum 1/3 (host) {c.tag} bfloat16 "
                       + ("(as NCCL reads the float torch hands it, pytorch#190745)" if bug else "(bfloat16 scalar)"),
                       True)
            return bug
    rep.result(f"all_reduce premul_sum 1/3 (host) {c.tag} bfloat16", False,
               "neither 1/3 nor the float's low half, as NCCL would read it")
    return True


def movement(c, dtype, seed, n):
    """The collectives that move data without reducing it."""
    w, rank, dev, grp = c.world, c.rank, c.dev, c.group
    sfx = f"{c.tag} {name_of(dtype)}"
    xs = inputs(w, n, seed, dtype)
    mine = dev_tensor(xs[rank], dtype, dev)

    def blank(m):
        return dev_tensor(torch.zeros(m, dtype=xs[0].dtype), dtype, dev)

    root = (seed + 2) % w
    t = mine.clone()
    dist.broadcast(t, src=c.glob(root), group=grp)
    rep.check(f"broadcast from {root} {sfx}", t, xs[root])

    out = blank(w * n)
    dist.all_gather_into_tensor(out, mine, group=grp)
    rep.check(f"all_gather_into_tensor {sfx}", out, torch.cat(xs))
    outs = [blank(n) for _ in range(w)]
    dist.all_gather(outs, mine, group=grp)
    rep.check(f"all_gather (list) {sfx}", torch.cat([host(o) for o in outs]), torch.cat(xs))

    out = blank(n)
    dist.all_to_all_single(out, mine, group=grp)
    rep.check(f"all_to_all_single {sfx}", out, torch.cat([x.chunk(w)[rank] for x in xs]))
    # Uneven splits: rank r sends r + j + 1 elements to rank j.
    sends = [[r + j + 1 for j in range(w)] for r in range(w)]
    src = [x[: sum(sends[r])] for r, x in enumerate(xs)]
    out = blank(sum(sends[j][rank] for j in range(w)))
    dist.all_to_all_single(out, dev_tensor(src[rank], dtype, dev),
                           output_split_sizes=[sends[j][rank] for j in range(w)],
                           input_split_sizes=sends[rank], group=grp)
    rep.check(f"all_to_all_single uneven {sfx}", out,
              torch.cat([src[j].split(sends[j])[rank] for j in range(w)]))
    outs = [blank(n // w) for _ in range(w)]
    dist.all_to_all(outs, [dev_tensor(p, dtype, dev) for p in xs[rank].chunk(w)], group=grp)
    rep.check(f"all_to_all (list) {sfx}", torch.cat([host(o) for o in outs]),
              torch.cat([x.chunk(w)[rank] for x in xs]))

    outs = [blank(n) for _ in range(w)] if rank == root else None
    dist.gather(mine, outs, dst=c.glob(root), group=grp)
    if rank == root:
        rep.check(f"gather to {root} {sfx}", torch.cat([host(o) for o in outs]), torch.cat(xs))
    out = blank(n // w)
    ins = [dev_tensor(p, dtype, dev) for p in xs[root].chunk(w)] if rank == root else None
    dist.scatter(out, ins, src=c.glob(root), group=grp)
    rep.check(f"scatter from {root} {sfx}", out, xs[root].chunk(w)[rank])

    # Point to point: blocking pairs (0-1, 2-3, ...; the even rank sends
    # first), the same with isend/irecv, then a ring posted as one batch.
    peer = rank ^ 1
    if peer < w:
        got = blank(n)
        for sending in ((True, False) if rank % 2 == 0 else (False, True)):
            if sending:
                dist.send(mine, dst=c.glob(peer), group=grp)
            else:
                dist.recv(got, src=c.glob(peer), group=grp)
        rep.check(f"send/recv pair {sfx}", got, xs[peer])
        got = blank(n)
        if rank % 2 == 0:
            reqs = [dist.isend(mine, dst=c.glob(peer), group=grp), dist.irecv(got, src=c.glob(peer), group=grp)]
        else:
            reqs = [dist.irecv(got, src=c.glob(peer), group=grp), dist.isend(mine, dst=c.glob(peer), group=grp)]
        for q in reqs:
            q.wait()
        rep.check(f"isend/irecv pair {sfx}", got, xs[peer])
    nxt, prv = (rank + 1) % w, (rank - 1) % w
    got = blank(n)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, mine, c.glob(nxt), grp),
                                   dist.P2POp(dist.irecv, got, c.glob(prv), grp)])
    for q in reqs:
        q.wait()
    rep.check(f"batch_isend_irecv ring {sfx}", got, xs[prv])


def booleans(c, _dtype, seed, n):
    """bool travels as uint8; c10d turns SUM into MAX (a logical or)."""
    xs = inputs(c.world, n, seed, torch.bool)
    for op, want in ((dist.ReduceOp.SUM, torch.stack(xs).any(0)), (dist.ReduceOp.MAX, torch.stack(xs).any(0)),
                     (dist.ReduceOp.MIN, torch.stack(xs).all(0))):
        t = xs[c.rank].to(c.dev, copy=True)
        dist.all_reduce(t, op=op, group=c.group)
        rep.check(f"all_reduce {OPS[op]} {c.tag} bool", t, want)


def coalesced(c, seed, n):
    """Several calls in one NCCL group, as DDP's buckets and FSDP1 issue them:
    all_reduce, all_gather_into_tensor and reduce_scatter_tensor, each kind
    coalesced on its own (c10d's coalesced paths take one kind at a time)."""
    w, rank = c.world, c.rank
    xs = [inputs(w, n + w * i, seed + i, torch.float32) for i in range(3)]
    kinds = {
        "all_reduce": (lambda i: xs[i][rank].to(c.dev, copy=True),
                       lambda t, i: dist.all_reduce(t, group=c.group),
                       lambda i: torch.stack(xs[i]).sum(0)),
        "all_gather_into_tensor": (lambda i: torch.zeros(w * xs[i][0].numel(), device=c.dev),
                                   lambda t, i: dist.all_gather_into_tensor(t, xs[i][rank].to(c.dev, copy=True),
                                                                            group=c.group),
                                   lambda i: torch.cat(xs[i])),
        "reduce_scatter_tensor": (lambda i: torch.zeros(xs[i][0].numel() // w, device=c.dev),
                                  lambda t, i: dist.reduce_scatter_tensor(t, xs[i][rank].to(c.dev, copy=True),
                                                                          group=c.group),
                                  lambda i: torch.stack(xs[i]).sum(0).chunk(w)[rank]),
    }
    for kind, (make, call, want) in kinds.items():
        outs = [make(i) for i in range(3)]
        with dist._coalescing_manager(group=c.group, device=c.dev, async_ops=True) as cm:
            for i, t in enumerate(outs):
                call(t, i)
        cm.wait()
        for i, t in enumerate(outs):
            rep.check(f"coalesced {kind} {i} {c.tag} float32", t, want(i))


def objects(c):
    obj = [None]
    if c.rank == 0:
        obj = [{"from": c.glob(0), "list": list(range(50))}]
    dist.broadcast_object_list(obj, src=c.glob(0), group=c.group, device=c.dev)
    rep.result(f"broadcast_object_list {c.tag}", obj[0] == {"from": c.glob(0), "list": list(range(50))},
               f"got {obj[0]!r:.80}")
    outs = [None] * c.world
    dist.all_gather_object(outs, ("rank", c.rank, "x" * (c.rank + 1)), group=c.group)
    rep.result(f"all_gather_object {c.tag}", outs == [("rank", r, "x" * (r + 1)) for r in range(c.world)],
               f"got {outs!r:.80}")


def collectives(c, seed, dtypes):
    n = 4096 * c.world + 3 * c.world  # not a power of two: odd tails
    for i, dtype in enumerate(dtypes):
        one_dtype(c, dtype, seed + 10 * i, n)
    torch.cuda.synchronize(c.dev)


def one_dtype(c, dtype, seed, n):
    """Each part on its own, so that one refused call fails only its part."""
    sfx = f"{c.tag} {name_of(dtype)}"
    parts = [(booleans, "reductions")] if dtype == torch.bool else []
    if dtype not in CARRIED + (torch.bool,):
        parts.append((reductions, "reductions"))
    if dtype in FLOATS:
        parts.append((average, "avg"))
    if dtype in FLOATS and dtype != torch.bfloat16:
        parts.append((premul, "premul_sum"))
    parts.append((movement, "movement"))
    for fn, what in parts:
        rep.guard(f"{what} {sfx}", fn, c, dtype, seed, n)
    dist.barrier(group=c.group, device_ids=[c.dev.index])


def two_groups(world, rank, dev, other):
    """The world and a second group (the same ranks, reversed) in use at once,
    the second from another stream."""
    side = torch.cuda.Stream(device=dev)
    a = torch.full((1 << 20,), float(rank + 1), device=dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(side):
        b = torch.full((1 << 20,), float(10 * (rank + 1)), device=dev)
        dist.all_reduce(b, group=other)
    dist.all_reduce(a)
    torch.cuda.synchronize(dev)
    tot = world * (world + 1) / 2
    rep.check("two groups at once: world", a, torch.full((1 << 20,), tot))
    rep.check("two groups at once: new_group", b, torch.full((1 << 20,), 10 * tot))


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
        xs = inputs(world, n, 900 + it, torch.float32)
        static.copy_(xs[rank].to(dev, copy=True))
        g.replay()
        torch.cuda.synchronize(dev)
        wrong += not torch.equal(static.cpu(), torch.stack(xs).sum(0))
    rep.result("graph all_reduce: 50 replays with new data", wrong == 0, f"{wrong} of 50 replays wrong")


def compiled(world, rank, dev):
    """Functional collectives inside a torch.compile'd function (inductor
    unless WEFT_TORCH_COMPILE_BACKEND says otherwise), fullgraph so that none
    falls back to eager."""
    import torch.distributed._functional_collectives as funcol

    grp = dist.group.WORLD

    def step(x, y):
        s = funcol.all_reduce(x * 2, "sum", grp)
        g = funcol.all_gather_tensor(x + 1, 0, grp)
        r = funcol.reduce_scatter_tensor(y, "sum", 0, grp)
        return s + 1, g * 3, r - 1

    fn = torch.compile(step, fullgraph=True, backend=os.environ.get("WEFT_TORCH_COMPILE_BACKEND", "inductor"))
    n = 1024 * world
    for it in range(3):  # new data each call, one compilation
        xs = inputs(world, n, 700 + it, torch.float32)
        ys = inputs(world, n * world, 800 + it, torch.float32)
        s, g, r = fn(xs[rank].to(dev, copy=True), ys[rank].to(dev, copy=True))
        rep.check(f"compiled all_reduce call {it}", s, torch.stack(xs).sum(0) * 2 + 1)
        rep.check(f"compiled all_gather_tensor call {it}", g, (torch.cat(xs) + 1) * 3)
        rep.check(f"compiled reduce_scatter_tensor call {it}", r, torch.stack(ys).sum(0).chunk(world)[rank] - 1)


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        log("refusing to run: NCCL_NVLS_ENABLE=0 must be set (no NVLink multicast)")
        return 2
    # Ranks go round the first WEFT_TORCH_GPUS GPUs (default: all); ranks may
    # share one, which weft allows (NCCL refuses two ranks on a GPU).
    count = torch.cuda.device_count()
    gpus = min(int(os.environ.get("WEFT_TORCH_GPUS") or count), count)
    dev = torch.device("cuda", local % gpus)
    torch.cuda.set_device(dev)
    version, origin = weft_answers()
    log(f"torch {torch.__version__} on {dev} of {count} GPUs, ncclGetVersion {version} from {origin}")
    if "weft_nccl" not in origin:
        log("FAIL: the NCCL API does not resolve to libweft_nccl (is LD_PRELOAD set?)")
        return 1
    nonblocking = os.environ.get("TORCH_NCCL_USE_COMM_NONBLOCKING") == "1"
    nb = " [nonblocking]" if nonblocking else ""
    dist.init_process_group("nccl", device_id=dev)

    world_c = Ctx(world, rank, dev, None, "world" + nb)
    all_types = FLOATS + INTS + (torch.bool,) + CARRIED
    # The non-blocking run repeats a cross-section (the comm's init, a split
    # and every kind of call go through ncclInProgress there) in less time.
    collectives(world_c, 1, (torch.float32, torch.bfloat16, torch.int32) if nonblocking else all_types)
    # Unknown (the probe failed): assume the torch this targets, 2.11.
    bf16_bug = rep.guard("premul_sum bfloat16" + nb, premul_bf16, world_c, 3, 4096 * world + 3 * world) is not False
    rep.guard("coalesced calls" + nb, coalesced, world_c, 5, 3000)
    rep.guard("object collectives" + nb, objects, world_c)

    other = dist.new_group(list(reversed(range(world))))
    rep.guard("two groups at once" + nb, two_groups, world, rank, dev, other)
    collectives(Ctx(world, rank, dev, other, "new_group" + nb), 2,
                (torch.float32,) if nonblocking else (torch.float32, torch.bfloat16, torch.float16, torch.int32))
    rep.guard("graph all_reduce" + nb, graph_allreduce, world, rank, dev)
    rep.guard("ddp" + nb, train.ddp, rep, world, rank, dev, nb.strip())
    if not nonblocking:
        rep.guard("functional collectives under torch.compile", compiled, world, rank, dev)
        for dtype, factor in ((torch.float32, 3.0), (torch.bfloat16, 3.0), (torch.float32, None),
                              (torch.bfloat16, None)):
            rep.guard(f"fsdp2 {name_of(dtype)} factor {factor}", train.fsdp2, rep, world, rank, dev, dtype, factor,
                      bf16_bug, "")

    dist.destroy_process_group()
    log(f"{rep.passed} passed, {len(rep.failed)} failed" + (f": {', '.join(rep.failed[:10])}" if rep.failed else ""))
    return 1 if rep.failed else 0


if __name__ == "__main__":
    sys.exit(main())
