"""The schedule of a model as one isl schedule map, and the isl AST generated from it.

Every statement gets a flat schedule vector: its enclosing loops' values,
interleaved with constants that order siblings (producers computed at a loop
before the rest of that loop's body; a reduction's init before its update;
root stages in pipeline order). isl's AST builder turns the union of these
maps into loops; `positions` tells which loop (band) each schedule dimension
of each statement is, so the converter can name the loops and give them their kinds.

(A flat map rather than an isl schedule tree: isl's tree-based generator
mishandles nests of single-member bands over strided domains, while the map
path generates the same loops correctly.)
"""

from __future__ import annotations

import islpy as isl

from .access import functions_map
from .ast_check import check_ast
from .model import Model
from .nest import Band, Group, Statement

Vector = list[int | Band]  # entries: a sequence position, or the value of a loop


def _chain(g: Group, bands: list[Band], inner: list[tuple[Statement, Vector]],
           binders: bool) -> list[tuple[Statement, Vector]]:
    items = inner
    for b in reversed(bands):
        parts = [_child(k, binders) for k in g.children.get(b, [])] + [items]
        items = [(s, [b, pos, *v]) for pos, part in enumerate(parts) for s, v in part]
    return items


def _child(g: Group, binders: bool) -> list[tuple[Statement, Vector]]:
    """A stage computed at a loop; with `binders`, the statement that binds its block's
    bound parameters comes first."""
    if not binders or g.binder is None:
        return _group(g, binders)
    binder: list[tuple[Statement, Vector]] = [(g.binder, [0])]
    return binder + [(s, [1, *v]) for s, v in _group(g, binders)]


def _group(g: Group, binders: bool) -> list[tuple[Statement, Vector]]:
    if g.stage.reduction is None:  # one statement, or updates fused: in order
        inner: list[tuple[Statement, Vector]] = [
            (s, [k] if len(g.stmts) > 1 else []) for k, s in enumerate(g.stmts)]
        return _chain(g, g.shared, inner, binders)
    init, upd = g.stmts
    split = ([(s, [0, *v]) for s, v in _chain(g, g.init, [(init, [])], binders)]
             + [(s, [1, *v]) for s, v in _chain(g, g.update, [(upd, [])], binders)])
    return _chain(g, g.shared, split, binders)


def schedule_vectors(model: Model, binders: bool = False) -> dict[Statement, Vector]:
    """Each statement's flat schedule, padded to one length. With `binders`, the schedule
    the AST is built from: the statements that bind block bounds included."""
    items = [(s, [pos, *v]) for pos, g in enumerate(model.roots) for s, v in _group(g, binders)]
    n = max(len(v) for _, v in items)
    return {s: v + [0] * (n - len(v)) for s, v in items}


def schedule_map(model: Model, vectors: dict[Statement, Vector], ast: bool = False) -> isl.UnionMap:
    """The statements' schedules over their domains; with `ast`, over the domains the AST
    is built from (blocks bounded by parameters)."""
    out: isl.UnionMap | None = None
    for s, vec in vectors.items():
        vals = [s.band_values[s.bands.index(e)] if isinstance(e, Band) else s.vars.const(e)
                for e in vec]
        dom = s.ast_domain if ast and s.ast_domain is not None else s.domain
        m = isl.UnionMap.from_map(functions_map(vals, dom))
        out = m if out is None else out.union(m)
    assert out is not None, "a model has statements"
    return out


def build_ast(model: Model, vectors: dict[Statement, Vector]) -> isl.AstNode:
    """isl's AST of `vectors` (from `schedule_vectors(model, binders=True)`), read back
    and checked to run every statement instance once (`ast_check`)."""
    build = isl.AstBuild.from_context(model.ast_context)
    # the same map with its implicit equalities made explicit (a split loop's
    # `i = f * i_o + i_i` is stated as two inequalities and a modulo): isl's AST
    # builder then has fewer existential variables to eliminate, and takes about half
    # the time on a tiled matmul
    sched = schedule_map(model, vectors, ast=True).detect_equalities()
    ast = build.node_from_schedule_map(sched)
    check_ast(ast, sched, model.ast_context)
    return ast
