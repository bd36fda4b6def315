"""Memory safety: no access of any kernel touches memory outside its array.

Every access is proven in range when the kernel is built (affine indices, by isl) or
tested when it runs (data-dependent indices: the call raises `ArgumentError`). An
access may mix the two kinds: `lut[I[y, x], x + 2]` tests its first index at run time
and must still prove its second at build time. These tests place every output inside
guard zones (a larger buffer of sentinels whose middle the kernel writes through a
view) and check that the zones are untouched after each call.
"""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td

GUARD = 16  # elements of sentinel on each side of an output


def guarded(shape, dtype, fill=0):
    """An array of `shape` inside a buffer of sentinel bytes: (whole buffer, the array)."""
    n = int(np.prod(shape))
    whole = np.full((n + 2 * GUARD) * np.dtype(dtype).itemsize, 0x5A, np.uint8).view(dtype)
    inner = whole[GUARD:GUARD + n].reshape(shape)
    inner[...] = fill
    return whole, inner


def untouched(whole: np.ndarray, n: int) -> bool:
    """Whether the guard zones around the `n` middle elements still hold the sentinel."""
    raw = whole.view(np.uint8)
    size = whole.itemsize
    return bool((raw[: GUARD * size] == 0x5A).all() and (raw[(GUARD + n) * size:] == 0x5A).all())


def _gather():
    y, x, l = td.dims("y x l")
    I = td.input("I", {y: 3, x: 5}, td.int32)
    lut = td.input("lut", {l: 4, x: 5}, td.int32)
    return y, x, I, lut


def test_guarded_helper_detects_a_write_outside():
    whole, inner = guarded((3, 5), np.int32)
    assert untouched(whole, inner.size)
    whole[GUARD + inner.size] = 1
    assert not untouched(whole, inner.size)


@pytest.mark.parametrize("view", ["plain", "assume_in_range"])
def test_mixed_gather_with_affine_axis_out_of_range_is_refused(view, backend):
    """`lut[I[y, x], x + 2]`: the data-dependent row is checked at run time, but the
    affine column reaches 6 on an axis of 5. td.evaluate refuses it; so must td.build
    (it read lut.flat[20], past the end)."""
    y, x, I, lut = _gather()
    src = lut if view == "plain" else td.assume_in_range(lut)
    out = td.compute("out", {y: 3, x: 5}, src[I[y, x], x + 2])
    a = {"lut": np.arange(20, dtype=np.int32).reshape(4, 5),
         "I": np.array([[0, 1, 2, 3, 0]] * 3, np.int32)}
    with pytest.raises(td.DefinitionError, match="out of range"):
        td.evaluate(out, **a)
    with pytest.raises(td.DefinitionError, match=r"out\s+of range.*x"):
        td.build(td.schedule(out), target=backend)


def test_mixed_scatter_with_affine_axis_out_of_range_is_refused(backend):
    """An update whose target mixes a data-dependent row with an affine column past
    the edge wrote past the end of the output."""
    y, x, I, _ = _gather()
    v, c = td.dims("v c")
    hist = td.compute("hist", {v: 4, c: 5}, td.cast(0 * v + 0 * c, td.int32))
    td.update(hist[I[y, x], x + 2], hist[I[y, x], x + 2] + 1, over={y: 3, x: 5})
    with pytest.raises(td.DefinitionError, match="out of range"):
        td.evaluate(hist, I=np.full((3, 5), 3, np.int32))
    with pytest.raises(td.DefinitionError, match="out of range"):
        td.build(td.schedule(hist), target=backend)


def test_mixed_gather_in_range_still_builds_and_checks_its_data(backend):
    """The same mix with the affine axis in range builds; a bad data index is an
    ArgumentError and the output's guard zones are untouched either way."""
    y, x, I, lut = _gather()
    out = td.compute("out", {y: 3, x: 3}, lut[I[y, x], x + 2])
    f = td.build(td.schedule(out), target=backend)
    table = np.arange(20, dtype=np.int32).reshape(4, 5)
    idx = np.array([[0, 1, 2, 3, 0]] * 3, np.int32)
    whole, res = guarded((3, 3), np.int32)
    f(lut=table, I=idx, out=res)
    np.testing.assert_array_equal(res, td.evaluate(out, lut=table, I=idx))
    assert untouched(whole, res.size)
    idx[1, 2] = 4
    whole, res = guarded((3, 3), np.int32)
    with pytest.raises(td.ArgumentError):
        f(lut=table, I=idx, out=res)
    assert untouched(whole, res.size)


def test_mixed_scatter_in_range_counts_and_checks(backend):
    y, x, I, _ = _gather()
    v, c = td.dims("v c")
    hist = td.compute("hist", {v: 4, c: 3}, td.cast(0 * v + 0 * c, td.int32))
    td.update(hist[I[y, x], x + 2], hist[I[y, x], x + 2] + 1, over={y: 3, x: 1})
    f = td.build(td.schedule(hist), target=backend)
    idx = np.array([[3, 1, 0, 0, 0], [3, 0, 0, 0, 0], [1, 0, 0, 0, 0]], np.int32)
    whole, res = guarded((4, 3), np.int32, fill=7)
    f(I=idx, hist=res)
    np.testing.assert_array_equal(res, td.evaluate(hist, I=idx))
    assert untouched(whole, res.size)
    idx[2, 0] = 4
    whole, res = guarded((4, 3), np.int32, fill=7)
    with pytest.raises(td.ArgumentError):
        f(I=idx, hist=res)
    assert untouched(whole, res.size)


def test_hoisted_sum_inside_an_empty_argmin_with_a_cached_input(backend):
    """A sum that does not use the dims of the argmin around it is computed once, before
    the argmin's loop, so it reads even when the argmin's range is empty; bounds
    inference took its reads to be as empty as that range and sized the cache of A at
    one element (an internal OutOfBoundsError at build)."""
    y, x, k, k2 = td.dims("y x k k2")
    A = td.input("A", {x: 4}, td.float64)
    body = td.sum(A[x] + td.cast(k, td.float64), over={k: 2})
    out = td.compute("out", {y: 3, x: 4}, td.argmin(body, over={k2: (1, 1)}))
    a = {"A": np.arange(4.0)}
    want = td.evaluate(out, **a)
    np.testing.assert_array_equal(want, np.ones((3, 4), np.int64))  # an empty range gives hi
    s = td.schedule(out).cache_read(A, [out], name="Ac").compute_at("Ac", out, "y")
    np.testing.assert_array_equal(td.build(s, target=backend)(**a), want)
