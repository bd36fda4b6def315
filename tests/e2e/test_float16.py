"""float16 and bfloat16: storage types computed in float32 and rounded to nearest even
per operation, bit for bit as numpy (float16) and ml_dtypes (bfloat16) compute them, on
both backends and in portable C; and uint64."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from test_emit_c import ASAN_ENV, SANITIZE, Emitted, build_and_run, driver_source, tool

import tdsl as td
from tdsl.lower.passes.narrow import constant_bits

ml_dtypes = pytest.importorskip("ml_dtypes")

NARROW = [td.float16, td.bfloat16]
RNG = np.random.default_rng(16)
N = 997
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65519.0, 65520.0, 1e-8, -1e-8,
           6e-5, 6.1e-5, 5.96e-8, 2.98e-8, 3e38, 1e-45, 1.0, -1.0, 0.5, 3.0, 2048.0, 2049.0]


def values(d: td.dtypes.DType, scale=30.0) -> np.ndarray:
    v = np.concatenate([RNG.standard_normal(N - len(SPECIAL)) * scale, SPECIAL])
    with np.errstate(over="ignore"):
        return v.astype(d.np)


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Equal bit for bit, any NaN equal to any NaN."""
    assert got.dtype == want.dtype
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(g) & np.isnan(w)
    uint = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    bad = ~nan & (got.view(uint) != want.view(uint))
    assert not bad.any(), (np.argwhere(bad)[:5].ravel(), got[bad][:5], want[bad][:5])


def check(out, want, backend, schedule=None, **arrays):
    sched = schedule or td.schedule(out)
    same_bits(td.evaluate(out, **arrays), want)
    same_bits(td.build(sched, target=backend)(**arrays), want)


OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "truediv": lambda a, b: a / b, "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b,
    "maximum": lambda a, b: (np.maximum if isinstance(a, np.ndarray) else td.maximum)(a, b),
    "minimum": lambda a, b: (np.minimum if isinstance(a, np.ndarray) else td.minimum)(a, b),
}


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("d", NARROW, ids=lambda d: d.name)
def test_binary_operations_round_as_numpy(backend, d, op):
    (i,) = td.dims("i")
    A, B = td.input("A", {i: N}, d), td.input("B", {i: N}, d)
    out = td.compute("out", {i: N}, OPS[op](A[i], B[i]))
    assert out.dtype == d
    a, b = values(d), RNG.permutation(values(d))
    with np.errstate(all="ignore"):
        want = OPS[op](a, b)
    vec = td.schedule(out).split(out, "i", 16).vectorize(out, "i_i")
    for s in (td.schedule(out), vec):
        check(out, want, backend, s, A=a, B=b)


@pytest.mark.parametrize("fn", ["exp", "sqrt", "abs", "neg", "floor", "tanh"])
@pytest.mark.parametrize("d", NARROW, ids=lambda d: d.name)
def test_unary_operations_round_as_numpy(backend, d, fn):
    (i,) = td.dims("i")
    A = td.input("A", {i: N}, d)
    f = {"neg": lambda x: -x, "abs": abs}.get(fn) or getattr(td, fn)
    out = td.compute("out", {i: N}, f(A[i]))
    a = values(d, 3.0)
    with np.errstate(all="ignore"):
        want = {"neg": np.negative, "abs": np.abs, "exp": np.exp, "sqrt": np.sqrt,
                "floor": np.floor, "tanh": np.tanh}[fn](a)
    if fn in ("exp", "tanh"):  # libm's float32 against numpy's: equal once rounded, mostly
        got = td.build(td.schedule(out), target=backend)(A=a)
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                                   rtol=1e-2, atol=1e-3)
        same_bits(td.evaluate(out, A=a), want)
        return
    check(out, want, backend, A=a)


@pytest.mark.parametrize("d", NARROW, ids=lambda d: d.name)
def test_comparisons_and_where(backend, d):
    (i,) = td.dims("i")
    A, B = td.input("A", {i: N}, d), td.input("B", {i: N}, d)
    out = td.compute("out", {i: N}, td.where((A[i] < B[i]) | (A[i] == 3), A[i], B[i] * 2))
    a, b = values(d), RNG.permutation(values(d))
    with np.errstate(all="ignore"):
        want = np.where((a < b) | (a == 3), a, b * d.np.type(2))
    check(out, want, backend, A=a, B=b)


SOURCES = [td.float64, td.float32, td.float16, td.bfloat16, td.int8, td.int16, td.int32,
           td.int64, td.uint8, td.uint64, td.bool_]


@pytest.mark.parametrize("src", SOURCES, ids=lambda d: d.name)
@pytest.mark.parametrize("d", NARROW, ids=lambda d: d.name)
def test_conversions_to_16_bit_floats(backend, d, src):
    """One rounding from float64 to float16 (numpy's; float32 first would round twice on
    ties), through float32 to bfloat16 (ml_dtypes'), ints through float64."""
    (i,) = td.dims("i")
    X = td.input("X", {i: N}, src)
    out = td.compute("out", {i: N}, td.cast(X[i], d))
    if src.is_float:
        x = values(td.float64, 1e3) * np.exp2(RNG.integers(-30, 10, N))
        x[:8] = [1 + 2**-11 + 2**-40, 1 + 2**-11, 1 + 2**-8 + 2**-40, 65519.99, 2**-25,
                 2**-25 + 2**-60, 1.5 * 2**-24, 1 + 2**-8]
        with np.errstate(over="ignore"):
            x = x.astype(src.np)
    elif src.is_bool:
        x = RNG.integers(0, 2, N).astype(bool)
    else:
        info = np.iinfo(src.np)
        x = RNG.integers(info.min, info.max, N, dtype=src.np, endpoint=True)
        if src.bits >= 32:
            x[:3] = [2049, 2051, (1 << 24) + (1 << 16) + 1]
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(d.np)
    check(out, want, backend, X=x)


@pytest.mark.parametrize("dst", [td.float32, td.float64, td.int32, td.uint8, td.int64, td.bool_],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("d", NARROW, ids=lambda d: d.name)
def test_conversions_from_16_bit_floats(backend, d, dst):
    (i,) = td.dims("i")
    A = td.input("A", {i: N}, d)
    out = td.compute("out", {i: N}, td.cast(A[i], dst))
    a = values(d)
    if dst.is_int:
        a = np.where(np.isfinite(a.astype(np.float64)), a, d.np.type(7)).astype(d.np)
    want = td.dtypes.astype(a.astype(np.float32), dst) if dst.is_int else a.astype(dst.np)
    check(out, want, backend, A=a)


@pytest.mark.parametrize("d", NARROW, ids=lambda d: d.name)
def test_sum_accumulates_in_the_storage_type(backend, d):
    """td.sum over float16 rounds after each step, in order, as td.evaluate does."""
    i, k = td.dims("i k")
    A = td.input("A", {i: 31, k: 57}, d)
    out = td.compute("out", {i: 31}, td.sum(A[i, k], over=k))
    a = (RNG.standard_normal((31, 57)) * 4).astype(d.np)
    want = np.zeros(31, d.np)
    for kk in range(57):
        want = want + a[:, kk]
    check(out, want, backend, A=a)
    par = td.schedule(out).parallel(out, "i")
    check(out, want, backend, par, A=a)


@pytest.mark.parametrize("d", NARROW, ids=lambda d: d.name)
def test_matmul_accumulating_in_float32(backend, threads, d):
    """The mixed-precision idiom: 16-bit operands, float32 sum, a 16-bit result."""
    threads(2)
    n, m, kk = 24, 40, 33
    i, j, k = td.dims("i j k")
    A, B = td.input("A", {i: n, k: kk}, d), td.input("B", {k: kk, j: m}, d)
    acc = td.sum(td.cast(A[i, k], td.float32) * td.cast(B[k, j], td.float32), over=k)
    C = td.compute("C", {i: n, j: m}, td.cast(acc, d))
    a = RNG.standard_normal((n, kk)).astype(d.np)
    b = RNG.standard_normal((kk, m)).astype(d.np)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32).astype(d.np)
    s = td.schedule(C).tile(C, i=8, j=8).parallel(C, "i_o").vectorize(C, "j_i")
    got = td.build(s, target=backend)(A=a, B=b)
    assert got.dtype == d.np
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-2,
                               atol=2e-2)
    same_bits(got, td.evaluate(C, A=a, B=b))


@pytest.mark.parametrize("d", NARROW, ids=lambda d: d.name)
def test_atomic_scatter_into_16_bit_floats(backend, threads, d):
    threads(2)
    i, j = td.dims("i j")
    idx = td.input("idx", {i: 200}, td.int32)
    out = td.compute("out", {j: 8}, td.cast(0 * j, d))
    u = td.update(out[idx[i]], td.maximum(out[idx[i]], td.cast(idx[i] * 3 + 0.5, d)),
                  over={i: 200})
    ix = RNG.integers(0, 8, 200).astype(np.int32)
    want = np.zeros(8, d.np)
    np.maximum.at(want, ix, (ix * 3 + 0.5).astype(d.np))
    check(out, want, backend, td.schedule(out).atomic(u).parallel(u, "i"), idx=ix)


def test_constants_are_rounded_as_numpy():
    for v in (0.1, 1 / 3, 65519.0, 65520.0, -2.5, 1e-7, float("inf"), 1e39):
        with np.errstate(over="ignore"):
            assert constant_bits(v, td.float16) == int(np.float16(v).view(np.uint16))
            assert constant_bits(v, td.bfloat16) == int(
                np.array(v, np.float64).astype(ml_dtypes.bfloat16).view(np.uint16))


def test_portable_c_of_float16(tmp_path):
    """Standalone C99 (no _Float16, no libm call for the conversions), exact under ASan
    and UBSan."""
    (i,) = td.dims("i")
    A = td.input("A", {i: N}, td.float16)
    X = td.input("X", {i: N}, td.float64)
    out = td.compute("out", {i: N}, td.cast(X[i], td.float16) * A[i] - A[i] / 3)
    a, x = values(td.float16), values(td.float64)
    sched = td.schedule(out)
    func = td.lower(sched, "half")
    td.emit_c(sched, "half", tmp_path)
    src = (tmp_path / "half.c").read_text()
    assert "_Float16" not in src and "uint16_t" in src
    want = td.evaluate(out, A=a, X=x)
    e = Emitted("half", tmp_path, func, {"A": a, "X": x}, {"out": want}, {}, sched)
    (tmp_path / "inputs.bin").write_bytes(a.tobytes() + x.tobytes())
    (tmp_path / "driver.c").write_text(driver_source(e))
    build_and_run(e, "asan", tool("gcc"), SANITIZE, env=ASAN_ENV)


def test_bfloat16_without_ml_dtypes_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)
    with pytest.raises(td.MissingDependency, match=r"pip install 'tdsl\[bfloat16\]'"):
        td.bfloat16.np  # noqa: B018 - the property raises


# ---------------------------------------------------------------- uint64


def test_uint64_beyond_int64(backend):
    (i,) = td.dims("i")
    A, B = td.input("A", {i: 64}, td.uint64), td.input("B", {i: 64}, td.uint64)
    out = td.compute("out", {i: 64}, (A[i] * B[i] + (A[i] >> 3)) // (B[i] | 1) - td.minimum(A[i], B[i]))
    top = np.iinfo(np.uint64).max
    a = RNG.integers(0, top, 64, dtype=np.uint64, endpoint=True)
    b = RNG.integers(0, top, 64, dtype=np.uint64, endpoint=True)
    a[:3] = [top, top - 1, 1 << 63]
    want = (a * b + (a >> np.uint64(3))) // (b | np.uint64(1)) - np.minimum(a, b)
    check(out, want, backend, A=a, B=b)
    mixed = td.compute("mixed", {i: 64}, A[i] + td.cast(i, td.int64))  # numpy: float64
    assert mixed.dtype == td.float64


def test_bfloat16_with_wide_ints_computes_as_numpy_ufuncs_do(backend):
    """numpy has no common type for bfloat16 and int32 (np.result_type refuses), but its
    ufuncs compute them in float64: so does tdsl, comparisons included."""
    (i,) = td.dims("i")
    A, B = td.input("A", {i: N}, td.bfloat16), td.input("B", {i: N}, td.int32)
    out = td.compute("out", {i: N}, td.where(A[i] < B[i], A[i] + B[i], A[i] * 2))
    assert out.dtype == td.float64
    a = values(td.bfloat16)
    b = RNG.integers(-100, 100, N).astype(np.int32)
    with np.errstate(all="ignore"):
        want = np.where(np.less(a, b), np.add(a, b), (a * 2).astype(np.float64))
    check(out, want, backend, A=a, B=b)


@pytest.mark.parametrize("view", [None, td.clamp, td.wrap, td.mirror])
def test_uint64_index_beyond_int64(backend, view):
    """A uint64 index of 2**63 or more reads as int64's largest value: clamped to the
    last element, out of range for a plain read (ArgumentError), remapped from it by a
    view (once it wrapped negative in the kernels and read the first element)."""
    (i,) = td.dims("i")
    n = td.dim("n")
    ix = td.input("ix", {i: 6}, td.uint64)
    t = td.input("t", {n: 17}, td.float32)
    read = (view(t) if view else t)[ix[i]]
    out = td.compute("out", {i: 6}, read * 2)
    top = np.iinfo(np.uint64).max
    idx = np.array([0, 16, top, 1 << 63, (1 << 63) - 1, 5], np.uint64)
    table = np.arange(17, dtype=np.float32)
    f = td.build(td.schedule(out), target=backend)
    if view is None:
        with pytest.raises(td.ArgumentError, match=str((1 << 63) - 1)):
            td.evaluate(out, ix=idx, t=table)
        with pytest.raises(td.ArgumentError):
            f(ix=idx, t=table)
        return
    big = (1 << 63) - 1
    at = {td.clamp: min(big, 16), td.wrap: big % 17,
          td.mirror: (lambda m: m if m < 17 else 33 - m)(big % 34)}[view]
    want = table[[0, 16, at, at, at, 5]] * 2
    np.testing.assert_array_equal(td.evaluate(out, ix=idx, t=table), want)
    np.testing.assert_array_equal(f(ix=idx, t=table), want)
    inlined = td.compute("p", {n: 17}, t[n] * 2)
    out2 = td.compute("out2", {i: 6}, view(inlined)[ix[i]])
    s = td.schedule(out2).compute_inline(inlined)
    np.testing.assert_array_equal(td.build(s, target=backend)(ix=idx, t=table), want)
