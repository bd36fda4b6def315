"""What the host CPU has, as LLVM names it: the instruction-set extensions the LLVM
backend tests before it emits their instructions, and the width of its vector
registers, which the auto_simd pass plans LLVM's loops for (`ir.Target`)."""

from __future__ import annotations

import functools


@functools.cache
def host_has(feature: str) -> bool:
    """Whether the host CPU has instruction-set extension `feature` (LLVM's name)."""
    import llvmlite.binding as llvm

    return bool(llvm.get_host_cpu_features().get(feature))


@functools.cache
def host_vector_bytes() -> int:
    """The width of the host's vector registers in bytes: 64 with AVX-512, 32 with
    AVX, else 16."""
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    if features.get("avx512f"):
        return 64
    return 32 if features.get("avx") else 16
