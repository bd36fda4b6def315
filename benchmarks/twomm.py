"""twomm: PolyBench 2mm, D = alpha * A @ B @ C + beta * D0 in float32, tdsl against numpy.

    python benchmarks/twomm.py --peer tdsl-c
    python benchmarks/twomm.py --peer tdsl-llvm --search

PolyBench's two matrix products with its LARGE sizes (NI, NJ, NK, NL) = (800,
900, 1100, 1200) and alpha = 1.5, beta = 1.2:

    tmp[i, j] = alpha * sum over k of A[i, k] * B[k, j]
    D[i, l]   = beta * D0[i, l] + sum over j of tmp[i, j] * C[j, l]

The sums are stages of their own (AB and TC), as a user writes them to name the
accumulators; numpy computes alpha * (A @ B) @ C + beta * D0 (two sgemms). The rate
counts 2 (NI NJ NK + NI NL NJ) flops.

Variants:

best   each product scheduled as sgemm.py's best: its right operand packed per
       tj-column panel (cache_read: Bp, Cp), its accumulator (AB, TC) computed per
       ti x tj tile and held in vector registers over the whole reduction, the
       column panels on threads; tmp is computed in full before D. Tiles of
       4x24 (C) and 6x16 (LLVM) floats: 12 AVX2 vector registers.
default no schedule.
"""

from __future__ import annotations

import sys

import harness
import numpy as np

import tdsl as td

# (NI, NJ, NK, NL)
SIZES = {"800": (800, 900, 1100, 1200), "tiny": (13, 21, 17, 29)}
DEFAULT_SIZE = "800"
VARIANTS = ("best", "auto")
EXTRA_VARIANTS = ("default",)  # no schedule (harness.unscheduled_case)
ALPHA, BETA = 1.5, 1.2


def algorithm(ni: int, nj: int, nk: int, nl: int):
    i, j, k, l = td.dims("i j k l")
    A = td.input("A", {i: ni, k: nk}, td.float32)
    B = td.input("B", {k: nk, j: nj}, td.float32)
    C = td.input("C", {j: nj, l: nl}, td.float32)
    D0 = td.input("D0", {i: ni, l: nl}, td.float32)
    AB = td.compute("AB", {i: ni, j: nj}, td.sum(A[i, k] * B[k, j], over=k))
    tmp = td.compute("tmp", {i: ni, j: nj}, ALPHA * AB[i, j])
    TC = td.compute("TC", {i: ni, l: nl}, td.sum(tmp[i, j] * C[j, l], over=j))
    return td.compute("D", {i: ni, l: nl}, BETA * D0[i, l] + TC[i, l])


def user_algorithm(ni: int, nj: int, nk: int, nl: int):
    return algorithm(ni, nj, nk, nl)


def _product(s: td.Schedule, out: str, acc: str, right: str, packed: str, cols: str,
             red: str, ti: int, tj: int, v: int) -> td.Schedule:
    """sgemm.py's register-tiled schedule of out = f(acc), acc = sum(. * right)."""
    return (
        s.cache_read(right, [acc], packed)
        .tile(out, i=ti, **{cols: tj})
        .reorder(out, f"{cols}_o i_o i_i {cols}_i")
        .parallel(out, f"{cols}_o")
        .vectorize(out, f"{cols}_i")
        .compute_at(packed, out, f"{cols}_o")
        .vectorize(packed, cols)
        .compute_at(acc, out, "i_o")
        .split(acc, cols, v, names=("c_u", "c_v"))
        .reorder(acc, f"{red} i c_u c_v")
        .unroll(acc, "i")
        .unroll(acc, "c_u")
        .vectorize(acc, "c_v")
    )


def tiled_schedule(size, ti: int, tj: int, v: int) -> td.Schedule:
    D = algorithm(*size)
    s = _product(td.schedule(D), "tmp", "AB", "B", "Bp", "j", "k", ti, tj, v)
    return _product(s, "D", "TC", "C", "Cp", "l", "j", ti, tj, v)



BEST = {
    ("c", "best"): dict(ti=4, tj=24, v=8),
    ("llvm", "best"): dict(ti=6, tj=16, v=8),
    ("c", "best", "avx512f"): dict(ti=8, tj=48, v=16),  # --search on an AVX-512 machine
    ("llvm", "best", "avx512f"): dict(ti=4, tj=64, v=16),
}


def _build_schedule(variant: str, dims, params) -> td.Schedule:
    return tiled_schedule(dims, **params)


def candidates(target: str, variant: str, size: str):
    dims = SIZES[size]
    # register tiles: ti x tj of v-lane vectors; with AVX2's 16 registers ti * tj / v
    # accumulators must stay within about 12 of them
    grid = [(4, 16, 8), (6, 16, 8), (8, 16, 8), (3, 32, 8), (4, 24, 8), (2, 32, 8), (8, 32, 8)]
    # AVX-512: 32 registers of 16 lanes
    grid += [(4, 32, 16), (6, 32, 16), (8, 32, 16), (12, 32, 16), (4, 64, 16), (6, 48, 16),
             (8, 48, 16)]
    return [(f"tile {ti}x{tj} v{v}", lambda a=ti, b=tj, c=v: tiled_schedule(dims, a, b, c))
            for ti, tj, v in grid]


@harness.aligned_inputs
def inputs(size: str) -> dict[str, np.ndarray]:
    ni, nj, nk, nl = SIZES[size]
    rng = np.random.default_rng(0)
    shapes = {"A": (ni, nk), "B": (nk, nj), "C": (nj, nl), "D0": (ni, nl)}
    return {name: rng.uniform(-1, 1, shape).astype(np.float32) for name, shape in shapes.items()}


def reference(A, B, C, D0) -> np.ndarray:
    return (np.float32(ALPHA) * (A @ B)) @ C + np.float32(BETA) * D0


def _work(size: str) -> float:
    ni, nj, nk, nl = SIZES[size]
    return 2.0 * (ni * nj * nk + ni * nl * nj)


def kernel_name(size: str) -> str:
    return "2mm {}x{}x{}x{}".format(*SIZES[size])


def case(target: str, variant: str, size: str) -> harness.Case:
    dims = SIZES[size]
    arrays = inputs(size)
    params = harness.best_params(BEST, target, variant, size)
    nj, nk = dims[1], dims[2]
    return harness.Case(
        kernel=kernel_name(size),
        schedule_fn=lambda: _build_schedule(variant, dims, params),
        inputs=arrays,
        reference=lambda: reference(**arrays),
        work=_work(size),
        unit="GFLOP/s",
        # two float32 sums in different orders; the second adds nj terms of size ~sqrt(nk)
        rtol=1e-4,
        atol=1e-5 * np.sqrt(nk * nj) * 3,
        note="two register-tiled products, packed panels" if variant == "best" else "",
    )


def numpy_peer(size: str) -> harness.Peer:
    arrays = inputs(size)
    return harness.Peer(kernel_name(size), lambda: reference(**arrays), _work(size), "GFLOP/s")


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
