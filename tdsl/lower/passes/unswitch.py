"""Unswitching: hoist a loop-invariant tile test out of the loops around it.

The unroll pass versions an unrolled loop whose end varies (a block at the
edge of the iteration space) as `if end - start == extent: plain copies else:
guarded copies`; isl's AST separates the last, partial tile of a split loop the
same way, with a test on the outer loop (`if j_o <= 13:` full tile `else:`
edge tile) that it places inside the loops the tile's statements run in. Such a
test usually does not depend on the loops that enclose it (a register tile's
reduction loop, the other tile dims), so this pass moves it outward as far as it
stays invariant, duplicating the loops it crosses: the full tiles then run
straight-line code with no test inside, and only edge tiles pay for the guards.
(gcc does not unswitch a reduction loop whose accumulators a test inside splits:
a 2mm with 64-wide tiles over 900 columns ran 2.7x slower on C than on LLVM.)

Guarantees: the result computes the same values. A test moves out of a loop
only when it is a comparison of index expressions (variables, constants and
integer arithmetic; no load, no call) against a constant, and no variable it
reads is bound inside that loop; a loop is duplicated only while it stays below
a size limit, and for isl's tests only while the copies at most double the
function (GROWTH).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from ... import dtypes as dt
from .. import ir
from ..rewrite import Rewriter, bound_names, stmt_count, walk_exprs

MAX_STATEMENTS = 4000  # a loop larger than this is not duplicated
GROWTH = 2  # isl's tests stop moving once the copies would make the function this many
# times larger (or add more than MAX_STATEMENTS to a smaller one)


def _is_trip_test(c: ir.Expr) -> bool:
    return (isinstance(c, ir.Compare) and c.op == "eq" and isinstance(c.b, ir.Const)
            and isinstance(c.a, ir.Binary) and c.a.op == "sub" and c.a.dtype == dt.index)


def _is_tile_test(c: ir.Expr) -> bool:
    """isl's test of a full tile: a linear index expression (variables, constants, +,
    -, *; so evaluating it anywhere its variables are bound gives the same answer and
    cannot fail) against a constant, or an and/or of such. (The unroll pass's guards
    of an edge block compare with a trip count, `1 < min(4, N - 4 * i_o)`: moving
    those would copy the edge code once per combination of them.)"""
    match c:
        case ir.Compare(_, a, ir.Const()) | ir.Compare(_, ir.Const(), a):
            return all(isinstance(e, (ir.Var, ir.Const)) or isinstance(e, ir.Binary)
                       and e.op in ("add", "sub", "mul") and e.dtype == dt.index
                       for e in walk_exprs(a))
        case ir.Binary("and" | "or", a, b, dtype) if dtype == dt.bool_:
            return _is_tile_test(a) and _is_tile_test(b)
    return False


def _tests(s: ir.Stmt, looped: bool = False) -> Iterator[tuple[ir.If, bool]]:
    """The tests in `s`, each with whether a loop inside `s` runs it."""
    match s:
        case ir.If(_, t, e):
            yield s, looped
            yield from _tests(t, looped)
            if e is not None:
                yield from _tests(e, looped)
        case ir.For(body=body):
            yield from _tests(body, True)
        case ir.Let(body=body) | ir.Allocate(body=body):
            yield from _tests(body, looped)
        case ir.Block(stmts):
            for x in stmts:
                yield from _tests(x, looped)


def _innermost(s: ir.Stmt) -> bool:
    """No loop inside `s` but vector loops (each a few vector instructions)."""
    match s:
        case ir.For(kind=kind, body=body):
            return kind == ir.ForKind.VECTORIZED and _innermost(body)
        case ir.If(_, t, e):
            return _innermost(t) and (e is None or _innermost(e))
        case ir.Let(body=body) | ir.Allocate(body=body):
            return _innermost(body)
        case ir.Block(stmts):
            return all(_innermost(x) for x in stmts)
    return True


def _invariant_test(loop: ir.For, any_test: bool) -> ir.Expr | None:
    """The first test inside `loop` that reads no variable bound in it: a trip test
    of the unroll pass, or with `any_test` a tile test that a loop inside `loop`
    runs, or one in the body of an innermost serial loop (a register tile's reduction
    loop, whose accumulators the test splits: gcc keeps them in registers across the
    test only with flags and spilled indices, 24 FMAs with 15 integer instructions
    beside them). A test once per iteration of a larger loop gains little for the
    copy it costs."""
    bound = bound_names(loop)
    inner = loop.kind == ir.ForKind.SERIAL and _innermost(loop.body)
    for x, looped in _tests(loop.body):
        if not (_is_trip_test(x.cond)
                or any_test and (looped or inner) and _is_tile_test(x.cond)):
            continue
        reads = list(walk_exprs(x.cond))
        if not any(isinstance(e, ir.Load) or isinstance(e, ir.Var) and e.name in bound
                   for e in reads):
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
    def __init__(self, budget: int) -> None:
        self.budget = budget  # statements the copies of isl's tests may still add

    def visit(self, s: ir.Stmt) -> ir.Stmt:
        # outermost loops first: a test leaves every loop it is invariant in at once,
        # not the innermost first (where, in a loop's body, it would stop moving); the
        # loops inside are visited once (the `stmt` hook, called after them, is not used)
        hoisted = self._hoist(s) if isinstance(s, ir.For) else None
        return super().visit(s) if hoisted is None else hoisted

    def _hoist(self, s: ir.For) -> ir.Stmt | None:
        """`s` with its first invariant test moved out of it (and the copies visited),
        or None when it has none that may move."""
        cond = _invariant_test(s, any_test=True)
        if cond is None:
            return None
        size = stmt_count(s)
        if size > MAX_STATEMENTS:
            return None
        if not _is_trip_test(cond):
            if size + 1 > self.budget:
                cond = _invariant_test(s, any_test=False)
                if cond is None:
                    return None
            else:
                self.budget -= size + 1  # a copy of the loop, and the if
        full = self.visit(_Decide(cond, True).visit(s))
        edge = self.visit(_Decide(cond, False).visit(s))
        return ir.If(cond, full, edge)


def unswitch(func: ir.LoweredFunc) -> ir.LoweredFunc:
    budget = max((GROWTH - 1) * stmt_count(func.body), MAX_STATEMENTS)
    return replace(func, body=_Unswitch(budget).visit(func.body))
