"""The narrow pass: float16 and bfloat16 become 16-bit words that only move.

numpy computes an operation on float16 (and ml_dtypes on bfloat16) in float32
and rounds the result to the nearest 16-bit float, ties to even. `narrow_node`
writes that out for one expression node, and the pass (`narrow`, just before
legalise) for every node of every statement, binding what it reuses in lets
before the statement as legalise does: the operands are widened to
float32, the operation is computed there (and legalised, as any float32
operation is), and a 16-bit result is the rounded conversion back. The
conversions are integer operations on the bits:

    float16  -> float32   exact: exponent and mantissa moved, a subnormal scaled
                          by one float subtraction (exact too)
    float32  -> float16   round to nearest even; overflow to infinity, NaN to a
                          quiet NaN of the same sign
    float64  -> float16   one rounding, as numpy's: the float64 is first rounded
                          to float32 *to odd* (truncated, its last bit set when
                          inexact), which rounds to float16 as the float64 would
    bfloat16 <-> float32  the high half of the float32's bits, rounded to nearest
                          even (NaN to a quiet NaN)
    float64, integers -> bfloat16 through float32, as ml_dtypes converts
    integers -> float16   through float64 (exact for every int up to 2**53)

min and max pick one operand, by numpy's rule for float16 and ml_dtypes' for
bfloat16 (they differ on equal operands: 0.0 and -0.0).

Afterwards a value of a 16-bit float dtype is only loaded, stored, selected,
bound to a variable, or the `bitcast` of a uint16 (and back): the targets hold
it as a 16-bit integer and never compute on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ... import dtypes as dt
from .. import ir
from ..build import (
    add,
    and_,
    binary,
    bitcast,
    call,
    cast,
    compare,
    const,
    eq,
    ge,
    gt,
    lshr,
    lt,
    ne,
    or_,
    select,
    shl,
    sub,
    unary,
    xor,
)
from ..rewrite import bound_names
from .legalise import BindingRewriter

Bind = Callable[[ir.Expr, str], ir.Expr]
Legal = Callable[[ir.Expr], ir.Expr]

U16, U32, F32 = dt.uint16, dt.uint32, dt.float32


def constant_bits(value: float, d: dt.DType) -> int:
    """The 16 bits of `value` as a `d` (float16 or bfloat16), rounded as numpy rounds."""
    with np.errstate(over="ignore"):  # beyond the range: infinity, as numpy rounds
        if d == dt.float16:
            return int(np.array(value, np.float64).astype(np.float16).view(np.uint16))
        u = int(np.array(value, np.float64).astype(np.float32).view(np.uint32))
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return (u >> 16) | 0x40
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def to_f32(x: ir.Expr, bind: Bind) -> ir.Expr:
    """The float32 value of a 16-bit float (exact)."""
    h = bind(cast(bitcast(x, U16), U32), "h")
    if x.dtype == dt.bfloat16:
        return bitcast(shl(h, 16), F32)
    o = bind(shl(and_(h, 0x7FFF), 13), "o")  # exponent and mantissa
    e = bind(and_(o, 0x0F800000), "e")  # the exponent alone
    normal = add(o, 112 << 23)  # rebiased from 15 to 127
    special = add(o, 224 << 23)  # all exponent bits set: inf, NaN
    tiny = bitcast(sub(bitcast(add(o, 113 << 23), F32),
                    const(2.0 ** -14, F32)), U32)  # zero or subnormal: scaled exactly
    mag = select(eq(e, 0x0F800000), special, select(eq(e, 0), tiny, normal))
    return bitcast(or_(mag, shl(and_(h, 0x8000), 16)), F32)


def from_f32(f: ir.Expr, d: dt.DType, bind: Bind) -> ir.Expr:
    """`f` (float32) rounded to nearest even as a `d` (float16 or bfloat16)."""
    u = bind(bitcast(f, U32), "u")
    if d == dt.bfloat16:
        nan = gt(and_(u, 0x7FFFFFFF), 0x7F800000)
        rounded = lshr(add(add(u, 0x7FFF),
                                and_(lshr(u, 16), 1)), 16)
        word = select(nan, or_(lshr(u, 16), 0x40), rounded)
        return bitcast(cast(word, U16), d)
    sign = bind(and_(u, 0x80000000), "sign")
    a = bind(xor(u, sign), "a")  # |f|
    special = select(gt(a, 0x7F800000), const(0x7E00, U32), const(0x7C00, U32))
    # below 2**-14 the result is subnormal: adding 0.5 aligns its 10 bits at the bottom
    # of the float32 and rounds them to nearest even
    tiny = sub(bitcast(add(bitcast(a, F32), const(0.5, F32)), U32), 0x3F000000)
    odd = and_(lshr(a, 13), 1)
    normal = lshr(add(add(a, 0xC8000FFF), odd), 13)
    mag = select(ge(a, 0x47800000), special,
               select(lt(a, 0x38800000), tiny, normal))
    return bitcast(cast(or_(mag, lshr(sign, 16)), U16), d)


def _f64_to_f32_odd(x: ir.Expr, bind: Bind) -> ir.Expr:
    """The float64 `x` as a float32 rounded to odd: truncated toward zero, its last bit
    set when that is inexact (then one more rounding to 16 bits is exact)."""
    f = bind(cast(x, F32), "f")
    back = bind(cast(f, dt.float64), "back")
    bits = bind(bitcast(f, U32), "fb")
    over = gt(call("abs", (back,), dt.float64), call("abs", (x,), dt.float64))
    toward_zero = select(over, sub(bits, 1), bits)
    return bitcast(select(ne(back, x), or_(toward_zero, 1), toward_zero), F32)


def _convert(x: ir.Expr, to: dt.DType, bind: Bind, legal: Legal) -> ir.Expr:
    src = x.dtype
    if src == to:
        return x
    if src.is_narrow_float:
        wide = to_f32(x, bind)
        return from_f32(wide, to, bind) if to.is_narrow_float else legal(cast(wide, to))
    if src == F32:
        return from_f32(x, to, bind)
    if to == dt.bfloat16:  # ml_dtypes: through float32
        return from_f32(cast(x, F32), to, bind)
    if src != dt.float64:
        x = bind(cast(x, dt.float64), "w")
    return from_f32(_f64_to_f32_odd(bind(x, "w"), bind), to, bind)


def _minmax(op: str, a: ir.Expr, b: ir.Expr, bind: Bind) -> ir.Expr:
    """numpy's float16 minimum and maximum keep the first operand when the two compare
    equal (minimum(0.0, -0.0) is 0.0), ml_dtypes' bfloat16 ones the second (as numpy's
    float32 ones do); a NaN operand is the result, the first if both are."""
    fa, fb = bind(to_f32(a, bind), "fa"), bind(to_f32(b, bind), "fb")
    first_if_equal = a.dtype == dt.float16
    keeps: dict[tuple[str, bool], ir.CompareOp] = {
        ("min", True): "le", ("min", False): "lt", ("max", True): "ge", ("max", False): "gt"}
    cmp = keeps[op, first_if_equal]
    keep_a = or_(compare(cmp, fa, fb), ne(fa, fa))
    return select(keep_a, a, b)


def narrow_node(e: ir.Expr, bind: Bind, legal: Legal) -> ir.Expr | None:
    """The form of `e` without computation on 16-bit floats (see the module), or None
    when `e` has none. The operands of `e` are in that form already; `legal` legalises
    a float32 node built here."""
    match e:
        case ir.Const(v, d) if d.is_narrow_float:
            return bitcast(const(constant_bits(float(v), d), U16), d)
        case ir.Cast(a, d) if d.is_narrow_float or a.dtype.is_narrow_float:
            return _convert(a, d, bind, legal)
        case ir.Binary("min" | "max", a, b, d) if d.is_narrow_float:
            return _minmax(e.op, bind(a, "x"), bind(b, "y"), bind)
        case ir.Binary(op, a, b, d) if d.is_narrow_float:
            wide = legal(binary(op, to_f32(a, bind), to_f32(b, bind)))
            return from_f32(bind(wide, "r"), d, bind)
        case ir.Unary(op, a, d) if d.is_narrow_float:
            return from_f32(bind(legal(unary(op, to_f32(a, bind))), "r"), d, bind)
        case ir.Call(fn, args, d) if d.is_narrow_float and fn != "bitcast":
            wide = legal(call(fn, tuple(to_f32(x, bind) for x in args), F32))
            return from_f32(bind(wide, "r"), d, bind)
        case ir.Compare(op, a, b) if a.dtype.is_narrow_float:
            return compare(op, to_f32(a, bind), to_f32(b, bind))
    return None


def _narrow_rule(e: ir.Expr, bind: Bind, nonnegative: Callable[[ir.Expr], bool]) -> ir.Expr | None:
    """`narrow_node` as a rule of the statement rewriter; the float32 operations it
    builds are left to the legalise pass after it."""
    return narrow_node(e, bind, lambda n: n)


def narrow(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` without computation on float16 or bfloat16 (see the module): their values
    only loaded, stored, selected, bound or bitcast from and to uint16."""
    taken = {v.name for v in func.sizes} | bound_names(func.body)
    body = BindingRewriter(taken, _narrow_rule).visit(func.body)
    return func if body == func.body else replace(func, body=body)
