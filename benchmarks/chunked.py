"""A two-stage 3x3 blur over an array larger than its chunks, three ways.

    python benchmarks/chunked.py            16384^2 float32 (1 GiB) in 2048^2 chunks
    python benchmarks/chunked.py --small    4096^2 (64 MiB) in 1024^2 chunks

The input is written to a zarr store in a temporary directory first; the blur is
B = (A[y-1] + A[y] + A[y+1]) / 3, C = (B[x-1] + B[x] + B[x+1]) / 3, edges clamped.

- tdsl chunked: `td.map_blocks` on a `distributed.LocalCluster` of 2 worker processes
  of 1 thread each, over the zarr array's chunks (halos inferred: 1 each side);
- dask + scipy: `dask.array.map_overlap` with depth 1 and boundary "nearest" over the
  same chunks on the same kind of cluster, each block blurred by
  `scipy.ndimage.uniform_filter1d` along each axis (C loops, mode "nearest");
- tdsl whole: one call of the same kernel on the whole array in memory (2 threads),
  in a fresh process, from the zarr store loaded first (the load is not timed).

Each chunked run computes the sum of the blurred array (so nothing large comes back to
the client); the median of `--runs` timed runs after one warm-up (which builds the
kernel in each worker), the two chunked contenders taking turns, each on a cluster of
its own. Peak memory: the largest peak resident set of the cluster's
workers (each a fresh process: it includes the interpreter and the libraries, about
200 MB), and of the process of the whole-array call. The machine is shared: wall-clock
times are indicative, ratios within one run more so.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import tdsl as td

WHOLE = r'''
import json, resource, sys, time
import dask.array as da, numpy as np
sys.path.insert(0, {bench!r})
import chunked
a = da.from_zarr({src!r}).compute()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
f = chunked.kernel()
times = []
for _ in range({runs} + 1):
    t0 = time.perf_counter(); c = f(A=a); times.append(time.perf_counter() - t0)
    total = float(c.sum(dtype=np.float64)); del c
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"times": times[1:], "peak_kib": peak, "input_kib": base, "sum": total}}))
'''


def pipeline():
    """The two stages, clamped at the edges, over symbolic sizes."""
    y, x = td.dims("y x")
    H, W = td.size("H"), td.size("W")
    A = td.input("A", {y: H, x: W}, td.float32)
    B = td.compute("B", {y: H, x: W},
                   (td.clamp(A)[y - 1, x] + A[y, x] + td.clamp(A)[y + 1, x]) * (1 / 3))
    C = td.compute("C", {y: H, x: W},
                   (td.clamp(B)[y, x - 1] + B[y, x] + td.clamp(B)[y, x + 1]) * (1 / 3))
    return A, B, C, y, x


def kernel(target: str = "c"):
    """The blur with its schedule: rows in parallel, 16 lanes along x."""
    _, B, C, y, x = pipeline()
    s = (td.schedule(C).split(B, x, 16).vectorize(B, "x_i").parallel(B, y)
         .split(C, x, 16).vectorize(C, "x_i").parallel(C, y))
    return td.build(s, target=target)


def scipy_blur(block: np.ndarray) -> np.ndarray:
    """The same blur on one block with its halo: scipy's separable box filter."""
    from scipy.ndimage import uniform_filter1d

    b = uniform_filter1d(block, 3, axis=0, mode="nearest")
    return uniform_filter1d(b, 3, axis=1, mode="nearest")


def _peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def on_clusters(makers: dict, runs: int) -> dict[str, tuple[list[float], float, int]]:
    """Per contender: the times of its graph (a scalar) on a 2-process cluster of its own,
    the contenders taking turns run by run (so a busy spell of the shared machine falls
    on all of them), its last value and its workers' largest peak resident set (KiB)."""
    import logging

    import distributed

    logging.getLogger("distributed").setLevel(logging.ERROR)
    clusters, clients = {}, {}
    try:
        for name in makers:
            clusters[name] = distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                memory_limit=0, silence_logs=logging.CRITICAL)
            clients[name] = distributed.Client(clusters[name])
        times: dict[str, list[float]] = {name: [] for name in makers}
        values: dict[str, float] = {}
        for _ in range(runs + 1):  # the first is the warm-up
            for name, make in makers.items():
                t0 = time.perf_counter()
                values[name] = float(clients[name].compute(make()).result())
                times[name].append(time.perf_counter() - t0)
        return {name: (times[name][1:], values[name], max(clients[name].run(_peak_kib).values()))
                for name in makers}
    finally:
        for name in clients:
            clients[name].close()
            clusters[name].close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="4096^2 in 1024^2 chunks")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--target", default="c", choices=("c", "llvm"))
    args = ap.parse_args()
    import dask.array as da

    n, chunk = (4096, 1024) if args.small else (16384, 2048)
    bench = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "in.zarr")
        rng = da.random.default_rng(0)
        rng.standard_normal((n, n), chunks=chunk, dtype=np.float32).to_zarr(src)
        print(f"A: {n} x {n} float32 = {n * n * 4 / 2**30:.2f} GiB in {chunk}^2 chunks "
              f"({(n // chunk) ** 2} chunks of {chunk * chunk * 4 / 2**20:.0f} MiB); "
              f"{args.runs} timed runs after a warm-up; 2 worker processes x 1 thread")
        f = kernel(args.target)

        def tdsl_graph():
            return td.map_blocks(f, A=da.from_zarr(src), threads=1).sum(dtype=np.float64)

        def scipy_graph():
            a = da.from_zarr(src)
            return a.map_overlap(scipy_blur, depth=1, boundary="nearest",
                                 dtype=np.float32).sum(dtype=np.float64)

        plan = td.chunk_plan(f, A=da.from_zarr(src))
        print(f"tdsl halos: {plan.halos}")
        found = on_clusters({"tdsl chunked (map_blocks)": tdsl_graph,
                             "dask map_overlap + scipy": scipy_graph}, args.runs)
        rows = [(name, *found[name]) for name in found]
        rows = [(name, t, peak, v) for name, t, v, peak in rows]
        code = WHOLE.format(bench=bench, src=src, runs=args.runs)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, env={**os.environ, "OMP_NUM_THREADS": "2"})
        whole = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(("tdsl whole array, one call", whole["times"], whole["peak_kib"],
                     whole["sum"]))
    base = statistics.median(rows[0][1])
    print(f"\n{'':30s} {'median s':>9s} {'vs tdsl':>8s} {'peak MiB':>9s}   sum")
    for name, times, peak_kib, value in rows:
        med = statistics.median(times)
        print(f"{name:30s} {med:9.3f} {med / base:7.2f}x {peak_kib / 1024:9.0f}   {value:.6g}")
    print(f"(whole-array process: {whole['input_kib'] / 1024:.0f} MiB resident after "
          f"loading A; peaks of chunked runs are per worker process)")
    print("shared machine: wall-clock times are indicative; compare ratios within one run")


if __name__ == "__main__":
    main()
