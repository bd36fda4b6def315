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
from .model import Band, Group, Model, Statement

Vector = list  # entries: int (sequence position) or Band (loop value)


def _chain(g: Group, bands: list[Band],
           inner: list[tuple[Statement, Vector]]) -> list[tuple[Statement, Vector]]:
    items = inner
    for b in reversed(bands):
        parts = [_group(k) for k in g.children.get(b, [])] + [items]
        items = [(s, [b, pos, *v]) for pos, part in enumerate(parts) for s, v in part]
    return items


def _group(g: Group) -> list[tuple[Statement, Vector]]:
    if g.stage.reduction is None:
        return _chain(g, g.shared, [(g.stmts[0], [])])
    init, upd = g.stmts
    split = ([(s, [0, *v]) for s, v in _chain(g, g.init, [(init, [])])]
             + [(s, [1, *v]) for s, v in _chain(g, g.update, [(upd, [])])])
    return _chain(g, g.shared, split)


def schedule_vectors(model: Model) -> dict[Statement, Vector]:
    """Each statement's flat schedule, padded to one length."""
    items = [(s, [pos, *v]) for pos, g in enumerate(model.roots) for s, v in _group(g)]
    n = max(len(v) for _, v in items)
    return {s: v + [0] * (n - len(v)) for s, v in items}


def schedule_map(model: Model, vectors: dict[Statement, Vector]) -> isl.UnionMap:
    out = None
    for s, vec in vectors.items():
        vals = [s.band_values[s.bands.index(e)] if isinstance(e, Band) else s.vars.const(e)
                for e in vec]
        m = isl.UnionMap.from_map(functions_map(vals, s.domain))
        out = m if out is None else out.union(m)
    return out


def build_ast(model: Model, vectors: dict[Statement, Vector]) -> isl.AstNode:
    build = isl.AstBuild.from_context(model.context)
    return build.node_from_schedule_map(schedule_map(model, vectors))
