"""covariance: PolyBench covariance, M = 1200 variables over N = 1400 samples (float32), tdsl against numpy.

    python benchmarks/covariance.py --peer tdsl-c
    python benchmarks/covariance.py --peer tdsl-llvm --search

PolyBench's kernel with its LARGE sizes: the mean of each column, the data
centred, then cov[i, j] = sum over s of D[s, i] * D[s, j] / (N - 1). PolyBench
computes the upper triangle and mirrors it; here every element is computed (as
numpy's np.cov and D.T @ D do), and the rate counts 2 M^2 N flops. numpy centres
the data and calls sgemm on D.T @ D.

Variants:

best   numpy's D.T @ D is a symmetric rank-k update (SYRK): it computes one
       triangle. So does this variant: S sums only over the ti x tj register
       tiles that meet the lower triangle (i >= j); on every other tile the sum's
       range is empty (the algorithm's bound on s, `triangle=(ti, tj)`), and cov
       reads S[i, j] below the diagonal and S[j, i] above it. The column means are
       vector sums over rows, column blocks on threads. D (the centred data) is
       laid out [i, s], so the tile's 12 broadcast operands D[s, i..i+11] stream
       down rows of D as sgemm's A does (in X's order they are 12 floats 4.8 KB
       apart per step, which the prefetchers do not follow: 25.7 against 16.9 ms).
       S is computed as sgemm.py's: per ti x tj tile in vector registers over the
       whole sample loop (cache_write), column panels on threads, the panel of
       D[s, j] packed per panel (Dp, a copy of D that the schedule computes per
       panel: cache_read would redirect both of S's reads of D). Panels to the
       right hold fewer tiles of the triangle, so the dynamic chunks at the end
       of the loop are the small ones. With AVX2's 16 vector registers the tiles
       are 6x16 (C) and 4x24 (LLVM).
default no schedule (the full square, as a user writes it).
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


def algorithm(n: int, m: int, packed: bool = False, triangle: tuple[int, int] | None = None):
    """With `packed`, S reads D[s, j] through a copy Dp (the same values) that a
    schedule can place per column panel: cache_read would redirect both of S's
    reads of D. With `triangle=(ti, tj)`, S sums only on the ti x tj tiles of
    (i, j) that meet the triangle i >= j (elsewhere its sum is empty) and cov
    mirrors the triangle."""
    s, i, j = td.dims("s i j")
    X = td.input("X", {s: n, i: m}, td.float32)
    total = td.compute("total", {i: m}, td.sum(X[s, i], over=s))
    D = td.compute("D", {s: n, i: m}, X[s, i] - total[i] / n)
    Dj = td.compute("Dp", {s: n, j: m}, D[s, j]) if packed else None
    right = Dj[s, j] if Dj is not None else D[s, j]
    if triangle is None:
        S = td.compute("S", {i: m, j: m}, td.sum(D[s, i] * right, over=s))
        return td.compute("cov", {i: m, j: m}, S[i, j] / (n - 1))
    ti, tj = triangle
    # the tile's first column beyond its last row: no element of it has i >= j, and
    # the sum starts at s = n (empty); otherwise at 0
    beyond = (j // tj) * tj - (i // ti) * ti - (ti - 1)
    first = td.minimum(n, td.maximum(0, n * beyond))
    S = td.compute("S", {i: m, j: m}, td.sum(D[s, i] * right, over={s: (first, n)}))
    return td.compute("cov", {i: m, j: m}, td.where(i >= j, S[i, j], S[j, i]) / (n - 1))


def user_algorithm(n: int, m: int):
    return algorithm(n, m)


def tiled_schedule(size, ti: int, tj: int, v: int, vm: int = 16, ct: int = 16) -> td.Schedule:
    """Register tiles ti x tj of v-lane vectors on the triangle; the means in vm-lane
    column blocks; the mirror in ct x ct blocks."""
    cov = algorithm(*size, packed=True, triangle=(ti, tj))
    return (td.schedule(cov)
            .split("total", "i", vm).reorder("total", "i_o s i_i")
            .parallel("total", "i_o").vectorize("total", "i_i")
            .layout("D", "i s").reorder("D", "i s").parallel("D", "i").vectorize("D", "s")
            .cache_write("S", "Sacc")
            .tile("S", i=ti, j=tj)
            .reorder("S", "j_o i_o i_i j_i")
            .parallel("S", "j_o")
            .vectorize("S", "j_i")
            .compute_at("Dp", "S", "j_o").vectorize("Dp", "j")
            .compute_at("Sacc", "S", "i_o")
            .split("Sacc", "j", v, names=("j_u", "j_v"))
            .reorder("Sacc", "s i j_u j_v")
            .unroll("Sacc", "i").unroll("Sacc", "j_u").vectorize("Sacc", "j_v")
            .tile(cov, i=ct, j=ct).parallel(cov, "i_o").vectorize(cov, "j_i"))


BEST = {
    ("c", "best"): dict(ti=6, tj=16, v=8, vm=8),
    ("llvm", "best"): dict(ti=4, tj=24, v=8, vm=8),
    # --search on an AVX-512 Xeon, interleaved against the square of the same tiles
    # (D in X's order, no triangle): C 9.2 against 25.7 ms, LLVM 8.9
    ("llvm", "best", "avx512f"): dict(ti=12, tj=32, v=16),
    ("c", "best", "avx512f"): dict(ti=12, tj=32, v=16),
}


def _build_schedule(variant: str, dims, params) -> td.Schedule:
    return tiled_schedule(dims, **params)


def candidates(target: str, variant: str, size: str):
    dims = SIZES[size]
    # register tiles: ti x tj of v-lane vectors; with AVX2's 16 registers ti * tj / v
    # accumulators must stay within about 12 of them
    grid = [(4, 16, 8), (6, 16, 8), (8, 16, 8), (3, 32, 8), (4, 24, 8), (2, 32, 8), (8, 32, 8)]
    # AVX-512: 32 registers of 16 lanes
    grid += [(4, 32, 16), (6, 32, 16), (8, 32, 16), (12, 32, 16), (8, 48, 16), (4, 64, 16)]
    return [(f"tile {ti}x{tj} v{v}", lambda a=ti, b=tj, c=v: tiled_schedule(dims, a, b, c))
            for ti, tj, v in grid]


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
        note="centred D, register-tiled triangle of D^T D" if variant == "best" else "",
    )


def numpy_peer(size: str) -> harness.Peer:
    arrays = inputs(size)
    return harness.Peer(kernel_name(size), lambda: reference(**arrays), _work(size), "GFLOP/s")


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
