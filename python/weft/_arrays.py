# SPDX-License-Identifier: Apache-2.0
# Buffers as the C calls take them: numpy dtypes to weft datatypes, reduction
# names to weft operations, and the layout checks that must fail in Python,
# with a message, before a bad pointer or count reaches C. Buffers other than
# numpy's (torch, CUDA arrays, DLPack) come from _device as Buf objects.
import ctypes
import enum
import struct

try:
    import numpy as np
except ImportError:
    # Without numpy the package still serves torch tensors, CUDA arrays and
    # DLPack (a torch-only Python); host arrays then need numpy.
    np = None

from ._device import Buf, as_buf

# enum weft_datatype (weft.h), by numpy's (kind, itemsize). numpy has no
# bfloat16 or fp8 dtype, so those weft types have no entry.
INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64 = range(10)
_DTYPES = {
    ("i", 1): INT8, ("u", 1): UINT8, ("i", 4): INT32, ("u", 4): UINT32,
    ("i", 8): INT64, ("u", 8): UINT64, ("f", 2): FLOAT16, ("f", 4): FLOAT32, ("f", 8): FLOAT64,
}
DTYPES = tuple(np.dtype(t) for t in ("int8", "uint8", "int32", "uint32", "int64", "uint64",
                                     "float16", "float32", "float64")) if np is not None else ()
# numpy's scalar types, or nothing to match without numpy.
_NP_BOOL = (np.bool_,) if np is not None else ()
_NP_INT = (np.integer,) if np is not None else ()
_NP_REAL = (np.integer, np.floating) if np is not None else ()


class Op(enum.IntEnum):
    """enum weft_redop (weft.h); PREMUL_SUM goes through premul_sum()."""
    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4


_PREMUL_SUM = 5
_OP_NAMES = {op.name.lower(): op for op in Op}


class premul_sum:
    """The pre-multiplied sum: each rank's input times that rank's scalar,
    rounded to the element type, then summed (weft_allreduce_premul and its
    twins). The scalar is a real number, converted to the buffers' dtype at
    the call, or a one-element buffer of the buffers' dtype and device (a
    CUDA scalar is read on the call's stream when the call runs)."""
    __slots__ = ("scalar",)

    def __init__(self, scalar):
        if isinstance(scalar, (bool,) + _NP_BOOL) or not (
                isinstance(scalar, (int, float) + _NP_REAL) or _is_buffer(scalar)):
            raise TypeError("premul_sum: the scalar must be a real number or a one-element buffer, not %s"
                            % type(scalar).__name__)
        self.scalar = scalar

    def __repr__(self):
        return "premul_sum(%r)" % (self.scalar,)


def _is_buffer(obj):
    return any(hasattr(obj, a) for a in (
        "__array_interface__", "__cuda_array_interface__", "__dlpack__"))


def parse_op(op):
    """Op, or a premul_sum; ValueError for an unknown name or value."""
    if isinstance(op, premul_sum):
        return op
    if isinstance(op, str):
        found = _OP_NAMES.get(op.lower())
        if found is None:
            hint = " needs its scalar: use weft.premul_sum(scalar)" if op.lower() == "premul_sum" else ""
            raise ValueError("unknown reduction %r%s (one of: %s, or weft.premul_sum(scalar))"
                             % (op, hint, ", ".join(_OP_NAMES)))
        return found
    if isinstance(op, (int,) + _NP_INT) and not isinstance(op, (bool,) + _NP_BOOL):
        if int(op) == _PREMUL_SUM:
            raise ValueError("reduction %d is the pre-multiplied sum, which needs its scalar: "
                             "use weft.premul_sum(scalar)" % int(op))
        try:
            return Op(int(op))
        except ValueError:
            raise ValueError("unknown reduction %d (one of: %s)" % (int(op), ", ".join(
                "%d %s" % (o.value, o.name.lower()) for o in Op))) from None
    raise TypeError("op must be a name such as 'sum', a weft.Op or weft.premul_sum(scalar), not %s"
                    % type(op).__name__)


def scalar_arg(p, a):
    """premul_sum p's scalar for buffers a: (object to keep alive, its
    address, its weft_mem_type: 0 host, 1 CUDA)."""
    s = p.scalar
    if _is_buffer(s):
        v = as_array(s, "premul_sum's scalar")
        if v.size != 1 or dtype_name(v) != dtype_name(a):
            raise ValueError("premul_sum: a scalar buffer holds one %s element (the buffers' dtype), "
                             "not %d of %s" % (dtype_name(a), v.size, dtype_name(v)))
        if device(v) != "cpu" and device(v) != device(a):
            raise ValueError("premul_sum: the scalar is on %s but the buffers on %s" % (device(v), device(a)))
        return v, address(v), 0 if device(v) == "cpu" else 1
    name = dtype_name(a)
    if name.startswith("float8"):
        raise TypeError("premul_sum: pass a %s scalar as a one-element buffer of that dtype" % name)
    if name in _INT_FORMATS:
        fmt, bits, signed = _INT_FORMATS[name]
        if not float(s).is_integer():
            raise ValueError("premul_sum(%r): the buffers are %s, so the scalar must be a whole number"
                             % (s, name))
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        if not lo <= int(s) <= hi:
            raise ValueError("premul_sum(%r): outside %s's range %d..%d" % (s, name, lo, hi))
        raw = struct.pack("=" + fmt, int(s))
    elif name == "bfloat16":
        # The top half of the float32, rounded to nearest even.
        f = struct.unpack("=I", struct.pack("=f", float(s)))[0]
        raw = struct.pack("=H", ((f + 0x7FFF + ((f >> 16) & 1)) >> 16) & 0xFFFF)
    else:
        raw = struct.pack("=" + {"float16": "e", "float32": "f", "float64": "d"}[name], float(s))
    b = ctypes.create_string_buffer(raw, len(raw))
    return b, ctypes.addressof(b), 0


_INT_FORMATS = {"int8": ("b", 8, True), "uint8": ("B", 8, False), "int32": ("i", 32, True),
                "uint32": ("I", 32, False), "int64": ("q", 64, True), "uint64": ("Q", 64, False)}


def datatype(a, what):
    """weft's datatype for array a; TypeError when weft has none."""
    if isinstance(a, Buf):
        return a.wtype
    dt = a.dtype
    code = _DTYPES.get((dt.kind, dt.itemsize))
    if code is None:
        raise TypeError("%s: dtype %s has no weft datatype (weft takes: %s)"
                        % (what, dt, " ".join(d.name for d in DTYPES)))
    if not dt.isnative:
        raise TypeError("%s: dtype %s is not in this machine's byte order: "
                        "pass a.astype(a.dtype.newbyteorder('='))" % (what, dt.str))
    return code


def as_array(obj, what):
    """A view (no copy) of a buffer: a numpy array for numpy arrays and
    objects with __array_interface__; a Buf for torch tensors, objects with
    __cuda_array_interface__ and DLPack producers."""
    if np is not None and isinstance(obj, np.ndarray):
        return obj
    buf = as_buf(obj, what)
    if buf is not None:
        return buf
    if hasattr(obj, "__array_interface__"):
        if np is None:
            raise TypeError("%s: a host array (%s) needs numpy, which this Python lacks"
                            % (what, type(obj).__name__))
        a = np.asarray(obj)
        if a.__array_interface__["data"][0] != obj.__array_interface__["data"][0]:
            raise ValueError("%s: numpy copied the buffer of %s, so weft would not write it"
                             % (what, type(obj).__name__))
        return a
    raise TypeError("%s: expected a numpy array, a torch tensor, or an object with __array_interface__, "
                    "__cuda_array_interface__ or DLPack, not %s" % (what, type(obj).__name__))


def dtype_name(a):
    return a.dtype_name if isinstance(a, Buf) else a.dtype.name


def device(a):
    """"cpu" for host memory, "cuda:N" for a CUDA device's."""
    return a.device if isinstance(a, Buf) else "cpu"


def stream(a):
    """The cudaStream_t (an int) a call on a is enqueued on; None for host memory."""
    return a.stream if isinstance(a, Buf) else None


def empty(a, shape):
    """A new buffer of a's kind, dtype and device: (what to return, its view)."""
    if isinstance(a, Buf):
        obj = a.new(shape)
        return obj, as_array(obj, "out")
    r = np.empty(shape, a.dtype)
    return r, r


def contiguous(a, what):
    if isinstance(a, Buf):
        if not a.contiguous:
            raise ValueError("%s is not contiguous (strides %s): pass a contiguous copy" % (what, a.strides))
        return
    if not a.flags.c_contiguous:
        raise ValueError("%s is not C-contiguous (strides %s): pass numpy.ascontiguousarray(...) "
                         "or a contiguous view" % (what, a.strides))


def writable(a, what):
    if not (a.writable if isinstance(a, Buf) else a.flags.writeable):
        raise ValueError("%s is read-only" % what)


def address(a):
    return a.ptr if isinstance(a, Buf) else a.__array_interface__["data"][0]


def overlaps(a, pa, b, pb):
    """Whether the bytes of a (at pa) and b (at pb) overlap."""
    return a.nbytes and b.nbytes and pa < pb + b.nbytes and pb < pa + a.nbytes
