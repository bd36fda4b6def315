"""What tdsl objects show in Jupyter: HTML, with code highlighted by Pygments when it is
installed (plain, escaped text otherwise), and the plots."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from .errors import TdslError

_LEXERS = {"c": "c", "llvm": "llvm", "python": "python", "nest": "c"}


def code_html(text: str, language: str = "python") -> str:
    """`text` as an HTML block, highlighted for `language` (c, llvm, python, nest) when
    Pygments is installed, else escaped and preformatted."""
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import get_lexer_by_name
    except ImportError:
        return f"<pre>{html.escape(text)}</pre>"
    fmt = HtmlFormatter(noclasses=True, nobackground=True)
    return highlight(text, get_lexer_by_name(_LEXERS.get(language, language)), fmt)


def details(summary: str, body: str, open_: bool = False) -> str:
    """A collapsible section; `summary` is escaped, `body` is HTML."""
    return (f"<details{' open' if open_ else ''}><summary>{html.escape(summary)}</summary>"
            f"{body}</details>")


def table(rows: Sequence[Sequence[str]], head: Sequence[str] | None = None) -> str:
    """A small HTML table of escaped text cells."""
    out = ["<table>"]
    if head:
        out.append("<tr>" + "".join(f"<th style='text-align:left'>{html.escape(h)}</th>"
                                    for h in head) + "</tr>")
    for r in rows:
        out.append("<tr>" + "".join(f"<td style='text-align:left'>{html.escape(c)}</td>"
                                    for c in r) + "</tr>")
    out.append("</table>")
    return "".join(out)


def require_matplotlib() -> Any:
    """matplotlib.pyplot, or TdslError naming the extra that installs it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise TdslError("plots need matplotlib: pip install 'tdsl[notebook]'") from None
    return plt


# ---------------------------------------------------------------- per object


def stage_html(t) -> str:
    """A tensor: its definition as written, its updates, and the stages and inputs of its
    pipeline in dependency order, each with what it reads."""
    from .compute.tensor import Pipeline, Stage

    shape = ", ".join(f"{d.name}: {e!r}" for d, e in zip(t.dims, t.shape))
    if not isinstance(t, Stage):
        code = f"{t.name} = td.input({t.name!r}, {{{shape}}}, {t.dtype!r})"
        return f"<div><b>input</b> {html.escape(t.name)}{code_html(code)}</div>"
    p = Pipeline(t)
    lines = [f"{t.name} = td.compute({t.name!r}, {{{shape}}}, {t.expr!r})"]
    lines += [repr(u) for u in p.updates_of(t)]
    rows = []
    for x in p.tensors:
        kind = "stage" if isinstance(x, Stage) else "input"
        reads = ", ".join(r.name for r in p.reads(x)) if isinstance(x, Stage) else ""
        dims = ", ".join(f"{d.name}: {e!r}" for d, e in zip(x.dims, x.shape))
        rows.append((x.name, kind, f"{{{dims}}}", x.dtype.name, reads))
    graph = table(rows, ("tensor", "kind", "shape", "dtype", "reads"))
    return (f"<div><b>stage</b> {html.escape(t.name)} ({html.escape(t.dtype.name)})"
            f"{code_html(chr(10).join(lines))}{details('pipeline', graph, True)}</div>")


def schedule_html(s) -> str:
    """A schedule: its primitives as the Python that rebuilds it, and each stage's loops."""
    st = s.state
    rows = []
    for x in st.pipeline.schedulables:
        found = st.resolve(x)
        if found is None:
            continue
        kind = st.compute[found].kind if found in st.compute else "root"
        loops = " ".join(st.loop_names(found)) if kind != "inline" else "(inlined)"
        rows.append((x.name, loops))
    return (f"<div><b>schedule</b> of {html.escape(', '.join(o.name for o in s.outputs))}, "
            f"{len(s.primitives)} primitives{code_html(repr(s))}"
            f"{details('loops of each stage', table(rows, ('stage', 'loops, outermost first')), True)}"
            "</div>")


def template_html(t) -> str:
    """A template: its calls with the knobs, and each knob's choices and default."""
    rows = [(n, ", ".join(repr(c) for c in k), repr(t.defaults[n])) for n, k in t.knobs.items()]
    return (f"<div><b>template</b> of {html.escape(', '.join(o.name for o in t.outputs))}: "
            f"{len(t.knobs)} knobs, {t.space_size} schedules{code_html(repr(t))}"
            f"{table(rows, ('knob', 'choices', 'default'))}</div>")


def nest_html(func) -> str:
    """A lowered loop nest, as td.lower prints it."""
    return f"<div><b>loop nest</b> {html.escape(func.name)}{code_html(str(func), 'nest')}</div>"


def timing_html(t) -> str:
    """Timing statistics: median, spread, runs."""
    hi = max(t.times) if t.times else t.min
    return (f"<div><b>{t.median * 1e3:.3f} ms</b> median per call "
            f"(min {t.min * 1e3:.3f}, max {hi * 1e3:.3f} ms over {t.runs} runs)</div>")


# ---------------------------------------------------------------- the iteration space

MAX_POINTS = 4096


def plot_iteration_space(schedule, stage, dims: Sequence[str] | None = None, **sizes: int):
    """A picture of a 2-D iteration space: each point of `stage`'s domain, coloured by the
    tile that computes it (the values of its split-outer loops), tiles numbered in the
    order they run. Drawn from the polyhedral model the compiler uses (isl's domain and
    each loop's value at each point), so it shows what the schedule really does.

        fig = td.plot_iteration_space(td.schedule(Y).tile(Y, i=4, j=5), Y)

    dims: the two dims drawn (rows, columns), by default the stage's first two; other
    dims are fixed at their first value. sizes: values of symbolic sizes. Refuses
    domains of more than 4096 points (draw a smaller instance)."""
    import islpy as isl

    from .compute.tensor import Pipeline
    from .errors import ArgumentError
    from .lower.poly.model import build_model
    from .schedule.state import LOuter

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
