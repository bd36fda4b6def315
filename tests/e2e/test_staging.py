"""cache_write, cache_read and rfactor: schedules that add stages, against numpy on both backends.

Also the block extents of compute_at stages: a producer computed inside a
consumer's tile runs loops as long as the block it computes, so its loops can
be unrolled and vectorized even when the pipeline's sizes are symbolic.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tdsl as td


def matmul(m=None, k=37, n=48):
    i, j, kk = td.dims("i j k")
    M = td.size("M") if m is None else m
    A = td.input("A", {i: M, kk: k}, td.float32)
    B = td.input("B", {kk: k, j: n}, td.float32)
    C = td.compute("C", {i: M, j: n}, td.sum(A[i, kk] * B[kk, j], over=kk))
    return A, B, C


def matmul_args(m, k=37, n=48, seed=0):
    rng = np.random.default_rng(seed)
    return {"A": rng.uniform(-1, 1, (m, k)).astype(np.float32),
            "B": rng.uniform(-1, 1, (k, n)).astype(np.float32)}


def register_tile(C, ti=4, tj=16):
    """The local accumulator pattern: C's tile accumulated in Cl, copied out once."""
    return (td.schedule(C).cache_write(C, "Cl")
            .tile(C, i=ti, j=tj).vectorize(C, "j_i")
            .compute_at("Cl", C, "j_o")
            .reorder("Cl", "k i j").unroll("Cl", "i").vectorize("Cl", "j"))


def roundtrips(s: td.Schedule) -> None:
    assert td.Schedule.from_json(s.to_json(), s.outputs) == s
    ns = {"td": td, **{t.name: t for t in s.pipeline.tensors}}
    assert eval(repr(s), ns) == s


@pytest.mark.parametrize("m", [1, 7, 16, 30])
def test_cache_write_register_tile(backend, m):
    A, B, C = matmul()
    s = register_tile(C)
    roundtrips(s)
    args = matmul_args(m)
    got = td.build(s, target=backend)(**args)
    np.testing.assert_allclose(got, args["A"] @ args["B"], rtol=1e-5, atol=1e-5)


def test_cache_write_block_loops_have_the_block_extent():
    A, B, C = matmul()
    text = str(td.lower(register_tile(C)))
    # i of Cl is unrolled into 4 copies (the tile), not one per row of C: once for full
    # tiles (no test inside the k loop), once with guards for the edge tile
    assert "allocate Cl[4, 16]" in text
    assert "Cl[4, j" not in text
    full, edge = text.split("if min(M, 4 * i_o + 4) - 4 * i_o == 4:")[1].split("else:", 1)
    assert full.count("Cl[3, j - 16 * j_o] = Cl[3,") == 1 and " if " not in full
    assert edge.count("Cl[3, j - 16 * j_o] = Cl[3,") == 1 and "if 4 * i_o + 3 < min(M" in edge


def test_cache_read_packs_the_block(backend):
    A, B, C = matmul()
    s = register_tile(C).cache_read(B, ["Cl"], "Bp").compute_at("Bp", C, "j_o").vectorize("Bp", "j")
    roundtrips(s)
    text = str(td.lower(s))
    assert "allocate Bp[37, 16]" in text and "Bp[k, j - 16 * j_o] = B[k, j]" in text
    args = matmul_args(9)
    got = td.build(s, target=backend)(**args)
    np.testing.assert_allclose(got, args["A"] @ args["B"], rtol=1e-5, atol=1e-5)


def test_cache_read_of_a_stage_for_one_consumer_through_a_boundary_view(backend):
    x, y = td.dims("x y")
    W = td.size("W")
    inp = td.input("inp", {y: 6, x: W}, td.int32)
    sq = td.compute("sq", {y: 6, x: W}, inp[y, x] * inp[y, x])
    left = td.compute("left", {y: 6, x: W}, td.clamp(sq)[y, x - 1] + sq[y, x])
    right = td.compute("right", {y: 6, x: W}, td.pad(sq, 7)[y, x + 1] - inp[y, x])
    s = (td.schedule((left, right)).cache_read(sq, [left], "sq_c").split(left, "x", 4)
         .compute_at("sq_c", left, "x_o"))
    roundtrips(s)
    assert [t.name for t in s.state.pipeline.consumers(s.state.pipeline.by_name["sq_c"])] == ["left"]
    a = np.arange(6 * 11, dtype=np.int32).reshape(6, 11) - 20
    got = td.build(s, target=backend)(inp=a)
    want = td.evaluate((left, right), inp=a)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("op,ref", [(td.sum, np.sum), (td.max, np.max), (td.min, np.min)])
@pytest.mark.parametrize("k", [5, 16, 100])
def test_rfactor_vectorized_partials(backend, op, ref, k):
    i, r = td.dims("i r")
    N = td.size("N")
    X = td.input("X", {i: N, r: k}, td.int32)
    R = td.compute("R", {i: N}, op(X[i, r], over=r))
    s = (td.schedule(R).rfactor(R, "r", 8).compute_at("R_rf", R, "i")
         .reorder("R_rf", "i r_o r_i").vectorize("R_rf", "r_i"))
    roundtrips(s)
    x = np.random.default_rng(1).integers(-1000, 1000, (5, k)).astype(np.int32)
    np.testing.assert_array_equal(td.build(s, target=backend)(X=x), ref(x, axis=1))


def test_rfactor_triangular_and_offset_bounds(backend):
    i, k = td.dims("i k")
    X = td.input("X", {i: 13, k: 40}, td.int64)
    # row i sums X[i, k] for k in [i, 3 * i + 1): bounds affine in i, extents not multiples of 4
    T = td.compute("T", {i: 13}, td.sum(X[i, k], over={k: (i, 3 * i + 1)}))
    s = td.schedule(T).rfactor(T, "k", 4, names=("ko", "kv"), name="Tp").parallel(T, "i")
    roundtrips(s)
    x = np.random.default_rng(2).integers(-50, 50, (13, 40))
    want = np.array([x[n, n:3 * n + 1].sum() for n in range(13)])
    np.testing.assert_array_equal(td.evaluate(T, X=x), want)
    np.testing.assert_array_equal(td.build(s, target=backend)(X=x), want)


@given(m=st.integers(1, 20), k=st.integers(1, 40), n=st.integers(1, 40),
       ti=st.integers(1, 6), tj=st.sampled_from([1, 4, 8, 16]), f=st.integers(2, 9),
       pack=st.booleans())
def test_staging_schedules_match_numpy(m, k, n, ti, tj, f, pack):
    """cache_write + cache_read + rfactor on matmul, awkward shapes: C == LLVM == numpy."""
    A, B, C = matmul(None, k, n)
    s = td.schedule(C).rfactor(C, "k", f).cache_write(C, "Cl").tile(C, i=ti, j=tj)
    s = s.compute_at("Cl", C, "j_o").vectorize("Cl", "j")
    s = s.compute_at("C_rf", "Cl", "i").reorder("C_rf", "i j k_o k_i").vectorize("C_rf", "k_i")
    if pack:
        s = s.cache_read(A, ["C_rf"], "Ap").compute_at("Ap", C, "i_o")
    roundtrips(s)
    args = matmul_args(m, k, n, seed=m * 1000 + k)
    want = args["A"].astype(np.float64) @ args["B"]
    for target in ("c", "llvm"):
        np.testing.assert_allclose(td.build(s, target=target)(**args), want, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- mistakes


def test_cache_write_after_scheduling_the_stage():
    A, B, C = matmul()
    with pytest.raises(td.ScheduleError, match=r"cache_write\(C.*already scheduled.*first"):
        td.schedule(C).split(C, "i", 4).cache_write(C)


def test_cache_write_name_taken():
    A, B, C = matmul()
    with pytest.raises(td.ScheduleError, match="already has a tensor named 'A'"):
        td.schedule(C).cache_write(C, "A")
    with pytest.raises(td.ScheduleError, match="stage name 'for' is not valid"):
        td.schedule(C).cache_write(C, "for")
    with pytest.raises(td.ScheduleError, match="'_tmp' is reserved"):
        td.schedule(C).cache_read(B, name="_tmp")


def test_cache_write_of_a_stage_with_updates():
    r = td.dim("r")
    x = td.input("x", {r: 8}, td.float32)
    y = td.compute("y", {r: 8}, x[r])
    td.update(y[r], y[r - 1] + x[r], over={r: (1, 8)})
    with pytest.raises(td.ScheduleError, match=r"y has updates \(y.u0\)"):
        td.schedule(y).cache_write(y)


def test_cache_read_consumer_that_does_not_read():
    i = td.dim("i")
    a = td.input("a", {i: 8}, td.float32)
    b = td.input("b", {i: 8}, td.float32)
    p = td.compute("p", {i: 8}, a[i] * 2)
    q = td.compute("q", {i: 8}, p[i] + b[i])
    with pytest.raises(td.ScheduleError, match="p does not read b; its readers are: q"):
        td.schedule(q).cache_read(b, [p])


def test_rfactor_of_a_dim_that_is_not_reduced():
    A, B, C = matmul()
    with pytest.raises(td.ScheduleError, match="'j' is not a reduction dim of C; its reduction dims are: k"):
        td.schedule(C).rfactor(C, "j", 4)
    with pytest.raises(td.ScheduleError, match="factor must be an int of at least 2"):
        td.schedule(C).rfactor(C, "k", 1)


def test_new_stage_unknown_name():
    A, B, C = matmul()
    with pytest.raises(td.ScheduleError, match="no stage named 'Cx'.*stages are: Cl, C"):
        td.schedule(C).cache_write(C, "Cl").compute_at("Cx", C, "i")


def test_vectorizing_a_block_loop_of_symbolic_extent_is_refused_at_build():
    i = td.dim("i")
    N = td.size("N")
    a = td.input("a", {i: N}, td.float32)
    p = td.compute("p", {i: N}, a[i] + 1)
    q = td.compute("q", {i: N}, p[i] * 2)
    s = td.schedule(q).split(q, "i", 8).compute_at(p, q, "i_o").vectorize(p, "i")
    td.build(s)  # the block is at most 8 long: fine
    s = td.schedule(q).compute_at(p, q, "i").vectorize(p, "i")
    td.build(s)
    # q's every j reads all of p: the block is the whole of p, N long
    j = td.dim("j")
    r = td.compute("r", {j: 4}, td.sum(p[i], over=i))
    s = td.schedule(r).compute_at(p, r, "j").unroll(p, "i")
    with pytest.raises(td.ScheduleError, match=r"unroll\(p, 'i'\): the loop's trip count is not bounded"):
        td.build(s)


def test_layout_of_an_intermediate(backend):
    c, y, x, k = td.dims("c y x k")
    img = td.input("img", {c: 3, y: 9, x: 10}, td.float32)
    w = td.input("w", {k: 5, c: 3}, td.float32)
    P = td.compute("P", {c: 3, y: 9, x: 10}, img[c, y, x] * 2 + 1)
    out = td.compute("out", {k: 5, y: 9, x: 10}, td.sum(w[k, c] * P[c, y, x], over=c))
    s = td.schedule(out).layout(P, "y x c").split(out, "y", 4).compute_at(P, out, "y_o")
    roundtrips(s)
    assert "allocate P[4, 10, 3]" in str(td.lower(s))
    rng = np.random.default_rng(3)
    args = {"img": rng.uniform(-1, 1, (3, 9, 10)).astype(np.float32),
            "w": rng.uniform(-1, 1, (5, 3)).astype(np.float32)}
    got = td.build(s, target=backend)(**args)
    np.testing.assert_allclose(got, td.evaluate(out, **args), rtol=1e-5, atol=1e-6)
    s = td.schedule(out).layout(P, "x c y")  # at root: the whole buffer transposed
    np.testing.assert_allclose(td.build(s, target=backend)(**args), td.evaluate(out, **args),
                               rtol=1e-5, atol=1e-6)


def test_layout_mistakes():
    A, B, C = matmul()
    with pytest.raises(td.ScheduleError, match="C is an output; layout applies to intermediate"):
        td.schedule(C).layout(C, "j i")
    with pytest.raises(td.ScheduleError, match="list each dim of Cl once.*its dims are: i j"):
        td.schedule(C).cache_write(C, "Cl").layout("Cl", "j k")


def test_records_build_the_same_schedule_as_the_methods():
    A, B, C = matmul(8, 8, 8)
    chained = (td.schedule(C).rfactor(C, "k", 4).cache_write(C, "Cl")
               .cache_read(B, ["C_rf"], "Bp").layout("Bp", "j k"))
    records = td.schedule(C, [td.RFactor(C, "k", 4), td.CacheWrite(C, "Cl"),
                              td.CacheRead(B, ("C_rf",), "Bp"), td.Layout("Bp", ("j", "k"))])
    assert records == chained
    roundtrips(records)
