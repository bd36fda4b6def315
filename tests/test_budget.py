"""Bounded lowering: no schedule makes the compiler run away (tdsl.lower.budget)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import tdsl as td
from tdsl.lower import budget, lower_schedule


def _scale(n: int):
    (x,) = td.dims("x")
    a = td.input("a", {x: n}, td.float32)
    return a, td.compute("o", {x: n}, a[x] * 2)


def test_unrolling_past_the_limit_is_refused_at_once():
    _, o = _scale(4000)
    for factor in (2000, 10**6):  # a factor past the extent unrolls the whole extent
        s = td.schedule(o).split(o, "x", factor).unroll(o, "x_i")
        t0 = time.perf_counter()
        with pytest.raises(td.ScheduleError, match=r"unroll\(o, 'x_i'\) \(\d+ iterations\).*limit"):
            lower_schedule(s)
        assert time.perf_counter() - t0 < 5


def test_nested_unrolling_counts_the_product():
    i, j = td.dims("i j")
    a = td.input("a", {i: 64, j: 64}, td.int32)
    o = td.compute("o", {i: 64, j: 64}, a[i, j] + 1)
    s = td.schedule(o).split(o, "i", 64).split(o, "j", 32).unroll(o, "i_i").unroll(o, "j_i")
    with pytest.raises(td.ScheduleError) as e:
        lower_schedule(s)
    assert "unroll(o, 'i_i')" in str(e.value) and "unroll(o, 'j_i')" in str(e.value)
    assert "2,048 copies" in str(e.value)


def test_unrolling_within_the_limit_builds(backend):
    a, o = _scale(100)
    s = td.schedule(o).split(o, "x", 16).unroll(o, "x_i")
    x = np.arange(100, dtype=np.float32)
    np.testing.assert_array_equal(td.build(s, target=backend)(a=x), x * 2)


def test_an_analysis_past_the_isl_quota_is_a_schedule_error(monkeypatch):
    y, x = td.dims("y x")
    a = td.input("a", {y: 64, x: 64}, td.float32)
    p = td.compute("p", {y: 64, x: 64}, a[y, x] + 1)
    o = td.compute("o", {y: 64, x: 64}, p[y, x] * 2)
    s = td.schedule(o).tile(o, y=8, x=8).compute_at(p, o, "x_o")
    monkeypatch.setattr(budget, "MAX_ISL_OPERATIONS", 50)
    with pytest.raises(td.ScheduleError, match=r"exceeded its limit of 50 isl operations"):
        lower_schedule(s)
    monkeypatch.undo()
    # the context works again afterwards, with the quota lifted
    lower_schedule(s)
    import islpy as isl

    assert isl.DEFAULT_CONTEXT.get_max_operations() == 0


def test_errors_inside_the_budget_pass_through_unchanged():
    y, x = td.dims("y x")
    a = td.input("a", {y: 8, x: 8}, td.float32)
    p = td.compute("p", {y: 8, x: 8}, a[y, x] + 1)
    o = td.compute("o", {y: 8, x: 8}, p[y, x] * 2)
    s = td.schedule(o).compute_at(p, o, "x").split(o, "x", 2)
    with pytest.raises(td.ScheduleError, match="has no loop 'x' after the later primitives"):
        lower_schedule(s)


def test_an_analysis_past_the_time_limit_is_a_schedule_error(monkeypatch):
    y, x = td.dims("y x")
    a = td.input("a", {y: 64, x: 64}, td.float32)
    p = td.compute("p", {y: 64, x: 64}, a[y, x] + 1)
    q = td.compute("q", {y: 64, x: 64}, p[y, x] * 2)
    o = td.compute("o", {y: 64, x: 64}, q[y, x] - 1)
    s = (td.schedule(o).tile(o, y=8, x=8).fuse(o, "y_i", "x_i")
         .compute_at(q, o, "x_o").compute_at(p, q, "x"))
    monkeypatch.setattr(budget, "MAX_ISL_SECONDS", 1e-4)
    with pytest.raises(td.ScheduleError, match=r"exceeded its time limit of 0.0001 s"):
        lower_schedule(s)
    monkeypatch.undo()
    lower_schedule(s)  # the context is no longer aborted


def test_a_late_watchdog_does_not_abort_the_next_lowering(monkeypatch):
    _, o = _scale(64)
    monkeypatch.setattr(budget, "MAX_ISL_SECONDS", 1.0)
    for _ in range(5):  # each lowering finishes before its own watchdog fires
        lower_schedule(td.schedule(o).split(o, "x", 8))
    time.sleep(1.2)  # every old watchdog has fired by now
    lower_schedule(td.schedule(o).split(o, "x", 4))
