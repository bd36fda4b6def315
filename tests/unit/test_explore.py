"""td.explore: the callback path a widget drives, without a browser."""

import html
import re
import sys

import numpy as np
import pytest

import tdsl as td

RNG = np.random.default_rng(2)
A_ = RNG.standard_normal((64, 32), dtype=np.float32)
B_ = RNG.standard_normal((32, 48), dtype=np.float32)
FLOPS = 2 * 64 * 48 * 32


def template():
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: 64, k: 32}, td.float32)
    B = td.input("B", {k: 32, j: 48}, td.float32)
    C = td.compute("C", {i: 64, j: 48}, td.sum(A[i, k] * B[k, j], over=k))
    return C, (td.schedule(C)
               .tile(C, i=td.knob("ti", [4, 8, 16]), j=16)
               .vectorize(C, "j_i")
               .parallel(C, td.knob("par", ["i_o", "k", None])))  # k: a refused choice


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_a_change_rebuilds_times_and_shows_the_nest(target):
    C, t = template()
    ex = td.explore(t, target=target, A=A_, B=B_)
    assert ex.error is None and ex.time > 0 and ex.schedule == t.instantiate()
    assert ex.nest == str(td.lower(t.instantiate())) and "parallel" in ex.nest
    before = ex.nest
    ex.update(ti=16)
    assert ex.schedule == t.instantiate(ti=16) and ex.nest != before
    assert ex.nest == ex.kernel.loop_nest and "for i_i in 0 .. 16:" in ex.nest
    assert ex.timing.flops == FLOPS and ex.rate == (FLOPS / ex.time, "FLOP/s")
    assert 1 <= ex.timing.runs <= 5
    np.testing.assert_allclose(ex.kernel(A=A_, B=B_), A_ @ B_, rtol=1e-5, atol=1e-5)
    ex.update(par=None)
    assert "parallel" not in ex.nest and ex.values == {"ti": 16, "par": None}


def test_a_refused_choice_shows_its_error_and_the_next_choice_recovers():
    _, t = template()
    ex = td.explore(t, A=A_, B=B_)
    ex.update(par="k")
    assert ex.error is not None and ex.error.startswith("ScheduleError") and ex.time is None
    assert ex.nest == "" and ex.rate is None and ex.kernel is None
    assert "color:#b00" in ex.time_html() and ex.rate_html() == "" and ex.nest_html() == ""
    assert "ScheduleError" in repr(ex)
    ex.update(par="i_o")
    assert ex.error is None and ex.time > 0


def test_misuse_from_code_raises_and_changes_nothing():
    _, t = template()
    ex = td.explore(t, A=A_, B=B_)
    with pytest.raises(td.ScheduleError, match="knob"):
        ex.update(tx=8)
    with pytest.raises(td.ScheduleError, match="no choice 5"):
        ex.update(ti=5)
    assert ex.values == t.defaults and ex.error is None


def test_kernels_are_kept_per_combination():
    _, t = template()
    ex = td.explore(t, A=A_, B=B_)  # the defaults: ti=4, par="i_o"
    first, kernel = ex.timing, ex.kernel
    ex.update(ti=8)
    ex.update(par="k")  # (8, "k"): refused, and remembered as refused
    assert ex.builds == 3
    ex.update(ti=4, par="i_o")
    ex.update(ti=8, par="k")
    assert ex.builds == 3 and ex.error is not None  # no rebuild, no new timing
    ex.update(ti=4, par="i_o")
    assert ex.timing is first and ex.kernel is kernel


def test_the_widget_has_a_control_per_knob_driving_the_same_path():
    _, t = template()
    ex = td.explore(t, A=A_, B=B_)
    box = ex.widget()
    assert set(ex.controls) == {"ti", "par"}
    assert type(ex.controls["ti"]).__name__ == "SelectionSlider"  # numbers slide
    assert type(ex.controls["par"]).__name__ == "Dropdown"
    assert [o[1] for o in ex.controls["ti"].options] == [4, 8, 16]
    ex.controls["ti"].value = 16
    assert ex.values["ti"] == 16 and ex.schedule == t.instantiate(ti=16)
    out = ex.outputs
    assert "per call" in out["time"].value and "FLOP/s" in out["rate"].value
    assert "i_o" in out["nest"].value and set(box.children[-4:]) == set(out.values())
    ex.controls["par"].value = "k"
    assert "failed" in out["time"].value and out["nest"].value == ""
    ex.update(ti=4, par="i_o")  # from code: the controls follow
    assert ex.controls["ti"].value == 4 and ex.controls["par"].value == "i_o"
    assert "for i_i in 0 .. 4:" in html.unescape(re.sub(r"<[^>]+>", "", out["nest"].value))


def test_the_widget_escapes_knob_names_and_errors():
    C, _ = template()
    t = td.schedule(C).parallel(C, td.knob("<b>par", ["i", "<i>"]))
    ex = td.explore(t, A=A_, B=B_)
    ex.update(**{"<b>par": "<i>"})
    assert ex.error is not None and "<i>" in ex.error
    assert "<i>" not in ex.time_html() and "&lt;i&gt;" in ex.time_html()
    ex.widget()
    assert "<i>" not in ex.outputs["time"].value
    control = ex.controls["<b>par"]  # a label shown as text, not as HTML
    assert control.description == "<b>par" and not control.description_allow_html


def test_a_plain_schedule_has_no_controls_and_bad_input_is_refused():
    C, t = template()
    ex = td.explore(t.instantiate(ti=8), A=A_, B=B_)
    assert ex.controls == {} and ex.time > 0 and "FLOP/s" in repr(ex)
    with pytest.raises(td.ArgumentError, match="takes a td.Template or a td.Schedule"):
        td.explore(C, A=A_, B=B_)
    with pytest.raises(td.ArgumentError, match="unknown target"):
        td.explore(t, target="gpu", A=A_, B=B_)
    with pytest.raises(td.ArgumentError, match="runs must be"):
        td.explore(t, runs=0, A=A_, B=B_)
    with pytest.raises(td.ArgumentError):  # a missing array: refused at once
        td.explore(t, A=A_)


def test_without_ipywidgets_the_widget_names_the_extra(monkeypatch):
    _, t = template()
    ex = td.explore(t, A=A_, B=B_)  # the callback path needs no widgets
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with pytest.raises(td.MissingDependency, match=r"ipywidgets.*pip install 'tdsl\[notebook\]'"):
        ex.widget()


def test_a_none_choice_shows_as_none_not_as_a_blank_control():
    C, _ = template()
    t = td.schedule(C).parallel(C, td.knob("par", [None, "i"]))
    ex = td.explore(t, A=A_, B=B_)
    control = ex.controls["par"]
    assert ex.values["par"] is None
    assert control.label == "None" and control.index == 0  # ipywidgets: None is "no selection"
    control.index = 1
    assert ex.values["par"] == "i" and "parallel" in ex.nest
    control.index = 0
    assert ex.values["par"] is None and "parallel" not in ex.nest
    ex.update(par="i")
    ex.update(par=None)  # from code: the control follows
    assert control.label == "None"


def test_a_saved_notebook_shows_a_snapshot_where_the_live_widget_cannot_show():
    """Jupyter stores the widget's view and a text fallback; without a kernel (a saved,
    executed notebook, a rendered page) the viewer showed `VBox(children=(HTML(...`."""
    _, t = template()
    ex = td.explore(t, A=A_, B=B_).update(ti=8)
    bundle = ex._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle  # the live widget first
    assert bundle["text/plain"] == repr(ex) and "VBox" not in bundle["text/plain"]
    page = bundle["text/html"]
    assert "per call" in page and "FLOP/s" in page and "snapshot" in page
    shown = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert "for i_i in 0 .. 8:" in shown and "ti8" in shown.replace(" ", "")


def test_without_ipywidgets_the_snapshot_alone_is_shown(monkeypatch):
    _, t = template()
    ex = td.explore(t, A=A_, B=B_)
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    bundle = ex._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"} and "per call" in bundle["text/html"]
