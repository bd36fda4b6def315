"""instrument: clock reads around each stage's loop nest and each parallel loop.

Not one of the steps every build runs (in `lower.PIPELINE` it applies only to
profiling): `Kernel.profile` builds a second, instrumented kernel from the kernel's loop
nest (`lower.finish(..., profile=True)`: right after `LOOP_NEST`, before the steps that
write the instrumented nest out as they write any), so the kernel a program calls is never
changed. The instrumented function takes one more output, `PROFILE_BUFFER`,
an int64 array of `counters(regions)` elements that it adds to:

- a *stage* region is a statement that stores into one buffer only (a stage's loop
  nest, or the block of a producer computed inside its consumer's loop): per entry,
  the nanoseconds it took and one call;
- a *parallel* region is a parallel loop: per entry, the nanoseconds from its start
  to its end (wall time) and one call, and, summed over its iterations on every
  thread, the nanoseconds of its body (busy time);
- region 0 is the whole kernel.

A statement that stores into several buffers is split into its parts; one whose
enclosing loops run more than `MAX_ENTRIES` times, or inside a vectorized or unrolled
loop, is not (the clock reads would cost more than what they measure): it is one
region named after all its stages. Inside a parallel loop the counters are added to
atomically. The clock is `Call("clock")`, a monotonic clock in nanoseconds.

Guarantees: the instrumented function computes what the function did (it only adds
`Let`s of clock reads and stores into the counters), and `plan(func)` lists the
regions in the order of their counters.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from ... import dtypes as dt
from ...dtypes import int64
from .. import ir
from ..build import add, call, cast, const, index, sub
from ..rewrite import walk_stmts

PROFILE_BUFFER = "tdsl_profile"
# a region is not split off below loops that run more than this many times per call
MAX_ENTRIES = 1 << 15
# counters per region: nanoseconds, entries, and (parallel loops) busy nanoseconds
SLOTS = 3

RegionKind = Literal["kernel", "stage", "parallel"]


@dataclass(frozen=True)
class Region:
    """One timed part of a kernel. `label`: the stage(s) (joined by " + ") or the
    parallel loop's variable; `parent`: the index of the region around it (-1 for the
    kernel); `in_parallel`: inside a parallel loop (its times are thread time)."""

    kind: RegionKind
    label: str
    parent: int
    in_parallel: bool
    stages: tuple[str, ...]


def counters(regions: list[Region]) -> int:
    """Elements of the counter buffer for these regions."""
    return SLOTS * len(regions)


def _stored(s: ir.Stmt, skip: frozenset[str]) -> tuple[str, ...]:
    """The buffers `s` stores into, in order of first store, besides `skip`."""
    out: list[str] = []
    for x in walk_stmts(s):
        if isinstance(x, ir.Store) and x.buffer.name not in skip and x.buffer.name not in out:
            out.append(x.buffer.name)
    return tuple(out)


def _trips(loop: ir.For) -> int:
    """An upper bound of a loop's iterations (a large number when unknown)."""
    if loop.max_extent is not None:
        return max(1, loop.max_extent)
    if isinstance(loop.start, ir.Const) and isinstance(loop.end, ir.Const):
        return max(1, int(loop.end.value) - int(loop.start.value))
    return 1 << 20


class _Planner:
    """Walks the function once; `regions` in counter order, `wrap` what to time."""

    def __init__(self, func: ir.LoweredFunc):
        skip = {PROFILE_BUFFER}
        if func.status is not None:
            skip.add(func.status.name)
        self.skip = frozenset(skip)
        self.regions: list[Region] = [Region("kernel", func.name, -1, False,
                                             _stored(func.body, self.skip))]
        # id(stmt) -> region index, for the statements wrapped (a stage, a parallel loop)
        self.wrap: dict[int, int] = {}

    def visit(self, s: ir.Stmt, parent: int, entries: int, in_parallel: bool,
              stage: tuple[str, ...] | None) -> None:
        stored = _stored(s, self.skip)
        if not stored:
            return
        if isinstance(s, ir.For) and s.kind is ir.ForKind.PARALLEL and not in_parallel \
                and entries <= MAX_ENTRIES:
            self.wrap[id(s)] = len(self.regions)
            self.regions.append(Region("parallel", s.var, parent, False, stored))
            inner = len(self.regions) - 1
            self._inside(s.body, inner, entries * _trips(s), True, stage)
            return
        if len(stored) == 1 and stored != stage and entries <= MAX_ENTRIES:
            self.wrap[id(s)] = len(self.regions)
            self.regions.append(Region("stage", stored[0], parent, in_parallel, stored))
            self._inside(s, len(self.regions) - 1, entries, in_parallel, stored, top=True)
            return
        if len(stored) == 1:
            self._inside(s, parent, entries, in_parallel, stage, top=True)
            return
        if entries > MAX_ENTRIES or isinstance(s, ir.For) and (s.kind in (
                ir.ForKind.VECTORIZED, ir.ForKind.UNROLLED) or entries * _trips(s) > MAX_ENTRIES):
            self.wrap[id(s)] = len(self.regions)
            self.regions.append(Region("stage", " + ".join(stored), parent, in_parallel, stored))
            return
        self._inside(s, parent, entries, in_parallel, stage, top=True)

    def _inside(self, s: ir.Stmt, parent: int, entries: int, in_parallel: bool,
                stage: tuple[str, ...] | None, top: bool = False) -> None:
        """Visit the statements directly inside `s` (or `s`'s own parts, with `top`)."""
        match s:
            case ir.For(body=body):
                if top:
                    if s.kind in (ir.ForKind.VECTORIZED, ir.ForKind.UNROLLED):
                        return
                    self.visit(body, parent, entries * _trips(s), in_parallel, stage)
                else:
                    self.visit(s, parent, entries, in_parallel, stage)
            case ir.Let(body=body) | ir.Allocate(body=body):
                self.visit(body, parent, entries, in_parallel, stage)
            case ir.If(then=then, else_=other):
                self.visit(then, parent, entries, in_parallel, stage)
                if other is not None:
                    self.visit(other, parent, entries, in_parallel, stage)
            case ir.Block(stmts):
                for x in stmts:
                    self.visit(x, parent, entries, in_parallel, stage)
            case _:
                if not top:
                    self.visit(s, parent, entries, in_parallel, stage)


def _plan(func: ir.LoweredFunc) -> _Planner:
    p = _Planner(func)
    p.visit(func.body, 0, 1, False, None)
    return p


def plan(func: ir.LoweredFunc) -> list[Region]:
    """The regions `instrument(func)` times, in the order of their counters."""
    return _plan(func).regions


def _add(buf: ir.Buffer, slot: int, amount: ir.Expr, atomic: bool) -> ir.Store:
    at = (index(slot),)
    if atomic:
        old = ir.Var(ir.ATOMIC_OLD, int64)
        return ir.Store(buf, at, add(old, amount), atomic=True)
    return ir.Store(buf, at, add(ir.Load(buf, at), amount))


def _timed(s: ir.Stmt, buf: ir.Buffer, slot: int, atomic: bool, name: str) -> ir.Stmt:
    """`s` between two clock reads, the difference added to counter `slot` and one entry
    to the next."""
    start = ir.Var(name, dt.index)
    elapsed = cast(sub(call("clock", (), dt.index), start), int64)
    return ir.Let(name, call("clock", (), dt.index), ir.Block((
        s, _add(buf, slot, elapsed, atomic), _add(buf, slot + 1, const(1, int64), atomic))))


class _Apply:
    def __init__(self, planner: _Planner, buf: ir.Buffer):
        self.p, self.buf = planner, buf

    def stmt(self, s: ir.Stmt, in_parallel: bool) -> ir.Stmt:
        k = self.p.wrap.get(id(s))
        if k is not None:
            region = self.p.regions[k]
            if region.kind == "parallel":
                assert isinstance(s, ir.For)
                body = _timed(self.stmt(s.body, True), self.buf, SLOTS * k + 2, True,
                              f"tdsl_busy{k}")
                # the busy counter's entries go to the slot after it: unused, kept at zero
                loop = replace(s, body=_drop_count(body))
                return _timed(loop, self.buf, SLOTS * k, in_parallel, f"tdsl_t{k}")
            return _timed(self.children(s, in_parallel), self.buf, SLOTS * k, in_parallel,
                          f"tdsl_t{k}")
        return self.children(s, in_parallel)

    def children(self, s: ir.Stmt, in_parallel: bool) -> ir.Stmt:
        match s:
            case ir.For():
                if s.kind in (ir.ForKind.VECTORIZED, ir.ForKind.UNROLLED):
                    return s
                inner = in_parallel or s.kind is ir.ForKind.PARALLEL
                body = self.stmt(s.body, inner)
                return s if body is s.body else replace(s, body=body)
            case ir.Let(name, value, body):
                new = self.stmt(body, in_parallel)
                return s if new is body else ir.Let(name, value, new)
            case ir.Allocate(buf, body, storage):
                new = self.stmt(body, in_parallel)
                return s if new is body else ir.Allocate(buf, new, storage)
            case ir.If(cond, then, other):
                t = self.stmt(then, in_parallel)
                e = None if other is None else self.stmt(other, in_parallel)
                return s if t is then and e is other else ir.If(cond, t, e)
            case ir.Block(stmts):
                new_stmts = tuple(self.stmt(x, in_parallel) for x in stmts)
                return s if all(a is b for a, b in zip(new_stmts, stmts)) else ir.Block(new_stmts)
        return s


def _drop_count(s: ir.Stmt) -> ir.Stmt:
    """A busy-time `_timed` body without its entry count (the loop's iterations are
    counted once, by the wall-time region's own counter, as entries of the loop)."""
    assert isinstance(s, ir.Let) and isinstance(s.body, ir.Block)
    body, add_time, add_count = s.body.stmts
    return ir.Let(s.name, s.value, ir.Block((body, add_time)))


def instrument(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` with its regions (`plan`) timed into one more output, `PROFILE_BUFFER`."""
    planner = _plan(func)
    buf = ir.Buffer(PROFILE_BUFFER, int64, (index(counters(planner.regions)),),
                    "output")
    body = _Apply(planner, buf).stmt(func.body, False)
    body = _timed(body, buf, 0, False, "tdsl_t0")
    return replace(func, outputs=(*func.outputs, buf), body=body)
