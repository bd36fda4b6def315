"""The native symbols generated code calls, made visible to the JIT.

- libm: `tanhf`/`tanh`, and `fmodf`, `expf`, ... that frem and the math
  intrinsics become;
- the C library's `aligned_alloc`/`free` for large temps, bound to the names
  `tdsl_aligned_alloc`/`tdsl_free` that LLVM's optimizer does not know (see
  codegen.py), and its `clock_gettime` as `tdsl_clock_gettime` (the clock of a
  profiled kernel);
- tdsl's thread pool, for PARALLEL loops: `abi.PARALLEL_FOR`, the same pool
  (`backend_c/pool.c`) the C target's kernels call, so a process using both
  targets has one pool of threads, not two competing ones. Where the pool cannot
  be built (no C compiler), a stand-in runs each parallel loop on the calling
  thread, correctly.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading

import llvmlite.binding as llvm

from ..backend_c.pool import load as load_pool
from ..backend_c.pool import serial_address
from ..lower.abi import PARALLEL_FOR

_lock = threading.Lock()
_parallel: bool | None = None


def load() -> bool:
    """Make libm, the heap and the thread pool visible to the JIT, once.

    Returns whether parallel loops really run in parallel (the pool was built).
    """
    global _parallel
    with _lock:
        if _parallel is None:
            _load_library("m", "libm.so.6")
            libc = ctypes.CDLL(None)
            for name in ("aligned_alloc", "free", "clock_gettime"):
                address = ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
                llvm.add_symbol(f"tdsl_{name}", address)
            threads = load_pool()
            llvm.add_symbol(PARALLEL_FOR, serial_address() if threads is None
                            else threads.address)
            _parallel = threads is not None
        return _parallel


def _load_library(short: str, soname: str) -> None:
    try:
        llvm.load_library_permanently(soname)
    except RuntimeError:
        path = ctypes.util.find_library(short)
        if path is None:
            raise
        llvm.load_library_permanently(path)
