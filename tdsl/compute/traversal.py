"""Walking the algorithm's expressions: their children, pre-order walks, bottom-up
rewrites and substitution, the structural key two expressions share when they compute
the same thing, the dims and sizes they use, and whether an index is affine (what isl
models exactly)."""

from __future__ import annotations

from collections.abc import Mapping

from .nodes import (
    Acc,
    Access,
    Axis,
    Binary,
    Call,
    Cast,
    Checked,
    Compare,
    Const,
    Dim,
    Expr,
    Item,
    Pack,
    Reduce,
    Select,
    Size,
    Unary,
)


def children(e: Expr) -> tuple[Expr, ...]:
    match e:
        case Const() | Dim() | Size():
            return ()
        case Access(_, idx):
            return idx
        case Binary(_, a, b) | Compare(_, a, b):
            return (a, b)
        case Unary(_, a) | Cast(a):
            return (a,)
        case Call(_, args):
            return args
        case Select(c, a, b):
            return (c, a, b)
        case Checked(a, n):
            return (a, n)
        case Reduce(_, body, axes):
            return (body, *(x for ax in axes for x in (ax.lo, ax.hi)))
        case Pack(items):
            return items
        case Item(fold):
            return (fold,)
        case Acc():
            return ()
    raise TypeError(f"not an expression node: {e!r}")


def walk(e: Expr):
    """Pre-order iteration over an expression tree."""
    stack = [e]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(children(n)))


def rebuild(e: Expr, kids: tuple[Expr, ...]) -> Expr:
    match e:
        case Access(t, _):
            return Access(t, kids)
        case Binary(op, _, _, d):
            return Binary(op, kids[0], kids[1], d)
        case Compare(op, _, _):
            return Compare(op, kids[0], kids[1])
        case Unary(op, _, d):
            return Unary(op, kids[0], d)
        case Cast(_, d):
            return Cast(kids[0], d)
        case Call(fn, _, d):
            return Call(fn, kids, d)
        case Select(_, _, _, d):
            return Select(kids[0], kids[1], kids[2], d)
        case Checked():
            return Checked(kids[0], kids[1])
        case Reduce(op, _, axes, d):
            new_axes = tuple(
                Axis(ax.dim, kids[1 + 2 * n], kids[2 + 2 * n]) for n, ax in enumerate(axes)
            )
            return Reduce(op, kids[0], new_axes, d, e.name)
        case Pack(_, token):
            return Pack(kids, token)
        case Item(_, index):
            assert isinstance(kids[0], Reduce)
            return Item(kids[0], index)
    return e


def transform(e: Expr, fn) -> Expr:
    """Bottom-up rewrite: `fn(node)` returns a replacement or None to keep it."""
    kids = children(e)
    if kids:
        new = tuple(transform(k, fn) for k in kids)
        if any(n is not k for n, k in zip(new, kids)):
            e = rebuild(e, new)
    out = fn(e)
    return e if out is None else out


def substitute(e: Expr, mapping: dict) -> Expr:
    """Replace dims (or sizes) by expressions, keyed by the Dim object."""
    return transform(e, lambda n: mapping.get(n) if isinstance(n, (Dim, Size)) else None)


def structure(e: Expr, bound: Mapping[Dim, tuple[object, ...]] | None = None
               ) -> tuple[object, ...]:
    """A key equal for two expressions exactly when they compute the same thing: the same
    nodes, dtypes and constants, the same Size and tensor objects, the same free Dim
    objects, and reduction dims in the same places (whatever their objects)."""
    bound = bound or {}
    match e:
        case Const(v, d):
            return ("const", type(v).__name__, repr(v), d.name)
        case Dim():
            return bound.get(e, ("dim", id(e)))
        case Size():
            return ("size", id(e))
        case Access(t, idx):
            return ("access", id(t), *(structure(x, bound) for x in idx))
        case Reduce(op, body, axes, d):
            inner = dict(bound)
            bounds = []
            for ax in axes:
                bounds.append((structure(ax.lo, inner), structure(ax.hi, inner)))
                inner[ax.dim] = ("bound", len(inner))
            return ("reduce", op, d.name, tuple(bounds), structure(body, inner))
        case Acc(token, index, d):
            return ("acc", token, index, d.name)
        case Item(fold, index):
            return ("item", index, structure(fold, bound))
    head = getattr(e, "op", None) or getattr(e, "fn", None)
    return (type(e).__name__, head, e.dtype.name, *(structure(c, bound) for c in children(e)))


def free_dims(e: Expr) -> list[Dim]:
    seen: dict[Dim, None] = {}
    bound: set = set()
    for n in walk(e):
        if isinstance(n, Reduce):
            bound.update(ax.dim for ax in n.axes)
        if isinstance(n, Dim):
            seen[n] = None
    return [d for d in seen if d not in bound]


def sizes_in(e: Expr) -> list[Size]:
    return list(dict.fromkeys(n for n in walk(e) if isinstance(n, Size)))


def is_affine_index(e: Expr) -> bool:
    """True when `e` is quasi-affine in dims and sizes, or a min/max of such (what isl
    models exactly, as piecewise affine functions)."""
    match e:
        case Const(v, d):
            return d.is_int
        case Dim() | Size():
            return True
        case Cast(a, d):
            return d.is_int and d.bits >= 32 and is_affine_index(a)
        case Unary("neg", a):
            return is_affine_index(a)
        case Binary("add" | "sub" | "min" | "max", a, b):
            return is_affine_index(a) and is_affine_index(b)
        case Binary("mul", a, b):
            return (is_affine_index(a) and isinstance(b, Const)) or (
                isinstance(a, Const) and is_affine_index(b)
            )
        case Binary("floordiv" | "mod", a, Const(v)):
            return is_affine_index(a) and v > 0
    return False
