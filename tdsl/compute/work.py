"""How much arithmetic a pipeline does: the work a timing's rate is measured against.

`flops(pipeline, sizes)` counts the floating-point operations of the algorithm as
written, whatever the schedule: each arithmetic operation, comparison-free math call
and reduction step on a float dtype counts one, times the points it runs at. A
matmul `td.sum(A[i, k] * B[k, j], over=k)` is the usual 2*M*N*K (a multiply and an
accumulating add per point). Selects, casts, loads and integer index arithmetic
count nothing. When an extent is not a constant once the sizes are known (a
triangular bound), the count is unknown: None.
"""

from __future__ import annotations

from collections.abc import Mapping

from .definitions import Stage, Update
from .nodes import Access, Binary, Call, Const, Dim, Expr, Reduce, Size, Unary
from .pipeline import Pipeline
from .traversal import children

_ARITH = {"add", "sub", "mul", "truediv", "min", "max"}


def value(e: Expr, sizes: Mapping[str, int]) -> int | None:
    """An integer extent's value with the sizes bound, or None if it depends on a dim."""
    match e:
        case Const(v, _):
            return int(v)
        case Size(name):
            return sizes.get(name)
        case Binary(op, a, b) if op in ("add", "sub", "mul", "floordiv", "mod", "min", "max"):
            x, y = value(a, sizes), value(b, sizes)
            if x is None or y is None or (op in ("floordiv", "mod") and y == 0):
                return None
            return {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y,
                    "floordiv": lambda: x // y, "mod": lambda: x % y, "min": lambda: min(x, y),
                    "max": lambda: max(x, y)}[op]()
    return None


def _ops(e: Expr, sizes: Mapping[str, int]) -> float | None:
    """Float operations of one evaluation of `e` (its reductions' steps included)."""
    if isinstance(e, (Access, Dim, Const, Size)):
        return 0.0
    if isinstance(e, Reduce):
        steps = 1.0
        for ax in e.axes:
            lo, hi = value(ax.lo, sizes), value(ax.hi, sizes)
            if lo is None or hi is None:
                return None
            steps *= max(hi - lo, 0)
        body = _ops(e.body, sizes)
        if body is None:
            return None
        return steps * (body + (1.0 if e.dtype.is_float else 0.0))
    own = 1.0 if isinstance(e, (Binary, Unary, Call)) and e.dtype.is_float and (
        not isinstance(e, Binary) or e.op in _ARITH) else 0.0
    total = own
    for c in children(e):
        n = _ops(c, sizes)
        if n is None:
            return None
        total += n
    return total


def _points(extents: list[tuple[Expr | None, Expr]], sizes: Mapping[str, int]) -> float | None:
    n = 1.0
    for lo, hi in extents:
        a, b = (0 if lo is None else value(lo, sizes)), value(hi, sizes)
        if a is None or b is None:
            return None
        n *= max(b - a, 0)
    return n


def flops(pipeline: Pipeline, sizes: Mapping[str, int]) -> float | None:
    """Floating-point operations of one run of `pipeline` with these symbolic sizes
    (see the module's docstring); None when a domain's size is not known."""
    total = 0.0
    for x in pipeline.schedulables:
        if isinstance(x, Stage):
            pts = _points([(None, e) for e in x.shape], sizes)
            ops = _ops(x.expr, sizes)
        else:
            assert isinstance(x, Update)
            pts = _points([(ax.lo, ax.hi) for ax in x.axes], sizes)
            ops = _ops(x.value, sizes)
        if pts is None or ops is None:
            return None
        total += pts * ops
    return total


__all__ = ["flops", "value"]
