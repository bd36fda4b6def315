"""A 256-bin histogram of an 8-bit image: serial, with atomic updates on parallel rows,
and with private partial histograms per thread (rfactor of the update) merged after.

    python benchmarks/histogram.py                4096x4096, both targets
    python benchmarks/histogram.py --size 1024    another size

Three images: 8-bit uniform noise (256 bins: 16 cache lines that both threads update
all the time), an 8-bit dark image whose pixels fall in 4 bins (one cache line), and
16-bit uniform noise (65536 bins: threads seldom meet). Each line gives the median of the timed calls, the speed-up over the serial
kernel of the same target, and numpy's `bincount` as the yardstick. The parallel
variants run on 1 and on 2 threads (`td.threads`).
"""

from __future__ import annotations

import argparse

import numpy as np

import tdsl as td
from tdsl.cli import time_numpy


def histogram(n: int, how: str, bits: int = 8, factor: int = 2) -> td.Schedule:
    """The histogram of an n x n image of `bits`-bit pixels, scheduled `how`: "serial",
    "atomic" (rows in parallel, each bin updated atomically) or "rfactor" (`factor`
    partial histograms, one per share of the rows, computed in parallel, then merged)."""
    y, x, b = td.dims("y x b")
    img = td.input("img", {y: n, x: n}, td.uint8 if bits == 8 else td.uint16)
    hist = td.compute("hist", {b: 1 << bits}, td.cast(0 * b, td.int32))
    v = td.cast(img[y, x], td.int32)
    u = td.update(hist[v], hist[v] + 1, over={y: n, x: n})
    s = td.schedule(hist)
    if how == "atomic":
        return s.atomic(u).parallel(u, "y")
    if how == "rfactor":
        return s.rfactor(u, "y", factor).parallel("hist_rf.u0", "y_i")
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args(argv)
    n = args.size
    rng = np.random.default_rng(0)
    images = {"uniform 8-bit": rng.integers(0, 256, (n, n), dtype=np.uint8),
              "dark 8-bit": rng.integers(0, 4, (n, n), dtype=np.uint8),
              "uniform 16-bit": rng.integers(0, 1 << 16, (n, n), dtype=np.uint16)}
    for image, img in images.items():
        bits = img.dtype.itemsize * 8
        want = np.bincount(img.ravel(), minlength=1 << bits).astype(np.int32)
        t_np = time_numpy(lambda img=img, m=1 << bits: np.bincount(img.ravel(), minlength=m),
                          runs=args.runs).median
        print(f"{image} image {n}x{n}: numpy bincount {t_np * 1e3:8.3f} ms")
        for target in ("c", "llvm"):
            serial = td.build(histogram(n, "serial", bits), target=target)
            np.testing.assert_array_equal(serial(img=img), want)
            t_serial = serial.benchmark(runs=args.runs, img=img).median
            print(f"  {target:5s} serial            {t_serial * 1e3:8.3f} ms   "
                  f"numpy/this {t_np / t_serial:5.2f}")
            for how in ("atomic", "rfactor"):
                f = td.build(histogram(n, how, bits), target=target)
                for threads in (1, 2):
                    with td.threads(threads):
                        np.testing.assert_array_equal(f(img=img), want)
                        t = f.benchmark(runs=args.runs, img=img).median
                    print(f"  {target:5s} {how:8s} {threads} thread{'s' if threads > 1 else ' '} "
                          f"{t * 1e3:8.3f} ms   speed-up over serial {t_serial / t:5.2f}   "
                          f"numpy/this {t_np / t:5.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
