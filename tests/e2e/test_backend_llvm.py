"""The LLVM backend on hand-built loop IR, against numpy bit for bit.

The IR goes through the late passes first (`lower.finish`: flatten, legalise),
as every lowered function does: the backend takes flat, legalised IR."""

from __future__ import annotations

import gc
import re
import weakref

import numpy as np
import pytest

from tdsl import dtypes
from tdsl.backend_llvm import LLVMModule, clear_cache
from tdsl.backend_llvm import build as build_finished
from tdsl.backend_llvm import emit_module as emit_finished
from tdsl.backend_llvm import runtime as llvm_runtime
from tdsl.compute.expr import NUMPY_BINARY, NUMPY_COMPARE
from tdsl.errors import ArgumentError
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


def build(func: LoweredFunc, **options) -> LLVMModule:
    """The module of hand-built `func`, through the late passes."""
    return build_finished(finish(func, check=False), **options)


def emit_module(func: LoweredFunc) -> str:
    return emit_finished(finish(func, check=False))


INTS = [dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64]
UINTS = [dtypes.uint8, dtypes.uint16, dtypes.uint32]
FLOATS = [dtypes.float32, dtypes.float64]
INTEGERS = INTS + UINTS
ALL = INTEGERS + FLOATS + [dtypes.bool_]

n = Var("n")
i = Var("i")
rng = np.random.default_rng(0)


def idx(v: int) -> Const:
    return Const(v, dtypes.index)


def elementwise(name, in_dtypes, out_dtype, value, kind=ForKind.SERIAL, max_extent=None):
    """out[i] = value(in0[i], in1[i], ...) for i in [0, n)."""
    ins = tuple(Buffer(f"in{k}", d, (n,), "input") for k, d in enumerate(in_dtypes))
    out = Buffer("out", out_dtype, (n,), "output")
    store = Store(out, (i,), value(*(Load(b, (i,)) for b in ins)))
    return LoweredFunc(name, ins, (out,), (n,), For("i", idx(0), n, kind, store, max_extent))


def run(func: LoweredFunc, *arrays: np.ndarray) -> np.ndarray:
    out = np.empty(len(arrays[0]), dtype=func.outputs[0].dtype.np)
    assert build(func).call([*arrays, out], [len(out)]) == 0
    return out


def assert_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Same dtype and bits; NaNs match NaNs (their payloads may differ)."""
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if got.dtype.kind == "f":
        got_nan, want_nan = np.isnan(got), np.isnan(want)
        np.testing.assert_array_equal(got_nan, want_nan)
        bits = np.dtype(f"u{got.dtype.itemsize}")
        np.testing.assert_array_equal(got[~got_nan].view(bits), want[~want_nan].view(bits))
    else:
        np.testing.assert_array_equal(got, want)


def int_pairs(dtype: dtypes.DType) -> tuple[np.ndarray, np.ndarray]:
    """Every pair for 8-bit types; extremes x extremes plus random pairs otherwise."""
    info = np.iinfo(dtype.np)
    if dtype.bits == 8:
        values = np.arange(info.min, info.max + 1)
        a, b = np.meshgrid(values, values)
        return a.ravel().astype(dtype.np), b.ravel().astype(dtype.np)
    special = sorted({info.min, info.min + 1, -7, -1, 0, 1, 2, 7, info.max - 1, info.max})
    special = np.array([v for v in special if info.min <= v <= info.max], dtype=dtype.np)
    a, b = (x.ravel() for x in np.meshgrid(special, special))
    ra = rng.integers(info.min, info.max, 5000, dtype=dtype.np, endpoint=True)
    rb = rng.integers(info.min, info.max, 5000, dtype=dtype.np, endpoint=True)
    small = rng.integers(-9 if dtype.is_signed else 0, 10, 5000).astype(dtype.np)
    return np.concatenate([a, ra, ra]), np.concatenate([b, rb, small])


def float_values(dtype: dtypes.DType, size: int = 4000) -> np.ndarray:
    special = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 3.0, -3.0, 7.0, 1e-30, np.inf, -np.inf]
    special += [np.nan, np.finfo(dtype.np).max, np.finfo(dtype.np).tiny]
    rand = rng.standard_normal(size) * 10.0 ** rng.integers(-3, 4, size)
    return np.concatenate([special, np.round(rand[: size // 4]), rand]).astype(dtype.np)


def float_pairs(dtype: dtypes.DType) -> tuple[np.ndarray, np.ndarray]:
    special = float_values(dtype, 0)
    a, b = (x.ravel() for x in np.meshgrid(special, special))
    return np.concatenate([a, float_values(dtype)]), np.concatenate([b, float_values(dtype)[::-1]])




def binary_kernel(op: str, dtype: dtypes.DType) -> LoweredFunc:
    return elementwise(
        f"{op}_{dtype.name}", [dtype, dtype], dtype, lambda a, b: Binary(op, a, b, dtype)
    )


def numpy_binary(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return NUMPY_BINARY[op](a, b)


# ---------------------------------------------------------------- integers


INT_OPS = ["add", "sub", "mul", "floordiv", "mod", "min", "max", "and", "or", "xor"]


@pytest.mark.parametrize("dtype", INTEGERS, ids=lambda d: d.name)
@pytest.mark.parametrize("op", INT_OPS)
def test_integer_binary(op, dtype):
    a, b = int_pairs(dtype)
    assert_bits(run(binary_kernel(op, dtype), a, b), numpy_binary(op, a, b))


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.name)
def test_integer_division_edges(dtype):
    info = np.iinfo(dtype.np)
    a = np.array([info.min, info.min, 5, -5, 0, info.max, info.min], dtype=dtype.np)
    b = np.array([-1, 0, 0, 0, 0, -1, 1], dtype=dtype.np)
    div = run(binary_kernel("floordiv", dtype), a, b)
    mod = run(binary_kernel("mod", dtype), a, b)
    assert div.tolist() == [info.min, 0, 0, 0, 0, -info.max, info.min]
    assert mod.tolist() == [0] * 7


@pytest.mark.parametrize("dtype", INTEGERS + FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("op", list(NUMPY_COMPARE))
def test_compare(op, dtype):
    a, b = int_pairs(dtype) if dtype.is_int else float_pairs(dtype)
    func = elementwise(
        f"{op}_{dtype.name}", [dtype, dtype], dtypes.bool_, lambda x, y: Compare(op, x, y)
    )
    assert_bits(run(func, a, b), NUMPY_COMPARE[op](a, b))


@pytest.mark.parametrize("dtype", INTEGERS, ids=lambda d: d.name)
def test_integer_unary(dtype):
    a, _ = int_pairs(dtype)
    for op, ref in (("neg", np.negative), ("invert", np.invert)):
        func = elementwise(
            f"{op}_{dtype.name}", [dtype], dtype, lambda x, op=op: Unary(op, x, dtype)
        )
        with np.errstate(all="ignore"):
            assert_bits(run(func, a), ref(a))
    func = elementwise(f"abs_{dtype.name}", [dtype], dtype, lambda x: Call("abs", (x,), dtype))
    assert_bits(run(func, a), np.abs(a))


def test_abs_wraps_at_min():
    func = elementwise("abs8", [dtypes.int8], dtypes.int8, lambda x: Call("abs", (x,), dtypes.int8))
    a = np.array([-128, -127, 0, 127], dtype=np.int8)
    assert run(func, a).tolist() == [-128, 127, 0, 127]


# ------------------------------------------------------------------ floats


FLOAT_OPS = ["add", "sub", "mul", "truediv", "floordiv", "mod", "min", "max"]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("op", FLOAT_OPS)
def test_float_binary(op, dtype):
    a, b = float_pairs(dtype)
    assert_bits(run(binary_kernel(op, dtype), a, b), numpy_binary(op, a, b))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_float_floordiv_mod_signs(dtype):
    a = np.array([7, -7, 7, -7, 0.5, -0.5, 0, -0.0, 6, -6, 1, -1], dtype=dtype.np)
    b = np.array([2, 2, -2, -2, 1, 1, -3, 3, 3, -3, 0, 0], dtype=dtype.np)
    assert_bits(run(binary_kernel("floordiv", dtype), a, b), numpy_binary("floordiv", a, b))
    assert_bits(run(binary_kernel("mod", dtype), a, b), numpy_binary("mod", a, b))


@pytest.mark.parametrize("op", ["min", "max"])
def test_min_max_propagate_nan(op):
    a = np.array([np.nan, 1.0, np.nan, 2.0], dtype=np.float32)
    b = np.array([1.0, np.nan, np.nan, 3.0], dtype=np.float32)
    got = run(binary_kernel(op, dtypes.float32), a, b)
    assert np.isnan(got[:3]).all() and got[3] == (2.0 if op == "min" else 3.0)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_float_unary(dtype):
    a = float_values(dtype)
    func = elementwise(f"neg_{dtype.name}", [dtype], dtype, lambda x: Unary("neg", x, dtype))
    assert_bits(run(func, a), np.negative(a))


EXACT_CALLS = {"sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil, "abs": np.abs}
APPROX_CALLS = {"exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "tanh": np.tanh}


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("fn", list(EXACT_CALLS) + list(APPROX_CALLS))
def test_math_calls(fn, dtype):
    a = float_values(dtype)
    if fn == "exp":
        a = np.clip(a, -80, 80).astype(dtype.np)
    if fn in ("sin", "cos"):
        a = a[np.abs(a) < 1e4]
    func = elementwise(f"{fn}_{dtype.name}", [dtype], dtype, lambda x: Call(fn, (x,), dtype))
    got = run(func, a)
    with np.errstate(all="ignore"):
        want = {**EXACT_CALLS, **APPROX_CALLS}[fn](a)
    if fn in EXACT_CALLS:
        assert_bits(got, want)
    else:
        tol = 2e-6 if dtype is dtypes.float32 else 1e-14
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


# -------------------------------------------------------------------- bool


@pytest.mark.parametrize("op", ["and", "or", "xor", "min", "max"])
def test_bool_binary(op):
    a = np.array([False, False, True, True])
    b = np.array([False, True, False, True])
    func = elementwise(
        f"{op}_bool", [dtypes.bool_] * 2, dtypes.bool_, lambda x, y: Binary(op, x, y, dtypes.bool_)
    )
    assert_bits(run(func, a, b), numpy_binary(op, a, b))


def test_bool_invert_and_compare():
    a = np.array([False, False, True, True])
    b = np.array([False, True, False, True])
    func = elementwise(
        "not_bool", [dtypes.bool_], dtypes.bool_, lambda x: Unary("invert", x, dtypes.bool_)
    )
    assert_bits(run(func, a), ~a)
    func = elementwise(
        "lt_bool", [dtypes.bool_] * 2, dtypes.bool_, lambda x, y: Compare("lt", x, y)
    )
    assert_bits(run(func, a, b), a < b)


# ------------------------------------------------------------------- casts


def cast_values(src: dtypes.DType, dst: dtypes.DType) -> np.ndarray:
    """Values of `src` whose conversion to `dst` is defined (in range)."""
    if src.is_bool:
        return np.array([True, False, True, True, False])
    if src.is_int:
        a, _ = int_pairs(src)
        return a[:3000]
    values = float_values(src)
    if dst.is_bool or dst.is_float:
        return values
    info = np.iinfo(dst.np)
    finite = values[np.isfinite(values)]
    return finite[(finite > info.min - 1) & (finite < info.max + 1)]


@pytest.mark.parametrize("dst", ALL, ids=lambda d: d.name)
@pytest.mark.parametrize("src", ALL, ids=lambda d: d.name)
def test_cast(src, dst):
    a = cast_values(src, dst)
    func = elementwise(f"cast_{src.name}_{dst.name}", [src], dst, lambda x: Cast(x, dst))
    with np.errstate(all="ignore"):
        assert_bits(run(func, a), a.astype(dst.np))


# -------------------------------------------------------------- statements


def test_select_let_if():
    f32 = dtypes.float32
    a_buf = Buffer("A", f32, (n,), "input")
    out = Buffer("out", f32, (n,), "output")
    t = Var("t")
    # t = 2 * i; out[i] = (A[t - i] if A[i] > 0 else -A[i]) + (1 if i < 10 else 2)
    value = Select(
        Compare("gt", Load(a_buf, (i,)), Const(0.0, f32)),
        Load(a_buf, (Binary("sub", t, i, dtypes.index),)),
        Unary("neg", Load(a_buf, (i,)), f32),
        f32,
    )
    body = Let(
        "t",
        Binary("mul", i, idx(2), dtypes.index),
        If(
            Compare("lt", i, idx(10)),
            Store(out, (i,), Binary("add", value, Const(1.0, f32), f32)),
            Store(out, (i,), Binary("add", value, Const(2.0, f32), f32)),
        ),
    )
    func = LoweredFunc(
        "select_let_if", (a_buf,), (out,), (n,), For("i", idx(0), n, ForKind.SERIAL, body)
    )
    a = rng.standard_normal(50).astype(np.float32)
    want = np.where(a > 0, a, -a) + np.where(np.arange(50) < 10, 1, 2).astype(np.float32)
    assert_bits(run(func, a), want)


def test_parallel_body_captures_lets():
    """off = n - 1 and s = 2 * A[0] are bound outside the parallel loop and used in it."""
    f32 = dtypes.float32
    a_buf = Buffer("A", f32, (n,), "input")
    out = Buffer("out", f32, (n,), "output")
    off, scale = Var("off"), Var("s", f32)
    value = Binary("mul", Load(a_buf, (Binary("sub", off, i, dtypes.index),)), scale, f32)
    loop = For("i", idx(0), n, ForKind.PARALLEL, Store(out, (i,), value))
    body = Let(
        "off",
        Binary("sub", n, idx(1), dtypes.index),
        Let("s", Binary("mul", Load(a_buf, (idx(0),)), Const(2.0, f32), f32), loop),
    )
    func = LoweredFunc("captures", (a_buf,), (out,), (n,), body)
    a = rng.standard_normal(1001).astype(np.float32)
    assert_bits(run(func, a), a[::-1] * (a[0] * np.float32(2)))


def nest(name: str, outer: ForKind, inner: ForKind, extent: int = 16) -> LoweredFunc:
    """out[y, x] = A[y, x] * 2 + B[x], x in [0, extent), y in [0, m)."""
    f32 = dtypes.float32
    m, y, x = Var("m"), Var("y"), Var("x")
    a_buf = Buffer("A", f32, (m, idx(extent)), "input")
    b_buf = Buffer("B", f32, (idx(extent),), "input")
    out = Buffer("out", f32, (m, idx(extent)), "output")
    value = Binary(
        "add", Binary("mul", Load(a_buf, (y, x)), Const(2.0, f32), f32), Load(b_buf, (x,)), f32
    )
    inner_loop = For("x", idx(0), idx(extent), inner, Store(out, (y, x), value), extent)
    return LoweredFunc(name, (a_buf, b_buf), (out,), (m,), For("y", idx(0), m, outer, inner_loop))


@pytest.mark.parametrize("rows", [0, 1, 2, 37, 1000])
@pytest.mark.parametrize(
    "outer,inner",
    [
        (ForKind.PARALLEL, ForKind.VECTORIZED),
        (ForKind.SERIAL, ForKind.UNROLLED),
        (ForKind.PARALLEL, ForKind.SERIAL),
    ],
    ids=lambda k: k.value,
)
def test_nest(outer, inner, rows):
    func = nest(f"nest_{outer.value}_{inner.value}", outer, inner)
    a = rng.standard_normal((rows, 16)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    out = np.full((rows, 16), np.nan, dtype=np.float32)
    assert build(func).call([a, b, out], [rows]) == 0
    assert_bits(out, a * np.float32(2) + b)


def test_loop_hints_in_source():
    src = emit_module(nest("hints", ForKind.PARALLEL, ForKind.VECTORIZED))
    assert (
        'define i32 @"hints"(ptr noalias readonly %"A", ptr noalias readonly %"B", ptr noalias %"out", i64 %"m")'
        in src
    )
    # the vectorized loop is vector code already: no loop over x, no hint
    assert 'load <16 x float>, ptr' in src and 'store <16 x float>' in src
    assert "llvm.loop.vectorize" not in src and '"x.header"' not in src
    assert 'define internal i32 @"hints.y.task"(i64 %"lo", i64 %"hi", ptr %"env")' in src
    assert 'call i32 @"tdsl_parallel_for"(ptr @"hints.y.task"' in src
    src = emit_module(nest("unrolled", ForKind.SERIAL, ForKind.UNROLLED))
    assert '!"llvm.loop.unroll.full"' in src


def test_vectorized_loop_uses_16_lanes():
    module = build(nest("vec16", ForKind.SERIAL, ForKind.VECTORIZED))
    assert "<16 x float>" in module.optimized_ir
    flat = elementwise(
        "vec16_flat",
        [dtypes.float32],
        dtypes.float32,
        lambda x: Binary("mul", x, x, dtypes.float32),
        ForKind.VECTORIZED,
        max_extent=16,
    )
    assert "<16 x float>" in build(flat).optimized_ir


def test_nested_parallel_loops():
    func = nest("nested_parallel", ForKind.PARALLEL, ForKind.PARALLEL, extent=5)
    a = rng.standard_normal((23, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    out = np.empty_like(a)
    assert build(func).call([a, b, out], [23]) == 0
    assert_bits(out, a * np.float32(2) + b)


def test_the_thread_pool_is_the_parallel_runtime():
    assert llvm_runtime.load() is True


# --------------------------------------------------------------- allocation


def two_pass(name: str, temp_shape, outer: ForKind = ForKind.SERIAL, sizes=(n,)) -> LoweredFunc:
    """T = A * A in one loop, out[i] = T[n - 1 - i] in another, inside one Allocate."""
    f32 = dtypes.float32
    a_buf = Buffer("A", f32, (n,), "input")
    out = Buffer("out", f32, (n,), "output")
    temp = Buffer("T", f32, temp_shape, "temp")
    square = Binary("mul", Load(a_buf, (i,)), Load(a_buf, (i,)), f32)
    rev = Binary("sub", Binary("sub", n, idx(1), dtypes.index), i, dtypes.index)
    body = Allocate(
        temp,
        Block(
            (
                For("i", idx(0), n, outer, Store(temp, (i,), square)),
                For("i", idx(0), n, outer, Store(out, (i,), Load(temp, (rev,)))),
            )
        ),
    )
    return place_storage(LoweredFunc(name, (a_buf,), (out,), tuple(sizes), body))


@pytest.mark.parametrize("outer", [ForKind.SERIAL, ForKind.PARALLEL], ids=lambda k: k.value)
@pytest.mark.parametrize("temp", ["stack", "heap"])
def test_allocate(temp, outer):
    shape = (idx(64),) if temp == "stack" else (n,)
    func = two_pass(f"alloc_{temp}_{outer.value}", shape, outer)
    src = emit_module(func)
    assert ("alloca [64 x float], align 64" in src) == (temp == "stack")
    assert ('@"tdsl_aligned_alloc"' in src) == (temp == "heap")
    a = rng.standard_normal(64).astype(np.float32)
    assert_bits(run(func, a), (a * a)[::-1])


def test_large_constant_allocation_goes_to_heap():
    func = two_pass("alloc_big", (idx(1 << 15),))
    src = emit_module(func)
    # 64-byte aligned like a stack temp: a vector load never spans two cache lines
    assert re.search(r'call ptr @"tdsl_aligned_alloc"\(i64 64, i64 %"T.bytes"\)', src)
    a = rng.standard_normal(100).astype(np.float32)
    assert_bits(run(func, a), (a * a)[::-1])


def test_stack_temp_inside_parallel_loop():
    """Each row gets its own 16-float scratch: out[y, x] = (A[y, 15 - x] + 1) * 2."""
    f32 = dtypes.float32
    m, y, x = Var("m"), Var("y"), Var("x")
    a_buf = Buffer("A", f32, (m, idx(16)), "input")
    out = Buffer("out", f32, (m, idx(16)), "output")
    row = Buffer("row", f32, (idx(16),), "temp")
    flip = Binary("sub", idx(15), x, dtypes.index)
    body = Allocate(
        row,
        Block(
            (
                For(
                    "x",
                    idx(0),
                    idx(16),
                    ForKind.SERIAL,
                    Store(row, (x,), Binary("add", Load(a_buf, (y, x)), Const(1.0, f32), f32)),
                ),
                For(
                    "x",
                    idx(0),
                    idx(16),
                    ForKind.VECTORIZED,
                    Store(out, (y, x), Binary("mul", Load(row, (flip,)), Const(2.0, f32), f32)),
                    16,
                ),
            )
        ),
    )
    func = place_storage(LoweredFunc(
        "scratch", (a_buf,), (out,), (m,), For("y", idx(0), m, ForKind.PARALLEL, body)
    ))
    a = rng.standard_normal((301, 16)).astype(np.float32)
    out_arr = np.empty_like(a)
    assert build(func).call([a, out_arr], [301]) == 0
    assert_bits(out_arr, (a[:, ::-1] + np.float32(1)) * np.float32(2))


@pytest.mark.parametrize("outer", [ForKind.SERIAL, ForKind.PARALLEL], ids=lambda k: k.value)
def test_out_of_memory_returns_1(outer):
    """U = A; for i: (T = 2 * U; out[i] = T[n - 1 - i]) with T of k elements.

    k is a size no array depends on; U is live when T's allocation fails.
    """
    f32 = dtypes.float32
    k, j = Var("k"), Var("j")
    a_buf = Buffer("A", f32, (n,), "input")
    out = Buffer("out", f32, (n,), "output")
    u_buf = Buffer("U", f32, (n,), "temp")
    t_buf = Buffer("T", f32, (k,), "temp")
    rev = Binary("sub", Binary("sub", n, idx(1), dtypes.index), i, dtypes.index)
    double = Binary("mul", Load(u_buf, (j,)), Const(2.0, f32), f32)
    inner = Allocate(
        t_buf,
        Block(
            (
                For("j", idx(0), n, ForKind.SERIAL, Store(t_buf, (j,), double)),
                Store(out, (i,), Load(t_buf, (rev,))),
            )
        ),
    )
    copy = For("j", idx(0), n, ForKind.SERIAL, Store(u_buf, (j,), Load(a_buf, (j,))))
    body = Allocate(u_buf, Block((copy, For("i", idx(0), n, outer, inner))))
    module = build(place_storage(LoweredFunc(f"oom_{outer.value}", (a_buf,), (out,), (k, n), body)))
    assert module.source.count('call void @"tdsl_free"') >= 3  # success and both failure paths
    a = rng.standard_normal(8).astype(np.float32)
    result = np.zeros_like(a)
    assert module.call([a, result], [1 << 58, 8]) == 1
    assert module.call([a, result], [8, 8]) == 0
    assert_bits(result, (a * np.float32(2))[::-1])


def test_out_of_memory_is_reported_even_if_the_temp_could_be_elided():
    """T[0] = A[i]; out[i] = T[0]: LLVM could forward the value and drop T."""
    f32, k = dtypes.float32, Var("k")
    a_buf = Buffer("A", f32, (n,), "input")
    out = Buffer("out", f32, (n,), "output")
    t_buf = Buffer("T", f32, (k,), "temp")
    copy = Block(
        (Store(t_buf, (idx(0),), Load(a_buf, (i,))), Store(out, (i,), Load(t_buf, (idx(0),))))
    )
    body = For("i", idx(0), n, ForKind.SERIAL, Allocate(t_buf, copy))
    module = build(place_storage(LoweredFunc("forwardable", (a_buf,), (out,), (k, n), body)))
    a = rng.standard_normal(8).astype(np.float32)
    result = np.zeros_like(a)
    assert module.call([a, result], [1 << 62, 8]) == 1  # 2**64 bytes: overflow, refused
    assert module.call([a, result], [1 << 58, 8]) == 1
    assert module.call([a, result], [1, 8]) == 0
    assert_bits(result, a)


# ---------------------------------------------------------- module lifetime


def offset_kernel(c: int) -> LoweredFunc:
    f64 = dtypes.float64
    return elementwise(
        f"offset{c}", [f64], f64, lambda x: Binary("add", x, Const(float(c), f64), f64)
    )


def test_kernels_are_freed_and_survivors_keep_working():
    """Dropping a module frees its code; the one still held keeps working. Each of the
    40 modules is checked freed before the next is built over its memory (200 took
    50 s of the suite to check the same)."""
    keep = build(offset_kernel(0))
    a = np.arange(10, dtype=np.float64)
    for c in range(1, 41):
        module = build(offset_kernel(c))
        out = np.empty_like(a)
        assert module.call([a, out], [10]) == 0
        assert_bits(out, a + c)
        alive = weakref.ref(module)
        del module
        clear_cache()  # the cache would keep it alive, and `keep` too
        gc.collect()
        assert alive() is None
    out = np.empty_like(a)
    assert keep.call([a, out], [10]) == 0
    assert_bits(out, a)


def test_build_cache_returns_the_same_module():
    func = offset_kernel(1234)
    module = build(func)
    assert isinstance(module, LLVMModule)
    assert build(func) is module
    assert module.name == "offset1234"
    assert module.source == emit_module(func)


@pytest.mark.parametrize("name", ["exp", "memset", "llvm.x", "return", 'we"ird name', "é"])
def test_any_kernel_name(name):
    """A kernel may be named like a function it calls, or anything else."""
    f64 = dtypes.float64
    func = elementwise(name, [f64], f64, lambda x: Call("exp", (x,), f64))
    module = build(func)
    assert module.name == name
    a = np.linspace(-2, 2, 50)
    np.testing.assert_allclose(run(func, a), np.exp(a), rtol=1e-15)


# -------------------------------------------------------------- arguments


def test_call_checks_arguments():
    module = build(binary_kernel("add", dtypes.int32))
    a = np.arange(6, dtype=np.int32)
    out = np.empty(6, dtype=np.int32)
    with pytest.raises(ArgumentError, match="takes 3 arrays"):
        module.call([a, out], [6])
    with pytest.raises(ArgumentError, match="'in1' must have dtype int32"):
        module.call([a, a.astype(np.int64), out], [6])
    with pytest.raises(ArgumentError, match="'out' must be C-contiguous"):
        module.call([a, a, np.empty(12, dtype=np.int32)[::2]], [6])
    with pytest.raises(ArgumentError, match="'in0' must have 7 elements"):
        module.call([a, a, out], [7])
    frozen = out.copy()
    frozen.flags.writeable = False
    with pytest.raises(ArgumentError, match="must be writeable"):
        module.call([a, a, frozen], [6])


@pytest.mark.parametrize("dtypes_", [(dtypes.int8, dtypes.uint8), (dtypes.uint8, dtypes.bool_),
                                     (dtypes.int32, dtypes.uint32)])
def test_build_cache_tells_dtypes_with_the_same_ir_apart(dtypes_):
    """int8 and uint8 add to the same LLVM IR; each build still checks its own dtypes."""
    for dtype in dtypes_:
        func = elementwise("same_ir", [dtype], dtype, lambda x: x)
        module = build(func)
        a = np.arange(6).astype(dtype.np)
        out = np.zeros_like(a)
        assert module.call([a, out], [6]) == 0
        np.testing.assert_array_equal(out, a)
        with pytest.raises(ArgumentError, match="must have dtype"):
            module.call([a.astype(np.float64), out], [6])


def test_kernels_of_pipelines_that_differ_only_in_signedness():
    """Two pipelines alike but for int8/uint8 each take their own dtype (td.build's cache too)."""
    import tdsl as td

    for dtype in (td.int8, td.uint8, td.int8):
        (i,) = td.dims("i")
        a = td.input("a", {i: 8}, dtype)
        o = td.compute("o", {i: 8}, a[i] + a[i])
        f = td.build(td.schedule(o), target="llvm")
        x = np.arange(60, 68).astype(dtype.np)
        np.testing.assert_array_equal(f(a=x), x + x)
