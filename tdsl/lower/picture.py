"""A picture of a 2-D iteration space and its tiles, drawn from the polyhedral model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import islpy as isl

from ..compute.tensor import Pipeline
from ..display import require_matplotlib
from ..errors import ArgumentError
from ..schedule.state import LOuter
from .poly.model import build_model

MAX_POINTS = 4096


def plot_iteration_space(schedule: Any, stage: Any, dims: Sequence[str] | None = None,
                         **sizes: int) -> Any:
    """A picture of a 2-D iteration space: each point of `stage`'s domain, coloured by the
    tile that computes it (the values of its split-outer loops), tiles numbered in the
    order they run. Drawn from the polyhedral model the compiler uses (isl's domain and
    each loop's value at each point), so it shows what the schedule really does.

        fig = td.plot_iteration_space(td.schedule(Y).tile(Y, i=4, j=5), Y)

    dims: the two dims drawn (rows, columns), by default the stage's first two; other
    dims are fixed at their first value. sizes: values of symbolic sizes. Refuses
    domains of more than 4096 points (draw a smaller instance)."""
    plt = require_matplotlib()
    if not hasattr(schedule, "state"):
        schedule = schedule.instantiate() if hasattr(schedule, "instantiate") else schedule
    model = build_model(schedule)
    stmts = [x for x in model.statements if x.stage is stage and x.role in ("pure", "update", "assign")]
    if not stmts:
        raise ArgumentError(f"plot_iteration_space: {getattr(stage, 'name', stage)!r} is not a "
                            "stage with loops of its own in this schedule")
    st = stmts[0]
    names = [d.name for d in st.dims]
    shown = list(dims) if dims is not None else names[:2]
    if len(shown) != 2 or any(d not in names for d in shown):
        raise ArgumentError(f"plot_iteration_space: dims must be two of {names}, got {shown}")
    known = {s.name for s in Pipeline(schedule.outputs).sizes}
    missing = sorted(known - set(sizes))
    if missing:
        raise ArgumentError(f"plot_iteration_space: give the sizes, e.g. "
                            f"{', '.join(f'{n}=16' for n in missing)}")
    def fixed(x: Any) -> Any:  # the sizes' values in place of its parameters
        for n, v in sizes.items():
            k = x.find_dim_by_name(isl.dim_type.param, n)
            if k >= 0:
                x = x.fix_val(isl.dim_type.param, k, isl.Val.int_from_si(x.get_ctx(), int(v)))
        return x.project_out(isl.dim_type.param, 0, x.dim(isl.dim_type.param))

    dom = fixed(st.domain)
    loop_maps = [fixed(isl.Map.from_pw_aff(v)) for v in st.band_values]
    n_pts = dom.count_val().to_python() if dom.is_bounded() else MAX_POINTS + 1
    if n_pts > MAX_POINTS:
        raise ArgumentError(f"plot_iteration_space: {n_pts} points is more than {MAX_POINTS}; "
                            "draw a smaller instance of the stage")
    outer = [k for k, b in enumerate(st.bands) if isinstance(b.loop.expr, LOuter)]
    found: list[tuple[dict[str, int], tuple[int, ...]]] = []

    def visit(p: Any) -> None:
        coords = {names[k]: p.get_coordinate_val(isl.dim_type.set, st.n_prefix + k).to_python()
                  for k in range(len(names))}
        here = isl.Set.from_point(p)
        when = tuple(int(m.intersect_domain(here).range().sample_point().get_coordinate_val(
            isl.dim_type.set, 0).to_python()) for m in loop_maps)
        found.append((coords, when))

    dom.foreach_point(visit)
    rest = [d for d in names if d not in shown]  # other dims: at their first value
    first = {d: min(c[d] for c, _ in found) for d in rest}
    pts = [(c[shown[0]], c[shown[1]], tuple(w[k] for k in outer), w) for c, w in found
           if all(c[d] == first[d] for d in rest)]
    tiles = sorted({p[2] for p in pts})
    order = {t: n for n, t in enumerate(sorted(tiles, key=lambda t: min(p[3] for p in pts if p[2] == t)))}
    fig, ax = plt.subplots(figsize=(6, 5))
    cmap = plt.get_cmap("tab20")
    for t in tiles:
        xs = [p[1] for p in pts if p[2] == t]
        ys = [p[0] for p in pts if p[2] == t]
        ax.scatter(xs, ys, s=60, color=cmap(order[t] % 20), label=str(order[t]))
        ax.annotate(str(order[t]), (sum(xs) / len(xs), sum(ys) / len(ys)), ha="center",
                    va="center", fontsize=9, weight="bold")
    ax.invert_yaxis()
    ax.set_xlabel(shown[1])
    ax.set_ylabel(shown[0])
    loops = " ".join(b.loop.name for b in st.bands)
    ax.set_title(f"{stage.name}: {len(tiles)} tiles in execution order (loops {loops})")
    fig.tight_layout()
    plt.close(fig)
    return fig
