"""qmatmul: int8 quantized matrix multiply (1024^3), tdsl against numpy.

    python benchmarks/qmatmul.py --peer tdsl-c
    python benchmarks/qmatmul.py --peer tdsl-llvm --search

acc[i, j] = sum over k of int32(A[i, k]) * int32(B[k, j])           (int32 accumulation)
out[i, j] = saturate_int8(((int64(acc) * MULT + 2^(SHIFT-1)) >> SHIFT) + ZP)

The requantization is integer-only, as in gemmlowp and TFLite: the output scale
MULT / 2^SHIFT is a fixed-point multiplier, rounded half up by the added
2^(SHIFT-1), then shifted by the output zero point ZP and clipped to int8
(td.saturating_cast). Every result must equal numpy's exactly.

numpy has no fast integer matrix product (its int32 matmul does not use the
BLAS), so its baseline converts A and B to float32 and calls sgemm: every
product of two int8 values and every partial sum of up to 1024 of them is an
integer of magnitude at most 2^24, which float32 holds exactly, so the result is
exact in any summation order. The rate counts 2 * M * K * N integer operations.

Variants:

best   On a host with VNNI, quads: A made unsigned (Au = A + 128, uint8) and B
       packed in quads of k (Bq[ko, j, t] = B[4 ko + t, j]), acc sums their
       products and out subtracts 128 times B's column sums (`quad_algorithm`,
       gemmlowp's zero-point correction). The acc stage, computed per ti x tj tile
       of out, keeps the tile in registers (vectors of 16 int32 lanes) over the
       whole k loop, its quad loop t unrolled inside the tile: a quad's four
       products then go to the same lanes from adjacent bytes, which both
       backends do as one `vpdpbusd` (64 products per instruction, against 16 per
       two micro-ops of `vpmulld`). Bq per tj-column panel, Au and the column sums
       first, on threads. The requantization runs once per element as the tile is
       stored, vectorized. `paired_algorithm` is the same with B packed in int16
       pairs (`vpmaddwd`/`vpdpwssd`, AVX-512BW). Without AVX-512, the int32
       products of `algorithm`, B widened to int32 per panel: the tile sizes
       --search found on an AVX2 machine, 8x32 (C), 4x24 (LLVM).
f32    the same schedule on the algorithm with the products summed in float32
       (`float_algorithm`), as numpy's baseline does: exact for K <= 1024, so
       its results equal the int32 ones bit for bit; a separate line, because
       it holds for that K only.
default the algorithm with no schedule.
"""

from __future__ import annotations

import sys

import harness
import numpy as np

import tdsl as td
from tdsl.backend_llvm.host import host_has
from tdsl.tune.machine import fingerprint

SIZES = {"1024": (1024, 1024, 1024), "tiny": (37, 700, 53)}  # tiny: k long enough to saturate
DEFAULT_SIZE = "1024"
VARIANTS = ("best", "f32", "auto")
EXTRA_VARIANTS = ("default",)  # no schedule (harness.unscheduled_case)
# output scale MULT / 2^SHIFT (about 3.7e-4: an int8 result of std ~60 for K = 1024),
# output zero point ZP
MULT, SHIFT, ZP = 795_000, 31, -3


def requantize(acc):
    """The int8 result of an int32 accumulator (a tdsl expression)."""
    scaled = (td.cast(acc, td.int64) * MULT + (1 << (SHIFT - 1))) >> SHIFT
    return td.saturating_cast(scaled + ZP, td.int8)


def algorithm(m: int, k: int, n: int):
    """Three stages: Bw (B widened to int32), acc (int32) and out (int8). Returns out.

    The default schedule computes Bw in full; the best one computes it per column
    panel, which packs the panel as int32 (gcc 12 does not vectorize the
    widening of 8 int8 lanes to int32 inside the k loop: with B read as int8
    there, the C kernel ran scalar, 10x slower)."""
    i, j, kk = td.dims("i j k")
    A = td.input("A", {i: m, kk: k}, td.int8)
    B = td.input("B", {kk: k, j: n}, td.int8)
    Bw = td.compute("Bw", {kk: k, j: n}, td.cast(B[kk, j], td.int32))
    acc = td.compute("acc", {i: m, j: n},
                     td.sum(td.cast(A[i, kk], td.int32) * Bw[kk, j], over=kk))
    return td.compute("out", {i: m, j: n}, requantize(acc[i, j]))


def paired_algorithm(m: int, k: int, n: int):
    """`algorithm` with B packed in pairs of k (ko = k // 2, t = k % 2): Bp[ko, j, t] =
    int16(B[2 ko + t, j]), and acc sums over (ko, t). K must be even."""
    if k % 2:
        raise ValueError(f"B packed in pairs of k needs an even K, not {k}")
    i, j, kk, ko, t = td.dims("i j k ko t")
    A = td.input("A", {i: m, kk: k}, td.int8)
    B = td.input("B", {kk: k, j: n}, td.int8)
    Bp = td.compute("Bp", {ko: k // 2, j: n, t: 2}, td.cast(B[2 * ko + t, j], td.int16))
    prod = td.cast(A[i, 2 * ko + t], td.int32) * td.cast(Bp[ko, j, t], td.int32)
    acc = td.compute("acc", {i: m, j: n}, td.sum(prod, over={ko: k // 2, t: 2}))
    return td.compute("out", {i: m, j: n}, requantize(acc[i, j]))


def quad_algorithm(m: int, k: int, n: int):
    """`algorithm` in quads of k for VNNI's unsigned-by-signed byte products: Au = A +
    128 as uint8, Bq[ko, j, t] = B[4 ko + t, j] (k = 4 ko + t), and, since
    (A + 128) B = A B + 128 colsum(B), acc sums Au's products and out subtracts 128
    times B's column sums (the zero-point correction of gemmlowp). K must be a
    multiple of 4."""
    if k % 4:
        raise ValueError(f"B packed in quads of k needs K a multiple of 4, not {k}")
    i, j, kk, ko, t = td.dims("i j k ko t")
    A = td.input("A", {i: m, kk: k}, td.int8)
    B = td.input("B", {kk: k, j: n}, td.int8)
    Au = td.compute("Au", {i: m, kk: k}, td.cast(td.cast(A[i, kk], td.int16) + 128, td.uint8))
    Bq = td.compute("Bq", {ko: k // 4, j: n, t: 4}, B[4 * ko + t, j])
    col = td.compute("col", {j: n}, td.sum(td.cast(B[kk, j], td.int32), over=kk))
    prod = td.cast(Au[i, 4 * ko + t], td.int32) * td.cast(Bq[ko, j, t], td.int32)
    acc = td.compute("acc", {i: m, j: n}, td.sum(prod, over={ko: k // 4, t: 4}))
    return td.compute("out", {i: m, j: n}, requantize(acc[i, j] - 128 * col[j]))


def float_algorithm(m: int, k: int, n: int):
    """`algorithm` with float32 accumulation: Aw and Bw are A and B as float32, acc
    sums their products, then is converted to int32 for the requantization. Exact while every
    partial sum is an integer float32 holds, |sum| <= K * 128 * 128 <= 2^24: K <= 1024."""
    if k > 1024:
        raise ValueError(f"float32 sums of {k} int8 products need not be exact (K <= 1024)")
    i, j, kk = td.dims("i j k")
    A = td.input("A", {i: m, kk: k}, td.int8)
    B = td.input("B", {kk: k, j: n}, td.int8)
    Aw = td.compute("Aw", {i: m, kk: k}, td.cast(A[i, kk], td.float32))
    Bw = td.compute("Bw", {kk: k, j: n}, td.cast(B[kk, j], td.float32))
    acc = td.compute("acc", {i: m, j: n}, td.sum(Aw[i, kk] * Bw[kk, j], over=kk))
    return td.compute("out", {i: m, j: n}, requantize(td.cast(acc[i, j], td.int32)))


def user_algorithm(m: int, k: int, n: int):
    return algorithm(m, k, n)


def staged_schedule(size, ti: int, tj: int, v: int, par: str = "j_o",
                    f32: bool = False) -> td.Schedule:
    """Register tile ti x tj of int32 accumulators (float32 with `f32`, on
    `float_algorithm`, A converted once, rows on threads) over the whole k loop; B's
    panel widened and packed (Bw) per j_o; out requantizes the tile as it stores it."""
    out = (float_algorithm if f32 else algorithm)(*size)
    order = "j_o i_o i_i j_i" if par == "j_o" else "i_o j_o i_i j_i"
    s = td.schedule(out)
    if f32:
        s = s.parallel("Aw", "i").vectorize("Aw", "k")
    return (
        s
        .tile(out, i=ti, j=tj)
        .reorder(out, order)
        .parallel(out, par)
        .vectorize(out, "j_i")
        .compute_at("Bw", out, "j_o")
        .vectorize("Bw", "j")
        .compute_at("acc", out, "i_o")
        .split("acc", "j", v, names=("j_u", "j_v"))
        .reorder("acc", "k i j_u j_v")
        .unroll("acc", "i")
        .unroll("acc", "j_u")
        .vectorize("acc", "j_v")
    )



def _grouped_tile(s: td.Schedule, out, packed: str, ti: int, tj: int, v: int) -> td.Schedule:
    """The register tile of `paired_schedule` and `quad_schedule`: ti x tj over the whole
    k loop, a group's products of one vector of v lanes next to each other (t unrolled
    inside the tile); the packed B per j_o, column panels on threads."""
    return (s.tile(out, i=ti, j=tj)
            .reorder(out, "j_o i_o i_i j_i")
            .parallel(out, "j_o")
            .vectorize(out, "j_i")
            .compute_at(packed, out, "j_o")
            .vectorize(packed, "j")
            .compute_at("acc", out, "i_o")
            .split("acc", "j", v, names=("j_u", "j_v"))
            .reorder("acc", "ko i j_u t j_v")
            .unroll("acc", "i")
            .unroll("acc", "j_u")
            .unroll("acc", "t")
            .vectorize("acc", "j_v"))


def paired_schedule(size, ti: int, tj: int, v: int = 16) -> td.Schedule:
    """`paired_algorithm`'s register tile (`_grouped_tile`), B's pairs packed per panel."""
    out = paired_algorithm(*size)
    return _grouped_tile(td.schedule(out), out, "Bp", ti, tj, v)


def quad_schedule(size, ti: int, tj: int, v: int = 16) -> td.Schedule:
    """`quad_algorithm`'s register tile (`_grouped_tile`), B's quads packed per panel; Au
    and the column sums computed first, vectorized, on threads."""
    out = quad_algorithm(*size)
    s = (td.schedule(out)
         .parallel("Au", "i").vectorize("Au", "k")
         .split("col", "j", 16).reorder("col", "j_o k j_i")
         .parallel("col", "j_o").vectorize("col", "j_i"))
    return _grouped_tile(s, out, "Bq", ti, tj, v)


BEST = {
    # AVX-512 with VNNI (Intel Xeon), interleaved in one process over 3 rounds: quads
    # C 4x64 1.93 ms (4x96 2.03, 6x64 2.07), LLVM 4x64 and 6x64 2.0; pairs 4.1-4.7 (C)
    # and 4.2 (LLVM); the int32 products without groups (vpmulld-bound) 20-25 ms
    ("c", "best", "avx512f"): dict(ti=4, tj=64, quads=True),
    ("llvm", "best", "avx512f"): dict(ti=4, tj=64, quads=True),
    ("c", "best"): dict(ti=8, tj=32, v=8),
    ("llvm", "best"): dict(ti=4, tj=24, v=8),
    # f32, AVX-512 (Intel Xeon), --search: 6x64 C 7.00 ms, LLVM 7.51 (4x64 7.10 and
    # 7.66); without Aw (A converted in the k loop) 11.6 and 9.9 ms at best
    ("c", "f32", "avx512f"): dict(ti=6, tj=64, v=16),
    ("llvm", "f32", "avx512f"): dict(ti=6, tj=64, v=16),
    # elsewhere, sgemm.py's AVX2 tiles (not searched for this kernel)
    ("c", "f32"): dict(ti=3, tj=32, v=8),
    ("llvm", "f32"): dict(ti=4, tj=24, v=8),
}


def _build_schedule(variant: str, dims, params) -> td.Schedule:
    params = dict(params)
    if params.pop("quads", False):
        # vpdpbusd is VNNI's; AVX-512 without it (Skylake) has vpmaddwd for pairs
        return (quad_schedule if host_has("avx512vnni") else paired_schedule)(dims, **params)
    if params.pop("paired", False):
        return paired_schedule(dims, **params)
    return staged_schedule(dims, **params, f32=variant == "f32")


def candidates(target: str, variant: str, size: str):
    dims = SIZES[size]
    if variant == "best" and fingerprint()["isa"] == "avx512f":
        # pairs: ti * tj / 16 accumulators of AVX-512's 32 registers
        grid = [(2, 128), (3, 128), (4, 64), (6, 64), (4, 96), (8, 32), (8, 48), (12, 32)]
        return ([(f"pairs {ti}x{tj}", lambda a=ti, b=tj: paired_schedule(dims, a, b))
                 for ti, tj in grid]
                + [(f"quads {ti}x{tj}", lambda a=ti, b=tj: quad_schedule(dims, a, b))
                   for ti, tj in grid])
    # register tiles: ti x tj of v-lane vectors; with AVX2's 16 registers ti * tj / v
    # accumulators must stay within about 12 of them
    grid = [(4, 16, 8), (6, 16, 8), (8, 16, 8), (3, 32, 8), (4, 24, 8), (2, 32, 8), (8, 32, 8),
            # AVX-512: 32 registers of 16 lanes
            (2, 128, 16), (4, 64, 16), (6, 64, 16), (8, 32, 16), (12, 32, 16)]
    f32 = variant == "f32"
    if f32:  # float32 FMAs, as sgemm.py's tiles
        grid = [(8, 32, 16), (4, 64, 16), (6, 64, 16), (12, 32, 16), (14, 32, 16), (2, 128, 16),
                (3, 32, 8), (4, 24, 8)]
    return [(f"tile {ti}x{tj} v{v}", lambda a=ti, b=tj, c=v: staged_schedule(dims, a, b, c, f32=f32))
            for ti, tj, v in grid]


@harness.aligned_inputs
def inputs(size: str) -> dict[str, np.ndarray]:
    m, k, n = SIZES[size]
    rng = np.random.default_rng(0)
    return {"A": rng.integers(-128, 128, (m, k), dtype=np.int8),
            "B": rng.integers(-128, 128, (k, n), dtype=np.int8)}


def requantize_np(acc: np.ndarray) -> np.ndarray:
    scaled = (acc.astype(np.int64) * MULT + (1 << (SHIFT - 1))) >> SHIFT
    return np.clip(scaled + ZP, -128, 127).astype(np.int8)


def reference(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """numpy's fastest exact way: sgemm on the int8 values as float32 (see above)."""
    acc = A.astype(np.float32) @ B.astype(np.float32)
    return requantize_np(acc.astype(np.int32))


def exact_reference(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """The definition, in int64 arithmetic (slow; for tests)."""
    return requantize_np(A.astype(np.int64) @ B.astype(np.int64))


def _work(size: str) -> float:
    m, k, n = SIZES[size]
    return 2.0 * m * k * n


def kernel_name(size: str) -> str:
    m, k, n = SIZES[size]
    return f"qmatmul int8 {m}^3" if m == k == n else f"qmatmul int8 {m}x{k}x{n}"


def case(target: str, variant: str, size: str) -> harness.Case:
    dims = SIZES[size]
    arrays = inputs(size)
    params = harness.best_params(BEST, target, variant, size)
    return harness.Case(
        kernel=kernel_name(size),
        schedule_fn=lambda: _build_schedule(variant, dims, params),
        inputs=arrays,
        reference=lambda: reference(**arrays),
        work=_work(size),
        unit="GOP/s",
        rtol=0,
        atol=0,  # integers: exactly numpy's
        note={"best": ("Au = A + 128, Bq: k quads of bytes; acc: int32 register tile, quads "
                       "multiply-added" if params.get("quads") else
                       "Bp: k pairs of int16; acc: int32 register tile, pairs multiply-added"
                       if params.get("paired") else
                       "Bw: packed int32 panel; acc: int32 register tile"),
              "f32": "Bw: packed float32 panel; acc: float32 register tile (exact, K <= 1024)"
              }.get(variant, ""),
    )


def numpy_peer(size: str) -> harness.Peer:
    arrays = inputs(size)
    return harness.Peer(kernel_name(size), lambda: reference(**arrays), _work(size), "GOP/s")


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
