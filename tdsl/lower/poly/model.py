"""The polyhedral model of a scheduled pipeline.

For every non-inlined stage this builds its statements (one for a pure
stage; an init and an update for a reduction), each with an isl iteration
domain, and the bands (loops) that enclose it. A stage computed inside a
consumer's loop gets the consumer's enclosing loop values as extra leading
dims ("prefix dims"): its domain is the box hull of what the readers under
that loop need (all of them: the consumer's loops inside the compute loop
included), so it recomputes exactly that block per iteration. Buffer boxes
for store levels come from the same relations: a buffer holds the block of
one iteration of its store loop (legality.py decides, for every buffer alike,
whether a parallel loop inside the store loop may share it). When the block's
bounds divide the compute loop's values (a fused consumer loop), the AST is
built from the same block with its bounds as parameters, set per iteration
(`Group.bounds`). A stage stored outside its compute loop whose consecutive blocks
overlap computes only the part of its block the previous iteration did not, and its
buffer may keep only the rows in flight (`sliding`: a sliding window, storage
folding).

Guarantees: every statement domain is exact (non-divisible splits are
handled by isl's guards), every producer instance a reader needs exists in
the same iteration of the compute loop (each box is checked to contain what
it bounds, and widened if isl's answer did not), and every affine access of the
algorithm is proven in bounds (or a DefinitionError names it).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

import islpy as isl

from ...compute import expr as cx
from ...compute.definitions import Stage, Tensor, Update
from ...compute.pipeline import Pipeline
from ...compute.traversal import is_affine_index
from ...errors import DefinitionError, ScheduleError
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
from .access import Scoped, access_map, check_accesses, functions_map, reads, tensor_set
from .affine import Vars, largest_constant, loop_pwaff, pwaff, space
from .inline import effective_exprs
from .sliding import Window, slid, window


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


@dataclass(eq=False)
class Model:
    schedule: Schedule
    exprs: dict[Schedulable, cx.Expr]  # definitions and update values, inlined stages substituted
    targets: dict[Update, cx.Access]  # each update's target element
    roots: list[Group]
    groups: dict[Schedulable, Group]
    boxes: dict[Stage, BufferBox]
    params: list[str]
    context: isl.Set
    ast_context: isl.Set  # `context` and what holds of the blocks' bound parameters

    @property
    def statements(self) -> list[Statement]:
        return [s for g in self.groups.values() for s in g.stmts]

    def box_of(self, t: Tensor | Update) -> BufferBox | None:
        """The buffer box of stage `t`; None for an input or an update (no buffer of its own)."""
        return self.boxes.get(t) if isinstance(t, Stage) else None


# ---------------------------------------------------------------- structure


class _Namer:
    def __init__(self, taken: set[str]) -> None:
        self.taken = taken

    def loop_var(self, loop: Loop, stage: Schedulable, enclosing: list[Band]) -> str:
        used = self.taken | {b.var for b in enclosing}
        name = loop.name
        if name in used:
            name = f"{loop.name}_{stage.name}"
        base, n = name, 1
        while name in used:
            n += 1
            name = f"{base}{n}"
        return name


def _dims_of(le: LoopExpr) -> set[cx.Dim]:
    match le:
        case LDim(d):
            return {d}
        case LOuter(p) | LInner(p):
            return _dims_of(p)
        case LFuse(a, b):
            return _dims_of(a) | _dims_of(b)
    raise AssertionError(le)


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


def _structure(sched: Schedule, namer: _Namer) -> tuple[list[Group], dict[Schedulable, Group]]:
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


# ---------------------------------------------------------------- domains


def _declared(stage: Stage, vs: Vars, names: Mapping[cx.Dim, str], with_reduction: bool) -> isl.Set:
    s = vs.universe()
    for d, ext in zip(stage.dims, stage.shape):
        x = vs[names[d]]
        s = s & x.ge_set(vs.const(0)) & x.lt_set(pwaff(ext, vs, names))
    if with_reduction:
        for ax in stage.reduce_axes:
            k = vs[names[ax.dim]]
            s = s & k.ge_set(pwaff(ax.lo, vs, names)) & k.lt_set(pwaff(ax.hi, vs, names))
    return s


def _check_bounds_affine(ax: cx.Axis, stage: Schedulable) -> None:
    for b in (ax.lo, ax.hi):
        if not is_affine_index(b):
            raise DefinitionError(
                f"stage {stage.name}: bound {b!r} of reduction dim {ax.dim.name} is not affine in "
                "the dims and sizes; bounds may use +, -, * by a constant and // or % by a constant")


def _to_map(s: isl.Set, n_in: int) -> isl.Map:
    n = s.dim(isl.dim_type.set)
    return isl.Map.from_domain(s).move_dims(isl.dim_type.out, 0, isl.dim_type.in_, n_in, n - n_in)


def _box(rel: isl.Map) -> tuple[list[isl.PwAff], list[isl.PwAff]]:
    """Per output dim, the least and greatest value `rel` maps each input to: the box hull
    of the image of every input, proven to contain it.

    isl's parametric lexmin/lexmax has been seen to return a single value of a strided
    set (the rows of one residue class read by a fused loop) when the relation carries
    redundant constraints on its divs; every answer is therefore checked against `rel`
    and, failing that, recomputed without the redundancies, then as the hull over all
    inputs (larger, never smaller)."""
    plain = rel.reset_tuple_id(isl.dim_type.in_).reset_tuple_id(isl.dim_type.out)
    for attempt in (rel, rel.remove_redundancies(),
                    isl.Map.from_domain_and_range(rel.domain(), rel.range())):
        los, his = _box_bounds(attempt)
        if plain.is_subset(_between(los, his)):
            return los, his
    raise AssertionError(f"no box found that contains {rel}")


def _box_bounds(rel: isl.Map) -> tuple[list[isl.PwAff], list[isl.PwAff]]:
    n = rel.dim(isl.dim_type.out)
    los, his = [], []
    for k in range(n):
        rk = rel.project_out(isl.dim_type.out, k + 1, n - k - 1).project_out(isl.dim_type.out, 0, k)
        los.append(rk.lexmin_pw_multi_aff().get_pw_aff(0).coalesce())
        his.append(rk.lexmax_pw_multi_aff().get_pw_aff(0).coalesce())
    return los, his


def _between(los: list[isl.PwAff], his: list[isl.PwAff]) -> isl.Map:
    ge = isl.Map("{ [a] -> [b] : b >= a }")
    le = isl.Map("{ [a] -> [b] : b <= a }")
    m = None
    for lo, hi in zip(los, his):
        part = isl.Map.from_pw_aff(lo).apply_range(ge) & isl.Map.from_pw_aff(hi).apply_range(le)
        m = part if m is None else m.flat_range_product(part)
    assert m is not None, "a box has at least one dim"
    return m


def _stmt_name(u: Update) -> str:
    return f"{u.stage.name}_u{u.index}"


def _declared_update(u: Update, vs: Vars) -> isl.Set:
    s = vs.universe()
    names = {d: d.name for d in u.loop_dims}
    for ax in u.axes:
        k = vs[ax.dim.name]
        s = s & k.ge_set(pwaff(ax.lo, vs, names)) & k.lt_set(pwaff(ax.hi, vs, names))
    return s


def _has_divs(pa: isl.PwAff) -> bool:
    """Whether a piecewise affine function divides (floor, mod) anywhere."""
    for piece, aff in pa.get_pieces():
        if aff.dim(isl.dim_type.div) or any(b.dim(isl.dim_type.div)
                                            for b in piece.get_basic_sets()):
            return True
    return False


class _Builder:
    def __init__(self, sched: Schedule, exprs: dict[Schedulable, cx.Expr],
                 targets: dict[Update, cx.Access], groups: dict[Schedulable, Group],
                 params: list[str], context: isl.Set, taken: set[str]) -> None:
        self.taken = taken
        self.sched = sched
        self.exprs = exprs
        self.targets = targets
        self.groups = groups
        self.params = params
        self.context = context
        self.stmts_of: dict[Schedulable, list[Statement]] = {}

    def statements(self, g: Group) -> None:
        stage = g.stage
        for ax in stage.reduce_axes:
            _check_bounds_affine(ax, stage)
        if isinstance(stage, Update):
            for ax in stage.axes:
                _check_bounds_affine(ax, stage)
            dims = stage.loop_dims
            vs = Vars(space(_stmt_name(stage), [d.name for d in dims], self.params))
            dom = _declared_update(stage, vs)
            g.stmts = [self._stmt(g, _stmt_name(stage), "assign", dims, g.shared, dom, vs)]
            for later in self.sched.state.fused_into(stage):  # each iteration's, after it
                g.stmts.append(self._stmt(g, _stmt_name(later), "assign", dims, g.shared, dom,
                                          owner=later))
                self.stmts_of[later] = g.stmts[-1:]
            self.stmts_of[stage] = g.stmts
            return
        m = len(g.prefix)
        pure_dom, block_dom = self._pure_domain(g, stage)
        if stage.reduction is None:
            g.stmts = [self._stmt(g, stage.name, "pure", stage.dims, g.shared, pure_dom)]
        else:
            init = self._stmt(g, f"{stage.name}_init", "init", stage.dims, g.shared + g.init,
                              pure_dom.set_tuple_name(f"{stage.name}_init"))
            rdims = tuple(ax.dim for ax in stage.reduce_axes)
            names = [f"p{k}" for k in range(m)] + [d.name for d in stage.dims + rdims]
            vs = Vars(space(f"{stage.name}_update", names, self.params))
            dom = self._update_domain(stage, m, pure_dom, vs)
            upd = self._stmt(g, f"{stage.name}_update", "update", stage.dims + rdims,
                             g.shared + g.update, dom, vs)
            g.stmts = [init, upd]
        if block_dom is not None:
            g.stmts[0].ast_domain = block_dom.set_tuple_name(g.stmts[0].name).coalesce()
            if len(g.stmts) == 2:
                upd = g.stmts[1]
                upd.ast_domain = self._update_domain(stage, m, block_dom, upd.vars).coalesce()
        self.stmts_of[stage] = g.stmts

    @staticmethod
    def _update_domain(stage: Stage, m: int, pure_dom: isl.Set, vs: Vars) -> isl.Set:
        """A reduction's update domain: its pure domain times its reduction dims' bounds."""
        rdims = tuple(ax.dim for ax in stage.reduce_axes)
        names = [f"p{k}" for k in range(m)] + [d.name for d in stage.dims + rdims]
        dom = pure_dom.insert_dims(isl.dim_type.set, m + len(stage.dims), len(rdims))
        dom = dom.set_tuple_name(f"{stage.name}_update")
        for k, nm in enumerate(names):
            dom = dom.set_dim_name(isl.dim_type.set, k, nm)
        dnames = {d: d.name for d in stage.dims + rdims}
        return dom & _declared(stage, vs, dnames, True)

    def _stmt(self, g: Group, name: str, role: StatementRole, dims: tuple[cx.Dim, ...],
              own: list[Band], dom: isl.Set, vs: Vars | None = None,
              owner: Schedulable | None = None) -> Statement:
        m = len(g.prefix)
        names = [f"p{k}" for k in range(m)] + [d.name for d in dims]
        vs = vs or Vars(space(name, names, self.params))
        dom = dom.set_tuple_name(name)
        dnames = {d: d.name for d in dims}
        values = [vs[f"p{k}"] for k in range(m)] + [loop_pwaff(b.loop.expr, vs, dnames) for b in own]
        return Statement(name, owner or g.stage, role, tuple(dims), g.prefix + own, m, vs,
                         dom.coalesce(), values)

    def _pure_domain(self, g: Group, stage: Stage) -> tuple[isl.Set, isl.Set | None]:
        """The block of a pure stage (or a reduction's init) computed per iteration of its
        compute loop: the box hull of what its readers inside that loop read, within the
        stage (`g.stage`). With it, when the box's bounds divide the compute loop's values,
        the same block with its bounds as parameters (see `Group.bounds`)."""
        m = len(g.prefix)
        names = [f"p{k}" for k in range(m)] + [d.name for d in stage.dims]
        vs = Vars(space(stage.name, names, self.params))
        decl = _declared(stage, vs, {d: d.name for d in stage.dims}, False)
        if m == 0:
            return decl, None
        need = self.needed(stage, g.prefix)
        los, his = _box(need)
        box = _between(los, his).wrap().flatten()
        box = box.set_tuple_name(stage.name)
        for k, nm in enumerate(names):
            box = box.set_dim_name(isl.dim_type.set, k, nm)
        exact = (box & decl).intersect_params(self.context)
        depth = self.store_depth(g)
        if depth < m:  # stored outside its compute loop: a window may slide
            g.window = window(stage, g.prefix, depth, los, his, need.domain(), self.context,
                              self._placement(stage))
        divs = any(_has_divs(pa) for pa in los + his)
        if g.window is not None and divs:
            raise ScheduleError(
                f"{self._placement(stage)}: the blocks of {stage.name} overlap from one "
                f"iteration of the compute loop to the next, but their bounds divide the loop "
                f"values (a fused or split loop), where tdsl does not slide a window; compute "
                f"{stage.name} at a plain loop, or store it at the compute level")
        if g.window is not None:
            exact = slid(exact, m)
        if not divs:
            return exact, None
        return exact, self._block_domain(g, stage, need.domain(), los, his, names)

    def _placement(self, stage: Stage) -> str:
        """compute_at(...) and store_at(...) of `stage`, as the schedule wrote them."""
        st = self.sched.state
        cp, sp = st.compute[stage], st.store_placement(stage)
        c = f"compute_at({stage.name}, {cp.consumer.name if cp.consumer else 'root'}, {cp.loop!r})"
        if sp.kind == "at" and sp is not cp:
            assert sp.consumer is not None  # stored at a loop: a consumer's
            return f"{c} with store_at({stage.name}, {sp.consumer.name}, {sp.loop!r})"
        return f"{c} with store_root({stage.name})"

    def store_depth(self, g: Group) -> int:
        """How many of `g`'s prefix bands enclose its buffer (its store level)."""
        stage = g.stage
        assert isinstance(stage, Stage), "an update has no buffer of its own"
        st = self.sched.state
        m = len(g.prefix)
        sp = st.store_placement(stage)
        if sp.kind == "at" and sp is not st.compute[stage]:
            found = next((k + 1 for k, b in enumerate(g.prefix)
                          if b.owner is sp.consumer and b.loop.name == sp.loop), None)
            if found is None:
                assert sp.consumer is not None  # stored at a loop: a consumer's
                cp = st.compute[stage]
                raise ScheduleError(
                    f"store_at({stage.name}, {sp.consumer.name}, {sp.loop!r}): the store level must "
                    f"be a loop that encloses the compute level compute_at({stage.name}, "
                    f"{cp.consumer.name if cp.consumer else 'root'}, {cp.loop!r})")
            return found
        if sp.kind == "root" and stage in st.store:
            return 0
        return m

    def _block_domain(self, g: Group, stage: Stage, where: isl.Set, los: list[isl.PwAff],
                      his: list[isl.PwAff], names: list[str]) -> isl.Set:
        """The block of `stage` (`g.stage`): {[p, x] : p in `where`, lo_k <= x_k <= hi_k},
        lo and hi parameters."""
        m = len(g.prefix)
        for d, lo, hi in zip(stage.dims, los, his):
            for end, pa in (("lo", lo), ("hi", hi)):
                g.bounds.append((self.fresh(f"{stage.name}_{d.name}_{end}"), pa))
        bnames = [n for n, _ in g.bounds]
        vs = Vars(space(stage.name, names, self.params + bnames))
        blk = _declared(stage, vs, {d: d.name for d in stage.dims}, False)
        for k, d in enumerate(stage.dims):
            x = vs[d.name]
            blk = blk & x.ge_set(vs[bnames[2 * k]]) & x.le_set(vs[bnames[2 * k + 1]])
        pnames = names[:m]
        where = where.reset_tuple_id()
        for k, nm in enumerate(pnames):
            where = where.set_dim_name(isl.dim_type.set, k, nm)
        bvs = Vars(space(f"{stage.name}_bounds", pnames, self.params))
        g.binder = Statement(f"{stage.name}_bounds", stage, "bounds", (), list(g.prefix), m, bvs,
                             where.set_tuple_name(f"{stage.name}_bounds").coalesce(),
                             [bvs[nm] for nm in pnames])
        lifted = where.insert_dims(isl.dim_type.set, m, len(stage.dims))
        lifted = lifted.set_tuple_name(stage.name)
        for k, nm in enumerate(names):
            lifted = lifted.set_dim_name(isl.dim_type.set, k, nm)
        return (blk & lifted).intersect_params(self.context)

    def fresh(self, base: str) -> str:
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}{n}"
        self.taken.add(name)
        return name

    def readers(self, stage: Stage) -> list[tuple[Statement, list[Scoped]]]:
        out = []
        for other, stmts in self.stmts_of.items():
            for s in stmts:
                accs = reads(self.exprs[other], stage) if s.role != "init" else []
                if s.role == "assign":
                    assert isinstance(other, Update)  # what an assign statement computes
                    accs += [a for ix in self.targets[other].indices for a in reads(ix, stage)]
                if accs:
                    out.append((s, accs))
        return out

    def needed(self, stage: Stage, prefix: list[Band]) -> isl.Map:
        """[p0..p(m-1)] -> stage[x]: what the readers inside the prefix loops read."""
        m = len(prefix)
        rel = None
        for s, accs in self.readers(stage):
            if s.bands[:m] != prefix:
                p = self.sched.state.compute[stage]
                assert p.consumer is not None  # computed inside a loop: at a consumer's
                raise ScheduleError(
                    f"compute_at({stage.name}, {p.consumer.name}, {p.loop!r}): {stage.name} is also "
                    f"read by {s.stage.name}, which is not computed inside {p.consumer.name}'s loop "
                    f"{p.loop}; compute {stage.name} at a loop that encloses all of its consumers "
                    f"({', '.join(sorted({r.stage.name for r, _ in self.readers(stage)}))}), or at root")
            pm = functions_map(s.band_values[:m], s.domain)
            for acc in accs:
                r = pm.reverse().apply_range(access_map(s, acc, remap=True))
                rel = r if rel is None else rel.union(r)
        assert rel is not None, f"no reader of {stage.name} inside its compute level"
        decl = tensor_set(stage, self.params)
        return rel.intersect_range(decl).coalesce()

    def buffer_box(self, g: Group) -> BufferBox:
        stage = g.stage
        assert isinstance(stage, Stage), "an update has no buffer of its own"
        m = len(g.prefix)
        if m == 0:
            return BufferBox([], None, 0)
        depth = self.store_depth(g)
        pure = g.stmts[0].domain
        n_dims = len(stage.dims)
        proj = pure.project_out(isl.dim_type.set, depth, m - depth)
        rel = _to_map(proj, depth)
        los, his = _box(rel)
        extents = []
        for lo, hi in zip(los, his):
            ext = isl.Map.from_pw_aff((hi - lo + 1).coalesce()).range().dim_max(0)
            extents.append(ext.intersect_params(self.context).coalesce())
        assert len(extents) == n_dims
        fold: tuple[tuple[int, int], ...] = ()
        w = g.window
        if w is not None and w.dim is not None and w.fold is not None:
            most = extents[w.dim].max_val()
            if not most.is_int() or most.to_python() > w.fold:  # folding keeps fewer rows
                fold = ((w.dim, w.fold),)
                extents[w.dim] = (extents[w.dim].scale_val(isl.Val.zero(extents[w.dim].get_ctx()))
                                  + w.fold).coalesce()
        return BufferBox(extents, los, depth, fold)


def _context(pipeline: Pipeline, params: list[str]) -> isl.Set:
    vs = Vars(space(None, [], params))
    ctx = vs.universe()
    for p in params:
        ctx = ctx & vs[p].ge_set(vs.const(1))
    for t in pipeline.tensors:
        for ext in t.shape:
            ctx = ctx & pwaff(ext, vs, {}).ge_set(vs.const(1))
    return ctx.params()


def build_model(sched: Schedule) -> Model:
    pipeline = sched.state.pipeline  # with the stages restaging primitives added
    st = sched.state
    params = [s.name for s in pipeline.sizes]
    inlined = {s for s in pipeline.stages if st.compute[s].kind == "inline"}
    exprs, targets = effective_exprs(pipeline, inlined)
    context = _context(pipeline, params)
    for u, p in st.compute.items():  # a fused update's statement has the first one's dims
        if p.kind == "fused":
            assert isinstance(u, Update) and isinstance(p.consumer, Update)
            _check_definition(u, exprs[u], targets, params, context)
            rename = {y.dim: x.dim for x, y in zip(p.consumer.axes, u.axes)}
            exprs[u] = cx.substitute(exprs[u], rename)
            target = cx.substitute(targets[u], rename)
            assert isinstance(target, cx.Access)
            targets[u] = target
    taken = set(params) | {t.name for t in pipeline.tensors}
    roots, groups = _structure(sched, _Namer(taken))
    taken = taken | {bd.var for g in groups.values()
                     for bd in g.prefix + g.shared + g.init + g.update}
    b = _Builder(sched, exprs, targets, groups, params, context, taken)
    for stage in reversed([s for s in pipeline.schedulables if s in groups]):
        _check_definition(stage, exprs[stage], targets, params, context)
        b.statements(groups[stage])
    boxes = {s: b.buffer_box(g) for s, g in groups.items() if isinstance(s, Stage)}
    _infer_extents(b.stmts_of.values(), context)
    return Model(sched, exprs, targets, roots, groups, boxes, params, context,
                 _ast_context(groups.values(), params, context))


def _ast_context(groups: Collection[Group], params: list[str], context: isl.Set) -> isl.Set:
    """`context`, and for each block bound parameter pair: lo <= hi, both within the stage
    (the block is never empty and never leaves the stage)."""
    names = [n for g in groups for n, _ in g.bounds]
    if not names:
        return context
    vs = Vars(space(None, [], params + names))
    ctx = vs.universe()
    for g in groups:
        if not g.bounds:
            continue
        assert isinstance(g.stage, Stage)  # only a stage's block has bounds
        for k, ext in enumerate(g.stage.shape):
            lo, hi = vs[g.bounds[2 * k][0]], vs[g.bounds[2 * k + 1][0]]
            ctx = ctx & lo.ge_set(vs.const(0)) & lo.le_set(hi) & hi.lt_set(pwaff(ext, vs, {}))
    return (ctx.params() & context).coalesce()


def _trip_count(s: Statement, depth: int, context: isl.Set) -> int | None:
    """The most iterations band `depth` of `s` runs for any values of the loops outside it,
    when that is a constant."""
    rel = _to_map(functions_map(s.band_values[:depth + 1], s.domain).range(), depth)
    rel = rel.intersect_params(context)
    if rel.is_empty():
        return 0
    # the widest distance between two values of the loop under one value of the outer
    # loops, over every value of the sizes: no parametric lexmin/lexmax, which isl
    # neither bounds in time nor lets the budget abort
    widths = rel.reverse().apply_range(rel).deltas()
    most = largest_constant(widths)  # the bound must hold for every value of the sizes
    return None if most is None else most + 1


def _infer_extents(stmt_lists: Iterable[list[Statement]], context: isl.Set) -> None:
    """Give every band the exact maximal trip count of its loop (the block a compute_at
    stage computes, a split tail, a triangle), when that is a constant; the extent the
    schedule knew bounds it from above."""
    found: dict[Band, list[int | None]] = {}
    for stmts in stmt_lists:
        for s in stmts:
            for depth in range(s.n_prefix, len(s.bands)):
                found.setdefault(s.bands[depth], []).append(_trip_count(s, depth, context))
    for band, counts in found.items():
        ints = [c for c in counts if c is not None]
        known = max(ints) if len(ints) == len(counts) else None
        if band.loop.extent is not None:
            known = band.loop.extent if known is None else min(known, band.loop.extent)
        band.extent = known
        if known is None and (band.kind in ("vectorized", "unrolled") or band.loop.reassociate):
            what = {"vectorized": "vectorize", "unrolled": "unroll"}.get(band.kind, band.kind)
            raise ScheduleError(
                f"{what}({band.owner.name}, {band.loop.name!r}): the loop's trip count is not "
                f"bounded by a constant (it depends on the sizes); split it by a constant first, "
                f"e.g. split({band.owner.name}, {band.loop.name!r}, 8), and {what} the inner loop")


def _check_definition(stage: Schedulable, expr: cx.Expr, targets: dict[Update, cx.Access],
                      params: list[str], context: isl.Set) -> None:
    if isinstance(stage, Update):
        target = targets[stage]
        vs = Vars(space(_stmt_name(stage), [d.name for d in stage.loop_dims], params))
        decl = Statement(stage.name, stage, "decl", stage.loop_dims, [], 0, vs,
                         _declared_update(stage, vs), [])
        check_accesses(decl, cx.Select(cx.const(True), target, expr, expr.dtype), context, params)
        return
    rdims = tuple(ax.dim for ax in stage.reduce_axes)
    names = [d.name for d in stage.dims + rdims]
    vs = Vars(space(stage.name, names, params))
    dom = _declared(stage, vs, {d: d.name for d in stage.dims + rdims}, True)
    decl = Statement(stage.name, stage, "decl", stage.dims + rdims, [], 0, vs, dom, [])
    check_accesses(decl, expr, context, params)
