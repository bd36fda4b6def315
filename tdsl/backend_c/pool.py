"""The thread pool parallel loops run on, shared by the host C and LLVM targets.

`pool.c` (read its comment for how it works) is compiled once with the C compiler
and cached like a kernel (`compile.compile_source`), then loaded once per process,
never to be unloaded, with its symbols global: host C kernels declare
`abi.PARALLEL_FOR` and the dynamic loader binds them to it; the LLVM target gives
the JIT its address (`address`). One pool serves every kernel of either target
and every thread of the process.

Threads per call: the calling thread's setting (`set_threads`, which
`td.set_num_threads` and `td.threads` use), else the process default: the
integer in OMP_NUM_THREADS when it holds one (as the benchmarks set it), else the
cores this process may run on. A call never runs more threads than it asks for,
and the pool's workers join it only while fewer threads than the machine's cores
run kernel work: threads that call kernels at once (a Dask worker's) share one
pool and do not multiply it.

Without a C compiler (or where the library cannot be built) there is no pool:
`load` returns None and the LLVM target runs parallel loops on the calling
thread (`serial_address`).
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

from ..errors import CompileError
from .compile import compile_source, default_cache_dir

SOURCE = Path(__file__).with_name("pool.c")
FLAGS = ("-O2", "-fPIC", "-shared", "-pthread")
MAX_THREADS = 256  # per call (pool.c)


class Pool:
    """The loaded pool: its library and the functions Python calls."""

    def __init__(self, path: str):
        self.path = path
        self.lib = ctypes.CDLL(path, mode=os.RTLD_GLOBAL | getattr(os, "RTLD_NODELETE", 0))
        self.lib.tdsl_configure.argtypes = [ctypes.c_int, ctypes.c_int]
        self.lib.tdsl_set_num_threads.argtypes = [ctypes.c_int]
        self.lib.tdsl_num_threads.restype = ctypes.c_int
        self.lib.tdsl_thread_setting.restype = ctypes.c_int
        self.lib.tdsl_pool_spread.argtypes = [ctypes.c_int]
        self.lib.tdsl_pool_spread.restype = ctypes.c_int
        self.lib.tdsl_pool_chunks.argtypes = [ctypes.c_int64, ctypes.c_int,
                                              ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]
        self.lib.tdsl_pool_chunks.restype = ctypes.c_int64
        self.lib.tdsl_configure(default_threads(), cores())

    def chunks(self, trips: int, threads: int) -> list[tuple[int, int]]:
        """The chunks [start, end) a parallel loop of `trips` iterations on `threads`
        threads is cut into, in the order threads take them (see pool.c)."""
        count = int(self.lib.tdsl_pool_chunks(trips, threads, None, 0))
        bounds = (ctypes.c_int64 * (2 * count))()
        self.lib.tdsl_pool_chunks(trips, threads, bounds, count)
        return [(bounds[2 * k], bounds[2 * k + 1]) for k in range(count)]

    def spread(self, others: int) -> int:
        """The check a worker makes before each chunk, made by the calling thread as if
        `others` more threads of the pool ran chunks on its CPU (see pool.c): it moves
        to a CPU where none does when its affinity allows one. The CPU it runs on
        afterwards; -1 where the pool does not count CPUs (not Linux)."""
        return int(self.lib.tdsl_pool_spread(others))

    @property
    def address(self) -> int:
        """The address of `tdsl_parallel_for`."""
        return int(ctypes.cast(self.lib.tdsl_parallel_for, ctypes.c_void_p).value or 0)

    def stats(self) -> dict[str, int]:
        """Workers started so far, loops run on the pool, (worker, loop) pairs in which a
        worker ran chunks, loops run serially for want of a free slot, and moves of a
        worker off a CPU where another thread of the pool was running a chunk."""
        out = (ctypes.c_int64 * 5)()
        self.lib.tdsl_pool_stats(out)
        return dict(zip(("workers", "loops", "helped", "serial", "moved"), out, strict=True))


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_threads() -> int:
    """Threads per call by default: OMP_NUM_THREADS's first integer if it has one, else
    `cores()`."""
    text = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if text.isdigit() and int(text) >= 1:
        return min(int(text), MAX_THREADS)
    return cores()


_lock = threading.Lock()
_pool: Pool | None = None
_tried = False
_why: str | None = None


def load() -> Pool | None:
    """The pool, built (once per machine and compiler, cached) and loaded (once per
    process); None when it cannot be built (see `unavailable`)."""
    global _pool, _tried, _why
    if _tried:
        return _pool
    with _lock:
        if not _tried:
            try:
                # beside the kernels, in a folder of its own
                _pool = Pool(compile_source(SOURCE.read_text(), FLAGS,
                                            cache_dir=default_cache_dir() / "pool"))
            except (CompileError, OSError) as e:
                _why = str(e).splitlines()[0] if str(e) else type(e).__name__
            _tried = True
    return _pool


def unavailable() -> str | None:
    """Why there is no pool (after `load` returned None), else None."""
    load()
    return _why


_local = threading.local()  # the setting of each thread while there is no pool


def set_threads(n: int | None) -> None:
    """Loops started by the calling thread use at most `n` threads (itself included);
    None: the process default (`default_threads`)."""
    pool = load()
    if pool is None:
        _local.n = n
        return
    pool.lib.tdsl_set_num_threads(0 if n is None else min(n, MAX_THREADS))


def setting() -> int | None:
    """The calling thread's setting (`set_threads`), None for the default."""
    pool = load()
    if pool is None:
        return getattr(_local, "n", None)
    return int(pool.lib.tdsl_thread_setting()) or None


def threads() -> int:
    """How many threads loops started by the calling thread may use."""
    pool = load()
    if pool is None:
        return 1
    return int(pool.lib.tdsl_num_threads())


# The serial stand-in for the LLVM target when there is no pool: the whole range at
# once, on the calling thread.
_TASK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)


@ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
def _serial_parallel_for(fn, env, lo, hi):
    return _TASK(fn)(lo, hi, env) if lo < hi else 0


def serial_address() -> int:
    """The address of a `tdsl_parallel_for` that runs the loop on the calling thread."""
    return int(ctypes.cast(_serial_parallel_for, ctypes.c_void_p).value or 0)
