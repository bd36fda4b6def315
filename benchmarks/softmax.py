"""softmax: row softmax of a 4096x4096 float32 matrix, tdsl against numpy.

    python benchmarks/softmax.py --peer tdsl-c
    python benchmarks/softmax.py --peer tdsl-llvm --search

The rate counts the bytes a perfect implementation moves: X read once and the
result written once (8 bytes per element).

Variants:

best   rfactor splits the max and the sum into V vector lanes (mx_rf[r, c_i] =
       max over c_o of X[r, V*c_o + c_i], then a V-element max; the same for the
       sum). exp is a polynomial written in the algorithm (Cody-Waite range
       reduction, degree-7 polynomial, 2^n built from the 7 bits of n with
       selects: about 2 ulp, inputs below -87 give 0), so it vectorizes: C's
       expf and LLVM's llvm.exp stay scalar without a vector math library. The
       output multiplies by 1/total.
plain  four stages max, exp, sum, divide with td.exp, all computed per row
       (the schedule of `tdsl demo`); its reductions run one element at a time.
libm   `best` with td.exp instead of the polynomial (not in run.py's table;
       measures what the vector exp is worth).
"""

from __future__ import annotations

import math
import sys

import harness
import numpy as np

import tdsl as td

SIZES = {"4096": (4096, 4096), "tiny": (9, 96)}
DEFAULT_SIZE = "4096"
VARIANTS = ("best", "plain")
EXTRA_VARIANTS = ("libm",)

LOG2E = 1.4426950408889634
LN2_HI, LN2_LO = 0.693359375, -2.12194440e-4  # ln 2 = LN2_HI + LN2_LO, LN2_HI exact in 9 bits


def exp_nonpositive(t):
    """exp(t) for -87 <= t <= 0 (float32), from vectorizable operations only.

    t = f - n ln2 with n = round(-t log2 e) in [0, 126] and |f| <= ln2 / 2;
    exp(f) by its degree-7 Taylor polynomial (error < 2e-8), 2^-n as the product
    of 2^-(2^b) over the set bits b of n."""
    n = td.cast(t * -LOG2E + 0.5, td.int32)
    nf = td.cast(n, td.float32)
    f = t + nf * LN2_HI + nf * LN2_LO
    coef = [1.0 / math.factorial(d) for d in range(8)]
    p = coef[-1]
    for c in reversed(coef[:-1]):
        p = c + f * p
    scale = None
    for b in range(7):
        bit = td.where((n & (1 << b)) != 0, np.float32(2.0 ** -(1 << b)), np.float32(1.0))
        scale = bit if scale is None else scale * bit
    return p * scale


def algorithm(rows: int, cols: int, vector_exp: bool = True):
    """Softmax with the polynomial exp (or td.exp). Returns out and the other stages."""
    r, c = td.dims("r c")
    X = td.input("X", {r: rows, c: cols}, td.float32)
    mx = td.compute("mx", {r: rows}, td.max(X[r, c], over=c))
    if vector_exp:
        # clamp in a stage of its own: folded into e, the NaN-aware max stops gcc
        # from if-converting (and so vectorizing) the whole polynomial
        t = td.compute("t", {r: rows, c: cols}, td.maximum(X[r, c] - mx[r], -87.0))
        e = td.compute("e", {r: rows, c: cols},
                       exp_nonpositive(t[r, c]) * td.where(X[r, c] - mx[r] >= -87.0,
                                                           np.float32(1), np.float32(0)))
        extra = [t]
    else:
        e = td.compute("e", {r: rows, c: cols}, td.exp(X[r, c] - mx[r]))
        extra = []
    total = td.compute("total", {r: rows}, td.sum(e[r, c], over=c))
    inv = td.compute("inv", {r: rows}, 1.0 / total[r])
    out = td.compute("out", {r: rows, c: cols}, e[r, c] * inv[r])
    return out, [mx, *extra, e, total, inv]


def plain_algorithm(rows: int, cols: int):
    r, c = td.dims("r c")
    X = td.input("X", {r: rows, c: cols}, td.float32)
    mx = td.compute("mx", {r: rows}, td.max(X[r, c], over=c))
    e = td.compute("e", {r: rows, c: cols}, td.exp(X[r, c] - mx[r]))
    total = td.compute("total", {r: rows}, td.sum(e[r, c], over=c))
    out = td.compute("out", {r: rows, c: cols}, e[r, c] / total[r])
    return out, [mx, e, total]


def rfactor_schedule(size, V: int, w: int | None, vector_exp: bool = True) -> td.Schedule:
    """Every stage computed per row r (threads over rows); the max and the sum
    rfactored into V partial results, vectorized over their lanes; the
    elementwise stages vectorized along c, split by w (None: the whole row is one
    vectorized loop)."""
    out, stages = algorithm(*size, vector_exp)
    s = td.schedule(out).rfactor("mx", "c", V).rfactor("total", "c", V).parallel(out, "r")
    for st in ("mx_rf", *(x.name for x in stages)):
        s = s.compute_at(st, out, "r")
    s = s.compute_at("total_rf", out, "r")
    for st in ("mx_rf", "total_rf"):
        s = s.reorder(st, "c_o c_i").vectorize(st, "c_i")
    for st in [x.name for x in stages if x.name in ("t", "e")] + ["out"]:
        s = s.vectorize(st, "c") if w is None else s.split(st, "c", w).vectorize(st, "c_i")
    return s


def plain_schedule(size, w: int = 16) -> td.Schedule:
    out, (mx, e, total) = plain_algorithm(*size)
    return (
        td.schedule(out)
        .compute_at(mx, out, "r")
        .compute_at(e, out, "r")
        .compute_at(total, out, "r")
        .split(e, "c", w)
        .vectorize(e, "c_i")
        .split(out, "c", w)
        .vectorize(out, "c_i")
        .parallel(out, "r")
    )


BEST = {
    ("c", "best"): dict(V=32, w=16),
    ("llvm", "best"): dict(V=16, w=256),
    ("c", "libm"): dict(V=32, w=16),
    ("llvm", "libm"): dict(V=16, w=256),
    ("c", "plain"): dict(w=8),
    ("llvm", "plain"): dict(w=8),
}


def _build_schedule(variant: str, dims, params) -> td.Schedule:
    if variant == "plain":
        return plain_schedule(dims, **params)
    return rfactor_schedule(dims, **params, vector_exp=variant == "best")


def candidates(target: str, variant: str, size: str):
    dims = SIZES[size]
    if variant == "plain":
        return [(f"plain w{w}", lambda a=w: plain_schedule(dims, a)) for w in (8, 16, 32, 64)]
    vexp = variant == "best"
    return [
        (f"{variant} V{V} w{w}", lambda a=V, b=w: rfactor_schedule(dims, a, b, vexp))
        for V in (16, 32, 64)
        for w in (None, 8, 16, 32, 64, 256)
    ]


def inputs(size: str) -> dict[str, np.ndarray]:
    return {"X": np.random.default_rng(0).standard_normal(SIZES[size], dtype=np.float32)}


def reference(X: np.ndarray) -> np.ndarray:
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _work(size: str) -> float:
    rows, cols = SIZES[size]
    return 8.0 * rows * cols


def kernel_name(size: str) -> str:
    rows, cols = SIZES[size]
    return f"softmax {rows}x{cols}"


def case(target: str, variant: str, size: str) -> harness.Case:
    dims = SIZES[size]
    arrays = inputs(size)
    params = BEST[(target, variant)]
    notes = {"best": "rfactor + polynomial exp", "libm": "rfactor, td.exp"}
    return harness.Case(
        kernel=kernel_name(size),
        schedule_fn=lambda: _build_schedule(variant, dims, params),
        inputs=arrays,
        reference=lambda: reference(arrays["X"]),
        work=_work(size),
        unit="GB/s",
        rtol=1e-5,
        atol=1e-8,
        note=notes.get(variant, ""),
    )


def numpy_peer(size: str) -> harness.Peer:
    X = inputs(size)["X"]
    return harness.Peer(kernel_name(size), lambda: reference(X), _work(size), "GB/s")


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
