"""Folding loops that run at most once.

isl's AST builder already writes a loop with a single iteration as a binding
of its variable, but loops of one iteration reappear later: unrolling an
outer loop substitutes its values into the bounds of the loops inside it (the
last block of a split, `for y_i in 0 .. min(2, 5 - 2 * y_o)` at `y_o = 2`),
and a reassociated reduction keeps its partial-result loops whatever their
width. Such a loop is no loop at all, and it should not reach a backend as
one: a parallel loop of one iteration would start a team of threads to run
it on one of them, a vectorized one would be handed to the vectorizer, and
LLVM's loop passes have been seen to fail on loop shapes no one meant to
vectorize.

Guarantees: the result computes the same values and contains no `For` whose
trip count `end - start` is provably at most 1. A loop of exactly one
iteration becomes `let var = start` around its body; one that never runs
(a constant trip count of 0 or less) disappears; one whose trip count is 0 or
1 (`max_extent` 1, symbolic bounds) becomes `if start < end: let var = start`.
Every other loop, and every other statement, is left as it was.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..build import lt, sub
from ..rewrite import Rewriter
from .simplify import normalize


def _trip_count(loop: ir.For) -> int | None:
    """`end - start` when it is a constant, else None."""
    trips = normalize(sub(loop.end, loop.start))
    return ir.int_value(trips)


class _Fold(Rewriter):
    def stmt(self, s: ir.Stmt) -> ir.Stmt | None:
        if not isinstance(s, ir.For):
            return None
        trips = _trip_count(s)
        if trips is not None and trips <= 0:
            return ir.Block(())
        if trips == 1:
            return ir.Let(s.var, s.start, s.body)
        if s.max_extent is not None and s.max_extent <= 1:
            return ir.If(lt(s.start, s.end), ir.Let(s.var, s.start, s.body))
        return None


def fold_loops(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` with every loop of at most one iteration folded (see the module docstring)."""
    body = _Fold().visit(func.body)
    return replace(func, body=body)
