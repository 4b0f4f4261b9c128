# SPDX-License-Identifier: Apache-2.0
# Finds and loads libweft.so, declares the C prototypes the package calls, and
# turns negative return codes into WeftError.
import ctypes
import ctypes.util
import errno
import glob
import os
import shutil
import subprocess
import threading

from ctypes import POINTER, c_char_p, c_int, c_long, c_size_t, c_void_p

_VOIDP = c_void_p
_INT = c_int
_SIZE = c_size_t

# (name, restype, argtypes) of every C function the package uses.
_PROTOS = [
    ("weft_strerror", c_char_p, [_INT]),
    ("weft_last_error", _SIZE, [c_char_p, _SIZE]),
    ("weft_get_version", _INT, []),
    ("weft_get_unique_id", _INT, [_VOIDP]),
    ("weft_comm_create", _INT, [_VOIDP, _INT, _INT, POINTER(c_void_p)]),
    ("weft_comm_create_from_env", _INT, [POINTER(c_void_p)]),
    ("weft_comm_split", _INT, [_VOIDP, _INT, _INT, POINTER(c_void_p)]),
    ("weft_comm_destroy", _INT, [_VOIDP]),
    ("weft_comm_abort", _INT, [_VOIDP]),
    ("weft_comm_rank", _INT, [_VOIDP]),
    ("weft_comm_size", _INT, [_VOIDP]),
    ("weft_comm_status", _INT, [_VOIDP]),
    ("weft_comm_barrier", _INT, [_VOIDP]),
    ("weft_datatype_size", _SIZE, [_INT]),
    ("weft_datatype_name", c_char_p, [_INT]),
    ("weft_redop_name", c_char_p, [_INT]),
    ("weft_allreduce", _INT, [_VOIDP, _VOIDP, _SIZE, _INT, _INT, _VOIDP, _VOIDP]),
    ("weft_allgather", _INT, [_VOIDP, _VOIDP, _SIZE, _INT, _VOIDP, _VOIDP]),
    ("weft_reduce_scatter", _INT, [_VOIDP, _VOIDP, _SIZE, _INT, _INT, _VOIDP, _VOIDP]),
    ("weft_broadcast", _INT, [_VOIDP, _VOIDP, _SIZE, _INT, _INT, _VOIDP, _VOIDP]),
    ("weft_reduce", _INT, [_VOIDP, _VOIDP, _SIZE, _INT, _INT, _INT, _VOIDP, _VOIDP]),
    ("weft_allreduce_premul", _INT, [_VOIDP, _VOIDP, _SIZE, _INT, _VOIDP, _INT, _VOIDP, _VOIDP]),
    ("weft_reduce_scatter_premul", _INT, [_VOIDP, _VOIDP, _SIZE, _INT, _VOIDP, _INT, _VOIDP, _VOIDP]),
    ("weft_reduce_premul", _INT, [_VOIDP, _VOIDP, _SIZE, _INT, _VOIDP, _INT, _INT, _VOIDP, _VOIDP]),
    ("weft_alltoall", _INT, [_VOIDP, _VOIDP, _SIZE, _INT, _VOIDP, _VOIDP]),
    ("weft_send", _INT, [_VOIDP, _SIZE, _INT, _INT, _VOIDP, _VOIDP]),
    ("weft_recv", _INT, [_VOIDP, _SIZE, _INT, _INT, _VOIDP, _VOIDP]),
    ("weft_group_start", _INT, []),
    ("weft_group_end", _INT, []),
    # include/weft/info.h
    ("weft_info_load", _INT, []),
    ("weft_info_load_error", c_char_p, []),
    ("weft_info_plugins", _INT, [_VOIDP, _INT]),
    ("weft_info_plugin_describe", _INT, [_INT, c_char_p, _SIZE]),
    ("weft_info_search_path", _VOIDP, []),
    ("weft_info_config_path", c_char_p, []),
    ("weft_info_param_string", _INT, [c_char_p, c_char_p, c_char_p, _SIZE]),
    ("weft_info_print_params", None, [_VOIDP]),
    ("weft_info_print_topology", None, [_VOIDP]),
    ("weft_info_print_transport_choice", _INT, [_VOIDP, _VOIDP, _INT, _INT]),
    ("weft_info_print_algorithm_choice", None, [_VOIDP, _INT, _INT]),
    ("weft_info_print_algorithm_choice_hosts", None, [_VOIDP, _INT, _INT, _INT]),
    ("weft_info_algorithms", _INT, [_VOIDP, _INT]),
    ("weft_info_where", _INT, [c_long, _VOIDP]),
    ("weft_info_last_algorithm", c_char_p, [_VOIDP]),
]

# weft.h's own codes, for WeftError.symbol.
_WEFT_CODES = {
    256: "WEFT_ERR_PLUGIN", 257: "WEFT_ERR_ABI", 258: "WEFT_ERR_CONFIG", 259: "WEFT_ERR_PEER",
    260: "WEFT_ERR_ABORTED", 261: "WEFT_ERR_PROTOCOL", 262: "WEFT_ERR_AUTH",
    263: "WEFT_ERR_TRANSPORT", 264: "WEFT_ERR_NO_DEVICE", 265: "WEFT_ERR_MISMATCH",
}


class WeftError(Exception):
    """A weft call returned a negative code.

    code: the return value (negative); symbol: its C name ("EINVAL",
    "WEFT_ERR_MISMATCH"); name: weft_strerror's text; message: what weft last
    logged as an error on this thread (weft_last_error), or None; call: the C
    function. weft_last_error is not cleared between calls, so for a failure
    that logged nothing, message is an older error of the same thread.
    """

    def __init__(self, code, call, name=None, message=None):
        self.code = code
        self.call = call
        self.symbol = _WEFT_CODES.get(-code) or errno.errorcode.get(-code, "?")
        self.name = name
        self.message = message
        text = "%s: %s (%s, %d)" % (call, name, self.symbol, code)
        if message:
            text += ": " + message
        super().__init__(text)

    def __reduce__(self):
        # Rebuilt from its fields, so it crosses multiprocessing's pickles.
        return (type(self), (self.code, self.call, self.name, self.message))


def _checkout_roots():
    """Checkouts whose build trees may hold libweft.so: the one this package
    is imported from, and the one it was installed from (setup.py records it)."""
    roots = []
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.isfile(os.path.join(here, "include", "weft", "weft.h")):
        roots.append(here)
    try:
        from ._checkout import CHECKOUT
    except ImportError:
        CHECKOUT = None
    if CHECKOUT and CHECKOUT not in roots:
        roots.append(CHECKOUT)
    return roots


def _build_tree_libs(root):
    # build/ is the tree the project's scripts make; other build*/ trees
    # follow, the most recently built first.
    found = []
    default = os.path.join(root, "build", "lib", "libweft.so")
    if os.path.isfile(default):
        found.append(default)
    others = [p for p in glob.glob(os.path.join(root, "build*", "lib", "libweft.so"))
              if p != default and os.path.isfile(p)]
    others.sort(key=lambda p: os.path.getmtime(p), reverse=True)
    return found + others


def _pkg_config_lib():
    exe = shutil.which("pkg-config")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--variable=libdir", "weft"], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    libdir = out.stdout.strip()
    if out.returncode != 0 or not libdir:
        return None
    path = os.path.join(libdir, "libweft.so")
    return path if os.path.isfile(path) else None


def candidates():
    """Where libweft.so is looked for, in order, as (source, path) pairs:
    WEFT_LIB; pkg-config's libdir of weft.pc; the build trees of the checkout;
    then the system loader's own search ("libweft.so")."""
    env = os.environ.get("WEFT_LIB")
    if env:
        # A path that was set is honoured or the load fails: never another library.
        return [("WEFT_LIB", env)]
    out = []
    pc = _pkg_config_lib()
    if pc:
        out.append(("pkg-config", pc))
    for root in _checkout_roots():
        out += [("build tree", p) for p in _build_tree_libs(root)]
    out.append(("system loader", ctypes.util.find_library("weft") or "libweft.so"))
    return out


_lock = threading.Lock()
_lib = None
_lib_path = None


def _declare(lib):
    for name, res, args in _PROTOS:
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


def lib():
    """The loaded libweft.so (ctypes.CDLL), loading it on first use."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for source, path in candidates():
            try:
                handle = ctypes.CDLL(path)
            except OSError as e:
                tried.append("%s %s: %s" % (source, path, e))
                if source == "WEFT_LIB":
                    break
                continue
            try:
                _declare(handle)
            except AttributeError as e:
                # An older libweft.so without a function this package calls.
                tried.append("%s %s: %s" % (source, path, e))
                if source == "WEFT_LIB":
                    break
                continue
            _lib, _lib_path = handle, path
            return _lib
        raise OSError("weft: cannot load libweft.so; tried:\n  " + "\n  ".join(tried))


def library_path():
    """The path libweft.so was loaded from (loading it if needed)."""
    lib()
    return _lib_path


def strerror(code):
    return lib().weft_strerror(code).decode(errors="replace")


def last_error():
    """weft_last_error of the calling thread, or None when it has had none."""
    L = lib()
    n = L.weft_last_error(None, 0)
    if n == 0:
        return None
    buf = ctypes.create_string_buffer(n + 1)
    L.weft_last_error(buf, n + 1)
    return buf.value.decode(errors="replace")


def check(rc, call):
    """Returns rc, or raises WeftError when it is negative."""
    if rc < 0:
        raise WeftError(rc, call, strerror(rc), last_error())
    return rc


# libc's open_memstream gives the info functions that print to a FILE * a
# buffer to print into.
_libc = None


def _libc_fns():
    global _libc
    if _libc is None:
        c = ctypes.CDLL(None, use_errno=True)
        c.open_memstream.restype = c_void_p
        c.open_memstream.argtypes = [POINTER(c_void_p), POINTER(c_size_t)]
        c.fclose.restype = c_int
        c.fclose.argtypes = [c_void_p]
        c.free.restype = None
        c.free.argtypes = [c_void_p]
        _libc = c
    return _libc


def free(ptr):
    _libc_fns().free(ptr)


def capture(fn):
    """Calls fn(FILE *) and returns (what it returned, the text it printed)."""
    c = _libc_fns()
    buf = c_void_p()
    size = c_size_t()
    f = c.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    if not f:
        e = ctypes.get_errno()
        raise OSError(e, "open_memstream: " + os.strerror(e))
    try:
        rc = fn(f)
    finally:
        c.fclose(f)
    try:
        text = ctypes.string_at(buf.value, size.value).decode(errors="replace") if buf.value else ""
    finally:
        c.free(buf)
    return rc, text
