"""The C backend: loop IR -> C text -> shared library -> callable.

Three steps, each usable alone: `render(func, flavour)` gives the C source,
`compile_source(src, flags)` a cached shared library, and `CModule` loads it
through cffi. `build(func)` does all three. `render_standalone(func)` gives
the C99 of a kernel for embedded targets (see `tdsl.emit`).
"""

from ..limits import set_compile_timeout
from .compile import DEFAULT_FLAGS, compile_source, default_cache_dir
from .load import CModule, build
from .render import render, signature
from .standalone import render_standalone, workspace_layout

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
