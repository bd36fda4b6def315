"""Parallel kernels on a busy machine: 2 threads against 1, idle and beside a competitor.

    python benchmarks/contention.py                 sgemm 1024^3 and blur 4096^2, both targets
    python benchmarks/contention.py --competitors 2 two CPU-bound competitors

Each kernel runs its `best` schedule (the one benchmarks/run.py measures) with 1 and
with 2 threads (`td.threads`), the two taking turns call by call, first on an idle
machine, then with CPU-bound processes (`--competitors`, a Python loop each) running
beside it, in `--rounds` rounds. A line gives the median time of each thread count
in a round and their ratio (time with 1 thread / time with 2): above 1 means the
second thread helps, below 1 that it costs; the summary gives each ratio's median
over the rounds and every round's (beside a competitor they move with where the
scheduler happens to put the threads). On a 2-core machine with one competitor, a parallel runtime that
copes with a busy core keeps the ratio at 1 or above.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import blur  # noqa: E402
import sgemm  # noqa: E402

import tdsl as td  # noqa: E402

KERNELS = {"sgemm 1024^3": (sgemm, "1024"), "blur 4096^2": (blur, "4096")}
SPIN = "while True:\n    pass\n"


def alternate(f, inputs: dict, runs: int) -> dict[int, float]:
    """Median seconds per call with 1 and with 2 threads, the two taking turns."""
    times: dict[int, list[float]] = {1: [], 2: []}
    for n in (1, 2):  # warm up both team sizes
        with td.threads(n):
            f(**inputs)
    for _ in range(runs):
        for n in (1, 2):
            with td.threads(n):
                t0 = time.perf_counter()
                f(**inputs)
                times[n].append(time.perf_counter() - t0)
    return {n: statistics.median(ts) for n, ts in times.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20, help="calls per thread count (default 20)")
    ap.add_argument("--competitors", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds over all kernels per load (default 3): where the scheduler "
                         "puts the threads beside a competitor varies between rounds")
    ap.add_argument("--targets", nargs="+", default=["c", "llvm"])
    args = ap.parse_args(argv)
    kernels = []
    for name, (module, size) in KERNELS.items():
        for target in args.targets:
            case = module.case(target, "best", size)
            f = td.build(case.schedule_fn(), target=target)
            np.testing.assert_allclose(f(**case.inputs), case.reference(),
                                       rtol=case.rtol, atol=case.atol)
            kernels.append((name, target, f, case.inputs))
    print(f"{'kernel':14s} {'target':6s} {'load':14s} {'round':>5s} {'1 thread':>10s} "
          f"{'2 threads':>10s} {'1 thr / 2 thr':>13s}")
    ratios: dict[tuple[str, str, str], list[float]] = {}
    for load in ("idle", f"{args.competitors} competitor" + "s" * (args.competitors > 1)):
        procs = []
        if load != "idle":
            procs = [subprocess.Popen([sys.executable, "-c", SPIN])
                     for _ in range(args.competitors)]
            time.sleep(0.5)
        try:
            for r in range(args.rounds):
                for name, target, f, inputs in kernels:
                    t = alternate(f, inputs, args.runs)
                    ratios.setdefault((name, target, load), []).append(t[1] / t[2])
                    print(f"{name:14s} {target:6s} {load:14s} {r + 1:5d} {t[1] * 1e3:8.2f} ms "
                          f"{t[2] * 1e3:7.2f} ms {t[1] / t[2]:13.2f}", flush=True)
        finally:
            for p in procs:
                p.kill()
                p.wait()
    print(f"\n{'kernel':14s} {'target':6s} {'load':14s} {'1 thr / 2 thr: median (rounds)':>40s}")
    for (name, target, load), rs in ratios.items():
        each = ", ".join(f"{x:.2f}" for x in rs)
        print(f"{name:14s} {target:6s} {load:14s} {statistics.median(rs):10.2f} ({each})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
