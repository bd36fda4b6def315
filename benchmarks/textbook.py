"""The kernels of examples/textbook.py with no schedule, against the same loops in C.

    python benchmarks/textbook.py [--kernels gemm cholesky ...] [--min-seconds 0.5]

Each kernel of `examples/textbook.py` is built at a size where a call takes
milliseconds, with no schedule at all (`td.schedule(outputs)`), on both backends,
and timed beside `NAIVE_C[name]`: its loops as a textbook writes them, built with
gcc -O3 -march=native (no OpenMP, no fast-math) and run on the same arrays. Every
result is checked against numpy first. The ratio is gcc's time / tdsl's: at least 1
means the unscheduled kernel is as fast as gcc makes the naive loops.
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import tempfile
from pathlib import Path

import harness
import numpy as np

import tdsl as td

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import textbook  # noqa: E402 (examples/ is not a package)

NAIVE_FLAGS = ["-O3", "-march=native", "-shared", "-fPIC", "-std=c11"]

# kernel -> (the size arguments of its textbook function, the order of the C arguments)
SIZES = {
    "gemm": (dict(n=512), ["A", "B", "C0"]),
    "correlation": (dict(n=2000, m=256), ["data"]),
    "forward_substitution": (dict(n=4096), ["L", "b"]),
    "cholesky": (dict(n=512), ["A"]),
    "mlp": (dict(batch=256, n_in=512, hidden=1024, n_out=10), ["X", "W1", "b1", "W2", "b2"]),
    "histogram": (dict(h=4096, w=4096), ["img"]),
    "mixed_precision_matmul": (dict(n=256), ["A", "B"]),
}

# The loops as written by hand; the sizes are macros (-DN=...), the output is the last
# argument.
NAIVE_C = {
    "gemm": """
void kernel(const float *A, const float *B, const float *C0, float *C) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < N; k++) s += A[i * N + k] * B[k * N + j];
            C[i * N + j] = 1.5f * s + 0.5f * C0[i * N + j];
        }
}""",
    "correlation": """
#include <math.h>
#include <stdlib.h>
void kernel(const double *data, double *corr) {
    double *mean = malloc(M * sizeof *mean), *cov = malloc(M * M * sizeof *cov);
    for (int j = 0; j < M; j++) {
        double s = 0;
        for (int q = 0; q < N; q++) s += data[q * M + j];
        mean[j] = s / N;
    }
    for (int j = 0; j < M; j++)
        for (int k = 0; k < M; k++) {
            double s = 0;
            for (int q = 0; q < N; q++) s += (data[q * M + j] - mean[j]) * (data[q * M + k] - mean[k]);
            cov[j * M + k] = s / (N - 1);
        }
    for (int j = 0; j < M; j++)
        for (int k = 0; k < M; k++)
            corr[j * M + k] = cov[j * M + k] / sqrt(cov[j * M + j] * cov[k * M + k]);
    free(mean);
    free(cov);
}""",
    "forward_substitution": """
void kernel(const double *L, const double *b, double *x) {
    for (int i = 0; i < N; i++) x[i] = b[i];
    for (int i = 0; i < N; i++) {
        double s = 0;
        for (int j = 0; j < i; j++) s += L[i * N + j] * x[j];
        x[i] = (x[i] - s) / L[i * N + i];
    }
}""",
    "cholesky": """
#include <math.h>
void kernel(const double *A, double *L) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) L[i * N + j] = i >= j ? A[i * N + j] : 0.0;
    for (int j = 0; j < N; j++)
        for (int i = j; i < N; i++) {
            double s = 0;
            for (int k = 0; k < j; k++) s += L[i * N + k] * L[j * N + k];
            if (i == j) L[j * N + j] = sqrt(L[j * N + j] - s);
            else L[i * N + j] = (L[i * N + j] - s) / L[j * N + j];
        }
}""",
    "mlp": """
#include <stdint.h>
#include <stdlib.h>
void kernel(const float *X, const float *W1, const float *b1, const float *W2,
            const float *b2, int64_t *label) {
    float *hid = malloc(BATCH * HIDDEN * sizeof *hid);
    for (int b = 0; b < BATCH; b++)
        for (int h = 0; h < HIDDEN; h++) {
            float s = 0;
            for (int n = 0; n < N_IN; n++) s += X[b * N_IN + n] * W1[n * HIDDEN + h];
            s += b1[h];
            hid[b * HIDDEN + h] = s > 0 ? s : 0;
        }
    for (int b = 0; b < BATCH; b++) {
        float best = 0;
        int64_t arg = 0;
        for (int o = 0; o < N_OUT; o++) {
            float s = 0;
            for (int h = 0; h < HIDDEN; h++) s += hid[b * HIDDEN + h] * W2[h * N_OUT + o];
            s += b2[o];
            if (o == 0 || s > best) { best = s; arg = o; }
        }
        label[b] = arg;
    }
    free(hid);
}""",
    "histogram": """
#include <stdint.h>
void kernel(const uint8_t *img, int32_t *hist) {
    for (int v = 0; v < 256; v++) hist[v] = 0;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) hist[img[y * W + x]] += 1;
}""",
    "mixed_precision_matmul": """
void kernel(const _Float16 *A, const _Float16 *B, _Float16 *C) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < N; k++) s += (float)A[i * N + k] * (float)B[k * N + j];
            C[i * N + j] = (_Float16)s;
        }
}""",
}


def naive(name: str, sizes: dict[str, int]):
    """NAIVE_C[name] built with gcc, its sizes as upper-case macros."""
    with tempfile.TemporaryDirectory() as d:
        src, lib = Path(d) / f"{name}.c", Path(d) / f"{name}.so"
        src.write_text(NAIVE_C[name])
        defines = [f"-D{k.upper()}={v}" for k, v in sizes.items()]
        subprocess.run(["gcc", *NAIVE_FLAGS, *defines, str(src), "-o", str(lib), "-lm"],
                       check=True, capture_output=True, text=True)
        fn = ctypes.CDLL(str(lib)).kernel
    fn.restype = None
    return fn


def check(got: np.ndarray, want: np.ndarray, what: str) -> None:
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        tol = {2: 2e-2, 4: 1e-3}.get(got.dtype.itemsize, 1e-7)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                                   atol=tol, err_msg=what)


def measure(name: str, min_seconds: float) -> dict[str, float]:
    sizes, order = SIZES[name]
    sched, arrays, want = textbook.KERNELS[name](**sizes)
    plain = td.schedule(list(sched.outputs))
    out: dict[str, float] = {}
    fn = naive(name, sizes)
    args = [np.ascontiguousarray(arrays[a]) for a in order]
    result = np.empty(want.shape, want.dtype)
    keep = (*args, result)
    fn.argtypes = [ctypes.c_void_p] * len(keep)
    call = lambda: fn(*(a.ctypes.data for a in keep))  # noqa: E731
    call()
    check(result, want, f"{name}: naive C")
    out["gcc"] = harness.time_calls(call, runs=5, warmup=1, min_seconds=min_seconds).median
    for target in ("c", "llvm"):
        f = td.build(plain, target=target)
        check(f(**arrays), want, f"{name}: tdsl {target}")
        with td.threads(1):
            out[target] = f.benchmark(**arrays, min_seconds=min_seconds).median
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--min-seconds", type=float, default=0.5)
    args = parser.parse_args()
    print("| kernel | naive gcc -O3 ms | tdsl C ms (ratio) | tdsl LLVM ms (ratio) |")
    print("|---|--:|--:|--:|")
    for name in args.kernels:
        t = measure(name, args.min_seconds)
        cells = [f"{t[k] * 1e3:.2f} ({t['gcc'] / t[k]:.2f})" for k in ("c", "llvm")]
        print(f"| {name} | {t['gcc'] * 1e3:.2f} | {cells[0]} | {cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
