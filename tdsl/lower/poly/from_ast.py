"""isl AST -> loop IR: the `convert` step of the pipeline.

Walks the AST that isl built from the model's schedule map: each loop takes the
name and kind of the band its schedule dimension is, and each statement
instance becomes a Store whose indices and value are written from the
algorithm in terms of the loop variables (`statement_writer`). A block's binder
statement (see `model.Group.bounds`) becomes an `ir.Binder` where isl placed it;
the place_binders pass (`passes.place_binders`) then makes it lets around the
statements that use the bounds. Temp buffers are placed by the allocate pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import islpy as isl

from ... import dtypes as dt
from ...compute import expr as cx
from ...compute.tensor import Stage, Tensor, Update, identity, read_modify_write
from ...schedule.state import Schedulable
from .. import ir
from ..build import add, const, floordiv, index, minimum, mul, sub
from .access import functions_map
from .affine import ast_expr_to_ir, pwaff_to_ir
from .isl_ast import NODE_FOR, NODE_IF, OP_AND, expr_type, node_type, op_type
from .model import Band, Model, Statement
from .statement_writer import COMBINE, Env, PendingLet, StatementWriter, index_expr, stored
from .tree import Vector

# the stages whose block bounds a loop around the node binds (see `Converter._block_lets`)
Bounded = frozenset[Schedulable]

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
        self.status = ir.Buffer("tdsl_status", dt.int32, (index(1),), "temp")
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
        trips = floordiv(add(sub(end, start), index(step - 1)), index(step))
        at = add(start, mul(index(step), ir.Var(count)))
        return ir.For(count, index(0), trips, kind, ir.Let(band.var, at, body), band.extent)

    def _reassociation(self, band: Band) -> ir.Reassociation:
        """The mark of a loop scheduled with reassociate=True (the reassociate pass
        rewrites the loop)."""
        stage = band.owner
        red = self.model.exprs[stage]
        assert isinstance(stage, Stage) and isinstance(red, cx.Reduce)  # a reduction's loop
        what = f"{band.kind.replace('vectorized', 'vectorize')}({stage.name}, {band.loop.name!r}, reassociate=True)"
        return ir.Reassociation(self.buffers[stage], COMBINE[red.op],
                                identity(red.op, red.dtype), what)

    def _end(self, cond: isl.AstExpr, it: str, names: dict[str, ir.Expr]) -> ir.Expr:
        O = isl.ast_expr_op_type
        op = op_type(cond)
        if op in (OP_AND, O.and_then):
            parts = [self._end(cond.get_op_arg(k), it, names) for k in range(cond.get_op_n_arg())]
            out = parts[0]
            for p in parts[1:]:
                out = minimum(out, p)
            return out
        lhs = cond.get_op_arg(0)
        assert expr_type(lhs) == isl.ast_expr_type.id and lhs.get_id().get_name() == it, cond.to_C_str()
        rhs = ast_expr_to_ir(cond.get_op_arg(1), names)
        if op == O.le:
            return add(rhs, index(1))
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
            return ir.Binder(tuple((name, pwaff_to_ir(pa, args, self.size_vars)) for name, pa in g.bounds))
        dims = {d: coords[d.name] for d in s.dims}
        w = StatementWriter(self, s, coords, dims, env)
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
            return ir.Store(buf, idx, const(identity(stage.reduction.op, stage.dtype), stage.dtype))
        if s.role == "update":
            red = self.model.exprs[stage]
            assert isinstance(red, cx.Reduce)  # a reduction's accumulation
            acc = ir.Load(buf, idx)
            step = ir.Binary(COMBINE[red.op], acc, w.value(red.body), red.dtype)
            return w.finish(ir.Store(buf, idx, step))
        return w.finish(ir.Store(buf, idx, w.value(self.model.exprs[stage])))

    def _atomic(self, w: StatementWriter, u: Update, target: cx.Access, buf: ir.Buffer) -> ir.Stmt:
        """An atomic update (`Schedule.atomic`): its operand computed and bound first,
        then the element updated by it in one atomic store."""
        found = read_modify_write(self.model.exprs[u], target)
        assert found is not None, f"atomic({u.name}) was checked to update its target"
        op, e = found
        operand = w.value(e)
        pre = w.scopes[0][0]
        if not isinstance(operand, (ir.Var, ir.Const)):
            name = f"tdsl_e{self.fresh()}"
            pre.append(PendingLet(name, operand))
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
        return index(0)
    return pwaff_to_ir(lo, args, sizes)


def _ids(e: isl.AstExpr) -> set[str]:
    """The names an isl AST expression reads."""
    t = expr_type(e)
    if t == isl.ast_expr_type.id:
        return {e.get_id().get_name()}
    if t == isl.ast_expr_type.int:
        return set()
    return set[str]().union(*(_ids(e.get_op_arg(k)) for k in range(e.get_op_n_arg())))



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
        return index(1)
    # an extent is integral, but isl may write it with a rational coefficient on a piece
    # where a congruence makes it one ((M + 1)/2 where M is odd), which max_val refuses
    pa = pa.floor()
    bound = pa.max_val()
    if bound.is_int():
        return index(bound.to_python())
    return pwaff_to_ir(pa, [], sizes)


def convert(model: Model, ast: isl.AstNode, vectors: dict[Statement, Vector], name: str,
            portable: bool = False, isa: ir.Isa = "generic"
            ) -> tuple[ir.LoweredFunc, list[tuple[ir.Buffer, tuple[str, ...], bool]]]:
    """The isl AST as a loop-IR function (its block binders `ir.Binder`s where isl put
    them, for the place_binders pass), and the temp buffers with the loop variables
    around their store levels, and whether each holds a sliding window (for the allocate
    pass). For portable C (`portable`: the function says so, with its `isa`) an inline
    reduction is a loop, never unrolled unless the schedule asks (code size counts
    there, and its compiler unrolls what pays)."""
    pipeline = model.schedule.state.pipeline
    buffers = buffers_for(model)
    conv = Converter(model, buffers, vectors)
    conv.unroll_inline = not portable
    body = conv.node(ast, {}, frozenset())
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

