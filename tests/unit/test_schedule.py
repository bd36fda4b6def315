"""The schedule language: records, chaining, validation messages, JSON and repr."""

from __future__ import annotations

import pytest

import tdsl as td


@pytest.fixture
def mm():
    i, j, k = td.dims("i j k")
    N = td.size("N")
    A = td.input("A", {i: N, k: 64}, td.float32)
    B = td.input("B", {k: 64, j: 32}, td.float32)
    C = td.compute("C", {i: N, j: 32}, td.sum(A[i, k] * B[k, j], over=k))
    return A, B, C, (i, j, k)


@pytest.fixture
def blur():
    x, y = td.dims("x y")
    inp = td.input("inp", {y: 16, x: 16}, td.float32)
    bx = td.compute("bx", {y: 16, x: 14}, inp[y, x] + inp[y, x + 1] + inp[y, x + 2])
    by = td.compute("by", {y: 14, x: 14}, bx[y, x] + bx[y + 1, x] + bx[y + 2, x])
    return inp, bx, by


def test_loops_follow_design_names(mm):
    _, _, C, (i, j, k) = mm
    s = td.schedule(C)
    assert s.loops(C) == ["i", "j", "k"]
    s = s.tile(C, i=32, j=8)
    assert s.loops(C) == ["i_o", "j_o", "i_i", "j_i", "k"]
    s = s.split(C, k, 4).reorder(C, "i_o j_o k_o i_i k_i j_i")
    assert s.loops(C) == ["i_o", "j_o", "k_o", "i_i", "k_i", "j_i"]
    assert s.fuse(C, "i_o", "j_o").loops(C)[0] == "i_o_j_o"
    assert td.schedule(C).split(C, "i", 4, names=("io", "ii")).loops(C) == ["io", "ii", "j", "k"]


def test_schedule_is_immutable_and_records_match_methods(mm):
    _, _, C, _ = mm
    s0 = td.schedule(C)
    s1 = s0.split(C, "k", 4)
    assert s0.primitives == () and s0.loops(C) == ["i", "j", "k"]
    assert s1 == td.schedule(C, [td.Split(C, "k", 4)])
    assert s1.primitives == (td.Split(C, "k", 4),)


def test_json_round_trip_and_repr(mm, blur):
    _, _, C, _ = mm
    s = (td.schedule(C).tile(C, i=32, j=8).split(C, "k", 4, names=("ko", "ki"))
         .reorder(C, "i_o j_o ko i_i ki j_i").vectorize(C, "j_i").parallel(C, "i_o")
         .unroll(C, "ki"))
    assert td.Schedule.from_json(s.to_json(), C) == s
    assert eval(repr(s), {"td": td, "C": C}) == s
    _, bx, by = blur
    s = td.schedule(by).split(by, "y", 4).compute_at(bx, by, "y_o").store_at(bx, by, "y_o")
    assert td.Schedule.from_json(s.to_json(), by) == s
    assert eval(repr(s), {"td": td, "bx": bx, "by": by}) == s


@pytest.mark.parametrize("make, words", [
    (lambda s, C: s.split(C, "zz", 4), ["split", "no loop 'zz'", "i j k"]),
    (lambda s, C: s.split(C, "i", 0), ["factor", "positive"]),
    (lambda s, C: s.split(C, "i", 2.5), ["factor", "positive"]),
    (lambda s, C: s.split(C, "i", 2, names=("j", "x")), ["already has a loop named 'j'"]),
    (lambda s, C: s.reorder(C, "i i"), ["listed more than once"]),
    (lambda s, C: s.reorder(C, "i q"), ["no loop 'q'"]),
    (lambda s, C: s.fuse(C, "i", "k"), ["directly outside"]),
    (lambda s, C: s.fuse(C, "k", "i"), ["directly outside"]),
    (lambda s, C: s.fuse(C, "i", "j", name="k"), ["already has a loop named 'k'"]),
    (lambda s, C: s.vectorize(C, "i"), ["no constant extent", "split"]),
    (lambda s, C: s.unroll(C, "i"), ["no constant extent"]),
    (lambda s, C: s.parallel(C, "k"), ["reduction loop", "race"]),
    (lambda s, C: s.vectorize(C, "k"), ["reduction loop"]),
    (lambda s, C: s.tile(C, i=4, k=4), ["adjacent"]),
    (lambda s, C: s.vectorize(C, "j").split(C, "j", 4), ["already vectorized"]),
    (lambda s, C: s.compute_inline(C), ["output"]),
    (lambda s, C: s.split("Q", "i", 2), ["no stage named 'Q'"]),
])
def test_schedule_mistakes(mm, make, words):
    _, _, C, _ = mm
    with pytest.raises(td.ScheduleError) as e:
        make(td.schedule(C), C)
    for w in words:
        assert w in str(e.value)


def test_input_is_not_schedulable(mm):
    A, _, C, _ = mm
    with pytest.raises(td.ScheduleError, match="A.*is an input"):
        td.schedule(C).split(A, "i", 2)


def test_compute_at_mistakes(blur):
    inp, bx, by = blur
    s = td.schedule(by)
    with pytest.raises(td.ScheduleError, match="output of the pipeline"):
        s.split(by, "y", 2).compute_at(by, by, "y_o")
    with pytest.raises(td.ScheduleError, match="no loop 'q'"):
        s.compute_at(bx, by, "q")
    with pytest.raises(td.ScheduleError, match="r has updates"):
        i, k = td.dims("i k")
        a = td.input("a", {i: 4, k: 4}, td.int32)
        r = td.compute("r", {i: 4}, td.sum(a[i, k], over=k))
        td.update(r[i], r[i] + 1, over={i: 4})
        o = td.compute("o", {i: 4}, r[i] * 2)
        td.schedule(o).compute_inline(r)
    with pytest.raises(td.ScheduleError, match="inlined"):
        s.compute_inline(bx).split(bx, "y", 2)


def test_compute_at_loop_renamed_later_is_reported(blur):
    _, bx, by = blur
    s = td.schedule(by).compute_at(bx, by, "y").split(by, "y", 4)
    with pytest.raises(td.ScheduleError, match="no loop 'y' after the later primitives"):
        td.lower(s)


def test_store_outside_parallel_compute_is_refused(blur):
    _, bx, by = blur
    s = (td.schedule(by).split(by, "y", 4).parallel(by, "y_i").compute_at(bx, by, "y_i")
         .store_at(bx, by, "y_o"))
    with pytest.raises(td.ScheduleError, match="threads would share"):
        td.lower(s)


def test_compute_at_with_another_consumer_outside(blur):
    x, y = td.dims("x y")
    inp = td.input("inp", {y: 8, x: 8}, td.float32)
    p = td.compute("p", {y: 8, x: 8}, inp[y, x] * 2)
    c1 = td.compute("c1", {y: 8, x: 8}, p[y, x] + 1)
    c2 = td.compute("c2", {y: 8, x: 8}, p[y, x] + c1[y, x])
    s = td.schedule(c2).compute_at(p, c1, "y")
    with pytest.raises(td.ScheduleError, match="also read by c2"):
        td.lower(s)


def test_json_errors(mm):
    _, _, C, _ = mm
    with pytest.raises(td.ScheduleError, match="malformed"):
        td.Schedule.from_json("{", C)
    with pytest.raises(td.ScheduleError, match="unknown primitive"):
        td.Schedule.from_json('{"version": 1, "primitives": [{"type": "Nope"}]}', C)
