"""Reassociated reduction loops: partial results per iteration, combined after.

`vectorize(C, k, reassociate=True)` / `parallel(...)` on a reduction loop
becomes

    for l in 0..W: part[l] = identity
    for k in lo..hi (vectorized|parallel): part[k - lo] = part[k - lo] op value
    for l in 0..W: C[I] = C[I] op part[l]

Guarantees: no loop keeps its `reassociate` mark; every iteration of a
marked loop writes its own element of a private buffer, so the loop carries
no dependence; the result is the reduction with its terms regrouped (exact
for integers and min/max, rounded differently for float sums and products).
A marked loop whose body is not one accumulation into one element that does
not change inside it (besides writes to temps allocated inside it) is a
ScheduleError naming the primitive.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import ScheduleError
from .. import ir
from ..build import binary, const, index, sub
from ..rewrite import Rewriter, bound_names, expr_vars, walk_stmts


def privatize(loop: ir.For, buf: ir.Buffer, op: ir.BinaryOp, identity: int | float | bool,
              what: str) -> ir.Stmt:
    """Rewrite a reassociated reduction loop (see the module docstring)."""
    # the one accumulation; any other store writes a temp private to the iteration (the
    # accumulator of a reduction inside the value)
    private = {x.buffer.name for x in walk_stmts(loop.body) if isinstance(x, ir.Allocate)}
    stores = [x for x in walk_stmts(loop.body)
              if isinstance(x, ir.Store) and x.buffer.name not in private]
    store = stores[0] if len(stores) == 1 else None
    ok = (store is not None and store.buffer == buf and isinstance(store.value, ir.Binary)
          and store.value.op == op and store.value.a == ir.Load(buf, store.indices))
    if ok and store is not None:
        used = set().union(*(expr_vars(i) for i in store.indices))
        ok = not (used & (bound_names(loop.body) | {loop.var}))
    if not ok:
        raise ScheduleError(
            f"{what}: reassociate=True needs every iteration of loop {loop.var} to accumulate "
            f"into one element of {buf.name} that does not change inside it; put the loops over "
            f"{buf.name}'s own dims outside {loop.var}")
    assert store is not None and isinstance(store.value, ir.Binary)
    value = store.value
    width = loop.max_extent
    assert width is not None, f"reassociated loop {loop.var} without a constant extent"
    part = ir.Buffer(f"{buf.name}_{loop.var}_part", buf.dtype, (index(width),), "temp")
    lane = (sub(ir.Var(loop.var), loop.start),)

    class _ToPart(Rewriter):
        def stmt(self, s: ir.Stmt) -> ir.Stmt | None:
            if s is store or s == store:
                return ir.Store(part, lane, binary(op, ir.Load(part, lane), value.b))
            return None

    l_var = f"{loop.var}_part"
    init = ir.For(l_var, index(0), index(width), ir.ForKind.SERIAL,
                  ir.Store(part, (ir.Var(l_var),), const(identity, buf.dtype)), width)
    main = ir.For(loop.var, loop.start, loop.end, loop.kind, _ToPart().visit(loop.body), width)
    acc = ir.Load(buf, store.indices)
    combine = ir.For(l_var, index(0), index(width), ir.ForKind.SERIAL,
                     ir.Store(buf, store.indices,
                              binary(op, acc, ir.Load(part, (ir.Var(l_var),)))),
                     width)
    return ir.Allocate(part, ir.Block((init, main, combine)))


class _Reassociate(Rewriter):
    def stmt(self, s: ir.Stmt) -> ir.Stmt | None:
        if isinstance(s, ir.For) and s.reassociate is not None:
            m = s.reassociate
            return privatize(replace(s, reassociate=None), m.buffer, m.op, m.identity, m.what)
        return None


def reassociate(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` with every loop marked for reassociation privatized (see the module)."""
    return replace(func, body=_Reassociate().visit(func.body))
