#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# What a user of the installed weft package sees on host buffers: forked ranks
# (2 and 3 over shm, 2 over ofi's tcp) run every collective and send/recv on
# every dtype and reduction, in place and out of place, against numpy's own
# result; the device-buffer interfaces (CUDA array interface, DLPack) read from
# host memory; bad arguments raise the documented exception before C is called;
# a disagreement between ranks comes back as WeftError; libweft.so is found in
# the documented order; introspection reports what the ranks were set up with.
# Run by venv-test.sh (ctest python_numpy) in a venv holding the installed
# package, with WEFT_LIB naming the build's libweft.so.
# Exit status: 0 passed, 1 a check failed, 77 numpy is missing.
import errno
import functools
import multiprocessing
import os
import pickle
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
import traceback

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not importable by %s (Debian: python3-numpy)" % sys.executable)
    sys.exit(77)

import weft

OPS = ("sum", "prod", "min", "max", "avg")
COUNT = 37  # odd, so blocks and chunks do not line up with anything
BIG = (1 << 17) + 3  # float32 and float64 of this many pass algo-host.chunk (512K by default)
DEADLINE = 60  # seconds one configuration may take before its ranks are killed


# ---------------------------------------------------------------- reference
def data(rng, dt, op, count):
    """One rank's input: whole numbers small enough for floats that every
    order of summation gives the same result; integers over their whole range,
    since weft and numpy both wrap."""
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=count, dtype=dt, endpoint=True)
    if op in ("min", "max"):
        return (rng.standard_normal(count) * 100).astype(dt)
    hi = 6 if op == "prod" else 64
    return rng.integers(-hi, hi, size=count, endpoint=True).astype(dt)


def expect(op, xs, dt):
    """numpy's reduction over the ranks' inputs xs, in dtype dt."""
    n = len(xs)
    if op in ("sum", "avg"):
        s = functools.reduce(np.add, xs)
    else:
        s = functools.reduce({"prod": np.multiply, "min": np.minimum, "max": np.maximum}[op], xs)
    if op != "avg":
        return s
    if dt.kind == "u":
        return s // dt.type(n)
    if dt.kind == "i":  # C's division truncates toward zero
        return np.array([int(v) // n if v >= 0 else -(-int(v) // n) for v in s], dtype=dt)
    if dt == np.float16:  # weft divides narrow floats in float, rounding once
        return (s.astype(np.float32) / np.float32(n)).astype(np.float16)
    return s / dt.type(n)


def premul_scalar(dt, rank):
    return rank + 2 if dt.kind in "iu" else 0.5 * (rank + 1)


def premul_data(rng, dt, count):
    if dt.kind in "iu":
        return data(rng, dt, "sum", count)
    return rng.integers(-16, 16, size=count, endpoint=True).astype(dt)


def premul_expect(xs, dt):
    return functools.reduce(np.add, [x * np.array(premul_scalar(dt, r), dtype=dt) for r, x in enumerate(xs)])


# ------------------------------------------------------------ one rank's run
class Rank:
    def __init__(self, comm, label):
        self.c = comm
        self.r = comm.rank
        self.n = comm.size
        self.label = label
        self.failures = []
        self.checks = 0
        self.seed = 0

    def fail(self, what):
        self.failures.append(what)

    def equal(self, what, got, want):
        self.checks += 1
        if got is None or got.dtype != want.dtype or got.size != want.size or \
                not np.array_equal(got.reshape(-1), want.reshape(-1)):
            bad = "" if got is None or got.size != want.size else \
                " (first differing element %d)" % int(np.argmax(got.reshape(-1) != want.reshape(-1)))
            self.fail("%s: got %r, want %r%s" % (what, got, want, bad))

    def raises(self, what, exc, fn, *args, **kw):
        self.checks += 1
        try:
            fn(*args, **kw)
        except exc as e:
            return e
        except Exception as e:  # the wrong kind is a failure, not a crash
            self.fail("%s: raised %s: %s, want %s" % (what, type(e).__name__, e, exc.__name__))
            return None
        self.fail("%s: raised nothing, want %s" % (what, exc.__name__))
        return None

    def inputs(self, make, count):
        """Every rank's input, the same on every rank (one seed per case), so
        each rank knows the whole answer without asking the others."""
        self.seed += 1
        rngs = [np.random.default_rng([self.seed, r]) for r in range(self.n)]
        return [make(rng) for rng in rngs]

    # -------------------------------------------------------- reductions
    def reductions(self, dt, count):
        c, r, n = self.c, self.r, self.n
        for op in OPS + ("premul",):
            if op == "premul":
                xs = self.inputs(lambda g: premul_data(g, dt, count), count)
                want, wop = premul_expect(xs, dt), weft.premul_sum(premul_scalar(dt, r))
            else:
                xs = self.inputs(lambda g: data(g, dt, op, count), count)
                want, wop = expect(op, xs, dt), op
            tag = "%s %s count=%d" % (dt.name, op, count)
            x = xs[r].copy()
            self.equal("allreduce %s out of place" % tag, c.allreduce(x, op=wop), want)
            self.equal("allreduce %s leaves sendbuf" % tag, x, xs[r])
            out = np.empty_like(x)
            self.checks += 1
            if c.allreduce(x, out=out, op=wop) is not out:
                self.fail("allreduce %s: did not return the out it was given" % tag)
            self.equal("allreduce %s into out" % tag, out, want)
            c.allreduce(x, out=x, op=wop)
            self.equal("allreduce %s in place" % tag, x, want)

            # reduce_scatter: every rank sends n blocks, gets block r.
            ys = self.inputs(lambda g: premul_data(g, dt, count * n) if op == "premul"
                             else data(g, dt, op, count * n), count)
            full = premul_expect(ys, dt) if op == "premul" else expect(op, ys, dt)
            blk = full[r * count:(r + 1) * count]
            y = ys[r].copy()
            self.equal("reduce_scatter %s out of place" % tag, c.reduce_scatter(y, op=wop), blk)
            c.reduce_scatter(y, out=y[r * count:(r + 1) * count], op=wop)
            self.equal("reduce_scatter %s in place" % tag, y[r * count:(r + 1) * count], blk)

            # reduce: the root moves with each case.
            root = self.seed % n
            x = xs[r].copy()
            got = c.reduce(x, root=root, op=wop)
            if r == root:
                self.equal("reduce %s root=%d out of place" % (tag, root), got, want)
            else:
                self.checks += 1
                if got is not None:
                    self.fail("reduce %s: a non-root got %r, want None" % (tag, got))
            c.reduce(x, root=root, out=x, op=wop)
            self.equal("reduce %s root=%d in place" % (tag, root), x, want if r == root else xs[r])

    def real_sum(self, dt):
        """Sums of real-valued data, whose rounding depends on the order:
        close to numpy's, not equal."""
        if dt.kind != "f":
            return
        xs = self.inputs(lambda g: g.standard_normal(COUNT).astype(dt), COUNT)
        got = self.c.allreduce(xs[self.r])
        want = functools.reduce(np.add, [x.astype(np.float64) for x in xs])
        tol = {2: 1e-2, 4: 1e-5, 8: 1e-12}[dt.itemsize]
        self.checks += 1
        if got.dtype != dt or not np.allclose(got.astype(np.float64), want, rtol=tol, atol=tol * self.n):
            self.fail("allreduce %s sum of reals: got %r, want %r" % (dt.name, got, want))

    # ---------------------------------------------------------- movement
    def movement(self, dt, count):
        c, r, n = self.c, self.r, self.n
        tag = "%s count=%d" % (dt.name, count)
        xs = self.inputs(lambda g: data(g, dt, "sum", count), count)
        allg = np.stack(xs)
        self.equal("allgather %s out of place" % tag, c.allgather(xs[r]), allg)
        got = c.allgather(xs[r])
        self.checks += 1
        if got.shape != (n, count):
            self.fail("allgather %s: shape %s, want %s" % (tag, got.shape, (n, count)))
        out = np.zeros(n * count, dt)
        out[r * count:(r + 1) * count] = xs[r]
        c.allgather(out[r * count:(r + 1) * count], out=out)
        self.equal("allgather %s in place" % tag, out, allg)

        root = self.seed % n
        x = xs[r].copy()
        self.equal("broadcast %s root=%d out of place" % (tag, root), c.broadcast(x, root=root), xs[root])
        self.equal("broadcast %s leaves buf" % tag, x, xs[r])
        c.broadcast(x, root=root, out=x)
        self.equal("broadcast %s root=%d in place" % (tag, root), x, xs[root])

        # alltoall: block p of rank q's input lands as block q of rank p's output.
        ys = self.inputs(lambda g: data(g, dt, "sum", count * n), count)
        want = np.concatenate([ys[q][r * count:(r + 1) * count] for q in range(n)])
        y = ys[r].copy()
        self.equal("alltoall %s out of place" % tag, c.alltoall(y), want)
        c.alltoall(y, out=y)
        self.equal("alltoall %s in place" % tag, y, want)

        # send/recv around the ring in a group, and outside one with 2 ranks.
        nxt, prv = (r + 1) % n, (r - 1) % n
        got = np.zeros(count, dt)
        with weft.group():
            c.send(xs[r], nxt)
            c.recv(got, prv)
        self.equal("send/recv %s ring in a group" % tag, got, xs[prv])
        if n == 2:
            got = np.zeros(count, dt)
            if r == 0:
                c.send(xs[0], 1)
                c.recv(got, 1)
            else:
                c.recv(got, 0)
                c.send(xs[1], 0)
            self.equal("send/recv %s without a group" % tag, got, xs[1 - r])

    # ------------------------------------------------------------- errors
    def errors(self):
        c, n = self.c, self.n
        x = np.arange(n * 4, dtype=np.float32)
        E = self.raises
        E("int16 input", TypeError, c.allreduce, np.zeros(4, np.int16))
        E("complex input", TypeError, c.allgather, np.zeros(4, np.complex64))
        E("bool input", TypeError, c.broadcast, np.zeros(4, bool))
        E("byte-swapped input", TypeError, c.allreduce, np.zeros(4, ">f4"))
        E("out of another dtype", TypeError, c.allreduce, x, out=np.zeros(x.size, np.float64))
        E("a list", TypeError, c.allreduce, [1.0, 2.0])
        E("an empty __cuda_array_interface__", TypeError, c.allreduce,
          type("Dev", (), {"__cuda_array_interface__": {}})())
        E("out too small", ValueError, c.allreduce, x, out=np.zeros(x.size - 1, np.float32))
        E("allgather out too small", ValueError, c.allgather, x, out=np.zeros(x.size, np.float32))
        E("reduce_scatter uneven", ValueError, c.reduce_scatter, np.zeros(n * 4 + 1, np.float32))
        E("alltoall uneven", ValueError, c.alltoall, np.zeros(n * 4 + 1, np.float32))
        E("broadcast out too large", ValueError, c.broadcast, x, out=np.zeros(x.size + 1, np.float32))
        E("recv of a read-only buffer", ValueError, c.recv, np.frombuffer(bytes(16), np.float32), 0)
        ro = np.zeros(x.size, np.float32)
        ro.flags.writeable = False
        E("read-only out", ValueError, c.allreduce, x, out=ro)
        E("strided input", ValueError, c.allreduce, x[::2])
        E("Fortran-order input", ValueError, c.allreduce, np.asfortranarray(np.zeros((3, 4), np.float32)))
        E("partial overlap", ValueError, c.allreduce, x[:8], out=x[4:12])
        E("allgather overlapping, not in place", ValueError, c.allgather, x[1:5], out=x)
        e = E("unknown op", ValueError, c.allreduce, x, op="median")
        self.checks += 1
        if e is not None and "median" not in str(e):
            self.fail("unknown op: the message does not name it: %s" % e)
        E("premul_sum by name", ValueError, c.allreduce, x, op="premul_sum")
        E("op out of range", ValueError, c.allreduce, x, op=9)
        E("op of a wrong type", TypeError, c.allreduce, x, op=object())
        E("premul_sum of a string", TypeError, weft.premul_sum, "2")
        E("premul_sum 2.5 on int32", ValueError, c.allreduce, np.zeros(4, np.int32), op=weft.premul_sum(2.5))
        E("premul_sum 300 on int8", ValueError, c.allreduce, np.zeros(4, np.int8), op=weft.premul_sum(300))
        E("reduce root out of range", ValueError, c.reduce, x, root=n)
        E("broadcast root negative", ValueError, c.broadcast, x, root=-1)
        E("send to a rank outside", ValueError, c.send, x, n)
        E("split with a negative color", ValueError, c.split, -5)
        E("a unique id of 3 bytes", ValueError, weft.Comm, b"abc", 0, 2)

    def split_and_mismatch(self):
        """A split comm ranked backwards works; ranks that disagree on a
        count get WeftError(WEFT_ERR_MISMATCH) there, and the parent comm
        goes on."""
        c, r, n = self.c, self.r, self.n
        sub = c.split(0, key=n - r)
        self.checks += 1
        if sub.rank != n - 1 - r or sub.size != n:
            self.fail("split: rank %d of %d, want %d of %d" % (sub.rank, sub.size, n - 1 - r, n))
        self.equal("allreduce on the split comm", sub.allreduce(np.array([sub.rank], np.int64)),
                   np.array([n * (n - 1) // 2], np.int64))
        none = c.split(None if r == 0 else 1)
        self.checks += 1
        if (none is None) != (r == 0):
            self.fail("split: rank %d got %r" % (r, none))
        if none is not None:
            self.equal("allreduce on the comm without rank 0", none.allreduce(np.ones(3, np.int32)),
                       np.full(3, n - 1, np.int32))
            none.close()
        e = self.raises("allreduce with counts that differ across ranks", weft.WeftError,
                        sub.allreduce, np.zeros(4 + r, np.float32))
        if e is not None:
            # No message is asked for: the rank that found the mismatch logs
            # it, the others may learn of it on another thread.
            self.checks += 1
            if e.code != -weft.ERR_MISMATCH or e.symbol != "WEFT_ERR_MISMATCH" or e.name != "ranks disagree":
                self.fail("mismatch: WeftError code=%d symbol=%s name=%r" % (e.code, e.symbol, e.name))
        sub.close()
        sub.close()  # a second close does nothing
        # Every rank aborts before any destroys: a peer's destroy would
        # otherwise be seen first, as WEFT_ERR_PEER.
        ab = c.split(0)
        ab.abort()
        c.barrier()
        e = self.raises("allreduce on an aborted comm", weft.WeftError, ab.allreduce, np.zeros(1, np.float32))
        self.checks += 1
        if e is not None and (e.code != -weft.ERR_ABORTED or ab.status() != -weft.ERR_ABORTED):
            self.fail("abort: code %d, status %d" % (e.code, ab.status()))
        c.barrier()
        ab.close()
        self.raises("a call on a closed comm", ValueError, sub.allreduce, np.zeros(1, np.float32))
        self.equal("the parent after its split failed", c.allreduce(np.ones(2, np.float64)),
                   np.full(2, float(n)))

    def others(self):
        """__array_interface__ objects, groups keeping their buffers alive."""
        c, r, n = self.c, self.r, self.n

        class Host:  # a buffer that is not a numpy array
            def __init__(self, a):
                self.a = a
                self.__array_interface__ = a.__array_interface__
        h = Host(np.full(5, r + 1, np.int32))
        c.allreduce(h, out=h)
        self.equal("allreduce in place on an __array_interface__ object", h.a,
                   np.full(5, n * (n + 1) // 2, np.int32))
        self.interfaces()
        with weft.group():
            a = c.allreduce(np.full(3, r, np.float64))  # its input lives only in the group
            b = c.allgather(np.array([r], np.uint8))
        self.equal("allreduce queued in a group", a, np.full(3, float(n * (n - 1) // 2)))
        self.equal("allgather queued in a group", b, np.arange(n, dtype=np.uint8))
        got = c.allreduce(np.array([1.0], np.float32))
        self.equal("one element", got, np.array([float(n)], np.float32))
        self.equal("zero elements", c.allreduce(np.zeros(0, np.float32)), np.zeros(0, np.float32))
        self.checks += 1
        alg = c.last_algorithm()
        if not alg or not alg.startswith("algo-host/"):
            self.fail("last_algorithm: %r, want algo-host/..." % alg)
        c.barrier()
        self.checks += 1
        if c.status() != 0:
            self.fail("status: %d" % c.status())

    def interfaces(self):
        """The device-buffer interfaces read from host memory: a
        __cuda_array_interface__ and a DLPack producer wrapping numpy arrays
        (weft finds the memory's kind from the pointer); a strided or
        read-only one is refused; without a library to allocate with, out=
        is required."""
        c, r, n = self.c, self.r, self.n

        class Cai:
            def __init__(self, a, strides=None, readonly=False):
                self.a = a
                self.__cuda_array_interface__ = {
                    "shape": a.shape, "typestr": a.dtype.str, "version": 3, "stream": None,
                    "data": (a.__array_interface__["data"][0], readonly), "strides": strides}

        class Dl:  # only DLPack: no __array_interface__ to fall back on
            def __init__(self, a):
                self.a = a

            def __dlpack__(self, stream=None):
                return self.a.__dlpack__()

            def __dlpack_device__(self):
                return self.a.__dlpack_device__()

        x = Cai(np.arange(6, dtype=np.int64) * (r + 1))
        c.allreduce(x, out=x)
        self.equal("allreduce in place through __cuda_array_interface__", x.a,
                   np.arange(6, dtype=np.int64) * (n * (n + 1) // 2))
        src, dst = Dl(np.full(4, r + 1.0, np.float32)), Dl(np.zeros(4 * n, np.float32))
        c.allgather(src, out=dst)
        self.equal("allgather through DLPack", dst.a, np.repeat(np.arange(1, n + 1, dtype=np.float32), 4))
        y = Cai(np.zeros(4, np.float32))
        self.raises("out=None for a __cuda_array_interface__ object", TypeError, c.allreduce, y)
        self.raises("strided __cuda_array_interface__", ValueError, c.allreduce,
                    Cai(np.zeros(4, np.float32), strides=(8,)), out=y)
        self.raises("read-only __cuda_array_interface__ out", ValueError, c.allreduce, y,
                    out=Cai(np.zeros(4, np.float32), readonly=True))
        self.raises("__cuda_array_interface__ of int16", TypeError, c.allreduce, Cai(np.zeros(4, np.int16)),
                    out=Cai(np.zeros(4, np.int16)))

    def no_launcher(self):
        """Comm() without a launcher's variables: WeftError with weft's own
        message (weft_last_error), naming what it looked for."""
        for k in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID",
                  "SLURM_NTASKS", "PMI_RANK", "PMI_SIZE"):
            os.environ.pop(k, None)
        e = self.raises("Comm() without launcher variables", weft.WeftError, weft.Comm)
        if e is not None:
            self.checks += 1
            if e.code != -errno.ENOENT or e.symbol != "ENOENT" or not e.message or "launcher" not in e.message \
                    or e.call != "weft_comm_create_from_env" or e.message not in str(e):
                self.fail("no launcher: WeftError code=%d symbol=%s call=%s message=%r"
                          % (e.code, e.symbol, e.call, e.message))

    def introspection(self, expect_loaded, expect_excluded, expect_carrier):
        weft.load()  # raises on a broken configuration, which this is not
        self.checks += 1
        ps = {p.name: p for p in weft.plugins() if p.name}
        for name in expect_loaded:
            if name not in ps or ps[name].state != "loaded":
                self.fail("plugins: %s is %s, want loaded" % (name, ps.get(name)))
        for name in expect_excluded:
            if name in ps and ps[name].state != "excluded":
                self.fail("plugins: %s is %s, want excluded" % (name, ps[name].state))
        for p in weft.plugins():
            if p.state == "loaded" and p.kind == "transport" and p.name in expect_loaded:
                d = weft.plugin_describe(p.index)
                self.checks += 1
                if not d:
                    self.fail("plugin_describe(%s): %r" % (p.name, d))
        want = os.environ["WEFT_CORE_PLUGINS"]
        self.checks += 1
        prm = {(p.section, p.key): p for p in weft.params()}
        got = prm.get(("core", "plugins"))
        if not got or got.value != want or got.source != "env" or got.origin != "WEFT_CORE_PLUGINS":
            self.fail("params: core.plugins is %r, want %r from env WEFT_CORE_PLUGINS" % (got, want))
        fifo = prm.get(("core", "fifo_depth"))
        if not fifo or fifo.source != "default" or fifo.type != "INT" or not fifo.help:
            self.fail("params: core.fifo_depth is %r, want a default INT with its help" % (fifo,))
        self.checks += 1
        if weft.param("core", "plugins") != want:
            self.fail("param(core, plugins): %r" % weft.param("core", "plugins"))
        self.checks += 1
        if weft.config_path() != os.environ.get("WEFT_CONFIG"):
            self.fail("config_path: %r, want %r" % (weft.config_path(), os.environ.get("WEFT_CONFIG")))
        self.checks += 1
        libdir = os.path.join(os.path.dirname(os.environ["WEFT_LIB"]), "weft")
        if libdir not in weft.search_path():
            self.fail("search_path: %r lacks %s" % (weft.search_path(), libdir))
        self.checks += 1
        algs = weft.algorithms()
        if not any(a.pack == "algo-host" and a.coll == "allreduce" for a in algs):
            self.fail("algorithms: no algo-host allreduce in %r" % (algs,))
        self.checks += 1
        text = self.c.transport_choice()
        if not re.search(expect_carrier, text):
            self.fail("transport_choice names no %r:\n%s" % (expect_carrier, text))
        self.checks += 1
        if not weft.topology().strip():
            self.fail("topology: empty")
        e = self.raises("where() of a process without a status socket", weft.WeftError, weft.where, os.getpid())
        self.checks += 1
        if e is not None and e.code != -errno.ESRCH:
            self.fail("where: %s, want ESRCH" % e)
        self.checks += 1
        if "allreduce" not in weft.algorithm_choice(self.n):
            self.fail("algorithm_choice: %r" % weft.algorithm_choice(self.n))


def rank_main(rank, size, cfg, uidq, resq):
    """One forked rank: sets its launcher's environment, creates the comm
    the configuration's way, runs every check, reports to the parent."""
    for k, v in cfg["env"].items():
        os.environ[k] = v
    how = cfg["create"]
    try:
        if how == "unique id":
            if rank == 0:
                uid = weft.get_unique_id()
                for _ in range(size - 1):
                    uidq.put(uid)
            else:
                uid = uidq.get(timeout=30)
            if cfg.get("srun_root"):
                os.environ.update(SLURM_PROCID=str(rank), SLURM_NTASKS=str(size),
                                  WEFT_CORE_BOOTSTRAP_ROOT=cfg["srun_root"])
            comm = weft.Comm(uid, rank, size)
        else:
            launcher = {"torchrun": {"RANK": rank, "WORLD_SIZE": size},
                        "mpirun": {"OMPI_COMM_WORLD_RANK": rank, "OMPI_COMM_WORLD_SIZE": size},
                        "srun": {"SLURM_PROCID": rank, "SLURM_NTASKS": size}}[how]
            for k, v in launcher.items():
                os.environ[k] = str(v)
            comm = weft.Comm.from_env()
        me = Rank(comm, cfg["name"])
        if comm.rank != rank or comm.size != size:
            me.fail("Comm: rank %d of %d, want %d of %d" % (comm.rank, comm.size, rank, size))
        if rank == 0:
            me.introspection(cfg["loaded"], cfg["excluded"], cfg["carrier"])
        for dt in weft.DTYPES:
            me.reductions(dt, COUNT)
            me.real_sum(dt)
            me.movement(dt, COUNT)
        for dt in (np.dtype(np.float32), np.dtype(np.float64)):
            me.reductions(dt, BIG)
            me.movement(dt, BIG)
        me.errors()
        me.others()
        me.split_and_mismatch()
        comm.close()
        if cfg.get("srun_root"):
            # Comms from Slurm's variables (set before the first), then from
            # rank and size with the root of WEFT_CORE_BOOTSTRAP_ROOT.
            with weft.Comm.from_env() as c2:
                me.equal("allreduce on a comm made from SLURM_PROCID/SLURM_NTASKS",
                         c2.allreduce(np.array([rank], np.int32)), np.array([size * (size - 1) // 2], np.int32))
            # One root address serves one comm at a time, and the last one's
            # root may still hold its port: a port of its own.
            os.environ["WEFT_CORE_BOOTSTRAP_ROOT"] = cfg["root_root"]
            with weft.Comm(None, rank, size) as c3:
                me.equal("allreduce on a comm made from WEFT_CORE_BOOTSTRAP_ROOT",
                         c3.allreduce(np.array([rank], np.int32)), np.array([size * (size - 1) // 2], np.int32))
        me.no_launcher()
        resq.put((rank, me.checks, me.failures))
    except BaseException:
        resq.put((rank, 0, ["%s rank %d raised:\n%s" % (cfg["name"], rank, traceback.format_exc())]))
        resq.close()
        resq.join_thread()  # the report is sent by a thread os._exit would not wait for
        # Exit without destroy: the peers see a dead rank at once, not a hang.
        os._exit(1)


def free_port_pair():
    """A port p with p and p + 1 free (torchrun's MASTER_PORT, and the
    MASTER_PORT + 1 that weft's root takes), below ip_local_port_range: a port
    from there could be taken by any connect() before the root binds it, as
    tests/testlib.c's wt_free_port says. Random, so tests beside this one
    rarely try the same."""
    lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    rng = random.Random(os.getpid() ^ time.time_ns())
    for _ in range(200):
        p = rng.randrange(10000, max(lo - 1, 10001))
        try:
            for q in (p, p + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", q))
            return p
        except OSError:
            continue
    raise RuntimeError("no two free ports in a row on 127.0.0.1 below %d" % lo)


def run_ranks(cfg, size):
    ctx = multiprocessing.get_context("fork")
    uidq, resq = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, size, cfg, uidq, resq)) for r in range(size)]
    t0 = time.monotonic()
    for p in procs:
        p.start()
    results, failures = {}, []
    while len(results) < size and time.monotonic() - t0 < DEADLINE:
        try:
            rank, checks, fails = resq.get(timeout=1)
            results[rank] = (checks, fails)
        except Exception:
            if all(not p.is_alive() for p in procs) and resq.empty():
                break
    for p in procs:
        p.join(timeout=max(1, DEADLINE - (time.monotonic() - t0)))
        if p.is_alive():
            p.kill()
            p.join()
            failures.append("rank %d still running after %d s: killed" % (procs.index(p), DEADLINE))
    for r in range(size):
        if r not in results:
            failures.append("rank %d reported nothing (exit code %s)" % (r, procs[r].exitcode))
    checks = sum(c for c, _ in results.values())
    for r in sorted(results):
        failures += ["rank %d: %s" % (r, f) for f in results[r][1]]
    return checks, failures, time.monotonic() - t0


# --------------------------------------------------------------- discovery
def discovery():
    """libweft.so is found through WEFT_LIB, else pkg-config, else the build
    trees (build/ first, then the newest build*), else the system loader."""
    fails = []
    real = os.environ["WEFT_LIB"]

    def which(env):
        out = subprocess.run([sys.executable, "-c", "import weft; print(weft.library_path())"],
                             env=env, capture_output=True, text=True)
        return out.returncode, out.stdout.strip(), out.stderr.strip()

    if weft.library_path() != real:
        fails.append("library_path() is %s, want WEFT_LIB's %s" % (weft.library_path(), real))
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, WEFT_LIB=os.path.join(tmp, "none.so"))
        rc, out, err = which(env)
        if rc == 0 or "WEFT_LIB" not in err:
            fails.append("a WEFT_LIB that does not exist: exit %d, stderr %r (want a failure naming WEFT_LIB)"
                         % (rc, err[-300:]))
        libdir = os.path.join(tmp, "prefix", "lib")
        os.makedirs(libdir)
        os.symlink(real, os.path.join(libdir, "libweft.so"))
        pcdir = os.path.join(tmp, "pc")
        os.makedirs(pcdir)
        with open(os.path.join(pcdir, "weft.pc"), "w") as f:
            f.write("prefix=%s\nlibdir=%s\n\nName: weft\nDescription: test\nVersion: 0.1.0\n"
                    "Libs: -L${libdir} -lweft\n" % (os.path.join(tmp, "prefix"), libdir))
        env = dict(os.environ, PKG_CONFIG_PATH=pcdir)
        env.pop("WEFT_LIB")
        rc, out, err = which(env)
        if rc != 0 or out != os.path.join(libdir, "libweft.so"):
            fails.append("pkg-config: loaded %r (exit %d, %s), want %s" % (out, rc, err[-300:], libdir))
        # Build trees of a checkout: build/ first, then the newest build*/.
        root = os.path.join(tmp, "checkout")
        for i, b in enumerate(("build-old", "build", "build-new")):
            d = os.path.join(root, b, "lib")
            os.makedirs(d)
            os.symlink(real, os.path.join(d, "libweft.so"))
            os.utime(os.path.join(d, "libweft.so"), (1e9 + i, 1e9 + i), follow_symlinks=False)
        from weft import _lib
        got = [os.path.relpath(p, root) for p in _lib._build_tree_libs(root)]
        want = ["build/lib/libweft.so", "build-new/lib/libweft.so", "build-old/lib/libweft.so"]
        if got != want:
            fails.append("build trees: %s, want %s" % (got, want))
    saved = os.environ.pop("WEFT_LIB")
    try:
        srcs = [s for s, _ in weft.candidates()]
    finally:
        os.environ["WEFT_LIB"] = saved
    if srcs[-1] != "system loader" or "WEFT_LIB" in srcs:
        fails.append("candidates without WEFT_LIB: %s" % srcs)
    return fails


def local_checks():
    """What needs no rank: names and the parsers of ops."""
    fails = []
    if not weft.__file__.startswith(sys.prefix):
        fails.append("weft is imported from %s, not from the venv %s" % (weft.__file__, sys.prefix))
    want = []
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "include", "weft", "weft.h")) as f:
        for line in f:
            for part in ("MAJOR", "MINOR", "PATCH"):
                if line.startswith("#define WEFT_VERSION_%s " % part):
                    want.append(int(line.split()[2]))
    if weft.version() != tuple(want):
        fails.append("version() %s, weft.h says %s" % (weft.version(), want))
    e = weft.WeftError(-22, "weft_x", "Invalid argument", "core: why")
    back = pickle.loads(pickle.dumps(e))
    got = (back.code, back.call, back.symbol, back.message, str(back))
    if got != (-22, "weft_x", "EINVAL", "core: why", str(e)):
        fails.append("WeftError through pickle: %r" % (back,))
    # A broken configuration: load() raises with weft_info_load_error's lines.
    out = subprocess.run([sys.executable, "-c", "import weft\ntry:\n weft.load()\nexcept weft.WeftError as e:\n"
                          " print(e.code, e.symbol, e.message)"],
                         env=dict(os.environ, WEFT_CORE_FIFO_DEPTH="abc"), capture_output=True, text=True)
    if not out.stdout.startswith("-%d WEFT_ERR_CONFIG " % weft.ERR_CONFIG) or \
            "WEFT_CORE_FIFO_DEPTH" not in out.stdout:
        fails.append("load() with WEFT_CORE_FIFO_DEPTH=abc: %r %r" % (out.stdout, out.stderr[-300:]))
    from weft import _arrays
    if _arrays.parse_op("MAX") is not weft.MAX or _arrays.parse_op(weft.AVG) is not weft.AVG:
        fails.append("parse_op of 'MAX' or weft.AVG")
    return fails


def shm_config(name, create, secret):
    """Ranks that may load shm and algo-host alone, and must."""
    return {"name": name, "create": create, "loaded": ("shm", "algo-host"), "excluded": ("ofi", "ucx"),
            "carrier": r"1\. shm ",
            "env": {"WEFT_CORE_BOOTSTRAP_ADDR": "127.0.0.1", "WEFT_CORE_PLUGINS": "shm,algo-host",
                    "WEFT_CORE_REQUIRE": "shm,algo-host", "WEFT_CORE_BOOTSTRAP_SECRET": secret}}


def main():
    np2 = shm_config("shm np=2 (unique id)", "unique id", "python-test-np2")
    np2["srun_root"] = "127.0.0.1:%d" % free_port_pair()
    np2["root_root"] = "127.0.0.1:%d" % free_port_pair()
    np3 = shm_config("shm np=3 (torchrun)", "torchrun", "python-test-np3")
    np3["env"].update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port_pair()))
    configs = [(2, np2), (3, np3)]
    # Over libfabric's tcp provider alone: shm is not even opened.
    if os.path.exists(os.path.join(os.path.dirname(os.environ["WEFT_LIB"]), "weft", "libweft-ofi.so")):
        tcp = {"name": "ofi tcp np=2 (mpirun)", "create": "mpirun", "loaded": ("ofi", "algo-host"),
               "excluded": ("shm", "ucx"), "carrier": r"1\. ofi .*\(tcp\)",
               "env": {"WEFT_CORE_BOOTSTRAP_ADDR": "127.0.0.1", "WEFT_CORE_PLUGINS": "ofi,algo-host",
                       "WEFT_CORE_REQUIRE": "ofi,algo-host", "WEFT_OFI_PROVIDER": "tcp",
                       "WEFT_CORE_BOOTSTRAP_ROOT": "127.0.0.1:%d" % free_port_pair(),
                       "WEFT_CORE_BOOTSTRAP_SECRET": "python-test-tcp"}}
        configs.append((2, tcp))
    else:
        print("# skipped: the ofi tcp ranks (no libweft-ofi.so beside %s)" % os.environ["WEFT_LIB"])
    failed = 0
    n = 0
    for name, fails in (("local", local_checks()), ("discovery", discovery())):
        n += 1
        print("%s %d %s" % ("not ok" if fails else "ok", n, name))
        for f in fails:
            print("#   " + f.replace("\n", "\n#   "))
        failed += bool(fails)
    for size, cfg in configs:
        n += 1
        checks, fails, secs = run_ranks(cfg, size)
        print("%s %d %s: %d checks, %.1f s" % ("not ok" if fails else "ok", n, cfg["name"], checks, secs))
        for f in fails[:40]:
            print("#   " + f.replace("\n", "\n#   "))
        if len(fails) > 40:
            print("#   ... and %d more" % (len(fails) - 40))
        failed += bool(fails)
    print("%d of %d failed" % (failed, n) if failed else "all %d passed" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    if not os.environ.get("WEFT_LIB"):
        sys.exit("test_numpy.py: set WEFT_LIB to the build's lib/libweft.so (tests/python.cmake does)")
    sys.stdout.reconfigure(line_buffering=True)
    sys.exit(main())
