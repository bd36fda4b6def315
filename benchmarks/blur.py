"""blur: two-stage 3x3 box blur of a 4096^2 float32 image (valid region), tdsl against numpy.

    python benchmarks/blur.py --peer tdsl-c
    python benchmarks/blur.py --peer tdsl-llvm --search

bx averages 3 pixels along x, by averages 3 rows of bx. The rate counts the
bytes a perfect implementation moves: the image read once and the result
written once (a memory-bound kernel; compare with the STREAM copy).
"""

from __future__ import annotations

import sys

import harness
import numpy as np

import tdsl as td

SIZES = {"4096": (4096, 4096), "tiny": (37, 41)}
DEFAULT_SIZE = "4096"
VARIANTS = ("best", "auto", "tuned", "default")


def algorithm(h: int, w: int):
    x, y = td.dims("x y")
    inp = td.input("inp", {y: h, x: w}, td.float32)
    bx = td.compute("bx", {y: h, x: w - 2}, (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) / 3)
    by = td.compute("by", {y: h - 2, x: w - 2}, (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3)
    return by, bx


def user_algorithm(h: int, w: int):
    """The algorithm the auto and tuned variants schedule."""
    return algorithm(h, w)[0]


def strip_schedule(size, ys: int, v: int, xs: int | None = None, nt: bool = False
                   ) -> td.Schedule:
    """Strips of ys output rows on threads; bx computed per strip (ys + 2 rows,
    recomputing 2 rows per strip) or, with xs, per ys x xs tile; both stages
    vectorized by v along x; with nt, by written by streaming stores."""
    by, bx = algorithm(*size)
    s = td.schedule(by)
    if xs is None:
        s = s.split(by, "y", ys).split(by, "x", v).vectorize(by, "x_i").compute_at(bx, by, "y_o")
    else:
        s = (s.tile(by, y=ys, x=xs).split(by, "x_i", v, names=("x_u", "x_v"))
             .vectorize(by, "x_v").compute_at(bx, by, "x_o"))
    s = s.split(bx, "x", v).vectorize(bx, "x_i").parallel(by, "y_o")
    return s.store_nontemporal(by) if nt else s


BEST = {
    ("c", "best"): dict(ys=128, v=8),
    ("llvm", "best"): dict(ys=128, v=8),
    # AVX-512 (Intel Xeon), 64-byte-aligned arrays, interleaved in one process over 7
    # rounds: strips of 32 rows in 16 lanes C 4.96 ms, LLVM 5.50, against 6.61 and 6.76
    # for 128 rows in 8 lanes (streamed stores, 32 rows in 8 lanes: 5.45 and 5.57)
    # Zen 4 (AMD EPYC), paired rounds in one process: streamed stores, 64 rows in 16
    # lanes, C 1.23x and LLVM 1.18-1.20x the speed of C's 32 rows without (1.10x and
    # 1.09x while only the rows on a 16-byte boundary streamed; C 0.87x while
    # stream_store copied its other chunks byte by byte)
    ("c", "best", "AMD EPYC avx512f"): dict(ys=64, v=16, nt=True),
    ("llvm", "best", "AMD EPYC avx512f"): dict(ys=64, v=16, nt=True),
    # (2026-11-28, the same Xeon, kernel.benchmark interleaved over 5 rounds: streamed,
    # C 5.41 ms and LLVM 5.53 against 6.51 and 6.75 without)
    ("c", "best", "avx512f"): dict(ys=32, v=16, nt=True),
    ("llvm", "best", "avx512f"): dict(ys=32, v=16, nt=True),
}


def candidates(target: str, variant: str, size: str):
    dims = SIZES[size]
    out = []
    for ys in (16, 32, 64, 128, 256):
        for v in (4, 8, 16, 32):
            out.append((f"strip {ys} v{v}", lambda a=ys, b=v: strip_schedule(dims, a, b)))
            out.append((f"strip {ys} v{v} nt",
                        lambda a=ys, b=v: strip_schedule(dims, a, b, nt=True)))
    for ys, xs in ((32, 1024), (64, 512), (128, 256), (16, 2048)):
        for v in (8, 16):
            out.append((f"tile {ys}x{xs} v{v}",
                        lambda a=ys, b=v, c=xs: strip_schedule(dims, a, b, c)))
    return out


@harness.aligned_inputs
def inputs(size: str) -> dict[str, np.ndarray]:
    return {"inp": np.random.default_rng(0).random(SIZES[size], dtype=np.float32)}


def reference(inp: np.ndarray) -> np.ndarray:
    third = np.float32(3)
    bx = (inp[:, :-2] + inp[:, 1:-1] + inp[:, 2:]) / third
    return (bx[:-2] + bx[1:-1] + bx[2:]) / third


def _work(size: str) -> float:
    h, w = SIZES[size]
    return 4.0 * (h * w + (h - 2) * (w - 2))


def kernel_name(size: str) -> str:
    h, w = SIZES[size]
    return f"blur 3x3 {h}x{w}"


def case(target: str, variant: str, size: str) -> harness.Case:
    dims = SIZES[size]
    arrays = inputs(size)
    params = harness.best_params(BEST, target, variant, size)
    return harness.Case(
        kernel=kernel_name(size),
        schedule_fn=lambda: strip_schedule(dims, **params),
        inputs=arrays,
        reference=lambda: reference(arrays["inp"]),
        work=_work(size),
        unit="GB/s",
        rtol=1e-6,
        atol=1e-7,
    )


def numpy_peer(size: str) -> harness.Peer:
    img = inputs(size)["inp"]
    return harness.Peer(kernel_name(size), lambda: reference(img), _work(size), "GB/s")


# ---------------------------------------------------------------- naive C

# The two stages as a textbook writes them, the yardstick of the unscheduled variants
# (harness.naive_peer builds it with gcc -O3 -march=native).
NAIVE_C = """
#include <stdlib.h>

void kernel(const float *inp, float *out) {
    float *bx = malloc(sizeof(float) * H * (W - 2));
    for (long y = 0; y < H; y++) {
        for (long x = 0; x < W - 2; x++) {
            bx[y * (W - 2) + x] = (inp[y * W + x] + inp[y * W + x + 1] + inp[y * W + x + 2]) / 3;
        }
    }
    for (long y = 0; y < H - 2; y++) {
        for (long x = 0; x < W - 2; x++) {
            out[y * (W - 2) + x] = (bx[y * (W - 2) + x] + bx[(y + 1) * (W - 2) + x]
                                    + bx[(y + 2) * (W - 2) + x]) / 3;
        }
    }
    free(bx);
}
"""


def naive_defines(dims) -> dict[str, int]:
    h, w = dims
    return {"H": h, "W": w}


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
