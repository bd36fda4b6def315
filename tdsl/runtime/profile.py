"""Kernel.profile: where a kernel's time goes, stage by stage and per parallel loop.

The kernel is built a second time with clock reads around each stage's loop nest and
each parallel loop (the `instrument` pass, `tdsl.lower.passes.profile`); the kernel a
program calls is never changed. The instrumented kernel runs on the same arguments;
its counters become a `Profile`: a table (and, in Jupyter, bars) of each stage's
exclusive time, what each parallel loop took from its start to its end, and how busy
its threads were.

Times inside a parallel loop are measured on each thread and summed (thread time);
the table scales them by the loop's wall time over its busy time, so the stages of
a parallel loop share its wall time in proportion to the time their threads spent,
and every row of the table is in the same unit: the kernel's wall time.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..display import escape, seconds_text
from ..lower import ir
from ..lower.passes.profile import SLOTS, Region, counters, plan

# target -> a function building a backend module with the profiling step from a loop nest
# (set by tdsl.api: the runtime sits beside the backends and does not import them)
_BUILDERS: dict[str, Callable[[ir.LoweredFunc], Any]] = {}


def set_builder(target: str, build: Callable[[ir.LoweredFunc], Any]) -> None:
    """Register how a target builds a loop nest (`lower.LOOP_NEST`; `build` runs the rest
    of the pipeline with its profiling step, planned for the target: `lower.finish(...,
    profile=True, target=...)`) into a module with `run(arrays, sizes)`."""
    _BUILDERS[target] = build


@dataclass(frozen=True)
class Row:
    """One line of a profile: a stage, a group of stages timed together, or a parallel
    loop (kind "parallel": `seconds` is its own overhead, `wall` its wall time from start
    to end, `busy` its threads' time over `threads` x `wall`)."""

    kind: str
    label: str
    depth: int
    seconds: float  # exclusive, per call, in the kernel's wall time
    calls: float  # entries per call
    wall: float | None = None
    busy: float | None = None


class Profile:
    """What `Kernel.profile` measured: `.rows` (a `Row` per stage, group of stages and
    parallel loop, in the kernel's order), `.total` (seconds per call of the instrumented
    kernel), `.plain` (seconds per call of the kernel itself, for the instrumentation's
    cost), `.by_stage()` ({stage: seconds}); `print(p)` shows the table, Jupyter shows
    it with bars, `.plot()` draws them with matplotlib."""

    def __init__(self, name: str, target: str, rows: list[Row], total: float, plain: float | None,
                 threads: int):
        self.name, self.target, self.rows = name, target, rows
        self.total, self.plain, self.threads = total, plain, threads

    def by_stage(self) -> dict[str, float]:
        """Exclusive seconds per call of each stage (or group of stages)."""
        out: dict[str, float] = {}
        for r in self.rows:
            if r.kind == "stage":
                out[r.label] = out.get(r.label, 0.0) + r.seconds
        return out

    def _lines(self) -> list[tuple[str, str, str, str, str]]:
        out = []
        for r in self.rows:
            share = r.seconds / self.total if self.total > 0 else 0.0
            name = "  " * r.depth + (f"parallel {r.label}" if r.kind == "parallel" else r.label)
            note = ""
            if r.kind == "parallel" and r.wall is not None and r.busy is not None:
                note = f"wall {seconds_text(r.wall)}, threads busy {r.busy:.0%}"
            elif r.kind == "kernel":
                note = "outside every stage"
            out.append((name, seconds_text(r.seconds), f"{share:.1%}", f"{r.calls:g}", note))
        return out

    def __str__(self) -> str:
        head = ("stage / loop", "time", "share", "calls", "")
        lines = [head, *self._lines()]
        widths = [max(len(x[i]) for x in lines) for i in range(5)]
        text = [f"profile of {self.name} ({self.target}): {seconds_text(self.total)} per call "
                f"instrumented" + (f", {seconds_text(self.plain)} without" if self.plain else "")]
        for line in lines:
            text.append("  ".join(c.ljust(w) if i in (0, 4) else c.rjust(w)
                                  for i, (c, w) in enumerate(zip(line, widths))).rstrip())
        return "\n".join(text)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        """A table with a bar per row (its share of the kernel's time)."""
        rows = []
        for r, (name, secs, share, calls, note) in zip(self.rows, self._lines()):
            frac = r.seconds / self.total if self.total > 0 else 0.0
            colour = "#e8a33d" if r.kind == "parallel" else "#4c78a8"
            bar = (f"<div style='background:{colour};height:0.8em;"
                   f"width:{max(0.0, min(1.0, frac)) * 12:.2f}em'></div>")
            rows.append(f"<tr><td style='text-align:left;white-space:pre'>{escape(name)}</td>"
                        f"<td>{escape(secs)}</td><td>{escape(share)}</td><td>{bar}</td>"
                        f"<td>{escape(calls)}</td><td style='text-align:left'>{escape(note)}</td>"
                        "</tr>")
        plain = f", {seconds_text(self.plain)} without" if self.plain else ""
        return (f"<div><b>profile</b> of {html.escape(self.name)} ({html.escape(self.target)}): "
                f"{seconds_text(self.total)} per call instrumented{plain}"
                "<table><tr><th style='text-align:left'>stage / loop</th><th>time</th>"
                "<th>share</th><th></th><th>calls</th><th></th></tr>"
                f"{''.join(rows)}</table></div>")

    def plot(self):
        """A matplotlib Figure: a horizontal bar per row, its exclusive milliseconds (not
        one of pyplot's figures: end a notebook cell with it to show it)."""
        from ..display import new_figure

        fig = new_figure((7, 0.4 * len(self.rows) + 1))
        ax = fig.add_subplot()
        labels = [("  " * r.depth) + (f"parallel {r.label}" if r.kind == "parallel" else r.label)
                  for r in self.rows]
        ax.barh(range(len(self.rows)), [r.seconds * 1e3 for r in self.rows],
                color=["tab:orange" if r.kind == "parallel" else "tab:blue" for r in self.rows])
        ax.set_yticks(range(len(self.rows)), labels)
        ax.invert_yaxis()
        ax.set_xlabel("ms per call (exclusive)")
        ax.set_title(f"profile of {self.name} ({self.target})")
        return fig


def _rows(regions: list[Region], c: np.ndarray, calls: int, threads: int) -> tuple[
        list[Row], float]:
    """The table's rows from the counters of `calls` calls (nanoseconds summed)."""
    n = len(regions)
    ns = [float(c[SLOTS * k]) / calls for k in range(n)]
    entries = [float(c[SLOTS * k + 1]) / calls for k in range(n)]
    busy = [float(c[SLOTS * k + 2]) / calls for k in range(n)]
    # the factor from a region's own unit to the kernel's wall time
    scale = [1.0] * n
    for k, r in enumerate(regions):
        if r.parent >= 0:
            p = regions[r.parent]
            if p.kind == "parallel":
                scale[k] = ns[r.parent] / busy[r.parent] if busy[r.parent] > 0 else 0.0
            else:
                scale[k] = scale[r.parent]
    inclusive = [ns[k] * scale[k] for k in range(n)]
    child_sum = [0.0] * n
    for k, r in enumerate(regions):
        if r.parent >= 0:
            child_sum[r.parent] += inclusive[k]
    depth = [0] * n
    for k, r in enumerate(regions):
        depth[k] = 0 if r.parent < 0 else depth[r.parent] + 1
    rows = []
    for k, r in enumerate(regions):
        # a parallel loop's own time: the part of its threads' time outside its stages
        own = max(0.0, inclusive[k] - child_sum[k]) * 1e-9
        if r.kind == "parallel":
            rows.append(Row("parallel", r.label, depth[k] - 1, own, entries[k],
                            inclusive[k] * 1e-9,
                            busy[k] / (threads * ns[k]) if ns[k] > 0 else None))
        else:
            rows.append(Row(r.kind, r.label if r.kind == "stage" else "(kernel)",
                            max(0, depth[k] - 1), own, entries[k]))
    return rows, ns[0] * 1e-9


def profile_kernel(kernel, arrays: dict[str, Any], runs: int) -> Profile:
    """See `Kernel.profile`."""
    build = _BUILDERS.get(kernel.target)
    if build is None:
        raise RuntimeError(f"no builder registered for target {kernel.target!r} (import tdsl)")
    cached = getattr(kernel, "_profiled", None)
    if cached is None:
        func = kernel.lowered  # the loop nest (lower.LOOP_NEST)
        # the target's builder runs the rest of the pipeline with its profiling step
        # (instrument), planned for the target
        cached = (plan(func), build(func))
        kernel._profiled = cached
    regions, module = cached
    buffers, sizes, _ = kernel._prepare(arrays)
    plain = kernel.benchmark(arrays, runs=runs, warmup=1).median
    samples = []
    for n in range(runs + 1):  # the first warms up (caches, pages, threads)
        c = np.zeros(counters(regions), np.int64)
        status = module.run([*buffers, c], sizes)
        if status:
            kernel._run(buffers, sizes)  # raises the kernel's own error
        if n:
            samples.append(c)
    # the call of median total time: one call's rows add up (a mean of noisy calls
    # would mix them)
    c = sorted(samples, key=lambda x: int(x[0]))[(len(samples) - 1) // 2]
    threads = _threads()
    rows, total = _rows(regions, c, 1, threads)
    return Profile(kernel.lowered.name, kernel.target, rows, total, plain, threads)


def _threads() -> int:
    from .threads import num_threads

    return max(1, num_threads())
