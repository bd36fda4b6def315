"""One trial: build, check and time a candidate schedule in a process of its own.

`run_trial` is what an executor runs (a local process pool, or a Dask worker). It
forks a child for the candidate, so a crash (a signal) or a hang (past the
timeout of its phase) ends only the child and is recorded as the trial's status;
the worker, and the tuner, carry on.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import time
import traceback
import warnings
from typing import Any

import numpy as np

from ..errors import CompileError, ScheduleError, TdslError, VectorizationWarning
from .machine import fingerprint

# seconds a killed child gets to be reaped
_REAP_SECONDS = 5.0


def compare(got: Any, want: Any) -> str | None:
    """None when the candidate's outputs match the reference, else what differs.

    Integers and booleans must be equal; floats may differ by the rounding of a
    reordered reduction (relative 1e-3 of the output's largest magnitude), with NaN
    where the reference has NaN."""
    gots = got if isinstance(got, tuple) else (got,)
    wants = want if isinstance(want, tuple) else (want,)
    for n, (g, w) in enumerate(zip(gots, wants)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return f"output {n}: shape {g.shape}, expected {w.shape}"
        if not np.issubdtype(w.dtype, np.floating):
            bad = np.flatnonzero(g != w)
        else:
            finite = np.isfinite(w)
            scale = float(np.max(np.abs(w[finite]))) if finite.any() else 1.0
            tol = 1e-3 * max(scale, 1e-30)
            with np.errstate(invalid="ignore"):
                close = np.isclose(g, w, rtol=1e-3, atol=tol, equal_nan=True)
            bad = np.flatnonzero(~close)
        if bad.size:
            i = np.unravel_index(bad[0], w.shape)
            return (f"output {n}: {bad.size} of {w.size} elements differ from the reference, "
                    f"first at {tuple(int(x) for x in i)}: {g[i]!r}, expected {w[i]!r}")
    return None


def _measure(task: dict[str, Any], phase) -> dict[str, Any]:
    from ..api import build
    from ..schedule import Schedule

    sched = Schedule.from_json(task["schedule"], task["outputs"])
    phase("build")
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():  # a candidate is judged by its time
            warnings.simplefilter("ignore", VectorizationWarning)
            f = build(sched, target=task["target"], verify=False)
    except ScheduleError as e:
        return {"status": "illegal", "message": str(e)}
    except CompileError as e:
        return {"status": "build_failed", "message": str(e)}
    build_s = time.perf_counter() - t0
    phase("run")
    fault = task.get("fault")
    wrong = fault(task["knobs"]) if fault is not None else None
    got = f(**task["arrays"])
    if wrong == "wrong":
        got = tuple(g + 1 for g in got) if isinstance(got, tuple) else got + 1
    mismatch = compare(got, task["reference"])
    if mismatch is not None:
        return {"status": "wrong", "message": mismatch, "build_s": build_s}
    timing = f.benchmark(runs=task["runs"], warmup=1, min_seconds=task["min_seconds"],
                         **task["arrays"])
    return {"status": "ok", "time": timing.median, "build_s": build_s, "message": ""}


def _compare(task: dict[str, Any], phase) -> dict[str, Any]:
    """Build and check each of `task["schedules"]` (JSON texts), then time the correct ones
    in `rounds` interleaved rounds (a disturbance of the machine hits them all alike):
    {"status": "ok", "times": [median of its round medians, or None when it failed],
    "messages": [...]}."""
    import statistics

    from ..api import build
    from ..schedule import Schedule

    kernels: list[Any] = []
    messages: list[str] = []
    for n, text in enumerate(task["schedules"]):
        phase(f"build {n}")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", VectorizationWarning)
                f = build(Schedule.from_json(text, task["outputs"]), target=task["target"],
                          verify=False)
            mismatch = compare(f(**task["arrays"]), task["reference"])
        except TdslError as e:
            f, mismatch = None, f"{type(e).__name__}: {e}"
        kernels.append(f if mismatch is None else None)
        messages.append(mismatch or "")
    rounds: list[list[float]] = [[] for _ in kernels]
    for r in range(task["rounds"]):
        phase(f"round {r}")
        for n, f in enumerate(kernels):
            if f is not None:
                t = f.benchmark(runs=task["runs"], warmup=1, min_seconds=task["min_seconds"],
                                **task["arrays"])
                rounds[n].append(t.median)
    times = [statistics.median(ts) if ts else None for ts in rounds]
    return {"status": "ok", "times": times, "messages": messages}


def _send(fd: int, msg: tuple[str, Any]) -> None:
    data = pickle.dumps(msg)
    view = memoryview(struct.pack("<I", len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _child(fd: int, task: dict[str, Any]) -> None:
    try:
        work = _compare if "schedules" in task else _measure
        res = work(task, lambda name: _send(fd, ("phase", name)))
    except TdslError as e:
        res = {"status": "error", "message": f"{type(e).__name__}: {e}"}
    except BaseException as e:  # noqa: BLE001 - any failure becomes the trial's record
        res = {"status": "error",
               "message": "".join(traceback.format_exception(e))[-2000:]}
    _send(fd, ("result", res))


class _Reader:
    """Length-prefixed pickled messages from the child, with a deadline."""

    def __init__(self, fd: int):
        self.fd, self.buf = fd, b""

    def next(self, deadline: float) -> tuple[str, Any] | None:
        """The next message; None at end of file; raises TimeoutError past the deadline."""
        while True:
            if len(self.buf) >= 4:
                (n,) = struct.unpack("<I", self.buf[:4])
                if len(self.buf) >= 4 + n:
                    msg = pickle.loads(self.buf[4:4 + n])
                    self.buf = self.buf[4 + n:]
                    return msg
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    return None
                self.buf += chunk


def _reap(pid: int, kill: bool) -> int:
    if kill:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    end = time.monotonic() + _REAP_SECONDS
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done or time.monotonic() > end:
            return status
        time.sleep(0.01)


def run_trial(task: dict[str, Any]) -> dict[str, Any]:
    """Build, check and time one candidate in a forked child; never raises for what the
    candidate does. task: outputs, schedule (JSON text), target, arrays, reference,
    knobs, timeout (seconds for the build, and again for the run), build_timeout
    (optional: seconds for the build instead), runs, min_seconds,
    and `fault`, a test hook: a picklable callable given the knobs in the child just
    before the run (it may crash or hang the child; returning "wrong" perturbs the
    output).

    A task with `schedules` (JSON texts) and `rounds` instead of `schedule` compares
    them: each built and checked, then timed in interleaved rounds; the result's
    "times" has a median per schedule (None for one that failed: "messages" says why),
    each phase (a build, a round) within `timeout`."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: measure, report, and leave without running any cleanup
        try:
            os.close(r)
            _child(w, task)
        finally:
            os._exit(0)
    os.close(w)
    reader, phase = _Reader(r), "start"
    timeout = float(task["timeout"])
    deadline = time.monotonic() + timeout
    result: dict[str, Any] | None = None
    try:
        while result is None:
            msg = reader.next(deadline)
            if msg is None:
                break
            kind, value = msg
            if kind == "phase":
                limit = float(task.get("build_timeout", timeout)) if value == "build" else timeout
                phase, deadline = value, time.monotonic() + limit
            else:
                result = value
    except TimeoutError:
        _reap(pid, kill=True)
        limit = float(task.get("build_timeout", timeout)) if phase == "build" else timeout
        cut = " (cut early: several times the slowest build so far)" if limit < timeout else ""
        result = {"status": "timeout",
                  "message": f"the {phase} phase took longer than {limit:g} s{cut}"}
    else:
        status = _reap(pid, kill=result is None)
        if result is None:
            if os.WIFSIGNALED(status):
                why = f"killed by signal {signal.Signals(os.WTERMSIG(status)).name}"
            else:
                why = f"exited with status {os.WEXITSTATUS(status)}"
            result = {"status": "crashed", "message": f"the {phase} phase {why}"}
    finally:
        os.close(r)
    result.setdefault("message", "")
    result["machine"] = fingerprint()
    return result
