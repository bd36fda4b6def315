"""Halide as a benchmark peer: six kernels as Halide pipelines with hand-written CPU schedules.

    python benchmarks/sgemm.py --peer halide --size 1024      (through harness.measure)

Each pipeline is JIT-compiled once for the host target (halide.get_host_target():
x86-64 with AVX-512 and the host's tuning) into a Callable; the peer's fn() runs it
on the kernel script's own inputs (the same numpy arrays) into an output array
allocated once, as tdsl's Kernel.benchmark does. Threads: Halide's thread pool
reads HL_NUM_THREADS (run.py sets it; 2 by default here).

Halide indexes a numpy array in reverse: numpy A[i, k] is Halide A(k, i), so the
innermost (contiguous) Halide dimension is numpy's last axis.

Schedules, in the style of Halide's apps:

sgemm    apps/linear_algebra's sgemm: the first operand (here numpy's B, whose rows
         are contiguous along the output's columns) packed into s-column panels
         (Bs, on threads); the output in tj x ti tiles on threads, each walked in
         register tiles of s columns x `rows` rows accumulated over the whole k
         loop (k unrolled); tuned here to s = 64 (4 vectors) x 4 rows, 64 x 128 tiles.
conv2d   apps/conv_layer's CPU schedule adapted to NCHW: the weights re-laid out
         with output channels innermost (vector lanes), the input zero-padded
         per strip of output rows, a register tile of tk output channels x tx pixels of a row
         (here 2 vectors x 8) accumulated over (c, ry, rx), then transposed into
         the NCHW output; rows on threads.
blur     tiles of ty rows x tx columns on threads (tutorial lesson 8), here
         whole-width strips of 128 rows, bx computed per strip, both stages
         vectorized by 8; apps/blur's sliding window (bx stored per strip, computed
         per output row: slide=True) measured a few % slower here.
softmax  per row, rows on threads in tasks of 128 (one task per row was ~25%
         slower here: the thread pool hands out tasks one at a time): the max and
         the sum of exp reduced into V partial results (vectors) each, then
         across lanes; exp is Halide's fast_exp; one row of exp kept for the sum
         and the output, which multiplies by 1 / total.
layernorm  as softmax: rows on threads in tasks of 128, the sum of the row and
         the sum of its squared deviations each reduced into V lanes, one
         centred row kept for the second sum and the output.
depthwise  the nine taps written out; channels on threads, strips of 8 rows
         with the zero-padded rows they read computed per strip; x vectorized.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("HL_NUM_THREADS", "2")

import halide as hl  # noqa: E402
import harness  # noqa: E402
import numpy as np  # noqa: E402

F32 = hl.Float(32)
VEC = 16  # float32 lanes of an AVX-512 vector


def target() -> hl.Target:
    return hl.get_host_target()


# ---------------------------------------------------------------- sgemm

SGEMM = dict(s=4 * VEC, rows=4, tj=4 * VEC, ti=128, unroll_k=4)


def sgemm(m: int, k: int, n: int, s: int, rows: int, tj: int, ti: int, unroll_k: int):
    """C = A @ B; Halide: A(kk, i), B(j, kk), C(j, i). Register tile: s columns
    (s / 16 vectors) x `rows` rows; thread tiles tj x ti."""
    A = hl.ImageParam(F32, 2, "A")
    B = hl.ImageParam(F32, 2, "B")
    j, i, jo, kk, jt, it, jr, ir, ji, ii, t = (hl.Var(v) for v in (
        "j", "i", "jo", "kk", "jt", "it", "jr", "ir", "ji", "ii", "t"))

    # B swizzled: each s-column panel of B stored contiguously, row after row (Bs),
    # read back as an ordinary B(j, kk); zero outside the matrix for a partial panel
    Bz = hl.BoundaryConditions.constant_exterior(B, 0.0) if n % s else B
    # a partial register tile at the bottom edge reads A's last row again
    Ar = hl.BoundaryConditions.repeat_edge(A) if m % rows else A
    Bs = hl.Func("Bs")
    Bs[j, kk, jo] = Bz[jo * s + j, kk]
    Bsw = hl.Func("Bsw")
    Bsw[j, kk] = Bs[j % s, kk, j // s]

    prod = hl.Func("prod")
    prod[kk, j, i] = Bsw[j, kk] * Ar[kk, i]
    AB = hl.Func("AB")
    rv = hl.RDom([hl.Range(0, k)])
    AB[j, i] = 0.0
    AB[j, i] += prod[rv.x, j, i]
    C = hl.Func("C")
    C[j, i] = AB[j, i]

    gw = hl.TailStrategy.GuardWithIf
    (C.tile(j, i, jt, it, j, i, tj, ti, gw)
      .tile(j, i, jr, ir, ji, ii, s, rows, gw)
      .reorder(ji, ii, ir, jr, jt, it)
      .fuse(jt, it, t).parallel(t)
      .vectorize(ji, VEC).unroll(ii))
    C.bound(j, 0, n).bound(i, 0, m)

    # the panels are packed once, on threads, as in apps/linear_algebra
    Bs.compute_root().parallel(jo).vectorize(j, VEC)

    # the register tile: accumulated over the whole k loop, then stored to C
    (AB.compute_at(C, ir)
       .bound_extent(j, s).vectorize(j, VEC)
       .bound_extent(i, rows).unroll(i))
    (AB.update(0)
       .reorder(j, i, rv.x).vectorize(j, VEC).unroll(j).unroll(i).unroll(rv.x, unroll_k))

    A.dim(0).set_bounds(0, k).dim(1).set_bounds(0, m)
    B.dim(0).set_bounds(0, n).dim(1).set_bounds(0, k)
    C.output_buffer().dim(0).set_bounds(0, n).dim(1).set_bounds(0, m)
    return C, [A, B]


# ---------------------------------------------------------------- conv2d

CONV = dict(tk=2 * VEC, tx=8, ty=1, unroll_r=3, par="y", p_at="y")


def conv2d(ci: int, co: int, h: int, w: int, tk: int, tx: int, ty: int, unroll_r: int,
           par: str, p_at: str = "root"):
    """out[k, y, x] = sum over (c, ry, rx) of inp[c, y + ry - 1, x + rx - 1] * w[k, c, ry, rx];
    Halide: inp(x, y, c), W(rx, ry, c, k), out(x, y, k). p_at "root": P computed once,
    its channels on threads; "y": P computed per strip of output rows (ty + 2 rows)."""
    inp = hl.ImageParam(F32, 3, "inp")
    W = hl.ImageParam(F32, 4, "w")
    x, y, c, k, rx_, ry_ = (hl.Var(v) for v in ("x", "y", "c", "k", "rx", "ry"))
    ko, ki, xo, xi, yo, yi = (hl.Var(v) for v in ("ko", "ki", "xo", "xi", "yo", "yi"))

    # zero padding, computed once: P is (w + 2) x (h + 2) per channel
    P = hl.Func("P")
    P[x, y, c] = hl.BoundaryConditions.constant_exterior(inp, 0.0)[x - 1, y - 1, c]
    # weights with the output channel innermost: vector lanes over k
    Wp = hl.Func("Wp")
    Wp[k, rx_, ry_, c] = W[rx_, ry_, c, k]
    r = hl.RDom([hl.Range(0, 3), hl.Range(0, 3), hl.Range(0, ci)])
    conv = hl.Func("conv")
    conv[k, x, y] = 0.0
    conv[k, x, y] += Wp[k, r.x, r.y, r.z] * P[x + r.x, y + r.y, r.z]
    out = hl.Func("out")
    out[x, y, k] = conv[k, x, y]

    gw = hl.TailStrategy.GuardWithIf
    (out.split(k, ko, ki, tk, gw).split(x, xo, xi, tx, gw).split(y, yo, yi, ty, gw)
        .reorder(xi, yi, ki, xo, yo, ko)
        .unroll(xi).unroll(yi)
        .parallel(yo if par == "y" else ko))
    out.bound(x, 0, w).bound(y, 0, h).bound(k, 0, co)
    # the register tile: tk channels (tk / 16 vectors) x tx pixels x ty rows
    (conv.compute_at(out, xo)
         .bound_extent(k, tk).vectorize(k, VEC).unroll(k)
         .bound_extent(x, tx).unroll(x).bound_extent(y, ty).unroll(y))
    (conv.update(0)
         .reorder(k, x, y, r.x, r.y, r.z)
         .vectorize(k, VEC).unroll(k).unroll(x).unroll(y).unroll(r.x, unroll_r))
    if p_at == "y":
        P.compute_at(out, yo).vectorize(x, VEC)
    else:
        P.compute_root().parallel(c).vectorize(x, VEC)
    Wp.compute_root().vectorize(k, VEC)

    inp.dim(0).set_bounds(0, w).dim(1).set_bounds(0, h).dim(2).set_bounds(0, ci)
    W.dim(0).set_bounds(0, 3).dim(1).set_bounds(0, 3).dim(2).set_bounds(0, ci)
    W.dim(3).set_bounds(0, co)
    out.output_buffer().dim(0).set_bounds(0, w).dim(1).set_bounds(0, h)
    out.output_buffer().dim(2).set_bounds(0, co)
    return out, [inp, W]


# ---------------------------------------------------------------- blur

BLUR = dict(slide=False, tx=None, ty=128, v=8)


def blur(h: int, w: int, tx: int | None, ty: int, v: int, slide: bool):
    """by(x, y) = (bx(x, y) + bx(x, y + 1) + bx(x, y + 2)) / 3, bx along x likewise;
    the valid region: by is (w - 2) x (h - 2). tx None: tiles as wide as the image."""
    tx = tx or w - 2
    inp = hl.ImageParam(F32, 2, "inp")
    x, y, xo, yo, xi, yi = (hl.Var(n) for n in ("x", "y", "xo", "yo", "xi", "yi"))
    third = hl.f32(3)
    bx = hl.Func("bx")
    bx[x, y] = (inp[x, y] + inp[x + 1, y] + inp[x + 2, y]) / third
    by = hl.Func("by")
    by[x, y] = (bx[x, y] + bx[x, y + 1] + bx[x, y + 2]) / third

    gw = hl.TailStrategy.GuardWithIf
    if slide:
        # strips of ty rows on threads; bx slides down the strip (a 3-row circular
        # buffer, each bx row computed once per strip), as in apps/blur
        by.split(y, yo, yi, ty, gw).parallel(yo).vectorize(x, v, gw)
        bx.store_at(by, yo).compute_at(by, yi).vectorize(x, v, gw)
    else:
        # tx x ty tiles on threads, bx computed per tile (tutorial lesson 8)
        (by.tile(x, y, xo, yo, xi, yi, tx, ty, gw)
           .vectorize(xi, v).parallel(yo))
        bx.compute_at(by, xo).vectorize(x, v)
    by.bound(x, 0, w - 2).bound(y, 0, h - 2)
    inp.dim(0).set_bounds(0, w).dim(1).set_bounds(0, h)
    by.output_buffer().dim(0).set_bounds(0, w - 2).dim(1).set_bounds(0, h - 2)
    return by, [inp]


# ---------------------------------------------------------------- softmax

SOFTMAX = dict(V=4 * VEC, v=4 * VEC, fast=True, store_e=True, task_rows=128)


def softmax(rows: int, cols: int, V: int, v: int, fast: bool, store_e: bool, task_rows: int):
    """out[r, c] = exp(X[r, c] - max_c X[r, c]) * (1 / sum_c exp(...)); Halide X(c, r)."""
    while cols % V:
        V //= 2
    X = hl.ImageParam(F32, 2, "X")
    c, r, l = hl.Var("c"), hl.Var("r"), hl.Var("l")
    exp = hl.fast_exp if fast else hl.exp
    ro = hl.RDom([hl.Range(0, cols // V)], "ro")
    lanes = hl.RDom([hl.Range(0, V)], "lanes")

    # the max and the sum are reduced into V lanes (vectors), then across them
    mxv = hl.Func("mxv")
    mxv[l, r] = X[l, r]
    mxv[l, r] = hl.max(mxv[l, r], X[ro.x * V + l, r])
    mx = hl.Func("mx")
    mx[r] = hl.maximum(mxv[lanes.x, r])
    e = hl.Func("e")
    e[c, r] = exp(X[c, r] - mx[r])
    sv = hl.Func("sv")
    sv[l, r] = hl.f32(0)
    sv[l, r] += e[ro.x * V + l, r]
    inv = hl.Func("inv")
    inv[r] = hl.f32(1) / hl.sum(sv[lanes.x, r])
    out = hl.Func("out")
    out[c, r] = e[c, r] * inv[r]

    out.vectorize(c, v)
    if task_rows > 1:
        rt = hl.Var("rt")
        out.split(r, rt, r, task_rows, hl.TailStrategy.GuardWithIf).parallel(rt)
    else:
        out.parallel(r)
    for f in (mxv, mx, sv, inv):
        f.compute_at(out, r)
    lv = min(v, V)
    mxv.vectorize(l, lv)
    mxv.update(0).reorder(l, ro.x).vectorize(l, lv)
    sv.vectorize(l, lv)
    sv.update(0).reorder(l, ro.x).vectorize(l, lv)
    if store_e:
        e.compute_at(out, r).vectorize(c, v)  # one row of exp, reused by sv and out
    out.bound(c, 0, cols).bound(r, 0, rows)
    X.dim(0).set_bounds(0, cols).dim(1).set_bounds(0, rows)
    out.output_buffer().dim(0).set_bounds(0, cols).dim(1).set_bounds(0, rows)
    return out, [X]


# ---------------------------------------------------------------- layernorm

LAYERNORM = dict(V=4 * VEC, v=4 * VEC, task_rows=128)


def layernorm(rows: int, cols: int, V: int, v: int, task_rows: int):
    """out[c, r] = (X[c, r] - mean[r]) * (1 / sqrt(var[r] + eps)) * g[c] + b[c];
    Halide X(c, r), g(c), b(c). As softmax: rows on threads in tasks, each sum
    reduced into V lanes (vectors), then across them; one centred row kept."""
    eps = 1e-5
    while cols % V:
        V //= 2
    X = hl.ImageParam(F32, 2, "X")
    g = hl.ImageParam(F32, 1, "g")
    b = hl.ImageParam(F32, 1, "b")
    c, r, l = hl.Var("c"), hl.Var("r"), hl.Var("l")
    ro = hl.RDom([hl.Range(0, cols // V)], "ro")
    lanes = hl.RDom([hl.Range(0, V)], "lanes")
    n = hl.f32(cols)

    sv = hl.Func("sv")
    sv[l, r] = hl.f32(0)
    sv[l, r] += X[ro.x * V + l, r]
    mean = hl.Func("mean")
    mean[r] = hl.sum(sv[lanes.x, r]) / n
    d = hl.Func("d")
    d[c, r] = X[c, r] - mean[r]
    qv = hl.Func("qv")
    qv[l, r] = hl.f32(0)
    qv[l, r] += d[ro.x * V + l, r] * d[ro.x * V + l, r]
    inv = hl.Func("inv")
    inv[r] = hl.f32(1) / hl.sqrt(hl.sum(qv[lanes.x, r]) / n + hl.f32(eps))
    out = hl.Func("out")
    out[c, r] = d[c, r] * inv[r] * g[c] + b[c]

    out.vectorize(c, v)
    rt = hl.Var("rt")
    out.split(r, rt, r, task_rows, hl.TailStrategy.GuardWithIf).parallel(rt)
    for f in (sv, mean, qv, inv):
        f.compute_at(out, r)
    lv = min(v, V)
    for f in (sv, qv):
        f.vectorize(l, lv)
        f.update(0).reorder(l, ro.x).vectorize(l, lv)
    d.compute_at(out, r).vectorize(c, v)
    out.bound(c, 0, cols).bound(r, 0, rows)
    X.dim(0).set_bounds(0, cols).dim(1).set_bounds(0, rows)
    g.dim(0).set_bounds(0, cols)
    b.dim(0).set_bounds(0, cols)
    out.output_buffer().dim(0).set_bounds(0, cols).dim(1).set_bounds(0, rows)
    return out, [X, g, b]


# ---------------------------------------------------------------- depthwise

DEPTHWISE = dict(ty=8, v=VEC)


def depthwise(ch: int, h: int, w: int, ty: int, v: int):
    """out(x, y, c) = sum over the 3x3 taps of P(x + rx, y + ry, c) * W(rx, ry, c), P
    the zero-padded input; Halide inp(x, y, c), W(rx, ry, c). The nine taps written
    out (unrolled), channels on threads, strips of ty rows with the padded rows
    they need computed per strip, x vectorized by v."""
    inp = hl.ImageParam(F32, 3, "inp")
    W = hl.ImageParam(F32, 3, "w")
    x, y, c, yo, yi = (hl.Var(n_) for n_ in ("x", "y", "c", "yo", "yi"))
    P = hl.Func("P")
    P[x, y, c] = hl.BoundaryConditions.constant_exterior(inp, 0.0)[x - 1, y - 1, c]
    out = hl.Func("out")
    terms = [P[x + rx, y + ry, c] * W[rx, ry, c] for ry in range(3) for rx in range(3)]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    out[x, y, c] = total

    gw = hl.TailStrategy.GuardWithIf
    out.split(y, yo, yi, ty, gw).reorder(x, yi, yo, c).parallel(c).vectorize(x, v, gw)
    P.compute_at(out, yo).vectorize(x, v, gw)
    out.bound(x, 0, w).bound(y, 0, h).bound(c, 0, ch)
    inp.dim(0).set_bounds(0, w).dim(1).set_bounds(0, h).dim(2).set_bounds(0, ch)
    W.dim(0).set_bounds(0, 3).dim(1).set_bounds(0, 3).dim(2).set_bounds(0, ch)
    out.output_buffer().dim(0).set_bounds(0, w).dim(1).set_bounds(0, h)
    out.output_buffer().dim(2).set_bounds(0, ch)
    return out, [inp, W]


# ---------------------------------------------------------------- peers

BUILDERS = {"sgemm": (sgemm, SGEMM), "conv2d": (conv2d, CONV), "blur": (blur, BLUR),
            "softmax": (softmax, SOFTMAX), "layernorm": (layernorm, LAYERNORM),
            "depthwise": (depthwise, DEPTHWISE)}


def compile_kernel(script: str, dims, **overrides):
    """(Callable, the parameters used, compile seconds) for one kernel at `dims`."""
    fn, params = BUILDERS[script]
    params = {**params, **overrides}
    t0 = time.perf_counter()
    func, args = fn(*dims, **params)
    compiled = func.compile_to_callable(args, target())
    return compiled, params, time.perf_counter() - t0


def runner(compiled, arrays: list[np.ndarray], out: np.ndarray):
    """A no-argument function running `compiled` on `arrays` into `out` (returned)."""
    bufs = [hl.Buffer(a) for a in arrays]
    out_buf = hl.Buffer(out)

    def fn() -> np.ndarray:
        compiled(*bufs, out_buf)
        return out

    return fn


def peer(script: str, size: str, **overrides) -> harness.Peer:
    """The Halide peer of a kernel script (sgemm, conv2d, blur, softmax) at one size."""
    module = harness.kernel_module(script)
    dims = module.SIZES[size]
    arrays = module.inputs(size)
    want = module.numpy_peer(size)  # its kernel name, work and unit (not run here)
    compiled, params, build_s = compile_kernel(script, dims, **overrides)
    shape = harness.output_shape(script, dims)
    out = harness.aligned_empty(shape, np.float32)
    fn = runner(compiled, [np.ascontiguousarray(arrays[a]) for a in harness.PEER_ARGS[script]], out)
    info = {"build_s": round(build_s, 3), "target": str(target()),
            "threads": os.environ.get("HL_NUM_THREADS"),
            "schedule": ", ".join(f"{k}={v}" for k, v in params.items())}
    return harness.Peer(want.kernel, fn, want.work, want.unit, info)


