"""Lowering: a schedule becomes a loop-IR function.

The whole compiler front to back. The analysis, on the polyhedral model:

    model    the polyhedral model: statements, isl domains, bands, buffer boxes
             (a producer stored above its compute loop slides its window: sliding)
    budget   unrolling within its limit (the isl analysis runs under an operation quota)
    tree     the flat isl schedule of every statement
    legality dependences (isl) kept by the schedule; parallel loops race-free
    ast      isl's AST of the schedule, read back and checked against it (ast_check)
    convert  the isl AST as loop IR (tdsl's own nodes, with the schedule's names;
             loops scheduled with reassociate=True marked)

then the loop-IR passes, in this order, each followed by `verify`:

    reassoc. loops marked reassociate accumulate into private partial results
    allocate every temp buffer allocated at its store loop, once per iteration, and
             given its storage: stack, heap, or the caller's workspace (`ir.Storage`)
    extents  every loop's max extent proven to bound its span (isl), widened where not
    simplify constant folding and index simplification
    unroll   unrolled loops become copies of their bodies
    simplify again, on the copies (their loop variables are constants now)
    unswitch full-tile tests of unrolled edge blocks hoisted out of invariant loops
    fold     loops of at most one iteration become bindings of their variable
    inbounds every access of every array proven inside it (isl), or an error

`td.lower(s)` shows the loop nest at this point. Then the late passes
(`LATE_PASSES`, run by `finish` when a target builds), which write it out for
the targets:

    flatten  every buffer access one row-major offset
    legalise numpy's operations (floor //, %, NaN-propagating float min/max, abs,
             float32 exp) written out in core operations the targets map one to one
    outline  every parallel loop a task of the thread pool: what its function
             receives, whether it may fail; parallel loops inside it made serial

and, planning for the function's target (`ir.Target`, `finish(..., target=)`), outside
the loops the targets run as vector code as a whole (`passes.simd_regions`):

    auto_simd  serial loops around a reduction whose iterations are independent marked
               to run as vector code (`For.auto_vector`); for host C, one of constant
               extent cut into whole vectors and the rest
    transpose  loop nests copying a block to its transpose made `TransposingCopy`s
    group      runs of vectorized loops of small-integer products made `GroupedProducts`
    stream     for host C, the stores of outputs stored nontemporal staged through the
               stack (`StreamedStores`)

Portable C (`td.emit_c`, lowered with `portable=True`) is for small cores built by
a compiler tdsl does not control, and its function says so (`LoweredFunc.portable`):
`convert` leaves inline reductions as loops (no unrolling the schedule did not ask
for), `partition` cuts every loop where a boundary view's test is decided by its
variable (not only loops around vectorized ones), and between legalise and outline it takes
`PORTABLE_PASSES`:

    dsp      with isa "armv7e-m": grouped int8/int16 products (the x86 path's
             grouped_products) on the Arm DSP extension's SMLAD, the plain form kept
             for compilers without it
    lanes    vectorized loops of at most 8 lanes over register-sized temps written
             out lane by lane (a small core's vector is its scalar registers)
    index32  index arithmetic in 32 bits where the sizes allow, the sizes that do
             not refused at entry

`lower_schedule(s, trace=True)` (`td.lower(s, trace=True)`) returns the IR after
convert and after each pass, as a `Trace`.

One more pass runs only for `Kernel.profile`, in a second build, on the loop nest
before the late passes (`PROFILE_PASSES`):

    instrument  clock reads around each stage's loop nest and each parallel loop,
                added into one more output (`passes.profile`)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Literal, overload

from ..compute.tensor import Stage
from ..schedule import Schedule
from ..schedule.schedule import set_legality_check
from . import ir
from .passes.allocate import place_allocations
from .passes.auto_simd import auto_simd
from .passes.dsp import use_dsp
from .passes.extents import prove_extents
from .passes.flatten import flatten
from .passes.fold_loops import fold_loops
from .passes.group import group_products
from .passes.inbounds import check_in_bounds
from .passes.index32 import narrow_indices
from .passes.lanes import write_lanes
from .passes.legalise import legalise
from .passes.outline import outline
from .passes.partition import partition
from .passes.profile import instrument
from .passes.reassociate import reassociate
from .passes.simplify import simplify
from .passes.stream import stream_stores
from .passes.transpose import transpose_copies
from .passes.unroll import unroll
from .passes.unswitch import unswitch
from .passes.verify import verify
from .poly import budget
from .poly.access import reads_remapped_stage, whole_axis_remaps
from .poly.budget import AnalysisLimitError, bounded, check_unrolling, isl_budget, step
from .poly.from_ast import convert
from .poly.legality import check_legality, check_schedule
from .poly.model import build_model
from .poly.tree import build_ast, schedule_vectors

set_legality_check(check_schedule)  # Schedule.check proves legality with this layer's model

Pass = Callable[[ir.LoweredFunc], ir.LoweredFunc]

PASSES: tuple[tuple[str, Pass], ...] = (
    ("extents", prove_extents),
    ("simplify", simplify),
    ("unroll", unroll),
    ("partition", partition),
    ("simplify", simplify),
    ("unswitch", unswitch),
    ("fold", fold_loops),
    ("inbounds", check_in_bounds),
)
# the passes that make loop IR what every target takes: after `inbounds` the loop nest
# is complete and is what `td.lower` shows; these write it out for the targets
LATE_PASSES: tuple[tuple[str, Pass], ...] = (
    ("flatten", flatten),
    ("legalise", legalise),
    ("outline", outline),
    ("auto_simd", auto_simd),
    ("transpose", transpose_copies),
    ("group", group_products),
    ("stream", stream_stores),
)
# between legalise and outline, for portable C (`lower_schedule(..., portable=True)`)
PORTABLE_PASSES: tuple[tuple[str, Pass], ...] = (
    ("dsp", use_dsp),
    ("lanes", write_lanes),
    ("index32", narrow_indices),
)


# the profiled build's own pass, before LATE_PASSES (Kernel.profile)
PROFILE_PASSES: tuple[tuple[str, Pass], ...] = (
    ("instrument", instrument),
)


def late_passes(portable: bool = False) -> tuple[tuple[str, Pass], ...]:
    """The passes after `PASSES`: `LATE_PASSES`, and for portable C `PORTABLE_PASSES`
    between legalise and outline (outline takes the names the loop bodies use in the
    end, after index32 has narrowed them)."""
    if not portable:
        return LATE_PASSES
    cut = [n for n, _ in LATE_PASSES].index("outline")
    return LATE_PASSES[:cut] + PORTABLE_PASSES + LATE_PASSES[cut:]


def finish(func: ir.LoweredFunc, check: bool = True, each: bool = True,
           target: ir.Target | None = None) -> ir.LoweredFunc:
    """`func` (lowered by `lower_schedule(..., late=False)`, or loop IR built by hand)
    through the late passes (`LATE_PASSES`: flatten, legalise, outline, then those that
    plan for the target): the IR a target takes, for `target` (`ir.Target`; by default
    the function's own, host C unless set).
    `check=False` skips the verifier after each pass (hand-built IR may leave out what
    lowering always provides, such as a vectorized loop's `max_extent`); `each=False`
    verifies only the result."""
    if target is not None:
        func = replace(func, target=target)
    for n, (_, run) in enumerate(LATE_PASSES):
        func = run(func)
        if check and (each or n == len(LATE_PASSES) - 1):
            verify(func)
    return func


class Trace:
    """The loop IR of one lowering after `convert` and after each pass, in order.

    Printing it shows each step whose IR differs from the step before (an unchanged
    step is listed by name); `trace[name]` is the IR after the last step of that name,
    `trace.final` the lowered function."""

    def __init__(self, steps: list[tuple[str, ir.LoweredFunc]]):
        self.steps = steps

    @property
    def final(self) -> ir.LoweredFunc:
        return self.steps[-1][1]

    def __getitem__(self, name: str) -> ir.LoweredFunc:
        for step_name, func in reversed(self.steps):
            if step_name == name:
                return func
        raise KeyError(f"no step named {name!r}; steps: {', '.join(n for n, _ in self.steps)}")

    def __iter__(self) -> Iterator[tuple[str, ir.LoweredFunc]]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def _repr_html_(self) -> str:
        """In Jupyter: one collapsible section per step, the last one that changed open."""
        from ..display import code_html, details

        changed = [n for n, (_, f) in enumerate(self.steps) if n == 0 or f != self.steps[n - 1][1]]
        parts = []
        for n, (step_name, func) in enumerate(self.steps):
            if n in changed:
                parts.append(details(f"after {step_name}", code_html(str(func), "nest"),
                                     n == changed[-1]))
            else:
                parts.append(details(f"after {step_name}: unchanged", "", False))
        return f"<div><b>lowering trace</b>, {len(self.steps)} steps{''.join(parts)}</div>"

    def __repr__(self) -> str:
        out, before = [], None
        for step_name, func in self.steps:
            if func == before:
                out.append(f"--- after {step_name}: unchanged")
            else:
                out.append(f"--- after {step_name}:\n{func}")
            before = func
        return "\n".join(out)


@overload
def lower_schedule(sched: Schedule, name: str | None = None, trace: Literal[False] = False,
                   workspace: bool = False, late: bool = True, each: bool = True,
                   portable: bool = False, isa: ir.Isa = "generic") -> ir.LoweredFunc: ...


@overload
def lower_schedule(sched: Schedule, name: str | None = None, *, trace: Literal[True],
                   workspace: bool = False, late: bool = True, each: bool = True,
                   portable: bool = False, isa: ir.Isa = "generic") -> Trace: ...


@overload
def lower_schedule(sched: Schedule, name: str | None = None, trace: bool = False,
                   workspace: bool = False, late: bool = True, each: bool = True,
                   portable: bool = False, isa: ir.Isa = "generic"
                   ) -> ir.LoweredFunc | Trace: ...


def lower_schedule(sched: Schedule, name: str | None = None, trace: bool = False,
                   workspace: bool = False, late: bool = True, each: bool = True,
                   portable: bool = False, isa: ir.Isa = "generic"
                   ) -> ir.LoweredFunc | Trace:
    """Lower a schedule to a verified loop-IR function named `name`, in a child process
    with a hard time limit (see `budget.bounded`); with `trace`, the `Trace` of every
    step instead. With `workspace`, every temp buffer lives in a workspace the caller
    passes in (for targets without a heap), not on the stack or the heap. With
    `late=False`, the loop nest before the late passes (what `td.lower` shows; `finish`
    completes it). `each=False` runs the verifier once, on the result, instead of after
    every pass (about half the time of lowering; for callers that check the kernel's
    outputs anyway, as the tuner's trials do). With `portable`, the function is for
    portable C (`td.emit_c`), which the passes take into account
    (`LoweredFunc.portable`), and, with `late`, `PORTABLE_PASSES` run after legalise,
    before outline; `isa` is the instruction set it may use (`ir.ISAS`)."""
    sched._require_current()
    name = name or f"tdsl_{sched.outputs[0].name}"
    what = f"the schedule of {', '.join(o.name for o in sched.outputs)}"
    passes = PASSES + late_passes(portable) if late else PASSES
    exprs = [x.expr if isinstance(x, Stage) else x.value for x in sched.pipeline.schedulables]
    if not reads_remapped_stage(exprs):
        steps = bounded(what, lambda: _lower(sched, name, what, trace, workspace, passes,
                                             each=each, portable=portable, isa=isa))
    else:
        # a stage read through a mirror or wrap view: where it is computed inside a loop,
        # its exact region is piecewise and can cost isl far more than a whole-axis one
        # (larger, recomputed more often); so the exact regions get a share of the
        # budget, and the whole axis the rest
        share = budget.EXACT_REGION_SHARE
        try:
            steps = bounded(what, lambda: _lower(
                sched, name, what, trace, workspace, passes,
                ops=int(budget.MAX_ISL_OPERATIONS * share), each=each, portable=portable,
                isa=isa),
                seconds=budget.MAX_ISL_SECONDS * share)
        except AnalysisLimitError:
            def coarse() -> list[tuple[str, ir.LoweredFunc]]:
                with whole_axis_remaps():
                    return _lower(sched, name, what, trace, workspace, passes, each=each,
                                  portable=portable, isa=isa)
            steps = bounded(what, coarse)
    return Trace(steps) if trace else steps[-1][1]


def _lower(sched: Schedule, name: str, what: str, keep: bool, workspace: bool,
           passes: tuple[tuple[str, Pass], ...], ops: int | None = None, each: bool = True,
           portable: bool = False, isa: ir.Isa = "generic"
           ) -> list[tuple[str, ir.LoweredFunc]]:
    """The steps of one lowering (only the last one unless `keep`), each step under
    `ops` isl operations (default: MAX_ISL_OPERATIONS), verified after each step (with
    `each`) or only at the end."""
    steps: list[tuple[str, ir.LoweredFunc]] = []
    with isl_budget(what, ops):
        with step("bounds inference"):
            model = build_model(sched)
        check_unrolling(model.statements)
        vectors = schedule_vectors(model)
        with step("the dependence analysis"):
            check_legality(model, vectors)
        with step("loop generation"):
            vectors = schedule_vectors(model, binders=True)
            ast = build_ast(model, vectors)
            func, temps = convert(model, ast, vectors, name, portable, isa)
            pending = frozenset(b.name for b, _, _ in temps)
            if each:
                func = verify(func, pending=pending, placed=False)
        steps.append(("convert", func))
        with step("the reassociate pass"):  # before allocate, which places its buffers
            func = reassociate(func)
            if each:
                func = verify(func, pending=pending, placed=False)
        steps.append(("reassociate", func))
        allocate: Pass = lambda f: place_allocations(f, temps, workspace)  # noqa: E731
        every = (("allocate", allocate), *passes)
        for n, (pass_name, run) in enumerate(every):
            with step(f"the {pass_name} pass"):
                func = run(func)
                if each or n == len(every) - 1:
                    func = verify(func)
            steps.append((pass_name, func))
            if not keep:
                del steps[:-1]
    return steps


__all__ = ["LATE_PASSES", "PASSES", "PORTABLE_PASSES", "PROFILE_PASSES", "Trace", "finish",
           "ir", "lower_schedule"]
