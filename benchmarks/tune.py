"""Tune the benchmark kernels with td.tune (and MetaSchedule), recording trials and wall time.

    python benchmarks/tune.py                          every kernel, both targets, 64 trials
    python benchmarks/tune.py --kernels sgemm-1024 --targets llvm --trials 32
    python benchmarks/tune.py --tuners tdsl tvm-ms     td.tune and TVM's MetaSchedule
    python benchmarks/tune.py --quick                  tiny sizes, 8 trials: a smoke test

Each (kernel, target) tunes the kernel script's `user_algorithm` (the algorithm with
no schedule) over the auto-scheduler's knobs, in a process of its own, and appends
every trial to benchmarks/tuned.jsonl, the log the "tuned" variants of run.py read
back with td.Schedule.from_log. Tuning again resumes the log: a candidate already
recorded for this machine is not measured twice. With `--tuners tvm-ms`, each kernel
that has a TVM version is also tuned by MetaSchedule with the same number of measured
trials (peer_tvm_ms.py; its database under benchmarks/.metaschedule/), in a process of
its own. The wall time of each tuning run is appended to benchmarks/tuning_times.jsonl
with the machine's fingerprint; run.py prints them beside the measurements.
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
TIMES = HERE / "tuning_times.jsonl"
MS_SCRIPTS = ("sgemm", "conv2d", "blur", "softmax", "layernorm", "depthwise")


def tune_one(script: str, size: str, target: str, trials: int, log: Path, search: str) -> dict:
    """Runs in the child process: td.tune on one kernel and target; one JSON line out."""
    import harness

    import tdsl as td

    module = harness.kernel_module(script)
    outputs = module.user_algorithm(*module.SIZES[size])
    arrays = module.inputs(size)
    before = len(log.read_text().splitlines()) if log.exists() else 0
    t0 = time.perf_counter()
    result = td.tune(outputs, target=target, trials=trials, log=str(log), progress=False,
                     search=search, **arrays)
    wall = time.perf_counter() - t0
    records = [json.loads(line) for line in log.read_text().splitlines()]
    # this run's candidates (result.history also holds the log's earlier trials here)
    new = [r for r in records[before:] if r.get("phase") == "search"]
    measured = sum(1 for r in new if r["status"] != "rejected")
    statuses: dict[str, int] = {}
    for rec in new:
        statuses[rec["status"]] = statuses.get(rec["status"], 0) + 1
    # the auto-scheduler's choice (the template's defaults): as the confirmation re-timed
    # it beside the leaders (more runs, the time the best is chosen by), else as a search
    # trial of this run or an earlier one when the log held it already (td.tune measures
    # no candidate twice)
    defaults = result.template.canonical(result.template.defaults)
    key = new[0]["key"] if new else None
    auto = [("this run", r) for i, r in enumerate(records)
            if i >= before and r.get("key") == key and r.get("phase") == "confirm"
            and r.get("knobs") == defaults]
    auto = auto or [("this run" if i >= before else "log", r) for i, r in enumerate(records)
                    if r.get("key") == key and r.get("phase") == "search"
                    and r["status"] == "ok" and r.get("knobs") == defaults]
    return {"kernel": module.kernel_name(size), "target": target, "trials": measured,
            "wall_s": round(wall, 1), "best_ms": result.time * 1e3,
            "auto_ms": auto[-1][1]["time"] * 1e3 if auto else None,
            "auto_when": (f"{auto[-1][0]}, {auto[-1][1]['phase']}" if auto else None),
            "statuses": statuses, "knobs": result.knobs}


def tune_ms(script: str, size: str, trials: int) -> dict:
    """Runs in the child process: MetaSchedule on one kernel; one JSON line out."""
    import harness
    import peer_tvm_ms

    info = peer_tvm_ms.tune(script, size, trials)
    return {"kernel": harness.kernel_module(script).kernel_name(size), "target": "tvm-ms",
            "trials": trials, "wall_s": info["wall_s"]}


def record_time(row: dict, tuner: str) -> None:
    from tdsl.tune.machine import fingerprint_id

    with open(TIMES, "a") as f:
        f.write(json.dumps({"kernel": row["kernel"], "tuner": tuner, "trials": row["trials"],
                            "wall_s": row["wall_s"], "machine": fingerprint_id(),
                            "at": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")


def _child(cmd: list[str], threads: int, peer: str) -> dict | None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          env=environment(peer, threads))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        print(f"{' '.join(cmd[2:])}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [k[0] for k in KERNELS]
    p.add_argument("--kernels", nargs="+", choices=names,
                   default=[n for n in names if n != "sgemm-2048"], metavar="KERNEL",
                   help=f"subset of: {', '.join(names)} (default: all but sgemm-2048)")
    p.add_argument("--targets", nargs="+", choices=("c", "llvm"), default=["c", "llvm"])
    p.add_argument("--tuners", nargs="+", choices=("tdsl", "tvm-ms"), default=["tdsl"])
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--search", choices=("model", "tpe"), default="model")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--log", default=str(LOG))
    p.add_argument("--quick", action="store_true", help="tiny sizes, 8 trials: a smoke test")
    p.add_argument("--one", nargs=3, metavar=("SCRIPT", "SIZE", "TARGET"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick and "--trials" not in (argv or sys.argv):
        args.trials = 8
    if args.one:
        script, size, target = args.one
        if target == "tvm-ms":
            print(json.dumps(tune_ms(script, size, args.trials)))
        else:
            print(json.dumps(tune_one(script, size, target, args.trials, Path(args.log),
                                      args.search)))
        return 0
    failed = False
    for name, script, size in KERNELS:
        if name not in args.kernels:
            continue
        size = "tiny" if args.quick else size
        base = [sys.executable, __file__, "--one", script, size]
        opts = ["--trials", str(args.trials), "--log", args.log, "--search", args.search]
        jobs = [(t, "tdsl") for t in args.targets] if "tdsl" in args.tuners else []
        if "tvm-ms" in args.tuners and script in MS_SCRIPTS:
            jobs.append(("tvm-ms", "tvm"))
        for target, peer in jobs:
            row = _child([*base, target, *opts], args.threads, peer)
            if row is None:
                failed = True
                continue
            if not args.quick:  # a smoke test's tiny sizes are no tuning time to quote
                record_time(row, f"tdsl-{target}" if peer == "tdsl" else "tvm-ms")
            if peer == "tdsl":
                auto = (f"{row['auto_ms']:.2f} ms ({row['auto_when']})"
                        if row.get("auto_ms") else "-")
                print(f"{row['kernel']:24s} {target:6s} {row['trials']:3d} new trials "
                      f"{row['wall_s']:7.1f} s  auto {auto} -> best {row['best_ms']:.2f} ms "
                      f"{row['statuses']}", flush=True)
            else:
                print(f"{row['kernel']:24s} {target:6s} {row['trials']:3d} trials "
                      f"{row['wall_s']:7.1f} s", flush=True)
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
