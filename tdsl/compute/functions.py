"""The algorithm's elementwise functions: `td.where`, `td.maximum`, `td.minimum`, the
math functions (`td.exp`, `td.sqrt`, ...), `td.isnan`, `td.isinf`, `td.round` and
`td.saturating_cast`, each with numpy's meaning and result dtype."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import DefinitionError
from .nodes import (
    Binary,
    Const,
    Expr,
    Select,
    _coerce,
    _operand,
    binary,
    call,
    cast,
    common_dtype,
    compare,
    const,
    power,
)
from .ops import NUMPY_CALL, CallFn


def where(cond, a, b) -> Expr:
    """Elementwise choice, as np.where: `a` where cond holds, else `b`."""
    cond = _operand(cond)
    if not isinstance(cond, Expr) or not cond.dtype.is_bool:
        shown = cond.dtype if isinstance(cond, Expr) else type(cond).__name__
        raise DefinitionError(
            f"td.where needs a bool condition, got {shown!r}; compare explicitly, e.g. x != 0"
        )
    a, b = _operand(a), _operand(b)
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        a = const(a)
    res = common_dtype(a, b)
    return Select(cond, _coerce(a, res), _coerce(b, res), res)


def maximum(a, b) -> Expr:
    """Elementwise larger of two values, as np.maximum: `td.maximum(A[i], 0.0)` is a ReLU.

    (`td.max(body, over=k)` is the reduction over a dim.)"""
    return binary("max", a, b)


def minimum(a, b) -> Expr:
    """Elementwise smaller of two values, as np.minimum: `td.minimum(A[i], 6.0)` caps at 6.

    (`td.min(body, over=k)` is the reduction over a dim.)"""
    return binary("min", a, b)


def _math(fn: CallFn):
    def f(x) -> Expr:
        return call(fn, x)

    f.__name__ = fn
    f.__doc__ = f"Elementwise {fn}, with numpy's result dtype (np.{NUMPY_CALL[fn].__name__})."
    return f


def atan2(y, x) -> Expr:
    """Elementwise arc tangent of y / x in the quadrant of (x, y), as np.arctan2."""
    return call("atan2", y, x)


def pow(a, b) -> Expr:  # noqa: A001 - the public name
    """Elementwise `a ** b`, as np.power (see `**`)."""
    return power(a, b)


def isnan(x) -> Expr:
    """Elementwise: is x NaN? (np.isnan; False for integers)."""
    x = _operand(x)
    if not isinstance(x, Expr):
        x = const(x)
    return compare("ne", x, x) if x.dtype.is_float else const(False)


def isinf(x) -> Expr:
    """Elementwise: is x +inf or -inf? (np.isinf; False for integers)."""
    x = _operand(x)
    if not isinstance(x, Expr):
        x = const(x)
    return compare("eq", call("abs", x), float("inf")) if x.dtype.is_float else const(False)


def rsqrt(x) -> Expr:
    """Elementwise 1 / sqrt(x), in sqrt's result dtype (1 / np.sqrt(x))."""
    r = call("sqrt", x)
    return binary("truediv", const(1.0, r.dtype), r)


def saturating_cast(e, dtype) -> Expr:
    """Convert to `dtype`, first clipping to its range (the quantization idiom): a float
    beyond an integer dtype's range gives its min or max, NaN gives 0, and the rest
    converts as td.cast does (floats truncate toward zero)."""
    d = dt.as_dtype(dtype)
    e = _operand(e)
    if not isinstance(e, Expr):
        e = const(e)
    if not d.is_int or e.dtype.is_bool:
        return cast(e, d)
    info, src = np.iinfo(d.name), e.dtype
    lo, hi = int(info.min), int(info.max)
    if src.is_float:  # compare in the float dtype; beyond the range, the bound itself
        x = e
        out = where(x <= lo, const(lo, d), where(x >= hi, const(hi, d), cast(x, d)))
        return where(x != x, const(0, d), out)
    have = _int_range(e)
    x = e
    if have[0] < lo:
        x = binary("max", x, lo)
    if have[1] > hi:
        x = binary("min", x, hi)
    return cast(x, d)


def _int_range(e: Expr) -> tuple[int, int]:
    """Bounds of integer expression `e`'s values: its dtype's range, narrowed through
    the clamps around it (`td.minimum(td.maximum(v, lo), hi)` with constant bounds, as a
    clamp to an activation's range is written before a saturating cast)."""
    info = np.iinfo(e.dtype.name)
    lo, hi = int(info.min), int(info.max)
    match e:
        case Binary("min", a, Const(int() as c)) | Binary("min", Const(int() as c), a):
            alo, ahi = _int_range(a)
            return min(alo, c), min(ahi, c)
        case Binary("max", a, Const(int() as c)) | Binary("max", Const(int() as c), a):
            alo, ahi = _int_range(a)
            return max(alo, c), max(ahi, c)
    return lo, hi


exp = _math("exp")
log = _math("log")
sqrt = _math("sqrt")
sin = _math("sin")
cos = _math("cos")
tanh = _math("tanh")
floor = _math("floor")
ceil = _math("ceil")
abs_ = _math("abs")
exp2 = _math("exp2")
log2 = _math("log2")
erf = _math("erf")
erf.__doc__ = "Elementwise error function erf(x), in exp's result dtype (float32 stays float32)."


def round(x) -> Expr:  # noqa: A001 - the public name
    """Elementwise round to the nearest integer, halves to even, as np.round(x) (np.rint);
    the dtype stays (floats stay floats, integers are unchanged)."""
    x = _operand(x)
    if not isinstance(x, Expr):
        x = const(x)
    return call("round", x) if x.dtype.is_float else x
