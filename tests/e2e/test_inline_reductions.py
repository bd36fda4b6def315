"""Reductions inside expressions, argmax/argmin and named reductions: textbook kernels
written from their definitions, against numpy, on both backends."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tdsl as td

RNG = np.random.default_rng(2024)


def run(sched_or_stage, want, backend, exact=None, rtol=1e-5, **arrays):
    """td.evaluate and the kernel on `backend` both give `want` (numpy's answer)."""
    sched = sched_or_stage if isinstance(sched_or_stage, td.Schedule) else td.schedule(sched_or_stage)
    ref = td.evaluate(sched.outputs, **arrays)
    got = td.build(sched, target=backend)(**arrays)
    for value in (ref, got):
        assert value.dtype == want.dtype
        if want.dtype.kind in "iub" if exact is None else exact:
            np.testing.assert_array_equal(value, want)
        else:
            np.testing.assert_allclose(value, want, rtol=rtol, atol=rtol)
    return got


# ---------------------------------------------------------------- linear algebra


def test_gemm_with_alpha_and_beta(backend):
    N, M, K = 13, 17, 11
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: N, k: K}, td.float32)
    B = td.input("B", {k: K, j: M}, td.float32)
    C0 = td.input("C0", {i: N, j: M}, td.float32)
    C = td.compute("C", {i: N, j: M}, td.sum(A[i, k] * B[k, j], over=k) * 1.5 + 0.5 * C0[i, j])
    a, b, c0 = (RNG.standard_normal(s).astype(np.float32) for s in ((N, K), (K, M), (N, M)))
    want = (a @ b) * np.float32(1.5) + np.float32(0.5) * c0
    run(C, want, backend, A=a, B=b, C0=c0)
    tiled = td.schedule(C).split(C, "j", 8).vectorize(C, "j_i").parallel(C, "i")
    run(tiled, want, backend, A=a, B=b, C0=c0)


def test_integer_gemm_is_bit_exact(backend):
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: 9, k: 31}, td.int16)
    B = td.input("B", {k: 31, j: 10}, td.int16)
    # the int16 products wrap, the sum accumulates in int32, then + 7 and halve
    C = td.compute("C", {i: 9, j: 10}, (td.sum(A[i, k] * B[k, j], over=k, dtype=td.int32) + 7) // 2)
    a = RNG.integers(-2000, 2000, (9, 31), dtype=np.int16)
    b = RNG.integers(-2000, 2000, (31, 10), dtype=np.int16)
    prod = (a[:, :, None] * b[None, :, :]).astype(np.int32).sum(axis=1, dtype=np.int32)
    run(C, (prod + 7) // 2, backend, A=a, B=b)


def test_two_matmul_chain_nested(backend):
    i, j, k, m = td.dims("i j k m")
    A = td.input("A", {i: 6, k: 7}, td.float64)
    B = td.input("B", {k: 7, m: 5}, td.float64)
    C = td.input("C", {m: 5, j: 8}, td.float64)
    D = td.compute("D", {i: 6, j: 8}, 2.0 * td.sum(td.sum(A[i, k] * B[k, m], over=k) * C[m, j], over=m))
    a, b, c = (RNG.standard_normal(s) for s in ((6, 7), (7, 5), (5, 8)))
    run(D, 2.0 * (a @ b) @ c, backend, A=a, B=b, C=c)


def test_statistics_mean_variance_covariance(backend):
    # (examples/textbook.py has the correlation)
    N, M = 20, 6
    n, j, k, q = td.dims("n j k q")
    data = td.input("data", {n: N, j: M}, td.float64)
    mean = td.compute("mean", {j: M}, td.sum(data[n, j], over=n) / N)
    var = td.compute("var", {j: M}, td.sum((data[n, j] - mean[j]) * (data[n, j] - mean[j]), over=n) / N)
    cov = td.compute("cov", {j: M, k: M},
                     td.sum((data[q, j] - mean[j]) * (data[q, k] - mean[k]), over=q) / (N - 1))
    d = RNG.standard_normal((N, M))
    run(mean, d.mean(axis=0), backend, rtol=1e-12, data=d)
    run(var, d.var(axis=0), backend, rtol=1e-12, data=d)
    run(cov, np.cov(d, rowvar=False), backend, rtol=1e-12, data=d)


def _spd(n):
    m = RNG.standard_normal((n, n))
    return m @ m.T + n * np.eye(n)


def test_lu_in_place(backend):
    N = 9
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: N, j: N}, td.float64)
    LU = td.compute("LU", {i: N, j: N}, A[i, j])
    upper = LU[i, j] - td.sum(LU[i, k] * LU[k, j], over={k: (0, i)})
    lower = (LU[i, j] - td.sum(LU[i, k] * LU[k, j], over={k: (0, j)})) / LU[j, j]
    td.update(LU[i, j], td.where(j >= i, upper, lower), over={i: N, j: N})
    a = _spd(N)
    got = run(LU, _doolittle(a), backend, rtol=1e-10, A=a)
    lo, up = np.tril(got, -1) + np.eye(N), np.triu(got)
    np.testing.assert_allclose(lo @ up, a, rtol=1e-10)


def _doolittle(a):
    a = a.copy()
    for i in range(len(a)):
        for j in range(len(a)):
            if j >= i:
                a[i, j] -= a[i, :i] @ a[:i, j]
            else:
                a[i, j] = (a[i, j] - a[i, :j] @ a[:j, j]) / a[j, j]
    return a


def test_floyd_warshall(backend):
    N = 11
    i, j, k = td.dims("i j k")
    D = td.input("D", {i: N, j: N}, td.int32)
    P = td.compute("P", {i: N, j: N}, D[i, j])
    td.update(P[i, j], td.minimum(P[i, j], P[i, k] + P[k, j]), over={k: N, i: N, j: N})
    d = RNG.integers(1, 100, (N, N), dtype=np.int32)
    want = d.copy()
    for kk in range(N):
        want = np.minimum(want, want[:, kk:kk + 1] + want[kk:kk + 1, :])
    run(P, want, backend, D=d)


# ---------------------------------------------------------------- images and networks


def test_harris_with_inlined_box_sums(backend):
    H, W = 19, 26
    y, x, dy, dx = td.dims("y x dy dx")
    I = td.input("I", {y: H, x: W}, td.float32)  # noqa: E741 - the image
    c = td.clamp(I)
    Ix = td.compute("Ix", {y: H, x: W}, c[y, x + 1] - c[y, x - 1])
    Iy = td.compute("Iy", {y: H, x: W}, c[y + 1, x] - c[y - 1, x])

    def box(name, a, b):
        return td.compute(name, {y: H, x: W}, td.sum(
            td.clamp(a)[y + dy - 1, x + dx - 1] * td.clamp(b)[y + dy - 1, x + dx - 1],
            over={dy: 3, dx: 3}))

    Sxx, Syy, Sxy = box("Sxx", Ix, Ix), box("Syy", Iy, Iy), box("Sxy", Ix, Iy)
    tr = Sxx[y, x] + Syy[y, x]
    R = td.compute("R", {y: H, x: W}, Sxx[y, x] * Syy[y, x] - Sxy[y, x] * Sxy[y, x] - 0.04 * tr * tr)
    img = RNG.random((H, W), dtype=np.float32)
    want = _harris(img.astype(np.float64)).astype(np.float32)
    run(R, want, backend, rtol=1e-4, I=img)
    s = td.schedule(R)
    for st in ("Sxx", "Syy", "Sxy", "Ix", "Iy"):
        s = s.compute_inline(st)
    s = s.split(R, "x", 8).vectorize(R, "x_i").parallel(R, "y")
    run(s, want, backend, rtol=1e-4, I=img)
    # the three box sums of one pixel are three reductions, each computed once
    stores = [line for line in str(td.lower(s)).splitlines() if line.strip().startswith("R[")]
    assert stores and all(len(set(re.findall(r"tdsl_acc\d+", line))) == 3 for line in stores)


def _harris(img):
    p = np.pad(img, 1, mode="edge")
    ix = p[1:-1, 2:] - p[1:-1, :-2]
    iy = p[2:, 1:-1] - p[:-2, 1:-1]

    def box(a):
        q = np.pad(a, 1, mode="edge")
        return sum(q[dy:dy + a.shape[0], dx:dx + a.shape[1]] for dy in range(3) for dx in range(3))

    sxx, syy, sxy = box(ix * ix), box(iy * iy), box(ix * iy)
    return sxx * syy - sxy * sxy - 0.04 * (sxx + syy) ** 2


def test_two_layer_mlp_with_bias_and_relu(backend):
    Bn, In, Hn, On = 4, 10, 12, 3
    b, n, h, o = td.dims("b n h o")
    X = td.input("X", {b: Bn, n: In}, td.float32)
    W1 = td.input("W1", {n: In, h: Hn}, td.float32)
    b1 = td.input("b1", {h: Hn}, td.float32)
    W2 = td.input("W2", {h: Hn, o: On}, td.float32)
    b2 = td.input("b2", {o: On}, td.float32)
    hid = td.compute("hid", {b: Bn, h: Hn}, td.maximum(td.sum(X[b, n] * W1[n, h], over=n) + b1[h], 0.0))
    Y = td.compute("Y", {b: Bn, o: On}, td.sum(hid[b, h] * W2[h, o], over=h) + b2[o])
    xs = dict(X=(Bn, In), W1=(In, Hn), b1=(Hn,), W2=(Hn, On), b2=(On,))
    arrays = {k: RNG.standard_normal(s).astype(np.float32) for k, s in xs.items()}
    want = np.maximum(arrays["X"] @ arrays["W1"] + arrays["b1"], 0) @ arrays["W2"] + arrays["b2"]
    run(Y, want, backend, **arrays)
    run(td.schedule(Y).compute_inline(hid), want, backend, **arrays)


def test_histogram(backend):
    y, x, v = td.dims("y x v")
    img = td.input("img", {y: 23, x: 31}, td.uint8)
    hist = td.compute("hist", {v: 256}, td.cast(0, td.int32))
    td.update(hist[img[y, x]], hist[img[y, x]] + 1, over={y: 23, x: 31})
    a = RNG.integers(0, 256, (23, 31), dtype=np.uint8)
    run(hist, np.bincount(a.ravel(), minlength=256).astype(np.int32), backend, img=a)


@pytest.mark.parametrize("dtype", [td.float32, td.int8, td.bool_])
def test_argmax_argmin_follow_numpy(backend, dtype):
    B, C = 6, 29
    b, c = td.dims("b c")
    L = td.input("L", {b: B, c: C}, dtype)
    a = RNG.integers(-3, 3, (B, C)).astype(dtype.name)
    if dtype is td.float32:  # ties, and NaNs: numpy answers the first NaN
        a[1, 5], a[1, 9], a[3, 0] = np.nan, np.nan, np.nan
    for fn, np_fn in ((td.argmax, np.argmax), (td.argmin, np.argmin)):
        out = td.compute("out", {b: B}, fn(L[b, c], over=c))
        run(out, np_fn(a, axis=1), backend, L=a)


def test_argmax_over_a_slice_gives_the_dim_value(backend):
    b, c = td.dims("b c")
    L = td.input("L", {b: 4, c: 20}, td.float64)
    out = td.compute("out", {b: 4}, td.argmax(L[b, c], over={c: (b + 3, 20)}) * 2)
    a = RNG.standard_normal((4, 20))
    want = np.array([(np.argmax(a[r, r + 3:]) + r + 3) * 2 for r in range(4)], dtype=np.int64)
    run(out, want, backend, L=a)


def test_bilateral_grid(backend):
    """Splat into a coarse (y, x, intensity) grid with data-dependent targets, blur the
    grid along intensity, slice it back at each pixel's own cell."""
    H, W, S, Z = 16, 20, 4, 8
    y, x, gy, gx, gz, t = td.dims("y x gy gx gz t")
    img = td.input("img", {y: H, x: W}, td.float32)
    zc = td.cast(td.minimum(img[y, x] * Z, Z - 1), td.int32)
    grid = td.compute("grid", {gy: H // S, gx: W // S, gz: Z}, td.cast(0, td.float32))
    td.update(grid[y // S, x // S, zc], grid[y // S, x // S, zc] + img[y, x], over={y: H, x: W})
    count = td.compute("count", {gy: H // S, gx: W // S, gz: Z}, td.cast(0, td.float32))
    td.update(count[y // S, x // S, zc], count[y // S, x // S, zc] + 1, over={y: H, x: W})
    blur = td.compute("blur", {gy: H // S, gx: W // S, gz: Z}, td.sum(
        td.pad(grid, 0)[gy, gx, gz + t - 1], over={t: 3}) / td.maximum(td.sum(
            td.pad(count, 0)[gy, gx, gz + t - 1], over={t: 3}), 1.0))
    out = td.compute("out", {y: H, x: W}, blur[y // S, x // S, zc])
    a = RNG.random((H, W), dtype=np.float32)
    cell = np.minimum(a * np.float32(Z), Z - 1).astype(np.int32)
    g = np.zeros((H // S, W // S, Z), np.float32)
    n = np.zeros_like(g)
    for yy in range(H):
        for xx in range(W):
            g[yy // S, xx // S, cell[yy, xx]] += a[yy, xx]
            n[yy // S, xx // S, cell[yy, xx]] += 1
    gp, np_ = np.pad(g, ((0, 0), (0, 0), (1, 1))), np.pad(n, ((0, 0), (0, 0), (1, 1)))
    bl = (gp[..., :-2] + gp[..., 1:-1] + gp[..., 2:]) / np.maximum(
        np_[..., :-2] + np_[..., 1:-1] + np_[..., 2:], 1)
    want = bl[np.arange(H)[:, None] // S, np.arange(W)[None, :] // S, cell]
    run(out, want.astype(np.float32), backend, img=a)


# ---------------------------------------------------------------- semantics


def test_inline_reduction_is_computed_where_it_is_used(backend):
    # a mean inside a where branch, an empty reduction (identity), a reduction that uses
    # none of its enclosing reduction's dims (computed once), a max that sees NaN
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: 5, j: 7}, td.float32)
    out = td.compute("out", {i: 5, j: 7}, td.where(
        A[i, j] > 0, A[i, j] - td.sum(A[i, k], over=k) / 7,
        td.sum(A[i, k], over={k: (j, j)}) + td.max(A[i, k], over=k)))
    a = RNG.standard_normal((5, 7)).astype(np.float32)
    a[2, 3] = np.nan
    mean = a.sum(axis=1, keepdims=True) / np.float32(7)
    want = np.where(a > 0, a - mean, np.float32(0) + a.max(axis=1, keepdims=True))
    run(out, want.astype(np.float32), backend, A=a)


def test_named_reduction_is_a_stage_the_schedule_places(backend):
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: 12, k: 9}, td.float32)
    B = td.input("B", {k: 9, j: 16}, td.float32)
    C = td.compute("C", {i: 12, j: 16}, td.maximum(td.sum(A[i, k] * B[k, j], over=k, name="acc"), 0.0))
    s = td.schedule(C)
    assert [t.name for t in s.pipeline.stages] == ["acc", "C"]
    s = s.split(C, "j", 8).compute_at("acc", C, "j_o").vectorize("acc", "j")
    a, b = RNG.standard_normal((12, 9)).astype(np.float32), RNG.standard_normal((9, 16)).astype(np.float32)
    run(s, np.maximum(a @ b, 0), backend, A=a, B=b)
    x = td.input("x", {i: 10}, td.float64)
    norm = td.compute("norm", {i: 10}, x[i] / td.sum(x[k], over={k: 10}, name="total"))
    xv = RNG.random(10)
    run(norm, xv / xv.sum(), backend, rtol=1e-12, x=xv)


def test_producer_read_inside_an_inline_reduction_computed_at_a_consumer_loop(backend):
    # bounds inference sees every element the reduction reads, for each consumer iteration
    y, x, k = td.dims("y x k")
    a = td.input("a", {y: 10, x: 14}, td.int32)
    p = td.compute("p", {y: 10, x: 14}, a[y, x] * 3 - 1)
    out = td.compute("out", {y: 10, x: 14}, a[y, x] + td.sum(p[y, k], over={k: (0, x + 1)}))
    s = td.schedule(out).split(out, "y", 3).compute_at(p, out, "y_o")
    av = RNG.integers(-100, 100, (10, 14), dtype=np.int32)
    run(s, av + np.cumsum(av * 3 - 1, axis=1, dtype=np.int32), backend, a=av)


def test_parallel_update_whose_reduction_reads_its_own_row_is_refused():
    y, x, k = td.dims("y x k")
    a = td.input("a", {y: 6, x: 8}, td.int32)
    out = td.compute("out", {y: 6, x: 8}, a[y, x])
    u = td.update(out[y, x], out[y, x] - td.sum(out[y, k], over={k: (0, x)}), over={y: 6, x: 8})
    td.build(td.schedule(out).parallel(u, "y"))  # rows are independent
    with pytest.raises(td.ScheduleError):
        td.build(td.schedule(out).parallel(u, "x"))


def test_mistakes_name_what_is_wrong():
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: 4, j: 4}, td.float32)
    with pytest.raises(td.DefinitionError, match="reduces over i, a name an enclosing loop"):
        td.compute("Q", {i: 4}, td.sum(A[i, j] + td.sum(A[i, i], over=i), over=j))
    with pytest.raises(td.DefinitionError, match="finds an index along one dim"):
        td.compute("Q", {i: 4}, td.argmax(A[j, k], over=(j, k)))
    with pytest.raises(td.DefinitionError, match="is the whole definition"):
        td.compute("Q", {i: 4}, td.sum(A[i, j], over=j, name="acc"))
    with pytest.raises(td.DefinitionError, match="uses \\['j'\\], dims of an enclosing reduction"):
        td.compute("Q", {i: 4}, td.sum(td.sum(A[i, k] * A[j, k], over=k, name="dot"), over=j))
    x = td.compute("x", {i: 4}, A[i, i])
    with pytest.raises(td.DefinitionError, match="reads x, which the update writes"):
        td.update(x[i], td.sum(x[k], over={k: (0, i)}, name="part"), over={i: 4})


def test_inlined_reduction_read_at_a_data_dependent_index_it_bounds_on_is_refused():
    # found by the fuzzer: inlining made a reduction's bounds data-dependent
    y, k0, k1 = td.dims("y k0 k1")
    a = td.input("a", {y: 6}, td.uint8)
    s0 = td.compute("s0", {y: 6}, td.sum(a[k0], over=k0))
    s1 = td.compute("s1", {y: 6}, td.sum(s0[k1], over={k1: (y, 6)}))
    s2 = td.compute("s2", {y: 6}, td.clamp(s1)[td.clamp(s1)[y - 2]])
    av = RNG.integers(0, 4, 6, dtype=np.uint8)
    want = td.evaluate(s2, a=av)
    np.testing.assert_array_equal(td.build(td.schedule(s2))(a=av), want)
    with pytest.raises(td.ScheduleError, match="compute_inline\\(s1\\).*data-dependent index"):
        td.build(td.schedule(s2).compute_inline(s1))


def _textbook():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[2] / "examples" / "textbook.py"
    spec = importlib.util.spec_from_file_location("textbook", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TEXTBOOK = _textbook()


@pytest.mark.parametrize("name", sorted(TEXTBOOK.KERNELS))
def test_textbook_example(name, backend):
    assert "matches numpy" in TEXTBOOK.check(name, backend)


@pytest.mark.parametrize("how", ["vectorize", "parallel", "rfactor"])
def test_reassociated_reduction_with_a_reduction_in_its_body(backend, threads, how):
    threads(2)
    i, k, j = td.dims("i k j")
    A = td.input("A", {i: 6, k: 32}, td.int32)
    r = td.compute("r", {i: 6}, td.sum(A[i, k] * td.max(A[i, j], over=j) - td.min(A[k % 6, j], over=j),
                                      over=k))
    s = td.schedule(r)
    s = {"vectorize": lambda: s.split(r, "k", 8).vectorize(r, "k_i", reassociate=True),
         "parallel": lambda: s.split(r, "k", 8).parallel(r, "k_o", reassociate=True),
         "rfactor": lambda: s.rfactor(r, "k", 4).vectorize("r_rf", "k_i")}[how]()
    a = RNG.integers(-1000, 1000, (6, 32), dtype=np.int32)
    want = (a * a.max(axis=1, keepdims=True) - a.min(axis=1)[np.arange(32) % 6]).sum(axis=1, dtype=np.int32)
    run(s, want, backend, A=a)


def test_producer_read_only_by_an_empty_inline_reduction(backend):
    # fuzz seed 62 case 234: the producer's block at the consumer's loop is empty, and its
    # origin, an isl expression over nothing, crashed the lowering
    y, k = td.dims("y k")
    a = td.input("a", {y: 3}, td.float32)
    p = td.compute("p", {y: 3}, a[y] * 2)
    out = td.compute("out", {y: 3}, td.max(p[k], over={k: (1, 1)}) + a[y])
    s = td.schedule(out).compute_at(p, out, "y")
    av = np.array([1.0, -2.0, 3.0], np.float32)
    run(s, np.full(3, -np.inf, np.float32), backend, a=av)


def test_same_inner_reduction_in_two_sibling_reductions(backend):
    # the inner sum uses k, the dim both outer reductions run over: computed once per
    # step of each, never taken from the other one's last step
    i, k, m = td.dims("i k m")
    A = td.input("A", {i: 4, k: 5}, td.int32)
    B = td.input("B", {k: 5, m: 6}, td.int32)

    def inner():
        return td.sum(B[k, m] * k, over=m)

    out = td.compute("out", {i: 4}, td.sum(A[i, k] * inner(), over=k) * 1000
                     + td.max(A[i, k] + inner(), over=k))
    a = np.arange(20, dtype=np.int32).reshape(4, 5) - 7
    b = (np.arange(30, dtype=np.int32).reshape(5, 6) % 7) - 3
    inn = (b * np.arange(5)[:, None]).sum(axis=1)
    run(out, ((a * inn).sum(axis=1) * 1000 + (a + inn).max(axis=1)).astype(np.int32), backend,
        A=a, B=b)


def test_code_before_a_checked_index_is_kept(backend):
    """An inline reduction computed before a data-dependent index is bound and checked:
    both stay in the statement's code (the reduction was once dropped, and with it the
    checks of earlier indices, when the index's binding was placed)."""
    y, k, v = td.dims("y k v")
    A = td.input("A", {y: 5, k: 7}, td.float32)
    idx = td.input("idx", {y: 5}, td.int32)
    lut = td.input("lut", {v: 4}, td.float32)
    out = td.compute("out", {y: 5}, td.sum(A[y, k], over=k) + lut[idx[y]] - lut[idx[4 - y]])
    a = RNG.standard_normal((5, 7)).astype(np.float32)
    ix = np.array([0, 1, 2, 3, 0], np.int32)
    table = np.arange(4, dtype=np.float32) * 10
    want = a.sum(axis=1) + table[ix] - table[ix[::-1]]
    run(out, want, backend, A=a, idx=ix, lut=table)
    ix[4] = 9  # read as idx[4 - y] at y=0, the first of the two indices checked
    with pytest.raises(td.ArgumentError, match="index 9"):
        td.build(td.schedule(out), target=backend)(A=a, idx=ix, lut=table)


# ---------------------------------------------------------------- where and reductions


def test_where_computes_the_reductions_of_the_arm_it_takes(backend):
    # Cholesky's step (examples/textbook.py): the diagonal's sum and the column's sum
    # each run under the condition that selects them, not both at every element
    sched, arrays, want = TEXTBOOK.cholesky(24)
    run(sched, want, backend, **arrays)
    listing = str(td.lower(sched))
    assert re.search(r"if int32\(i\) == int32\(j\):\n\s+for tdsl_r\d+_k", listing), listing
    assert re.search(r"if ~\(int32\(i\) == int32\(j\)\):\n\s+for tdsl_r\d+_k", listing), listing


def test_reduction_in_both_arms_of_a_where_is_computed_for_each(backend):
    # one reduction (the same structure) read by both arms: each arm computes it under
    # its own condition, and neither reads the other's accumulator
    n = 9
    i, k = td.dims("i k")
    a = td.input("a", {i: n, k: n}, td.float32)
    s = td.sum(a[i, k], over={k: (0, i)})
    out = td.compute("out", {i: n}, td.where(i % 2 == 0, s * 2.0, s + 1.0))
    av = RNG.standard_normal((n, n)).astype(np.float32)
    sums = np.array([av[r, :r].sum() for r in range(n)], np.float32)
    run(out, np.where(np.arange(n) % 2 == 0, sums * 2, sums + 1), backend, rtol=1e-5, a=av)
    # a sum the condition reads as well is computed once, before the select
    out2 = td.compute("out2", {i: n}, td.where(s > 0.0, s, -s))
    run(out2, np.abs(sums), backend, rtol=1e-5, a=av)
    assert str(td.lower(td.schedule(out2))).count("for tdsl_r") == 1


def test_where_keeps_the_checks_of_a_data_dependent_index_in_the_arm_it_skips(backend):
    # an index out of range is an error in either arm (td.evaluate's rule), so the arm's
    # reduction is not made conditional: the kernel still reports it
    n = 6
    i, k = td.dims("i k")
    a = td.input("a", {k: n}, td.float32)
    idx = td.input("idx", {k: n}, td.int32)
    out = td.compute("out", {i: n}, td.where(i < 0, td.sum(a[idx[k]], over={k: (0, i)}), 1.0))
    f = td.build(td.schedule(out), target=backend)
    ok = np.arange(n, dtype=np.int32)
    np.testing.assert_array_equal(f(a=np.ones(n, np.float32), idx=ok), np.ones(n, np.float32))
    bad = ok.copy()
    bad[2] = 99
    with pytest.raises(td.TdslError, match="data-dependent index 99"):
        f(a=np.ones(n, np.float32), idx=bad)
    with pytest.raises(td.TdslError, match="data-dependent index 99"):
        td.evaluate(out, a=np.ones(n, np.float32), idx=bad)


def test_scalar_reduction_steps_on_llvm_are_a_multiply_then_an_add():
    # the step acc = acc + a * b of a scalar inline reduction is not fused into an FMA on LLVM:
    # its chain then waits on adds alone, and the result is numpy's float32 arithmetic,
    # one rounding per multiply and per add
    n = 257
    i, j = td.dims("i j")
    a = td.input("a", {j: n}, td.float32)
    b = td.input("b", {j: n}, td.float32)
    dot = td.compute("dot", {i: 1}, td.sum(a[j] * b[j], over=j) + 0.5)
    av, bv = (RNG.standard_normal(n).astype(np.float32) for _ in range(2))
    acc = np.float32(0)
    for x, y in zip(av, bv):
        acc = np.float32(acc + np.float32(x * y))
    f = td.build(td.schedule(dot), target="llvm")
    assert f(a=av, b=bv)[0] == np.float32(acc + np.float32(0.5))
    assert "fadd float" in f.source  # the step; the + 0.5 after the sum may fuse
