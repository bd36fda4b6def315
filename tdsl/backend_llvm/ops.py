"""Loop-IR operations as llvmlite builder calls, with numpy's semantics.

Most operations are one builder method, looked up in a table by operation
and operand class (`INT_BINARY`, `FLOAT_BINARY`, ...); integer min/max, casts
and math calls are the functions below the tables. numpy's floor division
and modulo, NaN-propagating float min/max, integer abs and float32 exp arrive
as core operations already (`lower.passes.legalise`).

Type map: float32 `float`, float64 `double`, intN and uintN `iN` (the
signedness lives in the operations), bool `i8` holding 0 or 1 (conditions
are `i1` internally), index `i64`. Every operation takes vectors of these as
well (the lanes of a vectorized loop, `vector.py`), operands of one shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from llvmlite import ir

from ..dtypes import DType, index

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()


def lltype(dtype: DType) -> ir.Type:
    if dtype.is_narrow_float:  # only moved (lower.passes.narrow): its bits
        return ir.IntType(16)
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
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{_suffix(ty.element)}"
    return {F32: "f32", F64: "f64"}.get(ty) or f"i{ty.width}"


def like(x: ir.Value, ty: ir.Type) -> ir.Type:
    """`ty`, or a vector of `ty` with as many lanes as `x` when `x` is a vector."""
    return ir.VectorType(ty, x.type.count) if isinstance(x.type, ir.VectorType) else ty


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


# Same-dtype integers wrap: plain add/sub/mul, no nsw/nuw. Truncating division
# (legalised: never by 0, nor MIN by -1) and comparisons know the signedness.
INT_BINARY = {
    "add": Op("add"),
    "sub": Op("sub"),
    "mul": Op("mul"),
    "and": Op("and_"),
    "or": Op("or_"),
    "xor": Op("xor"),
    "tdiv": Op("sdiv"),
    "trem": Op("srem"),
    "shl": Op("shl"),  # counts in [0, bits): legalised
    "ashr": Op("ashr"),
    "lshr": Op("lshr"),
}
UNSIGNED_BINARY = {**INT_BINARY, "tdiv": Op("udiv"), "trem": Op("urem")}

# dtypes.index never wraps in practice; pdiv/pmod have C semantics on operands
# known to be non-negative.
INDEX_BINARY = {
    "add": Op("add", ("nsw",)),
    "sub": Op("sub", ("nsw",)),
    "mul": Op("mul", ("nsw",)),
    "pdiv": Op("sdiv"),
    "pmod": Op("srem"),
    "tdiv": Op("sdiv"),
    "trem": Op("srem"),
    "and": Op("and_"),
    "or": Op("or_"),
    "xor": Op("xor"),
}

# No `contract` flags: a multiply that is an operand of an add or a subtract is fused by
# the emitters themselves (`lower.contraction`, `mul_add`), each on its own, and nothing
# else is, so whether an expression is fused does not depend on the uses of its parts.
# Results equal numpy's to rounding, not bit for bit.
FLOAT_BINARY = {
    "add": Op("fadd"),
    "sub": Op("fsub"),
    "mul": Op("fmul"),
    "truediv": Op("fdiv"),
    "trem": Op("frem"),
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

# exp on float32 is legalised (`lower.fastexp`'s algorithm): llvm.exp is float64's
FLOAT_INTRINSICS = {
    "exp": "llvm.exp",
    "log": "llvm.log",
    "sqrt": "llvm.sqrt",
    "sin": "llvm.sin",
    "cos": "llvm.cos",
    "floor": "llvm.floor",
    "ceil": "llvm.ceil",
    "abs": "llvm.fabs",
    "exp2": "llvm.exp2",
    "log2": "llvm.log2",
    "round": "llvm.rint",
}

# From libm, resolved by the JIT; declared free of side effects so that loops
# calling them still vectorize.
LIBM = {"tanh": {32: "tanhf", 64: "tanh"}, "erf": {32: "erff", 64: "erf"},
        "atan2": {32: "atan2f", 64: "atan2"}}


# ---------------------------------------------------------------- semantics


def binary(b: ir.IRBuilder, op: str, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
    """`x op y` in `dtype` (operands already of that dtype)."""
    special: dict[str, Callable[..., ir.Value]]
    if dtype.is_bool:
        table, special = BOOL_BINARY, {}
    elif dtype.is_float:
        table, special = FLOAT_BINARY, {}
    elif dtype == index:
        table, special = INDEX_BINARY, _INT_SPECIAL
    else:
        table, special = (UNSIGNED_BINARY if is_unsigned(dtype) else INT_BINARY), _INT_SPECIAL
    if op in table:
        method, flags = table[op]
        if flags:
            return getattr(b, method)(x, y, flags=flags)
        return getattr(b, method)(x, y)
    if op in special:
        return special[op](b, dtype, x, y)
    raise ValueError(f"binary operation {op!r} is not defined on {dtype.name} (not legalised?)")


def mul_add(b: ir.IRBuilder, op: str, first: bool, product: tuple[ir.Value, ir.Value],
            other: ir.Value) -> ir.Value:
    """`p * q op other` (`first`) or `other op p * q` as one `llvm.fmuladd`, which x86
    with FMA computes as one FMA whatever the uses of its operands."""
    p, q = product
    if op == "sub":
        if first:
            other = b.fneg(other)
        else:
            p = b.fneg(p)
    return intrinsic(b, "llvm.fmuladd", p, q, other)


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


def _int_minmax(b, dtype, x, y, sym):
    cmp = b.icmp_unsigned if is_unsigned(dtype) else b.icmp_signed
    return b.select(cmp(sym, x, y), x, y)


_INT_SPECIAL = {
    "min": lambda b, dt, x, y: _int_minmax(b, dt, x, y, "<"),
    "max": lambda b, dt, x, y: _int_minmax(b, dt, x, y, ">"),
}

def unary(b: ir.IRBuilder, op: str, dtype: DType, x: ir.Value) -> ir.Value:
    if op == "neg":
        return b.fneg(x) if dtype.is_float else b.sub(ir.Constant(x.type, 0), x)
    if op == "invert":
        if dtype.is_bool:
            return b.xor(x, ir.Constant(x.type, 1))
        return b.not_(x)
    raise ValueError(f"unary operation {op!r} is not defined on {dtype.name}")


def call(b: ir.IRBuilder, fn: str, dtype: DType, *args: ir.Value) -> ir.Value:
    """A math function of arguments of dtype `dtype`; `bitcast` reads the bits of its
    argument (of another dtype) as a `dtype`; `clock` reads a monotonic clock (ns)."""
    if fn == "clock":
        return b.call(_clock(b.module), [])
    if fn == "bitcast":
        to = like(args[0], lltype(dtype))
        return args[0] if args[0].type == to else b.bitcast(args[0], to)
    if dtype.is_float and fn in ("copysign", "pow"):
        return intrinsic(b, f"llvm.{fn}", *args)
    if dtype.is_float and fn in LIBM and len(args) == (2 if fn == "atan2" else 1):
        return _libm(b, LIBM[fn][dtype.bits], args)
    if dtype.is_float and len(args) == 1 and not (fn == "exp" and dtype.bits == 32):
        if fn in FLOAT_INTRINSICS:
            return intrinsic(b, FLOAT_INTRINSICS[fn], args[0])
    raise ValueError(f"call {fn!r} is not defined on {dtype.name} (not legalised?)")


def _libm(b: ir.IRBuilder, name: str, args: tuple[ir.Value, ...]) -> ir.Value:
    """A call of libm's `name`; on vectors, one call per lane (libm has no vector forms)."""
    ty = args[0].type
    if not isinstance(ty, ir.VectorType):
        decl = declare(b.module, name, ty, [ty] * len(args), attrs=("nounwind", "readnone"))
        return b.call(decl, list(args))
    out = ir.Constant(ty, ir.Undefined)
    for lane in range(ty.count):
        k = ir.Constant(I32, lane)
        one = _libm(b, name, tuple(b.extract_element(a, k) for a in args))
        out = b.insert_element(out, one, k)
    return out


def cast(b: ir.IRBuilder, x: ir.Value, src: DType, dst: DType) -> ir.Value:
    """numpy's astype for in-range values.

    Float to integer goes through a saturating conversion to i64 and a
    truncation: exact for every in-range value of every tdsl integer dtype,
    and defined (never poison) for the rest.
    """
    to = like(x, lltype(dst))
    if dst.is_bool:
        return b.zext(truth(b, x, src), to)
    if src.is_float and dst.is_float:
        if src.bits == dst.bits:
            return x
        return b.fpext(x, to) if dst.bits > src.bits else b.fptrunc(x, to)
    if src.is_float:
        wide = intrinsic(b, "llvm.fptosi.sat", x, ret=like(x, I64))
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


CLOCK_GETTIME = "tdsl_clock_gettime"  # the C library's clock_gettime (runtime.load)


def _clock(module: ir.Module) -> ir.Function:
    """`i64 tdsl_clock_ns()`: CLOCK_MONOTONIC in nanoseconds, defined in the module once
    (internal, inlined where it is called)."""
    import time

    fn = module.globals.get("tdsl_clock_ns")
    if isinstance(fn, Function):
        return fn
    timespec = ir.LiteralStructType([I64, I64])
    gettime = declare(module, CLOCK_GETTIME, I32, [I32, timespec.as_pointer()],
                      attrs=("nounwind",))
    fn = Function(module, ir.FunctionType(I64, []), "tdsl_clock_ns")
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    t = b.alloca(timespec, name="t")
    b.call(gettime, [ir.Constant(I32, time.CLOCK_MONOTONIC), t])
    zero = ir.Constant(I32, 0)
    sec = b.load(b.gep(t, [zero, zero], inbounds=True), name="sec")
    nsec = b.load(b.gep(t, [zero, ir.Constant(I32, 1)], inbounds=True), name="nsec")
    b.ret(b.add(b.mul(sec, ir.Constant(I64, 1_000_000_000)), nsec))
    return fn
