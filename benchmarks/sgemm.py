"""sgemm: C = A @ B in float32 (1024^3 and 2048^3), tdsl against numpy (OpenBLAS).

    python benchmarks/sgemm.py --peer tdsl-c --size 2048     one JSON line
    python benchmarks/sgemm.py --peer tdsl-llvm --search     time the candidate schedules

Two tdsl variants, both of the one-stage algorithm `C = sum(A[i, k] * B[k, j], over=k)`:

best   cache_read(B) packs each column panel of B into `Bp` (a contiguous k x tj
       block, computed at the panel loop), and cache_write(C) accumulates each
       ti x tj tile in `Cacc` (computed at the row-block loop: a local array with
       constant indices once its loops are unrolled, which the C and LLVM
       compilers keep in vector registers over the whole k loop); C is written once.
plain  the fastest schedule found without new stages: the accumulator lives in C.
"""

from __future__ import annotations

import sys

import harness
import numpy as np

import tdsl as td

SIZES = {"1024": (1024, 1024, 1024), "2048": (2048, 2048, 2048), "tiny": (70, 50, 90)}
DEFAULT_SIZE = "1024"
VARIANTS = ("best", "plain", "auto", "tuned", "default")


# ---------------------------------------------------------------- algorithms


def plain_algorithm(m: int, k: int, n: int):
    i, j, kk = td.dims("i j k")
    A = td.input("A", {i: m, kk: k}, td.float32)
    B = td.input("B", {kk: k, j: n}, td.float32)
    return td.compute("C", {i: m, j: n}, td.sum(A[i, kk] * B[kk, j], over=kk))


def user_algorithm(m: int, k: int, n: int):
    """The algorithm as a user writes it: what the auto and tuned variants schedule."""
    return plain_algorithm(m, k, n)


# ---------------------------------------------------------------- schedules


def staged_schedule(size, ti: int, tj: int, v: int) -> td.Schedule:
    """Register tile ti x tj (tj = a multiple of the vector width v) over the whole k loop.

    Each thread takes column panels (j_o); per panel, B's k x tj panel is packed
    into Bp (contiguous, so no cache-set conflicts at power-of-two row strides),
    then every row block i_o accumulates its ti x tj tile in Cacc and C copies it
    out once."""
    C = plain_algorithm(*size)
    return (
        td.schedule(C)
        .cache_write(C, "Cacc")
        .cache_read("B", ["Cacc"], "Bp")
        .tile(C, i=ti, j=tj)
        .reorder(C, "j_o i_o i_i j_i")
        .parallel(C, "j_o")
        .vectorize(C, "j_i")
        .compute_at("Bp", C, "j_o")
        .vectorize("Bp", "j")
        .compute_at("Cacc", C, "i_o")
        .split("Cacc", "j", v, names=("j_u", "j_v"))
        .reorder("Cacc", "k i j_u j_v")
        .unroll("Cacc", "i")
        .unroll("Cacc", "j_u")
        .vectorize("Cacc", "j_v")
    )


def plain_schedule(size, ti: int, tj: int, v: int, par: str = "i_o") -> td.Schedule:
    """Tile ti x tj, k loop outside the unrolled tile: C's tile is re-read and
    re-written from memory (L1) on every k step."""
    C = plain_algorithm(*size)
    return (
        td.schedule(C)
        .tile(C, i=ti, j=tj)
        .split(C, "j_i", v, names=("j_u", "j_v"))
        .reorder(C, "i_o j_o k i_i j_u j_v")
        .unroll(C, "i_i")
        .unroll(C, "j_u")
        .vectorize(C, "j_v")
        .parallel(C, par)
    )


# The fastest schedules found by `--search` on the benchmark machines (see RESULTS.md):
# (target, variant[, size or vector ISA]) -> keyword arguments of the schedule function.
# A machine without AVX-512 has 16 vector registers, not 32, and needs smaller tiles.
BEST = {
    # --search on an AVX-512 Xeon (2026-11-27): C 4x64 315 GFLOP/s at 1024^3 and 329 at
    # 2048^3, against 301 and 324 for 8x32
    ("c", "best"): dict(ti=4, tj=64, v=16),
    ("llvm", "best"): dict(ti=4, tj=64, v=16),
    # the same Xeon (2026-11-28), kernel.benchmark interleaved over 5 rounds: LLVM 6x64
    # 6.24 ms against 7.01 for 4x64; C 6x64 7.28 against 7.73 once the unswitch pass
    # takes the row-edge test out of the k loop (6.90 against 6.61 before)
    ("c", "best", "Intel(R) Xeon(R) Processor"): dict(ti=6, tj=64, v=16),
    ("llvm", "best", "Intel(R) Xeon(R) Processor"): dict(ti=6, tj=64, v=16),
    ("c", "best", "avx2"): dict(ti=3, tj=32, v=8),
    ("llvm", "best", "avx2"): dict(ti=4, tj=24, v=8),
    ("c", "plain"): dict(ti=4, tj=64, v=16),
    ("llvm", "plain"): dict(ti=8, tj=32, v=16),
}


def _schedule_fn(variant: str):
    return staged_schedule if variant == "best" else plain_schedule


def candidates(target: str, variant: str, size: str):
    dims = SIZES[size]
    fn = _schedule_fn(variant)
    # register tiles: ti rows x tj columns in vectors of v lanes; gcc here uses 256-bit
    # vectors (8 lanes, 32 registers), LLVM 512-bit ones for v=16
    grid = [(4, 32, 8), (6, 32, 8), (8, 32, 8), (8, 16, 8), (12, 16, 8), (6, 16, 8),
            (4, 24, 8), (3, 32, 8), (4, 64, 16),
            (6, 64, 16), (8, 32, 16), (12, 32, 16), (14, 32, 16), (8, 48, 16)]
    out = [(f"{variant} tile {ti}x{tj} v{v}", (lambda a=ti, b=tj, c=v: fn(dims, a, b, c)))
           for ti, tj, v in grid]
    if variant == "plain":
        out += [(f"plain tile {ti}x{tj} v{v} par j_o",
                 (lambda a=ti, b=tj, c=v: fn(dims, a, b, c, par="j_o")))
                for ti, tj, v in [(4, 64, 16), (8, 32, 16), (4, 32, 8)]]
    return out


# ---------------------------------------------------------------- cases


@harness.aligned_inputs
def inputs(size: str) -> dict[str, np.ndarray]:
    m, k, n = SIZES[size]
    rng = np.random.default_rng(0)
    return {
        "A": rng.uniform(-1, 1, (m, k)).astype(np.float32),
        "B": rng.uniform(-1, 1, (k, n)).astype(np.float32),
    }


def kernel_name(size: str) -> str:
    m, k, n = SIZES[size]
    return f"sgemm {m}^3" if m == k == n else f"sgemm {m}x{k}x{n}"


def case(target: str, variant: str, size: str) -> harness.Case:
    dims = SIZES[size]
    m, k, n = dims
    arrays = inputs(size)
    params = harness.best_params(BEST, target, variant, size)
    return harness.Case(
        kernel=kernel_name(size),
        schedule_fn=lambda: _schedule_fn(variant)(dims, **params),
        inputs=arrays,
        reference=lambda: arrays["A"] @ arrays["B"],
        work=2.0 * m * k * n,
        unit="GFLOP/s",
        # float32 sums of k terms in different orders: relative to the result's scale
        rtol=1e-4,
        atol=1e-5 * np.sqrt(k),
        note="cache_read: Bp packed panel; cache_write: Cacc register tile" if variant == "best" else "",
    )


def numpy_peer(size: str) -> harness.Peer:
    m, k, n = SIZES[size]
    arrays = inputs(size)
    a, b = arrays["A"], arrays["B"]
    return harness.Peer(kernel_name(size), lambda: a @ b, 2.0 * m * k * n, "GFLOP/s")


# ---------------------------------------------------------------- naive C

# The loop nest as a textbook writes it, the yardstick of the unscheduled variants
# (harness.naive_peer builds it with gcc -O3 -march=native).
NAIVE_C = """
void kernel(const float *A, const float *B, float *C) {
    for (long i = 0; i < M; i++) {
        for (long j = 0; j < N; j++) {
            float s = 0.0f;
            for (long k = 0; k < K; k++) {
                s += A[i * K + k] * B[k * N + j];
            }
            C[i * N + j] = s;
        }
    }
}
"""
NAIVE_SIZES = ("1024", "tiny")  # 2048^3 unscheduled takes seconds per call


def naive_defines(dims) -> dict[str, int]:
    m, k, n = dims
    return {"M": m, "K": k, "N": n}


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
