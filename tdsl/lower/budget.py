"""Bounds on the work one lowering may do, so that no schedule can make it hang.

Two limits, both deterministic (the same on every machine):

- `MAX_ISL_OPERATIONS`: the polyhedral analysis (bounds inference, legality,
  AST generation) runs under isl's operation quota. The benchmark kernels need
  0.1-0.4 million operations and lower in well under a second; the limit leaves
  a hundredfold margin and stops an analysis at roughly ten seconds.
- `MAX_UNROLLED`: the number of copies of one statement that unrolling may make
  (the product of the trip counts of the unrolled loops around it).

Exceeding either is a `ScheduleError` that names what was being analysed or the
`unroll` primitives at fault. `isl_budget()` also serialises lowering between
threads: isl's operation counter belongs to its context, which all lowerings
share.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import islpy as isl

from ..errors import ScheduleError

MAX_ISL_OPERATIONS = 40_000_000
MAX_UNROLLED = 1024

_LOCK = threading.RLock()
_FAILED_IN: list[str] = []  # the innermost step that an exception left, first one only


def _quota_exhausted(ctx: isl.Context) -> bool:
    """True when `ctx` refuses work because its operation quota is used up (every
    counted operation fails from then on, so a small probe tells)."""
    try:
        isl.Set.read_from_str(ctx, "{ [i, j] : 0 <= i <= j < 4 and i + j >= 2 }").lexmin()
    except isl.Error:
        return True
    return False


@contextlib.contextmanager
def isl_budget(what: str, limit: int | None = None) -> Iterator[None]:
    """Run the isl analysis of `what` (e.g. "the schedule of out") under `limit` operations
    (default: MAX_ISL_OPERATIONS, read at the call).

    Any failure inside that turns out to come from the exhausted quota becomes a
    ScheduleError naming the analysis step that ran out (see `step`)."""
    ctx = isl.DEFAULT_CONTEXT
    limit = limit or MAX_ISL_OPERATIONS
    with _LOCK:
        outer = ctx.get_max_operations()
        if outer:  # nested: the outer budget already applies
            yield
            return
        ctx.set_max_operations(limit)
        ctx.reset_operations()
        try:
            yield
        except Exception as e:
            if isinstance(e, ScheduleError) or not _quota_exhausted(ctx):
                raise
            where = _FAILED_IN[0] if _FAILED_IN else what
            raise ScheduleError(
                f"lowering {what}: the polyhedral analysis of {where} exceeded its limit of "
                f"{limit:,} isl operations (tdsl.lower.budget.MAX_ISL_OPERATIONS); simplify the "
                "schedule there: fewer fused or nested split loops, or a compute_at at an outer "
                "loop") from None
        finally:
            ctx.set_max_operations(0)
            ctx.reset_operations()
            _FAILED_IN.clear()


@contextlib.contextmanager
def step(description: str) -> Iterator[None]:
    """Name the analysis step that runs inside (shown if the isl budget runs out)."""
    try:
        yield
    except Exception:
        if not _FAILED_IN:
            _FAILED_IN.append(description)
        raise


def check_unrolling(statements) -> None:
    """Refuse a statement that unrolling would copy more than MAX_UNROLLED times
    (`statements`: the model's, with their bands' trip counts inferred)."""
    for s in statements:
        unrolled = [b for b in s.bands if b.kind == "unrolled" and b.extent]
        copies = 1
        for b in unrolled:
            copies *= b.extent
        if copies <= MAX_UNROLLED:
            continue
        primitives = [f"unroll({b.owner.name}, {b.loop.name!r}) ({b.extent} iterations)"
                      for b in unrolled]
        raise ScheduleError(
            f"{' and '.join(primitives)} would make {copies:,} copies of the loop body "
            f"(the limit is {MAX_UNROLLED:,}, tdsl.lower.budget.MAX_UNROLLED); unroll a loop "
            "of constant extent split off by a smaller factor, e.g. split(..., 8) and unroll "
            "the inner loop")
