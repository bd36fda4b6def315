"""Fixed-point operations: td.saturating_add/sub, td.rounding_shift_right,
td.rounding_mul_shift_right and td.requantize.

`td.evaluate` is checked against independent definitions: exact rational
arithmetic for the rounding operations, and a line-by-line transcription of
TFLite's MultiplyByQuantizedMultiplier and CMSIS-NN's arm_nn_requantize (C's
int32 and int64 arithmetic, wrapping where C's would, truncating division) for
td.requantize. Both backends are then checked against `td.evaluate` on edge
values and on values hypothesis draws, with constant and computed shift counts.
"""

from __future__ import annotations

from fractions import Fraction
from math import floor

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tdsl as td

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT_DTYPES = (td.int8, td.uint8, td.int16, td.uint16, td.int32, td.uint32, td.int64, td.uint64)


def _wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def _trunc_div(a: int, b: int) -> int:
    """C's integer division (toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


# ---------------------------------------------------------------- TFLite, as written in C


def tflite_srdhm(a: int, b: int) -> int:
    """gemmlowp/TFLite SaturatingRoundingDoublingHighMul."""
    overflow = a == b == INT32_MIN
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else (1 - (1 << 30))
    high = _wrap32(_trunc_div(ab + nudge, 1 << 31))
    return INT32_MAX if overflow else high


def tflite_rounding_divide_by_pot(x: int, exponent: int) -> int:
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def tflite_multiply_by_quantized_multiplier(x: int, m: int, shift: int) -> int:
    left = shift if shift > 0 else 0
    right = 0 if shift > 0 else -shift
    return tflite_rounding_divide_by_pot(tflite_srdhm(_wrap32(x * (1 << left)), m), right)


# ---------------------------------------------------------------- CMSIS-NN, as written in C


def cmsis_doubling_high_mult_no_sat(m1: int, m2: int) -> int:
    mult = (1 << 30) + m1 * m2  # int64: |m1 * m2| <= 2^62
    return _wrap32(mult >> 31)  # (int32_t)(mult.long_long >> 31)


def cmsis_divide_by_power_of_two(dividend: int, exponent: int) -> int:
    remainder_mask = _wrap32((1 << exponent) - 1)
    remainder = remainder_mask & dividend
    result = dividend >> exponent
    threshold = remainder_mask >> 1
    if result < 0:
        threshold += 1
    if remainder > threshold:
        result += 1
    return result


def cmsis_requantize(val: int, multiplier: int, shift: int) -> int:
    left = shift if shift > 0 else 0
    right = 0 if shift > 0 else -shift
    return cmsis_divide_by_power_of_two(
        cmsis_doubling_high_mult_no_sat(_wrap32(val * (1 << left)), multiplier), right)


# ---------------------------------------------------------------- td.evaluate


def _array(values, dtype) -> np.ndarray:
    """Python ints in the range of `dtype` as an array of it."""
    bits = dtype.np.itemsize * 8
    return np.array([int(v) % (1 << bits) for v in values], f"uint{bits}").view(dtype.np)


def _one(fn, *args, dtypes):
    """td.evaluate of `fn` on one element per argument (a 1-element input each)."""
    x = td.dim("x")
    ins = [td.input(f"a{k}", {x: len(args[0])}, d) for k, d in enumerate(dtypes)]
    out = td.compute("out", {x: len(args[0])}, fn(*(t[x] for t in ins)))
    arrays = {f"a{k}": _array(a, d) for k, (a, d) in enumerate(zip(args, dtypes))}
    return out, arrays, td.evaluate(out, **arrays)


int32s = st.integers(INT32_MIN, INT32_MAX)
EDGES32 = [INT32_MIN, INT32_MIN + 1, -(2**30), -3, -2, -1, 0, 1, 2, 3, 2**30, INT32_MAX - 1,
           INT32_MAX]


@given(acc=st.lists(st.one_of(int32s, st.sampled_from(EDGES32)), min_size=1, max_size=8),
       m=st.one_of(int32s, st.sampled_from(EDGES32)), shift=st.integers(-31, 30))
def test_requantize_is_tflite_and_cmsis_nn(acc, m, shift):
    """td.requantize equals TFLite's MultiplyByQuantizedMultiplier everywhere in TFLite's
    range, and CMSIS-NN's arm_nn_requantize everywhere but where both factors of the
    doubling high multiply are INT32_MIN (CMSIS-NN's wraps, TFLite saturates)."""
    n = len(acc)
    _, _, got = _one(td.requantize, acc, [m] * n, [shift] * n,
                     dtypes=(td.int32, td.int32, td.int32))
    for a, g in zip(acc, got.tolist()):
        assert g == tflite_multiply_by_quantized_multiplier(a, m, shift)
        if not (m == INT32_MIN and _wrap32(a * (1 << max(shift, 0))) == INT32_MIN):
            assert g == cmsis_requantize(a, m, shift)


def test_requantize_edges():
    """The saturating corner, ties of both signs in the doubling multiply and in the
    rounding divide, and shifts at and beyond the ends of the range (clamped to +-31)."""
    cases = [(INT32_MIN, INT32_MIN, 0), (INT32_MIN, INT32_MIN, -5), (INT32_MIN, INT32_MIN, 1),
             (1 << 29, 1, 0), (-(1 << 29), 1, 0), (-(3 << 29), 1, 0), (3 << 29, 1, 0),
             (5, 1 << 30, -1), (-5, 1 << 30, -1), (-6, 1 << 30, -1), (6, 1 << 30, -2),
             (-10, 1 << 30, -2), (INT32_MAX, INT32_MAX, -31), (INT32_MIN, INT32_MAX, -31),
             (123456, 1518500250, -7), (-123456, 1518500250, -7), (7, 1 << 30, 30),
             (3, 1 << 30, 31), (3, 1 << 30, 45), (-9, 1 << 30, -45), (-(2**30), 1 << 30, -31)]
    acc, m, s = (list(c) for c in zip(*cases))
    _, _, got = _one(td.requantize, acc, m, s, dtypes=(td.int32,) * 3)
    assert got[0] == INT32_MAX  # TFLite saturates; CMSIS-NN would give INT32_MIN
    assert cmsis_requantize(INT32_MIN, INT32_MIN, 0) == INT32_MIN
    for (a, mm, sh), g in zip(cases, got.tolist()):
        assert g == tflite_multiply_by_quantized_multiplier(a, mm, min(max(sh, -31), 31))


def _round_half_up(v: Fraction) -> int:
    return floor(v + Fraction(1, 2))


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_saturating_add_sub_evaluate(dtype):
    info = np.iinfo(dtype.np)
    lo, hi = int(info.min), int(info.max)
    vals = sorted({lo, lo + 1, -1 if lo else 0, 0, 1, hi // 2, hi - 1, hi})
    a = [x for x in vals for _ in vals]
    b = [y for _ in vals for y in vals]
    _, _, add = _one(td.saturating_add, a, b, dtypes=(dtype, dtype))
    _, _, sub = _one(td.saturating_sub, a, b, dtypes=(dtype, dtype))
    assert add.dtype == dtype.np and sub.dtype == dtype.np
    assert add.tolist() == [min(max(x + y, lo), hi) for x, y in zip(a, b)]
    assert sub.tolist() == [min(max(x - y, lo), hi) for x, y in zip(a, b)]


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_rounding_shift_right_evaluate(dtype):
    info = np.iinfo(dtype.np)
    lo, hi = int(info.min), int(info.max)
    bits = dtype.np.itemsize * 8
    xs = sorted({lo, lo + 1, -7 if lo else 7, -6 if lo else 6, -2 if lo else 2, -1 if lo else 1,
                 0, 1, 2, 5, 6, 7, hi - 1, hi})
    ns = [0, 1, 2, 3, bits - 1, bits, bits + 1, 200, -1, -3, -bits, -(bits + 5)]
    x = [v for v in xs for _ in ns]
    n = [k for _ in xs for k in ns]
    _, _, got = _one(td.rounding_shift_right, x, n, dtypes=(dtype, td.int16))
    mask = (1 << bits) - 1
    for v, k, g in zip(x, n, got.tolist()):
        if k >= 0:
            want = _round_half_up(Fraction(v, 2**k))
        else:
            w = (v << -k) & mask
            want = w - (1 << bits) if dtype.is_signed and w >> (bits - 1) else w
        assert g == want, (v, k)


@pytest.mark.parametrize(("dtype", "q"), [(td.int8, 7), (td.int8, 14), (td.uint8, 15),
                                          (td.int16, 15), (td.int16, 30), (td.uint16, 16),
                                          (td.int32, 31), (td.int32, 0), (td.int32, 62)])
def test_rounding_mul_shift_right_evaluate(dtype, q):
    info = np.iinfo(dtype.np)
    lo, hi = int(info.min), int(info.max)
    vals = sorted({lo, lo + 1, -3 if lo else 3, 0, 1, 2, 3, hi // 3, hi - 1, hi})
    a = [x for x in vals for _ in vals]
    b = [y for _ in vals for y in vals]
    _, _, got = _one(lambda u, v: td.rounding_mul_shift_right(u, v, q), a, b,
                     dtypes=(dtype, dtype))
    assert got.tolist() == [min(max(_round_half_up(Fraction(x * y, 2**q)), lo), hi)
                            for x, y in zip(a, b)]


def test_rounding_mul_shift_right_q31_is_sqrdmulh():
    """int32 with q = 31: Arm's SQRDMULH, which is TFLite's saturating rounding doubling
    high multiply."""
    rng = np.random.default_rng(5)
    a = [*EDGES32, *rng.integers(INT32_MIN, INT32_MAX, 40).tolist()]
    b = [*EDGES32[::-1], *rng.integers(INT32_MIN, INT32_MAX, 40).tolist()]
    _, _, got = _one(lambda u, v: td.rounding_mul_shift_right(u, v, 31), a, b,
                     dtypes=(td.int32, td.int32))
    assert got.tolist() == [tflite_srdhm(x, y) for x, y in zip(a, b)]


# ---------------------------------------------------------------- both backends


def _check_backends(out, arrays, want, backend):
    f = td.build(td.schedule(out), target=backend)
    np.testing.assert_array_equal(f(**arrays), want)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_saturating_ops_on_backends(backend, dtype):
    info = np.iinfo(dtype.np)
    rng = np.random.default_rng(1)
    edges = [int(info.min), int(info.min) + 1, 0, 1, int(info.max) - 1, int(info.max)]
    a = [e for e in edges for _ in edges]
    a += rng.integers(info.min, info.max, 64, dtype=dtype.np, endpoint=True).tolist()
    b = [e for _ in edges for e in edges]
    b += rng.integers(info.min, info.max, 64, dtype=dtype.np, endpoint=True).tolist()
    for fn in (td.saturating_add, td.saturating_sub):
        out, arrays, want = _one(fn, a, b, dtypes=(dtype, dtype))
        _check_backends(out, arrays, want, backend)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("count", ["computed", "constant"])
def test_rounding_shift_right_on_backends(backend, dtype, count):
    info = np.iinfo(dtype.np)
    bits = dtype.np.itemsize * 8
    rng = np.random.default_rng(2)
    x = _array([int(info.min), int(info.min) + 1, -7 if info.min else 7, 0, 5, 6, int(info.max),
                *rng.integers(info.min, info.max, 30, dtype=dtype.np, endpoint=True).tolist()],
               dtype)
    ns = [0, 1, 2, bits - 1, bits, bits + 1, 100, -1, -5, -bits, -(bits + 3)]
    if count == "computed":
        xs = np.repeat(x, len(ns))
        n = np.tile(np.array(ns, np.int32), len(x))
        out, arrays, want = _one(td.rounding_shift_right, xs.tolist(), n.tolist(),
                                 dtypes=(dtype, td.int32))
        _check_backends(out, arrays, want, backend)
        return
    for k in ns:
        out, arrays, want = _one(lambda v, k=k: td.rounding_shift_right(v, k), x.tolist(),
                                 dtypes=(dtype,))
        _check_backends(out, arrays, want, backend)


@pytest.mark.parametrize(("dtype", "q"), [(td.int8, 7), (td.uint8, 15), (td.int16, 15),
                                          (td.int16, 30), (td.uint16, 16), (td.int32, 31),
                                          (td.int32, 0), (td.int32, 62)])
def test_rounding_mul_shift_right_on_backends(backend, dtype, q):
    info = np.iinfo(dtype.np)
    rng = np.random.default_rng(3)
    edges = [int(info.min), int(info.min) + 1, 0, 1, 3, int(info.max)]
    a = [*np.repeat(edges, len(edges)).tolist(),
         *rng.integers(info.min, info.max, 50, endpoint=True).tolist()]
    b = [*np.tile(edges, len(edges)).tolist(),
         *rng.integers(info.min, info.max, 50, endpoint=True).tolist()]
    out, arrays, want = _one(lambda u, v: td.rounding_mul_shift_right(u, v, q), a, b,
                             dtypes=(dtype, dtype))
    _check_backends(out, arrays, want, backend)


@given(acc=st.lists(int32s, min_size=4, max_size=4), m=st.lists(int32s, min_size=4, max_size=4),
       shift=st.lists(st.integers(-40, 40), min_size=4, max_size=4))
def test_requantize_per_channel_on_backends(acc, m, shift):
    """Multipliers and shifts indexed by the channel (computed shift counts)."""
    acc = [INT32_MIN, INT32_MIN, *acc]
    m = [INT32_MIN, 1 << 30, *m]
    shift = [0, -1, *shift]
    out, arrays, want = _one(td.requantize, acc, m, shift, dtypes=(td.int32,) * 3)
    for backend in ("c", "llvm"):
        _check_backends(out, arrays, want, backend)


@pytest.mark.parametrize("shift", [-31, -7, -1, 0, 1, 5, 31, 40, -40])
def test_requantize_constant_parameters_on_backends(backend, shift):
    """Per-tensor quantization: multiplier and shift are Python ints."""
    rng = np.random.default_rng(4)
    acc = [*EDGES32, *rng.integers(INT32_MIN, INT32_MAX, 60).tolist()]
    for m in (1518500250, INT32_MIN, 1 << 30):
        out, arrays, want = _one(lambda a, m=m: td.requantize(a, m, shift), acc,
                                 dtypes=(td.int32,))
        assert want.tolist() == [tflite_multiply_by_quantized_multiplier(
            a, m, min(max(shift, -31), 31)) for a in acc]
        _check_backends(out, arrays, want, backend)


# ---------------------------------------------------------------- mistakes


def test_mistakes_are_refused_clearly():
    x = td.dim("x")
    f = td.input("f", {x: 4}, td.float32)
    i = td.input("i", {x: 4}, td.int32)
    u = td.input("u", {x: 4}, td.uint32)
    b = td.input("b", {x: 4}, td.int8)
    with pytest.raises(td.DefinitionError, match="fixed-point operations take integers"):
        td.saturating_add(f[x], 1)
    with pytest.raises(td.DefinitionError, match="q must be a Python int in"):
        td.rounding_mul_shift_right(i[x], i[x], 63)
    with pytest.raises(td.DefinitionError, match="q must be a Python int in"):
        td.rounding_mul_shift_right(i[x], i[x], i[x])
    with pytest.raises(td.DefinitionError, match="wider than 64 bits"):
        td.rounding_mul_shift_right(u[x], u[x], 31)
    with pytest.raises(td.DefinitionError, match="not int32"):
        td.requantize(b[x], 1 << 30, -3)
    with pytest.raises(td.DefinitionError, match="does not fit in int32"):
        td.requantize(i[x], 2**31, -3)
    with pytest.raises(td.DefinitionError, match="does not fit in"):
        td.saturating_add(b[x], 300)
    for fn in (td.saturating_add, td.saturating_sub, td.rounding_shift_right,
               td.rounding_mul_shift_right, td.requantize):
        assert fn.__doc__ and len(fn.__doc__) > 80
