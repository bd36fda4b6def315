"""The LLVM backend: loop IR -> LLVM IR (llvmlite's builder) -> MCJIT, called through cffi.

module = build(lowered_func)          # cached by the IR's sha256
module.source                         # LLVM IR as generated
status = module.call([a, b, out], [n])
"""

from .codegen import emit_module
from .jit import LLVMModule, build, clear_cache

__all__ = ["LLVMModule", "build", "clear_cache", "emit_module"]
