"""The unswitch pass: a loop-invariant tile test moves out of the loops around it.

isl separates the last, partial tile of a split loop with a test on the tile loop
(`if j_o <= 13:` full tile `else:` edge tile) placed inside the loops the tile's
statements run in, e.g. a register tile's reduction loop. Hoisted, the full tiles run
with no test inside; values must not change, and the copies must stay bounded."""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td
from tdsl.lower import ir
from tdsl.lower.passes import unswitch as pass_module
from tdsl.lower.passes.unswitch import unswitch
from tdsl.lower.rewrite import walk_stmts

BACKENDS = ["c", "llvm"]


def _register_tiled_matmul(n: int, m: int, k: int, ti: int, tj: int, v: int):
    """sgemm-like: C's ti x tj tile accumulated in Cacc over the whole k loop; m is
    not a multiple of tj, so the last column panel is an edge tile."""
    i, j, kk = td.dims("i j k")
    A = td.input("A", {i: n, kk: k}, td.float32)
    B = td.input("B", {kk: k, j: m}, td.float32)
    C = td.compute("C", {i: n, j: m}, td.sum(A[i, kk] * B[kk, j], over=kk))
    s = (td.schedule(C).cache_write(C, "Cacc").tile(C, i=ti, j=tj)
         .reorder(C, "j_o i_o i_i j_i").parallel(C, "j_o").vectorize(C, "j_i")
         .compute_at("Cacc", C, "i_o").split("Cacc", "j", v, names=("j_u", "j_v"))
         .reorder("Cacc", "k i j_u j_v").unroll("Cacc", "i").unroll("Cacc", "j_u")
         .vectorize("Cacc", "j_v"))
    return A, B, C, s


def _tests_inside(s: ir.Stmt, var: str) -> int:
    """How many tests run inside loops over `var`."""
    return sum(1 for loop in walk_stmts(s) if isinstance(loop, ir.For) and loop.var == var
               for x in walk_stmts(loop.body) if isinstance(x, ir.If))


def test_edge_tile_test_leaves_the_reduction_loop():
    *_, s = _register_tiled_matmul(12, 900, 40, 4, 64, 16)
    trace = td.lower(s, trace=True)
    assert _tests_inside(trace["simplify"].body, "k") > 0  # isl put it there
    assert _tests_inside(trace["unswitch"].body, "k") == 0
    assert _tests_inside(trace["unswitch"].body, "i_o") == 0  # and out of the row loop


def test_row_edge_test_leaves_the_reduction_loop():
    """Rows not a multiple of the tile's (sgemm 1024 rows in tiles of 6): isl tests the
    row tile directly in the body of the reduction loop, with nothing but vector loops
    beside it; hoisted, the full tiles' k loop holds no test (gcc kept the split
    accumulators in registers only with flags and spilled indices: 6.90 ms against
    6.61 for a 4-row tile at 1024^3, with it 6x64 is the faster)."""
    *_, s = _register_tiled_matmul(14, 64, 9, 6, 64, 16)
    trace = td.lower(s, trace=True)
    assert _tests_inside(trace["simplify"].body, "k") > 0
    assert _tests_inside(trace["unswitch"].body, "k") == 0


@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize("shape", [(12, 900, 40, 4, 64, 16), (7, 37, 5, 3, 16, 8),
                                   (9, 17, 3, 4, 8, 4), (5, 64, 9, 2, 32, 16),
                                   (14, 64, 9, 6, 64, 16), (13, 40, 7, 6, 32, 8)])
def test_values_unchanged(target, shape):
    n, m, k = shape[:3]
    A, B, C, s = _register_tiled_matmul(*shape)
    rng = np.random.default_rng(sum(shape))
    a = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal((k, m)).astype(np.float32)
    f = td.build(s, target=target)
    np.testing.assert_allclose(f(A=a, B=b), a @ b, rtol=1e-5, atol=1e-5)


def test_isl_tests_stop_at_the_growth_limit(monkeypatch):
    """With no budget, only the unroll pass's trip tests move; with the default, the
    function grows at most GROWTH-fold (or by MAX_STATEMENTS)."""
    *_, s = _register_tiled_matmul(12, 900, 40, 4, 64, 16)
    before = td.lower(s, trace=True)["simplify"]
    size = sum(1 for _ in walk_stmts(before.body))
    after = unswitch(before)
    grown = sum(1 for _ in walk_stmts(after.body))
    limit = max(pass_module.GROWTH * size, size + pass_module.MAX_STATEMENTS)
    assert size < grown <= limit
    monkeypatch.setattr(pass_module, "GROWTH", 1)
    monkeypatch.setattr(pass_module, "MAX_STATEMENTS", 0)
    assert unswitch(before) == before


def test_many_distinct_tests_do_not_multiply_the_code():
    """Tiles of several stages, each with an edge: every hoist duplicates a loop, and
    the copies together stay within the growth limit."""
    (x,) = td.dims("x")
    A = td.input("A", {x: 1000}, td.float32)
    stages, prev = [], A
    for n in range(6):
        prev = td.compute(f"s{n}", {x: 1000}, prev[x] * 2.0 + n)
        stages.append(prev)
    s = td.schedule(prev)
    for n, st in enumerate(stages):
        s = s.split(st, "x", 7 + 2 * n).unroll(st, "x_i") if n % 2 else s.split(st, "x", 16)
    before = td.lower(s, trace=True)["simplify"]
    size = sum(1 for _ in walk_stmts(before.body))
    grown = sum(1 for _ in walk_stmts(unswitch(before).body))
    assert grown <= max(pass_module.GROWTH * size, size + pass_module.MAX_STATEMENTS)
    a = np.arange(1000, dtype=np.float32)
    want = a.copy()
    for n in range(6):
        want = want * 2.0 + n
    for target in BACKENDS:
        np.testing.assert_allclose(td.build(s, target=target)(A=a), want, rtol=1e-6)


def test_edge_block_guards_stay_where_they_are():
    """The unroll pass guards each row of an edge block (`1 < min(4, N - 4 * i_o)`):
    invariant in the loops inside, but moving them would copy the block once per
    combination of rows (16 copies of a 4-row tile, most of them never run)."""
    i, j, k = td.dims("i j k")
    N = td.size("N")
    a = td.input("a", {i: N, k: 16}, td.float32)
    b = td.input("b", {k: 16, j: 32}, td.float32)
    c = td.compute("c", {i: N, j: 32}, td.sum(a[i, k] * b[k, j], over=k))
    s = (td.schedule(c).tile(c, i=4, j=16).reorder(c, "i_o j_o k i_i j_i")
         .vectorize(c, "j_i").unroll(c, "i_i"))
    before = td.lower(s, trace=True)["simplify"]
    assert _tests_inside(before.body, "k") == 5  # the trip test and four guards
    assert unswitch(before) == before
