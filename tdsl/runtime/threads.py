"""How many threads parallel loops run on: `td.set_num_threads`, `td.num_threads`.

Both backends run parallel loops on libgomp (the C backend's OpenMP code, the LLVM
backend's calls into the same library), whose team size for the regions a thread
starts is that thread's `nthreads` setting. Setting it here therefore governs every
kernel, of either backend, called from this Python thread, `Kernel.benchmark`
included; other Python threads keep their own setting. Without libgomp, parallel
loops run serially and the setting is only remembered.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import ArgumentError

_DEFAULT: int | None = None  # libgomp's own setting, before any change
_remembered = 0  # the setting when libgomp is missing (0: its default)


def _gomp():
    for name in ("libgomp.so.1", ctypes.util.find_library("gomp")):
        if name:
            try:
                return ctypes.CDLL(name, mode=os.RTLD_GLOBAL)
            except OSError:
                continue
    return None


_LIB = _gomp()


def num_threads() -> int:
    """The number of threads parallel loops of kernels called from this Python thread
    run on (libgomp's team size: the machine's cores, or OMP_NUM_THREADS, unless
    `td.set_num_threads` changed it)."""
    if _LIB is None:
        return _remembered or 1
    return int(_LIB.omp_get_max_threads())


def set_num_threads(n: int | None) -> None:
    """Run the parallel loops of kernels called from this Python thread on `n` threads,
    from now on; `None` restores the default (the machine's cores, or OMP_NUM_THREADS).
    Both backends and `Kernel.benchmark` follow it.

        td.set_num_threads(1)     # e.g. on a machine other processes keep busy
        f.benchmark(A=a)          # timed on one thread
        td.set_num_threads(None)

    See `td.threads(n)` for a `with` block that restores the previous setting."""
    global _DEFAULT, _remembered
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ArgumentError(f"set_num_threads: the number of threads must be an int of at "
                            f"least 1, or None for the default; got {n!r}")
    if _LIB is None:
        _remembered = n or 0
        return
    if _DEFAULT is None:
        _DEFAULT = int(_LIB.omp_get_max_threads())
    _LIB.omp_set_num_threads(ctypes.c_int(_DEFAULT if n is None else n))


@contextmanager
def threads(n: int | None) -> Iterator[None]:
    """Inside the `with` block, parallel loops run on `n` threads (see
    `td.set_num_threads`); afterwards, on as many as before.

        with td.threads(1):
            t1 = f.benchmark(A=a).median
        t2 = f.benchmark(A=a).median   # the setting from before the block
    """
    before = num_threads()
    set_num_threads(n)
    try:
        yield
    finally:
        set_num_threads(before)
