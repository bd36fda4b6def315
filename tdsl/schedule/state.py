"""What a schedule means so far: each stage's loops and where each stage lives.

Replaying a schedule's primitives over the unscheduled pipeline yields a
`State`; lowering reads it. A loop is a quasi-affine function of the stage's
original dims, kept as a small expression tree (`LoopExpr`) that lowering
turns into an isl affine function.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from .. import dtypes as dt
from ..compute import Dim, Stage, Update
from ..compute.expr import Const, Expr
from ..compute.pipeline import Pipeline

# what a schedule gives loops: a stage, or an update of one (`td.update`)
Schedulable = Stage | Update


class LoopExpr:
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class LDim(LoopExpr):
    """An original dim of the stage, counted from `base` (0, or a reduction's lower bound)."""

    dim: Dim
    base: Expr


@dataclass(frozen=True, slots=True)
class LOuter(LoopExpr):
    """floor((parent - base) / factor)."""

    parent: LoopExpr
    factor: int


@dataclass(frozen=True, slots=True)
class LInner(LoopExpr):
    """(parent - base) mod factor."""

    parent: LoopExpr
    factor: int


@dataclass(frozen=True, slots=True)
class LFuse(LoopExpr):
    """outer * inner_extent + inner, where inner counts from 0."""

    outer: LoopExpr
    inner: LoopExpr
    inner_extent: int


# how a loop runs: the loop IR's `ForKind`s, by value
LoopKind = Literal["serial", "parallel", "vectorized", "unrolled"]


@dataclass(frozen=True, slots=True)
class Loop:
    """One loop of a stage's nest. `extent` is an int when it is a known constant."""

    name: str
    expr: LoopExpr
    extent: int | None
    reduction: bool
    kind: LoopKind = "serial"
    zero_based: bool = True
    reassociate: bool = False  # a reduction loop run as partial results combined after it


PlacementKind = Literal["root", "inline", "at", "fused"]


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a stage is computed (or stored): at root, inlined, or inside `consumer`'s
    loop `loop` ("at"); an update "fused" runs in the loops of the update `consumer`,
    each iteration right after it (`Schedule.fuse_updates`)."""

    kind: PlacementKind
    consumer: Stage | None = None
    loop: str | None = None


ROOT = Placement("root")


@dataclass(slots=True)
class State:
    pipeline: Pipeline
    loops: dict[Schedulable, tuple[Loop, ...]] = field(default_factory=dict)
    compute: dict[Schedulable, Placement] = field(default_factory=dict)
    store: dict[Stage, Placement] = field(default_factory=dict)
    touched: set = field(default_factory=set)  # stages with loop primitives
    # stages the user defined that a restaging primitive replaced -> their replacement
    current: dict = field(default_factory=dict)
    layout: dict = field(default_factory=dict)  # stage -> storage order (positions of its dims)
    atomic: set = field(default_factory=set)  # updates run as atomic read-modify-writes
    nontemporal: set = field(default_factory=set)  # names of outputs written by streaming stores

    @classmethod
    def initial(cls, pipeline: Pipeline) -> State:
        st = cls(pipeline)
        for s in pipeline.schedulables:
            st.loops[s] = initial_loops(s)
            st.compute[s] = ROOT
        return st

    def copy(self) -> State:
        return State(self.pipeline, dict(self.loops), dict(self.compute), dict(self.store),
                     set(self.touched), dict(self.current), dict(self.layout),
                     set(self.atomic), set(self.nontemporal))

    def resolve(self, stage):
        """The scheduled stage meant by `stage`: a stage (or update) object of this pipeline,
        one a restaging primitive replaced, or a name. None when there is no such stage."""
        if isinstance(stage, str):
            return next((x for x in self.pipeline.schedulables if x.name == stage), None)
        if stage in self.loops:
            return stage
        return self.current.get(stage)

    def loop_names(self, stage: Stage) -> list[str]:
        return [lp.name for lp in self.loops[stage]]

    def find(self, stage: Stage, name: str) -> tuple[int, Loop]:
        for n, lp in enumerate(self.loops[stage]):
            if lp.name == name:
                return n, lp
        raise KeyError(name)

    def set_loop(self, stage: Stage, pos: int, loop: Loop) -> None:
        ls = list(self.loops[stage])
        ls[pos] = loop
        self.loops[stage] = tuple(ls)

    def fused_into(self, u: Schedulable) -> list[Update]:
        """The updates fused into update `u`'s loops (`fuse_updates`), in order."""
        return [x for x, p in self.compute.items()
                if p.kind == "fused" and p.consumer is u and isinstance(x, Update)]

    def store_placement(self, stage: Stage) -> Placement:
        return self.store.get(stage, self.compute[stage])


def _const_int(e: Expr) -> int | None:
    return int(e.value) if isinstance(e, Const) else None


def initial_loops(stage) -> tuple[Loop, ...]:
    """A stage's loops are its dims then its reduction dims; an update's, its over= dims."""
    if isinstance(stage, Update):
        return tuple(_axis_loop(ax, False) for ax in stage.axes)
    zero = Const(0, dt.int64)
    loops = [Loop(d.name, LDim(d, zero), _const_int(ext), False)
             for d, ext in zip(stage.dims, stage.shape)]
    loops += [_axis_loop(ax, True) for ax in stage.reduce_axes]
    return tuple(loops)


def _axis_loop(ax, reduction: bool) -> Loop:
    lo, hi = _const_int(ax.lo), _const_int(ax.hi)
    extent = hi - lo if lo is not None and hi is not None else None
    return Loop(ax.dim.name, LDim(ax.dim, ax.lo), extent, reduction, zero_based=lo == 0)


def with_kind(loop: Loop, kind: LoopKind, reassociate: bool = False) -> Loop:
    return replace(loop, kind=kind, reassociate=reassociate)
