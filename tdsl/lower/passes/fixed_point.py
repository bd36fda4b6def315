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

Bind = Callable[[ir.Expr, str], ir.Expr]
Legal = Callable[[ir.Expr], ir.Expr]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
SHIFT_LIMIT = 31  # requantize's shift is taken in [-31, 31] (compute.fixed_point)


def _c(v: int, t: dt.DType) -> ir.Const:
    return ir.Const(v, t)


def _bin(op: ir.BinaryOp, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.Binary(op, a, b, a.dtype)


def _sel(c: ir.Expr, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.Select(c, a, b, a.dtype)


def _cmp(op: ir.CompareOp, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.Compare(op, a, b)


def _range(t: dt.DType) -> tuple[int, int]:
    if t.is_signed:
        return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1
    return 0, (1 << t.bits) - 1


def _clamp(e: ir.Expr, lo: int, hi: int, have: tuple[int, int]) -> ir.Expr:
    """`e` (whose values lie in `have`) clamped to [lo, hi], with no test that cannot fail."""
    t = e.dtype
    if have[0] < lo:
        e = _bin("max", e, _c(lo, t))
    if have[1] > hi:
        e = _bin("min", e, _c(hi, t))
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
        wide = _bin(op, ir.Cast(a, dt.int32), ir.Cast(b, dt.int32))
        have = (2 * lo - hi, 2 * hi) if op == "add" else (lo - hi, hi - lo)
        return ir.Cast(_clamp(wide, lo, hi, have), t)
    a, b = bind(a, "x"), bind(b, "y")
    if not t.is_signed:
        if op == "add":
            s = bind(_bin("add", a, b), "s")
            return _sel(_cmp("lt", s, a), _c(hi, t), s)
        return _sel(_cmp("lt", a, b), _c(0, t), _bin("sub", a, b))
    s = bind(_bin(op, a, b), "s")
    # overflow iff the result's sign differs from both operands' (add), or the operands'
    # signs differ and the result's differs from a's (sub)
    crossed = (_bin("and", _bin("xor", a, s), _bin("xor", b, s)) if op == "add"
               else _bin("and", _bin("xor", a, b), _bin("xor", a, s)))
    bound = _bin("xor", _bin("ashr", a, _c(t.bits - 1, t)), _c(hi, t))  # a < 0: MIN, else MAX
    return _sel(_cmp("lt", crossed, _c(0, t)), bound, s)


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
        m = _bin("max", m, _c(max(-t.bits, _range(u)[0]), u))
    m = bind(_bin("min", m, _c(min(t.bits + 1, _range(u)[1]), u)), "n")
    right = bind(ir.Cast(_bin("max", m, _c(1, u)), t), "r")
    x = bind(x, "x")
    one = _c(1, t)

    def shift(op: ir.BinaryOp, a: ir.Expr, count: ir.Expr) -> ir.Expr:  # numpy's, made core
        return legal(_bin(op, a, count))

    rounded = _bin("add", shift("rshift", x, right),
                   _bin("and", shift("rshift", x, _bin("sub", right, one)), one))
    if not u.is_signed:
        return rounded
    left = ir.Cast(_bin("max", ir.Unary("neg", m, u), _c(0, u)), t)
    return _sel(_cmp("gt", m, _c(0, u)), rounded, shift("lshift", x, left))


def _shift_by(x: ir.Expr, k: int, bind: Bind) -> ir.Expr:
    """rounding_shift_right(x, k) for a constant k, in core operations."""
    t = x.dtype
    bits = t.bits
    if k == 0:
        return x
    if k < 0:
        return _c(0, t) if -k >= bits else _bin("shl", x, _c(-k, t))

    def shifted(count: int) -> ir.Expr:  # x >> count for count >= 0, numpy's meaning
        if t.is_signed:
            return _bin("ashr", x, _c(min(count, bits - 1), t)) if count else x
        if count >= bits:
            return _c(0, t)
        return _bin("lshr", x, _c(count, t)) if count else x

    x = bind(x, "x")
    low = shifted(k - 1)
    bit = _c(0, t) if isinstance(low, ir.Const) else _bin("and", low, _c(1, t))
    high = shifted(k)
    if isinstance(bit, ir.Const):
        return high
    return bit if isinstance(high, ir.Const) and high.value == 0 else _bin("add", high, bit)


def _rounding_mul_shift_right(a: ir.Expr, b: ir.Expr, q: int, t: dt.DType) -> ir.Expr:
    lo, hi = _range(t)
    corners = [x * y for x in (lo, hi) for y in (lo, hi)]
    half = 1 << (q - 1) if q > 0 else 0
    pmin, pmax = min(corners) + half, max(corners) + half
    wide = dt.int32 if -(2**31) <= pmin and pmax < 2**31 else dt.int64
    p = _bin("mul", ir.Cast(a, wide), ir.Cast(b, wide))
    if half:
        p = _bin("add", p, _c(half, wide))
    if q:
        p = _bin("ashr", p, _c(q, wide))
    return ir.Cast(_clamp(p, lo, hi, (pmin >> q, pmax >> q)), t)


def _requantize(acc: ir.Expr, m: ir.Expr, s: ir.Expr, bind: Bind) -> ir.Expr:
    i32, i64 = dt.int32, dt.int64
    k = ir.int_value(s)
    if k is not None:
        k = min(max(k, -SHIFT_LIMIT), SHIFT_LIMIT)
        left: ir.Expr = _c(max(k, 0), i32)
        right: ir.Expr = _c(max(-k, 0), i32)
    else:
        s = bind(_bin("min", _bin("max", s, _c(-SHIFT_LIMIT, i32)), _c(SHIFT_LIMIT, i32)), "s")
        left = _bin("max", s, _c(0, i32))
        right = bind(_bin("max", ir.Unary("neg", s, i32), _c(0, i32)), "e")
    x = acc if ir.int_value(left) == 0 else _bin("shl", acc, left)
    # SaturatingRoundingDoublingHighMul: (x * m + 2^30) >> 31 in int64. Only x = m =
    # INT32_MIN gives 2^31 (which wraps to INT32_MIN in int32), and no product gives
    # -2^31: so an int32 result of INT32_MIN is exactly the case to saturate to INT32_MAX,
    # a 32-bit test where a 64-bit clamp would compare two words
    high = _bin("ashr", _bin("add", _bin("mul", ir.Cast(x, i64), ir.Cast(m, i64)),
                             _c(1 << 30, i64)), _c(31, i64))
    y: ir.Expr = ir.Cast(high, i32)
    if ir.int_value(m) in (None, INT32_MIN) and ir.int_value(x) in (None, INT32_MIN):
        y = bind(y, "y")
        y = _sel(_cmp("eq", y, _c(INT32_MIN, i32)), _c(INT32_MAX, i32), y)
    e = ir.int_value(right)
    if e == 0:
        return y
    y = bind(y, "y")
    if e is not None:  # RoundingDivideByPOT by a constant exponent
        mask: ir.Expr = _c((1 << e) - 1, i32)
        quot = bind(_bin("ashr", y, _c(e, i32)), "q")
        half_mask: ir.Expr = _c(((1 << e) - 1) >> 1, i32)
    else:
        mask = bind(_bin("sub", _bin("shl", _c(1, i32), right), _c(1, i32)), "mask")
        quot = bind(_bin("ashr", y, right), "q")
        half_mask = _bin("ashr", mask, _c(1, i32))
    threshold = _bin("add", half_mask, _sel(_cmp("lt", quot, _c(0, i32)), _c(1, i32),
                                            _c(0, i32)))
    rem = _bin("and", y, mask)
    return _bin("add", quot, _sel(_cmp("gt", rem, threshold), _c(1, i32), _c(0, i32)))
