"""td.set_num_threads / td.threads: the team size of parallel loops, for both backends."""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td


@pytest.fixture
def pool():
    from tdsl.backend_c import pool

    if pool.load() is None:
        pytest.skip(f"the thread pool is not available ({pool.unavailable()}), so parallel "
                    "loops run on one thread")
    return pool


def blur(n=67):
    y, x = td.dims("y x")
    a = td.input("a", {y: n, x: n}, td.float64)
    c = td.clamp(a)
    out = td.compute("out", {y: n, x: n}, c[y - 1, x] + c[y, x + 1] * 2 + c[y + 1, x - 1])
    return out, td.schedule(out).parallel(out, "y")


def test_setting_governs_the_pool_and_is_restored(pool):
    before = td.num_threads()
    assert before == pool.default_threads() and pool.setting() is None
    with td.threads(3):
        assert pool.setting() == 3 and td.num_threads() == 3
        with td.threads(1):
            assert td.num_threads() == 1
        assert td.num_threads() == 3
    assert pool.setting() is None and td.num_threads() == before
    td.set_num_threads(2)
    try:
        assert td.num_threads() == 2
    finally:
        td.set_num_threads(None)
    assert td.num_threads() == before


@pytest.mark.parametrize("n", [1, 2, 5])
def test_kernels_on_any_team_size(backend, pool, n):
    out, s = blur()
    a = np.random.default_rng(n).standard_normal((67, 67))
    f = td.build(s, target=backend)
    with td.threads(n):
        np.testing.assert_array_equal(f(a=a), td.evaluate(out, a=a))
        assert f.benchmark(a=a, runs=2).median > 0


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_bad_thread_counts_are_refused(bad):
    with pytest.raises(td.ArgumentError, match="at least 1, or None"):
        td.set_num_threads(bad)


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_every_iteration_runs_once_whatever_the_chunks(target):
    """Parallel loops are shared out in dynamic chunks (about 8 per thread): with
    trip counts below, at and above threads x 8, and with symbolic bounds, each
    iteration runs exactly once (a row scattered twice or missed shows in the sum)."""
    n = td.size("n")
    r, k = td.dims("r k")
    a = td.input("a", {r: n, k: 3}, td.int64)
    out = td.compute("out", {r: n}, a[r, 0] * 100 + a[r, 1] + a[r, 2])
    count = td.compute("count", {k: 1}, td.cast(0 * k, td.int64))
    u = td.update(count[0], count[0] + out[r], over={r: n})
    f = td.build(td.schedule(count).parallel(out, "r").atomic(u).parallel(u, "r"),
                 target=target)
    rng = np.random.default_rng(1)
    for threads in (1, 2, 3, 5):
        with td.threads(threads):
            for rows in (1, 2, 7, 15, 16, 17, 39, 40, 41, 1001):
                av = rng.integers(-50, 50, (rows, 3), dtype=np.int64)
                want = av[:, 0] * 100 + av[:, 1] + av[:, 2]
                got = f(a=av)
                np.testing.assert_array_equal(got, [want.sum()])
