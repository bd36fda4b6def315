"""Where temp buffers live: the allocate pass decides it once (`ir.Storage`), the
verifier checks it, both backends only read it and unwind alike when the heap fails."""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td
from tdsl import dtypes as dt
from tdsl.backend_c import build as build_c
from tdsl.backend_c import render
from tdsl.backend_llvm import build as build_llvm
from tdsl.backend_llvm import emit_module
from tdsl.lower import abi, ir, lower_schedule
from tdsl.lower.passes.verify import VerifyError, verify
from tdsl.lower.rewrite import walk_stmts

BUILD = {"c": build_c, "llvm": build_llvm}


def _two_stages(extent, dtype=td.float32):
    """t = 2 * a at root, out = t + 1: one temp of `extent` elements."""
    x = td.dim("x")
    a = td.input("a", {x: extent}, dtype)
    t = td.compute("t", {x: extent}, a[x] * 2)
    return td.schedule(td.compute("out", {x: extent}, t[x] + 1))


def _storage(func: ir.LoweredFunc) -> dict[str, ir.Storage | None]:
    return {s.buffer.name: s.storage for s in walk_stmts(func.body) if isinstance(s, ir.Allocate)}


@pytest.mark.parametrize(("extent", "dtype", "where"), [
    (16, td.float32, ir.Storage.STACK),
    (ir.STACK_LIMIT // 8, td.float64, ir.Storage.STACK),  # exactly the limit
    (ir.STACK_LIMIT // 8 + 1, td.float64, ir.Storage.HEAP),  # a constant too large
    (td.size("N"), td.float32, ir.Storage.HEAP),  # symbolic
])
def test_the_allocate_pass_places_every_temp(extent, dtype, where):
    sched = _two_stages(extent, dtype)
    assert _storage(td.lower(sched)) == {"t": where}
    trace = td.lower(sched, trace=True)
    assert _storage(trace["convert"]) == {}  # allocations come with the pass
    assert _storage(trace["allocate"]) == {"t": where}
    assert _storage(lower_schedule(sched, workspace=True)) == {"t": ir.Storage.WORKSPACE}


def test_a_reassociated_reduction_part_is_placed_too():
    i, k = td.dims("i k")
    a = td.input("a", {i: 4, k: 64}, td.float32)
    s = td.compute("s", {i: 4}, td.sum(a[i, k], over=k))
    sched = td.schedule(s).split(s, "k", 8).vectorize(s, "k_i", reassociate=True)
    assert _storage(td.lower(sched)) == {"s_k_i_part": ir.Storage.STACK}


def _small_temp(storage: ir.Storage | None) -> ir.LoweredFunc:
    """out[i] = 3 * a[i] through a 4-element temp with the given storage."""
    n, i = ir.Var("n"), ir.Var("i")
    f64, zero = dt.float64, ir.index_const(0)
    a = ir.Buffer("a", f64, (n,), "input")
    out = ir.Buffer("out", f64, (n,), "output")
    t = ir.Buffer("t", f64, (ir.index_const(4),), "temp")
    fill = ir.Store(t, (zero,), ir.Binary("mul", ir.Load(a, (i,)), ir.Const(3.0, f64), f64))
    body = ir.Allocate(t, ir.Block((fill, ir.Store(out, (i,), ir.Load(t, (zero,))))), storage)
    loop = ir.For("i", zero, n, ir.ForKind.SERIAL, body)
    name = f"small_{storage.value if storage else 'unplaced'}"
    return ir.LoweredFunc(name, (a,), (out,), (n,), loop)


@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize("extent", [(1, 1), (0, 1), (0, 3), (2, 3)])
def test_a_temp_read_by_an_inlined_reduction_is_allocated_before_it(target, extent):
    """A value-and-index reduction inlined into s3 reads s2 (computed per y of s3) in
    the values of lets; over an empty range s2 has no producer code, and its Allocate
    went inside those lets (VerifyError: used outside its Allocate; fuzz C seed 3601
    case 210)."""
    y, x, k = td.dims("y x k")
    s2 = td.compute("s2", {x: 3}, td.cast(x, td.float32) * 2 - 1)
    s3 = td.compute("s3", {y: 2}, td.reduce(
        lambda acc: (td.maximum(acc[0], s2[k]), td.where(s2[k] > acc[0], k, acc[1])),
        init=(-np.inf, 7), over={k: extent}, dtype=(td.float32, td.int64))[1])
    for s in (td.schedule([s3]).compute_at("s2", "s3", "y"),
              td.schedule([s3]).split("s3", "y", 8).compute_at("s2", "s3", "y_o")):
        got = td.build(s, target=target)()
        np.testing.assert_array_equal(got, td.evaluate(s3))
        assert got.tolist() == [extent[1] - 1 if extent[1] > extent[0] else 7] * 2


@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize("storage", [ir.Storage.STACK, ir.Storage.HEAP])
def test_backends_follow_the_recorded_storage(target, storage):
    """A temp that would fit on the stack, put on the heap: both backends obey."""
    func = verify(_small_temp(storage))
    heap = storage is ir.Storage.HEAP
    assert ("alloc_temp(" in render(func)) == heap
    assert ('@"tdsl_aligned_alloc"' in emit_module(func)) == heap
    a = np.linspace(-1, 1, 9)
    out = np.zeros_like(a)
    assert BUILD[target](func).call([a, out], [a.size]) == abi.OK
    np.testing.assert_array_equal(out, a * 3.0)


@pytest.mark.parametrize("storage", [ir.Storage.WORKSPACE, None])
def test_backends_refuse_storage_they_do_not_have(storage):
    func = _small_temp(storage)
    with pytest.raises(ValueError, match=r"\bt\b"):
        render(func)
    with pytest.raises(ValueError, match=r"\bt\b"):
        emit_module(func)


def test_the_verifier_checks_storage():
    n = ir.Var("n")
    body = _small_temp(ir.Storage.STACK).body
    assert isinstance(body, ir.For) and isinstance(body.body, ir.Allocate)

    def with_temp(shape, storage):
        t = ir.Buffer("t", dt.float64, shape, "temp")
        alloc = ir.Allocate(t, body.body.body, storage)
        func = _small_temp(ir.Storage.STACK)
        new = ir.For(body.var, body.start, body.end, body.kind, alloc)
        return ir.LoweredFunc(func.name, func.inputs, func.outputs, func.sizes, new)

    # t's accesses index element 0 only, so any shape of rank 1 is in range
    verify(with_temp((n,), ir.Storage.HEAP))
    verify(with_temp((ir.index_const(ir.STACK_LIMIT // 8),), ir.Storage.STACK))
    with pytest.raises(VerifyError, match="t is on the stack"):
        verify(with_temp((n,), ir.Storage.STACK))
    with pytest.raises(VerifyError, match="t is on the stack"):
        verify(with_temp((ir.index_const(ir.STACK_LIMIT // 8 + 1),), ir.Storage.STACK))
    with pytest.raises(VerifyError, match="t has no storage"):
        verify(with_temp((n,), None))
    verify(with_temp((n,), None), placed=False)  # before the allocate pass


def test_may_fail_is_a_heap_allocation():
    assert abi.may_fail(_small_temp(ir.Storage.HEAP).body)
    assert not abi.may_fail(_small_temp(ir.Storage.STACK).body)
    assert not abi.may_fail(_small_temp(ir.Storage.WORKSPACE).body)


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_out_of_memory_is_the_status_on_both_backends(target):
    func = td.lower(_two_stages(td.size("N")))
    # the heap allocation comes first, so the kernel touches no array before it fails
    assert isinstance(func.body, ir.Allocate) and func.body.storage is ir.Storage.HEAP
    module = BUILD[target](func)
    a, out = np.ones(4, np.float32), np.zeros(4, np.float32)
    assert module.run([a, out], [2**62]) == abi.OUT_OF_MEMORY  # 2**64 bytes
    assert module.run([a, out], [4]) == abi.OK
    np.testing.assert_array_equal(out, a * 2 + 1)


@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize("n", [2**61 - 1, 2**61 - 16, 2**61 - 17])
def test_byte_counts_just_below_2_63_are_refused_not_wrapped(target, n):
    """A heap temp's byte count rounded up to the 64-byte alignment: a count near
    2^63 must stay huge (and be refused), not wrap around to a small allocation."""
    module = BUILD[target](td.lower(_two_stages(td.size("N"))))
    a, out = np.ones(4, np.float32), np.zeros(4, np.float32)
    assert module.run([a, out], [n]) == abi.OUT_OF_MEMORY
    assert module.run([a, out], [3]) == abi.OK
    np.testing.assert_array_equal(out[:3], a[:3] * 2 + 1)


def test_a_temp_read_in_a_branch_condition_above_its_store_loop_is_allocated_around_it():
    """`if t[0] > 0: for y: out[y] = t[0]` with t stored per y: the condition reads t
    too, so its allocation goes around the branch, not inside it."""
    from tdsl.lower.passes.allocate import place_allocations

    f32, zero = dt.float32, ir.index_const(0)
    out = ir.Buffer("out", f32, (ir.index_const(4),), "output")
    t = ir.Buffer("t", f32, (ir.index_const(1),), "temp")
    loop = ir.For("y", zero, ir.index_const(4), ir.ForKind.SERIAL,
                  ir.Store(out, (ir.Var("y"),), ir.Load(t, (zero,))))
    cond = ir.Compare("gt", ir.Load(t, (zero,)), ir.Const(0.0, f32))
    func = ir.LoweredFunc("branch", (), (out,), (), ir.If(cond, loop))
    placed = place_allocations(func, [(t, ("y",), False)])
    verify(placed)
    assert isinstance(placed.body, ir.Allocate) and placed.body.buffer.name == "t"


def test_register_sized_temps_stay_locals_in_a_workspace_lowering():
    """Portable C keeps a temp of a few elements (a reduction's accumulator) in locals,
    which its compiler holds in registers; larger ones take workspace slots."""
    r, c = td.dims("r c")
    X = td.input("X", {r: 6, c: 40}, td.float32)
    mx = td.compute("mx", {r: 6}, td.max(X[r, c], over=c))
    e = td.compute("e", {r: 6, c: 40}, td.exp(X[r, c] - mx[r]))
    out = td.compute("out", {r: 6, c: 40}, e[r, c] / mx[r])
    sched = td.schedule(out).compute_at(mx, out, r).compute_at(e, out, r)
    placed = _storage(lower_schedule(sched, workspace=True))
    assert placed == {"mx": ir.Storage.STACK, "e": ir.Storage.WORKSPACE}
    nine = ir.Buffer("t", dt.int32, (ir.index_const(9),), "temp")
    assert not ir.register_sized(nine)  # one element past REGISTER_ELEMENTS
    assert ir.register_sized(ir.Buffer("t", dt.int32, (ir.index_const(8),), "temp"))
    assert not ir.register_sized(ir.Buffer("t", dt.float64, (ir.index_const(5),), "temp"))


def test_workspace_slots_are_packed_by_element_size():
    """Slots come widest element first, so each is aligned to its own element size with
    no padding: the total is the sum of the buffers' bytes, the alignment the widest
    element's (not a host's 64 bytes)."""
    from tdsl.backend_c.workspace import workspace_layout

    x = td.dim("x")
    a = td.input("a", {x: 13}, td.int8)
    t8 = td.compute("t8", {x: 13}, a[x] + 1)
    t64 = td.compute("t64", {x: 13}, td.cast(t8[x], td.float64) * 2)
    t16 = td.compute("t16", {x: 13}, td.cast(t64[x], td.int16) - 3)
    out = td.compute("out", {x: 13}, t16[x] + td.cast(t8[x], td.int16))
    layout = workspace_layout(lower_schedule(td.schedule(out), workspace=True))
    assert [s.buffer.name for s in layout.slots] == ["t64", "t16", "t8"]
    assert [int(s.offset.value) for s in layout.slots] == [0, 13 * 8, 13 * 8 + 13 * 2]
    assert layout.constant == 13 * (8 + 2 + 1) and layout.align == 8
