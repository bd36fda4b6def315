"""Flattening: every buffer access becomes one row-major offset.

Buffers are dense and row-major (`ir.Buffer`), so the element at indices
(i, j, k) of a buffer of shape (N, M, 4) is element `i * M * 4 + j * 4 + k`
of its storage. This pass writes that offset into the IR, so that every
target addresses memory the same way and none of them flattens on its own.

It runs after the passes that reason per dimension (`inbounds` checks each
index against its extent). The offset is built as the backends built it
before: each index scaled by the product of the extents after it, symbolic
extents first and the constant ones folded into one factor last, zeros and
ones folded away. No other cleanup is needed: the terms are the indices and
the buffer's own extents, already simplified.

Guarantees: the result computes the same values; every `Load` and `Store`
has exactly one index, of dtype index, the row-major offset of the element
it accessed (`verify` then checks that all accesses are flat). Buffers keep
their shapes (allocation sizes and the argument check read them).
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..layout import flat_index
from ..rewrite import Rewriter


class _Flatten(Rewriter):
    def expr(self, e: ir.Expr) -> ir.Expr | None:
        if isinstance(e, ir.Load):
            return ir.Load(e.buffer, (flat_index(e.buffer, e.indices),))
        return None

    def stmt(self, s: ir.Stmt) -> ir.Stmt | None:
        if isinstance(s, ir.Store):
            return replace(s, indices=(flat_index(s.buffer, s.indices),))
        return None


def flatten(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` with every buffer access a single row-major offset (see the module)."""
    return replace(func, body=_Flatten().visit(func.body))
