"""covariance: PolyBench covariance, M = 1200 variables over N = 1400 samples (float32), tdsl against numpy.

    python benchmarks/covariance.py --peer tdsl-c
    python benchmarks/covariance.py --peer tdsl-llvm --search

PolyBench's kernel with its LARGE sizes: the mean of each column, the data
centred, then cov[i, j] = sum over s of D[s, i] * D[s, j] / (N - 1). PolyBench
computes the upper triangle and mirrors it; here every element is computed (as
numpy's np.cov and D.T @ D do), and the rate counts 2 M^2 N flops. numpy centres
the data and calls sgemm on D.T @ D.

Variants:

best   D (the centred data) computed in full first, rows on threads, vectorized;
       the product as sgemm.py's: S computed per ti x tj tile of cov and held in
       vector registers over the whole sample loop, column panels on threads,
       and the panel of D[s, j] packed per column panel. S reads D twice
       (D[s, i] broadcast, D[s, j] in vectors) and cache_read would redirect
       both, so the algorithm reads the second through Dp, a copy of D
       (algorithm(packed=True)), which the schedule computes per panel. With
       AVX2's 16 vector registers the tiles are 6x16 (C) and 4x24 (LLVM).
default no schedule.
"""

from __future__ import annotations

import sys

import harness
import numpy as np

import tdsl as td

# (N samples, M variables)
SIZES = {"1400": (1400, 1200), "tiny": (19, 13)}
DEFAULT_SIZE = "1400"
VARIANTS = ("best", "auto")
EXTRA_VARIANTS = ("default",)  # no schedule (harness.unscheduled_case)


def algorithm(n: int, m: int, packed: bool = False):
    """With `packed`, S reads D[s, j] through a copy DT (the same values) that a
    schedule can place per column panel: cache_read would redirect both of S's
    reads of D."""
    s, i, j = td.dims("s i j")
    X = td.input("X", {s: n, i: m}, td.float32)
    total = td.compute("total", {i: m}, td.sum(X[s, i], over=s))
    D = td.compute("D", {s: n, i: m}, X[s, i] - total[i] / n)
    Dj = td.compute("Dp", {s: n, j: m}, D[s, j]) if packed else None
    right = Dj[s, j] if Dj is not None else D[s, j]
    S = td.compute("S", {i: m, j: m}, td.sum(D[s, i] * right, over=s))
    return td.compute("cov", {i: m, j: m}, S[i, j] / (n - 1))


def user_algorithm(n: int, m: int):
    return algorithm(n, m)


def tiled_schedule(size, ti: int, tj: int, v: int, pack: bool) -> td.Schedule:
    cov = algorithm(*size, packed=pack)
    s = (td.schedule(cov)
         .parallel("D", "s").vectorize("D", "i")
         .tile(cov, i=ti, j=tj)
         .reorder(cov, "j_o i_o i_i j_i")
         .parallel(cov, "j_o")
         .vectorize(cov, "j_i")
         .compute_at("S", cov, "i_o")
         .split("S", "j", v, names=("j_u", "j_v"))
         .reorder("S", "s i j_u j_v")
         .unroll("S", "i").unroll("S", "j_u").vectorize("S", "j_v"))
    if pack:
        s = s.compute_at("Dp", cov, "j_o").vectorize("Dp", "j")
    return s



BEST = {
    ("c", "best"): dict(ti=6, tj=16, v=8, pack=True),
    ("llvm", "best"): dict(ti=4, tj=24, v=8, pack=True),
    ("llvm", "best", "avx512f"): dict(ti=12, tj=32, v=16, pack=False),  # --search, AVX-512
    # the same on C, on an AVX-512 Xeon, interleaved: 26.6 against 43.1 ms for 6x16 v8
    ("c", "best", "avx512f"): dict(ti=12, tj=32, v=16, pack=False),
}


def _build_schedule(variant: str, dims, params) -> td.Schedule:
    return tiled_schedule(dims, **params)


def candidates(target: str, variant: str, size: str):
    dims = SIZES[size]
    # register tiles: ti x tj of v-lane vectors; with AVX2's 16 registers ti * tj / v
    # accumulators must stay within about 12 of them
    grid = [(4, 16, 8), (6, 16, 8), (8, 16, 8), (3, 32, 8), (4, 24, 8), (2, 32, 8), (8, 32, 8)]
    # AVX-512: 32 registers of 16 lanes
    grid += [(4, 32, 16), (6, 32, 16), (8, 32, 16), (12, 32, 16), (4, 64, 16)]
    return [(f"tile {ti}x{tj} v{v}{' packed' if p else ''}",
             lambda a=ti, b=tj, c=v, d=p: tiled_schedule(dims, a, b, c, d))
            for ti, tj, v in grid for p in (False, True)]


@harness.aligned_inputs
def inputs(size: str) -> dict[str, np.ndarray]:
    n, m = SIZES[size]
    rng = np.random.default_rng(0)
    return {"X": rng.standard_normal((n, m), dtype=np.float32) + np.float32(2)}


def reference(X: np.ndarray) -> np.ndarray:
    D = X - X.mean(axis=0, dtype=np.float32)
    return (D.T @ D) / np.float32(X.shape[0] - 1)


def _work(size: str) -> float:
    n, m = SIZES[size]
    return 2.0 * m * m * n


def kernel_name(size: str) -> str:
    n, m = SIZES[size]
    return f"covariance {m} vars x {n}"


def case(target: str, variant: str, size: str) -> harness.Case:
    dims = SIZES[size]
    arrays = inputs(size)
    params = harness.best_params(BEST, target, variant, size)
    n = dims[0]
    return harness.Case(
        kernel=kernel_name(size),
        schedule_fn=lambda: _build_schedule(variant, dims, params),
        inputs=arrays,
        reference=lambda: reference(**arrays),
        work=_work(size),
        unit="GFLOP/s",
        rtol=1e-4,
        atol=1e-5 * np.sqrt(n),
        note="centred D, register-tiled D^T D" if variant == "best" else "",
    )


def numpy_peer(size: str) -> harness.Peer:
    arrays = inputs(size)
    return harness.Peer(kernel_name(size), lambda: reference(**arrays), _work(size), "GFLOP/s")


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
