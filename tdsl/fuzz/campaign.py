"""A fuzz campaign: trials on a worker pool until the time or trial budget is
spent, a JSON line per trial in `OUT/log.jsonl`, a reproducer per finding in
`OUT/`, the distinct findings shrunk, and a summary.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import render
from .case import FAILURES, SLOW_LOWERING
from .pool import Pool


@dataclass
class Options:
    """What `python -m tdsl.fuzz` was asked for."""

    target: str = "c"
    seed: int = 0
    minutes: float | None = None
    trials: int | None = None
    jobs: int = 1
    sanitize: bool = False
    sanitize_every: int = 4
    out: str = "fuzz-findings"
    timeout: float = 60.0
    max_stages: int = 5
    shrink: int = 5  # distinct findings to shrink
    shrink_seconds: float = 240.0
    quiet: bool = False
    exclude: tuple = ()  # generator features to leave out (gen.FEATURES)
    auto_every: int = 0  # every Nth case scheduled by td.autotemplate, knobs at random (0: none)


@dataclass
class Summary:
    """Counts per outcome class, slow lowerings, findings and the rate."""

    counts: Counter = field(default_factory=Counter)
    slow: int = 0
    grouped: int = 0  # trials whose kernel does grouped products as x86 instructions
    transposed: int = 0  # trials whose kernel copies a block to its transpose in tiles
    findings: list = field(default_factory=list)
    seconds: float = 0.0
    start: float = field(default_factory=time.monotonic)

    @property
    def trials(self) -> int:
        return sum(self.counts.values())

    def line(self) -> str:
        c = self.counts
        seconds = self.seconds or time.monotonic() - self.start
        rate = self.trials / max(seconds / 60, 1e-9)
        return (f"trials {self.trials}, rejected {c['rejected']}, exact {c['exact']}, "
                f"wrong {c['wrong']}, crashed {c['crashed']}, timed out {c['timed out']}, "
                f"error {c['error']}, sanitizer {c['sanitizer']}, slow lowering {self.slow}, "
                f"grouped products {self.grouped}, transposing copies {self.transposed}; "
                f"{rate:.1f} trials/minute")


def tasks(opts: Options):
    index = 0
    while opts.trials is None or index < opts.trials:
        yield {"id": index, "seed": opts.seed, "index": index, "target": opts.target,
               "max_stages": opts.max_stages, "exclude": list(opts.exclude),
               "sanitize": opts.sanitize and index % opts.sanitize_every == 0,
               "auto": bool(opts.auto_every) and index % opts.auto_every == opts.auto_every - 1}
        index += 1


def finding_name(task, result) -> str:
    cls = result["class"].replace(" ", "-")
    return f"{cls}-{task['target']}-seed{task['seed']}-case{task['index']}"


def lowering_seconds(result: dict) -> float:
    """The processor time the trial's lowering took (its wall-clock time in older logs)."""
    cpu = result.get("lower_cpu_s")
    return cpu if cpu is not None else (result.get("lower_s") or 0)


def record(opts: Options, summary: Summary, log, task, spec, result) -> None:
    cls = result["class"]
    summary.counts[cls] += 1
    summary.grouped += bool(result.get("grouped"))
    summary.transposed += bool(result.get("transposed"))
    if lowering_seconds(result) > SLOW_LOWERING and spec is not None:
        summary.slow += 1
        info = {"class": f"{cls}, slow lowering ({lowering_seconds(result)} s of processor time)",
                "target": task["target"],
                "seed": task["seed"], "case": task["index"]}
        name = f"slow-lowering-{task['target']}-seed{task['seed']}-case{task['index']}.py"
        (Path(opts.out) / name).write_text(render.reproducer(spec, info))
    entry = {"seed": task["seed"], "index": task["index"], "target": task["target"],
             "sanitize": task.get("sanitize", False), "auto": task.get("auto", False), **{k: v for k, v in result.items()
                                                          if k != "detail"},
             "detail": str(result.get("detail", ""))[:300]}
    log.write(json.dumps(entry) + "\n")
    log.flush()
    if cls in FAILURES and spec is not None:
        path = Path(opts.out) / (finding_name(task, result) + ".py")
        info = {"class": cls, "target": task["target"], "seed": task["seed"],
                "case": task["index"], "detail": result.get("detail", "")}
        path.write_text(render.reproducer(spec, info))
        summary.findings.append((task, spec, result, path))
    if not opts.quiet and (cls in FAILURES or summary.trials % 25 == 0):
        first = str(result.get("detail", "")).strip().splitlines()[:1]
        print(f"[{summary.trials}] case {task['index']}: {cls} {first[0][:160] if first else ''}"
              if cls in FAILURES else f"[{summary.trials}] {summary.line()}", flush=True)


def run(opts: Options) -> Summary:
    """Run a campaign; returns its summary (also printed unless quiet)."""
    Path(opts.out).mkdir(parents=True, exist_ok=True)
    summary = Summary()
    start = time.monotonic()
    deadline = start + opts.minutes * 60 if opts.minutes else None
    with open(Path(opts.out) / "log.jsonl", "a") as log, \
            Pool(opts.jobs, opts.timeout) as pool:
        pool.run(tasks(opts), lambda t, s, r: record(opts, summary, log, t, s, r), deadline)
        summary.seconds = time.monotonic() - start
        if opts.shrink and summary.findings:
            from .shrink import shrink_findings

            shrink_findings(pool, opts, summary.findings)
    if not opts.quiet:
        print(summary.line())
        for _, _, result, path in summary.findings:
            print(f"  {result['class']}: {path}")
    return summary
