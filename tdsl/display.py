"""HTML helpers for what tdsl objects show in Jupyter: code highlighted by Pygments when it
is installed (plain, escaped text otherwise), collapsible sections, tables, rates; the
optional packages the notebook features need. Each object writes its own page with these.

Every helper escapes the text it is given (stage, tensor and loop names are the user's):
only the `body` of `details` is HTML, and it comes from these helpers."""

from __future__ import annotations

import html
import sys
from collections.abc import Sequence
from typing import Any

from .errors import MissingDependency

# Pygments lexer per kind of text: the loop nest reads as Python (for/in/if, `#` notes),
# which C's lexer would mark as errors
_LEXERS = {"c": "c", "llvm": "llvm", "python": "python", "nest": "python"}

# Pygments' colours are chosen for a light page, so a code block brings its own light
# background and text colour: readable in JupyterLab's dark theme too, where the page
# is dark and an unset background would leave dark blue and green on near-black
CODE_BACKGROUND = "#f8f8f8"
CODE_FOREGROUND = "#1f1f1f"
_CODE_STYLE = (f"background:{CODE_BACKGROUND};color:{CODE_FOREGROUND};padding:4px 8px;"
               "border-radius:3px;overflow-x:auto;line-height:125%")


def escape(text: object) -> str:
    """`str(text)` with &, <, >, and quotes escaped for HTML."""
    return html.escape(str(text))


def code_html(text: str, language: str = "python") -> str:
    """`text` as an HTML block, highlighted for `language` (c, llvm, python, nest) when
    Pygments is installed, else escaped and preformatted; either way on a light
    background of its own (`CODE_BACKGROUND`), so it reads alike in light and dark
    themes."""
    plain = f"<pre style='{_CODE_STYLE}'>{escape(text)}</pre>"
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import get_lexer_by_name
        from pygments.util import ClassNotFound
    except ImportError:
        return plain
    try:
        lexer = get_lexer_by_name(_LEXERS.get(language, language))
    except ClassNotFound:
        return plain
    # only the coloured spans from Pygments, in a <pre> of ours: a theme's rules for
    # Pygments' own `highlight` wrapper (JupyterLab's dark one) cannot reach it
    body = highlight(text, lexer, HtmlFormatter(noclasses=True, nobackground=True, nowrap=True))
    return f"<pre style='{_CODE_STYLE}'>{body}</pre>"


def details(summary: str, body: str, open_: bool = False) -> str:
    """A collapsible section; `summary` is escaped, `body` is HTML."""
    return (f"<details{' open' if open_ else ''}><summary>{escape(summary)}</summary>"
            f"{body}</details>")


def table(rows: Sequence[Sequence[str]], head: Sequence[str] | None = None) -> str:
    """A small HTML table of escaped text cells."""
    out = ["<table>"]
    if head:
        out.append("<tr>" + "".join(f"<th style='text-align:left'>{escape(h)}</th>"
                                    for h in head) + "</tr>")
    for r in rows:
        out.append("<tr>" + "".join(f"<td style='text-align:left'>{escape(c)}</td>"
                                    for c in r) + "</tr>")
    out.append("</table>")
    return "".join(out)


def rate_text(per_second: float, unit: str) -> str:
    """A rate with an SI prefix: `rate_text(3.2e10, "FLOP/s")` is '32.0 GFLOP/s'."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if per_second >= factor:
            return f"{per_second / factor:.1f} {prefix}{unit}"
    return f"{per_second:.1f} {unit}"


def seconds_text(seconds: float) -> str:
    """A duration in the unit that reads best: '1.234 ms', '56.7 us', '2.50 s'."""
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


def require(module: str, feature: str) -> Any:
    """The optional `module`, imported; or MissingDependency naming the extra that
    installs it (every notebook package is in `tdsl[notebook]`)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        raise MissingDependency(
            f"{feature} needs {top}, which is not installed: pip install 'tdsl[notebook]'"
        ) from None


def new_figure(size: tuple[float, float]) -> Any:
    """A matplotlib Figure of `size` inches with a tight layout, or MissingDependency
    naming the extra that installs matplotlib.

    It is not one of pyplot's figures: nothing shows it behind the caller's back, so a
    notebook cell that ends with it shows it once (a pyplot figure would show twice,
    once as the cell's value and once when pyplot draws its open figures), a script
    saves it with `fig.savefig(path)`, and no figure stays open in pyplot's list."""
    figure = require("matplotlib.figure", "this plot")
    _show_figures_in_ipython(figure.Figure)
    return figure.Figure(figsize=size, layout="tight")


def _show_figures_in_ipython(kind: type) -> None:
    """In IPython, make sure a Figure shows as a PNG: matplotlib's inline backend
    registers that only once pyplot has been imported, which tdsl's plots do not need."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return
    png = shell.display_formatter.formatters["image/png"]
    try:
        png.lookup_by_type(kind)
    except KeyError:
        from IPython.core.pylabtools import print_figure

        png.for_type(kind, lambda fig: print_figure(fig, "png"))
