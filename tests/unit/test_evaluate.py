"""The numpy reference evaluator and argument binding, against hand-written numpy."""

from __future__ import annotations

import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tdsl as td
from tdsl.compute.binding import allocate_outputs, bind_arguments, eval_extent
from tdsl.compute.evaluate import evaluate
from tdsl.compute.pipeline import Pipeline
from tdsl.errors import ArgumentError, DefinitionError

rng = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def assert_same(got, want):
    """Equal values, and the same dtype and shape."""
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- pipelines


def test_matmul_is_a_sequential_sum():
    i, j, k = td.dims("i j k")
    N = td.size("N")
    A = td.input("A", {i: N, k: 13}, td.float32)
    B = td.input("B", {k: 13, j: 7}, td.float32)
    C = td.compute("C", {i: N, j: 7}, td.sum(A[i, k] * B[k, j], over=k))
    a, b = rand(5, 13), rand(13, 7)
    want = np.zeros((5, 7), np.float32)
    for kk in range(13):
        want += a[:, kk : kk + 1] * b[kk : kk + 1, :]
    c = evaluate(C, A=a, B=b)
    assert_same(c, want)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_matmul_writes_into_a_given_output():
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: 4, k: 3}, td.int32)
    B = td.input("B", {k: 3, j: 2}, td.int32)
    C = td.compute("C", {i: 4, j: 2}, td.sum(A[i, k] * B[k, j], over=k))
    a = rng.integers(-9, 9, (4, 3), dtype=np.int32)
    b = rng.integers(-9, 9, (3, 2), dtype=np.int32)
    c = np.full((4, 2), 99, np.int32)
    got = evaluate(C, A=a, B=b, C=c)
    assert got is c
    assert_same(c, a @ b)


def test_two_stage_blur_over_the_valid_region():
    x, y = td.dims("x y")
    W, H = td.size("W"), td.size("H")
    inp = td.input("inp", {x: W, y: H}, td.float32)
    bx = td.compute("bx", {x: W - 2, y: H}, (inp[x, y] + inp[x + 1, y] + inp[x + 2, y]) / 3)
    by = td.compute("by", {x: W - 2, y: H - 2}, (bx[x, y] + bx[x, y + 1] + bx[x, y + 2]) / 3)
    a = rand(9, 6)
    three = np.float32(3)
    h = (a[:-2] + a[1:-1] + a[2:]) / three
    want = (h[:, :-2] + h[:, 1:-1] + h[:, 2:]) / three
    assert_same(evaluate(by, inp=a), want)


def test_softmax_in_separate_stages():
    i, j = td.dims("i j")
    N, M = td.size("N"), td.size("M")
    X = td.input("X", {i: N, j: M}, td.float32)
    mx = td.compute("mx", {i: N}, td.max(X[i, j], over=j))
    e = td.compute("e", {i: N, j: M}, td.exp(X[i, j] - mx[i]))
    s = td.compute("s", {i: N}, td.sum(e[i, j], over=j))
    out = td.compute("out", {i: N, j: M}, e[i, j] / s[i])
    x = rand(4, 11)
    ex = np.exp(x - x.max(axis=1, keepdims=True))
    total = np.zeros(4, np.float32)
    for jj in range(11):
        total += ex[:, jj]
    got_out, got_mx = evaluate((out, mx), X=x)
    assert_same(got_out, ex / total[:, None])
    assert_same(got_mx, x.max(axis=1))
    np.testing.assert_allclose(got_out.sum(axis=1), 1, rtol=1e-6)


def test_clamp_view_repeats_the_edge():
    x = td.dim("x")
    N = td.size("N")
    A = td.input("A", {x: N}, td.int32)
    c = td.clamp(A)
    out = td.compute("out", {x: N}, c[x - 1] + 10 * c[x] + 100 * c[x + 2])
    a = np.arange(1, 6, dtype=np.int32)
    p = np.pad(a, 2, mode="edge")
    assert_same(evaluate(out, A=a), p[1:-3] + 10 * p[2:-2] + 100 * p[4:])


def test_pad_view_reads_the_value_outside():
    x, y = td.dims("x y")
    A = td.input("A", {x: 4, y: 3}, td.float64)
    p = td.pad(A, -7.5)
    out = td.compute("out", {x: 4, y: 3}, p[x - 1, y] + p[x, y + 1] * 2)
    a = rand(4, 3, dtype=np.float64)
    q = np.pad(a, 1, constant_values=-7.5)
    assert_same(evaluate(out, A=a), q[0:-2, 1:-1] + q[1:-1, 2:] * 2)


def test_triangular_reduction():
    i, k = td.dims("i k")
    M = td.size("M")
    A = td.input("A", {i: M, k: M}, td.float32)
    b = td.input("b", {k: M}, td.float32)
    upper = td.compute("upper", {i: M}, td.sum(A[i, k] * b[k], over={k: (i + 1, M)}))
    a, v = rand(6, 6), rand(6)
    want = np.zeros(6, np.float32)
    for ii in range(6):
        for kk in range(ii + 1, 6):
            want[ii] += a[ii, kk] * v[kk]
    got = evaluate(upper, A=a, b=v)
    assert_same(got, want)
    assert got[5] == 0  # the empty reduction is the identity


def test_reduction_bounds_depend_on_earlier_reduction_dims():
    i, k, m = td.dims("i k m")
    x = td.input("x", {i: 5}, td.int64)
    # out[i] = sum over 0 <= k < i + 1, k <= m < i + 1 of x[k] * x[m]
    out = td.compute(
        "out", {i: 5}, td.sum(x[k] * x[m] + x[i - k], over={k: (0, i + 1), m: (k, i + 1)})
    )
    v = np.array([3, -1, 4, 1, -5], np.int64)
    want = [
        sum(v[kk] * v[mm] + v[ii - kk] for kk in range(ii + 1) for mm in range(kk, ii + 1))
        for ii in range(5)
    ]
    assert_same(evaluate(out, x=v), np.array(want, np.int64))


def test_empty_max_reduction_is_minus_infinity():
    i, k = td.dims("i k")
    A = td.input("A", {i: 3}, td.float32)
    out = td.compute("out", {i: 3}, td.max(A[k], over={k: (0, i)}))
    a = np.array([2, 9, 1], np.float32)
    assert_same(evaluate(out, A=a), np.array([-np.inf, 2, 9], np.float32))


def test_reduction_propagates_nan_like_numpy():
    i, k = td.dims("i k")
    A = td.input("A", {i: 2, k: 3}, td.float64)
    out = td.compute("out", {i: 2}, td.max(A[i, k], over=k))
    a = np.array([[1, np.nan, 3], [4, 5, 6]])
    assert_same(evaluate(out, A=a), np.maximum.reduce(a, axis=1))


def test_integer_sum_wraps_in_the_accumulator_dtype():
    k = td.dim("k")
    i = td.dim("i")
    A = td.input("A", {k: 4}, td.uint8)
    out = td.compute("out", {i: 1}, td.sum(A[k], over=k))
    wide = td.compute("wide", {i: 1}, td.sum(A[k], over=k, dtype=td.int32))
    a = np.array([200, 100, 7, 1], np.uint8)
    got, got_wide = evaluate([out, wide], A=a)
    assert_same(got, np.array([52], np.uint8))
    assert_same(got_wide, np.array([308], np.int32))


def test_data_dependent_lookup_through_clamp_is_clamped():
    x, v = td.dims("x v")
    N = td.size("N")
    lut = td.input("lut", {v: 4}, td.float32)
    img = td.input("img", {x: N}, td.uint8)
    idx = td.input("idx", {x: N}, td.int16)
    out = td.compute("out", {x: N}, td.clamp(lut)[img[x]] + 10 * td.clamp(lut)[idx[x] - 2])
    table = np.array([0.5, 1.5, 2.5, 3.5], np.float32)
    im = np.array([0, 3, 1, 250, 2], np.uint8)
    ix = np.array([-30, 2, 5, 3, 4], np.int16)
    want = table[np.clip(im, 0, 3)] + 10 * table[np.clip(ix.astype(np.int64) - 2, 0, 3)]
    assert_same(evaluate(out, lut=table, img=im, idx=ix), want)


def test_data_dependent_index_out_of_range_is_an_argument_error():
    # as numpy's IndexError: which tensor, which index, which point (the first in order)
    x, v = td.dims("x v")
    lut = td.input("lut", {v: 4}, td.float32)
    img = td.input("img", {x: 5}, td.uint8)
    out = td.compute("out", {x: 5}, lut[img[x]])
    table = np.array([0.5, 1.5, 2.5, 3.5], np.float32)
    with pytest.raises(td.ArgumentError, match=r"lut\[img\[x\]\] reads lut at a data-dependent "
                                               r"index 250 .* at x=3; valid indices are 0..3"):
        evaluate(out, lut=table, img=np.array([0, 3, 1, 250, 9], np.uint8))
    hist = td.compute("hist", {v: 4}, td.cast(0, td.int32))
    td.update(hist[img[x]], hist[img[x]] + 1, over={x: 5})
    with pytest.raises(td.ArgumentError, match=r"the target hist\[img\[x\]\] writes hist at "
                                               r"a data-dependent index 7 .* at x=2"):
        evaluate(hist, img=np.array([0, 3, 7, 2, 9], np.uint8))


def test_dims_and_sizes_are_int32_values():
    x, y = td.dims("x y")
    N = td.size("N")
    A = td.input("A", {x: N, y: 3}, td.int8)
    out = td.compute("out", {x: N, y: 3}, x * 10 + y + N + A[x, y])
    a = rng.integers(-100, 100, (4, 3), dtype=np.int8)
    xs, ys = np.ogrid[0:4, 0:3]
    want = xs.astype(np.int32) * 10 + ys.astype(np.int32) + np.int32(4) + a
    assert_same(evaluate(out, A=a), want)


def test_affine_index_out_of_range_is_an_error():
    x = td.dim("x")
    A = td.input("A", {x: 5}, td.float32)
    out = td.compute("shifted", {x: 5}, A[x + 1])
    with pytest.raises(DefinitionError) as e:
        evaluate(out, A=rand(5))
    msg = str(e.value)
    for word in ("'shifted'", "A[x + 1]", "index 5", "0..4", "td.clamp(A)"):
        assert word in msg


def test_masked_reduction_points_are_not_range_checked():
    i, k = td.dims("i k")
    A = td.input("A", {i: 4}, td.int32)
    # A[i - k] would be out of range for k > i, but those points are outside the domain
    out = td.compute("out", {i: 4}, td.sum(A[i - k], over={k: (0, i + 1)}))
    a = np.array([1, 2, 4, 8], np.int32)
    assert_same(evaluate(out, A=a), np.cumsum(a).astype(np.int32))


def test_several_outputs_return_a_tuple_in_the_given_order():
    x = td.dim("x")
    A = td.input("A", {x: 3}, td.int32)
    P = td.compute("P", {x: 3}, A[x] + 1)
    Q = td.compute("Q", {x: 3}, P[x] * 2)
    a = np.array([1, 2, 3], np.int32)
    q, p = evaluate((Q, P), A=a)
    assert_same(p, a + 1)
    assert_same(q, (a + 1) * 2)


# ---------------------------------------------------------------- numpy arithmetic


def run(fn, *arrays):
    x = td.dim("x")
    N = td.size("N")
    ins = [td.input(f"a{n}", {x: N}, a.dtype) for n, a in enumerate(arrays)]
    out = td.compute("out", {x: N}, fn(*(t[x] for t in ins)))
    return evaluate(out, **{f"a{n}": a for n, a in enumerate(arrays)})


def test_uint16_addition_wraps():
    a = np.array([65535, 40000, 1], np.uint16)
    b = np.array([1, 40000, 2], np.uint16)
    assert_same(run(operator.add, a, b), np.array([0, 14464, 3], np.uint16))


def test_int8_multiplication_wraps():
    a = np.array([100, -128, 7], np.int8)
    b = np.array([3, -1, 5], np.int8)
    assert_same(run(operator.mul, a, b), np.array([44, -128, 35], np.int8))


def test_true_division_of_ints_is_float64():
    a = np.array([7, -7, 1], np.int32)
    b = np.array([2, 2, 3], np.int32)
    assert_same(run(operator.truediv, a, b), np.array([3.5, -3.5, 1 / 3]))


def test_floor_division_and_modulo_of_negative_ints():
    a = np.array([7, -7, 7, -7], np.int16)
    b = np.array([2, 2, -2, -2], np.int16)
    assert_same(run(operator.floordiv, a, b), np.array([3, -4, -4, 3], np.int16))
    assert_same(run(operator.mod, a, b), np.array([1, 1, -1, -1], np.int16))


def test_integer_division_by_zero_gives_zero():
    a = np.array([5, -5, 0], np.int32)
    b = np.zeros(3, np.int32)
    assert_same(run(operator.floordiv, a, b), np.zeros(3, np.int32))
    assert_same(run(operator.mod, a, b), np.zeros(3, np.int32))


def test_float_division_by_zero_gives_inf_and_nan():
    a = np.array([1, -1, 0], np.float32)
    b = np.zeros(3, np.float32)
    assert_same(run(operator.truediv, a, b), np.array([np.inf, -np.inf, np.nan], np.float32))


def test_python_scalars_are_weak():
    a = np.array([250, 3], np.uint8)
    assert_same(run(lambda t: t + 10, a), np.array([4, 13], np.uint8))
    f = np.array([0.1, 2.0], np.float32)
    assert_same(run(lambda t: t * 0.1, f), f * 0.1)
    assert_same(run(lambda t: 3 - t, a), np.uint8(3) - a)


def test_mixed_dtypes_promote_as_numpy_arrays_do():
    a = np.array([-100, 100], np.int8)
    b = np.array([200, 200], np.uint8)
    assert_same(run(operator.add, a, b), np.array([100, 300], np.int16))
    f = np.array([0.5, 1.5], np.float32)
    i = np.array([1, 2], np.int32)
    assert_same(run(operator.mul, f, i), f * i)  # float64


def test_compare_select_cast_and_math():
    a = np.array([-2.5, 0.0, 1.5, 300.7], np.float32)
    got = run(lambda t: td.where(t > 0, td.cast(t, td.uint8), td.cast(-t, td.uint8)), a)
    assert_same(got, np.where(a > 0, a.astype(np.uint8), (-a).astype(np.uint8)))
    assert_same(
        run(lambda t: td.sqrt(td.abs(t)) + td.floor(t), a), np.sqrt(np.abs(a)) + np.floor(a)
    )
    b = np.array([True, False])
    assert_same(run(lambda t: ~t, b), ~b)
    n = np.array([-128, 5], np.int8)
    assert_same(run(lambda t: -t, n), -n)
    assert_same(run(lambda t: td.abs(t), n), np.abs(n))


INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"]
INT_OPS = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
    "maximum": np.maximum,
    "minimum": np.minimum,
}
TD_OPS = dict(INT_OPS, maximum=td.maximum, minimum=td.minimum)


@st.composite
def int_operands(draw):
    n = draw(st.integers(1, 6))
    arrays = []
    for _ in range(2):
        dtype = np.dtype(draw(st.sampled_from(INT_DTYPES)))
        arrays.append(draw(hnp.arrays(dtype, n)))
    return arrays


@settings(max_examples=300, deadline=None)
@given(ab=int_operands(), op=st.sampled_from(sorted(INT_OPS)))
def test_integer_arithmetic_matches_numpy(ab, op):
    a, b = ab
    with np.errstate(all="ignore"):
        want = INT_OPS[op](a, b)
    assert_same(run(TD_OPS[op], a, b), want)


@settings(max_examples=200, deadline=None)
@given(
    a=hnp.arrays(st.sampled_from(INT_DTYPES).map(np.dtype), st.integers(1, 6)),
    s=st.integers(-3, 300),
    op=st.sampled_from(["+", "-", "*", "//", "%", "&", "|", "^"]),
)
def test_integer_arithmetic_with_a_python_scalar_matches_numpy(a, s, op):
    info = np.iinfo(a.dtype)
    if not info.min <= s <= info.max:
        s = int(info.max)
    with np.errstate(all="ignore"):
        want = INT_OPS[op](a, s)
    assert_same(run(lambda t: INT_OPS[op](t, s), a), want)


# ---------------------------------------------------------------- argument mistakes


@pytest.fixture
def mm():
    i, j, k = td.dims("i j k")
    N = td.size("N")
    A = td.input("A", {i: N, k: 3}, td.float32)
    B = td.input("B", {k: 3, j: N}, td.float32)
    C = td.compute("C", {i: N, j: N}, td.sum(A[i, k] * B[k, j], over=k))
    return C


def bad(outputs, **kwargs) -> str:
    with pytest.raises(ArgumentError) as e:
        evaluate(outputs, **kwargs)
    return str(e.value)


def test_unknown_argument_lists_the_valid_names(mm):
    msg = bad(mm, A=rand(2, 3), B=rand(3, 2), Bee=1)
    for word in ("unknown argument 'Bee'", "inputs A, B", "outputs C", "sizes N"):
        assert word in msg


def test_intermediate_stage_is_not_an_argument():
    x = td.dim("x")
    A = td.input("A", {x: 3}, td.int32)
    T = td.compute("T", {x: 3}, A[x] + 1)
    out = td.compute("out", {x: 3}, T[x] * 2)
    msg = bad(out, A=np.zeros(3, np.int32), T=np.zeros(3, np.int32))
    assert "'T' is an intermediate stage" in msg and "outputs out" in msg


def test_outputs_refused_when_not_allowed(mm):
    kwargs = dict(A=rand(2, 3), B=rand(3, 2), C=np.zeros((2, 2), np.float32))
    with pytest.raises(ArgumentError, match="output 'C' cannot be passed here"):
        bind_arguments(Pipeline(mm), kwargs, allow_outputs=False)


def test_missing_input(mm):
    msg = bad(mm, A=rand(2, 3))
    assert "missing input(s) 'B'" in msg and "float32" in msg and "k: 3" in msg


def test_not_a_numpy_array(mm):
    msg = bad(mm, A=[[1.0, 2.0, 3.0]], B=rand(3, 1))
    assert "input 'A' must be a numpy array" in msg and "got list" in msg
    assert "np.asarray(A, dtype=np.float32)" in msg


def test_wrong_dtype_is_refused_not_cast(mm):
    msg = bad(mm, A=rand(2, 3, dtype=np.float64), B=rand(3, 2))
    assert "input 'A' has dtype float64 but must be float32" in msg
    assert "A.astype(np.float32)" in msg


def test_wrong_dtype_of_an_output(mm):
    msg = bad(mm, A=rand(2, 3), B=rand(3, 2), C=np.zeros((2, 2), np.int32))
    assert "output 'C' has dtype int32 but must be float32" in msg


def test_wrong_ndim_lists_the_dims(mm):
    msg = bad(mm, A=rand(6), B=rand(3, 2))
    assert "input 'A' has 1 dimension(s)" in msg and "must have 2: (i, k)" in msg


def test_shape_mismatch_against_a_constant_extent(mm):
    msg = bad(mm, A=rand(2, 4), B=rand(3, 2))
    assert "input 'A' has length 4 on axis 1 (dim k) but must have 3" in msg


def test_shape_mismatch_against_a_derived_extent():
    x = td.dim("x")
    W = td.size("W")
    inp = td.input("inp", {x: W}, td.float32)
    out = td.compute("out", {x: W - 2}, inp[x] + inp[x + 2])
    msg = bad(out, inp=rand(8), out=np.zeros(8, np.float32))
    assert "output 'out' has length 8 on axis 0 (dim x) but must have W - 2 = 6" in msg
    assert "W = 8" in msg


def test_inconsistent_sizes_name_both_arguments(mm):
    msg = bad(mm, A=rand(2, 3), B=rand(3, 5))
    assert "inconsistent size N" in msg
    assert "input 'A' has length 2 on axis 0 (dim i)" in msg
    assert "input 'B' has length 5 on axis 1 (dim j)" in msg


def test_given_size_inconsistent_with_a_shape(mm):
    msg = bad(mm, A=rand(2, 3), B=rand(3, 2), N=4)
    assert "inconsistent size N: N=4 was given" in msg and "has length 2" in msg


def test_size_that_cannot_be_bound():
    x = td.dim("x")
    N = td.size("N")
    A = td.input("A", {x: 2 * N}, td.float32)
    out = td.compute("out", {x: N}, A[2 * x] + A[2 * x + 1])
    msg = bad(out, A=rand(6))
    assert "size N cannot be bound" in msg and "N=16" in msg and "A dim x" in msg
    a = rand(6)
    assert_same(evaluate(out, A=a, N=3), a[0::2] + a[1::2])


def test_size_below_one(mm):
    msg = bad(mm, A=rand(0, 3), B=rand(3, 0))
    assert "size N must be at least 1" in msg and "length 0" in msg


def test_explicit_size_below_one():
    x = td.dim("x")
    N = td.size("N")
    out = td.compute("out", {x: N}, x + 1)
    assert "size N must be at least 1, but N=0 was given" in bad(out, N=0)
    assert "size N must be an int" in bad(out, N=2.0)
    assert_same(evaluate(out, N=3), np.array([1, 2, 3], np.int32))


def test_derived_extent_below_one():
    x = td.dim("x")
    W = td.size("W")
    inp = td.input("inp", {x: W}, td.float32)
    out = td.compute("out", {x: W - 2}, inp[x] + inp[x + 2])
    msg = bad(out, inp=rand(2))
    assert "'out' dim x has extent W - 2 = 0" in msg and "at least 1" in msg


def test_non_contiguous_input_is_copied(mm):
    a = rand(3, 4)[:, ::2].T  # (2, 3), not contiguous
    b = rand(3, 2)
    c = evaluate(mm, A=a, B=b)
    assert_same(c, evaluate(mm, A=np.ascontiguousarray(a), B=b))
    bound = bind_arguments(Pipeline(mm), dict(A=a, B=b))
    assert bound.inputs["A"].flags.c_contiguous and bound.sizes == {"N": 2}
    assert bound.outputs == {"C": None}


def test_non_contiguous_output_is_refused(mm):
    c = np.zeros((2, 4), np.float32)[:, ::2]
    msg = bad(mm, A=rand(2, 3), B=rand(3, 2), C=c)
    assert "output 'C' is not C-contiguous" in msg


def test_read_only_output_is_refused(mm):
    c = np.zeros((2, 2), np.float32)
    c.flags.writeable = False
    assert "output 'C' is read-only" in bad(mm, A=rand(2, 3), B=rand(3, 2), C=c)


def test_output_aliasing_an_input_is_refused():
    x = td.dim("x")
    A = td.input("A", {x: 4}, td.float32)
    out = td.compute("out", {x: 4}, A[x] * 2)
    a = rand(4)
    msg = bad(out, A=a, out=a)
    assert "output 'out' shares memory with input 'A'" in msg
    buf = rand(8)
    assert_same(evaluate(out, A=buf[:4], out=buf[4:]), buf[:4] * 2)


def test_allocate_outputs_and_eval_extent(mm):
    p = Pipeline(mm)
    bound = bind_arguments(p, dict(A=rand(5, 3), B=rand(3, 5)))
    c = allocate_outputs(p, bound)["C"]
    assert c.shape == (5, 5) and c.dtype == np.float32
    W = td.size("W")
    assert eval_extent(W - 2, {"W": 9}) == 7
    assert eval_extent((W + 3) // 4 * 2, {"W": 9}) == 6
    assert eval_extent(td.minimum(W, 4) % 3, {"W": 9}) == 1
    with pytest.raises(ArgumentError, match="size W is not bound"):
        eval_extent(W + 1, {})


def test_reduction_bounds_read_from_a_tensor():
    # sparse matrix-vector product in CSR form: bounds are data-dependent
    i, k = td.dims("i k")
    R, Z = td.size("R"), td.size("Z")
    rowptr = td.input("rowptr", {i: R}, td.int32)
    col = td.input("col", {k: Z}, td.int32)
    val = td.input("val", {k: Z}, td.float64)
    x = td.input("x", {i: 3}, td.float64)
    y = td.compute(
        "y", {i: R - 1}, td.sum(val[k] * x[col[k]], over={k: (rowptr[i], rowptr[i + 1])})
    )
    dense = np.array([[1.0, 0, 2], [0, 0, 0], [0, 3, 4], [5, 0, 0]])
    ptr = np.array([0, 2, 2, 4, 5], np.int32)
    cols = np.array([0, 2, 1, 2, 0], np.int32)
    vals = dense[dense != 0]
    v = np.array([0.5, -1.0, 2.0])
    assert_same(evaluate(y, rowptr=ptr, col=cols, val=vals, x=v), dense @ v)


def test_where_does_not_guard_an_out_of_range_access():
    # both sides of td.where are read at every point, as the generated code may
    x = td.dim("x")
    A = td.input("A", {x: 4}, td.int32)
    out = td.compute("out", {x: 4}, td.where(x > 0, A[x - 1], 0))
    with pytest.raises(DefinitionError, match=r"index -1 on axis 0 .* at x=0"):
        evaluate(out, A=np.arange(4, dtype=np.int32))
    safe = td.compute("safe", {x: 4}, td.where(x > 0, td.clamp(A)[x - 1], 0))
    assert_same(evaluate(safe, A=np.arange(4, dtype=np.int32)), np.array([0, 0, 1, 2], np.int32))
