"""What tdsl objects show in Jupyter, and the iteration-space picture."""

import re
import sys

import matplotlib
import numpy as np
import pytest

import tdsl as td
from tdsl.compute.pipeline import Pipeline
from tdsl.compute.work import flops
from tdsl.display import code_html, details, escape, rate_text, seconds_text, table
from tdsl.lower.picture import iteration_points

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
    assert "sizes bound" not in page  # none here
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
    assert "Ci_o j_o i_i j_iroot" in page and "Cacci j kroot" in page


def test_a_schedule_shows_how_each_loop_runs_and_where_each_stage_is_computed():
    i, j = td.dims("i j")
    X = td.input("X", {i: 16, j: 16}, td.float32)
    P = td.compute("P", {i: 16, j: 16}, X[i, j] * 2)
    Q = td.compute("Q", {i: 16, j: 16}, P[i, j] + 1)
    s = td.schedule(Q).split(Q, "i", 4).compute_at(P, Q, "i_o").vectorize(Q, "j").parallel(Q, "i_o")
    page = text(s._repr_html_())
    assert "Pi jat Q.i_o" in page and "Qi_o (parallel) i_i j (vectorized)root" in page
    page = text(td.schedule(Q).compute_inline(P)._repr_html_())
    assert "P(inlined)inlined into its consumers" in page


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


def test_the_lowered_nest_reads_as_the_nest_everywhere():
    C = matmul()
    nest = td.lower(td.schedule(C).split(C, "i", 8))
    assert repr(nest) == str(nest) and repr(nest).startswith("func tdsl_C(")


@pytest.mark.parametrize("target, language", [("c", "#include <stdint.h>"), ("llvm", "define i32")])
def test_a_kernel_shows_its_arguments_nest_and_collapsed_code(target, language):
    C = matmul()
    f = td.build(td.schedule(C).split(C, "i", 8), target=target)
    page = f._repr_html_()
    assert "<details open><summary>Arguments</summary>" in page
    lines = f.loop_nest.count("\n") + 1
    assert f"<details open><summary>Loop nest ({lines} lines)</summary>" in page  # short: open
    assert f"<details><summary>Generated {'C' if target == 'c' else 'LLVM IR'}</summary>" in page
    shown = text(page)
    assert "Ainput float32[32, 24]" in shown and "Coutput float32[32, 16]" in shown
    assert "for i_o in 0 .. 4:" in shown and language in shown
    assert "<span" in page  # highlighted


def test_a_timing_shows_median_spread_runs_and_rate():
    C = matmul()
    f = td.build(td.schedule(C), target="llvm")
    a, b = np.ones((32, 24), np.float32), np.ones((24, 16), np.float32)
    t = f.benchmark(A=a, B=b, runs=3)
    assert t.runs == 3 and t.min <= t.median <= t.max == max(t.times)
    assert t.flops == 2 * 32 * 16 * 24 and t.elements == 32 * 16
    assert t.rate == (t.flops / t.median, "FLOP/s") and t.gflops == pytest.approx(t.flops / t.median / 1e9)
    page = text(t._repr_html_())
    assert f"{seconds_text(t.median)} median per call" in page and "over 3 runs" in page
    assert f"spread {seconds_text(t.min)} .. {seconds_text(t.max)}" in page
    assert rate_text(*t.rate) in page and "FLOP/s" in repr(t)
    # no float arithmetic: the rate is in output elements
    (i,) = td.dims("i")
    X = td.input("X", {i: 100}, td.int32)
    Y = td.compute("Y", {i: 100}, X[i] * 3 + 1)
    t = td.build(td.schedule(Y)).benchmark(X=np.arange(100, dtype=np.int32), runs=2)
    assert t.flops == 0 and t.rate is not None and t.rate[1] == " elements/s"
    assert "elements/s" in text(t._repr_html_())
    assert "rate" not in text(td.Timing(1e-3, 1e-3, 1, (1e-3,))._repr_html_())


def test_the_work_is_the_algorithms_float_operations():
    i, j, k = td.dims("i j k")
    N = td.size("N")
    A = td.input("A", {i: N, k: 24}, td.float32)
    C = td.compute("C", {i: N, j: 16}, td.sum(A[i, k] * 2.0, over=k))
    D = td.compute("D", {i: N, j: 16}, td.exp(C[i, j]) + C[i, j] / 2)
    assert flops(Pipeline(C), {"N": 10}) == 10 * 16 * 24 * 2
    assert flops(Pipeline(D), {"N": 10}) == 10 * 16 * 24 * 2 + 10 * 16 * 3
    T = td.compute("T", {i: N}, td.sum(A[i, k], over={k: (0, i + 1)}))  # a triangle
    assert flops(Pipeline(T), {"N": 10}) is None
    y = td.compute("y", {i: N}, A[i, 0] * 1)
    td.update(y[i], y[i - 1] + A[i, 1], over={i: (1, N)})
    assert flops(Pipeline(y), {"N": 10}) == 10 + 9


def test_without_pygments_code_is_escaped_plain_text(monkeypatch):
    monkeypatch.setitem(sys.modules, "pygments", None)
    page = code_html("if a < b && c > d:", "c")
    assert re.fullmatch(r"<pre style='[^']*'>if a &lt; b &amp;&amp; c &gt; d:</pre>", page)
    (i,) = td.dims("i")
    X = td.input("X", {i: 4}, td.float32)
    Y = td.compute("Y", {i: 4}, td.where(X[i] < 1, X[i], 2.0))
    assert "'>Y = td.compute(&#x27;Y&#x27;, {i: 4}, td.where(X[i] &lt; 1.0" in Y._repr_html_()


def test_every_user_name_is_escaped():
    C = matmul()
    t = td.schedule(C).parallel(C, td.knob("<b>par", ["i", "<script>"]))
    page = t._repr_html_()
    assert "<b>par" not in page and "<script>" not in page
    assert "<b>par" in text(page) and "'<script>'" in text(page)
    assert "<" not in escape("<i>") and text(table([["<x>"]])) == "<x>"
    assert details("<y>", "<p>body</p>") == "<details><summary>&lt;y&gt;</summary><p>body</p></details>"


def test_an_update_shows_itself_and_its_pipeline():
    (r,) = td.dims("r")
    N = td.size("N")
    x = td.input("x", {r: N}, td.float32)
    y = td.compute("y", {r: N}, x[r] * 1)
    u = td.update(y[r], y[r - 1] + x[r], over={r: (1, N)})
    page = text(u._repr_html_())
    assert "update y.u0" in page and "td.update(y[r], y[r - 1] + x[r], over={r: (1, N)})" in page
    assert "y.u0update of yover {r: (1, N)}y, x" in page and "sizes bound at call time: N" in page
    assert "td.update(y[r]" in text(y._repr_html_())


def test_missing_optional_packages_name_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    i, j = td.dims("i j")
    X = td.input("X", {i: 4, j: 4}, td.float32)
    Y = td.compute("Y", {i: 4, j: 4}, X[i, j] * 2)
    with pytest.raises(td.MissingDependency, match=r"pip install 'tdsl\[notebook\]'"):
        td.plot_iteration_space(td.schedule(Y), Y)


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


def test_a_matmul_plane_is_drawn_without_counting_the_reduction_dim():
    """Only the plane drawn counts towards the 4096 points: a 64 x 64 matmul over 512
    values of k was refused as 2 million points."""
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: 64, k: 512}, td.float32)
    B = td.input("B", {k: 512, j: 64}, td.float32)
    C = td.compute("C", {i: 64, j: 64}, td.sum(A[i, k] * B[k, j], over=k))
    fig = td.plot_iteration_space(td.schedule(C).tile(C, i=32, j=16), C)
    assert len(fig.axes[0].collections) == 8
    assert sum(len(g.get_offsets()) for g in fig.axes[0].collections) == 64 * 64
    with pytest.raises(td.ArgumentError, match="points in the plane of i and k"):
        td.plot_iteration_space(td.schedule(C), C, dims=("i", "k"))


def test_plots_are_not_pyplot_figures_so_a_cell_shows_them_once():
    """A closed pyplot figure assigned in a cell showed nothing; an open one returned as the
    cell's value shows twice. The helpers return figures pyplot does not manage."""
    import io

    import matplotlib.pyplot as plt

    i, j = td.dims("i j")
    X = td.input("X", {i: 8, j: 8}, td.float32)
    Y = td.compute("Y", {i: 8, j: 8}, X[i, j] + 1)
    before = plt.get_fignums()
    fig = td.plot_iteration_space(td.schedule(Y).tile(Y, i=4, j=4), Y)
    assert plt.get_fignums() == before and fig.canvas.manager is None
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue().startswith(b"\x89PNG")


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


def test_fused_tile_loops_count_tiles_and_every_tile_has_its_own_colour():
    i, j = td.dims("i j")
    X = td.input("X", {i: 8, j: 9}, td.float32)
    Y = td.compute("Y", {i: 8, j: 9}, X[i, j] + 1)
    s = td.schedule(Y).tile(Y, i=4, j=3).fuse(Y, "i_o", "j_o")
    fig = td.plot_iteration_space(s, "Y", dims=("j", "i"))  # rows j, columns i
    groups = fig.axes[0].collections
    assert len(groups) == 6
    for n, g in enumerate(groups):  # the fused loop i_o * 3 + j_o counts tiles in order
        assert {(int(x) // 4, int(y) // 3) for x, y in g.get_offsets()} == {divmod(n, 3)}
    colours = {tuple(g.get_facecolor()[0]) for g in groups}
    assert len(colours) == 6
    assert fig.axes[0].get_xlabel() == "i" and fig.axes[0].get_ylabel() == "j"
    with pytest.raises(td.ArgumentError, match="stages with loops: \\['Y'\\]"):
        td.plot_iteration_space(s, "Z")


def test_a_computed_at_producer_shows_its_own_loops():
    i, j = td.dims("i j")
    X = td.input("X", {i: 6, j: 8}, td.float32)
    P = td.compute("P", {i: 6, j: 8}, X[i, j] * 2)
    Q = td.compute("Q", {i: 6, j: 8}, P[i, j] + 1)
    s = td.schedule(Q).split(Q, "i", 3).compute_at(P, Q, "i_o").split(P, "j", 4)
    shown, pts = iteration_points(s, P)
    assert shown == ["i", "j"] and len(pts) == 48
    # P's tile: the consumer's i_o it is computed in, then its own j_o
    assert all(tile == (r // 3, c // 4) and rank == 2 * (r // 3) + c // 4
               for r, c, tile, rank in pts)


def test_a_lowering_trace_shows_each_step_the_last_one_open():
    C = matmul()
    trace = td.lower(td.schedule(C).split(C, "i", 8), trace=True)
    page = trace._repr_html_()
    assert page.count("<details") == len(trace)
    assert "<details><summary>after convert</summary>" in page
    # the last step that changed: auto_simd marks the j loop around the sum
    assert page.count("<details open>") == 1 and "<details open><summary>after auto_simd<" in page
    assert "<details><summary>after flatten</summary>" in page
    assert "<summary>after legalise: unchanged</summary>" in page  # nothing to legalise here
    assert "for i_o in 0 .. 4:" in text(page)


def test_a_long_loop_nest_is_collapsed_and_says_how_long_it_is():
    C = matmul()
    f = td.build(td.autoschedule(C, target="c"))
    lines = f.loop_nest.count("\n") + 1
    assert lines > 30
    page = f._repr_html_()
    assert f"<details><summary>Loop nest ({lines} lines)</summary>" in page


def _luminance(colour: str) -> float:
    if len(colour) == 4:  # #abc is #aabbcc
        colour = "#" + "".join(c * 2 for c in colour[1:])
    rgb = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("language", ["c", "llvm", "python", "nest", "unknown-language"])
def test_code_brings_its_own_background_so_every_colour_reads_in_a_dark_theme(language):
    """JupyterLab's dark theme puts outputs on near-black: a block that relied on the page's
    background showed Pygments' dark blues and greens on it. Each block sets a light
    background and text colour, and every colour in it keeps WCAG's 4.5:1 against it."""
    C = matmul()
    f = td.build(td.schedule(C).split(C, "i", 8))
    source = {"c": f.source, "llvm": td.build(td.schedule(C), target="llvm").source,
              "python": repr(td.schedule(C).split(C, "i", 8)), "nest": f.loop_nest,
              "unknown-language": "x = 1"}[language]
    page = code_html(source, language)
    outer = re.match(r"<(div|pre) style='([^']*)'", page)
    assert outer is not None, page[:200]
    style = dict(p.split(":", 1) for p in outer.group(2).split(";") if p)
    background = style["background"]
    spans = re.findall(r'<span style="color: ?(#[0-9a-fA-F]{6}|#[0-9a-fA-F]{3})\b[^"]*">([^<]*)<',
                       page)
    colours = {c for c, shown in spans if shown.strip()} | {style["color"]}  # not blanks
    assert len(colours) >= (1 if language == "unknown-language" else 3)
    for c in colours:
        assert _contrast(c, background) >= 4.5, (c, background)
