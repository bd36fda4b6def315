"""The loop-IR verifier, run between passes.

Checks: every variable is declared before use (sizes, loop variables,
lets); loop variables are not redeclared in their own scope; indices have
the index dtype and match the buffer's rank; Binary/Compare operands share
a dtype; vectorized and unrolled loops have a constant max extent; every
temp buffer is used only inside its Allocate; a name names one buffer;
every allocation has its storage once the allocate pass has run, and one on
the stack has a constant size within `ir.STACK_LIMIT`.
"""

from __future__ import annotations

from ... import dtypes as dt
from .. import ir
from ..rewrite import expr_children, walk_stmts


class VerifyError(AssertionError):
    pass


def _expr(e: ir.Expr, scope: set[str], bufs: set[str]) -> None:
    match e:
        case ir.Var(name):
            if name not in scope:
                raise VerifyError(f"variable {name} used outside its scope")
        case ir.Load(buf, idx):
            _buffer(buf, idx, bufs)
        case ir.Binary(op, a, b, d):
            if d == dt.index:
                if a.dtype != dt.index or b.dtype != dt.index:
                    raise VerifyError(f"index {op} on {a.dtype!r}, {b.dtype!r}")
            elif op in ("and", "or") and d == dt.bool_:
                pass
            elif a.dtype != b.dtype:
                raise VerifyError(f"{op} on different dtypes {a.dtype!r}, {b.dtype!r}")
        case ir.Compare(op, a, b):
            if a.dtype != b.dtype:
                raise VerifyError(f"compare {op} on different dtypes {a.dtype!r}, {b.dtype!r}")
    for k in expr_children(e):
        _expr(k, scope, bufs)


def _buffer(buf: ir.Buffer, idx, bufs: set[str]) -> None:
    if buf.kind == "temp" and buf.name not in bufs:
        raise VerifyError(f"temp buffer {buf.name} used outside its Allocate")
    if len(idx) != len(buf.shape):
        raise VerifyError(f"{buf.name} has rank {len(buf.shape)}, indexed with {len(idx)}")
    for i in idx:
        if i.dtype != dt.index:
            raise VerifyError(f"index of {buf.name} has dtype {i.dtype!r}")


def _storage(s: ir.Allocate, placed: bool) -> None:
    buf = s.buffer
    if s.storage is None and placed:
        raise VerifyError(f"temp buffer {buf.name} has no storage (the allocate pass gives it one)")
    if s.storage is ir.Storage.STACK and not ir.fits_stack(buf):
        raise VerifyError(f"temp buffer {buf.name} is on the stack but its size is not a "
                          f"constant of at most {ir.STACK_LIMIT} bytes")


def _stmt(s: ir.Stmt, scope: set[str], bufs: set[str], placed: bool) -> None:
    match s:
        case ir.For(var, start, end, kind, body, mx):
            _expr(start, scope, bufs)
            _expr(end, scope, bufs)
            if var in scope:
                raise VerifyError(f"loop variable {var} shadows an enclosing name")
            if kind in (ir.ForKind.VECTORIZED, ir.ForKind.UNROLLED) and mx is None:
                raise VerifyError(f"{kind.value} loop {var} has no constant extent")
            _stmt(body, scope | {var}, bufs, placed)
        case ir.Let(name, v, body):
            _expr(v, scope, bufs)
            _stmt(body, scope | {name}, bufs, placed)
        case ir.If(c, t, e):
            _expr(c, scope, bufs)
            _stmt(t, scope, bufs, placed)
            if e is not None:
                _stmt(e, scope, bufs, placed)
        case ir.Block(stmts):
            for x in stmts:
                _stmt(x, scope, bufs, placed)
        case ir.Store(buf, idx, v):
            _buffer(buf, idx, bufs)
            for i in idx:
                _expr(i, scope, bufs)
            _expr(v, scope, bufs)
            if v.dtype != buf.dtype:
                raise VerifyError(f"store of {v.dtype!r} into {buf.name} of {buf.dtype!r}")
        case ir.Allocate(buf, body):
            _storage(s, placed)
            for extent in buf.shape:
                _expr(extent, scope, bufs)
            _stmt(body, scope, bufs | {buf.name}, placed)
        case _:
            raise VerifyError(f"unknown statement {s!r}")


def _unique_buffers(func: ir.LoweredFunc) -> None:
    seen: dict[str, ir.Buffer] = {}
    for b in func.inputs + func.outputs + tuple(
            s.buffer for s in walk_stmts(func.body) if isinstance(s, ir.Allocate)):
        if seen.setdefault(b.name, b) is not b and seen[b.name] != b:
            raise VerifyError(f"two different buffers are named {b.name}")


def verify(func: ir.LoweredFunc, pending: frozenset[str] = frozenset(),
           placed: bool = True) -> ir.LoweredFunc:
    """`func`, once its invariants are checked (VerifyError otherwise). Before the
    allocate pass, `pending` names the temp buffers it has yet to place (used anywhere
    until then) and `placed=False` lets allocations go without their storage."""
    _unique_buffers(func)
    scope = {v.name for v in func.sizes}
    for b in func.inputs + func.outputs:
        for e in b.shape:
            _expr(e, scope, set())
    _stmt(func.body, scope, set(pending), placed)
    return func
