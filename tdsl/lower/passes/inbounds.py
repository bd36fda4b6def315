"""Every access proven inside its array: tdsl's memory-safety invariant.

Walks the loop IR keeping, as an isl set over every variable in scope (sizes,
loop variables, lets), what is known where each statement runs: loop bounds,
let values, branch conditions. Every load and store of every buffer (inputs,
outputs and temp buffers alike) must then have each index in [0, extent) at
every point of that set; the extents are the buffer's own (expressions of the
sizes). Index expressions are
quasi-affine (+, -, * by a constant, floor division and remainder by a
constant, min, max, select); anything else (a data-dependent index, a float
condition) is an unconstrained unknown, so a clamp of it still proves.

Data-dependent indices are clamped by the lowering (and reported out of range
by the kernel), boundary views clamp or remap theirs, and affine indices of the
algorithm are proven in range before lowering (`poly.access.check_accesses`): so
every access proves, and a failure here is a bug of the lowering.

Guarantees: the function is returned unchanged; when an access can leave its
buffer, `OutOfBoundsError` names the buffer, the index and one point (values
of the sizes and loop variables) where it does, found at build time instead of
as a read or write outside the array.
"""

from __future__ import annotations

from collections.abc import Iterable

import islpy as isl

from ...errors import OutOfBoundsError
from .. import ir
from ..poly.affine import val
from ..printer import expr as expr_text
from ..rewrite import expr_children

_CTX = isl.DEFAULT_CONTEXT
_ARITH = {"add", "sub", "mul", "floordiv", "mod", "pdiv", "pmod", "min", "max"}


class Terms:
    """Loop-IR index expressions and conditions as isl objects over the variables in scope
    (isl parameters named as the variables). Shared by the passes that reason on the loop
    IR with isl."""

    def __init__(self) -> None:
        self.unknowns = 0
        self.vars: dict[str, isl.PwAff] = {}
        self.terms: dict[ir.Expr, isl.PwAff] = {}  # unrolled copies repeat their indices
        self.consts: dict[int, isl.PwAff] = {}

    # ------------------------------------------------------------ isl terms

    def var(self, name: str) -> isl.PwAff:
        pa = self.vars.get(name)
        if pa is None:
            sp = isl.Space.create_from_names(_CTX, set=[], params=[name])
            pa = isl.PwAff.from_aff(isl.Aff.var_on_domain(isl.LocalSpace.from_space(sp),
                                                           isl.dim_type.param, 0))
            self.vars[name] = pa
        return pa

    def unknown(self) -> isl.PwAff:
        self.unknowns += 1
        return self.var(f"_unknown{self.unknowns}")

    def const(self, n: int) -> isl.PwAff:
        pa = self.consts.get(n)
        if pa is None:
            sp = isl.Space.create_from_names(_CTX, set=[], params=[])
            zero = isl.Aff.zero_on_domain(isl.LocalSpace.from_space(sp))
            pa = self.consts[n] = isl.PwAff.from_aff(zero.set_constant_val(
                val(n)))
        return pa

    def term(self, e: ir.Expr) -> isl.PwAff:
        """`e` as a quasi-affine function of the variables in scope; a fresh unknown where
        it is not one."""
        pa = self.terms.get(e)
        if pa is None:
            pa = self.terms[e] = self._term(e)
        return pa

    def _term(self, e: ir.Expr) -> isl.PwAff:
        match e:
            case ir.Const(v) if isinstance(v, int) and not isinstance(v, bool):
                return self.const(v)
            case ir.Var(name):
                return self.var(name)
            case ir.Unary("neg", a):
                return -self.term(a)
            case ir.Cast(a) if a.dtype.is_int:
                return self.term(a)  # index casts of integer values keep the value
            case ir.Select(c, a, b):
                cond = self.cond(c)
                if cond is None:
                    return self.unknown()
                ta, tb = self.term(a), self.term(b)
                return ta.intersect_domain(cond).union_add(tb.intersect_domain(cond.complement()))
            case ir.Binary(op, a, b) if op in _ARITH:
                return self._binary(op, a, b)
        return self.unknown()

    def _binary(self, op: str, a: ir.Expr, b: ir.Expr) -> isl.PwAff:
        ta = self.term(a)
        if op in ("floordiv", "pdiv", "mod", "pmod"):
            if not (isinstance(b, ir.Const) and isinstance(b.value, int) and b.value > 0):
                return self.unknown()
            d = val(b.value)
            return ta.scale_down_val(d).floor() if op in ("floordiv", "pdiv") else ta.mod_val(d)
        tb = self.term(b)
        if op == "mul":
            if tb.is_cst():
                return ta.mul(tb)
            if ta.is_cst():
                return tb.mul(ta)
            return self.unknown()
        return {"add": ta.add, "sub": ta.sub, "min": ta.min, "max": ta.max}[op](tb)

    def cond(self, e: ir.Expr) -> isl.Set | None:
        """The set where `e` holds, or None when it is not a quasi-affine condition."""
        match e:
            case ir.Const(v) if isinstance(v, bool):
                s = self.const(0).domain()
                return s if v else s.empty(s.get_space())
            case ir.Compare(op, a, b) if a.dtype.is_int:
                ta, tb = self.term(a), self.term(b)
                return {"eq": ta.eq_set, "ne": ta.ne_set, "lt": ta.lt_set, "le": ta.le_set,
                        "gt": ta.gt_set, "ge": ta.ge_set}[op](tb)
            case ir.Binary("and" | "or", a, b) if e.dtype.is_bool:
                ca, cb = self.cond(a), self.cond(b)
                if ca is None or cb is None:
                    return None
                return ca.intersect(cb) if e.op == "and" else ca.union(cb)
            case ir.Unary("invert", a) if e.dtype.is_bool:
                ca = self.cond(a)
                return None if ca is None else ca.complement()
        return None

    def entry(self, func: ir.LoweredFunc) -> isl.Set:
        """What holds at the start of `func`: every size is at least 1."""
        ctx = self.const(0).domain()
        for v in func.sizes:
            ctx = ctx & self.var(v.name).ge_set(self.const(1))
        return ctx

    def loop(self, ctx: isl.Set, s: ir.For) -> isl.Set:
        """What holds inside loop `s`."""
        v = self.var(s.var)
        return ctx & v.ge_set(self.term(s.start)) & v.lt_set(self.term(s.end))

    def let(self, ctx: isl.Set, name: str, value: ir.Expr) -> isl.Set:
        """What holds inside a let of `name` (forgetting what held of an earlier `name`)."""
        k = ctx.find_dim_by_name(isl.dim_type.param, name)
        if k >= 0:
            ctx = ctx.project_out(isl.dim_type.param, k, 1)
        return ctx & self.var(name).eq_set(self.term(value))


class _Checker(Terms):
    def __init__(self, func: ir.LoweredFunc):
        super().__init__()
        self.func = func
        self.extents: dict[str, list[isl.PwAff]] = {}
        if func.status is not None:  # held by the function itself
            self.extents[func.status.name] = [self.term(e) for e in func.status.shape]

    # ------------------------------------------------------------ walk

    def stmt(self, s: ir.Stmt, ctx: isl.Set) -> None:
        match s:
            case ir.For(_, start, end, _, body):
                self.exprs((start, end), ctx)
                self.stmt(body, self.loop(ctx, s))
            case ir.Let(name, value, body):
                self.exprs((value,), ctx)
                self.stmt(body, self.let(ctx, name, value))
            case ir.If(c, then, other):
                self.exprs((c,), ctx)
                cond = self.cond(c)
                self.stmt(then, ctx if cond is None else ctx & cond)
                if other is not None:
                    self.stmt(other, ctx if cond is None else ctx & cond.complement())
            case ir.Block(stmts):
                for x in stmts:
                    self.stmt(x, ctx)
            case ir.Allocate(buf, body):
                self.extents[buf.name] = [self.term(e) for e in buf.shape]
                self.stmt(body, ctx)
            case ir.Store(buf, idx, value):
                self.access(buf, idx, ctx, "stores to")
                self.exprs(idx + (value,), ctx)
            case _:
                raise AssertionError(f"unexpected statement {s!r}")

    def exprs(self, es: Iterable[ir.Expr], ctx: isl.Set) -> None:
        for e in es:
            if isinstance(e, ir.Load):
                self.access(e.buffer, e.indices, ctx, "loads from")
            self.exprs(expr_children(e), ctx)

    def access(self, buf: ir.Buffer, idx: tuple[ir.Expr, ...], ctx: isl.Set, what: str) -> None:
        exts = self.extents.get(buf.name)
        if exts is None:  # an argument: its extents are expressions of the sizes
            exts = self.extents[buf.name] = [self.term(e) for e in buf.shape]
        outside = [self.term(i).lt_set(self.const(0)) | self.term(i).ge_set(ext)
                   for i, ext in zip(idx, exts)]
        every = outside[0]
        for o in outside[1:]:
            every = every | o
        if (ctx & every).is_empty():  # one question per access; which index, only on failure
            return
        k, bad = next((k, ctx & o) for k, o in enumerate(outside) if not (ctx & o).is_empty())
        raise OutOfBoundsError(
            f"internal error: {self.func.name} {what} {buf.name} outside its allocation: "
            f"index {k} ({expr_text(idx[k])}) leaves [0, {expr_text(buf.shape[k])}) when "
            f"{_point(bad)}; please report this schedule")


def _point(bad: isl.Set) -> str:
    pt = bad.sample_point()
    sp = pt.get_space()
    vals = []
    for k in range(sp.dim(isl.dim_type.param)):
        name = sp.get_dim_name(isl.dim_type.param, k)
        assert name is not None  # every parameter is a named size or offset
        if not name.startswith("_unknown"):
            vals.append(f"{name}={pt.get_coordinate_val(isl.dim_type.param, k).to_python()}")
    return ", ".join(vals) or "always"


def check_in_bounds(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """Prove every access of `func` in bounds (raise OutOfBoundsError if not)."""
    c = _Checker(func)
    c.stmt(func.body, c.entry(func))
    return func
