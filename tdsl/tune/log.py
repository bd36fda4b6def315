"""The tuning log: a JSON-lines text file, one trial per line, meant for version control.

A record:

    {"v": 1,
     "key": {"algorithm": "<sha256 of the pipeline's definition>", "outputs": ["C"],
             "target": "c", "sizes": {"N": 1024}},
     "machine": {"cpu": "...", "isa": "avx512f", "threads": 2, "arch": "x86_64"},
     "knobs": {"C.ti": 8, ...},
     "status": "ok",              # or rejected, illegal, build_failed, timeout, crashed, wrong, error
     "time": 0.00123,             # median seconds per call (null unless ok)
     "message": "",               # why a trial failed
     "schedule": {...},           # the candidate's Schedule.to_json(), as an object
     "at": "2026-11-24T16:00:00+00:00",
     "build_s": 0.31,             # seconds to lower and compile it (ok records)
     "phase": "search",           # or "confirm" (a leader re-timed), "transfer" (a
                                  # record of another machine, or the auto-scheduler's
                                  # choice, measured here by Schedule.from_log)
     "chosen": true,              # the winner of a confirmation or transfer step
     "comparisons": [0.00121, 0.00124]}  # a confirm record's time in each comparison
                                  # that ran (null where it failed); "time": their mean

Records are appended and flushed one at a time, so a tuner or worker that dies
loses no trial already recorded.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..compute.definitions import Stage
from ..compute.pipeline import Pipeline
from ..errors import TuningError
from .machine import fingerprint, same_machine

VERSION = 1
STATUSES = ("ok", "rejected", "illegal", "build_failed", "timeout", "crashed", "wrong", "error")


def definition_text(pipeline: Pipeline) -> str:
    """The pipeline's definition as canonical text: every tensor with its dims, extents,
    dtype and definition, and every update, in dependency order."""
    lines = []
    for t in pipeline.tensors:
        shape = ", ".join(f"{d.name}: {e!r}" for d, e in zip(t.dims, t.shape))
        kind = "stage" if isinstance(t, Stage) else "input"
        body = f" = {t.expr!r}" if isinstance(t, Stage) else ""
        lines.append(f"{kind} {t.name} {{{shape}}} {t.dtype!r}{body}")
        if isinstance(t, Stage):
            for u in pipeline.updates_of(t):
                lines.append(f"update {u!r}")
    return "\n".join(lines)


def algorithm_hash(pipeline: Pipeline) -> str:
    """A content hash of the pipeline's definition, the same in every process."""
    return hashlib.sha256(definition_text(pipeline).encode()).hexdigest()[:32]


def make_key(pipeline: Pipeline, target: str, sizes: dict[str, int]) -> dict[str, Any]:
    """What a record is about: the algorithm, the target and the symbolic sizes."""
    return {"algorithm": algorithm_hash(pipeline), "outputs": [o.name for o in pipeline.outputs],
            "target": target, "sizes": {k: int(v) for k, v in sorted(sizes.items())}}


def _check_record(rec: object, where: str) -> dict[str, Any]:
    if not isinstance(rec, dict):
        raise TuningError(f"{where}: a record must be a JSON object, got {type(rec).__name__}")
    if rec.get("v") != VERSION:
        raise TuningError(f"{where}: record version {rec.get('v')!r} is not {VERSION}")
    key = rec.get("key")
    if not (isinstance(key, dict) and isinstance(key.get("algorithm"), str)
            and isinstance(key.get("target"), str) and isinstance(key.get("sizes"), dict)):
        raise TuningError(f'{where}: "key" must hold "algorithm", "target" and "sizes"')
    if rec.get("status") not in STATUSES:
        raise TuningError(f"{where}: status {rec.get('status')!r} is not one of {', '.join(STATUSES)}")
    if not isinstance(rec.get("knobs"), dict):
        raise TuningError(f'{where}: "knobs" must be an object of knob values')
    t = rec.get("time")
    if rec["status"] == "ok" and (isinstance(t, bool) or not isinstance(t, (int, float))
                                  or not t > 0 or t != t):
        raise TuningError(f"{where}: a record with status ok needs a positive time, got {t!r}")
    if rec["status"] == "ok" and not isinstance(rec.get("schedule"), dict):
        raise TuningError(f'{where}: a record with status ok needs its "schedule" object')
    return rec


def read(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every record of a log, checked; a missing file is an empty log.

    A malformed line raises TuningError naming the file and the line, except a last
    line cut short (a writer killed mid-line), which is skipped."""
    p = Path(path)
    if not p.exists():
        return []
    if p.is_dir():
        raise TuningError(f"tuning log {p} is a directory; give the path of a .jsonl file")
    records = []
    with open(p, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            if n == len(lines) and not line.endswith("}"):
                break  # the last line of a writer that was stopped mid-write
            raise TuningError(f"tuning log {p}, line {n}: not JSON ({e.msg}); each line must be "
                              "one trial record as written by td.tune") from None
        records.append(_check_record(rec, f"tuning log {p}, line {n}"))
    return records


def append(path: str | os.PathLike[str], records: Iterable[dict[str, Any]]) -> None:
    """Append records, each one line, flushed to disk before returning."""
    with open(path, "a", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n")
        f.flush()
        os.fsync(f.fileno())


def matching(records: Iterable[dict[str, Any]], key: dict[str, Any]) -> list[dict[str, Any]]:
    """The records for this algorithm, target and sizes."""
    return [r for r in records if r["key"].get("algorithm") == key["algorithm"]
            and r["key"].get("target") == key["target"] and r["key"].get("sizes") == key["sizes"]]


def best(records: list[dict[str, Any]], machine: dict[str, object] | None = None
         ) -> dict[str, Any] | None:
    """The best successful record: among those measured on `machine` (this one by
    default) when there are any, else among all; the last one marked chosen (by a
    confirmation or a transfer step, which re-timed the leaders side by side) when
    there is one, else the fastest."""
    ok = [r for r in records if r["status"] == "ok"]
    here = [r for r in ok if same_machine(r.get("machine"), machine or fingerprint())]
    pool = here or ok
    chosen = [r for r in pool if r.get("chosen")]
    if chosen:
        return chosen[-1]
    return min(pool, key=lambda r: r["time"]) if pool else None


def describe_keys(records: list[dict[str, Any]]) -> str:
    """The keys a log holds, for an error message."""
    seen = []
    for r in records:
        k = r["key"]
        text = (f"{'/'.join(k.get('outputs', ['?']))} target={k['target']} "
                f"sizes={k['sizes']} algorithm={k['algorithm'][:8]}")
        if text not in seen:
            seen.append(text)
    return "; ".join(seen[:8]) + (" ..." if len(seen) > 8 else "") if seen else "none"


def schedule_from_log(path, outputs, target: str = "c", *, transfer: bool = True,
                      arrays: dict[str, Any] | None = None, **sizes: int):
    """The best recorded schedule for these outputs, target and sizes (see
    td.Schedule.from_log). On a machine the log has no record of, with `transfer`, the
    best records of other machines are re-measured here against the auto-scheduler's
    choice (on `arrays`, or on made-up inputs of the sizes given) and the faster kept
    (`tdsl.tune.transfer`)."""
    from ..schedule import Schedule

    pipeline = Pipeline(outputs)
    missing = [s.name for s in pipeline.sizes if s.name not in sizes]
    if missing:
        raise TuningError(
            f"Schedule.from_log: give the symbolic sizes the record is for, e.g. "
            f"{', '.join(f'{n}=1024' for n in missing)} (records are kept per size)")
    unknown = sorted(set(sizes) - {s.name for s in pipeline.sizes})
    if unknown:
        valid = ", ".join(s.name for s in pipeline.sizes) or "none"
        raise TuningError(f"Schedule.from_log: {', '.join(unknown)} is not a size of this "
                          f"pipeline; its sizes are: {valid}")
    from . import transfer as tr

    records = read(path)
    key = make_key(pipeline, target, sizes)
    found = matching(records, key) + matching(read(tr.companion(path)), key)
    rec = best(found)
    if rec is not None and transfer and not same_machine(rec.get("machine"), fingerprint()):
        return tr.transfer(path, pipeline.outputs, target, sizes, key, found, arrays)
    if rec is None:
        outs = "/".join(key["outputs"])
        raise TuningError(
            f"tuning log {path} has no successful trial of {outs} for target={target!r} "
            f"sizes={key['sizes']} (algorithm {key['algorithm'][:8]}); it holds: "
            f"{describe_keys(records)}. Tune it first with td.tune(..., log={str(path)!r})")
    return Schedule.from_json(json.dumps(rec["schedule"]), pipeline.outputs)
