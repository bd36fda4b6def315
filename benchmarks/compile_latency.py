"""Build latency of the demo kernels: cold (empty caches) and cached, C and LLVM.

    python benchmarks/compile_latency.py

Cold builds use a fresh temporary C cache directory and a cleared LLVM
in-process cache; "cached" is a second build of the same schedule. Each figure
is the median of several builds. Lowering (isl) is included in every figure,
and also shown on its own.
"""

from __future__ import annotations

import statistics
import tempfile
import time

import tdsl as td
from tdsl import backend_c, backend_llvm
from tdsl.lower import lower_schedule


def matmul():
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: 1024, k: 1024}, td.float32)
    B = td.input("B", {k: 1024, j: 1024}, td.float32)
    C = td.compute("C", {i: 1024, j: 1024}, td.sum(A[i, k] * B[k, j], over=k))
    return (td.schedule(C).tile(C, i=32, j=64).split(C, k, 4)
            .reorder(C, "i_o j_o k_o i_i k_i j_i").vectorize(C, "j_i").parallel(C, "i_o"))


def blur():
    x, y = td.dims("x y")
    inp = td.input("inp", {y: 2048, x: 2048}, td.float32)
    bx = td.compute("bx", {y: 2048, x: 2046}, (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) / 3)
    by = td.compute("by", {y: 2046, x: 2046}, (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3)
    return (td.schedule(by).split(by, y, 32).split(by, x, 8).reorder(by, "y_o y_i x_o x_i")
            .vectorize(by, "x_i").parallel(by, "y_o").compute_at(bx, by, "y_o"))


def softmax():
    i, j = td.dims("i j")
    x = td.input("x", {i: 4096, j: 1024}, td.float32)
    mx = td.compute("mx", {i: 4096}, td.max(x[i, j], over=j))
    e = td.compute("e", {i: 4096, j: 1024}, td.exp(x[i, j] - mx[i]))
    s = td.compute("s", {i: 4096}, td.sum(e[i, j], over=j))
    out = td.compute("out", {i: 4096, j: 1024}, e[i, j] / s[i])
    return (td.schedule(out).parallel(out, i).compute_at(mx, out, i).compute_at(e, out, i)
            .compute_at(s, out, i))


def _median(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def timings(sched, runs: int) -> tuple[float, ...]:
    """lower, C cold, C cached, LLVM cold, LLVM cached: median ms of `runs` builds each."""

    def c_cold():
        with tempfile.TemporaryDirectory() as d:
            backend_c.build(lower_schedule(sched), cache_dir=d)

    def llvm_cold():
        backend_llvm.clear_cache()
        backend_llvm.build(lower_schedule(sched))

    lower_ms = _median(lambda: lower_schedule(sched), runs) * 1e3
    c_cold_ms = _median(c_cold, runs) * 1e3
    td.build(sched, target="c")
    c_warm_ms = _median(lambda: td.build(sched, target="c"), runs) * 1e3
    llvm_cold_ms = _median(llvm_cold, runs) * 1e3
    td.build(sched, target="llvm")
    llvm_warm_ms = _median(lambda: td.build(sched, target="llvm"), runs) * 1e3
    return lower_ms, c_cold_ms, c_warm_ms, llvm_cold_ms, llvm_warm_ms


def main(runs: int = 5) -> None:
    rows = []
    for name, make in (("matmul 1024^3", matmul), ("blur 2048^2", blur), ("softmax 4096x1024", softmax)):
        rows.append((name, *timings(make(), runs)))
    head = ("kernel", "lower ms", "C cold ms", "C cached ms", "LLVM cold ms", "LLVM cached ms")
    print(" | ".join(f"{h:>16}" for h in head))
    for r in rows:
        print(" | ".join([f"{r[0]:>16}"] + [f"{v:16.3f}" for v in r[1:]]))


if __name__ == "__main__":
    main()
