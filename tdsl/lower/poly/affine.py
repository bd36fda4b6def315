"""Quasi-affine expressions as isl objects, built by name.

Index expressions of the algorithm and loop expressions of the schedule
become isl piecewise affine functions over a named space; isl's answers
(bounds, offsets, extents) come back as loop-IR index expressions through
isl's own expression builder.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import islpy as isl

from ... import dtypes as dt
from ...compute import expr as cx
from ...compute.traversal import is_affine_index
from ...schedule.state import LDim, LFuse, LInner, LoopExpr, LOuter
from .. import ir
from .isl_ast import OP_AND, OP_OR, expr_type, op_type

CTX = isl.DEFAULT_CONTEXT


def space(tuple_name: str | None, names: list[str], params: list[str]) -> isl.Space:
    sp = isl.Space.create_from_names(CTX, set=list(names), params=list(params))
    return sp.set_tuple_name(isl.dim_type.set, tuple_name) if tuple_name else sp


def val(n: int | float) -> isl.Val:
    """The isl integer value of the constant `n` (truncated to an int), of any size (a
    uint64 constant is beyond the C long that `Val.int_from_si` takes)."""
    n = int(n)
    if -2**63 <= n < 2**63:
        return isl.Val.int_from_si(CTX, n)
    return isl.Val.read_from_str(CTX, str(n))


class Vars:
    """The affine variables of one named space, looked up by name."""

    def __init__(self, sp: isl.Space) -> None:
        self.space = sp
        self.v = isl.affs_from_space(sp)

    def __getitem__(self, name: str) -> isl.PwAff:
        return self.v[name]

    def const(self, n: int) -> isl.PwAff:
        return self.v[0] + n if n else self.v[0]

    def universe(self) -> isl.Set:
        return isl.Set.universe(self.space)


def pwaff(e: cx.Expr, vs: Vars, dim_names: Mapping[cx.Dim, str]) -> isl.PwAff:
    """An affine index expression over `vs`; `dim_names` maps Dim -> variable name."""
    match e:
        case cx.Const(v):
            return vs.const(int(v))
        case cx.Dim():
            return vs[dim_names[e]]
        case cx.Size(name):
            return vs[name]
        case cx.Cast(a):
            return pwaff(a, vs, dim_names)
        case cx.Unary("neg", a):
            return -pwaff(a, vs, dim_names)
        case cx.Binary("add", a, b):
            return pwaff(a, vs, dim_names) + pwaff(b, vs, dim_names)
        case cx.Binary("sub", a, b):
            return pwaff(a, vs, dim_names) - pwaff(b, vs, dim_names)
        case cx.Binary("min", a, b):
            return pwaff(a, vs, dim_names).min(pwaff(b, vs, dim_names))
        case cx.Binary("max", a, b):
            return pwaff(a, vs, dim_names).max(pwaff(b, vs, dim_names))
        case cx.Binary("mul", cx.Const(c), b):
            return pwaff(b, vs, dim_names).scale_val(val(c))
        case cx.Binary("mul", a, cx.Const(c)):
            return pwaff(a, vs, dim_names).scale_val(val(c))
        case cx.Binary("floordiv", a, cx.Const(c)):
            return pwaff(a, vs, dim_names).scale_down_val(val(c)).floor()
        case cx.Binary("mod", a, cx.Const(c)):
            return pwaff(a, vs, dim_names).mod_val(val(c))
    raise AssertionError(f"not affine: {e!r} (is_affine_index={is_affine_index(e)})")


def loop_pwaff(le: LoopExpr, vs: Vars, dim_names: Mapping[cx.Dim, str]) -> isl.PwAff:
    """The value of a schedule loop as a function of the stage's dims."""
    match le:
        case LDim(d):
            return vs[dim_names[d]]
        case LOuter(parent, f):
            return _zero_based(parent, vs, dim_names).scale_down_val(val(f)).floor()
        case LInner(parent, f):
            return _zero_based(parent, vs, dim_names).mod_val(val(f))
        case LFuse(outer, inner, ext):
            return loop_pwaff(outer, vs, dim_names).scale_val(val(ext)) + loop_pwaff(
                inner, vs, dim_names)
    raise AssertionError(le)


def _zero_based(le: LoopExpr, vs: Vars, dim_names: Mapping[cx.Dim, str]) -> isl.PwAff:
    v = loop_pwaff(le, vs, dim_names)
    if isinstance(le, LDim):
        v = v - pwaff(le.base, vs, dim_names)
    return v


def set_from_constraints(vs: Vars, parts: Iterable[isl.Set]) -> isl.Set:
    s = vs.universe()
    for p in parts:
        s = s & p
    return s


# ---------------------------------------------------------------- isl -> loop IR

def pwaff_to_ir(pa: isl.PwAff, inputs: Sequence[ir.Expr], params: Mapping[str, ir.Expr]) -> ir.Expr:
    """Turn a piecewise affine function into a loop-IR index expression.

    The function's input dims (valued by `inputs`, in order) are moved to
    parameters so isl's expression builder can write it; `params` maps each
    parameter name to its IR value.
    """
    n_in = pa.dim(isl.dim_type.in_)
    n_par = pa.dim(isl.dim_type.param)
    assert n_in == len(inputs)
    pa = pa.move_dims(isl.dim_type.param, n_par, isl.dim_type.in_, 0, n_in)
    names = dict(params)
    for k, v in enumerate(inputs):
        pa = pa.set_dim_id(isl.dim_type.param, n_par + k, isl.Id(f"_in{k}"))
        names[f"_in{k}"] = v
    build = isl.AstBuild.from_context(isl.Set.universe(pa.get_domain_space()))
    return ast_expr_to_ir(build.expr_from_pw_aff(pa), names)


def ast_expr_to_ir(e: isl.AstExpr, names: dict[str, ir.Expr]) -> ir.Expr:
    t = expr_type(e)
    if t == isl.ast_expr_type.int:
        return ir.Const(int(e.get_val().to_python()), dt.index)
    if t == isl.ast_expr_type.id:
        return names[e.get_id().get_name()]
    op = op_type(e)
    args = [ast_expr_to_ir(e.get_op_arg(k), names) for k in range(e.get_op_n_arg())]
    T = isl.ast_expr_op_type
    if op == T.minus:
        return ir.Unary("neg", args[0], dt.index)
    if op in (T.max, T.min):
        out = args[0]
        for a in args[1:]:
            out = ir.Binary("max" if op == T.max else "min", out, a, dt.index)
        return out
    if op in (OP_AND, T.and_then, OP_OR, T.or_else):
        kind: ir.BinaryOp = "and" if op in (OP_AND, T.and_then) else "or"
        out = args[0]
        for a in args[1:]:
            out = ir.Binary(kind, out, a, dt.bool_)
        return out
    if op in (T.cond, T.select):
        return ir.Select(args[0], args[1], args[2], args[1].dtype)
    binops: dict[isl.ast_expr_op_type, ir.BinaryOp] = {T.add: "add", T.sub: "sub", T.mul: "mul", T.div: "pdiv", T.fdiv_q: "floordiv",
              T.pdiv_q: "pdiv", T.pdiv_r: "pmod", T.zdiv_r: "pmod"}
    if op in binops:
        return ir.Binary(binops[op], args[0], args[1], dt.index)
    cmps: dict[isl.ast_expr_op_type, ir.CompareOp] = {T.eq: "eq", T.le: "le", T.lt: "lt", T.ge: "ge", T.gt: "gt"}
    if op in cmps:
        return ir.Compare(cmps[op], args[0], args[1])
    raise AssertionError(f"unexpected isl expression {e.to_C_str()}")


def largest_constant(values: isl.Set) -> int | None:
    """The largest value in the one-dimensional set `values` for any values of its
    parameters, when a constant bounds it (0 for an empty set, None when unbounded)."""
    n = values.dim(isl.dim_type.param)
    values = values.move_dims(isl.dim_type.set, 1, isl.dim_type.param, 0, n)
    values = values.project_out(isl.dim_type.set, 1, n)
    if values.is_empty():
        return 0
    if not values.is_bounded():
        return None
    top = values.dim_max(0).coalesce()
    if not top.is_cst():
        return None
    v = top.get_pieces()[0][1].get_constant_val()
    return int(v.to_python()) if v.is_int() else None
