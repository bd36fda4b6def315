"""fuse_updates: two updates of one stage in one loop nest, each iteration of the first
then the same iteration of the second, legal-checked; exact on both backends."""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td

RNG = np.random.default_rng(11)


def scan(n=16):
    (i,) = td.dims("i")
    x = td.input("x", {i: n}, td.int64)
    y = td.compute("y", {i: n}, x[i] * 3)
    u0 = td.update(y[i], y[i] + x[i], over={i: (1, n)})
    u1 = td.update(y[i], y[i] * 2 - y[i - 1], over={i: (1, n)})
    return y, u0, u1


def test_fused_updates_interleave(backend):
    y, u0, u1 = scan()
    s = td.schedule(y).fuse_updates(u0, u1)
    text = str(td.lower(s))
    assert text.count("for i in") == 2  # the definition's loop, then one for both updates
    a = RNG.integers(-9, 9, 16)
    want = a * 3
    want[1:] += a[1:]
    for k in range(1, 16):
        want[k] = want[k] * 2 - want[k - 1]
    np.testing.assert_array_equal(td.evaluate(y, x=a), want)  # (the same, unfused)
    np.testing.assert_array_equal(td.build(s, target=backend)(x=a), want)
    assert td.Schedule.from_json(s.to_json(), y) == s


def test_fusion_that_would_read_too_early_is_refused():
    n = 16
    (i,) = td.dims("i")
    x = td.input("x", {i: n}, td.int64)
    y = td.compute("y", {i: n}, x[i] * 3)
    v0 = td.update(y[i], y[i] + x[i], over={i: (0, n - 1)})
    v1 = td.update(y[i], y[i] * 2 - y[i + 1], over={i: (0, n - 1)})
    with pytest.raises(td.ScheduleError, match=r"fuse_updates\(y.u0, y.u1\): flow dependence"):
        td.schedule(y).fuse_updates(v0, v1).check()


def test_loop_primitives_on_the_first_apply_to_both(backend, threads):
    """Rows are independent: fused, then split and run in parallel; a loop that carries
    the dependence between them cannot run in parallel."""
    threads(2)
    h, w = 23, 31
    r, c = td.dims("r c")
    A = td.input("A", {r: h, c: w}, td.float64)
    y = td.compute("y", {r: h, c: w}, A[r, c])
    u0 = td.update(y[r, c], y[r, c] * 0.5 + A[r, c - 1], over={r: h, c: (1, w)})
    u1 = td.update(y[r, c], y[r, c] + y[r, c - 1], over={r: h, c: (1, w)})
    a = RNG.standard_normal((h, w))
    want = td.evaluate(y, A=a)
    s = td.schedule(y).fuse_updates(u0, u1).split(u0, "r", 4).parallel(u0, "r_o")
    np.testing.assert_allclose(td.build(s, target=backend)(A=a), want, rtol=1e-12)
    with pytest.raises(td.ScheduleError, match="cannot run in parallel"):
        td.schedule(y).fuse_updates(u0, u1).parallel(u0, "c").check()
    with pytest.raises(td.ScheduleError, match="runs in the loops of y.u0"):
        td.schedule(y).fuse_updates(u0, u1).split(u1, "c", 4)


def test_three_updates_in_one_nest(backend):
    """Only the last reads another element (the one before, final by then either way):
    fusing all three is legal. Fusing a scan before later updates is not."""
    (i,) = td.dims("i")
    x = td.input("x", {i: 20}, td.int32)
    y = td.compute("y", {i: 20}, x[i])
    u0 = td.update(y[i], y[i] + x[i], over={i: (1, 20)})
    u1 = td.update(y[i], y[i] * 3, over={i: (1, 20)})
    u2 = td.update(y[i], y[i] - y[i - 1], over={i: (1, 20)})
    s = td.schedule(y).fuse_updates(u0, u1).fuse_updates(u0, u2)
    a = RNG.integers(-5, 5, 20).astype(np.int32)
    want = a.copy()
    for k in range(1, 20):
        want[k] = (want[k] + a[k]) * 3 - want[k - 1]
    np.testing.assert_array_equal(td.evaluate(y, x=a), want)
    np.testing.assert_array_equal(td.build(s, target=backend)(x=a), want)
    z = td.compute("z", {i: 20}, x[i])
    scan = td.update(z[i], z[i] + z[i - 1], over={i: (1, 20)})
    after = td.update(z[i], z[i] * 3, over={i: (1, 20)})
    with pytest.raises(td.ScheduleError, match=r"fuse_updates\(z.u0, z.u1\)"):
        td.schedule(z).fuse_updates(scan, after).check()


def test_what_fuse_updates_refuses():
    y, u0, u1 = scan()
    (j,) = td.dims("j")
    with pytest.raises(td.ScheduleError, match="is a stage"):
        td.schedule(y).fuse_updates(y, u0)
    with pytest.raises(td.ScheduleError, match="must be the update right after"):
        td.schedule(y).fuse_updates(u1, u0)
    with pytest.raises(td.ScheduleError, match="already scheduled; fuse first"):
        td.schedule(y).split(u1, "i", 4).fuse_updates(u0, u1)
    z = td.compute("z", {j: 8}, j * 1)
    w0 = td.update(z[j], z[j] + 1, over={j: 8})
    w1 = td.update(z[j], z[j] + 2, over={j: (1, 8)})
    with pytest.raises(td.ScheduleError, match="different domains"):
        td.schedule(z).fuse_updates(w0, w1)
    with pytest.raises(td.ScheduleError, match="already scheduled; apply rfactor first"):
        td.schedule(y).fuse_updates(u0, u1).rfactor(u0, "i", 2)
