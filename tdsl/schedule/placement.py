"""Where a stage is computed and stored: `compute_inline`, `compute_at`, `store_at`,
`store_root`, and `fuse_updates` (an update run in the loops of the one before it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..compute import Stage, Update
from ..compute.definitions import Tensor
from ..compute.traversal import structure, substitute
from .record import Primitive, StageRef, find_loop, resolve_stage, schedule_error
from .state import Placement, State


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

    def apply(self, state: State) -> None:
        first, second = resolve_stage(self, state, self.stage), resolve_stage(self, state, self.second)
        for u in (first, second):
            if not isinstance(u, Update):
                raise schedule_error(self, f"{u.name} is a stage; fuse_updates fuses two updates of "
                                           "one stage (td.update)")
        assert isinstance(first, Update) and isinstance(second, Update)
        ups = state.pipeline.updates_of(first.stage)
        between = ups[ups.index(first) + 1: ups.index(second)] if second in ups else ()
        if second.stage is not first.stage or ups.index(second) <= ups.index(first) or any(
                state.compute[u] != Placement("fused", first) for u in between):
            order = ", ".join(u.name for u in ups)
            raise schedule_error(self, f"{second.name} must be the update right after {first.name} "
                                       "(or after those fused into it already), of the same stage; "
                                       f"the updates of {first.stage.name} are: {order}")
        if second in state.touched or second in state.atomic:
            raise schedule_error(self, f"{second.name} is already scheduled; fuse first, then "
                                       f"schedule {first.name}, whose loops both run in")
        if state.fused_into(second):
            raise schedule_error(self, f"{second.name} has an update fused into it already")
        if not same_domain(first, second):
            show = ", ".join(f"{ax.dim.name}: ({ax.lo!r}, {ax.hi!r})" for ax in second.axes)
            mine = ", ".join(f"{ax.dim.name}: ({ax.lo!r}, {ax.hi!r})" for ax in first.axes)
            raise schedule_error(self, f"the updates loop over different domains ({mine} and "
                                       f"{show}); fused updates run over the same points")
        state.compute[second] = Placement("fused", first)


def same_domain(first: Update, second: Update) -> bool:
    """Whether updates `first` and `second` loop over the same points: as many over= dims, and the
    bounds of each equal once second's dims are named as first's."""
    if len(first.axes) != len(second.axes):
        return False
    rename = {y.dim: x.dim for x, y in zip(first.axes, second.axes)}
    return all(structure(x.lo) == structure(substitute(y.lo, rename))
               and structure(x.hi) == structure(substitute(y.hi, rename))
               for x, y in zip(first.axes, second.axes))


def _producer(prim, state: State, stage) -> Stage:
    stage = resolve_stage(prim, state, stage)
    if isinstance(stage, Update):
        raise schedule_error(prim, f"{stage.name} is an update; it runs at root right after "
                                   f"{stage.stage.name} and its earlier updates")
    if state.pipeline.updates_of(stage):
        names = ", ".join(u.name for u in state.pipeline.updates_of(stage))
        raise schedule_error(prim, f"{stage.name} has updates ({names}), so it is computed and "
                                   "updated in full at root")
    if stage in state.pipeline.outputs:
        raise schedule_error(prim, f"{stage.name} is an output of the pipeline and is always stored "
                                   "in full; only intermediate stages can be inlined or computed "
                                   "inside another stage")
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

    def apply(self, state: State) -> None:
        stage = _producer(self, state, self.stage)
        if stage in state.touched:
            raise schedule_error(self, f"{stage.name} already has loop primitives; an inlined "
                                       "stage has no loops")
        users = [s for s, p in state.compute.items() if p.kind == "at" and p.consumer is stage]
        if users:
            raise schedule_error(self, f"{users[0].name} is computed inside {stage.name}'s loops")
        state.compute[stage] = Placement("inline")
        state.store.pop(stage, None)


def _placement(prim, state: State, producer: Stage, consumer, loop: str) -> Placement:
    consumer = resolve_stage(prim, state, consumer)
    if isinstance(consumer, Update):
        raise schedule_error(prim, f"stages cannot be computed inside the loops of an update "
                                   f"({consumer.name}); compute {producer.name} at root")
    if consumer is producer:
        raise schedule_error(prim, "a stage cannot be computed inside its own loops")
    if not _depends_on(state.pipeline, consumer, producer):
        users = ", ".join(s.name for s in state.pipeline.consumers(producer)) or "none"
        raise schedule_error(prim, f"{consumer.name} does not use {producer.name} (directly or "
                                   f"through other stages); {producer.name}'s consumers are: "
                                   f"{users}")
    find_loop(prim, state, consumer, loop)
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

    def apply(self, state: State) -> None:
        stage = _producer(self, state, self.stage)
        state.compute[stage] = _placement(self, state, stage, self.consumer, self.loop)


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

    def apply(self, state: State) -> None:
        stage = _producer(self, state, self.stage)
        state.store[stage] = _placement(self, state, stage, self.consumer, self.loop)


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

    def apply(self, state: State) -> None:
        stage = _producer(self, state, self.stage)
        if state.compute[stage].kind == "inline":
            raise schedule_error(self, f"{stage.name} is inlined (compute_inline): it has no "
                                       "buffer to store")
        state.store[stage] = Placement("root")
