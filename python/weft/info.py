# SPDX-License-Identifier: Apache-2.0
# Introspection over include/weft/info.h: the plugins found and why any was
# rejected, the parameters with their values and sources, the algorithms of
# the loaded packs, and the choices of transport and algorithm.
import ctypes
import errno
import re
from collections import namedtuple

from . import _lib
from ._lib import check, lib

_MEM = {"host": 0, "cuda": 1, "hip": 2}
_STATES = ("loaded", "rejected", "shadowed", "excluded")
_KINDS = {0: None, 1: "transport", 2: "algorithm"}
COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv")


class _PluginC(ctypes.Structure):
    # struct weft_info_plugin; fields are only ever appended, so a newer
    # library's larger struct keeps these at the same offsets.
    _fields_ = [("size", ctypes.c_size_t), ("state", ctypes.c_int), ("kind", ctypes.c_int),
                ("name", ctypes.c_char_p), ("path", ctypes.c_char_p),
                ("abi_major", ctypes.c_uint), ("abi_minor", ctypes.c_uint), ("reason", ctypes.c_char_p)]


class _AlgoC(ctypes.Structure):
    # struct weft_info_algo, read the same way.
    _fields_ = [("size", ctypes.c_size_t), ("pack", ctypes.c_char_p), ("name", ctypes.c_char_p),
                ("coll", ctypes.c_int), ("min_bytes", ctypes.c_ulonglong), ("max_bytes", ctypes.c_ulonglong),
                ("max_peer_bytes", ctypes.c_ulonglong), ("min_ranks", ctypes.c_int), ("max_ranks", ctypes.c_int),
                ("mem_types", ctypes.c_uint), ("redops", ctypes.c_uint), ("priority", ctypes.c_int)]


Plugin = namedtuple("Plugin", "index state kind name path abi reason")
Algorithm = namedtuple("Algorithm", "pack name coll min_bytes max_bytes max_peer_bytes min_ranks max_ranks "
                                    "mem_types redops priority")
Param = namedtuple("Param", "section key value source origin invalid type owner help")


def _s(b):
    return b.decode(errors="replace") if b is not None else None


def _entries(fn, struct, call):
    """The array an info function fills, each entry read at the stride the
    library reports in its size field (it may be a newer, larger struct)."""
    n = check(fn(None, 0), call)
    if n == 0:
        return []
    probe = ctypes.create_string_buffer(4096)
    check(fn(probe, 1), call)
    stride = ctypes.c_size_t.from_buffer(probe).value
    if stride < ctypes.sizeof(struct):
        raise RuntimeError("%s: the library's entries have %d bytes, fewer than the %d of the header this "
                           "package was written for" % (call, stride, ctypes.sizeof(struct)))
    buf = ctypes.create_string_buffer(stride * n)
    n = min(n, check(fn(buf, n), call))
    return [struct.from_buffer(buf, i * stride) for i in range(n)], buf


def load():
    """weft_info_load: loads the configuration and scans the plugin search
    path (once per process). Raises WeftError when that fails, its message
    weft_info_load_error's lines, else weft_last_error's (the former holds
    the registry's problems only, not a parameter's bad value)."""
    L = lib()
    rc = L.weft_info_load()
    if rc < 0:
        err = _s(L.weft_info_load_error()) or _lib.last_error()
        raise _lib.WeftError(rc, "weft_info_load", _lib.strerror(rc), err)


def plugins():
    """Every plugin file the registry saw, in search order: Plugin(index,
    state 'loaded'|'rejected'|'shadowed'|'excluded', kind 'transport'|
    'algorithm'|None, name, path, abi (major, minor), reason)."""
    L = lib()
    got = _entries(L.weft_info_plugins, _PluginC, "weft_info_plugins")
    if not got:
        return []
    entries, _keep = got
    return [Plugin(i, _STATES[e.state] if 0 <= e.state < len(_STATES) else str(e.state), _KINDS.get(e.kind),
                   _s(e.name), _s(e.path), (e.abi_major, e.abi_minor), _s(e.reason))
            for i, e in enumerate(entries)]


def plugin_describe(index):
    """The describe line of loaded transport `index` (of plugins()), or None
    when it has none (-ENOSYS)."""
    L = lib()
    buf = ctypes.create_string_buffer(1024)
    rc = L.weft_info_plugin_describe(int(index), buf, len(buf))
    if rc == -errno.ENOSYS:  # no describe op, or not a loaded transport
        return None
    check(rc, "weft_info_plugin_describe")
    return _s(buf.value)


def search_path():
    """The plugin folders searched, in order."""
    L = lib()
    p = L.weft_info_search_path()
    if not p:
        raise MemoryError("weft_info_search_path")
    try:
        text = ctypes.string_at(p).decode(errors="replace")
    finally:
        _lib.free(p)
    return [d for d in text.split(":") if d]


def config_path():
    """The configuration file in use, or None."""
    return _s(lib().weft_info_config_path())


def param(section, key):
    """The value of a declared STRING parameter ('' when unset)."""
    L = lib()
    size = 256
    while True:
        buf = ctypes.create_string_buffer(size)
        rc = L.weft_info_param_string(section.encode(), key.encode(), buf, size)
        if rc == -errno.ENOSPC and size < (1 << 20):
            size *= 4
            continue
        check(rc, "weft_info_param_string")
        return _s(buf.value)


# weft_info_print_params' lines: "section.key = value  (source[; INVALID: why])",
# then "    help [TYPE, owner]".
_PARAM_LINE = re.compile(r"^([a-z0-9-]+)\.([a-z0-9_-]+) = (.*)  "
                         r"\((env \S+|file .+:\d+|default)(?:; INVALID: (.*))?\)$")
_HELP_LINE = re.compile(r"^    (.*) \[([A-Z]+), ([^\]]+)\]$")


def params_text():
    """weft-info -c's text: every parameter, then the rules in force."""
    return _lib.capture(lambda f: lib().weft_info_print_params(f))[1]


def params():
    """Every declared parameter: Param(section, key, value (None when unset),
    source 'default'|'env'|'file', origin (the variable, or file:line),
    invalid (why the value is refused, or None), type, owner, help)."""
    out = []
    lines = params_text().splitlines()
    for i, line in enumerate(lines):
        m = _PARAM_LINE.match(line)
        if not m:
            continue
        section, key, value, src, invalid = m.groups()
        kind, _, origin = src.partition(" ")
        h = _HELP_LINE.match(lines[i + 1]) if i + 1 < len(lines) else None
        out.append(Param(section, key, None if value == "(unset)" else value, kind, origin or None, invalid,
                         h.group(2) if h else None, h.group(3) if h else None, h.group(1) if h else None))
    return out


def algorithms():
    """Every algorithm of the loaded packs, as each declares itself."""
    L = lib()
    got = _entries(L.weft_info_algorithms, _AlgoC, "weft_info_algorithms")
    if not got:
        return []
    entries, _keep = got
    return [Algorithm(_s(e.pack), _s(e.name),
                      COLLECTIVES[e.coll] if 0 <= e.coll < len(COLLECTIVES) else e.coll,
                      e.min_bytes, e.max_bytes, e.max_peer_bytes, e.min_ranks, e.max_ranks,
                      e.mem_types, e.redops, e.priority) for e in entries]


def _mem(mem):
    if mem not in _MEM:
        raise ValueError("mem must be one of %s, not %r" % (", ".join(_MEM), mem))
    return _MEM[mem]


def transport_choice(comm=None, nranks=2, mem="host"):
    """Per peer class, the transports a connection would try, in order and
    why (the first half of weft-info --select). comm None: asked as a job of
    nranks would be. Raises WeftError with the text as message on failure."""
    L = lib()
    h = comm._handle() if comm is not None else None
    rc, text = _lib.capture(lambda f: L.weft_info_print_transport_choice(f, h, int(nranks), _mem(mem)))
    if rc < 0:
        raise _lib.WeftError(rc, "weft_info_print_transport_choice", _lib.strerror(rc), text.strip())
    return text


def algorithm_choice(nranks=2, mem="host", nhosts=1):
    """Per collective, the algorithm each message size would get (the
    second half of weft-info --select)."""
    L = lib()
    return _lib.capture(lambda f: L.weft_info_print_algorithm_choice_hosts(f, int(nranks), int(nhosts),
                                                                           _mem(mem)))[1]


def topology():
    """weft-info --topo's text: NUMA view, probed devices, NVLink state."""
    return _lib.capture(lambda f: lib().weft_info_print_topology(f))[1]


def where(pid):
    """What process pid (with [core] status_socket = 1) says of its
    communicators (weft-info --where)."""
    L = lib()
    rc, text = _lib.capture(lambda f: L.weft_info_where(int(pid), f))
    check(rc, "weft_info_where")
    return text
