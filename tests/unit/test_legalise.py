"""The late passes: `flatten` leaves one row-major offset per access, `legalise` leaves
only core operations, and both backends still compute numpy's results on the edge values
of each expansion (division by zero, MIN // -1, signed zeros, NaN, unsigned and promoted
narrow ints)."""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td
from tdsl import dtypes as dt
from tdsl.lower import finish, ir
from tdsl.lower.passes.flatten import flatten
from tdsl.lower.passes.legalise import legalise, legalise_expr
from tdsl.lower.passes.verify import VerifyError, verify
from tdsl.lower.printer import expr
from tdsl.lower.rewrite import stmt_exprs, walk_exprs, walk_stmts

INTS = [td.int8, td.int16, td.int32, td.int64, td.uint8, td.uint16, td.uint32]


def _exprs(func: ir.LoweredFunc):
    for s in walk_stmts(func.body):
        for top in stmt_exprs(s):
            yield from walk_exprs(top)
        if isinstance(s, ir.Allocate):
            for extent in s.buffer.shape:
                yield from walk_exprs(extent)


def numpy_semantics(func: ir.LoweredFunc) -> list[ir.Expr]:
    """The operations of `func` that `legalise` leaves none of."""
    out = []
    for e in _exprs(func):
        match e:
            case ir.Binary("floordiv" | "mod"):
                out.append(e)
            case ir.Binary("min" | "max", _, _, t) if t.is_float:
                out.append(e)
            case ir.Call("abs" | "floor" | "ceil", _, t) if not t.is_float:
                out.append(e)
            case ir.Call("exp", _, t) if t == dt.float32:
                out.append(e)
    return out


def _accesses(func: ir.LoweredFunc):
    for s in walk_stmts(func.body):
        if isinstance(s, ir.Store):
            yield s.indices
    for e in _exprs(func):
        if isinstance(e, ir.Load):
            yield e.indices


def _everything(dtype):
    i, j = td.dims("i j")
    N = td.size("N")
    a = td.input("a", {i: N, j: 3}, dtype)
    b = td.input("b", {i: N, j: 3}, dtype)
    return a, b, td.compute("o", {i: N, j: 3}, a[i, j] // b[i, j] + a[i, j] % b[i, j]
                            + a[i, (j + 1) // 2] % 3 + td.abs(a[i, j]))


def test_lowered_ir_is_flat_and_core_only():
    _, _, o = _everything(td.int32)
    assert numpy_semantics(td.lower(o))  # the loop nest shown to users keeps numpy's ops
    f = finish(td.lower(o))
    assert numpy_semantics(f) == []
    assert all(len(idx) == 1 for idx in _accesses(f))
    text = str(f)
    assert "//" not in text and "a[i * 3 + (j + 1) / 2]" in text  # j >= 0: a plain division

    i = td.dim("i")
    x = td.input("x", {i: 8}, td.float32)
    y = td.compute("y", {i: 8}, td.exp(td.maximum(x[i], 0.0)) + x[i] // 2.0 + x[i] % -2.0)
    trace = td.lower(td.schedule(y), trace=True)
    assert numpy_semantics(trace["inbounds"]) and not numpy_semantics(trace.final)
    assert "bitcast(" in str(trace.final) and "copysign(" in str(trace.final)


def test_flatten_is_row_major_with_constants_last():
    N, M = ir.Var("N"), ir.Var("M")
    buf = ir.Buffer("t", dt.float32, (N, M, ir.index_const(4)), "output")
    i, j, k = ir.Var("i"), ir.Var("j"), ir.Var("k")
    store = ir.Store(buf, (i, j, k), ir.Const(0.0, dt.float32))
    loop = ir.For("i", ir.index_const(0), N, ir.ForKind.SERIAL,
                  ir.For("j", ir.index_const(0), M, ir.ForKind.SERIAL,
                         ir.For("k", ir.index_const(0), ir.index_const(4), ir.ForKind.SERIAL,
                                store)))
    func = ir.LoweredFunc("f", (), (buf,), (M, N), loop)
    flat = verify(flatten(func))
    (s,) = [x for x in walk_stmts(flat.body) if isinstance(x, ir.Store)]
    assert expr(s.indices[0]) == "i * M * 4 + j * 4 + k"


def test_verify_wants_every_access_flat_or_none():
    N = ir.Var("N")
    a = ir.Buffer("a", dt.float32, (N, N), "input")
    o = ir.Buffer("o", dt.float32, (N, N), "output")
    i = ir.Var("i")
    mixed = ir.Store(o, (i, i), ir.Load(a, (i,)))
    body = ir.For("i", ir.index_const(0), N, ir.ForKind.SERIAL, mixed)
    with pytest.raises(VerifyError, match="flat only when all"):
        verify(ir.LoweredFunc("f", (a,), (o,), (N,), body))


def test_verify_knows_the_core_operations():
    x = ir.Var("x", dt.int32)
    body = ir.Let("x", ir.Const(1, dt.int32),
                  ir.Let("y", ir.Binary("tdiv", x, x, dt.int32),
                         ir.Let("z", ir.Call("bitcast", (x,), dt.float32), ir.Block(()))))
    verify(ir.LoweredFunc("f", (), (), (), body))
    for bad in (ir.Binary("fdiv", x, x, dt.int32), ir.Call("bitcast", (x,), dt.float64),
                ir.Call("copysign", (x,), dt.int32)):
        with pytest.raises(VerifyError):
            verify(ir.LoweredFunc("f", (), (), (), ir.Let("y", bad, ir.Block(()))))


def test_legalise_binds_what_it_reuses_before_the_statement():
    a = ir.Buffer("a", dt.int32, (ir.Var("N"),), "input")
    o = ir.Buffer("o", dt.int32, (ir.Var("N"),), "output")
    i = ir.Var("i")
    x = ir.Load(a, (i,))
    # (by 3: a power of two is a shift and a mask, which read x once each)
    value = ir.Binary("add", ir.Binary("floordiv", x, ir.Const(3, dt.int32), dt.int32),
                      ir.Binary("mod", x, ir.Const(3, dt.int32), dt.int32), dt.int32)
    loop = ir.For("i", ir.index_const(0), ir.Var("N"), ir.ForKind.SERIAL,
                  ir.Store(o, (i,), value))
    f = verify(legalise(ir.LoweredFunc("f", (a,), (o,), (ir.Var("N"),), loop)))
    assert numpy_semantics(f) == []
    text = str(f)
    assert text.count("a[i]") == 1 and "let x = a[i]" in text  # one load, bound once
    assert "let q = x / 3" in text


def test_legalise_expr_needs_no_statement():
    n = ir.Var("N")
    e = ir.Compare("ge", ir.Binary("floordiv", ir.Binary("sub", n, ir.index_const(1), dt.index),
                                   ir.index_const(2), dt.index), ir.index_const(1))
    out = legalise_expr(e)
    assert numpy_semantics(ir.LoweredFunc("f", (), (), (n,), ir.If(out, ir.Block(())))) == []
    assert "N - 1" in str(ir.LoweredFunc("f", (), (), (n,), ir.If(out, ir.Block(()))))


def test_finish_runs_the_late_passes_on_hand_built_ir():
    a = ir.Buffer("a", dt.float32, (ir.Var("N"), ir.index_const(2)), "input")
    o = ir.Buffer("o", dt.float32, (ir.Var("N"), ir.index_const(2)), "output")
    i = ir.Var("i")
    x = ir.Load(a, (i, ir.index_const(1)))
    store = ir.Store(o, (i, ir.index_const(0)), ir.Call("exp", (x,), dt.float32))
    loop = ir.For("i", ir.index_const(0), ir.Var("N"), ir.ForKind.SERIAL, store)
    f = finish(ir.LoweredFunc("f", (a,), (o,), (ir.Var("N"),), loop))
    assert numpy_semantics(f) == [] and all(len(idx) == 1 for idx in _accesses(f))


# ------------------------------------------------------------ against numpy


def _square_pair(dtype):
    """Dims i, j, the size N and inputs a, b of shape N x N."""
    i, j = td.dims("i j")
    N = td.size("N")
    return i, j, N, td.input("a", {i: N, j: N}, dtype), td.input("b", {i: N, j: N}, dtype)


def _int_edges(dtype) -> np.ndarray:
    info = np.iinfo(dtype.np)
    vals = {info.min, info.min + 1, -7, -3, -1, 0, 1, 2, 3, 7, info.max - 1, info.max}
    return np.array(sorted(v for v in vals if info.min <= v <= info.max), dtype.np)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.name)
def test_integer_floor_division_and_modulo_match_numpy(backend, dtype):
    i, j, N, a, b = _square_pair(dtype)
    outs = {
        "q": a[i, j] // b[i, j], "r": a[i, j] % b[i, j],
        "q4": a[i, j] // 4, "r4": a[i, j] % 4, "ab": td.abs(a[i, j]),
    }
    if dtype.is_signed:
        outs |= {"qm3": a[i, j] // -3, "rm3": a[i, j] % -3, "qm1": a[i, j] // -1,
                 "rm1": a[i, j] % -1}
    stages = [td.compute(name, {i: N, j: N}, e) for name, e in outs.items()]
    kernel = td.build(td.schedule(tuple(stages)), target=backend)
    edges = _int_edges(dtype)
    av, bv = np.meshgrid(edges, edges, indexing="ij")
    av, bv = np.ascontiguousarray(av), np.ascontiguousarray(bv)
    got = kernel(a=av, b=bv)
    got = got if isinstance(got, tuple) else (got,)
    with np.errstate(all="ignore"):
        want = {
            "q": av // bv, "r": av % bv, "q4": av // dtype.np.type(4),
            "r4": av % dtype.np.type(4), "ab": np.abs(av),
        }
        if dtype.is_signed:
            want |= {"qm3": av // dtype.np.type(-3), "rm3": av % dtype.np.type(-3),
                     "qm1": av // dtype.np.type(-1), "rm1": av % dtype.np.type(-1)}
    for name, g in zip(outs, got, strict=True):
        np.testing.assert_array_equal(g, want[name], err_msg=name)


@pytest.mark.parametrize("dtype", [td.float32, td.float64], ids=lambda d: d.name)
def test_float_division_minmax_and_exp_match_numpy(backend, dtype):
    i, j, N, a, b = _square_pair(dtype)
    outs = {
        "q": a[i, j] // b[i, j], "r": a[i, j] % b[i, j], "q2": a[i, j] // -2.0,
        "r2": a[i, j] % 2.0, "mx": td.maximum(a[i, j], b[i, j]),
        "mn": td.minimum(a[i, j], b[i, j]), "ab": td.abs(a[i, j]),
    }
    stages = [td.compute(name, {i: N, j: N}, e) for name, e in outs.items()]
    kernel = td.build(td.schedule(tuple(stages)), target=backend)
    edges = np.array([-np.inf, -7.5, -3.0, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, 7.5, np.inf, np.nan],
                     dtype.np)
    av, bv = np.meshgrid(edges, edges, indexing="ij")
    av, bv = np.ascontiguousarray(av), np.ascontiguousarray(bv)
    got = kernel(a=av, b=bv)
    t = dtype.np.type
    with np.errstate(all="ignore"):
        want = {
            "q": av // bv, "r": av % bv, "q2": av // t(-2.0), "r2": av % t(2.0),
            "mx": np.maximum(av, bv), "mn": np.minimum(av, bv), "ab": np.abs(av),
        }
    for name, g in zip(outs, got, strict=True):
        w = want[name]
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=name)
        ok = ~np.isnan(w)
        np.testing.assert_array_equal(g[ok], w[ok], err_msg=name)
        np.testing.assert_array_equal(np.signbit(g[ok]), np.signbit(w[ok]), err_msg=name)


def test_floor_divided_extents_reach_portable_c_legalised(tmp_path):
    """A temp's shape and a size check with `//` of sizes: legalised too (the workspace
    size and the check are C the standalone renderer writes)."""
    from test_emit_c import STRICT, run, tool

    i = td.dim("i")
    N = td.size("N")
    a = td.input("a", {i: N}, td.float32)
    h = td.compute("h", {i: (N + 1) // 2}, a[2 * i] + 1.0)
    t = td.compute("t", {i: (N + 1) // 2}, h[i] * 2.0)
    assert numpy_semantics(finish(td.lower(t))) == []
    c_path, _ = td.emit_c(t, "half", tmp_path)
    source = c_path.read_text()
    assert "floordiv" not in source and "(N + 1) / 2" in source
    run([tool("gcc"), *STRICT, "-c", c_path, "-o", tmp_path / "half.o"])
    x = np.arange(7, dtype=np.float32)
    np.testing.assert_array_equal(td.build(t)(a=x), (x[::2] + 1) * 2)


@pytest.mark.parametrize("dtype", [td.int8, td.int16, td.int32, td.int64])
def test_floor_division_by_a_power_of_two_is_a_shift(backend, dtype):
    """On signed ints `x // 2^k` is an arithmetic shift and `x % 2^k` a mask (floor
    semantics, MIN and negatives included), with no division left."""
    info = np.iinfo(dtype.np)
    x = np.array([info.min, info.min + 1, -9, -8, -7, -4, -1, 0, 1, 3, 4, 7, 8, 9,
                  info.max - 1, info.max], dtype.np)
    i = td.dim("i")
    a = td.input("a", {i: len(x)}, dtype)
    for c in (2, 4, 64):
        out = td.compute("out", {i: len(x)}, a[i] // c + a[i] % c * 3)
        func = td.lower(td.schedule(out))
        done = finish(func)
        ops = {e.op for e in _exprs(done) if isinstance(e, ir.Binary)}
        assert "ashr" in ops and "and" in ops and not ops & {"tdiv", "trem"}, ops
        np.testing.assert_array_equal(td.build(td.schedule(out), target=backend)(a=x),
                                      td.evaluate(out, a=x))
