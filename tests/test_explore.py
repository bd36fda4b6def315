"""td.explore: the callback path a widget drives, without a browser."""

import numpy as np
import pytest

import tdsl as td

RNG = np.random.default_rng(2)
A_ = RNG.standard_normal((64, 32), dtype=np.float32)
B_ = RNG.standard_normal((32, 48), dtype=np.float32)


def template():
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: 64, k: 32}, td.float32)
    B = td.input("B", {k: 32, j: 48}, td.float32)
    C = td.compute("C", {i: 64, j: 48}, td.sum(A[i, k] * B[k, j], over=k))
    return C, (td.schedule(C)
               .tile(C, i=td.knob("ti", [4, 8, 16]), j=16)
               .vectorize(C, "j_i")
               .parallel(C, td.knob("par", ["i_o", "k"])))  # k: a refused choice


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_a_change_rebuilds_times_and_shows_the_nest(target):
    C, t = template()
    ex = td.explore(t, target=target, A=A_, B=B_)
    assert ex.error is None and ex.time > 0 and ex.schedule == t.instantiate()
    assert "for i_o" in ex.nest and "parallel" in ex.nest
    before = ex.nest
    ex.update(ti=16)
    assert ex.schedule == t.instantiate(ti=16) and ex.nest != before
    assert ex.rate == pytest.approx((64 * 48 * 32) / ex.time)
    out = td.build(ex.schedule, target=target)(A=A_, B=B_)
    np.testing.assert_allclose(out, A_ @ B_, rtol=1e-5, atol=1e-5)


def test_a_refused_choice_shows_its_error_and_the_next_choice_recovers():
    _, t = template()
    ex = td.explore(t, A=A_, B=B_)
    ex.update(par="k")
    assert ex.error is not None and "ScheduleError" in ex.error and ex.time is None
    assert "color:#b00" in ex.summary_html()
    ex.update(par="i_o")
    assert ex.error is None and ex.time > 0


def test_kernels_are_kept_per_combination():
    _, t = template()
    ex = td.explore(t, A=A_, B=B_)
    ex.update(ti=8)
    first = ex.time
    ex.update(ti=4)
    ex.update(ti=8)
    assert ex.time == first and ex.seconds < 0.01  # no rebuild, no new timing


def test_the_widget_has_a_control_per_knob_driving_the_same_path():
    _, t = template()
    ex = td.explore(t, A=A_, B=B_)
    box = ex.widget()
    assert set(ex.controls) == {"ti", "par"}
    assert [o[1] for o in ex.controls["ti"].options] == [4, 8, 16]
    ex.controls["ti"].value = 16
    assert ex.values["ti"] == 16 and ex.schedule == t.instantiate(ti=16)
    assert "ms</b> per call" in ex._summary.value and "i_o" in ex._nest.value
    assert box.children[-1] is ex._nest


def test_a_plain_schedule_has_no_controls_and_bad_input_is_refused():
    C, t = template()
    ex = td.explore(t.instantiate(ti=8), A=A_, B=B_)
    ex.widget()
    assert ex.controls == {} and ex.time > 0
    with pytest.raises(td.TdslError, match="takes a td.Template or a td.Schedule"):
        td.explore(C, A=A_, B=B_)
    with pytest.raises(td.TdslError, match="unknown target"):
        td.explore(t, target="gpu", A=A_, B=B_)
