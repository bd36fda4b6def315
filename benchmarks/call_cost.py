"""The cost of a call, against numpy's, for small arrays on both targets.

    python benchmarks/call_cost.py                  N = 16, 1024, 65536
    python benchmarks/call_cost.py --sizes 16 --calls 20000

Two kernels as a notebook calls them, each with fresh input arrays of a shape already
seen (every argument is still checked: dtype, shape, strides, names; a given output's
writeability and overlap):

    axpb   y = 2 x + 1 over N float32 (split by 16, vectorized): 1 input, 1 new output
    add2   out = a + b over N float32: 2 inputs, 1 new output (3 arrays)
    fma3   out = a * b + c over N float32, out given by the caller: 3 inputs and 1 output

numpy's peers are `x * 2 + 1`, `a + b` and `np.multiply(a, b, out=out); out += c`. Each line is
the median over --calls calls (timed one by one with perf_counter_ns, a new array each
time from a pool made beforehand), in µs, and the ratio tdsl / numpy. On a machine
other processes keep busy the times move: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import tdsl as td


def axpb():
    x = td.dim("x")
    N = td.size("N")
    a = td.input("x", {x: N}, td.float32)
    y = td.compute("y", {x: N}, a[x] * 2 + 1)
    return td.schedule(y).split(y, "x", 16).vectorize(y, "x_i")


def add2():
    i = td.dim("i")
    N = td.size("N")
    a, b = (td.input(n, {i: N}, td.float32) for n in "ab")
    out = td.compute("out", {i: N}, a[i] + b[i])
    return td.schedule(out).split(out, "i", 16).vectorize(out, "i_i")


def fma3():
    i = td.dim("i")
    N = td.size("N")
    a, b, c = (td.input(n, {i: N}, td.float32) for n in "abc")
    out = td.compute("out", {i: N}, a[i] * b[i] + c[i])
    return td.schedule(out).split(out, "i", 16).vectorize(out, "i_i")


def median_us(call, pool: list, calls: int) -> float:
    """Median µs of `call(arrays)` over `calls` calls, cycling through `pool`."""
    for k in range(min(len(pool), 200)):  # warm up (and bind the signature)
        call(pool[k])
    times = []
    clock = time.perf_counter_ns
    for k in range(calls):
        arrays = pool[k % len(pool)]
        t0 = clock()
        call(arrays)
        times.append(clock() - t0)
    return statistics.median(times) / 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 1024, 65536])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--targets", nargs="+", default=["c", "llvm"])
    args = ap.parse_args(argv)
    kernels = {(name, t): td.build(fn(), target=t)
               for name, fn in (("axpb", axpb), ("add2", add2), ("fma3", fma3))
               for t in args.targets}
    rng = np.random.default_rng(0)
    print(f"{'kernel':6s} {'N':>7s} {'numpy us':>9s}" + "".join(
        f" {'tdsl ' + t + ' us':>12s} {'ratio':>6s}" for t in args.targets))
    for n in args.sizes:
        count = max(2, min(1000, (1 << 22) // (n * 16)))  # fresh arrays, a few MB in all
        xs = [{"x": rng.standard_normal(n).astype(np.float32)} for _ in range(count)]
        abc = [{k: rng.standard_normal(n).astype(np.float32) for k in "abc"}
               | {"out": np.empty(n, np.float32)} for _ in range(count)]
        ab = [{"a": d["a"], "b": d["b"]} for d in abc]
        for name, pool in (("axpb", xs), ("add2", ab), ("fma3", abc)):
            if name == "axpb":
                def peer(d):
                    return d["x"] * 2 + 1
            elif name == "add2":
                def peer(d):
                    return d["a"] + d["b"]
            else:
                def peer(d):
                    np.multiply(d["a"], d["b"], out=d["out"])
                    d["out"] += d["c"]
                    return d["out"]
            base = median_us(peer, pool, args.calls)
            cells = []
            for t in args.targets:
                f = kernels[(name, t)]
                np.testing.assert_allclose(f(**pool[0]), peer(pool[0]), rtol=1e-6)
                us = median_us(lambda d, f=f: f(**d), pool, args.calls)
                cells.append(f" {us:12.2f} {us / base:6.2f}")
            print(f"{name:6s} {n:7d} {base:9.2f}" + "".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
