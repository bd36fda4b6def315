"""Lowering: printed loop nests (golden files), bounds inference and access checks."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from test_parallel import three_stencils

import tdsl as td
from tdsl import dtypes as dt
from tdsl.lower import ir
from tdsl.lower.passes.simplify import simplify
from tdsl.lower.passes.verify import VerifyError, verify
from tdsl.lower.rewrite import stmt_exprs, walk_exprs, walk_stmts

GOLDEN = Path(__file__).parents[1] / "golden"


def matmul():
    i, j, k = td.dims("i j k")
    N = td.size("N")
    A = td.input("A", {i: N, k: 512}, td.float32)
    B = td.input("B", {k: 512, j: 256}, td.float32)
    C = td.compute("C", {i: N, j: 256}, td.sum(A[i, k] * B[k, j], over=k))
    return C


def blur():
    x, y = td.dims("x y")
    W, H = td.size("W"), td.size("H")
    inp = td.input("inp", {y: H, x: W}, td.float32)
    bx = td.compute("bx", {y: H, x: W - 2}, (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) / 3)
    by = td.compute("by", {y: H - 2, x: W - 2}, (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3)
    return bx, by


def cases():
    C = matmul()
    bx, by = blur()
    return {
        "matmul_tiled": (td.schedule(C).tile(C, i=32, j=64).split(C, "k", 4)
                         .reorder(C, "i_o j_o k_o i_i k_i j_i").vectorize(C, "j_i")
                         .parallel(C, "i_o")),
        "matmul_unrolled": td.schedule(C).split(C, "k", 4).unroll(C, "k_i"),
        "blur_root": td.schedule(by),
        "blur_inline": td.schedule(by).compute_inline(bx),
        "blur_compute_at": (td.schedule(by).split(by, "y", 8).compute_at(bx, by, "y_o")
                            .parallel(by, "y_o")),
        "blur_store_at": (td.schedule(by).split(by, "y", 8).compute_at(bx, by, "y_i")
                          .store_at(bx, by, "y_o")),
        "three_stencils_parallel": three_stencils()[0],
    }


@pytest.mark.parametrize("name", list(cases()))
def test_loop_nest_golden(name, update_golden):
    text = str(td.lower(cases()[name])) + "\n"
    path = GOLDEN / f"{name}.txt"
    if update_golden or not path.exists():
        path.write_text(text)
    assert text == path.read_text()


def test_compute_at_buffer_is_the_needed_box():
    bx, by = blur()
    f = td.lower(td.schedule(by).split(by, "y", 8).compute_at(bx, by, "y_o"))
    text = str(f)
    # eight output rows need ten rows of bx; the buffer is that box, not the whole image
    assert "allocate bx[10, W - 2]" in text
    assert "for y in 8 * y_o .. min(H, 8 * y_o + 10)" in text


def test_out_of_range_read_is_rejected_with_a_point():
    x = td.dim("x")
    N = td.size("N")
    a = td.input("a", {x: N}, td.float32)
    b = td.compute("b", {x: N}, a[x + 1])
    with pytest.raises(td.DefinitionError) as e:
        td.lower(b)
    msg = str(e.value)
    assert "a[x + 1]" in msg and "out of range" in msg and "td.clamp" in msg


def test_split_tail_is_guarded_by_bounds():
    x = td.dim("x")
    a = td.input("a", {x: 10}, td.int32)
    b = td.compute("b", {x: 10}, a[x] + 1)
    text = str(td.lower(td.schedule(b).split(b, "x", 4)))
    assert "for x_i in 0 .. min(4, -4 * x_o + 10)" in text or "min(4, 10 - 4 * x_o)" in text


@pytest.mark.parametrize("name", ["matmul_tiled", "blur_compute_at", "blur_inline",
                                  "three_stencils_parallel"])
def test_generated_c_golden(name, update_golden):
    from tdsl.backend_c import render
    from tdsl.lower import finish

    text = render(finish(td.lower(cases()[name])))
    path = GOLDEN / f"{name}.c"
    if update_golden or not path.exists():
        path.write_text(text)
    assert text == path.read_text()


def test_listing_has_no_boolean_constants():
    s, _, _ = three_stencils()
    listing = str(td.lower(s))
    assert "True" not in listing and "False" not in listing
    # C writes boolean constants as 1 and 0, combined with & and |
    assert not re.findall(r"(?<![\w.])[01] [&|] |[&|] [01](?![\w.])", td.build(s).source)


def _i(n: int) -> ir.Const:
    return ir.index_const(n)


def _simplified(body: ir.Stmt, sizes=("N",)) -> ir.Stmt:
    out = ir.Buffer("out", dt.int32, (ir.Var("N"),), "output")
    func = ir.LoweredFunc("f", (), (out,), tuple(ir.Var(n) for n in sizes), body)
    return simplify(func).body


def _store(value: ir.Expr, at: ir.Expr | None = None) -> ir.Store:
    out = ir.Buffer("out", dt.int32, (ir.Var("N"),), "output")
    return ir.Store(out, (_i(0) if at is None else at,), value)


def _select(cond: ir.Expr) -> ir.Store:
    return _store(ir.Select(cond, ir.Const(1, dt.int32), ir.Const(2, dt.int32), dt.int32))


def test_simplify_folds_boolean_constants():
    T, F = ir.Const(True, dt.bool_), ir.Const(False, dt.bool_)
    e = ir.Compare("lt", ir.Var("N"), _i(8))
    both = ir.Binary("and", T, e, dt.bool_)
    assert _simplified(_select(both)) == _select(e)
    assert _simplified(_select(ir.Binary("and", e, F, dt.bool_))) == _store(ir.Const(2, dt.int32))
    assert _simplified(_select(ir.Binary("or", e, T, dt.bool_))) == _store(ir.Const(1, dt.int32))
    assert _simplified(_select(ir.Binary("or", F, e, dt.bool_))) == _select(e)
    assert _simplified(_select(ir.Unary("invert", F, dt.bool_))) == _store(ir.Const(1, dt.int32))
    same = ir.Select(e, ir.Const(3, dt.int32), ir.Const(3, dt.int32), dt.int32)
    assert _simplified(_store(same)) == _store(ir.Const(3, dt.int32))


def test_simplify_decides_comparisons_by_loop_ranges():
    i = ir.Var("i")
    loop = ir.For("i", _i(2), ir.Binary("min", ir.Var("N"), _i(10), dt.index), ir.ForKind.SERIAL,
                  ir.Block((_select(ir.Compare("ge", i, _i(2))), _select(ir.Compare("eq", i, _i(10))),
                            _select(ir.Compare("lt", i, _i(5))),
                            _store(ir.Const(0, dt.int32), ir.Binary("max", i, _i(0), dt.index)))))
    got = _simplified(loop)
    assert isinstance(got, ir.For)
    assert got.body == ir.Block((_store(ir.Const(1, dt.int32)), _store(ir.Const(2, dt.int32)),
                                 _select(ir.Compare("lt", i, _i(5))),
                                 _store(ir.Const(0, dt.int32), i)))


def test_simplify_picks_min_max_operands_when_the_difference_touches_zero():
    # i in [0, 7]: i - 0 lies in [0, 7], which says i >= 0 (max(i, 0) is i, min(i, 0) is
    # 0) without saying i <= 0 or its negation; 7 - i in [0, 7] likewise
    i = ir.Var("i")
    at = [ir.Binary("max", i, _i(0), dt.index), ir.Binary("min", i, _i(0), dt.index),
          ir.Binary("min", _i(7), i, dt.index), ir.Binary("max", _i(7), i, dt.index),
          ir.Binary("max", i, _i(1), dt.index)]
    loop = ir.For("i", _i(0), _i(8), ir.ForKind.SERIAL,
                  ir.Block(tuple(_store(ir.Const(0, dt.int32), x) for x in at)))
    got = _simplified(loop)
    want = [i, _i(0), i, _i(7), at[4]]  # max(i, 1): i - 1 in [-1, 6] decides nothing
    assert got.body == ir.Block(tuple(_store(ir.Const(0, dt.int32), x) for x in want))


def test_simplify_narrows_ranges_under_conditions():
    j = ir.Var("j")
    inner = ir.For("j", _i(0), ir.Var("N"), ir.ForKind.SERIAL,
                   ir.If(ir.Binary("and", ir.Compare("ge", j, _i(3)), ir.Compare("le", j, _i(4)),
                                   dt.bool_),
                         _select(ir.Compare("eq", j, _i(2))),
                         ir.If(ir.Compare("eq", j, _i(5)), _select(ir.Compare("gt", j, _i(4))))))
    got = _simplified(inner)
    assert got == ir.For("j", _i(0), ir.Var("N"), ir.ForKind.SERIAL,
                         ir.If(inner.body.cond, _store(ir.Const(2, dt.int32)),
                               ir.If(ir.Compare("eq", j, _i(5)), _store(ir.Const(1, dt.int32)))))


def test_simplify_excludes_an_end_of_a_range():
    k = ir.Var("k")
    loop = ir.For("k", _i(0), _i(3), ir.ForKind.SERIAL,
                  ir.If(ir.Compare("eq", k, _i(2)), _store(ir.Const(5, dt.int32)),
                        ir.If(ir.Compare("eq", k, _i(1)), _store(ir.Const(6, dt.int32)),
                              _select(ir.Compare("eq", k, _i(0))))))
    got = _simplified(loop)
    assert got.body.else_.else_ == _store(ir.Const(1, dt.int32))


def test_simplify_removes_a_loop_that_never_runs():
    loop = ir.For("i", _i(4), ir.Binary("min", ir.Var("N"), _i(3), dt.index), ir.ForKind.SERIAL,
                  _store(ir.Const(0, dt.int32)))
    assert _simplified(ir.Block((loop, _store(ir.Const(1, dt.int32))))) == _store(
        ir.Const(1, dt.int32))


def test_trace_shows_every_step_in_order():
    (x,) = td.dims("x")
    a = td.input("a", {x: 10}, td.float32)
    o = td.compute("o", {x: 10}, a[x] * 2)
    s = td.schedule(o).split(o, "x", 4).unroll(o, "x_i")
    trace = td.lower(s, trace=True)
    names = [n for n, _ in trace]
    assert names == ["convert", "place_binders", "reassociate", "allocate", "extents",
                     "simplify", "unroll", "partition", "simplify", "unswitch", "fold", "inbounds",
                     "flatten", "narrow", "legalise", "outline", "auto_simd", "transpose",
                     "group", "stream"]
    assert trace["inbounds"] == td.lower(s)  # td.lower shows the nest before the late passes
    assert "# unrolled" in str(trace["convert"]) and "# unrolled" not in str(trace["unroll"])
    assert "(0 + 1)" in str(trace["unroll"]) and "(0 + 1)" not in str(trace.final)
    text = repr(trace)
    assert "--- after unroll:\n" in text and "--- after fold: unchanged" in text
    with pytest.raises(KeyError, match="no step named 'vectorize'"):
        trace["vectorize"]


def _split_scale():
    (x,) = td.dims("x")
    a = td.input("a", {x: 10}, td.float32)
    o = td.compute("o", {x: 10}, a[x] * 2)
    return td.schedule(o).split(o, "x", 4).unroll(o, "x_i")


def test_stop_after_gives_the_ir_after_that_step():
    from tdsl.lower import steps

    s = _split_scale()
    trace = td.lower(s, trace=True)
    for step in steps():
        assert td.lower(s, stop_after=step.name) == trace[step.name], step.name
    assert td.lower(s) == td.lower(s, stop_after="inbounds")  # the loop nest
    assert td.lower(s, stop_after="outline") == trace.final
    # the trace stops there too
    assert [n for n, _ in td.lower(s, trace=True, stop_after="unroll")] == [
        "convert", "place_binders", "reassociate", "allocate", "extents", "simplify", "unroll"]


def test_stop_after_a_name_that_is_no_step_lists_the_valid_ones():
    s = _split_scale()
    with pytest.raises(td.ArgumentError, match=r"'vectorise' is not a step.*valid: convert, "
                                               r"place_binders, .*partition.*outline"):
        td.lower(s, stop_after="vectorise")
    with pytest.raises(td.ArgumentError, match=r"index32 runs only for portable C"):
        td.lower(s, stop_after="index32")
    with pytest.raises(td.ArgumentError, match=r"instrument runs only for Kernel.profile"):
        td.lower(s, stop_after="instrument")


def test_late_false_is_stop_after_the_loop_nest():
    from tdsl.lower import LOOP_NEST, finish, lower_schedule

    s = _split_scale()
    nest = lower_schedule(s, late=False)
    assert nest == lower_schedule(s, stop_after=LOOP_NEST) == td.lower(s)
    assert finish(nest) == lower_schedule(s)  # finish runs the rest of the same list


def test_portable_lowering_runs_the_portable_steps():
    from tdsl.lower import lower_schedule

    names = [n for n, _ in lower_schedule(_split_scale(), workspace=True, portable=True,
                                          trace=True)]
    assert names[-11:] == ["flatten", "narrow", "legalise", "dsp", "lanes", "index32", "outline",
                           "auto_simd", "transpose", "group", "stream"]


def test_binders_are_a_step_of_their_own():
    # a producer tiled and computed at a fused loop: its block bounds are set by a binder
    y, x = td.dims("y x")
    a = td.input("a", {y: 7, x: 16}, td.int16)
    p = td.compute("p", {y: 7, x: 16}, a[y, x] + 1)
    out = td.compute("out", {y: 7, x: 16}, p[y, x] * 2)
    s = (td.schedule(out).fuse(out, "y", "x").reorder(p, "x y").tile(p, x=7, y=1)
         .compute_at(p, out, "y_x"))
    trace = td.lower(s, trace=True)
    binders = [x for x in walk_stmts(trace["convert"].body) if isinstance(x, ir.Binder)]
    assert binders and "\n    bind p_" in str(trace["convert"])
    placed = trace["place_binders"]
    assert not any(isinstance(x, ir.Binder) for x in walk_stmts(placed.body))
    names = {n for b in binders for n, _ in b.lets}
    assert names <= {x.name for x in walk_stmts(placed.body) if isinstance(x, ir.Let)}
    with pytest.raises(VerifyError, match="binder of .* place_binders"):
        verify(trace["convert"])


def test_narrow_is_a_step_before_legalise():
    (x,) = td.dims("x")
    a = td.input("a", {x: 8}, td.float16)
    o = td.compute("o", {x: 8}, a[x] * 3 + 1)
    trace = td.lower(td.schedule(o), trace=True)

    def half_arithmetic(f: ir.LoweredFunc) -> bool:
        return any(isinstance(e, ir.Binary) and e.dtype == dt.float16
                   for s in walk_stmts(f.body) for top in stmt_exprs(s) for e in walk_exprs(top))

    assert half_arithmetic(trace["flatten"]) and not half_arithmetic(trace["narrow"])
    rng = np.random.default_rng(1)
    data = rng.uniform(-4, 4, 8).astype(np.float16)
    np.testing.assert_array_equal(td.build(td.schedule(o))(a=data), td.evaluate(o, a=data))
