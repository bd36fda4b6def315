"""The LLVM backend: loop IR -> LLVM IR (llvmlite's builder) -> MCJIT, called through cffi.

module = build(lowered_func)            # cached by the sha256 of the IR
module.source                           # the LLVM IR as generated
module.optimized_ir                     # ... and after optimization
status = module.call([a, b, out], [n])  # 0, or 1 when out of memory
"""

from .codegen import emit_module
from .jit import LLVMModule, build, clear_cache

__all__ = ["LLVMModule", "build", "clear_cache", "emit_module"]
