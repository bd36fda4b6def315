"""Schedule invariance: random pipelines x random schedules == td.evaluate, on every backend.

Kernels run on two threads and are called several times: a parallel loop whose
iterations share storage gives different answers from call to call."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import pipelines, schedules

import tdsl as td

# Limitations a random schedule may legitimately hit; anything else is a bug.
ALLOWED_REJECTIONS = (
    "is also read by",  # compute_at inside one consumer while another reads it
    "inside a vectorized loop",
    "stored outside the parallel loop",
    "store level must be a loop that encloses",
    "after the later primitives",
    "reassociate=True needs every iteration",  # a reassociated loop with its stage's loops inside
    "trip count is not bounded",  # unroll/vectorize of a block loop whose block size is symbolic
    "exceeded its",  # the lowering budget (tdsl.lower.poly.budget), e.g. for deeply fused blocks
    "outside the loop that computes them",  # isl's generator hoisted a nested block's bounds
    "does not slide monotonically",  # store_at outside compute_at: a window moving two ways
    "where tdsl does not slide a window",  # ... or over a fused or floor-divided loop
)


CALLS = 4  # calls per kernel; every one must equal the first, bit for bit


def check(case, sched, backend):
    try:
        f = td.build(sched, target=backend)
    except td.ScheduleError as e:
        assert any(m in str(e) for m in ALLOWED_REJECTIONS), f"unexpected rejection: {e}\n{case.description}\n{sched!r}"
        return
    got = f(**case.arrays)
    want = td.evaluate(case.outputs[0], **case.arrays)
    assert got.dtype == want.dtype
    if want.dtype.kind == "f":
        tol = 1e-4 if want.dtype == np.float32 else 1e-9
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=repr(sched))
    else:
        np.testing.assert_array_equal(got, want, err_msg=repr(sched))
    for _ in range(CALLS - 1):
        np.testing.assert_array_equal(f(**case.arrays), got, err_msg=f"a repeated call differs: "
                                                                    f"{sched!r}")


@settings(max_examples=max(150, settings.default.max_examples),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_schedule_invariance(backend, threads, data):
    threads(2)
    case = data.draw(pipelines(), label="pipeline")
    sched = data.draw(schedules(case), label="schedule")
    assert td.Schedule.from_json(sched.to_json(), case.outputs) == sched
    check(case, sched, backend)


@settings(max_examples=max(60, settings.default.max_examples),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fused_schedule_invariance(backend, data):
    # fused loops on both sides of compute_at/store_at, with splits, tiles and reorders
    case = data.draw(pipelines(), label="pipeline")
    sched = data.draw(schedules(case, fused=True), label="schedule")
    assert td.Schedule.from_json(sched.to_json(), case.outputs) == sched
    check(case, sched, backend)
