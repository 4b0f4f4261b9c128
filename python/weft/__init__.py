# SPDX-License-Identifier: Apache-2.0
"""weft: Python bindings of libweft.so (ctypes; host and CUDA buffers).

    import numpy as np, weft
    with weft.Comm() as comm:            # rank and size from the launcher
        x = np.full(4, comm.rank, np.float32)
        comm.allreduce(x, out=x)         # in place; op="sum" by default
        y = comm.allgather(x)            # a new (size, 4) array

libweft.so is found through WEFT_LIB, then pkg-config (weft.pc's libdir), then
the build trees of the checkout the package came from (build/lib first, then
other build*/lib, newest first), then the system loader (weft.library_path()
says which). See python/README.md.
"""
from ._arrays import DTYPES, Op, premul_sum
from ._lib import WeftError, candidates, library_path
from .comm import SPLIT_NOCOLOR, UNIQUE_ID_BYTES, Comm, get_unique_id, group
from .info import (algorithm_choice, algorithms, config_path, load, param, params, params_text,
                   plugin_describe, plugins, search_path, topology, transport_choice, where)

SUM, PROD, MIN, MAX, AVG = Op.SUM, Op.PROD, Op.MIN, Op.MAX, Op.AVG

# weft.h's own error codes, as WeftError.code carries them (negated).
ERR_PLUGIN, ERR_ABI, ERR_CONFIG, ERR_PEER, ERR_ABORTED, ERR_PROTOCOL, ERR_AUTH, ERR_TRANSPORT, \
    ERR_NO_DEVICE, ERR_MISMATCH = range(256, 266)

__version__ = "0.1.0"


def version():
    """The loaded libweft.so's version as (major, minor, patch)."""
    from ._lib import lib
    v = lib().weft_get_version()
    return (v // 10000, v // 100 % 100, v % 100)


__all__ = [
    "Comm", "WeftError", "Op", "SUM", "PROD", "MIN", "MAX", "AVG", "premul_sum", "DTYPES", "group",
    "get_unique_id", "SPLIT_NOCOLOR", "UNIQUE_ID_BYTES", "library_path", "candidates", "version",
    "load", "plugins", "plugin_describe", "search_path", "config_path", "param", "params", "params_text",
    "algorithms", "transport_choice", "algorithm_choice", "topology", "where",
]
