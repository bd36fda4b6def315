"""The notebook tuning loop: edit a schedule, rebuild, time, for a 512^3 matmul.

    python benchmarks/edit_cycle.py                  both targets
    python benchmarks/edit_cycle.py --targets llvm

Each edit changes the tile sizes of a tiled, vectorized, parallel matmul, so every
build is cold (no cache holds that schedule). A cycle is `td.build` (lowering and
code generation) plus `f.benchmark(warmup=1, accuracy=0.05)`, which stops once the
three fastest calls agree within 5%. The table gives each part's median over the
edits, and the same cycle with `benchmark()`'s defaults (2 warm-up and 10 timed
calls) for comparison. Builds are cold: the LLVM in-memory cache is cleared before
each, and C kernels go to an empty cache directory (XDG_CACHE_HOME) for each
timing mode.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

import tdsl as td
from tdsl import backend_llvm

N = 512
EDITS = ((8, 32, 4), (4, 64, 4), (8, 64, 2), (16, 32, 4), (4, 32, 8), (8, 16, 4), (2, 64, 4),
         (16, 64, 2), (8, 32, 8), (4, 16, 4))


def matmul(ti: int, tj: int, tk: int) -> td.Schedule:
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: N, k: N}, td.float32)
    B = td.input("B", {k: N, j: N}, td.float32)
    C = td.compute("C", {i: N, j: N}, td.sum(A[i, k] * B[k, j], over=k))
    return (td.schedule(C).tile(C, i=ti, j=tj).split(C, k, tk)
            .reorder(C, "i_o j_o k_o i_i k_i j_i").vectorize(C, "j_i").parallel(C, "i_o"))


def cycle(target: str, edit: tuple[int, int, int], arrays: dict, quick: bool):
    """(build seconds, timing seconds, calls timed) of one edit."""
    t0 = time.perf_counter()
    f = td.build(matmul(*edit), target=target)
    t1 = time.perf_counter()
    if quick:
        timing = f.benchmark(warmup=1, accuracy=0.05, **arrays)
    else:
        timing = f.benchmark(**arrays)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, timing.runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", nargs="+", default=["llvm", "c"])
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    arrays = {"A": rng.random((N, N), dtype=np.float32), "B": rng.random((N, N), dtype=np.float32)}
    want = arrays["A"] @ arrays["B"]
    print(f"{'target':6s} {'timing':22s} {'build ms':>9s} {'time ms':>8s} {'cycle ms':>9s} "
          f"{'calls':>6s}   (medians over {len(EDITS)} edits)")
    for target in args.targets:
        warm = td.build(matmul(8, 8, 1), target=target)  # imports and first-use costs
        np.testing.assert_allclose(warm(**arrays), want, rtol=1e-4)
        for quick, label in ((True, "accuracy=0.05 warmup=1"), (False, "defaults")):
            rows = []
            with tempfile.TemporaryDirectory() as cache:
                os.environ["XDG_CACHE_HOME"] = cache  # an empty C kernel cache
                for edit in EDITS:
                    backend_llvm.clear_cache()
                    rows.append(cycle(target, edit, arrays, quick))
            build = statistics.median(r[0] for r in rows) * 1e3
            timing = statistics.median(r[1] for r in rows) * 1e3
            total = statistics.median(r[0] + r[1] for r in rows) * 1e3
            calls = statistics.median(r[2] for r in rows)
            print(f"{target:6s} {label:22s} {build:9.1f} {timing:8.1f} {total:9.1f} {calls:6.0f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
