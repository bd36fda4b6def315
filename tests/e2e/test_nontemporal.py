"""`Schedule.store_nontemporal`: an output's contiguous vector stores past the caches.

Values must not change whatever the schedule, dtype, extent or the output array's
alignment; the generated code must hold streaming stores where the docstring says
(LLVM: `!nontemporal` vector stores behind an alignment test; host C: the loop's
stores staged in a stack buffer that `stream_store` copies out), and ordinary stores
elsewhere."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tdsl as td
from tdsl import dtypes
from tdsl.backend_c.render import render as c_render
from tdsl.lower import finish, ir
from tdsl.lower.rewrite import walk_stmts

BACKENDS = ["c", "llvm"]
rng = np.random.default_rng(11)


def _softmax_like(rows, cols):
    r, c = td.dims("r c")
    X = td.input("X", {r: rows, c: cols}, td.float32)
    mx = td.compute("mx", {r: rows}, td.max(X[r, c], over=c))
    e = td.compute("e", {r: rows, c: cols}, td.exp(X[r, c] - mx[r]))
    total = td.compute("total", {r: rows}, td.sum(e[r, c], over=c))
    out = td.compute("out", {r: rows, c: cols}, e[r, c] / total[r])
    s = td.schedule(out)
    for st_ in (mx, e, total):
        s = s.compute_at(st_, out, "r")
    s = (s.split(e, "c", 16).vectorize(e, "c_i").split(out, "c", 32).vectorize(out, "c_i")
         .parallel(out, "r"))
    return X, out, s


def _reference(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("target", BACKENDS)
def test_softmax_with_streaming_stores_matches_numpy_and_streams(target):
    X, out, s = _softmax_like(37, 96)
    plain = td.build(s, target=target)
    f = td.build(s.store_nontemporal(out), target=target)
    x = rng.standard_normal((37, 96)).astype(np.float32)
    np.testing.assert_array_equal(f(X=x), plain(X=x))
    np.testing.assert_allclose(f(X=x), _reference(x), rtol=1e-5, atol=1e-7)
    if target == "llvm":
        assert "!nontemporal" in f.source and "!nontemporal" not in plain.source
        assert "fence seq_cst" in f.source
    else:
        assert "stream_store(&out[" in f.source and "stream_store" not in plain.source
        assert "_mm_stream_si128" in f.source and "stream_fence();" in f.source


@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize("offset", [0, 1, 2, 3])
def test_output_array_not_16_byte_aligned(target, offset):
    """A caller's output array at any 4-byte offset: the aligned stores stream, the
    others are ordinary ones (an unaligned streaming store would fault)."""
    X, out, s = _softmax_like(5, 64)
    f = td.build(s.store_nontemporal(out), target=target)
    x = rng.standard_normal((5, 64)).astype(np.float32)
    storage = np.full(5 * 64 + 4, np.nan, np.float32)
    given_out = storage[offset: offset + 5 * 64].reshape(5, 64)
    result = f(X=x, out=given_out)
    assert result is given_out or np.shares_memory(result, given_out)
    np.testing.assert_allclose(given_out, _reference(x), rtol=1e-5, atol=1e-7)
    assert np.isnan(storage[:offset]).all() and np.isnan(storage[offset + 5 * 64:]).all()


@pytest.mark.parametrize("dtype", [td.float32, td.float64, td.int8])
def test_llvm_streams_rows_8_bytes_past_a_16_byte_boundary(dtype):
    """A vector of whole 16-byte chunks at an address 8 bytes past a boundary: its
    first and last 8 bytes as 64-bit streaming stores, the chunks between as aligned
    ones (before, such rows, every other one of an even width in floats, were stored
    through the caches). Values are the plain kernel's at every output alignment."""
    y, x = td.dims("y x")
    width = 120 // dtype.itemsize  # rows of 120 bytes: 0, 8, 0, 8, ... past a boundary
    a = td.input("a", {y: 6, x: width}, dtype)
    out = td.compute("out", {y: 6, x: width}, a[y, x] * 3)
    s = td.schedule(out).split(out, "x", 32 // dtype.itemsize).vectorize(out, "x_i")
    f = td.build(s.store_nontemporal(out), target="llvm")
    ir_text = f.source
    # each streamed vector store: a switch with a case for 8 bytes past a boundary,
    # which stores two 64-bit words
    cases = len(re.findall(r"switch i64 [^\n]*i64 8, label", ir_text))
    assert cases >= 1
    assert len(re.findall(r"store i64 [^\n]*!nontemporal", ir_text)) == 2 * cases
    npd = np.dtype(dtype.name)
    av = (rng.standard_normal((6, width)) * 20).astype(npd)
    want = td.build(s, target="llvm")(a=av)
    for offset in range(4 * 8 // npd.itemsize):  # every alignment a caller's array has
        storage = np.zeros(6 * width + 32 // npd.itemsize, npd)
        got = f(a=av, out=storage[offset: offset + 6 * width].reshape(6, width))
        np.testing.assert_array_equal(got, want)
        assert not storage[:offset].any() and not storage[offset + 6 * width:].any()


@settings(max_examples=30, deadline=None)
@given(h=st.integers(1, 9), w=st.integers(1, 70),
       factor=st.sampled_from([1, 2, 3, 4, 8, 16, 24, 64]),
       dtype=st.sampled_from([td.float32, td.float64, td.int8, td.uint16, td.int64]),
       symbolic=st.booleans(), parallel=st.booleans(), offset=st.integers(0, 3),
       vector_rows=st.booleans())
def test_streamed_stencil_matches_evaluate(h, w, factor, dtype, symbolic, parallel, offset,
                                           vector_rows):
    y, x = td.dims("y x")
    H, W = (td.size("H"), td.size("W")) if symbolic else (h, w)
    a = td.input("a", {y: H, x: W}, dtype)
    out = td.compute("out", {y: H, x: W},
                     td.clamp(a)[y, x - 1] * 3 + td.pad(a, 1)[y - 1, x + 2])
    s = td.schedule(out).split(out, "x", factor).vectorize(out, "x_i")
    if vector_rows:  # outer-loop vectorization: the row loop's lanes store a column
        s = td.schedule(out).reorder(out, "x y").split(out, "y", factor).vectorize(out, "y_i")
    if parallel:
        s = s.parallel(out, s.loops(out)[0])
    npd = np.dtype(dtype.name)
    av = (rng.standard_normal((h, w)) * 50).astype(npd)
    want = td.evaluate(out, a=av)
    for target in BACKENDS:
        f = td.build(s.store_nontemporal(out), target=target)
        storage = np.zeros(h * w + 4, npd)
        got = f(a=av, out=storage[offset: offset + h * w].reshape(h, w))
        # the same code but for the stores: the same values, multiply-adds fused alike
        np.testing.assert_array_equal(got, td.build(s, target=target)(a=av))
        # and numpy's up to the rounding of a fused a * 3 + b (operands up to ~500)
        tol = {"float32": 1e-3, "float64": 1e-11}.get(dtype.name, 0)
        np.testing.assert_allclose(got, want, rtol=0, atol=tol)


@pytest.mark.parametrize("target", BACKENDS)
def test_output_read_back_by_its_update(target):
    """A streamed output that its own update then reads (a running sum along x): the
    thread that streamed a row reads it back, and a later parallel loop reads rows
    other threads streamed."""
    y, x = td.dims("y x")
    a = td.input("a", {y: 8, x: 64}, td.int32)
    out = td.compute("out", {y: 8, x: 64}, a[y, x] * 2)
    xr = td.dim("xr")
    td.update(out[y, xr], out[y, xr] + out[y, xr - 1], over={y: 8, xr: (1, 64)})
    s = (td.schedule(out).split(out, "x", 16).vectorize(out, "x_i").parallel(out, "y")
         .parallel(out.updates[0], "y").store_nontemporal(out))
    av = rng.integers(-1000, 1000, (8, 64)).astype(np.int32)
    np.testing.assert_array_equal(td.build(s, target=target)(a=av), np.cumsum(av * 2, axis=1))


def test_c_streams_only_loops_of_constant_extent_that_store_whole_runs():
    y, x = td.dims("y x")
    W = td.size("W")
    a = td.input("a", {y: 4, x: W}, td.float32)
    out = td.compute("out", {y: 4, x: W}, a[y, x] + 1)
    # a split's whole tiles stream (partitioning gives them a loop of 8 lanes); its last
    # tile, cut short, stores as usual
    s = td.schedule(out).split(out, "x", 8).vectorize(out, "x_i").store_nontemporal(out)
    f = td.build(s, target="c")
    assert f.source.count("stream_store(&") == 1 and "stream_fence();" in f.source
    for w in (21, 16, 3):
        bv = rng.standard_normal((4, w)).astype(np.float32)
        np.testing.assert_array_equal(f(a=bv), bv + 1)
    # the tiles on threads keep the cut-short extent, which depends on W: ordinary stores
    f = td.build(s.parallel(out, "x_o"), target="c")
    assert "stream_store(&" not in f.source and "stream_fence();" in f.source
    av = rng.standard_normal((4, 21)).astype(np.float32)
    np.testing.assert_array_equal(f(a=av), av + 1)
    # a strided store (the vectorized loop runs down a column): ordinary stores too
    s = (td.schedule(out).reorder(out, "x y").vectorize(out, "y").store_nontemporal(out))
    f = td.build(s, target="c")
    assert "stream_store(&" not in f.source
    np.testing.assert_array_equal(f(a=av), av + 1)


def _taps_summed_in_the_vector_loop(h, w, factor):
    """A 3-tap sum whose taps are unrolled inside the vectorized loop: each lane of the
    output is set, then read and stored again once per tap, in one iteration."""
    y, x, r = td.dims("y x r")
    a = td.input("a", {y: h, x: w}, td.float32)
    k = td.input("k", {r: 3}, td.float32)
    out = td.compute("out", {y: h, x: w}, td.sum(td.pad(a, 0.0)[y, x + r - 1] * k[r], over=r))
    s = (td.schedule(out).split(out, "x", factor).reorder(out, "y x_o x_i r")
         .unroll(out, "r").vectorize(out, "x_i"))
    return out, s


@pytest.mark.parametrize("w", [64, 40, 13])
def test_c_streams_an_output_summed_in_the_vector_loop(w):
    """The output's lanes are read back and stored again by each tap: all of that goes
    to the stack buffer, which is copied out streaming once the lanes are final."""
    out, s = _taps_summed_in_the_vector_loop(3, w, 16)
    f = td.build(s.store_nontemporal(out), target="c")
    assert "stream_store(&out[" in f.source
    av = rng.standard_normal((3, w)).astype(np.float32)
    kv = rng.standard_normal(3).astype(np.float32)
    np.testing.assert_array_equal(f(a=av, k=kv), td.build(s, target="c")(a=av, k=kv))
    np.testing.assert_allclose(f(a=av, k=kv), td.evaluate(out, a=av, k=kv), rtol=1e-5, atol=1e-6)


def test_c_does_not_stage_an_output_read_at_another_lane():
    """A vector loop that reads its output at another element than it stores (a running
    sum along the vector loop's rows) keeps its ordinary stores."""
    y, x = td.dims("y x")
    a = td.input("a", {y: 6, x: 32}, td.float32)
    out = td.compute("out", {y: 6, x: 32}, a[y, x])
    yr = td.dim("yr")
    td.update(out[yr, x], out[yr, x] + out[yr - 1, x], over={yr: (1, 6), x: 32})
    s = (td.schedule(out).vectorize(out, "x").vectorize(out.updates[0], "x")
         .store_nontemporal(out))
    f = td.build(s, target="c")
    av = rng.standard_normal((6, 32)).astype(np.float32)
    np.testing.assert_allclose(f(a=av), np.cumsum(av, axis=0), rtol=1e-5, atol=1e-6)


_OUT = ir.Buffer("out", td.float32, (ir.index_const(32),), "output")
_ALSO = ir.Buffer("also", td.float32, (ir.index_const(32),), "output")
_A = ir.Buffer("a", td.float32, (ir.index_const(32),), "input")


def _at(offset: int) -> ir.Expr:
    return ir.Binary("add", ir.Var("j"), ir.index_const(offset), dtypes.index)


def _load(buf: ir.Buffer, offset: int) -> ir.Expr:
    return ir.Load(buf, (_at(offset),))


def _plus(x: ir.Expr, y: ir.Expr) -> ir.Expr:
    return ir.Binary("add", x, y, td.float32)


def _out_staged_in_c(*stores: tuple[ir.Buffer, int, ir.Expr]) -> bool:
    """Whether the stream pass stages for host C, to stream them, out's stores in `for j in 0 .. 16
    (vectorized): buf[j + offset] = value; ...` (a store per triple), out streamed."""
    body = ir.Block(tuple(ir.Store(b, (_at(k),), v) for b, k, v in stores))
    loop = ir.For("j", ir.index_const(0), ir.index_const(16), ir.ForKind.VECTORIZED, body, 16)
    func = ir.LoweredFunc("f", (_A,), (_OUT, _ALSO), (), loop, nontemporal=frozenset({"out"}))
    staged = any(isinstance(s, ir.StreamedStores) for s in walk_stmts(finish(func).body))
    source = c_render(finish(func))
    assert staged == ("stream_store(&out[" in source)  # the stream pass decides, C writes
    return staged


def test_c_stages_an_output_only_where_each_iteration_sets_its_element_first():
    """Reads of a staged output find the stack buffer's lane: that is its element only
    where the iteration stored it before and accesses no other element of it."""
    set_then_sum = ((_OUT, 0, _load(_A, 0)), (_OUT, 0, _plus(_load(_OUT, 0), _load(_A, 1))))
    assert _out_staged_in_c(*set_then_sum)
    # read before the iteration sets it: the element from before the loop
    assert not _out_staged_in_c((_OUT, 0, _plus(_load(_OUT, 0), _load(_A, 1))))
    # read at another element, or stored at two
    assert not _out_staged_in_c((_OUT, 0, _load(_A, 0)),
                                (_OUT, 0, _plus(_load(_OUT, 0), _load(_OUT, 16))))
    assert not _out_staged_in_c((_OUT, 0, _load(_A, 0)), (_OUT, 16, _load(_A, 1)))
    # read by a statement that is not one of its stores, even after them
    assert not _out_staged_in_c(*set_then_sum, (_ALSO, 0, _load(_OUT, 0)))


def test_lowered_nest_shows_streamed_stores():
    x = td.dim("x")
    a = td.input("a", {x: 64}, td.float32)
    out = td.compute("out", {x: 64}, a[x] * 2)
    s = td.schedule(out).split(out, "x", 16).vectorize(out, "x_i")
    assert "nontemporal out[" in str(td.lower(s.store_nontemporal(out)))
    assert "nontemporal" not in str(td.lower(s))


def test_refused_on_a_stage_that_is_not_an_output_and_on_an_update():
    x = td.dim("x")
    a = td.input("a", {x: 64}, td.float32)
    mid = td.compute("mid", {x: 64}, a[x] * 2)
    out = td.compute("out", {x: 64}, mid[x] + 1)
    td.update(out[x], out[x] * 2, over={x: 64})
    with pytest.raises(td.ScheduleError, match=r"mid is not an output.*outputs: out"):
        td.schedule(out).store_nontemporal(mid)
    with pytest.raises(td.ScheduleError, match=r"out\.u0 is an update.*outputs: out"):
        td.schedule(out).store_nontemporal(out.updates[0])
    with pytest.raises(td.ScheduleError, match="an input of this pipeline"):
        td.schedule(out).store_nontemporal(a)


def test_round_trips_through_json_and_repr():
    x = td.dim("x")
    a = td.input("a", {x: 64}, td.float32)
    out = td.compute("out", {x: 64}, a[x] * 2)
    s = td.schedule(out).vectorize(out, "x").store_nontemporal(out)
    assert td.Schedule.from_json(s.to_json(), out) == s
    assert json.loads(s.to_json())["primitives"][-1] == {"type": "StoreNontemporal", "stage": "out"}
    assert eval(repr(s), {"td": td, "out": out}) == s
    assert s.primitives[-1] == td.StoreNontemporal(out)
