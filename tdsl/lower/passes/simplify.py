"""Constant folding and index simplification.

Guarantees: the result computes the same values; index arithmetic on
constants is folded, `x + 0`, `x * 1`, `x - 0` vanish, min/max of constants
fold, min/max and comparisons of index expressions that differ by a constant
fold (`4*i + 3 < 4*i + 4` is true), and `If` on a constant condition keeps
only the taken branch.
"""

from __future__ import annotations

from ... import dtypes as dt
from .. import ir
from ..rewrite import Rewriter

_FOLD = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "min": min,
    "max": max,
    "floordiv": lambda a, b: a // b if b else None,
    "mod": lambda a, b: a % b if b else None,
    "pdiv": lambda a, b: a // b if b and a >= 0 and b > 0 else None,
    "pmod": lambda a, b: a % b if b and a >= 0 and b > 0 else None,
}


def _is(e, v) -> bool:
    return isinstance(e, ir.Const) and e.value == v


def _linear(e: ir.Expr, scale: int, terms: dict, const: list) -> None:
    """Accumulate `scale * e` as {atom: coefficient} plus a constant."""
    match e:
        case ir.Const(v):
            const[0] += scale * v
        case ir.Binary("add", a, b):
            _linear(a, scale, terms, const)
            _linear(b, scale, terms, const)
        case ir.Binary("sub", a, b):
            _linear(a, scale, terms, const)
            _linear(b, -scale, terms, const)
        case ir.Unary("neg", a):
            _linear(a, -scale, terms, const)
        case ir.Binary("mul", ir.Const(c), a) | ir.Binary("mul", a, ir.Const(c)):
            _linear(a, scale * c, terms, const)
        case _:
            terms[e] = terms.get(e, 0) + scale


def _term(atom: ir.Expr, c: int) -> ir.Expr:
    c = abs(c)
    return atom if c == 1 else ir.Binary("mul", ir.Const(c, dt.index), atom, dt.index)


def normalize(e: ir.Expr) -> ir.Expr:
    """Rewrite an index expression as a sum of terms: positive terms, negative terms, constant."""
    terms: dict = {}
    const = [0]
    _linear(e, 1, terms, const)
    terms = {a: c for a, c in terms.items() if c}
    if const[0] and len(terms) == 1:
        (atom, c), = terms.items()
        if c == 1 and isinstance(atom, ir.Binary) and atom.op in ("min", "max"):
            k = ir.Const(const[0], dt.index)
            return ir.Binary(atom.op, normalize(ir.Binary("add", atom.a, k, dt.index)),
                             normalize(ir.Binary("add", atom.b, k, dt.index)), dt.index)
    pos = [_term(a, c) for a, c in terms.items() if c > 0]
    neg = [_term(a, c) for a, c in terms.items() if c < 0]
    if not pos:
        out = ir.Const(const[0], dt.index) if not neg or const[0] else None
        if out is None:
            out = ir.Unary("neg", neg.pop(0), dt.index)
        elif neg:
            out = ir.Binary("sub", out, neg.pop(0), dt.index)
    else:
        out = pos[0]
        for t in pos[1:]:
            out = ir.Binary("add", out, t, dt.index)
    for t in neg:
        out = ir.Binary("sub", out, t, dt.index)
    if pos and const[0]:
        op = "add" if const[0] > 0 else "sub"
        out = ir.Binary(op, out, ir.Const(abs(const[0]), dt.index), dt.index)
    return out


_COMPARE = {
    "lt": lambda d: d < 0,
    "le": lambda d: d <= 0,
    "gt": lambda d: d > 0,
    "ge": lambda d: d >= 0,
    "eq": lambda d: d == 0,
    "ne": lambda d: d != 0,
}


def _difference(a: ir.Expr, b: ir.Expr) -> int | None:
    """a - b when it is a constant (both index expressions), else None."""
    if a.dtype != dt.index or b.dtype != dt.index:
        return None
    d = normalize(ir.Binary("sub", a, b, dt.index))
    return d.value if isinstance(d, ir.Const) else None


class _Simplify(Rewriter):
    def expr(self, e):
        if isinstance(e, ir.Compare) and e.op in _COMPARE:
            d = _difference(e.a, e.b)
            return ir.Const(_COMPARE[e.op](d), dt.bool_) if d is not None else None
        if isinstance(e, ir.Binary) and e.op in ("min", "max"):
            d = _difference(e.a, e.b)
            if d is not None:
                return e.a if (d <= 0) == (e.op == "min") else e.b
        if not isinstance(e, ir.Binary) or e.dtype != dt.index:
            if isinstance(e, ir.Unary) and e.dtype == dt.index and isinstance(e.a, ir.Const):
                return ir.Const(-e.a.value, dt.index)
            return None
        a, b = e.a, e.b
        if isinstance(a, ir.Const) and isinstance(b, ir.Const) and e.op in _FOLD:
            v = _FOLD[e.op](a.value, b.value)
            return ir.Const(v, dt.index) if v is not None else None
        if e.op in ("add", "sub", "mul"):
            n = normalize(e)
            return None if n == e else n
        if e.op == "add" and _is(b, 0) or e.op == "sub" and _is(b, 0):
            return a
        if e.op == "add" and _is(a, 0):
            return b
        if e.op == "mul" and _is(b, 1):
            return a
        if e.op == "mul" and _is(a, 1):
            return b
        if e.op == "mul" and (_is(a, 0) or _is(b, 0)):
            return ir.Const(0, dt.index)
        if e.op == "sub" and isinstance(a, ir.Binary) and a.op == "add" and a.b == b:
            return a.a  # (x + y) - y
        return None

    def stmt(self, s):
        if isinstance(s, ir.If) and isinstance(s.cond, ir.Const):
            return s.then if s.cond.value else (s.else_ or ir.Block(()))
        if isinstance(s, ir.Block):
            flat = []
            for x in s.stmts:
                flat.extend(x.stmts if isinstance(x, ir.Block) else (x,))
            if len(flat) == 1:
                return flat[0]
            if len(flat) != len(s.stmts):
                return ir.Block(tuple(flat))
        return None


def simplify(func: ir.LoweredFunc) -> ir.LoweredFunc:
    return ir.LoweredFunc(func.name, func.inputs, func.outputs, func.sizes,
                          _Simplify().visit(func.body))
