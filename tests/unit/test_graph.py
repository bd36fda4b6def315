"""The algorithm is a graph of values: nothing changes once made, and pipelines are snapshots.

`td.update` records an update with its stage; a pipeline (and so a schedule, a
kernel, `td.evaluate`) sees the updates defined when it was made.
"""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td
from tdsl.compute import Pipeline


def scan():
    r = td.dim("r")
    x = td.input("x", {r: 6}, td.int32)
    y = td.compute("y", {r: 6}, x[r])
    return r, x, y


X = np.arange(1, 7, dtype=np.int32)


def test_graph_objects_cannot_change():
    r, x, y = scan()
    u = td.update(y[r], y[r - 1] + y[r], over={r: (1, 6)})
    view = td.clamp(y)
    for obj, attr, value in [(y, "expr", x[r]), (y, "order", 0), (x, "name", "z"),
                             (u, "value", x[r]), (view, "mode", "pad")]:
        with pytest.raises(AttributeError, match="cannot change"):
            setattr(obj, attr, value)
    with pytest.raises(AttributeError):
        y.updates = ()  # type: ignore[misc]
    assert y.updates == (u,)


def test_a_pipeline_keeps_the_updates_it_saw():
    r, x, y = scan()
    before = Pipeline(y)
    u = td.update(y[r], y[r - 1] + y[r], over={r: (1, 6)})
    after = Pipeline(y)
    assert before.updates == () and before.updates_of(y) == ()
    assert after.updates == (u,) and after.schedulables == (y, u)
    assert before.stale() is u and after.stale() is None
    with pytest.raises(AttributeError, match="cannot change"):
        after.outputs = ()


def test_building_before_and_after_an_update_gives_two_kernels():
    r, x, y = scan()
    f0 = td.build(y)
    assert td.build(y).lowered is f0.lowered  # the same pipeline: built once
    td.update(y[r], y[r - 1] + y[r], over={r: (1, 6)})
    f1 = td.build(y)
    np.testing.assert_array_equal(f0(x=X), X)  # built before: the pipeline it saw
    np.testing.assert_array_equal(f1(x=X), np.cumsum(X))
    np.testing.assert_array_equal(td.evaluate(y, x=X), np.cumsum(X))
    assert f1.lowered is not f0.lowered and td.build(y).lowered is f1.lowered


def test_a_schedule_made_before_an_update_is_refused():
    r, x, y = scan()
    s = td.schedule(y).split(y, "r", 2)
    td.update(y[r], y[r - 1] + y[r], over={r: (1, 6)})
    for use in (td.build, td.lower, lambda s: s.check()):
        with pytest.raises(td.ScheduleError, match=r"y.u0 .* after this schedule of y was made"):
            use(s)
    s2 = td.Schedule.from_json(s.to_json(), y)  # made again: it covers the update
    assert s2 != s
    np.testing.assert_array_equal(td.build(s2)(x=X), np.cumsum(X))


def test_restaging_keeps_the_schedules_snapshot():
    r, x, y = scan()
    td.update(y[r], y[r - 1] + y[r], over={r: (1, 6)})
    z = td.compute("z", {r: 6}, y[r] * 2)
    s = td.schedule(z).cache_write(z, "zl")
    assert s.state.pipeline.updates == s.pipeline.updates == y.updates
    assert [t.name for t in s.state.pipeline.stages] == ["y", "zl", "z"]
    np.testing.assert_array_equal(td.build(s)(x=X), np.cumsum(X) * 2)
