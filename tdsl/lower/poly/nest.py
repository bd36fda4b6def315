"""The loop-nest structure of the polyhedral model: its records (a `Band` per loop, a
`Statement` per isl domain, a `Group` per stage's loop nest, a `BufferBox` per buffer)
and the groups a schedule's placements nest in one another (`build_groups`), each
loop given a variable name of its own (`LoopNamer`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import islpy as isl

from ...compute import expr as cx
from ...compute.definitions import Stage
from ...errors import ScheduleError
from ...schedule import Loop, Schedule
from ...schedule.state import (
    LDim,
    LFuse,
    LInner,
    LoopExpr,
    LoopKind,
    LOuter,
    Schedulable,
    initial_loops,
)
from .affine import Vars
from .sliding import Window


@dataclass(eq=False)
class Band:
    """One loop of one stage; shared by every statement nested inside it."""

    owner: Schedulable
    loop: Loop
    var: str
    extent: int | None = None  # the most iterations it runs for any values of the outer loops

    @property
    def kind(self) -> LoopKind:
        return self.loop.kind


# What a statement computes: a pure stage, a reduction's init or update, an update
# stage (`assign`), a block's bounds (`bounds`, see `Group.bounds`) or, only to declare
# a stage's domain for the access checks, `decl`
StatementRole = Literal["pure", "init", "update", "assign", "bounds", "decl"]


@dataclass(eq=False)
class Statement:
    """An isl statement: what a stage computes in one role (`StatementRole`) over its
    iteration `domain`, the bands around it and their values over the domain."""

    name: str
    stage: Schedulable
    role: StatementRole
    dims: tuple[cx.Dim, ...]
    bands: list[Band]
    n_prefix: int
    vars: Vars
    domain: isl.Set
    band_values: list[isl.PwAff]
    # the domain isl's AST builder sees, when it differs from `domain` (a block whose
    # bounds are parameters bound per iteration of the compute loop; see `Group.bounds`)
    ast_domain: isl.Set | None = None

    @property
    def dim_names(self) -> dict[cx.Dim, str]:
        return {d: d.name for d in self.dims}

    @property
    def isl_names(self) -> list[str]:
        return [f"p{k}" for k in range(self.n_prefix)] + [d.name for d in self.dims]


@dataclass(eq=False)
class Group:
    """A stage's loop nest: bands before the init/update split, then each branch."""

    stage: Schedulable
    prefix: list[Band]
    shared: list[Band]
    init: list[Band]
    update: list[Band]
    children: dict[Band, list[Group]] = field(default_factory=dict)
    stmts: list[Statement] = field(default_factory=list)
    store_depth: int = 0  # how many prefix bands enclose the buffer
    # A block whose bounds are not affine in the compute loop's values (a fused or
    # floor-divided consumer loop): each bound is a parameter of the AST (name, value
    # over the prefix), bound per iteration by the `binder` statement scheduled just
    # before the block. isl's AST builder is not shown the division structure that
    # ties the block to the prefix (it mis-generates degenerate loops over it).
    bounds: list[tuple[str, isl.PwAff]] = field(default_factory=list)
    binder: Statement | None = None
    # stored outside its compute loop, a block that overlaps the previous iteration's
    # slides: only its new part is computed there (`sliding.window`)
    window: Window | None = None


@dataclass
class BufferBox:
    """Where a stage's buffer lives: its extents and its origin per dim."""

    extents: list[isl.PwAff]  # params only
    lo: list[isl.PwAff] | None  # over the store-level loop values [q0..]; None = origin 0
    depth: int  # store-level loop depth (number of enclosing bands)
    # (dim, rows): a folded dim holds `rows` rows, row r at r mod rows (`sliding`)
    fold: tuple[tuple[int, int], ...] = ()


class LoopNamer:
    """Gives each band a loop variable name of its own: the schedule's loop name, made
    unique among the names taken and the enclosing bands'."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken

    def loop_var(self, loop: Loop, stage: Schedulable, enclosing: list[Band]) -> str:
        """The variable name of `stage`'s `loop` inside the bands `enclosing`."""
        used = self.taken | {b.var for b in enclosing}
        name = loop.name
        if name in used:
            name = f"{loop.name}_{stage.name}"
        base, n = name, 1
        while name in used:
            n += 1
            name = f"{base}{n}"
        return name


def _dims_of(loop_expr: LoopExpr) -> set[cx.Dim]:
    match loop_expr:
        case LDim(d):
            return {d}
        case LOuter(p) | LInner(p):
            return _dims_of(p)
        case LFuse(a, b):
            return _dims_of(a) | _dims_of(b)
    raise AssertionError(loop_expr)


def _init_loops(stage: Stage, loops: tuple[Loop, ...], split: int) -> list[Loop]:
    """The init's loops after the shared ones: the update's pure loops that cover only
    dims no reduction loop also covers, in order, then a plain loop over every other dim.

    A pure dim fused with a reduction dim cannot be reconstructed from the pure loops,
    and neither can a dim fused with such a dim; those get plain loops (a schedule that
    mixes a dim's split parts with the dim itself also meets an isl AST bug: isl drops
    the values of non-divisible splits)."""
    own = [lp for lp in loops[split:] if not lp.reduction]
    affected: set[cx.Dim] = set()
    for lp in loops[split:]:
        if lp.reduction:
            affected |= _dims_of(lp.expr) & set(stage.dims)
    while True:  # dims sharing a pure loop with an affected dim are affected too
        more = {d for lp in own if _dims_of(lp.expr) & affected for d in _dims_of(lp.expr)}
        if more <= affected:
            break
        affected |= more
    kept = [lp for lp in own if not _dims_of(lp.expr) & affected]
    names = {lp.name for lp in loops}
    extra = []
    for n, d in enumerate(stage.dims):
        if d in affected:
            name = d.name if d.name not in names else f"{d.name}_init"
            extra.append(replace(initial_loops(stage)[n], name=name))
    return kept + extra


def build_groups(sched: Schedule, namer: LoopNamer
                 ) -> tuple[list[Group], dict[Schedulable, Group]]:
    """Every stage's group (those not inlined or fused), each placed inside the band of the
    loop its compute_at names; the root groups and every group by stage."""
    st = sched.state
    stages: list[Schedulable] = [s for s in st.pipeline.schedulables
                                 if st.compute[s].kind not in ("inline", "fused")]
    placed: dict[tuple[Schedulable, str], list[Schedulable]] = {}  # by consumer and loop
    for s in stages:
        p = st.compute[s]
        if p.kind == "at":
            assert p.consumer is not None and p.loop is not None  # as compute_at places it
            if p.loop not in st.loop_names(p.consumer):
                loops = " ".join(st.loop_names(p.consumer))
                raise ScheduleError(
                    f"compute_at({s.name}, {p.consumer.name}, {p.loop!r}): {p.consumer.name} has no "
                    f"loop {p.loop!r} after the later primitives; its loops are: {loops}")
            placed.setdefault((p.consumer, p.loop), []).append(s)
    groups: dict[Schedulable, Group] = {}

    def band(stage: Schedulable, loop: Loop, enclosing: list[Band]) -> Band:
        return Band(stage, loop, namer.loop_var(loop, stage, enclosing))

    def make(stage: Schedulable, prefix: list[Band]) -> Group:
        loops = st.loops[stage]
        split = next((n for n, lp in enumerate(loops) if lp.reduction), len(loops))
        shared: list[Band] = []
        for lp in loops[:split]:
            shared.append(band(stage, lp, prefix + shared))
        outer = prefix + shared
        init: list[Band] = []
        if isinstance(stage, Stage) and stage.reduction is not None:
            for lp in _init_loops(stage, loops, split):
                init.append(band(stage, lp, outer + init))
        update: list[Band] = []
        for lp in loops[split:]:
            update.append(band(stage, lp, outer + update))
        g = Group(stage, prefix, shared, init, update)
        groups[stage] = g
        chain = shared + update
        for b in chain:
            for child in placed.get((stage, b.loop.name), []):
                enclosing = prefix + chain[: chain.index(b) + 1]
                if any(x.kind == "vectorized" for x in enclosing):
                    raise ScheduleError(
                        f"compute_at({child.name}, {stage.name}, {b.loop.name!r}): that loop is "
                        f"inside a vectorized loop; compute {child.name} outside it, or vectorize "
                        f"a loop of {child.name} instead")
                g.children.setdefault(b, []).append(make(child, enclosing))
        return g

    roots = [make(s, []) for s in stages if st.compute[s].kind == "root"]
    return roots, groups
