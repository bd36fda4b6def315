"""An expression's repr is Python that means the same expression: operators print with
Python's precedence (comparisons below & | ^, shifts below + -, unary minus above *)."""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td

i = td.dim("i")
a = td.input("a", {i: 8}, td.int32)
b = td.input("b", {i: 8}, td.int32)
CASES = [
    lambda: (a[i] < b[i]) & (a[i] > 0),
    lambda: a[i] < (b[i] & 3),
    lambda: -(a[i] // (b[i] + 9)),
    lambda: (-a[i]) // (b[i] + 9),
    lambda: (a[i] + 1) << (b[i] % 4),
    lambda: a[i] + (1 << (b[i] % 4)),
    lambda: ~(a[i] | b[i]) ^ (a[i] & b[i]),
    lambda: (a[i] == b[i]) == (b[i] < 2),
    lambda: (a[i] - b[i]) * (a[i] % 5) - -b[i],
]


@pytest.mark.parametrize("make", CASES)
def test_repr_rebuilds_the_same_expression(make):
    e = make()
    again = eval(repr(e), {"td": td, "a": a, "b": b, "i": i})  # noqa: S307 - our own repr
    assert repr(again) == repr(e)
    av = np.array([-7, -3, -1, 0, 1, 2, 5, 9], np.int32)
    bv = np.array([3, -2, 1, 0, 4, -5, 2, 1], np.int32)
    one, two = (td.evaluate(td.compute("o", {i: 8}, x), a=av, b=bv) for x in (e, again))
    np.testing.assert_array_equal(one, two)


def test_loop_nest_prints_shifts_before_and_after_legalise():
    """td.lower of a shift used to raise KeyError: the loop-nest printer knew no shifts."""
    from tdsl.lower import lower_schedule
    from tdsl.lower.printer import show

    u = td.input("u", {i: 8}, td.uint32)
    out = td.compute("out", {i: 8}, (a[i] << 2) + (a[i] >> (b[i] & 7)))
    text = str(td.lower(td.schedule(out)))
    assert "out[i] = (a[i] << 2) + (a[i] >> (b[i] & 7))" in text
    legal = show(lower_schedule(td.schedule(td.compute("v", {i: 8}, u[i] >> 3))))
    assert "u[i] >>> " in legal  # the logical shift of an unsigned value
    got = td.build(td.schedule(out))(a=np.arange(-4, 4, dtype=np.int32),
                                     b=np.arange(8, dtype=np.int32))
    av, bv = np.arange(-4, 4, dtype=np.int32), np.arange(8, dtype=np.int32)
    np.testing.assert_array_equal(got, (av << 2) + (av >> (bv & 7)))
