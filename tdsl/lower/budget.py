"""Bounds on the work one lowering may do, so that no schedule can make it hang.

- `MAX_ISL_OPERATIONS`: each step of the polyhedral analysis (bounds inference,
  legality, AST generation, the passes that prove loop extents and accesses)
  runs under isl's operation quota, a deterministic limit (the
  same on every machine). The benchmark kernels need 0.1-0.35 million
  operations and lower in well under a second; the limit leaves a fiftyfold
  margin. isl's operations are not all alike, so
- `MAX_ISL_SECONDS` bounds the analysis in time as well: a watchdog aborts isl
  past it.
- `MAX_UNROLLED`: the number of copies of one statement that unrolling may make
  (the product of the trip counts of the unrolled loops around it).

Exceeding any is a `ScheduleError` that names what was being analysed or the
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

MAX_ISL_OPERATIONS = 20_000_000
MAX_ISL_SECONDS = 10.0
MAX_UNROLLED = 1024

_LOCK = threading.RLock()
_FAILED_IN: list[str] = []  # the innermost step that an exception left, first one only
_RUN = [0]  # which lowering a watchdog belongs to


def _exhausted(ctx: isl.Context) -> bool:
    """True when `ctx` refuses work: aborted by the watchdog, or its operation quota used
    up (every counted operation fails from then on, so a small probe tells)."""
    if ctx.aborted():
        return True
    try:
        isl.Set.read_from_str(ctx, "{ [i, j] : 0 <= i <= j < 4 and i + j >= 2 }").lexmin()
    except isl.Error:
        return True
    return False


def _watchdog(ctx: isl.Context, run: int, seconds: float) -> threading.Timer:
    def stop():
        if _RUN[0] == run:
            ctx.abort()

    timer = threading.Timer(seconds, stop)
    timer.daemon = True
    timer.start()
    return timer


@contextlib.contextmanager
def isl_budget(what: str, limit: int | None = None) -> Iterator[None]:
    """Run the isl analysis of `what` (e.g. "the schedule of out") under `limit` operations
    (default: MAX_ISL_OPERATIONS) and MAX_ISL_SECONDS, both read at the call.

    Any failure inside that turns out to come from the exhausted budget becomes a
    ScheduleError naming the analysis step that ran out (see `step`)."""
    ctx = isl.DEFAULT_CONTEXT
    limit = limit or MAX_ISL_OPERATIONS
    with _LOCK:
        if ctx.get_max_operations():  # nested: the outer budget already applies
            yield
            return
        ctx.resume()
        ctx.set_max_operations(limit)
        ctx.reset_operations()
        _RUN[0] += 1
        timer = _watchdog(ctx, _RUN[0], MAX_ISL_SECONDS)
        spent = None
        try:
            yield
        except Exception as e:
            if isinstance(e, ScheduleError) or not _exhausted(ctx):
                raise
            spent = _what_ran_out(ctx, limit)
        finally:
            _RUN[0] += 1
            timer.cancel()
            ctx.resume()
            ctx.set_max_operations(0)
            ctx.reset_operations()
            where = _FAILED_IN[0] if _FAILED_IN else what
            _FAILED_IN.clear()
        if spent:  # raised here, without the isl error as its context
            raise ScheduleError(
                f"lowering {what}: the polyhedral analysis of {where} exceeded {spent}; "
                "simplify the schedule there: fewer fused or nested split loops, or a "
                "compute_at at an outer loop")


def _what_ran_out(ctx: isl.Context, limit: int) -> str:
    if ctx.aborted():
        return f"its time limit of {MAX_ISL_SECONDS:g} s (tdsl.lower.budget.MAX_ISL_SECONDS)"
    return f"its limit of {limit:,} isl operations (tdsl.lower.budget.MAX_ISL_OPERATIONS)"


@contextlib.contextmanager
def step(description: str) -> Iterator[None]:
    """Name the analysis step that runs inside (shown if the isl budget runs out); each
    step has the whole operation quota to itself (the time limit is for all of them)."""
    isl.DEFAULT_CONTEXT.reset_operations()
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
