"""td.reduce: general reductions carrying several values (value and index together,
Welford's running moments), anywhere an expression goes, on both backends."""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td

RNG = np.random.default_rng(77)


def both(out, want, backend, schedule=None, exact=True, **arrays):
    sched = schedule or td.schedule(out)
    for got in (td.evaluate(out, **arrays), td.build(sched, target=backend)(**arrays)):
        assert got.dtype == want.dtype
        if exact:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def max_and_argmax(x, k):
    low = -np.inf if x.dtype.is_float else int(np.iinfo(x.dtype.np).min)
    return td.reduce(
        lambda acc: (td.maximum(acc[0], x), td.where(x > acc[0], k, acc[1])),
        init=(low, 0), over=k, dtype=(x.dtype, td.int64))


@pytest.mark.parametrize("sched", ["plain", "parallel", "vector", "tiled"])
def test_value_and_index_in_one_pass(backend, threads, sched):
    threads(2)
    n, m = 29, 41
    i, k = td.dims("i k")
    X = td.input("X", {i: n, k: m}, td.float32)
    best, where = max_and_argmax(X[i, k], k)
    out = td.compute("out", {i: n}, td.cast(where, td.float32) * 1000 + best)
    x = RNG.standard_normal((n, m)).astype(np.float32)
    x[3, 7] = x[3, 30] = 50  # a tie: the first index
    want = np.argmax(x, axis=1).astype(np.float32) * 1000 + x.max(axis=1)
    s = {"plain": td.schedule(out), "parallel": td.schedule(out).parallel(out, "i"),
         "vector": td.schedule(out).split(out, "i", 8).vectorize(out, "i_i"),
         "tiled": td.schedule(out).split(out, "i", 4).parallel(out, "i_o").unroll(out, "i_i")}[sched]
    both(out, want, backend, s, X=x)


def test_welford_mean_and_variance(backend):
    """Welford's online algorithm, a three-value fold: count, mean, sum of squared
    deviations."""
    n, m = 7, 50
    i, k = td.dims("i k")
    X = td.input("X", {i: n, k: m}, td.float64)

    def step(acc):
        count = acc[0] + 1.0
        delta = X[i, k] - acc[1]
        mean = acc[1] + delta / count
        return count, mean, acc[2] + delta * (X[i, k] - mean)

    count, mean, m2 = td.reduce(step, init=(0.0, 0.0, 0.0), over=k)
    out = td.compute("var", {i: n}, m2 / count + mean * 0)
    avg = td.compute("avg", {i: n}, mean)
    x = RNG.standard_normal((n, m)) * 3 + 10
    both(out, x.var(axis=1), backend, exact=False, X=x)
    both(avg, x.mean(axis=1), backend, exact=False, X=x)


def test_fold_over_two_dims_with_a_triangle(backend):
    """The first (row, column) of the smallest element of each lower triangle prefix."""
    n = 9
    b, r, c = td.dims("b r c")
    A = td.input("A", {b: 4, r: n, c: n}, td.int32)
    small, row, col = td.reduce(
        lambda acc: (td.minimum(acc[0], A[b, r, c]),
                     td.where(A[b, r, c] < acc[0], r, acc[1]),
                     td.where(A[b, r, c] < acc[0], c, acc[2])),
        init=(np.iinfo(np.int32).max, -1, -1), over={r: n, c: (0, r + 1)},
        dtype=(td.int32, td.int32, td.int32))
    out = td.compute("out", {b: 4}, small * 10000 + row * 100 + col)
    a = RNG.integers(-50, 50, (4, n, n)).astype(np.int32)
    want = []
    for bb in range(4):
        best = (np.iinfo(np.int32).max, -1, -1)
        for rr in range(n):
            for cc in range(rr + 1):
                if a[bb, rr, cc] < best[0]:
                    best = (a[bb, rr, cc], rr, cc)
        want.append(best[0] * 10000 + best[1] * 100 + best[2])
    both(out, np.array(want, np.int32), backend, A=a)


def test_fold_in_an_update_and_through_compute_inline(backend):
    """A fold in an update's value reading the updated stage, and a stage holding a fold
    inlined into its consumer (its dims renamed per copy)."""
    n = 12
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: n, j: n}, td.int64)
    y = td.compute("y", {i: n}, A[i, 0])
    # y[i] = (largest y[k] for k < i) + first such k
    big, at = td.reduce(lambda acc: (td.maximum(acc[0], y[k]), td.where(y[k] > acc[0], k, acc[1])),
                        init=(-(1 << 40), 0), over={k: (0, i)})
    td.update(y[i], big + at + A[i, 1], over={i: (1, n)})
    a = RNG.integers(-20, 20, (n, n)).astype(np.int64)
    want = a[:, 0].copy()
    for ii in range(1, n):
        prev = want[:ii]
        want[ii] = prev.max() + int(np.argmax(prev)) + a[ii, 1]
    both(y, want, backend, A=a)
    p = td.compute("p", {i: n}, max_and_argmax(A[i, j], j)[1])
    q = td.compute("q", {i: n}, p[i] * 100 + td.clamp(p)[i + 1])
    am = np.argmax(a, axis=1).astype(np.int64)
    want_q = am * 100 + am[np.minimum(np.arange(n) + 1, n - 1)]
    both(q, want_q, backend, td.schedule(q).compute_inline(p), A=a)
    both(q, want_q, backend, td.schedule(q).compute_at(p, q, "i"), A=a)


def test_the_mistakes_a_user_can_make():
    i, k = td.dims("i k")
    X = td.input("X", {i: 4, k: 5}, td.float32)
    with pytest.raises(td.DefinitionError, match="returned 1 values for the 2"):
        td.reduce(lambda acc: (acc[0] + X[i, k],), init=(0.0, 0), over=k)
    with pytest.raises(td.DefinitionError, match="must be a function"):
        td.reduce((0.0,), init=(0.0,), over=k)
    with pytest.raises(td.DefinitionError, match="uses a dim of over="):
        td.reduce(lambda acc: (acc[0] + X[i, k],), init=(X[i, k],), over=k)
    with pytest.raises(td.DefinitionError, match="2 dtypes for 1 values"):
        td.reduce(lambda acc: (acc[0],), init=(0,), over=k, dtype=(td.int32, td.int32))
    (total,) = td.reduce(lambda acc: (acc[0] + X[i, k],), init=(0.0,), over=k,
                         dtype=(td.float32,))
    assert total.dtype == td.float32
    assert "td.reduce(lambda" in repr(total)


def test_a_fold_inlined_into_its_own_index(backend):
    """A producer holding a fold, inlined twice into one read (the value at the index it
    gives itself): each copy keeps its own values so far (found by the fuzzer)."""
    n = 6
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: n, j: n}, td.float32)
    where = td.reduce(lambda acc: (td.minimum(acc[0], A[k, j]),
                                   td.where(A[k, j] < acc[0], k, acc[1])),
                      init=(np.inf, 0), over={k: (1, n)}, dtype=(td.float32, td.int64))[1]
    p = td.compute("p", {j: n}, where)
    q = td.compute("q", {i: n, j: n}, td.clamp(p)[p[j] + i])
    a = RNG.standard_normal((n, n)).astype(np.float32)
    arg = (np.argmin(a[1:], axis=0) + 1).astype(np.int64)
    want = np.array([[arg[min(arg[jj] + ii, n - 1)] for jj in range(n)] for ii in range(n)])
    for s in (td.schedule(q), td.schedule(q).compute_inline(p)):
        both(q, want, backend, s, A=a)


def test_components_and_folds_are_told_apart(backend):
    """Two folds that differ only in which value a step reads, and two components of one
    fold used as indices: none is taken for another (they share a structure otherwise)."""
    n = 7
    i, k, v = td.dims("i k v")
    X = td.input("X", {i: 5, k: n}, td.int32)
    T = td.input("T", {v: 40}, td.int32)
    a, b = td.reduce(lambda acc: (acc[0] + X[i, k], acc[1] * 2), init=(0, 1), over=k,
                     dtype=(td.int32, td.int32))
    c, d = td.reduce(lambda acc: (acc[1] + X[i, k], acc[0] * 2), init=(0, 1), over=k,
                     dtype=(td.int32, td.int32))
    e, f = td.reduce(lambda acc: (acc[0] + 1, acc[1] + 2), init=(0, 0), over={k: n},
                     dtype=(td.int32, td.int32))
    out = td.compute("out", {i: 5}, a * 1000 + c * 100 + d + T[e] * 10000 + T[f] * 100000)
    x = RNG.integers(-3, 4, (5, n)).astype(np.int32)
    t = np.arange(40, dtype=np.int32)
    acc0, acc1 = np.zeros(5, np.int64), np.ones(5, np.int64)
    for kk in range(n):
        acc0, acc1 = acc1 + x[:, kk], acc0 * 2
    want = (x.sum(axis=1) * 1000 + acc0 * 100 + acc1 + t[n] * 10000 + t[2 * n] * 100000)
    both(out, want.astype(np.int32), backend, X=x, T=t)


@pytest.mark.parametrize("sched", ["plain", "vector"])
def test_argmin_over_tied_multiply_adds_picks_the_first(backend, sched):
    """Found by the fuzzer (LLVM seed 7402, case 498): argmin over k of S + A * T[k - 1]
    (clamped), every value the same. The candidates for k = 0 and 1 share one product,
    the others have their own; each a * b + c must be rounded the same way (fused
    into one FMA, or not, everywhere), or a later candidate compares below the first
    and the index is not numpy's."""
    y, k = td.dims("y k")
    n = 64
    S = td.input("S", {y: n, k: 5}, td.float32)
    A = td.input("A", {y: n}, td.float32)
    T = td.input("T", {y: n, k: 5}, td.float32)
    out = td.compute("out", {y: n}, td.argmin(S[y, k] + A[y] * td.clamp(T)[y, k - 1], over=k))
    s = td.schedule(out)
    if sched == "vector":
        s = s.split(out, "y", 16).vectorize(out, "y_i")
    rng = np.random.default_rng(1)
    sv = np.repeat(rng.uniform(-4, 4, (n, 1)).astype(np.float32), 5, axis=1)
    tv = np.repeat(rng.uniform(-4, 4, (n, 1)).astype(np.float32), 5, axis=1)
    av = rng.uniform(-4, 4, n).astype(np.float32)
    both(out, np.zeros(n, np.int64), backend, s, S=sv, A=av, T=tv)


def test_argmin_over_tied_multiply_adds_with_a_product_used_elsewhere(backend):
    """As above, with the first candidates' product also compared on its own. gcc
    fuses a product into FMAs only when every use of it is an add, so left to gcc the
    candidates sharing it stayed unfused while k = 2's own product fused (host C)."""
    y, k = td.dims("y k")
    n = 64
    S = td.input("S", {y: n, k: 5}, td.float32)
    A = td.input("A", {y: n}, td.float32)
    T = td.input("T", {y: n, k: 5}, td.float32)
    arg = td.argmin(S[y, k] + A[y] * td.clamp(T)[y, k - 1], over=k)
    out = td.compute("out", {y: n}, arg + td.cast(A[y] * T[y, 0] > 100.0, td.int64))
    rng = np.random.default_rng(1)
    sv = np.repeat(rng.uniform(-4, 4, (n, 1)).astype(np.float32), 5, axis=1)
    tv = np.repeat(rng.uniform(-4, 4, (n, 1)).astype(np.float32), 5, axis=1)
    av = rng.uniform(-4, 4, n).astype(np.float32)
    both(out, np.zeros(n, np.int64), backend, S=sv, A=av, T=tv)
