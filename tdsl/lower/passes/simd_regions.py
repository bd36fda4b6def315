"""What the late passes that plan for a backend walk: the statements outside simd loops.

A simd loop is one a target runs as vector code as a whole (`starts_simd`): a
vectorized loop whose plan (`lower.vectors.plan`, what `Kernel.vectorization`
reports) says it can run so and in which nothing may fail to allocate (host C: a
`#pragma omp simd` loop; LLVM: `backend_llvm.vector`), or a serial loop the
auto_simd pass marked (`ir.For.auto_vector`). Inside one, everything is the vector
code's: the passes that rewrite idioms (transpose, group) and stage streamed stores
(stream) leave it alone, and so the targets' vector code takes plain loop IR only.
`OutsideSimd` is their common walk.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..abi import may_fail
from ..vectors import plan


def starts_simd(loop: ir.For, status: str | None) -> bool:
    """Whether `loop`, outside any simd loop, is one (see the module docstring)."""
    if loop.auto_vector is not None:
        return True
    return (loop.kind is ir.ForKind.VECTORIZED and not may_fail(loop.body)
            and plan(loop, status).vectorized)


class OutsideSimd:
    """Rewrites the statements of a function outside its simd loops, top-down.

    Override `loop` (a replacement for a loop, visited no further; None to go on into
    it unless it is a simd loop) and `run` (a replacement for the statements of a block
    from the k-th on, with how many it stands for; None for none)."""

    def __init__(self, func: ir.LoweredFunc) -> None:
        self.func = func
        self.status = func.status_name

    def loop(self, s: ir.For) -> ir.Stmt | None:
        """A replacement for loop `s`, or None."""
        return None

    def run(self, stmts: tuple[ir.Stmt, ...], k: int) -> tuple[int, ir.Stmt] | None:
        """(statements used, their replacement) for the block's statements from `k` on,
        or None."""
        return None

    def visit(self, s: ir.Stmt) -> ir.Stmt:
        """`s` with the hooks applied outside simd loops; unchanged parts shared."""
        match s:
            case ir.For():
                out = self.loop(s)
                if out is not None:
                    return out
                if starts_simd(s, self.status):
                    return s
                body = self.visit(s.body)
                return s if body is s.body else replace(s, body=body)
            case ir.Block(stmts):
                return self._block(s, stmts)
            case ir.Let(body=body) | ir.Allocate(body=body):
                new = self.visit(body)
                return s if new is body else replace(s, body=new)
            case ir.If(then=then, else_=other):
                new_then = self.visit(then)
                new_other = None if other is None else self.visit(other)
                if new_then is then and new_other is other:
                    return s
                return replace(s, then=new_then, else_=new_other)
            case ir.IfFeature(then=then, else_=other):
                new_then, new_other = self.visit(then), self.visit(other)
                if new_then is then and new_other is other:
                    return s
                return replace(s, then=new_then, else_=new_other)
        return s  # a store, or a statement a pass of this kind made

    def _block(self, s: ir.Block, stmts: tuple[ir.Stmt, ...]) -> ir.Stmt:
        out: list[ir.Stmt] = []
        k = 0
        while k < len(stmts):
            found = self.run(stmts, k)
            if found is not None:
                used, new = found
                out.append(new)
                k += used
                continue
            out.append(self.visit(stmts[k]))
            k += 1
        if len(out) == len(stmts) and all(a is b for a, b in zip(out, stmts, strict=True)):
            return s
        return ir.Block(tuple(out))

    def run_on(self, func: ir.LoweredFunc) -> ir.LoweredFunc:
        """`func` with its body visited."""
        body = self.visit(func.body)
        return func if body is func.body else replace(func, body=body)
