"""The auto_simd pass: serial loops the targets run as vector code all the same.

A loop no schedule vectorized is marked to run as vector code
(`ir.For.auto_vector`, the vector bytes it is planned for) where
`lower.vectors.auto_vector_plan` proves its iterations independent and its accesses
contiguous or broadcast: an outer loop around a reduction (an unscheduled matmul's
j around its k), which the C compiler's and LLVM's loop vectorizers, of innermost
loops, leave scalar. Only serial loops outside simd loops (`simd_regions`) in which
nothing may fail to allocate are marked. The function's target says the width
(`ir.Target.vector_bytes`: 64 bytes for host C, the widest host C targets, whose
compiler picks its own; the host's vector registers for LLVM).

For host C a marked loop of constant extent that is not a whole number of vectors is
cut in two, the whole vectors and then the rest, each marked where its own plan
allows: the C compiler's vectorized outer loop would finish the lanes left over one
by one, and a loop of their own gets vector code of their width. Portable functions
are unchanged.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..abi import may_fail
from ..build import index
from ..vectors import VectorLoop, auto_vector_plan
from .simd_regions import OutsideSimd


def pieces(s: ir.For, plan: VectorLoop) -> tuple[ir.For, ir.For] | None:
    """Loop `s` (`plan`: its auto-SIMD plan) of constant extent that is not a whole
    number of vectors, as two: the whole vectors, then the rest; None for any other."""
    if plan.extent is None or not isinstance(s.start, ir.Const):
        return None
    lanes = plan.chunks[0]
    whole = plan.extent // lanes * lanes
    if whole == 0 or whole == plan.extent:
        return None
    cut = index(int(s.start.value) + whole)
    return (replace(s, end=cut, max_extent=whole),
            replace(s, start=cut, max_extent=plan.extent - whole))


class _Auto(OutsideSimd):
    def loop(self, s: ir.For) -> ir.Stmt | None:
        if s.kind is not ir.ForKind.SERIAL or may_fail(s.body):
            return None
        target = self.func.target
        plan = auto_vector_plan(s, target.vector_bytes, self.status)
        if plan is None:
            return None
        cut = pieces(s, plan) if target.backend == "c" else None
        if cut is not None:
            return ir.Block(tuple(self.visit(piece) for piece in cut))
        return replace(s, auto_vector=target.vector_bytes)


def auto_simd(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` with the serial loops its target runs as vector code marked (see the
    module docstring); portable functions unchanged."""
    if func.portable:
        return func
    return _Auto(func).run_on(func)
