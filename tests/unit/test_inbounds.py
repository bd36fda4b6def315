"""The in-bounds pass: every scratch-buffer access is proven inside its allocation."""

from __future__ import annotations

import pytest

import tdsl as td
from tdsl import dtypes as dt
from tdsl.lower import ir
from tdsl.lower.passes.inbounds import check_in_bounds
from tdsl.lower.poly import domains, hull

I = ir.index_const


def _add(a, b):
    return ir.Binary("add", a, b, dt.index)


def _func(body: ir.Stmt, sizes=("N",)) -> ir.LoweredFunc:
    return ir.LoweredFunc("k", (), (), tuple(ir.Var(n) for n in sizes), body)


def _temp(n) -> ir.Buffer:
    return ir.Buffer("t", dt.int32, (n,), "temp")


def _store(buf, idx) -> ir.Store:
    return ir.Store(buf, (idx,), ir.Const(0, dt.int32))


def test_store_past_the_end_names_buffer_index_and_point():
    t = _temp(I(4))
    i = ir.Var("i")
    body = ir.For("i", I(0), ir.Var("N"), ir.ForKind.SERIAL,
                  ir.Allocate(t, _store(t, _add(i, I(1)))))
    with pytest.raises(td.OutOfBoundsError) as e:
        check_in_bounds(_func(body))
    msg = str(e.value)
    assert isinstance(e.value, td.CompileError)
    assert "stores to t" in msg and "i + 1" in msg and "[0, 4)" in msg
    assert "i=" in msg and "N=" in msg


def test_guards_lets_and_clamps_prove_accesses():
    t = _temp(ir.Var("N"))
    i, j = ir.Var("i"), ir.Var("j")
    guarded = ir.If(ir.Compare("lt", _add(i, I(1)), ir.Var("N")), _store(t, _add(i, I(1))), None)
    data = ir.Cast(ir.Load(t, (i,)), dt.index)  # a data-dependent index, clamped
    clamped = ir.Binary("min", ir.Binary("max", data, I(0), dt.index),
                        ir.Binary("sub", ir.Var("N"), I(1), dt.index), dt.index)
    let = ir.Let("j", ir.Binary("mod", _add(i, I(5)), ir.Var("N"), dt.index), _store(t, j))
    body = ir.Allocate(t, ir.For("i", I(0), ir.Var("N"), ir.ForKind.SERIAL, ir.Block((
        guarded, _store(t, clamped), _store(t, ir.Binary("floordiv", i, I(2), dt.index)),
        let))))
    f = _func(body)
    # `% N` is not quasi-affine: j is unknown, so that store cannot be proven
    with pytest.raises(td.OutOfBoundsError, match=r"stores to t .*\(j\)"):
        check_in_bounds(f)
    ok = ir.Allocate(t, ir.For("i", I(0), ir.Var("N"), ir.ForKind.SERIAL, ir.Block((
        guarded, _store(t, clamped), _store(t, ir.Binary("floordiv", i, I(2), dt.index))))))
    assert check_in_bounds(_func(ok)) is not None


def test_a_too_small_block_is_caught_at_build_time(monkeypatch):
    # were bounds inference to compute one row where the consumer reads several, the build
    # stops with an internal error instead of writing outside the buffer
    def one_row(rel):
        los, _ = hull._box_bounds(rel)
        return los, los

    monkeypatch.setattr(domains, "box_hull", one_row)
    y, x = td.dims("y x")
    a = td.input("a", {y: 8, x: 8}, td.int32)
    p = td.compute("p", {y: 8, x: 8}, a[y, x] + 1)
    out = td.compute("out", {y: 8, x: 8}, p[y, x] * 2)
    s = td.schedule(out).split(out, "y", 4).compute_at(p, out, "y_o")
    with pytest.raises(td.OutOfBoundsError, match=r"p outside its allocation.*y_o="):
        td.build(s)
