"""The statements of the polyhedral model and their iteration domains: each stage's
(a pure stage's one, a reduction's init and update, an update's assignment), the block
a stage computed inside a consumer's loop computes per iteration (the box hull of what
its readers there read; with its bounds as parameters where they divide the loop's
values; a sliding window where consecutive blocks overlap), its buffer's box, the trip
count of every band, and the check that every definition reads in bounds.

Guarantees: every statement domain is exact (non-divisible splits are handled by isl's
guards), every producer instance a reader needs exists in the same iteration of the
compute loop (each box is checked to contain what it bounds, and widened if isl's
answer did not), and every affine access of the algorithm is proven in bounds (or a
DefinitionError names it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import islpy as isl

from ...compute import expr as cx
from ...compute.definitions import Stage, Update
from ...compute.traversal import is_affine_index
from ...errors import DefinitionError, ScheduleError
from ...schedule import Schedule
from ...schedule.state import Schedulable
from ..rewrite import fresh_name
from .access import Scoped, access_map, check_accesses, functions_map, reads, tensor_set
from .affine import Vars, largest_constant, loop_pwaff, pwaff, space
from .hull import between, box_hull, has_divs, to_map
from .nest import Band, BufferBox, Group, Statement, StatementRole
from .sliding import slid, window


def declared(stage: Stage, vs: Vars, names: Mapping[cx.Dim, str], with_reduction: bool) -> isl.Set:
    """The points of `stage` its shape declares (and its reduction dims' bounds, with
    `with_reduction`), its dims named by `names`."""
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


def statement_name(update: Update) -> str:
    """The name of an update's statement in isl (its stage's name and index)."""
    return f"{update.stage.name}_u{update.index}"


def declared_update(update: Update, vs: Vars) -> isl.Set:
    """The points an update's over= declares."""
    s = vs.universe()
    names = {d: d.name for d in update.loop_dims}
    for ax in update.axes:
        k = vs[ax.dim.name]
        s = s & k.ge_set(pwaff(ax.lo, vs, names)) & k.lt_set(pwaff(ax.hi, vs, names))
    return s


class StatementBuilder:
    """Builds the statements of each group (`statements`, consumers before producers, as
    a block computed inside a loop is what its readers there read) and each stage's
    buffer box (`buffer_box`); `stmts_of` holds the statements so far by stage."""

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

    def statements(self, group: Group) -> None:
        """Give `group` its statements and their domains."""
        stage = group.stage
        for ax in stage.reduce_axes:
            _check_bounds_affine(ax, stage)
        if isinstance(stage, Update):
            for ax in stage.axes:
                _check_bounds_affine(ax, stage)
            dims = stage.loop_dims
            vs = Vars(space(statement_name(stage), [d.name for d in dims], self.params))
            dom = declared_update(stage, vs)
            group.stmts = [self._stmt(group, statement_name(stage), "assign", dims, group.shared,
                                      dom, vs)]
            for later in self.sched.state.fused_into(stage):  # each iteration's, after it
                group.stmts.append(self._stmt(group, statement_name(later), "assign", dims,
                                              group.shared, dom, owner=later))
                self.stmts_of[later] = group.stmts[-1:]
            self.stmts_of[stage] = group.stmts
            return
        m = len(group.prefix)
        pure_dom, block_dom = self._pure_domain(group, stage)
        if stage.reduction is None:
            group.stmts = [self._stmt(group, stage.name, "pure", stage.dims, group.shared,
                                      pure_dom)]
        else:
            init = self._stmt(group, f"{stage.name}_init", "init", stage.dims,
                              group.shared + group.init,
                              pure_dom.set_tuple_name(f"{stage.name}_init"))
            rdims = tuple(ax.dim for ax in stage.reduce_axes)
            names = [f"p{k}" for k in range(m)] + [d.name for d in stage.dims + rdims]
            vs = Vars(space(f"{stage.name}_update", names, self.params))
            dom = self._update_domain(stage, m, pure_dom, vs)
            upd = self._stmt(group, f"{stage.name}_update", "update", stage.dims + rdims,
                             group.shared + group.update, dom, vs)
            group.stmts = [init, upd]
        if block_dom is not None:
            group.stmts[0].ast_domain = block_dom.set_tuple_name(group.stmts[0].name).coalesce()
            if len(group.stmts) == 2:
                upd = group.stmts[1]
                upd.ast_domain = self._update_domain(stage, m, block_dom, upd.vars).coalesce()
        self.stmts_of[stage] = group.stmts

    @staticmethod
    def _update_domain(stage: Stage, n_prefix: int, pure_dom: isl.Set, vs: Vars) -> isl.Set:
        """A reduction's update domain: its pure domain times its reduction dims' bounds."""
        rdims = tuple(ax.dim for ax in stage.reduce_axes)
        names = [f"p{k}" for k in range(n_prefix)] + [d.name for d in stage.dims + rdims]
        dom = pure_dom.insert_dims(isl.dim_type.set, n_prefix + len(stage.dims), len(rdims))
        dom = dom.set_tuple_name(f"{stage.name}_update")
        for k, nm in enumerate(names):
            dom = dom.set_dim_name(isl.dim_type.set, k, nm)
        dnames = {d: d.name for d in stage.dims + rdims}
        return dom & declared(stage, vs, dnames, True)

    def _stmt(self, group: Group, name: str, role: StatementRole, dims: tuple[cx.Dim, ...],
              own: list[Band], dom: isl.Set, vs: Vars | None = None,
              owner: Schedulable | None = None) -> Statement:
        m = len(group.prefix)
        names = [f"p{k}" for k in range(m)] + [d.name for d in dims]
        vs = vs or Vars(space(name, names, self.params))
        dom = dom.set_tuple_name(name)
        dnames = {d: d.name for d in dims}
        values = [vs[f"p{k}"] for k in range(m)] + [loop_pwaff(b.loop.expr, vs, dnames) for b in own]
        return Statement(name, owner or group.stage, role, tuple(dims), group.prefix + own, m, vs,
                         dom.coalesce(), values)

    def _pure_domain(self, group: Group, stage: Stage) -> tuple[isl.Set, isl.Set | None]:
        """The block of a pure stage (or a reduction's init) computed per iteration of its
        compute loop: the box hull of what its readers inside that loop read, within the
        stage (`group.stage`). With it, when the box's bounds divide the compute loop's values,
        the same block with its bounds as parameters (see `Group.bounds`)."""
        m = len(group.prefix)
        names = [f"p{k}" for k in range(m)] + [d.name for d in stage.dims]
        vs = Vars(space(stage.name, names, self.params))
        decl = declared(stage, vs, {d: d.name for d in stage.dims}, False)
        if m == 0:
            return decl, None
        need = self.needed(stage, group.prefix)
        los, his = box_hull(need)
        box = between(los, his).wrap().flatten()
        box = box.set_tuple_name(stage.name)
        for k, nm in enumerate(names):
            box = box.set_dim_name(isl.dim_type.set, k, nm)
        exact = (box & decl).intersect_params(self.context)
        depth = self.store_depth(group)
        if depth < m:  # stored outside its compute loop: a window may slide
            group.window = window(stage, group.prefix, depth, los, his, need.domain(), self.context,
                                  self._placement(stage))
        divs = any(has_divs(pa) for pa in los + his)
        if group.window is not None and divs:
            raise ScheduleError(
                f"{self._placement(stage)}: the blocks of {stage.name} overlap from one "
                f"iteration of the compute loop to the next, but their bounds divide the loop "
                f"values (a fused or split loop), where tdsl does not slide a window; compute "
                f"{stage.name} at a plain loop, or store it at the compute level")
        if group.window is not None:
            exact = slid(exact, m)
        if not divs:
            return exact, None
        return exact, self._block_domain(group, stage, need.domain(), los, his, names)

    def _placement(self, stage: Stage) -> str:
        """compute_at(...) and store_at(...) of `stage`, as the schedule wrote them."""
        st = self.sched.state
        cp, sp = st.compute[stage], st.store_placement(stage)
        c = f"compute_at({stage.name}, {cp.consumer.name if cp.consumer else 'root'}, {cp.loop!r})"
        if sp.kind == "at" and sp is not cp:
            assert sp.consumer is not None  # stored at a loop: a consumer's
            return f"{c} with store_at({stage.name}, {sp.consumer.name}, {sp.loop!r})"
        return f"{c} with store_root({stage.name})"

    def store_depth(self, group: Group) -> int:
        """How many of `group`'s prefix bands enclose its buffer (its store level)."""
        stage = group.stage
        assert isinstance(stage, Stage), "an update has no buffer of its own"
        st = self.sched.state
        m = len(group.prefix)
        sp = st.store_placement(stage)
        if sp.kind == "at" and sp is not st.compute[stage]:
            found = next((k + 1 for k, b in enumerate(group.prefix)
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

    def _block_domain(self, group: Group, stage: Stage, where: isl.Set, los: list[isl.PwAff],
                      his: list[isl.PwAff], names: list[str]) -> isl.Set:
        """The block of `stage` (`group.stage`): {[p, x] : p in `where`, lo_k <= x_k <= hi_k},
        lo and hi parameters."""
        m = len(group.prefix)
        for d, lo, hi in zip(stage.dims, los, his):
            for end, pa in (("lo", lo), ("hi", hi)):
                group.bounds.append((self.fresh(f"{stage.name}_{d.name}_{end}"), pa))
        bnames = [n for n, _ in group.bounds]
        vs = Vars(space(stage.name, names, self.params + bnames))
        blk = declared(stage, vs, {d: d.name for d in stage.dims}, False)
        for k, d in enumerate(stage.dims):
            x = vs[d.name]
            blk = blk & x.ge_set(vs[bnames[2 * k]]) & x.le_set(vs[bnames[2 * k + 1]])
        pnames = names[:m]
        where = where.reset_tuple_id()
        for k, nm in enumerate(pnames):
            where = where.set_dim_name(isl.dim_type.set, k, nm)
        bvs = Vars(space(f"{stage.name}_bounds", pnames, self.params))
        group.binder = Statement(f"{stage.name}_bounds", stage, "bounds", (), list(group.prefix),
                                 m, bvs, where.set_tuple_name(f"{stage.name}_bounds").coalesce(),
                                 [bvs[nm] for nm in pnames])
        lifted = where.insert_dims(isl.dim_type.set, m, len(stage.dims))
        lifted = lifted.set_tuple_name(stage.name)
        for k, nm in enumerate(names):
            lifted = lifted.set_dim_name(isl.dim_type.set, k, nm)
        return (blk & lifted).intersect_params(self.context)

    def fresh(self, base: str) -> str:
        return fresh_name(base, self.taken)

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

    def buffer_box(self, group: Group) -> BufferBox:
        stage = group.stage
        assert isinstance(stage, Stage), "an update has no buffer of its own"
        m = len(group.prefix)
        if m == 0:
            return BufferBox([], None, 0)
        depth = self.store_depth(group)
        pure = group.stmts[0].domain
        n_dims = len(stage.dims)
        proj = pure.project_out(isl.dim_type.set, depth, m - depth)
        rel = to_map(proj, depth)
        los, his = box_hull(rel)
        extents = []
        for lo, hi in zip(los, his):
            ext = isl.Map.from_pw_aff((hi - lo + 1).coalesce()).range().dim_max(0)
            extents.append(ext.intersect_params(self.context).coalesce())
        assert len(extents) == n_dims
        fold: tuple[tuple[int, int], ...] = ()
        w = group.window
        if w is not None and w.dim is not None and w.fold is not None:
            most = extents[w.dim].max_val()
            if not most.is_int() or most.to_python() > w.fold:  # folding keeps fewer rows
                fold = ((w.dim, w.fold),)
                extents[w.dim] = (extents[w.dim].scale_val(isl.Val.zero(extents[w.dim].get_ctx()))
                                  + w.fold).coalesce()
        return BufferBox(extents, los, depth, fold)


def _trip_count(stmt: Statement, depth: int, context: isl.Set) -> int | None:
    """The most iterations band `depth` of `stmt` runs for any values of the loops outside it,
    when that is a constant."""
    rel = to_map(functions_map(stmt.band_values[:depth + 1], stmt.domain).range(), depth)
    rel = rel.intersect_params(context)
    if rel.is_empty():
        return 0
    # the widest distance between two values of the loop under one value of the outer
    # loops, over every value of the sizes: no parametric lexmin/lexmax, which isl
    # neither bounds in time nor lets the budget abort
    widths = rel.reverse().apply_range(rel).deltas()
    most = largest_constant(widths)  # the bound must hold for every value of the sizes
    return None if most is None else most + 1


def infer_extents(stmt_lists: Iterable[list[Statement]], context: isl.Set) -> None:
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


def check_definition(stage: Schedulable, expr: cx.Expr, targets: dict[Update, cx.Access],
                     params: list[str], context: isl.Set) -> None:
    if isinstance(stage, Update):
        target = targets[stage]
        vs = Vars(space(statement_name(stage), [d.name for d in stage.loop_dims], params))
        decl = Statement(stage.name, stage, "decl", stage.loop_dims, [], 0, vs,
                         declared_update(stage, vs), [])
        check_accesses(decl, cx.Select(cx.const(True), target, expr, expr.dtype), context, params)
        return
    rdims = tuple(ax.dim for ax in stage.reduce_axes)
    names = [d.name for d in stage.dims + rdims]
    vs = Vars(space(stage.name, names, params))
    dom = declared(stage, vs, {d: d.name for d in stage.dims + rdims}, True)
    decl = Statement(stage.name, stage, "decl", stage.dims + rdims, [], 0, vs, dom, [])
    check_accesses(decl, expr, context, params)
