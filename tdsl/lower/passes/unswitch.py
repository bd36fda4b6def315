"""Unswitching: hoist a loop-invariant full-tile test out of the loops around it.

The unroll pass versions an unrolled loop whose end varies (a block at the
edge of the iteration space) as `if end - start == extent: plain copies else:
guarded copies`. Such a test usually does not depend on the loops that
enclose it (a register tile's reduction loop, the other tile dims), so this
pass moves it outward as far as it stays invariant, duplicating the loops it
crosses: the full tiles then run straight-line code with no test inside, and
only edge tiles pay for the guards.

Guarantees: the result computes the same values. A test moves out of a loop
only when no variable it reads is bound inside that loop and it reads no
buffer; a loop is duplicated only while it stays below a size limit.
"""

from __future__ import annotations

from dataclasses import replace

from ... import dtypes as dt
from .. import ir
from ..rewrite import Rewriter, bound_names, walk_exprs, walk_stmts

MAX_STATEMENTS = 4000  # a loop larger than this is not duplicated


def _is_trip_test(c: ir.Expr) -> bool:
    return (isinstance(c, ir.Compare) and c.op == "eq" and isinstance(c.b, ir.Const)
            and isinstance(c.a, ir.Binary) and c.a.op == "sub" and c.a.dtype == dt.index)


def _invariant_test(loop: ir.For) -> ir.Expr | None:
    bound = bound_names(loop)
    for x in walk_stmts(loop.body):
        if isinstance(x, ir.If) and _is_trip_test(x.cond):
            reads = list(walk_exprs(x.cond))
            if not any(isinstance(e, ir.Load) for e in reads) and not any(
                    isinstance(e, ir.Var) and e.name in bound for e in reads):
                return x.cond
    return None


class _Decide(Rewriter):
    """Replace every `if cond` by the branch that `cond == value` takes."""

    def __init__(self, cond: ir.Expr, value: bool) -> None:
        self.cond, self.value = cond, value

    def stmt(self, s: ir.Stmt) -> ir.Stmt | None:
        if isinstance(s, ir.If) and s.cond == self.cond:
            return s.then if self.value else (s.else_ or ir.Block(()))
        return None


class _Unswitch(Rewriter):
    def stmt(self, s: ir.Stmt) -> ir.Stmt | None:
        if not isinstance(s, ir.For):
            return None
        cond = _invariant_test(s)
        if cond is None or sum(1 for _ in walk_stmts(s)) > MAX_STATEMENTS:
            return None
        full = self.visit(_Decide(cond, True).visit(s))
        edge = self.visit(_Decide(cond, False).visit(s))
        return ir.If(cond, full, edge)


def unswitch(func: ir.LoweredFunc) -> ir.LoweredFunc:
    body = _Unswitch().visit(func.body)
    return replace(func, body=body)
