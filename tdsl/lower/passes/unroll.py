"""Unrolling: each UNROLLED loop becomes one copy of its body per iteration.

Guarantees: no UNROLLED loop remains. A loop with constant bounds becomes
straight-line copies; a loop whose end varies (a split tail) becomes a test of
its trip count: `max_extent` plain copies when it runs all of them, else
`max_extent` copies each guarded by `start + c < end`.
"""

from __future__ import annotations

from dataclasses import replace

from ... import dtypes as dt
from .. import ir
from ..build import add, const, eq, lt, sub
from ..rewrite import Rewriter, substitute


class _Unroll(Rewriter):
    def stmt(self, s: ir.Stmt) -> ir.Stmt | None:
        if not isinstance(s, ir.For) or s.kind is not ir.ForKind.UNROLLED:
            return None
        copies = []
        start, end = ir.int_value(s.start), ir.int_value(s.end)
        if start is not None and end is not None:
            for v in range(start, end):
                copies.append(substitute(s.body, {s.var: const(v, dt.index)}))
        else:
            assert s.max_extent is not None, f"unrolled loop {s.var} without a constant extent"
            if s.max_extent == 0:
                return ir.Block(())
            full, guarded = [], []
            for c in range(s.max_extent):
                at = add(s.start, const(c, dt.index))
                body = substitute(s.body, {s.var: at})
                full.append(body)
                guarded.append(body if c == 0 else ir.If(lt(at, s.end), body))
            guarded[0] = ir.If(lt(s.start, s.end), guarded[0])
            return ir.If(full_trip_test(s), ir.Block(tuple(full)), ir.Block(tuple(guarded)))
        return ir.Block(tuple(copies))


def full_trip_test(loop: ir.For) -> ir.Compare:
    """`end - start == max_extent`: the loop runs all its iterations (the unswitch pass
    hoists this test out of the loops around it)."""
    assert loop.max_extent is not None, f"loop {loop.var} without a constant extent"
    trips = sub(loop.end, loop.start)
    return eq(trips, const(loop.max_extent, dt.index))


def unroll(func: ir.LoweredFunc) -> ir.LoweredFunc:
    body = _Unroll().visit(func.body)
    return replace(func, body=body)
