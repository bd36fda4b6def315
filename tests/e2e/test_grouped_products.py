"""Small-integer products summed in groups (the group pass, lower.passes.group).

Consecutive vectorized loops `acc[i] += int32(x_t) * int32(b[j + t])`, t < n and
j advancing by n per lane, are what an int8 or int16 matrix product with its
right operand packed in groups of k ([k / n, j, n]) unrolls to. Both backends do
each 16 lanes of a group as one instruction where the host has it: int16 pairs
as `vpmaddwd` (AVX-512BW; `vpdpwssd` with VNNI), quads of an unsigned and a
signed byte as VNNI's `vpdpbusd`. The results must equal numpy's int32
arithmetic exactly, wrapping included, on every code path.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tdsl as td
from tdsl import dtypes as dt
from tdsl.backend_c import DEFAULT_FLAGS
from tdsl.backend_c import build as build_c
from tdsl.backend_llvm.host import host_has
from tdsl.lower import finish, ir, lower_schedule
from tdsl.lower.passes.group import grouped_products

# the C helpers' paths: VNNI, AVX-512BW without it (pairs only), and the loops themselves
PATHS = {"native": DEFAULT_FLAGS, "no-vnni": (*DEFAULT_FLAGS, "-mno-avx512vnni"),
         "no-avx512": (*DEFAULT_FLAGS, "-mno-avx512f")}
# (group size, x's type, b's type) -> the C helper and the LLVM intrinsic the group becomes
KINDS = {(2, "int8", "int16"): ("pair_madd_i16", "pmaddw.d.512", "avx512bw"),
         (2, "uint8", "int16"): ("pair_madd_i16", "pmaddw.d.512", "avx512bw"),
         (2, "int16", "int16"): ("pair_madd_i16", "pmaddw.d.512", "avx512bw"),
         (4, "uint8", "int8"): ("quad_madd_u8i8", "vpdpbusd.512", "avx512vnni"),
         (4, "int8", "uint8"): ("quad_madd_i8u8", "vpdpbusd.512", "avx512vnni")}
T = {"int8": td.int8, "uint8": td.uint8, "int16": td.int16}


def grouped_matmul(m: int, k: int, n: int, g: int = 2, xtype: str = "int8",
                   btype: str = "int16", a_by_columns: bool = False, b_first: bool = False):
    """out[i, j] = 1 + sum over k of int32(A[i, k]) * int32(B[k, j]) with B packed in
    groups of g values of k, Bg[ko, j, t] = B[g ko + t, j]. With `a_by_columns`, A is
    given as its transpose (a group's x values then lie apart in memory); with
    `b_first`, the product is written int32(B) * int32(A)."""
    i, j, kk, ko, t = td.dims("i j k ko t")
    if a_by_columns:
        At = td.input("A", {kk: k, i: m}, T[xtype])
        x = At[g * ko + t, i]
    else:
        A = td.input("A", {i: m, kk: k}, T[xtype])
        x = A[i, g * ko + t]
    B = td.input("B", {kk: k, j: n}, T[btype])
    Bg = td.compute("Bg", {ko: k // g, j: n, t: g}, B[g * ko + t, j])
    prod = td.cast(x, td.int32) * td.cast(Bg[ko, j, t], td.int32)
    if b_first:
        prod = td.cast(Bg[ko, j, t], td.int32) * td.cast(x, td.int32)
    acc = td.compute("acc", {i: m, j: n}, td.sum(prod, over={ko: k // g, t: g}))
    return td.compute("out", {i: m, j: n}, acc[i, j] + 1)


def tiled(out, ti: int, tj: int, v: int, order: str = "ko i j_u t j_v") -> td.Schedule:
    """A ti x tj register tile of int32 sums over the k groups, v lanes a vector."""
    return (td.schedule(out).tile(out, i=ti, j=tj).reorder(out, "i_o j_o i_i j_i")
            .vectorize(out, "j_i").compute_at("Bg", out, "j_o").vectorize("Bg", "j")
            .compute_at("acc", out, "j_o").split("acc", "j", v, names=("j_u", "j_v"))
            .reorder("acc", order).unroll("acc", "i").unroll("acc", "j_u").unroll("acc", "t")
            .vectorize("acc", "j_v"))


def operands(m: int, k: int, n: int, xtype: str, btype: str, seed: int = 0):
    """Values over each type's whole range, the extremes included (their products
    and sums wrap in int32)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape, ty in (("A", (m, k), xtype), ("B", (k, n), btype)):
        info = np.iinfo(T[ty].np)
        a = rng.integers(info.min, info.max + 1, shape).astype(T[ty].np)
        a.flat[: min(4, a.size)] = info.min
        a.flat[-min(4, a.size):] = info.max
        out[name] = a
    return out


def run_c(schedule, flags, arrays):
    module = build_c(finish(lower_schedule(schedule, "k", late=False)), flags=flags)
    out_buf = module.func.outputs[0]
    out = np.empty(tuple(int(e.value) for e in out_buf.shape), out_buf.dtype.np)
    assert module.call([*arrays.values(), out], []) == 0
    return module.source, out


def test_the_reference_wraps():
    """The sums of these operands leave int32's range, so the comparisons below
    cover the wrapping (a kernel summing in int64 would differ)."""
    out = grouped_matmul(3, 64, 16, 2, "int16")
    arrays = operands(3, 64, 16, "int16", "int16")
    exact = arrays["A"].astype(np.int64) @ arrays["B"].astype(np.int64) + 1
    want = td.evaluate(out, **arrays)
    assert (want != exact).any() and (want == exact.astype(np.int32)).all()


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("kind", sorted(KINDS), ids=lambda k: f"{k[0]}-{k[1]}-{k[2]}")
@pytest.mark.parametrize("v", [16, 32])
@pytest.mark.parametrize("a_by_columns", [False, True], ids=["A", "At"])
def test_groups_are_one_call_on_every_c_path(path, kind, v, a_by_columns):
    """A quad's x values are one 32-bit load when they lie together (A), four bytes
    put together otherwise (A given transposed)."""
    g, xtype, btype = kind
    out = grouped_matmul(6, 48, 64, g, xtype, btype, a_by_columns)
    arrays = operands(6, 48, 64, xtype, btype)
    if a_by_columns:
        arrays["A"] = np.ascontiguousarray(arrays["A"].T)
    source, got = run_c(tiled(out, 2, 32, v), PATHS[path], arrays)
    assert source.count(f"{KINDS[kind][0]}(&") == 2 * 32 // v  # per row, per vector of the tile
    assert (source.count("quad_bytes(&") > 0) == (g == 4 and not a_by_columns)
    np.testing.assert_array_equal(got, td.evaluate(out, **arrays))


@pytest.mark.parametrize("v", [16, 32, 64])
@pytest.mark.parametrize("kind", sorted(KINDS), ids=lambda k: f"{k[0]}-{k[1]}-{k[2]}")
def test_llvm_groups_are_one_instruction_where_the_host_has_it(kind, v):
    g, xtype, btype = kind
    out = grouped_matmul(6, 48, 64, g, xtype, btype)
    arrays = operands(6, 48, 64, xtype, btype, seed=1)
    f = td.build(tiled(out, 2, 64, v), target="llvm")
    _, intrinsic, feature = KINDS[kind]
    assert (intrinsic in f.source) == host_has(feature)
    np.testing.assert_array_equal(f(**arrays), td.evaluate(out, **arrays))


@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize("kind", sorted(KINDS), ids=lambda k: f"{k[0]}-{k[1]}-{k[2]}")
def test_the_packed_operand_written_first(target, kind):
    """int32(B) * int32(A): both operands are narrow loads, and x is the one the
    same in every lane (taken the other way round, the group was missed)."""
    g, xtype, btype = kind
    out = grouped_matmul(4, 32, 32, g, xtype, btype, b_first=True)
    arrays = operands(4, 32, 32, xtype, btype, seed=4)
    f = td.build(tiled(out, 2, 32, 16), target=target)
    helper, intrinsic, feature = KINDS[kind]
    if target == "c":
        assert f.source.count(f"{helper}(&") == 2 * 2
    else:
        assert (intrinsic in f.source) == host_has(feature)
    np.testing.assert_array_equal(f(**arrays), td.evaluate(out, **arrays))


def edge_matmul(m: int, k: int, n, g: int, xtype: str, btype: str) -> td.Schedule:
    """acc[i, j] = sum over k of int32(A[i, k]) * int32(Bg[k / g, j, k % g]) with n
    columns (a number or td.size("N")), tiled on its own loops: 32 columns a tile in
    two vectors of 16 lanes, the group's t loop unrolled between them. The rows are
    inside the tiles, so lanes past a row's end would land in the next row, which
    is done by then."""
    i, j, kk, ko, t = td.dims("i j k ko t")
    A = td.input("A", {i: m, kk: k}, T[xtype])
    Bg = td.input("Bg", {ko: k // g, j: n, t: g}, T[btype])
    acc = td.compute("acc", {i: m, j: n}, td.sum(
        td.cast(A[i, g * ko + t], td.int32) * td.cast(Bg[ko, j, t], td.int32),
        over={ko: k // g, t: g}))
    return (td.schedule(acc).split(acc, "j", 32).split(acc, "j_i", 16)
            .reorder(acc, "j_o", "i", "ko", "j_i_o", "t", "j_i_i")
            .unroll(acc, "j_i_o").unroll(acc, "t").vectorize(acc, "j_i_i"))


@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize("kind", sorted(KINDS), ids=lambda k: f"{k[0]}-{k[1]}-{k[2]}")
@pytest.mark.parametrize("n", [40, 17, 64, "N"])
def test_tiles_cut_short_at_the_edge(target, kind, n):
    """Columns that are not a whole number of tiles (40 = 32 + 8, 17 = 16 + 1, or a
    size known only at the call): each vector loop runs over min(16, what is left)
    lanes, so a group is taken when all 16 lanes are there and the loops do the
    rest."""
    g, xtype, btype = kind
    width = 40 if n == "N" else n
    s = edge_matmul(3, 16, td.size("N") if n == "N" else n, g, xtype, btype)
    arrays = operands(3, 16, width, xtype, btype, seed=5)
    b = arrays.pop("B")
    arrays["Bg"] = np.ascontiguousarray(b.reshape(16 // g, g, width).transpose(0, 2, 1))
    f = td.build(s, target=target)
    helper, intrinsic, feature = KINDS[kind]
    if target == "c":
        assert f.source.count(f"{helper}(&") >= (1 if n == 17 else 2)
    else:
        assert (intrinsic in f.source) == host_has(feature)
    np.testing.assert_array_equal(f(**arrays), td.evaluate(s.outputs, **arrays))


@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize("g", [2, 4])
@pytest.mark.parametrize("v,order", [(8, "ko i j_u t j_v"), (16, "ko i j_u j_v t"),
                                     (16, "ko t i j_u j_v")])
def test_loops_that_are_not_groups_stay_loops(target, g, v, order):
    """8 lanes (not a multiple of 16), the group inside the vector loop, the products
    of a group apart: no call, no intrinsic, the same sums."""
    kind = (2, "int8", "int16") if g == 2 else (4, "uint8", "int8")
    out = grouped_matmul(4, 32, 32, *kind)
    arrays = operands(4, 32, 32, kind[1], kind[2], seed=2)
    f = td.build(tiled(out, 2, 32, v, order), target=target)
    assert "madd_" not in f.source and "pmaddw" not in f.source and "vpdp" not in f.source
    np.testing.assert_array_equal(f(**arrays), td.evaluate(out, **arrays))


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_bytes_of_one_signedness_are_not_quads(target):
    """vpdpbusd multiplies an unsigned byte by a signed one: int8 x int8 quads stay loops."""
    out = grouped_matmul(4, 32, 32, 4, "int8", "int8")
    arrays = operands(4, 32, 32, "int8", "int8", seed=3)
    f = td.build(tiled(out, 2, 32, 16), target=target)
    assert "madd_" not in f.source and "vpdp" not in f.source
    np.testing.assert_array_equal(f(**arrays), td.evaluate(out, **arrays))


@settings(max_examples=20, deadline=None)
@given(m=st.integers(1, 9), kg=st.integers(1, 12), n=st.integers(1, 70),
       ti=st.sampled_from([1, 2, 3]), tj=st.sampled_from([16, 32, 48, 64]),
       v=st.sampled_from([16, 32]), kind=st.sampled_from(sorted(KINDS)),
       target=st.sampled_from(["c", "llvm"]), seed=st.integers(0, 1000))
def test_grouped_sums_match_numpy(m, kg, n, ti, tj, v, kind, target, seed):
    """Shapes with tails in both dims of the tile: the tail's loops are not whole
    vectors of 16 and stay loops, the rest are groups."""
    g, xtype, btype = kind
    out = grouped_matmul(m, g * kg, n, g, xtype, btype)
    arrays = operands(m, g * kg, n, xtype, btype, seed)
    f = td.build(tiled(out, ti, tj, min(v, tj)), target=target)
    np.testing.assert_array_equal(f(**arrays), td.evaluate(out, **arrays))


# ---------------------------------------------------------------- the matcher


def _buf(name: str, dtype, kind="temp") -> ir.Buffer:
    return ir.Buffer(name, dtype, (ir.index_const(4096),), kind)


ACC, B16, B8 = _buf("acc", dt.int32), _buf("b", dt.int16), _buf("b", dt.int8)
A8, U8 = _buf("a", dt.int8, "input"), _buf("a", dt.uint8, "input")
V = ir.Var("v")


def _idx(*terms) -> ir.Expr:
    e: ir.Expr = ir.index_const(terms[0])
    for scale in terms[1:]:
        e = ir.Binary("add", e, ir.Binary("mul", ir.index_const(scale), V, dt.index), dt.index)
    return e


def _step(x: ir.Expr, j: ir.Expr, i: ir.Expr | None = None, lanes: int = 16,
          b: ir.Buffer = B16) -> ir.For:
    i = i if i is not None else _idx(0, 1)
    old = ir.Load(ACC, (i,))
    prod = ir.Binary("mul", ir.Cast(x, dt.int32), ir.Cast(ir.Load(b, (j,)), dt.int32), dt.int32)
    store = ir.Store(ACC, (i,), ir.Binary("add", old, prod, dt.int32))
    return ir.For("v", ir.index_const(0), ir.index_const(lanes), ir.ForKind.VECTORIZED, store)


def _x(t: int, buf: ir.Buffer = A8) -> ir.Expr:
    return ir.Load(buf, (ir.index_const(t),))


X0, X1 = _x(0), _x(1)


def test_the_matcher_takes_a_pair_and_a_quad():
    p = grouped_products((_step(X0, _idx(6, 2)), _step(X1, _idx(7, 2))), 0)
    assert p is not None and p.size == 2 and p.lanes == 16 and p.acc == ACC and p.b == B16
    assert ir.int_value(p.b_first) == 6 and ir.int_value(p.acc_first) == 0
    quad = tuple(_step(_x(t, U8), _idx(8 + t, 4), b=B8) for t in range(4))
    q = grouped_products((quad[0], *quad), 1)  # from the second statement on
    assert q is not None and q.size == 4 and ir.int_value(q.b_first) == 8
    assert grouped_products(quad[:3], 0) is None  # three of a quad


@pytest.mark.parametrize("why,second", [
    ("b read at j + 2", _step(X1, _idx(8, 2))),
    ("b read at j - 1", _step(X1, _idx(5, 2))),
    ("another acc element", _step(X1, _idx(7, 2), i=_idx(16, 1))),
    ("x1 reads acc", _step(ir.Cast(ir.Load(ACC, (ir.index_const(3),)), dt.int16), _idx(7, 2))),
    ("x1 varies by lane", _step(ir.Load(A8, (V,)), _idx(7, 2))),
    ("another lane count", _step(X1, _idx(7, 2), lanes=32)),
])
def test_the_matcher_refuses(why, second):
    assert grouped_products((_step(X0, _idx(6, 2)), second), 0) is None, why


def test_the_matcher_refuses_strides_widths_and_types():
    def pair(a, b):
        return grouped_products((a, b), 0)

    assert pair(_step(X0, _idx(6, 4)), _step(X1, _idx(7, 4))) is None  # j by 4
    assert pair(_step(X0, _idx(6, 2), i=_idx(0, 2)), _step(X1, _idx(7, 2), i=_idx(0, 2))) is None
    assert pair(_step(X0, _idx(6, 2), lanes=8), _step(X1, _idx(7, 2), lanes=8)) is None
    assert pair(_step(X0, _idx(6, 2), lanes=64), _step(X1, _idx(7, 2), lanes=64)) is not None
    assert pair(_step(X0, _idx(6, 2), lanes=128), _step(X1, _idx(7, 2), lanes=128)) is None
    wide = ir.Load(_buf("w", dt.int32, "input"), (ir.index_const(0),))
    assert pair(_step(wide, _idx(6, 2)), _step(X1, _idx(7, 2))) is None  # x int32
    assert pair(_step(X0, _idx(6, 2), b=B8), _step(X1, _idx(7, 2), b=B8)) is None  # byte pairs
    signed = tuple(_step(_x(t), _idx(8 + t, 4), b=B8) for t in range(4))
    assert grouped_products(signed, 0) is None  # int8 x int8 quads
