"""Fixed-point operations, written out for the legalise pass in core operations.

`td.saturating_add`, `td.saturating_sub`, `td.rounding_shift_right`,
`td.rounding_mul_shift_right` and `td.requantize` (their exact values:
`compute.fixed_point`) reach the loop IR as `Call`s; `fixed_point_node` gives
each one's core form, once for every target:

    saturating add/sub  8 and 16 bits: computed in int32 and clamped; 32 and 64 bits:
                        the wrapped result, replaced where it overflowed (the operands'
                        signs say so) by the bound on the side of the first operand
    rounding_shift_right  (x >> n) + ((x >> (n - 1)) & 1) with the shifts in range; a
                        constant count gives just that (or x, or a left shift), a computed
                        one numpy's shifts, clamped first so that any count is exact
    rounding_mul_shift_right  the product in int32 or int64 (exact), plus 2^(q - 1),
                        shifted right by q and clamped to the dtype where it can leave it
    requantize          TFLite's and CMSIS-NN's arithmetic: a left shift, the doubling
                        high multiply as one 64-bit product plus 2^30 shifted right by 31
                        (saturated, by a 32-bit test, only where both factors may be
                        INT32_MIN), then
                        CMSIS-NN's rounding divide by a power of two (remainder against
                        half the divisor, the threshold one higher for a negative
                        quotient); a constant shift gives constant shift counts, masks and
                        thresholds, and no clamp of the shift itself

Guarantees: the result equals `compute.fixed_point.VALUES` for every operand value,
uses only core operations (shift counts in [0, bits)) and numpy operations that
`legal` turns into core ones, and reads each operand it uses more than once through
`bind`.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import dtypes as dt
from .. import ir
from ..build import (
    add,
    and_,
    ashr,
    binary,
    cast,
    const,
    eq,
    gt,
    lshr,
    lt,
    maximum,
    minimum,
    mul,
    neg,
    select,
    shl,
    sub,
    xor,
)

Bind = Callable[[ir.Expr, str], ir.Expr]
Legal = Callable[[ir.Expr], ir.Expr]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
SHIFT_LIMIT = 31  # requantize's shift is taken in [-31, 31] (compute.fixed_point)


def _range(t: dt.DType) -> tuple[int, int]:
    if t.is_signed:
        return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1
    return 0, (1 << t.bits) - 1


def _clamp(e: ir.Expr, lo: int, hi: int, have: tuple[int, int]) -> ir.Expr:
    """`e` (whose values lie in `have`) clamped to [lo, hi], with no test that cannot fail."""
    t = e.dtype
    if have[0] < lo:
        e = maximum(e, const(lo, t))
    if have[1] > hi:
        e = minimum(e, const(hi, t))
    return e


def fixed_point_node(e: ir.Expr, bind: Bind, legal: Legal) -> ir.Expr | None:
    """The core form of fixed-point call `e` (operands legal already), or None when `e`
    is not one. `legal(x)` legalises a node built here from numpy operations."""
    match e:
        case ir.Call("saturating_add" | "saturating_sub" as fn, (a, b), t):
            return _saturating("add" if fn == "saturating_add" else "sub", a, b, t, bind)
        case ir.Call("rounding_shift_right", (x, n), _):
            return _rounding_shift_right(x, n, bind, legal)
        case ir.Call("rounding_mul_shift_right", (a, b, q), t):
            return _rounding_mul_shift_right(a, b, int(q.value), t)  # type: ignore[attr-defined]
        case ir.Call("requantize", (acc, m, s), _):
            return _requantize(acc, m, s, bind)
    return None


def _saturating(op: ir.BinaryOp, a: ir.Expr, b: ir.Expr, t: dt.DType, bind: Bind) -> ir.Expr:
    lo, hi = _range(t)
    if t.bits <= 16:  # exact in int32, then clamped
        wide = binary(op, cast(a, dt.int32), cast(b, dt.int32))
        have = (2 * lo - hi, 2 * hi) if op == "add" else (lo - hi, hi - lo)
        return cast(_clamp(wide, lo, hi, have), t)
    a, b = bind(a, "x"), bind(b, "y")
    if not t.is_signed:
        if op == "add":
            s = bind(add(a, b), "s")
            return select(lt(s, a), const(hi, t), s)
        return select(lt(a, b), const(0, t), sub(a, b))
    s = bind(binary(op, a, b), "s")
    # overflow iff the result's sign differs from both operands' (add), or the operands'
    # signs differ and the result's differs from a's (sub)
    crossed = (and_(xor(a, s), xor(b, s)) if op == "add"
               else and_(xor(a, b), xor(a, s)))
    bound = xor(ashr(a, const(t.bits - 1, t)), const(hi, t))  # a < 0: MIN, else MAX
    return select(lt(crossed, const(0, t)), bound, s)


def _rounding_shift_right(x: ir.Expr, n: ir.Expr, bind: Bind, legal: Legal) -> ir.Expr:
    t = x.dtype
    k = ir.int_value(n)
    if k is not None:
        return _shift_by(x, k, bind)
    # a computed count: clamped to [-bits, bits + 1] (every count beyond gives what the
    # bound does), split into a right count >= 1 and a left count >= 0 in n's dtype, where
    # they are exact, then cast to x's dtype (both fit in [0, bits + 1])
    u = n.dtype
    m = n
    if u.is_signed:
        m = maximum(m, const(max(-t.bits, _range(u)[0]), u))
    m = bind(minimum(m, const(min(t.bits + 1, _range(u)[1]), u)), "n")
    right = bind(cast(maximum(m, const(1, u)), t), "r")
    x = bind(x, "x")
    one = const(1, t)

    def shift(op: ir.BinaryOp, a: ir.Expr, count: ir.Expr) -> ir.Expr:  # numpy's, made core
        return legal(binary(op, a, count))

    rounded = add(shift("rshift", x, right),
                   and_(shift("rshift", x, sub(right, one)), one))
    if not u.is_signed:
        return rounded
    left = cast(maximum(neg(m), const(0, u)), t)
    return select(gt(m, const(0, u)), rounded, shift("lshift", x, left))


def _shift_by(x: ir.Expr, k: int, bind: Bind) -> ir.Expr:
    """rounding_shift_right(x, k) for a constant k, in core operations."""
    t = x.dtype
    bits = t.bits
    if k == 0:
        return x
    if k < 0:
        return const(0, t) if -k >= bits else shl(x, const(-k, t))

    def shifted(count: int) -> ir.Expr:  # x >> count for count >= 0, numpy's meaning
        if t.is_signed:
            return ashr(x, const(min(count, bits - 1), t)) if count else x
        if count >= bits:
            return const(0, t)
        return lshr(x, const(count, t)) if count else x

    x = bind(x, "x")
    low = shifted(k - 1)
    bit = const(0, t) if isinstance(low, ir.Const) else and_(low, const(1, t))
    high = shifted(k)
    if isinstance(bit, ir.Const):
        return high
    return bit if isinstance(high, ir.Const) and high.value == 0 else add(high, bit)


def _rounding_mul_shift_right(a: ir.Expr, b: ir.Expr, q: int, t: dt.DType) -> ir.Expr:
    lo, hi = _range(t)
    corners = [x * y for x in (lo, hi) for y in (lo, hi)]
    half = 1 << (q - 1) if q > 0 else 0
    pmin, pmax = min(corners) + half, max(corners) + half
    wide = dt.int32 if -(2**31) <= pmin and pmax < 2**31 else dt.int64
    p = mul(cast(a, wide), cast(b, wide))
    if half:
        p = add(p, const(half, wide))
    if q:
        p = ashr(p, const(q, wide))
    return cast(_clamp(p, lo, hi, (pmin >> q, pmax >> q)), t)


def _requantize(acc: ir.Expr, m: ir.Expr, s: ir.Expr, bind: Bind) -> ir.Expr:
    i32, i64 = dt.int32, dt.int64
    k = ir.int_value(s)
    if k is not None:
        k = min(max(k, -SHIFT_LIMIT), SHIFT_LIMIT)
        left: ir.Expr = const(max(k, 0), i32)
        right: ir.Expr = const(max(-k, 0), i32)
    else:
        s = bind(minimum(maximum(s, const(-SHIFT_LIMIT, i32)), const(SHIFT_LIMIT, i32)), "s")
        left = maximum(s, const(0, i32))
        right = bind(maximum(neg(s), const(0, i32)), "e")
    x = acc if ir.int_value(left) == 0 else shl(acc, left)
    # SaturatingRoundingDoublingHighMul: (x * m + 2^30) >> 31 in int64. Only x = m =
    # INT32_MIN gives 2^31 (which wraps to INT32_MIN in int32), and no product gives
    # -2^31: so an int32 result of INT32_MIN is exactly the case to saturate to INT32_MAX,
    # a 32-bit test where a 64-bit clamp would compare two words
    high = ashr(add(mul(cast(x, i64), cast(m, i64)),
                             const(1 << 30, i64)), const(31, i64))
    y: ir.Expr = cast(high, i32)
    if ir.int_value(m) in (None, INT32_MIN) and ir.int_value(x) in (None, INT32_MIN):
        y = bind(y, "y")
        y = select(eq(y, const(INT32_MIN, i32)), const(INT32_MAX, i32), y)
    e = ir.int_value(right)
    if e == 0:
        return y
    y = bind(y, "y")
    if e is not None:  # RoundingDivideByPOT by a constant exponent
        mask: ir.Expr = const((1 << e) - 1, i32)
        quot = bind(ashr(y, const(e, i32)), "q")
        half_mask: ir.Expr = const(((1 << e) - 1) >> 1, i32)
    else:
        mask = bind(sub(shl(const(1, i32), right), const(1, i32)), "mask")
        quot = bind(ashr(y, right), "q")
        half_mask = ashr(mask, const(1, i32))
    threshold = add(half_mask, select(lt(quot, const(0, i32)), const(1, i32),
                                            const(0, i32)))
    rem = and_(y, mask)
    return add(quot, select(gt(rem, threshold), const(1, i32), const(0, i32)))
