"""The place_binders pass: each block binder (`ir.Binder`, where isl's AST put it)
becomes lets of the block's bounds around every statement that uses them.

After it, every block bound is a variable bound by a let around its uses, or the
schedule is refused (`ScheduleError`): isl used a bound outside the loop that
computes it.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import ScheduleError
from .. import ir
from ..build import index, select
from ..rewrite import Substitute, free_vars


def place_binders(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` with its binders replaced by lets around the uses of their bounds (see
    `placed`); a ScheduleError when a bound is used where no binder sets it."""
    body = placed(func.body)
    unbound = sorted(free_vars(body) - {v.name for v in func.sizes})
    if unbound:
        # isl tested a block bound (a parameter to it) outside the loop that sets it
        raise ScheduleError(
            f"isl's loop generator used the block bound(s) {', '.join(unbound)} outside the "
            f"loop that computes them, so this schedule is refused rather than compiled "
            f"wrong; another split or tile factor, or a compute_at at another loop, avoids it")
    return func if body == func.body else replace(func, body=body)


_PREV = ir.Var("_prev")  # in an escaping bound: the value it had before (0 if none)


def placed(s: ir.Stmt) -> ir.Stmt:
    """Replace the binders of block bounds by lets that cover every use of the bounds.

    isl's AST builder sees a block's bounds as parameters, so it uses them wherever
    it likes after the binder in the same iteration of the compute loop: in the
    block's loops, and in guards of other statements that share those loops. And
    it places the binder as it likes: first in a block, but also alone under an
    `if` of its own (its domain) or under a degenerate loop, apart from the loops
    that use the bounds. So a binder's lets wrap the rest of its block, and they
    also escape the statements around it (an `if`: selected by its condition, the
    other branch's binder or the value before; a degenerate loop: with its
    variable replaced by its value) to wrap whatever uses them later in an
    enclosing block. They stop at a real loop: its variable is in them.

    Where a binder did not run (its guard is false) its bounds are 0: a block from
    0 to 0 is within every stage, so isl's code (valid for all bounds in the AST
    context, `model._ast_context`) runs nothing of the block there, as the block
    has no instance at that iteration."""
    out, _ = _place(s, frozenset())
    return out if out is not None else ir.Block(())


def _place(s: ir.Stmt, bound: frozenset[str]) -> tuple[ir.Stmt | None, dict[str, ir.Expr]]:
    """`s` with its binders placed, and the bounds it sets for what follows it
    (`bound`: the bounds bound around it)."""
    match s:
        case ir.Binder(lets):
            return None, dict(lets)
        case ir.Block(stmts):
            return _seq(list(stmts), bound)
        case ir.If(c, t, e):
            t2, bt = _place(t, bound)
            e2, be = _place(e, bound) if e is not None else (None, {})
            esc: dict[str, ir.Expr] = {
                n: select(c, bt.get(n, _PREV), be.get(n, _PREV)) for n in {**bt, **be}}
            if t2 is None and e2 is None:
                return None, esc
            return ir.If(c, t2 if t2 is not None else ir.Block(()), e2), esc
        case ir.Let(name, value, body):
            b2, esc = _place(body, bound)
            sub = Substitute({name: value})
            esc = {n: sub.visit_expr(v) for n, v in esc.items()}
            return (ir.Let(name, value, b2) if b2 is not None else None), esc
        case ir.For(body=body):
            b2, _ = _place(body, bound)
            return replace(s, body=b2 if b2 is not None else ir.Block(())), {}
    return s, {}


def _seq(items: list[ir.Stmt], bound: frozenset[str]) -> tuple[ir.Stmt | None, dict[str, ir.Expr]]:
    """A block with its binders placed: each statement's bounds wrap the statements
    after it that use them."""
    if not items:
        return None, {}
    first, esc = _place(items[0], bound)
    rest, later = _seq(items[1:], bound | set(esc))
    if rest is not None and esc:
        used = free_vars(rest)
        for name in reversed([n for n in esc if n in used]):
            before = ir.Var(name) if name in bound else None
            rest = ir.Let(name, _resolve(esc[name], before), rest)
    parts = [x for x in (first, rest) if x is not None]
    flat = [y for x in parts for y in (x.stmts if isinstance(x, ir.Block) else (x,))]
    stmt = None if not flat else flat[0] if len(flat) == 1 else ir.Block(tuple(flat))
    merged = dict(esc)
    for n, v in later.items():
        merged[n] = _resolve(v, esc.get(n)) if n in esc else v
    return stmt, merged


def _resolve(v: ir.Expr, prev: ir.Expr | None) -> ir.Expr:
    """An escaping bound with the value before it filled in (0 when there was none)."""
    return Substitute({_PREV.name: prev if prev is not None else index(0)}).visit_expr(v)

