"""The fold pass: loops of at most one iteration become bindings of their variable."""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td
from tdsl import dtypes as dt
from tdsl.lower import ir
from tdsl.lower.passes.fold_loops import fold_loops
from tdsl.lower.passes.simplify import normalize
from tdsl.lower.passes.verify import verify
from tdsl.lower.rewrite import walk_stmts

OUT = ir.Buffer("out", dt.int32, (ir.index_const(8),), "output")
N = ir.Var("N")


def _func(body: ir.Stmt) -> ir.LoweredFunc:
    return ir.LoweredFunc("k", (), (OUT,), (N,), body)


def _store(var: str) -> ir.Store:
    return ir.Store(OUT, (ir.Var(var),), ir.Const(7, dt.int32))


def _loop(start, end, kind=ir.ForKind.SERIAL, max_extent=None) -> ir.For:
    return ir.For("i", start, end, kind, _store("i"), max_extent)


def _fold(body: ir.Stmt) -> ir.Stmt:
    return verify(fold_loops(verify(_func(body)))).body


@pytest.mark.parametrize("kind", list(ir.ForKind))
def test_one_iteration_becomes_a_let(kind):
    c = ir.index_const
    start = ir.Binary("add", N, c(2), dt.index)
    end = ir.Binary("add", N, c(3), dt.index)
    assert _fold(_loop(start, end, kind, 1)) == ir.Let("i", start, _store("i"))


@pytest.mark.parametrize("trips", [0, -3])
def test_a_loop_that_never_runs_disappears(trips):
    assert _fold(_loop(ir.index_const(4), ir.index_const(4 + trips))) == ir.Block(())


def test_zero_or_one_iteration_becomes_a_guarded_let():
    end = ir.Binary("min", ir.index_const(3), N, dt.index)
    start = ir.index_const(2)
    assert _fold(_loop(start, end, max_extent=1)) == ir.If(
        ir.Compare("lt", start, end), ir.Let("i", start, _store("i")))


@pytest.mark.parametrize("end", [ir.index_const(2), N, ir.Binary("min", ir.index_const(4), N, dt.index)])
def test_other_loops_are_kept(end):
    loop = _loop(ir.index_const(0), end, ir.ForKind.PARALLEL, 4 if end != N else None)
    assert _fold(loop) is loop


def _short_loops(func: ir.LoweredFunc) -> list[ir.For]:
    out = []
    for s in walk_stmts(func.body):
        if isinstance(s, ir.For):
            trips = normalize(ir.Binary("sub", s.end, s.start, dt.index))
            if (isinstance(trips, ir.Const) and trips.value <= 1) or (s.max_extent or 2) <= 1:
                out.append(s)
    return out


def _unrolled_schedules():
    y, x, k = td.dims("y x k")
    a = td.input("a", {y: 5, x: 3}, td.int32)
    r = td.compute("r", {y: 5}, td.sum(a[y, k], over={k: 3}))
    o = td.compute("o", {y: 5, x: 3}, a[y, x] * 3 - r[y])
    return a, o, {
        # the last block of y_o has one row: a parallel loop of one iteration
        "parallel": td.schedule(o).split(o, "y", 2).unroll(o, "y_o").parallel(o, "y_i"),
        "parallel_inner_unrolled": (td.schedule(o).split(o, "y", 4).reorder(o, "y_i", "y_o", "x")
                                    .unroll(o, "y_i").parallel(o, "y_o")),
        # a reassociated reduction whose last block has one term
        "vectorized_reduction": (td.schedule(o).split(r, "k", 2).unroll(r, "k_o")
                                 .vectorize(r, "k_i", reassociate=True)),
        "reduction": td.schedule(o).split(r, "k", 2).unroll(r, "k_o"),
    }


@pytest.mark.parametrize("name", list(_unrolled_schedules()[2]))
def test_unrolled_edge_blocks_leave_no_short_loops(name, backend):
    a, o, schedules = _unrolled_schedules()
    s = schedules[name]
    assert _short_loops(td.lower(s)) == []
    data = np.arange(15, dtype=np.int32).reshape(5, 3) * 7 - 40
    np.testing.assert_array_equal(td.build(s, target=backend)(a=data), td.evaluate(o, a=data))


def test_without_the_pass_those_schedules_have_short_loops():
    """The schedules above do exercise the pass: unrolling leaves loops of one iteration."""
    from tdsl.lower import PIPELINE, lower_schedule

    _, _, schedules = _unrolled_schedules()
    for name, s in schedules.items():
        trace = lower_schedule(s, trace=True)
        assert _short_loops(trace["unswitch"]), name
        assert not _short_loops(trace["fold"]), name
    names = [step.name for step in PIPELINE]
    assert names.index("fold") > names.index("unswitch")  # fold runs after unrolling
