"""How long native compilation may take, for every target.

The C compiler (a subprocess) and LLVM's optimizer and code generator (the
compile server, `tdsl.backend_llvm.isolate`) each run on one kernel for at most
`compile_timeout()` seconds; past it the build is a `CompileError` and the
compiler is stopped.
"""

from __future__ import annotations

import math

from .errors import ArgumentError

_COMPILE_TIMEOUT = [300.0]


def compile_timeout() -> float:
    """Seconds a native compile of one kernel may take (default 300)."""
    return _COMPILE_TIMEOUT[0]


def set_compile_timeout(seconds: float) -> float:
    """Set how long (seconds) native compilation of one kernel may run, with either
    backend, before the build fails with a `CompileError`; returns the previous limit
    (default 300)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not (
            0 < seconds < math.inf):
        raise ArgumentError(
            f"the compile timeout must be a positive, finite number of seconds, got {seconds!r}")
    old = _COMPILE_TIMEOUT[0]
    _COMPILE_TIMEOUT[0] = float(seconds)
    return old
