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
