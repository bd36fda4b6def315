"""Vectorized loops as vector code (`lower.vectors`, `backend_llvm.vector`) and the
vectorization report (`Kernel.vectorization`, `td.VectorizationWarning`).

Every kernel is checked against numpy on both backends; the LLVM source is checked
for the vector instructions the plan promises, the report for what it says."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tdsl as td
from tdsl import dtypes as dt
from tdsl.backend_c import helpers
from tdsl.lower import finish, ir, lower_schedule, vectors

rng = np.random.default_rng(7)
BACKENDS = ["c", "llvm"]


def build(s, target):
    """Build, failing on any VectorizationWarning (tests that expect one catch it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", td.VectorizationWarning)
        return td.build(s, target=target)


def only(report: vectors.VectorReport) -> vectors.VectorLoop:
    assert len(report) == 1, str(report)
    return report[0]


@pytest.mark.parametrize("target", BACKENDS)
def test_elementwise_loop_is_contiguous_vector_code(target):
    x = td.dim("x")
    a = td.input("a", {x: 64}, td.float32)
    out = td.compute("out", {x: 64}, td.exp(a[x]) * 2 + 1)
    s = td.schedule(out).split(out, "x", 16).vectorize(out, "x_i")
    f = build(s, target)
    av = rng.standard_normal(64).astype(np.float32)
    np.testing.assert_allclose(f(a=av), np.exp(av) * 2 + 1, rtol=2e-6)
    loop = only(f.vectorization)
    assert (loop.stages, loop.loop, loop.vectorized, loop.chunks) == (("out",), "x_i", True, (16,))
    assert loop.counts() == {"contiguous": 2}
    assert str(loop) == "out: loop x_i: vectorized, 16 lanes (2 contiguous)"
    if target == "llvm":
        assert "load <16 x float>" in f.source and "store <16 x float>" in f.source
        assert "llvm.loop.vectorize" not in f.source


@pytest.mark.parametrize("target", BACKENDS)
def test_loop_of_24_runs_as_16_plus_8_lanes(target):
    x, y = td.dims("x y")
    a = td.input("a", {y: 5, x: 24}, td.int16)
    out = td.compute("out", {y: 5, x: 24}, a[y, x] * 3 - a[y, 23 - x])
    s = td.schedule(out).vectorize(out, "x")
    f = build(s, target)
    av = rng.integers(-1000, 1000, (5, 24)).astype(np.int16)
    np.testing.assert_array_equal(f(a=av), av * np.int16(3) - av[:, ::-1])
    loop = only(f.vectorization)
    assert loop.chunks == (16, 8) and not loop.masked_tail
    # a[y, 23 - x] runs backwards: stride -1, one element per lane
    assert loop.counts() == {"contiguous": 2, "strided": 1}
    if target == "llvm":
        assert "<16 x i16>" in f.source and "<8 x i16>" in f.source


@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize("n", [1, 7, 8, 9, 23])
def test_split_tail_is_masked(target, n):
    """A non-divisible split of a symbolic extent: the guard of the tail differs between
    lanes, so stores under it are masked."""
    x = td.dim("x")
    N = td.size("N")
    a = td.input("a", {x: N}, td.float32)
    out = td.compute("out", {x: N}, td.sqrt(td.abs(a[x])) + a[x])
    s = td.schedule(out).split(out, "x", 8).vectorize(out, "x_i")
    f = build(s, target)
    av = rng.standard_normal(n).astype(np.float32)
    got = f(a=av)
    np.testing.assert_allclose(got, np.sqrt(np.abs(av)) + av, rtol=1e-6)
    assert all(loop.vectorized for loop in f.vectorization)
    if target == "llvm":
        assert "llvm.masked.store" in f.source or "llvm.masked.load" in f.source


@pytest.mark.parametrize("target", BACKENDS)
def test_data_dependent_index_is_a_gather(target):
    x = td.dim("x")
    lut = td.input("lut", {x: 256}, td.float32)
    img = td.input("img", {x: 64}, td.uint8)
    out = td.compute("out", {x: 64}, lut[img[x]] * 0.5)
    s = td.schedule(out).vectorize(out, "x")
    f = build(s, target)
    lv = rng.standard_normal(256).astype(np.float32)
    iv = rng.integers(0, 256, 64).astype(np.uint8)
    np.testing.assert_array_equal(f(lut=lv, img=iv), lv[iv] * np.float32(0.5))
    assert only(f.vectorization).counts() == {"contiguous": 2, "gather": 1}
    if target == "llvm":
        assert "llvm.masked.gather" in f.source


@pytest.mark.parametrize("target", BACKENDS)
def test_stride_two_is_strided_not_gathered(target):
    x = td.dim("x")
    a = td.input("a", {x: 64}, td.float64)
    out = td.compute("out", {x: 32}, a[2 * x] + a[2 * x + 1])
    s = td.schedule(out).vectorize(out, "x")
    f = build(s, target)
    av = rng.standard_normal(64)
    np.testing.assert_array_equal(f(a=av), av[0::2] + av[1::2])
    assert only(f.vectorization).counts() == {"contiguous": 1, "strided": 2}
    if target == "llvm":
        assert "gather" not in f.source


@pytest.mark.parametrize("target", BACKENDS)
def test_reduction_inside_a_vectorized_loop_has_a_private_accumulator_per_lane(target):
    """The accumulator of a sum in an expression is a temp allocated inside the
    vectorized loop: a copy per lane, contiguous."""
    i, j, k = td.dims("i j k")
    a = td.input("a", {i: 8, k: 20}, td.float32)
    b = td.input("b", {k: 20, j: 32}, td.float32)
    out = td.compute("out", {i: 8, j: 32}, td.sum(a[i, k] * b[k, j], over=k) * 2)
    s = td.schedule(out).vectorize(out, "j")
    f = build(s, target)
    av = rng.standard_normal((8, 20)).astype(np.float32)
    bv = rng.standard_normal((20, 32)).astype(np.float32)
    np.testing.assert_allclose(f(a=av, b=bv), (av @ bv) * 2, rtol=1e-5, atol=1e-5)
    loop = only(f.vectorization)
    assert loop.vectorized and loop.chunks == (32,)


@pytest.mark.parametrize("target", BACKENDS)
def test_triangular_inner_loop_is_not_vectorized_and_says_why(target):
    """Vectorizing i over a reduction whose bounds depend on i: the inner loop's trip
    count differs between lanes. The kernel is a plain loop, correct, and the build
    warns naming the stage, the loop and why."""
    i, k = td.dims("i k")
    a = td.input("a", {k: 16}, td.float32)
    out = td.compute("out", {i: 16}, td.sum(a[k], over={k: (0, i + 1)}))
    s = td.schedule(out).vectorize(out, "i")
    with pytest.warns(td.VectorizationWarning, match=r"out: loop i: not vectorized \(the "
                      r"bounds of loop k inside it differ between its iterations\)"):
        f = td.build(s, target=target)
    av = rng.standard_normal(16).astype(np.float32)
    np.testing.assert_allclose(f(a=av), np.cumsum(av), rtol=1e-5, atol=1e-6)
    (loop,) = f.vectorization.missed
    assert not loop.vectorized and "loop k" in loop.reason


@pytest.mark.parametrize("target", BACKENDS)
def test_a_loop_not_vectorized_is_no_simd_loop_on_c(target):
    """Found by the fuzzer (C seed 8201, case 91; on main before it too): x_o_o
    vectorized around a loop whose trip count, min(8, 31 - 8 x_o_o), differs between
    lanes, over a padded read. gcc 12 compiled the `#pragma omp simd` loop wrong (22 of
    93 elements); a vectorized loop the plan does not vectorize is now a plain loop on
    C as on LLVM, and the warning says so on both."""
    x, c = td.dims("x c")
    a = td.input("a", {x: 31, c: 3}, td.float64)
    out = td.compute("out", {x: 31, c: 3}, -td.pad(a, -0.5)[x - 2, 2 * c])
    s = (td.schedule(out).split(out, "x", 2).tile(out, x_o=4, x_i=16)
         .fuse(out, "x_o_i", "x_i_i").vectorize(out, "x_o_o"))
    with pytest.warns(td.VectorizationWarning, match=r"out: loop x_o_o: not vectorized"):
        f = td.build(s, target=target)
    av = np.arange(1, 94, dtype=np.float64).reshape(31, 3)
    np.testing.assert_array_equal(f(a=av), td.evaluate(out, a=av))
    if target == "c":
        assert "omp simd" not in f.source


@pytest.mark.parametrize("target", BACKENDS)
def test_kernel_without_vectorized_loops_reports_none(target):
    x = td.dim("x")
    a = td.input("a", {x: 10}, td.int32)
    out = td.compute("out", {x: 10}, a[x] + 1)
    f = build(td.schedule(out), target)
    assert len(f.vectorization) == 0 and str(f.vectorization) == "no vectorized loops"


def test_copies_of_one_loop_are_counted_once():
    i, j, k = td.dims("i j k")
    N = td.size("N")
    a = td.input("a", {i: N, k: 16}, td.float32)
    b = td.input("b", {k: 16, j: 32}, td.float32)
    c = td.compute("c", {i: N, j: 32}, td.sum(a[i, k] * b[k, j], over=k))
    s = td.schedule(c).tile(c, i=4, j=16).reorder(c, "i_o j_o k i_i j_i")
    s = s.vectorize(c, "j_i").unroll(c, "i_i")
    report = vectors.report(finish(lower_schedule(s, late=False)))
    assert all(x.vectorized for x in report) and sum(x.copies for x in report) == 16
    assert len(report) < 16 and "copies" in str(report)


# A kernel with a condition that differs between lanes: a boundary view partitions the
# loop, a where() selects, and a split of a symbolic size guards its tail.
@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 40), factor=st.sampled_from([2, 3, 4, 8, 16, 24]),
       dtype=st.sampled_from([td.float32, td.int32, td.uint8, td.float64]),
       shift=st.integers(-3, 3))
def test_masked_vector_code_matches_numpy(n, factor, dtype, shift):
    x = td.dim("x")
    N = td.size("N")
    a = td.input("a", {x: N}, dtype)
    view = td.clamp(a)
    out = td.compute("out", {x: N}, td.where(view[x + shift] > view[x], view[x + shift], a[x]))
    s = td.schedule(out).split(out, "x", factor).vectorize(out, "x_i")
    av = (rng.standard_normal(n) * 50).astype(dtype.np)
    want = td.evaluate(out, a=av)
    for target in BACKENDS:
        f = build(s, target)
        np.testing.assert_array_equal(f(a=av), want)
        assert all(loop.vectorized for loop in f.vectorization), str(f.vectorization)


@pytest.mark.parametrize("target", BACKENDS)
def test_padded_read_in_a_boundary_chunk_is_a_masked_load(target):
    # the chunks at either end read through td.pad: select(0 <= x + d < 32, a[clamp], 0)
    # is a contiguous load masked by the condition, not a gather of clamped indices
    x = td.dim("x")
    a = td.input("a", {x: 32}, td.float32)
    p = td.pad(a, 0.5)
    out = td.compute("out", {x: 32}, p[x - 1] + p[x] * 2 + p[x + 1] * 3)
    s = td.schedule(out).split(out, "x", 8).vectorize(out, "x_i")
    f = build(s, target)
    av = rng.standard_normal(32).astype(np.float32)
    q = np.pad(av, 1, constant_values=0.5)
    np.testing.assert_allclose(f(a=av), q[:-2] + q[1:-1] * 2 + q[2:] * 3, rtol=1e-5, atol=1e-6)
    text = str(f.vectorization)
    assert "nonaffine" not in text and "gather" not in text, text
    assert sum(a.masked for loop in f.vectorization for a in loop.accesses) == 2, text
    if target == "llvm":
        assert "llvm.masked.load" in f.source and "llvm.masked.gather" not in f.source


def test_guarded_arm_drops_only_the_clamps_its_condition_proves():
    i, n = ir.Var("i"), ir.Var("N")
    buf = ir.Buffer("a", td.float32, (n,), "input")

    def idx(k: int) -> ir.Expr:
        return ir.Binary("add", i, ir.index_const(k), dt.index) if k else i

    def sel(cond: ir.Expr, index: ir.Expr) -> ir.Select:
        return ir.Select(cond, ir.Load(buf, (index,)), ir.Const(0.0, td.float32), td.float32)

    zero, last = ir.index_const(0), ir.Binary("sub", n, ir.index_const(1), dt.index)
    lo = ir.Binary("max", idx(-1), zero, dt.index)  # max(i - 1, 0)
    both = ir.Binary("min", lo, last, dt.index)  # min(max(i - 1, 0), N - 1)
    ge = ir.Compare("ge", idx(-1), zero)  # i - 1 >= 0
    lt = ir.Compare("lt", idx(-1), n)  # i - 1 < N
    cases = [
        (sel(ge, lo), idx(-1)),
        (sel(ir.Compare("gt", i, zero), lo), idx(-1)),  # i > 0 says i - 1 >= 0
        (sel(ir.Binary("and", ge, lt, dt.bool_), both), idx(-1)),
        (sel(ge, both), ir.Binary("min", idx(-1), last, dt.index)),  # one side proved
        (sel(ir.Compare("ge", i, zero), lo), None),  # i >= 0 does not say i - 1 >= 0
        (sel(lt, lo), None),
    ]
    for select, want in cases:
        got = vectors.guarded_arm(select, lambda e: True)
        if want is None:
            assert got is None, select
        else:
            assert got is not None and got[0] == ir.Load(buf, (want,)), (select, got)
            assert got[1] == frozenset({got[0]})
    # an index that becomes the same in every lane keeps its clamp: it is loaded unmasked
    assert vectors.guarded_arm(cases[0][0], lambda e: False) is None


# Reads through td.pad in two dimensions: whole rows outside the image (a condition the
# same in every lane), boundary chunks (one that differs), and a symbolic width.
@settings(max_examples=25, deadline=None)
@given(h=st.integers(1, 9), w=st.integers(1, 40), factor=st.sampled_from([2, 4, 8, 16, 24]),
       dtype=st.sampled_from([td.float32, td.int32, td.uint8, td.float64]),
       dy=st.integers(-3, 3), dx=st.integers(-3, 3), symbolic=st.booleans())
def test_padded_vector_code_matches_numpy(h, w, factor, dtype, dy, dx, symbolic):
    y, x = td.dims("y x")
    W = td.size("W") if symbolic else w
    a = td.input("a", {y: h, x: W}, dtype)
    p = td.pad(a, 7)
    out = td.compute("out", {y: h, x: W}, p[y + dy, x + dx] + p[y, x - dx] + p[y - dy, x])
    s = td.schedule(out).split(out, "x", factor).vectorize(out, "x_i")
    av = (rng.standard_normal((h, w)) * 50).astype(dtype.np)
    want = td.evaluate(out, a=av)
    for target in BACKENDS:
        f = build(s, target)
        np.testing.assert_array_equal(f(a=av), want)
        assert all(loop.vectorized for loop in f.vectorization), str(f.vectorization)


def test_kernel_shows_its_vectorized_loops_in_jupyter():
    i, k = td.dims("i k")
    a = td.input("a", {k: 16}, td.float32)
    out = td.compute("out", {i: 16}, td.sum(a[k], over={k: (0, i + 1)}))
    twice = td.compute("twice", {k: 16}, a[k] * 2)
    html = build(td.schedule(twice).vectorize(twice, "k"), "llvm")._repr_html_()
    assert "<summary>Vectorized loops (1)</summary>" in html
    assert "twice: loop k: vectorized, 16 lanes (2 contiguous)" in html
    with pytest.warns(td.VectorizationWarning):
        f = td.build(td.schedule(out).vectorize(out, "i"), target="llvm")
    html = f._repr_html_()
    assert "<details open><summary>Vectorized loops (1, 1 not vectorized)</summary>" in html
    assert "out: loop i: not vectorized (the bounds of loop k inside it differ" in html


# ------------------------------------------- loops no schedule vectorized (both backends)


def lanes_of(dtype) -> int:
    from tdsl.backend_llvm.host import host_vector_bytes

    return host_vector_bytes() // dtype.itemsize


@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize("n", [1, 5, 17, 64])
def test_unscheduled_matmul_runs_its_j_loop_as_vector_code(n, target):
    """The compilers' loop vectorizers leave the j loop around the k reduction scalar;
    the backends vectorize it themselves (its iterations are independent: each writes
    its own C[i, j]): LLVM in chunks of the host's width with a masked last one, host
    C as a `#pragma omp simd` loop."""
    i, j, k = td.dims("i j k")
    N = td.size("N")
    A = td.input("A", {i: N, k: N}, td.float32)
    B = td.input("B", {k: N, j: N}, td.float32)
    C = td.compute("C", {i: N, j: N}, td.sum(A[i, k] * B[k, j], over=k))
    f = build(td.schedule(C), target)
    if target == "llvm":
        assert f"<{lanes_of(td.float32)} x float>" in f.source
    else:
        assert "#pragma omp simd\n        for (int64_t j = 0;" in f.source
    assert len(f.vectorization) == 0  # the report lists the schedule's vectorized loops
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    np.testing.assert_allclose(f(A=a, B=b), a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_a_loop_reading_what_another_iteration_writes_stays_scalar(target):
    """Forward substitution reads x[j] for j < i while iteration i writes x[i]: not
    independent, so its i loop stays a scalar loop, and exact."""
    i, j = td.dims("i j")
    n = 40
    L = td.input("L", {i: n, j: n}, td.float64)
    b = td.input("b", {i: n}, td.float64)
    x = td.compute("x", {i: n}, b[i])
    td.update(x[i], (x[i] - td.sum(L[i, j] * x[j], over={j: (0, i)})) / L[i, i], over={i: n})
    f = build(td.schedule(x), target)
    assert " x double>" not in f.source and "omp simd" not in f.source
    lv = np.tril(rng.standard_normal((n, n))) + n * np.eye(n)
    bv = rng.standard_normal(n)
    np.testing.assert_allclose(f(L=lv, b=bv), np.linalg.solve(lv, bv), rtol=1e-10)


@pytest.mark.parametrize("width", [56, 48, 9, 3])
def test_c_gives_the_lanes_left_over_a_simd_loop_of_their_own(width):
    """An unscheduled 3x3 convolution: the x loop around the taps is a simd loop on
    host C, split where it is not a whole number of vectors of the plan's widest chunk
    (gcc would finish a vectorized outer loop's last lanes one by one)."""
    c, y, x, ry, rx = td.dims("c y x ry rx")
    inp = td.input("inp", {c: 3, y: 5, x: width}, td.float32)
    wt = td.input("w", {c: 3, ry: 3, rx: 3}, td.float32)
    out = td.compute("out", {y: 5, x: width}, td.sum(
        td.pad(inp, 0.0)[c, y + ry - 1, x + rx - 1] * wt[c, ry, rx], over=(c, ry, rx)))
    f = build(td.schedule(out), "c")
    loops = re.findall(r"#pragma omp simd\n\s*for \(int64_t x = (\d+); x < (\d+);", f.source)
    lanes = min(16, 1 << (width.bit_length() - 1))  # the plan's widest chunk
    whole = width // lanes * lanes
    # a single lane left over is a loop of one iteration, not a simd loop
    pieces = [(0, whole)] + ([(whole, width)] if width - whole > 1 else [])
    assert [(int(a), int(b)) for a, b in loops] == pieces
    # the pad's select inside the taps' loops stays `?:` (there gcc makes it a masked load)
    assert "blend_" not in f.source
    iv = rng.standard_normal((3, 5, width)).astype(np.float32)
    wv = rng.standard_normal((3, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(f(inp=iv, w=wv), td.evaluate(out, inp=iv, w=wv), rtol=1e-5,
                               atol=1e-5)


def _extremes(dtype, n: int) -> np.ndarray:
    """n values of `dtype` that a wrong select would change: a type's extremes, signed
    zeros, NaN and infinities, then random ones."""
    np_type = dtype.np
    if np_type.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if np_type.kind == "f":
        special = [np.nan, -0.0, 0.0, np.inf, -np.inf, np.finfo(np_type).max,
                   np.finfo(np_type).tiny]
        rest = rng.standard_normal(n).astype(np_type)
    else:
        info = np.iinfo(np_type)
        special = [info.min, info.max, 0, -1 if info.min < 0 else 1, info.min + 1]
        rest = rng.integers(info.min, info.max, n, dtype=np_type, endpoint=True)
    return np.concatenate([np.array(special, np_type), rest])[:n]


@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize("dtype", [td.float32, td.float64, td.float16, td.int8, td.uint8,
                                   td.int16, td.uint16, td.int32, td.uint32, td.int64,
                                   td.uint64, td.bool_])
def test_a_select_after_an_inner_loop_is_a_blend_on_c(dtype, target):
    """out = where(sum over k > t, x, y): the j loop around the sum is vector code, and on
    host C the select after the k loop is a branch-free blend (`helpers.BLEND`; gcc 12
    leaves a loop around loops scalar if its body has other control flow), exact for
    every type: NaN, signed zeros and the extremes pass through bit for bit."""
    i, j, k = td.dims("i j k")
    n, m, kk = 3, 37, 64
    A = td.input("A", {i: n, k: kk}, td.float32)
    B = td.input("B", {k: kk, j: m}, td.float32)
    T = td.input("T", {j: m}, td.float32)
    X = td.input("X", {i: n, j: m}, dtype)
    Y = td.input("Y", {i: n, j: m}, dtype)
    out = td.compute("out", {i: n, j: m},
                     td.where(td.sum(A[i, k] * B[k, j], over=k) > T[j], X[i, j], Y[i, j]))
    f = build(td.schedule(out), target)
    if target == "c":
        assert re.search(r"#pragma omp simd\n\s*for \(int64_t j = 0;", f.source)
        assert f"{helpers.BLEND[helpers.SUFFIX[dtype.name]]}(" in f.source
    # small integers: the sums are exact, so the condition is numpy's at every element
    arrays = dict(A=rng.integers(-3, 4, (n, kk)).astype(np.float32),
                  B=rng.integers(-3, 4, (kk, m)).astype(np.float32),
                  T=rng.integers(-6, 6, m).astype(np.float32) + 0.5,
                  X=_extremes(dtype, n * m).reshape(n, m),
                  Y=_extremes(dtype, n * m)[::-1].reshape(n, m).copy())
    got = f(**arrays)
    want = td.evaluate(out, **arrays)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


@pytest.mark.parametrize("target", BACKENDS)
def test_nan_keeping_relu_after_a_matmul_is_vector_code_on_c(target):
    """maximum(sum + b, 0) keeps NaN, as numpy's: legalised into selects (x != x, x > 0)
    after the k loop, blends on host C, so the h loop around the sum is vector code
    there too (mlp with no schedule: 273 -> 22 ms on C)."""
    b, n, h = td.dims("b n h")
    X = td.input("X", {b: 4, n: 64}, td.float32)
    W = td.input("W", {n: 64, h: 40}, td.float32)
    bias = td.input("bias", {h: 40}, td.float32)
    hid = td.compute("hid", {b: 4, h: 40},
                     td.maximum(td.sum(X[b, n] * W[n, h], over=n) + bias[h], 0.0))
    f = build(td.schedule(hid), target)
    if target == "c":
        body = f.source.split("int tdsl_hid(")[1]
        assert "blend_f32(" in body and " ? " not in body
    xv = rng.standard_normal((4, 64)).astype(np.float32)
    wv = rng.standard_normal((64, 40)).astype(np.float32)
    bv = rng.standard_normal(40).astype(np.float32)
    bv[[0, 7, 33]] = np.nan
    bv[[1, 2]] = [np.inf, -np.inf]
    np.testing.assert_allclose(f(X=xv, W=wv, bias=bv), np.maximum(xv @ wv + bv, 0),
                               rtol=1e-5, atol=1e-6)


def _loop(index, extra: list | None = None) -> ir.For:
    """for j in 0..64: for k in 0..8: out[index] = out[index] + a[k] (+ extra stores)."""
    from tdsl import dtypes

    f32, idx = dtypes.float32, dtypes.index
    out = ir.Buffer("out", f32, (ir.Const(128, idx),), "output")
    a = ir.Buffer("a", f32, (ir.Const(8, idx),), "input")
    k = ir.Var("k")
    body = ir.Store(out, (index,), ir.Binary("add", ir.Load(out, (index,)),
                                             ir.Load(a, (k,)), f32))
    stmts = [body] + (extra or [])
    inner = ir.For("k", ir.Const(0, idx), ir.Const(8, idx), ir.ForKind.SERIAL,
                   ir.Block(tuple(stmts)))
    return ir.For("j", ir.Const(0, idx), ir.Const(64, idx), ir.ForKind.SERIAL, inner, 64)


def test_independence_test():
    from tdsl import dtypes

    idx = dtypes.index
    j, k = ir.Var("j"), ir.Var("k")
    two_j = ir.Binary("mul", ir.Const(2, idx), j, idx)
    assert vectors.independent(_loop(j))
    assert vectors.independent(_loop(two_j))  # stride 2: still one element each
    assert not vectors.independent(_loop(ir.Binary("add", j, k, idx)))  # k is inner
    assert not vectors.independent(_loop(ir.Const(3, idx)))  # every iteration, one element
    out = ir.Buffer("out", dtypes.float32, (ir.Const(128, idx),), "output")
    other = ir.Store(out, (ir.Binary("add", j, ir.Const(1, idx), idx),), ir.Const(0.0,
                                                                                 dtypes.float32))
    assert not vectors.independent(_loop(j, [other]))  # out written at two indices
    read = ir.Store(out, (j,), ir.Load(out, (ir.Binary("add", j, ir.Const(1, idx), idx),)))
    assert not vectors.independent(_loop(j, [read]))  # reads what iteration j + 1 writes
    plan = vectors.auto_vector_plan(_loop(j), 64)  # 16 float32 lanes
    assert plan is not None and plan.chunks == (16, 16, 16, 16)
    assert vectors.auto_vector_plan(_loop(two_j), 64) is None  # strided: not worth it


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_unscheduled_pipelines_match_numpy(data):
    """Random pipelines with no schedule at all, where the backends pick the loops they
    vectorize themselves."""
    from strategies import pipelines

    case = data.draw(pipelines(), label="pipeline")
    want = td.evaluate(case.outputs[0], **case.arrays)
    for target in ("c", "llvm"):
        got = build(td.schedule(list(case.outputs)), target)(**case.arrays)
        if want.dtype.kind == "f":
            tol = 1e-4 if want.dtype == np.float32 else 1e-9
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(got, want)
