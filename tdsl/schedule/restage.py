"""Restaging: primitives that add stages to the pipeline they schedule.

`cache_write`, `cache_read` and `rfactor` change which stages exist: the
algorithm the user wrote stays as it is (it is still what `td.evaluate`
computes), while the schedule's state carries a rewritten pipeline that
computes the same values through extra stages. `restage` swaps in new
definitions for some stages, rebuilds every stage that reads a rebuilt one
(same name, dims and loops, so the schedule so far still applies to it), and
moves the state's entries over to the new objects.

    A, B -> C = sum(A*B)          cache_write(C, "Cl")       A, B -> Cl = sum(A*B)
                                  ------------------->               -> C = Cl
"""

from __future__ import annotations

from collections.abc import Mapping

from ..compute import Stage
from ..compute import expr as cx
from ..compute.definitions import Tensor
from ..compute.pipeline import Pipeline
from ..compute.views import BoundaryView
from ..errors import ScheduleError
from .state import ROOT, Placement, State, initial_loops


def retarget(e: cx.Expr, mapping: Mapping[Tensor, Tensor]) -> cx.Expr:
    """`e` with every read of a tensor in `mapping` reading its replacement instead."""

    def swap(n: cx.Expr):
        if not isinstance(n, cx.Access):
            return None
        t = n.tensor
        if isinstance(t, BoundaryView):
            if t.tensor not in mapping:
                return None
            view = BoundaryView(mapping[t.tensor], t.mode, t.value)
            return cx.Access(view, n.indices)
        return cx.Access(mapping[t], n.indices) if t in mapping else None

    return cx.transform(e, swap)


def new_stage(name: str, like: Tensor, expr: cx.Expr, order: float, dims=None, shape=None) -> Stage:
    """A stage made by a primitive, placed in pipeline order at `order`."""
    dims = like.dims if dims is None else dims
    shape = like.shape if shape is None else shape
    return Stage(name, dict(zip(dims, shape)), expr, order)


def restage(st: State, what: str, defs: dict[Stage, cx.Expr],
            fresh_loops: tuple[Stage, ...] = ()) -> None:
    """Give the stages in `defs` those definitions, rebuild their readers, update `st`.

    `fresh_loops` lists stages (keys of `defs`) whose loops change with their new
    definition: they restart from their initial loops. Stages that appear only
    inside the new definitions are new: computed at root with their initial
    loops."""
    old = st.pipeline
    mapping: dict[Tensor, Stage] = {}  # old stage -> its rebuilt replacement
    for s in old.stages:  # producers first
        expr = retarget(defs.get(s, s.expr), mapping)
        if expr is s.expr and not any(t in mapping for t in old.reads(s)):
            continue
        if old.updates_of(s):
            names = ", ".join(u.name for u in old.updates_of(s))
            raise ScheduleError(
                f"{what}: {s.name} has updates ({names}), so its definition cannot be "
                "restaged; compute it as it is")
        rebuilt = new_stage(s.name, s, expr, s.order)
        mapping[s] = rebuilt
    outputs = tuple(mapping.get(o, o) for o in old.outputs)
    # the stages kept keep the updates the schedule's pipeline saw; new ones have none
    st.pipeline = Pipeline(outputs, known={s: old.updates_of(s) for s in old.stages})
    _move(st, mapping, {mapping[s] for s in fresh_loops})
    for s in st.pipeline.stages:
        if s not in st.loops:  # a stage the primitive added
            st.loops[s] = initial_loops(s)
            st.compute[s] = ROOT


def _move(st: State, renamed: dict[Tensor, Stage], fresh: set[Stage]) -> None:
    def place(p: Placement) -> Placement:
        consumer = p.consumer if p.consumer is None else renamed.get(p.consumer, p.consumer)
        return Placement(p.kind, consumer, p.loop)

    for o, n in renamed.items():
        assert isinstance(o, Stage)  # only stages are restaged
        loops = st.loops.pop(o)
        st.loops[n] = initial_loops(n) if n in fresh else loops
        st.compute[n] = st.compute.pop(o)
        for table in (st.store, st.layout):
            if o in table:
                table[n] = table.pop(o)
        if o in st.touched:
            st.touched.discard(o)
            if n not in fresh:
                st.touched.add(n)
        st.current[o] = n
    for k, v in st.current.items():
        st.current[k] = renamed.get(v, v)
    st.compute = {s: place(p) for s, p in st.compute.items()}
    st.store = {s: place(p) for s, p in st.store.items()}

