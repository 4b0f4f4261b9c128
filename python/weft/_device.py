# SPDX-License-Identifier: Apache-2.0
# Buffers that are not numpy arrays: torch tensors (CPU and CUDA), objects with
# __cuda_array_interface__ (CuPy, Numba) and DLPack producers. Each becomes a
# Buf: pointer, element count, weft datatype and the CUDA stream its call is
# enqueued on. torch and cupy are never imported here: a tensor is recognised
# only when its module is already loaded.
import contextlib
import ctypes
import sys

# enum weft_datatype (weft.h).
INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64, FP8_E4M3, FP8_E5M2 = range(12)

_TORCH_DTYPES = {
    "torch.int8": INT8, "torch.uint8": UINT8, "torch.int32": INT32, "torch.uint32": UINT32,
    "torch.int64": INT64, "torch.uint64": UINT64, "torch.float16": FLOAT16, "torch.bfloat16": BFLOAT16,
    "torch.float32": FLOAT32, "torch.float64": FLOAT64, "torch.float8_e4m3fn": FP8_E4M3,
    "torch.float8_e5m2": FP8_E5M2,
}
# __cuda_array_interface__'s typestr kind and size (byte order aside).
_TYPESTR = {("i", 1): INT8, ("u", 1): UINT8, ("i", 4): INT32, ("u", 4): UINT32, ("i", 8): INT64,
            ("u", 8): UINT64, ("f", 2): FLOAT16, ("f", 4): FLOAT32, ("f", 8): FLOAT64}
# DLPack's (type code, bits): kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4.
_DLTYPES = {(0, 8): INT8, (1, 8): UINT8, (0, 32): INT32, (1, 32): UINT32, (0, 64): INT64, (1, 64): UINT64,
            (2, 16): FLOAT16, (4, 16): BFLOAT16, (2, 32): FLOAT32, (2, 64): FLOAT64}
NAMES = {INT8: "int8", UINT8: "uint8", INT32: "int32", UINT32: "uint32", INT64: "int64", UINT64: "uint64",
         FLOAT16: "float16", BFLOAT16: "bfloat16", FLOAT32: "float32", FLOAT64: "float64",
         FP8_E4M3: "float8_e4m3", FP8_E5M2: "float8_e5m2"}
_SIZES = {INT8: 1, UINT8: 1, INT32: 4, UINT32: 4, INT64: 8, UINT64: 8, FLOAT16: 2, BFLOAT16: 2,
          FLOAT32: 4, FLOAT64: 8, FP8_E4M3: 1, FP8_E5M2: 1}
# DLPack device types that are host memory (kDLCPU, kDLCUDAHost) and CUDA
# memory (kDLCUDA, kDLCUDAManaged).
_DL_HOST = (1, 3)
_DL_CUDA = (2, 13)
# The legacy default stream as a cudaStream_t (cudaStreamLegacy).
STREAM_LEGACY = 1


class Buf:
    """A buffer as the C calls see it. device is "cpu" or "cuda:N"; stream
    is the cudaStream_t (an int) a device call is enqueued on, None for host
    memory; obj is what the caller passed (returned as `out`)."""
    __slots__ = ("obj", "ptr", "shape", "size", "wtype", "itemsize", "contiguous", "strides", "writable",
                 "device", "stream", "lib", "keep")

    def __init__(self, obj, ptr, shape, wtype, contiguous, strides, writable, device, stream, lib, keep=None):
        self.obj, self.ptr, self.shape, self.wtype = obj, ptr, tuple(shape), wtype
        n = 1
        for d in self.shape:
            n *= int(d)
        self.size = n
        self.itemsize = _SIZES[wtype]
        self.contiguous, self.strides, self.writable = contiguous, strides, writable
        self.device, self.stream, self.lib, self.keep = device, stream, lib, keep

    @property
    def nbytes(self):
        return self.size * self.itemsize

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def dtype_name(self):
        return NAMES[self.wtype]

    def context(self):
        """The CUDA device current while a torch CUDA call is made."""
        if self.lib == "torch" and self.device.startswith("cuda"):
            return sys.modules["torch"].cuda.device(int(self.device[5:]))
        return contextlib.nullcontext()

    def new(self, shape):
        """An empty buffer of this one's kind, dtype and device."""
        if self.lib == "torch":
            torch = sys.modules["torch"]
            return torch.empty(shape, dtype=self.obj.dtype, device=self.obj.device)
        if self.lib == "cupy":
            cupy = sys.modules["cupy"]
            with cupy.cuda.Device(int(self.device[5:])):
                return cupy.empty(shape, dtype=self.obj.dtype)
        raise TypeError("out=None: weft cannot allocate a %s like %s; pass out="
                        % (self.device, type(self.obj).__name__))


def _is_torch(obj):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _from_torch(t, what):
    wtype = _TORCH_DTYPES.get(str(t.dtype))
    if wtype is None:
        raise TypeError("%s: torch dtype %s has no weft datatype (weft takes: %s)"
                        % (what, t.dtype, " ".join(sorted(_TORCH_DTYPES))))
    dev = t.device
    if dev.type == "cuda":
        torch = sys.modules["torch"]
        device = "cuda:%d" % dev.index
        stream = torch.cuda.current_stream(dev).cuda_stream
    elif dev.type == "cpu":
        device, stream = "cpu", None
    else:
        raise TypeError("%s: a tensor on %s; weft takes CPU and CUDA tensors" % (what, dev))
    return Buf(t, t.data_ptr(), t.shape, wtype, t.is_contiguous(), t.stride(), True, device, stream, "torch")


def _from_cai(obj, what):
    cai = obj.__cuda_array_interface__
    try:
        shape, typestr, (ptr, readonly) = cai["shape"], cai["typestr"], cai["data"]
    except (KeyError, TypeError, ValueError):
        raise TypeError("%s: %s's __cuda_array_interface__ lacks shape, typestr or data"
                        % (what, type(obj).__name__)) from None
    if cai.get("mask") is not None:
        raise TypeError("%s: a masked __cuda_array_interface__ is not a plain buffer" % what)
    if len(typestr) < 3 or typestr[0] not in "<>|=":
        raise TypeError("%s: __cuda_array_interface__ typestr %r is not understood" % (what, typestr))
    wtype = _TYPESTR.get((typestr[1], int(typestr[2:])))
    if wtype is None:
        raise TypeError("%s: typestr %r has no weft datatype" % (what, typestr))
    if typestr[0] == ">" and _SIZES[wtype] > 1:
        raise TypeError("%s: typestr %r is big-endian" % (what, typestr))
    strides = cai.get("strides")
    contiguous = strides is None or _c_strides(shape, strides, _SIZES[wtype])
    lib = "cupy" if type(obj).__module__.split(".")[0] == "cupy" else None
    # The stream the producer's data is ready on (version 3), else CuPy's
    # current stream; with neither, the legacy default stream, which waits for
    # the work of every blocking stream.
    stream = cai.get("stream")
    if stream is None and lib == "cupy":
        stream = sys.modules["cupy"].cuda.get_current_stream().ptr
    device = "cuda:%d" % _cuda_device_of(ptr) if ptr else "cuda:0"
    return Buf(obj, ptr or 0, shape, wtype, contiguous, strides, not readonly, device,
               STREAM_LEGACY if stream is None else int(stream), lib)


def _c_strides(shape, strides, itemsize):
    want = itemsize
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1 and s != want:
            return False
        want *= d
    return True


_cuda = None


def _cuda_device_of(ptr):
    """The CUDA device (ordinal) a device pointer belongs to, through the
    driver's pointer attributes; 0 when the driver cannot say."""
    global _cuda
    if _cuda is None:
        try:
            _cuda = ctypes.CDLL("libcuda.so.1")
        except OSError:
            _cuda = False
    if not _cuda:
        return 0
    ordinal = ctypes.c_int(0)
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
    if _cuda.cuPointerGetAttribute(ctypes.byref(ordinal), CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   ctypes.c_void_p(ptr)) != 0:
        return 0
    return ordinal.value


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


def _from_dlpack(obj, what):
    dev_type, dev_id = obj.__dlpack_device__()
    if dev_type in _DL_CUDA:
        # The producer makes the legacy default stream wait for its work; the
        # call is enqueued there too.
        capsule, stream, device = obj.__dlpack__(stream=STREAM_LEGACY), STREAM_LEGACY, "cuda:%d" % dev_id
    elif dev_type in _DL_HOST:
        capsule, stream, device = obj.__dlpack__(), None, "cpu"
    else:
        raise TypeError("%s: a DLPack buffer on device type %d; weft takes host and CUDA memory"
                        % (what, dev_type))
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    try:
        p = get(capsule, b"dltensor")
    except ValueError:
        raise TypeError("%s: %s's __dlpack__ gave no 'dltensor' capsule" % (what, type(obj).__name__)) from None
    # The capsule stays unconsumed and is kept with the Buf: its destructor
    # hands the tensor back to the producer once the call no longer needs it.
    t = _DLTensor.from_address(p)
    wtype = _DLTYPES.get((t.dtype.code, t.dtype.bits)) if t.dtype.lanes == 1 else None
    if wtype is None:
        raise TypeError("%s: DLPack dtype (code %d, %d bits, %d lanes) has no weft datatype"
                        % (what, t.dtype.code, t.dtype.bits, t.dtype.lanes))
    shape = [t.shape[i] for i in range(t.ndim)]
    strides = None
    if t.strides:
        strides = [t.strides[i] * _SIZES[wtype] for i in range(t.ndim)]
    contiguous = strides is None or _c_strides(shape, strides, _SIZES[wtype])
    return Buf(obj, (t.data or 0) + t.byte_offset, shape, wtype, contiguous, strides, True, device, stream,
               None, keep=capsule)


def as_buf(obj, what):
    """A Buf for a torch tensor, a __cuda_array_interface__ object or a DLPack
    producer; None for anything else."""
    if _is_torch(obj):
        return _from_torch(obj, what)
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cai(obj, what)
    if hasattr(obj, "__dlpack_device__") and hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj, what)
    return None
