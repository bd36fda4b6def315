"""A vectorized 5x5 box blur that reads its input through a boundary view, against the
same blur over an input padded beforehand (the view's cost is the ratio).

    python benchmarks/boundary.py                 2048x2048, both targets
    python benchmarks/boundary.py --size 512      another size
    python benchmarks/boundary.py --form stage    the sum as the stage's definition

Each line gives the median of the timed calls and the ratio padded / view (at least
1.0 means the view costs nothing). Both variants have the same schedule: rows in
parallel, x split by the vector width and vectorized.
"""

from __future__ import annotations

import argparse

import numpy as np

import tdsl as td

VIEWS = {"clamp": (td.clamp, "edge"), "pad": (lambda t: td.pad(t, 0.0), "constant")}


def blur(n: int, view: str | None, width: int, form: str = "inline") -> td.Schedule:
    """The blur of an n x n image; view None reads an input already padded by 2. The
    "inline" form divides the sum by 25 (a reduction inside an expression: unrolled,
    vectorized over x); the "stage" form is the sum as the stage's whole definition
    (its reduction loops inside the vectorized loop)."""
    y, x, ky, kx = td.dims("y x ky kx")
    if view is None:
        inp = td.input("inp", {y: n + 4, x: n + 4}, td.float32)
        body = inp[y + ky, x + kx]
    else:
        inp = td.input("inp", {y: n, x: n}, td.float32)
        body = VIEWS[view][0](inp)[y + ky - 2, x + kx - 2]
    total = td.sum(body, over={ky: 5, kx: 5})
    out = td.compute("out", {y: n, x: n}, total * (1 / 25) if form == "inline" else total)
    return td.schedule(out).split(out, "x", width).vectorize(out, "x_i").parallel(out, "y")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=2048)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--form", choices=("inline", "stage"), default="inline")
    args = ap.parse_args(argv)
    n = args.size
    img = np.random.default_rng(0).random((n, n), dtype=np.float32)
    for target in ("c", "llvm"):
        for view, (_, mode) in VIEWS.items():
            padded = np.pad(img, 2, mode=mode)
            f_view = td.build(blur(n, view, args.width, args.form), target=target)
            f_pad = td.build(blur(n, None, args.width, args.form), target=target)
            np.testing.assert_allclose(f_view(inp=img), f_pad(inp=padded), rtol=1e-5, atol=1e-5)
            t_view = f_view.benchmark(runs=args.runs, inp=img).median
            t_pad = f_pad.benchmark(runs=args.runs, inp=padded).median
            print(f"{target:5s} {view:6s} view {t_view * 1e3:8.3f} ms   pre-padded {t_pad * 1e3:8.3f} ms"
                  f"   padded/view {t_pad / t_view:5.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
