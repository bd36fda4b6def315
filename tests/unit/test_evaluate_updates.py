"""`td.update` in the numpy reference evaluator, against hand-written Python loops.

Every pipeline is built by a `*_pipeline` function (reusable elsewhere) and
evaluated two ways that must agree bit for bit: the default, which computes
the rows of an update at once where that is exact, and every point visited one
at a time (see `_by_rows` in tdsl/compute/evaluate.py).
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import tdsl as td
from tdsl.compute import evaluate as ev
from tdsl.compute.evaluate import evaluate
from tdsl.errors import DefinitionError

rng = np.random.default_rng(7)

# whether rows of an update are computed at once where that is exact
MODES = {"rows": True, "points": False}


def evaluate_in(mode: str, outputs, **arrays):
    saved = ev._ROWS
    ev._ROWS = MODES[mode]
    try:
        return evaluate(outputs, **arrays)
    finally:
        ev._ROWS = saved


def assert_same(got, want):
    """Equal values (NaN equal to NaN), and the same dtype and shape."""
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


def check(outputs, want, **arrays):
    """Evaluate in every mode; each must give `want` (an array, or a tuple for several outputs)."""
    for mode in MODES:
        got = evaluate_in(mode, outputs, **arrays)
        if isinstance(want, tuple):
            assert isinstance(got, tuple) and len(got) == len(want)
            for g, w in zip(got, want, strict=True):
                assert_same(g, w)
        else:
            assert_same(got, want)


def error_in(mode: str, outputs, **arrays) -> str:
    with pytest.raises(DefinitionError) as e:
        evaluate_in(mode, outputs, **arrays)
    return str(e.value)


# ---------------------------------------------------------------- scans


def prefix_sum_pipeline(dtype):
    """y[0] = x[0]; y[r] = y[r - 1] + x[r] for r in 1..N-1."""
    r = td.dim("r")
    N = td.size("N")
    x = td.input("x", {r: N}, dtype)
    y = td.compute("y", {r: N}, x[r])
    td.update(y[r], y[r - 1] + x[r], over={r: (1, N)})
    return y


def prefix_sum_reference(x):
    y = x.copy()
    for r in range(1, len(x)):
        y[r] = y[r - 1] + x[r]
    return y


@pytest.mark.parametrize("dtype", [td.int32, td.float64])
@pytest.mark.parametrize("n", [1, 2, 5, 37])
def test_prefix_sum(dtype, n):
    y = prefix_sum_pipeline(dtype)
    x = rng.integers(-50, 50, n).astype(dtype.np) if dtype.is_int else rng.standard_normal(n)
    check(y, prefix_sum_reference(x), x=x)


def test_prefix_sum_int32_wraps_like_numpy():
    y = prefix_sum_pipeline(td.int32)
    x = np.full(6, 2**30, np.int32)
    with np.errstate(over="ignore"):
        want = prefix_sum_reference(x)
    check(y, want, x=x)


def test_long_prefix_sums_are_fast():
    n = 100_000
    for dtype in (td.int32, td.float64):
        y = prefix_sum_pipeline(dtype)
        x = rng.integers(-9, 9, n).astype(dtype.np) if dtype.is_int else rng.standard_normal(n)
        start = time.perf_counter()
        got = evaluate(y, x=x)
        took = time.perf_counter() - start
        assert_same(got, prefix_sum_reference(x))
        assert took < 10, f"a {n}-point prefix sum took {took:.1f}s"


def two_updates_pipeline():
    """y = x; y[r] = 2 y[r] + 1 everywhere; then a prefix sum of that; z = 10 y."""
    r = td.dim("r")
    N = td.size("N")
    x = td.input("x", {r: N}, td.int32)
    y = td.compute("y", {r: N}, x[r])
    td.update(y[r], y[r] * 2 + 1, over={r: N})
    td.update(y[r], y[r - 1] + y[r], over={r: (1, N)})
    z = td.compute("z", {r: N}, y[r] * 10)
    return y, z


def test_two_updates_apply_in_creation_order_and_consumers_see_the_result():
    y, z = two_updates_pipeline()
    x = rng.integers(-20, 20, 9).astype(np.int32)
    want = np.cumsum(x * 2 + 1).astype(np.int32)
    check((y, z), (want, want * 10), x=x)
    check(z, want * 10, x=x)  # y as an intermediate, not an output


def test_an_update_may_read_a_stage_defined_after_its_target():
    r = td.dim("r")
    x = td.input("x", {r: 6}, td.int32)
    s = td.compute("s", {r: 6}, x[r])
    t = td.compute("t", {r: 6}, x[r] * 3)
    td.update(s[r], s[r] + t[r], over={r: 6})
    x0 = np.arange(6, dtype=np.int32)
    check(s, x0 * 4, x=x0)


def test_an_update_reads_the_updated_values_of_another_stage():
    r = td.dim("r")
    x = td.input("x", {r: 7}, td.int32)
    y = td.compute("y", {r: 7}, x[r])
    td.update(y[r], y[r - 1] + y[r], over={r: (1, 7)})
    w = td.compute("w", {r: 7}, td.cast(0, td.int32))
    td.update(w[r], y[6 - r] - w[r - 1], over={r: (1, 7)})
    x0 = np.arange(1, 8, dtype=np.int32)
    ys = np.cumsum(x0).astype(np.int32)
    ws = np.zeros(7, np.int32)
    for r in range(1, 7):
        ws[r] = ys[6 - r] - ws[r - 1]
    check((y, w), (ys, ws), x=x0)


def test_reductions_still_work_around_updates():
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: 4, k: 5}, td.int32)
    B = td.input("B", {k: 5, j: 3}, td.int32)
    C = td.compute("C", {i: 4, j: 3}, td.sum(A[i, k] * B[k, j], over=k))
    td.update(C[i, j], C[i, j] + C[i, j - 1], over={i: 4, j: (1, 3)})
    row = td.compute("row", {i: 4}, td.sum(C[i, j], over=j))
    a = rng.integers(-5, 5, (4, 5)).astype(np.int32)
    b = rng.integers(-5, 5, (5, 3)).astype(np.int32)
    c = np.cumsum(a @ b, axis=1).astype(np.int32)
    check((C, row), (c, c.sum(axis=1).astype(np.int32)), A=a, B=b)


def test_values_are_cast_to_the_stage_dtype_like_numpy_assignment():
    r = td.dim("r")
    x = td.input("x", {r: 5}, td.int32)
    y = td.compute("y", {r: 5}, td.cast(x[r], td.int8))
    td.update(y[r], x[r] * 100, over={r: 5})
    f = td.compute("f", {r: 5}, td.cast(x[r], td.float32))
    td.update(f[r], td.cast(x[r], td.float64) / 3, over={r: 5})
    x0 = np.array([1, 2, 3, -4, 127], np.int32)
    check((y, f), ((x0 * 100).astype(np.int8), (x0.astype(np.float64) / 3).astype(np.float32)), x=x0)


# ---------------------------------------------------------------- writes


def last_write_pipeline():
    """y = 0; y[idx[i]] = v[i] for i in order: the last i writing an element wins."""
    i, b = td.dims("i b")
    idx = td.input("idx", {i: 12}, td.int32)
    v = td.input("v", {i: 12}, td.int32)
    y = td.compute("y", {b: 5}, td.cast(0, td.int32))
    td.update(y[idx[i]], v[i], over={i: 12})
    return y


def test_repeated_target_elements_keep_the_last_write():
    y = last_write_pipeline()
    idx = np.array([0, 3, 3, 1, 0, 3, 2, 2, 4, 4, 3, 0], np.int32)
    v = np.arange(12, dtype=np.int32) + 1
    want = np.zeros(5, np.int32)
    for n in range(12):
        want[idx[n]] = v[n]
    check(y, want, idx=idx, v=v)


def test_target_index_out_of_range_is_an_argument_error_in_every_mode():
    # the first bad point in order is named, rows computed at once or not
    y = last_write_pipeline()
    idx = np.array([0, 3, 3, 1, 0, 3, 2, 2, 9, -4, 3, 0], np.int32)
    for mode in MODES:
        with pytest.raises(td.ArgumentError, match="writes y at a data-dependent index 9 .* "
                                                   "valid indices are 0..4"):
            evaluate_in(mode, y, idx=idx, v=np.arange(12, dtype=np.int32))


def histogram_pipeline():
    """h[x[i]] += 1 (data-dependent indices)."""
    i, b = td.dims("i b")
    N = td.size("N")
    x = td.input("x", {i: N}, td.int32)
    h = td.compute("h", {b: 8}, td.cast(0, td.int32))
    td.update(h[x[i]], h[x[i]] + 1, over={i: N})
    return h


def test_histogram():
    h = histogram_pipeline()
    x = rng.integers(0, 8, 200).astype(np.int32)
    check(h, np.bincount(x, minlength=8).astype(np.int32), x=x)


def pointer_jumping_pipeline():
    """p = nxt; twice, p[r] = p[p[r]] for r in order: reads the target at indices
    that are themselves read from the target."""
    t, r = td.dims("t r")
    N = td.size("N")
    nxt = td.input("nxt", {r: N}, td.int32)
    p = td.compute("p", {r: N}, nxt[r])
    td.update(p[r], p[p[r]], over={t: 2, r: N})
    return p


def test_pointer_jumping_reads_through_the_target():
    p = pointer_jumping_pipeline()
    for seed in range(5):
        g = np.random.default_rng(seed)
        x = g.permutation(23).astype(np.int32)
        want = x.copy()
        for _ in range(2):
            for rr in range(23):
                want[rr] = want[want[rr]]
        check(p, want, nxt=x)


# ---------------------------------------------------------------- linear algebra


def accumulate_matmul_pipeline(order: str):
    """C = 0; C[i, j] += A[i, k] B[k, j] over {i, j, k} (or {k, i, j})."""
    i, j, k = td.dims("i j k")
    N, M, K = td.size("N"), td.size("M"), td.size("K")
    A = td.input("A", {i: N, k: K}, td.float32)
    B = td.input("B", {k: K, j: M}, td.float32)
    C = td.compute("C", {i: N, j: M}, td.cast(0, td.float32))
    ext = {i: N, j: M, k: K}
    td.update(C[i, j], C[i, j] + A[i, k] * B[k, j], over={d: ext[d] for d in
                                                         ((i, j, k) if order == "ijk" else (k, i, j))})
    return C


@pytest.mark.parametrize("order", ["ijk", "kij"])
def test_accumulating_matmul(order):
    C = accumulate_matmul_pipeline(order)
    a = rng.standard_normal((5, 6)).astype(np.float32)
    b = rng.standard_normal((6, 4)).astype(np.float32)
    want = np.zeros((5, 4), np.float32)
    for kk in range(6):
        want += a[:, kk : kk + 1] * b[kk : kk + 1, :]
    check(C, want, A=a, B=b)
    np.testing.assert_allclose(want, a @ b, rtol=1e-5, atol=1e-5)


def trisolv_pipeline():
    """PolyBench trisolv: x[i] = (b[i] - sum_{j<i} L[i, j] x[j]) / L[i, i], as one update."""
    i, j = td.dims("i j")
    N = td.size("N")
    L = td.input("L", {i: N, j: N}, td.float64)
    b = td.input("b", {i: N}, td.float64)
    x = td.compute("x", {i: N}, b[i])
    td.update(x[i], td.where(j < i, x[i] - L[i, j] * x[j], x[i] / L[i, i]),
              over={i: N, j: (0, i + 1)})
    return x


def trisolv_reference(L, b):
    n = len(b)
    x = np.zeros(n)
    for i in range(n):
        x[i] = b[i]
        for j in range(i):
            x[i] -= L[i][j] * x[j]
        x[i] = x[i] / L[i][i]
    return x


def test_trisolv():
    x = trisolv_pipeline()
    n = 13
    L = np.tril(rng.standard_normal((n, n))) + 4 * np.eye(n)
    L[np.triu_indices(n, 1)] = 1e300  # never read
    b = rng.standard_normal(n)
    want = trisolv_reference(L, b)
    check(x, want, L=L, b=b)
    np.testing.assert_allclose(np.tril(L) @ want, b, rtol=1e-9, atol=1e-9)


def lu_pipeline():
    """PolyBench lu, in place, as one update over {i: N, j: N, k: (0, i + 1)}:
    for j < i: k < j subtracts A[i, k] A[k, j], k == j divides by A[j, j];
    for j >= i: k < i subtracts; every other point leaves A[i, j] as it is."""
    i, j, k = td.dims("i j k")
    N = td.size("N")
    A0 = td.input("A0", {i: N, j: N}, td.float64)
    A = td.compute("A", {i: N, j: N}, A0[i, j])
    td.update(
        A[i, j],
        td.where((k < j) & (k < i), A[i, j] - A[i, k] * A[k, j],
                 td.where((k == j) & (j < i), A[i, j] / A[j, j], A[i, j])),
        over={i: N, j: N, k: (0, i + 1)},
    )
    return A


def lu_reference(A0):
    A = A0.copy()
    n = len(A)
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i][j] -= A[i][k] * A[k][j]
            A[i][j] /= A[j][j]
        for j in range(i, n):
            for k in range(i):
                A[i][j] -= A[i][k] * A[k][j]
    return A


def test_lu():
    A = lu_pipeline()
    n = 11
    a0 = rng.standard_normal((n, n)) + n * np.eye(n)
    want = lu_reference(a0)
    check(A, want, A0=a0)
    lower, upper = np.tril(want, -1) + np.eye(n), np.triu(want)
    np.testing.assert_allclose(lower @ upper, a0, rtol=1e-9, atol=1e-9)


def lu_min_bound_pipeline():
    """PolyBench lu with a piecewise-affine bound: over {i: N, j: N, k: (0, min(i, j + 1))},
    k < j subtracts A[i, k] A[k, j] and k == j (only reached when j < i) divides by A[j, j]."""
    i, j, k = td.dims("i j k")
    N = td.size("N")
    A0 = td.input("A0", {i: N, j: N}, td.float64)
    A = td.compute("A", {i: N, j: N}, A0[i, j])
    td.update(A[i, j], td.where(k < j, A[i, j] - A[i, k] * A[k, j], A[i, j] / A[j, j]),
              over={i: N, j: N, k: (0, td.minimum(i, j + 1))})
    return A


def test_lu_with_a_min_bound():
    A = lu_min_bound_pipeline()
    n = 10
    a0 = rng.standard_normal((n, n)) + n * np.eye(n)
    check(A, lu_reference(a0), A0=a0)


def cholesky_pipeline():
    """PolyBench cholesky, in place, as one update over the triangle
    {i: N, j: (0, i + 1), k: (0, j + 1)}: k < j subtracts A[i, k] A[j, k]; at
    k == j, an off-diagonal element is divided by A[j, j] and a diagonal one
    gets its square root. The upper triangle is left as it was."""
    i, j, k = td.dims("i j k")
    N = td.size("N")
    A0 = td.input("A0", {i: N, j: N}, td.float64)
    A = td.compute("A", {i: N, j: N}, A0[i, j])
    td.update(
        A[i, j],
        td.where(k < j, A[i, j] - A[i, k] * A[j, k],
                 td.where(j < i, A[i, j] / A[j, j], td.sqrt(A[i, j]))),
        over={i: N, j: (0, i + 1), k: (0, j + 1)},
    )
    return A


def cholesky_reference(A0):
    A = A0.copy()
    n = len(A)
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i][j] -= A[i][k] * A[j][k]
            A[i][j] /= A[j][j]
        for k in range(i):
            A[i][i] -= A[i][k] * A[i][k]
        A[i][i] = np.sqrt(A[i][i])
    return A


def test_cholesky():
    A = cholesky_pipeline()
    n = 12
    m = rng.standard_normal((n, n))
    a0 = m @ m.T + n * np.eye(n)
    want = cholesky_reference(a0)
    check(A, want, A0=a0)
    lower = np.tril(want)
    np.testing.assert_allclose(lower @ lower.T, a0, rtol=1e-9, atol=1e-9)
    assert_same(np.triu(want, 1), np.triu(a0, 1))


# ---------------------------------------------------------------- graphs


def floyd_warshall_pipeline():
    """PolyBench floyd-warshall in int32:
    path[i][j] = path[i][j] < path[i][k] + path[k][j] ? path[i][j] : path[i][k] + path[k][j]."""
    k, i, j = td.dims("k i j")
    N = td.size("N")
    P0 = td.input("P0", {i: N, j: N}, td.int32)
    path = td.compute("path", {i: N, j: N}, P0[i, j])
    via = path[i, k] + path[k, j]
    td.update(path[i, j], td.where(path[i, j] < via, path[i, j], via), over={k: N, i: N, j: N})
    return path


def floyd_warshall_reference(p0):
    p = p0.copy()
    n = len(p)
    for k in range(n):
        for i in range(n):
            for j in range(n):
                via = p[i][k] + p[k][j]
                p[i][j] = p[i][j] if p[i][j] < via else via
    return p


@pytest.mark.parametrize("n", [1, 6, 24])
def test_floyd_warshall(n):
    path = floyd_warshall_pipeline()
    p0 = rng.integers(1, 100, (n, n)).astype(np.int32)
    p0[rng.random((n, n)) < 0.5] = 10_000  # no edge
    np.fill_diagonal(p0, 0)
    check(path, floyd_warshall_reference(p0), P0=p0)


# ---------------------------------------------------------------- stencils


def seidel_2d_pipeline():
    """PolyBench seidel-2d: for t < T, 1 <= i, j <= N-2, in place:
    A[i][j] = (sum of the 9 neighbours, row by row) / 9."""
    t, i, j = td.dims("t i j")
    N, T = td.size("N"), td.size("T")
    A0 = td.input("A0", {i: N, j: N}, td.float64)
    A = td.compute("A", {i: N, j: N}, A0[i, j])
    nine = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1]
            + A[i, j - 1] + A[i, j] + A[i, j + 1]
            + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1])
    td.update(A[i, j], nine / 9.0, over={t: T, i: (1, N - 1), j: (1, N - 1)})
    return A


def seidel_2d_reference(A0, steps):
    A = A0.copy()
    n = len(A)
    for _ in range(steps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i][j] = (A[i - 1][j - 1] + A[i - 1][j] + A[i - 1][j + 1]
                           + A[i][j - 1] + A[i][j] + A[i][j + 1]
                           + A[i + 1][j - 1] + A[i + 1][j] + A[i + 1][j + 1]) / 9.0
    return A


def test_seidel_2d():
    A = seidel_2d_pipeline()
    a0 = rng.standard_normal((10, 10))
    check(A, seidel_2d_reference(a0, 3), A0=a0, T=3)


def jacobi_1d_time_pipeline():
    """PolyBench jacobi-1d (B from A, then A from B, T times) with an explicit
    time dim of 2T half steps: S[t] is A for even t and B for odd t (that is
    also where the edges come from), and for t >= 1, 1 <= i <= N-2,
    S[t, i] = 0.33333 (S[t-1, i-1] + S[t-1, i] + S[t-1, i+1]).
    S[2T] is PolyBench's final A and S[2T - 1] its final B."""
    t, i = td.dims("t i")
    N, T2 = td.size("N"), td.size("T2")
    A0 = td.input("A0", {i: N}, td.float64)
    B0 = td.input("B0", {i: N}, td.float64)
    S = td.compute("S", {t: T2 + 1, i: N}, td.where(t % 2 == 0, A0[i], B0[i]))
    td.update(S[t, i], 0.33333 * (S[t - 1, i - 1] + S[t - 1, i] + S[t - 1, i + 1]),
              over={t: (1, T2 + 1), i: (1, N - 1)})
    return S


def jacobi_1d_reference(A0, B0, steps):
    A, B = A0.copy(), B0.copy()
    n = len(A)
    for _ in range(steps):
        for i in range(1, n - 1):
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in range(1, n - 1):
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])
    return A, B


def test_jacobi_1d_with_a_time_dim():
    S = jacobi_1d_time_pipeline()
    n, steps = 17, 4
    a0, b0 = rng.standard_normal(n), rng.standard_normal(n)
    a, b = jacobi_1d_reference(a0, b0, steps)
    for mode in MODES:
        s = evaluate_in(mode, S, A0=a0, B0=b0, T2=2 * steps)
        assert s.shape == (2 * steps + 1, n)
        assert_same(s[2 * steps], a)
        assert_same(s[2 * steps - 1], b)


def jacobi_1d_in_place_pipeline():
    """A Gauss-Seidel sweep in 1-d: A[i] = (A[i-1] + A[i] + A[i+1]) / 3, T times, in place."""
    t, i = td.dims("t i")
    N = td.size("N")
    A0 = td.input("A0", {i: N}, td.float32)
    A = td.compute("A", {i: N}, A0[i])
    td.update(A[i], (A[i - 1] + A[i] + A[i + 1]) / 3, over={t: 5, i: (1, N - 1)})
    return A


def test_in_place_1d_sweep():
    A = jacobi_1d_in_place_pipeline()
    a0 = rng.standard_normal(30).astype(np.float32)
    want = a0.copy()
    for _ in range(5):
        for i in range(1, 29):
            want[i] = (want[i - 1] + want[i] + want[i + 1]) / np.float32(3)
    check(A, want, A0=a0)


def boundary_views_pipeline():
    """Reading the target through td.clamp and td.pad: out-of-range reads never raise."""
    i = td.dim("i")
    x = td.input("x", {i: 9}, td.int32)
    y = td.compute("y", {i: 9}, x[i])
    td.update(y[i], td.clamp(y)[i - 1] + td.pad(y, 100)[i + 2], over={i: 9})
    return y


def test_boundary_views_of_the_target():
    y = boundary_views_pipeline()
    x = np.arange(9, dtype=np.int32) * 3
    want = x.copy()
    for i in range(9):
        want[i] = want[max(i - 1, 0)] + (want[i + 2] if i + 2 < 9 else 100)
    check(y, want, x=x)


# ---------------------------------------------------------------- domains


def triangle_pipeline():
    """T = 0; on the lower triangle {i: N, j: (0, i + 1)}, T[i, j] = A[i, j] + T[i, j - 1]
    (a row-wise prefix sum; T[i, -1] reads 0 through td.where and td.clamp)."""
    i, j = td.dims("i j")
    N = td.size("N")
    A = td.input("A", {i: N, j: N}, td.int32)
    T = td.compute("T", {i: N, j: N}, td.cast(0, td.int32))
    td.update(T[i, j], A[i, j] + td.where(j > 0, td.clamp(T)[i, j - 1], 0),
              over={i: N, j: (0, i + 1)})
    return T


def test_triangular_domain():
    T = triangle_pipeline()
    a = rng.integers(-9, 9, (7, 7)).astype(np.int32)
    want = np.zeros((7, 7), np.int32)
    for i in range(7):
        for j in range(i + 1):
            want[i, j] = a[i, j] + (want[i, j - 1] if j > 0 else 0)
    check(T, want, A=a)
    assert_same(want, np.tril(np.cumsum(np.tril(a), axis=1)).astype(np.int32))


def test_empty_ranges_visit_nothing():
    i, j = td.dims("i j")
    x = td.input("x", {i: 5, j: 5}, td.int32)
    y = td.compute("y", {i: 5, j: 5}, x[i, j])
    td.update(y[i, j], y[i, j] + 100, over={i: 5, j: (i + 1, 3)})  # empty for i >= 2
    td.update(y[i, j], y[i, j] * 0, over={i: (3, 1), j: 5})  # empty altogether
    x0 = np.arange(25, dtype=np.int32).reshape(5, 5)
    want = x0.copy()
    for ii in range(5):
        for jj in range(ii + 1, 3):
            want[ii, jj] += 100
    check(y, want, x=x0)


def test_a_point_that_writes_one_element_many_times():
    i, k = td.dims("i k")
    A = td.input("A", {i: 3, k: 6}, td.int32)
    y = td.compute("y", {i: 3}, td.cast(-1, td.int32))
    td.update(y[i], A[i, k], over={i: 3, k: 6})  # not a reduction: the last k wins
    a = rng.integers(0, 50, (3, 6)).astype(np.int32)
    check(y, a[:, -1].copy(), A=a)


# ---------------------------------------------------------------- errors


def test_a_dim_missing_from_over_is_refused():
    r, q = td.dims("r q")
    x = td.input("x", {r: 4}, td.int32)
    y = td.compute("y", {r: 4}, x[r])
    with pytest.raises(DefinitionError, match="not listed in over="):
        td.update(y[r], x[r] + 1, over={q: 4})


def test_an_input_cannot_be_updated():
    r = td.dim("r")
    x = td.input("x", {r: 4}, td.int32)
    with pytest.raises(DefinitionError, match="target"):
        td.update(x[r], x[r] + 1, over={r: 4})


@pytest.mark.parametrize("mode", list(MODES))
def test_an_out_of_range_target_names_the_update_and_the_point(mode):
    r = td.dim("r")
    x = td.input("x", {r: 10}, td.int32)
    y = td.compute("y", {r: 10}, x[r])
    td.update(y[r + 1], x[r], over={r: 10})
    msg = error_in(mode, y, x=np.zeros(10, np.int32))
    for word in ("y.u0", "y[r + 1]", "index 10", "r=9", "0..9", "over="):
        assert word in msg, msg


@pytest.mark.parametrize("mode", list(MODES))
def test_an_out_of_range_read_names_the_update_and_the_point(mode):
    i, j = td.dims("i j")
    x = td.input("x", {i: 4, j: 6}, td.int32)
    y = td.compute("y", {i: 4, j: 6}, x[i, j])
    td.update(y[i, j], y[i, j - 1] + x[i, j], over={i: (2, 4), j: 6})
    msg = error_in(mode, y, x=np.zeros((4, 6), np.int32))
    for word in ("y.u0", "y[i, j - 1]", "index -1", "i=2, j=0", "0..5", "td.clamp(y)"):
        assert word in msg, msg


def test_a_bound_that_reads_a_tensor_is_refused():
    r = td.dim("r")
    x = td.input("x", {r: 4}, td.int32)
    y = td.compute("y", {r: 4}, x[r])
    try:
        td.update(y[r], y[r] + 1, over={r: (0, x[0])})
    except DefinitionError:
        return
    with pytest.raises(DefinitionError, match="bound"):
        evaluate(y, x=np.zeros(4, np.int32))


# ---------------------------------------------------------------- strategy


TARGETS = {
    "j": lambda i, j, n: (i, j),
    "reversed": lambda i, j, n: (i, n - 1 - j),
    "halved": lambda i, j, n: (i, j // 2),
    "strided": lambda i, j, n: (i, (j * 4) % n),
    "column": lambda i, j, n: (j, i),
    "fixed": lambda i, j, n: (i, 3),
}


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("seed", range(6))
def test_random_in_place_stencils(target, seed):
    """Reads of the target at random offsets, writes in several patterns: every
    strategy must match the sequential loop."""
    g = np.random.default_rng(seed)
    a1, b1, a2, b2 = (int(v) for v in g.integers(-2, 3, 4))
    n = 9
    i, j = td.dims("i j")
    x = td.input("x", {i: n, j: n}, td.int32)
    y = td.compute("y", {i: n, j: n}, x[i, j])
    Y = td.clamp(y)
    td.update(y[TARGETS[target](i, j, n)], (Y[i + a1, j + b1] * 3 + Y[i + a2, j + b2] - x[i, j]) % 1000,
              over={i: n, j: n})
    x0 = g.integers(0, 1000, (n, n)).astype(np.int32)
    want = x0.copy()

    def at(r, c):
        return int(want[min(max(r, 0), n - 1), min(max(c, 0), n - 1)])

    for ii in range(n):
        for jj in range(n):
            want[TARGETS[target](ii, jj, n)] = (at(ii + a1, jj + b1) * 3 + at(ii + a2, jj + b2)
                                                - int(x0[ii, jj])) % 1000
    check(y, want, x=x0)


def test_rows_are_computed_at_once_where_that_is_exact(monkeypatch):
    rows: list[bool] = []
    row = ev._row

    def counting(*args):
        rows.append(row(*args))
        return rows[-1]

    monkeypatch.setattr(ev, "_row", counting)
    C = accumulate_matmul_pipeline("kij")  # each point reads only the element it writes
    a = rng.standard_normal((16, 16)).astype(np.float32)
    evaluate(C, A=a, B=a)
    assert rows == [True] * 16 * 16
    rows.clear()
    S = jacobi_1d_time_pipeline()  # a row over i reads the row before it
    evaluate(S, A0=np.zeros(9), B0=np.zeros(9), T2=4)
    assert rows == [True] * 4
    rows.clear()
    path = floyd_warshall_pipeline()  # a row over j reads path[i, k], written at j = k
    p0 = rng.integers(1, 100, (16, 16)).astype(np.int32)
    assert_same(evaluate(path, P0=p0), floyd_warshall_reference(p0))
    assert rows == [False]  # and the later rows are visited point by point
    rows.clear()
    y = last_write_pipeline()  # a row writes one element twice
    evaluate(y, idx=np.zeros(12, np.int32), v=np.zeros(12, np.int32))
    assert rows == [False]


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_inline_reduction_with_a_data_index_inside_a_triangular_update(backend):
    """Fuzz finding (llvm seed 303 case 631): td.evaluate raised IndexError, not
    ArgumentError, on a data-dependent index out of range inside a sum whose bound
    depends on the update's loop. In range, the same pipeline is exact."""
    y, v, k2, k3 = td.dims("y v k2 k3")
    in0 = td.input("in0", {y: 16}, td.int32)
    lut = td.input("lut", {v: 1}, td.float32)
    s2 = td.compute("s2", {y: 16}, td.cast(2.0, td.float64))
    s4 = td.compute("s4", {y: 16}, td.sum(s2[k2], over={k2: (y, 16)}))
    td.update(s4[y], td.sum(lut[in0[k3]], over={k3: (0, y + 1)}), over={y: (0, 15)})
    arrays = dict(in0=np.zeros(16, np.int32), lut=np.array([1.5], np.float32))
    want = np.array([(n + 1) * 1.5 for n in range(15)] + [2.0])
    np.testing.assert_array_equal(td.evaluate(s4, **arrays), want)
    f = td.build(td.schedule(s4), target=backend)
    np.testing.assert_array_equal(f(**arrays), want)
    arrays["in0"][3] = -6
    with pytest.raises(td.ArgumentError, match="lut"):
        td.evaluate(s4, **arrays)
    with pytest.raises(td.ArgumentError, match="lut"):
        f(**arrays)
