"""Tune the benchmark kernels with td.tune and record the trials in tuned.jsonl.

    python benchmarks/tune.py                          every kernel, both targets, 64 trials
    python benchmarks/tune.py --kernels sgemm-1024 --targets llvm --trials 32

Each (kernel, target) tunes the kernel script's `user_algorithm` (the algorithm with
no schedule) over the auto-scheduler's knobs, in a process of its own, and appends
every trial to benchmarks/tuned.jsonl, the log the "tuned" variants of run.py read
back with td.Schedule.from_log. Tuning again resumes the log: a candidate already
recorded for this machine is not measured twice. Prints, per run, the wall time,
the auto-scheduler's default and the best time found.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import KERNELS, environment  # noqa: E402

LOG = HERE / "tuned.jsonl"


def tune_one(script: str, size: str, target: str, trials: int, log: Path) -> dict:
    """Runs in the child process: td.tune on one kernel and target; one JSON line out."""
    import harness

    import tdsl as td

    module = harness.kernel_module(script)
    outputs = module.user_algorithm(*module.SIZES[size])
    arrays = module.inputs(size)
    before = len(log.read_text().splitlines()) if log.exists() else 0
    t0 = time.perf_counter()
    result = td.tune(outputs, target=target, trials=trials, log=str(log), progress=False, **arrays)
    wall = time.perf_counter() - t0
    measured = len(log.read_text().splitlines()) - before
    statuses: dict[str, int] = {}
    for rec in result.history:
        statuses[rec["status"]] = statuses.get(rec["status"], 0) + 1
    seed = next((r for r in result.history if r["status"] == "ok"), None)
    return {"kernel": module.kernel_name(size), "target": target, "trials": measured,
            "wall_s": round(wall, 1), "best_ms": result.time * 1e3,
            "first_ms": seed["time"] * 1e3 if seed else None, "statuses": statuses,
            "knobs": result.knobs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [k[0] for k in KERNELS]
    p.add_argument("--kernels", nargs="+", choices=names,
                   default=[n for n in names if n != "sgemm-2048"], metavar="KERNEL",
                   help=f"subset of: {', '.join(names)} (default: all but sgemm-2048)")
    p.add_argument("--targets", nargs="+", choices=("c", "llvm"), default=["c", "llvm"])
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--log", default=str(LOG))
    p.add_argument("--one", nargs=3, metavar=("SCRIPT", "SIZE", "TARGET"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(tune_one(*args.one, args.trials, Path(args.log))))
        return 0
    rows = []
    for name, script, size in KERNELS:
        if name not in args.kernels:
            continue
        for target in args.targets:
            cmd = [sys.executable, __file__, "--one", script, size, target,
                   "--trials", str(args.trials), "--log", args.log]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                                  env=environment("tdsl", args.threads))
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode != 0 or not lines:
                print(f"{name} {target}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
                return 1
            row = json.loads(lines[-1])
            rows.append(row)
            first = f"{row['first_ms']:.2f}" if row["first_ms"] else "-"
            print(f"{row['kernel']:24s} {target:4s} {row['trials']:3d} new trials "
                  f"{row['wall_s']:7.1f} s  first {first} ms -> best {row['best_ms']:.2f} ms "
                  f"{row['statuses']}", flush=True)
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
