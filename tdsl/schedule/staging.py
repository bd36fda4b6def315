"""Primitives that add a stage (cache_write, cache_read, rfactor) or lay one out (layout).

Each is a thin, checked front over `restage`: it builds the new stage's
definition from the scheduled pipeline and swaps it in. The new stage is
scheduled like any other, named by the string given (or its default name):
computed at root until a `compute_at` places it, with its dims as loops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, cast

from .. import dtypes as dt
from ..compute import Dim, Stage, Update
from ..compute import expr as cx
from ..compute.definitions import Input, Tensor, read_modify_write
from ..compute.expr import ReduceOp
from ..compute.naming import check_name
from ..compute.pipeline import Pipeline
from ..compute.reductions import identity
from ..errors import DefinitionError
from .record import Primitive, StageRef, resolve_stage, schedule_error
from .restage import new_stage, restage, retarget
from .state import ROOT, State, initial_loops


def _fresh_stage_name(prim: Primitive, st: State, name) -> str:
    try:
        check_name(name, "stage")
    except DefinitionError as e:
        raise schedule_error(prim, str(e)) from None
    if name in st.pipeline.by_name:
        raise schedule_error(prim, f"the pipeline already has a tensor named {name!r}; pass name= "
                                   "another")
    return name


def _plain_stage(prim: Primitive, st: State, stage) -> Stage:
    """A stage whose definition a primitive may rewrite: no updates, loops not yet scheduled."""
    stage = resolve_stage(prim, st, stage)
    if isinstance(stage, Update):
        raise schedule_error(prim, f"{stage.name} is an update; {prim.method} applies to stages")
    if st.pipeline.updates_of(stage):
        names = ", ".join(u.name for u in st.pipeline.updates_of(stage))
        raise schedule_error(prim, f"{stage.name} has updates ({names}), so its definition cannot "
                                   "be restaged")
    if stage in st.touched:
        raise schedule_error(prim, f"{stage.name}'s loops were already scheduled; apply "
                                   f"{prim.method} first, then schedule the loops of {stage.name} "
                                   "and of the new stage")
    return stage


@dataclass(frozen=True)
class CacheWrite(Primitive):
    """Compute a stage into a new stage, then copy it out: the local accumulator.

    Before:                                   after cache_write(C, "Cl"):
        for i in 0 .. 16:                         allocate Cl[16, 16]
          for j in 0 .. 16:                       for i in 0 .. 16:
            C[i, j] = 0.0                           for j in 0 .. 16:
            for k in 0 .. 16:                         Cl[i, j] = 0.0
              C[i, j] = C[i, j] + A[i, k] * ...       for k in 0 .. 16:
                                                        Cl[i, j] = Cl[i, j] + A[i, k] * ...
                                                  for i in 0 .. 16:
                                                    for j in 0 .. 16:
                                                      C[i, j] = Cl[i, j]

    With compute_at(Cl, C, tile loop) the reduction accumulates in a small block
    (registers, once its loops are unrolled and vectorized) and C is written once.
    """

    stage: StageRef
    name: str | None = None
    method: ClassVar[str] = "cache_write"

    def apply(self, st: State) -> None:
        c = _plain_stage(self, st, self.stage)
        name = _fresh_stage_name(self, st, self.name or f"{c.name}_local")
        local = new_stage(name, c, c.expr, c.order - 0.5)
        restage(st, self.describe(), {c: local[tuple(c.dims)]}, fresh_loops=(c,))


def _tensor(prim: Primitive, st: State, t) -> Tensor:
    if isinstance(t, Input) and t in st.pipeline.inputs:
        return t
    if isinstance(t, str) and isinstance(st.pipeline.by_name.get(t), Input):
        return st.pipeline.by_name[t]
    found = st.resolve(t) if isinstance(t, (Stage, str)) else None
    if isinstance(found, Stage):
        return found
    valid = ", ".join(x.name for x in st.pipeline.tensors)
    raise schedule_error(prim, f"{getattr(t, 'name', t)!r} is not a tensor of this pipeline; "
                               f"tensors are: {valid}")


@dataclass(frozen=True)
class CacheRead(Primitive):
    """Read a tensor through a new stage that copies it: packing.

    Before:                                  after cache_read(B, [C], "Bp"):
        for i in 0 .. 16:                        allocate Bp[16, 16]
          for j in 0 .. 16:                      for k in 0 .. 16:
            ...                                    for j in 0 .. 16:
            for k in 0 .. 16:                        Bp[k, j] = B[k, j]
              C[i, j] = C[i, j] + A[i, k] * B[k, j]
                                                 for i in 0 .. 16:
                                                   for j in 0 .. 16:
                                                     ...
                                                     for k in 0 .. 16:
                                                       C[i, j] = C[i, j] + A[i, k] * Bp[k, j]

    With compute_at(Bp, C, loop), Bp holds just the block of B that C's loop
    reads, contiguous (re-laid out with `layout`), instead of strided rows.
    `consumers` defaults to every stage that reads the tensor.
    """

    tensor: Tensor
    consumers: tuple = ()
    name: str | None = None
    method: ClassVar[str] = "cache_read"

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "consumers", tuple(self.consumers))

    def apply(self, st: State) -> None:
        t = _tensor(self, st, self.tensor)
        readers = st.pipeline.consumers(t)
        consumers = [resolve_stage(self, st, c) for c in self.consumers] or readers
        for c in consumers:
            if c not in readers:
                names = ", ".join(r.name for r in readers) or "none"
                raise schedule_error(self, f"{c.name} does not read {t.name}; its readers are: "
                                           f"{names}")
            if st.pipeline.updates_of(c):
                names = ", ".join(u.name for u in st.pipeline.updates_of(c))
                raise schedule_error(self, f"{c.name} has updates ({names}), so what it reads "
                                           "cannot be restaged; cache_read applies to stages "
                                           "without updates")
        name = _fresh_stage_name(self, st, self.name or f"{t.name}_cache")
        first = min(c.order for c in consumers)
        copy = new_stage(name, t, t[tuple(t.dims)], first - 0.5)
        restage(st, self.describe(), {c: retarget(c.expr, {t: copy}) for c in consumers})


@dataclass(frozen=True)
class RFactor(Primitive):
    """Split a reduction dim by `factor` and make its inner part a dim of a new stage.

    Before: C = sum(A[i, k] * B[k, j], over=k); after rfactor(C, "k", 4):
        allocate C_rf[16, 16, 4]
        for i in 0 .. 16:
          for j in 0 .. 16:
            for k_i in 0 .. 4:
              C_rf[i, j, k_i] = 0.0
              for k_o in 0 .. 4:
                C_rf[i, j, k_i] = C_rf[i, j, k_i] + A[i, 4 * k_o + k_i] * B[4 * k_o + k_i, j]
        for i in 0 .. 16:
          for j in 0 .. 16:
            C[i, j] = 0.0
            for k_i in 0 .. 4:
              C[i, j] = C[i, j] + C_rf[i, j, k_i]

    The partial results of C_rf are independent, so its k_i loop can be
    vectorized or parallelized; this reassociates the reduction (float sums
    round differently from the sequential order). `names` names the new
    (outer, inner) dims, `name` the new stage (default C_rf).

    Of an update `y[idx] = y[idx] op e` (op one of + - * min max & | ^, e not
    reading y), e.g. a histogram, rfactor(hist.u0, "y", 2):
        for y in 0 .. 480:                     allocate hist_rf[2, 256]
          for x in 0 .. 640:                   for y_i in 0 .. 2:
            hist[img[y, x]] =                    for b in 0 .. 256:
                hist[img[y, x]] + 1                hist_rf[y_i, b] = 0
                                               for y_i in 0 .. 2:
                                                 for y_o in 0 .. 240:
                                                   for x in 0 .. 640:
                                                     hist_rf[y_i, img[2 * y_o + y_i, x]] += 1
                                               for b in 0 .. 256:
                                                 for y_i in 0 .. 2:
                                                   hist[b] = hist[b] + hist_rf[y_i, b]
    The partial results' update (named "hist_rf.u0") can run y_i in parallel,
    each thread into its own hist_rf[y_i]; hist.u0 is then the merge.
    """

    stage: StageRef
    loop: str
    factor: int
    names: tuple[str, str] | None = None
    name: str | None = None
    method: ClassVar[str] = "rfactor"
    loop_fields: ClassVar[tuple[str, ...]] = ("loop", "names")

    def apply(self, st: State) -> None:
        found = resolve_stage(self, st, self.stage)
        if isinstance(found, Update):
            _rfactor_update(self, st, found)
            return
        c = _plain_stage(self, st, self.stage)
        red = c.reduction
        axes = red.axes if red is not None else ()
        pos = next((n for n, ax in enumerate(axes) if ax.dim.name == self.loop), None)
        if pos is None:
            valid = " ".join(ax.dim.name for ax in axes) or "none: it is not a reduction"
            raise schedule_error(self, f"{self.loop!r} is not a reduction dim of {c.name}; its "
                                       f"reduction dims are: {valid}")
        assert red is not None  # it has the reduction dim found above
        f = _factor(self)
        k = axes[pos]
        ko, kv, sub, hi = _split_axis(self, k, {d.name for d in c.loop_dims})
        new_axes = tuple(
            cx.Axis(ko, cx.const(0, dt.int64), hi) if n == pos else
            cx.Axis(ax.dim, cx.substitute(ax.lo, sub), cx.substitute(ax.hi, sub))
            for n, ax in enumerate(axes))
        body = cx.Reduce(red.op, cx.substitute(red.body, sub), new_axes, red.dtype)
        name = _fresh_stage_name(self, st, self.name or f"{c.name}_rf")
        rf = new_stage(name, c, body, c.order - 0.5, dims=c.dims + (kv,),
                       shape=c.shape + (cx.const(f, dt.int64),))
        total = cx.Reduce(red.op, rf[(*c.dims, kv)], (cx.Axis(kv, cx.const(0, dt.int64),
                                                              cx.const(f, dt.int64)),), red.dtype)
        restage(st, self.describe(), {c: total}, fresh_loops=(c,))


def _factor(prim: RFactor) -> int:
    f = prim.factor
    if isinstance(f, bool) or not isinstance(f, int) or f < 2:
        raise schedule_error(prim, f"the factor must be an int of at least 2, got {f!r}")
    return f


def _split_axis(prim: RFactor, k: cx.Axis, names: set[str]
                ) -> tuple[Dim, Dim, dict[Dim, cx.Expr], cx.Expr]:
    """The dims (outer, inner) that split axis `k` by the factor (`names`: the names
    taken where they go, k's own aside), k in terms of them, and the outer's extent."""
    f = prim.factor
    outer, inner = prim.names or (f"{k.dim.name}_o", f"{k.dim.name}_i")
    taken = names - {k.dim.name}
    for n in (outer, inner):  # strings already: names is a loop field
        if n in taken or outer == inner:
            raise schedule_error(prim, f"loop name {n!r} is taken; pick others with names=")
    ko, kv = Dim(outer), Dim(inner)
    zero = isinstance(k.lo, cx.Const) and k.lo.value == 0
    at = ko * f + kv if zero else k.lo + ko * f + kv  # the original index
    sub: dict[Dim, cx.Expr] = {k.dim: at if at.dtype == dt.int32 else cx.Cast(at, dt.int32)}
    if isinstance(k.lo, cx.Const) and isinstance(k.hi, cx.Const) and (
            k.hi.value - k.lo.value) % f == 0:
        hi = cx.const((k.hi.value - k.lo.value) // f, dt.int64)
    else:  # the last block of kv lanes may be partly empty
        hi = ((k.hi if zero else k.hi - k.lo) - kv + (f - 1)) // f
    return ko, kv, sub, hi


# the reduction whose identity starts the partial results of an update by each operation
_STARTS_AS = {"add": "sum", "sub": "sum", "mul": "prod", "min": "min", "max": "max",
              "or": "sum", "xor": "sum"}


def _start(op: str, d: dt.DType):
    """The value `x op= e` leaves x at when nothing is applied: op's identity."""
    if op == "and":
        return True if d.is_bool else -1 if d.is_signed else (1 << d.bits) - 1
    return identity(cast(ReduceOp, _STARTS_AS[op]), d)


def _rfactor_update(prim: RFactor, st: State, u: Update) -> None:
    """rfactor of an update `y[idx] = y[idx] op e` over loop k: partial results
    y_rf[..., k_i] over the k_i-th share of k, then y[...] op= each of them."""
    t = u.target()
    found = read_modify_write(u.value, t)
    if found is None:
        raise schedule_error(prim, f"the value of {u.name} is {u.value!r}; rfactor of an update "
                                   f"needs `{t!r} op e` with op one of + - * min max & | ^ in "
                                   f"{u.dtype!r} and e not reading {u.stage.name}, so partial "
                                   "results can be merged by op")
    fused = st.compute[u].kind == "fused" or st.fused_into(u)
    if u in st.touched or u in st.atomic or fused:
        raise schedule_error(prim, f"{u.name} is already scheduled; apply rfactor first, then "
                                   f"schedule the loops of {u.name} and of the new stage")
    op, e = found
    pos = next((n for n, ax in enumerate(u.axes) if ax.dim.name == prim.loop), None)
    if pos is None:
        valid = " ".join(ax.dim.name for ax in u.axes)
        raise schedule_error(prim, f"{prim.loop!r} is not a loop of {u.name}; its loops are: "
                                   f"{valid}")
    f = _factor(prim)
    y = u.stage
    k = u.axes[pos]
    names = {ax.dim.name for ax in u.axes} | {d.name for d in y.dims}
    ko, kv, sub, hi = _split_axis(prim, k, names)
    over: dict[Dim, tuple[cx.Expr, cx.Expr]] = {kv: (cx.const(0, dt.int64), cx.const(f, dt.int64))}
    for n, ax in enumerate(u.axes):
        over[ko if n == pos else ax.dim] = (
            (cx.const(0, dt.int64), hi) if n == pos else
            (cx.substitute(ax.lo, sub), cx.substitute(ax.hi, sub)))
    name = _fresh_stage_name(prim, st, prim.name or f"{y.name}_rf")
    # k_i first: the threads that run k_i's values in parallel write apart from each other
    rf = new_stage(name, y, cx.const(_start(op, y.dtype), y.dtype), y.order - 0.5,
                   dims=(kv, *y.dims), shape=(cx.const(f, dt.int64), *y.shape))
    part = rf[(kv, *(cx.substitute(i, sub) for i in u.indices))]
    partial = Update(part, cx.binary(cast(cx.BinaryOp, op), part, cx.substitute(e, sub)), over)
    whole = y[y.dims]
    merge = "add" if op == "sub" else op  # x - e1 - e2 = x + (0 - e1 - e2)
    every = {d: (cx.const(0, dt.int64), ext) for d, ext in zip(y.dims, y.shape)}
    every[kv] = (cx.const(0, dt.int64), cx.const(f, dt.int64))
    merged = Update(whole, cx.binary(cast(cx.BinaryOp, merge), whole, rf[(kv, *y.dims)]), every,
                    _replaces=u)
    old = st.pipeline
    known = {s: old.updates_of(s) for s in old.stages}
    known[y] = tuple(merged if x is u else x for x in known[y])
    known[rf] = (partial,)
    st.pipeline = Pipeline(old.outputs, known=known)
    del st.loops[u], st.compute[u]
    st.current[u] = merged
    for key, v in st.current.items():
        if v is u:
            st.current[key] = merged
    for x in (rf, partial, merged):
        st.loops[x] = initial_loops(x)
        st.compute[x] = ROOT


@dataclass(frozen=True)
class Layout(Primitive):
    """Store an intermediate stage's buffer with its dims in the given order (last fastest).

    Before (P[i, j] = A * 2, read by Q):   after layout(P, "j i"):
        allocate P[16, 16]                     allocate P[16, 16]
        for i in 0 .. 16:                      for i in 0 .. 16:
          for j in 0 .. 16:                      for j in 0 .. 16:
            P[i, j] = A[i, j] * 2.0                P[j, i] = A[i, j] * 2.0
        for i in 0 .. 16:                      for i in 0 .. 16:
          for j in 0 .. 16:                      for j in 0 .. 16:
            Q[i, j] = P[i, j] + 1.0                Q[i, j] = P[j, i] + 1.0

    Loop order and indexing in the algorithm are unchanged; only the buffer's
    memory order is. Outputs keep their declared, dense row-major layout.
    """

    stage: StageRef
    dims: tuple[str, ...]
    method: ClassVar[str] = "layout"
    loop_fields: ClassVar[tuple[str, ...]] = ("dims",)

    def apply(self, st: State) -> None:
        stage = resolve_stage(self, st, self.stage)
        if isinstance(stage, Update) or stage in st.pipeline.outputs:
            raise schedule_error(self, f"{stage.name} is "
                                       f"{'an update' if isinstance(stage, Update) else 'an output'}; "
                                       "layout applies to intermediate stages (outputs are dense "
                                       "row-major in their declared dim order)")
        names = [d.name for d in stage.dims]
        if sorted(self.dims) != sorted(names):
            raise schedule_error(self, f"list each dim of {stage.name} once, in storage order "
                                       f"(outermost first); its dims are: {' '.join(names)}")
        st.layout[stage] = tuple(names.index(n) for n in self.dims)
