"""The auto-scheduler: a schedule from rules, without measuring anything.

`autotemplate` looks at each stage's definition and access pattern and writes the
schedule an expert would start from, with its numeric and placement decisions left
as knobs (defaults: the rules' choices); `autoschedule` is its default instance.

Rules, in the spirit of Halide's Mullapudi2016 and TVM's MetaSchedule:

- inline a pointwise producer that is read once per consumer point and reused by
  no other loop (nothing would be computed twice);
- a contraction (a sum of products whose operands miss some of the output's dims:
  matmul, convolutions, covariance) gets a register tile: `cache_write` makes an
  accumulator computed per tile with the reduction outside its unrolled, vectorized
  tile loops; an input read with the vector dim innermost is packed per panel with
  `cache_read`; the tile loops are parallel outside; a convolution's padded input is
  computed per row of its output (or at the root: a knob) and its filter's columns
  are unrolled;
- a reduction over a few taps (a depthwise convolution) sums each vector of outputs
  over the unrolled taps in registers, rows in strips (or takes the register tile:
  the knob "<stage>.form" is a `Template.branch`);
- a stage read by a stencil or a row-wise consumer is computed inside that
  consumer's outer loop (`compute_at`): strips of rows for stencils, one row for
  row reductions, whose long reductions are split into vector lanes (`rfactor`);
- the unit-stride innermost loop is vectorized at the machine's vector width, in
  chunks of two vectors (four for a producer computed per strip; one cache line for a
  stage that streams its stores), and the outermost loop with enough iterations runs
  in parallel;
- an output no other stage reads, too large to stay in the cores' own caches beside
  its input, is written by streaming stores (`store_nontemporal`, a knob): by default
  when it is larger than the part of the last-level cache the process can count on
  (written once and not read back soon, it would only push the input out of the
  cache) or when the input alone fits in the cores' own caches.

Every rule is applied through the checked primitives, and the result is proven legal
(`Schedule.check`); a rule that a stage refuses is left out for that stage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..compute.definitions import Input, Stage
from ..compute.expr import Access, Binary, Const, Dim, Expr, Reduce, Size, free_dims, walk
from ..compute.pipeline import Pipeline
from ..compute.views import BoundaryView
from ..compute.work import value
from ..errors import ScheduleError, TdslError
from ..schedule import Schedule, Template
from ..schedule.knob import knob
from .machine import Machine, machine

_DEFAULT_EXTENT = 1024  # a symbolic size without a hint
COMBINE = 8  # vector lanes a row reduction's partials are summed into before the last chain
CACHE_LINE = 64  # bytes: the chunk a streamed stage writes per vector loop
LLC_PER_CORE = 16 << 20  # bytes of a shared last-level cache the rules count on per core


def autoschedule(outputs, target: str = "c", *, machine: Machine | None = None,
                 **sizes: int) -> Schedule:
    """A schedule for `outputs` chosen by rules, without measuring: register tiles and
    packing for contractions, producers computed inside their stencil or row-wise
    consumers, inlined pointwise producers, vectorized unit-stride loops, parallel
    outer loops. Sizes given (`N=1024`) are hints for symbolic sizes.

        s = td.autoschedule(C, target="c", N=1024)
        print(s)            # a plain schedule: the Python that rebuilds it

        mine = td.schedule(C).parallel(C, "j")
        s = td.autoschedule(mine)   # keeps parallel(C, "j"); schedules the other stages

    `outputs` may be a Schedule: every primitive in it is kept, and the rules schedule
    only the stages it does not mention. The rules size tiles, vectors and strips by
    `machine` (default: this machine's model, `tdsl.tune.machine.machine()`; pass a
    `Machine` to schedule for another). The result is a plain, legal Schedule (edit it
    like any other); its choices are the defaults of `td.autotemplate`, which
    `td.tune` searches."""
    return autotemplate(outputs, target, machine=machine, **sizes).instantiate()


def autotemplate(outputs, target: str = "c", *, machine: Machine | None = None,
                 **sizes: int) -> Template:
    """The auto-scheduler's schedule with its decisions as knobs (tile sizes, vector
    widths, the parallel loop, ...), named "<stage>.<what>"; each knob's default is
    what `td.autoschedule` chooses. `td.tune(outputs)` searches these knobs.

    `outputs` may be a Schedule: the template starts from it (its primitives are kept
    as they are, never knobs) and schedules only the stages it does not mention."""
    if target not in ("c", "llvm"):
        raise TdslError(f"unknown target {target!r}; valid targets are c, llvm")
    base = outputs if isinstance(outputs, Schedule) else Schedule(outputs)
    pipeline = base.pipeline
    bad = [n for n in sizes if n not in {s.name for s in pipeline.sizes}]
    if bad:
        valid = ", ".join(s.name for s in pipeline.sizes) or "none"
        raise TdslError(f"autoschedule: {', '.join(bad)} is not a size of this pipeline; "
                        f"its sizes are: {valid}")
    if machine is not None and not isinstance(machine, Machine):
        raise TdslError(f"autoschedule: machine must be a tdsl.tune.machine.Machine, "
                        f"got {machine!r}")
    rules = _Rules(pipeline, sizes, machine or _this_machine(), target, _mentioned(base))
    t = rules.run(Template(base))
    return _legal(t, Template(base))


def _this_machine() -> Machine:
    return machine()


# the fields of a primitive that name a stage (or a tensor a restaging primitive reads)
_STAGE_FIELDS = ("stage", "consumer", "second", "tensor", "consumers", "name")


def _mentioned(s: Schedule) -> frozenset[str]:
    """The names of the stages a schedule's primitives name: the user's, left alone."""
    names: set[str] = set()
    for p in s.primitives:
        for f in _STAGE_FIELDS:
            v = getattr(p, f, None)
            for x in v if isinstance(v, (tuple, list)) else (v,):
                if isinstance(x, str):
                    names.add(x)
                elif x is not None and hasattr(x, "name"):
                    names.add(x.name)
    return frozenset(names)


def _legal(t: Template, plain: Template) -> Template:
    """`t` when its default schedule is legal; else `t` without parallel loops; else no
    schedule at all."""
    try:
        t.instantiate().check()
        return t
    except TdslError:
        pass
    serial = Template(t.base)
    try:
        for c in t.calls:
            if c.method != "parallel":
                serial = Template(serial.base, serial.calls + (c,))
        serial.instantiate().check()
        return serial
    except TdslError:
        return plain


def extent_value(e: Expr, sizes: dict[str, int]) -> int:
    """An extent's value, symbolic sizes taken from the hints."""
    env = {s.name: sizes.get(s.name, _DEFAULT_EXTENT) for s in walk(e) if isinstance(s, Size)}
    v = value(e, env)
    return _DEFAULT_EXTENT if v is None else v  # an extent the rules cannot read: a large one


def _accesses(e: Expr) -> list[Access]:
    return [n for n in walk(e) if isinstance(n, Access)]


def _base(t) -> Any:
    return t.tensor if isinstance(t, BoundaryView) else t


class _Rules:
    def __init__(self, pipeline: Pipeline, sizes: dict[str, int], machine: Machine, target: str,
                 mine: frozenset[str] = frozenset()):
        self.pipeline, self.sizes, self.machine, self.target = pipeline, sizes, machine, target
        # stages computed inside another or inlined, and those the user scheduled
        self.placed: set[str] = set(mine)
        self.inlined: set[str] = set()
        self.mine = mine

    def extent(self, s: Stage, d: Dim) -> int:
        return extent_value(s.extent(d), self.sizes)

    def axis_extent(self, ax) -> int:
        """The number of iterations of a reduction axis."""
        return extent_value(ax.hi, self.sizes) - extent_value(ax.lo, self.sizes)

    def lanes_of(self, s: Stage) -> int:
        """Vector lanes of s's element type: the machine's widest vectors. Where 512-bit
        operations are split in two (Zen 4) they compute no more FLOP/s than 256-bit
        ones but take half the instructions, loads and broadcasts for the same work:
        auto-scheduled there with 16 lanes against 8, the register-tiled contractions
        ran 5-9% faster, a blur and the row reductions 4-11%, a depthwise convolution
        3-6% slower (so a stencil's strips are also offered half vectors there:
        `split_halves`)."""
        return max(1, self.machine.vector_bytes // max(1, s.dtype.itemsize))

    def split_halves(self) -> bool:
        """Whether the machine's widest vectors run as two halves (512-bit FMAs no faster
        than 256-bit ones), so half a vector costs no FLOP/s and wastes less on tails."""
        return self.machine.vector_bytes > 32 and self.machine.wide_speedup < 1.3

    def tile_shape(self, rows: list[int], cols: list[int], lanes: int, extent: int
                   ) -> tuple[int, int]:
        """(rows, columns) of a register tile: rows x (columns / lanes) vector accumulators,
        with a vector of the other operand per column and a broadcast, within the
        machine's registers. Among those, the ones with at least `fma_chains`
        accumulators (fewer leave FMA units idle, waiting on their latency), then the
        most FMAs per load (the accumulators over the vectors loaded per step), less
        the work of a partial last tile of `extent` rows."""
        best: tuple[tuple[bool, float, int], int, int] | None = None
        for tu in rows:
            for tv in cols:
                nv = max(1, tv // lanes)
                acc = tu * nv
                if acc + nv + 1 > self.machine.registers and (tu, tv) != (rows[0], cols[0]):
                    continue
                waste = -(-max(1, extent) // tu) * tu / max(1, extent)
                key = (acc >= self.machine.fma_chains, acc / (tu + nv) / waste, -acc)
                if best is None or key > best[0]:
                    best = (key, tu, tv)
        assert best is not None
        return best[1], best[2]

    def channel_shape(self, pixels: list[int], channels: list[int], lanes: int, extent: int,
                      column_bytes: int) -> tuple[int, int]:
        """(pixels, channels) of a convolution's register tile. Its accumulators take at most
        half the vector registers (the unrolled taps' loads need the rest), at least
        `fma_chains` of them when possible; then the fewest loads per FMA, a weight
        vector counted four times a broadcast pixel when the weights the tile's
        channels read over the whole reduction (`column_bytes` per channel) do not fit
        in half the L1 cache (each tile streams them from L2: more pixels per tile use
        each more); tiles that divide `extent` first."""
        best: tuple[tuple[bool, bool, bool, float, int], int, int] | None = None
        for tu in pixels:
            for tv in channels:
                nv = max(1, tv // lanes)
                acc = tu * nv
                weight = 4 if tv * column_bytes > self.machine.l1 // 2 else 1
                key = (2 * acc <= self.machine.registers, acc >= self.machine.fma_chains,
                       extent % tu == 0, -(nv * weight + tu) / acc, tv)
                if best is None or key > best[0]:
                    best = (key, tu, tv)
        assert best is not None
        return best[1], best[2]

    # ---------------------------------------------------------------- the plan

    def run(self, t: Template) -> Template:
        for s in self.pipeline.stages:
            if s not in self.pipeline.outputs and s.name not in self.mine and self.inlinable(s):
                inlined = _try(t, lambda t, s=s: t.compute_inline(s))
                if inlined is not t:
                    self.placed.add(s.name)
                    self.inlined.add(s.name)
                t = inlined
        for s in reversed(self.pipeline.stages):  # consumers first: they place their producers
            if s.name in self.placed or self.pipeline.updates_of(s):
                continue
            t = _try(t, lambda t, s=s: self.root(t, s))
        for s in self.pipeline.outputs:
            if s.name not in self.mine:
                t = self.stream(t, s)
        return t

    def stream(self, t: Template, s: Stage) -> Template:
        """Streaming stores for an output that no stage reads back: a knob (the stage's name,
        or None for ordinary stores) when the output and its input do not fit in the
        cores' own caches; the default from `streams`."""
        if not self.streamable(s):
            return t
        choices = [s.name, None] if self.streams(s) else [None, s.name]
        return _try(t, lambda t: t.store_nontemporal(knob(f"{s.name}.stream", choices)))

    def streamable(self, s: Stage) -> bool:
        """s is an output no stage reads back, too large to stay in the cores' own caches
        beside its input: streaming its stores is a choice."""
        if s not in self.pipeline.outputs or self.pipeline.updates_of(s) \
                or self.pipeline.consumers(s):
            return False
        return 2 * self.bytes_of(s) > self.machine.l2 * self.machine.cores

    def streams(self, s: Stage) -> bool:
        """Streaming stores by default: when the output does not fit in the shared cache
        either (`shared_cache`), or when the inputs alone fit in the cores' own caches,
        which ordinary stores of the output would push them out of. (Between the two,
        the last level holds both: on a 2-core Xeon a 16 MB layer norm ran 1.2x slower
        streamed, a 3 MB depthwise convolution, whose input stays in L2, 1.09x (C) and
        1.23x (LLVM) faster; a 4 MB sgemm output as fast.)"""
        if not self.streamable(s):
            return False
        size = self.bytes_of(s)
        inputs = sum(self.bytes_of(i) for i in self.pipeline.inputs)
        return 2 * size > self.shared_cache() or inputs < self.machine.l2 * self.machine.cores

    def bytes_of(self, s) -> int:
        """The size of a stage or input, in bytes (symbolic sizes from the hints)."""
        elements = 1
        for d in s.dims:
            elements *= extent_value(s.extent(d), self.sizes)
        return elements * s.dtype.itemsize

    def shared_cache(self) -> int:
        """The part of the last-level cache the rules count on: all of it, but at most
        LLC_PER_CORE per core the process may use. The last level is shared with the
        rest of the socket, which may be many more cores than this process has (a
        2-core guest on a server reports a 480 MB L3, where its 64 MB blur ran 1.3x
        faster with its output streamed, and a 16 MB layer norm 1.2x slower)."""
        return min(self.machine.llc, LLC_PER_CORE * max(1, self.machine.cores))

    def inlinable(self, s: Stage) -> bool:
        """Pointwise, no updates, read by exactly one access in all (or, when it is one
        arithmetic operation, by several: recomputing it costs less than storing and
        loading it again), with every loop of each consumer in the index (no reuse:
        inlining computes nothing twice)."""
        if isinstance(s.expr, Reduce) or self.pipeline.updates_of(s):
            return False
        uses = []
        for c in self.pipeline.consumers(s):
            if self.pipeline.updates_of(c):
                return False
            uses += [(c, a) for a in _accesses(c.expr) if _base(a.tensor) is s]
        if not uses or (len(uses) > 1 and not _one_operation(s.expr)):
            return False
        for c, a in uses:
            loops = set(c.dims) | ({ax.dim for ax in c.expr.axes} if isinstance(c.expr, Reduce)
                                   else set())
            used = {d for i in a.indices for d in free_dims(i)}
            if not loops <= used or any(isinstance(_base(x.tensor), Stage)
                                        and _base(x.tensor) is not s for x in _accesses(a)):
                return False
        return True

    def root(self, t: Template, s: Stage) -> Template:
        """Schedule a stage computed at the root, and the producers it places."""
        if isinstance(s.expr, Reduce):
            if self.contraction(s):
                return self.register_tile(t, s)
            return self.reduction(t, s)
        producers = [p for p in self.pipeline.reads(s) if isinstance(p, Stage)
                     and p.name not in self.placed and not self.pipeline.updates_of(p)
                     and len(self.pipeline.consumers(p)) == 1 and p not in self.pipeline.outputs]
        stencil = [p for p in producers if not isinstance(p.expr, Reduce) and p.dims == s.dims
                   and len({a.indices for a in _accesses(s.expr) if _base(a.tensor) is p}) > 1]
        if stencil and len(s.dims) >= 2:
            return self.strips(t, s, stencil)
        if any(self.rowwise(p, s) for p in producers) and len(s.dims) >= 2:
            return self.rows(t, s, self.row_family(s))
        return self.pointwise(t, s)

    # ---------------------------------------------------------------- contractions

    def contraction(self, s: Stage) -> bool:
        r = s.expr
        assert isinstance(r, Reduce)
        if r.op != "sum" or not isinstance(r.body, Binary) or r.body.op != "mul":
            return False
        if len(s.dims) < 2 or not s.dtype.is_float:
            return False
        pure = set(s.dims)
        missing = [pure - {d for i in a.indices for d in free_dims(i)} for a in _accesses(r.body)]
        return sum(1 for m in missing if m) >= 1 and len(_accesses(r.body)) >= 2

    def vector_dim(self, s: Stage) -> Dim:
        lanes = self.lanes_of(s)
        last = s.dims[-1]
        if self.extent(s, last) % lanes == 0 or self.extent(s, last) >= 4 * lanes:
            return last
        for d in reversed(s.dims[:-1]):
            if self.extent(s, d) % lanes == 0:
                return d
        return last

    def register_tile(self, t: Template, s: Stage) -> Template:
        r = s.expr
        assert isinstance(r, Reduce)
        channels = self.channel_dim(s)
        if channels is not None:
            return _try(t, lambda t: self.channel_tile(t, s, channels))
        v = self.vector_dim(s)
        if v is not s.dims[-1]:
            return self.reduction(t, s)
        u = s.dims[-2]
        others = [d.name for d in s.dims[:-2]]
        before = t
        try:
            if self.taps(s):
                # a stencil's few taps (a depthwise convolution): vectors of outputs summed
                # over the unrolled taps in registers, or the accumulator tile; a knob
                form = knob(f"{s.name}.form", ["strip", "acc"])
                outer = [f"{u.name}_o"]
                t = t.branch(form, {"strip": lambda t: self.strip_tile(t, s, u, v),
                                    "acc": lambda t: self.acc_tile(t, s, u, v)[0]})
            else:
                t, outer = self.acc_tile(t, s, u, v)
        except ScheduleError:
            return self.reduction(before, s)
        if others:
            t = self.per_outer(t, s, others[0])
        return self.parallel(t, s, [*others, *outer])

    def taps(self, s: Stage) -> bool:
        """A stencil reduction: every reduction dim a few taps (7 or fewer, 64 in all), one
        of them added to a pure dim in an index (y + ry)."""
        r = s.expr
        assert isinstance(r, Reduce)
        total = 1
        for ax in r.axes:
            n = self.axis_extent(ax)
            if not 0 < n <= 7:
                return False
            total *= n
        red, pure = {ax.dim for ax in r.axes}, set(s.dims)
        return total <= 64 and any(
            red & set(free_dims(i)) and pure & set(free_dims(i))
            for a in _accesses(r.body) for i in a.indices)

    def strip_tile(self, t: Template, s: Stage, u: Dim, v: Dim) -> Template:
        """Outer-loop vectorization of a stencil reduction: rows in strips (unrolled), the
        vector loop over the last dim outside the unrolled taps, so each vector of
        outputs is summed in a register over the taps and stored once."""
        r = s.expr
        assert isinstance(r, Reduce)
        lanes = self.lanes_of(s)
        ue, ve = self.extent(s, u), self.extent(s, v)
        rows = knob(f"{s.name}.strip_{u.name}", [x for x in (1, 2, 4) if x <= max(1, ue)])
        halves = (lanes // 2,) if self.split_halves() else ()
        width = knob(f"{s.name}.vector_{v.name}",
                     [x for x in (lanes, 2 * lanes, *halves) if x <= max(lanes, ve)])
        others = [d.name for d in s.dims[:-2]]
        red = [ax.dim.name for ax in r.axes]
        uo, ui, vo, vi = (f"{u.name}_o", f"{u.name}_i", f"{v.name}_o", f"{v.name}_i")
        t = t.split(s, u.name, rows).split(s, v.name, width)
        t = t.reorder(s, " ".join([*others, uo, ui, vo, vi, *red])).unroll(s, ui)
        for d in red:
            t = t.unroll(s, d)
        return t.vectorize(s, vi)

    def acc_tile(self, t: Template, s: Stage, u: Dim, v: Dim) -> tuple[Template, list[str]]:
        """The register tile of a contraction: `cache_write` makes an accumulator computed
        per tile of u x v with the reduction outside its unrolled, vectorized tile loops;
        an input read with v innermost is packed per panel. Returns the template and the
        tile's outer loops; raises ScheduleError when a primitive is refused."""
        r = s.expr
        assert isinstance(r, Reduce)
        lanes = self.lanes_of(s)
        others = [d.name for d in s.dims[:-2]]
        acc = f"{s.name}_acc"
        ve, ue = self.extent(s, v), self.extent(s, u)
        # accumulators: rows x (columns / lanes) vector registers, sized by the machine
        # model (`tile_shape`); the tuner searches near
        tv_choices = [x for x in (lanes, 2 * lanes, 4 * lanes, 8 * lanes) if x <= max(lanes, ve)]
        tu_choices = [x for x in (1, 2, 4, 6, 8, 12) if x <= max(1, ue)]
        tu_default, tv_default = self.tile_shape(tu_choices, tv_choices, lanes, ue)
        tv = knob(f"{s.name}.tile_{v.name}", tv_choices, default=tv_default)
        tu = knob(f"{s.name}.tile_{u.name}", tu_choices, default=tu_default)
        packed = [a for a in _accesses(r.body) if isinstance(_base(a.tensor), Input)
                  and a.indices and isinstance(a.indices[-1], Dim) and a.indices[-1] is v
                  and not isinstance(a.tensor, BoundaryView)]
        before = t
        t = t.cache_write(s, acc)
        pack = None
        if packed and not others:
            pack = f"{packed[0].tensor.name}_p"
            t = _try(t, lambda t: t.cache_read(packed[0].tensor.name, [acc], pack))
            if not any(c.method == "cache_read" for c in t.calls[len(before.calls):]):
                pack = None
        t = t.tile(s, **{u.name: tu, v.name: tv})
        outer = [f"{v.name}_o", f"{u.name}_o"] if pack else [f"{u.name}_o", f"{v.name}_o"]
        t = t.reorder(s, " ".join([*others, *outer, f"{u.name}_i", f"{v.name}_i"]))
        t = t.vectorize(s, f"{v.name}_i")
        if pack:
            t = t.compute_at(pack, s, f"{v.name}_o").vectorize(pack, v.name)
        t = t.compute_at(acc, s, outer[-1])
        t = t.split(acc, v.name, lanes, names=(f"{v.name}_u", f"{v.name}_v"))
        red = [ax.dim.name for ax in r.axes]
        t = t.reorder(acc, " ".join([*red, *others, u.name, f"{v.name}_u", f"{v.name}_v"]))
        t = t.unroll(acc, u.name).unroll(acc, f"{v.name}_u").vectorize(acc, f"{v.name}_v")
        return t, outer

    def per_outer(self, t: Template, s: Stage, loop: str) -> Template:
        """Compute each pointwise producer that only s reads, and whose first dim is s's
        untiled first loop, per iteration of that loop (a depthwise convolution's padded
        channel), so its block stays in cache between its computation and its use."""
        for p in self.private_producers(s):
            if p.dims and p.dims[0].name == loop:
                placed = _try(t, lambda t, p=p: t.compute_at(p, s, loop))
                if placed is not t:
                    self.placed.add(p.name)
                    t = self.vector_inner(placed, p)
        return t

    def private_producers(self, s: Stage) -> list[Stage]:
        """The pointwise stages, not placed yet, that only s reads (and no update)."""
        return [p for p in self.pipeline.reads(s)
                if isinstance(p, Stage) and p.name not in self.placed
                and p not in self.pipeline.outputs and not isinstance(p.expr, Reduce)
                and not self.pipeline.updates_of(p)
                and [c.name for c in self.pipeline.consumers(p)] == [s.name]]

    def channel_dim(self, s: Stage) -> Dim | None:
        """A pure dim to vectorize instead of the last one, as in a convolution: when the
        last dim is read shifted by a reduction dim (x + rx: overlapping, unaligned
        loads), a dim (the output channel) read only by inputs, which can be packed
        with it innermost, while the shifted operand is broadcast."""
        r = s.expr
        assert isinstance(r, Reduce)
        last, red = s.dims[-1], {ax.dim for ax in r.axes}
        body = _accesses(r.body)
        if not any(last in free_dims(i) and red & set(free_dims(i)) for a in body for i in a.indices):
            return None
        lanes = self.lanes_of(s)
        for d in s.dims[:-1]:
            users = [a for a in body if any(d in free_dims(i) for i in a.indices)]
            if (self.extent(s, d) % lanes == 0 and users
                    and all(isinstance(a.tensor, Input) and any(i is d for i in a.indices)
                            for a in users)):
                return d
        return None

    def channel_tile(self, t: Template, s: Stage, v: Dim) -> Template:
        """Register tile of (pixels along the last dim) x (channels in vector lanes): the
        accumulator laid out with the channels innermost, each input read by the channel
        dim packed with it innermost; the shifted operand is broadcast."""
        r = s.expr
        assert isinstance(r, Reduce)
        lanes = self.lanes_of(s)
        u = s.dims[-1]
        others = [d.name for d in s.dims if d is not v and d is not u]
        acc = f"{s.name}_acc"
        ve, ue = self.extent(s, v), self.extent(s, u)
        tv_choices = [x for x in (lanes, 2 * lanes, 4 * lanes, 8 * lanes) if x <= ve]
        tu_choices = [x for x in (2, 4, 6, 7, 8, 14) if x <= ue] or [ue]
        reduced = 1
        for ax in r.axes:
            reduced *= max(1, self.axis_extent(ax))
        tu_default, tv_default = self.channel_shape(tu_choices, tv_choices, lanes, ue,
                                                    reduced * s.dtype.itemsize)
        tv = knob(f"{s.name}.tile_{v.name}", tv_choices, default=tv_default)
        tu = knob(f"{s.name}.tile_{u.name}", tu_choices, default=tu_default)
        t = t.cache_write(s, acc).layout(acc, " ".join([*others, u.name, v.name]))
        packs: list[tuple[str, list[str]]] = []
        for a in _accesses(r.body):
            if any(i is v for i in a.indices) and a.tensor.name not in {x for x, _ in packs}:
                order = [d.name for d in a.tensor.dims if d.name != v.name] + [v.name]
                name = f"{a.tensor.name}_p"
                t = t.cache_read(a.tensor.name, [acc], name).layout(name, " ".join(order))
                packs.append((name, order))
        t = t.split(s, u.name, tu).split(s, v.name, tv)
        vo, uo, vi, ui = (f"{v.name}_o", f"{u.name}_o", f"{v.name}_i", f"{u.name}_i")
        t = t.reorder(s, " ".join([*others, vo, uo, vi, ui])).vectorize(s, ui)
        t = t.compute_at(acc, s, uo)
        t = t.split(acc, v.name, lanes, names=(f"{v.name}_u", f"{v.name}_v"))
        red = [ax.dim.name for ax in r.axes]
        t = t.reorder(acc, " ".join([*red, *others, u.name, f"{v.name}_u", f"{v.name}_v"]))
        t = t.unroll(acc, u.name).unroll(acc, f"{v.name}_u").vectorize(acc, f"{v.name}_v")
        # the innermost reduction dim (a filter's columns), unrolled around the tile when it
        # is a few taps: a knob
        taps = self.axis_extent(r.axes[-1])
        if 1 < taps <= 7:
            t = t.unroll(acc, knob(f"{s.name}.unroll_{red[-1]}", [red[-1], None]))
            # and its rows, a few more (one loop body per input channel): a knob, on by
            # default where the padded input slides over the rows in strips (per_row),
            # whose folded row index ((y + ry) mod 3) the unrolled rows compute once per
            # strip row instead of in the reduction loop
            rows = self.axis_extent(r.axes[-2]) if len(r.axes) > 1 else 0
            if 1 < rows <= 7:
                slides = bool(others) and self.slides(s, others[0])
                t = t.unroll(acc, knob(f"{s.name}.unroll_{red[-2]}",
                                       [red[-2], None] if slides else [None, red[-2]]))
        for name, order in packs:
            t = t.reorder(name, " ".join(order)).vectorize(name, v.name)
        if others:
            t = self.per_row(t, s, others[0])
        return self.parallel(t, s, [*others[:1], vo])

    def per_row(self, t: Template, s: Stage, loop: str) -> Template:
        """A pointwise producer that only s reads (a convolution's padded input), computed
        per iteration of s's outer loop (the rows that iteration reads, while they are
        in cache) or once at the root, its own loops parallel: a knob "<p>.at".

        When s's rows read overlapping rows of it (y + ry) and there are rows enough,
        by default ("strips") the loop is split in strips, two per core, that keep its
        name (so that the strips run on threads) and the producer is stored per strip
        and computed per row: a sliding window, each of its rows computed once per
        strip instead of once for every row of s that reads it, and a thread's rows
        contiguous (conv2d 3x3 64->64 56x56: 3-4% faster than per row)."""
        producers = self.private_producers(s)
        for p in producers:
            strips = self.strip_choices(s, p, loop) if len(producers) == 1 else []
            at = knob(f"{p.name}.at", ["strips", loop, "root"] if strips else [loop, "root"])
            branches = self.placements(s, p, loop, strips)
            placed = _try(t, lambda t, at=at, branches=branches: t.branch(at, branches))
            if placed is not t:
                self.placed.add(p.name)
                t = placed
        return t

    def placements(self, s: Stage, p: Stage, loop: str, strips: list[int]
                   ) -> dict[str, Callable[[Template], Template]]:
        """per_row's branches for p: per row, at the root, and (with `strips`) stored per
        strip of rows and computed per row."""
        def per_row(t: Template) -> Template:
            return self.vector_inner(t.compute_at(p, s, loop), p)

        def at_root(t: Template) -> Template:
            return self.pointwise(t, p)

        def sliding(t: Template) -> Template:
            t = t.split(s, loop, knob(f"{s.name}.strip", strips), names=(loop, f"{loop}_s"))
            return self.vector_inner(t.compute_at(p, s, f"{loop}_s").store_at(p, s, loop), p)
        branches: dict[str, Callable[[Template], Template]] = {loop: per_row, "root": at_root}
        if strips:
            branches["strips"] = sliding
        return branches

    def slides(self, s: Stage, loop: str) -> bool:
        """Whether per_row makes s's one private producer a sliding window over `loop`."""
        producers = self.private_producers(s)
        return len(producers) == 1 and bool(self.strip_choices(s, producers[0], loop))

    def strip_choices(self, s: Stage, p: Stage, loop: str) -> list[int]:
        """Strip heights for a sliding window of p over s's `loop` (a dim of both): rows
        for two strips per core first, then one and four; none when s does not read
        p's rows shifted by a reduction dim or the loop is too short to share."""
        r = s.expr
        if not isinstance(r, Reduce):
            return []
        red = {ax.dim for ax in r.axes}
        row = next((d for d in s.dims if d.name == loop), None)
        if row is None:
            return []
        shifted = any(row in free_dims(i) and red & set(free_dims(i))
                      for a in _accesses(r.body) if a.tensor is p for i in a.indices)
        n, cores = self.extent(s, row), self.machine.cores
        if not shifted or cores < 2 or n < 8 * cores:
            return []
        return list(dict.fromkeys(-(-n // k) for k in (2 * cores, cores, 4 * cores)))

    # ---------------------------------------------------------------- row-wise stages

    def rowwise(self, p: Stage, s: Stage) -> bool:
        """p can be computed per row of s: its dims are s's leading dims (a reduction must
        reduce the row: fewer dims than s; a contraction keeps its own register tile)."""
        if not p.dims or tuple(p.dims) != tuple(s.dims[:len(p.dims)]):
            return False
        if isinstance(p.expr, Reduce):
            return len(p.dims) < len(s.dims) and not self.contraction(p)
        return True

    def row_family(self, s: Stage) -> list[Stage]:
        """The producers of s, transitively, that are computed per row of s: stages
        whose first dim is s's, read only inside this family."""
        family: list[Stage] = []
        through: list[Stage] = []  # inlined stages: their producers are s's too
        todo = [s]
        while todo:
            c = todo.pop()
            for p in self.pipeline.reads(c):
                if not isinstance(p, Stage) or p in family or p in through or p is s:
                    continue
                if p.name in self.inlined:
                    through.append(p)
                    todo.append(p)
                elif (p.name not in self.placed and not self.pipeline.updates_of(p)
                        and p not in self.pipeline.outputs and self.rowwise(p, s)
                        and all(x is s or x in family or x in through or x is c
                                for x in self.pipeline.consumers(p))):
                    family.append(p)
                    todo.append(p)
        return family

    def rows(self, t: Template, s: Stage, family: list[Stage]) -> Template:
        row = s.dims[0].name
        for p in family:
            t = _try(t, lambda t, p=p: t.compute_at(p, s, row))
            self.placed.add(p.name)
        for p in family:
            if isinstance(p.expr, Reduce):
                t = self.lanes_rfactor(t, p, s, row)
            elif len(p.dims) >= 2:
                t = self.vector_inner(t, p)
        t = self.vector_inner(t, s)
        return self.parallel(t, s, [row])

    def lanes_rfactor(self, t: Template, p: Stage, s: Stage, row: str) -> Template:
        """Split a long reduction into vector lanes: p_rf[.., k_i] over k_o, vectorized."""
        r = p.expr
        assert isinstance(r, Reduce)
        if len(r.axes) != 1 or r.op not in ("sum", "max", "min"):
            return t
        k = r.axes[0].dim.name
        n = self.axis_extent(r.axes[0])
        lanes = self.lanes_of(p)
        if n < 4 * lanes:
            return t
        choices = [x for x in (lanes, 2 * lanes, 4 * lanes, 8 * lanes) if x <= n]
        width = knob(f"{p.name}.lanes", choices, default=choices[min(2, len(choices) - 1)])
        rf = f"{p.name}_rf"

        def apply(t: Template) -> Template:
            t = t.rfactor(p, k, width, name=rf)
            t = t.compute_at(rf, s, row)
            return t.reorder(rf, f"{k}_o {k}_i").vectorize(rf, f"{k}_i")
        split = _try(t, apply)
        if split is t:
            return t
        # the partials summed into COMBINE vector lanes first: the last, serial chain of
        # adds is COMBINE long, not `width` (a knob)
        rf2 = f"{p.name}_rf2"

        def combine(t: Template) -> Template:
            t = t.rfactor(p, f"{k}_i", COMBINE, name=rf2, names=("a_o", "a_i"))
            return t.compute_at(rf2, s, row).reorder(rf2, "a_o a_i").vectorize(rf2, "a_i")
        return _try(split, lambda t: t.branch(knob(f"{p.name}.combine", [COMBINE, None]),
                                              {COMBINE: combine}))

    # ---------------------------------------------------------------- stencils

    def strips(self, t: Template, s: Stage, producers: list[Stage]) -> Template:
        rows = s.dims[-2].name
        extent = self.extent(s, s.dims[-2])
        width = self.extent(s, s.dims[-1])
        # a strip of every producer stays in L2 between its computation and its use
        per_row = max(1, width * s.dtype.itemsize * (len(producers) + 1))
        fit = max(1, self.machine.l2 // 2 // per_row)
        choices = [x for x in (8, 16, 32, 64, 128, 256) if x <= max(8, extent)]
        default = max([x for x in choices if x <= fit] or [choices[0]])
        ys = knob(f"{s.name}.strip", choices, default=default)
        try:
            t2 = t.split(s, rows, ys)
            for p in producers:
                t2 = t2.compute_at(p, s, f"{rows}_o")
        except ScheduleError:
            return self.pointwise(t, s)
        for p in producers:  # long chunks: a strip's rows are computed in one sweep each
            self.placed.add(p.name)
            t2 = self.vector_inner(t2, p, vectors=4)
        t2 = self.vector_inner(t2, s)
        return self.parallel(t2, s, [*(d.name for d in s.dims[:-2]), f"{rows}_o"])

    # ---------------------------------------------------------------- the rest

    def reduction(self, t: Template, s: Stage) -> Template:
        """A reduction that is not a contraction: parallel over its outer dim, vector lanes
        along the innermost pure dim when it is long enough."""
        t = self.vector_inner(t, s)
        return self.parallel(t, s, [d.name for d in s.dims[:1]])

    def pointwise(self, t: Template, s: Stage) -> Template:
        t = self.vector_inner(t, s)
        return self.parallel(t, s, [d.name for d in s.dims[:-1]] or [])

    def vector_inner(self, t: Template, s: Stage, vectors: int = 2) -> Template:
        """Vectorize the innermost pure dim of s in chunks of a few vectors (a knob; by
        default `vectors` of them, or one cache line when s streams its stores: each
        chunk's stream then writes one whole line, held in as few registers as the
        vectors allow)."""
        if not s.dims:
            return t
        d = s.dims[-1]
        lanes = self.lanes_of(s)
        n = self.extent(s, d)
        if n < lanes:
            return t
        choices = [x for x in (lanes, 2 * lanes, 4 * lanes, 8 * lanes) if x <= n]
        want = vectors * lanes
        if self.streams(s):
            want = max(lanes, CACHE_LINE // max(1, s.dtype.itemsize))
        default = max([x for x in choices if x <= want] or choices[:1])
        w = knob(f"{s.name}.vector", choices, default=default)
        return _try(t, lambda t: t.split(s, d.name, w).vectorize(s, f"{d.name}_i"))

    def parallel(self, t: Template, s: Stage, loops: list[str]) -> Template:
        """Parallel on the first of `loops` (or the next: a knob) with enough iterations."""
        present = [x for x in loops if x in t.loops(s)]
        if not present:
            return t
        # one core: no parallel loop by default (its fork and join would be all it adds)
        choices = [*present[:2], None] if self.machine.cores > 1 else [None, *present[:2]]
        return _try(t, lambda t: t.parallel(s, knob(f"{s.name}.parallel", choices)))


def _one_operation(e: Expr) -> bool:
    """At most one arithmetic operation (x[r, c] - mean[r]), no calls or selects."""
    nodes = list(walk(e))
    ops = [n for n in nodes if not isinstance(n, (Access, Dim, Size, Const))]
    return len(ops) <= 1 and all(isinstance(n, Binary) and n.op in ("add", "sub", "mul")
                                 for n in ops)


def _try(t: Template, step) -> Template:
    """`step(t)`, or `t` when a primitive in it is refused."""
    try:
        return step(t)
    except ScheduleError:
        return t
