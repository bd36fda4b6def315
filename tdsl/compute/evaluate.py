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
  and earlier reduction dims; an empty reduction yields the identity;
- a stage's updates (`td.update`) then apply in creation order, each visiting
  the points of its `over` domain one at a time in lexicographic order (first
  dim outermost, bounds evaluated per point, empty ranges visit nothing) and
  assigning the value to the target element. The value and indices read the
  current state of every tensor, the target included, so consumers see the
  stage after all its updates. Indices follow the rules above: an affine
  target or read index out of range raises, a data-dependent one is clamped.

The points of an update's innermost dim are evaluated together, as one numpy
run, whenever that is provably the same as visiting them one at a time: when
no point of the run reads (at any index, guarded or not) an element of the
target that an earlier point of the run writes. This is checked on the
computed indices of each run, not guessed from the expressions; a run is
committed up to its first such read and the rest is tried again or visited
point by point (see `_UpdateRun`). Which way a point is computed never
changes the result.
"""

from __future__ import annotations

import operator

import numpy as np

from ..dtypes import astype
from ..errors import ArgumentError, DefinitionError
from .binding import allocate, allocate_outputs, bind_arguments, eval_extent
from .expr import (
    NUMPY_BINARY,
    NUMPY_CALL,
    NUMPY_COMPARE,
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
    walk,
)
from .tensor import BoundaryView, Pipeline, Stage, Tensor, Update, identity, is_affine_index

_COMPARE = NUMPY_COMPARE
_COMBINE = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


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
            _Evaluation(stage, values, bound.sizes).run(out)
            values[stage] = out
            for u in pipeline.updates_of(stage):
                _UpdateRun(u, values, bound.sizes).run()
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
                return NUMPY_BINARY[op](self.value(a), self.value(b))
            case Compare(op, a, b):
                return _COMPARE[op](self.value(a), self.value(b))
            case Unary("neg", a):
                return np.negative(self.value(a))
            case Unary("invert", a):
                return np.invert(self.value(a))
            case Call(fn, args):
                return NUMPY_CALL[fn](*(self.value(a) for a in args))
            case Select(c, a, b):
                return np.where(self.value(c), self.value(a), self.value(b))
            case Cast(a, d):
                return astype(self.value(a), d)
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
                return NUMPY_BINARY[op](self.affine(a), self.affine(b))
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


# ---------------------------------------------------------------- updates

# A run of the innermost `over` dim shorter than this is visited point by point.
_VECTOR_MIN = 4
# After a run's second conflicting read, this many points are visited one at
# a time before the rest of the run is tried as a whole again; it doubles each
# time, so a true recurrence costs O(log n) tries per run.
_POINT_STRETCH = 16
# After this many runs, an update stops trying vector runs if most of its
# runs needed points visited one at a time (a recurrence along the innermost
# dim, as in Gauss-Seidel); 0 means it never stops trying.
_VECTOR_JUDGE = 4

_INT_OP = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "min": lambda a, b: min(a, b) if isinstance(a, int) and isinstance(b, int) else np.minimum(a, b),
    "max": lambda a, b: max(a, b) if isinstance(a, int) and isinstance(b, int) else np.maximum(a, b),
}


class _UpdateRun:
    """One `td.update` applied, in place, to its stage's array.

    The index expressions and the value are compiled once into closures that
    read the current dim values: `exact` (Python ints, exact, for affine
    indices and bounds) and `ints` (the same as int32 values, for dims used as
    values). All dims are scalars when visiting one point (`n` is None); in a
    vector run (`n` points) the innermost dim is an array and the closures
    yield arrays broadcastable to (n,), computed with the same numpy
    functions as the stage evaluator, so both give the same bits.

    A vector run reads every tensor before it writes anything. That equals the
    sequential visit exactly when no point of the run reads an element of the
    target that an earlier point of the run writes (by induction over the
    points: each point then sees, at every index it reads, the value it had
    before the run, and so computes the same indices and value). Runs of an
    update that reads its target record the locations read and check this on
    the computed indices; the run is committed up to its first conflicting
    point and the rest is handled as `_innermost` says. Repeated target
    locations in a run are assigned explicitly from the last point that
    writes them. How a point is computed (alone or in a run) is a matter of
    speed only: the results are the same bits.
    """

    def __init__(self, update: Update, arrays: dict[Tensor, np.ndarray], sizes: dict[str, int]):
        self.update = update
        self.stage = update.stage
        self.arrays = arrays
        self.sizes = sizes
        self.out = arrays[update.stage]
        self.strides = _element_strides(self.out.shape)
        self.exact: dict[Dim, object] = {}  # Python int, or int64 array in a vector run
        self.ints: dict[Dim, object] = {}  # np.int32, or int32 array
        self.n: int | None = None  # points in the current vector run; None for one point
        self.reads: list[np.ndarray] | None = None  # target locations read, when recording
        self.runs = self.clean_runs = 0  # runs tried as vectors; those that needed no points
        for ax in update.axes:
            for b in (ax.lo, ax.hi):
                if any(isinstance(x, (Access, Reduce)) for x in walk(b)):
                    raise DefinitionError(
                        f"update {update.name} ({update!r}): bound {b!r} of {ax.dim.name} reads a "
                        "tensor; bounds in over= are expressions of earlier dims and sizes")
        self.bounds = [(self._bound(ax.lo), self._bound(ax.hi)) for ax in update.axes]
        self.locate_target = self._locate(update.target(), write=True)
        self.fast_target = self._fast(update.target(), self.out, write=True) or (lambda: None)
        self.value = self._compile(update.value)
        target_reads = [
            x for e in (*update.indices, update.value) for x in walk(e)
            if isinstance(x, Access) and _base(x.tensor) is self.stage
        ]
        self.reads_target = bool(target_reads)
        # Runs that write one element and read it (the target's indices are dims
        # other than the innermost one, and the value reads the target at those
        # very dims) are reductions: point 1 always reads what point 0 wrote, so
        # a vector run could only ever commit its first point.
        inner = update.axes[-1].dim
        self.serial = all(isinstance(ix, Dim) and ix is not inner for ix in update.indices) and any(
            all(a is b for a, b in zip(x.indices, update.indices, strict=True)) for x in target_reads)

    # ------------------------------------------------------------ visiting

    def run(self) -> None:
        self._loop(0)

    def _set(self, d: Dim, v: int) -> None:
        self.exact[d] = v
        self.ints[d] = np.int32(v)

    def _loop(self, level: int) -> None:
        d = self.update.axes[level].dim
        lo_f, hi_f = self.bounds[level]
        lo, hi = lo_f(), hi_f()
        if level + 1 < len(self.bounds):
            for v in range(lo, hi):
                self._set(d, v)
                self._loop(level + 1)
        else:
            self._innermost(d, lo, hi)

    def _innermost(self, d: Dim, lo: int, hi: int) -> None:
        """Visit lo..hi-1: as vector runs where that is exact, else point by point.

        A vector run is tried on the rest of the range; after a conflict it is
        tried again at once from the conflicting point (which then reads a
        committed value), and after a second conflict a stretch of points is
        visited one at a time first, the stretch doubling each time.
        """
        if hi - lo < _VECTOR_MIN or not self._worth_a_try():
            self._points(d, lo, hi)
            return
        pos, stretch, conflicts = lo, _POINT_STRETCH, 0
        while pos < hi:
            if hi - pos < _VECTOR_MIN:
                self._points(d, pos, hi)
                break
            pos += self._vector(d, pos, hi)
            if pos < hi:  # the point at pos reads what an earlier point of the run wrote
                conflicts += 1
                if conflicts % 2 == 0:
                    stop = min(hi, pos + stretch)
                    self._points(d, pos, stop)
                    pos, stretch = stop, 2 * stretch
        self.runs += 1
        self.clean_runs += conflicts < 2

    def _worth_a_try(self) -> bool:
        if _VECTOR_JUDGE <= 0:
            return True
        if self.serial:
            return False
        return self.runs < _VECTOR_JUDGE or 2 * self.clean_runs >= self.runs

    def _points(self, d: Dim, lo: int, hi: int) -> None:
        """Visit the points lo..hi-1 of the innermost dim one at a time."""
        self.n = None
        exact, ints, out = self.exact, self.ints, self.out
        fast, locate, value, want = self.fast_target, self.locate_target, self.value, self.stage.dtype.np
        for v in range(lo, hi):
            exact[d] = v
            ints[d] = np.int32(v)
            idx = fast()
            if idx is None:
                idx, _ = locate()
            x = value()
            assert x.dtype == want, f"{self.update!r}: value is {x.dtype}, not {want}"
            out[idx] = x

    def _vector(self, d: Dim, lo: int, hi: int) -> int:
        """Evaluate lo..hi-1 as one run; commit the points before the first
        conflicting read and return how many were committed (at least one)."""
        n = hi - lo
        self.n = n
        self.exact[d] = np.arange(lo, hi, dtype=np.int64)
        self.ints[d] = self.exact[d].astype(np.int32)
        self.reads = [] if self.reads_target else None
        try:
            idx, _ = self.locate_target()
            vals = _full(self.value(), n)
            reads = self.reads
        finally:
            self.reads = None
            self.n = None
        assert vals.dtype == self.stage.dtype.np, f"{self.update!r}: value is {vals.dtype}"
        flat = _full(_flat(idx, self.strides), n)
        m = _first_conflict(flat, reads) if reads else n
        flat, vals = flat[:m], vals[:m]
        last = _last_writes(flat)
        self.out[np.unravel_index(flat[last], self.out.shape)] = vals[last]
        return m

    # ------------------------------------------------------------ compiling

    def _bound(self, e: Expr):
        if is_affine_index(e):
            return self._affine(e)
        f = self._compile(e)
        return lambda: int(f())

    def _affine(self, e: Expr):
        """An affine index in exact integer arithmetic (casts do not wrap)."""
        exact = self.exact
        match e:
            case Binary("add" | "sub" as op, Dim() as a, Const(v)):
                c = int(v) if op == "add" else -int(v)
                return lambda: exact[a] + c
            case Const(v):
                c = int(v)
                return lambda: c
            case Dim():
                return lambda: exact[e]
            case Size(name):
                c = int(self.sizes[name])
                return lambda: c
            case Cast(a):
                return self._affine(a)
            case Unary("neg", a):
                f = self._affine(a)
                return lambda: -f()
            case Binary(op, a, b):
                fn, fa, fb = _INT_OP[op], self._affine(a), self._affine(b)
                return lambda: fn(fa(), fb())
        raise AssertionError(f"{e!r} is not an affine index")

    def _compile(self, e: Expr):
        """A closure computing `e` (of dtype `e.dtype`) at the current point(s)."""
        match e:
            case Const(v, d):
                c = d.np.type(v)
                return lambda: c
            case Dim():
                ints = self.ints
                return lambda: ints[e]
            case Size(name):
                c = np.int32(self.sizes[name])
                return lambda: c
            case Access():
                return self._access(e)
            case Binary(op, a, b):
                fn, fa, fb = NUMPY_BINARY[op], self._compile(a), self._compile(b)
                return lambda: fn(fa(), fb())
            case Compare(op, a, b):
                fn, fa, fb = _COMPARE[op], self._compile(a), self._compile(b)
                return lambda: fn(fa(), fb())
            case Unary("neg", a):
                fa = self._compile(a)
                return lambda: np.negative(fa())
            case Unary("invert", a):
                fa = self._compile(a)
                return lambda: np.invert(fa())
            case Call(fn, args):
                f, fs = NUMPY_CALL[fn], tuple(self._compile(a) for a in args)
                return lambda: f(*[g() for g in fs])
            case Select(c, a, b):
                fc, fa, fb = self._compile(c), self._compile(a), self._compile(b)

                def select():
                    cond, x, y = fc(), fa(), fb()  # both sides, as np.where does
                    if self.n is None:
                        return x if cond else y  # both already of the Select's dtype
                    return np.where(cond, x, y)

                return select
            case Cast(a, d):
                fa = self._compile(a)
                return lambda: astype(fa(), d)
        raise AssertionError(f"cannot evaluate {e!r} inside update {self.update.name}")

    def _access(self, e: Access):
        view = e.tensor if isinstance(e.tensor, BoundaryView) else None
        t = _base(e.tensor)
        arr = self.arrays[t]
        locate = self._locate(e)
        fast = self._fast(e, arr)
        pad = self._compile(view.value) if view is not None and view.mode == "pad" else None
        strides = _element_strides(arr.shape) if t is self.stage else None

        def get():
            if self.n is None and fast is not None:
                got = fast()
                if got is not None:
                    return got
            idx, inside = locate()
            got = arr[idx]
            if strides is not None and self.reads is not None:
                flat = _full(_flat(idx, strides), self.n)
                self.reads.append(flat if inside is None else np.where(inside, flat, -1))
            if inside is not None:
                got = np.where(inside, got, pad())
            return got

        return get

    def _fast(self, e: Access, arr: np.ndarray, write: bool = False):
        """For a plain tensor with affine indices, a closure for one point that
        gives the element read (or, to write, the index tuple), or None when an
        index is out of range (then the general path raises)."""
        if isinstance(e.tensor, BoundaryView) or not all(map(is_affine_index, e.indices)):
            return None
        fs, shape = tuple(self._affine(ix) for ix in e.indices), arr.shape
        if len(fs) == 1:
            (f0,), (n0,) = fs, shape

            def fast1():
                a = f0()
                if 0 <= a < n0:
                    return (a,) if write else arr[a]
                return None

            return fast1
        if len(fs) == 2:
            (f0, f1), (n0, n1) = fs, shape

            def fast2():
                a, b = f0(), f1()
                if 0 <= a < n0 and 0 <= b < n1:
                    return (a, b) if write else arr[a, b]
                return None

            return fast2

        def fast():
            idx = tuple([f() for f in fs])
            for v, n in zip(idx, shape, strict=True):
                if not 0 <= v < n:
                    return None
            return idx if write else arr[idx]

        return fast

    def _locate(self, e: Access, write: bool = False):
        """A closure giving the in-range index tuple of `e` at the current
        point(s) and, for a `td.pad` view, where it is inside (else None)."""
        view = e.tensor if isinstance(e.tensor, BoundaryView) else None
        shape = self.arrays[_base(e.tensor)].shape
        pad = view is not None and view.mode == "pad"
        parts = []
        for ix, n in zip(e.indices, shape, strict=True):
            if is_affine_index(ix):
                parts.append((self._affine(ix), n, view is None))  # out of range raises
            else:
                f = self._compile(ix)
                parts.append((lambda f=f: _as_index(f()), n, False))  # clamped

        def locate():
            idx, inside = [], None
            if self.n is None:
                for pos, (f, n, strict) in enumerate(parts):
                    v = f()
                    if not 0 <= v < n:
                        if strict:
                            self._out_of_range(e, pos, v, n, write)
                        if pad:
                            inside = False
                        v = 0 if v < 0 else n - 1
                    idx.append(v)
                return tuple(idx), inside
            for pos, (f, n, strict) in enumerate(parts):
                v = f()
                if (v < 0 or v >= n) if isinstance(v, int) else (v.min() < 0 or v.max() >= n):
                    if strict:
                        self._out_of_range(e, pos, v, n, write)
                    if pad:
                        ok = (v >= 0) & (v < n)
                        inside = ok if inside is None else inside & ok
                    v = np.clip(v, 0, n - 1)
                idx.append(v)
            return tuple(idx), inside

        return locate

    # ------------------------------------------------------------ errors

    def _out_of_range(self, e: Access, pos: int, v, n: int, write: bool) -> None:
        at = None
        if self.n is not None:
            v = np.broadcast_to(v, (self.n,))
            at = int(np.argmax((v < 0) | (v >= n)))
            v = v[at]
        shown = ", ".join(f"{d.name}={self._coordinate(d, at)}" for d in self.update.loop_dims)
        t = e.tensor  # a plain tensor: views never raise
        u = self.update
        where = (f"index {int(v)} on axis {pos} (dim {t.dims[pos].name} of {t.name}) at "
                 f"{shown}; valid indices are 0..{n - 1}")
        if write:
            raise DefinitionError(
                f"update {u.name} ({u!r}): the target {e!r} is out of range: {where}. "
                f"Shrink the bounds in over= so that every point writes inside {t.name}")
        raise DefinitionError(
            f"update {u.name} ({u!r}): {e!r} reads {t.name} out of range: {where}. Read "
            f"through td.clamp({t.name}) or td.pad({t.name}, value), or shrink the bounds in over=")

    def _coordinate(self, d: Dim, at: int | None) -> int:
        x = self.exact[d]
        return int(x) if at is None or np.ndim(x) == 0 else int(x[at])


def _base(t) -> Tensor:
    return t.tensor if isinstance(t, BoundaryView) else t


def _full(x, n: int) -> np.ndarray:
    """`x` (a scalar, or an array broadcastable to (n,)) as an array of shape (n,)."""
    if isinstance(x, np.ndarray) and x.shape == (n,):
        return x
    return np.broadcast_to(x, (n,))


def _as_index(x):
    """A data-dependent index as an exact integer (or int64 array), before clamping."""
    return int(x) if np.ndim(x) == 0 else np.asarray(x).astype(np.int64)


def _element_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, s = [], 1
    for n in reversed(shape):
        out.append(s)
        s *= n
    return tuple(reversed(out))


def _flat(idx: tuple, strides: tuple[int, ...]):
    """The row-major position of an in-range index tuple (ints or int64 arrays)."""
    flat = 0
    for i, s in zip(idx, strides, strict=True):
        flat = flat + i * s
    return flat


def _increasing(a: np.ndarray) -> bool:
    return bool(np.all(a[1:] > a[:-1]))


def _groups(flat: np.ndarray):
    """The distinct locations of a run, sorted, with the positions of their
    first and last occurrences (a stable sort keeps points in order)."""
    order = np.argsort(flat, kind="stable")
    ranked = flat[order]
    change = ranked[1:] != ranked[:-1]
    starts = np.concatenate(([True], change))
    ends = np.concatenate((change, [True]))
    return ranked[starts], order[starts], order[ends]


def _last_writes(flat: np.ndarray):
    """The positions in a run of the last write to each location it writes."""
    if len(flat) < 2 or _increasing(flat) or _increasing(flat[::-1]):
        return slice(None)  # every location once
    return _groups(flat)[2]


def _first_conflict(flat: np.ndarray, reads: list[np.ndarray]) -> int:
    """The first point of a run that reads a location an earlier point writes
    (`flat` are the writes, `reads` the locations read, -1 for none), or the
    run's length when there is none."""
    n = len(flat)
    point = np.arange(n)
    if _increasing(flat):
        written, first = flat, point
    else:
        written, first, _ = _groups(flat)
    m = n
    for r in reads:
        at = np.minimum(np.searchsorted(written, r), len(written) - 1)
        hit = (written[at] == r) & (first[at] < point)
        if hit.any():
            m = min(m, int(np.argmax(hit)))
    return m
