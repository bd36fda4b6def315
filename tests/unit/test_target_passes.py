"""The late passes that plan for a target (auto_simd, transpose, group, stream): what
each makes explicit in the loop IR, for which target, that the verifier, the printer
and the traversals know the statements they make, and that kernels built from them
compute what numpy does on both backends."""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td
from tdsl import dtypes as dt
from tdsl.lower import finish, ir, lower_schedule
from tdsl.lower.passes.verify import VerifyError, verify
from tdsl.lower.rewrite import Rewriter, free_vars, substitute, walk_stmts

LLVM_32 = ir.Target("llvm", 32)


def _matmul(m: int, k: int, n: int):
    i, j, kk = td.dims("i j k")
    A = td.input("A", {i: m, kk: k}, td.float32)
    B = td.input("B", {kk: k, j: n}, td.float32)
    C = td.compute("C", {i: m, j: n}, td.sum(A[i, kk] * B[kk, j], kk))
    return C


def _loops(func: ir.LoweredFunc) -> list[ir.For]:
    return [s for s in walk_stmts(func.body) if isinstance(s, ir.For)]


def _nodes(func: ir.LoweredFunc, kind: type) -> list:
    return [s for s in walk_stmts(func.body) if isinstance(s, kind)]


def _relaid(h: int, w: int):
    """out = A + A through a cache T laid out [x, y]: the copy from T to out transposes."""
    y, x = td.dims("y x")
    A = td.input("A", {y: h, x: w}, td.float32)
    out = td.compute("out", {y: h, x: w}, A[y, x] + A[y, x])
    return out, (td.schedule(out).cache_write(out, "T").layout("T", "x y")
                 .tile(out, y=8, x=8).vectorize(out, "x_i").compute_at("T", out, "x_o"))


def _pairs(m: int, k: int, n: int):
    """int32 sums of int8 x int16 products, the k loop in groups of 2 unrolled between
    two vectors of 16 lanes: runs of loops the group pass takes."""
    i, j, kk, ko, t = td.dims("i j k ko t")
    A = td.input("A", {i: m, kk: k}, td.int8)
    B = td.input("B", {ko: k // 2, j: n, t: 2}, td.int16)
    acc = td.compute("acc", {i: m, j: n}, td.sum(
        td.cast(A[i, 2 * ko + t], td.int32) * td.cast(B[ko, j, t], td.int32),
        over={ko: k // 2, t: 2}))
    return acc, (td.schedule(acc).split(acc, "j", 32).split(acc, "j_i", 16)
                 .reorder(acc, "j_o", "i", "ko", "j_i_o", "t", "j_i_i")
                 .unroll(acc, "j_i_o").unroll(acc, "t").vectorize(acc, "j_i_i"))


def _streamed(rows: int, cols: int):
    r, c = td.dims("r c")
    X = td.input("X", {r: rows, c: cols}, td.float32)
    out = td.compute("out", {r: rows, c: cols}, X[r, c] * 3)
    return out, td.schedule(out).split(out, "c", 16).vectorize(out, "c_i").store_nontemporal(out)


# ---------------------------------------------------------------- auto_simd


def test_host_c_cuts_an_auto_simd_loop_into_whole_vectors_and_the_rest():
    """j has 20 iterations, 16 float32 lanes fill 64 bytes: j in 0..16 and 16..20, both
    marked; for LLVM at 32 bytes (8 lanes) the loop stays whole, marked for 32."""
    C = _matmul(5, 7, 20)
    nest = lower_schedule(td.schedule(C), late=False)
    host = finish(nest)
    marked = [s for s in _loops(host) if s.auto_vector is not None]
    assert [(ir.int_value(s.start), ir.int_value(s.end)) for s in marked] == [(0, 16), (16, 20)]
    assert {s.auto_vector for s in marked} == {64}
    llvm = finish(nest, target=LLVM_32)
    marked = [s for s in _loops(llvm) if s.auto_vector is not None]
    assert [(ir.int_value(s.start), ir.int_value(s.end), s.auto_vector) for s in marked] == [
        (0, 20, 32)]
    assert "# auto simd (64 bytes)" in str(host) and "# auto simd (32 bytes)" in str(llvm)


def test_trace_shows_the_auto_simd_step():
    trace = td.lower(td.schedule(_matmul(4, 3, 16)), trace=True)
    assert "auto simd" not in str(trace["outline"]) and "auto simd" in str(trace["auto_simd"])


def test_auto_simd_kernels_match_numpy(backend):
    C = _matmul(6, 9, 21)
    rng = np.random.default_rng(1)
    a, b = rng.random((6, 9), np.float32), rng.random((9, 21), np.float32)
    f = td.build(td.schedule(C), backend)
    np.testing.assert_allclose(f(A=a, B=b), a @ b, rtol=1e-5)


def test_portable_functions_are_left_to_their_own_passes():
    """td.emit_c's function: no marks, no statements of these passes."""
    func = lower_schedule(td.schedule(_matmul(4, 3, 20)), workspace=True, portable=True)
    assert all(s.auto_vector is None for s in _loops(func))


# ---------------------------------------------------------------- transpose, group


def test_a_transposing_copy_is_one_statement_with_its_nest_as_fallback(backend):
    out, s = _relaid(16, 24)
    trace = td.lower(s, trace=True)
    (copy,) = _nodes(trace["transpose"], ir.TransposingCopy)
    assert not _nodes(trace["outline"], ir.TransposingCopy)
    assert isinstance(copy.fallback, ir.For) and (copy.rows, copy.cols) == (8, 8)
    assert "if target has avx512vl:" in str(trace["transpose"])
    a = np.random.default_rng(2).random((16, 24), np.float32)
    np.testing.assert_array_equal(td.build(s, backend)(A=a), a + a)


def test_grouped_products_are_one_statement_with_their_loops_as_fallback(backend):
    acc, s = _pairs(3, 8, 32)
    func = finish(lower_schedule(s, late=False))
    groups = _nodes(func, ir.GroupedProducts)
    assert groups and all(g.size == 2 and g.lanes == 16 and g.feature == "avx512bw"
                          for g in groups)
    assert all(isinstance(g.fallback, ir.Block) and len(g.fallback.stmts) == 2 for g in groups)
    rng = np.random.default_rng(3)
    arrays = {"A": rng.integers(-128, 128, (3, 8), np.int8),
              "B": rng.integers(-2**15, 2**15, (4, 32, 2), np.int16)}
    np.testing.assert_array_equal(td.build(s, backend)(**arrays), td.evaluate(acc, **arrays))


# ---------------------------------------------------------------- stream


def test_host_c_stages_streamed_stores_and_llvm_does_not():
    out, s = _streamed(4, 32)
    nest = lower_schedule(s, late=False)
    host = finish(nest)
    (staged,) = _nodes(host, ir.StreamedStores)
    assert [b.name for b in staged.buffers] == ["out"] and staged.extent == 16
    assert "stream out through the stack (16 elements each):" in str(host)
    assert not _nodes(finish(nest, target=LLVM_32), ir.StreamedStores)


def test_streamed_kernels_match_numpy(backend):
    out, s = _streamed(5, 40)
    x = np.random.default_rng(4).random((5, 40), np.float32)
    np.testing.assert_array_equal(td.build(s, backend)(X=x), x * 3)


# ---------------------------------------------------------------- verifier, traversals


def _tiny(body: ir.Stmt, nontemporal: frozenset[str] = frozenset()) -> ir.LoweredFunc:
    a = ir.Buffer("a", dt.float32, (ir.index_const(64),), "input")
    o = ir.Buffer("o", dt.float32, (ir.index_const(64),), "output")
    return ir.LoweredFunc("f", (a,), (o,), (), body, nontemporal=nontemporal)


A = ir.Buffer("a", dt.float32, (ir.index_const(64),), "input")
O = ir.Buffer("o", dt.float32, (ir.index_const(64),), "output")
I = ir.Var("i")


def _copy_loop(kind=ir.ForKind.SERIAL, auto: int | None = None) -> ir.For:
    store = ir.Store(O, (I,), ir.Load(A, (I,)))
    return ir.For("i", ir.index_const(0), ir.index_const(16), kind, store, 16, auto_vector=auto)


def test_the_verifier_refuses_marks_and_statements_out_of_place():
    verify(_tiny(_copy_loop(auto=64)))
    with pytest.raises(VerifyError, match="marked auto simd"):
        verify(_tiny(_copy_loop(ir.ForKind.VECTORIZED, auto=64)))
    staged = ir.StreamedStores(_copy_loop(auto=64), (O,), (ir.index_const(0),), 16)
    verify(_tiny(staged, frozenset({"o"})))
    with pytest.raises(VerifyError, match="not all stored nontemporal"):
        verify(_tiny(staged))
    with pytest.raises(VerifyError, match="buffer of kind input"):
        verify(_tiny(ir.StreamedStores(_copy_loop(), (A,), (ir.index_const(0),), 16)))
    copy = ir.TransposingCopy(O, ir.index_const(0), 8, A, ir.index_const(0), 8, 8, 8, None,
                              _copy_loop())
    verify(_tiny(copy))
    with pytest.raises(VerifyError, match="two buffers of one 32-bit type"):
        verify(_tiny(ir.TransposingCopy(A, ir.index_const(0), 8, A, ir.index_const(0), 8, 8,
                                        8, None, _copy_loop())))
    with pytest.raises(VerifyError, match="used outside its scope"):  # in the fallback too
        verify(_tiny(ir.TransposingCopy(O, ir.index_const(0), 8, A, ir.Var("q"), 8, 8, 8,
                                        None, _copy_loop())))


def test_traversals_see_through_the_new_statements():
    """walk_stmts reaches the fallback, Rewriter rewrites it and keeps the marks,
    free_vars sees a batch variable bound."""
    copy = ir.TransposingCopy(O, ir.Var("b"), 8, A, ir.Var("n"), 8, 8, 8,
                              ir.Batch("b", ir.index_const(0), ir.index_const(2)),
                              _copy_loop(auto=64))
    assert any(isinstance(s, ir.Store) for s in walk_stmts(copy))
    assert free_vars(copy) == {"n"}
    assert Rewriter().visit(copy) is copy
    renamed = substitute(copy, {"n": ir.index_const(3)})
    assert isinstance(renamed, ir.TransposingCopy) and renamed.src_base == ir.index_const(3)
    assert isinstance(renamed.fallback, ir.For) and renamed.fallback.auto_vector == 64
