"""The numpy reference evaluator: what a pipeline means, with no schedule.

`evaluate` computes every stage over its full grid (its declared extents), in
pipeline order, with numpy's own arithmetic. It is the oracle every schedule
and backend is tested against, so it prefers being plainly right to being fast.
One interpreter (`_Points`) evaluates expressions at a set of points: each dim
is a Python int (one point) or an int64 array (many points at once).

- a dim used as a value is int32 (an open grid of `np.arange`), a size too;
- every node yields exactly its `.dtype`: same-dtype integers wrap, integer
  `//` and `%` by zero give 0 (numpy's answers; its warnings are silenced);
- an affine index (`is_affine_index`) is computed exactly, as Python or int64
  integers, and reading a plain tensor out of range raises DefinitionError.
  Both sides of a `td.where` are evaluated everywhere, so an access guarded
  only by a `where` must still be in range: use a `td.clamp` or `td.pad` view;
- a data-dependent or otherwise non-affine index is computed in its own dtype; out of
  [0, extent - 1] of a plain tensor it is an ArgumentError naming the tensor, the index
  and the point (numpy's IndexError), and through a view it reads what the view says;
- `td.clamp(t)` repeats the edge element; `td.pad(t, v)` reads `v` wherever
  any index is out of range; `td.mirror`, `td.mirror_interior` and `td.wrap` read
  as numpy's pad modes symmetric, reflect and wrap;
- a stage is computed at all the points of its grid at once. A reduction
  starts from the identity of its operator and visits its points one at a
  time in lexicographic order (first axis outermost), combining in the
  accumulator dtype: exact sequential semantics, NaN-propagating max/min.
  Each axis ranges over [lo, hi), bounds that may depend on the stage's dims
  and earlier reduction dims (points outside them are masked); an empty
  reduction yields the identity;
- a reduction inside an expression (a stage's definition, an update's value, another
  reduction's body) is computed in full at each point where it is used, from its
  identity and in the same order, as if it were its own stage computed there;
- a stage's updates (`td.update`) then apply in creation order, each visiting
  the points of its `over` domain one at a time in lexicographic order (first
  dim outermost, bounds evaluated per point, empty ranges visit nothing) and
  assigning the value to the target element. The value and indices read the
  current state of every tensor, the target included, so consumers see the
  stage after all its updates. Indices follow the rules above: an affine
  target or read index out of range raises, and so does a data-dependent one.

One shortcut, which never changes a result: the points of a row of an
update (its innermost `over` dim, the outer ones fixed) are computed at once,
reading every tensor before writing any, and that result is kept only if the
row writes each element once and no point of it reads (at any index, taken
or not by a `td.where`) an element that an earlier point of it writes: both
checked on the indices computed. Then every point sees what it would see
visiting the points in order, by induction over the points, and computes the
same. A row that fails the check, or raises, writes nothing and is visited
point by point (so an error names the first bad point in order), and so are
the update's later rows.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ..dtypes import astype
from ..errors import ArgumentError, DefinitionError
from . import fixed_point, periods
from .binding import allocate, allocate_outputs, bind_arguments, eval_extent
from .definitions import Stage, Tensor, Update
from .nodes import (
    Acc,
    Access,
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
from .ops import NUMPY_BINARY, NUMPY_CALL, NUMPY_COMPARE, erf_values
from .pipeline import Pipeline
from .reductions import identity
from .traversal import free_dims, is_affine_index, walk
from .views import BoundaryView

_COMBINE = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}
# exact integer arithmetic on Python ints and int64 arrays, for affine indices
_INT_OP = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "min": lambda a, b: min(a, b) if isinstance(a, int) and isinstance(b, int) else np.minimum(a, b),
    "max": lambda a, b: max(a, b) if isinstance(a, int) and isinstance(b, int) else np.maximum(a, b),
}
# compute rows of updates at once where that is exact (tests turn it off to compare)
_ROWS = True


def evaluate(outputs, /, *positional, **arrays):
    """Compute `outputs` (a stage, or a tuple/list of stages) with numpy.

    Inputs, optional output arrays and sizes are passed by name, as to a
    kernel: `td.evaluate(C, A=a, B=b)`. Returns the output array, or a tuple
    in the given order when there are several outputs.
    """
    pipeline = Pipeline(outputs)
    if positional:
        names = ", ".join(f"{t.name}=..." for t in pipeline.inputs)
        raise ArgumentError(
            f"td.evaluate got {len(positional)} array(s) by position; pass them by name: "
            f"td.evaluate(outputs, {names})")
    bound = bind_arguments(pipeline, arrays)
    results = allocate_outputs(pipeline, bound)
    values: dict[Tensor, np.ndarray] = {t: bound.inputs[t.name] for t in pipeline.inputs}
    with np.errstate(all="ignore"):
        for stage in pipeline.stages:
            out = results.get(stage.name)
            if out is None:
                out = allocate(stage, bound.sizes, "intermediate stage")
            _define(stage, values, bound.sizes, out)
            values[stage] = out
            for u in pipeline.updates_of(stage):
                _update(u, values, bound.sizes)
    found = tuple(results[s.name] for s in pipeline.outputs)
    return found if len(found) > 1 else found[0]


# ---------------------------------------------------------------- stages


def _define(stage: Stage, arrays: dict[Tensor, np.ndarray], sizes: dict[str, int],
            out: np.ndarray) -> None:
    """Compute `stage` at every point of its grid into `out`."""
    grid = tuple(eval_extent(e, sizes) for e in stage.shape)
    pts = _Points(f"stage {stage.name!r}", f"the extents of {stage.name}", stage.loop_dims,
                  arrays, sizes, grid)
    for p, d in enumerate(stage.dims):
        pts.at[d] = np.arange(grid[p], dtype=np.int64).reshape([-1 if q == p else 1
                                                                 for q in range(len(grid))])
    red = stage.reduction
    if red is None:
        np.copyto(out, pts.value(stage.expr), casting="no")
        return
    out[...] = identity(red.op, red.dtype)
    _reduce(pts, red, 0, out)


def _reduce(pts: _Points, red: Reduce, level: int, acc: np.ndarray) -> None:
    """Accumulate `red.body` into `acc` at each reduction point, in order."""

    def step() -> None:
        body = pts.value(red.body)
        _COMBINE[red.op](acc, body, out=acc, where=True if pts.mask is None else pts.mask)

    _points(pts, red.axes, level, step)


def _fold(pts: _Points, red: Reduce, accs: list[np.ndarray]) -> None:
    """A general reduction's steps at each point, in order: every new value from the
    values so far, then all of them stored."""
    pack = red.body
    assert isinstance(pack, Pack)

    def step() -> None:
        new = [pts.value(v) for v in pack.steps]
        for a, v in zip(accs, new):
            np.copyto(a, v, where=True if pts.mask is None else pts.mask)

    _points(pts, red.axes, 0, step)


def _points(pts: _Points, axes: tuple, level: int, step) -> None:
    """Visit the reduction points of axes[level:] in order, where `pts.mask` holds, and
    call `step` at each."""
    if level == len(axes):
        step()
        return
    ax, mask = axes[level], pts.mask
    lo, hi = pts.index(ax.lo), pts.index(ax.hi)
    if mask is None and np.ndim(lo) == 0 and np.ndim(hi) == 0:  # a box: no masking
        for v in range(int(lo), int(hi)):
            pts.at[ax.dim] = v
            _points(pts, axes, level + 1, step)
        return
    active = np.broadcast_to(lo < hi, pts.shape)
    if mask is not None:
        active = active & mask
    if active.any():
        start = int(np.broadcast_to(lo, pts.shape)[active].min())
        stop = int(np.broadcast_to(hi, pts.shape)[active].max())
        for v in range(start, stop):
            inside = active & (lo <= v) & (v < hi)
            if inside.any():
                pts.at[ax.dim], pts.mask = v, inside
                _points(pts, axes, level + 1, step)
    pts.mask = mask


# ---------------------------------------------------------------- updates


def _update(u: Update, arrays: dict[Tensor, np.ndarray], sizes: dict[str, int]) -> None:
    """Apply update `u`, in place, to its stage's array."""
    for ax in u.axes:
        for b in (ax.lo, ax.hi):
            if any(isinstance(x, (Access, Reduce)) for x in walk(b)):
                raise DefinitionError(
                    f"update {u.name} ({u!r}): bound {b!r} of {ax.dim.name} reads a "
                    "tensor; bounds in over= are expressions of earlier dims and sizes")
    pts = _Points(f"update {u.name} ({u!r})", "the bounds in over=", u.loop_dims, arrays, sizes,
                  target=u.stage)
    target, out = u.target(), arrays[u.stage]
    # a row whose target indices do not use its dim writes one element over and over
    rows = _ROWS and u.axes[-1].dim in {d for ix in u.indices for d in free_dims(ix)}

    def visit(level: int) -> None:
        nonlocal rows
        d = u.axes[level].dim
        lo, hi = int(pts.index(u.axes[level].lo)), int(pts.index(u.axes[level].hi))
        if level + 1 < len(u.axes):
            for v in range(lo, hi):
                pts.at[d] = v
                visit(level + 1)
            return
        if rows and hi - lo > 1:
            rows = _row(pts, u, lo, hi)
            if rows:
                return
        for v in range(lo, hi):
            pts.at[d] = v
            idx, _ = pts.locate(target, write=True)
            out[idx] = pts.value(u.value)

    visit(0)


def _row(pts: _Points, u: Update, lo: int, hi: int) -> bool:
    """Compute the points lo..hi-1 of the innermost dim at once and write them if that
    is exact (see the module's docstring); else write nothing and return False."""
    n, out = hi - lo, pts.arrays[u.stage]
    pts.at[u.axes[-1].dim], pts.shape, pts.reads = np.arange(lo, hi, dtype=np.int64), (n,), []
    mask = pts.mask  # a reduction the error leaves midway leaves its mask of the row
    try:
        idx, _ = pts.locate(u.target(), write=True)
        vals = pts.value(u.value)
        reads = pts.reads
    except (DefinitionError, ArgumentError):
        return False
    finally:
        pts.shape, pts.reads, pts.mask = (), None, mask
    writes = np.broadcast_to(np.ravel_multi_index(idx, out.shape), (n,))
    order = np.argsort(writes)  # the points of the row by the element they write
    written = writes[order]
    if (written[1:] == written[:-1]).any():
        return False  # two points write one element
    for r in reads:  # the point that writes the element each point reads (n: none)
        at = np.minimum(np.searchsorted(written, r), n - 1)
        writer = np.where(written[at] == r, order[at], n)
        if (writer < np.arange(n)).any():
            return False  # a point reads what an earlier point writes
    out[idx] = vals
    return True


# ---------------------------------------------------------------- expressions


class _Points:
    """Expressions evaluated at a set of points, for the stage or update `owner`.

    `at` holds each dim's value: a Python int, or an int64 array broadcastable to
    `shape` (the stage's grid, or the points of an update's row); `mask` marks
    the points inside the reduction domain being visited (None: all). Error
    messages name the dims in `dims` and say to shrink `extents` to fix a read
    out of range. While `reads` is a list, each read of `target` appends the
    row-major positions it reads there (-1 where a `td.pad` view reads its value)."""

    def __init__(self, owner: str, extents: str, dims: tuple[Dim, ...],
                 arrays: dict[Tensor, np.ndarray], sizes: dict[str, int],
                 shape: tuple[int, ...] = (), target: Stage | None = None):
        self.owner, self.extents, self.dims = owner, extents, dims
        self.arrays, self.sizes, self.shape, self.target = arrays, sizes, shape, target
        self.at: dict[Dim, int | np.ndarray] = {}
        self.mask: np.ndarray | None = None
        self.reads: list[np.ndarray] | None = None
        self._affine: dict[Expr, bool] = {}
        self.accs: dict[int, list[np.ndarray]] = {}  # general reductions' values so far

    def is_affine(self, e: Expr) -> bool:
        """`is_affine_index(e)`, remembered per node."""
        known = self._affine.get(e)
        if known is None:
            known = self._affine[e] = is_affine_index(e)
        return known

    def value(self, e: Expr):
        """The value of `e` at the points (a numpy scalar or array), of dtype `e.dtype`."""
        match e:
            case Access():
                v = self.access(e)
            case Binary(op, a, b):
                v = NUMPY_BINARY[op](self.value(a), self.value(b))
            case Const(c, d):
                v = d.np.type(c)
            case Dim():
                x = self.at[e]
                v = np.int32(x) if isinstance(x, int) else x.astype(np.int32)
            case Size(name):
                v = np.int32(self.sizes[name])
            case Compare(op, a, b):
                v = NUMPY_COMPARE[op](self.value(a), self.value(b))
            case Unary(op, a):
                v = (np.negative if op == "neg" else np.invert)(self.value(a))
            case Call(fn, args):
                v = _call(fn, [self.value(a) for a in args])
            case Select(c, a, b):
                v = np.where(self.value(c), self.value(a), self.value(b))
            case Cast(a, d):
                v = astype(self.value(a), d)
            case Item() | Acc() | Reduce():
                v = self.reduction(e)
            case Checked(a, n):
                v = self.checked(a, n)
            case _:
                raise AssertionError(f"cannot evaluate {e!r} in {self.owner}")
        assert v.dtype == e.dtype.np, f"{e!r}: evaluated to {v.dtype}, not {e.dtype.name}"
        return v

    def checked(self, a: Expr, n: Expr):
        """An index that must be in [0, n) (see `expr.Checked`), clamped."""
        v, size = self.value(a), int(self.index(n))
        if np.any((v < 0) | (v >= size)):
            raise ArgumentError(f"{self.owner}: the index {a!r} is out of 0..{size - 1}")
        return np.clip(v, 0, size - 1).astype(v.dtype)

    def inline_reduction(self, red: Reduce):
        """A reduction inside an expression, at every point: a full reduction per point,
        visiting its own points in order, as if it were a stage computed right there."""
        acc = np.full(self.shape, identity(red.op, red.dtype), dtype=red.dtype.np)
        with self.own_dims(red):
            _reduce(self, red, 0, acc)
        return acc[()] if acc.ndim == 0 else acc

    @contextmanager
    def own_dims(self, red: Reduce) -> Iterator[None]:
        """Inside: the reduction's dims take its points' values; afterwards, the values
        the enclosing reductions gave dims of the same objects (a copy inlined twice)."""
        saved = {ax.dim: self.at[ax.dim] for ax in red.axes if ax.dim in self.at}
        try:
            yield
        finally:
            for ax in red.axes:
                self.at.pop(ax.dim, None)
            self.at.update(saved)

    def reduction(self, e: Item | Acc | Reduce):
        """A reduction's value inside an expression (see `inline_reduction`, `fold`)."""
        match e:
            case Item(red, index):
                return self.fold(red)[index]
            case Acc(token, index):
                return self.accs[token][index]
        assert isinstance(e, Reduce)
        return self.inline_reduction(e)

    def fold(self, red: Reduce) -> list:
        """A general reduction (`td.reduce`) at every point: its values start where the
        start values say and take each step's new values, point after point in order."""
        pack = red.body
        assert isinstance(pack, Pack)
        accs = [np.array(np.broadcast_to(self.value(v), self.shape), dtype=v.dtype.np)
                for v in pack.starts]
        outer = self.accs.get(pack.token)  # a copy of it being computed (inlined twice)
        self.accs[pack.token] = accs
        with self.own_dims(red):
            _fold(self, red, accs)
        if outer is None:
            del self.accs[pack.token]
        else:
            self.accs[pack.token] = outer
        return [a[()] if a.ndim == 0 else a for a in accs]

    def index(self, e: Expr):
        """An integer index or bound, exact: a Python int or an int64 array. A uint64
        index beyond int64's range counts as int64's largest value (out of range of any
        tensor; a view remaps that value), as in the kernels."""
        if self.is_affine(e):
            return self.affine(e)
        v = self.value(e)
        if np.asarray(v).dtype == np.uint64:
            v = np.minimum(v, np.uint64(np.iinfo(np.int64).max))
        return int(v) if np.ndim(v) == 0 else v.astype(np.int64)

    def affine(self, e: Expr):
        """An affine index in exact integer arithmetic (casts do not wrap)."""
        match e:
            case Dim():
                return self.at[e]
            case Const(v):
                return int(v)
            case Binary(op, a, b):
                return _INT_OP[op](self.affine(a), self.affine(b))
            case Size(name):
                return self.sizes[name]
            case Cast(a):
                return self.affine(a)
            case Unary("neg", a):
                return -self.affine(a)
        raise AssertionError(f"{e!r} is not an affine index")

    def access(self, e: Access):
        idx, inside = self.locate(e)
        arr = self.arrays[_base(e.tensor)]
        got = arr[idx]
        if self.reads is not None and _base(e.tensor) is self.target:
            flat = np.broadcast_to(np.ravel_multi_index(idx, arr.shape), self.shape)
            self.reads.append(flat if inside is None else np.where(inside, flat, -1))
        if inside is not None:
            assert isinstance(e.tensor, BoundaryView) and e.tensor.value is not None
            got = np.where(inside, got, self.value(e.tensor.value))
        return got

    def locate(self, e: Access, write: bool = False) -> tuple[tuple, np.ndarray | bool | None]:
        """The index tuple `e` reads (or writes), in range, and for a `td.pad` view where
        it is inside the tensor (None: everywhere). An index of a plain tensor out of
        range raises (DefinitionError when affine, ArgumentError when data-dependent); a
        view's is clamped, or remapped by a mirror or wrap view."""
        view = e.tensor if isinstance(e.tensor, BoundaryView) else None
        if view is not None and view.mode == "assume_in_range":
            view = None  # the promise is checked here, as a plain access is
        shape = self.arrays[_base(e.tensor)].shape
        idx: list = []
        inside: np.ndarray | bool | None = None
        for pos, ix in enumerate(e.indices):
            v, n = self.index(ix), shape[pos]
            if view is not None and view.mode in ("mirror", "mirror_interior", "wrap"):
                idx.append(remap(view.mode, v, n))
                continue
            if isinstance(v, int):
                if not 0 <= v < n:
                    if view is None and self.is_affine(ix):
                        self._out_of_range(e, pos, v, n, write)
                    if view is None:
                        self._bad_index(e, pos, v, n, write)
                    if view is not None and view.mode == "pad":
                        inside = False
                    v = min(max(v, 0), n - 1)
            elif v.min() < 0 or v.max() >= n:
                if view is None and self.is_affine(ix):
                    self._out_of_range(e, pos, v, n, write)  # unless every bad point is masked
                if view is None:
                    self._bad_index(e, pos, v, n, write)
                if view is not None and view.mode == "pad":
                    ok = (v >= 0) & (v < n)
                    inside = ok if inside is None else inside & ok
                v = np.clip(v, 0, n - 1)
            idx.append(v)
        return tuple(idx), inside

    def _bad_point(self, e: Access, pos: int, v, n: int) -> str | None:
        """Where (index, axis, point) an index `v` of `e` out of [0, n) is taken; None when
        every such point is masked."""
        bad = np.broadcast_to((v < 0) | (v >= n), self.shape)
        if self.mask is not None:
            bad = bad & self.mask
        if not bad.any():
            return None
        point = tuple(int(c) for c in np.argwhere(bad)[0]) if self.shape else ()

        def at(x) -> int:
            return int(np.broadcast_to(x, self.shape)[point])

        shown = ", ".join(f"{d.name}={at(self.at[d])}" for d in self.dims if d in self.at)
        t = e.tensor  # a plain tensor: views never raise
        return (f"index {at(v)} on axis {pos} (dim {t.dims[pos].name} of {t.name}) at "
                f"{shown}; valid indices are 0..{n - 1}")

    def _bad_index(self, e: Access, pos: int, v, n: int, write: bool) -> None:
        """A data-dependent index out of range: the call's data is wrong (numpy raises
        IndexError); ArgumentError naming the tensor, the index and the point."""
        where = self._bad_point(e, pos, v, n)
        if where is None:
            return
        t = e.tensor
        if write:
            raise ArgumentError(
                f"{self.owner}: the target {e!r} writes {t.name} at a data-dependent {where}. "
                f"Fix the data, or bound the index in the algorithm (e.g. td.minimum(i, n - 1))")
        raise ArgumentError(
            f"{self.owner}: {e!r} reads {t.name} at a data-dependent {where}. Fix the data, "
            f"or index a view that defines such indices: td.clamp({t.name}) reads the nearest "
            f"element, td.pad({t.name}, value) a constant, td.wrap({t.name}) wraps around")

    def _out_of_range(self, e: Access, pos: int, v, n: int, write: bool) -> None:
        where = self._bad_point(e, pos, v, n)
        if where is None:
            return
        t = e.tensor
        if write:
            raise DefinitionError(
                f"{self.owner}: the target {e!r} is out of range: {where}. Shrink the bounds "
                f"in over= so that every point writes inside {t.name}")
        raise DefinitionError(
            f"{self.owner}: {e!r} reads {t.name} out of range: {where}. Read through "
            f"td.clamp({t.name}) or td.pad({t.name}, value), or shrink {self.extents}")


def _call(fn: str, args: list):
    """numpy's function `fn` (the error function, which numpy lacks, elementwise), or a
    fixed-point operation's exact value (`fixed_point.VALUES`)."""
    if fn in fixed_point.VALUES:
        return fixed_point.VALUES[fn](*args)
    return erf_values(args[0]) if fn == "erf" else NUMPY_CALL[fn](*args)  # type: ignore[index]


def remap(mode: str, v, n: int):
    """The index in [0, n) that a mirror, mirror-interior or wrap view reads at index v
    (a Python int or an int64 array), as numpy's pad modes "symmetric", "reflect", "wrap"
    (`periods.anywhere`)."""
    return periods.anywhere(mode, v, n, _NUMPY_INDEX)


def _choose(c, x, y):
    return (x if c else y) if isinstance(c, (bool, np.bool_)) else np.where(c, x, y)


_NUMPY_INDEX = periods.Arith(
    const=int, add=operator.add, sub=operator.sub, mul=operator.mul, mod=operator.mod,
    max=lambda x, y: np.maximum(x, y) if isinstance(x, np.ndarray) else max(x, y),
    less=operator.lt, select=_choose)


def _base(t) -> Tensor:
    return t.tensor if isinstance(t, BoundaryView) else t
