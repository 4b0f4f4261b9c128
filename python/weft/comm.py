# SPDX-License-Identifier: Apache-2.0
# weft.Comm: a communicator and its collectives over host and CUDA buffers,
# and weft.group() for fused sends and receives.
import contextlib
import ctypes
import threading

from . import _arrays as A
from ._lib import check, lib

UNIQUE_ID_BYTES = 128
SPLIT_NOCOLOR = -1

# Calls inside weft.group() run at its end: the buffers they name are kept
# alive here until then. Groups are per thread, as weft_group_start's are.
_tls = threading.local()


def _keep(*objs):
    refs = getattr(_tls, "refs", None)
    if refs is not None:
        refs.extend(objs)


@contextlib.contextmanager
def group():
    """Queues the calls made inside it and runs them at its end, the sends
    and receives as one fused batch (weft_group_start / weft_group_end), so
    pairs may be issued in any order. Groups nest. Raises WeftError at the
    end when the batch fails."""
    L = lib()
    outer = getattr(_tls, "refs", None) is None
    check(L.weft_group_start(), "weft_group_start")
    if outer:
        _tls.refs = []
    try:
        yield
    finally:
        try:
            check(L.weft_group_end(), "weft_group_end")
        finally:
            if outer:
                _tls.refs = None


def get_unique_id():
    """A new unique id (128 bytes) for Comm(unique_id, rank, size). It starts
    a bootstrap root in this process, which must stay alive until every rank
    joined; it holds the job's secret, so hand it only to the job's ranks."""
    L = lib()
    buf = ctypes.create_string_buffer(UNIQUE_ID_BYTES)
    check(L.weft_get_unique_id(buf), "weft_get_unique_id")
    return buf.raw


class Comm:
    """A weft communicator.

    Comm() or Comm.from_env(): rank and size from the launcher (torchrun's
    RANK/WORLD_SIZE with MASTER_ADDR/MASTER_PORT, Open MPI's
    OMPI_COMM_WORLD_*, Slurm's SLURM_PROCID/SLURM_NTASKS, PMI_*), the root
    from WEFT_CORE_BOOTSTRAP_ROOT or torchrun's MASTER_ADDR:MASTER_PORT+1
    (weft_comm_create_from_env; docs/launching.md).
    Comm(unique_id, rank, size): every rank passes the bytes of one
    get_unique_id(). Comm(None, rank, size): the root from
    WEFT_CORE_BOOTSTRAP_ROOT. Blocks until every rank has arrived.

    close() (or leaving a with block) destroys it; a communicator is not
    destroyed by garbage collection, because destroy waits for the peers.
    One thread at a time per communicator.
    """

    def __init__(self, unique_id=None, rank=None, size=None, *, _handle=None):
        self._h = None
        L = lib()
        h = ctypes.c_void_p()
        if _handle is not None:
            h.value = _handle
        elif unique_id is None and rank is None and size is None:
            check(L.weft_comm_create_from_env(ctypes.byref(h)), "weft_comm_create_from_env")
        else:
            if rank is None or size is None:
                raise ValueError("Comm: rank and size go together "
                                 "(or neither, to read the launcher's environment)")
            rank, size = int(rank), int(size)
            if size < 1 or not 0 <= rank < size:
                raise ValueError("Comm: rank %d is outside 0..%d" % (rank, size - 1))
            idbuf = None
            if unique_id is not None:
                uid = bytes(unique_id)
                if len(uid) != UNIQUE_ID_BYTES:
                    raise ValueError("Comm: a unique id has %d bytes, not %d" % (UNIQUE_ID_BYTES, len(uid)))
                idbuf = ctypes.create_string_buffer(uid, UNIQUE_ID_BYTES)
            check(L.weft_comm_create(idbuf, size, rank, ctypes.byref(h)), "weft_comm_create")
        self._h = h.value
        self._L = L
        self.rank = L.weft_comm_rank(self._h)
        self.size = L.weft_comm_size(self._h)

    @classmethod
    def from_env(cls):
        return cls()

    # ------------------------------------------------------------ lifecycle
    def _handle(self):
        if self._h is None:
            raise ValueError("the communicator is closed")
        return self._h

    def close(self):
        """weft_comm_destroy: waits until every connected peer has closed
        its side too. A second close does nothing."""
        h, self._h = self._h, None
        if h is not None:
            check(self._L.weft_comm_destroy(h), "weft_comm_destroy")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def closed(self):
        return self._h is None

    def __repr__(self):
        if self._h is None:
            return "<weft.Comm closed>"
        return "<weft.Comm rank %d of %d>" % (self.rank, self.size)

    def abort(self):
        """Makes every pending and later call fail with WEFT_ERR_ABORTED;
        any thread may call it."""
        check(self._L.weft_comm_abort(self._handle()), "weft_comm_abort")

    def status(self):
        """0 while healthy, else the (negative) error that broke it."""
        return self._L.weft_comm_status(self._handle())

    def barrier(self):
        check(self._L.weft_comm_barrier(self._handle()), "weft_comm_barrier")

    def split(self, color, key=0):
        """The ranks passing the same color form a new Comm, ranked by key,
        then by their rank here; color None (or SPLIT_NOCOLOR) takes part
        and gets None. Every rank calls it. The new Comm is closed apart."""
        color = SPLIT_NOCOLOR if color is None else int(color)
        if color < 0 and color != SPLIT_NOCOLOR:
            raise ValueError("split: color %d is negative (None takes part without a new comm)" % color)
        h = ctypes.c_void_p()
        check(self._L.weft_comm_split(self._handle(), color, int(key), ctypes.byref(h)), "weft_comm_split")
        return Comm(_handle=h.value) if h.value else None

    def last_algorithm(self):
        """"pack/algorithm" that served this comm's last collective, or None."""
        s = self._L.weft_info_last_algorithm(self._handle())
        return s.decode() if s else None

    def transport_choice(self, mem="host"):
        """Per peer class, the transports a connection of this comm would
        try, in order and why (weft-info --select's first half)."""
        from .info import transport_choice
        return transport_choice(self, self.size, mem)

    # -------------------------------------------------------------- buffers
    def _input(self, obj, what="sendbuf"):
        a = A.as_array(obj, what)
        t = A.datatype(a, what)
        A.contiguous(a, what)
        return a, A.address(a), t

    def _output(self, obj, like, what="out"):
        a = A.as_array(obj, what)
        t = A.datatype(a, what)
        A.contiguous(a, what)
        A.writable(a, what)
        if type(a) is not type(like) or (a.dtype != like.dtype if type(a) is not A.Buf else a.wtype != like.wtype):
            if A.dtype_name(a) != A.dtype_name(like):
                raise TypeError("%s has dtype %s but the input has %s"
                                % (what, A.dtype_name(a), A.dtype_name(like)))
        if A.device(a) != A.device(like):
            raise ValueError("%s is on %s but the input on %s" % (what, A.device(a), A.device(like)))
        return a, A.address(a), t

    def _call(self, name, buf, *args):
        """Calls name(*args, comm, stream) with buf's stream (None for host
        memory), under buf's CUDA device."""
        if type(buf) is A.Buf:
            with buf.context():
                rc = getattr(self._L, name)(*args, self._handle(), buf.stream)
        else:
            rc = getattr(self._L, name)(*args, self._handle(), None)
        if rc < 0:
            check(rc, name)

    @staticmethod
    def _no_overlap(s, ps, r, pr, inplace_ok, how):
        if not inplace_ok and A.overlaps(s, ps, r, pr):
            raise ValueError("sendbuf and out overlap, which is neither out of place nor in place (%s)" % how)

    def _same_size_out(self, out, s, ps, what):
        """out for a call whose output is as large as its input s (named
        what): new when None, else checked; in place means out is s.
        Returns out's array, its address and what the call returns."""
        if out is None:
            ret, r = A.empty(s, s.shape)
            return r, A.address(r), ret
        r, pr, _ = self._output(out, s)
        if r.size != s.size:
            raise ValueError("out has %d elements, %s %d" % (r.size, what, s.size))
        self._no_overlap(s, ps, r, pr, ps == pr, "in place: out is " + what)
        return r, pr, out

    def _reduction(self, name, send, out, op, root, per_rank_out):
        self._handle()
        s, ps, t = self._input(send)
        op = A.parse_op(op)
        n = self.size
        if per_rank_out:  # reduce_scatter: out holds the rank's block
            if s.size % n:
                raise ValueError("reduce_scatter: sendbuf's %d elements do not split into %d equal blocks"
                                 % (s.size, n))
            count = s.size // n
        else:
            count = s.size
        inplace_at = ps + (self.rank * count * s.itemsize if per_rank_out else 0)
        rooted = name == "weft_reduce"
        if rooted and not 0 <= root < n:
            raise ValueError("reduce: root %d is outside 0..%d" % (root, n - 1))
        if out is None:
            if rooted and self.rank != root:
                r, pr, ret = None, None, None
            else:
                shape = s.shape
                if per_rank_out:
                    shape = (s.shape[0] // n,) + s.shape[1:] if s.ndim and s.shape[0] % n == 0 else (count,)
                ret, r = A.empty(s, shape)
                pr = A.address(r)
        else:
            r, pr, _ = self._output(out, s)
            ret = out
            if r.size != count:
                raise ValueError("out has %d elements, %s needs %d" % (r.size, name[5:], count))
            self._no_overlap(s, ps, r, pr, pr == inplace_at,
                             "reduce_scatter in place: out is block `rank` of sendbuf" if per_rank_out
                             else "in place: out is sendbuf")
        if isinstance(op, A.premul_sum):
            scal, pscal, mem = A.scalar_arg(op, s)
            args = (ps, pr, count, t, pscal, mem) + ((root,) if rooted else ())
            _keep(s, r, scal)
            self._call(name + "_premul", s, *args)
        else:
            args = (ps, pr, count, t, int(op)) + ((root,) if rooted else ())
            _keep(s, r)
            self._call(name, s, *args)
        return ret

    # ---------------------------------------------------------- collectives
    def allreduce(self, sendbuf, out=None, op="sum"):
        """Reduces sendbuf over all ranks into out (a new array when None;
        out=sendbuf: in place). op: 'sum' 'prod' 'min' 'max' 'avg', a
        weft.Op, or weft.premul_sum(scalar). Returns out."""
        return self._reduction("weft_allreduce", sendbuf, out, op, 0, False)

    def reduce_scatter(self, sendbuf, out=None, op="sum"):
        """sendbuf holds size equal blocks; rank r gets the reduction of
        block r. In place: out is block `rank` of sendbuf."""
        return self._reduction("weft_reduce_scatter", sendbuf, out, op, 0, True)

    def reduce(self, sendbuf, root=0, out=None, op="sum"):
        """As allreduce, the result on root only; other ranks get out back
        untouched (None when they passed none)."""
        return self._reduction("weft_reduce", sendbuf, out, op, int(root), False)

    def allgather(self, sendbuf, out=None):
        """out (size * sendbuf's elements; new, shaped (size,) + sendbuf's
        shape, when None) gets rank r's sendbuf at block r. In place:
        sendbuf is block `rank` of out."""
        self._handle()
        s, ps, t = self._input(sendbuf)
        count, n = s.size, self.size
        if out is None:
            ret, r = A.empty(s, (n,) + s.shape)
            pr = A.address(r)
        else:
            r, pr, _ = self._output(out, s)
            ret = out
            if r.size != n * count:
                raise ValueError("out has %d elements, allgather needs %d (%d ranks x %d)"
                                 % (r.size, n * count, n, count))
            self._no_overlap(s, ps, r, pr, ps == pr + self.rank * count * s.itemsize,
                             "in place: sendbuf is block `rank` of out")
        _keep(s, r)
        self._call("weft_allgather", s, ps, pr, count, t)
        return ret

    def broadcast(self, buf, root=0, out=None):
        """root's buf to every rank's out (new when None; out=buf: in
        place). Every rank passes a buf of the same dtype and size."""
        self._handle()
        root = int(root)
        if not 0 <= root < self.size:
            raise ValueError("broadcast: root %d is outside 0..%d" % (root, self.size - 1))
        s, ps, t = self._input(buf, "buf")
        r, pr, ret = self._same_size_out(out, s, ps, "buf")
        _keep(s, r)
        self._call("weft_broadcast", s, ps, pr, s.size, t, root)
        return ret

    def alltoall(self, sendbuf, out=None):
        """Block p of sendbuf (size equal blocks) goes to rank p, and block
        p of out comes from rank p. out=sendbuf: in place."""
        self._handle()
        s, ps, t = self._input(sendbuf)
        n = self.size
        if s.size % n:
            raise ValueError("alltoall: sendbuf's %d elements do not split into %d equal blocks" % (s.size, n))
        r, pr, ret = self._same_size_out(out, s, ps, "sendbuf")
        _keep(s, r)
        self._call("weft_alltoall", s, ps, pr, s.size // n, t)
        return ret

    def send(self, buf, peer):
        """Sends buf to peer, whose recv names the same byte count. Outside
        a group, a send and its matching recv must come from different
        threads (or processes)."""
        self._handle()
        s, ps, t = self._input(buf, "buf")
        self._peer(peer)
        _keep(s)
        self._call("weft_send", s, ps, s.size, t, int(peer))

    def recv(self, buf, peer):
        """Receives into buf from peer; returns buf."""
        self._handle()
        r = A.as_array(buf, "buf")
        t = A.datatype(r, "buf")
        A.contiguous(r, "buf")
        A.writable(r, "buf")
        self._peer(peer)
        _keep(r)
        self._call("weft_recv", r, A.address(r), r.size, t, int(peer))
        return buf

    def _peer(self, peer):
        if not 0 <= int(peer) < self.size:
            raise ValueError("peer %d is outside 0..%d" % (int(peer), self.size - 1))
