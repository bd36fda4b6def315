"""Run the benchmark suite: every kernel against every peer, each in its own process.

    python benchmarks/run.py                    the full suite, 3 rounds (about 17 minutes)
    python benchmarks/run.py --kernels sgemm-1024 sgemm-2048 conv2d blur softmax
                                                the table of README.md (about 5 minutes)
    python benchmarks/run.py --quick            tiny sizes, a smoke test of the harness
    python benchmarks/run.py --kernels sgemm-1024 blur --markdown

First the machine's limits are measured (benchmarks/machine.c, compiled with
gcc -O3 -march=native: an FMA microkernel and a STREAM-like copy and triad),
then each (kernel, peer) pair runs in a fresh subprocess with THREADS threads
(OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS, and HL_NUM_THREADS and
TVM_NUM_THREADS for the Halide and TVM peers of peer_halide.py and peer_tvm.py,
which need the optional `bench` extra). Every runtime waits as it does by default
(libgomp's threads spin a while before they sleep, as Halide's and TVM's pools do);
--wait-policy passive makes tdsl's sleep at once (OMP_WAIT_POLICY). tdsl, Halide and TVM processes
get a single-threaded OpenBLAS for the numpy reference they check against. The numpy
subprocess runs without OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, which some
machines set and which slow OpenBLAS down. Each measurement checks its result
against numpy, warms up, and reports the median of at least --runs calls.
Every peer of a kernel is measured --rounds times, the peers taking turns, and
the table shows each peer's median round (the host is shared: its speed moves
between rounds, and alternating spreads that over all peers alike). Each round
starts at a different peer, so that no peer always follows the same process.
On a host whose slow spells last whole processes (a virtual CPU running at half
speed for seconds), --across fastest shows each peer's fastest round instead:
such spells only ever add time, and with enough rounds every peer has one
outside them.

The table gives, per kernel: each peer's time (its median round, or the one --across
picks), its rate (GFLOP/s, or GB/s counting one read of the inputs and one write of
the output), that rate as a fraction of the machine's limit (FMA peak, or STREAM
copy), and its ratio to the best peer of that kernel (1.00 = the best). A second
table sets the kernels with no schedule ("tdsl C (default)", "tdsl LLVM (default)":
one thread, what a new user gets) against the script's NAIVE_C, the loop nest as a
textbook writes it, built with gcc -O3 -march=native ("naive gcc -O3").
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (name, script, size)
KERNELS = (
    ("sgemm-1024", "sgemm", "1024"),
    ("sgemm-2048", "sgemm", "2048"),
    ("conv2d", "conv2d", "56x56"),
    ("blur", "blur", "4096"),
    ("softmax", "softmax", "4096"),
    ("qmatmul", "qmatmul", "1024"),
    ("layernorm", "layernorm", "4096"),
    ("depthwise", "depthwise", "112x112"),
    ("2mm", "twomm", "800"),
    ("covariance", "covariance", "1400"),
    ("jacobi-2d", "jacobi2d", "1300"),
    ("heat-3d", "heat3d", "120"),
)
EXTERNAL = ("halide", "tvm", "halide-mullapudi2016", "halide-adams2019", "halide-li2018",
            "tvm-ms")
BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
DISPLAY = {"numpy": "numpy", "halide": "Halide", "tvm": "TVM", "gcc-naive": "naive gcc -O3",
           "halide-mullapudi2016": "Halide Mullapudi2016", "halide-adams2019": "Halide Adams2019",
           "halide-li2018": "Halide Li2018", "tvm-ms": "TVM MetaSchedule"}


def display(peer: str) -> str:
    if peer in DISPLAY:
        return DISPLAY[peer]
    parts = peer.split("-", 2)  # tdsl-c[-variant]
    name = f"tdsl {'C' if parts[1] == 'c' else 'LLVM'}"
    return name + (f" ({parts[2]})" if len(parts) > 2 else "")


def environment(peer: str, threads: int, wait_policy: str = "default") -> dict[str, str]:
    env = dict(os.environ)
    n = str(threads)
    env.update(OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n, MKL_NUM_THREADS=n,
               HL_NUM_THREADS=n, TVM_NUM_THREADS=n)
    if peer.startswith("tdsl") and wait_policy != "default":
        env["OMP_WAIT_POLICY"] = wait_policy
    if peer.startswith("tdsl") or peer in EXTERNAL:
        # numpy computes the reference before a kernel is timed: without this,
        # OpenBLAS's threads keep spinning for a while afterwards, next to the kernel's
        env["OPENBLAS_NUM_THREADS"] = "1"
    if peer == "numpy":
        for var in BLAS_ENV:
            env.pop(var, None)
    return env


def script_peers(script: str, size: str) -> list[str]:
    """The tdsl peers of a kernel script (its VARIANTS on both targets) and its naive C,
    without the unscheduled kernels and the naive C at sizes the script leaves them out
    of (NAIVE_SIZES: a naive 2048^3 matmul takes seconds per call)."""
    sys.path.insert(0, str(HERE))
    try:
        harness = importlib.import_module("harness")
        module = importlib.import_module(script)
    finally:
        sys.path.pop(0)
    peers = harness.tdsl_peers(module) + harness.naive_peers(module)
    if size not in getattr(module, "NAIVE_SIZES", module.SIZES):
        peers = [p for p in peers if p != harness.NAIVE and not p.endswith("-default")]
    return peers


def run_one(script: str, size: str, peer: str, args) -> dict:
    cmd = [sys.executable, str(HERE / f"{script}.py"), "--peer", peer, "--size", size,
           "--runs", str(args.runs), "--min-seconds", str(args.min_seconds)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                              env=environment(peer, args.threads, args.wait_policy), check=False)
    except subprocess.TimeoutExpired:
        return {"peer": peer, "check": f"timed out after {args.timeout} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"peer": peer, "check": f"failed (exit {proc.returncode}): {' | '.join(tail)}"}
    return json.loads(lines[-1])


# ---------------------------------------------------------------- machine limits


def pick_round(results: list[dict], across: str = "median") -> dict:
    """One peer's result over its rounds: a failure if any round failed, else the round
    with the median time (`across="fastest"`: the fastest round), carrying every
    round's time as `rounds_ms` and the statistic as `across`."""
    bad = [r for r in results if "ms" not in r]
    if bad:
        return bad[0]
    ordered = sorted(results, key=lambda r: r["ms"])
    pick = ordered[0] if across == "fastest" else ordered[(len(ordered) - 1) // 2]
    return {**pick, "rounds_ms": [round(r["ms"], 3) for r in results], "across": across}


def machine_limits(threads: int, wait_policy: str = "default") -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        exe = Path(d) / "machine"
        subprocess.run(["gcc", "-O3", "-march=native", "-fopenmp", str(HERE / "machine.c"),
                        "-o", str(exe)], check=True)
        env = environment("tdsl", threads, wait_policy)
        out = subprocess.run([str(exe)], capture_output=True, text=True, env=env, check=True)
    limits = {}
    for line in out.stdout.splitlines():
        rec = json.loads(line)
        limits[rec["what"]] = rec["value"]
    limits["fma"] = max(limits["fma256"], limits["fma512"])
    return limits


def limit_for(unit: str, limits: dict[str, float]) -> float:
    """The machine's limit for a rate: the float32 FMA peak for arithmetic (also for
    integer GOP/s, for want of an integer peak), STREAM copy for GB/s."""
    return limits["fma"] if unit in ("GFLOP/s", "GOP/s") else limits["copy"]


# ---------------------------------------------------------------- reporting


def _first_line(path: str, key: str) -> str:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def describe_machine(threads: int) -> list[str]:
    cc = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout
    import llvmlite
    import numpy

    import tdsl

    blas_env = ", ".join(f"{v}={os.environ[v]}" for v in BLAS_ENV if v in os.environ)
    return [
        f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}",
        f"cpu: {_first_line('/proc/cpuinfo', 'model name')}, {os.cpu_count()} logical cores, "
        f"{platform.machine()}; {threads} threads per measurement",
        f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        f"gcc: {cc.splitlines()[0] if cc else 'not found'}; python {platform.python_version()}, "
        f"numpy {numpy.__version__}, llvmlite {llvmlite.__version__}, tdsl {tdsl.__version__}",
        "OpenBLAS environment: " + (f"{blas_env} (unset for the numpy runs)" if blas_env
                                    else "OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE not set"),
    ]


def table(rows: list[dict], limits: dict[str, float], markdown: bool) -> str:
    """One line per measurement: its time, rate, share of the machine's limit, its ratio
    to the fastest row of its kernel, and to the fastest peer that is not tdsl (numpy,
    Halide, TVM and their autoschedulers: the bar tdsl's own variants are held to)."""
    head = ("kernel", "peer", "ms", "rate", "of limit", "ratio to best", "to best other")
    best: dict[str, float] = {}
    other: dict[str, float] = {}
    for r in rows:
        if "rate" in r:
            best[r["kernel"]] = max(best.get(r["kernel"], 0.0), r["rate"])
            if not r["peer"].startswith("tdsl"):
                other[r["kernel"]] = max(other.get(r["kernel"], 0.0), r["rate"])
    cells = []
    for r in rows:
        if "rate" not in r:
            cells.append((r["kernel"], display(r["peer"]), r["check"], "", "", "", ""))
            continue
        cells.append((
            r["kernel"],
            display(r["peer"]),
            _ms(r["ms"]),
            f"{r['rate']:.1f} {r['unit']}",
            f"{r['rate'] / limit_for(r['unit'], limits):.0%}",
            f"{r['rate'] / best[r['kernel']]:.2f}",
            f"{r['rate'] / other[r['kernel']]:.2f}" if other.get(r["kernel"]) else "",
        ))
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join(
            ["---", "---", "--:", "--:", "--:", "--:", "--:"]) + "|"]
        lines += ["| " + " | ".join(c) + " |" for c in cells]
        return "\n".join(lines)
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    fmt = [str.ljust, str.ljust, str.rjust, str.rjust, str.rjust, str.rjust, str.rjust]

    def line(cs):
        return " | ".join(f(c, w) for f, c, w in zip(fmt, cs, widths)).rstrip()

    return "\n".join([line(head), "-+-".join("-" * w for w in widths), *(line(c) for c in cells)])


def _ms(ms: float) -> str:
    return f"{ms:.2f}" if ms >= 1 else f"{ms:.3f}"


def unscheduled_table(rows: list[dict], markdown: bool) -> str:
    """Per kernel with a naive C peer: the kernels with no schedule (one thread, as the
    naive loop nest) against it; a ratio of 1 or more means tdsl's default code is at
    least as fast as gcc -O3 on the textbook loops."""
    by_kernel: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_kernel.setdefault(r["kernel"], {})[r["peer"]] = r
    head = ("kernel", "naive gcc -O3 ms", "tdsl C, no schedule ms", "ratio",
            "tdsl LLVM, no schedule ms", "ratio")
    cells = []
    for kernel, peers in by_kernel.items():
        naive = peers.get("gcc-naive", {})
        if "ms" not in naive:
            continue
        row = [kernel, _ms(naive["ms"])]
        for peer in ("tdsl-c-default", "tdsl-llvm-default"):
            r = peers.get(peer, {})
            row += ([_ms(r["ms"]), f"{naive['ms'] / r['ms']:.2f}"] if "ms" in r
                    else [r.get("check", "not measured"), ""])
        cells.append(tuple(row))
    if not cells:
        return ""
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|---|" + "--:|" * (len(head) - 1)]
        return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in cells])
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    return "\n".join(" | ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                for i, (c, w) in enumerate(zip(cs, widths))).rstrip()
                     for cs in [head, *cells])


TUNING_TIMES = HERE / "tuning_times.jsonl"


def tuning_table(rows: list[dict], markdown: bool) -> str:
    """Per kernel: the seconds each tuner took on this machine (td.tune and MetaSchedule
    as benchmarks/tune.py recorded them, with their measured trials; Halide's
    autoschedulers as their measurement reported: they measure nothing)."""
    from tdsl.tune.machine import fingerprint_id

    here = fingerprint_id()
    recorded: dict[tuple[str, str], str] = {}
    if TUNING_TIMES.exists():
        for line in TUNING_TIMES.read_text().splitlines():
            r = json.loads(line)
            if r.get("machine") == here:
                recorded[(r["kernel"], r["tuner"])] = f"{r['wall_s']:.0f} s ({r['trials']} trials)"
    kernels = list(dict.fromkeys(r["kernel"] for r in rows))
    tuners = ["tdsl-c", "tdsl-llvm", "tvm-ms", "halide-mullapudi2016", "halide-adams2019",
              "halide-li2018"]
    head = ("kernel", *(display(t) if t.startswith(("tvm", "halide")) else f"td.tune {t[5:]}"
                        for t in tuners))
    cells = []
    for k in kernels:
        row = [k]
        for t in tuners:
            got = recorded.get((k, t))
            if got is None:
                r = next((x for x in rows if x["kernel"] == k and x["peer"] == t), {})
                got = f"{r['tune_s']:.1f} s" if "tune_s" in r else "-"
            row.append(got)
        cells.append(row)
    if markdown:
        return "\n".join(["| " + " | ".join(head) + " |", "|---|" + "--:|" * (len(head) - 1)]
                         + ["| " + " | ".join(c) + " |" for c in cells])
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    return "\n".join(" | ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                for i, (c, w) in enumerate(zip(cs, widths))).rstrip()
                     for cs in [head, *cells])


def measure_all(args) -> tuple[list[dict], str | None]:
    """Every selected kernel with every peer, `args.rounds` times in alternation: the
    round `args.across` picks of each (kernel, peer), and the numpy peer's BLAS if it said."""
    rows: list[dict] = []
    blas = None
    done = set()
    for name, script, size in KERNELS:
        if name not in args.kernels:
            continue
        if args.quick:
            size = "tiny"
        if (script, size) in done:
            continue
        done.add((script, size))
        peers = script_peers(script, size) + ["numpy", *EXTERNAL]
        if args.peers:
            peers = [x for x in peers if x in args.peers]
        measured: dict[str, list[dict]] = {peer: [] for peer in peers}
        for turn in range(args.rounds):  # peers alternate, so a noisy phase hits them all alike
            first = turn * len(peers) // args.rounds
            for peer in peers[first:] + peers[:first]:
                r = run_one(script, size, peer, args)
                measured[peer].append(r)
                if peer == "numpy" and "blas" in r:
                    blas = f"{r['blas']}; kernel: {r.get('blas_kernel', '?')}"
                shown = f"{r['ms']:.2f} ms" if "ms" in r else r["check"]
                print(f"  {name:12s} {display(peer):18s} {shown}", file=sys.stderr, flush=True)
        batch = [pick_round(rs, args.across) for rs in measured.values()]
        # peers that measured nothing (not installed, failed) take the kernel's name
        kernel = next((r["kernel"] for r in batch if "kernel" in r), f"{script} {size}")
        for r in batch:
            r.setdefault("kernel", kernel)
        rows += batch
    return rows, blas


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [k[0] for k in KERNELS]
    p.add_argument("--kernels", nargs="+", choices=names, default=names, metavar="KERNEL",
                   help=f"subset of: {', '.join(names)}")
    p.add_argument("--peers", nargs="+", default=None, metavar="PEER",
                   help="subset of peers (tdsl-c, tdsl-llvm, tdsl-c-plain, ..., numpy, halide, tvm)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--wait-policy", choices=("default", "passive", "active"), default="default",
                   help="how tdsl's idle OpenMP threads wait between parallel loops "
                        "(OMP_WAIT_POLICY; default: libgomp's own, spin a while then sleep)")
    p.add_argument("--runs", type=int, default=10, help="timed calls per measurement, at least")
    p.add_argument("--min-seconds", type=float, default=1.0,
                   help="time each measurement for at least this long (default 1)")
    p.add_argument("--timeout", type=int, default=900, help="seconds per measurement")
    p.add_argument("--rounds", type=int, default=3,
                   help="measure every peer this many times, in alternation, and report the "
                        "round --across picks (default 3)")
    p.add_argument("--across", choices=("median", "fastest"), default="median",
                   help="which of a peer's rounds the table shows: the median (default), or "
                        "the fastest, for a host whose slow spells take whole rounds (they "
                        "only add time, so the fastest round is the least disturbed; every "
                        "round stays in --json)")
    p.add_argument("--quick", action="store_true", help="tiny sizes, 3 runs, 1 round: a smoke test")
    p.add_argument("--markdown", action="store_true", help="print the table as markdown")
    p.add_argument("--json", metavar="FILE", help="also write every measurement to FILE")
    args = p.parse_args(argv)
    if args.quick:
        args.runs, args.min_seconds, args.rounds = 3, 0.0, 1
    if args.rounds < 1:
        p.error("--rounds must be at least 1")

    for line in describe_machine(args.threads):
        print(line)
    limits = machine_limits(args.threads, args.wait_policy)
    print(f"machine limits ({args.threads} threads): FMA peak {limits['fma']:.0f} GFLOP/s "
          f"(256-bit {limits['fma256']:.0f}, 512-bit {limits['fma512']:.0f}); "
          f"STREAM copy {limits['copy']:.1f} GB/s, triad {limits['triad']:.1f} GB/s")

    rows, blas = measure_all(args)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    end = machine_limits(args.threads, args.wait_policy)
    print(f"machine limits at the end: FMA peak {end['fma']:.0f} GFLOP/s, "
          f"STREAM copy {end['copy']:.1f} GB/s")
    if blas:
        print(f"numpy BLAS: {blas}")
    print(f"\neach peer's {args.across} round of {args.rounds}:")
    print(table(rows, limits, args.markdown))
    if any(r["peer"] in EXTERNAL[2:] for r in rows):
        print("\nTuning wall time on this machine (td.tune, MetaSchedule: benchmarks/tune.py; "
              "Halide's autoschedulers: scheduling and compiling):\n")
        print(tuning_table(rows, args.markdown))
    naive = unscheduled_table(rows, args.markdown)
    if naive:
        print("\nNo schedule against the textbook loops (ratio: naive gcc time / tdsl time):\n")
        print(naive)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"limits": limits, "rows": rows}, f, indent=1)
    wrong = [r for r in rows if r.get("check") not in ("ok", "not installed", "not tuned",
                                                       "no peer")]
    for r in wrong:
        print(f"\n{r['kernel']} {display(r['peer'])}: {r['check']}", file=sys.stderr)
        if "mismatch" in r:
            print(r["mismatch"], file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
