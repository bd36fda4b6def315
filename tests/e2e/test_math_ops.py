"""Shifts, powers, rounding, the error function, atan2, isnan/isinf and saturating
casts: numpy's answers from td.evaluate and both backends."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tdsl as td

INTS = [td.int8, td.int16, td.int32, td.int64, td.uint8, td.uint16, td.uint32, td.uint64]


def both(out, want, backend, exact=True, rtol=0.0, **arrays):
    """td.evaluate and the kernel on `backend` give numpy's `want`."""
    for got in (td.evaluate(out, **arrays), td.build(td.schedule(out), target=backend)(**arrays)):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        if exact:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True)


def _ints(dtype, n, rng):
    info = np.iinfo(dtype.name)
    return rng.integers(int(info.min), int(info.max) + 1, n, dtype=dtype.name)


@pytest.mark.parametrize("dtype", INTS)
def test_shifts_follow_numpy_at_every_count(backend, dtype):
    # counts below 0 and at or beyond the width included: numpy shifts everything out
    rng = np.random.default_rng(dtype.bits)
    i = td.dim("i")
    bits = dtype.bits
    a = td.input("a", {i: 64}, dtype)
    n = td.input("n", {i: 64}, dtype)
    av = _ints(dtype, 64, rng)
    lo = -3 if dtype.is_signed else 0
    nv = rng.integers(lo, bits + 4, 64).astype(dtype.name)
    nv[:4] = [0, bits - 1, bits, min(bits + 3, int(np.iinfo(dtype.name).max))]
    with np.errstate(all="ignore"):
        both(td.compute("l", {i: 64}, a[i] << n[i]), np.left_shift(av, nv), backend, a=av, n=nv)
        both(td.compute("r", {i: 64}, a[i] >> n[i]), np.right_shift(av, nv), backend, a=av, n=nv)


def test_shifts_with_python_ints_and_mixed_dtypes(backend):
    i = td.dim("i")
    a = td.input("a", {i: 9}, td.int8)
    b = td.input("b", {i: 9}, td.uint16)
    av = np.array([-128, -1, 0, 1, 5, 64, 127, -7, 33], np.int8)
    bv = np.array([0, 1, 2, 3, 15, 16, 17, 7, 9], np.uint16)
    out = td.compute("out", {i: 9}, (a[i] << 3) + (a[i] >> b[i]) + (1 << b[i]) + (b[i] >> 2))
    with np.errstate(all="ignore"):
        want = (np.left_shift(av, 3) + np.right_shift(av, bv) + np.left_shift(1, bv)
                + np.right_shift(bv, 2))
    both(out, want, backend, a=av, b=bv)


def test_shift_of_a_float_is_refused():
    i = td.dim("i")
    a = td.input("a", {i: 4}, td.float32)
    with pytest.raises(td.DefinitionError, match="<< needs integer or bool operands"):
        a[i] << 2


@pytest.mark.parametrize("dtype", [td.float32, td.float64])
def test_math_functions(backend, dtype):
    i = td.dim("i")
    x = td.input("x", {i: 40}, dtype)
    xv = np.concatenate([np.linspace(-6, 6, 33), [np.nan, np.inf, -np.inf, 0.0, -0.0,
                                                  2.5, -3.5]]).astype(dtype.name)
    rtol = 4e-7 if dtype is td.float32 else 1e-15
    with np.errstate(all="ignore"):
        for fn, ref in ((td.exp2, np.exp2), (td.log2, np.log2), (td.rsqrt, lambda v: 1 / np.sqrt(v))):
            both(td.compute("o", {i: 40}, fn(x[i])), ref(xv), backend, exact=False, rtol=rtol, x=xv)
        erf = np.array([math.erf(v) for v in xv.astype(np.float64)]).astype(dtype.name)
        both(td.compute("o", {i: 40}, td.erf(x[i])), erf, backend, exact=False, rtol=rtol, x=xv)
        # round: exact, halves to even, signed zeros kept
        got = td.build(td.schedule(td.compute("o", {i: 40}, td.round(x[i]))), target=backend)(x=xv)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(np.round(xv)))
        both(td.compute("o", {i: 40}, td.round(x[i])), np.round(xv), backend, x=xv)
        both(td.compute("o", {i: 40}, td.isnan(x[i]) | td.isinf(x[i] * 2)),
             np.isnan(xv) | np.isinf(xv * dtype.np.type(2)), backend, x=xv)


@pytest.mark.parametrize("dtype", [td.float32, td.float64])
def test_atan2_and_pow(backend, dtype):
    i = td.dim("i")
    y = td.input("y", {i: 50}, dtype)
    x = td.input("x", {i: 50}, dtype)
    rng = np.random.default_rng(1)
    yv = rng.uniform(-3, 3, 50).astype(dtype.name)
    xv = rng.uniform(-3, 3, 50).astype(dtype.name)
    xv[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0]
    rtol = 4e-7 if dtype is td.float32 else 1e-15
    with np.errstate(all="ignore"):
        both(td.compute("o", {i: 50}, td.atan2(y[i], x[i])), np.arctan2(yv, xv), backend,
             exact=False, rtol=rtol, y=yv, x=xv)
        both(td.compute("o", {i: 50}, td.abs(y[i]) ** x[i]), np.abs(yv) ** xv, backend,
             exact=False, rtol=rtol, y=yv, x=xv)
        both(td.compute("o", {i: 50}, td.pow(y[i], 3.0)), np.power(yv, dtype.np.type(3)), backend,
             exact=False, rtol=rtol, y=yv)


@pytest.mark.parametrize("dtype", [td.int8, td.int32, td.uint16, td.int64])
def test_integer_power_wraps_as_numpy(backend, dtype):
    i = td.dim("i")
    a = td.input("a", {i: 30}, dtype)
    av = _ints(dtype, 30, np.random.default_rng(dtype.bits))
    for n in (0, 1, 2, 3, 7, 13):
        with np.errstate(all="ignore"):
            # (+ a - a: the pipeline reads a even when the power is the constant 1)
            both(td.compute("o", {i: 30}, a[i] ** n + (a[i] - a[i])), np.power(av, n), backend, a=av)
    with pytest.raises(td.DefinitionError, match="negative integer powers"):
        a[i] ** -1
    with pytest.raises(td.DefinitionError, match="Python int exponent"):
        a[i] ** a[i]


@pytest.mark.parametrize("src", [td.float32, td.float64, td.int32, td.int16, td.uint16])
@pytest.mark.parametrize("dst", [td.int8, td.uint8, td.int16, td.int64])
def test_saturating_cast(backend, src, dst):
    i = td.dim("i")
    x = td.input("x", {i: 16}, src)
    if src.is_float:
        xv = np.array([0, 1.9, -1.9, 127.5, 128, -128.7, -129, 255.9, 256, -1e30, 1e30, np.nan,
                       np.inf, -np.inf, 40000, -40000], dtype=src.name)
    else:
        info = np.iinfo(src.name)
        xv = np.linspace(int(info.min), int(info.max), 16).astype(src.name)
    lo, hi = int(np.iinfo(dst.name).min), int(np.iinfo(dst.name).max)

    def saturated(v):  # in exact Python arithmetic
        if v != v:
            return 0
        return lo if v <= lo else hi if v >= hi else int(v)

    want = np.array([saturated(v) for v in xv.tolist()], dtype=dst.name)
    both(td.compute("o", {i: 16}, td.saturating_cast(x[i], dst)), want, backend, x=xv)


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(INTS), data=st.data())
def test_random_integer_bit_operations(dtype, data):
    info = np.iinfo(dtype.name)
    values = st.integers(int(info.min), int(info.max))
    av = np.array(data.draw(st.lists(values, min_size=5, max_size=5)), dtype=dtype.name)
    bv = np.array(data.draw(st.lists(values, min_size=5, max_size=5)), dtype=dtype.name)
    k = data.draw(st.integers(0, dtype.bits + 2))
    i = td.dim("i")
    a, b = td.input("a", {i: 5}, dtype), td.input("b", {i: 5}, dtype)
    out = td.compute("o", {i: 5}, ((a[i] << k) ^ (b[i] >> k)) | (a[i] & ~b[i]))
    with np.errstate(all="ignore"):
        want = (np.left_shift(av, dtype.np.type(k)) ^ np.right_shift(bv, dtype.np.type(k))) | (av & ~bv)
    got = td.build(td.schedule(out))(a=av, b=bv)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(td.evaluate(out, a=av, b=bv), want)


@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize("vectorized", [False, True])
@pytest.mark.parametrize("dtype", [td.float32, td.float64], ids=lambda d: d.name)
def test_maximum_and_minimum_are_numpys_bit_for_bit(target, vectorized, dtype):
    """Ties of +0 and -0 give the second operand, a NaN in either operand wins, and of
    two NaNs the first one's payload: bit for bit what np.maximum / np.minimum give,
    in scalar and in vector code."""
    x = td.dim("x")
    bits = np.dtype(f"u{dtype.itemsize}")
    nan = np.array([np.nan], dtype.np).view(bits)[0]
    p1, p2 = (np.array([nan | k], bits).view(dtype.np)[0] for k in (1, 2))
    av = np.array([0.0, -0.0, p1, 1.0, p1, 2.0, -np.inf, 3.0], dtype.np)
    bv = np.array([-0.0, 0.0, p2, p2, 1.0, 2.0, np.inf, -1.0], dtype.np)
    a, b = td.input("a", {x: 8}, dtype), td.input("b", {x: 8}, dtype)
    for fn, ref in ((td.maximum, np.maximum), (td.minimum, np.minimum)):
        out = td.compute("out", {x: 8}, fn(a[x], b[x]))
        s = td.schedule(out).vectorize(out, "x") if vectorized else td.schedule(out)
        got = td.build(s, target=target)(a=av, b=bv)
        np.testing.assert_array_equal(got.view(bits), ref(av, bv).view(bits))


@pytest.mark.parametrize("sched", ["plain", "vector"])
@pytest.mark.parametrize("dtype", [td.float32, td.float64], ids=lambda d: d.name)
def test_a_product_feeding_an_add_is_rounded_once(backend, dtype, sched):
    """Each product that is an operand of an add or subtract is one fused multiply-add
    on both targets (`lower.contraction`): with c = -round(a * b), a * b + c is the
    rounding error of the product, exact, where an unfused add gives 0. So is
    c - (-a) * b's, and a * b - (-c)'s; the same in a plain and a vectorized loop."""
    i = td.dim("i")
    n = 1000
    a = td.input("a", {i: n}, dtype)
    b = td.input("b", {i: n}, dtype)
    c = td.input("c", {i: n}, dtype)
    out = td.compute("out", {i: n}, a[i] * b[i] + c[i])
    out2 = td.compute("out2", {i: n}, c[i] - (-a[i]) * b[i])
    out3 = td.compute("out3", {i: n}, a[i] * b[i] - (-c[i]))
    s = td.schedule((out, out2, out3))
    if sched == "vector":
        for f in (out, out2, out3):
            s = s.split(f, "i", 16).vectorize(f, "i_i")
    rng = np.random.default_rng(5)
    t = np.dtype(dtype.name)
    av = rng.uniform(1, 2, n).astype(t)
    bv = rng.uniform(1, 2, n).astype(t)
    cv = -(av * bv)
    if t == np.float32:  # the product is exact in float64, and so is its error
        want = (av.astype(np.float64) * bv + cv).astype(t)
    else:
        want = np.array([float(Fraction(x) * Fraction(y) + Fraction(z))
                         for x, y, z in zip(av, bv, cv)], t)
    assert np.count_nonzero(want) > n // 2  # the test tells fused from unfused
    got = td.build(s, target=backend)(a=av, b=bv, c=cv)
    for g in got:
        np.testing.assert_array_equal(g, want)
