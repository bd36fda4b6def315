"""Placing temp buffers: each gets an Allocate around exactly the code that uses it.

Guarantees: every Load/Store of a temp buffer is inside an Allocate of it.
A buffer with a store loop (the loop of `BufferBox.depth`, see model.py) is
allocated at the top of the body of every copy of that loop the isl AST
made (a loop split by a condition above it, a degenerate loop bound by a
Let, a strided loop's Let), and at the innermost statement enclosing the
uses in a branch where isl substituted the loop's only value for its
variable, so each iteration of the store loop has its own
buffer, and so does each iteration of every loop around it, parallel ones
included: storage is private to the iterations of every loop that encloses
the store level, whichever branch runs them. A buffer stored at root is
allocated at the innermost statement enclosing every use.

This is correct because a producer's instances that a consumer reads are
always in the same iteration of every loop enclosing both, so a buffer
allocated per iteration of such a loop holds everything that is read before
it is released. Which loop is the store level, and whether a parallel loop
between it and the computation may share the buffer, is decided by the model
(`_Builder.buffer_box`) and the legality check (`check_legality`), not here.
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


def _binds(s: ir.Stmt, var: str) -> bool:
    return any(isinstance(x, ir.For) and x.var == var or isinstance(x, ir.Let) and x.name == var
               for x in walk_stmts(s))


def _at_store_loop(s: ir.Stmt, buf: ir.Buffer, store_var: str) -> ir.Stmt:
    """`s` with `buf` allocated in the body of every copy of loop `store_var` that uses it;
    uses where isl substituted the loop's one value for it get an Allocate of their own."""
    uses = _uses(s, buf.name)
    if not uses:
        return s
    if not _binds(s, store_var):
        return _place(s, buf, uses)
    match s:
        case ir.For(var=var) | ir.Let(name=var) if var == store_var:
            return _with_body(s, ir.Allocate(buf, s.body))
        case ir.For(body=body) | ir.Let(body=body) | ir.Allocate(body=body):
            return _with_body(s, _at_store_loop(body, buf, store_var))
        case ir.Block(stmts):
            return ir.Block(tuple(_at_store_loop(x, buf, store_var) for x in stmts))
        case ir.If(c, t, e):
            return ir.If(c, _at_store_loop(t, buf, store_var),
                         None if e is None else _at_store_loop(e, buf, store_var))
    raise AssertionError(s)


def _place(s: ir.Stmt, buf: ir.Buffer, total: int) -> ir.Stmt:
    """`s` with `buf` allocated at the innermost statement enclosing all `total` uses."""
    match s:
        case ir.For(body=body) | ir.Let(body=body) | ir.Allocate(body=body):
            return _with_body(s, _place(body, buf, total))
        case ir.Block(stmts):
            users = [k for k, x in enumerate(stmts) if _uses(x, buf.name)]
            if len(users) == 1:
                k = users[0]
                new = list(stmts)
                new[k] = _place(stmts[k], buf, total)
                return ir.Block(tuple(new))
        case ir.If(c, t, e) if e is None or not _uses(e, buf.name):
            if _uses(t, buf.name) == total:
                return ir.If(c, _place(t, buf, total), e)
    return ir.Allocate(buf, s)


def place_allocations(func: ir.LoweredFunc, temps: list[tuple[ir.Buffer, str | None]]) -> ir.LoweredFunc:
    """Allocate each (temp buffer, its store loop's variable or None for root) of `temps`."""
    body = func.body
    for buf, store_var in temps:
        if store_var is not None:
            body = _at_store_loop(body, buf, store_var)
            continue
        total = _uses(body, buf.name)
        if total:
            body = _place(body, buf, total)
    return ir.LoweredFunc(func.name, func.inputs, func.outputs, func.sizes, body)
