"""numpy's BLAS and tdsl's parallel kernels in one process, as a notebook has them.

    python benchmarks/notebook_mix.py
    python benchmarks/notebook_mix.py --targets c --rounds 5

A notebook calls numpy and tdsl side by side: a matrix product (numpy's BLAS, on its
own threads, which spin for a while after each call before they sleep) then a tdsl
kernel, and so on. This measures, in one process, with the default thread counts of
both (all cores):

    alone       the tdsl kernel's median time, with no BLAS call since its warm-up
    after @     the kernel's median time, each call right after an `a @ b`
    @ alone     the product's median time alone
    @ after     the product's median time, each call right after the kernel

and the slowdowns (after / alone). Neither side should slow the other beyond the work
it adds: slowdowns near 1 (libgomp's spinning threads made the kernel 10-100x slower
after a product on a loaded 2-core machine). Kernels: layernorm 4096x1024 and
jacobi-2d 1300^2 x 20 steps (20 parallel loops per call), their `best` schedules.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import jacobi2d  # noqa: E402
import layernorm  # noqa: E402

import tdsl as td  # noqa: E402

KERNELS = {"layernorm": (layernorm, "4096"), "jacobi-2d": (jacobi2d, "1300")}


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", nargs="+", default=["c", "llvm"])
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--matrix", type=int, default=512, help="size of the BLAS product")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    m = rng.standard_normal((args.matrix, args.matrix)).astype(np.float32)
    print(f"{'kernel':10s} {'target':6s} {'alone ms':>9s} {'after @ ms':>10s} {'slowdown':>8s} "
          f"{'@ alone ms':>10s} {'@ after ms':>10s} {'slowdown':>8s}")
    for name, (module, size) in KERNELS.items():
        for target in args.targets:
            case = module.case(target, "best", size)
            f = td.build(case.schedule_fn(), target=target)
            np.testing.assert_allclose(f(**case.inputs), case.reference(),
                                       rtol=case.rtol, atol=case.atol)

            def kernel(f=f, inputs=case.inputs):
                f(**inputs)

            def product():
                m @ m

            for _ in range(3):
                kernel()
                product()
            time.sleep(0.5)  # the BLAS threads go to sleep
            alone = statistics.median(timed(kernel) for _ in range(args.calls))
            blas = statistics.median(timed(product) for _ in range(args.calls))
            after, blas_after = [], []
            for _ in range(args.calls):
                product()
                after.append(timed(kernel))
                blas_after.append(timed(product))
            a, b = statistics.median(after), statistics.median(blas_after)
            print(f"{name:10s} {target:6s} {alone * 1e3:9.3f} {a * 1e3:10.3f} {a / alone:7.2f}x "
                  f"{blas * 1e3:10.3f} {b * 1e3:10.3f} {b / blas:7.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
