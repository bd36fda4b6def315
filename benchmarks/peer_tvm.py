"""TVM as a benchmark peer: six kernels as tensor expressions with hand-written schedules.

    python benchmarks/sgemm.py --peer tvm --size 1024      (through harness.measure)

Each kernel is written with tvm.te (te.compute), turned into a TensorIR function
(te.create_prim_func) and scheduled by hand with tvm.s_tir.Schedule (TVM 0.27:
the old te.create_schedule is gone), then compiled once with tvm.compile for
LLVM with the host CPU (llvm_get_system_cpu, i.e. -mcpu=native: AVX-512). The
peer's fn() runs it on the kernel script's own inputs (copied once into TVM
tensors) into an output tensor allocated once, as tdsl's Kernel.benchmark does,
and returns that output as a numpy array (a zero-copy DLPack view). Threads:
TVM's thread pool reads TVM_NUM_THREADS (run.py sets it; 2 by default here).

Schedules:

sgemm    TVM's "how to optimize GEMM on CPU": B packed into bn-wide column panels
         (packedB, on threads), the output blocked into thread tiles, each tile
         walked in register blocks (rows x bn, bn / 16 vectors) accumulated in a
         local cache_write buffer over the whole k loop (k unrolled), then written
         to C once; decompose_reduction puts the zeroing before the k loop.
conv2d   NCHW in and out; the input zero-padded per strip of output rows (P), the weights re-laid
         out with output channels innermost (Wp); the convolution accumulated in
         channel-last register tiles (ty x tx pixels x tk channels, tk / 16
         vectors) over (c, ry, rx), each tile transposed into the NCHW output.
blur     strips of 128 output rows on threads, bx computed per strip, both stages
         vectorized by 8 (the rows' last partial vector split off with loop_partition).
softmax  per row on threads: the max and the sum rfactored into V vector lanes,
         exp is topi.fast_exp (TVM's vectorizable exp), the output multiplies by
         1 / total.
layernorm  as softmax: per row on threads, both sums rfactored into V vector
         lanes, the centred row computed once per row.
depthwise  channels on threads, the zero-padded rows of each strip of 8 output
         rows computed per strip, x in vectors with the nine taps unrolled.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("TVM_NUM_THREADS", "2")

import harness  # noqa: E402
import numpy as np  # noqa: E402
import tvm  # noqa: E402
from tvm import s_tir, te, topi  # noqa: E402

VEC = 16  # float32 lanes of an AVX-512 vector
F32 = "float32"


def target() -> tvm.target.Target:
    from tvm.target import codegen

    return tvm.target.Target({"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu(),
                              "num-cores": int(os.environ["TVM_NUM_THREADS"])})


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _vectorize_inner(sch, block, lanes: int = VEC):
    """Split a block's innermost loop by `lanes` (when it is longer) and vectorize it."""
    loops = sch.get_loops(block)
    inner = loops[-1]
    extent = int(sch.get(inner).extent)
    if extent > lanes:
        _, inner = sch.split(inner, [None, lanes])
    sch.vectorize(inner)


# ---------------------------------------------------------------- sgemm

SGEMM = dict(bn=2 * VEC, rows=8, ti=128, tj=2 * VEC, unroll_k=4)


def sgemm(m: int, k: int, n: int, bn: int, rows: int, ti: int, tj: int, unroll_k: int):
    A = te.placeholder((m, k), F32, name="A")
    B = te.placeholder((k, n), F32, name="B")
    nb = _ceil(n, bn)
    packedB = te.compute(
        (nb, k, bn),
        lambda jo, kk, ji: te.if_then_else(jo * bn + ji < n, B[kk, jo * bn + ji], 0.0)
        if n % bn else B[kk, jo * bn + ji],
        name="packedB")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * packedB[j // bn, r, j % bn], axis=r),
                   name="C")
    sch = s_tir.Schedule(te.create_prim_func([A, B, C]))

    c = sch.get_sblock("C")
    i, j, kk = sch.get_loops(c)
    i0, i1, i2 = sch.split(i, [None, ti // rows, rows])
    j0, j1, j2 = sch.split(j, [None, tj // bn, bn])
    sch.reorder(i0, j0, j1, i1, kk, i2, j2)
    ko, ki = sch.split(kk, [None, unroll_k])
    sch.parallel(sch.fuse(i0, j0))
    j2o, j2i = sch.split(j2, [None, VEC])
    sch.unroll(ki)
    sch.unroll(i2)
    sch.unroll(j2o)
    sch.vectorize(j2i)
    # the register block: a local accumulator, written to C once after the k loop
    cw = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(cw, i1)
    _vectorize_inner(sch, cw)
    init = sch.decompose_reduction(c, ko)
    _vectorize_inner(sch, init)

    pb = sch.get_sblock("packedB")
    jo, kk, ji = sch.get_loops(pb)
    sch.parallel(jo)
    _vectorize_inner(sch, pb)
    return sch.mod


# ---------------------------------------------------------------- conv2d

CONV = dict(tk=2 * VEC, tx=8, ty=1, par="y", p_at="y")


def conv2d(ci: int, co: int, h: int, w: int, tk: int, tx: int, ty: int, par: str,
           p_at: str = "root"):
    """p_at "root": P computed once, its channels on threads; "y": P computed per strip
    of output rows (the ty + 2 padded rows it reads), inside the loop on threads."""
    inp = te.placeholder((ci, h, w), F32, name="inp")
    W = te.placeholder((co, ci, 3, 3), F32, name="w")
    P = te.compute(
        (ci, h + 2, w + 2),
        lambda c, y, x: te.if_then_else(
            te.all(y >= 1, y <= h, x >= 1, x <= w), inp[c, y - 1, x - 1], 0.0),
        name="P")
    Wp = te.compute((ci, 3, 3, co), lambda c, ry, rx, k: W[k, c, ry, rx], name="Wp")
    c = te.reduce_axis((0, ci), name="c")
    ry = te.reduce_axis((0, 3), name="ry")
    rx = te.reduce_axis((0, 3), name="rx")
    acc = te.compute(
        (h, w, co),
        lambda y, x, k: te.sum(P[c, y + ry, x + rx] * Wp[c, ry, rx, k], axis=[c, ry, rx]),
        name="acc")
    out = te.compute((co, h, w), lambda k, y, x: acc[y, x, k], name="out")
    sch = s_tir.Schedule(te.create_prim_func([inp, W, out]))

    o = sch.get_sblock("out")
    k, y, x = sch.get_loops(o)
    ko, ki = sch.split(k, [None, tk])
    yo, yi = sch.split(y, [None, ty])
    xo, xi = sch.split(x, [None, tx])
    outer = (yo, ko) if par == "y" else (ko, yo)
    sch.reorder(*outer, xo, ki, yi, xi)
    sch.parallel(outer[0])
    sch.unroll(yi)
    sch.unroll(xi)

    a = sch.get_sblock("acc")
    sch.compute_at(a, xo)
    # acc's loops under xo: (y when ty > 1), x, k, then the reduction c, ry, rx
    inner = sch.get_loops(a)[3:]
    pixels, ak, (ac, ary, arx) = inner[:-4], inner[-4], inner[-3:]
    ako, aki = sch.split(ak, [None, VEC])
    sch.reorder(ac, ary, arx, *pixels, ako, aki)
    for loop in (arx, *pixels, ako):
        sch.unroll(loop)
    sch.vectorize(aki)
    init = sch.decompose_reduction(a, ac)
    for loop in sch.get_loops(init)[3:-1]:
        sch.unroll(loop)
    _vectorize_inner(sch, init)

    p = sch.get_sblock("P")
    if p_at == "y":
        sch.compute_at(p, yo)
    else:
        sch.parallel(sch.get_loops(p)[0])
    _vectorize_inner(sch, p)
    wp = sch.get_sblock("Wp")
    _vectorize_inner(sch, wp)
    return sch.mod


# ---------------------------------------------------------------- blur

BLUR = dict(ty=128, v=8)


def _vectorize_with_tail(sch, block, lanes: int):
    """Vectorize a block's innermost loop by `lanes`; when its extent is not a
    multiple of `lanes`, the loop is partitioned first (loop_partition) so the
    full vectors run without a per-lane predicate (TVM would scalarize the whole
    loop otherwise) and the remainder runs as a scalar loop."""
    loop = sch.get_loops(block)[-1]
    extent = int(sch.get(loop).extent)
    outer, inner = sch.split(loop, [None, lanes])
    if extent % lanes == 0:
        sch.vectorize(inner)
        return
    if extent < lanes:
        return
    main, _ = sch.loop_partition(outer, [extent // lanes, None])
    for blk in sch.get_child_blocks(main):
        sch.vectorize(sch.get_loops(blk)[-1])


def blur(h: int, w: int, ty: int, v: int):
    """Strips of ty output rows on threads, bx computed per strip (ty + 2 rows)."""
    inp = te.placeholder((h, w), F32, name="inp")
    third = tvm.tirx.const(3.0, F32)
    bx = te.compute((h, w - 2), lambda y, x: (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) / third,
                    name="bx")
    by = te.compute((h - 2, w - 2),
                    lambda y, x: (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / third, name="by")
    sch = s_tir.Schedule(te.create_prim_func([inp, by]))
    b = sch.get_sblock("by")
    y, _ = sch.get_loops(b)
    yo, _ = sch.split(y, [None, ty])
    sch.parallel(yo)
    bxb = sch.get_sblock("bx")
    sch.compute_at(bxb, yo)
    _vectorize_with_tail(sch, bxb, v)
    _vectorize_with_tail(sch, b, v)
    return sch.mod


# ---------------------------------------------------------------- softmax

SOFTMAX = dict(V=2 * VEC, v=2 * VEC, fast=True)


def softmax(rows: int, cols: int, V: int, v: int, fast: bool):
    while cols % V:
        V //= 2
    X = te.placeholder((rows, cols), F32, name="X")
    c1 = te.reduce_axis((0, cols), name="c1")
    mx = te.compute((rows,), lambda r: te.max(X[r, c1], axis=c1), name="mx")
    d = te.compute((rows, cols), lambda r, c: X[r, c] - mx[r], name="d")
    e = topi.fast_exp(d) if fast else te.compute((rows, cols), lambda r, c: te.exp(d[r, c]),
                                                  name="e")
    c2 = te.reduce_axis((0, cols), name="c2")
    total = te.compute((rows,), lambda r: te.sum(e[r, c2], axis=c2), name="total")
    out = te.compute((rows, cols), lambda r, c: e[r, c] * (1.0 / total[r]), name="out")
    sch = s_tir.Schedule(te.create_prim_func([X, out]))

    ob = sch.get_sblock("out")
    r, c = sch.get_loops(ob)
    sch.parallel(r)
    co, ci = sch.split(c, [None, v])
    sch.vectorize(ci)
    sch.compute_inline(sch.get_sblock("d"))
    eb = sch.get_producers(sch.get_sblock("total"))[0]
    # the max and the sum: V partial results (rfactor), vectorized over their lanes
    rf = _rfactor_lanes(sch, ("mx", "total"), V)
    sch.compute_at(sch.get_sblock("total"), r)
    sch.compute_at(rf["total"], r)
    sch.compute_at(eb, r)
    sch.compute_at(sch.get_sblock("mx"), r)
    sch.compute_at(rf["mx"], r)
    _vectorize_lanes(sch, rf.values(), min(v, V))
    _vectorize_inner(sch, eb, v)
    return sch.mod


def _rfactor_lanes(sch, names, V: int) -> dict:
    """rfactor each named row reduction into V partial results (its lanes); the
    rfactored blocks by name."""
    rf = {}
    for name in names:
        _, red = sch.get_loops(sch.get_sblock(name))
        _, lane = sch.split(red, [None, V])
        rf[name] = sch.rfactor(lane, 0)
    return rf


def _vectorize_lanes(sch, blocks, width: int) -> None:
    """Each rfactored block (placed already) reduces with its lanes innermost, split
    by `width` and vectorized, its initialisation vectorized too."""
    for blk in blocks:
        loops = sch.get_loops(blk)
        lane, red = loops[-2], loops[-1]
        sch.reorder(red, lane)
        _, li = sch.split(lane, [None, width])
        sch.vectorize(li)
        init = sch.decompose_reduction(blk, red)
        _vectorize_inner(sch, init, width)


# ---------------------------------------------------------------- layernorm

LAYERNORM = dict(V=2 * VEC, v=2 * VEC)


def layernorm(rows: int, cols: int, V: int, v: int):
    """As softmax: per row on threads, the two sums (of X, of the squared deviations)
    rfactored into V vector lanes; the centred row d computed once per row."""
    eps = 1e-5
    while cols % V:
        V //= 2
    X = te.placeholder((rows, cols), F32, name="X")
    g = te.placeholder((cols,), F32, name="g")
    b = te.placeholder((cols,), F32, name="b")
    c1 = te.reduce_axis((0, cols), name="c1")
    total = te.compute((rows,), lambda r: te.sum(X[r, c1], axis=c1), name="total")
    d = te.compute((rows, cols), lambda r, c: X[r, c] - total[r] / float(cols), name="d")
    c2 = te.reduce_axis((0, cols), name="c2")
    sq = te.compute((rows,), lambda r: te.sum(d[r, c2] * d[r, c2], axis=c2), name="sq")
    out = te.compute(
        (rows, cols),
        lambda r, c: d[r, c] * (1.0 / te.sqrt(sq[r] / float(cols) + eps)) * g[c] + b[c],
        name="out")
    sch = s_tir.Schedule(te.create_prim_func([X, g, b, out]))

    ob = sch.get_sblock("out")
    r, c = sch.get_loops(ob)
    sch.parallel(r)
    _, ci = sch.split(c, [None, v])
    sch.vectorize(ci)
    rf = _rfactor_lanes(sch, ("total", "sq"), V)
    # consumers first: each compute_at needs its consumers placed already
    sch.compute_at(sch.get_sblock("sq"), r)
    sch.compute_at(rf["sq"], r)
    sch.compute_at(sch.get_sblock("d"), r)
    sch.compute_at(sch.get_sblock("total"), r)
    sch.compute_at(rf["total"], r)
    _vectorize_lanes(sch, rf.values(), min(v, V))
    _vectorize_inner(sch, sch.get_sblock("d"), v)
    return sch.mod


# ---------------------------------------------------------------- depthwise

DEPTHWISE = dict(ty=8, v=VEC)


def depthwise(ch: int, h: int, w: int, ty: int, v: int):
    """Channels on threads; the zero-padded rows of a strip of ty output rows
    computed per strip (P); per output row, x in vectors of v with the nine taps
    unrolled around the vector loop, accumulated in a local row (cache_write)."""
    inp = te.placeholder((ch, h, w), F32, name="inp")
    W = te.placeholder((ch, 3, 3), F32, name="w")
    P = te.compute(
        (ch, h + 2, w + 2),
        lambda c, y, x: te.if_then_else(
            te.all(y >= 1, y <= h, x >= 1, x <= w), inp[c, y - 1, x - 1], 0.0),
        name="P")
    ry = te.reduce_axis((0, 3), name="ry")
    rx = te.reduce_axis((0, 3), name="rx")
    out = te.compute((ch, h, w),
                     lambda c, y, x: te.sum(P[c, y + ry, x + rx] * W[c, ry, rx], axis=[ry, rx]),
                     name="out")
    sch = s_tir.Schedule(te.create_prim_func([inp, W, out]))
    o = sch.get_sblock("out")
    c, y, x, ory, orx = sch.get_loops(o)
    yo, yi = sch.split(y, [None, ty])
    xo, xi = sch.split(x, [None, v])
    sch.reorder(c, yo, yi, xo, ory, orx, xi)
    sch.parallel(c)
    sch.unroll(ory)
    sch.unroll(orx)
    sch.vectorize(xi)
    init = sch.decompose_reduction(o, ory)
    _vectorize_inner(sch, init, v)
    p = sch.get_sblock("P")
    sch.compute_at(p, yo)
    _vectorize_with_tail(sch, p, v)
    return sch.mod


# ---------------------------------------------------------------- peers

BUILDERS = {"sgemm": (sgemm, SGEMM), "conv2d": (conv2d, CONV), "blur": (blur, BLUR),
            "softmax": (softmax, SOFTMAX), "layernorm": (layernorm, LAYERNORM),
            "depthwise": (depthwise, DEPTHWISE)}


def compile_kernel(script: str, dims, **overrides):
    """(compiled function, the parameters used, compile seconds) for one kernel at `dims`."""
    fn, params = BUILDERS[script]
    params = {**params, **overrides}
    t0 = time.perf_counter()
    mod = fn(*dims, **params)
    lib = tvm.compile(mod, target=target())
    return lib["main"], params, time.perf_counter() - t0


def runner(compiled, arrays: list[np.ndarray], out_shape: tuple[int, ...]):
    """A no-argument function running `compiled` on `arrays` (copied once into TVM
    tensors) into one output tensor, returned as a numpy view of it."""
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(a, dev) for a in arrays]
    out = tvm.runtime.empty(out_shape, F32, dev)
    out_np = np.from_dlpack(out)

    def fn() -> np.ndarray:
        compiled(*args, out)
        return out_np

    return fn


def peer(script: str, size: str, **overrides) -> harness.Peer:
    """The TVM peer of a kernel script (sgemm, conv2d, blur, softmax) at one size."""
    module = harness.kernel_module(script)
    dims = module.SIZES[size]
    arrays = module.inputs(size)
    ref = module.numpy_peer(size)  # its kernel name, work and unit (not run here)
    compiled, params, build_s = compile_kernel(script, dims, **overrides)
    fn = runner(compiled, [arrays[a] for a in harness.PEER_ARGS[script]], harness.output_shape(script, dims))
    info = {"build_s": round(build_s, 3), "target": str(target()),
            "threads": os.environ.get("TVM_NUM_THREADS"),
            "schedule": ", ".join(f"{k}={v}" for k, v in params.items())}
    return harness.Peer(ref.kernel, fn, ref.work, ref.unit, info)
