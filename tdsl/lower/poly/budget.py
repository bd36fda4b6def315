"""Bounds on the work one lowering may do, so that no schedule can make it hang.

- `MAX_ISL_OPERATIONS`: each step of the polyhedral analysis (bounds inference,
  legality, AST generation, the passes that prove loop extents and accesses)
  runs under isl's operation quota, a deterministic limit (the
  same on every machine). The benchmark kernels need 0.1-0.35 million
  operations and lower in well under a second; the limit leaves a fiftyfold
  margin. isl's operations are not all alike, so
- `MAX_ISL_SECONDS` bounds the analysis in processor time as well: a watchdog
  aborts isl `HARD_SLACK_SECONDS` before it, and the process doing the analysis
  is killed at it (see `bounded`). Processor time, not wall-clock time, so that
  a busy machine (a tuner building candidates side by side, a shared host)
  refuses nearly the same schedules as an idle one: waiting for a core no
  longer counts, though a core shared with a busy hyperthread still runs the
  analysis slower (up to about 1.6x here). `MAX_WALL_SECONDS` stops an analysis
  that waits instead of computing.
- `MAX_UNROLLED`: the number of copies of one statement that unrolling may make
  (the product of the trip counts of the unrolled loops around it).

Exceeding any is a `ScheduleError` that names what was being analysed or the
`unroll` primitives at fault. `isl_budget()` also serialises lowering between
threads: isl's operation counter belongs to its context, which all lowerings
share.

isl does not look at its abort flag everywhere: its AST generator and some
parametric integer programs have run for a minute past the watchdog. So
`bounded()` runs a whole lowering (and the check of a schedule) in a child
process forked from this one, which the kernel stops once it has used
`MAX_ISL_SECONDS` of processor time (RLIMIT_CPU): a hard limit, and a crash
inside isl ends the child, not the caller. The fork costs 7-8 ms per lowering (the demo kernels lower in
17-26 ms in process, 25-33 ms forked, with a 400 MB parent). Where `os.fork`
does not exist, or with `ISOLATE = False`, lowering runs in process under the
soft limits only.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import select
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar, cast

import islpy as isl

from ...errors import InternalError, ScheduleError, TdslError

if TYPE_CHECKING:
    from .nest import Statement

class AnalysisLimitError(ScheduleError):
    """A lowering stopped because the polyhedral analysis exceeded one of the limits
    above (operations, processor time or wall-clock time)."""


MAX_ISL_OPERATIONS = 20_000_000
# the share of both limits a lowering first spends on exact regions for mirror and wrap
# reads of stages before it falls back to whole-axis ones (`lower.lower_schedule`)
EXACT_REGION_SHARE = 0.2
MAX_ISL_SECONDS = 10.0  # processor seconds
MAX_WALL_SECONDS = 60.0
MAX_UNROLLED = 1024
ISOLATE = hasattr(os, "fork")
HARD_SLACK_SECONDS = 1.0

T = TypeVar("T")

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


def _thread_clock() -> Callable[[], float]:
    """Seconds of processor time the calling thread has used, as a function any thread
    may call (wall-clock time where the platform has no per-thread clock)."""
    try:
        clock = time.pthread_getcpuclockid(threading.get_ident())
        time.clock_gettime(clock)
    except (AttributeError, OSError):
        return time.monotonic
    return lambda: time.clock_gettime(clock)


class _Watchdog(threading.Thread):
    """Aborts isl's context once the thread that made it has used `seconds` of processor
    time, unless the lowering it belongs to (`run`) has ended by then."""

    POLL = 0.02

    def __init__(self, ctx: isl.Context, run: int, seconds: float):
        super().__init__(daemon=True, name="tdsl-isl-watchdog")
        self.ctx, self.run_id, self.seconds = ctx, run, seconds
        self.clock = _thread_clock()
        self.start_time = self.clock()
        self.done = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.done.wait(min(self.POLL, self.seconds)):
            if self.clock() - self.start_time >= self.seconds:
                if _RUN[0] == self.run_id:
                    self.ctx.abort()
                return

    def cancel(self) -> None:
        self.done.set()


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
        timer = _Watchdog(ctx, _RUN[0], max(MAX_ISL_SECONDS - HARD_SLACK_SECONDS, 0.5 * MAX_ISL_SECONDS))
        spent = failed = None
        try:
            yield
        except Exception as e:
            if isinstance(e, isl.Error) and not _exhausted(ctx):
                failed = e  # isl refused what tdsl asked of it: a bug, named below
            elif isinstance(e, ScheduleError) or not _exhausted(ctx):
                raise
            else:
                spent = _what_ran_out(ctx, limit)
        finally:
            _RUN[0] += 1
            timer.cancel()
            ctx.resume()
            ctx.set_max_operations(0)
            ctx.reset_operations()
            where = _FAILED_IN[0] if _FAILED_IN else what
            _FAILED_IN.clear()
        if failed is not None:
            raise InternalError(
                f"internal error: lowering {what}, isl failed in {where}: {failed}; please "
                "report this schedule (another split, tile or compute_at may avoid it)"
            ) from None
        if spent:  # raised here, without the isl error as its context
            raise AnalysisLimitError(
                f"lowering {what}: the polyhedral analysis of {where} exceeded {spent}; "
                "simplify the schedule there: fewer fused or nested split loops, or a "
                "compute_at at an outer loop")


def _what_ran_out(ctx: isl.Context, limit: int) -> str:
    if ctx.aborted():
        return (f"its time limit of {MAX_ISL_SECONDS:g} s of processor time "
                "(tdsl.lower.poly.budget.MAX_ISL_SECONDS)")
    return f"its limit of {limit:,} isl operations (tdsl.lower.poly.budget.MAX_ISL_OPERATIONS)"


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


def check_unrolling(statements: Iterable[Statement]) -> None:
    """Refuse a statement that unrolling would copy more than MAX_UNROLLED times
    (`statements`: the model's, with their bands' trip counts inferred)."""
    for s in statements:
        unrolled = [(b, b.extent) for b in s.bands if b.kind == "unrolled" and b.extent]
        copies = 1
        for _, n in unrolled:
            copies *= n
        if copies <= MAX_UNROLLED:
            continue
        primitives = [f"unroll({b.owner.name}, {b.loop.name!r}) ({n} iterations)"
                      for b, n in unrolled]
        raise ScheduleError(
            f"{' and '.join(primitives)} would make {copies:,} copies of the loop body "
            f"(the limit is {MAX_UNROLLED:,}, tdsl.lower.poly.budget.MAX_UNROLLED); unroll a loop "
            "of constant extent split off by a smaller factor, e.g. split(..., 8) and unroll "
            "the inner loop")


def bounded(what: str, fn: Callable[[], T], seconds: float | None = None) -> T:
    """`fn()` (a lowering or a schedule check of `what`) in a forked child process that
    is stopped once it has used `seconds` (default MAX_ISL_SECONDS) of processor time
    (or MAX_WALL_SECONDS have passed); its result or its exception comes back by
    pickle. In process when `ISOLATE` is off."""
    if not ISOLATE:
        return fn()
    limit = seconds or MAX_ISL_SECONDS
    with _LOCK:  # no lowering of another thread is inside isl while the context is copied
        r, w = os.pipe()
        pid = os.fork()
    if pid == 0:  # the child: compute, send, leave without running the parent's exit hooks
        try:
            os.close(r)
            _limit_child(limit)
            _send(w, fn)
        finally:
            os._exit(0)
    os.close(w)
    started = time.monotonic()
    try:
        data = _receive(r, started + max(MAX_WALL_SECONDS, limit))
    except BaseException:
        _kill(pid)
        raise
    finally:
        os.close(r)
    if data is None:
        _kill(pid)
        raise AnalysisLimitError(
            f"lowering {what}: the polyhedral analysis ran past {max(MAX_WALL_SECONDS, limit):g} s "
            f"(tdsl.lower.poly.budget.MAX_WALL_SECONDS) and was stopped; "
            "simplify the schedule: fewer fused or nested split loops, or a compute_at at "
            "an outer loop")
    _, status = os.waitpid(pid, 0)
    if not data:
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
            raise AnalysisLimitError(
                f"lowering {what}: the polyhedral analysis exceeded its time limit of {limit:g} s "
                f"of processor time (tdsl.lower.poly.budget.MAX_ISL_SECONDS) and was stopped; "
                "simplify the schedule: fewer fused or nested split loops, or a compute_at at "
                "an outer loop")
        how = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exit status {os.waitstatus_to_exitcode(status)}")
        raise TdslError(f"lowering {what}: the analysis process died ({how}) without an answer")
    ok, value = pickle.loads(data)
    if ok:
        return cast(T, value)  # what `fn` returned
    raise value


def _limit_child(seconds: float) -> None:
    """In the analysis process: the kernel ends it with SIGXCPU after `seconds` of processor
    time (whole seconds, rounded up; a fork starts at zero), without a core file."""
    import resource  # POSIX only, as os.fork is

    cpu = max(1, math.ceil(seconds))
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with contextlib.suppress(ValueError, OSError):
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        if hard == resource.RLIM_INFINITY or hard > cpu:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1 if hard == resource.RLIM_INFINITY
                                                     else min(cpu + 1, hard)))


def _send(fd: int, fn: Callable[[], object]) -> None:
    try:
        out = (True, fn())
    except BaseException as e:  # noqa: BLE001 - every outcome goes back to the parent
        out = (False, e)
    try:
        data = pickle.dumps(out)
    except Exception:  # noqa: BLE001 - an exception isl or a bug made that pickle refuses
        data = pickle.dumps((False, TdslError(f"{type(out[1]).__name__}: {out[1]}")))
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _receive(fd: int, deadline: float) -> bytes | None:
    """Everything the child writes until it closes the pipe; None past `deadline`."""
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


def _fresh_after_fork() -> None:
    """A forked child starts with no lowering of its own under way: a fresh lock (the
    parent's may be held by another thread) and a context without the parent's quota."""
    global _LOCK
    _LOCK = threading.RLock()
    _FAILED_IN.clear()
    ctx = isl.DEFAULT_CONTEXT
    ctx.resume()
    ctx.set_max_operations(0)
    ctx.reset_operations()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_after_fork)
