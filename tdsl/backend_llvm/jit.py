"""Compile LLVM IR for the host (in a child process), load it, and call it through cffi.

`build(func)` renders the loop IR (codegen.emit_module), optimizes the
module with LLVM's O3 pipeline for the host CPU (new pass manager, SLP and
loop vectorization on, its loop unroller off), compiles it to object code,
loads that with MCJIT and returns an `LLVMModule`.

LLVM runs in a child process (isolate.py). The llvmlite wheel's LLVM has its
assertions on, and an assertion that fails in one of its passes aborts the
process that runs it: a notebook's kernel, or a tuner with every candidate
it holds. So optimization and code generation of every module not yet in
the cache happen in a compile server forked from this process, which sends
back the optimized IR and the object code; this process only loads the
object. If the server dies, `build` raises `CompileError` naming the failed
assertion, and this process goes on. The work is not done twice (this
process runs no LLVM pass), so the cost is a pipe round trip per cold build
and one fork per process (see isolate.py for the figures and the
alternatives). `build(func, isolated=False)` compiles in process, for
callers that are themselves a disposable child (a tuner's or fuzzer's
worker).

An `LLVMModule` owns its execution engine, which owns the object code: the
kernel's code lives exactly as long as the LLVMModule.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Sequence

import cffi
import llvmlite.binding as llvm
import numpy as np
from llvmlite.binding.newpassmanagers import NewPassManager

from ..errors import CompileError
from ..lower.abi import check_call
from ..lower.ir import LoweredFunc
from . import isolate, runtime
from .codegen import emit_module, entry_symbol

CACHE_SIZE = 128  # compiled modules kept alive by the cache

# LLVM's O3 pipeline, tuned:
# - loop_vectorization True: vectorized loops are vector code already
#   (vector.py); LLVM's loop vectorizer may vectorize the other loops by its
#   cost model, as gcc -O3 does, which is what unscheduled code needs. On some
#   loops (guarded udiv/urem) its two cost models disagree, an assertion that
#   kills the compile server: the build is then made again without it
#   (`LLVMModule`), and only that kernel goes without.
# - loop_unrolling False: unrolling is the schedule's to decide (the unroll
#   primitive does it in the loop IR); LLVM's own unroller spent most of the
#   build time on register-tiled kernels (0.6-1 s) for no measurable speed.
PASS_OPTIONS = {
    "speed_level": 3,
    "loop_vectorization": True,
    "slp_vectorization": True,
    "loop_unrolling": False,
}

_ffi = cffi.FFI()
_lock = threading.RLock()  # LLVM's global context is not thread safe
_cache: OrderedDict[str, LLVMModule] = OrderedDict()
_host: tuple[str, str] | None = None


def build(func: LoweredFunc, isolated: bool = True) -> LLVMModule:
    """Compile `func` for the host, or return the cached build of the same kernel.

    isolated: run LLVM in a child process (see the module docstring); False
    runs it in this one, for callers that are already a disposable process.
    """
    source = emit_module(func)
    key = cache_key(func, source)
    with _lock:
        module = _cache.get(key)
        if module is None:
            module = LLVMModule(func, source, isolated)
            _cache[key] = module
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
        else:
            _cache.move_to_end(key)
        return module


def cache_key(func: LoweredFunc, source: str) -> str:
    """What a build depends on: the IR text, and what the text does not say.

    The text leaves out the signedness of integers (int8 and uint8 are both
    i8, bool is i8 too), which the module's argument checks use; and the
    pass options that turn it into code.
    """
    signature = repr((func.name, func.inputs, func.outputs, func.sizes))
    text = "\0".join((source, signature, repr(sorted(PASS_OPTIONS.items()))))
    return hashlib.sha256(text.encode()).hexdigest()


def clear_cache() -> None:
    with _lock:
        _cache.clear()


class LLVMModule:
    """A JIT-compiled kernel.

    `source` is the LLVM IR as generated, `optimized_ir` the module after
    optimization; `call` runs the kernel.
    """

    def __init__(self, func: LoweredFunc, source: str, isolated: bool = True):
        self.name = func.name
        self.func = func
        self.source = source
        with _lock:
            tm = _target_machine()
            options = dict(PASS_OPTIONS)
            if isolated:
                what = f"optimizing and compiling kernel {func.name!r}"
                try:
                    self.optimized_ir, code = isolate.run(_compile, source, func.name, options,
                                                          what=what)
                except CompileError as e:
                    if not (options["loop_vectorization"] and "LLVM crashed" in str(e)):
                        raise
                    # LLVM's loop vectorizer is where its assertions have failed: once
                    # more without it (vectorized loops are vector code regardless)
                    options["loop_vectorization"] = False
                    self.optimized_ir, code = isolate.run(_compile, source, func.name, options,
                                                          what=what)
            else:
                self.optimized_ir, code = _compile(source, func.name, options)
            module = llvm.parse_assembly("")
            module.triple = tm.triple
            module.data_layout = str(tm.target_data)
            engine = llvm.create_mcjit_compiler(module, tm)
            engine.add_object_file(llvm.ObjectFileRef.from_data(code))
            engine.finalize_object()
        self._engine = engine
        self._target_machine = tm
        nargs = len(func.inputs) + len(func.outputs)
        params = ", ".join(["void *"] * nargs + ["int64_t"] * len(func.sizes))
        address = engine.get_function_address(entry_symbol(func.name))
        if not address:
            raise CompileError(f"the JIT did not define kernel {func.name!r}", log=source)
        self.entry = _ffi.cast(f"int (*)({params})", address)
        self.from_buffer = _ffi.from_buffer

    def call(self, arrays: Sequence[np.ndarray], sizes: Sequence[int]) -> int:
        """Check the arguments (`abi.check_call`), then run the kernel on (inputs...,
        outputs...) and the sizes; returns its status (`abi.STATUS`)."""
        check_call(self.func, arrays, sizes)
        return self.run(arrays, sizes)

    def run(self, arrays: Sequence[np.ndarray], sizes: Sequence[int]) -> int:
        """`call` without the check, for arguments checked already."""
        return self.entry(*map(_ffi.from_buffer, arrays), *sizes)

    def __repr__(self) -> str:
        return f"<LLVMModule {self.name}>"


def _target_machine() -> llvm.TargetMachine:
    global _host
    if _host is None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        runtime.load()
        _host = (llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())
    cpu, features = _host
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=cpu, features=features, opt=3, jit=True)


def _compile(source: str, name: str, options: dict) -> tuple[str, bytes]:
    """(the optimized IR, the object code) of a module for the host, optimized
    with `options` (PASS_OPTIONS of the caller, not of the compile server)."""
    tm = _target_machine()
    module = _parse(source, name)
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    _optimize(module, tm, options)
    return str(module), tm.emit_object(module)


def _parse(source: str, name: str) -> llvm.ModuleRef:
    try:
        module = llvm.parse_assembly(source)
        module.verify()
    except RuntimeError as e:
        fd, path = tempfile.mkstemp(prefix="tdsl-llvm-", suffix=".ll", text=True)
        with os.fdopen(fd, "w") as f:
            f.write(source)
        raise CompileError(
            f"LLVM rejected the IR generated for kernel {name!r} (kept in {path}): {e}",
            source_path=path,
            log=str(e),
        ) from None
    return module


def _optimize(module: llvm.ModuleRef, tm: llvm.TargetMachine, options: dict) -> None:
    pto = llvm.create_pipeline_tuning_options(speed_level=options["speed_level"])
    for option in ("loop_vectorization", "slp_vectorization", "loop_unrolling"):
        setattr(pto, option, options[option])
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    try:
        mpm.run(module, pb)
    finally:
        # llvmlite 0.50's ModulePassManager never frees its pipeline (in its
        # MRO ObjectRef._dispose, a no-op, shadows NewPassManager._dispose):
        # about 100 KB per build. Free it here.
        NewPassManager._dispose(mpm)
        mpm.detach()
