"""The numpy reference evaluator: what a pipeline means, with no schedule.

`evaluate` computes every stage over its full grid (its declared extents), in
pipeline order, with numpy's own arithmetic. It is the oracle every schedule
and backend is tested against, so it prefers being plainly right to being fast:

- a dim used as a value is int32 (an open grid of `np.arange`), a size too;
- every node yields exactly its `.dtype`: same-dtype integers wrap, integer
  `//` and `%` by zero give 0 (numpy's answers; its warnings are silenced);
- an affine index (`is_affine_index`) is computed exactly, in int64, and
  reading a plain tensor out of range raises DefinitionError. Both sides of a
  `td.where` are evaluated everywhere, so an access guarded only by a
  `where` must still be in range: use a `td.clamp` or `td.pad` view;
- a data-dependent or otherwise non-affine index is computed in its own dtype
  and clamped into [0, extent - 1] of a plain tensor;
- `td.clamp(t)` repeats the edge element; `td.pad(t, v)` reads `v` wherever
  any index is out of range;
- a reduction starts from the identity of its operator and visits its points
  one at a time in lexicographic order (first axis outermost), combining in
  the accumulator dtype: exact sequential semantics, NaN-propagating max/min.
  Each axis ranges over [lo, hi), bounds that may depend on the stage's dims
  and earlier reduction dims; an empty reduction yields the identity.
"""

from __future__ import annotations

import numpy as np

from ..errors import DefinitionError
from .binding import allocate_outputs, bind_arguments, eval_extent
from .expr import (
    _NP_BINARY,
    _NP_CALL,
    Access,
    Binary,
    Call,
    Cast,
    Compare,
    Const,
    Dim,
    Expr,
    Reduce,
    Select,
    Size,
    Unary,
)
from .tensor import BoundaryView, Pipeline, Stage, Tensor, identity, is_affine_index

_COMPARE = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}
_COMBINE = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


def evaluate(outputs, /, **arrays):
    """Compute `outputs` (a stage, or a tuple/list of stages) with numpy.

    Inputs, optional output arrays and sizes are passed by name, as to a
    kernel: `td.evaluate(C, A=a, B=b)`. Returns the output array, or a tuple
    in the given order when there are several outputs.
    """
    pipeline = Pipeline(outputs)
    bound = bind_arguments(pipeline, arrays)
    results = allocate_outputs(pipeline, bound)
    values: dict[Tensor, np.ndarray] = {t: bound.inputs[t.name] for t in pipeline.inputs}
    with np.errstate(all="ignore"):
        for stage in pipeline.stages:
            out = results.get(stage.name)
            if out is None:
                out = np.empty(
                    tuple(eval_extent(e, bound.sizes) for e in stage.shape), stage.dtype.np
                )
            _Evaluation(stage, values, bound.sizes).run(out)
            values[stage] = out
    found = tuple(results[s.name] for s in pipeline.outputs)
    return found if len(found) > 1 else found[0]


class _Evaluation:
    """The values of dims and sizes while one stage is computed."""

    def __init__(self, stage: Stage, arrays: dict[Tensor, np.ndarray], sizes: dict[str, int]):
        self.stage = stage
        self.arrays = arrays
        self.sizes = sizes
        self.grid = tuple(eval_extent(e, sizes) for e in stage.shape)
        self.dims: dict[Dim, np.ndarray | np.integer] = {}  # int32, dims as values
        self.exact: dict[Dim, np.ndarray | np.integer] = {}  # int64, for affine indices
        for p, (d, n) in enumerate(zip(stage.dims, self.grid, strict=True)):
            shape = [1] * len(self.grid)
            shape[p] = n
            self.exact[d] = np.arange(n, dtype=np.int64).reshape(shape)
            self.dims[d] = self.exact[d].astype(np.int32)
        self.mask: np.ndarray | None = None  # reduction points currently active

    def run(self, out: np.ndarray) -> None:
        red = self.stage.reduction
        if red is None:
            np.copyto(out, self.value(self.stage.expr), casting="no")
            return
        out[...] = identity(red.op, red.dtype)
        self._reduce(red, 0, None, out)

    # ------------------------------------------------------------ reductions

    def _set(self, d: Dim, v: int) -> None:
        self.exact[d] = np.int64(v)
        self.dims[d] = np.int32(v)

    def _reduce(self, red: Reduce, level: int, mask: np.ndarray | None, acc: np.ndarray) -> None:
        """Visit the reduction points of axes[level:] in order, where `mask` holds."""
        self.mask = mask
        if level == len(red.axes):
            body = self.value(red.body)
            _COMBINE[red.op](acc, body, out=acc, where=True if mask is None else mask)
            return
        ax = red.axes[level]
        lo, hi = self.bound(ax.lo), self.bound(ax.hi)
        if mask is None and np.ndim(lo) == 0 and np.ndim(hi) == 0:  # a box: no masking
            for v in range(int(lo), int(hi)):
                self._set(ax.dim, v)
                self._reduce(red, level + 1, None, acc)
            return
        active = np.broadcast_to(lo < hi, self.grid)
        if mask is not None:
            active = active & mask
        if not active.any():
            return
        start = int(np.broadcast_to(lo, self.grid)[active].min())
        stop = int(np.broadcast_to(hi, self.grid)[active].max())
        for v in range(start, stop):
            inside = active & (lo <= v) & (v < hi)
            if inside.any():
                self._set(ax.dim, v)
                self._reduce(red, level + 1, inside, acc)

    def bound(self, e: Expr):
        """An integer bound or index as int64: exact when affine."""
        if is_affine_index(e):
            return self.affine(e)
        return np.asarray(self.value(e)).astype(np.int64)

    # ------------------------------------------------------------ values

    def value(self, e: Expr):
        """The value of `e` at every grid point (broadcastable), of dtype `e.dtype`."""
        v = self._value(e)
        assert v.dtype == e.dtype.np, f"{e!r}: evaluated to {v.dtype}, not {e.dtype.name}"
        return v

    def _value(self, e: Expr):
        match e:
            case Const(v, d):
                return d.np.type(v)
            case Dim():
                return self.dims[e]
            case Size(name):
                return np.int32(self.sizes[name])
            case Access():
                return self.access(e)
            case Binary(op, a, b):
                return _NP_BINARY[op](self.value(a), self.value(b))
            case Compare(op, a, b):
                return _COMPARE[op](self.value(a), self.value(b))
            case Unary("neg", a):
                return np.negative(self.value(a))
            case Unary("invert", a):
                return np.invert(self.value(a))
            case Call(fn, args):
                return _NP_CALL[fn](*(self.value(a) for a in args))
            case Select(c, a, b):
                return np.where(self.value(c), self.value(a), self.value(b))
            case Cast(a, d):
                return np.asarray(self.value(a)).astype(d.np)
        raise AssertionError(f"cannot evaluate {e!r} inside stage {self.stage.name}")

    def affine(self, e: Expr):
        """An affine index in exact int64 arithmetic (casts do not wrap)."""
        match e:
            case Const(v):
                return np.int64(v)
            case Dim():
                return self.exact[e]
            case Size(name):
                return np.int64(self.sizes[name])
            case Cast(a):
                return self.affine(a)
            case Unary("neg", a):
                return np.negative(self.affine(a))
            case Binary(op, a, b):
                return _NP_BINARY[op](self.affine(a), self.affine(b))
        raise AssertionError(f"{e!r} is not an affine index")

    # ------------------------------------------------------------ accesses

    def access(self, e: Access):
        view = e.tensor if isinstance(e.tensor, BoundaryView) else None
        arr = self.arrays[view.tensor if view is not None else e.tensor]
        idx, inside = [], None
        for pos, (ix, n) in enumerate(zip(e.indices, arr.shape, strict=True)):
            v = self.bound(ix)
            if np.min(v) >= 0 and np.max(v) < n:
                idx.append(v)
                continue
            if view is None and is_affine_index(ix):
                self._check_range(e, pos, v, n)  # raises unless every bad point is masked
            elif view is not None and view.mode == "pad":
                ok = (v >= 0) & (v < n)
                inside = ok if inside is None else inside & ok
            idx.append(np.clip(v, 0, n - 1))
        got = arr[tuple(idx)]
        if inside is not None:
            got = np.where(inside, got, self.value(view.value))
        return got

    def _check_range(self, e: Access, pos: int, v, n: int) -> None:
        bad = np.broadcast_to((v < 0) | (v >= n), self.grid)
        if self.mask is not None:
            bad = bad & self.mask
        if not bad.any():
            return
        point = tuple(int(c) for c in np.argwhere(bad)[0])
        at = dict(zip((d.name for d in self.stage.dims), point, strict=True))
        for ax in self.stage.reduce_axes:
            if ax.dim in self.exact:
                at[ax.dim.name] = int(self.exact[ax.dim])
        shown = ", ".join(f"{k}={x}" for k, x in at.items())
        value = int(np.broadcast_to(v, self.grid)[point])
        t = e.tensor  # a plain tensor: views never raise
        d = t.dims[pos]
        raise DefinitionError(
            f"stage {self.stage.name!r}: {e!r} reads {t.name} out of range: index {value} on "
            f"axis {pos} (dim {d.name} of {t.name}) at {shown}; valid indices are 0..{n - 1}. "
            f"Read through td.clamp({t.name}) or td.pad({t.name}, value), or shrink the "
            f"extents of {self.stage.name}"
        )
