"""A picture of a 2-D iteration space and its tiles, drawn from the polyhedral model.

The points are the stage's isl domain as lowering builds it, and each point's loop
values are isl's (the statement's band values): the picture shows what the compiler
will run, not a re-derivation of split arithmetic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import islpy as isl

from ..compute.pipeline import Pipeline
from ..display import new_figure, require
from ..errors import ArgumentError
from ..schedule.state import LFuse, LoopExpr, LOuter
from .poly.access import functions_map
from .poly.model import build_model
from .poly.nest import Statement

MAX_POINTS = 4096
MAX_ARROWS = 64  # tiles beyond this are numbered, not linked by arrows

Point = tuple[dict[str, int], tuple[int, ...]]  # dim values, loop values


def _tile_loop(e: LoopExpr) -> bool:
    """Whether a loop counts tiles: the outer loop of a split, or a fusion of such loops."""
    if isinstance(e, LOuter):
        return True
    return isinstance(e, LFuse) and _tile_loop(e.outer) and _tile_loop(e.inner)


def _statement(schedule: Any, stage: Any) -> Statement:
    name = stage if isinstance(stage, str) else getattr(stage, "name", None)
    model = build_model(schedule)
    for st in model.statements:
        if (st.stage is stage or st.stage.name == name) and st.role in ("pure", "update", "assign"):
            return st
    have = sorted({st.stage.name for st in model.statements if st.role != "bounds"})
    raise ArgumentError(f"plot_iteration_space: {name!r} is not a stage with loops of its own in "
                        f"this schedule (inlined stages have none); stages with loops: {have}")


def _fixed(x: Any, sizes: Mapping[str, int]) -> Any:
    """`x` with the symbolic sizes set to their values and every parameter projected out."""
    for n, v in sizes.items():
        k = x.find_dim_by_name(isl.dim_type.param, n)
        if k >= 0:
            x = x.fix_val(isl.dim_type.param, k, isl.Val.int_from_si(x.get_ctx(), int(v)))
    return x.project_out(isl.dim_type.param, 0, x.dim(isl.dim_type.param))


def _points(st: Statement, sizes: Mapping[str, int], shown: Sequence[str]) -> list[Point]:
    """The instances of `st` in the plane of the two `shown` dims (each other dim, in
    order, at its first value) with the value of each of its loops there: one
    enumeration of isl's map from the domain to the band values. Only the plane counts
    towards MAX_POINTS: a matmul's reduction dim, which is not drawn, does not."""
    dom = _fixed(st.domain, sizes)
    if not dom.is_bounded():
        raise ArgumentError("plot_iteration_space: the domain is unbounded for these sizes")
    for k, d in enumerate(st.dims):
        if d.name not in shown and not dom.is_empty():
            pos = st.n_prefix + k
            dom = dom.fix_val(isl.dim_type.set, pos, dom.dim_min_val(pos))
    n_pts = dom.count_val().to_python()
    if n_pts > MAX_POINTS:
        raise ArgumentError(f"plot_iteration_space: {n_pts} points in the plane of "
                            f"{shown[0]} and {shown[1]} is more than {MAX_POINTS}; draw a "
                            "smaller instance of the stage (smaller sizes)")
    graph = _fixed(functions_map(st.band_values, st.domain), sizes).intersect_domain(dom).wrap()
    names = [d.name for d in st.dims]
    n_in = st.n_prefix + len(names)
    found: list[Point] = []

    def visit(p: Any) -> None:
        val = [int(p.get_coordinate_val(isl.dim_type.set, k).to_python())
               for k in range(n_in + len(st.bands))]
        found.append((dict(zip(names, val[st.n_prefix:n_in])), tuple(val[n_in:])))

    graph.foreach_point(visit)
    return found


def iteration_points(schedule: Any, stage: Any, dims: Sequence[str] | None = None,
                     **sizes: int) -> tuple[list[str], list[tuple[int, int, tuple[int, ...], int]]]:
    """The data `plot_iteration_space` draws: the two dims shown, and for each point of
    the stage's domain in that plane (other dims at their first value) its two
    coordinates, its tile (the values of its tile loops) and the tile's rank in
    execution order. Same arguments as `plot_iteration_space`."""
    if not hasattr(schedule, "state") and hasattr(schedule, "instantiate"):
        schedule = schedule.instantiate()  # a template: its defaults
    st = _statement(schedule, stage)
    names = [d.name for d in st.dims]
    shown = [getattr(d, "name", d) for d in dims] if dims is not None else names[:2]
    if len(shown) != 2 or any(d not in names for d in shown) or shown[0] == shown[1]:
        raise ArgumentError(f"plot_iteration_space: dims must be two of {names}, got {shown}")
    missing = sorted({s.name for s in Pipeline(schedule.outputs).sizes} - set(sizes))
    if missing:
        raise ArgumentError(f"plot_iteration_space: give the sizes, e.g. "
                            f"{', '.join(f'{n}=16' for n in missing)}")
    found = _points(st, sizes, shown)
    tile_loops = [k for k, b in enumerate(st.bands) if _tile_loop(b.loop.expr)]
    first = {d: min(c[d] for c, _ in found) for d in names if d not in shown}
    plane = [(c, w) for c, w in found if all(c[d] == v for d, v in first.items())]
    start: dict[tuple[int, ...], tuple[int, ...]] = {}  # each tile's first loop values
    for _, w in plane:
        tile = tuple(w[k] for k in tile_loops)
        start[tile] = min(start.get(tile, w), w)
    rank = {t: n for n, t in enumerate(sorted(start, key=lambda t: start[t]))}
    pts = []
    for c, w in plane:
        tile = tuple(w[k] for k in tile_loops)
        pts.append((c[shown[0]], c[shown[1]], tile, rank[tile]))
    return shown, pts


def plot_iteration_space(schedule: Any, stage: Any, dims: Sequence[str] | None = None,
                         **sizes: int) -> Any:
    """A matplotlib Figure of a 2-D iteration space: each point of `stage`'s domain,
    coloured by the tile that computes it (the values of its tile loops: the outer loops
    of split and tile, and fusions of them), tiles numbered 0, 1, ... in the order they
    run and linked by arrows in that order. Drawn from the polyhedral model the compiler
    uses (isl's domain and each loop's value at each point), so it shows what the
    schedule really does, guards of non-divisible tiles included.

        s = td.schedule(Y).tile(Y, i=4, j=5)
        fig = td.plot_iteration_space(s, Y)          # rows i, columns j

    schedule: a Schedule (or a Template: its defaults). stage: the stage (or its name).
    dims: the two dims drawn (rows, columns), by default the stage's first two; other
    dims are fixed at their first value. sizes: values of symbolic sizes (`N=16`).
    Refuses planes of more than 4096 points (draw a smaller instance). The figure has
    one scatter collection per tile, in execution order. It is not one of pyplot's
    figures: end a notebook cell with it (or `display(fig)`) to show it, or
    `fig.savefig("space.png")`. Needs matplotlib (`pip install 'tdsl[notebook]'`)."""
    shown, pts = iteration_points(schedule, stage, dims, **sizes)
    n_tiles = 1 + max((p[3] for p in pts), default=-1)
    fig = new_figure((6, 5))
    ax = fig.add_subplot()
    cmap = require("matplotlib", "this plot").colormaps["tab20"]
    centres = []
    for n in range(n_tiles):
        xs = [p[1] for p in pts if p[3] == n]
        ys = [p[0] for p in pts if p[3] == n]
        ax.scatter(xs, ys, s=60, marker="s", color=cmap(n % 20))
        centres.append((sum(xs) / len(xs), sum(ys) / len(ys)))
        ax.annotate(str(n), centres[-1], ha="center", va="center", fontsize=9, weight="bold",
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "alpha": 0.8, "lw": 0})
    if n_tiles <= MAX_ARROWS:
        for a, b in zip(centres, centres[1:]):
            ax.annotate("", b, a, arrowprops={"arrowstyle": "->", "color": "0.35", "lw": 0.8,
                                              "shrinkA": 7, "shrinkB": 7})
    ax.invert_yaxis()
    ax.set_xlabel(shown[1])
    ax.set_ylabel(shown[0])
    ax.set_aspect("equal", adjustable="datalim")
    name = stage if isinstance(stage, str) else stage.name
    ax.set_title(f"{name}: {n_tiles} tile{'s' if n_tiles != 1 else ''}, numbered in execution order")
    return fig


__all__ = ["MAX_POINTS", "iteration_points", "plot_iteration_space"]
