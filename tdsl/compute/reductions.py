"""Reductions: `td.sum`, `td.prod`, `td.max`, `td.min`, the general fold `td.reduce`,
`td.argmax` and `td.argmin`, and the value each reduction starts from (`identity`).

A reduction is an expression (a `Reduce` node) over the dims `over=` lists; a named
one becomes a stage where a definition uses it (`tensor.lift_named`)."""

from __future__ import annotations

import itertools

import numpy as np

from .. import dtypes as dt
from ..dtypes import DType
from ..errors import DefinitionError
from .functions import where
from .naming import check_name, checked_bound, checked_extent, one_dim_hint
from .nodes import Acc, Access, Axis, Dim, Expr, Item, Pack, Reduce, Unary, _coerce, binary, const
from .ops import ReduceOp
from .traversal import free_dims, substitute, walk
from .views import BoundaryView

_IDENTITY = {"sum": 0, "prod": 1}


def _infer_extent(body: Expr, dim: Dim, what: str) -> Expr:
    found: list[tuple[str, Expr]] = []
    for n in walk(body):
        if isinstance(n, Access):
            t = n.tensor.tensor if isinstance(n.tensor, BoundaryView) else n.tensor
            for pos, ix in enumerate(n.indices):
                if ix is dim:
                    found.append((t.name, t.shape[pos]))
    if not found:
        raise DefinitionError(
            f"{what}: cannot infer the extent of reduction dim {dim.name}: no tensor is indexed by "
            f"{dim.name} alone; give it explicitly, e.g. over={{{dim.name}: 16}} or over={{{dim.name}: (lo, hi)}}"
        )
    shown = {repr(e) for _, e in found}
    if len(shown) > 1:
        listing = ", ".join(f"{t}: {e!r}" for t, e in found)
        raise DefinitionError(
            f"{what}: reduction dim {dim.name} indexes tensors of different extents ({listing}); "
            f"give its extent explicitly with over={{{dim.name}: ...}}"
        )
    return found[0][1]


def _reduce(op: ReduceOp, body, over, dtype, name: str | None = None) -> Reduce:
    what = f"td.{op}"
    if name is not None:
        check_name(name, f"{what}: the reduction")
    if over is None:
        raise DefinitionError(
            f"{what} needs over=: the dim(s) to reduce, e.g. {what}(A[i, k], over=k) or "
            f"over={{k: 512}}")
    body = const(body) if not isinstance(body, Expr) else body
    axes = _axes(over, body, what)
    acc = dt.as_dtype(dtype) if dtype is not None else body.dtype
    if acc.is_bool and op in _IDENTITY:
        raise DefinitionError(
            f"{what} over a bool expression: give the accumulator dtype, e.g. {what}(..., dtype=td.int32)"
        )
    return Reduce(op, _coerce(body, acc), axes, acc, name)


def _axes(over, body: Expr, what: str) -> tuple[Axis, ...]:
    """The axes `over=` lists (extents left out are those of the tensors `body` indexes)."""
    if isinstance(over, Dim):
        over = (over,)
    if isinstance(over, (tuple, list)):
        over = {d: None for d in over}
    if not isinstance(over, dict) or not over:
        raise DefinitionError(f"{what}: over= must be a dim, a tuple of dims or a dict {{dim: extent}}")
    axes = []
    for d, ext in over.items():
        if not isinstance(d, Dim):
            raise DefinitionError(f"{what}: over= key {d!r} is not a td.dim{one_dim_hint(d)}")
        if ext is None:
            lo, hi = const(0, dt.int64), _infer_extent(body, d, what)
        elif isinstance(ext, tuple):
            if len(ext) != 2:
                raise DefinitionError(f"{what}: bounds of {d.name} must be (lo, hi), got {ext!r}")
            lo, hi = (checked_bound(b, f"{what} over {d.name}") for b in ext)
        else:
            lo, hi = const(0, dt.int64), checked_extent(ext, f"{what} over {d.name}")
        for b in (lo, hi):
            if not b.dtype.is_int:
                raise DefinitionError(f"{what}: bound {b!r} of {d.name} must be an integer expression")
        axes.append(Axis(d, lo, hi))
    return tuple(axes)


_fold_tokens = itertools.count()


def reduce(update, init, over, dtype=None) -> tuple[Expr, ...]:
    """A general reduction: several values carried together through the points of
    `over`, in order, as a fold. `init` gives their start values (numbers, or
    expressions of the enclosing dims); `update(acc)` is called once, with `acc` the
    tuple of values so far (expressions), and returns the tuple of new values at a point
    of `over`, whose dims it may use. The result is the tuple of final values, each an
    expression that may stand anywhere an expression goes (like `td.sum`).

        # the largest value of x[k] and the first k where it occurs, in one pass
        best, where = td.reduce(
            lambda acc: (td.maximum(acc[0], x[k]), td.where(x[k] > acc[0], k, acc[1])),
            init=(-np.inf, 0), over=k)

    The dtypes are `dtype` (a tuple, one per value), else those of the start values (a
    Python int is int64, a float float64); each new value is converted to its value's
    dtype. `over` is as for `td.sum`. Both backends and `td.evaluate` compute it the
    same way, in order, so integers agree bit for bit.
    """
    what = "td.reduce"
    if not callable(update):
        raise DefinitionError(f"{what}: update must be a function of the tuple of values so "
                              f"far, returning the new tuple, e.g. lambda acc: (acc[0] + x[k],)")
    starts = tuple(init) if isinstance(init, (tuple, list)) else (init,)
    if not starts:
        raise DefinitionError(f"{what}: init= must give at least one start value")
    if dtype is not None:
        kinds = tuple(dtype) if isinstance(dtype, (tuple, list)) else (dtype,)
        if len(kinds) != len(starts):
            raise DefinitionError(f"{what}: {len(kinds)} dtypes for {len(starts)} values")
        types = tuple(dt.as_dtype(d) for d in kinds)
    else:
        types = tuple(_start_dtype(v, what) for v in starts)
    token = next(_fold_tokens)
    accs = tuple(Acc(token, k, d) for k, d in enumerate(types))
    steps = update(accs)
    steps = tuple(steps) if isinstance(steps, (tuple, list)) else (steps,)
    if len(steps) != len(starts):
        raise DefinitionError(f"{what}: update returned {len(steps)} values for the "
                              f"{len(starts)} of init=")
    body = Pack(tuple(_coerce(v, d) for v, d in zip(starts + steps, types + types)), token)
    axes = _axes(over, Pack(tuple(_coerce(v, d) for v, d in zip(steps, types)), token), what)
    bound = {ax.dim for ax in axes}
    for v in body.starts:
        if bound & set(free_dims(v)):
            raise DefinitionError(f"{what}: the start value {v!r} uses a dim of over=; start "
                                  "values are computed before the reduction")
    red = Reduce("fold", body, axes, types[0])
    return tuple(Item(red, k) for k in range(len(types)))


def _start_dtype(value, what: str) -> DType:
    if isinstance(value, Expr):
        return value.dtype
    if isinstance(value, np.generic):
        return dt.as_dtype(value.dtype)
    if isinstance(value, bool):
        return dt.bool_
    if isinstance(value, int):
        return dt.int64
    if isinstance(value, float):
        return dt.float64
    raise DefinitionError(f"{what}: start value {value!r} is not a number or an expression")


def sum(body, over=None, dtype=None, name=None) -> Reduce:  # noqa: A001
    """Sum of `body` over the dims in `over`, accumulated in `dtype` (default: body's).

    `over` is a dim, a tuple of dims, or a dict {dim: extent or (lo, hi)}; without an
    extent, it is that of the tensors the dim indexes. The terms are added in order
    (first dim outermost) unless a schedule says otherwise.

    A reduction is an expression: it may be a stage's whole definition, or stand
    anywhere an expression goes (`td.sum(A[i, k] * B[k, j], over=k) * alpha + C0[i, j]`,
    inside another reduction, in an update's value). There it is computed in full at
    each point where it is used. `name="acc"` makes it a stage of that name instead,
    over the enclosing dims it uses, which a schedule can then place (`compute_at`,
    `rfactor`, ...); the values are the same."""
    return _reduce("sum", body, over, dtype, name)


def prod(body, over=None, dtype=None, name=None) -> Reduce:
    """Product of `body` over the dims in `over`, in `dtype` (default: body's). See
    `td.sum` for `over`, `name` and reductions inside expressions."""
    return _reduce("prod", body, over, dtype, name)


def max(body, over=None, dtype=None, name=None) -> Reduce:  # noqa: A001
    """Maximum of `body` over the dims in `over` (NaN if any term is NaN, as numpy's
    max). See `td.sum` for `over`, `name` and reductions inside expressions."""
    return _reduce("max", body, over, dtype, name)


def min(body, over=None, dtype=None, name=None) -> Reduce:  # noqa: A001
    """Minimum of `body` over the dims in `over` (NaN if any term is NaN, as numpy's
    min). See `td.sum` for `over`, `name` and reductions inside expressions."""
    return _reduce("min", body, over, dtype, name)


def argmax(body, over=None) -> Expr:
    """The index along one dim where `body` is largest: numpy's argmax (the first such
    index on ties; the first NaN, if there is one). `td.argmax(logits[b, c], over=c)`.

    The result is the dim's value, an int64 between the bounds of `over` (with
    `over={c: (lo, hi)}`, numpy's argmax of the slice plus lo); an empty range gives hi.
    It may stand anywhere an expression goes, like any reduction."""
    return _arg("max", body, over)


def argmin(body, over=None) -> Expr:
    """The index along one dim where `body` is smallest: numpy's argmin (the first such
    index on ties; the first NaN, if there is one). See `td.argmax`."""
    return _arg("min", body, over)


def _arg(op: ReduceOp, body, over) -> Expr:
    what = f"td.arg{op}"
    red = _reduce(op, body, over, None)
    if len(red.axes) != 1:
        raise DefinitionError(
            f"{what} finds an index along one dim; over= lists {len(red.axes)} "
            f"({', '.join(ax.dim.name for ax in red.axes)}). Reduce the others first, e.g. "
            f"{what}(td.max(x, over=j), over=i)")
    ax, b = red.axes[0], red.body
    if b.dtype.is_bool and op == "min":  # numpy: False < True
        b = Unary("invert", b, b.dtype)
        op = "max"
        red = Reduce("max", b, red.axes, b.dtype)
    # the extreme value over a dim of its own, computed once per point of the result
    k = Dim(f"{ax.dim.name}_best")
    best = Reduce(op, substitute(b, {ax.dim: k}), (Axis(k, ax.lo, ax.hi),), red.dtype)
    hit = b == best
    if b.dtype.is_float:
        hit = hit | (b != b)
    hi = _coerce(ax.hi, dt.int64)
    first = Reduce("min", where(hit, _coerce(ax.dim, dt.int64), hi), red.axes, dt.int64)
    return binary("min", first, hi)


def identity(op: ReduceOp, dtype: DType):
    """The value a reduction starts from (what an empty reduction yields)."""
    if op in _IDENTITY:
        return _IDENTITY[op] if not dtype.is_float else float(_IDENTITY[op])
    if dtype.is_float:
        return float("-inf") if op == "max" else float("inf")
    if dtype.is_bool:
        return op != "max"
    info = np.iinfo(dtype.name)
    return int(info.min) if op == "max" else int(info.max)
