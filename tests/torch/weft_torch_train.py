# SPDX-License-Identifier: Apache-2.0
# Training checks for weft_torch_check.py: DDP and FSDP2 (fully_shard) steps of
# a tiny model, each against the same steps run by one process on the full
# batch (same seed, same data), compared after the last step.
import copy
import struct

import torch
import torch.distributed as dist
import torch.nn as nn

STEPS = 3
LR = 0.05
PER_RANK = 4  # samples each rank trains on per step
# ||delta_dist - delta_ref|| / ||delta_ref|| allowed, where delta is what the
# steps changed the parameters by. fp32: only the sum's order differs (about
# 1e-7 relative); bf16 computes and reduces with 8 mantissa bits (about 4e-3 a
# rounding, a few percent after the forward, backward and reduction). A wrong
# divide factor, or a rank's gradient lost, is off by 30 % or more.
TOL = {torch.float32: 1e-4, torch.bfloat16: 5e-2}


def tiny_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))


def batches(world):
    g = torch.Generator().manual_seed(4242)
    return [(torch.randn(world * PER_RANK, 8, generator=g), torch.randn(world * PER_RANK, 4, generator=g))
            for _ in range(STEPS)]


def reference_delta(model, data, dev, grad_scale):
    """Steps on one process over the full batch. The distributed gradient is
    grad_scale * (sum of the ranks' gradients of their mean losses); on the
    full batch that is the full mean loss times world * grad_scale."""
    m = copy.deepcopy(model).to(dev)
    before = [p.detach().clone() for p in m.parameters()]
    opt = torch.optim.SGD(m.parameters(), lr=LR)
    for x, y in data:
        world = x.shape[0] // PER_RANK
        loss = nn.functional.mse_loss(m(x.to(dev)), y.to(dev)) * (world * grad_scale)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [(p.detach() - b).float().cpu() for p, b in zip(m.parameters(), before)]


def compare(rep, name, got, want, scale, dtype):
    """got/want: per-parameter deltas; scale: the norm of a correct update, so
    a reference that barely moves (a scalar torch hands over wrong) is still
    held to the tolerance of a real one."""
    num = sum(float((g - w).pow(2).sum()) for g, w in zip(got, want)) ** 0.5
    den = sum(float(s.pow(2).sum()) for s in scale) ** 0.5
    err = num / den if den else float("inf")
    rep.result(name, den > 0 and err <= TOL[dtype],
               f"relative error {err:.3g} of the update, tolerance {TOL[dtype]:g}")


def ddp(rep, world, rank, dev, tag):
    from torch.nn.parallel import DistributedDataParallel as DDP

    data = batches(world)
    # Rank 0's initial parameters win: DDP broadcasts them, so the others
    # start from another seed and must be overwritten to pass.
    ref_model = tiny_model(0)
    m = DDP(tiny_model(0 if rank == 0 else 100 + rank).to(dev),
            device_ids=[dev.index] if dev.type == "cuda" else None)
    before = [p.detach().clone() for p in m.parameters()]
    opt = torch.optim.SGD(m.parameters(), lr=LR)
    for x, y in data:
        lo = rank * PER_RANK
        loss = nn.functional.mse_loss(m(x[lo:lo + PER_RANK].to(dev)), y[lo:lo + PER_RANK].to(dev))
        opt.zero_grad()
        loss.backward()
        opt.step()
    rep.check(f"ddp broadcast of rank 0's parameters {tag}".strip(),
              torch.cat([b.flatten() for b in before]),
              torch.cat([p.detach().flatten() for p in ref_model.parameters()]))
    got = [(p.detach() - b).cpu() for p, b in zip(m.parameters(), before)]
    want = reference_delta(ref_model, data, dev, 1.0 / world)
    compare(rep, f"ddp {STEPS} steps {tag}".strip(), got, want, want, torch.float32)


def bf16_scalar_nccl_reads(f):
    """The bfloat16 NCCL reads when handed a float's address (the float's low
    two bytes, little-endian): what PyTorch 2.11 gives a bfloat16 premul_sum."""
    low = struct.pack("<f", f)[:2]
    return struct.unpack("<f", b"\0\0" + low)[0]  # a bfloat16 is a float's high half


def fsdp2(rep, world, rank, dev, dtype, factor, bf16_scalar_bug, tag):
    """fully_shard on each layer and the root; factor None means FSDP's
    default (AVG), else set_gradient_divide_factor(factor) on every FSDP
    module (the call sets only its own module's group)."""
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

    data = batches(world)
    ref_model = tiny_model(1)
    m = copy.deepcopy(ref_model).to(dev)
    mp = MixedPrecisionPolicy()  # float32: no casts
    if dtype != torch.float32:
        mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=dtype)
    for layer in (m[0], m[2]):
        fully_shard(layer, mp_policy=mp)
    fully_shard(m, mp_policy=mp)
    if factor is not None:
        for mod in m.modules():
            if isinstance(mod, FSDPModule):
                mod.set_gradient_divide_factor(factor)
    before = [p.full_tensor().detach().clone() for p in m.parameters()]
    opt = torch.optim.SGD(m.parameters(), lr=LR)
    ops = set()  # the reduce-scatter operations FSDP chose, for the name
    orig = dist.reduce_scatter_tensor

    def spy(*a, **k):
        op = k.get("op", a[2] if len(a) > 2 else dist.ReduceOp.SUM)
        ops.add("sum" if op == dist.ReduceOp.SUM else "avg" if op == dist.ReduceOp.AVG else "premul_sum")
        return orig(*a, **k)

    dist.reduce_scatter_tensor = spy
    try:
        for x, y in data:
            lo = rank * PER_RANK
            out = m(x[lo:lo + PER_RANK].to(dev))
            loss = nn.functional.mse_loss(out.float(), y[lo:lo + PER_RANK].to(dev))
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        dist.reduce_scatter_tensor = orig
    after = [p.full_tensor().detach() for p in m.parameters()]
    got = [(a - b).float().cpu() for a, b in zip(after, before)]
    scale = 1.0 / (factor or world)
    right = reference_delta(ref_model, data, dev, scale)
    name = f"fsdp2 {STEPS} steps {str(dtype).split('.')[1]} " + (f"divide factor {factor:g}" if factor else "avg")
    name += f" via {'+'.join(sorted(ops)) or 'no reduce_scatter_tensor seen'}"
    want = right
    if factor is not None and dtype == torch.bfloat16 and bf16_scalar_bug and "premul_sum" in ops:
        # FSDP2 reduce-scatters bf16 with premul_sum(1/factor) from a Python
        # float; this torch hands NCCL a float for it (pytorch#190745), so
        # NCCL and weft scale by the float's low half: compared with that.
        s = bf16_scalar_nccl_reads(1.0 / factor)
        want = reference_delta(ref_model, data, dev, s)
        name += f" (torch hands NCCL {s:.3g} for 1/{factor:g}, pytorch#190745)"
    compare(rep, f"{name} {tag}".strip(), got, want, right, dtype)
