"""HTML helpers for what tdsl objects show in Jupyter: code highlighted by Pygments when it
is installed (plain, escaped text otherwise), collapsible sections, tables; matplotlib
for the plots. Each object writes its own page with these."""

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
