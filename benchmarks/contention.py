"""Kernels on a busy machine: each peer's time alone, beside CPU-bound competitors and
beside a bursty one, and its slowdown.

    python benchmarks/contention.py                      every kernel of run.py, every peer
    python benchmarks/contention.py --kernels layernorm jacobi-2d --rounds 5
    python benchmarks/contention.py --loads idle 1-spinner bursty --peers tdsl-c halide

Every kernel of the suite (benchmarks/run.py's KERNELS, at their sizes) is measured by
each peer: tdsl's `best` schedule on both targets ("tdsl-c", "tdsl-llvm") and, when the
`bench` extra is installed, Halide and TVM (peer_halide.py, peer_tvm.py), each
measurement in a process of its own (as run.py runs them: `--threads` threads, the
median of at least --runs calls and --min-seconds), under each load:

    idle         nothing else running
    1-spinner    one CPU-bound competitor (a Python `while True: pass`)
    2-spinners   two of them
    bursty       a process that builds and runs small tdsl kernels on 2 threads in
                 bursts of 20-100 ms with pauses of 20-200 ms between them (what a
                 second notebook, a CI job or a tuner does beside the user's kernel)

in --rounds rounds, the peers taking turns. The table gives, per kernel and peer, the
median over the rounds of each load's time and the slowdowns (time under a load /
time idle); for the bursty load also the worst round over the idle median. On a
2-core machine losing one core to a competitor is worth 2x; a runtime that copes
keeps every kernel near that, and the bursty worst round near it too.

The whole suite takes about (kernels x peers x loads x rounds) x (a few seconds): with
all defaults around an hour. Run it on an otherwise quiet machine: other work running
beside it is one more competitor nobody controls.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run as suite  # noqa: E402

LOADS = ("idle", "1-spinner", "2-spinners", "bursty")
SPIN = "while True:\n    pass\n"
BURSTY = """
import random, time
import numpy as np
import tdsl as td
y, x = td.dims("y x")
a = td.input("a", {y: 512, x: 512}, td.float32)
c = td.clamp(a)
b = td.compute("b", {y: 512, x: 512}, (c[y - 1, x] + c[y + 1, x] + c[y, x - 1]) * 0.3)
f = td.build(td.schedule(b).parallel(b, "y"))
arr = np.ones((512, 512), np.float32)
rng = random.Random(0)
td.set_num_threads(2)
while True:
    end = time.perf_counter() + rng.uniform(0.02, 0.1)
    while time.perf_counter() < end:
        f(a=arr)
    time.sleep(rng.uniform(0.02, 0.2))
"""


def competitors(load: str) -> list[subprocess.Popen]:
    """The processes that make `load` (none for idle)."""
    if load == "idle":
        return []
    if load == "bursty":
        return [subprocess.Popen([sys.executable, "-c", BURSTY])]
    count = int(load.split("-")[0])
    return [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]


def measure(script: str, size: str, peer: str, args) -> dict:
    """One measurement in a process of its own (run.py's `run_one`)."""
    return suite.run_one(script, size, peer, args)


def print_table(times: dict[tuple[str, str, str], list[float]],
                notes: dict[tuple[str, str], str], args) -> None:
    """Per kernel and peer: the idle median, each load's median and slowdown, and the
    bursty load's worst round over the idle median."""
    loads = [x for x in args.loads if x != "idle"]
    head = f"{'kernel':11s} {'peer':10s} {'idle ms':>9s}" + "".join(
        f" {x + ' ms':>14s} {'slowdown':>8s}" for x in loads)
    print(head + (f" {'bursty worst':>12s}" if "bursty" in loads else ""))
    for name, _, _ in suite.KERNELS:
        if name not in args.kernels:
            continue
        for peer in args.peers:
            idle = times.get((name, peer, "idle"))
            if not idle:
                print(f"{name:11s} {peer:10s} {notes.get((name, peer), 'not measured')}")
                continue
            base = statistics.median(idle)
            line = f"{name:11s} {peer:10s} {base:9.3f}"
            for load in loads:
                ts = times.get((name, peer, load))
                m = statistics.median(ts) if ts else None
                line += f" {m:14.3f} {m / base:7.2f}x" if m else f" {'-':>14s} {'-':>8s}"
            if "bursty" in loads and times.get((name, peer, "bursty")):
                line += f" {max(times[(name, peer, 'bursty')]) / base:11.2f}x"
            print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    names = [k[0] for k in suite.KERNELS]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", nargs="+", choices=names, default=names, metavar="KERNEL",
                    help=f"subset of: {', '.join(names)}")
    ap.add_argument("--peers", nargs="+", default=["tdsl-c", "tdsl-llvm", *suite.EXTERNAL])
    ap.add_argument("--loads", nargs="+", choices=LOADS, default=list(LOADS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--min-seconds", type=float, default=1.0)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--json", metavar="FILE", help="also write every measurement to FILE")
    args = ap.parse_args(argv)
    args.wait_policy = "default"
    if "idle" not in args.loads:
        args.loads.insert(0, "idle")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{os.cpu_count()} cores, {args.threads} threads per measurement", flush=True)
    # (kernel, peer, load) -> [ms per round]
    times: dict[tuple[str, str, str], list[float]] = {}
    notes: dict[tuple[str, str], str] = {}
    for name, script, size in suite.KERNELS:
        if name not in args.kernels:
            continue
        for load in args.loads:
            procs = competitors(load)
            try:
                time.sleep(0.5 if procs else 0)
                for turn in range(args.rounds):
                    first = turn % len(args.peers)
                    for peer in args.peers[first:] + args.peers[:first]:
                        r = measure(script, size, peer, args)
                        if "ms" not in r:
                            notes[(name, peer)] = r.get("check", "failed")
                            continue
                        times.setdefault((name, peer, load), []).append(r["ms"])
                        print(f"  {name:11s} {peer:10s} {load:10s} round {turn + 1}: "
                              f"{r['ms']:9.3f} ms", file=sys.stderr, flush=True)
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print_table(times, notes, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({" | ".join(k): v for k, v in times.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
