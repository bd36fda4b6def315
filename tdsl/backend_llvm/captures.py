"""What a statement uses from outside itself.

A parallel loop's body is outlined into its own function; the values it
needs from the enclosing one (sizes, outer loop variables, let-bound names,
buffer pointers) travel in an environment struct. `free_names` lists them.
"""

from __future__ import annotations

from ..lower.ir import (
    Allocate,
    Binary,
    Block,
    Buffer,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    For,
    If,
    Let,
    Load,
    LoweredFunc,
    Select,
    Stmt,
    Store,
    Unary,
    Var,
)


def free_names(stmt: Stmt, bound=frozenset()) -> tuple[list[str], list[str]]:
    """(variable names, buffer names) used by `stmt` and not bound in it or in `bound`, sorted."""
    walker = _Walker()
    walker.stmt(stmt, frozenset(bound), frozenset())
    return sorted(walker.vars), sorted(walker.buffers)


def all_buffers(func: LoweredFunc) -> list[str]:
    """Names of the arguments, then of the temps in order of allocation."""
    names = [b.name for b in func.inputs + func.outputs]

    def walk(s: Stmt) -> None:
        match s:
            case Allocate(buffer=buf, body=body):
                if buf.name not in names:
                    names.append(buf.name)
                walk(body)
            case For(body=body) | Let(body=body):
                walk(body)
            case If(then=then, else_=else_):
                walk(then)
                if else_ is not None:
                    walk(else_)
            case Block(stmts=stmts):
                for x in stmts:
                    walk(x)

    walk(func.body)
    return names


class _Walker:
    def __init__(self):
        self.vars: set[str] = set()
        self.buffers: set[str] = set()

    def buffer(self, buf: Buffer, bound, bufs) -> None:
        if buf.name not in bufs:
            self.buffers.add(buf.name)
        for e in buf.shape:
            self.expr(e, bound, bufs)

    def expr(self, e: Expr, bound, bufs) -> None:
        match e:
            case Var(name=name):
                if name not in bound:
                    self.vars.add(name)
            case Const():
                pass
            case Load(buffer=buf, indices=idx):
                self.buffer(buf, bound, bufs)
                for i in idx:
                    self.expr(i, bound, bufs)
            case Binary(a=a, b=b) | Compare(a=a, b=b):
                self.expr(a, bound, bufs)
                self.expr(b, bound, bufs)
            case Unary(a=a) | Cast(a=a):
                self.expr(a, bound, bufs)
            case Call(args=args):
                for a in args:
                    self.expr(a, bound, bufs)
            case Select(cond=c, a=a, b=b):
                for x in (c, a, b):
                    self.expr(x, bound, bufs)
            case _:
                raise TypeError(f"unknown loop-IR expression {e!r}")

    def stmt(self, s: Stmt, bound, bufs) -> None:
        match s:
            case For(var=var, start=start, end=end, body=body):
                self.expr(start, bound, bufs)
                self.expr(end, bound, bufs)
                self.stmt(body, bound | {var}, bufs)
            case If(cond=cond, then=then, else_=else_):
                self.expr(cond, bound, bufs)
                self.stmt(then, bound, bufs)
                if else_ is not None:
                    self.stmt(else_, bound, bufs)
            case Block(stmts=stmts):
                for x in stmts:
                    self.stmt(x, bound, bufs)
            case Store(buffer=buf, indices=idx, value=value):
                self.buffer(buf, bound, bufs)
                for i in idx:
                    self.expr(i, bound, bufs)
                self.expr(value, bound, bufs)
            case Let(name=name, value=value, body=body):
                self.expr(value, bound, bufs)
                self.stmt(body, bound | {name}, bufs)
            case Allocate(buffer=buf, body=body):
                for e in buf.shape:
                    self.expr(e, bound, bufs)
                self.stmt(body, bound, bufs | {buf.name})
            case _:
                raise TypeError(f"unknown loop-IR statement {s!r}")
