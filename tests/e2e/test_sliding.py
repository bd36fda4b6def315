"""Sliding windows and storage folding: a producer stored outside the loop it is computed
in computes each value once and keeps only the rows in flight.

Checked on both backends and in portable C against td.evaluate (hypothesis draws
stencil pipelines and schedules), with the producer's computations counted by running
the loop nest's control flow (every store into the producer's buffer), and the
refusals: a window that moves along two dims, or backwards.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_emit_c import EXAMPLES

import tdsl as td
from tdsl.emit import load_function
from tdsl.lower import ir, lower_schedule
from tdsl.lower.count import count_stores
from tdsl.lower.rewrite import walk_stmts


def _allocations(func: ir.LoweredFunc) -> dict[str, tuple[ir.Expr, ...]]:
    return {s.buffer.name: s.buffer.shape for s in walk_stmts(func.body)
            if isinstance(s, ir.Allocate)}


# ---------------------------------------------------------------- the blur


def test_blur_computes_each_row_once_and_keeps_three():
    """The 240x320 uint8 blur of examples/embedded: bx's buffer is 3 rows of W - 2, each
    of its 240 x 318 values is stored once (against three times without the window), and
    the same holds in portable C (workspace: three rows of uint16)."""
    sched = load_function(f"{EXAMPLES / 'kernels.py'}:blur_sliding")()
    func = lower_schedule(sched, late=False)
    shape = _allocations(func)["bx"]
    assert [int(e.value) for e in shape] == [3, 318]
    assert count_stores(func, "bx", {}) == 240 * 318
    y, x = td.dims("y x")
    plain = td.schedule(sched.outputs).compute_at("bx", "by", "y")  # no store_root
    assert count_stores(lower_schedule(plain, late=False), "bx", {}) == 238 * 3 * 318
    portable = lower_schedule(sched, workspace=True, portable=True)
    assert count_stores(portable, "bx", {}) == 240 * 318
    from tdsl.backend_c.workspace import workspace_layout

    assert workspace_layout(portable).constant == 3 * 318 * 2


def test_blur_matches_numpy_on_both_backends(backend):
    sched = load_function(f"{EXAMPLES / 'kernels.py'}:blur_sliding")()
    a = np.random.default_rng(3).integers(0, 256, (240, 320), dtype=np.uint8)
    want = td.evaluate(sched.outputs[0], inp=a)
    np.testing.assert_array_equal(td.build(sched, target=backend)(inp=a), want)


# ---------------------------------------------------------------- stencil pipelines


@st.composite
def stencils(draw):
    """A chain of 2-3 stages over y, x, each reading the previous at a few offsets (through
    td.clamp where an offset may leave the image), and a schedule that computes each
    producer at one of its consumer's loops and stores it higher (root or an outer loop)."""
    y, x = td.dims("y x")
    h, w = draw(st.integers(3, 12)), draw(st.integers(3, 12))
    inp = td.input("inp", {y: h, x: w}, td.int32)
    stages = [inp]
    for k in range(draw(st.integers(2, 3))):
        prev = stages[-1]
        view = td.clamp(prev)
        offs = draw(st.lists(st.tuples(st.integers(-2, 2), st.integers(-1, 1)), min_size=1,
                             max_size=3, unique=True))
        e = sum((view[y + dy, x + dx] * (n + 1) for n, (dy, dx) in enumerate(offs)), start=k)
        stages.append(td.compute(f"s{k}", {y: h, x: w}, e))
    out = stages[-1]
    s = td.schedule(out)
    split = draw(st.sampled_from([None, 2, 3]))
    if split:
        s = s.split(out, "y", split)
    for k, producer in enumerate(stages[1:-1]):
        consumer = stages[k + 2]
        loops = s.loops(consumer)
        at = draw(st.integers(0, len(loops) - 1))
        s = s.compute_at(producer, consumer, loops[at])
        if draw(st.booleans()) or at == 0:
            s = s.store_root(producer)
        else:
            s = s.store_at(producer, consumer, loops[draw(st.integers(0, at - 1))])
    a = draw(st.lists(st.integers(-50, 50), min_size=h * w, max_size=h * w))
    return s, out, np.array(a, np.int32).reshape(h, w)


REFUSALS = ("does not slide monotonically", "where tdsl does not slide a window")


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                HealthCheck.function_scoped_fixture])
@given(case=stencils())
def test_random_stencils_match_evaluate(backend, case):
    """Schedules with producers stored above their compute loop: exact, or refused with
    the sliding window's message."""
    s, out, a = case
    try:
        f = td.build(s, target=backend)
    except td.ScheduleError as e:
        assert any(m in str(e) for m in REFUSALS), f"unexpected: {e}\n{s!r}"
        return
    np.testing.assert_array_equal(f(inp=a), td.evaluate(out, inp=a), err_msg=repr(s))


@settings(deadline=None, max_examples=10,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=stencils())
def test_random_stencils_in_portable_c(case, tmp_path_factory):
    import test_emit_c as e

    from tdsl.compute.binding import bind_arguments

    s, out, a = case
    try:
        func = td.lower(s, "k")
    except td.ScheduleError as err:
        assert any(m in str(err) for m in REFUSALS), f"unexpected: {err}\n{s!r}"
        return
    d = tmp_path_factory.mktemp("sliding")
    td.emit_c(s, "k", d)
    em = e.Emitted("k", d, func, {"inp": a}, {out.name: td.evaluate(out, inp=a)},
                   bind_arguments(s.pipeline, {"inp": a}).sizes, s)
    (d / "inputs.bin").write_bytes(a.tobytes())
    (d / "driver.c").write_text(e.driver_source(em))
    e.build_and_run(em, "asan", e.tool("gcc"), e.SANITIZE, env=e.ASAN_ENV)


def test_each_value_once_in_random_windows():
    """Along the compute loop the window slides: a producer of one row per output row,
    stored at the root, stores each of its values exactly once, whatever the offsets."""
    y, x = td.dims("y x")
    for offsets in ((0, 1, 2), (-1, 0, 1), (0, 3), (2,)):
        inp = td.input("inp", {y: 20, x: 6}, td.int32)
        p = td.compute("p", {y: 20, x: 6}, inp[y, x] + 1)
        cp = td.clamp(p)
        out = td.compute("out", {y: 20, x: 6}, sum(cp[y + d, x] for d in offsets))
        s = td.schedule(out).compute_at(p, out, "y").store_root(p)
        func = lower_schedule(s, late=False)
        lo, hi = max(0, min(offsets)), min(19, 19 + max(offsets))
        needed = {min(max(r + d, 0), 19) for r in range(20) for d in offsets}
        assert count_stores(func, "p", {}) == len(needed) * 6, (offsets, lo, hi)
        rows = max(offsets) - min(offsets) + 1
        assert int(_allocations(func)["p"][0].value) == min(rows, 20)


# ---------------------------------------------------------------- refusals


def test_a_window_moving_along_two_dims_is_refused():
    y, x = td.dims("y x")
    inp = td.input("inp", {y: 8, x: 8}, td.float32)
    p = td.compute("p", {y: 8, x: 8}, inp[y, x] * 2)
    cp = td.clamp(p)
    out = td.compute("out", {y: 8}, cp[y, y] + cp[y + 1, y + 1])
    s = td.schedule(out).compute_at(p, out, "y").store_root(p)
    with pytest.raises(td.ScheduleError, match=r"compute_at\(p, out, 'y'\) with store_root\(p\)"):
        td.lower(s)
    with pytest.raises(td.ScheduleError, match="moves along y, x at once"):
        td.lower(s)


def test_a_window_moving_backwards_is_refused():
    y, x = td.dims("y x")
    inp = td.input("inp", {y: 8, x: 4}, td.float32)
    p = td.compute("p", {y: 8, x: 4}, inp[y, x] * 2)
    cp = td.clamp(p)
    out = td.compute("out", {y: 8, x: 4}, cp[7 - y, x] + cp[8 - y, x])
    s = td.schedule(out).compute_at(p, out, "y").store_root(p)
    with pytest.raises(td.ScheduleError, match="moves backwards along y"):
        td.lower(s)


def test_a_parallel_compute_loop_sharing_rows_is_refused():
    """The window's rows would be shared by the threads: refused as a race."""
    sched = load_function(f"{EXAMPLES / 'kernels.py'}:blur_sliding")()
    with pytest.raises(td.ScheduleError, match="parallel"):
        td.lower(sched.parallel("by", "y"))


def test_disjoint_blocks_are_computed_as_before():
    """A pointwise producer stored above its compute loop: no overlap, no window; its
    buffer holds the store level's whole block."""
    y, x = td.dims("y x")
    inp = td.input("inp", {y: 8, x: 4}, td.float32)
    p = td.compute("p", {y: 8, x: 4}, inp[y, x] * 2)
    out = td.compute("out", {y: 8, x: 4}, p[y, x] + 1)
    s = td.schedule(out).split(out, "y", 4).compute_at(p, out, "y_i").store_at(p, out, "y_o")
    func = lower_schedule(s, late=False)
    assert [int(e.value) for e in _allocations(func)["p"]] == [4, 4]
    assert count_stores(func, "p", {}) == 32


def test_store_root_round_trips_and_reads_back():
    sched = load_function(f"{EXAMPLES / 'kernels.py'}:blur_sliding")()
    assert "store_root(bx)" in repr(sched)
    again = td.Schedule.from_json(sched.to_json(), sched.outputs)
    assert again == sched and again.primitives[-1] == td.StoreRoot(sched.pipeline.by_name["bx"])
    assert td.StoreRoot.__doc__ and "window slides" in td.StoreRoot.__doc__


def test_counting_refuses_control_flow_that_reads_data():
    from tdsl.lower.count import NotIndexOnly

    i = td.dim("i")
    n = td.input("n", {i: 4}, td.int32)
    out = td.compute("out", {i: 4}, td.sum(i * 0 + 1, over={td.dim("k"): 3}) + n[i])
    func = lower_schedule(td.schedule(out), late=False)
    assert count_stores(func, "out", {}) == 4  # (the sum accumulates in a temp)
    assert count_stores(func, "tdsl_acc1", {}) == 4 * 4  # its start and three steps
    bad = ir.LoweredFunc("k", func.inputs, func.outputs, (), ir.If(
        ir.Compare("gt", ir.Load(func.inputs[0], (ir.index_const(0),)), ir.Const(0, td.int32)),
        func.body))
    with pytest.raises(NotIndexOnly, match="not an index expression"):
        count_stores(bad, "out", {})
