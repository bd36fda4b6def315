"""jacobi2d: PolyBench jacobi-2d, TSTEPS time steps on an N x N float32 grid, tdsl against numpy.

    python benchmarks/jacobi2d.py --peer tdsl-c
    python benchmarks/jacobi2d.py --peer tdsl-llvm --search

PolyBench's kernel, for t in 0 .. TSTEPS-1:

    B[i, j] = 0.2 * (A[i, j] + A[i, j-1] + A[i, j+1] + A[i+1, j] + A[i-1, j])   (interior)
    A[i, j] = 0.2 * (B[i, j] + B[i, j-1] + B[i, j+1] + B[i+1, j] + B[i-1, j])   (interior)

In tdsl the two arrays are the two planes of one stage G (G[0] = B, G[1] = A, so
the output holds both), and the time loop is an update over t with a plane dim
p: for each t, plane 0 from plane 1, then plane 1 from plane 0,

    td.update(G[p, i, j], 0.2 * (G[1-p, i, j] + ...), over={t: TSTEPS, p: 2, i: ..., j: ...})

isl's dependence analysis proves what a schedule may do with it: t and p stay
sequential and in order, while within one half step the rows i may run on
threads and j in vector lanes. numpy runs the same half steps on slices. The
rate counts PolyBench's 5 flops per interior point and half step.

Variants:

best   rows i on threads (one OpenMP region per half step: 2 * TSTEPS of
       them); on LLVM, j split by v and vectorized; on C, j is left to gcc's
       loop vectorizer (the split's guarded tail measured slower there). Both
       planes (13.5 MB) are read and written once per half step, so this is
       bound by the memory: the default schedule, one thread, is about as fast
       on C. Time tiling (skewing t into the rows) would be the next step.
default the update with no schedule (sequential, scalar).
"""

from __future__ import annotations

import sys

import harness
import numpy as np

import tdsl as td

# (N, TSTEPS)
SIZES = {"1300": (1300, 20), "tiny": (11, 3)}
DEFAULT_SIZE = "1300"
VARIANTS = ("best", "auto")
EXTRA_VARIANTS = ("default",)  # no schedule (harness.unscheduled_case)


def algorithm(n: int, steps: int):
    t, p, i, j = td.dims("t p i j")
    A = td.input("A", {i: n, j: n}, td.float32)
    B = td.input("B", {i: n, j: n}, td.float32)
    G = td.compute("G", {p: 2, i: n, j: n}, td.where(p == 0, B[i, j], A[i, j]))
    q = 1 - p
    td.update(G[p, i, j],
              0.2 * (G[q, i, j] + G[q, i, j - 1] + G[q, i, j + 1] + G[q, i + 1, j]
                     + G[q, i - 1, j]),
              over={t: steps, p: 2, i: (1, n - 1), j: (1, n - 1)})
    return G


def user_algorithm(n: int, steps: int):
    return algorithm(n, steps)


def threaded_schedule(size, v: int | None) -> td.Schedule:
    """The update (G.u0) and the initial copy: rows i on threads, j split by v
    and vectorized (None: j left to the C compiler's loop vectorizer)."""
    G = algorithm(*size)
    s = td.schedule(G).parallel("G.u0", "i").parallel(G, "i")
    if v is None:
        return s
    return s.split("G.u0", "j", v).vectorize("G.u0", "j_i").vectorize(G, "j")



BEST = {
    ("c", "best"): dict(v=None),
    ("llvm", "best"): dict(v=8),
}


def _build_schedule(variant: str, dims, params) -> td.Schedule:
    return threaded_schedule(dims, **params)


def candidates(target: str, variant: str, size: str):
    dims = SIZES[size]
    return [(f"v{v}", lambda a=v: threaded_schedule(dims, a)) for v in (None, 4, 8, 16, 32)]


@harness.aligned_inputs
def inputs(size: str) -> dict[str, np.ndarray]:
    """Random grids. (PolyBench's init_array, (i (j + 2) + 2) / N, is harmonic: each
    step would leave A's interior as it is.)"""
    n, _ = SIZES[size]
    rng = np.random.default_rng(0)
    return {"A": rng.random((n, n), dtype=np.float32), "B": rng.random((n, n), dtype=np.float32)}


def reference(A: np.ndarray, B: np.ndarray, steps: int) -> np.ndarray:
    a, b = A.copy(), B.copy()
    c = np.float32(0.2)
    for _ in range(steps):
        for dst, src in ((b, a), (a, b)):
            dst[1:-1, 1:-1] = c * (src[1:-1, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:]
                                   + src[2:, 1:-1] + src[:-2, 1:-1])
    return np.stack([b, a])


def _work(size: str) -> float:
    n, steps = SIZES[size]
    return 5.0 * 2 * steps * (n - 2) ** 2


def kernel_name(size: str) -> str:
    n, steps = SIZES[size]
    return f"jacobi-2d {n}^2 x{steps}"


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
        atol=1e-5,
        note="i on threads, j vectorized, per half step" if variant == "best" else "",
    )


def numpy_peer(size: str) -> harness.Peer:
    arrays = inputs(size)
    steps = SIZES[size][1]
    return harness.Peer(kernel_name(size),
                        lambda: reference(arrays["A"], arrays["B"], steps), _work(size), "GFLOP/s")


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
