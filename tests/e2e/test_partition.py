"""Loop partitioning: vectorized stencils over boundary views get an interior with
plain loads, and give td.evaluate's answer at every size, edges included."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tdsl as td
from tdsl import dtypes
from tdsl.lower import ir
from tdsl.lower.passes.partition import partition
from tdsl.lower.rewrite import walk_stmts


def blur5(view, dtype=td.float32, symbolic=True, shape=(20, 37)):
    y, x, ky, kx = td.dims("y x ky kx")
    H, W = (td.size("H"), td.size("W")) if symbolic else shape
    inp = td.input("inp", {y: H, x: W}, dtype)
    v = view(inp)
    out = td.compute("out", {y: H, x: W}, td.sum(v[y + ky - 2, x + kx - 2], over={ky: 5, kx: 5}))
    return out


VIEWS = {"clamp": td.clamp, "pad": lambda t: td.pad(t, 3), "mirror": td.mirror,
         "mirror_interior": td.mirror_interior, "wrap": td.wrap}
NUMPY_MODES = {"clamp": "edge", "mirror": "symmetric", "mirror_interior": "reflect", "wrap": "wrap"}


def _vectorized(out, width=8):
    return td.schedule(out).split(out, "x", width).vectorize(out, "x_i").parallel(out, "y")


def _interior_loads(func: ir.LoweredFunc) -> list[str]:
    """The printed stores of the loop copies with no min/max in their reads."""
    return [line for line in str(func).splitlines() if "inp[" in line and "min(" not in line
            and "max(" not in line and "select(" not in line]


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_interior_reads_are_plain_loads(view):
    f = td.lower(_vectorized(blur5(VIEWS[view])))
    assert _interior_loads(f), str(f)
    assert re.search(r"let y_in\d+ =", str(f)) and re.search(r"let x_o_in\d+ =", str(f))


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (4, 9), (5, 16), (7, 17), (20, 37)])
def test_every_size_matches_evaluate(backend, view, shape):
    out = blur5(VIEWS[view], td.int32)
    a = np.random.default_rng(sum(shape)).integers(-100, 100, shape, dtype=np.int32)
    want = td.evaluate(out, inp=a)
    tiles = (td.schedule(out).split(out, "y", 2).split(out, "x", 4).reorder(out, "y_o x_o y_i x_i")
             .unroll(out, "y_i").vectorize(out, "x_i").parallel(out, "y_o"))
    for s in (_vectorized(out), tiles):
        np.testing.assert_array_equal(td.build(s, target=backend)(inp=a), want)


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_constant_sizes(backend, view):
    out = blur5(VIEWS[view], td.float64, symbolic=False, shape=(9, 30))
    a = np.random.default_rng(1).standard_normal((9, 30))
    got = td.build(_vectorized(out), target=backend)(inp=a)
    np.testing.assert_allclose(got, td.evaluate(out, inp=a), rtol=1e-12)


def test_loop_that_writes_what_its_bounds_read_is_not_partitioned():
    # a bound that reads memory may change inside the loop: never hoisted into a let
    n = ir.Var("n")
    buf = ir.Buffer("b", td.int32, (n,), "output")
    idx = ir.Binary("min", ir.Var("i"), ir.Cast(ir.Load(buf, (ir.index_const(0),)), dtypes.index), dtypes.index)
    inner = ir.For("j", ir.index_const(0), ir.index_const(4), ir.ForKind.VECTORIZED,
                   ir.Store(buf, (idx,), ir.Const(1, td.int32)), 4)
    func = ir.LoweredFunc("f", (), (buf,), (n,), ir.For("i", ir.index_const(0), n, ir.ForKind.SERIAL,
                                                        inner))
    assert partition(func) == func


@settings(max_examples=40, deadline=None)
@given(shifts=st.lists(st.tuples(st.integers(-4, 4), st.integers(-9, 9)), min_size=1, max_size=4),
       width=st.sampled_from([2, 3, 4, 8]), h=st.integers(1, 12), w=st.integers(1, 30),
       view=st.sampled_from(sorted(VIEWS)))
def test_random_stencils(shifts, width, h, w, view):
    y, x = td.dims("y x")
    H, W = td.size("H"), td.size("W")
    inp = td.input("inp", {y: H, x: W}, td.int32)
    v = VIEWS[view](inp)
    e = v[y + shifts[0][0], x + shifts[0][1]]
    for dy, dx in shifts[1:]:
        e = e * 3 + v[y + dy, 2 * x + dx] if dx % 2 else e - v[y - dy, x + dx]
    out = td.compute("out", {y: H, x: W}, e)
    a = np.random.default_rng(h * 31 + w).integers(-50, 50, (h, w), dtype=np.int32)
    want = td.evaluate(out, inp=a)
    s = td.schedule(out).split(out, "x", width).vectorize(out, "x_i")
    f = td.build(s)
    np.testing.assert_array_equal(f(inp=a), want)
    assert any(isinstance(st_, ir.For) and st_.kind is ir.ForKind.VECTORIZED
               for st_ in walk_stmts(td.lower(s).body))


@pytest.mark.parametrize("view", sorted(NUMPY_MODES))
@pytest.mark.parametrize("n", [1, 2, 5, 11])
def test_views_read_as_numpy_pads(backend, view, n):
    # far outside too: numpy's pad modes repeat the same way
    i = td.dim("i")
    N = td.size("N")
    a = td.input("a", {i: N}, td.int32)
    v = VIEWS[view](a)
    out = td.compute("out", {i: N}, v[i - 13] * 10000 + v[i + 1] * 100 + v[2 * i + 7])
    av = np.arange(1, n + 1, dtype=np.int32)
    p = np.pad(av, 40, mode=NUMPY_MODES[view])
    at = np.arange(n) + 40
    want = p[at - 13] * 10000 + p[at + 1] * 100 + p[2 * np.arange(n) + 47]
    np.testing.assert_array_equal(td.evaluate(out, a=av), want)
    s = td.schedule(out).split(out, "i", 4).vectorize(out, "i_i")
    np.testing.assert_array_equal(td.build(s, target=backend)(a=av), want)


@pytest.mark.parametrize("view", sorted(NUMPY_MODES))
def test_inlined_producer_read_through_a_view(backend, view):
    y, x = td.dims("y x")
    a = td.input("a", {y: 6, x: 9}, td.int32)
    p = td.compute("p", {y: 6, x: 9}, a[y, x] * 3 + x)
    v = VIEWS[view](p)
    out = td.compute("out", {y: 6, x: 9}, v[y - 2, x + 3] - v[y + 1, x - 4])
    av = np.random.default_rng(3).integers(-50, 50, (6, 9), dtype=np.int32)
    want = td.evaluate(out, a=av)
    pv = np.pad(av * 3 + np.arange(9, dtype=np.int32), 8, mode=NUMPY_MODES[view])
    yy, xx = np.meshgrid(np.arange(6) + 8, np.arange(9) + 8, indexing="ij")
    np.testing.assert_array_equal(want, pv[yy - 2, xx + 3] - pv[yy + 1, xx - 4])
    for s in (td.schedule(out).compute_inline(p),
              td.schedule(out).split(out, "x", 4).vectorize(out, "x_i").compute_at(p, out, "y")):
        np.testing.assert_array_equal(td.build(s, target=backend)(a=av), want)


def test_partitioning_at_most_doubles_the_function():
    # fuzz seed 52 case 140: unrolled loops over a vectorized one, copied at every level,
    # made the nest 6 times larger and its build slower than the fuzzer's time limit
    y, x, c = td.dims("y x c")
    W, C = td.size("W"), td.size("C")
    inp = td.input("inp", {y: 6, x: W, c: C}, td.float32)
    v = td.clamp(inp)
    out = td.compute("out", {y: 6, x: W, c: C},
                     v[y - 1, x + 1, c - 2] + v[y + 1, x - 1, c + 2] * v[y, x, c + 1])
    s = (td.schedule(out).split(out, "c", 16).split(out, "c_o", 8, names=("c_u", "c_w"))
         .reorder(out, "c_u y x c_w c_i").unroll(out, "y").unroll(out, "c_w")
         .vectorize(out, "c_i"))
    trace = td.lower(s, trace=True)

    def size(f):
        return sum(1 for _ in walk_stmts(f.body))

    before = size(trace["unroll"])
    assert before > 200 and size(trace["partition"]) <= 2 * before
    a = np.random.default_rng(0).random((6, 7, 300), dtype=np.float32)
    np.testing.assert_allclose(td.build(s)(inp=a), td.evaluate(out, inp=a), rtol=1e-6)


def _vector_ends(func: ir.LoweredFunc) -> list[str]:
    """The printed ends of the vectorized loops (`for v in a .. END:  # vectorized`)."""
    return [line.split(" .. ")[1].split(":")[0] for line in str(func).splitlines()
            if line.rstrip().endswith("# vectorized")]


def _row_sum(W, h: int = 3):
    y, x = td.dims("y x")
    inp = td.input("inp", {y: h, x: W}, td.int32)
    return td.compute("out", {y: h, x: W}, inp[y, x] * 3 + x)


def test_a_split_tail_gets_a_loop_of_its_own():
    """for x_o: for x_i in 0 .. min(16, 40 - 16 x_o) (vectorized) becomes the tiles
    where all 16 lanes are there, then the last one: the vector loops of the
    interior run over a constant number of lanes."""
    f = td.lower(td.schedule(out := _row_sum(40)).split(out, "x", 16).vectorize(out, "x_i"))
    ends = _vector_ends(f)
    assert "16" in ends and not any("min(" in e for e in ends), str(f)
    W = td.size("W")
    f = td.lower(td.schedule(out := _row_sum(W)).split(out, "x", 16).vectorize(out, "x_i"))
    assert re.search(r"let x_o_in\d+ =", str(f)) and "16" in _vector_ends(f), str(f)


def test_a_parallel_loop_is_not_cut_for_its_tail():
    """Cutting a parallel loop for its tail would make two parallel regions."""
    out = _row_sum(40)
    s = td.schedule(out).split(out, "x", 16).vectorize(out, "x_i").parallel(out, "x_o")
    f = td.lower(s)
    assert [e for e in _vector_ends(f) if "min(" in e], str(f)


@settings(max_examples=40, deadline=None)
@given(w=st.integers(1, 70), factor=st.sampled_from([3, 4, 8, 16, 32]), inner=st.integers(1, 3),
       symbolic=st.booleans(), unroll=st.booleans())
def test_split_tails_match_evaluate(w, factor, inner, symbolic, unroll):
    """Widths that are and are not multiples of the split, known or a size, with a
    second split inside (two tails, one within the other) and the tile unrolled."""
    out = _row_sum(td.size("W") if symbolic else w)
    s = td.schedule(out).split(out, "x", factor * inner)
    if inner > 1:
        s = s.split(out, "x_i", factor)
        if unroll:
            s = s.unroll(out, "x_i_o")
        s = s.vectorize(out, "x_i_i")
    else:
        s = s.vectorize(out, "x_i")
    a = np.random.default_rng(w).integers(-1000, 1000, (3, w), dtype=np.int32)
    want = td.evaluate(out, inp=a)
    for target in ("c", "llvm"):
        np.testing.assert_array_equal(td.build(s, target=target)(inp=a), want)


def test_a_tail_bound_under_another_min_is_not_cut():
    """for i: for j in 0 .. min(16, min(40 - 16 i, K)) (vectorized): where 40 - 16 i
    >= 16 the end is still min(16, K), not 16, so no interior of 16 lanes."""
    i, k = ir.Var("i"), ir.Var("K")
    buf = ir.Buffer("b", td.int32, (ir.index_const(48),), "output")
    start = ir.Binary("mul", ir.index_const(16), i, dtypes.index)
    falling = ir.Binary("sub", ir.index_const(40), start, dtypes.index)
    end = ir.Binary("min", ir.index_const(16), ir.Binary("min", falling, k, dtypes.index),
                    dtypes.index)
    at = ir.Binary("add", start, ir.Var("j"), dtypes.index)
    inner = ir.For("j", ir.index_const(0), end, ir.ForKind.VECTORIZED,
                   ir.Store(buf, (at,), ir.Const(1, td.int32)), 16)
    func = ir.LoweredFunc("f", (), (buf,), (k,), ir.For("i", ir.index_const(0), ir.index_const(3),
                                                       ir.ForKind.SERIAL, inner))
    assert "j in 0 .. 16:" not in str(partition(func))


# ---------------------------------------------------------------- portable C: every loop


def _portable(sched, name="k") -> ir.LoweredFunc:
    from tdsl.lower import lower_schedule

    return lower_schedule(sched, name, workspace=True, late=False, portable=True)


def _tests(func: ir.LoweredFunc) -> list[ir.Expr]:
    """The selects, mins and maxes of the function's stores (range tests and clamps)."""
    from tdsl.lower.rewrite import stmt_exprs, walk_exprs

    found = []
    for s in walk_stmts(func.body):
        if isinstance(s, ir.Store):
            for top in stmt_exprs(s):
                found += [e for e in walk_exprs(top) if isinstance(e, ir.Select)
                          or isinstance(e, ir.Binary) and e.op in ("min", "max")
                          and e.dtype == dtypes.index]
    return found


def test_portable_padded_convolution_has_no_range_test():
    """A td.pad convolution with no vectorized loop: host C keeps the padding's test at
    every multiply-accumulate; portable C partitions the tap loops at each pixel, so the
    products read plain loads, and the taps that fall on the padding (which contribute
    (-off + off) * w = 0) are gone, not tested."""
    from test_emit_c import KERNELS

    from tdsl.emit import load_function

    sched = load_function(f"{KERNELS}:conv_s8")()
    assert _tests(td.lower(sched))  # host C: tests inside
    func = _portable(sched)
    assert _tests(func) == [], str(func)
    loops = [s.var for s in walk_stmts(func.body) if isinstance(s, ir.For)]
    assert loops.count("ry") == 1 and loops.count("rx") == 1, str(func)  # no copies


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_portable_stencils_partition_without_a_vectorized_loop(view):
    """Every boundary view, every loop, no vectorized loop: the interior of portable C
    reads plain loads, and the emitted C gives numpy's answer at every size (with ASan
    and UBSan: tests/e2e/test_emit_c.py's driver)."""
    out = blur5(VIEWS[view], td.int32)
    func = _portable(td.schedule(out))
    assert _interior_loads(func), str(func)


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (5, 16), (9, 7)])
def test_portable_stencils_match_numpy(view, shape, tmp_path):
    import test_emit_c as e

    from tdsl.compute.binding import bind_arguments

    out = blur5(VIEWS[view], td.int32)
    sched = td.schedule(out)
    a = np.random.default_rng(sum(shape)).integers(-100, 100, shape, dtype=np.int32)
    td.emit_c(sched, "k", tmp_path)
    em = e.Emitted("k", tmp_path, td.lower(sched, "k"), {"inp": a},
                   {"out": td.evaluate(out, inp=a)}, bind_arguments(sched.pipeline, {"inp": a}).sizes,
                   sched)
    (tmp_path / "inputs.bin").write_bytes(a.tobytes())
    (tmp_path / "driver.c").write_text(e.driver_source(em))
    e.build_and_run(em, "asan", e.tool("gcc"), e.SANITIZE, env=e.ASAN_ENV)


def test_simplify_removes_what_contributes_nothing():
    """Integer constants fold (wrapping), x * 0 is 0, x + 0 is x, a[i] = a[i] goes, and
    the loops and lets left empty go with it; a float product with 0 stays (NaN)."""
    from tdsl.lower.passes.simplify import simplify

    i32, f32 = dtypes.int32, dtypes.float32
    acc = ir.Buffer("acc", i32, (ir.index_const(4),), "output")
    w = ir.Buffer("w", i32, (ir.index_const(4),), "input")
    f = ir.Buffer("f", f32, (ir.index_const(4),), "output")
    i = ir.Var("i")
    pad = ir.Binary("add", ir.Cast(ir.Const(-128, dtypes.int8), i32), ir.Const(128, i32), i32)
    step = ir.Store(acc, (i,), ir.Binary("add", ir.Load(acc, (i,)),
                                          ir.Binary("mul", pad, ir.Load(w, (i,)), i32), i32))
    loop = ir.For("i", ir.index_const(0), ir.index_const(4), ir.ForKind.SERIAL,
                  ir.Let("unused", ir.index_const(3), step))
    fstep = ir.Store(f, (i,), ir.Binary("mul", ir.Load(f, (i,)), ir.Const(0.0, f32), f32))
    floop = ir.For("i", ir.index_const(0), ir.index_const(4), ir.ForKind.SERIAL, fstep)
    func = ir.LoweredFunc("k", (w,), (acc, f), (), ir.Block((loop, floop)))
    out = simplify(func)
    assert out.body == floop
    wrap = ir.Binary("add", ir.Const(127, dtypes.int8), ir.Const(1, dtypes.int8), dtypes.int8)
    one = ir.Store(acc, (ir.index_const(0),), ir.Cast(wrap, i32))
    got = simplify(ir.LoweredFunc("k", (w,), (acc, f), (), one)).body
    assert got == ir.Store(acc, (ir.index_const(0),), ir.Const(-128, i32))
