"""Schedule primitives: frozen records, each with a checked `apply` to a State.

Every primitive names its stage by the Stage object and its loops by name
(a `Dim` is accepted and turned into its name). `apply` validates against the
current state and raises ScheduleError naming the primitive, the stage and
the loop, and saying what would be valid.
"""

from __future__ import annotations

from dataclasses import Field, dataclass, fields
from typing import TYPE_CHECKING, ClassVar

from ..compute import Dim, Stage, Update
from ..compute.definitions import Tensor, read_modify_write
from ..compute.expr import structure, substitute
from ..errors import ScheduleError
from .state import LFuse, LInner, Loop, LoopKind, LOuter, Placement, State, with_kind


def _loop_name(x, prim: str) -> str:
    if isinstance(x, Dim):
        return x.name
    if isinstance(x, str) and x.isidentifier():
        return x
    raise ScheduleError(
        f"{prim}: {x!r} is not a loop name; name loops by a string that is a Python identifier "
        "(e.g. 'y_o') or by a td.dim")


# what a primitive names a stage by: the object, or the name of a stage that a
# restaging primitive (cache_write, cache_read, rfactor) added
StageRef = Stage | Update | str

_EXAMPLE_NAMES = {"names": ("y_outer", "y_inner")}


class Primitive:
    """Base of schedule records. Subclasses are frozen dataclasses."""

    method: ClassVar[str]
    loop_fields: ClassVar[tuple[str, ...]] = ()
    if TYPE_CHECKING:
        __dataclass_fields__: ClassVar[dict[str, Field[object]]]

    def __post_init__(self):
        types = {f.name: str(f.type) for f in fields(self)}
        for f in self.loop_fields:
            v = getattr(self, f)
            if isinstance(v, str) and types[f].startswith("tuple"):
                raise ScheduleError(
                    f"{self.method}: {f}={v!r} must be a list of loop names, not one string "
                    f"(e.g. {f}={_EXAMPLE_NAMES.get(f, ('y', 'x'))!r})")
            if isinstance(v, (tuple, list)):
                v = tuple(_loop_name(x, self.method) for x in v)
            elif v is not None:
                v = _loop_name(v, self.method)
            object.__setattr__(self, f, v)

    def to_dict(self) -> dict:
        d: dict = {"type": type(self).__name__}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, (Tensor, Update)):
                v = v.name
            elif isinstance(v, tuple):
                v = [list(x) if isinstance(x, tuple) else
                     x.name if isinstance(x, (Tensor, Update)) else x for x in v]
            d[f.name] = v
        return d

    def describe(self) -> str:
        args = []
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in ("names", "name") and v is None or f.name == "reassociate" and not v:
                continue
            if f.name == "reassociate":
                args.append(f"reassociate={v!r}")
                continue
            args.append(_shown(v, f.name in ("stage", "consumer", "second")))
        return f"{self.method}({', '.join(args)})"

    def apply(self, st: State) -> None:
        raise NotImplementedError


def _shown(v, named: bool) -> str:
    """An argument of a primitive as a message shows it: stages by name."""
    if isinstance(v, (Tensor, Update)):
        return v.name
    if named and isinstance(v, str):
        return v
    if isinstance(v, tuple) and any(isinstance(x, (Tensor, Update)) for x in v):
        return "[" + ", ".join(_shown(x, True) for x in v) + "]"
    return repr(v)


def _err(prim: Primitive, msg: str) -> ScheduleError:
    return ScheduleError(f"{prim.describe()}: {msg}")


def _stage(prim: Primitive, st: State, stage) -> Stage:
    found = st.resolve(stage) if isinstance(stage, (Stage, Update, str)) else None
    if found is None:
        valid = ", ".join(s.name for s in st.pipeline.schedulables)
        raise _err(prim, f"{_not_schedulable(st, stage)}; schedulable stages are: {valid}")
    stage = found
    if st.compute[stage].kind == "inline":
        raise _err(prim, f"stage {stage.name} is inlined (compute_inline) and has no loops of its own")
    if st.compute[stage].kind == "fused":
        first = st.compute[stage].consumer
        assert first is not None  # as fuse_updates places it
        raise _err(prim, f"{stage.name} runs in the loops of {first.name} (fuse_updates) and has "
                         f"no loops of its own; schedule {first.name}")
    return stage


def _not_schedulable(st: State, x) -> str:
    """Why `x` names no schedulable stage of the pipeline `st` schedules."""
    if isinstance(x, str):
        return f"there is no stage named {x!r} in this pipeline"
    if isinstance(x, (Stage, Update)):
        kind = "update" if isinstance(x, Update) else "stage"
        return (f"{kind} {x.name!r} is not part of this pipeline (it belongs to another "
                "pipeline, or the outputs do not depend on it)")
    if isinstance(x, Tensor):
        if any(t is x for t in st.pipeline.inputs):
            return f"{x.name!r} is an input of this pipeline and has no loops"
        return f"{x.name!r} is an input of another pipeline, not of this one"
    return f"{x!r} is not a stage"


def _find(prim: Primitive, st: State, stage: Stage, name: str) -> tuple[int, Loop]:
    try:
        return st.find(stage, name)
    except KeyError:
        loops = " ".join(st.loop_names(stage))
        raise _err(prim, f"stage {stage.name} has no loop {name!r}; its loops are: {loops}") from None


def _fresh(prim: Primitive, st: State, stage: Stage, name: str, replacing: set[str]) -> str:
    if not name.isidentifier():
        raise _err(prim, f"{name!r} is not a valid loop name")
    if name in set(st.loop_names(stage)) - replacing:
        raise _err(prim, f"stage {stage.name} already has a loop named {name!r}; pick another with names=")
    return name


def _touch(prim: Primitive, st: State, stage: Stage) -> None:
    st.touched.add(stage)


def _split(prim, st: State, stage: Stage, name: str, factor, names) -> None:
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
        raise _err(prim, f"split factor must be a positive int, got {factor!r}")
    pos, lp = _find(prim, st, stage, name)
    if lp.kind != "serial":
        raise _err(prim, f"loop {name} is already {lp.kind}; split it before marking it")
    outer, inner = names if names is not None else (f"{name}_o", f"{name}_i")
    if outer == inner:
        raise _err(prim, f"the two new loops need different names, got {outer!r} twice")
    outer = _fresh(prim, st, stage, outer, {name})
    inner = _fresh(prim, st, stage, inner, {name})
    ext = lp.extent
    out_ext = -(-ext // factor) if ext is not None else None
    in_ext = min(factor, ext) if ext is not None else factor
    ls = list(st.loops[stage])
    ls[pos:pos + 1] = [
        Loop(outer, LOuter(lp.expr, factor), out_ext, lp.reduction),
        Loop(inner, LInner(lp.expr, factor), in_ext, lp.reduction),
    ]
    st.loops[stage] = tuple(ls)
    _touch(prim, st, stage)


@dataclass(frozen=True)
class Split(Primitive):
    """d -> d_o, d_i with d = factor * d_o + d_i; non-divisible tails are guarded.

        for y in 0..N:            split(C, y, 8)      for y_o in 0..ceil(N/8):
          C[y] = ...              ------------->        for y_i in 0..min(8, N - 8*y_o):
                                                          C[8*y_o + y_i] = ...
    """

    stage: StageRef
    loop: str
    factor: int
    names: tuple[str, str] | None = None
    method: ClassVar[str] = "split"
    loop_fields: ClassVar[tuple[str, ...]] = ("loop", "names")

    def __post_init__(self):
        super().__post_init__()
        if self.names is not None and len(self.names) != 2:
            raise ScheduleError(f"{self.describe()}: names= needs two loop names (outer, inner)")

    def apply(self, st: State) -> None:
        stage = _stage(self, st, self.stage)
        _split(self, st, stage, self.loop, self.factor, self.names)


@dataclass(frozen=True)
class Tile(Primitive):
    """Split adjacent loops and move all outer parts before all inner parts.

    Before (C[i, j] over 16 x 16):       after tile(C, i=4, j=8):
        for i in 0 .. 16:                    for i_o in 0 .. 4:
          for j in 0 .. 16:                    for j_o in 0 .. 2:
            C[i, j] = ...                        for i_i in 0 .. 4:
                                                   for j_i in 0 .. 8:
                                                     C[4 * i_o + i_i, 8 * j_o + j_i] = ...

    The loops must be adjacent and in the order given; each named loop d
    becomes d_o (outside) and d_i (inside), as `split` names them.
    """

    stage: StageRef
    factors: tuple[tuple[str, int], ...]
    method: ClassVar[str] = "tile"

    def __post_init__(self):
        pairs = self.factors if isinstance(self.factors, (tuple, list)) else None
        if pairs is None or not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs):
            raise ScheduleError(
                f"tile: factors must be (loop, factor) pairs, e.g. (('y', 32), ('x', 64)), got "
                f"{self.factors!r}")
        fs = tuple((_loop_name(n, "tile"), f) for n, f in pairs)
        object.__setattr__(self, "factors", fs)
        if len(fs) < 1:
            raise ScheduleError("tile: give at least one loop and factor, e.g. tile(C, i=32, j=64)")

    def describe(self) -> str:
        kw = ", ".join(f"{n}={f}" for n, f in self.factors)
        stage = self.stage if isinstance(self.stage, str) else self.stage.name
        return f"tile({stage}, {kw})"

    def apply(self, st: State) -> None:
        stage = _stage(self, st, self.stage)
        names = [n for n, _ in self.factors]
        if len(set(names)) != len(names):
            raise _err(self, f"loop names {names} repeat")
        positions = [_find(self, st, stage, n)[0] for n in names]
        if positions != list(range(positions[0], positions[0] + len(names))):
            order = " ".join(st.loop_names(stage))
            raise _err(self, f"loops {' '.join(names)} must be adjacent and in this order, but the "
                             f"loop order is {order}; reorder them first")
        for n, f in self.factors:
            _split(self, st, stage, n, f, None)
        ls = list(st.loops[stage])
        p0, k = positions[0], len(names)
        block = ls[p0:p0 + 2 * k]
        ls[p0:p0 + 2 * k] = block[0::2] + block[1::2]
        st.loops[stage] = tuple(ls)


@dataclass(frozen=True)
class Reorder(Primitive):
    """The listed loops take the positions they occupy, outermost first, in the given order.

    Before (C = sum(A[i, k] * B[k, j], over=k)):   after reorder(C, "k i"):
        for i in 0 .. 16:                          for k in 0 .. 16:
          for j in 0 .. 16:                          for j in 0 .. 16:
            for k in 0 .. 16:                          for i in 0 .. 16:
              C[i, j] = C[i, j] + A[i, k] * ...          C[i, j] = C[i, j] + A[i, k] * ...

    Loops not listed keep their place (j above). The zeroing of a reduction's
    result stays a loop nest of its own over i and j, outside the k loop.
    """

    stage: StageRef
    loops: tuple[str, ...]
    method: ClassVar[str] = "reorder"
    loop_fields: ClassVar[tuple[str, ...]] = ("loops",)

    def apply(self, st: State) -> None:
        stage = _stage(self, st, self.stage)
        if len(set(self.loops)) != len(self.loops):
            dup = sorted({n for n in self.loops if self.loops.count(n) > 1})
            raise _err(self, f"loop(s) {dup} listed more than once")
        if len(self.loops) < 2:
            raise _err(self, "list at least two loops, outermost first")
        found = [_find(self, st, stage, n) for n in self.loops]
        slots = sorted(p for p, _ in found)
        ls = list(st.loops[stage])
        for slot, (_, lp) in zip(slots, found):
            ls[slot] = lp
        st.loops[stage] = tuple(ls)
        _touch(self, st, stage)


@dataclass(frozen=True)
class Fuse(Primitive):
    """Two adjacent loops become one: a_b = a * extent(b) + b (b needs a constant extent).

    Before:                           after fuse(C, "i", "j"):
        for i in 0 .. 16:                 for i_j in 0 .. 256:
          for j in 0 .. 16:                 C[i_j / 16, i_j % 16] = ...
            C[i, j] = ...

    `name` names the fused loop (default outer_inner); one long loop is
    useful to `parallel` over, e.g. fuse the outer loops of a tile.
    """

    stage: StageRef
    outer: str
    inner: str
    name: str | None = None
    method: ClassVar[str] = "fuse"
    loop_fields: ClassVar[tuple[str, ...]] = ("outer", "inner", "name")

    def apply(self, st: State) -> None:
        stage = _stage(self, st, self.stage)
        po, lo = _find(self, st, stage, self.outer)
        pi, li = _find(self, st, stage, self.inner)
        if pi != po + 1:
            order = " ".join(st.loop_names(stage))
            raise _err(self, f"{self.outer} must be directly outside {self.inner}; the loop order "
                             f"is {order}")
        if li.extent is None or not li.zero_based:
            raise _err(self, f"the inner loop {self.inner} needs a constant extent counted from 0 "
                             f"(split it first, e.g. split({stage.name}, {self.inner!r}, 8))")
        if lo.kind != "serial" or li.kind != "serial":
            raise _err(self, "fuse loops before marking them parallel/vectorized/unrolled")
        name = _fresh(self, st, stage, self.name or f"{self.outer}_{self.inner}",
                      {self.outer, self.inner})
        ext = lo.extent * li.extent if lo.extent is not None else None
        fused = Loop(name, LFuse(lo.expr, li.expr, li.extent), ext, lo.reduction or li.reduction,
                     zero_based=lo.zero_based)
        ls = list(st.loops[stage])
        ls[po:pi + 1] = [fused]
        st.loops[stage] = tuple(ls)
        _touch(self, st, stage)


def _mark(prim, st: State, kind: LoopKind, need_const: bool) -> None:
    stage = _stage(prim, st, prim.stage)
    pos, lp = _find(prim, st, stage, prim.loop)
    if lp.kind not in ("serial", kind):
        raise _err(prim, f"loop {lp.name} is already {lp.kind}")
    # a stage computed inside another's loop runs over the block its consumer needs, whose
    # size lowering infers: there, a constant bound is checked at build time
    if need_const and lp.extent is None and st.compute[stage].kind != "at":
        raise _err(prim, f"loop {lp.name} of {stage.name} has no constant extent; split it by a "
                         f"constant first, e.g. split({stage.name}, {lp.name!r}, 8), and "
                         f"{prim.method} the inner loop")
    reassociate = getattr(prim, "reassociate", False)
    if not isinstance(reassociate, bool):
        raise _err(prim, f"reassociate= must be True or False, got {reassociate!r}")
    if kind in ("parallel", "vectorized") and lp.reduction and not reassociate:
        raise _err(prim, f"loop {lp.name} of {stage.name} is a reduction loop: its iterations "
                         f"accumulate into the same elements of {stage.name}, so running them "
                         f"{'in parallel' if kind == 'parallel' else 'as vector lanes'} would race; "
                         f"{prim.method} a loop over {stage.name}'s own dims instead, or pass "
                         f"reassociate=True to accumulate partial results per iteration and "
                         f"combine them after the loop (float sums then round differently)")
    if reassociate:
        if isinstance(stage, Update):
            raise _err(prim, f"reassociate=True is for the reduction loops of a stage; "
                             f"{stage.name} is an update, whose loops run in parallel when its "
                             f"iterations write different elements (the legality check proves "
                             f"it), or with atomic({stage.name}) when they may update one "
                             f"element; rfactor({stage.name}, {lp.name!r}, n) gives each of n "
                             f"threads partial results of its own")
        if not lp.reduction:
            raise _err(prim, f"reassociate=True is for reduction loops; {lp.name} is a loop over "
                             f"{stage.name}'s own dims and needs no reassociation")
        if lp.extent is None and st.compute[stage].kind != "at":
            raise _err(prim, f"reassociating loop {lp.name} needs a constant extent (one partial "
                             f"result per iteration); split it by a constant first")
    st.set_loop(stage, pos, with_kind(lp, kind, reassociate))
    _touch(prim, st, stage)


@dataclass(frozen=True)
class Vectorize(Primitive):
    """Run a constant-extent loop as vector lanes (its whole body, if it has inner loops).

    Before (after split(E, "j", 8)):    after vectorize(E, "j_i"):
        for i in 0 .. 16:                   for i in 0 .. 16:
          for j_o in 0 .. 2:                  for j_o in 0 .. 2:
            for j_i in 0 .. 8:                  for j_i in 0 .. 8:  # vectorized
              E[i, 8 * j_o + j_i] = ...           E[i, 8 * j_o + j_i] = ...

    On a reduction loop only with reassociate=True: each lane accumulates its own
    partial result, and the partials are combined in order after the loop.
    """

    stage: StageRef
    loop: str
    reassociate: bool = False
    method: ClassVar[str] = "vectorize"
    loop_fields: ClassVar[tuple[str, ...]] = ("loop",)

    def apply(self, st: State) -> None:
        _mark(self, st, "vectorized", True)


@dataclass(frozen=True)
class Unroll(Primitive):
    """Replicate the body of a constant-extent loop, one copy per iteration.

    Before (after split(E, "j", 4)):    after unroll(E, "j_i"):
        for i in 0 .. 16:                   for i in 0 .. 16:
          for j_o in 0 .. 4:                  for j_o in 0 .. 4:
            for j_i in 0 .. 4:                  E[i, 4 * j_o] = ...
              E[i, 4 * j_o + j_i] = ...         E[i, 4 * j_o + 1] = ...
                                                E[i, 4 * j_o + 2] = ...
                                                E[i, 4 * j_o + 3] = ...
    """

    stage: StageRef
    loop: str
    method: ClassVar[str] = "unroll"
    loop_fields: ClassVar[tuple[str, ...]] = ("loop",)

    def apply(self, st: State) -> None:
        _mark(self, st, "unrolled", True)


@dataclass(frozen=True)
class Parallel(Primitive):
    """Run the iterations of a loop on several threads.

    Before:                           after parallel(E, "i"):
        for i in 0 .. 16:                 for i in 0 .. 16:  # parallel
          for j in 0 .. 16:                 for j in 0 .. 16:
            E[i, j] = ...                     E[i, j] = ...

    On a reduction loop only with reassociate=True (see Vectorize).
    """

    stage: StageRef
    loop: str
    reassociate: bool = False
    method: ClassVar[str] = "parallel"
    loop_fields: ClassVar[tuple[str, ...]] = ("loop",)

    def apply(self, st: State) -> None:
        _mark(self, st, "parallel", False)


@dataclass(frozen=True)
class Atomic(Primitive):
    """Run an update as atomic read-modify-writes, so its loops may run in parallel
    (and in any order) although two iterations update the same element.

    For an update `y[idx] = y[idx] op e` (op one of + - * min max & | ^ in y's dtype,
    `e` and `idx` not reading y), e.g. a histogram:

    Before:                                after atomic(hist.u0), parallel(hist.u0, "y"):
        for y in 0 .. 480:                     for y in 0 .. 480:  # parallel
          for x in 0 .. 640:                     for x in 0 .. 640:
            hist[img[y, x]] =                      atomic hist[img[y, x]] =
                hist[img[y, x]] + 1                    hist[img[y, x]] + 1

    Each element's updates then apply in no fixed order: exact for integers, min
    and max; float sums and products round as in another order. Atomic updates run
    in parallel loops, not as vector lanes. Where lanes or threads often hit one
    element, `rfactor` of the update (private partial results, merged after) is
    faster.
    """

    stage: StageRef
    method: ClassVar[str] = "atomic"

    def apply(self, st: State) -> None:
        u = _stage(self, st, self.stage)
        if not isinstance(u, Update):
            raise _err(self, f"{u.name} is a stage; atomic applies to an update of one "
                             f"(td.update), e.g. {u.name}.u0")
        if read_modify_write(u.value, u.target()) is None:
            t = u.target()
            raise _err(self, f"the value of {u.name} is {u.value!r}; an atomic update reads "
                             f"its target only as `{t!r} op e` with op one of + - * min max & "
                             f"| ^ in {u.dtype!r} and e not reading {u.stage.name} (cast e to "
                             f"{u.dtype!r} if it has another dtype)")
        st.atomic.add(u)


@dataclass(frozen=True)
class StoreNontemporal(Primitive):
    """Write an output of the pipeline past the caches (non-temporal stores).

    The loop nest does not change; the vector stores of a vectorized loop that
    write whole runs of the output's elements (contiguous stores) become streaming
    stores, which go to memory without reading the lines they fill into the cache
    first. An output written once, larger than the last-level cache and not read
    back soon, then costs one memory transfer per line instead of two (a read for
    ownership, then the write back): a softmax or a layer norm of a 64 MB matrix,
    whose output is the only traffic besides its input. Where the output is read
    again soon (by the caller, or a consumer in the same pipeline) the read comes
    from memory, which is slower.

    Before (vectorize(out, "x_i")):            after store_nontemporal(out):
        for y in 0 .. 4096:                        for y in 0 .. 4096:
          for x_o in 0 .. 512:                       for x_o in 0 .. 512:
            for x_i in 0 .. 8:  # vectorized           for x_i in 0 .. 8:  # vectorized
              out[y, 8 * x_o + x_i] = ...                nontemporal out[y, 8 * x_o + x_i] = ...

    Values are the same. Only contiguous vector stores stream; scalar, strided,
    scattered and masked stores (a tail chunk) are ordinary ones, and so is a store
    whose address is not aligned to 16 bytes (checked when it runs). On LLVM every
    target that has streaming stores uses them; the C backend uses them on x86
    (SSE) and writes ordinary stores elsewhere. A kernel with streaming stores
    fences after them, so threads and the caller see every element.
    """

    stage: StageRef
    method: ClassVar[str] = "store_nontemporal"

    def apply(self, st: State) -> None:
        stage = _stage(self, st, self.stage)
        outputs = st.pipeline.outputs
        if isinstance(stage, Update) or stage not in outputs:
            valid = ", ".join(o.name for o in outputs)
            what = "an update" if isinstance(stage, Update) else "not an output of the pipeline"
            raise _err(self, f"{stage.name} is {what}; streaming stores apply to the "
                             f"buffers of the pipeline's outputs: {valid}")
        st.nontemporal.add(stage.name)


@dataclass(frozen=True)
class FuseUpdates(Primitive):
    """Run two updates of one stage in one loop nest: each iteration of `first`, then the
    same iteration of `second` (the update right after it), where the dependences allow.

    Before (y[i] = y[i] + x[i]; then y[i] = y[i] * y[i - 1]):
        for i in 0 .. 16:                  after fuse_updates(y.u0, y.u1):
          y[i] = y[i] + x[i]                   for i in 1 .. 16:
        for i in 1 .. 16:                        y[i] = y[i] + x[i]
          y[i] = y[i] * y[i - 1]                 y[i] = y[i] * y[i - 1]
                                               (with y[0] = y[0] + x[0] before)

    The two must loop over the same domain (the same bounds, dim by dim, in over=), and
    `second` must not be scheduled yet; afterwards the loops of `first` are the loops of
    both, and primitives on them (split, parallel, ...) apply to both. Legal only when
    every dependence between them keeps its direction (checked, like every schedule).
    """

    stage: StageRef
    second: StageRef
    method: ClassVar[str] = "fuse_updates"

    def apply(self, st: State) -> None:
        first, second = _stage(self, st, self.stage), _stage(self, st, self.second)
        for u in (first, second):
            if not isinstance(u, Update):
                raise _err(self, f"{u.name} is a stage; fuse_updates fuses two updates of one "
                                 "stage (td.update)")
        assert isinstance(first, Update) and isinstance(second, Update)
        ups = st.pipeline.updates_of(first.stage)
        between = ups[ups.index(first) + 1: ups.index(second)] if second in ups else ()
        if second.stage is not first.stage or ups.index(second) <= ups.index(first) or any(
                st.compute[u] != Placement("fused", first) for u in between):
            order = ", ".join(u.name for u in ups)
            raise _err(self, f"{second.name} must be the update right after {first.name} (or "
                             f"after those fused into it already), of the same stage; the "
                             f"updates of {first.stage.name} are: {order}")
        if second in st.touched or second in st.atomic:
            raise _err(self, f"{second.name} is already scheduled; fuse first, then schedule "
                             f"{first.name}, whose loops both run in")
        if st.fused_into(second):
            raise _err(self, f"{second.name} has an update fused into it already")
        if not same_domain(first, second):
            show = ", ".join(f"{ax.dim.name}: ({ax.lo!r}, {ax.hi!r})" for ax in second.axes)
            mine = ", ".join(f"{ax.dim.name}: ({ax.lo!r}, {ax.hi!r})" for ax in first.axes)
            raise _err(self, f"the updates loop over different domains ({mine} and {show}); "
                             "fused updates run over the same points")
        st.compute[second] = Placement("fused", first)


def same_domain(a: Update, b: Update) -> bool:
    """Whether updates `a` and `b` loop over the same points: as many over= dims, and the
    bounds of each equal once b's dims are named as a's."""
    if len(a.axes) != len(b.axes):
        return False
    rename = {y.dim: x.dim for x, y in zip(a.axes, b.axes)}
    return all(structure(x.lo) == structure(substitute(y.lo, rename))
               and structure(x.hi) == structure(substitute(y.hi, rename))
               for x, y in zip(a.axes, b.axes))


def _producer(prim, st: State, stage) -> Stage:
    stage = _stage(prim, st, stage)
    if isinstance(stage, Update):
        raise _err(prim, f"{stage.name} is an update; it runs at root right after "
                         f"{stage.stage.name} and its earlier updates")
    if st.pipeline.updates_of(stage):
        names = ", ".join(u.name for u in st.pipeline.updates_of(stage))
        raise _err(prim, f"{stage.name} has updates ({names}), so it is computed and updated in "
                         "full at root")
    if stage in st.pipeline.outputs:
        raise _err(prim, f"{stage.name} is an output of the pipeline and is always stored in full; "
                         "only intermediate stages can be inlined or computed inside another stage")
    return stage


def _depends_on(pipeline, consumer: Stage, producer: Stage) -> bool:
    stack: list[Tensor] = [consumer]
    seen: set[Tensor] = set()
    while stack:
        t = stack.pop()
        if t is producer:
            return True
        if t in seen or not isinstance(t, Stage):
            continue
        seen.add(t)
        stack.extend(pipeline.reads(t))
    return False


@dataclass(frozen=True)
class ComputeInline(Primitive):
    """Substitute a stage's definition into every consumer; it gets no loops or buffer.

    Before (P = A * 2, Q = P + 1):     after compute_inline(P):
        allocate P[16, 16]                 for i in 0 .. 16:
        for i in 0 .. 16:                    for j in 0 .. 16:
          for j in 0 .. 16:                    Q[i, j] = A[i, j] * 2.0 + 1.0
            P[i, j] = A[i, j] * 2.0
        for i in 0 .. 16:
          for j in 0 .. 16:
            Q[i, j] = P[i, j] + 1.0

    A reduction inlined becomes a reduction inside its consumers' expressions: each
    element a consumer reads is reduced in full where it is read, in the same order
    (Harris' 3x3 box sums, a small dot product).
    """

    stage: StageRef
    method: ClassVar[str] = "compute_inline"

    def apply(self, st: State) -> None:
        stage = _producer(self, st, self.stage)
        if stage in st.touched:
            raise _err(self, f"{stage.name} already has loop primitives; an inlined stage has no loops")
        users = [s for s, p in st.compute.items() if p.kind == "at" and p.consumer is stage]
        if users:
            raise _err(self, f"{users[0].name} is computed inside {stage.name}'s loops")
        st.compute[stage] = Placement("inline")
        st.store.pop(stage, None)


def _placement(prim, st: State, producer: Stage, consumer, loop: str) -> Placement:
    consumer = _stage(prim, st, consumer)
    if isinstance(consumer, Update):
        raise _err(prim, f"stages cannot be computed inside the loops of an update "
                         f"({consumer.name}); compute {producer.name} at root")
    if consumer is producer:
        raise _err(prim, "a stage cannot be computed inside its own loops")
    if not _depends_on(st.pipeline, consumer, producer):
        users = ", ".join(s.name for s in st.pipeline.consumers(producer)) or "none"
        raise _err(prim, f"{consumer.name} does not use {producer.name} (directly or through "
                         f"other stages); {producer.name}'s consumers are: {users}")
    _find(prim, st, consumer, loop)
    return Placement("at", consumer, loop)


@dataclass(frozen=True)
class ComputeAt(Primitive):
    """Compute the block of `stage` that `consumer` needs inside consumer's loop `loop`.

    Before (P = A * 2; Q = P + 1, split(Q, "i", 4)):   after compute_at(P, Q, "i_o"):
        allocate P[16, 16]                             for i_o in 0 .. 4:
        for i in 0 .. 16:                                allocate P[4, 16]
          for j in 0 .. 16:                              for i in 4 * i_o .. 4 * i_o + 4:
            P[i, j] = A[i, j] * 2.0                        for j in 0 .. 16:
        for i_o in 0 .. 4:                                   P[i - 4 * i_o, j] = A[i, j] * 2.0
          for i_i in 0 .. 4:                             for i_i in 0 .. 4:
            for j in 0 .. 16:                              for j in 0 .. 16:
              Q[4 * i_o + i_i, j] = P[4 * i_o + i_i, j] + 1.0    Q[..] = P[i_i, j] + 1.0

    P's buffer shrinks to the block one iteration of i_o reads.
    """

    stage: StageRef
    consumer: StageRef
    loop: str
    method: ClassVar[str] = "compute_at"
    loop_fields: ClassVar[tuple[str, ...]] = ("loop",)

    def apply(self, st: State) -> None:
        stage = _producer(self, st, self.stage)
        st.compute[stage] = _placement(self, st, stage, self.consumer, self.loop)


@dataclass(frozen=True)
class StoreAt(Primitive):
    """Allocate `stage`'s buffer at consumer's loop `loop` while computing it deeper.

    With split(Q, "i", 4) and compute_at(P, Q, "i_i"), P is computed one row at a
    time; store_at(P, Q, "i_o") keeps one buffer for the rows of a whole i_o:
        for i_o in 0 .. 4:
          allocate P[4, 16]
          for i_i in 0 .. 4:
            for j in 0 .. 16:
              P[i_i, j] = A[4 * i_o + i_i, j] * 2.0
            for j in 0 .. 16:
              Q[4 * i_o + i_i, j] = P[i_i, j] + 1.0
    (without store_at: `allocate P[1, 16]` inside the i_i loop, indexed P[0, j]).
    Where the blocks consecutive iterations of the compute loop need overlap (a
    stencil's rows), the window slides: each iteration computes only the rows the
    previous one did not, and the buffer keeps only the rows in flight (see store_root).
    """

    stage: StageRef
    consumer: StageRef
    loop: str
    method: ClassVar[str] = "store_at"
    loop_fields: ClassVar[tuple[str, ...]] = ("loop",)

    def apply(self, st: State) -> None:
        stage = _producer(self, st, self.stage)
        st.store[stage] = _placement(self, st, stage, self.consumer, self.loop)


@dataclass(frozen=True)
class StoreRoot(Primitive):
    """Allocate `stage`'s buffer once, for the whole kernel, while computing it inside a
    consumer's loop (`compute_at`): Halide's store_root. Where the blocks consecutive
    iterations need overlap, the window slides (each value computed once) and the
    buffer keeps only the rows in flight (storage folding):
        compute_at(bx, by, "y") with store_root(bx), by reading bx rows y .. y + 2:
        allocate bx[3, W]
        for y in 0 .. H:
          for y_bx in (y == 0 ? 0 : y + 2) .. y + 3:   # one new row (three at first)
            bx[y_bx % 3, x] = ...
          by[y, x] = bx[y % 3, x] + bx[(y + 1) % 3, x] + bx[(y + 2) % 3, x]
    """

    stage: StageRef
    method: ClassVar[str] = "store_root"

    def apply(self, st: State) -> None:
        stage = _producer(self, st, self.stage)
        if st.compute[stage].kind == "inline":
            raise _err(self, f"{stage.name} is inlined (compute_inline): it has no buffer to store")
        st.store[stage] = Placement("root")


PRIMITIVES: dict[str, type[Primitive]] = {
    c.__name__: c
    for c in (Split, Tile, Reorder, Fuse, Vectorize, Unroll, Parallel, Atomic, FuseUpdates,
              ComputeInline, ComputeAt, StoreAt, StoreRoot, StoreNontemporal)
}
