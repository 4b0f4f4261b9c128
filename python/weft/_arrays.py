# SPDX-License-Identifier: Apache-2.0
# Host buffers as the C calls take them: numpy dtypes to weft datatypes,
# reduction names to weft operations, and the layout checks that must fail in
# Python, with a message, before a bad pointer or count reaches C.
import enum

import numpy as np

# enum weft_datatype (weft.h), by numpy's (kind, itemsize). numpy has no
# bfloat16 or fp8 dtype, so those weft types have no entry.
INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64 = range(10)
_DTYPES = {
    ("i", 1): INT8, ("u", 1): UINT8, ("i", 4): INT32, ("u", 4): UINT32,
    ("i", 8): INT64, ("u", 8): UINT64, ("f", 2): FLOAT16, ("f", 4): FLOAT32, ("f", 8): FLOAT64,
}
DTYPES = tuple(np.dtype(t) for t in ("int8", "uint8", "int32", "uint32", "int64", "uint64",
                                     "float16", "float32", "float64"))


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
    twins). The scalar is converted to the buffers' dtype at the call."""
    __slots__ = ("scalar",)

    def __init__(self, scalar):
        if isinstance(scalar, (bool, np.bool_)) or not isinstance(scalar, (int, float, np.integer, np.floating)):
            raise TypeError("premul_sum: the scalar must be a real number, not %s" % type(scalar).__name__)
        self.scalar = scalar

    def __repr__(self):
        return "premul_sum(%r)" % (self.scalar,)


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
    if isinstance(op, (int, np.integer)) and not isinstance(op, (bool, np.bool_)):
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


def scalar_bytes(p, dtype):
    """premul_sum's scalar as one element of dtype (a numpy array to pass by pointer)."""
    s = p.scalar
    if dtype.kind in "iu":
        if not float(s).is_integer():
            raise ValueError("premul_sum(%r): the buffers are %s, so the scalar must be a whole number"
                             % (s, dtype.name))
        info = np.iinfo(dtype)
        if not info.min <= int(s) <= info.max:
            raise ValueError("premul_sum(%r): outside %s's range %d..%d" % (s, dtype.name, info.min, info.max))
        return np.array([int(s)], dtype=dtype)
    return np.array([s], dtype=dtype)


def datatype(a, what):
    """weft's datatype for array a; TypeError when weft has none."""
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
    """A numpy view (no copy) of a host buffer: a numpy array or any object
    with __array_interface__. Device buffers are refused with TypeError."""
    if isinstance(obj, np.ndarray):
        return obj
    if hasattr(obj, "__array_interface__"):
        a = np.asarray(obj)
        if a.__array_interface__["data"][0] != obj.__array_interface__["data"][0]:
            raise ValueError("%s: numpy copied the buffer of %s, so weft would not write it"
                             % (what, type(obj).__name__))
        return a
    if hasattr(obj, "__cuda_array_interface__") or hasattr(obj, "__dlpack__"):
        raise TypeError("%s: %s is a device buffer; the Python package takes host buffers only "
                        "so far (python/README.md, 'Not yet')" % (what, type(obj).__name__))
    raise TypeError("%s: expected a numpy array or an object with __array_interface__, not %s"
                    % (what, type(obj).__name__))


def contiguous(a, what):
    if not a.flags.c_contiguous:
        raise ValueError("%s is not C-contiguous (strides %s): pass numpy.ascontiguousarray(...) "
                         "or a contiguous view" % (what, a.strides))


def writable(a, what):
    if not a.flags.writeable:
        raise ValueError("%s is read-only" % what)


def address(a):
    return a.__array_interface__["data"][0]


def overlaps(a, pa, b, pb):
    """Whether the bytes of a (at pa) and b (at pb) overlap."""
    return a.nbytes and b.nbytes and pa < pb + b.nbytes and pb < pa + a.nbytes
