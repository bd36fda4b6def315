"""isl AST -> loop IR.

Walks the AST that isl built from the model's schedule map: each loop takes the
name and kind of the band its schedule dimension is, and each statement
instance becomes a Store whose indices and value are written from the
algorithm in terms of the loop variables. A block's binder statement (see
`model.Group.bounds`) becomes lets of the block's bounds around the
statements after it (`place_binders`). Temp buffers are then placed by the
allocation pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import cast

import islpy as isl

from ... import dtypes as dt
from ...compute import expr as cx
from ...compute.periods import ONE_PERIOD, Arith, Form, anywhere
from ...compute.printer import show
from ...compute.tensor import (
    BoundaryView,
    Stage,
    Tensor,
    Update,
    identity,
    is_affine_index,
    read_modify_write,
)
from ...errors import ScheduleError, TdslError
from ...schedule.state import Schedulable
from .. import ir
from ..abi import INDEX_OUT_OF_RANGE
from ..rewrite import Substitute as _Substitute
from ..rewrite import free_vars, walk_stmts
from .access import functions_map
from .affine import ast_expr_to_ir, pwaff_to_ir
from .isl_ast import NODE_FOR, NODE_IF, OP_AND, expr_type, node_type, op_type
from .model import Band, Model, Statement
from .tree import Vector

# the values of the isl AST's names in scope: its loop iterators (c<K>)
Env = dict[str, ir.Expr]
# the stages whose block bounds a loop around the node binds (see `Converter._block_lets`)
Bounded = frozenset[Schedulable]

_COMBINE: dict[cx.ReduceOp, ir.BinaryOp] = {"sum": "add", "prod": "mul", "max": "max", "min": "min"}


class Converter:
    def __init__(self, model: Model, buffers: dict[Tensor, ir.Buffer],
                 vectors: dict[Statement, Vector]) -> None:
        self.model = model
        self.vectors = vectors
        self.buffers = buffers
        self.stmts = {s.name: s for s in model.statements}
        self.stmts.update({g.binder.name: g.binder for g in model.groups.values() if g.binder})
        self.size_vars = {p: ir.Var(p) for p in model.params}
        # block bound parameters are plain variables, bound by their binder statements
        self.bound_vars = {n: ir.Var(n) for g in model.groups.values() for n, _ in g.bounds}
        self._offsets: dict[tuple[str, Tensor], list[ir.Expr | None]] = {}
        self._fresh = 0
        # the kernel's status, set when a data-dependent index is out of range
        self.status = ir.Buffer("tdsl_status", dt.int32, (ir.index_const(1),), "temp")
        self.checked = False
        self.unroll_inline = True  # inline reductions of at most UNROLL_INLINE points

    # ---------------------------------------------------------- nodes

    def node(self, n: isl.AstNode, env: Env, bounded: Bounded) -> ir.Stmt:
        T = isl.ast_node_type
        t = node_type(n)
        if t == T.block:
            return self._block(self._items(n, env, bounded))
        if t == NODE_FOR:
            return self.loop(n, env, bounded)
        if t == NODE_IF:
            cond = ast_expr_to_ir(n.if_get_cond(), self._names(env))
            then = self.node(n.if_get_then_node(), env, bounded)
            other = (self.node(n.if_get_else_node(), env, bounded) if n.if_has_else_node()
                     else None)
            return ir.If(cond, then, other)
        if t == T.user:
            return self.statement(n.user_get_expr(), env)
        raise AssertionError(f"unexpected isl AST node {n.to_C_str()}")

    def _items(self, n: isl.AstNode, env: Env, bounded: Bounded) -> list[ir.Stmt]:
        """The statements of a block, nested blocks flattened (isl nests them as it likes,
        and a binder may end an inner block whose block follows in the outer one)."""
        if node_type(n) != isl.ast_node_type.block:
            return [self.node(n, env, bounded)]
        kids = n.block_get_children()
        return [s for k in range(kids.n_ast_node())
                for s in self._items(kids.get_at(k), env, bounded)]

    @staticmethod
    def _block(stmts: list[ir.Stmt]) -> ir.Stmt:
        return stmts[0] if len(stmts) == 1 else ir.Block(tuple(stmts))

    def _band(self, n: isl.AstNode, it: str) -> Band:
        """The loop that schedule dimension `it` (c<K>) is, for the statements under `n`."""
        depth = int(it[1:])
        found: list[str] = []

        def visit(node: isl.AstNode) -> bool:
            if node_type(node) == isl.ast_node_type.user:
                found.append(node.user_get_expr().get_op_arg(0).get_id().get_name())
                return False
            return not found

        n.foreach_descendant_top_down(visit)
        band = self.vectors[self.stmts[found[0]]][depth]
        assert isinstance(band, Band), f"schedule dimension {it} is not a loop"
        return band

    def _names(self, env: Env) -> dict[str, ir.Expr]:
        return {**self.size_vars, **self.bound_vars, **env}

    def loop(self, n: isl.AstNode, env: Env, bounded: Bounded) -> ir.Stmt:
        it = n.for_get_iterator().get_id().get_name()
        band = self._band(n, it)
        lets = self._block_lets(n, band, env, bounded)
        if lets:
            bounded = bounded | {band.owner}
        out = self._loop(n, env, bounded, it, band)
        for name, value in reversed(lets):
            out = ir.Let(name, value, out)
        return out

    def _block_lets(self, n: isl.AstNode, band: Band, env: Env,
                    bounded: Bounded) -> tuple[tuple[str, ir.Expr], ...]:
        """The bounds of a block bound by parameters, computed again at the outermost
        loop of the block (not of its compute loop) from the prefix values there. isl may put the binder in a loop of its own
        (a loop over one value of the compute loop's variable, split in three: binders,
        blocks, consumers), out of reach of `place_binders`; these lets keep every
        block loop in scope of its bounds all the same."""
        g = self.model.groups.get(band.owner)
        if g is None or not g.bounds or band in g.prefix or band.owner in bounded:
            return ()
        calls: list[tuple[Statement, isl.AstExpr]] = []

        def visit(node: isl.AstNode) -> bool:
            if node_type(node) == isl.ast_node_type.user:
                call = node.user_get_expr()
                s = self.stmts[call.get_op_arg(0).get_id().get_name()]
                if s.stage is g.stage and s.role != "bounds" and not calls:
                    calls.append((s, call))
                return False
            return not calls

        n.foreach_descendant_top_down(visit)
        if not calls:
            return ()
        s, call = calls[0]
        if band not in s.bands[s.n_prefix:]:
            return ()
        names = self._names(env)
        args = [call.get_op_arg(k + 1) for k in range(s.n_prefix)]
        if not all(_ids(a) <= names.keys() for a in args):
            return ()
        prefix = [ast_expr_to_ir(a, names) for a in args]
        return tuple((name, pwaff_to_ir(pa, prefix, self.size_vars)) for name, pa in g.bounds)

    def _loop(self, n: isl.AstNode, env: Env, bounded: Bounded, it: str, band: Band) -> ir.Stmt:
        names = self._names(env)
        start = ast_expr_to_ir(n.for_get_init(), names)
        var = ir.Var(band.var)
        inner = {**env, it: var}
        if n.for_is_degenerate():
            return ir.Let(band.var, start, self.node(n.for_get_body(), inner, bounded))
        inc = n.for_get_inc()
        assert expr_type(inc) == isl.ast_expr_type.int, inc.to_C_str()
        step = int(inc.get_val().to_python())
        end = self._end(n.for_get_cond(), it, {**names, it: var})
        kind = ir.ForKind(band.kind)
        body = self.node(n.for_get_body(), inner, bounded)
        if step == 1:
            mark = self._reassociation(band) if band.loop.reassociate else None
            return ir.For(band.var, start, end, kind, body, band.extent, mark)
        # a strided loop (a fused loop over a box narrower than its inner extent)
        # counts its iterations and binds the loop variable to start + step * count
        count = f"{band.var}_n"
        trips = ir.Binary("floordiv", ir.Binary("add", ir.Binary("sub", end, start, dt.index),
                                                ir.index_const(step - 1), dt.index), ir.index_const(step), dt.index)
        at = ir.Binary("add", start, ir.Binary("mul", ir.index_const(step), ir.Var(count), dt.index), dt.index)
        return ir.For(count, ir.index_const(0), trips, kind, ir.Let(band.var, at, body), band.extent)

    def _reassociation(self, band: Band) -> ir.Reassociation:
        """The mark of a loop scheduled with reassociate=True (the reassociate pass
        rewrites the loop)."""
        stage = band.owner
        red = self.model.exprs[stage]
        assert isinstance(stage, Stage) and isinstance(red, cx.Reduce)  # a reduction's loop
        what = f"{band.kind.replace('vectorized', 'vectorize')}({stage.name}, {band.loop.name!r}, reassociate=True)"
        return ir.Reassociation(self.buffers[stage], _COMBINE[red.op],
                                identity(red.op, red.dtype), what)

    def _end(self, cond: isl.AstExpr, it: str, names: dict[str, ir.Expr]) -> ir.Expr:
        O = isl.ast_expr_op_type
        op = op_type(cond)
        if op in (OP_AND, O.and_then):
            parts = [self._end(cond.get_op_arg(k), it, names) for k in range(cond.get_op_n_arg())]
            out = parts[0]
            for p in parts[1:]:
                out = ir.Binary("min", out, p, dt.index)
            return out
        lhs = cond.get_op_arg(0)
        assert expr_type(lhs) == isl.ast_expr_type.id and lhs.get_id().get_name() == it, cond.to_C_str()
        rhs = ast_expr_to_ir(cond.get_op_arg(1), names)
        if op == O.le:
            return ir.Binary("add", rhs, ir.index_const(1), dt.index)
        assert op == O.lt, cond.to_C_str()
        return rhs

    # ---------------------------------------------------------- statements

    def statement(self, call: isl.AstExpr, env: Env) -> ir.Stmt:
        names = self._names(env)
        sname = call.get_op_arg(0).get_id().get_name()
        s = self.stmts[sname]
        args = [ast_expr_to_ir(call.get_op_arg(k + 1), names) for k in range(call.get_op_n_arg() - 1)]
        coords = dict(zip(s.isl_names, args))
        if s.role == "bounds":
            g = self.model.groups[s.stage]
            return _Bind(tuple((name, pwaff_to_ir(pa, args, self.size_vars)) for name, pa in g.bounds))
        dims = {d: coords[d.name] for d in s.dims}
        w = _StmtWriter(self, s, coords, dims, env)
        stage = s.stage
        if isinstance(stage, Update):  # an "assign" statement
            target = self.model.targets[stage]
            buf = self.buffers[stage.stage]
            if stage in self.model.schedule.state.atomic:
                return self._atomic(w, stage, target, buf)
            value = w.value(self.model.exprs[stage])
            return w.finish(ir.Store(buf, w.indices_for(target), value))
        idx = w.store_indices()
        buf = self.buffers[stage]
        if s.role == "init":
            assert stage.reduction is not None  # a reduction's init
            return ir.Store(buf, idx, ir.Const(identity(stage.reduction.op, stage.dtype), stage.dtype))
        if s.role == "update":
            red = self.model.exprs[stage]
            assert isinstance(red, cx.Reduce)  # a reduction's accumulation
            acc = ir.Load(buf, idx)
            step = ir.Binary(_COMBINE[red.op], acc, w.value(red.body), red.dtype)
            return w.finish(ir.Store(buf, idx, step))
        return w.finish(ir.Store(buf, idx, w.value(self.model.exprs[stage])))

    def _atomic(self, w: _StmtWriter, u: Update, target: cx.Access, buf: ir.Buffer) -> ir.Stmt:
        """An atomic update (`Schedule.atomic`): its operand computed and bound first,
        then the element updated by it in one atomic store."""
        found = read_modify_write(self.model.exprs[u], target)
        assert found is not None, f"atomic({u.name}) was checked to update its target"
        op, e = found
        operand = w.value(e)
        pre = w.scopes[0][0]
        if not isinstance(operand, (ir.Var, ir.Const)):
            name = f"tdsl_e{self.fresh()}"
            pre.append(_Let(name, operand))
            operand = ir.Var(name, operand.dtype)
        old = ir.Var(ir.ATOMIC_OLD, buf.dtype)
        value = ir.Binary(cast(ir.BinaryOp, op), old, operand, buf.dtype)
        return w.finish(ir.Store(buf, w.indices_for(target), value, atomic=True))

    def fresh(self) -> int:
        """A number no other inline reduction of this kernel has."""
        self._fresh += 1
        return self._fresh

    def offsets(self, s: Statement, t: Tensor, coords: dict[str, ir.Expr],
                env: Env) -> list[ir.Expr | None]:
        """The origin of `t`'s buffer box, as seen from statement `s`.

        Written in the store-level loop variables when they are all in scope,
        else in terms of the statement's own coordinates.
        """
        box = self.model.box_of(t)
        if box is None or box.lo is None:
            return [None] * len(t.dims)
        outer = s.bands[: box.depth]
        in_scope = {v.name for v in env.values() if isinstance(v, ir.Var)}
        if all(b.var in in_scope for b in outer):
            return [_origin(lo, [ir.Var(b.var) for b in outer], self.size_vars) for lo in box.lo]
        out: list[ir.Expr | None] = []
        coord_list = [coords[n] for n in s.isl_names]
        m = functions_map(s.band_values[: box.depth], s.domain)
        for lo in box.lo:
            pa = m.apply_range(isl.Map.from_pw_aff(lo)).as_pw_multi_aff().get_pw_aff(0)
            out.append(_origin(pa.coalesce(), coord_list, self.size_vars))
        return out


def _origin(lo: isl.PwAff, args: list[ir.Expr], sizes: Mapping[str, ir.Expr]) -> ir.Expr:
    """A buffer box's origin; 0 for a box no iteration needs (a producer read only by an
    inline reduction over an empty range, whose reads never run)."""
    if lo.domain().is_empty():
        return ir.index_const(0)
    return pwaff_to_ir(lo, args, sizes)


def _ids(e: isl.AstExpr) -> set[str]:
    """The names an isl AST expression reads."""
    t = expr_type(e)
    if t == isl.ast_expr_type.id:
        return {e.get_id().get_name()}
    if t == isl.ast_expr_type.int:
        return set()
    return set[str]().union(*(_ids(e.get_op_arg(k)) for k in range(e.get_op_n_arg())))


class _Let(ir.Stmt):
    """A variable for what follows it in a statement's code (`_sequence` makes it a Let
    around the rest); only in `_StmtWriter`'s lists."""

    __slots__ = ("name", "value")

    def __init__(self, name: str, value: ir.Expr) -> None:
        self.name = name
        self.value = value


def _sequence(items: list[ir.Stmt]) -> ir.Stmt:
    """The statements in order, each `_Let` a Let around the ones after it."""
    out: list[ir.Stmt] = []
    for n, item in enumerate(items):
        if isinstance(item, _Let):
            assert n + 1 < len(items), f"nothing uses {item.name}"
            out.append(ir.Let(item.name, item.value, _sequence(items[n + 1:])))
            break
        out.append(item)
    return out[0] if len(out) == 1 else ir.Block(tuple(out))


class _Bind(ir.Stmt):
    """A binder statement met in the AST: the block bounds it sets, for what follows it.
    Only in the statements `Converter.node` returns; `place_binders` replaces it."""

    __slots__ = ("lets",)

    def __init__(self, lets: tuple[tuple[str, ir.Expr], ...]) -> None:
        self.lets = lets


_PREV = ir.Var("_prev")  # in an escaping bound: the value it had before (0 if none)


def place_binders(s: ir.Stmt) -> ir.Stmt:
    """Replace the binders of block bounds by lets that cover every use of the bounds.

    isl's AST builder sees a block's bounds as parameters, so it uses them wherever
    it likes after the binder in the same iteration of the compute loop: in the
    block's loops, and in guards of other statements that share those loops. And
    it places the binder as it likes: first in a block, but also alone under an
    `if` of its own (its domain) or under a degenerate loop, apart from the loops
    that use the bounds. So a binder's lets wrap the rest of its block, and they
    also escape the statements around it (an `if`: selected by its condition, the
    other branch's binder or the value before; a degenerate loop: with its
    variable replaced by its value) to wrap whatever uses them later in an
    enclosing block. They stop at a real loop: its variable is in them.

    Where a binder did not run (its guard is false) its bounds are 0: a block from
    0 to 0 is within every stage, so isl's code (valid for all bounds in the AST
    context, `model._ast_context`) runs nothing of the block there, as the block
    has no instance at that iteration."""
    out, _ = _place(s, frozenset())
    return out if out is not None else ir.Block(())


def _place(s: ir.Stmt, bound: frozenset[str]) -> tuple[ir.Stmt | None, dict[str, ir.Expr]]:
    """`s` with its binders placed, and the bounds it sets for what follows it
    (`bound`: the bounds bound around it)."""
    match s:
        case _Bind(lets=lets):
            return None, dict(lets)
        case ir.Block(stmts):
            return _seq(list(stmts), bound)
        case ir.If(c, t, e):
            t2, bt = _place(t, bound)
            e2, be = _place(e, bound) if e is not None else (None, {})
            esc: dict[str, ir.Expr] = {
                n: ir.Select(c, bt.get(n, _PREV), be.get(n, _PREV), dt.index) for n in {**bt, **be}}
            if t2 is None and e2 is None:
                return None, esc
            return ir.If(c, t2 if t2 is not None else ir.Block(()), e2), esc
        case ir.Let(name, value, body):
            b2, esc = _place(body, bound)
            sub = _Substitute({name: value})
            esc = {n: sub.visit_expr(v) for n, v in esc.items()}
            return (ir.Let(name, value, b2) if b2 is not None else None), esc
        case ir.For(body=body):
            b2, _ = _place(body, bound)
            return replace(s, body=b2 if b2 is not None else ir.Block(())), {}
    return s, {}


def _seq(items: list[ir.Stmt], bound: frozenset[str]) -> tuple[ir.Stmt | None, dict[str, ir.Expr]]:
    """A block with its binders placed: each statement's bounds wrap the statements
    after it that use them."""
    if not items:
        return None, {}
    first, esc = _place(items[0], bound)
    rest, later = _seq(items[1:], bound | set(esc))
    if rest is not None and esc:
        used = free_vars(rest)
        for name in reversed([n for n in esc if n in used]):
            before = ir.Var(name) if name in bound else None
            rest = ir.Let(name, _resolve(esc[name], before), rest)
    parts = [x for x in (first, rest) if x is not None]
    flat = [y for x in parts for y in (x.stmts if isinstance(x, ir.Block) else (x,))]
    stmt = None if not flat else flat[0] if len(flat) == 1 else ir.Block(tuple(flat))
    merged = dict(esc)
    for n, v in later.items():
        merged[n] = _resolve(v, esc.get(n)) if n in esc else v
    return stmt, merged


def _resolve(v: ir.Expr, prev: ir.Expr | None) -> ir.Expr:
    """An escaping bound with the value before it filled in (0 when there was none)."""
    return _Substitute({_PREV.name: prev if prev is not None else ir.index_const(0)}).visit_expr(v)


class _StmtWriter:
    """Writes one statement's indices and value in terms of the loop variables."""

    def __init__(self, conv: Converter, s: Statement, coords: dict[str, ir.Expr],
                 dims: dict[cx.Dim, ir.Expr], env: Env) -> None:
        self.conv = conv
        self.env = env
        self.s = s
        self.coords = coords
        self.dims = dims
        # the code that computes the inline reductions the value reads, per scope: the
        # statement's, then the body of each inline reduction being written, with the
        # dims that scope binds (see `reduction`)
        # (each scope also has a number of its own, which keys what was computed in it)
        self.scopes: list[tuple[list[ir.Stmt], frozenset[cx.Dim], int]] = [([], frozenset(), 0)]
        self.opened = 0
        self.accumulators: list[ir.Buffer] = []
        self.computed: dict[tuple[object, ...], tuple[ir.Load, ...]] = {}
        self.accs: dict[int, tuple[ir.Load, ...]] = {}  # general reductions being written
        # data-dependent indices bound and checked already, by scope, index and extent
        self.checked: dict[tuple[object, ...], ir.Expr] = {}

    def finish(self, store: ir.Store) -> ir.Stmt:
        """The statement: its inline reductions computed first, each accumulator
        allocated around it (so it is private to every loop around the statement)."""
        out = _sequence([*self.scopes[0][0], store])
        for buf in reversed(self.accumulators):
            out = ir.Allocate(buf, out)
        return out

    def reduction(self, r: cx.Reduce) -> tuple[ir.Load, ...]:
        """A reduction inside the value (`td.sum` and the like, or a general one,
        `td.reduce`): a loop nest over its axes, in order, into a one-element accumulator
        per value; its values are the accumulators. The loops run before the statement,
        or before the step of the innermost enclosing reduction whose dims it uses (a
        reduction that uses none of them is computed once, not per step), and a
        reduction computed already in that scope is not computed again. A general
        reduction's step binds every new value before storing any."""
        free = set(cx.free_dims(r))
        level = max((n for n, (_, bound, _) in enumerate(self.scopes) if bound & free), default=0)
        pre, _, scope = self.scopes[level]
        key = (scope, cx.structure(r))
        known = self.computed.get(key)
        if known is not None:
            return known
        n = self.conv.fresh()
        at = (ir.index_const(0),)
        pack = r.body if isinstance(r.body, cx.Pack) else None
        starts = ([self.value(v) for v in pack.starts] if pack is not None
                  else [ir.Const(identity(r.op, r.dtype), r.dtype)])
        loads = []
        for k, start in enumerate(starts):
            name = f"tdsl_acc{n}" if pack is None else f"tdsl_acc{n}_{k}"
            buf = ir.Buffer(name, start.dtype, (ir.index_const(1),), "temp")
            self.accumulators.append(buf)
            pre.append(ir.Store(buf, at, start))
            loads.append(ir.Load(buf, at))
        saved = dict(self.dims)
        bounds = []
        for ax in r.axes:  # a bound may use the dims of earlier axes
            var = f"tdsl_r{n}_{ax.dim.name}"
            bounds.append((var, self.index(ax.lo), self.index(ax.hi)))
            self.dims[ax.dim] = ir.Var(var)
        inner: list[ir.Stmt] = []
        self.opened += 1
        self.scopes.append((inner, frozenset(ax.dim for ax in r.axes), self.opened))
        steps: list[ir.Stmt]
        if pack is None:
            value = self.value(r.body)
            steps = [ir.Store(loads[0].buffer, at, ir.Binary(_COMBINE[r.op], loads[0], value,
                                                              r.dtype))]
        else:
            steps = self._steps(pack, n, tuple(loads), inner)
        self.scopes.pop()
        body = _sequence([*inner, *steps])
        small = self.conv.unroll_inline and _small(bounds)
        kind = ir.ForKind.UNROLLED if small else ir.ForKind.SERIAL
        for var, lo, hi in reversed(bounds):
            trip = _trip(lo, hi)
            body = ir.For(var, lo, hi, kind, body, trip if kind is ir.ForKind.UNROLLED else None)
        self.dims = saved
        pre.append(body)
        self.computed[key] = tuple(loads)
        return self.computed[key]

    def _steps(self, pack: cx.Pack, n: int, loads: tuple[ir.Load, ...],
               inner: list[ir.Stmt]) -> list[ir.Stmt]:
        """A general reduction's step: each new value bound (in `inner`), then stored."""
        # copies of one reduction (a producer inlined twice) share its token: the copy
        # written inside another's step binds it until it is written
        outer = self.accs.get(pack.token)
        self.accs[pack.token] = loads
        stores: list[ir.Stmt] = []
        for k, step in enumerate(pack.steps):
            name = f"tdsl_f{n}_{k}"
            inner.append(_Let(name, self.value(step)))
            stores.append(ir.Store(loads[k].buffer, loads[k].indices, ir.Var(name, step.dtype)))
        if outer is None:
            del self.accs[pack.token]
        else:
            self.accs[pack.token] = outer
        return stores

    def arm(self, e: cx.Expr, holds: ir.Expr) -> ir.Expr:
        """An arm of a select (`td.where`), which the select uses where `holds`.

        The loops of the inline reductions only this arm reads, placed in the current
        scope, run under `if holds`: Cholesky's `where(i == j, sqrt(... - sum), (... -
        sum) / ...)` computes one sum per element, not both. Their accumulators are
        still set to the reduction's start outside the `if`, so the arm's value is
        defined either way, and the reductions are forgotten (`computed`), so a later
        use computes its own. The loops stay unconditional when the arm's code binds a
        variable or tests a data-dependent index (an access out of range in either arm
        is an error, `td.evaluate`'s rule), or when they are unrolled (straight-line
        code, which a vectorized loop keeps without a branch)."""
        pre, _, scope = self.scopes[-1]
        mark, known = len(pre), set(self.computed)
        v = self.value(e)
        added = pre[mark:]
        inits = [x for x in added if isinstance(x, ir.Store)
                 and x.buffer in self.accumulators]
        loops = [x for x in added if x not in inits]
        if not loops or any(
                not isinstance(x, ir.For) or x.kind is ir.ForKind.UNROLLED
                or any(isinstance(y, ir.Store) and y.buffer is self.conv.status
                       for y in walk_stmts(x))
                for x in loops):
            return v
        pre[mark:] = [*inits, ir.If(holds, _sequence(loops))]
        for key in set(self.computed) - known:
            if key[0] == scope:
                del self.computed[key]
        return v

    def store_indices(self) -> tuple[ir.Expr, ...]:
        stage = self.s.stage
        assert isinstance(stage, Stage), "an update stores to its target (`indices_for`)"
        raw = [self.dims[d] for d in stage.dims]
        return self._relative(stage, raw)

    def _relative(self, t: Tensor, raw: list[ir.Expr]) -> tuple[ir.Expr, ...]:
        """Indices into `t`'s buffer: relative to its box, in its storage order."""
        offs = self.conv.offsets(self.s, t, self.coords, self.env)
        rel = [r if o is None else ir.Binary("sub", r, o, dt.index) for r, o in zip(raw, offs)]
        box = self.conv.model.box_of(t)
        for k, rows in box.fold if box is not None else ():  # a circular buffer: r mod rows
            rel[k] = ir.Binary("pmod", raw[k], ir.index_const(rows), dt.index)
        return stored(self.conv.model, t, rel)

    def index(self, e: cx.Expr) -> ir.Expr:
        return index_expr(e, self.dims)

    def indices_for(self, acc: cx.Access) -> tuple[ir.Expr, ...]:
        """Buffer indices of a plain (non-view) access: affine, or clamped if data-dependent."""
        base = acc.tensor
        assert isinstance(base, Tensor), "a plain access, not a boundary view"
        raw = []
        for ix, e in zip(acc.indices, base.shape):
            if is_affine_index(ix):
                raw.append(self.index(ix))
            else:
                last = ir.Binary("sub", self.index(e), ir.index_const(1), dt.index)
                key = (self.scopes[-1][2], cx.structure(ix), cx.structure(e))
                v = self.checked.get(key)
                if v is None:  # not read yet (an update's target is also read)
                    v = self.checked[key] = self.check_index(
                        _as_index(self.value(ix)), last)
                raw.append(_clamp(v, last))
        return self._relative(base, raw)

    def check_index(self, v: ir.Expr, last: ir.Expr) -> ir.Expr:
        """A data-dependent index outside [0, last]: the kernel returns INDEX_OUT_OF_RANGE
        (the access itself is clamped). The index is bound to a variable and tested
        before the statement, or before the step of the inline reduction that reads it;
        the variable (what the access then uses) is returned."""
        pre = self.scopes[-1][0]
        if not isinstance(v, (ir.Var, ir.Const)):
            name = f"tdsl_i{self.conv.fresh()}"
            pre.append(_Let(name, v))
            v = ir.Var(name)
        bad = ir.Binary("or", ir.Compare("lt", v, ir.index_const(0)), ir.Compare("gt", v, last),
                        dt.bool_)
        flag = ir.Store(self.conv.status, (ir.index_const(0),),
                        ir.Const(INDEX_OUT_OF_RANGE, dt.int32))
        pre.append(ir.If(bad, flag))
        self.conv.checked = True
        return v

    def load(self, acc: cx.Access) -> ir.Expr:
        t = acc.tensor
        if not isinstance(t, BoundaryView):
            return ir.Load(self.conv.buffers[t], self.indices_for(acc))
        base: Tensor = t.tensor
        exts = [self.index(e) for e in base.shape]
        raw, inside = [], []
        for ix, ext in zip(acc.indices, exts):
            last = ir.Binary("sub", ext, ir.index_const(1), dt.index)
            v = self.index(ix) if is_affine_index(ix) else _as_index(self.value(ix))
            if t.mode == "pad":  # affine or data-dependent, outside is the pad value
                inside.append(ir.Binary("and", ir.Compare("ge", v, ir.index_const(0)),
                                        ir.Compare("lt", v, ext), dt.bool_))
            raw.append(_remap(t.mode, v, ext) if t.mode in ("mirror", "mirror_interior", "wrap")
                       else _clamp(v, last))
        load = ir.Load(self.conv.buffers[base], self._relative(base, raw))
        if not inside:
            return load
        cond = inside[0]
        for c in inside[1:]:
            cond = ir.Binary("and", cond, c, dt.bool_)
        assert t.value is not None  # a pad view has its value
        return ir.Select(cond, load, self.value(t.value), base.dtype)

    def value(self, e: cx.Expr) -> ir.Expr:
        match e:
            case cx.Const(v, d):
                return ir.Const(v, d)
            case cx.Dim():
                return ir.Cast(self.dims[e], dt.int32)
            case cx.Size(name):
                return ir.Cast(ir.Var(name), dt.int32)
            case cx.Access():
                return self.load(e)
            case cx.Binary(op, a, b, d):
                return ir.Binary(op, self.value(a), self.value(b), d)
            case cx.Compare(op, a, b):
                return ir.Compare(op, self.value(a), self.value(b))
            case cx.Unary(op, a, d):
                return ir.Unary(op, self.value(a), d)
            case cx.Call(fn, args, d):
                return ir.Call(fn, tuple(self.value(a) for a in args), d)
            case cx.Select(c, a, b, d):
                cond = self.value(c)
                return ir.Select(cond, self.arm(a, cond),
                                 self.arm(b, ir.Unary("invert", cond, dt.bool_)), d)
            case cx.Cast(a, d):
                return ir.Cast(self.value(a), d)
            case cx.Item(fold, index):
                return self.reduction(fold)[index]
            case cx.Acc(token, index):
                return self.accs[token][index]
            case cx.Reduce():
                return self.reduction(e)[0]
            case cx.Checked(a, n):
                last = ir.Binary("sub", self.index(n), ir.index_const(1), dt.index)
                at = self.check_index(_as_index(self.value(a)), last)
                return ir.Cast(_clamp(at, last), a.dtype)
        raise AssertionError(f"unexpected expression {e!r}")


# an inline reduction of at most this many constant points is unrolled: straight-line
# code inside the loop that uses it, which then vectorizes on every host target (not in
# portable C: `convert`)
UNROLL_INLINE = 32


def _trip(lo: ir.Expr, hi: ir.Expr) -> int | None:
    if isinstance(lo, ir.Const) and isinstance(hi, ir.Const):
        return max(int(hi.value) - int(lo.value), 0)
    return None


def _small(bounds: list[tuple[str, ir.Expr, ir.Expr]]) -> bool:
    total = 1
    for _, lo, hi in bounds:
        trip = _trip(lo, hi)
        if trip is None:
            return False
        total *= trip
    return total <= UNROLL_INLINE


def index_expr(e: cx.Expr, dims: Mapping[cx.Dim, ir.Expr]) -> ir.Expr:
    """An integer algorithm expression of dims, sizes and constants (an affine index, an
    extent) as a loop-IR index expression (`dims`: Dim -> value)."""
    match e:
        case cx.Const(v):
            return ir.index_const(int(v))
        case cx.Dim():
            return dims[e]
        case cx.Size(name):
            return ir.Var(name)
        case cx.Cast(a):
            return index_expr(a, dims)
        case cx.Unary("neg", a):
            return ir.Unary("neg", index_expr(a, dims), dt.index)
        case cx.Binary(op, a, b) if op in ("add", "sub", "mul", "floordiv", "mod", "min", "max"):
            return ir.Binary(op, index_expr(a, dims), index_expr(b, dims), dt.index)
        case cx.Call("abs", (a,)):
            return ir.Call("abs", (index_expr(a, dims),), dt.index)
        case cx.Select(cx.Compare(op, x, y), a, b):
            cond = ir.Compare(op, index_expr(x, dims), index_expr(y, dims))
            return ir.Select(cond, index_expr(a, dims), index_expr(b, dims), dt.index)
    raise TdslError(f"{show(e)} is not an integer expression of dims, sizes and constants")


def _remap(mode: str, v: ir.Expr, ext: ir.Expr) -> ir.Expr:
    """The index a mirror, mirror-interior or wrap view reads at `v` (see
    `compute.periods`): `v` itself when in range, so that loop partitioning finds
    the test and the interior reads plainly; one reflection or shift within a period
    beyond either edge; the remainder formula (`periods.anywhere`) further out."""
    far = anywhere(mode, v, ext, _IR_INDEX)

    def within(lo: ir.Expr, hi: ir.Expr) -> ir.Expr:  # lo <= v < hi
        return ir.Binary("and", ir.Compare("ge", v, lo), ir.Compare("lt", v, hi), dt.bool_)

    def form(x: Form) -> ir.Expr:
        return x.build(v, ext, ir.index_const, _IR_INDEX.add, _IR_INDEX.sub)

    # one period out on either side: v reflected or shifted once, the affine pieces
    # (`compute.periods.ONE_PERIOD`) the bounds inference (`poly.access._remapped`)
    # and the in-bounds check both follow
    left, right = ONE_PERIOD[mode]
    # further out, `far` is in range already; the clamp lets the inbounds check prove it
    # (a remainder by a size is beyond its quasi-affine reasoning)
    last = ir.Binary("sub", ext, ir.index_const(1), dt.index)
    beyond = ir.Select(within(form(left.lo), form(left.hi)), form(left.value), ir.Select(
        within(form(right.lo), form(right.hi)), form(right.value), _clamp(far, last), dt.index),
        dt.index)
    return ir.Select(within(ir.index_const(0), ext), v, beyond, dt.index)


def _index_op(op: ir.BinaryOp) -> Callable[[ir.Expr, ir.Expr], ir.Expr]:
    return lambda x, y: ir.Binary(op, x, y, dt.index)


# index arithmetic in the loop IR, for `periods.anywhere`
_IR_INDEX: Arith[ir.Expr] = Arith(
    const=ir.index_const, add=_index_op("add"), sub=_index_op("sub"), mul=_index_op("mul"),
    mod=_index_op("mod"), max=_index_op("max"), less=lambda x, y: ir.Compare("lt", x, y),
    select=lambda c, x, y: ir.Select(c, x, y, dt.index))


def _as_index(v: ir.Expr) -> ir.Expr:
    """A data-dependent index as an index value: a uint64 beyond int64's range is
    int64's largest value (out of range of every tensor), as `td.evaluate` reads it."""
    if v.dtype == dt.uint64:
        v = ir.Binary("min", v, ir.Const((1 << 63) - 1, dt.uint64), dt.uint64)
    return ir.Cast(v, dt.index)


def _clamp(v: ir.Expr, last: ir.Expr) -> ir.Expr:
    return ir.Binary("min", ir.Binary("max", v, ir.index_const(0), dt.index), last, dt.index)


def stored(model: Model, t: Tensor, per_dim: list[ir.Expr]) -> tuple[ir.Expr, ...]:
    """Per-dim values (indices, extents) of `t` in the order its buffer stores its dims."""
    order = model.schedule.state.layout.get(t)
    return tuple(per_dim[k] for k in order) if order else tuple(per_dim)


def buffers_for(model: Model) -> dict[Tensor, ir.Buffer]:
    pipeline = model.schedule.state.pipeline
    conv_sizes = {p: ir.Var(p) for p in model.params}
    out: dict[Tensor, ir.Buffer] = {}

    def shape_of(t: Tensor) -> tuple[ir.Expr, ...]:
        return tuple(index_expr(e, {}) for e in t.shape)

    for inp in pipeline.inputs:
        out[inp] = ir.Buffer(inp.name, inp.dtype, shape_of(inp), "input")
    for t in model.boxes:
        if t in pipeline.outputs:
            out[t] = ir.Buffer(t.name, t.dtype, shape_of(t), "output")
            continue
        box = model.boxes[t]
        if box.lo is None:
            shape = shape_of(t)
        else:
            shape = tuple(_extent(e, conv_sizes) for e in box.extents)
        out[t] = ir.Buffer(t.name, t.dtype, stored(model, t, list(shape)), "temp")
    return out


def _extent(pa: isl.PwAff, sizes: Mapping[str, ir.Expr]) -> ir.Expr:
    """A buffer extent: a constant when isl can bound it, else an expression of sizes
    (1 for a stage no iteration needs, e.g. one read only by an empty reduction)."""
    if pa.domain().is_empty():
        return ir.index_const(1)
    # an extent is integral, but isl may write it with a rational coefficient on a piece
    # where a congruence makes it one ((M + 1)/2 where M is odd), which max_val refuses
    pa = pa.floor()
    bound = pa.max_val()
    if bound.is_int():
        return ir.index_const(bound.to_python())
    return pwaff_to_ir(pa, [], sizes)


def convert(model: Model, ast: isl.AstNode, vectors: dict[Statement, Vector], name: str,
            portable: bool = False, isa: ir.Isa = "generic"
            ) -> tuple[ir.LoweredFunc, list[tuple[ir.Buffer, tuple[str, ...], bool]]]:
    """The isl AST as a loop-IR function, and the temp buffers with the loop variables
    around their store levels, and whether each holds a sliding window (for the allocate
    pass). For portable C (`portable`: the
    function says so, with its `isa`) an inline reduction is a loop, never unrolled
    unless the schedule asks (code size counts there, and its compiler unrolls what
    pays)."""
    pipeline = model.schedule.state.pipeline
    buffers = buffers_for(model)
    conv = Converter(model, buffers, vectors)
    conv.unroll_inline = not portable
    body = place_binders(conv.node(ast, {}, frozenset()))
    unbound = sorted(free_vars(body) & conv.bound_vars.keys())
    if unbound:
        # isl tested a block bound (a parameter to it) outside the loop that sets it
        raise ScheduleError(
            f"isl's loop generator used the block bound(s) {', '.join(unbound)} outside the "
            f"loop that computes them, so this schedule is refused rather than compiled "
            f"wrong; another split or tile factor, or a compute_at at another loop, avoids it")
    func = ir.LoweredFunc(
        name,
        tuple(buffers[t] for t in pipeline.inputs),
        tuple(buffers[t] for t in pipeline.outputs),
        tuple(ir.Var(p) for p in model.params),
        body,
        conv.status if conv.checked else None,
        frozenset(model.schedule.state.nontemporal),
        portable=portable,
        isa=isa,
    )
    temps = []
    for stage in pipeline.stages:
        b = buffers.get(stage)
        if b is not None and b.kind == "temp":
            depth = model.boxes[stage].depth
            g = model.groups[stage]
            temps.append((b, tuple(band.var for band in g.prefix[:depth]), g.window is not None))
    return func, temps

