"""One statement instance's code, written in terms of the loop variables around it.

`StatementWriter` writes a statement's store indices (relative to its buffer's box,
in its storage order), the value from the algorithm's expression, the loops of the
inline reductions the value reads (before the statement, or before the step of the
reduction around them), data-dependent indices clamped and checked, and boundary
views' indices remapped; `index_expr` writes an integer algorithm expression (an
index, an extent) as a loop-IR index. Used by the converter (`from_ast`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ... import dtypes as dt
from ...compute import expr as cx
from ...compute.periods import ONE_PERIOD, Arith, Form, anywhere
from ...compute.printer import show
from ...compute.tensor import BoundaryView, Stage, Tensor, identity, is_affine_index
from ...errors import TdslError
from .. import ir
from ..abi import INDEX_OUT_OF_RANGE
from ..build import (
    and_,
    binary,
    call,
    cast,
    compare,
    const,
    ge,
    gt,
    index,
    invert,
    lt,
    maximum,
    minimum,
    neg,
    or_,
    pmod,
    select,
    sub,
)
from ..rewrite import walk_stmts
from .model import Model, Statement

if TYPE_CHECKING:
    from .from_ast import Converter

# the values of the isl AST's names in scope: its loop iterators (c<K>)
Env = dict[str, ir.Expr]

# the loop-IR operation that combines a reduction's accumulator with the next value
COMBINE: dict[cx.ReduceOp, ir.BinaryOp] = {"sum": "add", "prod": "mul", "max": "max", "min": "min"}


class PendingLet(ir.Stmt):
    """A variable for what follows it in a statement's code (`_sequence` makes it a Let
    around the rest); only in `StatementWriter`'s lists."""

    __slots__ = ("name", "value")

    def __init__(self, name: str, value: ir.Expr) -> None:
        self.name = name
        self.value = value


def _sequence(items: list[ir.Stmt]) -> ir.Stmt:
    """The statements in order, each `PendingLet` a Let around the ones after it."""
    out: list[ir.Stmt] = []
    for n, item in enumerate(items):
        if isinstance(item, PendingLet):
            assert n + 1 < len(items), f"nothing uses {item.name}"
            out.append(ir.Let(item.name, item.value, _sequence(items[n + 1:])))
            break
        out.append(item)
    return out[0] if len(out) == 1 else ir.Block(tuple(out))



class StatementWriter:
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
        at = (index(0),)
        pack = r.body if isinstance(r.body, cx.Pack) else None
        starts = ([self.value(v) for v in pack.starts] if pack is not None
                  else [const(identity(r.op, r.dtype), r.dtype)])
        loads = []
        for k, start in enumerate(starts):
            name = f"tdsl_acc{n}" if pack is None else f"tdsl_acc{n}_{k}"
            buf = ir.Buffer(name, start.dtype, (index(1),), "temp")
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
            steps = [ir.Store(loads[0].buffer, at, ir.Binary(COMBINE[r.op], loads[0], value,
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
            inner.append(PendingLet(name, self.value(step)))
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
        rel = [r if o is None else sub(r, o) for r, o in zip(raw, offs)]
        box = self.conv.model.box_of(t)
        for k, rows in box.fold if box is not None else ():  # a circular buffer: r mod rows
            rel[k] = pmod(raw[k], index(rows))
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
                last = sub(self.index(e), index(1))
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
            pre.append(PendingLet(name, v))
            v = ir.Var(name)
        bad = or_(lt(v, index(0)), gt(v, last))
        flag = ir.Store(self.conv.status, (index(0),),
                        const(INDEX_OUT_OF_RANGE, dt.int32))
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
            last = sub(ext, index(1))
            v = self.index(ix) if is_affine_index(ix) else _as_index(self.value(ix))
            if t.mode == "pad":  # affine or data-dependent, outside is the pad value
                inside.append(and_(ge(v, index(0)), lt(v, ext)))
            raw.append(_remap(t.mode, v, ext) if t.mode in ("mirror", "mirror_interior", "wrap")
                       else _clamp(v, last))
        load = ir.Load(self.conv.buffers[base], self._relative(base, raw))
        if not inside:
            return load
        cond = inside[0]
        for c in inside[1:]:
            cond = and_(cond, c)
        assert t.value is not None  # a pad view has its value
        return ir.Select(cond, load, self.value(t.value), base.dtype)

    def value(self, e: cx.Expr) -> ir.Expr:
        match e:
            case cx.Const(v, d):
                return const(v, d)
            case cx.Dim():
                return cast(self.dims[e], dt.int32)
            case cx.Size(name):
                return cast(ir.Var(name), dt.int32)
            case cx.Access():
                return self.load(e)
            case cx.Binary(op, a, b, d):
                return ir.Binary(op, self.value(a), self.value(b), d)
            case cx.Compare(op, a, b):
                return compare(op, self.value(a), self.value(b))
            case cx.Unary(op, a, d):
                return ir.Unary(op, self.value(a), d)
            case cx.Call(fn, args, d):
                return call(fn, tuple(self.value(a) for a in args), d)
            case cx.Select(c, a, b, d):
                cond = self.value(c)
                return ir.Select(cond, self.arm(a, cond),
                                 self.arm(b, invert(cond)), d)
            case cx.Cast(a, d):
                return cast(self.value(a), d)
            case cx.Item(fold, position):
                return self.reduction(fold)[position]
            case cx.Acc(token, position):
                return self.accs[token][position]
            case cx.Reduce():
                return self.reduction(e)[0]
            case cx.Checked(a, n):
                last = sub(self.index(n), index(1))
                at = self.check_index(_as_index(self.value(a)), last)
                return cast(_clamp(at, last), a.dtype)
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
            return index(int(v))
        case cx.Dim():
            return dims[e]
        case cx.Size(name):
            return ir.Var(name)
        case cx.Cast(a):
            return index_expr(a, dims)
        case cx.Unary("neg", a):
            return neg(index_expr(a, dims))
        case cx.Binary(op, a, b) if op in ("add", "sub", "mul", "floordiv", "mod", "min", "max"):
            return binary(op, index_expr(a, dims), index_expr(b, dims))
        case cx.Call("abs", (a,)):
            return call("abs", (index_expr(a, dims),), dt.index)
        case cx.Select(cx.Compare(op, x, y), a, b):
            cond = compare(op, index_expr(x, dims), index_expr(y, dims))
            return select(cond, index_expr(a, dims), index_expr(b, dims))
    raise TdslError(f"{show(e)} is not an integer expression of dims, sizes and constants")


def _remap(mode: str, v: ir.Expr, ext: ir.Expr) -> ir.Expr:
    """The index a mirror, mirror-interior or wrap view reads at `v` (see
    `compute.periods`): `v` itself when in range, so that loop partitioning finds
    the test and the interior reads plainly; one reflection or shift within a period
    beyond either edge; the remainder formula (`periods.anywhere`) further out."""
    far = anywhere(mode, v, ext, _IR_INDEX)

    def within(lo: ir.Expr, hi: ir.Expr) -> ir.Expr:  # lo <= v < hi
        return and_(ge(v, lo), lt(v, hi))

    def form(x: Form) -> ir.Expr:
        return x.build(v, ext, ir.index_const, _IR_INDEX.add, _IR_INDEX.sub)

    # one period out on either side: v reflected or shifted once, the affine pieces
    # (`compute.periods.ONE_PERIOD`) the bounds inference (`poly.access._remapped`)
    # and the in-bounds check both follow
    left, right = ONE_PERIOD[mode]
    # further out, `far` is in range already; the clamp lets the inbounds check prove it
    # (a remainder by a size is beyond its quasi-affine reasoning)
    last = sub(ext, index(1))
    beyond = select(within(form(left.lo), form(left.hi)), form(left.value),
                    select(within(form(right.lo), form(right.hi)), form(right.value),
                           _clamp(far, last)))
    return select(within(index(0), ext), v, beyond)


def _index_op(op: ir.BinaryOp) -> Callable[[ir.Expr, ir.Expr], ir.Expr]:
    return lambda x, y: binary(op, x, y)


# index arithmetic in the loop IR, for `periods.anywhere`
_IR_INDEX: Arith[ir.Expr] = Arith(
    const=ir.index_const, add=_index_op("add"), sub=_index_op("sub"), mul=_index_op("mul"),
    mod=_index_op("mod"), max=_index_op("max"), less=lt,
    select=select)


def _as_index(v: ir.Expr) -> ir.Expr:
    """A data-dependent index as an index value: a uint64 beyond int64's range is
    int64's largest value (out of range of every tensor), as `td.evaluate` reads it."""
    if v.dtype == dt.uint64:
        v = ir.Binary("min", v, const((1 << 63) - 1, dt.uint64), dt.uint64)
    return cast(v, dt.index)


def _clamp(v: ir.Expr, last: ir.Expr) -> ir.Expr:
    return minimum(maximum(v, index(0)), last)


def stored(model: Model, t: Tensor, per_dim: list[ir.Expr]) -> tuple[ir.Expr, ...]:
    """Per-dim values (indices, extents) of `t` in the order its buffer stores its dims."""
    order = model.schedule.state.layout.get(t)
    return tuple(per_dim[k] for k in order) if order else tuple(per_dim)

