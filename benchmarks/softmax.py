"""softmax: row softmax of a 4096x4096 float32 matrix, tdsl against numpy.

    python benchmarks/softmax.py --peer tdsl-c
    python benchmarks/softmax.py --peer tdsl-llvm --search

The rate counts the bytes a perfect implementation moves: X read once and the
result written once (8 bytes per element).

Variants:

best   rfactor splits the max and the sum into V vector lanes (mx_rf[r, c_i] =
       max over c_o of X[r, V*c_o + c_i], then a V-element max; the same for the
       sum); td.exp vectorizes (both backends emit tdsl's float32 exp, made of
       vector operations only); the output multiplies by 1/total.
plain  four stages max, exp, sum, divide, all computed per row (no rfactor):
       its reductions run one element at a time.
"""

from __future__ import annotations

import sys

import harness
import numpy as np

import tdsl as td

SIZES = {"4096": (4096, 4096), "tiny": (9, 96)}
DEFAULT_SIZE = "4096"
VARIANTS = ("best", "plain", "auto", "tuned", "default")

def algorithm(rows: int, cols: int):
    """Softmax computed as out = e * (1 / total). Returns out and the other stages."""
    r, c = td.dims("r c")
    X = td.input("X", {r: rows, c: cols}, td.float32)
    mx = td.compute("mx", {r: rows}, td.max(X[r, c], over=c))
    e = td.compute("e", {r: rows, c: cols}, td.exp(X[r, c] - mx[r]))
    total = td.compute("total", {r: rows}, td.sum(e[r, c], over=c))
    inv = td.compute("inv", {r: rows}, 1.0 / total[r])
    out = td.compute("out", {r: rows, c: cols}, e[r, c] * inv[r])
    return out, [mx, e, total, inv]


def plain_algorithm(rows: int, cols: int):
    r, c = td.dims("r c")
    X = td.input("X", {r: rows, c: cols}, td.float32)
    mx = td.compute("mx", {r: rows}, td.max(X[r, c], over=c))
    e = td.compute("e", {r: rows, c: cols}, td.exp(X[r, c] - mx[r]))
    total = td.compute("total", {r: rows}, td.sum(e[r, c], over=c))
    out = td.compute("out", {r: rows, c: cols}, e[r, c] / total[r])
    return out, [mx, e, total]


def user_algorithm(rows: int, cols: int):
    """Softmax as a user writes it (e / total): what the auto and tuned variants schedule."""
    return plain_algorithm(rows, cols)[0]


def rfactor_schedule(size, V: int, w: int | None, nt: bool = False,
                     V2: int | None = None) -> td.Schedule:
    """Every stage computed per row r (threads over rows); the max and the sum
    rfactored into V partial results, vectorized over their lanes; the
    elementwise stages vectorized along c, split by w (None: the whole row is one
    vectorized loop); with nt, the output written by streaming stores; with V2,
    the V partial results combined in V2 vector lanes first (`harness.partials_in_lanes`)."""
    out, stages = algorithm(*size)
    s = td.schedule(out).rfactor("mx", "c", V).rfactor("total", "c", V).parallel(out, "r")
    for st in ("mx_rf", *(x.name for x in stages)):
        s = s.compute_at(st, out, "r")
    s = s.compute_at("total_rf", out, "r")
    for st in ("mx_rf", "total_rf"):
        s = s.reorder(st, "c_o c_i").vectorize(st, "c_i")
    if V2 is not None:
        s = harness.partials_in_lanes(s, out, ("mx", "total"), V2)
    for st in ("e", "out"):
        s = s.vectorize(st, "c") if w is None else s.split(st, "c", w).vectorize(st, "c_i")
    return s.store_nontemporal(out) if nt else s


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
    # AVX-512 (Intel Xeon, 2 cores), interleaved in one process (ms): C 6.33 against
    # 9.03 for V32 w64 unstreamed; LLVM 6.61 against 7.91 for V64 w64 unstreamed; then
    # with the 64 partials combined in 8 lanes first, C 6.22 against 6.63, LLVM 6.60
    # against 7.26
    ("c", "best"): dict(V=64, w=32, nt=True, V2=8),
    ("llvm", "best"): dict(V=64, w=None, nt=True, V2=8),
    # AVX2, interleaved in one process (ms): C 12.1 against 13.1 for V32 w64, LLVM
    # 10.0 against 10.5 for V64 w64; then with the output streamed, C 10.7 against
    # 12.2, LLVM 8.9 against 10.3 (w None, unstreamed)
    ("c", "best", "avx2"): dict(V=64, w=32, nt=True),
    ("llvm", "best", "avx2"): dict(V=64, w=32, nt=True),
    ("c", "plain"): dict(w=8),
    ("llvm", "plain"): dict(w=8),
}


def _build_schedule(variant: str, dims, params) -> td.Schedule:
    if variant == "plain":
        return plain_schedule(dims, **params)
    return rfactor_schedule(dims, **params)


def candidates(target: str, variant: str, size: str):
    dims = SIZES[size]
    if variant == "plain":
        return [(f"plain w{w}", lambda a=w: plain_schedule(dims, a)) for w in (8, 16, 32, 64)]
    return [
        (f"{variant} V{V} w{w}{' nt' if nt else ''}",
         lambda a=V, b=w, c=nt: rfactor_schedule(dims, a, b, c))
        for V in (16, 32, 64)
        for w in (None, 8, 16, 32, 64, 256)
        for nt in (False, True)
    ] + [(f"{variant} V64 w{w} nt, 8 lanes", lambda b=w: rfactor_schedule(dims, 64, b, True, 8))
         for w in (None, 16, 32)]


@harness.aligned_inputs
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
    params = harness.best_params(BEST, target, variant, size)
    return harness.Case(
        kernel=kernel_name(size),
        schedule_fn=lambda: _build_schedule(variant, dims, params),
        inputs=arrays,
        reference=lambda: reference(arrays["X"]),
        work=_work(size),
        unit="GB/s",
        rtol=1e-5,
        atol=1e-8,
        note="rfactor, vectorized exp" if variant == "best" else "",
    )


def numpy_peer(size: str) -> harness.Peer:
    X = inputs(size)["X"]
    return harness.Peer(kernel_name(size), lambda: reference(X), _work(size), "GB/s")


# ---------------------------------------------------------------- naive C

# The loop nest of the kernel with no schedule, written by hand: each stage over the
# whole array in turn (max, exp, sum, divide), with libm's expf; the yardstick of the
# unscheduled variants (harness.naive_peer builds it with gcc -O3 -march=native).
NAIVE_C = """
#include <math.h>
#include <stdlib.h>

void kernel(const float *X, float *out) {
    float *mx = malloc(sizeof(float) * R), *total = malloc(sizeof(float) * R);
    float *e = malloc(sizeof(float) * R * C);
    for (long r = 0; r < R; r++) {
        mx[r] = -INFINITY;
        for (long c = 0; c < C; c++) {
            mx[r] = X[r * C + c] > mx[r] ? X[r * C + c] : mx[r];
        }
    }
    for (long r = 0; r < R; r++) {
        for (long c = 0; c < C; c++) {
            e[r * C + c] = expf(X[r * C + c] - mx[r]);
        }
    }
    for (long r = 0; r < R; r++) {
        total[r] = 0.0f;
        for (long c = 0; c < C; c++) {
            total[r] += e[r * C + c];
        }
    }
    for (long r = 0; r < R; r++) {
        for (long c = 0; c < C; c++) {
            out[r * C + c] = e[r * C + c] / total[r];
        }
    }
    free(e);
    free(total);
    free(mx);
}
"""


def naive_defines(dims) -> dict[str, int]:
    rows, cols = dims
    return {"R": rows, "C": cols}


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
