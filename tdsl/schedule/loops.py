"""The loop primitives: `split`, `tile`, `reorder` and `fuse` reshape a stage's loops;
`vectorize`, `unroll` and `parallel` mark how one runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..compute import Stage, Update
from ..errors import ScheduleError
from .record import (
    Primitive,
    StageRef,
    find_loop,
    fresh_loop_name,
    loop_name,
    mark_touched,
    resolve_stage,
    schedule_error,
)
from .state import LFuse, LInner, Loop, LoopKind, LOuter, State, with_kind


def _split(prim, state: State, stage: Stage, name: str, factor, names) -> None:
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
        raise schedule_error(prim, f"split factor must be a positive int, got {factor!r}")
    pos, loop = find_loop(prim, state, stage, name)
    if loop.kind != "serial":
        raise schedule_error(prim, f"loop {name} is already {loop.kind}; split it before marking it")
    outer, inner = names if names is not None else (f"{name}_o", f"{name}_i")
    if outer == inner:
        raise schedule_error(prim, f"the two new loops need different names, got {outer!r} twice")
    outer = fresh_loop_name(prim, state, stage, outer, {name})
    inner = fresh_loop_name(prim, state, stage, inner, {name})
    extent = loop.extent
    out_ext = -(-extent // factor) if extent is not None else None
    in_ext = min(factor, extent) if extent is not None else factor
    loops = list(state.loops[stage])
    loops[pos:pos + 1] = [
        Loop(outer, LOuter(loop.expr, factor), out_ext, loop.reduction),
        Loop(inner, LInner(loop.expr, factor), in_ext, loop.reduction),
    ]
    state.loops[stage] = tuple(loops)
    mark_touched(prim, state, stage)


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

    def apply(self, state: State) -> None:
        stage = resolve_stage(self, state, self.stage)
        _split(self, state, stage, self.loop, self.factor, self.names)


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
        fs = tuple((loop_name(n, "tile"), f) for n, f in pairs)
        object.__setattr__(self, "factors", fs)
        if len(fs) < 1:
            raise ScheduleError("tile: give at least one loop and factor, e.g. tile(C, i=32, j=64)")

    def describe(self) -> str:
        kw = ", ".join(f"{n}={f}" for n, f in self.factors)
        stage = self.stage if isinstance(self.stage, str) else self.stage.name
        return f"tile({stage}, {kw})"

    def apply(self, state: State) -> None:
        stage = resolve_stage(self, state, self.stage)
        names = [n for n, _ in self.factors]
        if len(set(names)) != len(names):
            raise schedule_error(self, f"loop names {names} repeat")
        positions = [find_loop(self, state, stage, n)[0] for n in names]
        if positions != list(range(positions[0], positions[0] + len(names))):
            order = " ".join(state.loop_names(stage))
            raise schedule_error(self, f"loops {' '.join(names)} must be adjacent and in this "
                                       f"order, but the loop order is {order}; reorder them first")
        for n, f in self.factors:
            _split(self, state, stage, n, f, None)
        loops = list(state.loops[stage])
        first, k = positions[0], len(names)
        block = loops[first:first + 2 * k]
        loops[first:first + 2 * k] = block[0::2] + block[1::2]
        state.loops[stage] = tuple(loops)


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

    def apply(self, state: State) -> None:
        stage = resolve_stage(self, state, self.stage)
        if len(set(self.loops)) != len(self.loops):
            dup = sorted({n for n in self.loops if self.loops.count(n) > 1})
            raise schedule_error(self, f"loop(s) {dup} listed more than once")
        if len(self.loops) < 2:
            raise schedule_error(self, "list at least two loops, outermost first")
        found = [find_loop(self, state, stage, n) for n in self.loops]
        slots = sorted(p for p, _ in found)
        loops = list(state.loops[stage])
        for slot, (_, loop) in zip(slots, found):
            loops[slot] = loop
        state.loops[stage] = tuple(loops)
        mark_touched(self, state, stage)


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

    def apply(self, state: State) -> None:
        stage = resolve_stage(self, state, self.stage)
        outer_pos, outer_loop = find_loop(self, state, stage, self.outer)
        inner_pos, inner_loop = find_loop(self, state, stage, self.inner)
        if inner_pos != outer_pos + 1:
            order = " ".join(state.loop_names(stage))
            raise schedule_error(self, f"{self.outer} must be directly outside {self.inner}; the "
                                       f"loop order is {order}")
        if inner_loop.extent is None or not inner_loop.zero_based:
            raise schedule_error(self, f"the inner loop {self.inner} needs a constant extent "
                                       f"counted from 0 (split it first, e.g. split({stage.name}, "
                                       f"{self.inner!r}, 8))")
        if outer_loop.kind != "serial" or inner_loop.kind != "serial":
            raise schedule_error(self, "fuse loops before marking them "
                                       "parallel/vectorized/unrolled")
        name = fresh_loop_name(self, state, stage, self.name or f"{self.outer}_{self.inner}",
                               {self.outer, self.inner})
        extent = outer_loop.extent * inner_loop.extent if outer_loop.extent is not None else None
        fused = Loop(name, LFuse(outer_loop.expr, inner_loop.expr, inner_loop.extent), extent,
                     outer_loop.reduction or inner_loop.reduction, zero_based=outer_loop.zero_based)
        loops = list(state.loops[stage])
        loops[outer_pos:inner_pos + 1] = [fused]
        state.loops[stage] = tuple(loops)
        mark_touched(self, state, stage)


def _mark(prim, state: State, kind: LoopKind, need_const: bool) -> None:
    stage = resolve_stage(prim, state, prim.stage)
    pos, loop = find_loop(prim, state, stage, prim.loop)
    if loop.kind not in ("serial", kind):
        raise schedule_error(prim, f"loop {loop.name} is already {loop.kind}")
    # a stage computed inside another's loop runs over the block its consumer needs, whose
    # size lowering infers: there, a constant bound is checked at build time
    if need_const and loop.extent is None and state.compute[stage].kind != "at":
        raise schedule_error(prim, f"loop {loop.name} of {stage.name} has no constant extent; split "
                                   f"it by a constant first, e.g. split({stage.name}, "
                                   f"{loop.name!r}, 8), and {prim.method} the inner loop")
    reassociate = getattr(prim, "reassociate", False)
    if not isinstance(reassociate, bool):
        raise schedule_error(prim, f"reassociate= must be True or False, got {reassociate!r}")
    if kind in ("parallel", "vectorized") and loop.reduction and not reassociate:
        raise schedule_error(prim, f"loop {loop.name} of {stage.name} is a reduction loop: its "
                                   f"iterations accumulate into the same elements of {stage.name}, "
                                   "so running them "
                                   f"{'in parallel' if kind == 'parallel' else 'as vector lanes'} "
                                   f"would race; {prim.method} a loop over {stage.name}'s own dims "
                                   "instead, or pass reassociate=True to accumulate partial "
                                   "results per iteration and combine them after the loop (float "
                                   "sums then round differently)")
    if reassociate:
        if isinstance(stage, Update):
            raise schedule_error(prim, "reassociate=True is for the reduction loops of a stage; "
                                       f"{stage.name} is an update, whose loops run in parallel "
                                       "when its iterations write different elements (the legality "
                                       f"check proves it), or with atomic({stage.name}) when they "
                                       f"may update one element; rfactor({stage.name}, "
                                       f"{loop.name!r}, n) gives each of n threads partial results "
                                       "of its own")
        if not loop.reduction:
            raise schedule_error(prim, f"reassociate=True is for reduction loops; {loop.name} is a "
                                       f"loop over {stage.name}'s own dims and needs no "
                                       "reassociation")
        if loop.extent is None and state.compute[stage].kind != "at":
            raise schedule_error(prim, f"reassociating loop {loop.name} needs a constant extent "
                                       "(one partial result per iteration); split it by a constant "
                                       "first")
    state.set_loop(stage, pos, with_kind(loop, kind, reassociate))
    mark_touched(prim, state, stage)


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

    def apply(self, state: State) -> None:
        _mark(self, state, "vectorized", True)


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

    def apply(self, state: State) -> None:
        _mark(self, state, "unrolled", True)


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

    def apply(self, state: State) -> None:
        _mark(self, state, "parallel", False)
