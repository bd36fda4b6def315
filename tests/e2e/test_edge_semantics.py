"""Exact semantics at the edges: numpy 2's answers where dtypes, constants and the
lowering meet their limits.

Every signed/unsigned pair of integer dtypes on every operator and comparison, with
operands at their limits; comparisons with Python integers outside a dtype; uint64
constants beyond int64 (which isl takes only as arbitrary-precision values); buffer
extents isl writes with rational coefficients; and named reductions under the helpers
that use their operand more than once.
"""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td

_SIGNED = ["int8", "int16", "int32", "int64"]
_UNSIGNED = ["uint8", "uint16", "uint32", "uint64"]
_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "floordiv": np.floor_divide,
        "mod": np.remainder, "maximum": np.maximum, "minimum": np.minimum,
        "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
        "gt": np.greater, "ge": np.greater_equal, "lt": np.less, "le": np.less_equal,
        "eq": np.equal, "ne": np.not_equal}
_EXPR = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
         "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b,
         "maximum": td.maximum, "minimum": td.minimum,
         "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
         "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b, "lt": lambda a, b: a < b,
         "le": lambda a, b: a <= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}


def _edges(name: str) -> list[int]:
    info = np.iinfo(name)
    vals = {info.min, info.min + 1, -1, 0, 1, 2, 7, info.max - 1, info.max,
            info.max // 2, info.max // 2 + 1}
    return sorted(v for v in vals if info.min <= v <= info.max)


def _pairs(x: str, y: str) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of edge values of the two dtypes, as two arrays."""
    ex, ey = _edges(x), _edges(y)
    return (np.array([a for a in ex for _ in ey], dtype=x),
            np.array([b for _ in ex for b in ey], dtype=y))


def _numpy(op: str, a: np.ndarray, b: np.ndarray):
    """numpy's answer, or None where numpy refuses the operand types."""
    try:
        with np.errstate(all="ignore"):
            return _OPS[op](a, b)
    except TypeError:
        return None


@pytest.mark.parametrize("y_dtype", _UNSIGNED)
@pytest.mark.parametrize("x_dtype", _SIGNED)
def test_mixed_signedness_is_numpy_exactly(x_dtype, y_dtype, backend):
    """Every binary operation and comparison of a signed with an unsigned integer, on
    every pair of edge values, in both operand orders: numpy 2's answer bit for bit
    (uint64 against a signed integer compares exactly, though its common dtype is
    float64), or a DefinitionError where numpy refuses the types."""
    i = td.dim("i")
    xa, ya = _pairs(x_dtype, y_dtype)
    n = len(xa)
    X = td.input("X", {i: n}, getattr(td, x_dtype))
    Y = td.input("Y", {i: n}, getattr(td, y_dtype))
    stages, expect = [], []
    for op in _OPS:
        for name, (l, r), (la, ra) in (("xy", (X, Y), (xa, ya)), ("yx", (Y, X), (ya, xa))):
            want = _numpy(op, la, ra)
            if want is None:
                with pytest.raises(td.DefinitionError):
                    _EXPR[op](l[i], r[i])
                continue
            e = _EXPR[op](l[i], r[i])
            assert e.dtype.np == want.dtype, (op, name, e.dtype, want.dtype)
            stages.append(td.compute(f"{op}_{name}", {i: n}, e))
            expect.append(want)
    args = {"X": xa, "Y": ya}
    for got, want, st in zip(td.evaluate(stages, **args), expect, stages):
        np.testing.assert_array_equal(got, want, err_msg=f"td.evaluate {st.name}")
    built = td.build(td.schedule(stages), target=backend)(**args)
    for got, want, st in zip(built, expect, stages):
        np.testing.assert_array_equal(got, want, err_msg=f"{backend} {st.name}")


@pytest.mark.parametrize("dtype", _SIGNED + _UNSIGNED)
def test_comparison_with_a_python_int_beyond_the_dtype_is_numpy(dtype, backend):
    """numpy 2 compares an integer array with a Python integer outside its dtype as
    numbers (uint8 > -1 holds everywhere); arithmetic with one is still refused."""
    i = td.dim("i")
    vals = np.array(_edges(dtype), dtype=dtype)
    X = td.input("X", {i: len(vals)}, getattr(td, dtype))
    info = np.iinfo(dtype)
    stages, expect = [], []
    for k, s in enumerate((info.min - 1, info.max + 1, -2**70, 2**70)):
        for op in ("gt", "ge", "lt", "le", "eq", "ne"):
            for side, e, want in (("l", _EXPR[op](X[i], s), _OPS[op](vals, s)),
                                  ("r", _EXPR[op](s, X[i]), _OPS[op](s, vals))):
                stages.append(td.compute(f"{op}_{side}{k}", {i: len(vals)},
                                         td.where(e, X[i], X[i] * 0)))
                expect.append(np.where(want, vals, vals * 0))
    for got, want in zip(td.evaluate(stages, X=vals), expect):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(td.build(td.schedule(stages), target=backend)(X=vals), expect):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(td.DefinitionError, match="out of range"):
        X[i] + (info.max + 1)


def test_uint64_constant_beyond_int64_in_an_atomic_update(backend):
    """A uint64 constant of 2**63 or more in an atomic update's value reached isl as a
    C long (islpy's TypeError from int_from_si); it wraps as numpy's uint64 does."""
    y, v = td.dims("y v")
    I = td.input("I", {y: 3}, td.int32)
    R = td.input("R", {y: 3}, td.uint64)
    hist = td.compute("hist", {v: 4}, td.cast(0 * v, td.uint64))
    u = td.update(hist[I[y]], hist[I[y]] + R[y] * (2**63 + 5), over={y: 3})
    a = {"I": np.array([0, 3, 0], np.int32), "R": np.array([1, 2, 2**64 - 1], np.uint64)}
    want = np.zeros(4, np.uint64)
    with np.errstate(over="ignore"):
        for k in range(3):
            want[a["I"][k]] += a["R"][k] * np.uint64(2**63 + 5)
    np.testing.assert_array_equal(td.evaluate(hist, **a), want)
    got = td.build(td.schedule(hist).atomic(u).parallel(u, "y"), target=backend)(**a)
    np.testing.assert_array_equal(got, want)


def test_buffer_extent_with_a_rational_piece():
    """isl may write a buffer's extent with a rational coefficient on a piece where a
    congruence makes it integral; isl_pw_aff_max_val refuses such a function
    ("expecting integer affine expression"), which escaped td.build as a raw isl error
    for a three-stage pipeline of mirror and pad views computed at a consumer's row."""
    import islpy as isl

    from tdsl.lower import ir
    from tdsl.lower.poly.from_ast import _extent

    pa = isl.PwAff("[M] -> { [((M + 1)/2)] : exists e: M = 2e + 1 and 0 <= M <= 9 }")
    assert _extent(pa, {"M": ir.Var("M")}) == ir.index_const(5)
    unbounded = isl.PwAff("[M] -> { [((M + 1)/2)] : exists e: M = 2e + 1 and M >= 0 }")
    e = _extent(unbounded, {"M": ir.Var("M")})
    assert "M" in repr(e) and "pdiv" in repr(e)


def test_an_isl_failure_is_an_internal_error_naming_the_step(monkeypatch):
    """Whatever isl refuses inside the lowering reaches the user as td.InternalError
    naming the step, never as a raw isl error."""
    import sys

    import islpy as isl

    def refuse(*_args, **_kwargs):
        raise isl.Error("call to isl_pw_aff_max_val failed: expecting integer affine expression")

    monkeypatch.setattr(sys.modules["tdsl.lower"], "build_model", refuse)
    i = td.dim("i")
    A = td.input("A", {i: 4}, td.float32)
    out = td.compute("out", {i: 4}, A[i] * 2)
    with pytest.raises(td.InternalError, match="bounds inference.*expecting integer affine"):
        td.lower(td.schedule(out))


_HELPERS = {
    "isnan": lambda r: td.isnan(r), "isinf": lambda r: td.isinf(r),
    "saturating_cast": lambda r: td.saturating_cast(r, td.int8),
    "int_pow": lambda r: td.cast(r, td.int32) ** 3, "abs": lambda r: td.abs(r),
    "round": lambda r: td.round(r), "twice": lambda r: r * r + r,
}


@pytest.mark.parametrize("helper", sorted(_HELPERS) + ["argmax"])
def test_named_reduction_under_every_helper(helper, backend):
    """A named reduction written once, under a helper that copies its operand (or an
    argmax whose body reads it), was refused as "two different tensors are named
    'acc'"; it is one stage."""
    y, k, k2 = td.dims("y k k2")
    A = td.input("A", {y: 3, k: 4}, td.float32)
    acc = td.sum(A[y, k], over=k, name="acc")
    if helper == "argmax":
        e = td.argmax(acc * td.cast(k2 - 1, td.float32), over={k2: 3})
    else:
        e = _HELPERS[helper](acc)
    out = td.compute("out", {y: 3}, e)
    a = {"A": np.linspace(-9, 9, 12, dtype=np.float32).reshape(3, 4)}
    want = td.evaluate(out, **a)
    plain = td.compute("plain", {y: 3}, _HELPERS.get(helper, lambda r: r)(td.sum(A[y, k], over=k))
                       if helper != "argmax" else
                       td.argmax(td.sum(A[y, k], over=k) * td.cast(k2 - 1, td.float32), over={k2: 3}))
    np.testing.assert_array_equal(want, td.evaluate(plain, **a))
    s = td.schedule(out)
    assert [st.name for st in s.pipeline.stages].count("acc") == 1
    np.testing.assert_array_equal(td.build(s, target=backend)(**a), want)
    with pytest.raises(td.DefinitionError, match="named 'acc'"):
        td.schedule(td.compute("bad", {y: 3}, acc + td.sum(A[y, k] * 2, over=k, name="acc")))
