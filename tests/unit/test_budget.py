"""Bounded lowering: no schedule makes the compiler run away (tdsl.lower.poly.budget)."""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tdsl as td
from tdsl.lower import lower_schedule
from tdsl.lower.poly import budget


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


CASE_167 = """
import time
import tdsl as td
from tdsl.lower import lower_schedule
from tdsl.lower.poly import budget
budget.MAX_ISL_SECONDS = 2.0
C = td.size('C')
y, x, c, k0, k1 = td.dims('y x c k0 k1')
in1 = td.input('in1', {c: C}, td.int64)
in2 = td.input('in2', {y: 13, x: 16, c: C}, td.float32)
s0 = td.compute('s0', {x: 16, c: C}, in2[0, x, c])
s1 = td.compute('s1', {y: 13, x: 16, c: C}, td.minimum(td.exp(td.minimum(td.maximum(td.where(
    (td.clamp(s0)[x + 2, c] != s0[x, c]), td.clamp(s0)[x, c], in1[in1[c]]), -20.0), 20.0)),
    td.cast(3.0, td.float32)))
s2 = td.compute('s2', {y: 13, x: 16, c: C}, td.max((s1[k0, x, c] / (td.abs((td.clamp(s1)[
    k0, x + 2, td.clamp(in1)[c]] / td.pad(s0, 0)[x - 1, c + 2])) + 1.0)), over=k0))
s3 = td.compute('s3', {x: 16}, td.sum(td.clamp(s2)[0, k1, 0], over={k1: 16}))
s = (td.schedule([s3]).tile('s0', x=7, c=5).fuse('s0', 'x_i', 'c_i')
     .reorder('s0', 'x_o', 'x_i_c_i', 'c_o').tile('s0', x_i_c_i=7, c_o=7)
     .fuse('s0', 'x_i_c_i_i', 'c_o_i')
     .reorder('s0', 'x_i_c_i_i_c_o_i', 'x_o', 'x_i_c_i_o', 'c_o_o')
     .parallel('s0', 'x_o').parallel('s0', 'c_o_o').tile('s1', y=8, x=2)
     .vectorize('s1', 'x_o').parallel('s2', 'y').unroll('s3', 'k1')
     .compute_at('s2', 's3', 'x').store_at('s2', 's3', 'x').vectorize('s1', 'y_o')
     .tile('s2', x=5, c=4).fuse('s2', 'x_i', 'c_i'))
import resource
def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
t0, c0 = time.perf_counter(), cpu()
try:
    lower_schedule(s)
    print("lowered", cpu() - c0, time.perf_counter() - t0)
except td.ScheduleError as e:
    print("refused", cpu() - c0, time.perf_counter() - t0, e)
"""


def test_an_analysis_isl_does_not_abort_is_killed_at_the_limit():
    # fuzz seed 4242 case 167: isl's AST generator ran for a minute past the watchdog's
    # abort; the lowering process is now stopped once it has used MAX_ISL_SECONDS of
    # processor time (2 s here)
    r = subprocess.run([sys.executable, "-c", CASE_167], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    what, cpu, wall, *_ = r.stdout.split(maxsplit=3)
    assert what in ("lowered", "refused"), r.stdout
    assert float(cpu) < 2.5, r.stdout  # processor time of the analysis process
    assert float(wall) < 60, r.stdout
    if what == "refused":
        assert "time limit" in r.stdout


def _die():
    faulthandler.disable()  # the child's crash report would interleave with pytest's output
    os.kill(os.getpid(), signal.SIGSEGV)


def test_a_crash_in_the_analysis_process_is_an_error_not_a_crash():
    if not budget.ISOLATE:
        pytest.skip("lowering runs in process here (no os.fork)")
    with pytest.raises(td.TdslError, match=r"the analysis process died \(signal 11\)"):
        budget.bounded("a test", _die)
    assert budget.bounded("a test", lambda: 42) == 42  # and the next one works


def test_the_analysis_process_sends_back_exceptions():
    def refuse():
        raise td.ScheduleError("split(o, 'x', 0): factor must be positive")

    with pytest.raises(td.ScheduleError, match="factor must be positive"):
        budget.bounded("a test", refuse)


def _spin():
    while True:
        pass


def test_an_analysis_past_its_processor_time_is_stopped(monkeypatch):
    if not budget.ISOLATE:
        pytest.skip("lowering runs in process here (no os.fork)")
    monkeypatch.setattr(budget, "MAX_ISL_SECONDS", 1.0)
    t0 = time.perf_counter()
    with pytest.raises(td.ScheduleError, match=r"time limit of 1 s of processor time"):
        budget.bounded("a test", _spin)
    assert time.perf_counter() - t0 < budget.MAX_WALL_SECONDS


def test_an_analysis_that_waits_is_stopped_at_the_wall_clock_limit(monkeypatch):
    if not budget.ISOLATE:
        pytest.skip("lowering runs in process here (no os.fork)")
    monkeypatch.setattr(budget, "MAX_WALL_SECONDS", 1.0)
    monkeypatch.setattr(budget, "MAX_ISL_SECONDS", 0.5)
    t0 = time.perf_counter()
    with pytest.raises(td.ScheduleError, match=r"ran past 1 s .*MAX_WALL_SECONDS"):
        budget.bounded("a test", lambda: time.sleep(3600))
    assert time.perf_counter() - t0 < 5


def test_the_watchdog_counts_the_lowering_threads_processor_time():
    # a thread that sleeps uses no processor time: its watchdog must not fire
    clock = budget._thread_clock()
    t0 = clock()
    time.sleep(0.2)
    assert clock() - t0 < 0.1
