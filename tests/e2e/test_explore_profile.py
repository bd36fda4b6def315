"""td.explore shows the per-stage profile of the current choice."""

import numpy as np
import pytest

import tdsl as td

RNG = np.random.default_rng(12)
A_ = RNG.standard_normal((64, 32), dtype=np.float32)
B_ = RNG.standard_normal((32, 48), dtype=np.float32)


def template():
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: 64, k: 32}, td.float32)
    B = td.input("B", {k: 32, j: 48}, td.float32)
    C = td.compute("C", {i: 64, j: 48}, td.sum(A[i, k] * B[k, j], over=k))
    return C, (td.schedule(C).cache_write(C, "Cacc").tile(C, i=td.knob("ti", [4, 8]), j=16)
               .compute_at("Cacc", C, "j_o").parallel(C, td.knob("par", ["i_o", None])))


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_the_profile_follows_the_current_choice(target):
    _, t = template()
    ex = td.explore(t, target=target, A=A_, B=B_)
    p = ex.profile
    assert set(p.by_stage()) == {"C", "Cacc"}
    assert any(r.kind == "parallel" and r.label == "i_o" for r in p.rows)
    assert ex.profile is p  # kept per combination
    ex.update(par=None)
    assert not any(r.kind == "parallel" for r in ex.profile.rows)
    assert ex.profile_html() == ""  # off unless asked for


def test_the_widget_shows_the_profile_when_switched_on():
    pytest.importorskip("ipywidgets")
    _, t = template()
    ex = td.explore(t, profile=True, A=A_, B=B_)
    ex.widget()
    out = ex.outputs["profile"].value
    assert "profile" in out and "Cacc" in out and "<table>" in out
    ex.controls["ti"].value = 8
    assert "Cacc" in ex.outputs["profile"].value
    ex.profiling = False
    ex.update(ti=4)
    assert ex.outputs["profile"].value == ""
