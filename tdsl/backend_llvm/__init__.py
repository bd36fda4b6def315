"""The LLVM backend: loop IR -> LLVM IR (llvmlite's builder) -> MCJIT, called through cffi.

LLVM optimizes and compiles in a child process (jit.py, isolate.py): an
assertion failing inside LLVM raises CompileError instead of ending Python.

module = build(lowered_func)            # cached by IR, signature and pass options
module.source                           # the LLVM IR as generated
module.optimized_ir                     # ... and after optimization
status = module.call([a, b, out], [n])  # 0, or 1 when out of memory
"""

from .codegen import emit_module
from .jit import LLVMModule, build, clear_cache

__all__ = ["LLVMModule", "build", "clear_cache", "emit_module"]
