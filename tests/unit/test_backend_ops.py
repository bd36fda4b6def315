"""Backend operations against numpy, bit for bit, on hand-built loop IR.

Every test takes a `target` from BACKENDS; `build_for` is the one place that
knows how a backend turns a LoweredFunc into something callable. Hand-built IR
goes through the late passes first (`lower.finish`: flatten, legalise), as
every lowered function does.
"""

from __future__ import annotations

import ctypes
import functools
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tdsl import dtypes as dt
from tdsl.backend_c import build as build_finished
from tdsl.backend_c import compile as c_compile
from tdsl.backend_c import compile_source, render_standalone
from tdsl.backend_c import render as render_finished
from tdsl.backend_c.expr import literal
from tdsl.backend_c.writer import atom, binary, cast, ternary, unary
from tdsl.compute.expr import NUMPY_BINARY, NUMPY_COMPARE
from tdsl.errors import CompileError
from tdsl.lower import finish
from tdsl.lower.ir import (
    Allocate,
    Binary,
    Block,
    Buffer,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    For,
    ForKind,
    If,
    Let,
    Load,
    LoweredFunc,
    Select,
    Store,
    Unary,
    Var,
)
from tdsl.lower.passes.allocate import place_storage

BACKENDS = ["c", "llvm"]

INTS = [dt.int8, dt.int16, dt.int32, dt.int64, dt.uint8, dt.uint16, dt.uint32, dt.uint64]
FLOATS = [dt.float32, dt.float64]
ALL = [*FLOATS, *INTS, dt.bool_]

NP_BINARY = NUMPY_BINARY
NP_COMPARE = NUMPY_COMPARE
NP_UNARY = {"neg": np.negative, "invert": np.invert, "abs": np.abs, "floor": np.floor}
NP_CALL = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "floor": np.floor,
    "ceil": np.ceil,
    "abs": np.abs,
}
INT_BINARY = ["add", "sub", "mul", "floordiv", "mod", "min", "max", "and", "or", "xor"]
FLOAT_BINARY = ["add", "sub", "mul", "truediv", "floordiv", "mod", "min", "max"]


# --------------------------------------------------------------- building


def build(func: LoweredFunc, **options):
    """The C module of hand-built `func`, through the late passes."""
    return build_finished(finish(func, check=False), **options)


def render(func: LoweredFunc, flavour: str = "host") -> str:
    return render_finished(finish(func, check=False), flavour)


def build_for(target: str, func: LoweredFunc):
    """Something with `.call(arrays, sizes) -> status` for `func` on `target`."""
    if target == "c":
        return build(func)
    if target == "llvm":
        from tdsl import backend_llvm

        return backend_llvm.build(finish(func, check=False))
    raise ValueError(f"unknown backend {target!r}")


@functools.cache
def compiled(target: str, func: LoweredFunc):
    return build_for(target, func)


def run(target: str, func: LoweredFunc, inputs: list[np.ndarray], sizes: dict[str, int]):
    """Call `func` on `inputs`; returns the outputs (allocated here)."""
    values = {v.name: sizes[v.name] for v in func.sizes}
    outs = [
        np.full(tuple(_eval_index(e, values) for e in b.shape), 0x5A, dtype=b.dtype.np)
        for b in func.outputs
    ]
    inputs = [
        np.ascontiguousarray(x, dtype=b.dtype.np) for x, b in zip(inputs, func.inputs, strict=True)
    ]
    status = compiled(target, func).call([*inputs, *outs], [values[v.name] for v in func.sizes])
    assert status == 0
    return outs


def _eval_index(e: Expr, values: dict[str, int]) -> int:
    match e:
        case Const(v):
            return int(v)
        case Var(name):
            return values[name]
        case Binary("mul", a, b):
            return _eval_index(a, values) * _eval_index(b, values)
        case Binary("add", a, b):
            return _eval_index(a, values) + _eval_index(b, values)
    raise NotImplementedError(e)


N = Var("n")
I = Var("i")
ZERO = Const(0, dt.index)


def c(value, dtype=dt.index) -> Const:
    return Const(value, dtype)


def vector(name: str, dtype, kind: str, length: Expr = N) -> Buffer:
    return Buffer(name, dtype, (length,), kind)


def elementwise(name: str, dtype, exprs: dict, n_inputs: int = 2, kind=ForKind.VECTORIZED):
    """`out_k[i] = expr_k(a[i], b[i])` for each entry of `exprs` (name -> (fn, dtype))."""
    ins = tuple(vector("ab"[k], dtype, "input") for k in range(n_inputs))
    loads = [Load(b, (I,)) for b in ins]
    outs, stores = [], []
    for out_name, (fn, out_dtype) in exprs.items():
        out = vector(out_name, out_dtype, "output")
        outs.append(out)
        stores.append(Store(out, (I,), fn(*loads)))
    body = For("i", ZERO, N, kind, Block(tuple(stores)))
    return LoweredFunc(name, ins, tuple(outs), (N,), body)


def _binary(op, dtype):
    return lambda a, b: Binary(op, a, b, dtype)


def _compare(op):
    return lambda a, b: Compare(op, a, b)


@functools.cache
def int_kernel(dtype) -> LoweredFunc:
    exprs = {f"out_{op}": (_binary(op, dtype), dtype) for op in INT_BINARY}
    exprs |= {f"out_{op}": (_compare(op), dt.bool_) for op in NP_COMPARE}
    exprs["out_neg"] = (lambda a, b: Unary("neg", a, dtype), dtype)
    exprs["out_invert"] = (lambda a, b: Unary("invert", a, dtype), dtype)
    exprs["out_abs"] = (lambda a, b: Call("abs", (a,), dtype), dtype)
    exprs["out_floor"] = (lambda a, b: Call("floor", (a,), dtype), dtype)
    return elementwise(f"ops_{dtype.name}", dtype, exprs)


@functools.cache
def float_kernel(dtype) -> LoweredFunc:
    exprs = {f"out_{op}": (_binary(op, dtype), dtype) for op in FLOAT_BINARY}
    exprs |= {f"out_{op}": (_compare(op), dt.bool_) for op in NP_COMPARE}
    exprs["out_neg"] = (lambda a, b: Unary("neg", a, dtype), dtype)
    return elementwise(f"ops_{dtype.name}", dtype, exprs)


@functools.cache
def bool_kernel() -> LoweredFunc:
    b = dt.bool_
    exprs = {f"out_{op}": (_binary(op, b), b) for op in ("and", "or", "xor", "add", "mul")}
    exprs |= {f"out_{op}": (_compare(op), b) for op in NP_COMPARE}
    exprs["out_invert"] = (lambda x, y: Unary("invert", x, b), b)
    exprs["out_select"] = (lambda x, y: Select(x, y, Unary("invert", y, b), b), b)
    return elementwise("ops_bool", b, exprs)


def output(func: LoweredFunc, outs: list[np.ndarray], name: str) -> np.ndarray:
    return outs[[b.name for b in func.outputs].index(name)]


# --------------------------------------------------------------- data


def int_pairs(dtype) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(dtype.np)
    if dtype.bits == 8:  # exhaustive
        values = np.arange(info.min, info.max + 1)
        return np.repeat(values, values.size).astype(dtype.np), np.tile(values, values.size).astype(
            dtype.np
        )
    lo, hi = int(info.min), int(info.max)
    special = sorted(v for v in {lo, lo + 1, -2, -1, 0, 1, 2, 3, 7, hi - 1, hi} if lo <= v <= hi)
    special_a = np.repeat(np.array(special, dtype.np), len(special))
    special_b = np.tile(np.array(special, dtype.np), len(special))
    rng = np.random.default_rng(dtype.bits + (dtype.kind == "u"))
    rand_a = rng.integers(lo, hi, size=5000, endpoint=True, dtype=dtype.np)
    rand_b = rng.integers(lo, hi, size=5000, endpoint=True, dtype=dtype.np)
    small_b = rng.integers(max(lo, -9), 10, size=5000, endpoint=True, dtype=dtype.np)
    a = np.concatenate([special_a.astype(dtype.np), rand_a, rand_a])
    b = np.concatenate([special_b.astype(dtype.np), rand_b, small_b])
    return a, b


def float_pairs(dtype) -> tuple[np.ndarray, np.ndarray]:
    t = dtype.np
    fi = np.finfo(t)
    special = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 3.0, -3.0, 7.0, -7.0, 0.1, -0.1]
    special += [
        1e-30,
        -1e-30,
        1e30,
        -1e30,
        float(fi.max),
        float(fi.tiny),
        float(fi.smallest_subnormal),
    ]
    special += [np.inf, -np.inf, np.nan]
    s = np.array(special, dtype=t)
    rng = np.random.default_rng(dtype.bits)
    rand_a = (rng.standard_normal(4000) * 100).astype(t)
    rand_b = (rng.standard_normal(4000) * 10).astype(t)
    ints_a = rng.integers(-50, 50, 2000).astype(t)
    ints_b = rng.integers(-7, 8, 2000).astype(t)
    a = np.concatenate([np.repeat(s, s.size), rand_a, ints_a])
    b = np.concatenate([np.tile(s, s.size), rand_b, ints_b])
    return a, b


def assert_same(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    """Equal dtype and equal bits (any NaN matches any NaN)."""
    assert got.dtype == want.dtype, what
    if want.dtype.kind == "f":
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan, err_msg=f"NaN positions {what}")
        bits = f"u{want.dtype.itemsize}"
        bad = np.flatnonzero(got[~nan].view(bits) != want[~nan].view(bits))
        assert bad.size == 0, (
            f"{what}: first mismatch got {got[~nan][bad[:5]]} want {want[~nan][bad[:5]]}"
        )
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


# --------------------------------------------------------------- element ops


@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize("op", [*INT_BINARY, *NP_COMPARE])
@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.name)
def test_int_binary(target, dtype, op):
    func = int_kernel(dtype)
    a, b = int_pairs(dtype)
    outs = run(target, func, [a, b], {"n": a.size})
    with np.errstate(all="ignore"):
        want = (NP_BINARY | NP_COMPARE)[op](a, b)
    assert_same(output(func, outs, f"out_{op}"), want, f"{op} {dtype.name}")


@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize("op", ["neg", "invert", "abs", "floor"])
@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.name)
def test_int_unary(target, dtype, op):
    func = int_kernel(dtype)
    a, b = int_pairs(dtype)
    outs = run(target, func, [a, b], {"n": a.size})
    with np.errstate(all="ignore"):
        want = NP_UNARY[op](a)
    assert_same(output(func, outs, f"out_{op}"), want, f"{op} {dtype.name}")


@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.name)
def test_wrapping_arithmetic_of_constants_alone(target, dtype):
    # 0 + -2, 3 - 5, -(7) and 2**31 * 4 with no operand of a 64-bit C type: C must not
    # compute them in a 32-bit unsigned int (a pad read outside the tensor, folded to
    # its value, gave int64 0 + -2 = 4294967294)
    exprs = [Binary("add", c(0, dtype), c(-2, dtype) if dtype.kind == "i" else c(3, dtype), dtype),
             Binary("sub", c(3, dtype), c(5, dtype), dtype),
             Unary("neg", c(7, dtype), dtype),
             Binary("mul", c(2**(dtype.bits - 1) - 1, dtype), c(4, dtype), dtype)]
    out = vector("out", dtype, "output", c(len(exprs)))
    body = Block(tuple(Store(out, (c(k),), e) for k, e in enumerate(exprs)))
    func = finish(LoweredFunc("consts", (), (out,), (), body))
    got = run(target, func, [], {})[0]
    with np.errstate(all="ignore"):
        t = dtype.np.type
        big = np.array(2**(dtype.bits - 1) - 1, t)
        want = np.array([t(0) + (t(-2) if dtype.kind == "i" else t(3)), t(3) - t(5), -t(7),
                         big * t(4)], t)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize("dtype", [dt.int8, dt.int16, dt.int32, dt.int64], ids=lambda d: d.name)
def test_int_division_edges(target, dtype):
    info = np.iinfo(dtype.np)
    a = np.array([info.min, info.min, info.max, 7, -7, 0, info.min, 5, -5], dtype.np)
    b = np.array([-1, 0, 0, 0, 0, 0, 1, -1, -1], dtype.np)
    outs = run(target, int_kernel(dtype), [a, b], {"n": a.size})
    div = output(int_kernel(dtype), outs, "out_floordiv")
    mod = output(int_kernel(dtype), outs, "out_mod")
    assert div[0] == info.min and mod[0] == 0  # MIN // -1 wraps, MIN % -1 == 0
    assert (div[1:6] == 0).all() and (mod[1:6] == 0).all()  # x // 0 == x % 0 == 0
    with np.errstate(all="ignore"):
        assert_same(div, np.floor_divide(a, b))
        assert_same(mod, np.remainder(a, b))


@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize("op", ["and", "or", "xor", "add", "mul", *NP_COMPARE, "invert", "select"])
def test_bool_ops(target, op):
    func = bool_kernel()
    a = np.array([False, False, True, True] * 9)
    b = np.array([False, True, False, True] * 9)
    outs = run(target, func, [a, b], {"n": a.size})
    want = {
        "and": a & b,
        "or": a | b,
        "xor": a ^ b,
        "add": np.add(a, b),
        "mul": np.multiply(a, b),
        "invert": ~a,
        "select": np.where(a, b, ~b),
    }.get(op)
    if want is None:
        want = NP_COMPARE[op](a, b)
    assert_same(output(func, outs, f"out_{op}"), want, op)


@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize("op", [*FLOAT_BINARY, *NP_COMPARE, "neg"])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_float_ops(target, dtype, op):
    func = float_kernel(dtype)
    a, b = float_pairs(dtype)
    outs = run(target, func, [a, b], {"n": a.size})
    with np.errstate(all="ignore"):
        want = np.negative(a) if op == "neg" else (NP_BINARY | NP_COMPARE)[op](a, b)
    assert_same(output(func, outs, f"out_{op}"), want, f"{op} {dtype.name}")


@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_float_min_max_propagate_nan(target, dtype):
    func = float_kernel(dtype)
    a = np.array([np.nan, 1.0, np.nan, -np.inf, 0.0, -0.0] * 4, dtype.np)
    b = np.array([1.0, np.nan, np.nan, np.nan, -0.0, 0.0] * 4, dtype.np)
    outs = run(target, func, [a, b], {"n": a.size})
    lo, hi = output(func, outs, "out_min"), output(func, outs, "out_max")
    assert np.isnan(lo[[0, 1, 2, 3]]).all() and np.isnan(hi[[0, 1, 2, 3]]).all()
    assert_same(lo, np.minimum(a, b))
    assert_same(hi, np.maximum(a, b))


@pytest.mark.parametrize("target", BACKENDS)
@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(width=32), st.floats(width=32).filter(lambda x: x != 0)),
        min_size=1,
        max_size=40,
    )
)
def test_float32_floordiv_mod_any_values(target, pairs):
    func = float_kernel(dt.float32)
    a = np.array([p[0] for p in pairs], np.float32)
    b = np.array([p[1] for p in pairs], np.float32)
    outs = run(target, func, [a, b], {"n": a.size})
    with np.errstate(all="ignore"):
        assert_same(output(func, outs, "out_floordiv"), np.floor_divide(a, b))
        assert_same(output(func, outs, "out_mod"), np.remainder(a, b))


# --------------------------------------------------------------- casts and calls


def _cast_to(dtype):
    return lambda a: Cast(a, dtype)


@functools.cache
def cast_kernel(src) -> LoweredFunc:
    exprs = {f"to_{d.name}": (_cast_to(d), d) for d in ALL if d != src}
    return elementwise(f"cast_{src.name}", src, exprs, n_inputs=1)


def cast_values(src) -> np.ndarray:
    if src.is_bool:
        return np.array([False, True] * 5)
    if src.is_float:
        v = [0.0, -0.0, 0.4, -0.6, 1.0, 2.7, -2.7, 100.5, 127.9, -128.9, 255.5, 1e5, -1e5]
        v += [2.0**31 - 128, -(2.0**31), 2.0**32 - 256, 1e15 + 0.5, -(2.0**62), np.nan, 1e-40]
        return np.array(v, src.np)
    info = np.iinfo(src.np)
    v = [info.min, info.min + 1, -1, 0, 1, 2, 100, 127, 128, 255, 256, 65535, 65536, info.max]
    v += [2**24 + 1, 2**31 - 1, 2**53 + 1, 2**62 + 2**40 + 1]
    return np.array([x for x in v if info.min <= x <= info.max], src.np)


def _representable(values: np.ndarray, to) -> np.ndarray:
    """Mask of float values whose conversion to integer dtype `to` is defined."""
    if not to.is_int:
        return np.ones(values.shape, bool)
    info = np.iinfo(to.np)
    with np.errstate(invalid="ignore"):
        t = np.trunc(values.astype(np.float64))
        return (t >= info.min) & (t <= info.max) & ~np.isnan(values)


@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize(
    ("src", "to"),
    [(s, t) for s in ALL for t in ALL if s != t],
    ids=lambda d: d.name,
)
def test_cast(target, src, to):
    func = cast_kernel(src)
    a = cast_values(src)
    got = output(func, run(target, func, [a], {"n": a.size}), f"to_{to.name}")
    with np.errstate(all="ignore"):
        want = a.astype(to.np)
    keep = _representable(a, to) if src.is_float else np.ones(a.shape, bool)
    assert keep.sum() >= 5
    assert_same(got[keep], want[keep], f"{src.name} -> {to.name}")


def _call(fn, dtype):
    return lambda a: Call(fn, (a,), dtype)


@functools.cache
def call_kernel(dtype) -> LoweredFunc:
    exprs = {f"out_{fn}": (_call(fn, dtype), dtype) for fn in NP_CALL}
    return elementwise(f"calls_{dtype.name}", dtype, exprs, n_inputs=1)


@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize("fn", list(NP_CALL))
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_math_calls(target, dtype, fn):
    func = call_kernel(dtype)
    rng = np.random.default_rng(3)
    a = np.concatenate([rng.uniform(-20, 20, 500), [-2.5, -0.5, 0.0, 0.5, 1.5, 2.5]]).astype(
        dtype.np
    )
    if fn in ("log", "sqrt"):
        a = np.abs(a) + dtype.np.type(0.25)
    got = output(func, run(target, func, [a], {"n": a.size}), f"out_{fn}")
    want = NP_CALL[fn](a)
    assert got.dtype == want.dtype
    if fn in ("floor", "ceil", "abs"):
        assert_same(got, want, fn)
    else:
        rtol = 4e-7 if dtype == dt.float32 else 1e-15
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


# --------------------------------------------------------------- statements


@pytest.mark.parametrize("target", BACKENDS)
def test_parallel_vectorized_nest(target):
    m = Var("m")
    j = Var("j")
    a = Buffer("A", dt.float32, (N, m), "input")
    b = Buffer("B", dt.float32, (m,), "input")
    out = Buffer("C", dt.float32, (N, m), "output")
    scaled = Binary("mul", Load(a, (I, j)), c(2.5, dt.float32), dt.float32)
    value = Binary("add", scaled, Load(b, (j,)), dt.float32)
    # a vectorized loop has a constant bound on its extent (passes.verify): m <= 256
    inner = For("j", ZERO, m, ForKind.VECTORIZED, Store(out, (I, j), value), 256)
    func = LoweredFunc("nest", (a, b), (out,), (m, N), For("i", ZERO, N, ForKind.PARALLEL, inner))
    src = render(func)
    assert "tdsl_parallel_for(nest_i_task, &i_env, 0, n);" in src
    assert "#pragma omp simd" in src
    assert "C[i * m + j] = fmaf(A[i * m + j], 2.5f, B[j]);" in src
    rng = np.random.default_rng(0)
    for n_, m_ in [(0, 5), (1, 1), (37, 129), (64, 3)]:
        av = rng.standard_normal((n_, m_)).astype(np.float32)
        bv = rng.standard_normal(m_).astype(np.float32)
        (got,) = run(target, func, [av, bv], {"n": n_, "m": m_})
        # a*b+c may contract to one FMA: equal to rounding, not bit for bit
        np.testing.assert_allclose(got, av * np.float32(2.5) + bv, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("target", BACKENDS)
def test_let_if_select_unrolled(target):
    a = vector("a", dt.int32, "input")
    out = vector("out", dt.int32, "output")
    r = Var("r")
    load_r = Load(a, (r,))
    branches = If(
        Compare("lt", I, c(3)),
        Store(out, (I,), c(-1, dt.int32)),
        If(
            Compare("eq", Binary("mod", I, c(2), dt.index), ZERO),
            Store(out, (I,), load_r),
            Store(
                out,
                (I,),
                Select(Compare("gt", load_r, c(0, dt.int32)), load_r, c(7, dt.int32), dt.int32),
            ),
        ),
    )
    body = Let("r", Binary("sub", Binary("sub", N, c(1), dt.index), I, dt.index), branches)
    func = LoweredFunc("rev", (a,), (out,), (N,), For("i", ZERO, N, ForKind.SERIAL, body))
    src = render(func)
    assert "const int64_t r = n - 1 - i;" in src and "} else if (" in src
    av = np.arange(-10, 11, dtype=np.int32)
    (got,) = run(target, func, [av], {"n": av.size})
    rev = av[::-1]
    idx = np.arange(av.size)
    want = np.where(idx < 3, -1, np.where(idx % 2 == 0, rev, np.where(rev > 0, rev, 7)))
    assert_same(got, want.astype(np.int32))

    a8 = Buffer("a", dt.int32, (c(8),), "input")
    out8 = Buffer("out", dt.int32, (c(8),), "output")
    reverse = Store(out8, (I,), Load(a8, (Binary("sub", c(7), I, dt.index),)))
    loop = For("i", ZERO, c(8), ForKind.UNROLLED, reverse, max_extent=8)
    unrolled = LoweredFunc("unrolled", (a8,), (out8,), (), loop)
    assert "#pragma GCC unroll 8" in render(unrolled)
    (got,) = run(target, unrolled, [np.arange(8, dtype=np.int32)], {})
    assert_same(got, np.arange(8, dtype=np.int32)[::-1].copy())


def _window_sum(temp_shape, loop_kind, name):
    """out[i] = sum_k (a[i] * k) via a temp filled per iteration."""
    a = vector("a", dt.float64, "input")
    out = vector("out", dt.float64, "output")
    tmp = Buffer("tmp", dt.float64, temp_shape, "temp")
    k = Var("k")
    scaled = Binary("mul", Load(a, (I,)), Cast(k, dt.float64), dt.float64)
    fill = For("k", ZERO, c(4), ForKind.SERIAL, Store(tmp, (k,), scaled))
    total = Load(tmp, (c(0),))
    for q in (1, 2, 3):
        total = Binary("add", total, Load(tmp, (c(q),)), dt.float64)
    body = Allocate(tmp, Block((fill, Store(out, (I,), total))))
    sizes = tuple(sorted({e for e in temp_shape if isinstance(e, Var)} | {N}, key=lambda v: v.name))
    return place_storage(LoweredFunc(name, (a,), (out,), sizes, For("i", ZERO, N, loop_kind, body)))


@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.PARALLEL, ForKind.VECTORIZED])
def test_small_constant_temp_on_stack(target, kind):
    func = _window_sum((c(4),), kind, f"stack_{kind.value}")
    src = render(func)
    assert "double tmp_storage[4] __attribute__((aligned(64)));" in src and "malloc" not in src
    assert "double *restrict tmp = tmp_storage;" in src
    av = np.linspace(-3, 3, 101)
    (got,) = run(target, func, [av], {"n": av.size})
    assert_same(got, av * 0.0 + av * 1.0 + av * 2.0 + av * 3.0)


@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.PARALLEL, ForKind.VECTORIZED])
def test_symbolic_temp_on_heap_and_out_of_memory(target, kind):
    func = _window_sum((Var("m"),), kind, f"heap_{kind.value}")
    src = render(func)
    assert "alloc_temp(m, sizeof(double))" in src and "free(tmp);" in src
    if kind is ForKind.PARALLEL:  # a failed iteration returns 1, as its chunk does
        assert "static int heap_parallel_i_body(" in src
        assert "if (tdsl_parallel_for(heap_parallel_i_task, " in src
    av = np.linspace(-3, 3, 101)
    (got,) = run(target, func, [av], {"n": av.size, "m": 4})
    assert_same(got, av * 0.0 + av * 1.0 + av * 2.0 + av * 3.0)
    # 2**62 doubles cannot be had: the kernel reports it instead of crashing.
    out = np.zeros_like(av)
    assert compiled(target, func).call([av, out], [2**62, av.size]) == 1


@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize("parallel", [False, True])
def test_nested_temps_free_on_failure(target, parallel):
    """A large constant temp (heap) around a per-row symbolic one; the inner
    allocation failing must leave without leaking the outer one."""
    m = Var("m")
    a = vector("a", dt.int64, "input")
    out = vector("out", dt.int64, "output")
    big = Buffer("big", dt.int64, (c(20000),), "temp")
    row = Buffer("row", dt.int64, (m,), "temp")
    j = Var("j")
    inner = Allocate(
        row,
        Block(
            (
                Store(row, (ZERO,), Binary("mul", Load(a, (I,)), c(3, dt.int64), dt.int64)),
                Store(big, (I,), Load(row, (ZERO,))),
            )
        ),
    )
    kind = ForKind.PARALLEL if parallel else ForKind.SERIAL
    body = Block(
        (
            For("i", ZERO, N, kind, inner),
            For("j", ZERO, N, ForKind.SERIAL, Store(out, (j,), Load(big, (j,)))),
        )
    )
    func = place_storage(LoweredFunc(f"nested_{parallel}", (a,), (out,), (m, N), Allocate(big, body)))
    src = render(func)
    assert src.count("free(big);") == 2  # once on the failure path, once at the end
    av = np.arange(100, dtype=np.int64) - 50
    (got,) = run(target, func, [av], {"n": av.size, "m": 1})
    assert_same(got, av * 3)
    assert compiled(target, func).call([av, np.zeros_like(av)], [2**62, av.size]) == 1


def _heap_in_use() -> int:
    """Bytes malloc has handed out (glibc's mallinfo2), to catch leaks."""
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallinfo2"):
        pytest.skip("needs glibc's mallinfo2")

    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (f, ctypes.c_size_t)
            for f in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
        ]

    libc.mallinfo2.restype = MallInfo2
    info = libc.mallinfo2()
    return info.uordblks + info.hblkhd


@pytest.mark.parametrize("target", BACKENDS)
def test_failure_deep_in_a_parallel_iteration(target):
    """parallel i { A[m] { serial j { B[p] } } } inside an outer temp: B failing
    frees A, skips the rest of the iteration, and the kernel frees the outer
    temp and returns 1; nothing leaks."""
    m, p = Var("m"), Var("p")
    a = vector("a", dt.float64, "input")
    out = vector("out", dt.float64, "output")
    outer = Buffer("outer", dt.float64, (m,), "temp")
    per_i = Buffer("per_i", dt.float64, (m,), "temp")
    per_j = Buffer("per_j", dt.float64, (p,), "temp")
    j = Var("j")
    shifted = Binary("add", Load(a, (I,)), Cast(j, dt.float64), dt.float64)
    inner = Allocate(
        per_j,
        Block((Store(per_j, (ZERO,), shifted), Store(per_i, (j,), Load(per_j, (ZERO,))))),
    )
    total = Binary("add", Load(per_i, (ZERO,)), Load(per_i, (c(1),)), dt.float64)
    body = Allocate(
        per_i,
        Block((For("j", ZERO, c(2), ForKind.SERIAL, inner), Store(out, (I,), total))),
    )
    loop = For("i", ZERO, N, ForKind.PARALLEL, body)
    func = place_storage(LoweredFunc(
        "deep",
        (a,),
        (out,),
        (m, N, p),
        Allocate(outer, Block((Store(outer, (ZERO,), c(1.0, dt.float64)), loop))),
    ))
    src = render(func)
    # the parallel iteration is a function of its own: a failure frees what it holds
    # and returns 1 from it, the task's function returns 1, and the kernel unwinds
    body = src[src.index("static int deep_i_body("):src.index("static int deep_i_task(")]
    assert "return 1;" in body and "free(per_i);" in body
    assert "if (tdsl_parallel_for(deep_i_task, " in src
    av = np.linspace(0, 1, 16)
    (got,) = run(target, func, [av], {"m": 2, "n": 16, "p": 1})
    assert_same(got, av + (av + 1.0))
    kernel = compiled(target, func)
    args = [av, np.zeros_like(av)]
    assert kernel.call(args, [100_000, 16, 2**62]) == 1  # warm up the allocator
    before = _heap_in_use()
    for _ in range(20):
        assert kernel.call(args, [100_000, 16, 2**62]) == 1
    assert _heap_in_use() - before < 1_000_000


@pytest.mark.parametrize("target", BACKENDS)
def test_awkward_names(target):
    """IR names that are C keywords, helper or library names, or not identifiers."""
    t = dt.int32
    a = Buffer("int", t, (Var("for"),), "input")
    b = Buffer("a.b", t, (Var("for"),), "input")
    out = Buffer("min_i32", t, (Var("for"),), "output")
    v = Var("free")
    value = Binary("min", Load(a, (v,)), Load(b, (v,)), t)
    shadow = Let("free", Binary("add", v, ZERO, dt.index), Store(out, (Var("free"),), value))
    func = LoweredFunc(
        "return",
        (a, b),
        (out,),
        (Var("for"),),
        For("free", ZERO, Var("for"), ForKind.SERIAL, shadow),
    )
    src = render(func)
    assert "int return_1(" in src and "const int32_t *restrict int_1," in src
    assert "min_i32_1[free_2] = min_i32(int_1[free_2], a_b[free_2]);" in src
    av = np.arange(-20, 20, dtype=np.int32)
    bv = np.full(40, 3, np.int32)
    (got,) = run(target, func, [av, bv], {"for": 40})
    assert_same(got, np.minimum(av, bv))


@pytest.mark.parametrize("target", BACKENDS)
def test_sibling_and_nested_lets_with_one_name(target):
    a = vector("a", dt.int64, "input")
    out = Buffer("out", dt.int64, (N, c(2)), "output")
    x = Var("x")
    body = Let(
        "x",
        I,
        Block(
            (
                Let(
                    "x",
                    Binary("add", x, c(100), dt.index),
                    Store(out, (I, ZERO), Cast(x, dt.int64)),
                ),
                Store(out, (I, c(1)), Load(a, (x,))),
            )
        ),
    )
    func = LoweredFunc("lets", (a,), (out,), (N,), For("i", ZERO, N, ForKind.SERIAL, body))
    av = np.arange(10, dtype=np.int64) * 7
    (got,) = run(target, func, [av], {"n": 10})
    assert_same(got, np.stack([np.arange(10) + 100, av], axis=1))


# --------------------------------------------------------------- the C text


def test_wrapping_arithmetic_text():
    t = dt.uint16
    func = elementwise(
        "mul16", t, {"out": (lambda a, b: Binary("add", Binary("mul", a, b, t), c(-1, t), t), t)}
    )
    src = render(func)
    assert "out[i] = (uint16_t)((uint32_t)a[i] * (uint32_t)b[i] - 1u);" in src
    assert "floordiv_" not in src  # only the helpers used


def test_host_source_is_warning_free(tmp_path):
    funcs = [
        int_kernel(dt.int8),
        float_kernel(dt.float32),
        call_kernel(dt.float64),
        cast_kernel(dt.uint32),
    ]
    funcs.append(_window_sum((Var("m"),), ForKind.PARALLEL, "warn_heap"))
    flags = (*c_compile.DEFAULT_FLAGS, "-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror")
    for func in funcs:
        compile_source(render(func), flags, cache_dir=tmp_path)


def test_portable_flavour(tmp_path):
    func = int_kernel(dt.int16)
    src = render(func, "portable")
    assert src == render_standalone(finish(func, check=False)).source  # one portable C: td.emit_c's
    assert "#pragma" not in src and "__attribute__" not in src and "stdlib" not in src
    flags = ("-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-shared")
    compile_source(src, flags, cache_dir=tmp_path)
    stack = render(_window_sum((c(4),), ForKind.PARALLEL, "portable_stack"), "portable")
    assert "double tmp_storage[4];" in stack and "double *restrict tmp = tmp_storage;" in stack
    with pytest.raises(ValueError, match="tmp.*workspace"):
        render(_window_sum((Var("m"),), ForKind.SERIAL, "portable_heap"), "portable")


# --------------------------------------------------------------- compile and cache


def test_compile_error_keeps_source_and_log(tmp_path):
    with pytest.raises(CompileError) as info:
        compile_source("int broken(void) { return 0 }\n", cache_dir=tmp_path)
    err = info.value
    assert err.source_path and os.path.exists(err.source_path)
    assert "expected" in err.log and err.log in str(err)
    assert err.source_path in str(err)
    with open(err.source_path) as f:
        assert "broken" in f.read()


def test_second_build_hits_the_cache(tmp_path, monkeypatch):
    func = int_kernel(dt.int32)
    first = build(func, cache_dir=tmp_path)

    def no_compiler(*args, **kwargs):
        raise AssertionError(f"compiler invoked: {args}")

    monkeypatch.setattr(c_compile.subprocess, "run", no_compiler)
    monkeypatch.setattr(c_compile.subprocess, "Popen", no_compiler)
    start = time.perf_counter()
    second = build(func, cache_dir=tmp_path)
    assert time.perf_counter() - start < 0.5
    assert second.path == first.path and second.source == first.source
    a = np.arange(-5, 5, dtype=np.int32)
    outs = [np.empty(10, b.dtype.np) for b in func.outputs]
    assert second.call([a, a, *outs], [10]) == 0
    assert_same(output(func, outs, "out_mul"), a * a)


def test_concurrent_builds_of_one_kernel(tmp_path):
    src = render(float_kernel(dt.float64)).replace("ops_float64", "ops_concurrent")
    with ThreadPoolExecutor(4) as pool:
        paths = list(pool.map(lambda _: compile_source(src, cache_dir=tmp_path), range(4)))
    assert len(set(paths)) == 1 and os.path.exists(paths[0])
    leftovers = [p for p in os.listdir(tmp_path) if p.startswith(".")]
    assert leftovers == []


def test_compiler_failure_is_not_cached(tmp_path):
    for _ in range(2):
        with pytest.raises(CompileError, match="no, on purpose"):
            compile_source("#error no, on purpose\n", cache_dir=tmp_path)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".so")]


def test_writer_parenthesises_minimally():
    x, y, z = atom("x"), atom("y"), atom("z")
    assert binary("-", x, binary("-", y, z)).text == "x - (y - z)"
    assert binary("-", binary("-", x, y), z).text == "x - y - z"
    assert binary("*", binary("+", x, y), z).text == "(x + y) * z"
    assert binary("+", x, binary("*", y, z)).text == "x + y * z"
    assert binary("+", x, binary("-", y, z)).text == "x + (y - z)"  # not for floats
    assert binary("+", x, binary("-", y, z), exact=True).text == "x + y - z"
    assert binary("-", x, binary("+", y, z), exact=True).text == "x - (y + z)"
    assert binary("*", x, binary("*", y, z), exact=True).text == "x * y * z"
    assert binary("*", x, binary("/", y, z), exact=True).text == "x * (y / z)"
    # a right operand whose chain holds a % or a / keeps its parentheses: 2 * (j % 5 * J)
    # is not (2 * j) % 5 * J (fuzz C seed 9931, case 204: a grouped product's operand)
    mod = binary("*", binary("%", x, atom("5")), z, exact=True)
    assert binary("*", atom("2"), mod, exact=True).text == "2 * (x % 5 * z)"
    quo = binary("*", binary("/", x, y), z, exact=True)
    assert binary("*", atom("2"), quo, exact=True).text == "2 * (x / y * z)"
    assert binary("*", atom("2"), binary("*", binary("*", x, y), z, exact=True),
                  exact=True).text == "2 * x * y * z"
    assert binary("|", binary("&", x, y), z).text == "(x & y) | z"
    assert binary("==", binary("<", x, y), z).text == "(x < y) == z"
    assert binary("<", binary("+", x, y), z).text == "x + y < z"
    assert unary("-", literal(-5, dt.int32)).text == "-(-5)"
    assert cast("uint32_t", binary("+", x, y)).text == "(uint32_t)(x + y)"
    assert ternary(binary("<", x, y), ternary(x, y, z), z).text == "x < y ? (x ? y : z) : z"
    assert literal(-(2**63), dt.int64).text == "INT64_MIN"
    assert literal(0.1, dt.float32).text == "0.1f"
    assert literal(1e300, dt.float64).text == "1e+300"
    assert literal(float("-inf"), dt.float32).text == "-INFINITY"
    assert literal(4294967295, dt.uint32).text == "4294967295u"
