"""heat3d: PolyBench heat-3d, TSTEPS time steps on an N^3 float32 grid, tdsl against numpy.

    python benchmarks/heat3d.py --peer tdsl-c
    python benchmarks/heat3d.py --peer tdsl-llvm --search

PolyBench's kernel, for t in 0 .. TSTEPS-1: B from A on the interior, then A from B,

    B[i, j, k] = 0.125 * (A[i+1, j, k] - 2 A[i, j, k] + A[i-1, j, k])
               + 0.125 * (A[i, j+1, k] - 2 A[i, j, k] + A[i, j-1, k])
               + 0.125 * (A[i, j, k+1] - 2 A[i, j, k] + A[i, j, k-1]) + A[i, j, k]

written, as jacobi2d.py's, as one stage G with a plane dim (G[0] = B, G[1] = A)
and one update over {t, p, i, j, k} that writes plane p from plane 1 - p: t and
p run in order, the points of one half step are independent. The rate counts
PolyBench's 15 flops per interior point and half step.

Variants:

best   planes i on threads (one OpenMP region per half step); on LLVM, k
       split by v and vectorized; on C, k is left to gcc's loop vectorizer (the
       split's guarded tail measured slower there). Both planes (13.8 MB) are
       read and written once per half step, so this is bound by the memory: the
       default schedule, one thread, is about as fast on C.
default the update with no schedule.
"""

from __future__ import annotations

import sys

import harness
import numpy as np

import tdsl as td

# (N, TSTEPS)
SIZES = {"120": (120, 10), "tiny": (7, 2)}
DEFAULT_SIZE = "120"
VARIANTS = ("best", "auto")
EXTRA_VARIANTS = ("default",)  # no schedule (harness.unscheduled_case)


def algorithm(n: int, steps: int):
    t, p, i, j, k = td.dims("t p i j k")
    A = td.input("A", {i: n, j: n, k: n}, td.float32)
    B = td.input("B", {i: n, j: n, k: n}, td.float32)
    G = td.compute("G", {p: 2, i: n, j: n, k: n}, td.where(p == 0, B[i, j, k], A[i, j, k]))
    q = 1 - p
    c = G[q, i, j, k]
    value = (0.125 * (G[q, i + 1, j, k] - 2.0 * c + G[q, i - 1, j, k])
             + 0.125 * (G[q, i, j + 1, k] - 2.0 * c + G[q, i, j - 1, k])
             + 0.125 * (G[q, i, j, k + 1] - 2.0 * c + G[q, i, j, k - 1]) + c)
    inner = (1, n - 1)
    td.update(G[p, i, j, k], value, over={t: steps, p: 2, i: inner, j: inner, k: inner})
    return G


def user_algorithm(n: int, steps: int):
    return algorithm(n, steps)


def threaded_schedule(size, v: int | None) -> td.Schedule:
    """The update (G.u0) and the initial copy: planes i on threads, k split by v
    and vectorized (None: k left to the C compiler's loop vectorizer)."""
    G = algorithm(*size)
    s = td.schedule(G).parallel("G.u0", "i").parallel(G, "i")
    if v is None:
        return s
    return s.split("G.u0", "k", v).vectorize("G.u0", "k_i").vectorize(G, "k")



BEST = {
    # --search on a Zen 4 (2026-11-27): v8 5.24 ms at best against gcc's own
    # vectorization (None) 7.09 ms
    ("c", "best"): dict(v=8),
    ("llvm", "best"): dict(v=8),
}


def _build_schedule(variant: str, dims, params) -> td.Schedule:
    return threaded_schedule(dims, **params)


def candidates(target: str, variant: str, size: str):
    dims = SIZES[size]
    return [(f"v{v}", lambda a=v: threaded_schedule(dims, a)) for v in (None, 4, 8, 16, 32)]


@harness.aligned_inputs
def inputs(size: str) -> dict[str, np.ndarray]:
    """Random grids. (PolyBench's init_array, (i + j + N - k) * 10 / N in both, is
    linear, so every step leaves the interior as it is: a check could not fail.)"""
    n, _ = SIZES[size]
    rng = np.random.default_rng(0)
    return {"A": rng.random((n, n, n), dtype=np.float32),
            "B": rng.random((n, n, n), dtype=np.float32)}


def reference(A: np.ndarray, B: np.ndarray, steps: int) -> np.ndarray:
    a, b = A.copy(), B.copy()
    e, two = np.float32(0.125), np.float32(2)
    for _ in range(steps):
        for dst, s in ((b, a), (a, b)):
            c = s[1:-1, 1:-1, 1:-1]
            dst[1:-1, 1:-1, 1:-1] = (e * (s[2:, 1:-1, 1:-1] - two * c + s[:-2, 1:-1, 1:-1])
                                     + e * (s[1:-1, 2:, 1:-1] - two * c + s[1:-1, :-2, 1:-1])
                                     + e * (s[1:-1, 1:-1, 2:] - two * c + s[1:-1, 1:-1, :-2])
                                     + c)
    return np.stack([b, a])


def _work(size: str) -> float:
    n, steps = SIZES[size]
    return 15.0 * 2 * steps * (n - 2) ** 3


def kernel_name(size: str) -> str:
    n, steps = SIZES[size]
    return f"heat-3d {n}^3 x{steps}"


def case(target: str, variant: str, size: str) -> harness.Case:
    dims = SIZES[size]
    arrays = inputs(size)
    params = harness.best_params(BEST, target, variant, size)
    return harness.Case(
        kernel=kernel_name(size),
        schedule_fn=lambda: _build_schedule(variant, dims, params),
        inputs=arrays,
        reference=lambda: reference(arrays["A"], arrays["B"], dims[1]),
        work=_work(size),
        unit="GFLOP/s",
        rtol=1e-5,
        atol=1e-4,
        note="i on threads, k vectorized, per half step" if variant == "best" else "",
    )


def numpy_peer(size: str) -> harness.Peer:
    arrays = inputs(size)
    steps = SIZES[size][1]
    return harness.Peer(kernel_name(size),
                        lambda: reference(arrays["A"], arrays["B"], steps), _work(size), "GFLOP/s")


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
