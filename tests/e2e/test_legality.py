"""Updates and dependence-checked schedules: every schedule is either proven legal
(and then matches td.evaluate exactly) or rejected with the dependence it breaks."""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td


def run(sched, backend, outputs, **arrays):
    f = td.build(sched, target=backend)
    got = f(**arrays)
    want = td.evaluate(outputs, **arrays)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)
    return got


def rejected(sched, *words):
    with pytest.raises(td.ScheduleError) as e:
        sched.check()
    for w in words:
        assert w in str(e.value), str(e.value)
    return str(e.value)


# ---------------------------------------------------------------- prefix sum


def prefix_sum(dtype=td.float64):
    r = td.dim("r")
    N = td.size("N")
    x = td.input("x", {r: N}, dtype)
    y = td.compute("y", {r: N}, x[r])
    u = td.update(y[r], y[r - 1] + x[r], over={r: (1, N)})
    return x, y, u


def test_prefix_sum_runs_split_and_unrolled(backend):
    _, y, u = prefix_sum()
    a = np.random.default_rng(0).uniform(-1, 1, 37)
    for s in (td.schedule(y), td.schedule(y).split(u, "r", 4),
              td.schedule(y).split(u, "r", 4).unroll(u, "r_i"),
              td.schedule(y).split(y, "r", 8).parallel(y, "r_o").vectorize(y, "r_i")):
        got = run(s, backend, y, x=a)
        np.testing.assert_allclose(got, np.cumsum(a))


def test_prefix_sum_parallel_or_vector_is_rejected():
    _, y, u = prefix_sum(td.int32)
    msg = rejected(td.schedule(y).parallel(u, "r"), "parallel(y.u0, 'r')", "flow dependence on y",
                   "y[r] written at r=", "read as y[r - 1] at r=")
    assert "cannot run in parallel" in msg
    rejected(td.schedule(y).split(u, "r", 4).vectorize(u, "r_i"), "vectorize(y.u0, 'r_i')",
             "as vector lanes")
    rejected(td.schedule(y).split(u, "r", 4).reorder(u, "r_i r_o"), "loop order of y.u0",
             "flow dependence on y")


def test_rejected_at_build_too():
    _, y, u = prefix_sum()
    with pytest.raises(td.ScheduleError, match="parallel"):
        td.build(td.schedule(y).parallel(u, "r"))


# ---------------------------------------------------------------- accumulating matmul


def acc_matmul():
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: 7, k: 5}, td.int32)
    B = td.input("B", {k: 5, j: 6}, td.int32)
    C = td.compute("C", {i: 7, j: 6}, td.cast(0, td.int32))
    u = td.update(C[i, j], C[i, j] + A[i, k] * B[k, j], over={i: 7, j: 6, k: 5})
    return A, B, C, u


@pytest.mark.parametrize("order", ["i j k", "i k j", "k i j", "k j i", "j k i", "j i k"])
def test_every_k_placement_is_legal(backend, order):
    A, B, C, u = acc_matmul()
    rng = np.random.default_rng(1)
    a, b = rng.integers(-9, 9, (7, 5)).astype(np.int32), rng.integers(-9, 9, (5, 6)).astype(np.int32)
    got = run(td.schedule(C).reorder(u, order), backend, C, A=a, B=b)
    np.testing.assert_array_equal(got, a @ b)


def test_accumulating_matmul_parallel_k_rejected_parallel_i_runs(backend):
    A, B, C, u = acc_matmul()
    rejected(td.schedule(C).parallel(u, "k"), "parallel(C.u0, 'k')", "dependence on C")
    a, b = np.ones((7, 5), np.int32), np.ones((5, 6), np.int32)
    run(td.schedule(C).parallel(u, "i").split(u, "j", 4).vectorize(u, "j_i"), backend, C, A=a, B=b)


# ---------------------------------------------------------------- seidel-2d


def seidel(n=10, steps=3):
    t, i, j = td.dims("t i j")
    A0 = td.input("A0", {i: n, j: n}, td.float64)
    A = td.compute("A", {i: n, j: n}, A0[i, j])
    nb = sum(A[i + di, j + dj] for di in (-1, 0, 1) for dj in (-1, 0, 1))
    u = td.update(A[i, j], nb / 9.0, over={t: steps, i: (1, n - 1), j: (1, n - 1)})
    return A, u


def test_seidel_legal_schedules_match(backend):
    A, u = seidel()
    a0 = np.random.default_rng(2).uniform(0, 1, (10, 10))
    for s in (td.schedule(A).split(u, "j", 3).unroll(u, "j_i"),
              td.schedule(A).split(u, "i", 4),
              td.schedule(A).tile(u, i=4, j=4).reorder(u, "t i_o i_i j_o j_i")):
        run(s, backend, A, A0=a0)


def test_seidel_breaking_interchanges_rejected():
    A, u = seidel()
    rejected(td.schedule(A).reorder(u, "j i"), "loop order of A.u0", "dependence on A")
    rejected(td.schedule(A).reorder(u, "i t"), "loop order of A.u0")
    rejected(td.schedule(A).parallel(u, "i"), "parallel(A.u0, 'i')")


# ---------------------------------------------------------------- time-stepped stencil


def heat(n=12, steps=5):
    t, i = td.dims("t i")
    u0 = td.input("u0", {i: n}, td.float32)
    U = td.compute("U", {t: steps + 1, i: n}, td.where(t == 0, u0[i], 0.0))
    up = td.update(U[t + 1, i], (U[t, i - 1] + U[t, i] + U[t, i + 1]) / 3,
                   over={t: steps, i: (1, n - 1)})
    return U, up


def test_time_stepped_stencil_space_parallel_time_not(backend):
    U, up = heat()
    a = np.random.default_rng(3).uniform(0, 1, 12).astype(np.float32)
    run(td.schedule(U).split(up, "i", 4).parallel(up, "i_o").vectorize(up, "i_i"), backend, U, u0=a)
    rejected(td.schedule(U).parallel(up, "t"), "parallel(U.u0, 't')", "flow dependence on U")
    rejected(td.schedule(U).reorder(up, "i t"), "loop order of U.u0")


# ---------------------------------------------------------------- triangular domains


def test_triangular_syrk_like(backend):
    i, j, k = td.dims("i j k")
    N = td.size("N")
    A = td.input("A", {i: N, k: 4}, td.float64)
    C = td.compute("C", {i: N, j: N}, td.cast(0, td.float64))
    u = td.update(C[i, j], C[i, j] + A[i, k] * A[j, k], over={i: N, j: (0, i + 1), k: 4})
    a = np.random.default_rng(4).uniform(-1, 1, (9, 4))
    want = np.tril(a @ a.T)
    for s in (td.schedule(C), td.schedule(C).reorder(u, "k i j"), td.schedule(C).parallel(u, "i"),
              td.schedule(C).split(u, "j", 2)):
        np.testing.assert_allclose(run(s, backend, C, A=a), want)


def test_triangular_reduction_in_a_stage(backend):
    i, k = td.dims("i k")
    N = td.size("N")
    a = td.input("a", {k: N}, td.int32)
    s = td.compute("s", {i: N}, td.sum(a[k], over={k: (i, N)}))  # suffix sums
    x = np.arange(1, 12, dtype=np.int32)
    got = run(td.schedule(s).split(s, "k", 3), backend, s, a=x)
    np.testing.assert_array_equal(got, np.cumsum(x[::-1])[::-1])


# ---------------------------------------------------------------- dense linear algebra


def lu(n):
    i, j, k = td.dims("i j k")
    A0 = td.input("A0", {i: n, j: n}, td.float64)
    A = td.compute("A", {i: n, j: n}, A0[i, j])
    u = td.update(A[i, j], td.where(k < j, A[i, j] - A[i, k] * A[k, j], A[i, j] / A[j, j]),
                  over={i: n, j: n, k: (0, td.minimum(i, j + 1))})
    return A, u


def lu_reference(a):
    a = a.copy()
    n = len(a)
    for i in range(n):
        for j in range(i):
            for k in range(j):
                a[i, j] -= a[i, k] * a[k, j]
            a[i, j] /= a[j, j]
        for j in range(i, n):
            for k in range(i):
                a[i, j] -= a[i, k] * a[k, j]
    return a


def spd(n, seed):
    m = np.random.default_rng(seed).uniform(-1, 1, (n, n))
    return m @ m.T + n * np.eye(n)


def test_lu(backend):
    A, u = lu(8)
    a0 = spd(8, 5)
    got = run(td.schedule(A).split(u, "j", 4), backend, A, A0=a0)
    np.testing.assert_allclose(got, lu_reference(a0), rtol=1e-10)
    # the left-looking order (j outside i) keeps every dependence: legal, same result
    got = run(td.schedule(A).reorder(u, "j i"), backend, A, A0=a0)
    np.testing.assert_allclose(got, lu_reference(a0), rtol=1e-10)
    rejected(td.schedule(A).reorder(u, "k i"), "loop order of A.u0")
    rejected(td.schedule(A).parallel(u, "i"), "parallel(A.u0, 'i')", "flow dependence on A")


def test_cholesky(backend):
    n = 7
    i, j, k = td.dims("i j k")
    A0 = td.input("A0", {i: n, j: n}, td.float64)
    A = td.compute("A", {i: n, j: n}, A0[i, j])
    value = td.where(k < j, A[i, j] - A[i, k] * A[j, k],
                     td.where(j < i, A[i, j] / A[j, j], td.sqrt(A[i, i])))
    u = td.update(A[i, j], value, over={i: n, j: (0, i + 1), k: (0, j + 1)})
    a0 = spd(n, 6)
    got = run(td.schedule(A), backend, A, A0=a0)
    np.testing.assert_allclose(np.tril(got), np.linalg.cholesky(a0), rtol=1e-10)
    rejected(td.schedule(A).reorder(u, "k i"), "loop order of A.u0")


def test_floyd_warshall_int32(backend):
    n = 9
    k, i, j = td.dims("k i j")
    P0 = td.input("P0", {i: n, j: n}, td.int32)
    P = td.compute("P", {i: n, j: n}, P0[i, j])
    u = td.update(P[i, j], td.minimum(P[i, j], P[i, k] + P[k, j]), over={k: n, i: n, j: n})
    p0 = np.random.default_rng(7).integers(1, 50, (n, n)).astype(np.int32)
    np.fill_diagonal(p0, 0)
    want = p0.copy()
    for kk in range(n):
        want = np.minimum(want, want[:, kk:kk + 1] + want[kk:kk + 1, :])
    got = run(td.schedule(P).split(u, "j", 4).unroll(u, "j_i"), backend, P, P0=p0)
    np.testing.assert_array_equal(got, want)
    rejected(td.schedule(P).reorder(u, "i k"), "loop order of P.u0")
    rejected(td.schedule(P).parallel(u, "k"), "parallel(P.u0, 'k')")
    # row k and column k are read while being rewritten in the same sweep: which lanes see
    # the new values depends on the data, so the analysis (memory-based) refuses both
    rejected(td.schedule(P).split(u, "j", 4).vectorize(u, "j_i"), "vectorize(P.u0, 'j_i')",
             "flow dependence on P")
    rejected(td.schedule(P).parallel(u, "i"), "parallel(P.u0, 'i')")


def test_trisolv(backend):
    n = 9
    i, j = td.dims("i j")
    L = td.input("L", {i: n, j: n}, td.float64)
    b = td.input("b", {i: n}, td.float64)
    x = td.compute("x", {i: n}, b[i])
    u = td.update(x[i], td.where(j < i, x[i] - L[i, j] * x[j], x[i] / L[i, i]),
                  over={i: n, j: (0, i + 1)})
    rng = np.random.default_rng(8)
    lo = np.tril(rng.uniform(-1, 1, (n, n))) + n * np.eye(n)
    bb = rng.uniform(-1, 1, n)
    got = run(td.schedule(x), backend, x, L=lo, b=bb)
    np.testing.assert_allclose(got, np.linalg.solve(lo, bb), rtol=1e-10)
    rejected(td.schedule(x).parallel(u, "i"), "parallel(x.u0, 'i')", "dependence on x")


# ---------------------------------------------------------------- messages and round trips


def test_update_schedules_round_trip():
    _, y, u = prefix_sum()
    s = td.schedule(y).split(u, "r", 4).unroll(u, "r_i")
    assert td.Schedule.from_json(s.to_json(), y) == s
    assert eval(repr(s), {"td": td, "y": y}) == s
    assert s.loops(u) == ["r_o", "r_i"]
    assert td.schedule(y).split("y.u0", "r", 2).loops(u) == ["r_o", "r_i"]


def test_stage_with_updates_cannot_move():
    x, y, u = prefix_sum()
    r = y.dims[0]
    out = td.compute("out", {r: y.shape[0]}, y[r] * 2)
    with pytest.raises(td.ScheduleError, match="has updates"):
        td.schedule(out).compute_inline(y)
    with pytest.raises(td.ScheduleError, match="has updates"):
        td.schedule(out).compute_at(y, out, "r")


# ---------------------------------------------------------------- the checker's property

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from strategies import _loop_ops  # noqa: E402


def _update_pipelines(kind: str, n: int):
    if kind == "prefix":
        _, y, u = prefix_sum(td.int32)
        return y, [u], {"x": np.arange(n, dtype=np.int32) - 3}
    if kind == "seidel":
        A, u = seidel(n, 2)
        return A, [u], {"A0": np.random.default_rng(n).integers(-5, 5, (n, n)).astype(np.float64)}
    if kind == "heat":
        U, up = heat(n, 3)
        return U, [up], {"u0": np.random.default_rng(n).uniform(0, 1, n).astype(np.float32)}
    if kind == "matmul":
        A, B, C, u = acc_matmul()
        rng = np.random.default_rng(n)
        return C, [u], {"A": rng.integers(-9, 9, (7, 5)).astype(np.int32),
                        "B": rng.integers(-9, 9, (5, 6)).astype(np.int32)}
    # two updates over a triangle, the second reading the first's results
    i, j = td.dims("i j")
    a = td.input("a", {i: n, j: n}, td.int32)
    c = td.compute("c", {i: n, j: n}, a[i, j])
    u1 = td.update(c[i, j], c[i, j] + c[i - 1, j], over={i: (1, n), j: (0, i + 1)})
    u2 = td.update(c[i, j], c[i, j] * 2 - c[i, j - 1], over={i: n, j: (1, n)})
    return c, [u1, u2], {"a": np.random.default_rng(n).integers(-9, 9, (n, n)).astype(np.int32)}


@settings(max_examples=max(80, settings.default.max_examples),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_schedule_is_rejected_or_exact(backend, data):
    kind = data.draw(st.sampled_from(["prefix", "seidel", "heat", "matmul", "triangle"]))
    n = data.draw(st.sampled_from([3, 5, 8]))
    out, updates, arrays = _update_pipelines(kind, n)
    s = td.schedule(out)
    for x in [out, *updates]:
        s = _loop_ops(data.draw, s, x)
    try:
        f = td.build(s, target=backend)
    except td.ScheduleError as e:
        assert any(m in str(e) for m in ("dependence on", "reduction loop",
                                           "reassociate=True needs every iteration")), str(e)
        return
    got, want = f(**arrays), td.evaluate(out, **arrays)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=repr(s))
    else:
        np.testing.assert_array_equal(got, want, err_msg=repr(s))


# ---------------------------------------------------------------- reassociation opt-in


def row_reduce(op, dtype, n=70):
    i, k = td.dims("i k")
    a = td.input("a", {i: 5, k: n}, dtype)
    return td.compute("s", {i: 5}, op(a[i, k], over=k))


@pytest.mark.parametrize("how", ["vector_inner", "vector_outer", "parallel_outer"])
def test_reassociated_sum_matches_within_rounding(backend, how):
    s_ = row_reduce(td.sum, td.float32)
    base = td.schedule(s_).split(s_, "k", 8)
    sched = {"vector_inner": base.vectorize(s_, "k_i", reassociate=True),
             "vector_outer": base.reorder(s_, "k_i k_o").vectorize(s_, "k_i", reassociate=True),
             "parallel_outer": base.parallel(s_, "k_o", reassociate=True)}[how]
    assert td.Schedule.from_json(sched.to_json(), s_) == sched
    a = np.random.default_rng(9).uniform(-1, 1, (5, 70)).astype(np.float32)
    got = td.build(sched, target=backend)(a=a)
    np.testing.assert_allclose(got, a.sum(1, dtype=np.float64), rtol=1e-5, atol=1e-5)


def test_reassociated_integer_max_is_exact(backend):
    s_ = row_reduce(td.max, td.int16, 37)
    sched = td.schedule(s_).split(s_, "k", 8).vectorize(s_, "k_i", reassociate=True)
    a = np.random.default_rng(10).integers(-3000, 3000, (5, 37)).astype(np.int16)
    np.testing.assert_array_equal(td.build(sched, target=backend)(a=a), a.max(1))


def test_reassociate_mistakes():
    s_ = row_reduce(td.sum, td.float32)
    with pytest.raises(td.ScheduleError, match="reassociate=True to accumulate"):
        td.schedule(s_).split(s_, "k", 8).vectorize(s_, "k_i")
    with pytest.raises(td.ScheduleError, match="is for reduction loops"):
        td.schedule(s_).parallel(s_, "i", reassociate=True)
    with pytest.raises(td.ScheduleError, match="constant extent"):
        i, k = td.dims("i k")
        N = td.size("N")
        a = td.input("a", {i: 3, k: N}, td.float32)
        t = td.compute("t", {i: 3}, td.sum(a[i, k], over=k))
        td.schedule(t).parallel(t, "k", reassociate=True)
    inside = td.schedule(s_).split(s_, "k", 8).reorder(s_, "k_o i k_i").parallel(
        s_, "k_o", reassociate=True)
    with pytest.raises(td.ScheduleError, match="put the loops over s's own dims outside k_o"):
        td.lower(inside)
    # the loop is marked when lowering converts isl's AST, and the reassociate pass
    # rewrites it (here: refuses it) as the first pass
    trace = td.lower(td.schedule(s_).split(s_, "k", 8).vectorize(s_, "k_i", reassociate=True),
                     trace=True)
    assert "# vectorized, reassociate add into s" in str(trace["convert"])
    after = str(trace["reassociate"])
    assert "reassociate" not in after and "s_k_i_part" in after
