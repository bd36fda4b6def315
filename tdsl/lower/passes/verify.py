"""The loop-IR verifier, run between passes.

Checks: every variable is declared before use (sizes, loop variables,
lets); loop variables are not redeclared in their own scope; indices have
the index dtype; either every access has one index per dimension of its
buffer or, once the `flatten` pass has run, every access has exactly one
(its row-major offset); Binary/Compare operands share
a dtype; operations are the IR's own (`ir.Binary`, `ir.Call`), the
truncating `tdiv`/`trem` on integers (and `trem` on floats), `bitcast` between
a float and the int of its width; vectorized and unrolled loops have a constant max extent; every
temp buffer is used only inside its Allocate; a name names one buffer.
"""

from __future__ import annotations

from ... import dtypes as dt
from .. import ir
from ..rewrite import expr_children, stmt_exprs, walk_exprs, walk_stmts


class VerifyError(AssertionError):
    pass


BINARY_OPS = frozenset("add sub mul truediv floordiv mod min max and or xor pdiv pmod tdiv trem"
                       .split())
CALLS = {fn: 1 for fn in "exp log sqrt sin cos tanh floor ceil abs bitcast".split()} | {
    "copysign": 2}


def _operation(e: ir.Binary | ir.Call) -> None:
    """The operation is in the IR's vocabulary, on operands it is defined for."""
    if isinstance(e, ir.Binary):
        d = e.dtype
        if e.op not in BINARY_OPS:
            raise VerifyError(f"unknown operation {e.op}")
        if e.op in ("pdiv", "pmod") and d != dt.index:
            raise VerifyError(f"{e.op} on {d!r}: index only")
        if e.op == "tdiv" and not d.is_int or e.op == "trem" and d.is_bool:
            raise VerifyError(f"{e.op} on {d!r}")
        return
    if CALLS.get(e.fn) != len(e.args):
        raise VerifyError(f"unknown call {e.fn} of {len(e.args)} arguments")
    if e.fn == "bitcast":
        src = e.args[0].dtype
        if (src.bits != e.dtype.bits or src.is_float == e.dtype.is_float
                or src.is_bool or e.dtype.is_bool):
            raise VerifyError(f"bitcast of {src!r} to {e.dtype!r}")


def _expr(e: ir.Expr, scope: set[str], bufs: set[str]) -> None:
    match e:
        case ir.Var(name):
            if name not in scope:
                raise VerifyError(f"variable {name} used outside its scope")
        case ir.Load(buf, idx):
            _buffer(buf, idx, bufs)
        case ir.Call():
            _operation(e)
        case ir.Binary(op, a, b, d):
            _operation(e)
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
    for i in idx:
        if i.dtype != dt.index:
            raise VerifyError(f"index of {buf.name} has dtype {i.dtype!r}")


def _stmt(s: ir.Stmt, scope: set[str], bufs: set[str]) -> None:
    match s:
        case ir.For(var, start, end, kind, body, mx):
            _expr(start, scope, bufs)
            _expr(end, scope, bufs)
            if var in scope:
                raise VerifyError(f"loop variable {var} shadows an enclosing name")
            if kind in (ir.ForKind.VECTORIZED, ir.ForKind.UNROLLED) and mx is None:
                raise VerifyError(f"{kind.value} loop {var} has no constant extent")
            _stmt(body, scope | {var}, bufs)
        case ir.Let(name, v, body):
            _expr(v, scope, bufs)
            _stmt(body, scope | {name}, bufs)
        case ir.If(c, t, e):
            _expr(c, scope, bufs)
            _stmt(t, scope, bufs)
            if e is not None:
                _stmt(e, scope, bufs)
        case ir.Block(stmts):
            for x in stmts:
                _stmt(x, scope, bufs)
        case ir.Store(buf, idx, v):
            _buffer(buf, idx, bufs)
            for i in idx:
                _expr(i, scope, bufs)
            _expr(v, scope, bufs)
            if v.dtype != buf.dtype:
                raise VerifyError(f"store of {v.dtype!r} into {buf.name} of {buf.dtype!r}")
        case ir.Allocate(buf, body):
            for extent in buf.shape:
                _expr(extent, scope, bufs)
            _stmt(body, scope, bufs | {buf.name})
        case _:
            raise VerifyError(f"unknown statement {s!r}")


def _unique_buffers(func: ir.LoweredFunc) -> None:
    seen: dict[str, ir.Buffer] = {}
    for b in func.inputs + func.outputs + tuple(
            s.buffer for s in walk_stmts(func.body) if isinstance(s, ir.Allocate)):
        if seen.setdefault(b.name, b) is not b and seen[b.name] != b:
            raise VerifyError(f"two different buffers are named {b.name}")


def _accesses(func: ir.LoweredFunc):
    """(buffer, indices) of every load and store of `func`."""
    for s in walk_stmts(func.body):
        if isinstance(s, ir.Store):
            yield s.buffer, s.indices
        for top in stmt_exprs(s):
            for e in walk_exprs(top):
                if isinstance(e, ir.Load):
                    yield e.buffer, e.indices


def _ranks(func: ir.LoweredFunc) -> None:
    """Every access per dimension, or every access flat (one index)."""
    accesses = list(_accesses(func))
    if all(len(idx) == 1 for _, idx in accesses):
        return
    for buf, idx in accesses:
        if len(idx) != len(buf.shape):
            raise VerifyError(f"{buf.name} has rank {len(buf.shape)}, indexed with {len(idx)} "
                              "(accesses are flat only when all of them are)")


def verify(func: ir.LoweredFunc, pending: frozenset[str] = frozenset()) -> ir.LoweredFunc:
    """`func`, once its invariants are checked (VerifyError otherwise); `pending` names
    the temp buffers the allocate pass has yet to place (used anywhere until then)."""
    _unique_buffers(func)
    _ranks(func)
    scope = {v.name for v in func.sizes}
    for b in func.inputs + func.outputs:
        for e in b.shape:
            _expr(e, scope, set())
    _stmt(func.body, scope, set(pending))
    return func
