# SPDX-License-Identifier: Apache-2.0
"""PyTorch's gloo backend on CPU tensors as a peer of tools/bench-vs-mpi.sh:
every collective and size in one launch, timed like weft-perf and
tools/mpi_bench.c (per call, the slowest rank's mean over the timed
iterations after warm-up, time.perf_counter), each result checked once.

Run by torchrun (MASTER_ADDR=127.0.0.1, one process per rank):
  torchrun --nnodes 1 --nproc_per_node N --master_addr 127.0.0.1 \\
      --master_port PORT tools/bench-gloo.py --out PREFIX [options]
writes PREFIX-<collective>.log per collective, in nccl-tests' columns
(size count type redop root time algbw busbw #wrong, twice): gloo's calls
are in place for all_reduce, broadcast and reduce, out of place for the
others, and the one time fills both columns. Sizes count the whole buffer
for all_gather, reduce_scatter and alltoall, as weft-perf does. A
collective gloo cannot run prints why on its first line and no rows.
"""
import argparse
import os
import sys
import time

COLLS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall"]


def parse_size(s):
    s = s.strip().upper().rstrip("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    return int(s[:-1] if mult > 1 else s) * mult


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="prefix of the per-collective logs (rank 0 writes them)")
    ap.add_argument("--collectives", default=",".join(COLLS))
    ap.add_argument("-b", "--minbytes", default="1K")
    ap.add_argument("-e", "--maxbytes", default="64M")
    ap.add_argument("-f", "--stepfactor", type=int, default=4)
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup", type=int, default=5)
    ap.add_argument("--large", default="4M", help="sizes above this use --iters-large and --warmup-large")
    ap.add_argument("--iters-large", type=int, default=4)
    ap.add_argument("--warmup-large", type=int, default=1)
    args = ap.parse_args()

    import torch
    import torch.distributed as dist

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    minb, maxb, large = parse_size(args.minbytes), parse_size(args.maxbytes), parse_size(args.large)
    ts = 4  # float32, as the other two programs use

    def val(r, idx):
        # Element idx of rank r's input: small integers, exact sums (mpi_bench's).
        return ((idx * 7 + r * 13) % 9).to(torch.float32)

    def counts(coll, size):
        elems = size // ts
        per = (elems // n) & ~(16 // ts - 1)
        if coll in ("all_gather", "reduce_scatter", "alltoall"):
            return per, per * n
        return elems, elems

    def setup(coll, size):
        count, whole = counts(coll, size)
        idx = torch.arange(whole if coll in ("reduce_scatter", "alltoall") else count, dtype=torch.int64)
        inp = val(rank, idx)
        if coll in ("all_reduce", "broadcast", "reduce"):
            return count, whole, inp, inp
        out = torch.empty(whole if coll in ("all_gather", "alltoall") else count, dtype=torch.float32)
        return count, whole, inp, out

    # The tensor forms first; where this torch's gloo lacks them, the list
    # forms over views of the same buffers (the log's first line says which).
    forms = {"all_gather": ["tensor", "list"], "reduce_scatter": ["tensor", "list"]}
    form = {}

    def call(coll, inp, out):
        f = form.get(coll, "tensor")
        if coll == "all_reduce":
            dist.all_reduce(inp)
        elif coll == "all_gather":
            if f == "tensor":
                dist.all_gather_into_tensor(out, inp)
            else:
                dist.all_gather(list(out.chunk(n)), inp)
        elif coll == "reduce_scatter":
            if f == "tensor":
                dist.reduce_scatter_tensor(out, inp)
            else:
                dist.reduce_scatter(out, list(inp.chunk(n)))
        elif coll == "broadcast":
            dist.broadcast(inp, src=0)
        elif coll == "reduce":
            dist.reduce(inp, dst=0)
        else:
            dist.all_to_all_single(out, inp)

    def expected(coll, count):
        i = torch.arange(count if coll not in ("all_gather", "alltoall") else count * n, dtype=torch.int64)
        if coll in ("all_reduce", "reduce"):
            return sum(val(r, i) for r in range(n))
        if coll == "reduce_scatter":
            return sum(val(r, rank * count + i) for r in range(n))
        if coll == "broadcast":
            return val(0, i)
        if coll == "all_gather":
            return val(i // count, i % count)
        return val(i // count, rank * count + i % count)  # alltoall: block p from rank p

    status = 0
    for coll in args.collectives.split(","):
        lines = []
        factor = 2.0 * (n - 1) / n if coll == "all_reduce" else 1.0 if coll in ("broadcast", "reduce") else (n - 1) / n
        size = minb
        why = None
        while size <= maxb:
            count, whole, inp, out = setup(coll, size)
            iters, warm = (args.iters_large, args.warmup_large) if size > large else (args.iters, args.warmup)
            try:
                call(coll, inp, out)  # also the test of the form
                for _ in range(warm):
                    call(coll, inp, out)
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(iters):
                    call(coll, inp, out)
                mine = torch.tensor([(time.perf_counter() - t0) * 1e6 / iters], dtype=torch.float64)
            except (RuntimeError, NotImplementedError, AttributeError, ValueError) as e:
                left = forms.get(coll, [])[forms.get(coll, []).index(form.get(coll, "tensor")) + 1:]
                if not lines and left:
                    form[coll] = left[0]
                    continue
                why = "%s: gloo cannot run it here (%s)" % (coll, str(e).splitlines()[0] if str(e) else type(e).__name__)
                break
            dist.all_reduce(mine, op=dist.ReduceOp.MAX)
            # Fresh input, one call, compare.
            count, whole, inp, out = setup(coll, size)
            call(coll, inp, out)
            got = out if coll not in ("all_reduce", "broadcast", "reduce") else inp
            wrong = torch.tensor([0], dtype=torch.int64)
            if coll != "reduce" or rank == 0:
                wrong[0] = int((got != expected(coll, count)).sum())
            dist.all_reduce(wrong)
            us = float(mine[0])
            nbytes = max(count, whole) * ts if coll in ("all_gather", "reduce_scatter", "alltoall") else count * ts
            algbw = nbytes / (us * 1e3) if us > 0 else 0.0
            prec = 0 if us >= 100000 else 1 if us >= 10000 else 2
            cell = "  %7.*f  %6.2f  %6.2f  %6d" % (prec, us, algbw, algbw * factor, int(wrong[0]))
            root = 0 if coll in ("broadcast", "reduce") else -1
            lines.append("%12d  %12d  %8s  %6s  %6d%s%s" % (nbytes, count, "float", "sum" if coll in ("all_reduce", "reduce_scatter", "reduce") else "none", root, cell, cell))
            status |= int(wrong[0]) != 0
            size *= args.stepfactor
        if rank == 0:
            with open("%s-%s.log" % (args.out, coll), "w") as f:
                f.write("+ gloo (torch %s), %s, %d ranks, %s form\n" % (torch.__version__, coll, n, form.get(coll, "tensor")))
                if why:
                    f.write("# skipped: %s\n" % why)
                    print("bench-gloo: " + why, file=sys.stderr)
                f.write("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n" % (
                    "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"))
                for line in lines:
                    f.write(line + "\n")
    dist.destroy_process_group()
    return 1 if status else 0


if __name__ == "__main__":
    sys.exit(main())
