"""Short, typed constructors of loop-IR expressions, for the passes.

A pass writes `sub(end, start)` or `select(lt(x, 0), neg(x), x)` instead of
spelling out `ir.Binary("sub", end, start, dt.index)`: an operation's dtype is its
first operand's (the verifier's rule: a `Binary`'s operands have its dtype, the
boolean `and`/`or` aside, whose operands are booleans too), and an operand given as
a Python number is a constant of the other operand's dtype (`add(i, 1)` on an index
`i` is `i + 1` in the index type). Nothing here simplifies: each function builds the
one node it names (`passes.simplify` folds).

    const(v, dtype)  index(n)                     constants
    add sub mul truediv floordiv mod              arithmetic
    pdiv pmod tdiv trem
    minimum maximum                               (int, index: core; float: legalise)
    and_ or_ xor shl lshr ashr                    bits (and booleans: and_, or_)
    eq ne lt le gt ge, compare(op, a, b)          comparisons (dtype bool)
    all_of(conds)                                 a chain of and_
    select(c, a, b)  neg(a)  invert(a)  unary     the rest of the expressions
    cast(x, dtype)  bitcast(x, dtype)  call(fn, args, dtype)
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import dtypes as dt
from . import ir

# an operand: an expression, or a number that becomes a constant of the other's dtype
Operand = ir.Expr | int | float | bool


def const(value: int | float | bool, dtype: dt.DType) -> ir.Const:
    """The constant `value` of `dtype`."""
    return ir.Const(value, dtype)


def index(n: int) -> ir.Const:
    """An integer constant of the index type (`ir.index_const`)."""
    return ir.index_const(n)


def _operands(a: Operand, b: Operand) -> tuple[ir.Expr, ir.Expr]:
    """Both operands as expressions: a number takes the other operand's dtype."""
    if isinstance(a, ir.Expr) and isinstance(b, ir.Expr):
        return a, b
    if isinstance(a, ir.Expr):
        return a, ir.Const(b, a.dtype)  # type: ignore[arg-type]
    if isinstance(b, ir.Expr):
        return ir.Const(a, b.dtype), b
    raise TypeError(f"an operation on two numbers ({a!r}, {b!r}) needs a dtype: use const")


def binary(op: ir.BinaryOp, a: Operand, b: Operand) -> ir.Binary:
    """`a op b` in the first expression operand's dtype."""
    x, y = _operands(a, b)
    return ir.Binary(op, x, y, x.dtype)


def add(a: Operand, b: Operand) -> ir.Binary:
    """`a + b` (wrapping on ints, as numpy)."""
    return binary("add", a, b)


def sub(a: Operand, b: Operand) -> ir.Binary:
    """`a - b`."""
    return binary("sub", a, b)


def mul(a: Operand, b: Operand) -> ir.Binary:
    """`a * b`."""
    return binary("mul", a, b)


def truediv(a: Operand, b: Operand) -> ir.Binary:
    """`a / b` on floats."""
    return binary("truediv", a, b)


def floordiv(a: Operand, b: Operand) -> ir.Binary:
    """numpy's `a // b` (floor; legalise writes it out)."""
    return binary("floordiv", a, b)


def mod(a: Operand, b: Operand) -> ir.Binary:
    """numpy's `a % b` (floor modulo; legalise writes it out)."""
    return binary("mod", a, b)


def pdiv(a: Operand, b: Operand) -> ir.Binary:
    """`a / b` of a nonnegative `a` by a positive `b` (truncating = floor there)."""
    return binary("pdiv", a, b)


def pmod(a: Operand, b: Operand) -> ir.Binary:
    """`a % b` by a positive `b`, in [0, b) (a circular buffer's row)."""
    return binary("pmod", a, b)


def tdiv(a: Operand, b: Operand) -> ir.Binary:
    """Truncating division (C's `/`): a core operation, only after legalise."""
    return binary("tdiv", a, b)


def trem(a: Operand, b: Operand) -> ir.Binary:
    """Truncating remainder (C's `%`, fmod on floats): core, only after legalise."""
    return binary("trem", a, b)


def minimum(a: Operand, b: Operand) -> ir.Binary:
    """`min(a, b)`."""
    return binary("min", a, b)


def maximum(a: Operand, b: Operand) -> ir.Binary:
    """`max(a, b)`."""
    return binary("max", a, b)


def and_(a: Operand, b: Operand) -> ir.Binary:
    """`a & b`, or the conjunction of two booleans."""
    return binary("and", a, b)


def or_(a: Operand, b: Operand) -> ir.Binary:
    """`a | b`, or the disjunction of two booleans."""
    return binary("or", a, b)


def xor(a: Operand, b: Operand) -> ir.Binary:
    """`a ^ b`."""
    return binary("xor", a, b)


def shl(a: Operand, b: Operand) -> ir.Binary:
    """Core left shift by a count in [0, bits)."""
    return binary("shl", a, b)


def lshr(a: Operand, b: Operand) -> ir.Binary:
    """Core logical right shift by a count in [0, bits)."""
    return binary("lshr", a, b)


def ashr(a: Operand, b: Operand) -> ir.Binary:
    """Core arithmetic right shift by a count in [0, bits)."""
    return binary("ashr", a, b)


def compare(op: ir.CompareOp, a: Operand, b: Operand) -> ir.Compare:
    """`a op b`, a boolean."""
    x, y = _operands(a, b)
    return ir.Compare(op, x, y)


def eq(a: Operand, b: Operand) -> ir.Compare:
    """`a == b`."""
    return compare("eq", a, b)


def ne(a: Operand, b: Operand) -> ir.Compare:
    """`a != b`."""
    return compare("ne", a, b)


def lt(a: Operand, b: Operand) -> ir.Compare:
    """`a < b`."""
    return compare("lt", a, b)


def le(a: Operand, b: Operand) -> ir.Compare:
    """`a <= b`."""
    return compare("le", a, b)


def gt(a: Operand, b: Operand) -> ir.Compare:
    """`a > b`."""
    return compare("gt", a, b)


def ge(a: Operand, b: Operand) -> ir.Compare:
    """`a >= b`."""
    return compare("ge", a, b)


def all_of(conds: Iterable[ir.Expr]) -> ir.Expr:
    """The conjunction of one or more booleans, left to right: `((c0 & c1) & c2) ...`."""
    out: ir.Expr | None = None
    for c in conds:
        out = c if out is None else and_(out, c)
    assert out is not None, "all_of of no condition"
    return out


def select(cond: ir.Expr, a: Operand, b: Operand) -> ir.Select:
    """`a` where `cond` holds, else `b`, in the dtype of the expression among them."""
    x, y = _operands(a, b)
    return ir.Select(cond, x, y, x.dtype)


def unary(op: ir.UnaryOp, a: ir.Expr) -> ir.Unary:
    """`op a` (neg or invert) in `a`'s dtype."""
    return ir.Unary(op, a, a.dtype)


def neg(a: ir.Expr) -> ir.Unary:
    """`-a`."""
    return ir.Unary("neg", a, a.dtype)


def invert(a: ir.Expr) -> ir.Unary:
    """`~a`: the bitwise complement, or the negation of a boolean."""
    return ir.Unary("invert", a, a.dtype)


def cast(x: ir.Expr, dtype: dt.DType) -> ir.Cast:
    """`x` converted to `dtype` (numpy's conversion)."""
    return ir.Cast(x, dtype)


def bitcast(x: ir.Expr, dtype: dt.DType) -> ir.Call:
    """The bits of `x` as a `dtype` of the same width."""
    return ir.Call("bitcast", (x,), dtype)


def call(fn: ir.CallFn, args: Iterable[ir.Expr], dtype: dt.DType) -> ir.Call:
    """`fn(*args)` of result type `dtype`."""
    return ir.Call(fn, tuple(args), dtype)


__all__ = ["add", "all_of", "and_", "ashr", "binary", "bitcast", "call", "cast", "compare",
           "const", "eq", "floordiv", "ge", "gt", "index", "invert", "le", "lshr", "lt",
           "maximum", "minimum", "mod", "mul", "ne", "neg", "or_", "pdiv", "pmod", "select",
           "shl", "sub", "tdiv", "trem", "truediv", "unary", "xor"]
