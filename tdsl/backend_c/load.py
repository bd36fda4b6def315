"""Load a compiled kernel through cffi (ABI mode) and call it on numpy arrays.

`build(func)` is render + compile + load. Each shared library is opened once
per process (cached by path) with its own `FFI`; the `CModule` keeps both
alive.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

import cffi
import numpy as np

from ..errors import CompileError
from ..lower.abi import check_call
from ..lower.ir import For, ForKind, LoweredFunc, Select
from ..lower.rewrite import stmt_exprs, walk_exprs, walk_stmts
from . import pool
from .compile import DEFAULT_FLAGS, LARGE_SOURCE, NO_THREAD_JUMPS, NO_UNSWITCH, compile_source
from .render import entry_name, render, signature


class _Library:
    """An opened shared library: its FFI, the handle and the entry point."""

    __slots__ = ("ffi", "lib", "fn")

    def __init__(self, path: str, prototype: str, name: str):
        self.ffi = cffi.FFI()
        self.ffi.cdef(prototype)
        # never unmapped: a kernel's code outlives its last Kernel object cheaply, and
        # a library unloaded while another thread is in it would crash the process
        try:
            self.lib = self.ffi.dlopen(path, self.ffi.RTLD_NOW | self.ffi.RTLD_NODELETE)
        except OSError as e:
            raise CompileError(f"cannot load the compiled kernel {path}: {e}") from None
        self.fn = getattr(self.lib, name)


_LOADED: dict[str, _Library] = {}
_LOCK = threading.Lock()


def load(path: str, func: LoweredFunc) -> _Library:
    """The library at `path` (built from `func`), opened once per process, after the
    thread pool its parallel loops call (`pool`)."""
    if pool.load() is None:
        raise CompileError(f"cannot load the compiled kernel {path}: tdsl's thread pool "
                           f"could not be built ({pool.unavailable()})")
    with _LOCK:
        lib = _LOADED.get(path)
        if lib is None:
            lib = _LOADED[path] = _Library(path, signature(func), entry_name(func))
        return lib


class CModule:
    """A compiled kernel: `.source` (C text), `.path` (shared library), `.name`
    (entry point) and `call(arrays, sizes)`."""

    __slots__ = ("source", "path", "name", "func", "_library", "entry", "from_buffer")

    def __init__(self, func: LoweredFunc, source: str, path: str):
        self.func = func
        self.source = source
        self.path = path
        self.name = entry_name(func)
        self._library = load(path, func)
        ffi = self._library.ffi
        # the entry point with untyped array pointers (the same ABI: a pointer is a
        # pointer), which cffi fills from an array faster than a typed one
        arrays = len(func.inputs) + len(func.outputs)
        params = ", ".join(["void *"] * arrays + ["int64_t"] * len(func.sizes)) or "void"
        self.entry = ffi.cast(f"int (*)({params})", self._library.fn)
        self.from_buffer = ffi.from_buffer

    def call(self, arrays: Sequence[np.ndarray], sizes: Sequence[int]) -> int:
        """Check the arguments (`abi.check_call`), then run the kernel on (inputs...,
        outputs...) and the sizes; returns its status (`abi.STATUS`)."""
        check_call(self.func, arrays, sizes)
        return self.run(arrays, sizes)

    def run(self, arrays: Sequence[np.ndarray], sizes: Sequence[int]) -> int:
        """`call` without the check, for arguments checked already (C-contiguous, of
        the exact dtypes, inputs then outputs; sizes in the function's order)."""
        return self.entry(*map(self.from_buffer, arrays), *sizes)

    def __repr__(self) -> str:
        return f"<CModule {self.name} at {self.path}>"


def flags_for(func: LoweredFunc, source: str = "") -> tuple[str, ...]:
    """gcc's flags for `func`, whose C is `source`: DEFAULT_FLAGS; NO_UNSWITCH for a
    source over LARGE_SOURCE bytes (see `compile.NO_UNSWITCH`); and NO_THREAD_JUMPS when
    a vectorized loop holds a select (a read through td.pad, a where) and no simd loop
    holds a loop of its own (see `compile.NO_THREAD_JUMPS`; a serial loop the auto_simd
    pass marked, `For.auto_vector`, always does)."""
    base = DEFAULT_FLAGS + ((NO_UNSWITCH,) if len(source) > LARGE_SOURCE else ())
    simd = [s for s in walk_stmts(func.body)
            if isinstance(s, For) and s.kind is ForKind.VECTORIZED]
    inside = [x for s in simd for x in walk_stmts(s.body)]
    select = any(isinstance(e, Select)
                 for x in inside for top in stmt_exprs(x) for e in walk_exprs(top))
    if not select or any(isinstance(x, For) for x in inside):
        return base
    if any(isinstance(s, For) and s.auto_vector is not None for s in walk_stmts(func.body)):
        return base
    return base + (NO_THREAD_JUMPS,)


def build(
    func: LoweredFunc,
    *,
    flags: Sequence[str] | None = None,
    cache_dir: str | os.PathLike | None = None,
    compiler: str | None = None,
) -> CModule:
    """Render `func` as host C, compile it (cached) and load it."""
    source = render(func, "host")
    path = compile_source(
        source,
        tuple(flags) if flags is not None else flags_for(func, source),
        cache_dir=cache_dir,
        compiler=compiler,
    )
    return CModule(func, source, path)
