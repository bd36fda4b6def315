"""The native symbols generated code calls, made visible to the JIT.

- libm: `tanhf`/`tanh`, and `fmodf`, `expf`, ... that frem and the math
  intrinsics become;
- the C library's `aligned_alloc`/`free` for large temps, bound to the names
  `tdsl_aligned_alloc`/`tdsl_free` that LLVM's optimizer does not know (see
  codegen.py), and its `clock_gettime` as `tdsl_clock_gettime` (the clock of a
  profiled kernel);
- libgomp, for PARALLEL loops: `GOMP_parallel(fn, data, num_threads, flags)`
  and `omp_get_num_threads`.

Parallel loops run on libgomp rather than on a thread pool of our own:
libgomp is already the runtime of the C backend's OpenMP code, so a process
using both backends has one pool of threads instead of two competing ones; it
honours OMP_NUM_THREADS (passing num_threads = 0 asks for its default), and
it already handles nested regions, concurrent callers and fork. A pool of our
own would need all of that, plus a compiler at run time. If libgomp cannot be
loaded, serial stand-ins are registered instead, so parallel loops still run,
correctly, on the calling thread.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading

import llvmlite.binding as llvm

_lock = threading.Lock()
_parallel: bool | None = None
_keep_alive: list = []  # ctypes callbacks registered with the JIT


def load() -> bool:
    """Make libm, the heap and the parallel runtime visible to the JIT, once.

    Returns whether parallel loops really run in parallel (libgomp found).
    """
    global _parallel
    with _lock:
        if _parallel is None:
            _load_library("m", "libm.so.6")
            libc = ctypes.CDLL(None)
            for name in ("aligned_alloc", "free", "clock_gettime"):
                address = ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
                llvm.add_symbol(f"tdsl_{name}", address)
            try:
                _load_library("gomp", "libgomp.so.1")
                _parallel = True
            except RuntimeError:
                _register_serial_runtime()
                _parallel = False
        return _parallel


def _load_library(short: str, soname: str) -> None:
    try:
        llvm.load_library_permanently(soname)
    except RuntimeError:
        path = ctypes.util.find_library(short)
        if path is None:
            raise
        llvm.load_library_permanently(path)


_REGION = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint)
def _serial_parallel(fn, data, num_threads, flags):
    _REGION(fn)(data)


def _register_serial_runtime() -> None:
    num_threads = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 1)
    _keep_alive.append(num_threads)
    for name, fn in (
        ("GOMP_parallel", _serial_parallel),
        ("omp_get_num_threads", num_threads),
    ):
        llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)
