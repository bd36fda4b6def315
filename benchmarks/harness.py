"""Shared parts of the benchmark scripts: cases, timing, checking, the command line.

Each kernel script (sgemm.py, conv2d.py, blur.py, softmax.py) defines

    VARIANTS            the tdsl variants run.py measures, best first ("best", "plain",
                        "auto", "tuned")
    user_algorithm(*SIZES[size]) -> outputs   the algorithm as a user writes it: "auto"
                        schedules it with td.autoschedule, "tuned" with the best schedule
                        tune.py recorded for it in tuned.jsonl (td.Schedule.from_log)
    EXTRA_VARIANTS      (optional) variants available with --peer but not run by run.py
    SIZES               named problem sizes; DEFAULT_SIZE is the one measured by default
    BEST                (target, variant) -> the schedule parameters found by --search
    inputs(size) -> {name: array}           decorated with `aligned_inputs`
    case(target, variant, size) -> Case     the fixed schedule, its inputs, numpy's answer
    numpy_peer(size) -> Peer                the numpy baseline
    candidates(target, variant, size) -> [(label, schedule function)]   the search space

and ends with `sys.exit(harness.main(sys.modules[__name__]))`. One invocation
measures one peer and prints one JSON line (see `measure`), which is what
run.py collects; `--search` times every candidate schedule instead.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import tdsl as td
from tdsl.compute.binding import aligned_empty
from tdsl.tune.machine import fingerprint

# Peers a script can be asked for; tdsl peers are "tdsl-<target>[-<variant>]".
NUMPY = "numpy"
# variants made without a hand schedule, from the script's user_algorithm: "default" is
# no schedule at all (td.schedule(outputs)), the kernel a new user gets
UNSCHEDULED = ("default", "auto", "tuned")
# the script's NAIVE_C, the loop nest as a textbook writes it, built by gcc -O3
# -march=native: the yardstick of the unscheduled ("default") variants
NAIVE = "gcc-naive"
NAIVE_FLAGS = ("-O3", "-march=native", "-shared", "-fPIC")
# the tuning log tune.py writes and the "tuned" variants read
TUNED_LOG = Path(__file__).resolve().parent / "tuned.jsonl"
# Halide and TVM with hand schedules; Halide's autoschedulers; TVM's MetaSchedule
HALIDE_AUTO = ("halide-mullapudi2016", "halide-adams2019", "halide-li2018")
EXTERNAL = ("halide", "tvm", *HALIDE_AUTO, "tvm-ms")
# what a measurement may report besides "ok" without having failed
NOT_FAILURES = ("ok", "not installed", "not tuned", "no peer")


def aligned(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of `a` starting on a 64-byte boundary, as the arrays tdsl,
    Halide and TVM allocate themselves do (numpy's are only 16-byte aligned, and a
    vector load across two cache lines costs up to twice one within a line)."""
    out = aligned_empty(a.shape, a.dtype)
    out[...] = a
    return out


def aligned_inputs(fn: Callable[[str], dict[str, np.ndarray]]):
    """Decorates a script's `inputs(size)`: every peer is measured on the same
    64-byte-aligned arrays (`aligned`)."""
    def wrapper(size: str) -> dict[str, np.ndarray]:
        return {k: aligned(v) for k, v in fn(size).items()}

    wrapper.__doc__, wrapper.__name__ = fn.__doc__, fn.__name__
    return wrapper


@dataclass
class Case:
    """One tdsl kernel to measure: a schedule, its inputs and numpy's answer."""

    kernel: str  # e.g. "sgemm 1024^3"
    schedule_fn: Callable[[], td.Schedule]  # builds the schedule (algorithm included)
    inputs: dict[str, np.ndarray]
    reference: Callable[[], np.ndarray]  # numpy's result, same shape as the kernel's output
    work: float  # flops or bytes per call
    unit: str  # "GFLOP/s" or "GB/s"
    rtol: float
    atol: float
    note: str = ""


@dataclass
class Peer:
    """A non-tdsl implementation: a no-argument callable returning the result."""

    kernel: str
    fn: Callable[[], np.ndarray]
    work: float
    unit: str
    info: dict = field(default_factory=dict)


def partials_in_lanes(s: td.Schedule, consumer, stages, lanes: int) -> td.Schedule:
    """A row reduction's partial results, rfactored into vector lanes (its c_i loop),
    rfactored again into `lanes` vector lanes computed per row of `consumer`
    (stage_rf2): the stage then combines `lanes` numbers in a chain instead of all
    the partials. For each of `stages`, rfactored already, computed per row r."""
    for st in stages:
        s = (s.rfactor(st, "c_i", lanes, name=f"{st}_rf2", names=("a_o", "a_i"))
             .compute_at(f"{st}_rf2", consumer, "r")
             .reorder(f"{st}_rf2", "a_o a_i").vectorize(f"{st}_rf2", "a_i"))
    return s


def rate(work: float, seconds: float) -> float:
    return work / seconds / 1e9


def time_calls(fn: Callable[[], object], runs: int, warmup: int, min_seconds: float) -> td.Timing:
    """Median and minimum wall time of `fn` over at least `runs` calls (and `min_seconds`)."""
    for _ in range(warmup):
        fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < runs or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return td.Timing(statistics.median(times), min(times), len(times), tuple(times))


def check(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str | None:
    """None when `got` matches `want`, else numpy's message."""
    try:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    except AssertionError as e:
        return str(e)
    return None


def blas_info() -> dict:
    """Which BLAS numpy calls, and its kernel (core type) when threadpoolctl is installed."""
    info: dict = {}
    try:
        cfg = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        info["blas"] = f"{cfg.get('name')} {cfg.get('version')}"
    except Exception:  # numpy < 1.26 or an unusual build
        info["blas"] = "unknown"
    if importlib.util.find_spec("threadpoolctl") is None:
        info["blas_kernel"] = "(threadpoolctl not installed)"
        return info
    from threadpoolctl import threadpool_info

    np.ones((64, 64)) @ np.ones((64, 64))  # make sure the BLAS is loaded
    for lib in threadpool_info():
        if lib.get("user_api") == "blas":
            info["blas_kernel"] = (
                f"{lib.get('internal_api')} {lib.get('version')} "
                f"{lib.get('architecture', '?')}, {lib.get('num_threads')} threads"
            )
            break
    return info



# ---------------------------------------------------------------- external peers

# numpy argument names of each kernel script, in the order of the pipeline's parameters
PEER_ARGS = {"sgemm": ("A", "B"), "conv2d": ("inp", "w"), "blur": ("inp",), "softmax": ("X",),
             "layernorm": ("X", "g", "b"), "depthwise": ("inp", "w")}


def kernel_module(script: str):
    """The kernel script's module: the running one when it is the main program."""
    main = sys.modules.get("__main__")
    if main is not None and getattr(main, "__file__", "").endswith(f"{script}.py"):
        return main
    return importlib.import_module(script)


def output_shape(script: str, dims) -> tuple[int, ...]:
    """The shape of a kernel script's output for problem size `dims`."""
    if script == "sgemm":
        m, _, n = dims
        return (m, n)
    if script == "conv2d":
        _, co, h, w = dims
        return (co, h, w)
    if script == "blur":
        h, w = dims
        return (h - 2, w - 2)
    return tuple(dims)  # softmax, layernorm, depthwise: the input's shape

def best_params(best: dict, target: str, variant: str, size: str) -> dict:
    """A script's BEST entry for this case: by size, then by the machine's CPU model and
    vector ISA together (`tdsl.tune.machine.fingerprint()`, e.g. "AMD EPYC avx512f": the
    same model name comes with or without AVX-512), then by the model, then by the ISA
    (e.g. "avx2"), then the plain entry."""
    machine = fingerprint()
    for key in ((target, variant, size), (target, variant, f"{machine['cpu']} {machine['isa']}"),
                (target, variant, machine["cpu"]), (target, variant, machine["isa"]),
                (target, variant)):
        if key in best:
            return best[key]
    raise KeyError(f"no BEST entry for {(target, variant)}")


# ---------------------------------------------------------------- one measurement


def unscheduled_case(module, target: str, variant: str, size: str) -> Case:
    """The "default", "auto" or "tuned" variant: the script's user_algorithm with no
    schedule, with the schedule the auto-scheduler chooses, or with the one tune.py
    recorded; inputs and checks as "best"."""
    base = module.case(target, "best", size)
    outputs = module.user_algorithm(*module.SIZES[size])
    if variant == "default":
        def schedule_fn():
            return td.schedule(outputs)
        note = "no schedule"
    elif variant == "auto":
        def schedule_fn():
            return td.autoschedule(outputs, target=target)
        note = "td.autoschedule"
    else:
        def schedule_fn():
            # on a machine the log has no record of, from_log re-measures the best records
            # of other machines against the auto-scheduler's choice, on these inputs, once
            # (recorded in the log): what an application shipping the log gets
            return td.Schedule.from_log(TUNED_LOG, outputs, target=target, arrays=base.inputs)
        note = f"td.Schedule.from_log({TUNED_LOG.name})"
    return Case(base.kernel, schedule_fn, base.inputs, base.reference, base.work, base.unit,
                base.rtol, base.atol, note)


def measure_tdsl(case: Case, target: str, runs: int, warmup: int, min_seconds: float) -> dict:
    t0 = time.perf_counter()
    try:
        sched = case.schedule_fn()
    except td.TuningError as e:  # no record in the tuning log for this kernel
        return {"check": "not tuned", "why": str(e)[:300]}
    schedule_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    f = td.build(sched, target=target)
    build_s = time.perf_counter() - t0
    got = f(**case.inputs)
    mismatch = check(got, case.reference(), case.rtol, case.atol)
    result = {"check": "ok" if mismatch is None else "WRONG", "build_s": round(build_s, 3),
              "schedule_s": round(schedule_s, 3), "schedule": repr(sched)}
    if mismatch is not None:
        result["mismatch"] = mismatch
        return result
    timing = f.benchmark(runs=runs, warmup=warmup, min_seconds=min_seconds, **case.inputs)
    result.update(ms=timing.median * 1e3, min_ms=timing.min * 1e3, runs=timing.runs,
                  rate=rate(case.work, timing.median))
    return result


def measure_peer(peer: Peer, want: np.ndarray | None, rtol: float, atol: float, runs: int,
                 warmup: int, min_seconds: float) -> dict:
    got = peer.fn()
    result: dict = {"check": "ok"}
    if want is not None:
        mismatch = check(got, want, rtol, atol)
        if mismatch is not None:
            return {"check": "WRONG", "mismatch": mismatch}
    timing = time_calls(peer.fn, runs, warmup, min_seconds)
    result.update(ms=timing.median * 1e3, min_ms=timing.min * 1e3, runs=timing.runs,
                  rate=rate(peer.work, timing.median), **peer.info)
    return result


def script_name(module) -> str:
    """"sgemm" for benchmarks/sgemm.py, also when it runs as __main__."""
    return Path(module.__file__).stem


def measure_external(module, peer: str, size: str, runs: int, warmup: int,
                     min_seconds: float) -> dict:
    """Halide or TVM (peer_halide.py, peer_tvm.py; Halide's autoschedulers,
    peer_halide_auto.py; MetaSchedule, peer_tvm_ms.py) on one kernel, checked against numpy
    with the tolerances of the kernel's tdsl case. A missing package is "not
    installed", a kernel the peer module has no pipeline for "no peer"; any
    failure to build or run is reported as "error: ...", not raised."""
    kernel = module.kernel_name(size)
    package = peer.split("-")[0]
    if importlib.util.find_spec(package) is None:
        return {"kernel": kernel, "check": "not installed"}
    try:
        name = {"tvm-ms": "peer_tvm_ms"}.get(peer, "peer_halide_auto" if peer in HALIDE_AUTO
                                                  else f"peer_{peer}")
        peer_module = importlib.import_module(name)
        if script_name(module) not in peer_module.BUILDERS:
            return {"kernel": kernel, "check": "no peer"}
        if peer in HALIDE_AUTO:
            p = peer_module.peer(script_name(module), size, peer)
        else:
            p = peer_module.peer(script_name(module), size)
        if p is None:  # MetaSchedule: not tuned on this machine (benchmarks/tune.py)
            return {"kernel": kernel, "check": "not tuned"}
        c = module.case("c", "best", size)
        result = measure_peer(p, c.reference(), c.rtol, c.atol, runs, warmup, min_seconds)
    except Exception as e:  # a peer's build or run failing must not end the suite
        first = str(e).strip().splitlines()
        return {"kernel": kernel, "check": f"error: {type(e).__name__}: "
                                           f"{first[0] if first else ''}"[:300]}
    return {"kernel": p.kernel, "unit": p.unit, **result}


def naive_peer(module, size: str) -> Peer:
    """The script's NAIVE_C (a C function `kernel(inputs..., output)` whose sizes are
    the macros `naive_defines(dims)` gives) built with gcc NAIVE_FLAGS and called on
    the script's inputs: one thread, no OpenMP, no fast-math."""
    dims = module.SIZES[size]
    script = script_name(module)
    with tempfile.TemporaryDirectory() as d:
        src, lib = Path(d) / f"{script}_naive.c", Path(d) / f"{script}_naive.so"
        src.write_text(module.NAIVE_C)
        defines = [f"-D{k}={v}" for k, v in module.naive_defines(dims).items()]
        subprocess.run(["gcc", *NAIVE_FLAGS, *defines, str(src), "-o", str(lib), "-lm"],
                       check=True, capture_output=True, text=True)
        fn = ctypes.CDLL(str(lib)).kernel
    arrays = module.inputs(size)
    args = [np.ascontiguousarray(arrays[name]) for name in PEER_ARGS[script]]
    out = aligned_empty(output_shape(script, dims), np.float32)
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * (len(args) + 1)
    keep = (*args, out)  # the arrays the pointers point into live as long as `call`

    def call() -> np.ndarray:
        fn(*(a.ctypes.data for a in keep))
        return out

    case = module.case("c", "best", size)
    return Peer(case.kernel, call, case.work, case.unit,
                info={"compiler": "gcc " + " ".join(NAIVE_FLAGS[:2])})


def tdsl_peers(module, extra: bool = False) -> list[str]:
    """The tdsl peers of a kernel: each variant on each target (with `extra`, also
    the variants run.py leaves out of its table)."""
    variants = module.VARIANTS + (getattr(module, "EXTRA_VARIANTS", ()) if extra else ())
    names = []
    for variant in variants:
        for target in ("c", "llvm"):
            names.append(f"tdsl-{target}" + ("" if variant == "best" else f"-{variant}"))
    return names


def naive_peers(module) -> list[str]:
    """[NAIVE] when the script has a textbook C loop nest, else []."""
    return [NAIVE] if hasattr(module, "NAIVE_C") else []


def parse_tdsl_peer(name: str) -> tuple[str, str]:
    """"tdsl-c" -> ("c", "best"); "tdsl-llvm-plain" -> ("llvm", "plain")."""
    parts = name.split("-", 2)
    return parts[1], parts[2] if len(parts) > 2 else "best"


def measure(module, peer: str, size: str, runs: int, warmup: int, min_seconds: float) -> dict:
    """One peer on one problem size, as a JSON-able dict (rate in the case's unit)."""
    base = {"peer": peer, "size": size}
    if peer in EXTERNAL:
        return {**base, **measure_external(module, peer, size, runs, warmup, min_seconds)}
    if peer == NUMPY:
        p = module.numpy_peer(size)
        # the numpy peer is the reference itself: nothing to check it against
        return {**base, "kernel": p.kernel, "unit": p.unit,
                **measure_peer(p, None, 0, 0, runs, warmup, min_seconds), **blas_info()}
    if peer == NAIVE:
        c = module.case("c", "best", size)
        p = naive_peer(module, size)
        return {**base, "kernel": p.kernel, "unit": p.unit,
                **measure_peer(p, c.reference(), c.rtol, c.atol, runs, warmup, min_seconds)}
    target, variant = parse_tdsl_peer(peer)
    if variant in UNSCHEDULED:
        c = unscheduled_case(module, target, variant, size)
    else:
        c = module.case(target, variant, size)
    return {**base, "kernel": c.kernel, "unit": c.unit, "note": c.note,
            **measure_tdsl(c, target, runs, warmup, min_seconds)}


# ---------------------------------------------------------------- search


def search(module, target: str, variant: str, size: str, runs: int,
           refine: int = 4) -> list[tuple[float, str, str]]:
    """Time every candidate schedule once, then re-time the `refine` fastest in
    interleaved rounds; print and return (ms, label, repr), fastest first."""
    base = module.case(target, variant, size)
    # numpy's answer once: computed again before each candidate, its BLAS threads went
    # on spinning beside the candidate's timed calls (1x14x32 conv2d tiles: 16 ms, not 0.8)
    want = base.reference()
    results = []
    for label, schedule_fn in module.candidates(target, variant, size):
        c = Case(base.kernel, schedule_fn, base.inputs, lambda: want, base.work, base.unit,
                 base.rtol, base.atol)
        try:
            r = measure_tdsl(c, target, runs, 1, 0.2)
        except td.TdslError as e:
            print(f"  {label:44s} rejected: {type(e).__name__}: {str(e).splitlines()[0]}",
                  flush=True)
            continue
        if r["check"] != "ok":
            print(f"  {label:44s} WRONG", flush=True)
            continue
        print(f"  {label:44s} {r['ms']:9.3f} ms  {r['rate']:7.1f} {c.unit}  "
              f"(build {r['build_s']:.1f} s)", flush=True)
        results.append((r["ms"], label, r["schedule"]))
    results.sort()
    if refine > 1 and len(results) > 1:
        results = _refine(module, base, target, variant, size, results[:refine], rounds=5)
    if results:
        print(f"fastest on {target}/{variant}: {results[0][1]}\n{results[0][2]}")
    return results


def _refine(module, base: Case, target: str, variant: str, size: str, top, rounds: int):
    """Re-time the leading candidates in interleaved rounds (so a noisy moment of
    the machine hits them all alike) and rank them by the median of their rounds."""
    fns = dict(module.candidates(target, variant, size))
    kernels = {}
    for _, label, _ in top:
        kernels[label] = td.build(fns[label](), target=target)
    medians: dict[str, list[float]] = {label: [] for label in kernels}
    for _ in range(rounds):
        for label, f in kernels.items():
            t = f.benchmark(runs=10, warmup=1, min_seconds=0.5, **base.inputs)
            medians[label].append(t.median * 1e3)
    print(f"refined over {rounds} interleaved rounds (median of round medians):")
    out = []
    for _, label, text in top:
        ms = statistics.median(medians[label])
        spread = f"{min(medians[label]):.3f}..{max(medians[label]):.3f}"
        print(f"  {label:44s} {ms:9.3f} ms  {rate(base.work, ms / 1e3):7.1f} {base.unit}  "
              f"(rounds {spread} ms)", flush=True)
        out.append((ms, label, text))
    out.sort()
    return out


# ---------------------------------------------------------------- command line


def main(module, argv: list[str] | None = None) -> int:
    peers = tdsl_peers(module, extra=True) + [NUMPY, *EXTERNAL] + naive_peers(module)
    p = argparse.ArgumentParser(description=module.__doc__.splitlines()[0])
    p.add_argument("--peer", choices=peers, default="tdsl-c", help="what to measure")
    p.add_argument("--size", choices=list(module.SIZES), default=module.DEFAULT_SIZE)
    p.add_argument("--runs", type=int, default=10, help="timed calls, at least (default 10)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--min-seconds", type=float, default=1.0,
                   help="keep timing until this much time has passed (default 1)")
    p.add_argument("--search", action="store_true",
                   help="time every candidate schedule of the peer's target and variant")
    p.add_argument("--refine", type=int, default=4, metavar="K",
                   help="with --search: re-time the K fastest in interleaved rounds (default 4)")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")
    if args.search:
        if not args.peer.startswith("tdsl-"):
            p.error("--search applies to a tdsl peer")
        target, variant = parse_tdsl_peer(args.peer)
        return 0 if search(module, target, variant, args.size, args.runs, args.refine) else 1
    try:
        result = measure(module, args.peer, args.size, args.runs, args.warmup, args.min_seconds)
    except td.TdslError as e:
        result = {"peer": args.peer, "size": args.size, "check": f"error: {type(e).__name__}: {e}"}
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0 if result.get("check") in NOT_FAILURES else 1
