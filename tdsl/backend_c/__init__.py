"""The C backend: loop IR -> C text -> shared library -> callable.

Three steps, each usable alone: `render(func, flavour)` gives the C source,
`compile_source(src, flags)` a cached shared library, and `CModule` loads it
through cffi. `build(func)` does all three. `render_standalone(func)` gives
the portable C99 of a kernel for embedded targets, with its declarations and
workspace layout (see `tdsl.emit`). Host and portable C come from one renderer;
the flavour (`render.Flavour`) is data.
"""

from ..limits import set_compile_timeout
from .compile import DEFAULT_FLAGS, compile_source, default_cache_dir
from .load import CModule, build
from .render import render, render_standalone, signature
from .workspace import workspace_layout

__all__ = [
    "DEFAULT_FLAGS",
    "CModule",
    "build",
    "compile_source",
    "default_cache_dir",
    "render",
    "render_standalone",
    "set_compile_timeout",
    "signature",
    "workspace_layout",
]
