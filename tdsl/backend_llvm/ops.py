"""Loop-IR operations as llvmlite builder calls, with numpy's semantics.

Most operations are one builder method, looked up in a table by operation
and operand class (`INT_BINARY`, `FLOAT_BINARY`, ...). The rest, which take
several instructions to mean what numpy means, are the functions below the
tables: floor division and modulo, NaN-propagating minimum and maximum,
casts and math calls.

Type map: float32 `float`, float64 `double`, intN and uintN `iN` (the
signedness lives in the operations), bool `i8` holding 0 or 1 (conditions
are `i1` internally), index `i64`.
"""

from __future__ import annotations

from typing import NamedTuple

from llvmlite import ir

from ..dtypes import DType, index
from ..lower.fastexp import (
    EXPONENT_ONE,
    HALF_LOG2E,
    HI,
    LN2_HI,
    LN2_LO,
    LO,
    LOG2E,
    MAGIC,
    MAGIC_BITS,
    TAYLOR,
)

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()


def lltype(dtype: DType) -> ir.Type:
    if dtype.is_float:
        return F32 if dtype.bits == 32 else F64
    return ir.IntType(dtype.bits)


def const(value: int | float | bool, dtype: DType) -> ir.Constant:
    ty = lltype(dtype)
    if dtype.is_float:
        return ir.Constant(ty, float(value))
    if dtype.is_bool:
        return ir.Constant(ty, int(bool(value)))
    v = int(value) & ((1 << dtype.bits) - 1)  # two's complement, as stored
    if v >= 1 << (dtype.bits - 1):
        v -= 1 << dtype.bits
    return ir.Constant(ty, v)


def is_unsigned(dtype: DType) -> bool:
    """Unsigned integer comparison, division and widening (uintN and bool)."""
    return dtype.kind in "ub"


class Function(ir.Function):
    """An `ir.Function` whose address has the opaque type `ptr`.

    llvmlite's IR layer types pointers by default; the IR we emit uses opaque
    pointers only, so a function passed as a value prints as `ptr @name`.
    """

    def __init__(self, module: ir.Module, ftype: ir.FunctionType, name: str):
        super().__init__(module, ftype, name)
        self.type = PTR

    @property
    def function_type(self) -> ir.FunctionType:
        return self.ftype


def declare(
    module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type], attrs=()
) -> ir.Function:
    """The function `name` of the module, declared on first use."""
    fn = module.globals.get(name)
    if fn is None:
        fn = Function(module, ir.FunctionType(ret, args), name)
        for a in attrs:
            fn.attributes.add(a)
    return fn


def _suffix(ty: ir.Type) -> str:
    return {F32: "f32", F64: "f64"}.get(ty) or f"i{ty.width}"


def intrinsic(b: ir.IRBuilder, name: str, *args: ir.Value, ret: ir.Type | None = None) -> ir.Value:
    """Call an overloaded intrinsic such as `llvm.floor` on args of one type."""
    ty = args[0].type
    full = f"{name}.{_suffix(ret)}.{_suffix(ty)}" if ret is not None else f"{name}.{_suffix(ty)}"
    fn = declare(b.module, full, ret or ty, [a.type for a in args])
    return b.call(fn, list(args))


# ------------------------------------------------------------------- tables


class Op(NamedTuple):
    """One builder method (`getattr(builder, method)`) with instruction flags."""

    method: str
    flags: tuple[str, ...] = ()


# Same-dtype integers wrap: plain add/sub/mul, no nsw/nuw.
INT_BINARY = {
    "add": Op("add"),
    "sub": Op("sub"),
    "mul": Op("mul"),
    "and": Op("and_"),
    "or": Op("or_"),
    "xor": Op("xor"),
}

# dtypes.index never wraps in practice; pdiv/pmod have C semantics on operands
# known to be non-negative.
INDEX_BINARY = {
    "add": Op("add", ("nsw",)),
    "sub": Op("sub", ("nsw",)),
    "mul": Op("mul", ("nsw",)),
    "pdiv": Op("sdiv"),
    "pmod": Op("srem"),
    "and": Op("and_"),
    "or": Op("or_"),
    "xor": Op("xor"),
}

# `contract` lets a multiply feeding an add fuse into one FMA, as gcc does by
# default for the C backend: results equal numpy's to rounding, not bit for bit.
FLOAT_BINARY = {
    "add": Op("fadd", ("contract",)),
    "sub": Op("fsub", ("contract",)),
    "mul": Op("fmul", ("contract",)),
    "truediv": Op("fdiv"),
}

# numpy on bool: + is logical or, * logical and; 0/1 makes them bitwise.
BOOL_BINARY = {
    "and": Op("and_"),
    "or": Op("or_"),
    "xor": Op("xor"),
    "add": Op("or_"),
    "mul": Op("and_"),
    "min": Op("and_"),
    "max": Op("or_"),
}

COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

FLOAT_INTRINSICS = {
    "exp": "llvm.exp",
    "log": "llvm.log",
    "sqrt": "llvm.sqrt",
    "sin": "llvm.sin",
    "cos": "llvm.cos",
    "floor": "llvm.floor",
    "ceil": "llvm.ceil",
    "abs": "llvm.fabs",
}

# From libm, resolved by the JIT; declared free of side effects so that loops
# calling them still vectorize.
LIBM = {"tanh": {32: "tanhf", 64: "tanh"}}


# ---------------------------------------------------------------- semantics


def binary(b: ir.IRBuilder, op: str, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
    """`x op y` in `dtype` (operands already of that dtype)."""
    if dtype.is_bool:
        table, special = BOOL_BINARY, {}
    elif dtype.is_float:
        table, special = FLOAT_BINARY, _FLOAT_SPECIAL
    elif dtype == index:
        table, special = INDEX_BINARY, _INT_SPECIAL
    else:
        table, special = INT_BINARY, _INT_SPECIAL
    if op in table:
        method, flags = table[op]
        if flags:
            return getattr(b, method)(x, y, flags=flags)
        return getattr(b, method)(x, y)
    if op in special:
        return special[op](b, dtype, x, y)
    raise ValueError(f"binary operation {op!r} is not defined on {dtype.name}")


def compare_i1(b: ir.IRBuilder, op: str, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
    """`x op y` as an i1; on floats NaN compares unequal to everything."""
    sym = COMPARE[op]
    if dtype.is_float:
        if op == "ne":
            return b.fcmp_unordered(sym, x, y)
        return b.fcmp_ordered(sym, x, y)
    if is_unsigned(dtype):
        return b.icmp_unsigned(sym, x, y)
    return b.icmp_signed(sym, x, y)


def _int_divmod(b: ir.IRBuilder, dtype: DType, x: ir.Value, y: ir.Value, want: str) -> ir.Value:
    """Floor division or Python modulo; x // 0 == x % 0 == 0, MIN // -1 == MIN.

    The hardware division only ever sees a safe divisor, so it cannot trap.
    """
    ty = x.type
    zero, one = ir.Constant(ty, 0), ir.Constant(ty, 1)
    by_zero = b.icmp_unsigned("==", y, zero, name="by_zero")
    if is_unsigned(dtype):
        safe = b.select(by_zero, one, y)
        r = b.udiv(x, safe) if want == "div" else b.urem(x, safe)
        return b.select(by_zero, zero, r)
    minimum = ir.Constant(ty, -(1 << (ty.width - 1)))
    overflow = b.and_(b.icmp_signed("==", x, minimum), b.icmp_signed("==", y, ir.Constant(ty, -1)))
    safe = b.select(b.or_(by_zero, overflow), one, y, name="divisor")
    q = b.sdiv(x, safe)
    r = b.srem(x, safe)
    # Truncation rounds toward zero; step down when the signs differ.
    adjust = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, safe), zero))
    if want == "div":
        res = b.select(adjust, b.sub(q, one), q)
    else:
        res = b.select(adjust, b.add(r, safe), r)
    return b.select(by_zero, zero, res)


def _float_divmod(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
    """numpy's npy_divmod: (floor quotient, remainder with the divisor's sign)."""
    ty = x.type
    zero, one, half = ir.Constant(ty, 0.0), ir.Constant(ty, 1.0), ir.Constant(ty, 0.5)
    mod = b.frem(x, y)
    div = b.fdiv(b.fsub(x, mod), y)
    mod_nonzero = b.fcmp_unordered("!=", mod, zero)
    signs_differ = b.xor(b.fcmp_ordered("<", y, zero), b.fcmp_ordered("<", mod, zero))
    adjust = b.and_(mod_nonzero, signs_differ)
    div = b.select(adjust, b.fsub(div, one), div)
    mod = b.select(adjust, b.fadd(mod, y), mod)
    mod = b.select(mod_nonzero, mod, intrinsic(b, "llvm.copysign", zero, y))
    floor = intrinsic(b, "llvm.floor", div)
    snapped = b.select(b.fcmp_ordered(">", b.fsub(div, floor), half), b.fadd(floor, one), floor)
    signed_zero = intrinsic(b, "llvm.copysign", zero, b.fdiv(x, y))
    quot = b.select(b.fcmp_unordered("!=", div, zero), snapped, signed_zero)
    return quot, mod


def _float_floordiv(b, dtype, x, y):
    quot, _ = _float_divmod(b, x, y)
    by_zero = b.fcmp_ordered("==", y, ir.Constant(x.type, 0.0))
    return b.select(by_zero, b.fdiv(x, y), quot)


def _float_mod(b, dtype, x, y):
    # y == 0 gives frem's NaN, which the adjustments leave alone.
    return _float_divmod(b, x, y)[1]


def _float_minmax(b, x, y, sym):
    # np.minimum/np.maximum: a NaN in either operand wins; on ties, y.
    pick_x = b.or_(b.fcmp_ordered(sym, x, y), b.fcmp_unordered("uno", x, x))
    return b.select(pick_x, x, y)


def _int_minmax(b, dtype, x, y, sym):
    cmp = b.icmp_unsigned if is_unsigned(dtype) else b.icmp_signed
    return b.select(cmp(sym, x, y), x, y)


_INT_SPECIAL = {
    "floordiv": lambda b, dt, x, y: _int_divmod(b, dt, x, y, "div"),
    "mod": lambda b, dt, x, y: _int_divmod(b, dt, x, y, "mod"),
    "min": lambda b, dt, x, y: _int_minmax(b, dt, x, y, "<"),
    "max": lambda b, dt, x, y: _int_minmax(b, dt, x, y, ">"),
}

_FLOAT_SPECIAL = {
    "floordiv": _float_floordiv,
    "mod": _float_mod,
    "min": lambda b, dt, x, y: _float_minmax(b, x, y, "<"),
    "max": lambda b, dt, x, y: _float_minmax(b, x, y, ">"),
}


def unary(b: ir.IRBuilder, op: str, dtype: DType, x: ir.Value) -> ir.Value:
    if op == "neg":
        return b.fneg(x) if dtype.is_float else b.sub(ir.Constant(x.type, 0), x)
    if op == "invert":
        if dtype.is_bool:
            return b.xor(x, ir.Constant(x.type, 1))
        return b.not_(x)
    raise ValueError(f"unary operation {op!r} is not defined on {dtype.name}")


def call(b: ir.IRBuilder, fn: str, dtype: DType, x: ir.Value) -> ir.Value:
    """A math function of one argument of dtype `dtype`."""
    if dtype.is_float:
        if fn == "exp" and dtype.bits == 32:
            return exp_f32(b, x)
        if fn in FLOAT_INTRINSICS:
            return intrinsic(b, FLOAT_INTRINSICS[fn], x)
        if fn in LIBM:
            name = LIBM[fn][dtype.bits]
            decl = declare(b.module, name, x.type, [x.type], attrs=("nounwind", "readnone"))
            return b.call(decl, [x])
    elif fn in ("floor", "ceil") or (fn == "abs" and is_unsigned(dtype)):
        return x
    elif fn == "abs":
        # abs(MIN) == MIN, as in numpy.
        zero = ir.Constant(x.type, 0)
        return b.select(b.icmp_signed("<", x, zero), b.sub(zero, x), x)
    raise ValueError(f"call {fn!r} is not defined on {dtype.name}")


def exp_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """numpy's float32 exp by `lower.fastexp`'s algorithm (the C backend's exp_f32)."""
    f32, i32 = x.type, ir.IntType(32)

    def c(v: float) -> ir.Constant:
        return ir.Constant(f32, v)

    def fma(a, m, add):  # a * m + add, free to fuse
        return b.fadd(b.fmul(a, m, flags=("contract",)), add, flags=("contract",))

    inside = b.select(b.fcmp_ordered("<", x, c(HI)), x, c(HI))
    y = b.select(b.fcmp_ordered(">", x, c(LO)), inside, c(LO))  # NaN: LO
    t = fma(y, c(LOG2E), c(MAGIC))
    t2 = fma(y, c(HALF_LOG2E), c(MAGIC))
    k = b.fsub(t, c(MAGIC), flags=("contract",))
    r = b.fsub(b.fsub(y, b.fmul(k, c(LN2_HI))), b.fmul(k, c(LN2_LO)), flags=("contract",))
    p = c(TAYLOR[0])
    for coef in (*TAYLOR[1:], 1.0):
        p = fma(r, p, c(coef))
    magic = ir.Constant(i32, MAGIC_BITS)
    k1 = b.sub(b.bitcast(t2, i32), magic)
    k2 = b.sub(b.sub(b.bitcast(t, i32), magic), k1)

    def power(n):  # 2^n for a normal exponent n
        bits = b.mul(b.add(n, ir.Constant(i32, 127)), ir.Constant(i32, EXPONENT_ONE))
        return b.bitcast(bits, f32)

    out = b.fmul(b.fmul(p, power(k1)), power(k2))
    return b.select(b.fcmp_unordered("uno", x, x), x, out)


def cast(b: ir.IRBuilder, x: ir.Value, src: DType, dst: DType) -> ir.Value:
    """numpy's astype for in-range values.

    Float to integer goes through a saturating conversion to i64 and a
    truncation: exact for every in-range value of every tdsl integer dtype,
    and defined (never poison) for the rest.
    """
    to = lltype(dst)
    if dst.is_bool:
        return b.zext(truth(b, x, src), to)
    if src.is_float and dst.is_float:
        if src.bits == dst.bits:
            return x
        return b.fpext(x, to) if dst.bits > src.bits else b.fptrunc(x, to)
    if src.is_float:
        wide = intrinsic(b, "llvm.fptosi.sat", x, ret=I64)
        return wide if dst.bits == 64 else b.trunc(wide, to)
    if dst.is_float:
        return b.uitofp(x, to) if is_unsigned(src) else b.sitofp(x, to)
    if dst.bits == src.bits:
        return x
    if dst.bits < src.bits:
        return b.trunc(x, to)
    return b.zext(x, to) if is_unsigned(src) else b.sext(x, to)


def truth(b: ir.IRBuilder, x: ir.Value, dtype: DType) -> ir.Value:
    """`x != 0` as an i1 (NaN is true, as in numpy)."""
    if dtype.is_float:
        return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
    return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
