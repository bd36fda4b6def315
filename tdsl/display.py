"""HTML for Jupyter: code highlighted with Pygments when it is installed."""

from __future__ import annotations

import html

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


def require_matplotlib():
    """matplotlib.pyplot, or TdslError naming the extra that installs it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise TdslError("plots need matplotlib: pip install 'tdsl[notebook]'") from None
    return plt
