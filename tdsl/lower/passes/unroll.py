"""Unrolling: each UNROLLED loop becomes one copy of its body per iteration.

Guarantees: no UNROLLED loop remains. A loop with constant bounds becomes
straight-line copies; a loop whose end varies (a split tail) becomes
`max_extent` copies, each guarded by `start + c < end`.
"""

from __future__ import annotations

from ... import dtypes as dt
from .. import ir
from ..rewrite import Rewriter, substitute
from .simplify import simplify


class _Unroll(Rewriter):
    def stmt(self, s):
        if not isinstance(s, ir.For) or s.kind is not ir.ForKind.UNROLLED:
            return None
        copies = []
        if isinstance(s.start, ir.Const) and isinstance(s.end, ir.Const):
            for v in range(s.start.value, s.end.value):
                copies.append(substitute(s.body, {s.var: ir.Const(v, dt.index)}))
        else:
            assert s.max_extent is not None, f"unrolled loop {s.var} without a constant extent"
            for c in range(s.max_extent):
                at = ir.Binary("add", s.start, ir.Const(c, dt.index), dt.index)
                body = substitute(s.body, {s.var: at})
                copies.append(body if c == 0 else ir.If(ir.Compare("lt", at, s.end), body))
            if copies:
                copies[0] = ir.If(ir.Compare("lt", s.start, s.end), copies[0])
        return ir.Block(tuple(copies))


def unroll(func: ir.LoweredFunc) -> ir.LoweredFunc:
    body = _Unroll().visit(func.body)
    return simplify(ir.LoweredFunc(func.name, func.inputs, func.outputs, func.sizes, body))
