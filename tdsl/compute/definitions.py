"""What an algorithm defines: inputs (`td.input`), stages (`td.compute`) and updates
(`td.update`), and the checks each definition passes.

The algorithm is a graph of values: a tensor, a view, an update or an
expression never changes once it is made. `td.update(y[r], ...)` defines
something new about `y` later, so the updates of a stage are recorded, in
creation order, in a record the stage owns (the stage's lifetime bounds its
updates'; a module-level registry keyed by stage would keep every stage alive,
since an update holds its stage). Nothing downstream reads that record
directly: a `Pipeline` (`compute.pipeline`) takes a snapshot of it for every
stage it reaches when it is made, and schedules, lowering, kernels and
`td.evaluate` all work on a pipeline, so a pipeline made before an update and
one made after are different values.

Built on these: boundary views (`compute.views`), reductions
(`compute.reductions`) and pipelines (`compute.pipeline`).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, cast

from .. import dtypes as dt
from ..dtypes import DType
from ..errors import DefinitionError
from .naming import check_name, checked_bound, checked_extent, distinct_names, one_dim_hint
from .nodes import Access, Axis, Binary, Const, Dim, Expr, Reduce, _coerce, const
from .sealed import Sealed
from .traversal import children, free_dims, structure, transform, walk

if TYPE_CHECKING:
    from .views import BoundaryView

_order = itertools.count()


class TensorLike(Sealed):
    """A tensor or a boundary view of one: what `t[i, j]` indexes."""

    name: str
    dtype: DType

    if TYPE_CHECKING:

        @property
        def dims(self) -> tuple[Dim, ...]:
            """The dims of the (underlying) tensor, in order."""
            ...

    def __getitem__(self, idx) -> Access:
        if not isinstance(idx, tuple):
            idx = (idx,)
        if len(idx) != len(self.dims):  # a view's dims are its tensor's
            names = ", ".join(d.name for d in self.dims)
            raise DefinitionError(
                f"{self.name} has {len(self.dims)} dimension(s) ({names}) but was indexed with {len(idx)}"
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
        # a TensorLike is a Tensor or a BoundaryView
        return Access(cast("Tensor | BoundaryView", self), tuple(out))

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
        self.name = check_name(name, what)
        if not isinstance(shape, dict) or not shape:
            raise DefinitionError(f"{what} {name!r}: shape must be a non-empty dict {{dim: extent}}")
        for d in shape:
            if not isinstance(d, Dim):
                raise DefinitionError(f"{what} {name!r}: shape key {d!r} is not a td.dim"
                                      f"{one_dim_hint(d)}")
        distinct_names(list(shape), f"{what} {name!r}", "its shape")
        self.dims: tuple[Dim, ...] = tuple(shape)
        self.shape: tuple[Expr, ...] = tuple(
            checked_extent(v, f"{what} {name!r}, dim {d.name}") for d, v in shape.items()
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
        from .pipeline import Pipeline, pipeline_page

        shape = ", ".join(f"{d.name}: {e!r}" for d, e in zip(self.dims, self.shape))
        if not isinstance(self, Stage):
            code = f"{self.name} = td.input({self.name!r}, {{{shape}}}, {self.dtype!r})"
            return f"<div><b>input</b> {escape(self.name)}{code_html(code)}</div>"
        pipeline = Pipeline(self)
        lines = [f"{self.name} = td.compute({self.name!r}, {{{shape}}}, {self.expr!r})"]
        lines += [repr(u) for u in pipeline.updates_of(self)]
        return pipeline_page(f"stage {self.name} ({self.dtype.name})", lines, pipeline)




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
        distinct_names(list(self.loop_dims), f"stage {self.name!r}", "its dims and reduction dims")
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


class Update(Sealed):
    """`td.update(y[r], y[r - 1] + x[r], over={r: (1, N)})`: an in-place definition.

    For each point of `over` in lexicographic order (first dim outermost), the
    target element gets the value. Updates of a stage apply in creation order,
    after its `td.compute` definition; consumers see the final values. An update
    is schedulable like a stage; its loops are its `over` dims.
    """

    def __init__(self, target, value, over, *, _replaces: Update | None = None):
        # `_replaces`: a schedule primitive's rewrite of that update, which takes its
        # place (name and index) in the schedule's pipeline; the stage does not record it
        if not isinstance(target, Access) or not isinstance(target.tensor, Stage):
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
                raise DefinitionError(f"{what}: over= key {d!r} is not a td.dim{one_dim_hint(d)}")
            if isinstance(ext, tuple):
                if len(ext) != 2:
                    raise DefinitionError(f"{what}: bounds of {d.name} must be (lo, hi), got {ext!r}")
                lo, hi = (checked_bound(b, f"{what} over {d.name}") for b in ext)
            else:
                lo, hi = const(0, dt.int64), checked_extent(ext, f"{what} over {d.name}")
            axes.append(Axis(d, lo, hi))
        self.axes = tuple(axes)
        distinct_names(list(self.loop_dims), what, "its over= dims")
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
        from .pipeline import Pipeline, pipeline_page

        return pipeline_page(f"update {self.name}", [repr(self)], Pipeline(self.stage))

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


def input(name: str, shape: dict, dtype) -> Input:  # noqa: A001 - the public name
    """A pipeline input: `td.input("A", {i: N, k: 512}, td.float32)`."""
    return Input(name, shape, dtype)


def compute(name: str, shape: dict, expr) -> Stage:
    """A stage: `td.compute("C", {i: N, j: M}, expr)`."""
    return Stage(name, shape, expr)



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




def tensors_read(e: Expr) -> list[Tensor]:
    out: dict[Tensor, None] = {}
    for n in walk(e):
        if isinstance(n, Access):
            out[n.tensor if isinstance(n.tensor, Tensor) else n.tensor.tensor] = None
    return list(out)


