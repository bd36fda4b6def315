"""depthwise: depthwise 3x3 convolution, 64 channels, 112x112, NCHW (batch 1), zero padding 1.

    python benchmarks/depthwise.py --peer tdsl-c
    python benchmarks/depthwise.py --peer tdsl-llvm --search

out[c, y, x] = sum over (ry, rx) of inp[c, y + ry - 1, x + rx - 1] * w[c, ry, rx], with
inp read as zero outside the image (td.pad). Each channel has its own 3x3 filter,
so there is no reduction over channels: 18 flops per output, and the kernel is
bound by memory rather than arithmetic. numpy's baseline pads once and adds the
nine shifted, weighted copies of the image.

Variants:

best   the one-stage reduction over the td.pad view (the lowering partitions the
       loops, so interior rows and columns read plain loads); channels on
       threads; the vector loop over x outside the unrolled taps (outer-loop
       vectorization: each vector summed in a register over the taps, one row
       at a time; strip_schedule), on LLVM with the output streamed. The chunks
       at the left and right edges read the padding as contiguous loads masked
       by the pad's condition (lower.vectors.guarded_arm on LLVM; gcc's masked
       loads on C). Where an earlier C backend stored the sum after every tap
       (see the RESULTS), C took cache_write(out) as Acc, one ty x tx tile at a
       time held in vector registers over the nine taps (acc_schedule,
       td.autoschedule's choice too), as it still does on AVX2.
default the same algorithm with no schedule.
"""

from __future__ import annotations

import sys

import harness
import numpy as np

import tdsl as td

# (channels, height, width)
SIZES = {"112x112": (64, 112, 112), "tiny": (5, 9, 13)}
DEFAULT_SIZE = "112x112"
VARIANTS = ("best", "auto", "tuned")
EXTRA_VARIANTS = ("default",)  # no schedule (harness.unscheduled_case)


def algorithm(ch: int, h: int, w: int):
    c, y, x, ry, rx = td.dims("c y x ry rx")
    inp = td.input("inp", {c: ch, y: h, x: w}, td.float32)
    wt = td.input("w", {c: ch, ry: 3, rx: 3}, td.float32)
    padded = td.pad(inp, 0.0)
    return td.compute("out", {c: ch, y: h, x: w},
                      td.sum(padded[c, y + ry - 1, x + rx - 1] * wt[c, ry, rx], over=(ry, rx)))


def user_algorithm(ch: int, h: int, w: int):
    return algorithm(ch, h, w)


def strip_schedule(size, ty: int, v: int, nt: bool = False) -> td.Schedule:
    """Channels on threads, rows in strips of ty (unrolled), x split by v and
    vectorized with the taps (ry, rx) unrolled inside the vector loop: an
    outer-loop vectorization, so each vector of v outputs is summed in a
    register over the nine taps and stored once (streamed past the caches with
    `nt`)."""
    out = algorithm(*size)
    s = (td.schedule(out)
         .split(out, "y", ty)
         .split(out, "x", v)
         .reorder(out, "c y_o y_i x_o x_i ry rx")
         .unroll(out, "y_i").unroll(out, "ry").unroll(out, "rx")
         .vectorize(out, "x_i")
         .parallel(out, "c"))
    return s.store_nontemporal(out) if nt else s


def acc_schedule(size, ty: int, tx: int, v: int) -> td.Schedule:
    """out tiled ty rows x tx columns; each tile accumulated in Acc (cache_write)
    with the taps (ry, rx) outermost and the tile unrolled into vectors of v lanes,
    so it stays in registers over the nine taps; channels on threads."""
    out = algorithm(*size)
    return (td.schedule(out)
            .cache_write(out, "Acc")
            .tile(out, y=ty, x=tx)
            .reorder(out, "c y_o x_o y_i x_i")
            .vectorize(out, "x_i")
            .compute_at("Acc", out, "x_o")
            .split("Acc", "x", v, names=("x_u", "x_v"))
            .reorder("Acc", "ry rx c y x_u x_v")
            .unroll("Acc", "y").unroll("Acc", "x_u").vectorize("Acc", "x_v")
            .parallel(out, "c"))



BEST = {
    # AVX-512 (Intel Xeon), interleaved in one process, since host C keeps restrict in
    # parallel loop bodies and vectorizes both edge chunks: C strip 0.182 against 0.248
    # ms for acc 2x112; LLVM streamed 0.170 against 0.187
    # (2026-11-28, the same Xeon, interleaved: streamed 0.159 against 0.168 ms)
    ("c", "best", "avx512f"): dict(kind="strip", ty=1, v=16, nt=True),
    # AMD EPYC (Zen 4: AVX-512 on 256-bit units), --search twice: LLVM strip ty2 v8
    # 0.102 and 0.107 ms against 0.122 and 0.116 for ty1 v16 (C: 0.114 against 0.115)
    ("llvm", "best", "AMD EPYC avx512f"): dict(kind="strip", ty=2, v=8),
    # the same Zen 4 (2026-11-29), C --search refined over 5 interleaved rounds: strip
    # ty1 v16 0.119 ms, ty1 v8 0.119, ty2 v16 0.125; the Xeon's streamed stores 0.174
    ("c", "best", "AMD EPYC avx512f"): dict(kind="strip", ty=1, v=16),
    ("llvm", "best", "avx512f"): dict(kind="strip", ty=1, v=16, nt=True),
    # AVX-512 (Intel Xeon), interleaved in one process: 0.258 against 0.426 ms for 4x32 v8
    ("c", "best"): dict(kind="acc", ty=2, tx=112, v=16),
    ("llvm", "best"): dict(kind="strip", ty=1, v=16),
    # --search on an AVX2 machine, after boundary chunks became masked loads on LLVM
    ("c", "best", "avx2"): dict(kind="acc", ty=2, tx=112, v=16),
    ("llvm", "best", "avx2"): dict(kind="strip", ty=1, v=8),
}


def _build_schedule(variant: str, dims, params) -> td.Schedule:
    params = dict(params)
    return (acc_schedule if params.pop("kind") == "acc" else strip_schedule)(dims, **params)


def candidates(target: str, variant: str, size: str):
    dims = SIZES[size]
    out = [(f"strip ty{ty} v{v}", lambda a=ty, b=v: strip_schedule(dims, a, b))
           for ty in (1, 2) for v in (8, 16, 32)]
    out += [(f"strip ty1 v{v} nt", lambda b=v: strip_schedule(dims, 1, b, nt=True))
            for v in (8, 16)]
    out += [(f"acc {ty}x{tx} v{v}", lambda a=ty, b=tx, c=v: acc_schedule(dims, a, b, c))
            for ty, tx, v in ((2, 16, 8), (4, 16, 8), (2, 32, 8), (4, 32, 8), (4, 56, 8),
                              (2, 112, 16), (8, 16, 8), (4, 32, 16), (2, 64, 16))]
    return out


@harness.aligned_inputs
def inputs(size: str) -> dict[str, np.ndarray]:
    ch, h, w = SIZES[size]
    rng = np.random.default_rng(0)
    return {"inp": rng.standard_normal((ch, h, w), dtype=np.float32),
            "w": rng.standard_normal((ch, 3, 3), dtype=np.float32)}


def reference(inp: np.ndarray, w: np.ndarray) -> np.ndarray:
    """numpy: pad once, then the nine shifted copies, each scaled by its channel's tap."""
    _, h, wd = inp.shape
    p = np.pad(inp, ((0, 0), (1, 1), (1, 1)))
    out = p[:, 0:h, 0:wd] * w[:, 0, 0][:, None, None]
    for a in range(3):
        for b in range(3):
            if a or b:
                out += p[:, a:a + h, b:b + wd] * w[:, a, b][:, None, None]
    return out


def _work(size: str) -> float:
    ch, h, w = SIZES[size]
    return 2.0 * 9 * ch * h * w


def kernel_name(size: str) -> str:
    ch, h, w = SIZES[size]
    return f"depthwise 3x3 {ch}ch {h}x{w}"


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
        unit="GFLOP/s",
        rtol=1e-5,
        atol=1e-5,
        note="td.pad view, taps unrolled, x vectorized" if variant == "best" else "",
    )


def numpy_peer(size: str) -> harness.Peer:
    arrays = inputs(size)
    return harness.Peer(kernel_name(size), lambda: reference(**arrays), _work(size), "GFLOP/s")


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
