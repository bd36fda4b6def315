"""Tuning logs that travel: reading another machine's records on this one.

A log records every trial with the fingerprint of the machine that measured it. On
a machine the log has records of, `Schedule.from_log` returns that machine's best.
On a machine it has none of, another machine's best can be slower than what the
auto-scheduler chooses here (a register tile for 32 registers on a machine with 16,
a strip for a larger cache), so `from_log` runs a short transfer step instead:

1. the auto-scheduler's choice for this machine, and the `TOP` fastest distinct
   schedules the log holds from other machines, are built, checked against the
   reference, and timed in `ROUNDS` interleaved rounds, in a child process with a
   time limit per build and per round (a few seconds in all for most kernels);
2. a record of another machine is chosen only when it is faster than the
   auto-scheduler's choice by more than `MARGIN` (noise); else the auto-scheduler's
   choice is (and so when the measurement fails);
3. the measurements are appended to the log with this machine's fingerprint, the
   one chosen marked `"chosen": true`, so the next `from_log` here reads it back
   without measuring. A log that cannot be written (installed read-only with an
   application) keeps its measurements in a companion file in the user's cache
   directory, which `from_log` reads too.
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime
import hashlib
import json
import multiprocessing
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..compute.pipeline import Pipeline
from .machine import fingerprint, fingerprint_id, same_machine

TOP = 3  # records of other machines re-measured here
ROUNDS = 3  # interleaved timing rounds
MARGIN = 0.03  # a record of another machine must beat the auto-scheduler by this much
TIMEOUT = 60.0  # seconds per build and per round of the transfer step

# (outputs, target, schedules as JSON texts, arrays) -> a time per schedule or None
Measure = Callable[[Any, str, list[str], dict[str, np.ndarray]], list[float | None]]


def decide(auto: float | None, others: list[float | None], margin: float = MARGIN) -> int | None:
    """Which schedule to use: the index into `others` of the fastest, when it beats the
    auto-scheduler's time `auto` by more than `margin` (or `auto` failed); else None,
    the auto-scheduler's choice."""
    timed = [(t, n) for n, t in enumerate(others) if t is not None]
    if not timed:
        return None
    t, n = min(timed)
    if auto is None or t < auto * (1 - margin):
        return n
    return None


AGREE = 0.01  # ... or by this much in each of two independent comparisons


def decide_repeated(comparisons: list[list[float | None]], d: int, margin: float = MARGIN,
                    agree: float = AGREE) -> int | None:
    """Which of a few schedules to use, from independent comparisons of them all (each a
    list of times, None where one failed, from a process of its own): the index of the
    one whose smaller gain over the schedule at `d` (the defaults), across the
    comparisons, is the largest, when that gain exceeds `agree`; else None (the defaults).

    A gain that holds in two processes is a property of the code; one seen in a single
    process can be its layout there (a leader that tied with the defaults in one process
    ran 8% slower beside them in another, softmax 4096^2, LLVM). With fewer than two
    comparisons in which the defaults ran, `decide` on the one there is (`margin`)."""
    ran = [c for c in comparisons if c[d] is not None]
    if len(ran) < 2:
        times = ran[0] if ran else comparisons[0] if comparisons else []
        # the defaults' own slot is None, so `decide` never picks it
        return decide(times[d] if times else None,
                      [None if n == d else t for n, t in enumerate(times)], margin)
    best: tuple[float, int] | None = None
    for n in range(len(ran[0])):
        if n == d or any(c[n] is None for c in ran):
            continue
        gain = min(c[d] / c[n] for c in ran) - 1.0  # type: ignore[operator]  # both ran
        if best is None or gain > best[0]:
            best = (gain, n)
    return best[1] if best is not None and best[0] > agree else None


def foreign_candidates(records: list[dict[str, Any]], top: int = TOP) -> list[dict[str, Any]]:
    """The `top` fastest successful records of other machines, one per distinct schedule,
    each machine's chosen record first (confirmed, so its time is the least lucky)."""
    here = fingerprint()
    ok = [r for r in records if r["status"] == "ok" and not same_machine(r.get("machine"), here)]
    ranked = sorted(ok, key=lambda r: (not r.get("chosen"), r["time"]))
    out, seen = [], set()
    for r in ranked:
        text = json.dumps(r["schedule"], sort_keys=True)
        if text not in seen:
            seen.add(text)
            out.append(r)
        if len(out) == top:
            break
    return out


def synthetic_inputs(pipeline: Pipeline, sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """Inputs to time a kernel on when the caller gives none: uniform floats in [-1, 1),
    integers and booleans zero (a data-dependent index stays in range)."""
    from .auto import extent_value

    rng = np.random.default_rng(0)
    out = {}
    for t in pipeline.inputs:
        shape = tuple(extent_value(e, sizes) for e in t.shape)
        dtype = t.dtype.np
        if t.dtype.is_float:
            out[t.name] = rng.uniform(-1, 1, shape).astype(dtype)
        else:
            out[t.name] = np.zeros(shape, dtype)
    return out


def measure_here(outputs, target: str, schedules: list[str], arrays: dict[str, np.ndarray]
                 ) -> list[float | None]:
    """Each schedule's median time on this machine over interleaved rounds, measured in a
    fresh child process (a crash or a hang there fails the step, not the caller); None
    for a schedule that failed, all None when the step did."""
    from ..compute.binding import bind_arguments
    from .measure import run_trial
    from .tuner import _reference

    pipeline = Pipeline(outputs)
    sizes = dict(bind_arguments(pipeline, arrays, allow_outputs=False).sizes)
    task = {"outputs": pipeline.outputs, "target": target, "arrays": arrays,
            "reference": _reference(pipeline.outputs, arrays, sizes), "schedules": schedules,
            "rounds": ROUNDS, "runs": 5, "min_seconds": 0.05, "timeout": TIMEOUT,
            "knobs": {}}
    pool = cf.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver"))
    try:
        result = pool.submit(run_trial, task).result()
    except Exception:  # noqa: BLE001 - a lost worker: the step failed
        return [None] * len(schedules)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if result.get("status") != "ok":
        return [None] * len(schedules)
    return list(result["times"])


def companion(path: str | os.PathLike[str]) -> Path:
    """Where the measurements of a log that cannot be written are kept: a file in the
    user's cache directory named after the log's absolute path."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    digest = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:16]
    return Path(base) / "tdsl" / "logs" / f"{Path(path).stem}-{digest}.jsonl"


def _append(path, records: list[dict[str, Any]]) -> None:
    from . import log as tlog

    try:
        tlog.append(path, records)
        return
    except OSError:
        pass
    other = companion(path)
    try:
        other.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tlog.append(other, records)
    except OSError:
        pass  # nowhere to keep them: the next from_log measures again


def transfer(path, outputs, target: str, sizes: dict[str, int], key: dict[str, Any],
             records: list[dict[str, Any]], arrays: dict[str, np.ndarray] | None = None,
             measure: Measure | None = None):
    """The transfer step (see the module's docstring): a Schedule, never slower than the
    auto-scheduler's choice beyond noise."""
    from ..schedule import Schedule
    from . import log as tlog
    from .auto import autoschedule

    pipeline = Pipeline(outputs)
    auto = autoschedule(pipeline.outputs, target, machine=None, **sizes)
    cands = foreign_candidates(records)
    if not cands:
        return auto
    arrays = arrays if arrays is not None else synthetic_inputs(pipeline, sizes)
    texts = [auto.to_json()] + [json.dumps(r["schedule"]) for r in cands]
    times = (measure or measure_here)(pipeline.outputs, target, texts, arrays)
    pick = decide(times[0], times[1:])
    here = fingerprint()
    at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    out = []
    origins = ["auto"] + [fingerprint_id(r.get("machine") or {}) for r in cands]
    knobs = [{}] + [r["knobs"] for r in cands]
    for n, (text, t) in enumerate(zip(texts, times)):
        chosen = n == (0 if pick is None else pick + 1)
        out.append({"v": tlog.VERSION, "key": key, "machine": here, "knobs": knobs[n],
                    "status": "ok" if t is not None else "error", "time": t,
                    "message": "" if t is not None else "failed in the transfer step",
                    "schedule": json.loads(text), "phase": "transfer", "origin": origins[n],
                    "chosen": chosen and t is not None, "at": at})
    _append(path, out)
    if pick is None:
        return auto
    return Schedule.from_json(texts[pick + 1], pipeline.outputs)
