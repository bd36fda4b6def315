"""The public entry points that tie the layers together: build, lower."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

from .compute.definitions import Stage
from .errors import ArgumentError, ScheduleError, VectorizationWarning
from .lower import LOOP_NEST, finish, ir, lower_schedule, vectors
from .runtime import Kernel
from .runtime.profile import set_builder
from .schedule import Schedule, schedule

if TYPE_CHECKING:
    from .backend_c.load import CModule
    from .backend_llvm.jit import LLVMModule

TARGETS = ("c", "llvm")


def as_schedule(s) -> Schedule:
    """`s` as a Schedule: a Schedule itself, or the default schedule of output stage(s)."""
    if isinstance(s, Schedule):
        return s
    if isinstance(s, Stage) or (isinstance(s, (tuple, list)) and s and all(
            isinstance(x, Stage) for x in s)):
        return schedule(s)
    from .schedule import Template

    if isinstance(s, Template):
        raise ScheduleError(
            f"this is a template with open knobs ({', '.join(s.knobs)}); make a schedule of it "
            "first with .instantiate(name=value, ...) (or td.tune it)")
    raise ScheduleError(f"expected a td.schedule(...) or output stage(s), got {s!r}")


def lower(s, name: str | None = None, trace: bool = False, stop_after: str | None = None):
    """The loop nest of a schedule (or of unscheduled output stages); print it to read it.

    With `trace=True`, every step of the compiler instead: the loop IR right after
    isl's loop generation (`convert`) and after each pass (place_binders, allocate,
    extents, simplify, unroll, ...), printed one after another, each unchanged step by
    name only; index it by a step's name (`td.lower(s, trace=True)["unroll"]`).

    `stop_after="partition"` (any step's name, `tdsl.lower.STEP_NAMES`) gives the IR
    after that step (the last step of that name) instead of the loop nest, which is
    the IR after `inbounds`; with `trace=True`, the steps up to it. Without it, a trace
    shows every step, through `outline`. A name that is no step's is an ArgumentError
    listing the valid ones."""
    if stop_after is None and not trace:
        stop_after = LOOP_NEST
    return lower_schedule(as_schedule(s), name, trace=trace, stop_after=stop_after)


def _build_module(target: str, final: ir.LoweredFunc) -> CModule | LLVMModule:
    """The backend module of finished loop IR for `target`."""
    if target == "c":
        from .backend_c import build as build_c

        return build_c(final)
    from .backend_llvm import build as build_llvm

    return build_llvm(final)


def _lowering_target(target: str) -> ir.Target:
    """What the late passes plan for when building for `target` ("c" or "llvm"): host C
    with 64-byte vectors (its compiler picks its own width), or LLVM with the host's
    vector registers."""
    if target == "c":
        return ir.HOST_C
    from .backend_llvm.host import host_vector_bytes

    return ir.Target("llvm", host_vector_bytes())


def _builder(target: str) -> Callable[[ir.LoweredFunc], CModule | LLVMModule]:
    def build_for(func: ir.LoweredFunc) -> CModule | LLVMModule:
        return _build_module(target, finish(func, profile=True,
                                            target=_lowering_target(target)))
    return build_for


for _target in TARGETS:  # Kernel.profile builds its instrumented kernel with these
    set_builder(_target, _builder(_target))


_BUILT: dict[tuple, tuple[ir.LoweredFunc, CModule | LLVMModule, vectors.VectorReport]] = {}
_BUILT_LIMIT = 256


def build(s, target: str = "c", name: str | None = None, *, verify: bool = True) -> Kernel:
    """Compile a schedule into a callable Kernel. target: "c" (default) or "llvm".

    Building the same schedule again in one process returns a kernel sharing the
    first one's compiled code (schedules are immutable values, and a schedule's value
    includes the updates its pipeline had when it was made).

    A vectorized loop that cannot run as vector code (an atomic update, a loop with
    bounds that differ between its lanes inside it, ...) is built as a plain loop,
    with a `td.VectorizationWarning` naming the stage, the loop and why;
    `kernel.vectorization` lists what became of every vectorized loop.

    `verify=False` checks the loop IR once, after the last pass, instead of after every
    pass: lowering takes about half the time. The tuner's trials, whose outputs are
    compared with the reference, build this way."""
    sched = as_schedule(s)
    if target not in TARGETS:
        raise ArgumentError(f"unknown target {target!r}; valid targets are {', '.join(TARGETS)}")
    sched._require_current()
    t0 = time.perf_counter()
    key = (sched, target, name)
    hit = _BUILT.get(key)
    if hit is None:
        # the loop nest the kernel shows
        func = lower_schedule(sched, name, each=verify, stop_after=LOOP_NEST)
        final = finish(func, each=verify, target=_lowering_target(target))
        module: CModule | LLVMModule = _build_module(target, final)
        if len(_BUILT) >= _BUILT_LIMIT:
            _BUILT.pop(next(iter(_BUILT)))
        hit = _BUILT[key] = (func, module, vectors.report(final))
    func, module, report = hit
    for loop in report.missed:
        warnings.warn(f"kernel {func.name}: {loop}", VectorizationWarning, stacklevel=2)
    return Kernel(sched, func, module, target, time.perf_counter() - t0, report)
