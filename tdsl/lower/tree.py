"""The isl schedule tree of a model, and the isl AST generated from it.

Each band (loop) becomes a one-member band node with an "atomic" AST loop
type (one loop, not separated into pieces) under a mark naming the band;
producers computed at a loop are sequenced before the rest of that loop's
body; a mark "alloc:<stage>" wraps the subtree in which a buffer lives.
"""

from __future__ import annotations

import islpy as isl

from .model import Band, Group, Model, Statement


def _union_set(stmts: list[Statement]) -> isl.UnionSet:
    u = isl.UnionSet.from_set(stmts[0].domain)
    for s in stmts[1:]:
        u = u.union(isl.UnionSet.from_set(s.domain))
    return u


def _under(sched: isl.Schedule) -> isl.ScheduleNode:
    return sched.get_root().child(0)


def _mark(sched: isl.Schedule, name: str) -> isl.Schedule:
    return _under(sched).insert_mark(isl.Id(name)).get_schedule()


def _sequence(parts: list[isl.Schedule]) -> isl.Schedule:
    out = parts[0]
    for p in parts[1:]:
        out = out.sequence(p)
    return out


class _TreeBuilder:
    def __init__(self, model: Model):
        self.model = model
        self.stmts_under: dict[Band, list[Statement]] = {}
        for s in model.statements:
            for k, b in enumerate(s.bands):
                self.stmts_under.setdefault(b, []).append(s)
        self.stores_at: dict[Band, list] = {}
        self.root_allocs = []
        for stage, box in model.boxes.items():
            g = model.groups[stage]
            if box.depth > 0:
                self.stores_at.setdefault(g.prefix[box.depth - 1], []).append(stage)

    def band(self, sub: isl.Schedule, b: Band) -> isl.Schedule:
        for stage in self.stores_at.get(b, []):
            sub = _mark(sub, f"alloc:{stage.name}")
        upa = None
        for s in self.stmts_under[b]:
            v = isl.UnionPwAff.from_pw_aff(s.band_values[s.bands.index(b)].intersect_domain(s.domain))
            upa = v if upa is None else upa.union_add(v)
        sub = sub.insert_partial_schedule(isl.MultiUnionPwAff.from_union_pw_aff(upa))
        node = _under(sub).band_member_set_ast_loop_type(0, isl.ast_loop_type.atomic)
        return node.insert_mark(isl.Id(b.mark)).get_schedule()

    def chain(self, g: Group, bands: list[Band], leaf: isl.Schedule) -> isl.Schedule:
        sub = leaf
        for b in reversed(bands):
            kids = g.children.get(b, [])
            if kids:
                sub = _sequence([self.group(k) for k in kids] + [sub])
            sub = self.band(sub, b)
        return sub

    def group(self, g: Group) -> isl.Schedule:
        if g.stage.reduction is None:
            leaf = isl.Schedule.from_domain(_union_set(g.stmts))
            return self.chain(g, g.shared, leaf)
        init, upd = g.stmts
        init_s = self.chain(g, g.init, isl.Schedule.from_domain(_union_set([init])))
        upd_s = self.chain(g, g.update, isl.Schedule.from_domain(_union_set([upd])))
        return self.chain(g, g.shared, init_s.sequence(upd_s))


def build_schedule(model: Model) -> isl.Schedule:
    tb = _TreeBuilder(model)
    return _sequence([tb.group(g) for g in model.roots])


def build_ast(model: Model) -> isl.AstNode:
    sched = build_schedule(model)
    build = isl.AstBuild.from_context(model.context)
    return build.node_from_schedule(sched)
