"""Footprints of output blocks: the region of every tensor of a pipeline that one block
of its outputs needs (bounds inference for chunked execution, `tdsl.chunked`).

A block is a box over some dims of the outputs (the chunked ones) and, optionally,
over reduction dims of an output's own reduction (a reduction split across chunks):
along each such dim `d`, `o_d <= d < o_d + h_d`. The block's origins and extents are
the leading dims of every statement here (as a stage computed at a consumer's loop has
its prefix dims in `model`), so each region is a map from the block to the tensor's
indices, and its box is `hull.box_hull` of it: per dim, the least and greatest index as a
piecewise affine function of the block and the sizes, proven to contain the region.

Walking the pipeline from the outputs back to the inputs, each stage is computed over
the box of what its readers need (with every dim of the stage in full where no reader
restricts it), its updates at the points they write inside that box, and what those
instances read is the next footprint. Reads through boundary views map as lowering maps
them (`access.access_map` with `remap`): a clamp reads the edge element, a mirror or
wrap view within one period reads the element it reflects or wraps to, a data-dependent
index anywhere along its axis.

`windows` evaluates the boxes for a list of concrete blocks (the chunks of a call) and
returns plain integers, so it can run in a bounded child process (`budget.bounded`).
A stage with updates that read it elsewhere than where they write is computed over a
box widened until it holds what they read; one that keeps growing is a recurrence along
a chunked dim, refused with a ChunkingError naming the stage and the dim.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import islpy as isl

from ...compute import expr as cx
from ...compute.definitions import Stage, Tensor, Update
from ...compute.pipeline import Pipeline
from ...errors import ChunkingError
from .access import Scoped, access_map, reads
from .affine import Vars, pwaff, space
from .domains import declared, declared_update
from .hull import between, box_hull
from .nest import Statement

Box = tuple[tuple[int, int], ...]  # per dim of a tensor, (lo, hi) inclusive
MAX_GROWTH = 4  # rounds of widening a stage's box for what its updates read of it


class _BlockStatement(Statement):
    """A statement whose leading dims are the block's origins and extents."""

    @property
    def isl_names(self) -> list[str]:
        return [_prefix(k) for k in range(self.n_prefix)] + [d.name for d in self.dims]


def _prefix(k: int) -> str:
    return f"tdsl_b{k}"  # names users cannot give a dim


@dataclass(frozen=True)
class Block:
    """The dims a block bounds, in order (each has an origin and an extent), and the
    global extent of each (an expression of sizes)."""

    dims: tuple[cx.Dim, ...]
    extents: tuple[cx.Expr, ...]

    @property
    def n_prefix(self) -> int:
        return 2 * len(self.dims)


class _Walk:
    """The footprint maps of one pipeline for one kind of block."""

    def __init__(self, pipeline: Pipeline, block: Block) -> None:
        self.pipeline = pipeline
        self.block = block
        self.params = [s.name for s in pipeline.sizes]
        self.m = block.n_prefix
        self.pnames = [_prefix(k) for k in range(self.m)]
        self.needed: dict[Tensor, isl.Map] = {}  # block -> tensor index
        self.boxes: dict[Tensor, tuple[list[isl.PwAff], list[isl.PwAff]]] = {}

    # ------------------------------------------------------------ statements

    def _vars(self, name: str, dims: Sequence[cx.Dim]) -> Vars:
        return Vars(space(name, self.pnames + [d.name for d in dims], self.params))

    def _block_constraints(self, vs: Vars, dims: Sequence[cx.Dim]) -> isl.Set:
        """The block's own constraints (origin >= 0, extent >= 1, inside the global
        extent), and `dims` inside the block where the block bounds them."""
        s = vs.universe()
        for k, (d, ext) in enumerate(zip(self.block.dims, self.block.extents)):
            o, h = vs[_prefix(2 * k)], vs[_prefix(2 * k + 1)]
            s = s & o.ge_set(vs.const(0)) & h.ge_set(vs.const(1))
            s = s & (o + h).le_set(pwaff(ext, vs, {}))
            if d in dims:
                x = vs[d.name]
                s = s & x.ge_set(o) & x.lt_set(o + h)
        for p in self.params:
            s = s & vs[p].ge_set(vs.const(1))
        return s

    def _statement(self, name: str, owner: Stage | Update, dims: Sequence[cx.Dim], domain: isl.Set,
                   vs: Vars) -> _BlockStatement:
        return _BlockStatement(name, owner, "decl", tuple(dims), [], self.m, vs,
                               domain.set_tuple_name(name).coalesce(), [])

    def _box_set(self, t: Tensor, vs: Vars) -> isl.Set:
        """{[block, x] : x in the box of t}, in the space of `vs` (the block's dims, then
        t's)."""
        los, his = self.boxes[t]
        box = between(los, his).wrap().flatten()
        names = [str(vs.space.get_dim_name(isl.dim_type.set, k))
                 for k in range(vs.space.dim(isl.dim_type.set))]
        for k, nm in enumerate(names):
            box = box.set_dim_name(isl.dim_type.set, k, nm)
        tup = vs.space.get_tuple_name(isl.dim_type.set)
        return box.set_tuple_name(tup) if tup else box

    # ------------------------------------------------------------ regions

    def _add(self, stmt: _BlockStatement, acc: Scoped) -> None:
        t = acc.access.tensor
        base = t.tensor if not isinstance(t, Tensor) else t
        rel = access_map(stmt, acc, remap=True)
        n = len(stmt.dims) + (rel.dim(isl.dim_type.in_) - self.m - len(stmt.dims))
        rel = _plain(rel.project_out(isl.dim_type.in_, self.m, n))
        old = self.needed.get(base)
        self.needed[base] = rel if old is None else old.union(rel)

    def _reads(self, stmt: _BlockStatement, e: cx.Expr) -> None:
        for acc in reads(e):
            self._add(stmt, acc)

    def stage(self, s: Stage, is_output: bool) -> None:
        """Stage `s` over the box of what its readers need (and, for an output, its block),
        its reads, and its updates at the points they write inside that box."""
        vs = self._vars(s.name, s.dims)
        decl = self._block_constraints(vs, ()) & declared(s, vs, {d: d.name for d in s.dims},
                                                           False)
        region = None
        if is_output:
            region = _plain(_to_map(self._block_constraints(vs, s.dims) & decl, self.m))
        if s in self.needed:
            need = _plain(self.needed[s])
            region = need if region is None else region.union(need)
        assert region is not None, f"{s.name} is an output or read by a stage"
        self.boxes[s] = box_hull(region.coalesce())
        self._grow(s, region)
        dom = self._box_set(s, vs) & decl
        red = s.reduction
        if red is None:
            self._reads(self._statement(s.name, s, s.dims, dom, vs), s.expr)
        else:
            rdims = tuple(ax.dim for ax in red.axes)
            rvs = self._vars(s.name, s.dims + rdims)
            names = {d: d.name for d in s.dims + rdims}
            rdom = dom.insert_dims(isl.dim_type.set, self.m + len(s.dims), len(rdims))
            for k, nm in enumerate(self.pnames + list(names.values())):
                rdom = rdom.set_dim_name(isl.dim_type.set, k, nm)
            rdom = rdom.set_tuple_name(s.name)
            rdom = rdom & declared(s, rvs, names, True) & self._block_constraints(
                rvs, [d for d in rdims if is_output])
            self._reads(self._statement(s.name, s, s.dims + rdims, rdom, rvs), red.body)
        for u in self.pipeline.updates_of(s):
            self.update(u, s)

    def _instances(self, u: Update, s: Stage) -> _BlockStatement:
        """The instances of update `u` that write inside the box of its stage `s`."""
        dims = u.loop_dims
        name = f"{s.name}_u{u.index}"
        vs = self._vars(name, dims)
        dom = self._block_constraints(vs, ()) & declared_update(u, vs)
        target = access_map(self._statement(name, u, dims, dom, vs), Scoped(u.target()))
        box = _plain(_to_map(self._box_set(s, self._vars(s.name, s.dims)), self.m))
        lifted = _plain(box.insert_dims(isl.dim_type.in_, self.m, len(dims)))
        dom = (_plain(target) & lifted).domain().set_tuple_name(name)
        for k, nm in enumerate(self.pnames + [d.name for d in dims]):
            dom = dom.set_dim_name(isl.dim_type.set, k, nm)
        return self._statement(name, u, dims, dom, vs)

    def _grow(self, s: Stage, region: isl.Map) -> None:
        """Widen the box of `s` until its updates, at the points they write inside it,
        read `s` only inside it: then the box's values are those of the whole stage
        (every instance that writes an element the updates read is computed too). A
        box that still grows after `MAX_GROWTH` rounds is a recurrence along a chunked
        dim (each chunk would need every element before it): a ChunkingError."""
        for round in range(MAX_GROWTH + 1):
            if round == MAX_GROWTH:  # then whole along every dim a chunk does not bound
                region = region.union(self._whole_unbounded(s)).coalesce()
                self.boxes[s] = box_hull(region)
            own = None
            for u in self.pipeline.updates_of(s):
                stmt = self._instances(u, s)
                for e in (*u.indices, u.value):
                    for acc in reads(e, s):
                        rel = access_map(stmt, acc, remap=True)
                        n = rel.dim(isl.dim_type.in_) - self.m
                        rel = _plain(rel.project_out(isl.dim_type.in_, self.m, n))
                        own = rel if own is None else own.union(rel)
            box = _plain(_to_map(self._box_set(s, self._vars(s.name, s.dims)), self.m))
            if own is None or own.is_subset(box):
                return
            if round < MAX_GROWTH:
                region = region.union(own).coalesce()
                self.boxes[s] = box_hull(region)
        chunked = [d.name for d in self.block.dims if d in s.dims] or [
            d.name for d in self.block.dims]
        raise ChunkingError(
            f"the updates of {s.name} ({'; '.join(repr(u) for u in self.pipeline.updates_of(s))}) "
            f"read {s.name} before the elements a chunk computes, and before those, ... (a "
            f"recurrence along a chunked dim: {', '.join(chunked)}); they cannot run chunk by "
            f"chunk: give that dim one chunk (rechunk the input arrays along it)",
            tuple(chunked))

    def _whole_unbounded(self, s: Stage) -> isl.Map:
        """{block -> s[x]}: the box of `s` along the dims the block bounds, and every
        index along the others."""
        vs = self._vars(s.name, s.dims)
        whole = self._block_constraints(vs, ()) & declared(s, vs, {d: d.name for d in s.dims},
                                                           False)
        box = self._box_set(s, vs)
        for k, d in enumerate(s.dims):
            if d not in self.block.dims:  # any index along it: the box without this dim
                box = box.project_out(isl.dim_type.set, self.m + k, 1).insert_dims(
                    isl.dim_type.set, self.m + k, 1)
                box = _renamed(box, vs)
        return _plain(_to_map(whole & box, self.m))

    def update(self, u: Update, s: Stage) -> None:
        """What the instances of `u` that write inside the box of `s` read (of `s`
        itself, only inside the box: `_grow` saw to it)."""
        stmt = self._instances(u, s)
        before = self.needed.pop(s, None)
        for e in (*u.indices, u.value):
            self._reads(stmt, e)
        self.needed.pop(s, None)
        if before is not None:
            self.needed[s] = before

    def input(self, t: Tensor) -> None:
        if t in self.needed:
            self.boxes[t] = box_hull(self.needed[t].coalesce())


def _to_map(s: isl.Set, n_in: int) -> isl.Map:
    n = s.dim(isl.dim_type.set)
    m = isl.Map.from_domain(s).move_dims(isl.dim_type.out, 0, isl.dim_type.in_, n_in, n - n_in)
    return m.reset_tuple_id(isl.dim_type.in_)


def _renamed(s: isl.Set, vs: Vars) -> isl.Set:
    """`s` in the space of `vs` (its dims renamed in order, its tuple named)."""
    for k in range(s.dim(isl.dim_type.set)):
        s = s.set_dim_name(isl.dim_type.set, k, str(vs.space.get_dim_name(isl.dim_type.set, k)))
    tup = vs.space.get_tuple_name(isl.dim_type.set)
    return s.set_tuple_name(tup) if tup else s


def _plain(m: isl.Map) -> isl.Map:
    """`m` without tuple names or dim names, so maps of one tensor from different
    statements compare and combine."""
    m = m.reset_tuple_id(isl.dim_type.in_).reset_tuple_id(isl.dim_type.out)
    for kind in (isl.dim_type.in_, isl.dim_type.out):
        for k in range(m.dim(kind)):
            m = m.set_dim_name(kind, k, f"tdsl_v{k}") if kind == isl.dim_type.in_ else \
                m.set_dim_name(kind, k, f"tdsl_w{k}")
    return m


@dataclass(frozen=True)
class Windows:
    """The boxes of one call's chunks: `boxes[c][name]` is, per dim of tensor `name`,
    the (lo, hi) indices (inclusive) chunk `c` needs of it, for every tensor of the
    pipeline (outputs: what the chunk computes, its block and what other outputs read)."""

    boxes: tuple[dict[str, Box], ...]


def windows(pipeline: Pipeline, block: Block, sizes: Mapping[str, int],
            chunks: Sequence[Sequence[tuple[int, int]]]) -> Windows:
    """The box of every tensor that each chunk needs: `chunks[c]` gives, per dim of
    `block`, the chunk's (origin, extent); `sizes` the value of every size."""
    w = _Walk(pipeline, block)
    outputs = set(pipeline.outputs)
    for t in reversed(pipeline.tensors):
        if isinstance(t, Stage):
            w.stage(t, t in outputs)
        else:
            w.input(t)
    return Windows(tuple(_evaluate(w, pipeline, sizes, chunks)))


def _evaluate(w: _Walk, pipeline: Pipeline, sizes: Mapping[str, int],
              chunks: Sequence[Sequence[tuple[int, int]]]) -> list[dict[str, Box]]:
    """Every box at every chunk, each function evaluated once per distinct value of the
    block dims and sizes it involves."""
    cache: dict[_Key, int | None] = {}
    out = []
    for chunk in chunks:
        flat = [v for o, h in chunk for v in (o, h)]
        boxes: dict[str, Box] = {}
        for t in pipeline.tensors:
            if t not in w.boxes:
                continue
            los, his = w.boxes[t]
            dims = []
            for k, (lo, hi) in enumerate(zip(los, his)):
                a = _value(lo, flat, sizes, cache, (t.name, k, 0))
                b = _value(hi, flat, sizes, cache, (t.name, k, 1))
                dims.append((a, b) if a is not None and b is not None and a <= b else (0, 0))
            boxes[t.name] = tuple(dims)
        out.append(boxes)
    return out


_Key = tuple[object, ...]


def _value(pa: isl.PwAff, flat: list[int], sizes: Mapping[str, int],
           cache: dict[_Key, int | None], key: _Key) -> int | None:
    n_in = pa.dim(isl.dim_type.in_)
    n_par = pa.dim(isl.dim_type.param)
    pars = [int(sizes[str(pa.get_dim_name(isl.dim_type.param, k))]) for k in range(n_par)]
    used = tuple(flat[k] if pa.involves_dims(isl.dim_type.in_, k, 1) else None
                 for k in range(n_in))
    used_p = tuple(pars[k] if pa.involves_dims(isl.dim_type.param, k, 1) else None
                   for k in range(n_par))
    full = (key, used, used_p)
    if full in cache:
        return cache[full]
    pt = isl.Point.zero(pa.get_domain_space())
    for k in range(n_in):
        pt = pt.set_coordinate_val(isl.dim_type.set, k, isl.Val.int_from_si(pa.get_ctx(), flat[k]))
    for k in range(n_par):
        pt = pt.set_coordinate_val(isl.dim_type.param, k, isl.Val.int_from_si(pa.get_ctx(), pars[k]))
    v = pa.eval(pt)
    res: int | None = None if v.is_nan() else int(v.to_python())
    cache[full] = res
    return res


def bounded_windows(pipeline: Pipeline, block: Block, sizes: Mapping[str, int],
                    chunks: Sequence[Sequence[tuple[int, int]]]) -> Windows:
    """`windows`, under the isl operation quota and the time limit of a lowering
    (`budget.bounded`: in a child process, stopped past MAX_ISL_SECONDS): first with
    exact regions for mirror and wrap reads on a share of the budget, as lowering does,
    then with such reads anywhere along their axis (larger windows, never smaller)."""
    from . import budget
    from .access import whole_axis_remaps

    what = f"the chunk footprints of {', '.join(o.name for o in pipeline.outputs)}"
    share = budget.EXACT_REGION_SHARE

    def run(ops: int | None = None) -> Windows:
        with budget.isl_budget(what, ops), budget.step("bounds inference"):
            return windows(pipeline, block, sizes, chunks)

    def coarse() -> Windows:
        with whole_axis_remaps():
            return run()

    try:
        return budget.bounded(what, lambda: run(int(budget.MAX_ISL_OPERATIONS * share)),
                              seconds=budget.MAX_ISL_SECONDS * share)
    except budget.AnalysisLimitError:
        return budget.bounded(what, coarse)
