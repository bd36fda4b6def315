"""Lowering: a schedule becomes a loop-IR function.

The whole compiler front to back. The analysis, on the polyhedral model:

    model    the polyhedral model: statements, isl domains, bands, buffer boxes
             (a producer stored above its compute loop slides its window: sliding)
    budget   unrolling within its limit (the isl analysis runs under an operation quota)
    tree     the flat isl schedule of every statement
    legality dependences (isl) kept by the schedule; parallel loops race-free

then `PIPELINE`, the steps from isl's AST to the IR a target takes, in this order,
each followed by `verify` (from place_binders on):

    convert       isl's AST (`poly.tree.build_ast`, checked against the schedule:
                  ast_check) as loop IR, with the schedule's names; loops scheduled
                  with reassociate=True marked; each block binder an `ir.Binder`
    place_binders  every binder lets of its block's bounds around their uses
    reassociate   loops marked reassociate accumulate into private partial results
    allocate      every temp buffer allocated at its store loop, once per iteration,
                  and given its storage: stack, heap, or the caller's workspace
    extents       every loop's max extent proven to bound its span (isl), widened
                  where not
    simplify      constant folding and index simplification
    unroll        unrolled loops become copies of their bodies
    partition     loops cut where a boundary view's test is decided by their variable
    simplify      again, on the copies (their loop variables are constants now)
    unswitch      full-tile tests of unrolled edge blocks hoisted out of invariant loops
    fold          loops of at most one iteration become bindings of their variable
    inbounds      every access of every array proven inside it (isl), or an error

`td.lower(s)` shows the loop nest at this point (`LOOP_NEST`); the steps after it
write it out for the targets (`finish` runs them on a loop nest):

    instrument    (profiling only: `Kernel.profile`'s second build) clock reads around
                  each stage's loop nest and each parallel loop, added into one more
                  output (`passes.profile`)
    flatten       every buffer access one row-major offset
    narrow        float16 and bfloat16 computed in float32, only moved as 16 bits
    legalise      numpy's operations (floor //, %, NaN-propagating float min/max, abs,
                  float32 exp, shifts, fixed point) written out in core operations
                  the targets map one to one
    dsp           (portable C only) with isa "armv7e-m": grouped int8/int16 products
                  on the Arm DSP extension's SMLAD, the plain form kept for
                  compilers without it
    lanes         (portable C only) vectorized loops of at most 8 lanes over
                  register-sized temps written out lane by lane
    index32       (portable C only) index arithmetic in 32 bits where the sizes allow,
                  the sizes that do not refused at entry
    outline       every parallel loop a task of the thread pool: what its function
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
variable (not only loops around vectorized ones), and the portable-only steps run.

`lower_schedule(s, trace=True)` (`td.lower(s, trace=True)`) returns the IR after
each step that ran, as a `Trace`; `stop_after=NAME` stops after the step NAME.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Literal, overload

from ..compute.tensor import Stage
from ..errors import ArgumentError
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
from .passes.narrow import narrow
from .passes.outline import outline
from .passes.partition import partition
from .passes.place_binders import place_binders
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
from .poly.model import Model, build_model
from .poly.tree import build_ast, schedule_vectors
from .trace import Trace

set_legality_check(check_schedule)  # Schedule.check proves legality with this layer's model

Pass = Callable[[ir.LoweredFunc], ir.LoweredFunc]
# a temp buffer convert leaves to the allocate step: the loop variables around its store
# level, and whether it holds a sliding window
Temp = tuple[ir.Buffer, tuple[str, ...], bool]


@dataclass
class Lowering:
    """What the steps of one lowering share: its options, the polyhedral model the
    convert step reads, the temp buffers convert leaves to allocate, and the function
    so far (`func`)."""

    name: str
    workspace: bool = False
    portable: bool = False
    isa: ir.Isa = "generic"
    profile: bool = False
    model: Model | None = None
    temps: list[Temp] = field(default_factory=list)
    func: ir.LoweredFunc | None = None

    def current(self) -> ir.LoweredFunc:
        """The function the steps so far made."""
        assert self.func is not None, "no step has made the function yet (convert is first)"
        return self.func


# how a step's result is verified: not at all (convert's binders are not loop IR yet),
# with the temp buffers still unplaced (before allocate), or in full
Verified = Literal["no", "unplaced", "yes"]


@dataclass(frozen=True)
class Step:
    """One step of `PIPELINE`: `run` makes the function from the lowering so far.
    `only` says when it applies: always (None), for portable C only ("portable"), or in
    the profiled build only ("profile")."""

    name: str
    run: Callable[[Lowering], ir.LoweredFunc]
    only: Literal["portable", "profile"] | None = None
    verified: Verified = "yes"

    def applies(self, portable: bool, profile: bool) -> bool:
        """Whether the step runs in a lowering with these options."""
        return (self.only is None or (self.only == "portable" and portable)
                or (self.only == "profile" and profile))


def _convert(lowering: Lowering) -> ir.LoweredFunc:
    """isl's AST of the model's schedule as loop IR (`poly.from_ast.convert`)."""
    model = lowering.model
    assert model is not None, "convert reads the polyhedral model (lower_schedule builds it)"
    vectors = schedule_vectors(model, binders=True)
    ast = build_ast(model, vectors)
    func, lowering.temps = convert(model, ast, vectors, lowering.name, lowering.portable,
                                   lowering.isa)
    return func


def _allocate(lowering: Lowering) -> ir.LoweredFunc:
    return place_allocations(lowering.current(), lowering.temps, lowering.workspace)


def _on_func(name: str, run: Pass, only: Literal["portable", "profile"] | None = None,
             verified: Verified = "yes") -> Step:
    """A step that is a pass on the function alone."""
    return Step(name, lambda lowering: run(lowering.current()), only, verified)


PIPELINE: tuple[Step, ...] = (
    Step("convert", _convert, verified="no"),
    _on_func("place_binders", place_binders, verified="unplaced"),
    _on_func("reassociate", reassociate, verified="unplaced"),  # before allocate: it
    Step("allocate", _allocate),                                # places its buffers
    _on_func("extents", prove_extents),
    _on_func("simplify", simplify),
    _on_func("unroll", unroll),
    _on_func("partition", partition),
    _on_func("simplify", simplify),
    _on_func("unswitch", unswitch),
    _on_func("fold", fold_loops),
    _on_func("inbounds", check_in_bounds),
    _on_func("instrument", instrument, only="profile"),
    _on_func("flatten", flatten),
    _on_func("narrow", narrow),
    _on_func("legalise", legalise),
    _on_func("dsp", use_dsp, only="portable"),
    _on_func("lanes", write_lanes, only="portable"),
    _on_func("index32", narrow_indices, only="portable"),  # before outline, which takes
    _on_func("outline", outline),                          # the names bodies end up with
    # planning for the function's target (`ir.Target`), outside simd regions
    _on_func("auto_simd", auto_simd),
    _on_func("transpose", transpose_copies),
    _on_func("group", group_products),
    _on_func("stream", stream_stores),
)
STEP_NAMES: tuple[str, ...] = tuple(dict.fromkeys(s.name for s in PIPELINE))
# the step after which the loop nest is complete: what `td.lower(s)` shows and a kernel
# keeps (`Kernel.lowered`); the steps after it write it out for the targets
LOOP_NEST = "inbounds"


def steps(portable: bool = False, profile: bool = False, after: str | None = None,
          stop_after: str | None = None) -> tuple[Step, ...]:
    """The steps of `PIPELINE` a lowering with these options runs: those that apply,
    after the (last) step named `after` if given, up to the last step named `stop_after`
    if given. A name that is no step's, or a step that does not apply, is an
    ArgumentError naming the valid ones."""
    chosen = [s for s in PIPELINE if s.applies(portable, profile)]
    names = [s.name for s in chosen]
    for role, name in (("after", after), ("stop_after", stop_after)):
        if name is None or name in names:
            continue
        if name in STEP_NAMES:
            only = next(s.only for s in PIPELINE if s.name == name)
            where = "portable C (td.emit_c)" if only == "portable" else "Kernel.profile"
            raise ArgumentError(f"{role}={name!r}: the step {name} runs only for {where}; "
                                f"the steps of this lowering are {', '.join(names)}")
        raise ArgumentError(f"{role}={name!r} is not a step of the compiler; valid: "
                            f"{', '.join(STEP_NAMES)}")
    start = 0 if after is None else len(names) - names[::-1].index(after)
    end = len(names) if stop_after is None else len(names) - names[::-1].index(stop_after)
    return tuple(chosen[start:end])


def _run(lowering: Lowering, chosen: Sequence[Step], keep_steps: bool, each: bool = True,
         check: bool = True, named: bool = True) -> list[tuple[str, ir.LoweredFunc]]:
    """`chosen` run in order on `lowering`: the function after each (only the last
    unless `keep_steps`). With `check`, verified after each step (with `each`) or only after
    the last; `named` names each step for the isl budget's messages (`budget.step`)."""
    out: list[tuple[str, ir.LoweredFunc]] = []
    for n, st in enumerate(chosen):
        doing = "loop generation" if st.name == "convert" else f"the {st.name} pass"
        context: AbstractContextManager[None] = step(doing) if named else nullcontext()
        with context:
            func = st.run(lowering)
            if check and st.verified != "no" and (each or n == len(chosen) - 1):
                pending = frozenset(b.name for b, _, _ in lowering.temps)
                func = (verify(func) if st.verified == "yes"
                        else verify(func, pending=pending, placed=False))
        lowering.func = func
        out.append((st.name, func))
        if not keep_steps:
            del out[:-1]
    return out


def finish(func: ir.LoweredFunc, check: bool = True, each: bool = True, *,
           profile: bool = False, target: ir.Target | None = None) -> ir.LoweredFunc:
    """`func`, a loop nest (`lower_schedule(..., stop_after=LOOP_NEST)`, `td.lower(s)`,
    or loop IR built by hand), through the steps of `PIPELINE` after `LOOP_NEST`: the IR
    a target takes, planned for `target` (`ir.Target`; by default the function's own,
    host C unless set). The portable-only steps run when `func.portable`, `instrument`
    with `profile`.
    `check=False` skips the verifier after each step (hand-built IR may leave out what
    lowering always provides, such as a vectorized loop's `max_extent`); `each=False`
    verifies only the result."""
    if target is not None:
        func = replace(func, target=target)
    lowering = Lowering(func.name, portable=func.portable, isa=func.isa, profile=profile,
                        func=func)
    chosen = steps(func.portable, profile, after=LOOP_NEST)
    return _run(lowering, chosen, keep_steps=False, each=each, check=check, named=False)[-1][1]


@overload
def lower_schedule(sched: Schedule, name: str | None = None, trace: Literal[False] = False,
                   workspace: bool = False, late: bool = True, each: bool = True,
                   portable: bool = False, isa: ir.Isa = "generic", *,
                   stop_after: str | None = None, profile: bool = False
                   ) -> ir.LoweredFunc: ...


@overload
def lower_schedule(sched: Schedule, name: str | None = None, *, trace: Literal[True],
                   workspace: bool = False, late: bool = True, each: bool = True,
                   portable: bool = False, isa: ir.Isa = "generic",
                   stop_after: str | None = None, profile: bool = False) -> Trace: ...


@overload
def lower_schedule(sched: Schedule, name: str | None = None, trace: bool = False,
                   workspace: bool = False, late: bool = True, each: bool = True,
                   portable: bool = False, isa: ir.Isa = "generic", *,
                   stop_after: str | None = None, profile: bool = False
                   ) -> ir.LoweredFunc | Trace: ...


def lower_schedule(sched: Schedule, name: str | None = None, trace: bool = False,
                   workspace: bool = False, late: bool = True, each: bool = True,
                   portable: bool = False, isa: ir.Isa = "generic", *,
                   stop_after: str | None = None, profile: bool = False
                   ) -> ir.LoweredFunc | Trace:
    """Lower a schedule to a verified loop-IR function named `name` through `PIPELINE`,
    in a child process with a hard time limit (see `budget.bounded`); with `trace`, the
    `Trace` of every step instead. `stop_after` names the step to stop after (the last
    one of that name; default: every step; `late=False` is `stop_after=LOOP_NEST`, the
    loop nest `td.lower` shows, which `finish` completes). With `workspace`, every temp
    buffer lives in a workspace the caller passes in (for targets without a heap), not
    on the stack or the heap. `each=False` runs the verifier once, on the result,
    instead of after every step (about half the time of lowering; for callers that check
    the kernel's outputs anyway, as the tuner's trials do). With `portable`, the function
    is for portable C (`td.emit_c`), which the passes take into account
    (`LoweredFunc.portable`), and the portable-only steps run; `isa` is the instruction
    set it may use (`ir.ISAS`). With `profile`, the profiling step runs too."""
    sched._require_current()
    name = name or f"tdsl_{sched.outputs[0].name}"
    description = f"the schedule of {', '.join(o.name for o in sched.outputs)}"
    if stop_after is None and not late:
        stop_after = LOOP_NEST
    chosen = steps(portable, profile, stop_after=stop_after)

    def lower(ops: int | None = None) -> list[tuple[str, ir.LoweredFunc]]:
        lowering = Lowering(name, workspace, portable, isa, profile)
        return _lower(sched, lowering, description, chosen, keep_steps=trace, ops=ops,
                      each=each)

    exprs = [x.expr if isinstance(x, Stage) else x.value for x in sched.pipeline.schedulables]
    if not reads_remapped_stage(exprs):
        result = bounded(description, lower)
    else:
        # a stage read through a mirror or wrap view: where it is computed inside a loop,
        # its exact region is piecewise and can cost isl far more than a whole-axis one
        # (larger, recomputed more often); so the exact regions get a share of the
        # budget, and the whole axis the rest
        share = budget.EXACT_REGION_SHARE
        try:
            result = bounded(description, lambda: lower(int(budget.MAX_ISL_OPERATIONS * share)),
                             seconds=budget.MAX_ISL_SECONDS * share)
        except AnalysisLimitError:
            def coarse() -> list[tuple[str, ir.LoweredFunc]]:
                with whole_axis_remaps():
                    return lower()
            result = bounded(description, coarse)
    return Trace(result) if trace else result[-1][1]


def _lower(sched: Schedule, lowering: Lowering, description: str, chosen: Sequence[Step],
           keep_steps: bool, ops: int | None = None, each: bool = True
           ) -> list[tuple[str, ir.LoweredFunc]]:
    """The analysis of `sched` (bounds inference, the unrolling limit, the dependence
    analysis), then the `chosen` steps: the function after each (only the last one
    unless `keep_steps`), under `ops` isl operations each (default: MAX_ISL_OPERATIONS),
    verified after each step (with `each`) or only at the end; `description` names the
    schedule in the budget's errors."""
    with isl_budget(description, ops):
        with step("bounds inference"):
            model = build_model(sched)
        check_unrolling(model.statements)
        vectors = schedule_vectors(model)
        with step("the dependence analysis"):
            check_legality(model, vectors)
        lowering.model = model
        return _run(lowering, chosen, keep_steps, each)


__all__ = ["LOOP_NEST", "PIPELINE", "STEP_NAMES", "Lowering", "Step", "Trace", "finish", "ir",
           "lower_schedule", "steps"]
