"""The `tdsl` command line.

    tdsl demo                 build three scheduled kernels with the C backend,
                              check each against numpy and time both
    tdsl demo --target llvm   the same through the LLVM backend
    tdsl demo --quick         small sizes (a smoke test in a few seconds)

`main(argv)` returns the process exit status: 0 when every kernel matched
numpy, 1 when a result was wrong, 2 when tdsl rejected a definition,
schedule or argument.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

import numpy as np

import tdsl as td

from .api import TARGETS
from .emit import add_emit_c_parser

# ---------------------------------------------------------------- the kernels


@dataclass(frozen=True)
class DemoKernel:
    """One demo case: a schedule, its inputs and the numpy function that must agree with it."""

    name: str
    shape: str
    schedule: td.Schedule
    inputs: dict[str, np.ndarray]
    reference: Callable[..., np.ndarray]  # called with the same keyword arrays as the kernel
    rtol: float
    atol: float
    work: float  # floating-point operations or bytes moved per call
    unit: str  # "GFLOP/s" or "GB/s"


def matmul_reference(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return A @ B


def blur_reference(inp: np.ndarray) -> np.ndarray:
    third = np.float32(3)
    bx = (inp[:, :-2] + inp[:, 1:-1] + inp[:, 2:]) / third
    return (bx[:-2] + bx[1:-1] + bx[2:]) / third


def softmax_reference(X: np.ndarray) -> np.ndarray:
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def matmul(n: int, k: int, m: int, rng: np.random.Generator) -> DemoKernel:
    """C[i, j] = sum over k of A[i, k] * B[k, j].

    Column panels of 32 on threads; each panel of B packed into Bp (cache_read);
    each 8 x 32 tile of C accumulated in Cacc (cache_write), whose unrolled and
    vectorized loops keep it in registers over the whole k loop.
    """
    i, j, kk = td.dims("i j k")
    N = td.size("N")
    A = td.input("A", {i: N, kk: k}, td.float32)
    B = td.input("B", {kk: k, j: m}, td.float32)
    C = td.compute("C", {i: N, j: m}, td.sum(A[i, kk] * B[kk, j], over=kk))
    s = (
        td.schedule(C)
        .cache_write(C, "Cacc")
        .cache_read(B, ["Cacc"], "Bp")
        .tile(C, i=8, j=32)
        .reorder(C, "j_o i_o i_i j_i")
        .parallel(C, "j_o")
        .vectorize(C, "j_i")
        .compute_at("Bp", C, "j_o")
        .vectorize("Bp", j)
        .compute_at("Cacc", C, "i_o")
        .split("Cacc", j, 16, names=("j_u", "j_v"))
        .reorder("Cacc", "k i j_u j_v")
        .unroll("Cacc", i)
        .unroll("Cacc", "j_u")
        .vectorize("Cacc", "j_v")
    )
    inputs = {
        "A": rng.uniform(-1, 1, (n, k)).astype(np.float32),
        "B": rng.uniform(-1, 1, (k, m)).astype(np.float32),
    }
    # float32 sums of k terms in different orders: compare relative to the result's scale
    return DemoKernel(
        "matmul",
        f"{n}x{k}x{m}",
        s,
        inputs,
        matmul_reference,
        rtol=1e-4,
        atol=1e-5 * np.sqrt(k),
        work=2.0 * n * k * m,
        unit="GFLOP/s",
    )


def blur(h: int, w: int, rng: np.random.Generator) -> DemoKernel:
    """Two-stage 3x3 box blur on the valid region; bx computed per strip of 32 output rows."""
    x, y = td.dims("x y")
    H, W = td.size("H"), td.size("W")
    inp = td.input("inp", {y: H, x: W}, td.float32)
    bx = td.compute("bx", {y: H, x: W - 2}, (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) / 3)
    by = td.compute("by", {y: H - 2, x: W - 2}, (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3)
    s = (
        td.schedule(by)
        .split(by, y, 32)
        .split(by, x, 64)
        .vectorize(by, "x_i")
        .compute_at(bx, by, "y_o")
        .split(bx, x, 64)
        .vectorize(bx, "x_i")
        .parallel(by, "y_o")
    )
    inputs = {"inp": rng.random((h, w), dtype=np.float32)}
    moved = 4.0 * (h * w + (h - 2) * (w - 2))  # read the image once, write the result once
    return DemoKernel(
        "blur 3x3",
        f"{h}x{w}",
        s,
        inputs,
        blur_reference,
        rtol=1e-6,
        atol=1e-7,
        work=moved,
        unit="GB/s",
    )


def softmax(rows: int, cols: int, rng: np.random.Generator) -> DemoKernel:
    """Row softmax as four stages, all computed per row of the output; the max and
    the sum rfactored into 32 vector lanes each, exp and the division vectorized
    along the whole row."""
    r, c = td.dims("r c")
    R = td.size("R")
    X = td.input("X", {r: R, c: cols}, td.float32)
    mx = td.compute("mx", {r: R}, td.max(X[r, c], over=c))
    e = td.compute("e", {r: R, c: cols}, td.exp(X[r, c] - mx[r]))
    total = td.compute("total", {r: R}, td.sum(e[r, c], over=c))
    out = td.compute("out", {r: R, c: cols}, e[r, c] / total[r])
    s = td.schedule(out).rfactor(mx, c, 32).rfactor(total, c, 32)
    for stage in ("mx_rf", mx, e, "total_rf", total):
        s = s.compute_at(stage, out, r)
    for stage in ("mx_rf", "total_rf"):
        s = s.reorder(stage, "c_o c_i").vectorize(stage, "c_i")
    s = s.vectorize(e, c).vectorize(out, c).parallel(out, r)
    inputs = {"X": rng.standard_normal((rows, cols), dtype=np.float32)}
    return DemoKernel(
        "softmax",
        f"{rows}x{cols}",
        s,
        inputs,
        softmax_reference,
        rtol=1e-4,
        atol=1e-7,
        work=8.0 * rows * cols,
        unit="GB/s",
    )


def demo_kernels(quick: bool, seed: int = 0) -> list[DemoKernel]:
    """The demo cases; `quick` uses small, deliberately non-divisible sizes."""
    rng = np.random.default_rng(seed)
    if quick:
        return [matmul(130, 96, 200, rng), blur(131, 257, rng), softmax(100, 300, rng)]
    return [matmul(1024, 1024, 1024, rng), blur(2048, 2048, rng), softmax(4096, 1024, rng)]


# ---------------------------------------------------------------- running them


@dataclass(frozen=True)
class Result:
    kernel: DemoKernel
    build_seconds: float
    tdsl: td.Timing
    numpy: td.Timing
    mismatch: str | None  # numpy's assertion message when the result is wrong


def time_numpy(fn: Callable[[], object], *, runs: int, warmup: int = 2) -> td.Timing:
    """Median and minimum over `runs` calls after `warmup` calls, as `Kernel.benchmark` does."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return td.Timing(statistics.median(times), min(times), runs, tuple(times))


def run_kernel(k: DemoKernel, target: str, runs: int) -> Result:
    f = td.build(k.schedule, target=target)
    got = f(**k.inputs)
    want = k.reference(**k.inputs)
    mismatch = None
    try:
        np.testing.assert_allclose(
            got,
            want,
            rtol=k.rtol,
            atol=k.atol,
            err_msg=f"{k.name} {k.shape} ({target}) differs from numpy",
        )
    except AssertionError as e:
        mismatch = str(e)
    tdsl_time = f.benchmark(dict(k.inputs), runs=runs)
    numpy_time = time_numpy(lambda: k.reference(**k.inputs), runs=runs)
    return Result(k, f.build_seconds, tdsl_time, numpy_time, mismatch)


# ---------------------------------------------------------------- the table

COLUMNS = (
    "kernel",
    "shape",
    "build ms",
    "tdsl ms",
    "numpy ms",
    "tdsl rate",
    "numpy rate",
    "speedup",
    "check",
)
LEFT = {"kernel", "shape", "check"}


def _rate(k: DemoKernel, seconds: float) -> str:
    return f"{k.work / seconds / 1e9:.1f} {k.unit}"


def table_row(r: Result) -> tuple[str, ...]:
    k = r.kernel
    return (
        k.name,
        k.shape,
        f"{r.build_seconds * 1e3:.0f}",
        f"{r.tdsl.median * 1e3:.2f}",
        f"{r.numpy.median * 1e3:.2f}",
        _rate(k, r.tdsl.median),
        _rate(k, r.numpy.median),
        f"{r.numpy.median / r.tdsl.median:.2f}x",
        "ok" if r.mismatch is None else "WRONG",
    )


def format_table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(c), *(len(r[n]) for r in rows)) for n, c in enumerate(COLUMNS)]

    def line(cells):
        return " | ".join(
            c.ljust(w) if name in LEFT else c.rjust(w)
            for c, w, name in zip(cells, widths, COLUMNS, strict=True)
        ).rstrip()

    rule = "-+-".join("-" * w for w in widths)
    return "\n".join([line(COLUMNS), rule, *(line(r) for r in rows)])


# ---------------------------------------------------------------- commands


def demo(args: argparse.Namespace, out: TextIO) -> int:
    runs = args.runs or (3 if args.quick else 10)
    print(
        f"tdsl {td.__version__} demo: target {args.target}, numpy {np.__version__}, "
        f"{os.cpu_count()} cores; times are medians of {runs} runs",
        file=out,
    )
    pinned = [f"{v}={os.environ[v]}" for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
              if v in os.environ]
    if pinned:  # set on some machines; they choose numpy's matmul kernel
        print(f"(numpy's OpenBLAS runs with {', '.join(pinned)} from the environment)", file=out)
    results = []
    for k in demo_kernels(args.quick):
        if args.verbose:
            print(f"\n{k.name}:\n{k.schedule!r}\n{td.lower(k.schedule)}", file=out)
        results.append(run_kernel(k, args.target, runs))
    print(file=out)
    print(format_table([table_row(r) for r in results]), file=out)
    wrong = [r for r in results if r.mismatch is not None]
    for r in wrong:
        print(
            f"\nerror: {r.kernel.name}: the tdsl result does not match numpy\n{r.mismatch}",
            file=sys.stderr,
        )
    return 1 if wrong else 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tdsl", description="tdsl: a tensor DSL with schedules.")
    p.add_argument("--version", action="version", version=f"tdsl {td.__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    d = sub.add_parser(
        "demo",
        help="build, check and time three example kernels against numpy",
        description="Build matmul, a 3x3 blur and a row softmax with schedules, "
        "check each against numpy and print a timing table.",
    )
    d.add_argument("--target", choices=TARGETS, default="c", help="code generator (default: c)")
    d.add_argument("--quick", action="store_true", help="small sizes: a smoke test in seconds")
    d.add_argument(
        "--runs",
        type=_positive_int,
        default=None,
        metavar="N",
        help="timed calls per kernel (default: 10, or 3 with --quick)",
    )
    d.add_argument(
        "-v", "--verbose", action="store_true", help="print each schedule and its loop nest"
    )
    d.set_defaults(run=demo)
    add_emit_c_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args, sys.stdout)
    except td.TdslError as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
