"""Tensors, stages, boundary views, reductions and pipelines.

The algorithm is a graph of values: a tensor, a view, an update or an
expression never changes once it is made. `td.update(y[r], ...)` defines
something new about `y` later, so the updates of a stage are recorded, in
creation order, in a record the stage owns (the stage's lifetime bounds its
updates'; a module-level registry keyed by stage would keep every stage alive,
since an update holds its stage). Nothing downstream reads that record
directly: a `Pipeline` takes a snapshot of it for every stage it reaches when
it is made, and schedules, lowering, kernels and `td.evaluate` all work on a
pipeline, so a pipeline made before an update and one made after are
different values.
"""

from __future__ import annotations

import itertools
import keyword
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from .. import dtypes as dt
from ..dtypes import DType
from ..errors import DefinitionError
from .expr import (
    Acc,
    Access,
    Axis,
    Binary,
    Cast,
    Const,
    Dim,
    Expr,
    Item,
    Pack,
    Reduce,
    ReduceOp,
    Size,
    Unary,
    _coerce,
    binary,
    children,
    const,
    free_dims,
    sizes_in,
    structure,
    substitute,
    transform,
    walk,
    where,
)

_order = itertools.count()
Extent = int | Size | Expr


def _check_name(name, what: str) -> str:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise DefinitionError(f"{what} name {name!r} is not valid: use a Python identifier")
    if name.startswith("_") or name.startswith("tdsl"):
        raise DefinitionError(f"{what} name {name!r} is reserved: names may not start with '_' or 'tdsl'")
    return name


def dims(names: str) -> tuple[Dim, ...]:
    """`i, j = td.dims("i j")`: several named dimensions."""
    if not isinstance(names, str) or not names.replace(",", " ").split():
        raise DefinitionError(
            f"td.dims takes the dims' names in one string, e.g. td.dims(\"y x\"), got {names!r}")
    return tuple(dim(n) for n in names.replace(",", " ").split())


def dim(name: str) -> Dim:
    """A named dimension: `x = td.dim("x")`."""
    return Dim(_check_name(name, "dimension"))


def size(name: str) -> Size:
    """A symbolic extent, bound from argument shapes at call time."""
    return Size(_check_name(name, "size"))


def _extent(e, what: str) -> Expr:
    """Normalise an extent: a positive int, a Size, or an affine expression of sizes."""
    if isinstance(e, bool) or not isinstance(e, (int, Expr)):
        raise DefinitionError(f"{what}: extent {e!r} must be an int, a td.size or an expression of sizes")
    if isinstance(e, int):
        if e < 1:
            raise DefinitionError(f"{what}: extent {e} must be at least 1")
        return const(e, dt.int64)
    bad = [n for n in walk(e) if isinstance(n, (Dim, Access, Reduce))]
    if bad:
        raise DefinitionError(f"{what}: extent {e!r} may only use sizes and constants, not {bad[0]!r}")
    if not e.dtype.is_int:
        raise DefinitionError(
            f"{what}: extent {e!r} has dtype {e.dtype!r}; extents are integer expressions of "
            "sizes (use // for division)")
    return e


def _bound(e, what: str) -> Expr:
    if isinstance(e, bool) or not isinstance(e, (int, Expr)):
        raise DefinitionError(f"{what}: bound {e!r} must be an int or an affine expression")
    return const(e, dt.int64) if isinstance(e, int) else e


def _one_dim_hint(key: object) -> str:
    """For a 1-tuple of a dim: td.dims always returns a tuple, even of one dim."""
    if isinstance(key, tuple) and len(key) == 1 and isinstance(key[0], Dim):
        n = key[0].name
        return (f" but a tuple of one dim: td.dims returns a tuple even for one name; "
                f"write {n} = td.dim({n!r}) or ({n},) = td.dims({n!r})")
    return ""


def _distinct_names(dims: list, what: str, where: str) -> None:
    """Loops and error messages name dims by name: two dims of one name in one place
    could not be told apart."""
    names = [d.name for d in dims]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is None:
        return
    same = [d for d in dims if d.name == twice]
    kind = ("the same dim is listed twice" if same[0] is same[1] else
            f"two different td.dim objects are both named {twice!r}")
    raise DefinitionError(
        f"{what}: {kind} in {where} ({', '.join(names)}); loops are named after dims, so "
        "each needs its own name, e.g. td.dims(\"y x\")")


class _Value:
    """A graph object: its constructor sets its attributes and ends with `_seal()`;
    afterwards setting or deleting an attribute raises."""

    __slots__ = ()

    def _seal(self) -> None:
        object.__setattr__(self, "_sealed", True)

    def __setattr__(self, name: str, value) -> None:
        if "_sealed" in self.__dict__:
            what = type(self).__name__ + (f" {self.__dict__['name']!r}" if "name" in self.__dict__ else "")
            raise AttributeError(
                f"{what} cannot change after it is made (setting {name}); make a new one instead")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__}: attribute {name} cannot be deleted")


class TensorLike(_Value):
    """A tensor or a boundary view of one: what `t[i, j]` indexes."""

    name: str
    dtype: DType

    if TYPE_CHECKING:

        @property
        def dims(self) -> tuple[Dim, ...]:
            """The dims of the (underlying) tensor, in order."""
            ...

    def __getitem__(self, idx) -> Access:
        assert isinstance(self, (Tensor, BoundaryView)), "a TensorLike is a Tensor or a BoundaryView"
        if not isinstance(idx, tuple):
            idx = (idx,)
        t = self.tensor if isinstance(self, BoundaryView) else self
        if len(idx) != len(t.dims):
            names = ", ".join(d.name for d in t.dims)
            raise DefinitionError(
                f"{self.name} has {len(t.dims)} dimension(s) ({names}) but was indexed with {len(idx)}"
            )
        out = []
        for n, i in enumerate(idx):
            if isinstance(i, slice):
                raise DefinitionError(f"{self.name}[...]: slices are not supported; index with dims")
            e = const(i) if not isinstance(i, Expr) else i
            if not e.dtype.is_int:
                raise DefinitionError(
                    f"{self.name}: index {n} ({e!r}) has dtype {e.dtype!r}; indices must be integers"
                )
            out.append(e)
        return Access(self, tuple(out))

    def __bool__(self):
        return True

    __hash__ = object.__hash__

    def _unindexed(self, *_):
        dims = ", ".join(d.name for d in self.dims)
        raise DefinitionError(
            f"tensor {self.name!r} used without indices; index it with its dims, e.g. "
            f"{self.name}[{dims}], to make an expression")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _unindexed
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _unindexed
    __pow__ = __rpow__ = __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _unindexed
    __neg__ = __abs__ = __invert__ = __lt__ = __le__ = __gt__ = __ge__ = _unindexed

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """numpy functions and operators on a tensor: it must be indexed first."""
        self._unindexed()


class Tensor(TensorLike):
    """A named n-d array over named dims: a pipeline input or a stage."""

    def __init__(self, name: str, shape: dict, dtype, what: str, order: float | None = None):
        self.name = _check_name(name, what)
        if not isinstance(shape, dict) or not shape:
            raise DefinitionError(f"{what} {name!r}: shape must be a non-empty dict {{dim: extent}}")
        for d in shape:
            if not isinstance(d, Dim):
                raise DefinitionError(f"{what} {name!r}: shape key {d!r} is not a td.dim"
                                      f"{_one_dim_hint(d)}")
        _distinct_names(list(shape), f"{what} {name!r}", "its shape")
        self.dims: tuple[Dim, ...] = tuple(shape)
        self.shape: tuple[Expr, ...] = tuple(
            _extent(v, f"{what} {name!r}, dim {d.name}") for d, v in shape.items()
        )
        self.dtype = dt.as_dtype(dtype)
        # pipeline order among tensors that do not depend on each other: creation order,
        # except that a stage a schedule primitive adds is placed between others
        self.order: float = next(_order) if order is None else order

    @property
    def ndim(self) -> int:
        return len(self.dims)

    def extent(self, d: Dim) -> Expr:
        return self.shape[self.dims.index(d)]

    def __repr__(self) -> str:
        shape = ", ".join(f"{d.name}: {e!r}" for d, e in zip(self.dims, self.shape))
        return f"<{type(self).__name__} {self.name} {{{shape}}} {self.dtype!r}>"

    def _repr_html_(self) -> str:
        """In Jupyter: the definition as written, its updates, and its pipeline: every
        tensor in dependency order with its shape and what it reads, and the sizes."""
        from ..display import code_html, escape

        shape = ", ".join(f"{d.name}: {e!r}" for d, e in zip(self.dims, self.shape))
        if not isinstance(self, Stage):
            code = f"{self.name} = td.input({self.name!r}, {{{shape}}}, {self.dtype!r})"
            return f"<div><b>input</b> {escape(self.name)}{code_html(code)}</div>"
        p = Pipeline(self)
        lines = [f"{self.name} = td.compute({self.name!r}, {{{shape}}}, {self.expr!r})"]
        lines += [repr(u) for u in p.updates_of(self)]
        return _page(f"stage {self.name} ({self.dtype.name})", lines, p)


def _page(head: str, lines: list[str], p: Pipeline) -> str:
    """A stage's or update's notebook page: `head`, its code, its pipeline's graph."""
    from ..display import code_html, details, escape, table

    rows = []
    for x in p.tensors:
        dims = ", ".join(f"{d.name}: {e!r}" for d, e in zip(x.dims, x.shape))
        if isinstance(x, Stage):
            reads = ", ".join(r.name for r in p.reads(x))
            rows.append((x.name, "stage", f"{{{dims}}}", x.dtype.name, reads))
            for u in p.updates_of(x):
                over = ", ".join(f"{ax.dim.name}: ({ax.lo!r}, {ax.hi!r})" for ax in u.axes)
                got = ", ".join(t.name for t in tensors_read(u.value))
                rows.append((u.name, f"update of {x.name}", f"over {{{over}}}", "", got))
        else:
            rows.append((x.name, "input", f"{{{dims}}}", x.dtype.name, ""))
    graph = table(rows, ("tensor", "kind", "shape", "dtype", "reads"))
    sizes = ", ".join(z.name for z in p.sizes)
    tail = f"<p>sizes bound at call time: {escape(sizes)}</p>" if sizes else ""
    return (f"<div><b>{escape(head)}</b>{code_html(chr(10).join(lines))}"
            f"{details('pipeline', graph + tail, True)}</div>")


class Input(Tensor):
    """A pipeline input: an array the caller passes."""

    def __init__(self, name, shape, dtype):
        super().__init__(name, shape, dtype, "input")
        self._seal()


class Stage(Tensor):
    """A tensor defined by an index expression over its dims.

    `order` places a stage a schedule primitive makes among the others (default:
    after every tensor made so far)."""

    def __init__(self, name, shape, expr, order: float | None = None):
        if isinstance(expr, TensorLike):
            raise DefinitionError(f"stage {name!r}: the definition is a tensor; index it, e.g. T[i, j]")
        e = const(expr) if not isinstance(expr, Expr) else expr
        super().__init__(name, shape, e.dtype, "stage", order)
        _top_named(e, f"stage {name!r}")
        self.expr = lift_named(e, dict(zip(self.dims, self.shape)), f"stage {name!r}")
        self._validate()
        # the updates defined on this stage, in creation order: only `Update` appends
        # to it, and only `Pipeline` (a snapshot) and `updates` read it
        self._recorded: list[Update] = []
        self._seal()

    @property
    def updates(self) -> tuple[Update, ...]:
        """The updates defined on this stage so far, in creation order. Pipelines,
        schedules and kernels use the updates their pipeline saw when it was made
        (`Pipeline.updates_of`)."""
        return tuple(self._recorded)

    @property
    def reduction(self) -> Reduce | None:
        return self.expr if isinstance(self.expr, Reduce) else None

    @property
    def reduce_axes(self) -> tuple[Axis, ...]:
        r = self.reduction
        return r.axes if r is not None else ()

    @property
    def loop_dims(self) -> tuple[Dim, ...]:
        """The stage's loops before scheduling: its dims, then its reduction dims."""
        return self.dims + tuple(ax.dim for ax in self.reduce_axes)

    def _validate(self):
        body = self.expr.body if isinstance(self.expr, Reduce) else self.expr
        check_inline_reductions(body, list(self.loop_dims), f"stage {self.name!r}")
        rdims = [ax.dim for ax in self.reduce_axes]
        clash = [d.name for d in rdims if d in self.dims]
        if clash:
            raise DefinitionError(
                f"stage {self.name!r}: reduction dim(s) {clash} are also dims of the stage; "
                "reduce over a different td.dim"
            )
        _distinct_names(list(self.loop_dims), f"stage {self.name!r}", "its dims and reduction dims")
        allowed = set(self.dims)
        for ax in self.reduce_axes:
            _check_bounds(ax, allowed, f"stage {self.name!r}: bound {{b}} of reduction dim "
                          f"{ax.dim.name} uses {{stray}}, which are not dims of the stage or "
                          "earlier reduction dims")
            allowed.add(ax.dim)
        strays = [d for d in free_dims(self.expr) if d not in self.dims]
        if strays:
            valid = [d.name for d in self.loop_dims]
            twins = [d.name for d in strays if d.name in {x.name for x in self.dims}]
            if twins:
                raise DefinitionError(
                    f"stage {self.name!r}: its expression uses a dim named {twins[0]!r} that is "
                    f"not the stage's own dim {twins[0]!r}: two td.dim({twins[0]!r}) calls make "
                    "two different dims; use the same Dim object in the shape and the expression"
                )
            raise DefinitionError(
                f"stage {self.name!r} uses dim(s) {[d.name for d in strays]} that are neither "
                f"its dims nor reduced over; its loops are {valid} (reduce with "
                "td.sum(..., over=dim) or add the dim to the stage's shape)"
            )


class Update(_Value):
    """`td.update(y[r], y[r - 1] + x[r], over={r: (1, N)})`: an in-place definition.

    For each point of `over` in lexicographic order (first dim outermost), the
    target element gets the value. Updates of a stage apply in creation order,
    after its `td.compute` definition; consumers see the final values. An update
    is schedulable like a stage; its loops are its `over` dims.
    """

    def __init__(self, target, value, over, *, _replaces: Update | None = None):
        # `_replaces`: a schedule primitive's rewrite of that update, which takes its
        # place (name and index) in the schedule's pipeline; the stage does not record it
        if not isinstance(target, Access) or isinstance(target.tensor, BoundaryView) or not isinstance(
                target.tensor, Stage):
            raise DefinitionError(
                f"td.update: the target must be an element of a stage made by td.compute, e.g. "
                f"y[r]; got {target!r}")
        stage: Stage = target.tensor
        self.stage = stage
        self.index: int = len(stage._recorded) if _replaces is None else _replaces.index
        self.name = f"{stage.name}.u{self.index}"
        what = f"td.update of {stage.name}"
        if not isinstance(over, dict) or not over:
            raise DefinitionError(f"{what}: over= must be a dict {{dim: extent or (lo, hi)}}")
        axes = []
        for d, ext in over.items():
            if not isinstance(d, Dim):
                raise DefinitionError(f"{what}: over= key {d!r} is not a td.dim{_one_dim_hint(d)}")
            if isinstance(ext, tuple):
                if len(ext) != 2:
                    raise DefinitionError(f"{what}: bounds of {d.name} must be (lo, hi), got {ext!r}")
                lo, hi = (_bound(b, f"{what} over {d.name}") for b in ext)
            else:
                lo, hi = const(0, dt.int64), _extent(ext, f"{what} over {d.name}")
            axes.append(Axis(d, lo, hi))
        self.axes = tuple(axes)
        _distinct_names(list(self.loop_dims), what, "its over= dims")
        v = const(value) if not isinstance(value, Expr) else value
        for ix in target.indices:
            if any(isinstance(n, Reduce) for n in walk(ix)):
                raise DefinitionError(
                    f"{what}: the target index {ix!r} contains a reduction; compute it as its own "
                    "stage and index with that stage's element")
        boxed = {ax.dim: ax.hi for ax in self.axes
                 if isinstance(ax.lo, Const) and ax.lo.value == 0 and not free_dims(ax.hi)}
        v = lift_named(v, boxed, what, writes=stage)
        check_inline_reductions(v, list(self.loop_dims), what)
        self.indices = target.indices
        self.value = _coerce(v, stage.dtype)
        self._validate(what)
        self.order = next(_order)
        self._seal()
        if _replaces is None:
            stage._recorded.append(self)  # the stage's record of its updates, never its value

    def _validate(self, what: str) -> None:
        allowed: list[Dim] = []
        for ax in self.axes:
            _check_bounds(ax, allowed, f"{what}: bound {{b}} of {ax.dim.name} uses {{stray}}, "
                          "which are not dims listed before it in over=")
            allowed.append(ax.dim)
        for e in (*self.indices, self.value):
            stray = [d.name for d in free_dims(e) if d not in allowed]
            if stray:
                raise DefinitionError(
                    f"{what} uses dim(s) {stray} that are not listed in over= "
                    f"({', '.join(d.name for d in allowed)}); every dim of the target and value "
                    "must be in over=")

    @property
    def dtype(self) -> DType:
        return self.stage.dtype

    @property
    def loop_dims(self) -> tuple[Dim, ...]:
        return tuple(ax.dim for ax in self.axes)

    @property
    def reduce_axes(self) -> tuple:
        return ()

    @property
    def reduction(self):
        return None

    def target(self) -> Access:
        return Access(self.stage, self.indices)

    def __repr__(self) -> str:
        over = ", ".join(f"{ax.dim.name}: ({ax.lo!r}, {ax.hi!r})" for ax in self.axes)
        return f"td.update({self.target()!r}, {self.value!r}, over={{{over}}})"

    def _repr_html_(self) -> str:
        """In Jupyter: the update as written and the pipeline of its stage."""
        return _page(f"update {self.name}", [repr(self)], Pipeline(self.stage))

    __hash__ = object.__hash__


def _check_bounds(ax: Axis, allowed, message: str) -> None:
    """DefinitionError(`message` with {b} and {stray} filled in) when a bound of `ax` uses
    dims not in `allowed`."""
    for b in (ax.lo, ax.hi):
        stray = [d.name for d in free_dims(b) if d not in allowed]
        if stray:
            raise DefinitionError(message.format(b=repr(b), stray=stray))


def check_inline_reductions(e: Expr, scope: list[Dim], what: str) -> None:
    """Check the reductions inside `e` (an inline reduction is computed in full for each
    point where it is used): each reduces over dims with names of their own, distinct from
    the enclosing loops in `scope`, and its bounds use only enclosing dims."""
    if not isinstance(e, Reduce):
        for n in children(e):
            check_inline_reductions(n, scope, what)
        return
    inner = list(scope)
    for ax in e.axes:
        if ax.dim.name in {d.name for d in inner}:
            raise DefinitionError(
                f"{what}: the reduction {e!r} reduces over {ax.dim.name}, a name an enclosing "
                f"loop already has ({', '.join(d.name for d in inner)}); reduce over a td.dim "
                "of another name")
        _check_bounds(ax, inner, f"{what}: bound {{b}} of reduction dim {ax.dim.name} uses "
                      "{stray}, which are not enclosing dims or earlier reduction dims")
        inner.append(ax.dim)
    check_inline_reductions(e.body, inner, what)


# the operations of an update an atomic read-modify-write may apply (numpy's, in the
# stage's dtype): updates by them commute, so their order does not change the result
ATOMIC_OPS = ("add", "sub", "mul", "min", "max", "and", "or", "xor")


def read_modify_write(value: Expr, target: Access) -> tuple[str, Expr] | None:
    """`(op, e)` when `value` is `target op e` (or `e op target`, `op` commutative) in
    the target's dtype, one of ATOMIC_OPS, and neither `e` nor the target's indices read
    the target's tensor; else None. Such updates of one element commute: applied in any
    order (and atomically, by threads at once) they give the same element (float sums
    and products up to rounding)."""
    if not isinstance(value, Binary) or value.op not in ATOMIC_OPS:
        return None
    if value.dtype != target.dtype:
        return None
    key = structure(target)
    if structure(value.a) == key:
        e = value.b
    elif structure(value.b) == key and value.op != "sub":
        e = value.a
    else:
        return None
    tensor = target.tensor
    if any(tensor in tensors_read(x) for x in (e, *target.indices)):
        return None
    return value.op, e


def update(target, value, over) -> Update:
    """In-place definition: `td.update(y[r], y[r - 1] + x[r], over={r: (1, N)})`."""
    return Update(target, value, over)


# the views that read another element of the tensor for an index out of range (`pad`
# reads its value instead)
REMAPPING_VIEWS = ("clamp", "mirror", "mirror_interior", "wrap")


class BoundaryView(TensorLike):
    """`td.clamp(t)`, `td.pad(t, value)`, `td.mirror(t)`, `td.mirror_interior(t)`,
    `td.wrap(t)`: a view of `t` that may be indexed out of range."""

    def __init__(self, tensor: TensorLike, mode: str, value=None):
        if isinstance(tensor, BoundaryView):
            tensor = tensor.tensor
        if not isinstance(tensor, Tensor):
            raise DefinitionError(f"td.{mode} needs a tensor (td.input or td.compute), got {tensor!r}")
        v = _coerce(value, tensor.dtype) if mode == "pad" else None
        if v is not None and not isinstance(v, Const):
            if isinstance(v, Cast) and isinstance(v.a, Const):
                v = const(v.a.value, tensor.dtype) if dt.scalar_fits(v.a.value, tensor.dtype) else v
            else:
                raise DefinitionError(f"td.pad({tensor.name}, value): value must be a constant")
        self.tensor: Tensor = tensor
        self.mode = mode
        self.name = tensor.name
        self.dtype = tensor.dtype
        self.value = v
        self._seal()

    @property
    def dims(self):
        return self.tensor.dims

    @property
    def shape(self):
        return self.tensor.shape

    def __repr__(self) -> str:
        extra = f", {self.value!r}" if self.mode == "pad" else ""
        return f"td.{self.mode}({self.tensor.name}{extra})"


def clamp(t: Tensor) -> BoundaryView:
    """A view of `t` whose out-of-range indices read the nearest edge element."""
    return BoundaryView(t, "clamp")


def mirror(t: Tensor) -> BoundaryView:
    """A view of `t` reflected at its edges, the edge element repeated: along an axis of
    n elements, index -1 reads 0, -2 reads 1, n reads n - 1 (numpy's pad mode
    "symmetric"; Halide's mirror_image). Far indices repeat with period 2n."""
    return BoundaryView(t, "mirror")


def mirror_interior(t: Tensor) -> BoundaryView:
    """A view of `t` reflected about its edge elements: index -1 reads 1, -2 reads 2, n
    reads n - 2 (numpy's pad mode "reflect"; Halide's mirror_interior). Far indices repeat
    with period 2n - 2; an axis of one element always reads it."""
    return BoundaryView(t, "mirror_interior")


def wrap(t: Tensor) -> BoundaryView:
    """A view of `t` repeated along every axis: index -1 reads n - 1, n reads 0 (numpy's
    pad mode "wrap"; Halide's repeat_image)."""
    return BoundaryView(t, "wrap")


def assume_in_range(t: Tensor) -> BoundaryView:
    """A view of `t` whose indices are promised to be in range: the answer to "this
    data-dependent index is always valid, do not test it".

    A kernel reads through it with no check: no `ArgumentError`, no test in the loop
    (which then stays branch-free and vectorizes). A broken promise reads the nearest
    edge element, as `td.clamp(t)` does, never memory outside `t`; `td.evaluate`, the
    reference, checks the promise and raises `ArgumentError`.

        lut = td.input("lut", {v: 16}, td.float32)
        out = td.compute("out", {i: N}, td.assume_in_range(lut)[codes[i] & 15])
    """
    return BoundaryView(t, "assume_in_range")


def pad(t: Tensor, value=0) -> BoundaryView:
    """A view of `t` whose out-of-range indices read `value`."""
    return BoundaryView(t, "pad", value)


def input(name: str, shape: dict, dtype) -> Input:  # noqa: A001 - the public name
    """A pipeline input: `td.input("A", {i: N, k: 512}, td.float32)`."""
    return Input(name, shape, dtype)


def compute(name: str, shape: dict, expr) -> Stage:
    """A stage: `td.compute("C", {i: N, j: M}, expr)`."""
    return Stage(name, shape, expr)


# ---------------------------------------------------------------- reductions

_IDENTITY = {"sum": 0, "prod": 1}


def _infer_extent(body: Expr, d: Dim, what: str) -> Expr:
    found: list[tuple[str, Expr]] = []
    for n in walk(body):
        if isinstance(n, Access):
            t = n.tensor.tensor if isinstance(n.tensor, BoundaryView) else n.tensor
            for pos, ix in enumerate(n.indices):
                if ix is d:
                    found.append((t.name, t.shape[pos]))
    if not found:
        raise DefinitionError(
            f"{what}: cannot infer the extent of reduction dim {d.name}: no tensor is indexed by "
            f"{d.name} alone; give it explicitly, e.g. over={{{d.name}: 16}} or over={{{d.name}: (lo, hi)}}"
        )
    shown = {repr(e) for _, e in found}
    if len(shown) > 1:
        listing = ", ".join(f"{t}: {e!r}" for t, e in found)
        raise DefinitionError(
            f"{what}: reduction dim {d.name} indexes tensors of different extents ({listing}); "
            f"give its extent explicitly with over={{{d.name}: ...}}"
        )
    return found[0][1]


def _reduce(op: ReduceOp, body, over, dtype, name: str | None = None) -> Reduce:
    what = f"td.{op}"
    if name is not None:
        _check_name(name, f"{what}: the reduction")
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
            raise DefinitionError(f"{what}: over= key {d!r} is not a td.dim{_one_dim_hint(d)}")
        if ext is None:
            lo, hi = const(0, dt.int64), _infer_extent(body, d, what)
        elif isinstance(ext, tuple):
            if len(ext) != 2:
                raise DefinitionError(f"{what}: bounds of {d.name} must be (lo, hi), got {ext!r}")
            lo, hi = (_bound(b, f"{what} over {d.name}") for b in ext)
        else:
            lo, hi = const(0, dt.int64), _extent(ext, f"{what} over {d.name}")
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


def _start_dtype(v, what: str) -> DType:
    if isinstance(v, Expr):
        return v.dtype
    if isinstance(v, np.generic):
        return dt.as_dtype(v.dtype)
    if isinstance(v, bool):
        return dt.bool_
    if isinstance(v, int):
        return dt.int64
    if isinstance(v, float):
        return dt.float64
    raise DefinitionError(f"{what}: start value {v!r} is not a number or an expression")


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


def lift_named(e: Expr, extents: dict[Dim, Expr], what: str,
               writes: Tensor | None = None) -> Expr:
    """`e` with each named reduction inside it made a stage of its name, read at the
    enclosing dims it uses (`extents`: the dims a named reduction may use, with the
    extent of its stage along each). `writes`: the stage an update writes, which a
    named reduction may not read (it would be computed before the update).

    A named reduction that occurs more than once (the helpers that use their operand
    twice, such as `td.isnan` or `td.argmax`, copy it) is one stage."""
    lifted: dict[tuple[object, ...], Expr] = {}

    def lift(n: Expr) -> Expr | None:
        if not isinstance(n, Reduce) or n.name is None:
            return None
        key = (n.name, structure(n))
        if key not in lifted:
            lifted[key] = _lift(n)
        return lifted[key]

    def _lift(n: Reduce) -> Expr:
        assert n.name is not None
        free = [d for d in extents if d in set(free_dims(n))]
        stray = [d.name for d in free_dims(n) if d not in extents]
        if stray:
            raise DefinitionError(
                f"{what}: the reduction named {n.name!r} uses {stray}, dims of an enclosing "
                "reduction or bounded below by another dim; a named reduction is a stage over "
                f"the dims {[d.name for d in extents]} only. Leave out name= to compute it "
                "where it is used")
        if writes is not None and writes in tensors_read(n):
            raise DefinitionError(
                f"{what}: the reduction named {n.name!r} reads {writes.name}, which the update "
                "writes; as a stage it would be computed before the update. Leave out name= "
                "to compute it where it is used")
        plain = Reduce(n.op, n.body, n.axes, n.dtype)
        if not free:  # a stage of one element
            one = Dim(f"{n.name}_0")
            return Access(Stage(n.name, {one: 1}, plain), (const(0, dt.int32),))
        return Access(Stage(n.name, {d: extents[d] for d in free}, plain), tuple(free))

    return transform(e, lift)


def _top_named(e: Expr, what: str) -> None:
    if isinstance(e, Reduce) and e.name is not None:
        raise DefinitionError(
            f"{what}: the reduction named {e.name!r} is the whole definition, so the stage is "
            "that reduction already; leave out name= (schedule it by the stage's name)")


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


def identity(op: ReduceOp, d: DType):
    """The value a reduction starts from (what an empty reduction yields)."""
    import numpy as np

    if op in _IDENTITY:
        return _IDENTITY[op] if not d.is_float else float(_IDENTITY[op])
    if d.is_float:
        return float("-inf") if op == "max" else float("inf")
    if d.is_bool:
        return op != "max"
    info = np.iinfo(d.name)
    return int(info.min) if op == "max" else int(info.max)


# ---------------------------------------------------------------- pipelines


def stage_reads(s: Stage, updates: tuple[Update, ...]) -> list[Tensor]:
    """Tensors a stage's definition and the given updates of it read (not the stage itself)."""
    out = dict.fromkeys(tensors_read(s.expr))
    for u in updates:
        for e in (*u.indices, u.value):
            out.update(dict.fromkeys(tensors_read(e)))
    out.pop(s, None)
    return list(out)


def tensors_read(e: Expr) -> list[Tensor]:
    out: dict[Tensor, None] = {}
    for n in walk(e):
        if isinstance(n, Access):
            t = n.tensor.tensor if isinstance(n.tensor, BoundaryView) else n.tensor
            out[t] = None
    return list(out)


def _checked_outputs(outputs) -> tuple[Stage, ...]:
    """A pipeline's outputs as a tuple of distinct stages (DefinitionError otherwise)."""
    if isinstance(outputs, Tensor):
        outputs = (outputs,)
    if not isinstance(outputs, (tuple, list)):
        raise DefinitionError(
            f"outputs must be a stage made by td.compute or a tuple of them, got {outputs!r}")
    outputs = tuple(outputs)
    if not outputs:
        raise DefinitionError("a pipeline needs at least one output stage")
    for o in outputs:
        if not isinstance(o, Stage):
            raise DefinitionError(f"outputs must be stages made by td.compute, got {o!r}")
    if len(set(outputs)) != len(outputs):
        raise DefinitionError("an output stage is listed twice")
    return outputs


def _reachable(outputs: tuple[Stage, ...], known: Mapping[Stage, tuple[Update, ...]]
               ) -> dict[Tensor, tuple[Update, ...]]:
    """Every tensor the outputs read, directly or through their updates, with the
    updates of each (those in `known`, else the stage's own as of now; () for inputs)."""
    updates: dict[Tensor, tuple[Update, ...]] = {}
    stack: list[Tensor] = list(outputs)
    while stack:
        t = stack.pop()
        if t in updates:
            continue
        updates[t] = ()
        if isinstance(t, Stage):
            updates[t] = known[t] if t in known else t.updates
            stack.extend(stage_reads(t, updates[t]))
    return updates


def _by_name(tensors: tuple[Tensor, ...]) -> dict[str, Tensor]:
    by_name: dict[str, Tensor] = {}
    for t in tensors:
        if t.name in by_name:
            raise DefinitionError(f"two different tensors are named {t.name!r} in one pipeline")
        by_name[t.name] = t
    return by_name


def _sizes(tensors: tuple[Tensor, ...], updates: Mapping[Tensor, tuple[Update, ...]],
           by_name: Mapping[str, Tensor]) -> tuple[Size, ...]:
    """The symbolic sizes the tensors' shapes, definitions and updates use, by name."""
    sizes: dict[str, Size] = {}
    for t in tensors:
        exprs = list(t.shape) + ([t.expr] if isinstance(t, Stage) else [])
        for u in updates[t]:
            exprs += [u.value, *u.indices, *(b for ax in u.axes for b in (ax.lo, ax.hi))]
        for e in exprs:
            for s in sizes_in(e):
                if sizes.setdefault(s.name, s) is not s:
                    raise DefinitionError(f"two different td.size objects are named {s.name!r}")
                if s.name in by_name:
                    raise DefinitionError(f"size {s.name!r} has the same name as a tensor")
    return tuple(sizes[n] for n in sorted(sizes))


class Pipeline(_Value):
    """The DAG of tensors that the given outputs depend on, in dependency order.

    A pipeline is a snapshot: each stage it reaches comes with the updates defined
    on it when the pipeline was made (`updates_of`); updates defined later belong to
    pipelines made later. `known` gives the updates of some stages explicitly (a
    schedule primitive that rebuilds a pipeline keeps its snapshot)."""

    def __init__(self, outputs, known: Mapping[Stage, tuple[Update, ...]] | None = None):
        self.outputs: tuple[Stage, ...] = _checked_outputs(outputs)
        updates = _reachable(self.outputs, known or {})
        self._updates = updates
        self.tensors: tuple[Tensor, ...] = _topological(list(updates), self.reads)
        self.inputs = tuple(t for t in self.tensors if isinstance(t, Input))
        self.stages = tuple(t for t in self.tensors if isinstance(t, Stage))
        self.updates: tuple[Update, ...] = tuple(u for s in self.stages for u in updates[s])
        self.by_name = _by_name(self.tensors)
        self.sizes: tuple[Size, ...] = _sizes(self.tensors, updates, self.by_name)
        self._seal()

    def updates_of(self, s: Stage) -> tuple[Update, ...]:
        """The updates of stage `s` in this pipeline, in creation order."""
        return self._updates[s]

    def reads(self, s: Stage) -> list[Tensor]:
        """Tensors stage `s` and its updates read (not `s` itself)."""
        return stage_reads(s, self._updates[s])

    def consumers(self, t: Tensor) -> list[Stage]:
        return [s for s in self.stages if t in self.reads(s)]

    def stale(self) -> Update | None:
        """The first update defined on a stage of this pipeline after the pipeline was
        made, or None while the pipeline is current."""
        for s in self.stages:
            if len(s._recorded) > len(self._updates[s]):
                return s._recorded[len(self._updates[s])]
        return None

    @property
    def schedulables(self) -> tuple:
        """Everything with loops: stages, then each stage's updates in order."""
        return tuple(x for s in self.stages for x in (s, *self._updates[s]))

    def stage(self, name: str):
        """The stage (or update, named like "y.u0") called `name`."""
        for x in self.schedulables:
            if x.name == name:
                return x
        valid = ", ".join(x.name for x in self.schedulables)
        raise DefinitionError(f"no stage named {name!r} in this pipeline; stages are: {valid}")


def _topological(tensors: list[Tensor], reads) -> tuple[Tensor, ...]:
    """Producers before consumers, ties broken by creation order; cycles are refused."""
    deps = {t: [d for d in reads(t) if d in tensors] if isinstance(t, Stage) else []
            for t in tensors}
    done: dict[Tensor, None] = {}
    visiting: list[Tensor] = []

    def visit(t: Tensor) -> None:
        if t in done:
            return
        if t in visiting:
            cycle = " -> ".join(x.name for x in visiting[visiting.index(t):] + [t])
            raise DefinitionError(f"the pipeline has a cycle through updates: {cycle}")
        visiting.append(t)
        for d in sorted(deps[t], key=lambda x: x.order):
            visit(d)
        visiting.pop()
        done[t] = None

    for t in sorted(tensors, key=lambda x: x.order):
        visit(t)
    return tuple(done)


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
