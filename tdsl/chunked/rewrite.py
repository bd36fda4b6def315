"""The chunk pipeline: the algorithm a task runs on the windows of one chunk.

Every tensor of the pipeline becomes a tensor of the same name over the same dims,
holding a window of it: along a *windowed* dim `d`, the indices `[o, o + n)` of the
whole tensor, `o` and `n` sizes the task binds (the size named `o` holds o + 1, since
sizes are at least 1); along any other dim, the whole extent, as before. A stage's
dims count from its window's origin, so its definition is the old one with each
windowed dim `d` replaced by the global index `d + o`; an update's loops stay global,
with their bounds cut to the points that write inside the window. The global extents
(the old sizes) stay sizes of the chunk pipeline: boundary views keep their meaning at
the array's edges.

Every read `T[e]` of the old pipeline reads `T`'s window at `e - o`:

- plain, when every dim of `T` is whole (nothing changes);
- through `td.clamp` of the window otherwise (a read never outside the window, and
  never clamped in fact: the window is the box of what the chunk reads,
  `lower.poly.footprint`, which the lowering cannot see); a data-dependent index is
  still checked against the whole tensor (`Checked`), as the old kernel checked it;
- `td.clamp` and `td.pad` views become the same view of the window, and
  `td.assume_in_range` a clamp of it: a window that a read beyond an edge reaches
  always includes that edge element (the box holds the element the view reads), so
  clamping to the window is clamping to the array, and the window's outside is the
  array's outside for `pad`;
- `td.mirror`, `td.mirror_interior` and `td.wrap` views read the window (through
  `td.clamp`, as above) at the index the view maps to in the whole tensor
  (`compute.periods.anywhere`).

A split reduction (a reduction of an output over a chunked dim, combined across chunks
by the caller) runs over the chunk's part of its range only.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .. import dtypes as dt
from ..compute import expr as cx
from ..compute import periods
from ..compute.definitions import Input, Stage, Tensor, Update
from ..compute.pipeline import Pipeline
from ..compute.traversal import is_affine_index
from ..compute.views import BoundaryView, clamp
from ..errors import ChunkingError

_INDEX = periods.Arith(
    const=lambda k: k, add=operator.add, sub=operator.sub, mul=operator.mul,
    mod=operator.mod, max=cx.maximum, less=operator.lt, select=cx.where)


@dataclass(frozen=True)
class Layout:
    """Which dims of which tensors are windowed, and which reduction dims are split.

    `windowed[name]` has one flag per dim of that tensor; `split` names the reduction
    dims of the output's reduction that a chunk covers only a part of (in order)."""

    windowed: Mapping[str, tuple[bool, ...]]
    split: tuple[str, ...] = ()


def origin_size(t: int, d: int) -> str:
    """The size holding (origin + 1) of the window of tensor number `t` along dim `d`."""
    return f"tdsl_o{t}_{d}"


def extent_size(t: int, d: int) -> str:
    """The size holding the extent of that window."""
    return f"tdsl_n{t}_{d}"


def split_sizes(k: int) -> tuple[str, str]:
    """The sizes holding (origin + 1) and extent of split reduction dim number `k`."""
    return f"tdsl_ko{k}", f"tdsl_kn{k}"


def _signed(i: cx.Expr) -> cx.Expr:
    """A data-dependent index as a signed integer (a uint64 beyond int64's range as its
    largest value, as kernels read it)."""
    if i.dtype == dt.uint64:
        return cx.cast(cx.minimum(i, cx.const((1 << 63) - 1, dt.uint64)), dt.int64)
    if not i.dtype.is_int or i.dtype.bits < 32:
        return cx.cast(i, dt.int32) if i.dtype.is_int or i.dtype.is_bool else i
    return i


class _Rewriter:
    def __init__(self, pipeline: Pipeline, layout: Layout) -> None:
        self.p = pipeline
        self.layout = layout
        self.number = {t: n for n, t in enumerate(pipeline.tensors)}
        self.new: dict[Tensor, Tensor] = {}
        self.sizes: dict[str, cx.Size] = {}

    def size(self, name: str) -> cx.Size:
        if name not in self.sizes:
            self.sizes[name] = cx.Size(name)
        return self.sizes[name]

    def windowed(self, t: Tensor) -> tuple[bool, ...]:
        return tuple(self.layout.windowed.get(t.name, (False,) * t.ndim))

    def origin(self, t: Tensor, k: int) -> cx.Expr:
        """The window's first global index along dim k of t (0 when whole)."""
        if not self.windowed(t)[k]:
            return cx.const(0, dt.int32)
        return self.size(origin_size(self.number[t], k)) - 1

    def shape(self, t: Tensor) -> dict:
        out = {}
        for k, (d, ext) in enumerate(zip(t.dims, t.shape)):
            out[d] = self.size(extent_size(self.number[t], k)) if self.windowed(t)[k] else ext
        return out

    # ------------------------------------------------------------ reads

    def read(self, n: cx.Access, own: _Own | None, moved: bool) -> cx.Expr:
        view = n.tensor if isinstance(n.tensor, BoundaryView) else None
        t: Tensor = view.tensor if view is not None else n.tensor  # type: ignore[assignment]
        local = self.new[t]
        flags = self.windowed(t)
        if not any(flags) and not moved:
            return cx.Access(local if view is None else _view_of(view, local), n.indices)
        org = [self.origin(t, k) for k in range(t.ndim)]
        if view is not None and view.mode in ("clamp", "pad", "assume_in_range"):
            idx = tuple(_sub(e, o) for e, o in zip(n.indices, org))
            if view.mode == "assume_in_range":  # a kept promise reads the same through a
                return cx.Access(clamp(local), idx)  # clamp, a broken one its edge too
            return cx.Access(_view_of(view, local), idx)
        if view is not None:  # mirror, mirror_interior, wrap: where the whole tensor reads
            idx = tuple(_sub(periods.anywhere(view.mode, _signed(e), cx.cast(ext, dt.int32),
                                              _INDEX), o)
                        for e, ext, o in zip(n.indices, t.shape, org))
            return cx.Access(clamp(local), idx)
        if own is not None and t is own.stage and _same(n.indices, own.indices):
            return cx.Access(local, own.local)
        idx = tuple(_sub(e if is_affine_index(e) else cx.Checked(_signed(e), ext), o)
                    for e, ext, o in zip(n.indices, t.shape, org))
        return cx.Access(clamp(local), idx)

    def expr(self, e: cx.Expr, dims: Mapping[cx.Dim, cx.Expr], moved: bool,
             own: _Own | None = None) -> cx.Expr:
        """`e` with `dims` made global and every read rewritten; `moved`: whether the
        reader's points are not those of the old pipeline (its dims made global, its
        loops cut to a window), so that no read of it is plain."""
        def fn(n: cx.Expr) -> cx.Expr | None:
            if isinstance(n, cx.Dim):
                return dims.get(n)
            if isinstance(n, cx.Access):
                return self.read(n, own, moved)
            return None

        return cx.transform(e, fn)

    # ------------------------------------------------------------ tensors

    def input(self, t: Input) -> Input:
        return Input(t.name, self.shape(t), t.dtype)

    def global_dims(self, s: Stage) -> dict[cx.Dim, cx.Expr]:
        return {d: d + self.origin(s, k) for k, d in enumerate(s.dims) if self.windowed(s)[k]}

    def stage(self, s: Stage) -> Stage:
        dims = self.global_dims(s)
        split = bool(self.layout.split) and s in self.p.outputs
        body = self.expr(s.expr, dims, bool(dims) or split)
        if split:
            body = self.split(s, body)
        return Stage(s.name, self.shape(s), body)

    def split(self, s: Stage, body: cx.Expr) -> cx.Expr:
        assert isinstance(body, cx.Reduce), f"{s.name}: a split reduction is a stage's whole definition"
        axes = []
        for ax in body.axes:
            if ax.dim.name in self.layout.split:
                k = self.layout.split.index(ax.dim.name)
                so, sn = split_sizes(k)
                lo = self.size(so) - 1
                ax = cx.Axis(ax.dim, cx.maximum(ax.lo, lo), cx.minimum(ax.hi, lo + self.size(sn)))
            axes.append(ax)
        return cx.Reduce(body.op, body.body, tuple(axes), body.dtype, body.name)

    def update(self, u: Update) -> Update:
        s = u.stage
        bounds = {ax.dim: (ax.lo, ax.hi) for ax in u.axes}
        cut = False
        for k, (d, e) in enumerate(zip(s.dims, u.indices)):
            if not self.windowed(s)[k]:
                continue
            found = _over_plus_const(e, bounds)
            if found is None:
                raise ChunkingError(
                    f"update {u.name} ({u!r}) writes {s.name} along dim {d.name} at index "
                    f"{e!r}, not at one of its over= dims plus a constant, so the points that "
                    f"write inside a chunk are not a box; give {d.name} one chunk (rechunk "
                    f"the inputs along it)", (d.name,))
            r, c = found
            o = self.origin(s, k)
            n = self.size(extent_size(self.number[s], k))
            lo, hi = bounds[r]
            bounds[r] = (cx.maximum(lo, o - c), cx.minimum(hi, o + n - c))
            cut = True
        idx = tuple(self.expr(e, {}, cut) for e in u.indices)
        local = tuple(_sub(e, self.origin(s, k)) for k, e in enumerate(idx))
        value = self.expr(u.value, {}, cut, own=_Own(s, idx, local))
        return Update(cx.Access(self.new[s], local), value, {d: b for d, b in bounds.items()})


@dataclass(frozen=True)
class _Own:
    """The target of the update being rewritten: its stage, its indices (global, reads
    rewritten) and its indices in the window."""

    stage: Stage
    indices: tuple[cx.Expr, ...]
    local: tuple[cx.Expr, ...]


def _view_of(view: BoundaryView, local: Tensor) -> BoundaryView:
    return BoundaryView(local, view.mode, view.value.value if isinstance(view.value, cx.Const)
                        else view.value)


def _sub(e: cx.Expr, o: cx.Expr) -> cx.Expr:
    if isinstance(o, cx.Const) and o.value == 0:
        return e
    return e - o


def _same(a: Sequence[cx.Expr], b: Sequence[cx.Expr]) -> bool:
    return len(a) == len(b) and all(cx.structure(x) == cx.structure(y) for x, y in zip(a, b))


def _over_plus_const(e: cx.Expr, bounds: Mapping[cx.Dim, object]) -> tuple[cx.Dim, int] | None:
    """(r, c) when `e` is `r + c` (or `r - c`, `r`) for an over= dim r."""
    match e:
        case cx.Dim() if e in bounds:
            return e, 0
        case cx.Cast(a) if e.dtype.is_int and e.dtype.bits >= 32:
            return _over_plus_const(a, bounds)
        case cx.Binary("add", cx.Dim() as r, cx.Const(c)) if r in bounds:
            return r, int(c)
        case cx.Binary("add", cx.Const(c), cx.Dim() as r) if r in bounds:
            return r, int(c)
        case cx.Binary("sub", cx.Dim() as r, cx.Const(c)) if r in bounds:
            return r, -int(c)
    return None


def chunk_pipeline(pipeline: Pipeline, layout: Layout) -> tuple[Stage, ...]:
    """The outputs of the chunk pipeline of `pipeline` with `layout` (a new algorithm,
    sharing the dims and the sizes of the old one)."""
    rw = _Rewriter(pipeline, layout)
    for t in pipeline.tensors:
        if isinstance(t, Stage):
            rw.new[t] = rw.stage(t)
        else:
            assert isinstance(t, Input)
            rw.new[t] = rw.input(t)
    for s in pipeline.stages:
        for u in pipeline.updates_of(s):
            rw.update(u)
    return tuple(rw.new[o] for o in pipeline.outputs)  # type: ignore[misc]
