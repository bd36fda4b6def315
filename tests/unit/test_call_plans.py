"""Calls with a signature seen before (argument names, types, dtypes, shapes and strides)
reuse what the first call worked out (`Kernel._plans`), and still refuse every argument
the full check refuses, on both targets."""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td
from tdsl.runtime.kernel import PLANS


def kernel(target: str, outputs: int = 1):
    y, x = td.dims("y x")
    H, W = td.size("H"), td.size("W")
    a = td.input("a", {y: H, x: W}, td.float32)
    b = td.input("b", {x: W}, td.float32)
    o = td.compute("o", {y: H, x: W}, a[y, x] * 2 + b[x])
    outs = [o]
    if outputs == 2:
        outs.append(td.compute("p", {y: H, x: W}, a[y, x] - b[x]))
    return td.build(td.schedule(outs), target=target), outs


def fresh(seed: int, h: int = 5, w: int = 16):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((h, w)).astype(np.float32),
            rng.standard_normal(w).astype(np.float32))


def test_fresh_arrays_of_a_seen_signature_give_numpy_s_answer(backend):
    f, _ = kernel(backend)
    for seed in range(20):
        a, b = fresh(seed, 5 + seed % 2)  # two signatures, alternating
        np.testing.assert_array_equal(f(a=a, b=b), a * 2 + b)
    assert len(f._plans) == 2
    a, b = fresh(99)
    np.testing.assert_array_equal(f(b=b, a=a), a * 2 + b)  # the order of names is no matter
    assert len(f._plans) == 2
    for h in range(1, 12):  # more signatures than a kernel keeps: the latest ones stay
        a, b = fresh(h, h)
        np.testing.assert_array_equal(f(a=a, b=b), a * 2 + b)
    assert len(f._plans) == PLANS


def test_a_seen_signature_still_refuses_what_the_check_refuses(backend):
    f, _ = kernel(backend)
    a, b = fresh(0)
    out = np.empty_like(a)
    f(a=a, b=b, o=out)
    f(a=a, b=b, o=out)  # the plan of (a, b, o)
    np.testing.assert_array_equal(out, a * 2 + b)
    with pytest.raises(td.ArgumentError, match="shares memory with input 'a'"):
        f(a=a, b=b, o=a)
    out.flags.writeable = False
    with pytest.raises(td.ArgumentError, match="read-only"):
        f(a=a, b=b, o=out)
    with pytest.raises(td.ArgumentError, match="dtype float64"):
        f(a=a.astype(np.float64), b=b)
    with pytest.raises(td.ArgumentError, match="inconsistent size W"):
        f(a=a, b=np.ones(17, np.float32))
    with pytest.raises(td.ArgumentError, match="must be a numpy array"):
        f(a=a.tolist(), b=b)
    with pytest.raises(td.ArgumentError, match="unknown argument"):
        f(a=a, b=b, c=b)


def test_strided_inputs_are_copied_and_a_plan_is_kept_only_for_contiguous_ones(backend):
    f, _ = kernel(backend)
    big = np.random.default_rng(1).standard_normal((5, 32)).astype(np.float32)
    b = np.ones(16, np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(f(a=big[:, ::2], b=b), big[:, ::2] * 2 + b)
    assert not f._plans


def test_two_outputs_come_back_as_a_tuple_from_a_plan_too(backend):
    f, (o, p) = kernel(backend, outputs=2)
    for seed in range(3):
        a, b = fresh(seed)
        got = f(a=a, b=b)
        np.testing.assert_array_equal(got[0], a * 2 + b)
        np.testing.assert_array_equal(got[1], a - b)
    given = np.empty_like(a)
    for _ in range(2):
        got = f(a=a, b=b, p=given)
        assert got[1] is given
        np.testing.assert_array_equal(given, a - b)


def test_a_size_given_by_value_takes_the_checked_path(backend):
    x = td.dim("x")
    N = td.size("N")
    o = td.compute("o", {x: N}, td.cast(x, td.int64) * 3)
    f = td.build(td.schedule(o), target=backend)
    for n in (4, 4, 7):
        np.testing.assert_array_equal(f(N=n), np.arange(n) * 3)
    with pytest.raises(td.ArgumentError, match="at least 1"):
        f(N=0)
