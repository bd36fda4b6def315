"""Check isl's AST against the schedule it was built from.

isl's AST builder is trusted for loop bounds, guards and the values of
degenerate loops, and it has been seen to get them wrong: for a block
computed inside a fused consumer loop whose value is a quasi-affine function
with two divisions, it kept one piece of the function and guarded the rest
away, so most instances of a statement never ran. A wrong loop nest is a
wrong answer, so every AST is read back here: the instances each statement
call executes (under its loops' bounds, strides and guards) are computed as
isl sets and compared with the statement's domain. Every instance must run,
and run once; a mismatch is a `ScheduleError`, never generated code.

The reading covers the expressions isl's builder emits (`ast_expr_to_ir` in
affine.py accepts the same set).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import islpy as isl

from ...errors import ScheduleError
from .isl_ast import NODE_FOR, NODE_IF, OP_AND, OP_OR, expr_type, node_type, op_type

# the affine function of each iterator in scope, by name, and the constant 0 (at 0)
Affs = dict[Literal[0] | str, isl.PwAff]


class _Scope:
    """The iterators of the enclosing loops, as set dims of one isl space."""

    def __init__(self, where: isl.Set, iters: tuple[str, ...]) -> None:
        self.where = where  # the iterator values that reach this point
        self.iters = iters

    def affs(self) -> Affs:
        """The affine function of each iterator (by name) and the constant 0 (at 0)."""
        return isl.affs_from_space(self.where.get_space())


def _pwaff(e: isl.AstExpr, scope: _Scope, v: Affs) -> isl.PwAff:
    t = expr_type(e)
    if t == isl.ast_expr_type.int:
        return isl.PwAff.val_on_domain(isl.Set.universe(scope.where.get_space()), e.get_val())
    if t == isl.ast_expr_type.id:
        return v[e.get_id().get_name()]
    T = isl.ast_expr_op_type
    op = op_type(e)
    n = e.get_op_n_arg()
    if op in (T.cond, T.select):
        c = _cond(e.get_op_arg(0), scope, v)
        a, b = _pwaff(e.get_op_arg(1), scope, v), _pwaff(e.get_op_arg(2), scope, v)
        return a.intersect_domain(c).union_add(b.subtract_domain(c))
    args = [_pwaff(e.get_op_arg(k), scope, v) for k in range(n)]
    if op == T.minus:
        return args[0].neg()
    if op in (T.max, T.min):
        out = args[0]
        for a in args[1:]:
            out = out.max(a) if op == T.max else out.min(a)
        return out
    if op == T.add:
        return args[0] + args[1]
    if op == T.sub:
        return args[0] - args[1]
    if op == T.mul:
        return args[0].mul(args[1])
    if op in (T.div, T.fdiv_q, T.pdiv_q):
        return args[0].div(args[1]).floor()
    if op == T.pdiv_r:
        return args[0].mod_val(_const(e.get_op_arg(1)))
    if op == T.zdiv_r:
        return args[0].tdiv_r(args[1])
    raise _Unreadable(e.to_C_str())


def _const(e: isl.AstExpr) -> isl.Val:
    if expr_type(e) != isl.ast_expr_type.int:
        raise _Unreadable(e.to_C_str())
    return e.get_val()


def _cond(e: isl.AstExpr, scope: _Scope, v: Affs) -> isl.Set:
    T = isl.ast_expr_op_type
    if expr_type(e) != isl.ast_expr_type.op:
        raise _Unreadable(e.to_C_str())
    op = op_type(e)
    n = e.get_op_n_arg()
    if op in (OP_AND, T.and_then, OP_OR, T.or_else):
        parts = [_cond(e.get_op_arg(k), scope, v) for k in range(n)]
        out = parts[0]
        for p in parts[1:]:
            out = out & p if op in (OP_AND, T.and_then) else out | p
        return out
    cmps: dict[isl.ast_expr_op_type, Callable[[isl.PwAff, isl.PwAff], isl.Set]] = {
        T.eq: isl.PwAff.eq_set, T.le: isl.PwAff.le_set, T.lt: isl.PwAff.lt_set,
        T.ge: isl.PwAff.ge_set, T.gt: isl.PwAff.gt_set}
    if op not in cmps:
        raise _Unreadable(e.to_C_str())
    a, b = _pwaff(e.get_op_arg(0), scope, v), _pwaff(e.get_op_arg(1), scope, v)
    return cmps[op](a, b)


class _Unreadable(Exception):
    pass


class _Reader:
    def __init__(self) -> None:
        self.runs: dict[str, list[isl.Set | None]] = {}  # None: an instance ran twice

    def node(self, n: isl.AstNode, scope: _Scope) -> None:
        T = isl.ast_node_type
        t = node_type(n)
        if scope.where.is_empty():
            return
        if t == T.block:
            kids = n.block_get_children()
            for k in range(kids.n_ast_node()):
                self.node(kids.get_at(k), scope)
        elif t == T.mark:
            self.node(n.mark_get_node(), scope)
        elif t == NODE_IF:
            c = _cond(n.if_get_cond(), scope, scope.affs())
            self.node(n.if_get_then_node(), _Scope(scope.where & c, scope.iters))
            if n.if_has_else_node():
                self.node(n.if_get_else_node(), _Scope(scope.where.subtract(c), scope.iters))
        elif t == NODE_FOR:
            self.loop(n, scope)
        elif t == T.user:
            self.call(n.user_get_expr(), scope)
        else:
            raise _Unreadable(n.to_C_str())

    def loop(self, n: isl.AstNode, scope: _Scope) -> None:
        it = n.for_get_iterator().get_id().get_name()
        k = len(scope.iters)
        where = scope.where.add_dims(isl.dim_type.set, 1).set_dim_name(isl.dim_type.set, k, it)
        inner = _Scope(where, scope.iters + (it,))
        v = inner.affs()
        c = v[it]
        start = _pwaff(n.for_get_init(), inner, v)
        if n.for_is_degenerate():
            where = where & c.eq_set(start)
        else:
            step = _const(n.for_get_inc())
            where = where & c.ge_set(start) & _cond(n.for_get_cond(), inner, v)
            if not step.is_one():
                where = where & (c - start).mod_val(step).eq_set(v[0])
        self.node(n.for_get_body(), _Scope(where, inner.iters))

    def call(self, e: isl.AstExpr, scope: _Scope) -> None:
        name = e.get_op_arg(0).get_id().get_name()
        v = scope.affs()
        args = [_pwaff(e.get_op_arg(k), scope, v) for k in range(1, e.get_op_n_arg())]
        if args:
            m = isl.Map.from_pw_aff(args[0])
            for a in args[1:]:
                m = m.flat_range_product(isl.Map.from_pw_aff(a))
            instances = m.intersect_domain(scope.where)
            if not instances.is_injective():
                self.runs.setdefault(name, []).append(None)  # an instance runs twice
                return
            ran = instances.range()
        else:
            ran = scope.where.params()
        self.runs.setdefault(name, []).append(ran)


def check_ast(ast: isl.AstNode, schedule: isl.UnionMap, context: isl.Set) -> None:
    """Raise `ScheduleError` unless the AST runs every instance of every statement in
    `schedule`'s domain exactly once (within `context`, the parameters' constraints)."""
    want: dict[str, isl.Set] = {}
    schedule.domain().foreach_set(lambda s: want.__setitem__(s.get_tuple_name(), s))
    reader = _Reader()
    top = _Scope(context.from_params(), ())
    try:
        reader.node(ast, top)
    except _Unreadable as e:
        raise ScheduleError(
            f"the generated loop nest has an expression the verifier cannot read ({e}); "
            f"this schedule cannot be compiled safely — try other split or tile factors, "
            f"or fewer fused loops") from None
    for name, dom in want.items():
        dom = dom.intersect_params(context)
        runs = reader.runs.get(name, [])
        ran = [r for r in runs if r is not None]
        bad = len(ran) < len(runs)
        got: isl.Set | None = None
        for r in ran if not bad else []:
            r = r.reset_tuple_id() if r.dim(isl.dim_type.set) else r
            if got is not None and not (got & r).is_empty():
                bad = True
                break
            got = r if got is None else got | r
        flat = dom.reset_tuple_id()
        if dom.dim(isl.dim_type.set) == 0:
            flat = dom.params()
            got = got.params() if got is not None and got.dim(isl.dim_type.set) else got
        if bad or got is None and not flat.is_empty() or got is not None and not got.is_equal(flat):
            raise ScheduleError(
                f"isl's loop generator produced a loop nest that would not run every instance of "
                f"{name} exactly once for this schedule, so it is refused rather than compiled "
                f"wrong; an equivalent schedule with other split or tile factors, or without one "
                f"of its fuse steps, usually avoids it")
