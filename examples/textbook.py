"""Textbook kernels, written as their definitions read: reductions inside expressions.

Run `python examples/textbook.py` to build each kernel on the C and LLVM backends,
check it against numpy, and print a line per kernel.
"""

from __future__ import annotations

import numpy as np

import tdsl as td

rng = np.random.default_rng(0)


def gemm(n=64, alpha=1.5, beta=0.5):
    """C = alpha * A @ B + beta * C0, tiled and vectorized."""
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: n, k: n}, td.float32)
    B = td.input("B", {k: n, j: n}, td.float32)
    C0 = td.input("C0", {i: n, j: n}, td.float32)
    C = td.compute("C", {i: n, j: n}, alpha * td.sum(A[i, k] * B[k, j], over=k) + beta * C0[i, j])
    s = td.schedule(C).split(C, "j", 16).vectorize(C, "j_i").parallel(C, "i")
    a, b, c0 = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(3))
    return s, dict(A=a, B=b, C0=c0), np.float32(alpha) * (a @ b) + np.float32(beta) * c0


def correlation(n=200, m=12):
    """The correlation matrix of m variables observed n times (PolyBench's correlation)."""
    q, j, k = td.dims("q j k")
    data = td.input("data", {q: n, j: m}, td.float64)
    mean = td.compute("mean", {j: m}, td.sum(data[q, j], over=q) / n)
    cov = td.compute("cov", {j: m, k: m},
                     td.sum((data[q, j] - mean[j]) * (data[q, k] - mean[k]), over=q) / (n - 1))
    corr = td.compute("corr", {j: m, k: m}, cov[j, k] / td.sqrt(cov[j, j] * cov[k, k]))
    d = rng.standard_normal((n, m))
    return td.schedule(corr), dict(data=d), np.corrcoef(d, rowvar=False)


def forward_substitution(n=48):
    """Solve L x = b for lower-triangular L, one row after another."""
    i, j = td.dims("i j")
    L = td.input("L", {i: n, j: n}, td.float64)
    b = td.input("b", {i: n}, td.float64)
    x = td.compute("x", {i: n}, b[i])
    td.update(x[i], (x[i] - td.sum(L[i, j] * x[j], over={j: (0, i)})) / L[i, i], over={i: n})
    lv = np.tril(rng.standard_normal((n, n))) + n * np.eye(n)
    bv = rng.standard_normal(n)
    return td.schedule(x), dict(L=lv, b=bv), np.linalg.solve(lv, bv)


def cholesky(n=32):
    """A = L L^T, column by column (the Cholesky-Banachiewicz order, transposed)."""
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: n, j: n}, td.float64)
    L = td.compute("L", {i: n, j: n}, td.where(i >= j, A[i, j], 0.0))
    diag = td.sqrt(L[j, j] - td.sum(L[j, k] * L[j, k], over={k: (0, j)}))
    below = (L[i, j] - td.sum(L[i, k] * L[j, k], over={k: (0, j)})) / L[j, j]
    td.update(L[i, j], td.where(i == j, diag, below), over={j: n, i: (j, n)})
    m = rng.standard_normal((n, n))
    a = m @ m.T + n * np.eye(n)
    return td.schedule(L), dict(A=a), np.linalg.cholesky(a)


def mlp(batch=32, n_in=64, hidden=128, n_out=10):
    """Two dense layers, bias and ReLU, then the predicted class of each row."""
    b, n, h, o = td.dims("b n h o")
    X = td.input("X", {b: batch, n: n_in}, td.float32)
    W1 = td.input("W1", {n: n_in, h: hidden}, td.float32)
    b1 = td.input("b1", {h: hidden}, td.float32)
    W2 = td.input("W2", {h: hidden, o: n_out}, td.float32)
    b2 = td.input("b2", {o: n_out}, td.float32)
    hid = td.compute("hid", {b: batch, h: hidden},
                     td.maximum(td.sum(X[b, n] * W1[n, h], over=n) + b1[h], 0.0))
    logits = td.compute("logits", {b: batch, o: n_out}, td.sum(hid[b, h] * W2[h, o], over=h) + b2[o])
    label = td.compute("label", {b: batch}, td.argmax(logits[b, o], over=o))
    s = td.schedule(label).split(hid, "h", 16).vectorize(hid, "h_i").parallel(hid, "b")
    arrays = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in
              dict(X=(batch, n_in), W1=(n_in, hidden), b1=(hidden,), W2=(hidden, n_out),
                   b2=(n_out,)).items()}
    h_np = np.maximum(arrays["X"] @ arrays["W1"] + arrays["b1"], 0)
    return s, arrays, np.argmax(h_np @ arrays["W2"] + arrays["b2"], axis=1)


def histogram(h=240, w=320):
    """hist[img[y, x]] += 1: rows counted in parallel, each thread into a partial
    histogram of its own (rfactor of the update), merged after."""
    y, x, v = td.dims("y x v")
    img = td.input("img", {y: h, x: w}, td.uint8)
    hist = td.compute("hist", {v: 256}, td.cast(0 * v, td.int32))
    pixel = td.cast(img[y, x], td.int32)
    count = td.update(hist[pixel], hist[pixel] + 1, over={y: h, x: w})
    s = td.schedule(hist).rfactor(count, "y", 2).parallel("hist_rf.u0", "y_i")
    image = rng.integers(0, 256, (h, w), dtype=np.uint8)
    return s, dict(img=image), np.bincount(image.ravel(), minlength=256).astype(np.int32)


def mixed_precision_matmul(n=48):
    """float16 operands, a float32 sum, a float16 result: each product and the sum in
    float32, one rounding at the end."""
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: n, k: n}, td.float16)
    B = td.input("B", {k: n, j: n}, td.float16)
    C = td.compute("C", {i: n, j: n},
                   td.cast(td.sum(td.cast(A[i, k], td.float32) * B[k, j], over=k), td.float16))
    a, b = (rng.standard_normal((n, n)).astype(np.float16) for _ in range(2))
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    s = td.schedule(C).split(C, "j", 16).vectorize(C, "j_i").parallel(C, "i")
    return s, dict(A=a, B=b), want


KERNELS = {"gemm": gemm, "correlation": correlation, "forward_substitution": forward_substitution,
           "cholesky": cholesky, "mlp": mlp, "histogram": histogram,
           "mixed_precision_matmul": mixed_precision_matmul}


def check(name: str, target: str) -> str:
    """Build kernel `name` on `target`, compare with numpy; a line saying how it went."""
    sched, arrays, want = KERNELS[name]()
    got = td.build(sched, target=target)(**arrays)
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
    else:
        tol = {2: 2e-3, 4: 1e-4}.get(got.dtype.itemsize, 1e-9)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                                   atol=tol)
    return f"{name:22s} {target:5s} matches numpy"


def main() -> None:
    for name in KERNELS:
        for target in ("c", "llvm"):
            print(check(name, target))


if __name__ == "__main__":
    main()
