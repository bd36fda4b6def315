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

from collections.abc import Collection
from dataclasses import dataclass

import islpy as isl

from ...compute import expr as cx
from ...compute.definitions import Stage, Tensor, Update
from ...compute.pipeline import Pipeline
from ...schedule import Schedule
from ...schedule.state import Schedulable
from .affine import Vars, pwaff, space
from .domains import StatementBuilder, check_definition, infer_extents
from .inline import effective_exprs
from .nest import Band, BufferBox, Group, LoopNamer, Statement, StatementRole, build_groups


@dataclass(eq=False)
class Model:
    """A scheduled pipeline's polyhedral model: the stages' loop nests (`roots`, `groups`)
    with their statements and domains, each buffer's box, and the sizes and what holds
    of them (`context`)."""

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

    def box_of(self, tensor: Tensor | Update) -> BufferBox | None:
        """The buffer box of stage `tensor`; None for an input or an update (no buffer of
        its own)."""
        return self.boxes.get(tensor) if isinstance(tensor, Stage) else None


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
    """The polyhedral model of `sched` (see the module's guarantees)."""
    pipeline = sched.state.pipeline  # with the stages restaging primitives added
    state = sched.state
    params = [s.name for s in pipeline.sizes]
    inlined = {s for s in pipeline.stages if state.compute[s].kind == "inline"}
    exprs, targets = effective_exprs(pipeline, inlined)
    context = _context(pipeline, params)
    for u, p in state.compute.items():  # a fused update's statement has the first one's dims
        if p.kind == "fused":
            assert isinstance(u, Update) and isinstance(p.consumer, Update)
            check_definition(u, exprs[u], targets, params, context)
            rename = {y.dim: x.dim for x, y in zip(p.consumer.axes, u.axes)}
            exprs[u] = cx.substitute(exprs[u], rename)
            target = cx.substitute(targets[u], rename)
            assert isinstance(target, cx.Access)
            targets[u] = target
    taken = set(params) | {t.name for t in pipeline.tensors}
    roots, groups = build_groups(sched, LoopNamer(taken))
    taken = taken | {bd.var for g in groups.values()
                     for bd in g.prefix + g.shared + g.init + g.update}
    builder = StatementBuilder(sched, exprs, targets, groups, params, context, taken)
    for stage in reversed([s for s in pipeline.schedulables if s in groups]):
        check_definition(stage, exprs[stage], targets, params, context)
        builder.statements(groups[stage])
    boxes = {s: builder.buffer_box(g) for s, g in groups.items() if isinstance(s, Stage)}
    infer_extents(builder.stmts_of.values(), context)
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


# the records of the model, at the import path they had before `nest` was split off
__all__ = ["Band", "BufferBox", "Group", "Model", "Statement", "StatementRole", "build_model"]
