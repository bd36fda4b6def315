"""Dependence analysis and the legality of a schedule.

The reference semantics is sequential: root stages in pipeline order; in a
reduction, each element's init before its accumulations, which run in
increasing index order; an update visits its domain in lexicographic order.
Dependences are memory-based (flow, anti, output) between statement
instances that touch the same element, computed exactly with isl from the
access relations (data-dependent indices count as touching the whole axis).

Only instances inside one root group can conflict: root groups run in
pipeline order under every schedule, and producers computed inside a
consumer's loops are pure and recomputed per iteration. A schedule is legal
when every dependence keeps its direction under the new schedule and no
parallel or vectorized loop carries one. Otherwise `ScheduleError` names the
primitive, the dependence kind, the tensor and one conflicting pair.

Storage of intermediate buffers is decided here too, for every buffer alike
(a stage's, or one that `cache_write`, `cache_read` or `rfactor` added): a
stage computed inside loops is stored in one buffer per iteration of its
store loop (its compute loop, or the `store_at` loop; passes/allocate.py
allocates it there), so iterations of the loops around the store loop never
share storage, and iterations of a parallel loop between the store loop and
the computation always do. Such a schedule is legal only when no cell of the
shared buffer is written in one iteration of that loop and touched in
another (the dependences on storage cells, not only on the tensor's
elements); otherwise `ScheduleError` explains the race and names the
`store_at` that would make the buffer private.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from ...compute import expr as cx
from ...compute.definitions import Stage, Update
from ...errors import ScheduleError
from ...schedule import Parallel, Schedule, Vectorize
from .access import access_map, functions_map, reads
from .budget import bounded, isl_budget, step
from .model import Model, build_model
from .nest import Band, Group, Statement
from .tree import Vector, schedule_map, schedule_vectors


@dataclass
class _Access:
    stmt: Statement
    write: bool
    text: str
    rel: isl.Map  # statement instance -> element
    # an access of an atomic update to its target (its read-modify-write): the
    # statement's instances may update one element in any order, at once
    atomic: bool = False


def _writes_and_reads(model: Model, g: Group) -> tuple[Stage, list[_Access]]:
    owner = g.stage
    tensor = owner.stage if isinstance(owner, Update) else owner
    out: list[_Access] = []
    for s in g.stmts:
        if s.role == "assign":
            u = s.stage  # the group's update, or one fused into its loops
            assert isinstance(u, Update)  # what an assign statement computes
            target = model.targets[u]
            atomic = u in model.schedule.state.atomic
            out.append(_Access(s, True, repr(target), access_map(s, target), atomic))
            srcs = [model.exprs[u], *target.indices]
            if atomic:  # its value reads the target only as the element it updates
                out.extend(_Access(s, False, repr(acc), access_map(s, acc), True)
                           for acc in reads(model.exprs[u], tensor))
                continue
        else:
            own = cx.Access(tensor, tuple(s.dims[: len(tensor.dims)]))
            out.append(_Access(s, True, repr(own), access_map(s, own)))
            if s.role == "update":  # the accumulator is read as well as written
                out.append(_Access(s, False, repr(own), access_map(s, own)))
            srcs = [model.exprs[owner]] if s.role != "init" else []
        for e in srcs:
            for acc in reads(e, tensor):
                out.append(_Access(s, False, repr(acc), access_map(s, acc)))
    return tensor, out


def _reference(stmts: list[Statement]) -> isl.UnionMap:
    """The sequential order of one root group's statements."""
    vecs = {}
    assigns = [s for s in stmts if s.role == "assign"]
    for s in stmts:
        dims = [s.vars[d.name] for d in s.dims]
        if len(assigns) > 1:  # updates fused: each runs in full after the one before
            vecs[s] = [s.vars.const(assigns.index(s))] + dims
            continue
        if s.role == "init":
            vecs[s] = dims + [s.vars.const(0)]
        elif s.role == "update":
            assert isinstance(s.stage, Stage)  # a reduction's accumulation
            n = len(s.stage.dims)
            vecs[s] = dims[:n] + [s.vars.const(1)] + dims[n:]
        else:
            vecs[s] = dims
    width = max(len(v) for v in vecs.values())
    out = None
    for s, v in vecs.items():
        v = v + [s.vars.const(0)] * (width - len(v))
        m = isl.Map.from_pw_aff(v[0])
        for x in v[1:]:
            m = m.flat_range_product(isl.Map.from_pw_aff(x))
        um = isl.UnionMap.from_map(m.intersect_domain(s.domain))
        out = um if out is None else out.union(um)
    assert out is not None, "a group has statements"
    return out


def _carried_at(depth: int, width: int) -> isl.Map:
    a = [f"a{k}" for k in range(width)]
    b = [f"b{k}" for k in range(width)]
    eq = [f"{a[k]} = {b[k]}" for k in range(depth)] + [f"{a[depth]} != {b[depth]}"]
    return isl.Map(f"{{ [{', '.join(a)}] -> [{', '.join(b)}] : {' and '.join(eq)} }}")


def _point(m: isl.UnionMap, stmts: dict[str, Statement]) -> tuple[str, str]:
    one = m.get_map_list().get_at(0)
    src = stmts[one.get_tuple_name(isl.dim_type.in_)]
    dst = stmts[one.get_tuple_name(isl.dim_type.out)]
    pt = one.wrap().sample_point()
    n_in = one.dim(isl.dim_type.in_)

    def show(s: Statement, off: int) -> str:
        vals = [pt.get_coordinate_val(isl.dim_type.set, off + k).to_python()
                for k in range(len(s.dims))]
        return ", ".join(f"{d.name}={v}" for d, v in zip(s.dims, vals))

    return show(src, 0), show(dst, n_in)


def _kind(a: _Access, b: _Access) -> str:
    return "output" if a.write and b.write else "flow" if a.write else "anti"


def _marking(model: Model, band: Band) -> str:
    prims = [p for p in model.schedule.primitives if isinstance(p, (Parallel, Vectorize))
             and p.stage is band.owner and p.loop == band.loop.name]
    return prims[-1].describe() if prims else f"{band.kind} loop {band.loop.name}"


def _check_group(model: Model, g: Group, vectors: dict[Statement, Vector]) -> None:
    tensor, accesses = _writes_and_reads(model, g)
    if not any(not a.write for a in accesses) and len(g.stmts) == 1:
        return  # each instance writes its own element and reads none of it: nothing to keep
    stmts = {s.name: s for s in g.stmts}
    before = _reference(g.stmts)
    before = before.lex_lt_union_map(before)
    new = schedule_map(model, {s: vectors[s] for s in g.stmts})
    backwards = new.lex_ge_union_map(new)
    width = len(next(iter(vectors.values())))
    marked = sorted({(k, e) for s in g.stmts for k, e in enumerate(vectors[s])
                     if isinstance(e, Band) and e.kind in ("parallel", "vectorized")},
                    key=lambda x: x[0])
    carried = {k: new.apply_range(isl.UnionMap.from_map(_carried_at(k, width)))
               .apply_range(new.reverse()) for k, _ in marked}
    name = g.stage.name
    for a in accesses:
        for b in accesses:
            if not (a.write or b.write):
                continue
            commute = a.atomic and b.atomic and a.stmt is b.stmt
            same = isl.UnionMap.from_map(a.rel).apply_range(isl.UnionMap.from_map(b.rel).reverse())
            dep = same.intersect(before)
            if dep.is_empty():
                continue
            bad = dep.intersect(backwards)
            if not commute and not bad.is_empty() and a.stmt is not b.stmt:
                raise ScheduleError(
                    f"fuse_updates({a.stmt.stage.name}, {b.stmt.stage.name}): "
                    f"{_pair(a, b, tensor, bad, stmts)}, but fused, the second would run first; "
                    "fuse updates only when each iteration reads what the earlier ones wrote")
            if not commute and not bad.is_empty():
                loops = " ".join(lp.name for lp in model.schedule.state.loops[g.stage])
                raise ScheduleError(
                    f"the loop order of {name} ({loops}) reverses a {_pair(a, b, tensor, bad, stmts)}"
                    f", but this schedule runs the second first; keep the loops that carry this "
                    f"dependence in their original order")
            for k, band in marked:
                if commute and band.kind == "parallel":
                    continue
                bad = dep.intersect(carried[k])
                if not bad.is_empty():
                    how = "in parallel" if band.kind == "parallel" else "as vector lanes"
                    raise ScheduleError(
                        f"{_marking(model, band)}: {_pair(a, b, tensor, bad, stmts)}, in different "
                        f"iterations of {band.loop.name}, so {band.loop.name} cannot run {how}")


def _pair(a: _Access, b: _Access, tensor: Stage, bad: isl.UnionMap,
          stmts: dict[str, Statement]) -> str:
    p, q = _point(bad, stmts)
    verb = {True: "written", False: "read"}
    return (f"{_kind(a, b)} dependence on {tensor.name} — {a.text} {verb[a.write]} at {p} "
            f"is {verb[b.write]} as {b.text} at {q}")


def check_legality(model: Model, vectors: dict[Statement, Vector]) -> None:
    """Raise ScheduleError unless the schedule keeps every dependence of the algorithm
    and no parallel loop shares a buffer cell between its iterations.

    Only updates need the analysis of elements. A pure stage writes each element
    once and reads only other tensors. A reduction's init precedes its
    accumulations by construction (it is sequenced before them inside the loops
    they share), its accumulation order may be changed freely (reductions are
    reassociable by definition), and loops over its reduction dims are refused
    as parallel or vector loops when the schedule is written. Storage cells of
    intermediate buffers are checked for every stage computed inside loops."""
    for g in model.roots:
        if isinstance(g.stage, Update):
            _check_group(model, g, vectors)
    for stage, g in model.groups.items():
        box = model.box_of(stage)
        if box is not None:
            for k in range(box.depth, len(g.prefix)):
                if g.prefix[k].kind == "parallel":
                    _check_shared_buffer(model, g, box.depth, k)


def _storage_accesses(model: Model, g: Group) -> list[_Access]:
    """Every write of `g`'s stage into its buffer and every read of it."""
    stage = g.stage
    assert isinstance(stage, Stage), "an update has no buffer of its own"
    out = []
    for s in g.stmts:
        own = cx.Access(stage, tuple(s.dims[: len(stage.dims)]))
        out.append(_Access(s, True, repr(own), access_map(s, own)))
    for s in model.statements:
        if s.role == "init":
            continue
        srcs = [model.exprs[s.stage]]
        if s.role == "assign":
            assert isinstance(s.stage, Update)  # what an assign statement computes
            srcs += list(model.targets[s.stage].indices)
        for e in srcs:
            for acc in reads(e, stage):
                out.append(_Access(s, False, repr(acc), access_map(s, acc)))
    return out


def _check_shared_buffer(model: Model, g: Group, depth: int, k: int) -> None:
    """Refuse the schedule if iterations of the parallel loop `g.prefix[k]`, which
    encloses `g`'s computation but not its store loop (`depth` enclosing loops), touch
    one cell of its buffer, one of them writing it."""
    band = g.prefix[k]
    neq = isl.UnionMap.from_map(isl.Map("{ [a] -> [b] : a != b }"))
    keyed = []
    for a in _storage_accesses(model, g):
        s = a.stmt
        where = functions_map(s.band_values[:k], s.domain) if k else None
        rel = a.rel if where is None else where.flat_range_product(a.rel)
        cell = isl.UnionMap.from_map(rel.set_tuple_name(isl.dim_type.out, "cell"))
        it = isl.UnionMap.from_map(functions_map([s.band_values[k]], s.domain))
        keyed.append((a, cell, it))
    for a, cell_a, it_a in keyed:
        if not a.write:
            continue
        for b, cell_b, it_b in keyed:
            same = cell_a.apply_range(cell_b.reverse())
            other = it_a.apply_range(neq).apply_range(it_b.reverse())
            bad = same.intersect(other).intersect_params(model.context)
            if not bad.is_empty():
                raise ScheduleError(_race_message(model, g, depth, band, a, b, bad))


def _race_message(model: Model, g: Group, depth: int, band: Band, a: _Access, b: _Access,
                  bad: isl.UnionMap) -> str:
    stage = g.stage
    assert isinstance(stage, Stage), "an update has no buffer of its own"
    one = bad.get_map_list().get_at(0)
    pair = isl.Set.from_point(one.wrap().sample_point()).unwrap()  # one conflicting pair
    k = g.prefix.index(band)

    def at(x: _Access, inst: isl.Set) -> tuple[str, int]:
        """The element `x` touches at instance `inst`, and the parallel loop's value there."""
        pt = x.rel.intersect_domain(inst).range().sample_point()
        n = len(stage.dims)
        elem = ", ".join(str(pt.get_coordinate_val(isl.dim_type.set, j).to_python()) for j in range(n))
        it = functions_map([x.stmt.band_values[k]], inst).range().sample_point()
        return elem, it.get_coordinate_val(isl.dim_type.set, 0).to_python()

    elem, i = at(a, pair.domain())
    _, j = at(b, pair.range())
    verb = "written" if b.write else "read"
    level = "at root" if depth == 0 else (
        f"at {g.prefix[depth - 1].owner.name}'s loop {g.prefix[depth - 1].loop.name}")
    name, loop = stage.name, band.loop.name
    return (f"{_marking(model, band)}: {name} is computed inside the parallel loop {loop} of "
            f"{band.owner.name} but stored outside the parallel loop, {level}, so threads would "
            f"share its buffer: {_kind(a, b)} dependence on {name} — {name}[{elem}] written as "
            f"{a.text} in iteration {loop}={i} is {verb} as {b.text} in iteration {loop}={j}; "
            f"store it at or inside {loop} (store_at({name}, {band.owner.name}, {loop!r})) so "
            f"that each iteration has a buffer of its own")


def check_schedule(sched: Schedule) -> None:
    """The checks a schedule primitive runs at once: the model builds, and the schedule
    is legal; bounded like lowering (`budget.bounded`)."""
    what = f"the schedule of {', '.join(o.name for o in sched.outputs)}"
    bounded(what, lambda: _check(sched, what))


def _check(sched: Schedule, what: str) -> None:
    with isl_budget(what):
        with step("bounds inference"):
            model = build_model(sched)
        with step("the dependence analysis"):
            check_legality(model, schedule_vectors(model))
