"""Float-to-integer conversions: one rule on every backend and in td.evaluate.

Within int64's range a float converts as numpy converts it (truncation toward
zero, then wrapping to the target width: -1.5 -> uint8 255); NaN gives 0 and
values beyond int64 saturate. A plain C cast of those values is undefined.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tdsl as td

VALUES = [-12.06, -1.5, -0.99, 0.99, 300.7, 70000.2, 3e9, -3e9, 5e18, -5e18, 1e19, -9.3e18,
          1e30, np.nan, np.inf, -np.inf]
INTS = [td.int8, td.uint8, td.int16, td.uint16, td.int32, td.uint32, td.int64, td.uint64]


@pytest.mark.parametrize("src", [td.float32, td.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("dst", INTS, ids=lambda d: d.name)
def test_float_to_int_is_the_same_everywhere(src, dst, backend):
    (i,) = td.dims("i")
    n = len(VALUES)
    a = td.input("a", {i: n}, src)
    o = td.compute("o", {i: n}, td.cast(a[i], dst))
    x = np.array(VALUES).astype(src.np)
    ref = td.evaluate(o, a=x)
    assert ref.dtype == dst.np
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        in_range = np.abs(x) < 9e18
        numpy_says = x[in_range].astype(np.int64).astype(dst.np)
    np.testing.assert_array_equal(ref[in_range], numpy_says)
    np.testing.assert_array_equal(ref[np.isnan(x)], 0)
    big = np.iinfo(np.int64).max
    expect_inf = np.array([big, ~big], dtype=np.int64).astype(dst.np)
    np.testing.assert_array_equal(ref[np.isinf(x)], expect_inf)
    plain = td.schedule(o)
    vector = td.schedule(o).split(o, "i", 8).vectorize(o, "i_i")
    for k, s in enumerate((plain, vector)):
        got = td.build(s, target=backend, name=f"cast_{src.name}_{dst.name}_{k}")(a=x)
        np.testing.assert_array_equal(got, ref)


def test_unsigned_64_bit_constants_keep_their_width(backend):
    # fuzz C seed 2008 case 288: `~td.pad(lut, 3)[-1]` of a uint64 lut, read in the pad,
    # became the constant 3, which C wrote as 3u (an unsigned int): ~3u is 2**32 - 4,
    # not 2**64 - 4, and lut[2] * in0[y] / ~3 came out 2**32 times too large
    (y,) = td.dims("y")
    in0 = td.input("in0", {y: 2}, td.uint64)
    lut = td.input("lut", {y: 3}, td.uint64)
    s0 = td.compute("s0", {y: 2}, (td.pad(lut, 0)[2] * in0[y]) / (~td.pad(lut, 3)[-1]))
    a0, lt = np.array([2**63 + 5, 7], np.uint64), np.array([0, 0, 3], np.uint64)
    with np.errstate(all="ignore"):
        want = (lt[2] * a0).astype(np.float64) / float(~np.uint64(3))
    np.testing.assert_array_equal(td.evaluate(s0, in0=a0, lut=lt), want)
    np.testing.assert_array_equal(td.build(td.schedule(s0), target=backend)(in0=a0, lut=lt), want)


def test_unsigned_32_bit_constants_keep_their_type(backend):
    # fuzz seed 2622 case 2444 (C only): `~td.pad(in0, 3)[...]` read entirely in the pad
    # became the constant 3, and C computed `~3` as an int (-4), not uint32 (4294967292)
    y, k = td.dims("y k")
    in0 = td.input("in0", {y: 2}, td.uint32)
    in2 = td.input("in2", {y: 2}, td.float32)
    s0 = td.compute("s0", {y: 2}, td.max(in2[y] * ~td.pad(in0, 3)[2 * k + 2], over={k: (0, y + 1)}))
    a0, a2 = np.array([5, 4_000_000_000], np.uint32), np.array([1.5, -2], np.float32)
    want = np.array([1.5 * float(np.uint32(~np.uint32(3))), -2.0 * float(np.uint32(~np.uint32(3)))])
    np.testing.assert_array_equal(td.evaluate(s0, in0=a0, in2=a2), want)
    np.testing.assert_array_equal(td.build(td.schedule(s0), target=backend)(in0=a0, in2=a2), want)
