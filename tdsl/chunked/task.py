"""What a dask task runs: the chunk kernel of a program, built once per process.

A `Program` is what the graph ships to the workers, once each (it is a key of the
graph that every chunk's task depends on): the algorithm, the schedule's JSON, the
target and the layout of the windows. `Program.kernel()` rebuilds the chunk pipeline
and its schedule from them and builds it the first time a process asks (lowering once
per process; the C backend's compile cache on disk means a machine compiles the C
source once), then serves every later chunk from a per-process cache.

Threads: each call runs its parallel loops on `Program.threads` threads, by default one:
dask runs chunks side by side (a worker of N threads runs N calls at once: N threads,
not N x cores; a threaded scheduler runs a call per core), as it runs numpy's and the
BLAS's native code (its workers set OMP_NUM_THREADS=1).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from ..compute.pipeline import Pipeline
from ..runtime import Kernel, threads
from .rewrite import Layout

_KERNELS: dict[str, Kernel] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True, eq=False)
class Program:
    """A chunk kernel as data: `kernel()` builds it (once per process)."""

    key: str
    pipeline: Pipeline
    schedule_json: str
    target: str
    layout: Layout
    threads: int | None = None

    def kernel(self) -> Kernel:
        """The built chunk kernel, from this process's cache when it has it."""
        hit = _KERNELS.get(self.key)
        if hit is not None:
            return hit
        with _LOCK:
            hit = _KERNELS.get(self.key)
            if hit is None:
                hit = _KERNELS[self.key] = build_chunk_kernel(
                    self.pipeline, self.schedule_json, self.target, self.layout)
        return hit

    def thread_count(self) -> int:
        """How many threads one call of the kernel runs its parallel loops on."""
        return 1 if self.threads is None else self.threads


def build_chunk_kernel(pipeline: Pipeline, schedule_json: str, target: str,
                       layout: Layout) -> Kernel:
    """The kernel of the chunk pipeline of `pipeline` (see `rewrite`), scheduled by the
    schedule `schedule_json` records."""
    from ..api import build
    from ..errors import ScheduleError
    from ..schedule import Schedule
    from .rewrite import chunk_pipeline

    outputs = chunk_pipeline(pipeline, layout)
    try:
        sched = Schedule.from_json(schedule_json, outputs)
    except ScheduleError as e:
        raise ScheduleError(
            f"the schedule does not apply to the kernel of one chunk, whose windowed dims have "
            f"symbolic extents (a chunk's size is known only when it runs): {e}") from None
    return build(sched, target=target)


def run_chunk(program: Program, sizes: dict[str, int], cuts: tuple, *windows: np.ndarray):
    """One chunk: the kernel on the input windows (in the pipeline's input order), with
    the window sizes; each output cut to the chunk's block (`cuts`, slices per output).
    A tuple of arrays when the pipeline has several outputs."""
    k = program.kernel()
    args = {t.name: np.ascontiguousarray(w) for t, w in zip(program.pipeline.inputs, windows)}
    with threads(program.thread_count()):
        out = k(**args, **sizes)
    outs = out if isinstance(out, tuple) else (out,)
    cut = tuple(np.ascontiguousarray(o[c]) for o, c in zip(outs, cuts))
    return cut if len(cut) > 1 else cut[0]


def run_partial(program: Program, sizes: dict[str, int], cuts: tuple, *windows: np.ndarray):
    """One chunk's partial result of a split reduction, with a leading axis of length 1
    (the axis the partials are combined over)."""
    return run_chunk(program, sizes, cuts, *windows)[None]


def assemble(pieces: list) -> np.ndarray:
    """A window from the pieces of the input blocks it overlaps (nested lists, one
    level per dim, as `np.block` takes them)."""
    while isinstance(pieces, list) and len(pieces) == 1:
        pieces = pieces[0]
    return pieces if isinstance(pieces, np.ndarray) else np.block(pieces)


def pick(value: tuple, k: int):
    """Output `k` of a chunk with several outputs."""
    return value[k]
