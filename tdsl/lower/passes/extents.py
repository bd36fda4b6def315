"""Loop extents proven: every loop's `max_extent` bounds `end - start`.

The model knows how many values each loop of a block takes (its band's trip
count), but the loop isl generates for it may span more values than it runs,
with a guard inside: a block whose bounds are parameters, over a fused or
strided loop, is one. Unrolling and vectorizing trust `max_extent` as the
span, so this pass proves it with isl, knowing what holds where each loop
runs (as the in-bounds pass does), and where it cannot, widens `max_extent`
to the largest span isl finds.

Guarantees: for every loop with a `max_extent`, `end - start <= max_extent`
wherever it runs; a vectorized or unrolled loop whose span has no constant
bound is a ScheduleError naming the loop.
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from ...errors import ScheduleError
from .. import ir
from ..poly.affine import largest_constant
from ..printer import expr
from .inbounds import Terms


class _Extents(Terms):
    def stmt(self, s: ir.Stmt, ctx: isl.Set) -> ir.Stmt:
        match s:
            case ir.For(var, start, end, kind, body, mx):
                inner = self.loop(ctx, s)
                s = replace(s, body=self.stmt(body, inner))
                if mx is None:
                    return s
                span = self.term(end) - self.term(start)
                if (ctx & span.gt_set(self.const(mx))).is_empty():
                    return s
                top = _most(span, ctx)
                if top is None and kind in (ir.ForKind.VECTORIZED, ir.ForKind.UNROLLED):
                    what = "unroll" if kind is ir.ForKind.UNROLLED else "vectorize"
                    raise ScheduleError(
                        f"{what} of loop {var}: the loop generated for it runs from "
                        f"{expr(start)} to {expr(end)}, a span with no constant bound; "
                        f"{what} a loop of constant extent (split {var} by a constant first)")
                return replace(s, max_extent=top)
            case ir.Let(name, value, body):
                return replace(s, body=self.stmt(body, self.let(ctx, name, value)))
            case ir.If(c, then, other):
                cond = self.cond(c)
                t = self.stmt(then, ctx if cond is None else ctx & cond)
                o = None if other is None else self.stmt(
                    other, ctx if cond is None else ctx & cond.complement())
                return replace(s, then=t, else_=o)
            case ir.Block(stmts):
                return ir.Block(tuple(self.stmt(x, ctx) for x in stmts))
            case ir.Allocate(_, body):
                return replace(s, body=self.stmt(body, ctx))
        return s


def _most(span: isl.PwAff, ctx: isl.Set) -> int | None:
    """The largest value `span` takes where `ctx` holds, for any values of the variables."""
    most = largest_constant(isl.Map.from_pw_aff(span.intersect_domain(ctx)).range())
    return None if most is None else max(0, most)


def prove_extents(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` with every loop's max_extent proven to bound its span (widened where not)."""
    t = _Extents()
    return replace(func, body=t.stmt(func.body, t.entry(func)))
