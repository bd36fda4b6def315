"""Walking and rewriting the loop IR.

`Rewriter` visits bottom-up; its hooks return a replacement node or None
for "unchanged", and untouched subtrees are shared, not copied.
`ScopedVisitor` visits top-down, knowing the names in scope at each node.
`walk_stmts` / `walk_exprs` list the nodes when scope does not matter.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Literal, cast

from . import ir


def expr_children(e: ir.Expr) -> tuple[ir.Expr, ...]:
    match e:
        case ir.Load(_, idx) | ir.PackedLoad(_, idx):
            return idx
        case ir.Binary(_, a, b) | ir.Compare(_, a, b):
            return (a, b)
        case ir.Unary(_, a) | ir.Cast(a):
            return (a,)
        case ir.Call(_, args):
            return args
        case ir.Select(c, a, b):
            return (c, a, b)
    return ()


def _rebuild_expr(e: ir.Expr, k: tuple[ir.Expr, ...]) -> ir.Expr:
    match e:
        case ir.Load(buf, _):
            return ir.Load(buf, k)
        case ir.PackedLoad(buf, _, lanes):
            return ir.PackedLoad(buf, k, lanes)
        case ir.Binary(op, _, _, d):
            return ir.Binary(op, k[0], k[1], d)
        case ir.Compare(op, _, _):
            return ir.Compare(op, k[0], k[1])
        case ir.Unary(op, _, d):
            return ir.Unary(op, k[0], d)
        case ir.Cast(_, d):
            return ir.Cast(k[0], d)
        case ir.Call(fn, _, d):
            return ir.Call(fn, k, d)
        case ir.Select(_, _, _, d):
            return ir.Select(k[0], k[1], k[2], d)
    return e


class Rewriter:
    """Override `expr` / `stmt` hooks; return None to keep a node."""

    def expr(self, e: ir.Expr) -> ir.Expr | None:
        return None

    def stmt(self, s: ir.Stmt) -> ir.Stmt | None:
        return None

    def visit_expr(self, e: ir.Expr) -> ir.Expr:
        kids = expr_children(e)
        if kids:
            new = tuple(self.visit_expr(k) for k in kids)
            if any(a is not b for a, b in zip(new, kids)):
                e = _rebuild_expr(e, new)
        out = self.expr(e)
        return e if out is None else out

    def visit(self, s: ir.Stmt) -> ir.Stmt:
        ve, vs = self.visit_expr, self.visit
        new: ir.Stmt
        match s:
            case ir.For(var, start, end, kind, body, mx, mark, task, auto):
                new = ir.For(var, ve(start), ve(end), kind, vs(body), mx, mark, task, auto)
            case ir.If(c, t, e):
                new = ir.If(ve(c), vs(t), vs(e) if e is not None else None)
            case ir.Block(stmts):
                new = ir.Block(tuple(vs(x) for x in stmts))
            case ir.Store(buf, idx, v, atomic):
                new = ir.Store(buf, tuple(ve(i) for i in idx), ve(v), atomic)
            case ir.Let(name, v, body):
                new = ir.Let(name, ve(v), vs(body))
            case ir.Allocate(buf, body, storage):
                new = ir.Allocate(buf, vs(body), storage)
            case ir.IfFeature(feature, t, e):
                new = ir.IfFeature(feature, vs(t), vs(e))
            case ir.Binder(lets):
                new = ir.Binder(tuple((name, ve(v)) for name, v in lets))
            case ir.GroupedProducts():
                packed = s.packed if s.packed is None else ve(s.packed)
                new = replace(s, acc_first=ve(s.acc_first), xs=tuple(ve(x) for x in s.xs),
                              b_first=ve(s.b_first),
                              guard=None if s.guard is None else ve(s.guard),
                              packed=packed if isinstance(packed, ir.Load) else None,
                              fallback=vs(s.fallback))
            case ir.TransposingCopy(batch=batch):
                if batch is not None:
                    batch = ir.Batch(batch.var, ve(batch.start), ve(batch.end))
                new = replace(s, dst_base=ve(s.dst_base), src_base=ve(s.src_base), batch=batch,
                              fallback=vs(s.fallback))
            case ir.StreamedStores(loop, buffers, firsts, extent):
                inner = vs(loop)
                if not isinstance(inner, ir.For):  # no loop left to stage the stores of
                    new = inner
                else:
                    new = ir.StreamedStores(inner, buffers, tuple(ve(x) for x in firsts), extent)
            case _:
                raise AssertionError(f"unknown statement {s!r}")
        if new == s:
            new = s
        out = self.stmt(new)
        return new if out is None else out


class Substitute(Rewriter):
    def __init__(self, mapping: dict[str, ir.Expr]) -> None:
        self.mapping = mapping

    def expr(self, e: ir.Expr) -> ir.Expr | None:
        if isinstance(e, ir.Var):
            return self.mapping.get(e.name)
        return None


def substitute(s: ir.Stmt, mapping: dict[str, ir.Expr]) -> ir.Stmt:
    return Substitute(mapping).visit(s)


def walk_stmts(s: ir.Stmt) -> Iterator[ir.Stmt]:
    yield s
    match s:
        case ir.For(body=body) | ir.Let(body=body) | ir.Allocate(body=body):
            yield from walk_stmts(body)
        case ir.If(_, t, e):
            yield from walk_stmts(t)
            if e is not None:
                yield from walk_stmts(e)
        case ir.IfFeature(_, t, e):
            yield from walk_stmts(t)
            yield from walk_stmts(e)
        case ir.Block(stmts):
            for x in stmts:
                yield from walk_stmts(x)
        case ir.GroupedProducts(fallback=body) | ir.TransposingCopy(fallback=body):
            yield from walk_stmts(body)
        case ir.StreamedStores(loop=loop):
            yield from walk_stmts(loop)


def stmt_count(s: ir.Stmt) -> int:
    """How many statements `s` is made of, itself included (a size for copy limits)."""
    return sum(1 for _ in walk_stmts(s))


def stmt_exprs(s: ir.Stmt) -> tuple[ir.Expr, ...]:
    """The expressions statement `s` itself holds (not those of the statements inside it)."""
    match s:
        case ir.For(_, start, end):
            return (start, end)
        case ir.If(c):
            return (c,)
        case ir.Store(_, idx, value):
            return (*idx, value)
        case ir.Let(_, value):
            return (value,)
        case ir.Binder(lets):
            return tuple(v for _, v in lets)
        case ir.GroupedProducts(acc_first=acc, xs=xs, b_first=b, guard=guard):
            return (acc, *xs, b) + (() if guard is None else (guard,))
        case ir.TransposingCopy(dst_base=dst, src_base=src, batch=batch):
            return (dst, src) + (() if batch is None else (batch.start, batch.end))
        case ir.StreamedStores(firsts=firsts):
            return firsts
    return ()


def walk_exprs(e: ir.Expr) -> Iterator[ir.Expr]:
    yield e
    for k in expr_children(e):
        yield from walk_exprs(k)


def bound_names(s: ir.Stmt) -> set[str]:
    """The names a loop or a let inside `s` (or `s` itself) binds."""
    return {x.var if isinstance(x, ir.For) else x.name for x in walk_stmts(s)
            if isinstance(x, (ir.For, ir.Let))}


def expr_vars(e: ir.Expr) -> set[str]:
    """The names of the variables an expression reads."""
    return {x.name for x in walk_exprs(e) if isinstance(x, ir.Var)}


class ScopedVisitor:
    """Visits a statement top-down, knowing the names in scope at every node.

    `scope` holds the variables bound around the node being visited: those given
    at the start (a function's sizes), a loop's variable inside its body, a let's
    name inside its body (an inner binding of a name shadows an outer one until its
    body ends); `buffers` holds the temp buffers allocated around the node. A
    loop's bounds, a let's value and an allocation's shape are outside what they
    bind. Override the hooks `stmt` and `expr`: each is called on every statement
    and expression node before its children, with the scope around the node.
    """

    def __init__(self, scope: Iterable[str] = (), buffers: Iterable[str] = ()) -> None:
        self.scope = frozenset(scope)
        self.buffers = frozenset(buffers)

    def stmt(self, s: ir.Stmt) -> None:
        """Called on each statement, before its expressions and statements."""

    def expr(self, e: ir.Expr) -> None:
        """Called on each expression node, before its operands."""

    def visit(self, s: ir.Stmt) -> None:
        """Visit `s` and everything in it."""
        self.stmt(s)
        ve = self.visit_expr
        match s:
            case ir.For(var, start, end, _, body):
                ve(start)
                ve(end)
                self._bound(body, var)
            case ir.Let(name, value, body):
                ve(value)
                self._bound(body, name)
            case ir.If(c, t, e):
                ve(c)
                self.visit(t)
                if e is not None:
                    self.visit(e)
            case ir.Block(stmts):
                for x in stmts:
                    self.visit(x)
            case ir.IfFeature(_, t, e):
                self.visit(t)
                self.visit(e)
            case ir.Binder(lets):
                for _, v in lets:
                    ve(v)
            case ir.GroupedProducts() | ir.TransposingCopy() | ir.StreamedStores():
                self._idiom(s)
            case ir.Store():
                self._store(s)
            case ir.Allocate(buf, body):
                for extent in buf.shape:
                    ve(extent)
                outside = self.buffers
                self.buffers = outside | {buf.name}
                try:
                    self.visit(body)
                finally:
                    self.buffers = outside
            case _:
                raise AssertionError(f"unknown statement {s!r}")

    def _store(self, s: ir.Store) -> None:
        """A store's indices, then its value (which reads the element's old value when
        the store is atomic)."""
        for i in s.indices:
            self.visit_expr(i)
        if not s.atomic:
            self.visit_expr(s.value)
            return
        outside = self.scope
        self.scope = outside | {ir.ATOMIC_OLD}
        try:
            self.visit_expr(s.value)
        finally:
            self.scope = outside

    def _idiom(self, s: ir.Stmt) -> None:
        """A statement of the passes that plan for a backend: its expressions, then the
        statements it stands for."""
        ve = self.visit_expr
        match s:
            case ir.GroupedProducts(acc_first=acc, xs=xs, b_first=b, guard=guard):
                for x in (acc, *xs, b) + (() if guard is None else (guard,)):
                    ve(x)
                self.visit(s.fallback)
            case ir.TransposingCopy(dst_base=dst, src_base=src, batch=batch):
                if batch is None:
                    ve(dst)
                    ve(src)
                else:
                    ve(batch.start)
                    ve(batch.end)
                    outside = self.scope
                    self.scope = outside | {batch.var}
                    try:
                        ve(dst)
                        ve(src)
                    finally:
                        self.scope = outside
                self.visit(s.fallback)
            case ir.StreamedStores(loop=loop, firsts=firsts):
                for x in firsts:
                    ve(x)
                self.visit(loop)

    def visit_expr(self, e: ir.Expr) -> None:
        """Visit `e` and its operands."""
        self.expr(e)
        for k in expr_children(e):
            self.visit_expr(k)

    def _bound(self, body: ir.Stmt, name: str) -> None:
        outside = self.scope
        self.scope = outside | {name}
        try:
            self.visit(body)
        finally:
            self.scope = outside


class _FreeVars(ScopedVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found: set[str] = set()

    def expr(self, e: ir.Expr) -> None:
        if isinstance(e, ir.Var) and e.name not in self.scope:
            self.found.add(e.name)


def free_vars(s: ir.Stmt) -> set[str]:
    """The names of the variables a statement reads that no loop or let inside it binds."""
    v = _FreeVars()
    v.visit(s)
    return v.found


AtomicFetchOp = Literal["add", "sub", "and", "or", "xor"]


def atomic_fetch(s: ir.Store) -> tuple[AtomicFetchOp, ir.Expr] | None:
    """(op, operand) when the atomic store `s` is `element = old op operand`, an integer
    operation targets have as one atomic instruction (two's complement, wrapping as
    numpy does), the operand not reading old; else None (a compare-and-swap loop)."""
    v = s.value
    if not (s.atomic and isinstance(v, ir.Binary) and v.op in ("add", "sub", "and", "or", "xor")
            and v.dtype.is_int and v.a == ir.Var(ir.ATOMIC_OLD, v.dtype)):
        return None
    if ir.ATOMIC_OLD in expr_vars(v.b):
        return None
    return cast(AtomicFetchOp, v.op), v.b


def fresh_name(base: str, taken: set[str]) -> str:
    """`base`, or `base2`, `base3`, ... : the first not in `taken`, which it joins."""
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}{n}"
    taken.add(name)
    return name
