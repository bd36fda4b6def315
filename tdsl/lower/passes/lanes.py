"""lanes: in portable C, a vectorized loop over register-sized temps is written out lane
by lane.

A small core has no vector registers: the lanes of a vectorized loop are scalar
registers, and a C compiler keeps a temp array in registers only when every access
to it has a constant index. A vectorized loop of constant extent of at most
MAX_LANES whose body reads or writes a register-sized temp (`ir.register_sized`:
a block of accumulators) is therefore replaced by one copy of its body per lane,
its variable bound to the lane's value (which `simplify` folds into the indices).
Other vectorized loops stay loops, which the target compiler may vectorize.

Guarantees: the result computes the same values (a vectorized loop's iterations
are independent, so they may run in order); the function grows by at most
MAX_LANES copies of each such body.
"""

from __future__ import annotations

from dataclasses import replace

from ... import dtypes as dt
from .. import ir
from ..build import add, index
from ..rewrite import Rewriter, Substitute, stmt_exprs, walk_exprs, walk_stmts
from .simplify import constant_difference, normalize

MAX_LANES = 8


def _temps(s: ir.Stmt) -> set[ir.Buffer]:
    found = set()
    for x in walk_stmts(s):
        if isinstance(x, ir.Store) and x.buffer.kind == "temp":
            found.add(x.buffer)
        for top in stmt_exprs(x):
            found.update(e.buffer for e in walk_exprs(top)
                         if isinstance(e, ir.Load) and e.buffer.kind == "temp")
    return found


class _Lanes(Rewriter):
    def stmt(self, s: ir.Stmt) -> ir.Stmt | None:
        if not (isinstance(s, ir.For) and s.kind is ir.ForKind.VECTORIZED):
            return None
        trips = constant_difference(s.end, s.start)
        if trips is None or not 0 < trips <= MAX_LANES:
            return None
        temps = _temps(s.body)
        if not temps or not any(ir.register_sized(b) for b in temps):
            return None
        copies = []
        for lane in range(trips):
            at = normalize(add(s.start, index(lane)))
            copies.append(_Fold({s.var: at}).visit(s.body))
        return ir.Block(tuple(copies))


class _Fold(Substitute):
    """The variable replaced, the indices it reaches put in normal form."""

    def expr(self, e: ir.Expr) -> ir.Expr | None:
        out = super().expr(e)
        if out is not None:
            return out
        if e.dtype == dt.index and isinstance(e, ir.Binary) and e.op in ("add", "sub", "mul"):
            n = normalize(e)
            return None if n == e else n
        return None


def write_lanes(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` with its vectorized loops over register-sized temps written out lane by lane
    (see the module), for portable C; unchanged otherwise."""
    if not func.portable:
        return func
    return replace(func, body=_Lanes().visit(func.body))
