"""What tdsl objects show in Jupyter, and the iteration-space picture."""

import matplotlib
import numpy as np
import pytest

import tdsl as td

matplotlib.use("Agg")


def matmul():
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: 32, k: 24}, td.float32)
    B = td.input("B", {k: 24, j: 16}, td.float32)
    return td.compute("C", {i: 32, j: 16}, td.sum(A[i, k] * B[k, j], over=k))


def text(page: str) -> str:
    """The page without tags or Pygments' spans, entities kept."""
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_a_stage_shows_its_definition_and_its_pipeline():
    C = matmul()
    page = text(C._repr_html_())
    assert "C = td.compute('C', {i: 32, j: 16}, td.sum(A[i, k] * B[k, j], over={k: (0, 24)}))" in page
    assert "Ainput{i: 32, k: 24}float32" in page and "Cstage{i: 32, j: 16}float32A, B" in page
    assert "A = td.input" in text(C.expr.body.a.tensor._repr_html_())


def test_names_are_escaped():
    (i,) = td.dims("i")
    X = td.input("X", {i: 4}, td.float32)
    Y = td.compute("Y", {i: 4}, td.where(X[i] < 1, X[i], 2.0))
    page = Y._repr_html_()
    assert "X[i] < 1.0" not in page  # the comparison is escaped in the HTML ...
    assert "td.where(X[i] < 1.0, X[i], 2.0)" in text(page)  # ... and reads as written


def test_a_schedule_shows_its_code_and_the_loops_of_each_stage():
    C = matmul()
    s = td.schedule(C).cache_write(C, "Cacc").tile(C, i=8, j=8)
    page = text(s._repr_html_())
    assert ".cache_write(C, name='Cacc')" in page and ".tile(C, i=8, j=8)" in page
    assert "Ci_o j_o i_i j_i" in page and "Cacci j k" in page


def test_a_template_shows_its_knobs():
    C = matmul()
    t = td.schedule(C).tile(C, i=td.knob("ti", [4, 8], default=8), j=8)
    page = text(t._repr_html_())
    assert "1 knobs, 2 schedules" in page and "ti4, 88" in page


def test_the_lowered_nest_shows_as_the_nest_not_its_fields():
    C = matmul()
    nest = td.lower(td.schedule(C).split(C, "i", 8))
    page = text(nest._repr_html_())
    assert "for i_o" in page and "LoweredFunc(" not in page
    import IPython.lib.pretty as pretty

    assert pretty.pretty(nest) == str(nest)


def test_kernel_and_timing_show_their_facts():
    C = matmul()
    f = td.build(td.schedule(C), target="llvm")
    page = f._repr_html_()
    assert "Loop nest" in page and "Generated code" in page and "define" in text(page)
    a, b = np.ones((32, 24), np.float32), np.ones((24, 16), np.float32)
    t = f.benchmark(A=a, B=b, runs=3)
    page = text(t._repr_html_())
    assert f"{t.median * 1e3:.3f} ms median" in page and "over 3 runs" in page


def test_the_iteration_space_is_coloured_by_tile_in_execution_order():
    i, j = td.dims("i j")
    X = td.input("X", {i: 10, j: 12}, td.float32)
    Y = td.compute("Y", {i: 10, j: 12}, X[i, j] * 2)
    fig = td.plot_iteration_space(td.schedule(Y).tile(Y, i=4, j=5), Y)
    groups = fig.axes[0].collections
    assert len(groups) == 9  # ceil(10/4) x ceil(12/5) tiles
    for n, g in enumerate(groups):
        pts = g.get_offsets()
        ti, tj = divmod(n, 3)  # tiles run row-major: i_o outside j_o
        assert all(int(y) // 4 == ti and int(x) // 5 == tj for x, y in pts), n
    assert sum(len(g.get_offsets()) for g in groups) == 120
    # reordered: j_o outside i_o, so the second tile is the one below the first
    fig = td.plot_iteration_space(td.schedule(Y).tile(Y, i=4, j=5).reorder(Y, "j_o i_o i_i j_i"), Y)
    second = fig.axes[0].collections[1].get_offsets()
    assert {int(y) // 4 for _, y in second} == {1} and {int(x) // 5 for x, _ in second} == {0}


def test_the_iteration_space_refuses_what_it_cannot_draw():
    i, j = td.dims("i j")
    N = td.size("N")
    X = td.input("X", {i: N, j: 100}, td.float32)
    Y = td.compute("Y", {i: N, j: 100}, X[i, j] * 2)
    with pytest.raises(td.ArgumentError, match="give the sizes, e.g. N=16"):
        td.plot_iteration_space(td.schedule(Y), Y)
    with pytest.raises(td.ArgumentError, match="more than 4096"):
        td.plot_iteration_space(td.schedule(Y), Y, N=100)
    with pytest.raises(td.ArgumentError, match="dims must be two of"):
        td.plot_iteration_space(td.schedule(Y), Y, dims=["i", "k"], N=4)
    fig = td.plot_iteration_space(td.schedule(Y).split(Y, "j", 50), Y, N=3)
    assert len(fig.axes[0].collections) == 2
