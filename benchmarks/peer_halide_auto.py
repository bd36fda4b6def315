"""Halide's autoschedulers as benchmark peers: the six kernels with no hand schedule.

    python benchmarks/sgemm.py --peer halide-adams2019 --size 1024   (through harness.measure)

Each kernel is written as the plain Halide algorithm (no schedule; the same
definitions as peer_halide.py's without their scheduling tricks), given estimates
of its input and output extents, and scheduled by one of the autoschedulers the
`halide` wheel ships as plugins (halide/lib64/libautoschedule_*.so):

    halide-mullapudi2016   Mullapudi et al. 2016: greedy grouping and tiling, analytic
    halide-adams2019       Adams et al. 2019: beam search over a learned cost model
                           (the weights built into the plugin)
    halide-li2018          Li et al. 2018: the gradient autoscheduler's heuristics

with `parallelism` = the threads of the run (HL_NUM_THREADS) and the host target.
Their tuning time is the autoscheduler's run plus the JIT compile, reported as
`tune_s` (none of them measures anything on the machine: Adams2019 predicts).
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("HL_NUM_THREADS", "2")

import halide as hl  # noqa: E402
import harness  # noqa: E402
import numpy as np  # noqa: E402

F32 = hl.Float(32)
AUTOSCHEDULERS = {"halide-mullapudi2016": "Mullapudi2016", "halide-adams2019": "Adams2019",
                  "halide-li2018": "Li2018"}
_LOADED: set[str] = set()


def _plugin(name: str) -> None:
    """Load the autoscheduler plugin `name` from the wheel, once."""
    if name in _LOADED:
        return
    lib = os.path.join(os.path.dirname(hl.__file__), "lib64", f"libautoschedule_{name.lower()}.so")
    if not os.path.exists(lib):
        lib = os.path.join(os.path.dirname(hl.__file__), "lib", f"libautoschedule_{name.lower()}.so")
    hl.load_plugin(lib)
    _LOADED.add(name)


def _bounded(param: hl.ImageParam, extents) -> None:
    """Bounds and estimates of an input, Halide order (innermost first)."""
    for d, n in enumerate(extents):
        param.dim(d).set_bounds(0, n).set_estimate(0, n)


def _output(f: hl.Func, extents) -> None:
    f.set_estimates([hl.Range(0, n) for n in extents])
    for d, n in enumerate(extents):
        f.output_buffer().dim(d).set_bounds(0, n)


def sgemm(m: int, k: int, n: int):
    A = hl.ImageParam(F32, 2, "A")  # A(kk, i)
    B = hl.ImageParam(F32, 2, "B")  # B(j, kk)
    j, i = hl.Var("j"), hl.Var("i")
    r = hl.RDom([hl.Range(0, k)])
    C = hl.Func("C")
    C[j, i] = 0.0
    C[j, i] += A[r.x, i] * B[j, r.x]
    _bounded(A, (k, m))
    _bounded(B, (n, k))
    _output(C, (n, m))
    return C, [A, B]


def conv2d(ci: int, co: int, h: int, w: int):
    inp = hl.ImageParam(F32, 3, "inp")  # inp(x, y, c)
    W = hl.ImageParam(F32, 4, "w")  # W(rx, ry, c, k)
    x, y, k = hl.Var("x"), hl.Var("y"), hl.Var("k")
    P = hl.Func("P")
    P[x, y, k] = hl.BoundaryConditions.constant_exterior(inp, 0.0)[x - 1, y - 1, k]
    r = hl.RDom([hl.Range(0, 3), hl.Range(0, 3), hl.Range(0, ci)])
    out = hl.Func("out")
    out[x, y, k] = 0.0
    out[x, y, k] += W[r.x, r.y, r.z, k] * P[x + r.x, y + r.y, r.z]
    _bounded(inp, (w, h, ci))
    _bounded(W, (3, 3, ci, co))
    _output(out, (w, h, co))
    return out, [inp, W]


def blur(h: int, w: int):
    inp = hl.ImageParam(F32, 2, "inp")
    x, y = hl.Var("x"), hl.Var("y")
    third = hl.f32(3)
    bx = hl.Func("bx")
    bx[x, y] = (inp[x, y] + inp[x + 1, y] + inp[x + 2, y]) / third
    by = hl.Func("by")
    by[x, y] = (bx[x, y] + bx[x, y + 1] + bx[x, y + 2]) / third
    _bounded(inp, (w, h))
    _output(by, (w - 2, h - 2))
    return by, [inp]


def softmax(rows: int, cols: int):
    X = hl.ImageParam(F32, 2, "X")  # X(c, r)
    c, r = hl.Var("c"), hl.Var("r")
    k = hl.RDom([hl.Range(0, cols)])
    mx = hl.Func("mx")
    mx[r] = hl.maximum(X[k.x, r])
    e = hl.Func("e")
    e[c, r] = hl.exp(X[c, r] - mx[r])
    total = hl.Func("total")
    total[r] = hl.sum(e[k.x, r])
    out = hl.Func("out")
    out[c, r] = e[c, r] / total[r]
    _bounded(X, (cols, rows))
    _output(out, (cols, rows))
    return out, [X]


def layernorm(rows: int, cols: int):
    X = hl.ImageParam(F32, 2, "X")
    g = hl.ImageParam(F32, 1, "g")
    b = hl.ImageParam(F32, 1, "b")
    c, r = hl.Var("c"), hl.Var("r")
    k = hl.RDom([hl.Range(0, cols)])
    n = hl.f32(cols)
    mean = hl.Func("mean")
    mean[r] = hl.sum(X[k.x, r]) / n
    d = hl.Func("d")
    d[c, r] = X[c, r] - mean[r]
    var = hl.Func("var")
    var[r] = hl.sum(d[k.x, r] * d[k.x, r]) / n
    out = hl.Func("out")
    out[c, r] = d[c, r] / hl.sqrt(var[r] + hl.f32(1e-5)) * g[c] + b[c]
    _bounded(X, (cols, rows))
    _bounded(g, (cols,))
    _bounded(b, (cols,))
    _output(out, (cols, rows))
    return out, [X, g, b]


def depthwise(ch: int, h: int, w: int):
    inp = hl.ImageParam(F32, 3, "inp")
    W = hl.ImageParam(F32, 3, "w")
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    P = hl.Func("P")
    P[x, y, c] = hl.BoundaryConditions.constant_exterior(inp, 0.0)[x - 1, y - 1, c]
    r = hl.RDom([hl.Range(0, 3), hl.Range(0, 3)])
    out = hl.Func("out")
    out[x, y, c] = 0.0
    out[x, y, c] += P[x + r.x, y + r.y, c] * W[r.x, r.y, c]
    _bounded(inp, (w, h, ch))
    _bounded(W, (3, 3, ch))
    _output(out, (w, h, ch))
    return out, [inp, W]


BUILDERS = {"sgemm": sgemm, "conv2d": conv2d, "blur": blur, "softmax": softmax,
            "layernorm": layernorm, "depthwise": depthwise}


def compile_kernel(script: str, dims, autoscheduler: str):
    """(Callable, seconds to autoschedule and compile) for one kernel at `dims`."""
    _plugin(autoscheduler)
    t0 = time.perf_counter()
    out, args = BUILDERS[script](*dims)
    target = hl.get_host_target()
    threads = int(os.environ.get("HL_NUM_THREADS", "2"))
    params = {"parallelism": str(threads)}
    pipeline = hl.Pipeline(out)
    pipeline.apply_autoscheduler(target, hl.AutoschedulerParams(autoscheduler, params))
    compiled = out.compile_to_callable(args, target)
    return compiled, time.perf_counter() - t0


def peer(script: str, size: str, which: str) -> harness.Peer:
    """The peer `which` (a key of AUTOSCHEDULERS) of a kernel script at one size."""
    from peer_halide import runner

    module = harness.kernel_module(script)
    dims = module.SIZES[size]
    arrays = module.inputs(size)
    want = module.numpy_peer(size)
    compiled, tune_s = compile_kernel(script, dims, AUTOSCHEDULERS[which])
    out = harness.aligned_empty(harness.output_shape(script, dims), np.float32)
    fn = runner(compiled, [np.ascontiguousarray(arrays[a]) for a in harness.PEER_ARGS[script]],
                out)
    info = {"tune_s": round(tune_s, 2), "build_s": round(tune_s, 2),
            "threads": os.environ.get("HL_NUM_THREADS"), "autoscheduler": AUTOSCHEDULERS[which]}
    return harness.Peer(want.kernel, fn, want.work, want.unit, info)
