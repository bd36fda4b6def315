"""16 trials against 64: does td.tune's cost model reach with 16 measured trials what
the search before it (Optuna's TPE, one measurement per candidate) reached with 64?

    python benchmarks/trials.py                                  every tunable kernel, C and LLVM
    python benchmarks/trials.py --kernels sgemm-1024 --targets c
    python benchmarks/trials.py --quick                          tiny sizes: a smoke test
    python benchmarks/trials.py --json rows.json                 also keep both winners' schedules

For each (kernel, target), in processes of their own and with fresh logs:

1. td.tune(search="tpe", trials=64, confirm=0): the search as it was;
2. td.tune(search="model", trials=16): the cost model, then the confirmation of the
   three leaders and the defaults (it re-times them; those runs are not trials);
3. the two winners re-timed side by side in interleaved rounds (so a noisy moment of
   the machine hits both alike): "16 / 64" is the 64-trial winner's time over the
   16-trial winner's (1.00: as fast; >= 0.95 is the goal).

`--with-log FILE` first copies FILE's records of other machines into the 16-trial
run's log: what an application shipping a log gives the model to start from.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import KERNELS, environment  # noqa: E402


def tune_child(script: str, size: str, target: str, trials: int, search: str, log: str) -> dict:
    import harness

    import tdsl as td

    module = harness.kernel_module(script)
    outputs = module.user_algorithm(*module.SIZES[size])
    t0 = time.perf_counter()
    r = td.tune(outputs, target=target, trials=trials, log=log, progress=False, search=search,
                confirm=0 if search == "tpe" else 3, **module.inputs(size))
    measured = sum(1 for h in r.history if h["status"] not in ("rejected",))
    return {"wall_s": round(time.perf_counter() - t0, 1), "trials": measured,
            "schedule": r.schedule.to_json(), "ms": r.time * 1e3}


def compare_child(script: str, size: str, target: str, schedules: list[str]) -> dict:
    import harness

    from tdsl.tune.measure import run_trial
    from tdsl.tune.tuner import _reference

    module = harness.kernel_module(script)
    outputs = module.user_algorithm(*module.SIZES[size])
    outputs = outputs if isinstance(outputs, (tuple, list)) else [outputs]
    arrays = module.inputs(size)
    from tdsl.compute.binding import bind_arguments
    from tdsl.compute.pipeline import Pipeline

    sizes = dict(bind_arguments(Pipeline(outputs), arrays, allow_outputs=False).sizes)
    task = {"outputs": outputs, "target": target, "arrays": arrays, "knobs": {},
            "reference": _reference(outputs, arrays, sizes), "schedules": schedules,
            "rounds": 5, "runs": 10, "min_seconds": 0.2, "timeout": 300}
    res = run_trial(task)
    return {"times": res.get("times"), "status": res["status"], "message": res.get("message")}


def _run(args: list[str], threads: int) -> dict | None:
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                          check=False, env=environment("tdsl", threads))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        print(f"{' '.join(args[:4])}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(lines[-1])


def _foreign(path: str, into: Path) -> None:
    """Copy the records of other machines from the log `path` into `into`."""
    from tdsl.tune import log as tlog
    from tdsl.tune.machine import fingerprint, same_machine

    here = fingerprint()
    tlog.append(into, [r for r in tlog.read(path) if not same_machine(r.get("machine"), here)])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [k[0] for k in KERNELS]
    p.add_argument("--kernels", nargs="+", choices=names,
                   default=["sgemm-1024", "conv2d", "blur", "softmax", "layernorm", "depthwise"],
                   metavar="KERNEL")
    p.add_argument("--targets", nargs="+", choices=("c", "llvm"), default=["c", "llvm"])
    p.add_argument("--few", type=int, default=16)
    p.add_argument("--many", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--with-log", metavar="FILE")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", metavar="FILE",
                   help="also write every row (both winners' schedules and times) to FILE")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        kind, script, size, target, *rest = args.child
        if kind == "tune":
            out = tune_child(script, size, target, int(rest[0]), rest[1], rest[2])
        else:
            out = compare_child(script, size, target, json.loads(Path(rest[0]).read_text()))
        print(json.dumps(out))
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name, script, size in KERNELS:
            if name not in args.kernels:
                continue
            size = "tiny" if args.quick else size
            for target in args.targets:
                many_log, few_log = Path(d) / f"{name}-{target}-many.jsonl", \
                    Path(d) / f"{name}-{target}-few.jsonl"
                if args.with_log:
                    _foreign(args.with_log, few_log)
                many = _run(["--child", "tune", script, size, target, str(args.many), "tpe",
                             str(many_log)], args.threads)
                few = _run(["--child", "tune", script, size, target, str(args.few), "model",
                            str(few_log)], args.threads)
                if many is None or few is None:
                    continue
                pair = Path(d) / "pair.json"
                pair.write_text(json.dumps([many["schedule"], few["schedule"]]))
                cmp = _run(["--child", "compare", script, size, target, str(pair)], args.threads)
                times = (cmp or {}).get("times") or [None, None]
                row = {"kernel": name, "target": target, "many": many, "few": few,
                       "times": times}
                rows.append(row)
                ratio = (f"{times[0] / times[1]:.2f}" if None not in times else
                         f"not compared: {(cmp or {}).get('message', '')[:200]}")
                print(f"{name:12s} {target:5s} {args.many} TPE trials: {many['wall_s']:7.1f} s, "
                      f"{args.few} model trials: {few['wall_s']:7.1f} s; re-timed "
                      f"{_ms(times[0])} vs {_ms(times[1])} ms: {args.few} / {args.many} = {ratio}",
                      flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("\n| kernel | target | 64 trials (TPE) wall | 16 trials (model) wall | 64: ms | 16: ms "
          "| speed of 16 / speed of 64 |\n|---|---|--:|--:|--:|--:|--:|")
    for r in rows:
        t = r["times"]
        ratio = f"{t[0] / t[1]:.2f}" if None not in t else "-"
        print(f"| {r['kernel']} | {r['target']} | {r['many']['wall_s']:.0f} s | "
              f"{r['few']['wall_s']:.0f} s | {_ms(t[0])} | {_ms(t[1])} | {ratio} |")
    return 0


def _ms(t) -> str:
    return "-" if t is None else f"{t * 1e3:.3f}"


if __name__ == "__main__":
    sys.exit(main())
