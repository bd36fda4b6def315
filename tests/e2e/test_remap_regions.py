"""A stage computed inside a loop and read through a mirror or wrap view is computed
over the rows that loop's iteration reads, not over its whole extent.

The region was the whole axis: a 3x3 blur reading `td.mirror(bx)` with bx computed
per strip of 32 rows recomputed all of bx for every strip (1024^2: 18 ms on C
against 0.75 ms computed at root). Regions come from the reads within one period of
the axis (one reflection or shift); a read further out may touch any index.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tdsl as td
from tdsl.lower.poly.model import build_model

MODES = {"mirror": td.mirror, "mirror_interior": td.mirror_interior, "wrap": td.wrap}


def _blur(mode: str, h: int, w: int, dy: tuple[int, ...], dx: int):
    y, x = td.dims("y x")
    a = td.input("a", {y: h, x: w}, td.float32)
    s1 = td.compute("s1", {y: h, x: w}, a[y, x] * 2 + 1)
    view = MODES[mode](s1)
    terms = [view[y + d, x + dx] for d in dy]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    out = td.compute("out", {y: h, x: w}, total)
    return a, s1, out


def _strips(out, s1, rows: int, parallel: bool = False):
    s = td.schedule(out).split(out, "y", rows).compute_at(s1, out, "y_o")
    return s.parallel(out, "y_o") if parallel else s


@pytest.mark.parametrize("mode", ["mirror", "mirror_interior"])
def test_strip_region_is_the_strip_and_its_halo(mode):
    _, s1, out = _blur(mode, 64, 48, (-1, 0, 1), 2)
    box = build_model(_strips(out, s1, 8)).box_of(s1)
    assert box is not None
    assert [str(e) for e in box.extents] == ["{ [(10)] }", "{ [(46)] }"]  # x + 2 reads columns 2..47


def test_wrap_region_of_an_interior_strip_is_the_strip_and_its_halo():
    # the first strip reads row -1, i.e. row 63: its box spans the axis, the others not
    a, s1, out = _blur("wrap", 64, 8, (-1, 1), 0)
    f = td.build(_strips(out, s1, 8), target="c")
    av = np.random.default_rng(1).standard_normal((64, 8)).astype(np.float32)
    np.testing.assert_allclose(f(a=av), td.evaluate(out, a=av), rtol=1e-6)
    # strips 1-6 compute their 8 rows and one on each side
    assert "for (int64_t y = 8 * y_o - 1; y < 8 * y_o + 9; y++)" in f.source, f.source


@pytest.mark.parametrize("mode", sorted(MODES))
def test_blur_with_boundary_computed_per_strip_matches_numpy(mode, backend):
    a, s1, out = _blur(mode, 37, 29, (-1, 0, 1), -1)
    av = np.random.default_rng(2).standard_normal((37, 29)).astype(np.float32)
    f = td.build(_strips(out, s1, 8, parallel=True), target=backend)
    np.testing.assert_allclose(f(a=av), td.evaluate(out, a=av), rtol=1e-5, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(mode=st.sampled_from(sorted(MODES)), h=st.integers(1, 13), w=st.integers(1, 5),
       dy=st.lists(st.integers(-30, 30), min_size=1, max_size=3, unique=True),
       dx=st.integers(-6, 6), rows=st.integers(1, 6), parallel=st.booleans(),
       backend=st.sampled_from(["c", "llvm"]))
def test_reads_within_and_beyond_one_period_match_evaluate(mode, h, w, dy, dx, rows, parallel,
                                                           backend):
    # extents down to 1 (mirror_interior of one row reads it everywhere), offsets up to
    # several periods out, strips that do not divide the extent
    a, s1, out = _blur(mode, h, w, tuple(dy), dx)
    av = np.random.default_rng(h * 31 + w).standard_normal((h, w)).astype(np.float32)
    f = td.build(_strips(out, s1, rows, parallel), target=backend)
    np.testing.assert_allclose(f(a=av), td.evaluate(out, a=av), rtol=1e-5, atol=1e-5)


def test_exact_regions_beyond_the_analysis_budget_fall_back_to_the_whole_axis(monkeypatch):
    # a schedule whose exact regions cost isl more than its budget (fuzz C seed 3101
    # case 447 took 10 s there) lowers again with whole-axis regions, not refused
    from tdsl.lower.poly import access, budget

    def too_costly(*args):
        raise budget.AnalysisLimitError("the exact region ran out of its budget")

    monkeypatch.setattr(access, "_remapped", too_costly)
    a, s1, out = _blur("mirror", 40, 6, (-1, 1), 0)
    av = np.random.default_rng(3).standard_normal((40, 6)).astype(np.float32)
    for backend in ("c", "llvm"):
        f = td.build(_strips(out, s1, 8), target=backend)
        np.testing.assert_allclose(f(a=av), td.evaluate(out, a=av), rtol=1e-6)
    with access.whole_axis_remaps():
        box = build_model(_strips(out, s1, 8)).box_of(s1)
    assert box is not None and str(box.extents[0]) == "{ [(40)] }"
