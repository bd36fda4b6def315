"""Lowering: a schedule becomes a loop-IR function.

The whole compiler front to back, one pass per line:

    model    the polyhedral model: statements, isl domains, bands, buffer boxes
    budget   unrolling within its limit (the isl analysis runs under an operation quota)
    tree     the flat isl schedule of every statement
    legality dependences (isl) kept by the schedule; parallel loops race-free
    ast      isl's AST of the schedule
    convert  the isl AST as loop IR (tdsl's own nodes, with the schedule's names)
    extents  every loop's max extent proven to bound its span (isl), widened where not
    simplify constant folding and index simplification
    unroll   unrolled loops become copies of their bodies
    unswitch full-tile tests of unrolled edge blocks hoisted out of invariant loops
    fold     loops of at most one iteration become bindings of their variable
    inbounds every scratch-buffer access proven inside its allocation (isl), or an error
    verify   loop-IR invariants (run after every pass)
"""

from __future__ import annotations

from collections.abc import Callable

from ..schedule import Schedule
from ..schedule.schedule import set_legality_check
from . import ir
from .budget import bounded, check_unrolling, isl_budget, step
from .from_ast import convert
from .legality import check_legality, check_schedule
from .model import build_model
from .passes.extents import prove_extents
from .passes.fold_loops import fold_loops
from .passes.inbounds import check_in_bounds
from .passes.simplify import simplify
from .passes.unroll import unroll
from .passes.unswitch import unswitch
from .passes.verify import verify
from .tree import build_ast, schedule_vectors

set_legality_check(check_schedule)  # Schedule.check proves legality with this layer's model

PASSES: tuple[tuple[str, Callable[[ir.LoweredFunc], ir.LoweredFunc]], ...] = (
    ("extents", prove_extents),
    ("simplify", simplify),
    ("unroll", unroll),
    ("unswitch", unswitch),
    ("fold", fold_loops),
    ("inbounds", check_in_bounds),
)


def lower_schedule(sched: Schedule, name: str | None = None,
                   dump: Callable[[str, ir.LoweredFunc], None] | None = None) -> ir.LoweredFunc:
    """Lower a schedule to a verified loop-IR function named `name` (in a child process
    with a hard time limit, see `budget.bounded`; in process when `dump` is given)."""
    name = name or f"tdsl_{sched.outputs[0].name}"
    what = f"the schedule of {', '.join(o.name for o in sched.outputs)}"
    if dump is None:
        return bounded(what, lambda: _lower(sched, name, what, None))
    return _lower(sched, name, what, dump)


def _lower(sched: Schedule, name: str, what: str,
           dump: Callable[[str, ir.LoweredFunc], None] | None) -> ir.LoweredFunc:
    with isl_budget(what):
        with step("bounds inference"):
            model = build_model(sched)
        check_unrolling(model.statements)
        vectors = schedule_vectors(model)
        with step("the dependence analysis"):
            check_legality(model, vectors)
        with step("loop generation"):
            vectors = schedule_vectors(model, binders=True)
            ast = build_ast(model, vectors)
            func = verify(convert(model, ast, vectors, name))
        if dump:
            dump("convert", func)
        for pass_name, run in PASSES:
            with step(f"the {pass_name} pass"):
                func = verify(run(func))
            if dump:
                dump(pass_name, func)
    return func


__all__ = ["ir", "lower_schedule"]
