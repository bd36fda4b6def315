"""How many threads parallel loops run on: `td.set_num_threads`, `td.num_threads`.

Both targets run parallel loops on tdsl's thread pool (`backend_c/pool.c`), one per
process. A call of a kernel from a thread uses at most that thread's setting, the
calling thread included: `td.set_num_threads(n)` sets it for the Python thread that
calls it (other Python threads keep their own), `with td.threads(n):` for a block;
without a setting, the process default: the cores this process may run on (or
OMP_NUM_THREADS, when it holds a number).

The pool's workers join a call only while fewer threads than the machine has cores
run kernel work. So in a Dask worker with N threads (or any N Python threads) that
call kernels at once, each call runs on its own thread plus whichever workers are
free, and the process never runs more than max(N, cores) threads of kernel work, nor
holds more than cores - 1 (or the largest setting - 1) pool threads: not N x cores.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..backend_c.pool import set_threads, setting
from ..backend_c.pool import threads as pool_threads
from ..errors import ArgumentError


def num_threads() -> int:
    """The number of threads parallel loops of kernels called from this Python thread
    may run on, itself included (the machine's cores, or OMP_NUM_THREADS, unless
    `td.set_num_threads` changed it; 1 where the thread pool cannot be built).
    Fewer run when other threads' calls keep the cores busy."""
    return pool_threads()


def set_num_threads(n: int | None) -> None:
    """Run the parallel loops of kernels called from this Python thread on at most `n`
    threads (this one included), from now on; `None` restores the default (the
    machine's cores, or OMP_NUM_THREADS). Both targets and `Kernel.benchmark` follow
    it; other Python threads keep their own setting.

        td.set_num_threads(1)     # e.g. on a machine other processes keep busy
        f.benchmark(A=a)          # timed on one thread
        td.set_num_threads(None)

    See `td.threads(n)` for a `with` block that restores the previous setting."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ArgumentError(f"set_num_threads: the number of threads must be an int of at "
                            f"least 1, or None for the default; got {n!r}")
    set_threads(n)


@contextmanager
def threads(n: int | None) -> Iterator[None]:
    """Inside the `with` block, parallel loops of kernels called from this Python thread
    run on at most `n` threads (see `td.set_num_threads`); afterwards, on as many as
    before.

        with td.threads(1):
            t1 = f.benchmark(A=a).median
        t2 = f.benchmark(A=a).median   # the setting from before the block
    """
    before = setting()
    set_num_threads(n)
    try:
        yield
    finally:
        set_threads(before)
