"""Parallel loops on two threads: storage computed inside a parallel loop is private to
the iteration, on both backends and in the loop IR they share."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import _reads, pipelines
from test_differential import check

import tdsl as td
from tdsl.lower import ir
from tdsl.lower.rewrite import walk_stmts

CALLS = 1000  # a shared buffer showed in about 2-4% of calls with two threads


def three_stencils():
    """Three clamped stencils feeding an output; s2 is computed per output tile with its
    column loop parallel, s1 per column of s2 (issue 15)."""
    y, x = td.dims("y x")
    H, W = 13, 17
    a = td.input("a", {y: H, x: W}, td.int32)
    C = td.clamp
    s0 = td.compute("s0", {y: H, x: W}, C(a)[y + 2, x + 1] + C(a)[y + 2, x - 2] + C(a)[y + 1, x])
    s1 = td.compute("s1", {y: H, x: W}, C(s0)[y + 2, x + 1] + s0[y, x] + C(s0)[y - 1, x + 2])
    s2 = td.compute("s2", {y: H, x: W}, C(s1)[y + 1, x - 1] + s1[y, x])
    out = td.compute("out", {y: H, x: W},
                     s2[y, x] + C(s2)[y - 2, x + 1] + C(s2)[y + 1, x + 1])
    s = (td.schedule(out).tile(out, y=5, x=2).compute_at(s2, out, "x_o").parallel(s2, "x")
         .compute_at(s0, out, "x_o").compute_at(s1, s2, "x"))
    arrays = {"a": np.random.default_rng(0).integers(-1000, 1000, (H, W)).astype(np.int32)}
    return s, out, arrays


def shared_stores(s: ir.Stmt, name: str, live: str = "none") -> int:
    """How many stores to temp buffer `name` inside a parallel loop write an allocation
    of it made outside that loop (one buffer shared by the loop's iterations).

    `live`: no allocation of `name` is live ("none"), or the live one was made inside
    the innermost enclosing parallel loop ("inside") or outside it ("outside")."""
    match s:
        case ir.Store(buffer=buf):
            return int(buf.name == name and live == "outside")
        case ir.For(kind=ir.ForKind.PARALLEL, body=body):
            return shared_stores(body, name, "none" if live == "none" else "outside")
        case ir.Allocate(buffer=buf, body=body):
            return shared_stores(body, name, "inside" if buf.name == name else live)
        case ir.For(body=body) | ir.Let(body=body):
            return shared_stores(body, name, live)
        case ir.If(then=then, else_=other):
            return shared_stores(then, name, live) + (
                0 if other is None else shared_stores(other, name, live))
        case ir.Block(stmts=stmts):
            return sum(shared_stores(x, name, live) for x in stmts)
    raise AssertionError(s)


def test_stage_computed_inside_a_parallel_loop_is_allocated_inside_it():
    s, _, _ = three_stencils()
    body = td.lower(s).body
    stores = [x for x in walk_stmts(body) if isinstance(x, ir.Store) and x.buffer.name == "s1"]
    assert stores and shared_stores(body, "s1") == 0


def test_stage_computed_inside_a_parallel_loop_is_exact_on_two_threads(backend, threads):
    s, out, arrays = three_stencils()
    want = td.evaluate(out, **arrays)
    f = td.build(s, target=backend)
    threads(2)
    wrong = sum(not np.array_equal(f(**arrays), want) for _ in range(CALLS))
    assert wrong == 0, f"{wrong} of {CALLS} calls on two threads differ from td.evaluate"


def three_stencils_restaged(how: str):
    """The kernel of `three_stencils` with a buffer that cache_read, cache_write or
    rfactor adds computed inside the parallel loop (or, for cache_write, s1 computed
    inside the new stage, whose one-element block leaves isl no loops of its own)."""
    y, x, k = td.dims("y x k")
    H, W = 13, 17
    a = td.input("a", {y: H, x: W}, td.int32)
    C = td.clamp
    s0 = td.compute("s0", {y: H, x: W}, C(a)[y + 2, x + 1] + C(a)[y + 2, x - 2] + C(a)[y + 1, x])
    s1 = td.compute("s1", {y: H, x: W}, C(s0)[y + 2, x + 1] + s0[y, x] + C(s0)[y - 1, x + 2])
    if how == "rfactor":
        s2 = td.compute("s2", {y: H, x: W}, td.sum(C(s1)[y + 1, x - 1 + k], over={k: 3}))
    else:
        s2 = td.compute("s2", {y: H, x: W}, C(s1)[y + 1, x - 1] + s1[y, x])
    out = td.compute("out", {y: H, x: W},
                     s2[y, x] + C(s2)[y - 2, x + 1] + C(s2)[y + 1, x + 1])
    s = td.schedule(out)
    if how == "cache_write":
        s = s.cache_write(s2, "s2w")
    elif how == "rfactor":
        s = s.rfactor(s2, "k", 2, name="s2_rf")
    s = (s.tile(out, y=5, x=2).compute_at(s2, out, "x_o").parallel(s2, "x")
         .compute_at(s0, out, "x_o"))
    if how == "cache_read":
        s = s.compute_at(s1, s2, "x").cache_read(s1, [s2], "s1c").compute_at("s1c", s2, "x")
        added = "s1c"
    elif how == "cache_write":
        s, added = s.compute_at("s2w", s2, "x").compute_at(s1, "s2w", "x"), "s2w"
    else:
        s, added = s.compute_at(s1, s2, "x").compute_at("s2_rf", s2, "x"), "s2_rf"
    arrays = {"a": np.random.default_rng(3).integers(-1000, 1000, (H, W)).astype(np.int32)}
    return s, out, arrays, ("s1", added)


@pytest.mark.parametrize("how", ["cache_read", "cache_write", "rfactor"])
def test_restaged_buffers_inside_a_parallel_loop_are_private(how, backend, threads):
    s, out, arrays, temps = three_stencils_restaged(how)
    body = td.lower(s).body
    for t in temps:
        written = [x for x in walk_stmts(body) if isinstance(x, ir.Store) and x.buffer.name == t]
        assert written and shared_stores(body, t) == 0, t
    want = td.evaluate(out, **arrays)
    f = td.build(s, target=backend)
    threads(2)
    wrong = sum(not np.array_equal(f(**arrays), want) for _ in range(CALLS))
    assert wrong == 0, f"{wrong} of {CALLS} calls on two threads differ from td.evaluate"


def rows_that_alias():
    """A running sum along x in a buffer laid out (c, y, x) with its row loop y parallel
    and c unrolled: as flat addresses, block c of row y is row y + 3c, so a compiler that
    carries stores from one y iteration to the next (gcc's predictive commoning) makes
    each iteration store into rows of the others (fuzz C seed 8401, case 808)."""
    y, x, c = td.dims("y x c")
    H, W, C = 3, 7, 2
    a = td.input("a", {y: H, x: W, c: C}, td.float64)
    s1 = td.compute("s1", {y: H, x: W, c: C}, a[y, x, c])
    td.update(s1[y, x, c], s1[y, x - 1, c] + 2.0, over={y: H, x: (1, W), c: C})
    out = td.compute("out", {y: H, x: W, c: C}, s1[y, x, c] * 3.0)
    s = td.schedule(out).unroll("s1.u0", "c").parallel("s1.u0", "y").layout(s1, "c", "y", "x")
    arrays = {"a": np.random.default_rng(1).uniform(-4, 4, (H, W, C))}
    return s, out, arrays


@contextlib.contextmanager
def busy_cores():
    """One process spinning on each core while the block runs: threads of a parallel
    loop then get preempted at any instruction, which widens every race window."""
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(os.cpu_count() or 2)]
    try:
        yield
    finally:
        for p in spin:
            p.kill()
            p.wait()


def test_parallel_iterations_store_only_their_own_rows_on_a_busy_machine(backend, threads):
    s, out, arrays = rows_that_alias()
    want = td.evaluate(out, **arrays)
    f = td.build(s, target=backend)
    threads(2)
    calls = 5 * CALLS
    with busy_cores():
        wrong = sum(not np.array_equal(f(**arrays), want) for _ in range(calls))
    assert wrong == 0, f"{wrong} of {calls} calls on two threads differ from td.evaluate"


def test_store_at_outside_a_parallel_loop_that_shares_cells_is_refused():
    s, _, _ = three_stencils()
    for level in (("out", "x_o"), ("s2", "y")):
        try:
            td.lower(s.store_at("s1", *level))
        except td.ScheduleError as e:
            msg = str(e)
        else:
            raise AssertionError(f"store_at(s1, {level}) was accepted")
        assert msg.startswith("parallel(s2, 'x'): s1 is computed inside the parallel loop x")
        assert f"stored outside the parallel loop, at {level[0]}'s loop {level[1]}" in msg
        assert "output dependence on s1" in msg and "in iteration x=" in msg
        assert "store_at(s1, s2, 'x')" in msg


def test_store_at_outside_a_parallel_loop_with_disjoint_blocks_runs(backend, threads):
    """Each iteration of the parallel loop computes and reads cells no other touches,
    so one buffer stored outside it is shared without a race."""
    y, x = td.dims("y x")
    H, W = td.size("H"), td.size("W")
    inp = td.input("inp", {y: H, x: W}, td.float32)
    p = td.compute("p", {y: H, x: W}, inp[y, x] * 2)
    c = td.compute("c", {y: H, x: W}, p[y, x] + 1)
    s = (td.schedule(c).split(c, "y", 4).parallel(c, "y_i").compute_at(p, c, "y_i")
         .store_at(p, c, "y_o"))
    assert "allocate p[4, W]" in str(td.lower(s))
    a = np.random.default_rng(2).uniform(-4, 4, (37, 29)).astype(np.float32)
    f = td.build(s, target=backend)
    threads(2)
    wrong = sum(not np.array_equal(f(inp=a), a * 2 + 1) for _ in range(CALLS // 5))
    assert wrong == 0


@settings(max_examples=max(60, settings.default.max_examples),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_store_at_around_a_parallel_loop_is_exact_or_refused(backend, threads, data):
    """A producer computed at or inside a consumer's parallel loop and stored at or above
    it: refused as a race, or exact on two threads in every call."""
    threads(2)
    case = data.draw(pipelines().filter(lambda c: len(c.stages) >= 2), label="pipeline")
    producer = data.draw(st.sampled_from(case.stages[:-1]), label="producer")
    consumer = next(c for c in case.stages if producer in _reads(c))
    s = td.schedule(case.outputs)
    try:
        loop = data.draw(st.sampled_from(s.loops(consumer)), label="split")
        s = s.split(consumer, loop, data.draw(st.sampled_from([2, 3, 4]), label="factor"))
        loops = s.loops(consumer)
        p = data.draw(st.integers(0, len(loops) - 1), label="parallel")
        s = s.parallel(consumer, loops[p])
        s = s.compute_at(producer, consumer, loops[data.draw(st.integers(p, len(loops) - 1))])
        s = s.store_at(producer, consumer, loops[data.draw(st.integers(0, p), label="store")])
    except td.ScheduleError:
        assume(False)  # e.g. a reduction loop marked parallel
    check(case, s, backend)
