"""Int16 products summed in pairs (lower.vectors.paired_products).

Two vectorized loops `acc[i] += int32(x0) * int32(b[j])` and `acc[i] +=
int32(x1) * int32(b[j + 1])`, j advancing by 2 per lane, are what an int8 or
int16 matrix product with its right operand packed in k pairs ([k / 2, j, 2])
unrolls to. On a host with AVX-512BW both backends do each 16 lanes of the pair
as one `vpmaddwd` (`vpdpwssd` with VNNI); the results must equal numpy's int32
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
from tdsl.backend_llvm.codegen import host_has
from tdsl.lower import finish, ir, lower_schedule
from tdsl.lower.vectors import paired_products

# the C helper's paths: VNNI, AVX-512BW without it, and the loops themselves
PATHS = {"native": DEFAULT_FLAGS, "no-vnni": (*DEFAULT_FLAGS, "-mno-avx512vnni"),
         "no-avx512": (*DEFAULT_FLAGS, "-mno-avx512f")}
SCALARS = {"int8": td.int8, "uint8": td.uint8, "int16": td.int16}


def pair_matmul(m: int, k: int, n: int, xtype=td.int8):
    """acc[i, j] = sum over k of int32(A[i, k]) * int32(B[k, j]) with B packed in k
    pairs, Bp[ko, j, t] = int16(B[2 ko + t, j])."""
    i, j, kk, ko, t = td.dims("i j k ko t")
    A = td.input("A", {i: m, kk: k}, xtype)
    B = td.input("B", {kk: k, j: n}, td.int16)
    Bp = td.compute("Bp", {ko: k // 2, j: n, t: 2}, td.cast(B[2 * ko + t, j], td.int16))
    prod = td.cast(A[i, 2 * ko + t], td.int32) * td.cast(Bp[ko, j, t], td.int32)
    acc = td.compute("acc", {i: m, j: n}, td.sum(prod, over={ko: k // 2, t: 2}))
    return td.compute("out", {i: m, j: n}, acc[i, j] + 1)


def tiled(out, ti: int, tj: int, v: int, order: str = "ko i j_u t j_v") -> td.Schedule:
    """A ti x tj register tile of int32 sums over the k pairs, v lanes a vector."""
    return (td.schedule(out).tile(out, i=ti, j=tj).reorder(out, "i_o j_o i_i j_i")
            .vectorize(out, "j_i").compute_at("Bp", out, "j_o").vectorize("Bp", "j")
            .compute_at("acc", out, "j_o").split("acc", "j", v, names=("j_u", "j_v"))
            .reorder("acc", order).unroll("acc", "i").unroll("acc", "j_u").unroll("acc", "t")
            .vectorize("acc", "j_v"))


def operands(m: int, k: int, n: int, xtype, seed: int = 0) -> dict[str, np.ndarray]:
    """Values over each type's whole range, the extremes included (their products
    and sums wrap in int32)."""
    rng = np.random.default_rng(seed)
    lo, hi = np.iinfo(xtype.np).min, np.iinfo(xtype.np).max
    a = rng.integers(lo, hi + 1, (m, k)).astype(xtype.np)
    b = rng.integers(-32768, 32768, (k, n)).astype(np.int16)
    a.flat[: min(4, a.size)] = lo
    b.flat[: min(4, b.size)] = -32768
    return {"A": a, "B": b}


def want(out, arrays) -> np.ndarray:
    return td.evaluate(out, **arrays)


def run_c(schedule, flags, arrays):
    module = build_c(finish(lower_schedule(schedule, "k", late=False)), flags=flags)
    out_buf = module.func.outputs[0]
    out = np.empty(tuple(int(e.value) for e in out_buf.shape), out_buf.dtype.np)
    assert module.call([*arrays.values(), out], []) == 0
    return module.source, out


def test_the_reference_wraps():
    """The sums of these operands leave int32's range, so the comparisons below
    cover the wrapping (a kernel summing in int64 would differ)."""
    out = pair_matmul(3, 64, 16, td.int16)
    arrays = operands(3, 64, 16, td.int16)
    exact = arrays["A"].astype(np.int64) @ arrays["B"].astype(np.int64) + 1
    assert (want(out, arrays) != exact).any()
    assert (want(out, arrays) == exact.astype(np.int32)).all()


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("xtype", sorted(SCALARS))
@pytest.mark.parametrize("v", [16, 32])
def test_pairs_are_one_call_on_every_c_path(path, xtype, v):
    out = pair_matmul(6, 48, 64, SCALARS[xtype])
    arrays = operands(6, 48, 64, SCALARS[xtype])
    source, got = run_c(tiled(out, 2, 32, v), PATHS[path], arrays)
    assert source.count("pair_madd_i16(&") == 2 * 32 // v  # per row, per vector of the tile
    np.testing.assert_array_equal(got, want(out, arrays))


@pytest.mark.parametrize("v", [16, 32, 64])
@pytest.mark.parametrize("xtype", sorted(SCALARS))
def test_llvm_pairs_are_pmaddwd_where_the_host_has_it(xtype, v):
    out = pair_matmul(6, 48, 64, SCALARS[xtype])
    arrays = operands(6, 48, 64, SCALARS[xtype], seed=1)
    f = td.build(tiled(out, 2, 64, v), target="llvm")
    assert ("llvm.x86.avx512.pmaddw.d.512" in f.source) == host_has("avx512bw")
    np.testing.assert_array_equal(f(**arrays), want(out, arrays))


@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize("v,order", [(8, "ko i j_u t j_v"), (16, "ko i j_u j_v t"),
                                     (16, "ko t i j_u j_v")])
def test_loops_that_are_not_pairs_stay_loops(target, v, order):
    """8 lanes (not a multiple of 16), the pair inside the vector loop, the two
    products of a pair apart: no paired call, the same sums."""
    out = pair_matmul(4, 32, 32)
    arrays = operands(4, 32, 32, td.int8, seed=2)
    f = td.build(tiled(out, 2, 32, v, order), target=target)
    assert "pair_madd_i16(&" not in f.source and "pmaddw" not in f.source
    np.testing.assert_array_equal(f(**arrays), want(out, arrays))


@settings(max_examples=15, deadline=None)
@given(m=st.integers(1, 9), k2=st.integers(1, 20), n=st.integers(1, 70),
       ti=st.sampled_from([1, 2, 3]), tj=st.sampled_from([16, 32, 48, 64]),
       v=st.sampled_from([16, 32]),
       xtype=st.sampled_from(sorted(SCALARS)), target=st.sampled_from(["c", "llvm"]),
       seed=st.integers(0, 1000))
def test_paired_sums_match_numpy(m, k2, n, ti, tj, v, xtype, target, seed):
    """Shapes with tails in both dims of the tile: the tail's loops are not whole
    vectors of 16 and stay loops, the rest are pairs."""
    out = pair_matmul(m, 2 * k2, n, SCALARS[xtype])
    arrays = operands(m, 2 * k2, n, SCALARS[xtype], seed)
    f = td.build(tiled(out, ti, tj, min(v, tj)), target=target)
    np.testing.assert_array_equal(f(**arrays), want(out, arrays))


# ---------------------------------------------------------------- the matcher


def _buf(name: str, dtype, kind="temp") -> ir.Buffer:
    return ir.Buffer(name, dtype, (ir.index_const(4096),), kind)


ACC, B, A = _buf("acc", dt.int32), _buf("b", dt.int16), _buf("a", dt.int8, "input")
V = ir.Var("v")


def _idx(*terms) -> ir.Expr:
    e: ir.Expr = ir.index_const(terms[0])
    for scale in terms[1:]:
        e = ir.Binary("add", e, ir.Binary("mul", ir.index_const(scale), V, dt.index), dt.index)
    return e


def _step(x: ir.Expr, j: ir.Expr, i: ir.Expr | None = None, lanes: int = 16,
          acc: ir.Buffer = ACC) -> ir.For:
    i = i if i is not None else _idx(0, 1)
    old = ir.Load(acc, (i,))
    prod = ir.Binary("mul", ir.Cast(x, dt.int32), ir.Cast(ir.Load(B, (j,)), dt.int32), dt.int32)
    store = ir.Store(acc, (i,), ir.Binary("add", old, prod, dt.int32))
    return ir.For("v", ir.index_const(0), ir.index_const(lanes), ir.ForKind.VECTORIZED, store)


X0 = ir.Load(A, (ir.index_const(0),))
X1 = ir.Load(A, (ir.index_const(1),))


def test_the_matcher_takes_a_pair():
    p = paired_products(_step(X0, _idx(6, 2)), _step(X1, _idx(7, 2)))
    assert p is not None and p.lanes == 16 and p.acc == ACC and p.b == B
    assert ir.int_value(p.b_first) == 6 and ir.int_value(p.acc_first) == 0


@pytest.mark.parametrize("why,second", [
    ("b read at j + 2", _step(X1, _idx(8, 2))),
    ("b read at j - 1", _step(X1, _idx(5, 2))),
    ("another acc element", _step(X1, _idx(7, 2), i=_idx(16, 1))),
    ("x1 reads acc", _step(ir.Cast(ir.Load(ACC, (ir.index_const(3),)), dt.int16), _idx(7, 2))),
    ("x1 varies by lane", _step(ir.Load(A, (V,)), _idx(7, 2))),
    ("another lane count", _step(X1, _idx(7, 2), lanes=32)),
])
def test_the_matcher_refuses(why, second):
    assert paired_products(_step(X0, _idx(6, 2)), second) is None, why


def test_the_matcher_refuses_strides_and_widths():
    assert paired_products(_step(X0, _idx(6, 4)), _step(X1, _idx(7, 4))) is None  # j by 4
    assert paired_products(_step(X0, _idx(6, 2), i=_idx(0, 2)),
                           _step(X1, _idx(7, 2), i=_idx(0, 2))) is None  # i by 2
    assert paired_products(_step(X0, _idx(6, 2), lanes=8),
                           _step(X1, _idx(7, 2), lanes=8)) is None  # half a vector
    wide = ir.Load(_buf("w", dt.int32, "input"), (ir.index_const(0),))
    assert paired_products(_step(wide, _idx(6, 2)), _step(X1, _idx(7, 2))) is None  # x int32
