"""index32: index arithmetic in 32 bits wherever the sizes allow (portable C).

On a 32-bit core a 64-bit loop counter costs a compare of two words and an
add with carry at every iteration. This pass bounds the magnitude of every
index value the function computes (every loop bound, let, index and
subexpression of them) by a polynomial in the sizes with non-negative
coefficients (`Poly`): a size is at most itself, a constant its absolute
value, a loop variable the larger of its bounds' magnitudes; sums and
products add and multiply the bounds, a division by a constant divides
them (rounding up, plus one for a floor), a remainder by a constant is
below the constant, a min, max or select is at most the larger bound; an
integer value cast to an index is at most its dtype's largest magnitude.

When every bound is a constant of at most INT32_MAX, or a polynomial in the
sizes, the function's index arithmetic becomes `dtypes.index32`: each size
is bound once to a 32-bit copy at the top of the body, every index
expression is rewritten in index32, and the polynomials that are not
constants become `LoweredFunc.index_limits`, which the entry point checks
(each at most INT32_MAX, computed without overflow) before it runs, refusing
the sizes otherwise. A bound above INT32_MAX at the smallest sizes (every size
1: a constant above it, or a polynomial no sizes could meet, such as a row
times the range of an int32 index), or a value that cannot be bounded (an
index cast from a 64-bit integer), leaves the function as it is, in 64 bits.

Guarantees: where it narrows, every index value, and every intermediate
value of an index expression, lies in [-INT32_MAX, INT32_MAX] for every size
the entry point accepts, so the 32-bit arithmetic is exact; buffer shapes
stay in 64 bits (they size the workspace, computed in 64 bits by the entry
point); the function computes the same values.
"""

from __future__ import annotations

from dataclasses import replace

from ... import dtypes as dt
from .. import ir
from ..build import binary, call, cast, const, select, unary
from ..rewrite import Rewriter, bound_names, expr_children, free_vars

INT32_MAX = 2**31 - 1

# A bound on a magnitude: monomial (sorted size names, with repeats) -> coefficient >= 0
Poly = dict[tuple[str, ...], int]


class Unbounded(Exception):
    """An index value this analysis cannot bound."""


def _const(c: int) -> Poly:
    return {(): abs(c)} if c else {}


def _add(p: Poly, q: Poly) -> Poly:
    out = dict(p)
    for m, c in q.items():
        out[m] = out.get(m, 0) + c
    return out


def _mul(p: Poly, q: Poly) -> Poly:
    out: Poly = {}
    for m1, c1 in p.items():
        for m2, c2 in q.items():
            m = tuple(sorted(m1 + m2))
            out[m] = out.get(m, 0) + c1 * c2
    return out


def _max(p: Poly, q: Poly) -> Poly:
    """A bound on the larger of two values bounded by p and q (coefficient-wise: every
    monomial is at least 0)."""
    out = dict(p)
    for m, c in q.items():
        out[m] = max(out.get(m, 0), c)
    return out


def _div(p: Poly, d: int, floor: bool) -> Poly:
    out = {m: -(-c // d) for m, c in p.items()}
    return _add(out, _const(1)) if floor else out


def dominated(p: Poly, q: Poly) -> bool:
    """Whether p <= q for every sizes >= 1: each monomial of p is paid for by a monomial
    of q that it divides (a size is at least 1), with what q's coefficient has left."""
    left = dict(q)
    for m, c in sorted(p.items(), key=lambda mc: -len(mc[0])):
        for m2 in sorted(left, key=len):
            if c == 0:
                break
            if left[m2] and _divides(m, m2):
                used = min(c, left[m2])
                left[m2] -= used
                c -= used
        if c:
            return False
    return True


def _divides(m: tuple[str, ...], m2: tuple[str, ...]) -> bool:
    rest = list(m2)
    for name in m:
        if name not in rest:
            return False
        rest.remove(name)
    return True


class _Bounds:
    """Bounds of the index values of a function, collected as they are computed."""

    def __init__(self, sizes: set[str]) -> None:
        self.sizes = sizes
        self.env: dict[str, Poly] = {}
        self.found: list[Poly] = []

    def expr(self, e: ir.Expr) -> Poly:
        """The bound of `e` (an index expression or one that holds some), every index
        subexpression's bound recorded."""
        p = self._expr(e)
        if e.dtype == dt.index:
            self.found.append(p)
        return p

    def _expr(self, e: ir.Expr) -> Poly:
        match e:
            case ir.Const(value, t) if t == dt.index:
                return _const(int(value))
            case ir.Var(name, t) if t == dt.index:
                if name in self.env:
                    return self.env[name]
                if name in self.sizes:
                    return {(name,): 1}
                raise Unbounded(name)
            case ir.Cast(a, t) if t == dt.index:
                self.expr(a)
                if a.dtype.is_bool:
                    return _const(1)
                if not a.dtype.is_int or a.dtype.bits > 32 or a.dtype == dt.uint32:
                    raise Unbounded(f"an index cast from {a.dtype!r}")
                return _const(max(1 << (a.dtype.bits - (1 if a.dtype.is_signed else 0)), 1))
            case ir.Binary(op, a, b, t) if t == dt.index:
                return self._binary(op, a, b)
            case ir.Unary(_, a, t) if t == dt.index:
                return self.expr(a)
            case ir.Call("abs", (a,), t) if t == dt.index:
                return self.expr(a)
            case ir.Select(c, a, b, t) if t == dt.index:
                self.expr(c)
                return _max(self.expr(a), self.expr(b))
        if e.dtype == dt.index:
            raise Unbounded(repr(e))
        for k in expr_children(e):  # a value of another dtype: the index values inside it
            self.expr(k)
        return {}

    def _binary(self, op: str, a: ir.Expr, b: ir.Expr) -> Poly:
        pa, pb = self.expr(a), self.expr(b)
        d = ir.int_value(b)
        match op:
            case "add" | "sub":
                return _add(pa, pb)
            case "mul":
                return _mul(pa, pb)
            case "min" | "max":
                return _max(pa, pb)
            case "pdiv" | "tdiv" | "floordiv" if d:
                return _div(pa, abs(d), floor=op == "floordiv")
            case "pmod" | "trem" | "mod" if d:  # below the divisor
                return _const(abs(d) - 1)
            case "pdiv" | "tdiv" | "floordiv":  # a computed divisor, never 0
                return pa
            case "pmod" | "trem" | "mod":
                return pb
        return _mul(_const(2), _add(pa, pb))  # bitwise: below twice the larger

    def stmt(self, s: ir.Stmt) -> None:
        match s:
            case ir.For(var, start, end, _, body):
                bound = _max(self.expr(start), self.expr(end))
                self._bind(var, bound, body)
            case ir.Let(name, value, body):
                bound = self.expr(value)
                if value.dtype == dt.index:
                    self._bind(name, bound, body)
                else:
                    self.stmt(body)
            case ir.If(c, t, e):
                self.expr(c)
                self.stmt(t)
                if e is not None:
                    self.stmt(e)
            case ir.Block(stmts):
                for x in stmts:
                    self.stmt(x)
            case ir.Store(_, idx, value):
                for i in idx:
                    self.expr(i)
                self.expr(value)
            case ir.Allocate(_, body):
                self.stmt(body)
            case ir.IfFeature(_, t, e):
                self.stmt(t)
                self.stmt(e)
            case _:
                raise Unbounded(f"statement {type(s).__name__}")

    def _bind(self, name: str, bound: Poly, body: ir.Stmt) -> None:
        saved = self.env.get(name)
        self.env[name] = bound
        self.stmt(body)
        if saved is None:
            del self.env[name]
        else:
            self.env[name] = saved


def index_bounds(func: ir.LoweredFunc) -> list[Poly] | None:
    """The bounds that 32-bit index arithmetic needs (the largest ones: those no other
    dominates), or None when some index value cannot be bounded."""
    b = _Bounds({v.name for v in func.sizes})
    try:
        b.stmt(func.body)
    except Unbounded:
        return None
    kept: list[Poly] = []
    for p in sorted(b.found, key=lambda x: -sum(x.values())):
        if p and not any(dominated(p, q) for q in kept):
            kept.append(p)
    return kept


class _Narrow(Rewriter):
    """Every index-typed node in index32; sizes read through their 32-bit copies."""

    def __init__(self, copies: dict[str, str]) -> None:
        self.copies = copies

    def expr(self, e: ir.Expr) -> ir.Expr | None:
        match e:
            case ir.Var(name, t) if t == dt.index:
                return ir.Var(self.copies.get(name, name), dt.index32)
            case ir.Const(value, t) if t == dt.index:
                return const(value, dt.index32)
            case ir.Binary(op, a, b, t) if t == dt.index:
                return binary(op, a, b)  # its operands are index32 now
            case ir.Unary(op, a, t) if t == dt.index:
                return unary(op, a)
            case ir.Call(fn, args, t) if t == dt.index:
                return call(fn, args, dt.index32)
            case ir.Select(c, a, b, t) if t == dt.index:
                return select(c, a, b)
            case ir.Cast(a, t) if t == dt.index:
                return a if a.dtype == dt.index32 else cast(a, dt.index32)
        return None


def narrow_indices(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` with 32-bit index arithmetic where its sizes allow (see the module)."""
    bounds = index_bounds(func)
    if bounds is None:
        return func
    limits = []
    for p in bounds:
        # every size is at least 1, so a bound is at least the sum of its coefficients:
        # above INT32_MAX, no sizes could pass the entry point's check
        if sum(p.values()) > INT32_MAX:
            return func
        if all(not m for m in p):  # a constant
            continue
        limits.append(tuple(sorted((c, m) for m, c in p.items() if c)))
    taken = {v.name for v in func.sizes} | bound_names(func.body)
    used = free_vars(func.body)
    copies: dict[str, str] = {}
    for v in func.sizes:
        if v.name not in used:
            continue
        name, n = f"{v.name}32", 1
        while name in taken:
            n += 1
            name = f"{v.name}32_{n}"
        taken.add(name)
        copies[v.name] = name
    body = _Narrow(copies).visit(func.body)
    for v in reversed(func.sizes):
        if v.name in copies:
            body = ir.Let(copies[v.name], cast(ir.Var(v.name), dt.index32), body)
    return replace(func, body=body, index_limits=tuple(limits))
