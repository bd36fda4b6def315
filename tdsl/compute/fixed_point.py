"""Fixed-point arithmetic, as Halide names it: saturating sums, rounding shifts and
multiplies, and the requantization of quantized neural networks.

Each builder checks its operands and makes a `Call` node; `VALUES` holds what each
computes on numpy arrays (exactly, in Python integers), which is what `td.evaluate`
runs and what the generated code must reproduce bit for bit. The `legalise` pass
writes each out in core operations, for every target.

    saturating_add(a, b)              a + b clamped to the dtype's range
    saturating_sub(a, b)              a - b clamped to the dtype's range
    rounding_shift_right(x, n)        round(x / 2**n), ties up; n <= 0 shifts left
    rounding_mul_shift_right(a, b, q) round(a * b / 2**q), ties up, clamped to the dtype
    requantize(acc, multiplier, shift)
                                      TFLite's MultiplyByQuantizedMultiplier, CMSIS-NN's
                                      arm_nn_requantize (int32)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import dtypes as dt
from ..dtypes import DType
from ..errors import DefinitionError
from .nodes import Call, Const, Expr, _operand, common_dtype, const

FIXED_POINT = ("saturating_add", "saturating_sub", "rounding_shift_right",
               "rounding_mul_shift_right", "requantize")
SHIFT_LIMIT = 31  # requantize's shift is taken in [-SHIFT_LIMIT, SHIFT_LIMIT]


def _expr(x, what: str, fn: str) -> Expr:
    x = _operand(x)
    e = x if isinstance(x, Expr) else None
    if e is None:
        if isinstance(x, bool) or not isinstance(x, int):
            raise DefinitionError(f"td.{fn}: {what} must be an integer expression or a Python "
                                  f"int, got {x!r}")
        e = const(x)
    if not e.dtype.is_int:
        raise DefinitionError(f"td.{fn}: {what} {e!r} is {e.dtype!r}; fixed-point operations take "
                              "integers (td.cast a float first, e.g. with td.round)")
    return e


def _common(fn: str, a, b) -> tuple[Expr, Expr, DType]:
    """The two operands in their numpy result dtype (a Python int takes the other's)."""
    for x, what in ((a, "the first operand"), (b, "the second operand")):
        _expr(x, what, fn)  # checks each
    a, b = _operand(a), _operand(b)
    t = common_dtype(a, b)
    if not t.is_int:
        raise DefinitionError(f"td.{fn}({a!r}, {b!r}): numpy's common dtype is {t!r}, not an "
                              "integer; cast the operands to one integer dtype")
    for x in (a, b):
        if not isinstance(x, Expr) and not dt.scalar_fits(x, t):
            raise DefinitionError(f"td.{fn}: the Python int {x} does not fit in {t!r}, the "
                                  "dtype of the other operand")
    ea = a if isinstance(a, Expr) else const(a, t)
    eb = b if isinstance(b, Expr) else const(b, t)
    ea = ea if ea.dtype == t else _cast(ea, t)
    eb = eb if eb.dtype == t else _cast(eb, t)
    return ea, eb, t


def _cast(e: Expr, t: DType) -> Expr:
    from .nodes import cast

    return cast(e, t)


def saturating_add(a, b) -> Expr:
    """Elementwise `a + b` clamped to the range of numpy's result dtype (integers):
    `td.saturating_add(int8(100), int8(100)) == 127`."""
    a, b, t = _common("saturating_add", a, b)
    return Call("saturating_add", (a, b), t)


def saturating_sub(a, b) -> Expr:
    """Elementwise `a - b` clamped to the range of numpy's result dtype (integers):
    `td.saturating_sub(uint8(3), uint8(5)) == 0`."""
    a, b, t = _common("saturating_sub", a, b)
    return Call("saturating_sub", (a, b), t)


def rounding_shift_right(x, n) -> Expr:
    """Elementwise `round(x / 2**n)` with ties rounded up (toward +infinity), in x's
    dtype, as Halide's: for n >= 1 it is `(x >> n) + ((x >> (n - 1)) & 1)`, which never
    overflows; a count past the width gives the rounded quotient all the same (0, or 1
    for an unsigned x with its top bit set shifted by exactly its width); n = 0 gives x
    and a negative n shifts left by -n (wrapping, 0 past the width), as `x << -n`."""
    ex = _expr(x, "the value", "rounding_shift_right")
    en = _expr(n, "the shift count", "rounding_shift_right")
    return Call("rounding_shift_right", (ex, en), ex.dtype)


def rounding_mul_shift_right(a, b, q: int) -> Expr:
    """Elementwise `round(a * b / 2**q)` with ties rounded up, clamped to the range of
    numpy's result dtype of a and b: the product is exact (computed wider). With int32
    operands and q = 31 it is Arm's SQRDMULH (`rounding_mul_shift_right(a, b, 31)`), with
    int16 and q = 15 a Q15 multiply. `q` is a Python int from 0 to twice the width less
    2 (less 1 for unsigned dtypes); the dtypes are int8 to int32 and uint8, uint16."""
    a, b, t = _common("rounding_mul_shift_right", a, b)
    if t.bits > 32 or t == dt.uint32:
        raise DefinitionError(
            f"td.rounding_mul_shift_right: {t!r} operands need a product wider than 64 bits; "
            "valid dtypes are int8, int16, int32, uint8 and uint16")
    top = 2 * t.bits - (2 if t.is_signed else 1)
    if isinstance(q, bool) or not isinstance(q, int) or not 0 <= q <= top:
        raise DefinitionError(f"td.rounding_mul_shift_right: q must be a Python int in "
                              f"[0, {top}] for {t!r} operands, got {q!r}")
    return Call("rounding_mul_shift_right", (a, b, Const(q, dt.int32)), t)


def requantize(acc, multiplier, shift) -> Expr:
    """int32 requantization, exactly TFLite's MultiplyByQuantizedMultiplier and
    CMSIS-NN's `arm_nn_requantize` (where they agree: everywhere but a multiplier of
    INT32_MIN, which neither produces and where this saturates as TFLite does):

        s = clip(shift, -31, 31)
        x = acc << max(s, 0)                       wrapping in int32
        y = round(x * multiplier / 2**31), ties up, clamped to int32
                                                   (SaturatingRoundingDoublingHighMul)
        result = round(y / 2**max(-s, 0)), ties away from zero   (RoundingDivideByPOT)

    `acc`, `multiplier` and `shift` are int32 (or Python ints): scalars for per-tensor
    quantization, or expressions indexed by the channel (`mult[c]`, `shift[c]`) for
    per-channel quantization. The result is int32: add the output zero point and
    `td.saturating_cast` it to int8."""
    parts = []
    for x, what in ((acc, "acc"), (multiplier, "multiplier"), (shift, "shift")):
        x = _operand(x)
        if not isinstance(x, Expr):
            e = _expr(x, what, "requantize")
            if not dt.scalar_fits(x, dt.int32):
                raise DefinitionError(f"td.requantize: {what} {x} does not fit in int32")
            e = const(x, dt.int32)
        else:
            e = _expr(x, what, "requantize")
            if e.dtype != dt.int32:
                raise DefinitionError(f"td.requantize: {what} {e!r} is {e.dtype!r}, not int32; "
                                      f"td.cast it to td.int32")
        parts.append(e)
    return Call("requantize", tuple(parts), dt.int32)


# ---------------------------------------------------------------- numpy semantics


def _ints(v) -> np.ndarray:
    """`v` as an array of Python ints (exact arithmetic of any width)."""
    return np.asarray(v).astype(object)


def _back(v: np.ndarray, t: np.dtype):
    """Python ints that fit in `t` (or are wrapped into it) as an array of `t`."""
    bits = t.itemsize * 8
    signed = t.kind == "i"
    mask = (1 << bits) - 1

    def wrap(x: int) -> int:
        x &= mask
        return x - (1 << bits) if signed and x >> (bits - 1) else x

    out = np.vectorize(wrap, otypes=[object])(v) if np.ndim(v) else wrap(int(v))
    return np.asarray(out).astype(t)[()]


def _range(t: np.dtype) -> tuple[int, int]:
    info = np.iinfo(t)
    return int(info.min), int(info.max)


def _saturating(op: Callable[[object, object], object]):
    def f(a, b):
        t = np.result_type(a, b)
        lo, hi = _range(t)
        return _back(np.clip(op(_ints(a), _ints(b)), lo, hi), t)
    return f


def _floor_shift(x, n):
    """floor(x / 2**n) for Python ints, n >= 0 (elementwise on object arrays)."""
    return np.vectorize(lambda a, k: a >> k, otypes=[object])(x, n)


def _rounding_shift_right(x, n):
    t = np.asarray(x).dtype
    xs, ns = _ints(x), _ints(n)

    def one(a: int, k: int) -> int:
        if k > 0:
            return (a >> k) + ((a >> (k - 1)) & 1)
        return a << min(-k, 64)  # wrapped by _back; 0 past the width

    return _back(np.vectorize(one, otypes=[object])(xs, ns), t)


def _rounding_mul_shift_right(a, b, q):
    t = np.result_type(a, b)
    lo, hi = _range(t)
    k = int(np.asarray(q))
    p = _ints(a) * _ints(b)
    r = _floor_shift(p + (1 << (k - 1)) if k > 0 else p, k)
    return _back(np.clip(r, lo, hi), t)


def _requantize(acc, multiplier, shift):
    lo, hi = _range(np.dtype(np.int32))

    def one(a: int, m: int, s: int) -> int:
        s = min(max(s, -SHIFT_LIMIT), SHIFT_LIMIT)
        x = a << max(s, 0)
        x = (x & 0xFFFFFFFF) - ((x & 0x80000000) << 1)  # wrap to int32
        y = min(max((x * m + (1 << 30)) >> 31, lo), hi)
        e = max(-s, 0)
        if e == 0:
            return y
        mask = (1 << e) - 1
        rem, quot = y & mask, y >> e
        threshold = (mask >> 1) + (1 if quot < 0 else 0)
        return quot + (1 if rem > threshold else 0)

    out = np.vectorize(one, otypes=[object])(_ints(acc), _ints(multiplier), _ints(shift))
    return _back(out, np.dtype(np.int32))


VALUES: dict[str, Callable[..., object]] = {
    "saturating_add": _saturating(lambda a, b: a + b),  # type: ignore[operator]
    "saturating_sub": _saturating(lambda a, b: a - b),  # type: ignore[operator]
    "rounding_shift_right": _rounding_shift_right,
    "rounding_mul_shift_right": _rounding_mul_shift_right,
    "requantize": _requantize,
}
