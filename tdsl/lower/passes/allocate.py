"""Placing temp buffers: each gets an Allocate around exactly the code that uses it.

Guarantees: every Load/Store of a temp buffer is inside its Allocate; the
Allocate sits at the top of the body of its store loop when that loop
exists in the nest, else at the innermost statement enclosing every use.
Both are correct: a producer's instances that a consumer reads are always
in the same iteration of every loop enclosing both, so a buffer allocated
per iteration of such a loop (one per thread under a parallel loop) holds
everything that is read before it is released.
"""

from __future__ import annotations

from .. import ir
from ..rewrite import walk_exprs, walk_stmts


def _uses(s: ir.Stmt, name: str) -> int:
    n = 0
    for st in walk_stmts(s):
        exprs: list[ir.Expr] = []
        match st:
            case ir.Store(buf, idx, v):
                n += buf.name == name
                exprs = [*idx, v]
            case ir.For(_, start, end):
                exprs = [start, end]
            case ir.Let(_, v):
                exprs = [v]
            case ir.If(c):
                exprs = [c]
        for e in exprs:
            n += sum(isinstance(x, ir.Load) and x.buffer.name == name for x in walk_exprs(e))
    return n


def _with_body(s: ir.Stmt, body: ir.Stmt) -> ir.Stmt:
    match s:
        case ir.For(var, start, end, kind, _, mx):
            return ir.For(var, start, end, kind, body, mx)
        case ir.Let(name, v, _):
            return ir.Let(name, v, body)
        case ir.Allocate(buf, _):
            return ir.Allocate(buf, body)
    raise AssertionError(s)


def _place(s: ir.Stmt, buf: ir.Buffer, store_var: str | None, total: int) -> ir.Stmt:
    if isinstance(s, ir.For) and s.var == store_var:
        return _with_body(s, ir.Allocate(buf, s.body))
    match s:
        case ir.For(body=body) | ir.Let(body=body) | ir.Allocate(body=body):
            return _with_body(s, _place(body, buf, store_var, total))
        case ir.Block(stmts):
            users = [k for k, x in enumerate(stmts) if _uses(x, buf.name)]
            if len(users) == 1:
                k = users[0]
                new = list(stmts)
                new[k] = _place(stmts[k], buf, store_var, total)
                return ir.Block(tuple(new))
        case ir.If(c, t, e) if e is None or not _uses(e, buf.name):
            if _uses(t, buf.name) == total:
                return ir.If(c, _place(t, buf, store_var, total), e)
    return ir.Allocate(buf, s)


def place_allocations(func: ir.LoweredFunc, temps: list[tuple[ir.Buffer, str | None]]) -> ir.LoweredFunc:
    body = func.body
    for buf, store_var in temps:
        total = _uses(body, buf.name)
        if total:
            body = _place(body, buf, store_var, total)
    return ir.LoweredFunc(func.name, func.inputs, func.outputs, func.sizes, body)
