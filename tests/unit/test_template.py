"""Knobs and templates: schedules with open choices, and the plain schedules they make."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tdsl as td


def matmul(n=24, k=20, m=16):
    i, j, kk = td.dims("i j k")
    A = td.input("A", {i: n, kk: k}, td.float32)
    B = td.input("B", {kk: k, j: m}, td.float32)
    return td.compute("C", {i: n, j: m}, td.sum(A[i, kk] * B[kk, j], over=kk))


A_T = np.random.default_rng(3).standard_normal((24, 20), dtype=np.float32)
B_T = np.random.default_rng(4).standard_normal((20, 16), dtype=np.float32)


def template(C):
    return (td.schedule(C)
            .tile(C, i=td.knob("ti", [4, 8, 16], default=8), j=td.knob("tj", [4, 8]))
            .reorder(C, td.knob("order", ["i_o j_o k i_i j_i", "i_o j_o i_i k j_i"]))
            .vectorize(C, "j_i")
            .parallel(C, td.knob("par", ["i_o", None])))


def plain(C, ti, tj, order, par):
    s = td.schedule(C).tile(C, i=ti, j=tj).reorder(C, order).vectorize(C, "j_i")
    return s.parallel(C, par) if par is not None else s


def test_a_knob_in_any_argument_makes_a_template_with_its_choices_and_defaults():
    C = matmul()
    t = template(C)
    assert isinstance(t, td.Template)
    assert t.knobs == {"ti": (4, 8, 16), "tj": (4, 8),
                       "order": ("i_o j_o k i_i j_i", "i_o j_o i_i k j_i"), "par": ("i_o", None)}
    assert t.defaults == {"ti": 8, "tj": 4, "order": "i_o j_o k i_i j_i", "par": "i_o"}
    assert t.space_size == 3 * 2 * 2 * 2
    assert t.loops(C) == ["i_o", "j_o", "k", "i_i", "j_i"]


@settings(max_examples=25, deadline=None)
@given(ti=st.sampled_from([4, 8, 16]), tj=st.sampled_from([4, 8]),
       order=st.sampled_from(["i_o j_o k i_i j_i", "i_o j_o i_i k j_i"]),
       par=st.sampled_from(["i_o", None]))
def test_instantiate_is_the_plain_chain_with_the_values_in_place(ti, tj, order, par):
    C = matmul()
    s = template(C).instantiate(ti=ti, tj=tj, order=order, par=par)
    assert isinstance(s, td.Schedule)
    assert s == plain(C, ti, tj, order, par)


def test_instantiate_without_values_takes_the_defaults():
    C = matmul()
    assert template(C).instantiate() == plain(C, 8, 4, "i_o j_o k i_i j_i", "i_o")
    assert template(C).instantiate(par=None) == plain(C, 8, 4, "i_o j_o k i_i j_i", None)


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_instantiated_schedules_compute_the_matmul(target):
    C = matmul()
    rng = np.random.default_rng(1)
    a = rng.standard_normal((24, 20), dtype=np.float32)
    b = rng.standard_normal((20, 16), dtype=np.float32)
    t = template(C)
    for values in ({}, {"ti": 16, "tj": 8, "order": "i_o j_o i_i k j_i", "par": None}):
        out = td.build(t.instantiate(**values), target=target)(A=a, B=b)
        np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


def test_unknown_knobs_and_values_outside_the_choices_are_refused_with_the_valid_ones():
    t = template(matmul())
    with pytest.raises(td.ScheduleError, match=r"no knob 'tk'; its knobs are: ti, tj, order, par"):
        t.instantiate(tk=4)
    with pytest.raises(td.ScheduleError, match=r"knob 'ti' has no choice 5; its choices are \[4, 8, 16\]"):
        t.instantiate(ti=5)
    with pytest.raises(td.ScheduleError, match="no choice True"):
        t.instantiate(tj=True)  # True is not 1, as in a JSON log


def test_a_call_is_checked_against_the_defaults_where_it_is_written():
    C = matmul()
    t = td.schedule(C).tile(C, i=td.knob("ti", [4, 8]), j=4)
    with pytest.raises(td.ScheduleError, match=r"with the knobs' defaults: .*no loop 'j_x'"):
        t.vectorize(C, "j_x")


def test_an_impossible_combination_raises_schedule_error_naming_the_values():
    C = matmul()
    t = td.schedule(C).split(C, "i", td.knob("f", [4, 8])).split(
        C, td.knob("which", ["i_i", "i"]), 2)
    assert t.instantiate().loops(C) == ["i_o", "i_i_o", "i_i_i", "j", "k"]
    with pytest.raises(td.ScheduleError, match=r"with f=4, which='i': .*no loop 'i'"):
        t.instantiate(which="i")


def test_bad_knobs_are_refused():
    with pytest.raises(td.ScheduleError, match="at least one choice"):
        td.knob("a", [])
    with pytest.raises(td.ScheduleError, match="lists a choice twice"):
        td.knob("a", [4, 4])
    with pytest.raises(td.ScheduleError, match="default 3 is not one of its choices"):
        td.knob("a", [4, 8], default=3)
    with pytest.raises(td.ScheduleError, match="choices are ints, floats, strings"):
        td.knob("a", [[1, 2]])
    with pytest.raises(td.ScheduleError, match="must be a list of values"):
        td.knob("a", "ij")
    C = matmul()
    with pytest.raises(td.ScheduleError, match="used twice with different choices"):
        td.schedule(C).split(C, "i", td.knob("f", [4, 8])).split(C, "j", td.knob("f", [2, 4]))


def test_one_knob_may_stand_in_several_places():
    C = matmul()
    f = td.knob("f", [4, 8])
    t = td.schedule(C).split(C, "i", f).split(C, "j", f)
    assert t.knobs == {"f": (4, 8)}
    assert t.instantiate(f=8) == td.schedule(C).split(C, "i", 8).split(C, "j", 8)


def test_json_round_trip_and_repr_rebuild_the_template():
    C = matmul()
    t = (td.schedule(C).cache_write(C, "Cacc")
         .tile(C, i=td.knob("ti", [4, 8]), j=8)
         .compute_at("Cacc", C, td.knob("at", ["i_o", "j_o"]))
         .vectorize(C, "j_i"))
    back = td.Template.from_json(t.to_json(), C)
    assert back == t and back.knobs == t.knobs and back.defaults == t.defaults
    assert back.instantiate(ti=8, at="j_o") == t.instantiate(ti=8, at="j_o")
    rebuilt = eval(repr(t), {"td": td, "C": C})
    assert rebuilt == t


def test_template_json_is_checked():
    C = matmul()
    text = template(C).to_json().replace('"method": "tile"', '"method": "explode"')
    with pytest.raises(td.ScheduleError, match="'explode' is not a schedule primitive"):
        td.Template.from_json(text, C)


def test_a_plain_schedule_is_a_template_without_knobs_and_build_refuses_a_template():
    C = matmul()
    s = td.schedule(C).split(C, "i", 4)
    t = td.Template(s)
    assert t.knobs == {} and t.space_size == 1 and t.instantiate() == s
    with pytest.raises(td.ScheduleError, match=r"template with open knobs \(ti, tj, order, par\)"):
        td.build(template(C))


def test_primitive_methods_explain_themselves():
    for name in ("split", "tile", "compute_at"):
        doc = getattr(td.Schedule, name).__doc__
        assert doc and "for " in doc, name
        assert getattr(td.Template, name).__doc__ == doc
    assert "td.knob" in td.knob.__doc__ and "instantiate" in td.Template.__doc__


def branched(C):
    return (td.schedule(C)
            .branch(td.knob("form", ["tile", "acc"]), {
                "tile": lambda t: t.tile(C, i=td.knob("ti", [4, 8]), j=8).vectorize(C, "j_i"),
                "acc": lambda t: (t.cache_write(C, "Cacc").tile(C, i=8, j=8)
                                  .compute_at("Cacc", C, "j_o").vectorize(C, "j_i")),
            })
            .parallel(C, td.knob("par", ["i_o", None])))


def test_a_branch_chooses_between_sequences_of_primitives():
    C = matmul()
    t = branched(C)
    assert t.knobs == {"form": ("tile", "acc"), "ti": (4, 8), "par": ("i_o", None)}
    tile = td.schedule(C).tile(C, i=8, j=8).vectorize(C, "j_i")
    acc = (td.schedule(C).cache_write(C, "Cacc").tile(C, i=8, j=8)
           .compute_at("Cacc", C, "j_o").vectorize(C, "j_i"))
    assert t.instantiate(ti=8, par=None) == tile
    assert t.instantiate(form="acc", par="i_o") == acc.parallel(C, "i_o")
    assert t.instantiate(form="acc", ti=4) == t.instantiate(form="acc", ti=8)
    assert "# when form == 'acc'" in repr(t)


def test_the_knobs_of_a_branch_not_chosen_do_not_count():
    C = matmul()
    t = branched(C)
    assert t.canonical({"form": "acc", "ti": 8, "par": None}) == {
        "form": "acc", "ti": 4, "par": None}
    assert t.canonical({"form": "tile", "ti": 8}) == {"form": "tile", "ti": 8, "par": "i_o"}
    # tile: 2 x 2, acc: 2 (ti does not matter there)
    assert t.space_size == 6
    r = td.tune(t, trials=20, progress=False, confirm=0, A=A_T, B=B_T)
    schedules = [json.dumps(h["schedule"], sort_keys=True) for h in r.history]
    assert len(schedules) == 6 and len(set(schedules)) == 6
    np.testing.assert_allclose(td.build(r.schedule)(A=A_T, B=B_T), A_T @ B_T, rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_every_branch_computes_the_matmul(target):
    C = matmul()
    t = branched(C)
    for values in ({}, {"form": "acc"}, {"form": "tile", "ti": 4, "par": None}):
        out = td.build(t.instantiate(**values), target=target)(A=A_T, B=B_T)
        np.testing.assert_allclose(out, A_T @ B_T, rtol=1e-5, atol=1e-5)


def test_branches_round_trip_through_json_and_bad_ones_are_refused():
    C = matmul()
    t = branched(C)
    back = td.Template.from_json(t.to_json(), C)
    assert back == t and back.knobs == t.knobs
    assert back.instantiate(form="acc") == t.instantiate(form="acc")
    text = t.to_json().replace('"when": [', '"when": [7, ', 1)
    with pytest.raises(td.ScheduleError, match='"when" must be a list of'):
        td.Template.from_json(text, C)
    form = td.knob("form", ["tile", "acc"])
    with pytest.raises(td.ScheduleError, match="'big' is not a choice of knob 'form'"):
        td.schedule(C).branch(form, {"big": lambda t: t.split(C, "i", 4)})
    with pytest.raises(td.ScheduleError, match="no loop|not a loop|unknown loop|has no"):
        td.schedule(C).branch(form, {"tile": lambda t: t.split(C, "i", 4),
                                     "acc": lambda t: t.split(C, "q", 4)})
    with pytest.raises(td.ScheduleError, match="must add calls"):
        td.schedule(C).branch(form, {"acc": lambda t: td.schedule(C)})
