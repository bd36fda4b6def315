"""What a statement uses from outside itself.

A parallel loop's body is outlined into its own function; the values it
needs from the enclosing one (sizes, outer loop variables, let-bound names,
buffer pointers) travel in an environment struct. `free_names` lists them.
"""

from __future__ import annotations

from ..lower.ir import Allocate, Buffer, Expr, Load, LoweredFunc, Stmt, Store, Var
from ..lower.rewrite import ScopedVisitor, walk_stmts


def free_names(stmt: Stmt, bound=frozenset()) -> tuple[list[str], list[str]]:
    """(variable names, buffer names) used by `stmt` and not bound in it or in `bound`, sorted."""
    walker = _Walker(bound)
    walker.visit(stmt)
    return sorted(walker.vars), sorted(walker.used_buffers)


def all_buffers(func: LoweredFunc) -> list[str]:
    """Names of the arguments, the function's status, then of the temps in order of
    allocation."""
    names = [b.name for b in func.inputs + func.outputs]
    if func.status is not None:
        names.append(func.status.name)
    for s in walk_stmts(func.body):
        if isinstance(s, Allocate) and s.buffer.name not in names:
            names.append(s.buffer.name)
    return names


class _Walker(ScopedVisitor):
    def __init__(self, bound):
        super().__init__(bound)
        self.vars: set[str] = set()
        self.used_buffers: set[str] = set()

    def buffer(self, buf: Buffer) -> None:
        if buf.name not in self.buffers:
            self.used_buffers.add(buf.name)
        for e in buf.shape:
            self.visit_expr(e)

    def expr(self, e: Expr) -> None:
        match e:
            case Var(name=name):
                if name not in self.scope:
                    self.vars.add(name)
            case Load(buffer=buf):
                self.buffer(buf)

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Store):
            self.buffer(s.buffer)
