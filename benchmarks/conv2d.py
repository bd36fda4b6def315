"""conv2d: 3x3 convolution, 64 -> 64 channels, 56x56, NCHW (batch 1), zero padding 1.

    python benchmarks/conv2d.py --peer tdsl-c
    python benchmarks/conv2d.py --peer tdsl-llvm --search

out[k, y, x] = sum over (c, ry, rx) of inp[c, y + ry - 1, x + rx - 1] * w[k, c, ry, rx],
with inp read as zero outside the image (td.pad). numpy's baseline is im2col
(a padded copy and 9 shifted slices) followed by one sgemm.

Variants:

best   two stages in the algorithm: P, the zero-padded input (58 x 58 per
       channel, so the main loop has no bounds tests), and out = sum(P * w).
       The schedule adds the rest: cache_read(w) as Wp, laid out [c, ry, rx, k]
       so output channels are contiguous vector lanes; cache_write(out) as Acc,
       laid out [y, x, k] and computed per register tile (ty x tx pixels x tk
       channels, held in vector registers over the whole (c, ry, rx) reduction).
       With p_at="y_o", P is computed per strip of output rows (the ty + 2 padded
       rows of every channel it reads, while they are in cache) instead of once
       for the whole image, and Wp's channels are shared out among the threads;
       with strip=n as well, the rows run in strips of n on the threads and P
       slides over each strip (stored per strip, computed per row: each padded
       row once per strip).
plain  the one-stage reduction over the td.pad view, vectorized along x.
"""

from __future__ import annotations

import sys

import harness
import numpy as np

import tdsl as td

# (channels in, channels out, height, width)
SIZES = {"56x56": (64, 64, 56, 56), "tiny": (8, 24, 9, 11)}
DEFAULT_SIZE = "56x56"
VARIANTS = ("best", "plain", "auto", "tuned", "default")


def algorithm(ci: int, co: int, h: int, w: int):
    c, k, y, x, ry, rx = td.dims("c k y x ry rx")
    inp = td.input("inp", {c: ci, y: h, x: w}, td.float32)
    wt = td.input("w", {k: co, c: ci, ry: 3, rx: 3}, td.float32)
    P = td.compute("P", {c: ci, y: h + 2, x: w + 2}, td.pad(inp, 0.0)[c, y - 1, x - 1])
    out = td.compute("out", {k: co, y: h, x: w},
                     td.sum(P[c, y + ry, x + rx] * wt[k, c, ry, rx], over=(c, ry, rx)))
    return out, P


def user_algorithm(ci: int, co: int, h: int, w: int):
    """The algorithm the auto and tuned variants schedule: the padded input as a stage."""
    return algorithm(ci, co, h, w)[0]


def plain_algorithm(ci: int, co: int, h: int, w: int):
    c, k, y, x, ry, rx = td.dims("c k y x ry rx")
    inp = td.input("inp", {c: ci, y: h, x: w}, td.float32)
    wt = td.input("w", {k: co, c: ci, ry: 3, rx: 3}, td.float32)
    padded = td.pad(inp, 0.0)
    return td.compute("out", {k: co, y: h, x: w},
                      td.sum(padded[c, y + ry - 1, x + rx - 1] * wt[k, c, ry, rx],
                             over=(c, ry, rx)))


def tiled_schedule(size, ty: int, tx: int, tk: int, v: int, par: str = "k_o",
                   order: str = "k_o y_o x_o", p_at: str | None = None,
                   unroll_rx: bool = False, unroll_ry: bool = False,
                   strip: int | None = None) -> td.Schedule:
    """out tiled ty x tx pixels x tk channels; Acc computed per tile with
    (c, ry, rx) outside the unrolled tile and channels as vector lanes of v.
    P is computed once, its channels on threads, or with p_at (a loop of out,
    e.g. "y_o") per iteration of that loop, Wp's channels then on threads; unroll_rx
    unrolls the filter's columns around the tile, unroll_ry its rows.
    With strip, the tile rows are split in strips of `strip` rows (y_t, y_s; `par`
    and `order` name y_o for both), the strips on threads, and P is stored per strip
    and computed per row: a sliding window, each padded row computed once per strip
    instead of once for every output row that reads it."""
    out, P = algorithm(*size)
    if strip is not None:
        order, par = order.replace("y_o", "y_t y_s"), par.replace("y_o", "y_t")
        p_at = "y_s"
    s = (
        td.schedule(out)
        .cache_write(out, "Acc")
        .layout("Acc", "y x k")
        .cache_read("w", ["Acc"], "Wp")
        .layout("Wp", "c ry rx k")
        .tile(out, y=ty, x=tx)
        .split(out, "k", tk)
    )
    if strip is not None:
        s = s.split(out, "y_o", strip, names=("y_t", "y_s"))
    s = (
        s.reorder(out, f"{order} k_i y_i x_i")
        .parallel(out, par)
        .vectorize(out, "x_i")
        .compute_at("Acc", out, order.split()[-1])
        .split("Acc", "k", v, names=("k_u", "k_v"))
        .reorder("Acc", "c ry rx y x k_u k_v")
        .unroll("Acc", "y")
        .unroll("Acc", "x")
        .unroll("Acc", "k_u")
        .vectorize("Acc", "k_v")
        .vectorize(P, "x")
        .reorder("Wp", "c ry rx k")
        .vectorize("Wp", "k")
    )
    if unroll_rx:
        s = s.unroll("Acc", "rx")
    if unroll_ry:
        s = s.unroll("Acc", "ry")
    if p_at is None:
        return s.parallel(P, "c")
    s = s.compute_at(P, out, p_at).parallel("Wp", "c")
    return s if strip is None else s.store_at(P, out, "y_t")


def plain_schedule(size, tx: int, ty: int = 1, par: str = "k") -> td.Schedule:
    out = plain_algorithm(*size)
    return (
        td.schedule(out)
        .tile(out, y=ty, x=tx)
        .reorder(out, "k y_o x_o c ry rx y_i x_i")
        .unroll(out, "y_i")
        .vectorize(out, "x_i")
        .parallel(out, par)
    )


BEST = {
    ("c", "best"): dict(ty=1, tx=8, tk=32, v=16, par="y_o", order="y_o k_o x_o"),
    ("llvm", "best"): dict(ty=1, tx=8, tk=32, v=16, par="y_o", order="y_o k_o x_o"),
    # AVX2 (16 vector registers), measured interleaved in one process: rows on threads
    # balance a busy host; LLVM keeps 8 accumulators (td.autoschedule's tile too), where
    # 16 spill (LLVM 2x4x16 v8: 5.2 ms against 2.3)
    ("c", "best", "avx2"): dict(ty=2, tx=4, tk=16, v=8, par="y_o", order="y_o k_o x_o"),
    ("llvm", "best", "avx2"): dict(ty=1, tx=4, tk=16, v=8, par="y_o", order="y_o k_o x_o"),
    # Zen 4 (AMD EPYC, 2026-11-27), paired rounds in one process: P per strip (then 2
    # rows of 2x7x32 tiles) rather than computed once keeps the kernel out of memory when
    # a neighbour fills the L3 (1.36 -> 1.21 ms for C, 1.40 -> 1.13 for LLVM) and costs
    # nothing otherwise (C 1.08 either way, LLVM 1.09 -> 1.05).
    # The same Zen 4 (2026-11-29), --search refined over 5 interleaved rounds, every
    # candidate within 1.04-1.11 ms (96-90% of the FMA peak): C rows in strips of 14 with
    # P a sliding window 1.039 ms against 1.048 for 2x4x32 and 1.066 for 2x7x32; LLVM
    # 1x8x32 with P per row and the filter's columns unrolled 1.072 against 1.106 for
    # 2x7x32 and 1.098 for strips of 14
    ("c", "best", "AMD EPYC avx512f"): dict(ty=1, tx=8, tk=32, v=16, par="y_o",
                                            order="y_o k_o x_o", p_at="y_o",
                                            unroll_rx=True, unroll_ry=True, strip=14),
    ("llvm", "best", "AMD EPYC avx512f"): dict(ty=1, tx=8, tk=32, v=16, par="y_o",
                                               order="y_o k_o x_o", p_at="y_o",
                                               unroll_rx=True),
    # Intel Xeon (AVX-512), interleaved in one process: P per row and 8 pixels x 32
    # channels (each weight vector used by 8 FMAs as it streams from L2), the filter's
    # columns unrolled: C 0.741 ms, LLVM 0.778 against 0.865 and 0.859 for 14 x 32 with P
    # computed once (LLVM needs the unrolled columns: 0.917 without); the rows unrolled
    # too (one loop body per input channel): C 0.655 -> 0.643 ms, LLVM 0.657 -> 0.651;
    # rows in 4 strips of 14 on the threads, P a sliding window over each (a padded row
    # computed once per strip, not 3 times): C 0.646 -> 0.628, LLVM 0.649 -> 0.622.
    # Strips of 28 gain 5-7% but leave nothing to balance when another process takes a
    # core (C beside one spinning process: 0.75 ms against 0.69 with per-row chunks;
    # strips of 14: 0.70)
    ("c", "best", "avx512f"): dict(ty=1, tx=8, tk=32, v=16, par="y_o", order="y_o k_o x_o",
                                   p_at="y_o", unroll_rx=True, unroll_ry=True, strip=14),
    ("llvm", "best", "avx512f"): dict(ty=1, tx=8, tk=32, v=16, par="y_o", order="y_o k_o x_o",
                                      p_at="y_o", unroll_rx=True, unroll_ry=True, strip=14),
    ("c", "plain"): dict(tx=8),
    ("llvm", "plain"): dict(tx=8),
}


def _build_schedule(variant: str, dims, params) -> td.Schedule:
    return (tiled_schedule if variant == "best" else plain_schedule)(dims, **params)


def candidates(target: str, variant: str, size: str):
    dims = SIZES[size]
    if variant == "plain":
        return [(f"plain {ty}x{tx}", lambda a=tx, b=ty: plain_schedule(dims, a, b))
                for ty, tx in ((1, 8), (1, 14), (1, 28), (1, 56), (2, 28), (4, 14))]
    grid = [(1, 4, 32, 8), (1, 7, 32, 8), (2, 4, 16, 8), (1, 8, 16, 8), (2, 7, 16, 8),
            (1, 7, 32, 16), (2, 7, 32, 16), (1, 14, 32, 16), (4, 7, 16, 16), (2, 4, 32, 16),
            (1, 8, 32, 16), (1, 14, 16, 8), (4, 7, 8, 8), (2, 7, 64, 16),
            # AVX-512 has 32 vector registers: tiles of 16-28 accumulators
            (1, 4, 64, 16), (1, 6, 64, 16), (1, 7, 64, 16), (2, 3, 64, 16), (1, 12, 32, 16),
            (2, 6, 32, 16)]
    out = [(f"tile {ty}x{tx}x{tk} v{v}",
            lambda a=ty, b=tx, c=tk, d=v: tiled_schedule(dims, a, b, c, d))
           for ty, tx, tk, v in grid]
    for ty, tx, tk, v in ((1, 7, 32, 8), (2, 7, 16, 8), (1, 7, 32, 16), (2, 4, 32, 16),
                          (1, 6, 64, 16), (2, 3, 64, 16), (1, 4, 64, 16), (1, 12, 32, 16)):
        out.append((f"tile {ty}x{tx}x{tk} v{v} par y_o",
                    lambda a=ty, b=tx, c=tk, d=v: tiled_schedule(
                        dims, a, b, c, d, par="y_o", order="y_o k_o x_o")))
    for ty, tx, tk, v in ((1, 14, 32, 16), (2, 7, 32, 16), (1, 8, 32, 16), (2, 4, 32, 16),
                          (4, 7, 16, 16), (1, 7, 32, 16)):
        for order in ("y_o k_o x_o", "y_o x_o k_o"):
            for rx, ry in ((False, False), (True, False), (True, True)):
                out.append((f"tile {ty}x{tx}x{tk} v{v} P per strip, {order.split()[1]} outer"
                            + (", rx unrolled" if rx else "") + (", ry unrolled" if ry else ""),
                            lambda a=ty, b=tx, c=tk, d=v, o=order, r=rx, q=ry: tiled_schedule(
                                dims, a, b, c, d, par="y_o", order=o, p_at="y_o",
                                unroll_rx=r, unroll_ry=q)))
    for strip in (7, 14, 28):
        out.append((f"tile 1x8x32 v16 rows in strips of {strip}, P a sliding window, rx ry unrolled",
                    lambda n=strip: tiled_schedule(dims, 1, 8, 32, 16, par="y_o",
                                                   order="y_o k_o x_o", p_at="y_o",
                                                   unroll_rx=True, unroll_ry=True, strip=n)))
    return out


@harness.aligned_inputs
def inputs(size: str) -> dict[str, np.ndarray]:
    ci, co, h, w = SIZES[size]
    rng = np.random.default_rng(0)
    return {
        "inp": rng.standard_normal((ci, h, w), dtype=np.float32),
        "w": rng.standard_normal((co, ci, 3, 3), dtype=np.float32),
    }


def im2col_conv(inp: np.ndarray, w: np.ndarray) -> np.ndarray:
    """numpy's convolution: zero-pad, gather the 9 shifted images (im2col), one sgemm."""
    ci, h, wd = inp.shape
    co = w.shape[0]
    padded = np.pad(inp, ((0, 0), (1, 1), (1, 1)))
    cols = np.empty((ci, 3, 3, h, wd), np.float32)
    for ry in range(3):
        for rx in range(3):
            cols[:, ry, rx] = padded[:, ry:ry + h, rx:rx + wd]
    return (w.reshape(co, ci * 9) @ cols.reshape(ci * 9, h * wd)).reshape(co, h, wd)


def _work(size: str) -> float:
    ci, co, h, w = SIZES[size]
    return 2.0 * co * ci * 9 * h * w


def kernel_name(size: str) -> str:
    ci, co, h, w = SIZES[size]
    return f"conv2d 3x3 {ci}->{co} {h}x{w}"


def case(target: str, variant: str, size: str) -> harness.Case:
    dims = SIZES[size]
    arrays = inputs(size)
    params = harness.best_params(BEST, target, variant, size)
    ci = dims[0]
    return harness.Case(
        kernel=kernel_name(size),
        schedule_fn=lambda: _build_schedule(variant, dims, params),
        inputs=arrays,
        reference=lambda: im2col_conv(arrays["inp"], arrays["w"]),
        work=_work(size),
        unit="GFLOP/s",
        rtol=1e-4,
        atol=1e-5 * np.sqrt(9 * ci) * 3,
        note="padded P; cache_read: Wp re-laid out; cache_write: Acc register tile" if variant == "best" else "",
    )


def numpy_peer(size: str) -> harness.Peer:
    arrays = inputs(size)
    a, w = arrays["inp"], arrays["w"]
    return harness.Peer(kernel_name(size), lambda: im2col_conv(a, w), _work(size), "GFLOP/s")


# ---------------------------------------------------------------- naive C

# The loop nest as a textbook writes it (zero padding by a bounds test), the yardstick
# of the unscheduled variants (harness.naive_peer builds it with gcc -O3 -march=native).
NAIVE_C = """
void kernel(const float *inp, const float *w, float *out) {
    for (long k = 0; k < CO; k++) {
        for (long y = 0; y < H; y++) {
            for (long x = 0; x < W; x++) {
                float s = 0.0f;
                for (long c = 0; c < CI; c++) {
                    for (long ry = 0; ry < 3; ry++) {
                        for (long rx = 0; rx < 3; rx++) {
                            long yy = y + ry - 1, xx = x + rx - 1;
                            if (yy >= 0 && yy < H && xx >= 0 && xx < W) {
                                s += inp[(c * H + yy) * W + xx] * w[((k * CI + c) * 3 + ry) * 3 + rx];
                            }
                        }
                    }
                }
                out[(k * H + y) * W + x] = s;
            }
        }
    }
}
"""


def naive_defines(dims) -> dict[str, int]:
    ci, co, h, w = dims
    return {"CI": ci, "CO": co, "H": h, "W": w}


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
