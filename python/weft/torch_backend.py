# SPDX-License-Identifier: Apache-2.0
"""A torch.distributed backend "weft": one process group for CPU and CUDA
tensors over weft.Comm.

    import torch.distributed as dist
    import weft.torch_backend             # registers "weft"
    dist.init_process_group("weft")       # torchrun's environment, or init_method=...

CUDA calls are enqueued on the caller's current stream; a Work's wait()
makes the then current stream wait on an event recorded after the call, with
no host synchronization. CPU calls complete before they return, but for
sends and receives, which are queued and issued together at the first
wait() of any of them or before the group's next other call. Every rank
of a group creates its communicator from a unique id passed through the
group's store; a group of every rank of the world is split from the world's
communicator instead (weft_comm_split): torch calls a backend's creator on
the members of a new group only, and a split needs every rank of its parent.
"""
import contextlib

import torch
import torch.distributed as dist

from . import _arrays as A
from .comm import Comm, get_unique_id, group

# A Work wrapping a future: C++ callers (DDP's reducer) wait on it through
# c10d's own Work, which a Python subclass of Work does not reach in every torch.
_work_from_future = torch._C._distributed_c10d._create_work_from_future
_Work = getattr(dist, "_Work", None) or torch._C._distributed_c10d.Work
_RedOpType = dist.ReduceOp.RedOpType
_OPS = {_RedOpType.SUM: "sum", _RedOpType.PRODUCT: "prod", _RedOpType.MIN: "min",
        _RedOpType.MAX: "max", _RedOpType.AVG: "avg"}
_UID_KEY = "weft/unique_id"

# The world's communicator, which groups of every rank are split from.
_world_comm = None


def _work(outputs):
    """The Work of a call that was issued: CPU calls have completed, CUDA
    calls are enqueued on the current stream. Its future holds outputs; with
    CUDA tensors it records an event on their devices' current streams (where
    the call went), and its wait() and its future's make the then current
    stream wait on that event, with no host synchronization."""
    devices = sorted({str(t.device) for t in outputs if t.is_cuda})
    fut = torch.futures.Future(devices=devices) if devices else torch.futures.Future()
    fut.set_result(outputs)
    return _work_from_future(fut)


class _P2PWork(_Work):
    """A send or receive not issued yet: its group's queued operations go
    to weft as one fused group at the first wait() of any of them, or
    before the group's next other call. batch_isend_irecv issues its
    operations one by one (torch coalesces for its own backends only), so
    pairs that every rank starts with a send meet this way."""

    def __init__(self, pg):
        super().__init__()
        self._pg = pg
        self.work = None
        self.error = None

    def _issued(self):
        if self.work is None:
            self._pg._flush()
        if self.work is None:
            # Its group failed when an earlier wait() issued it.
            raise self.error
        return self.work

    def wait(self, timeout=None):
        return self._issued().wait()

    def get_future(self):
        return self._issued().get_future()

    def is_completed(self):
        return self.work is not None and self.work.is_completed()

    def is_success(self):
        return self.work is not None


def _flat(t):
    """t as one contiguous vector (t itself when it is contiguous)."""
    return t.contiguous().view(-1)


class _Out:
    """An output tensor as weft writes it: t itself when contiguous, else a
    contiguous stand-in copied back into t by done()."""

    def __init__(self, t):
        self.t = t
        self.buf = t if t.is_contiguous() else torch.empty(t.shape, dtype=t.dtype, device=t.device)

    def done(self):
        if self.buf is not self.t:
            self.t.copy_(self.buf)


def _as_weft(t):
    # bool has no weft datatype; one byte each, as NCCL carries it.
    return t.view(torch.uint8) if t.dtype == torch.bool else t


class WeftProcessGroup(dist.ProcessGroup):
    """A c10d process group over a weft.Comm (self.comm)."""

    def __init__(self, comm, rank, size):
        super().__init__(rank, size)
        if comm.rank != rank or comm.size != size:
            raise RuntimeError("weft: the communicator is rank %d of %d, torch asked for rank %d of %d"
                               % (comm.rank, comm.size, rank, size))
        self.comm = comm
        self._pending = []  # queued sends and receives: (is_send, tensors, peer, stream, work)

    def getBackendName(self):
        return "weft"

    def __repr__(self):
        return "<WeftProcessGroup rank %d of %d>" % (self.comm.rank, self.comm.size)

    # -------------------------------------------------------------- helpers
    def _op(self, red, t):
        """The weft reduction for c10d's ReduceOp red on tensors like t;
        raises where weft has none, never sums instead."""
        kind = red.op if hasattr(red, "op") else red
        if kind in _OPS:
            return _OPS[kind]
        if kind == _RedOpType.PREMUL_SUM:
            state = red.__getstate__() if hasattr(red, "__getstate__") else None
            if not isinstance(state, tuple) or len(state) != 2:
                raise NotImplementedError("weft: this torch (%s) does not expose PREMUL_SUM's factor"
                                          % torch.__version__)
            f = state[1]
            if isinstance(f, torch.Tensor):
                if f.is_cuda and t.is_cuda:
                    return A.premul_sum(f.to(device=t.device, dtype=t.dtype).reshape(1))
                f = f.item()
            return A.premul_sum(f)
        raise ValueError("weft: reduction %s has no weft counterpart (weft has SUM PRODUCT MIN MAX AVG "
                         "PREMUL_SUM)" % str(kind).split(".")[-1])

    def _run(self, outputs, fn):
        """Runs fn (the weft calls) and returns the Work for outputs."""
        self._flush()
        fn()
        return _work(outputs)

    # ---------------------------------------------------------- collectives
    def allreduce(self, tensors, opts=None):
        red = opts.reduceOp if opts is not None else dist.ReduceOp.SUM

        def go():
            for t in tensors:
                w = _as_weft(t)
                self.comm.allreduce(w, out=w, op=self._op(red, w))
        return self._run(tensors, go)

    def allreduce_coalesced(self, tensors, opts=None):
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors, opts):
        def go():
            for t in tensors:
                w = _as_weft(t)
                self.comm.broadcast(w, root=opts.rootRank, out=w)
        return self._run(tensors, go)

    def reduce(self, tensors, opts):
        def go():
            for t in tensors:
                w = _as_weft(t)
                self.comm.reduce(w, root=opts.rootRank, out=w, op=self._op(opts.reduceOp, w))
        return self._run(tensors, go)

    def _allgather_base(self, output, input, opts=None):
        return self._run([output], lambda: self.comm.allgather(_as_weft(_flat(input)), out=_as_weft(output)))

    def allgather(self, output_tensors, input_tensors, opts=None):
        n = self.comm.size

        def go():
            for outs, inp in zip(output_tensors, input_tensors):
                if len(outs) != n:
                    raise ValueError("weft allgather: %d output tensors for %d ranks" % (len(outs), n))
                src = _flat(inp)
                flat = torch.empty(n * src.numel(), dtype=src.dtype, device=src.device)
                self.comm.allgather(_as_weft(src), out=_as_weft(flat))
                for r, o in enumerate(outs):
                    if o.numel() != src.numel():
                        raise ValueError("weft allgather: output %d has %d elements, the input %d"
                                         % (r, o.numel(), src.numel()))
                    o.copy_(flat[r * src.numel():(r + 1) * src.numel()].view(o.shape))
        return self._run([o for outs in output_tensors for o in outs], go)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        return self.allgather(output_lists, input_list, opts)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        def go():
            for o, i in zip(outputs, inputs):
                self.comm.allgather(_as_weft(_flat(i)), out=_as_weft(o))
        return self._run(outputs, go)

    def _reduce_scatter_base(self, output, input, opts=None):
        red = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        o = _Out(output)

        def go():
            self.comm.reduce_scatter(_as_weft(_flat(input)), out=_as_weft(o.buf), op=self._op(red, input))
            o.done()
        return self._run([output], go)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        red = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        n = self.comm.size

        def go():
            for out, ins in zip(output_tensors, input_tensors):
                if len(ins) != n or any(i.numel() != out.numel() for i in ins):
                    raise ValueError("weft reduce_scatter: wants %d inputs of %d elements each (the output's)"
                                     % (n, out.numel()))
                o = _Out(out)
                flat = torch.cat([_flat(i) for i in ins])
                self.comm.reduce_scatter(_as_weft(flat), out=_as_weft(o.buf), op=self._op(red, out))
                o.done()
        return self._run(output_tensors, go)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        red = opts.reduceOp if opts is not None else dist.ReduceOp.SUM

        def go():
            for out, inp in zip(outputs, inputs):
                o = _Out(out)
                self.comm.reduce_scatter(_as_weft(_flat(inp)), out=_as_weft(o.buf), op=self._op(red, out))
                o.done()
        return self._run(outputs, go)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        me = self.comm.rank
        if not output_split_sizes and not input_split_sizes:
            return self._run([output], lambda: self.comm.alltoall(_as_weft(_flat(input)), out=_as_weft(output)))
        if not output.is_contiguous():
            raise ValueError("weft alltoall_base: the output tensor is not contiguous")
        ins = self._split(input.contiguous(), input_split_sizes, "input")
        outs = self._split(output, output_split_sizes, "output")
        return self._run([output], lambda: self._exchange(outs, ins, me))

    def _split(self, t, sizes, what):
        n = self.comm.size
        if not sizes:
            if t.shape[0] % n:
                raise ValueError("weft alltoall_base: the %s's %d rows do not split into %d equal blocks"
                                 % (what, t.shape[0], n))
            sizes = [t.shape[0] // n] * n
        if len(sizes) != n or sum(sizes) != t.shape[0]:
            raise ValueError("weft alltoall_base: %s split sizes %s do not cover %d rows in %d blocks"
                             % (what, list(sizes), t.shape[0], n))
        return list(torch.split(t, list(sizes)))

    def _exchange(self, outs, ins, me):
        """outs[p] from rank p and ins[p] to rank p, as one group of sends
        and receives; this rank's own block is copied."""
        bufs = [_Out(o) for o in outs]
        with group():
            for p in range(self.comm.size):
                if p == me:
                    continue
                if ins[p].numel():
                    self.comm.send(_as_weft(ins[p].contiguous()), p)
                if bufs[p].buf.numel():
                    self.comm.recv(_as_weft(bufs[p].buf), p)
        bufs[me].buf.copy_(ins[me])
        for b in bufs:
            b.done()

    def alltoall(self, output_tensors, input_tensors, opts=None):
        me = self.comm.rank
        n = self.comm.size
        if len(output_tensors) != n or len(input_tensors) != n:
            raise ValueError("weft alltoall: wants %d input and output tensors" % n)
        return self._run(output_tensors, lambda: self._exchange(output_tensors, input_tensors, me))

    def gather(self, output_tensors, input_tensors, opts):
        root, me = opts.rootRank, self.comm.rank
        inp = input_tensors[0]

        def go():
            if me != root:
                self.comm.send(_as_weft(inp.contiguous()), root)
                return
            outs = [_Out(o) for o in output_tensors[0]]
            with group():
                for p, o in enumerate(outs):
                    if p != root:
                        self.comm.recv(_as_weft(o.buf), p)
            outs[root].buf.copy_(inp)
            for o in outs:
                o.done()
        return self._run(output_tensors[0] if me == root else list(input_tensors), go)

    def scatter(self, output_tensors, input_tensors, opts):
        root, me = opts.rootRank, self.comm.rank
        out = _Out(output_tensors[0])

        def go():
            if me != root:
                self.comm.recv(_as_weft(out.buf), root)
            else:
                ins = input_tensors[0]
                with group():
                    for p, i in enumerate(ins):
                        if p != root:
                            self.comm.send(_as_weft(i.contiguous()), p)
                out.buf.copy_(ins[root])
            out.done()
        return self._run(output_tensors, go)

    def send(self, tensors, dstRank, tag=0):
        return self._queue(True, tensors, dstRank)

    def recv(self, tensors, srcRank, tag=0):
        return self._queue(False, tensors, srcRank)

    def _queue(self, is_send, tensors, peer):
        if not 0 <= peer < self.comm.size:
            raise ValueError("weft: peer %d is outside 0..%d" % (peer, self.comm.size - 1))
        cuda = next((t.device for t in tensors if t.is_cuda), None)
        w = _P2PWork(self)
        stream = torch.cuda.current_stream(cuda) if cuda is not None else None
        self._pending.append((is_send, list(tensors), peer, stream, w))
        return w

    def _flush(self):
        """Issues the queued sends and receives as one weft group, each on
        the stream that was current when it was queued."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        try:
            self._issue(pending)
        except BaseException as e:
            for *_, w in pending:
                w.error = e
            raise

    def _issue(self, pending):
        outs = []
        with group():
            for is_send, tensors, peer, stream, _ in pending:
                with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                    for t in tensors:
                        if is_send:
                            self.comm.send(_as_weft(t.contiguous()), peer)
                        else:
                            o = _Out(t)
                            self.comm.recv(_as_weft(o.buf), peer)
                            outs.append((o, stream))
        for o, stream in outs:
            with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                o.done()
        for _, tensors, _, stream, w in pending:
            with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                w.work = _work(tensors)

    def barrier(self, opts=None):
        # NCCL's barrier is a collective on the device, so work queued before
        # it is done after it: the current stream is drained to match.
        self._flush()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.current_stream().synchronize()
        self.comm.barrier()
        return _work([])

    # ------------------------------------------------------------ lifecycle
    def shutdown(self):
        self._flush()
        self.comm.close()

    def abort(self):
        if not self.comm.closed:
            self.comm.abort()


def _comm_for(store, rank, size):
    """The communicator of a new group: split from the world's when the
    group holds every rank of it, else from a unique id that the group's
    rank 0 puts in the group's store."""
    global _world_comm
    if _world_comm is not None and not _world_comm.closed and size == _world_comm.size:
        return _world_comm.split(0, key=rank)
    if rank == 0:
        uid = get_unique_id()
        store.set(_UID_KEY, uid)
    else:
        uid = store.get(_UID_KEY)
    comm = Comm(uid, rank, size)
    if not dist.is_initialized():
        _world_comm = comm
    return comm


def create(store, rank, size, timeout=None):
    """The creator torch.distributed calls for backend "weft". timeout is
    not used: weft's own [core] stall_timeout bounds a stuck call."""
    return WeftProcessGroup(_comm_for(store, rank, size), rank, size)


def register():
    """Registers backend "weft" for CPU and CUDA tensors (done at import)."""
    if hasattr(dist.Backend, "WEFT"):
        return
    try:
        dist.Backend.register_backend("weft", create, devices=["cpu", "cuda"])
    except TypeError:
        # torch before 2.0 takes no devices.
        dist.Backend.register_backend("weft", create)


register()

__all__ = ["WeftProcessGroup", "create", "register"]
