"""Kernels nobody wrote a schedule for: td.autoschedule against the default schedule.

    python benchmarks/extra_kernels.py                 every kernel, both targets
    python benchmarks/extra_kernels.py --small         small sizes (a smoke test)

Each kernel is an algorithm as its textbook writes it, with numpy's answer. The
table gives the default (unscheduled) and the auto-scheduled time, their ratio,
and the time td.autoschedule took to choose.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

import tdsl as td


def depthwise(c=64, h=112, width=112):
    """Depthwise 3x3 convolution, zero padding 1: out[c, y, x] = sum P[c, y+ry, x+rx] w[c, ry, rx]."""
    ch, y, x, ry, rx = td.dims("c y x ry rx")
    inp = td.input("inp", {ch: c, y: h, x: width}, td.float32)
    wt = td.input("w", {ch: c, ry: 3, rx: 3}, td.float32)
    P = td.compute("P", {ch: c, y: h + 2, x: width + 2}, td.pad(inp, 0.0)[ch, y - 1, x - 1])
    out = td.compute("out", {ch: c, y: h, x: width},
                     td.sum(P[ch, y + ry, x + rx] * wt[ch, ry, rx], over=(ry, rx)))
    rng = np.random.default_rng(0)
    arrays = {"inp": rng.standard_normal((c, h, width), dtype=np.float32),
              "w": rng.standard_normal((c, 3, 3), dtype=np.float32)}

    def ref(inp, w):
        p = np.pad(inp, ((0, 0), (1, 1), (1, 1)))
        return sum(p[:, a:a + h, b:b + width] * w[:, a, b][:, None, None]
                   for a in range(3) for b in range(3))
    return out, arrays, ref


def layernorm(rows=4096, cols=1024, eps=1e-5):
    """Layer norm over each row: (x - mean) / sqrt(var + eps) * g + b."""
    r, c = td.dims("r c")
    X = td.input("X", {r: rows, c: cols}, td.float32)
    g = td.input("g", {c: cols}, td.float32)
    b = td.input("b", {c: cols}, td.float32)
    total = td.compute("total", {r: rows}, td.sum(X[r, c], over=c))
    mean = td.compute("mean", {r: rows}, total[r] / cols)
    d = td.compute("d", {r: rows, c: cols}, X[r, c] - mean[r])
    sq = td.compute("sq", {r: rows}, td.sum(d[r, c] * d[r, c], over=c))
    inv = td.compute("inv", {r: rows}, 1.0 / td.sqrt(sq[r] / cols + eps))
    out = td.compute("out", {r: rows, c: cols}, d[r, c] * inv[r] * g[c] + b[c])
    rng = np.random.default_rng(0)
    arrays = {"X": rng.standard_normal((rows, cols), dtype=np.float32),
              "g": rng.standard_normal(cols, dtype=np.float32),
              "b": rng.standard_normal(cols, dtype=np.float32)}

    def ref(X, g, b):
        mu = X.mean(axis=1, keepdims=True)
        var = ((X - mu) ** 2).mean(axis=1, keepdims=True)
        return (X - mu) / np.sqrt(var + np.float32(eps)) * g + b
    return out, arrays, ref


def two_mm(n=512):
    """A chain of two matrix products: D = (A @ B) @ C."""
    i, j, k, m = td.dims("i j k m")
    A = td.input("A", {i: n, k: n}, td.float32)
    B = td.input("B", {k: n, j: n}, td.float32)
    C = td.input("C", {j: n, m: n}, td.float32)
    T = td.compute("T", {i: n, j: n}, td.sum(A[i, k] * B[k, j], over=k))
    D = td.compute("D", {i: n, m: n}, td.sum(T[i, j] * C[j, m], over=j))
    rng = np.random.default_rng(0)
    arrays = {x: rng.uniform(-1, 1, (n, n)).astype(np.float32) for x in "ABC"}
    return D, arrays, lambda A, B, C: (A @ B) @ C


def heat3d(n=128):
    """One step of the 7-point heat stencil on the interior of an n^3 grid."""
    z, y, x = td.dims("z y x")
    U = td.input("U", {z: n, y: n, x: n}, td.float32)
    V = td.compute("V", {z: n - 2, y: n - 2, x: n - 2},
                   U[z + 1, y + 1, x + 1] + 0.125 * (
                       U[z, y + 1, x + 1] + U[z + 2, y + 1, x + 1] + U[z + 1, y, x + 1]
                       + U[z + 1, y + 2, x + 1] + U[z + 1, y + 1, x] + U[z + 1, y + 1, x + 2]
                       - 6.0 * U[z + 1, y + 1, x + 1]))
    arrays = {"U": np.random.default_rng(0).random((n, n, n), dtype=np.float32)}

    def ref(U):
        c = U[1:-1, 1:-1, 1:-1]
        return c + np.float32(0.125) * (U[:-2, 1:-1, 1:-1] + U[2:, 1:-1, 1:-1] + U[1:-1, :-2, 1:-1]
                                        + U[1:-1, 2:, 1:-1] + U[1:-1, 1:-1, :-2] + U[1:-1, 1:-1, 2:]
                                        - np.float32(6) * c)
    return V, arrays, ref


def covariance(n=1024, m=512):
    """Covariance of m variables over n samples: cov = D^T D / (n - 1), D centred."""
    s, i, j = td.dims("s i j")
    X = td.input("X", {s: n, i: m}, td.float32)
    total = td.compute("total", {i: m}, td.sum(X[s, i], over=s))
    D = td.compute("D", {s: n, i: m}, X[s, i] - total[i] / n)
    S = td.compute("S", {i: m, j: m}, td.sum(D[s, i] * D[s, j], over=s))
    cov = td.compute("cov", {i: m, j: m}, S[i, j] / (n - 1))
    arrays = {"X": np.random.default_rng(0).standard_normal((n, m), dtype=np.float32)}
    return cov, arrays, lambda X: np.cov(X, rowvar=False).astype(np.float32)


KERNELS = {"depthwise conv 3x3": depthwise, "layer norm": layernorm, "2mm chain": two_mm,
           "heat-3d": heat3d, "covariance": covariance}
SMALL = {"depthwise conv 3x3": dict(c=8, h=20, width=32), "layer norm": dict(rows=16, cols=256),
         "2mm chain": dict(n=64), "heat-3d": dict(n=24), "covariance": dict(n=96, m=64)}


def timed(f, arrays, seconds: float) -> float:
    f(**arrays)
    times = []
    start = time.perf_counter()
    while len(times) < 3 or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        f(**arrays)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true")
    p.add_argument("--targets", nargs="+", default=["c", "llvm"])
    p.add_argument("--seconds", type=float, default=1.0)
    args = p.parse_args(argv)
    print("| kernel | target | default ms | auto ms | speed-up | autoschedule s |")
    print("|---|---|--:|--:|--:|--:|")
    bad = 0
    for name, make in KERNELS.items():
        out, arrays, ref = make(**SMALL[name]) if args.small else make()
        want = ref(**arrays)
        t0 = time.perf_counter()
        s = td.autoschedule(out)
        choose = time.perf_counter() - t0
        for target in args.targets:
            fa = td.build(s, target=target)
            got = fa(**arrays)
            if not np.allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max())):
                print(f"| {name} | {target} | WRONG | | | |")
                bad += 1
                continue
            fd = td.build(td.schedule(out), target=target)
            td_ = timed(fd, arrays, args.seconds)
            ta = timed(fa, arrays, args.seconds)
            print(f"| {name} | {target} | {td_ * 1e3:.2f} | {ta * 1e3:.2f} | {td_ / ta:.1f}x | "
                  f"{choose:.2f} |", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
