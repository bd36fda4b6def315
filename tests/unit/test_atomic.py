"""Atomic updates (`Schedule.atomic`): scatter updates whose iterations may hit one
element run in parallel, exact against numpy on both backends and in portable C."""

from __future__ import annotations

import numpy as np
import pytest
from test_emit_c import ASAN_ENV, SANITIZE, Emitted, build_and_run, driver_source, tool

import tdsl as td
from tdsl.lower import ir
from tdsl.lower.rewrite import walk_stmts

RNG = np.random.default_rng(7)
H, W, BINS = 37, 53, 16


def histogram(dtype=td.int32, bins=BINS):
    y, x, b = td.dims("y x b")
    img = td.input("img", {y: H, x: W}, td.uint8)
    hist = td.compute("hist", {b: bins}, td.cast(0 * b, dtype))
    v = td.cast(img[y, x], td.int32) % bins
    u = td.update(hist[v], hist[v] + 1, over={y: H, x: W})
    return img, hist, u


def image(bins=BINS):
    return RNG.integers(0, 256, (H, W)).astype(np.uint8), bins


def atomic_stores(sched) -> list[ir.Store]:
    return [s for s in walk_stmts(td.lower(sched).body) if isinstance(s, ir.Store) and s.atomic]


def test_parallel_histogram_needs_atomic():
    _, hist, u = histogram()
    with pytest.raises(td.ScheduleError, match="cannot run in parallel"):
        td.schedule(hist).parallel(u, "y").check()


@pytest.mark.parametrize("loop", ["y", "x"])
def test_parallel_histogram_is_exact(backend, threads, loop):
    threads(2)
    _, hist, u = histogram()
    a, bins = image()
    sched = td.schedule(hist).atomic(u).parallel(u, loop)
    assert len(atomic_stores(sched)) == 1
    want = np.bincount(a.ravel() % bins, minlength=bins).astype(np.int32)
    np.testing.assert_array_equal(td.evaluate(hist, img=a), want)
    k = td.build(sched, target=backend)
    for _ in range(5):  # races, if there were any, would show on some run
        np.testing.assert_array_equal(k(img=a), want)


def test_atomic_allows_any_loop_order(backend):
    _, hist, u = histogram()
    a, bins = image()
    with pytest.raises(td.ScheduleError, match="reverses"):
        td.schedule(hist).reorder(u, "x", "y").check()
    sched = td.schedule(hist).atomic(u).reorder(u, "x", "y").parallel(u, "x")
    want = np.bincount(a.ravel() % bins, minlength=bins).astype(np.int32)
    np.testing.assert_array_equal(td.build(sched, target=backend)(img=a), want)


def test_atomic_updates_do_not_run_as_vector_lanes():
    _, hist, u = histogram()
    with pytest.raises(td.ScheduleError, match="as vector lanes"):
        td.schedule(hist).atomic(u).split(u, "x", 8).vectorize(u, "x_i").check()


@pytest.mark.parametrize("dtype", [td.uint8, td.int8, td.int16, td.int64])
def test_narrow_counts_wrap_as_numpy(backend, threads, dtype):
    """300 hits of one bin wrap in uint8 as numpy's add does, atomically as serially."""
    threads(2)
    _, hist, u = histogram(dtype, bins=2)
    a = np.full((H, W), 4, np.uint8)  # every pixel in bin 0
    a[::3] = 5
    want = np.zeros(2, dtype.np)
    np.add.at(want, a.ravel() % 2, dtype.np.type(1))
    sched = td.schedule(hist).atomic(u).parallel(u, "y")
    np.testing.assert_array_equal(td.build(sched, target=backend)(img=a), want)


@pytest.mark.parametrize("op", ["add", "sub", "max", "min", "mul", "or", "xor"])
def test_scatter_operations(backend, threads, op):
    """Each operation atomic and parallel gives numpy's ufunc.at (floats: max and min
    exactly, NaN propagating; sums up to rounding)."""
    threads(2)
    n, m = 97, 7
    i, j = td.dims("i j")
    floaty = op in ("add", "sub", "max", "min", "mul")
    dtype = td.float32 if floaty else td.int32
    idx = td.input("idx", {i: n}, td.int32)
    w = td.input("w", {i: n}, dtype)
    start = {"mul": 1, "min": 0.5}.get(op, 0)
    out = td.compute("out", {j: m}, td.cast(0 * j, dtype) + start)
    t = out[idx[i]]
    value = {"add": lambda: t + w[i], "sub": lambda: t - w[i],
             "max": lambda: td.maximum(t, w[i]), "min": lambda: td.minimum(w[i], t),
             "mul": lambda: t * w[i], "or": lambda: t | w[i], "xor": lambda: w[i] ^ t}[op]
    u = td.update(t, value(), over={i: n})
    ix = RNG.integers(0, m, n).astype(np.int32)
    if floaty:
        wv = (RNG.standard_normal(n) * (0.2 if op == "mul" else 1) + (1 if op == "mul" else 0)
              ).astype(np.float32)
        if op in ("max", "min"):
            wv[5] = np.nan
    else:
        wv = RNG.integers(-1000, 1000, n).astype(np.int32)
    want = np.full(m, start, dtype.np)
    ufunc = {"add": np.add, "sub": np.subtract, "max": np.maximum, "min": np.minimum,
             "mul": np.multiply, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    with np.errstate(invalid="ignore"):
        ufunc.at(want, ix, wv)
    sched = td.schedule(out).atomic(u).parallel(u, "i")
    got = td.build(sched, target=backend)(idx=ix, w=wv)
    if floaty and op not in ("max", "min"):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, want)


def test_atomic_is_refused_where_updates_do_not_commute():
    i, j = td.dims("i j")
    idx = td.input("idx", {i: 8}, td.int32)
    w = td.input("w", {i: 8}, td.float64)
    out = td.compute("out", {j: 4}, td.cast(0 * j, td.float32))
    t = out[idx[i]]
    cases = [
        td.update(t, t / 2 + w[i], over={i: 8}),  # not `t op e`
        td.update(t, t + out[0], over={i: 8}),  # e reads out
        td.update(t, t - w[i], over={i: 8}),  # float64 e: a cast around the sum
    ]
    for u in cases:
        with pytest.raises(td.ScheduleError, match="atomic update reads its target only as"):
            td.schedule(out).atomic(u)
    with pytest.raises(td.ScheduleError, match="applies to an update"):
        td.schedule(out).atomic(out)
    e_minus_t = td.update(t, td.cast(w[i], td.float32) - t, over={i: 8})
    with pytest.raises(td.ScheduleError, match="atomic update reads its target only as"):
        td.schedule(out).atomic(e_minus_t)


def test_atomic_round_trips_through_json():
    _, hist, u = histogram()
    sched = td.schedule(hist).atomic(u).parallel(u, "y")
    again = td.Schedule.from_json(sched.to_json(), hist)
    assert again == sched
    assert sched.primitives[0].describe() == "atomic(hist.u0)"
    with pytest.raises(td.ScheduleError, match=r"is an update.*atomic\(hist.u0\).*rfactor"):
        td.schedule(hist).parallel(u, "y", reassociate=True)


def test_serial_atomic_update_is_a_plain_read_modify_write():
    """Outside a parallel loop no other thread runs: the C has no atomic builtins."""
    _, hist, u = histogram()
    src = td.build(td.schedule(hist).atomic(u), target="c").source
    assert "__atomic" not in src
    src = td.build(td.schedule(hist).atomic(u).parallel(u, "y"), target="c").source
    assert "__atomic_fetch_add" in src


def test_float_max_uses_a_compare_and_swap_loop():
    i, j = td.dims("i j")
    idx = td.input("idx", {i: 8}, td.int32)
    w = td.input("w", {i: 8}, td.float32)
    out = td.compute("out", {j: 4}, td.cast(0 * j, td.float32))
    u = td.update(out[idx[i]], td.maximum(out[idx[i]], w[i]), over={i: 8})
    sched = td.schedule(out).atomic(u).parallel(u, "i")
    assert "__atomic_compare_exchange" in td.build(sched, target="c").source
    assert "cmpxchg" in td.build(sched, target="llvm").source


def test_portable_c_runs_atomic_updates_serially(tmp_path):
    _, hist, u = histogram()
    a, bins = image()
    sched = td.schedule(hist).atomic(u).parallel(u, "y")
    func = td.lower(sched, "histogram")
    td.emit_c(sched, "histogram", tmp_path)
    assert "__atomic" not in (tmp_path / "histogram.c").read_text()
    want = np.bincount(a.ravel() % bins, minlength=bins).astype(np.int32)
    e = Emitted("histogram", tmp_path, func, {"img": a}, {"hist": want}, {}, sched)
    (tmp_path / "inputs.bin").write_bytes(a.tobytes())
    (tmp_path / "driver.c").write_text(driver_source(e))
    build_and_run(e, "asan", tool("gcc"), SANITIZE, env=ASAN_ENV)


# ---------------------------------------------------------------- rfactor of updates


@pytest.mark.parametrize("factor", [2, 3, 4])
def test_rfactor_histogram_in_parallel(backend, threads, factor):
    """Private partial histograms per share of the rows (37 rows: the last share is
    short for 2 and 4), computed in parallel, then merged."""
    threads(2)
    _, hist, u = histogram()
    a, bins = image()
    sched = td.schedule(hist).rfactor(u, "y", factor).parallel("hist_rf.u0", "y_i")
    assert sched.loops("hist_rf.u0") == ["y_i", "y_o", "x"]
    assert sched.loops(u) == ["b", "y_i"]  # the merge took the update's place
    want = np.bincount(a.ravel() % bins, minlength=bins).astype(np.int32)
    k = td.build(sched, target=backend)
    for _ in range(3):
        np.testing.assert_array_equal(k(img=a), want)
    assert len(hist.updates) == 1  # the algorithm is as written


@pytest.mark.parametrize("op", ["add", "sub", "max", "min", "and", "xor"])
def test_rfactor_of_each_operation(backend, threads, op):
    threads(2)
    n, m = 61, 5
    i, j = td.dims("i j")
    idx = td.input("idx", {i: n}, td.int32)
    w = td.input("w", {i: n}, td.int16)
    out = td.compute("out", {j: m}, td.cast(j * 7 - 3, td.int16))
    t = out[idx[i]]
    value = {"add": lambda: t + w[i], "sub": lambda: t - w[i], "max": lambda: td.maximum(w[i], t),
             "min": lambda: td.minimum(t, w[i]), "and": lambda: t & w[i],
             "xor": lambda: w[i] ^ t}[op]
    u = td.update(t, value(), over={i: n})
    ix = RNG.integers(0, m, n).astype(np.int32)
    wv = RNG.integers(-30000, 30000, n).astype(np.int16)
    want = (np.arange(m) * 7 - 3).astype(np.int16)
    ufunc = {"add": np.add, "sub": np.subtract, "max": np.maximum, "min": np.minimum,
             "and": np.bitwise_and, "xor": np.bitwise_xor}[op]
    ufunc.at(want, ix, wv)
    np.testing.assert_array_equal(td.evaluate(out, idx=ix, w=wv), want)
    sched = td.schedule(out).rfactor(u, "i", 4, name="part").parallel("part.u0", "i_i")
    np.testing.assert_array_equal(td.build(sched, target=backend)(idx=ix, w=wv), want)


def test_rfactor_of_an_update_with_dependent_bounds(backend):
    """A triangular update domain: the split loop's bounds use an earlier loop, and a
    later loop's bounds use the split one."""
    n = 11
    i, j, r, c = td.dims("i j r c")
    A = td.input("A", {i: n, j: n}, td.float64)
    col = td.compute("col", {j: n}, td.cast(0 * j, td.float64))
    u = td.update(col[c], col[c] + A[r, c], over={r: (2, n), c: (0, r)})
    a = RNG.standard_normal((n, n))
    want = np.array([sum(a[rr, cc] for rr in range(2, n) if cc < rr) for cc in range(n)])
    for loop in ("r", "c"):
        sched = td.schedule(col).rfactor(u, loop, 3)
        np.testing.assert_allclose(td.build(sched, target=backend)(A=a), want, rtol=1e-12)


def test_rfactor_of_an_update_is_checked():
    _, hist, u = histogram()
    with pytest.raises(td.ScheduleError, match="is not a loop of hist.u0; its loops are: y x"):
        td.schedule(hist).rfactor(u, "b", 2)
    with pytest.raises(td.ScheduleError, match="already scheduled; apply rfactor first"):
        td.schedule(hist).split(u, "x", 4).rfactor(u, "y", 2)
    with pytest.raises(td.ScheduleError, match="already scheduled; apply rfactor first"):
        td.schedule(hist).atomic(u).rfactor(u, "y", 2)
    with pytest.raises(td.ScheduleError, match="loop name 'b' is taken"):
        td.schedule(hist).rfactor(u, "y", 2, names=("y_o", "b"))
    with pytest.raises(td.ScheduleError, match="at least 2"):
        td.schedule(hist).rfactor(u, "y", 1)
    i, j = td.dims("i j")
    idx = td.input("idx", {i: 8}, td.int32)
    out = td.compute("out", {j: 4}, td.cast(0 * j, td.int32))
    v = td.update(out[idx[i]], out[idx[i]] * 2 + 1, over={i: 8})
    with pytest.raises(td.ScheduleError, match="rfactor of an update needs"):
        td.schedule(out).rfactor(v, "i", 2)


def test_rfactor_of_an_update_round_trips_through_json(backend):
    _, hist, u = histogram()
    a, bins = image()
    sched = td.schedule(hist).rfactor(u, "y", 2).parallel("hist_rf.u0", "y_i").atomic(u)
    again = td.Schedule.from_json(sched.to_json(), hist)
    assert again == sched
    want = np.bincount(a.ravel() % bins, minlength=bins).astype(np.int32)
    np.testing.assert_array_equal(td.build(again, target=backend)(img=a), want)


def test_cache_read_into_a_stage_with_updates_is_refused():
    """The image is read by the histogram's update only: a cache_read into it would have
    added a stage nothing reads (silently), so it is refused by name."""
    img, hist, _ = histogram()
    with pytest.raises(td.ScheduleError, match=r"hist has updates \(hist.u0\)"):
        td.schedule(hist).cache_read(img, [hist], "ic")
