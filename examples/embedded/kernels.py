"""Example kernels for embedded targets, one function per kernel.

Each function returns a schedule; `tdsl emit-c kernels.py:blur --out build`
writes build/blur.c and build/blur.h from it. Sizes are small constants
where a microcontroller would know them at build time, symbolic (`td.size`)
where the caller chooses them at run time.

    python kernels.py --out build       # emit every kernel below
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


KERNELS = {f.__name__: f for f in (matmul, blur_root, blur, softmax, qmatmul, scale)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="build", help="output directory (default: build)")
    p.add_argument("names", nargs="*", metavar="KERNEL",
                   help=f"kernels to emit (default: all of {', '.join(KERNELS)})")
    args = p.parse_args()
    unknown = [n for n in args.names if n not in KERNELS]
    if unknown:
        p.error(f"no kernel {unknown[0]!r}; kernels are {', '.join(KERNELS)}")
    for name in args.names or KERNELS:
        c_path, h_path = td.emit_c(KERNELS[name](), name, args.out)
        print(f"{c_path} {h_path}")


if __name__ == "__main__":
    main()
