"""Placing temp buffers: each gets an Allocate around exactly the code that uses it.

Guarantees: every Load/Store of a temp buffer is inside an Allocate of it.
A buffer with a store loop (the loop of `BufferBox.depth`, see model.py) is
allocated at the top of the body of every copy of that loop the isl AST
made (a loop split by a condition above it, a degenerate loop bound by a
Let, a strided loop's Let). Where isl substituted their only values for the
variables of that loop and of loops around it, the buffer is allocated
inside the innermost of those loops that remain, at the innermost statement
enclosing the uses there; and where isl hoisted a producer's block out of a
store loop it knew runs one iteration (the block only writes the buffer, the
loop reads it), the two share one allocation around both. So each iteration of the store loop has its own
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

Then every allocation (a reassociated reduction's too) gets its storage
(`ir.Storage`), here and nowhere else:
on the stack when its shape is constant and it takes at most `ir.STACK_LIMIT`
bytes, else on the heap; or, for a target that takes a workspace from its caller
(`td.emit_c`), every one in the workspace but those of register size.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..rewrite import Rewriter, stmt_exprs, walk_exprs, walk_stmts


def _uses(s: ir.Stmt, name: str) -> int:
    """How many stores to and loads of buffer `name` there are in `s`."""
    return sum((isinstance(st, ir.Store) and st.buffer.name == name)
               + sum(isinstance(x, ir.Load) and x.buffer.name == name
                     for e in stmt_exprs(st) for x in walk_exprs(e))
               for st in walk_stmts(s))


def _reads_in_header(s: ir.Stmt, name: str) -> bool:
    """Whether a loop's bounds, a let's value or a branch's condition read buffer
    `name`: then an allocation placed in its body would come after a use (a reduction
    inlined into a let whose operand is a stage computed over an empty region, say)."""
    return any(isinstance(x, ir.Load) and x.buffer.name == name
               for e in stmt_exprs(s) for x in walk_exprs(e))


def _with_body(s: ir.Stmt, body: ir.Stmt) -> ir.Stmt:
    match s:
        case ir.For(var, start, end, kind, _, mx):
            return ir.For(var, start, end, kind, body, mx)
        case ir.Let(name, v, _):
            return ir.Let(name, v, body)
        case ir.Allocate(buf, _, storage):
            return ir.Allocate(buf, body, storage)
    raise AssertionError(s)


def _binds(s: ir.Stmt, var: str) -> bool:
    return any(isinstance(x, ir.For) and x.var == var or isinstance(x, ir.Let) and x.name == var
               for x in walk_stmts(s))


def _writes(s: ir.Stmt, name: str) -> bool:
    return any(isinstance(x, ir.Store) and x.buffer.name == name for x in walk_stmts(s))


def _reads(s: ir.Stmt, name: str) -> bool:
    return _uses(s, name) > sum(isinstance(x, ir.Store) and x.buffer.name == name
                                for x in walk_stmts(s))


def _loose(s: ir.Stmt, name: str, chain: tuple[str, ...]) -> bool:
    """Whether `s` uses buffer `name` somewhere no loop over a variable of `chain` inside
    `s` encloses: there it runs in the one iteration of those loops that the code around
    `s` decides (isl substituted their only values, or a let binds one), so uses like it
    in a sibling statement may be in that same iteration."""
    match s:
        case ir.For(var=var) if var in chain:
            return False
        case ir.For(body=body) | ir.Let(body=body) | ir.Allocate(body=body):
            return _reads_in_header(s, name) or _loose(body, name, chain)
        case ir.If(_, t, e):
            return (_reads_in_header(s, name) or _loose(t, name, chain)
                    or (e is not None and _loose(e, name, chain)))
        case ir.Block(stmts):
            return any(_loose(x, name, chain) for x in stmts)
    return _uses(s, name) > 0


def _at_store_level(s: ir.Stmt, buf: ir.Buffer, chain: tuple[str, ...],
                    into_loops: bool = True) -> ir.Stmt:
    """`s` with `buf` allocated once per iteration of its store loop. `chain` lists the
    variables of the loops enclosing the store level that `s` is not yet inside, outer
    first, the store loop last. (`into_loops`: see `_place`.)"""
    uses = _uses(s, buf.name)
    if not uses:
        return s
    match s:
        case ir.For(var=var) | ir.Let(name=var) if var in chain:
            rest = chain[chain.index(var) + 1:]
            inner = ir.Allocate(buf, s.body) if not rest else _at_store_level(s.body, buf, rest, into_loops)
            return _with_body(s, inner)
    if not any(_binds(s, v) for v in chain):
        # isl substituted the remaining loops' only values: `s` runs in one iteration of each
        return _place(s, buf, uses, into_loops)
    match s:
        case ir.For(body=body) | ir.Let(body=body) | ir.Allocate(body=body) \
                if not _reads_in_header(s, buf.name):
            return _with_body(s, _at_store_level(body, buf, chain, into_loops))
        case ir.For() | ir.Let():
            return _place(s, buf, uses, into_loops)
        case ir.Block(stmts):
            users = [x for x in stmts if _uses(x, buf.name)]
            loose = [x for x in users if _loose(x, buf.name, chain)]
            # statements that may share one iteration share one buffer: those with uses
            # in the iteration the code around them decides (isl gave the remaining loops
            # their only values, or bound one with a let, perhaps in some branches only);
            # and one of those that only writes or only reads the buffer shares it with
            # the loop it belongs to (isl hoisted a producer out of a store loop it knew
            # runs that one iteration)
            partial = [x for x in loose if not (_writes(x, buf.name) and _reads(x, buf.name))]
            if len(loose) > 1 or (partial and len(users) > 1):
                return _place(s, buf, uses, into_loops)
            return ir.Block(tuple(_at_store_level(x, buf, chain, into_loops) for x in stmts))
        case ir.If(c, t, e) if not _reads_in_header(s, buf.name):
            return ir.If(c, _at_store_level(t, buf, chain, into_loops),
                         None if e is None else _at_store_level(e, buf, chain, into_loops))
        case ir.If():
            return _place(s, buf, uses, into_loops)
    raise AssertionError(s)


def _place(s: ir.Stmt, buf: ir.Buffer, total: int, into_loops: bool = True) -> ir.Stmt:
    """`s` with `buf` allocated at the innermost statement enclosing all `total` uses
    (not inside a loop unless `into_loops`: a buffer whose contents live from one
    iteration to the next, a sliding window's)."""
    match s:
        case ir.For(body=body) if into_loops and not _reads_in_header(s, buf.name):
            return _with_body(s, _place(body, buf, total, into_loops))
        case ir.Let(body=body) | ir.Allocate(body=body) if not _reads_in_header(s, buf.name):
            return _with_body(s, _place(body, buf, total, into_loops))
        case ir.Block(stmts):
            users = [k for k, x in enumerate(stmts) if _uses(x, buf.name)]
            if len(users) == 1:
                k = users[0]
                new = list(stmts)
                new[k] = _place(stmts[k], buf, total, into_loops)
                return ir.Block(tuple(new))
        case ir.If(c, t, e) if e is None or not _uses(e, buf.name):
            if _uses(t, buf.name) == total:
                return ir.If(c, _place(t, buf, total, into_loops), e)
    return ir.Allocate(buf, s)


def storage_of(buf: ir.Buffer, workspace: bool = False) -> ir.Storage:
    """Where temp buffer `buf` lives: in the caller's workspace when the target takes
    one, unless it is small enough for registers (`ir.register_sized`: then it stays on
    the stack, where the compiler keeps it in registers); else on the stack when it fits
    there (`ir.fits_stack`), else on the heap."""
    if workspace and not ir.register_sized(buf):
        return ir.Storage.WORKSPACE
    return ir.Storage.STACK if ir.fits_stack(buf) else ir.Storage.HEAP


class _PlaceStorage(Rewriter):
    def __init__(self, workspace: bool):
        self.workspace = workspace

    def stmt(self, s: ir.Stmt) -> ir.Stmt | None:
        if isinstance(s, ir.Allocate) and s.storage is None:
            return ir.Allocate(s.buffer, s.body, storage_of(s.buffer, self.workspace))
        return None


def place_storage(func: ir.LoweredFunc, workspace: bool = False) -> ir.LoweredFunc:
    """`func` with every allocation that has no storage yet given one (`storage_of`)."""
    body = _PlaceStorage(workspace).visit(func.body)
    return replace(func, body=body)


def place_allocations(func: ir.LoweredFunc,
                      temps: list[tuple[ir.Buffer, tuple[str, ...], bool]],
                      workspace: bool = False) -> ir.LoweredFunc:
    """Allocate each temp buffer of `temps`, given with the variables of the loops that
    enclose its store level, outer first (none for a buffer stored at root), and whether
    its contents live across the iterations of the loops inside its store level (a
    sliding window: then it is never allocated inside one of them); then give every
    allocation its storage, all in the caller's workspace with `workspace`."""
    body = func.body
    for buf, chain, window in temps:
        if chain:
            body = _at_store_level(body, buf, chain, not window)
            continue
        total = _uses(body, buf.name)
        if total:
            body = _place(body, buf, total, not window)
    placed = replace(func, body=body)
    return place_storage(placed, workspace)
