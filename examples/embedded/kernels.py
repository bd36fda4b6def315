"""Example kernels for embedded targets, one function per kernel.

Each function returns a schedule; `tdsl emit-c kernels.py:blur --out build`
writes build/blur.c and build/blur.h from it. Sizes are small constants
where a microcontroller would know them at build time, symbolic (`td.size`)
where the caller chooses them at run time.

    python kernels.py --out build       # emit every kernel below
    python kernels.py --out build --isa armv7e-m fc_s8   # with the Arm DSP extension
"""

from __future__ import annotations

import argparse

import tdsl as td


def matmul(n: int = 24, k: int = 20, m: int = 28) -> td.Schedule:
    """float32 C = A @ B, tiled 4 x 8 with the inner loop vectorized."""
    i, j, kk = td.dims("i j k")
    A = td.input("A", {i: n, kk: k}, td.float32)
    B = td.input("B", {kk: k, j: m}, td.float32)
    C = td.compute("C", {i: n, j: m}, td.sum(A[i, kk] * B[kk, j], over=kk))
    return (td.schedule(C)
            .tile(C, i=4, j=8)
            .reorder(C, "i_o j_o k i_i j_i")
            .vectorize(C, "j_i")
            .parallel(C, "i_o"))


def _blur_stages():
    x, y = td.dims("x y")
    H, W = td.size("H"), td.size("W")
    inp = td.input("inp", {y: H, x: W}, td.float32)
    bx = td.compute("bx", {y: H, x: W - 2}, (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) / 3)
    by = td.compute("by", {y: H - 2, x: W - 2}, (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3)
    return x, y, bx, by


def blur_root() -> td.Schedule:
    """3x3 box blur of an H x W image; the horizontal pass bx is a whole intermediate image."""
    _, _, _, by = _blur_stages()
    return td.schedule(by)


def blur() -> td.Schedule:
    """The same blur, bx computed per strip of 8 output rows (a 10-row workspace slot)."""
    x, y, bx, by = _blur_stages()
    return (td.schedule(by)
            .split(by, y, 8)
            .split(by, x, 16)
            .vectorize(by, "x_i")
            .compute_at(bx, by, "y_o")
            .parallel(by, "y_o"))


def blur_sliding(h: int = 240, w: int = 320) -> td.Schedule:
    """3x3 box blur of an h x w uint8 image (sums in uint16, divided by 9, rounded down):
    bx computed per output row and stored once for the kernel (store_root), so its window
    slides: each row of bx is computed once, and bx keeps the three rows in flight."""
    x, y = td.dims("x y")
    inp = td.input("inp", {y: h, x: w}, td.uint8)
    row = td.cast(inp[y, x], td.uint16) + inp[y, x + 1] + inp[y, x + 2]
    bx = td.compute("bx", {y: h, x: w - 2}, row)
    by = td.compute("by", {y: h - 2, x: w - 2},
                    td.cast((bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) // 9, td.uint8))
    return td.schedule(by).compute_at(bx, by, "y").store_root(bx)


def softmax(cols: int = 40) -> td.Schedule:
    """Softmax of each row of an R x cols matrix: max, exp, sum and divide, all per row."""
    r, c = td.dims("r c")
    R = td.size("R")
    X = td.input("X", {r: R, c: cols}, td.float32)
    mx = td.compute("mx", {r: R}, td.max(X[r, c], over=c))
    e = td.compute("e", {r: R, c: cols}, td.exp(X[r, c] - mx[r]))
    total = td.compute("total", {r: R}, td.sum(e[r, c], over=c))
    out = td.compute("out", {r: R, c: cols}, e[r, c] / total[r])
    return (td.schedule(out)
            .compute_at(mx, out, r)
            .compute_at(e, out, r)
            .compute_at(total, out, r)
            .split(out, c, 8)
            .vectorize(out, "c_i"))


def qmatmul(n: int = 16, k: int = 32, m: int = 12) -> td.Schedule:
    """int8 x int8 -> int32 matmul: operands widened to int32, accumulated in int32."""
    i, j, kk = td.dims("i j k")
    A = td.input("A", {i: n, kk: k}, td.int8)
    B = td.input("B", {kk: k, j: m}, td.int8)
    prod = td.cast(A[i, kk], td.int32) * td.cast(B[kk, j], td.int32)
    C = td.compute("C", {i: n, j: m}, td.sum(prod, over=kk))
    return td.schedule(C).split(C, j, 4).reorder(C, "i j_o k j_i").unroll(C, "j_i")


def scale(q: int = 7) -> td.Schedule:
    """int16 fixed-point rescale of a length-N signal: wraps, floors and takes Python's modulo."""
    n = td.dim("n")
    N = td.size("N")
    a = td.input("a", {n: N}, td.int16)
    b = td.input("b", {n: N}, td.int16)
    y = td.compute("y", {n: N}, (a[n] * 3 + b[n]) // q + (a[n] - b[n]) % q)
    return td.schedule(y).split(y, n, 8).vectorize(y, "n_i")


# ---------------------------------------------------------------- quantized networks
#
# int8 layers as TensorFlow Lite for Microcontrollers and CMSIS-NN define them: tensors
# in NHWC order, filters OHWI (depthwise: 1HWC), int32 biases, and the arithmetic of
# TFLite's reference kernels: each input plus its offset (the negative of its zero
# point), times the filter, summed from the bias in int32; then requantized
# (`td.requantize`: per tensor for the fully connected layer, per output channel for the
# convolutions), plus the output offset, clamped to the activation's range and stored
# as int8. The offsets, activation range and per-tensor scale are constants of the
# model, compiled into the kernel; the per-channel multipliers and shifts are arrays.


def _requantized(acc, multiplier, shift, output_offset: int, act_min: int, act_max: int):
    """acc requantized (TFLite's MultiplyByQuantizedMultiplier), offset and clamped to int8."""
    q = td.requantize(acc, multiplier, shift) + output_offset
    return td.saturating_cast(td.minimum(td.maximum(q, act_min), act_max), td.int8)


def fc_s8(n_in: int = 256, n_out: int = 64, input_offset: int = 128,
          output_offset: int = -128, multiplier: int = 1518500250, shift: int = -12,
          act_min: int = -128, act_max: int = 127) -> td.Schedule:
    """int8 fully connected layer (CMSIS-NN's arm_fully_connected_s8), per-tensor
    quantization: output[o] = requantize(bias[o] + sum over i of (input[i] +
    input_offset) * filter[o, i]). Four outputs at a time share each input."""
    o, i = td.dims("o i")
    x = td.input("input", {i: n_in}, td.int8)
    w = td.input("filter", {o: n_out, i: n_in}, td.int8)
    bias = td.input("bias", {o: n_out}, td.int32)
    acc = td.compute("acc", {o: n_out}, td.sum(
        (td.cast(x[i], td.int32) + input_offset) * td.cast(w[o, i], td.int32), over=i))
    out = td.compute("output", {o: n_out}, _requantized(acc[o] + bias[o], multiplier, shift,
                                                         output_offset, act_min, act_max))
    return (td.schedule(out).split(out, o, 4).unroll(out, "o_i").compute_at(acc, out, "o_o")
            .split(acc, i, 4).reorder(acc, "i_o i_i o").unroll(acc, "i_i").vectorize(acc, "o"))


def conv_s8(h: int = 16, w: int = 16, c_in: int = 16, c_out: int = 16,
            input_offset: int = 128, output_offset: int = -128, act_min: int = -128,
            act_max: int = 127) -> td.Schedule:
    """int8 3x3 convolution, stride 1, padding 1 (CMSIS-NN's arm_convolve_wrapper_s8),
    per-channel quantization: output[y, x, k] = requantize(bias[k] + sum over ry, rx,
    c of (input[y + ry - 1, x + rx - 1, c] + input_offset) * filter[k, ry, rx, c],
    multiplier[k], shift[k]); the padding reads as -input_offset, which contributes 0.
    Four output channels at a time share each input."""
    y, x, k, c, ry, rx = td.dims("y x k c ry rx")
    inp = td.input("input", {y: h, x: w, c: c_in}, td.int8)
    f = td.input("filter", {k: c_out, ry: 3, rx: 3, c: c_in}, td.int8)
    bias = td.input("bias", {k: c_out}, td.int32)
    mult = td.input("multiplier", {k: c_out}, td.int32)
    shift = td.input("shift", {k: c_out}, td.int32)
    p = td.pad(inp, -input_offset)
    prod = (td.cast(p[y + ry - 1, x + rx - 1, c], td.int32) + input_offset) \
        * td.cast(f[k, ry, rx, c], td.int32)
    acc = td.compute("acc", {y: h, x: w, k: c_out}, td.sum(prod, over=(ry, rx, c)))
    out = td.compute("output", {y: h, x: w, k: c_out}, _requantized(
        acc[y, x, k] + bias[k], mult[k], shift[k], output_offset, act_min, act_max))
    return (td.schedule(out).split(out, k, 4).unroll(out, "k_i").compute_at(acc, out, "k_o")
            .split(acc, c, 4).reorder(acc, "ry rx c_o c_i k").unroll(acc, "c_i")
            .vectorize(acc, "k"))


def depthwise_s8(h: int = 32, w: int = 32, ch: int = 16, input_offset: int = 128,
                 output_offset: int = -128, act_min: int = -128,
                 act_max: int = 127) -> td.Schedule:
    """int8 3x3 depthwise convolution, stride 1, padding 1, one output per input channel
    (CMSIS-NN's arm_depthwise_conv_wrapper_s8), per-channel quantization:
    output[y, x, c] = requantize(bias[c] + sum over ry, rx of (input[y + ry - 1,
    x + rx - 1, c] + input_offset) * filter[ry, rx, c], multiplier[c], shift[c])."""
    y, x, c, ry, rx = td.dims("y x c ry rx")
    inp = td.input("input", {y: h, x: w, c: ch}, td.int8)
    f = td.input("filter", {ry: 3, rx: 3, c: ch}, td.int8)
    bias = td.input("bias", {c: ch}, td.int32)
    mult = td.input("multiplier", {c: ch}, td.int32)
    shift = td.input("shift", {c: ch}, td.int32)
    p = td.pad(inp, -input_offset)
    prod = (td.cast(p[y + ry - 1, x + rx - 1, c], td.int32) + input_offset) \
        * td.cast(f[ry, rx, c], td.int32)
    acc = td.compute("acc", {y: h, x: w, c: ch}, td.sum(prod, over=(ry, rx)))
    out = td.compute("output", {y: h, x: w, c: ch}, _requantized(
        acc[y, x, c] + bias[c], mult[c], shift[c], output_offset, act_min, act_max))
    return (td.schedule(out).split(out, c, 4).unroll(out, "c_i").compute_at(acc, out, "c_o")
            .reorder(acc, "ry rx c").unroll(acc, "ry").unroll(acc, "rx").vectorize(acc, "c"))


def avgpool_s8(h: int = 16, w: int = 16, ch: int = 16, act_min: int = -128,
               act_max: int = 127) -> td.Schedule:
    """int8 2x2 average pooling, stride 2 (CMSIS-NN's arm_avgpool_s8): the sum of each
    window divided by 4, halves rounded away from zero, clamped to the activation."""
    y, x, c, ry, rx = td.dims("y x c ry rx")
    inp = td.input("input", {y: h, x: w, c: ch}, td.int8)
    s = td.sum(td.cast(inp[2 * y + ry, 2 * x + rx, c], td.int32), over={ry: 2, rx: 2})
    total = td.compute("total", {y: h // 2, x: w // 2, c: ch}, s)
    t = total[y, x, c]
    avg = td.where(t > 0, (t + 2) // 4, -((2 - t) // 4))
    out = td.compute("output", {y: h // 2, x: w // 2, c: ch},
                     td.saturating_cast(td.minimum(td.maximum(avg, act_min), act_max), td.int8))
    return (td.schedule(out).split(out, c, 4).unroll(out, "c_i").compute_at(total, out, "c_o")
            .reorder(total, "ry rx c").unroll(total, "ry").unroll(total, "rx")
            .vectorize(total, "c"))


def maxpool_s8(h: int = 16, w: int = 16, ch: int = 16, act_min: int = -128,
               act_max: int = 127) -> td.Schedule:
    """int8 2x2 max pooling, stride 2 (CMSIS-NN's arm_max_pool_s8), clamped to the
    activation."""
    y, x, c, ry, rx = td.dims("y x c ry rx")
    inp = td.input("input", {y: h, x: w, c: ch}, td.int8)
    m = td.max(inp[2 * y + ry, 2 * x + rx, c], over={ry: 2, rx: 2})
    out = td.compute("output", {y: h // 2, x: w // 2, c: ch},
                     td.minimum(td.maximum(m, act_min), act_max))
    return td.schedule(out)


KERNELS = {f.__name__: f for f in (matmul, blur_root, blur, blur_sliding, softmax, qmatmul,
                                   scale, fc_s8, conv_s8, depthwise_s8, avgpool_s8, maxpool_s8)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="build", help="output directory (default: build)")
    p.add_argument("--isa", default="generic", choices=("generic", "armv7e-m"),
                   help="armv7e-m: int8/int16 dot products on the Arm DSP extension "
                        "(under #if __ARM_FEATURE_DSP; default: generic)")
    p.add_argument("names", nargs="*", metavar="KERNEL",
                   help=f"kernels to emit (default: all of {', '.join(KERNELS)})")
    args = p.parse_args()
    unknown = [n for n in args.names if n not in KERNELS]
    if unknown:
        p.error(f"no kernel {unknown[0]!r}; kernels are {', '.join(KERNELS)}")
    for name in args.names or KERNELS:
        c_path, h_path = td.emit_c(KERNELS[name](), name, args.out, isa=args.isa)
        print(f"{c_path} {h_path}")


if __name__ == "__main__":
    main()
