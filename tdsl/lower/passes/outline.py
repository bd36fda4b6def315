"""Outlining: every parallel loop becomes a task of the thread pool.

The last step of the pipeline (`lower.PIPELINE`). A parallel loop's body runs on several threads, so the
targets make it a function of its own that runs a chunk of the loop's iterations
and call the pool's `abi.PARALLEL_FOR` with it; this pass decides, once for every
target, what that function receives and how the loop runs:

- each outermost parallel loop gets a `ir.Task`: a name unique in the function,
  the variables its body reads from outside the loop (sizes first, in the
  function's order, then the others by name, each with its dtype), the buffers it
  reads or writes from outside (arguments, the status, then temps in order of
  allocation) and whether an iteration may fail (`abi.may_fail`);
- a parallel loop inside another one runs serially in the outer loop's iteration
  (its kind becomes SERIAL): the outer loop already keeps the pool's threads busy,
  and a thread that waited there for an inner loop's helpers would hold its own
  chunk up.

Guarantees: the same values are computed; every PARALLEL loop has a task and none
is inside another PARALLEL loop; a task's values and buffers are exactly the free
names of the loop's body (`verify` checks both). Targets without threads (portable
C) run a task's loop as a plain loop.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..abi import may_fail
from ..rewrite import Rewriter, ScopedVisitor, walk_stmts


def captures(loop: ir.For) -> tuple[list[ir.Var], list[ir.Buffer]]:
    """(variables, buffers) the body of `loop` uses from outside it, unordered."""
    found = _Collect(frozenset({loop.var}))
    found.visit(loop.body)
    return list(found.values.values()), list(found.used.values())


class _Collect(ScopedVisitor):
    def __init__(self, bound: frozenset[str]) -> None:
        super().__init__(bound)
        self.values: dict[str, ir.Var] = {}
        self.used: dict[str, ir.Buffer] = {}

    def expr(self, e: ir.Expr) -> None:
        if isinstance(e, ir.Var) and e.name not in self.scope:
            self.values.setdefault(e.name, e)
        elif isinstance(e, ir.Load):
            self.buffer(e.buffer)

    def stmt(self, s: ir.Stmt) -> None:
        if isinstance(s, ir.Store):
            self.buffer(s.buffer)

    def buffer(self, buf: ir.Buffer) -> None:
        if buf.name not in self.buffers:  # not allocated inside the loop
            self.used.setdefault(buf.name, buf)


class _Serial(Rewriter):
    """Parallel loops made serial (inside a task)."""

    def stmt(self, s: ir.Stmt) -> ir.Stmt | None:
        if isinstance(s, ir.For) and s.kind is ir.ForKind.PARALLEL:
            return replace(s, kind=ir.ForKind.SERIAL, task=None)
        return None


class _Outline:
    def __init__(self, func: ir.LoweredFunc) -> None:
        self.sizes = [v.name for v in func.sizes]
        order = [b.name for b in func.inputs + func.outputs]
        if func.status is not None:
            order.append(func.status.name)
        order += [s.buffer.name for s in walk_stmts(func.body) if isinstance(s, ir.Allocate)]
        self.buffer_order = {name: k for k, name in enumerate(dict.fromkeys(order))}
        self.names: set[str] = set()

    def visit(self, s: ir.Stmt) -> ir.Stmt:
        match s:
            case ir.For(kind=ir.ForKind.PARALLEL):
                return self.task(s)
            case ir.For(body=body) | ir.Let(body=body) | ir.Allocate(body=body):
                new = self.visit(body)
                return s if new is body else replace(s, body=new)
            case ir.If(then=then, else_=other):
                t = self.visit(then)
                e = None if other is None else self.visit(other)
                return s if t is then and e is other else replace(s, then=t, else_=e)
            case ir.Block(stmts=stmts):
                new_stmts = tuple(self.visit(x) for x in stmts)
                if all(a is b for a, b in zip(new_stmts, stmts)):
                    return s
                return ir.Block(new_stmts)
        return s

    def task(self, loop: ir.For) -> ir.For:
        body = _Serial().visit(loop.body)
        loop = replace(loop, body=body)
        values, buffers = captures(loop)
        size_rank = {name: k for k, name in enumerate(self.sizes)}
        values.sort(key=lambda v: (v.name not in size_rank, size_rank.get(v.name, 0), v.name))
        buffers.sort(key=lambda b: (self.buffer_order.get(b.name, len(self.buffer_order)), b.name))
        name, n = loop.var, 1
        while name in self.names:
            n += 1
            name = f"{loop.var}_{n}"
        self.names.add(name)
        task = ir.Task(name, tuple(values), tuple(buffers), may_fail(body))
        return replace(loop, task=task)


def outline(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` with every parallel loop a task of the thread pool (see the module)."""
    body = _Outline(func).visit(func.body)
    return func if body is func.body else replace(func, body=body)


__all__ = ["captures", "outline"]
