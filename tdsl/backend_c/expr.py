"""Loop-IR expressions to C expressions with numpy's semantics.

The expressions arrive legalised (`lower.passes.legalise`): floor division
and modulo, NaN-propagating float min/max, integer abs and float32 exp are
core operations by then, each of which is one C operator, libm call or
helper here.

Invariant: the C expression emitted for an IR expression of dtype T evaluates
to the exact value of type T, though its C type may be wider (`a & b` on
int8 is an `int` in C). Every operation whose result depends on the C type
therefore says the type explicitly: wrapping arithmetic is done in an
unsigned type of at least 32 bits and cast back, so nothing overflows a
signed type and nothing is promoted to `int` by surprise.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..dtypes import INDEX_TYPES, DType, int32, int64
from ..lower.contraction import fused_product
from ..lower.ir import (
    DSP_CALLS,
    Binary,
    Buffer,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    Load,
    PackedLoad,
    Select,
    Unary,
    Var,
)
from . import helpers
from .helpers import ctype, wrap_ctype
from .writer import CExpr, Prec, atom, binary, call, cast, subscript, ternary, unary

_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_PLAIN = {"add": "+", "sub": "-", "mul": "*", "truediv": "/"}
_BITWISE = {"and": "&", "or": "|", "xor": "^"}
_WRAPPING = {"add": "+", "sub": "-", "mul": "*"}
_HELPER_OPS = ("min", "max")  # on ints and index; float min/max are legalised
_TRUNCATING = {"tdiv": "/", "trem": "%"}
_LIBM = ("exp", "log", "sqrt", "sin", "cos", "tanh", "floor", "ceil", "exp2", "log2", "erf")
_LIBM_NAME = {"round": "rint"}  # rint rounds halves to even in the default rounding mode
_LIBM_2 = ("copysign", "atan2", "pow")
_INT64_MIN = -(2**63)


def literal(value, dtype: DType) -> CExpr:
    """An exact C literal for a constant of `dtype`."""
    if dtype.is_float:
        return _float_literal(float(value), dtype)
    v = int(value)
    if dtype.is_bool:
        return atom("1" if v else "0")
    if v == _INT64_MIN:
        return atom("INT64_MIN")
    # an unsigned constant of 32 or 64 bits keeps its width in C (`~3u` and
    # `~UINT64_C(3)`, not the int `~3`, nor the 32-bit `~3u` for a uint64); narrower ones
    # are promoted to int anyway, and their results are cast back
    if dtype.kind == "u" and dtype.bits == 64:
        return atom(f"UINT64_C({v})")
    text = f"{v}u" if dtype.kind == "u" and dtype.bits >= 32 else str(v)
    return CExpr(text, Prec.UNARY) if v < 0 else atom(text)


def _unsigned(v: int, u: str) -> CExpr:
    """Constant v >= 0 of unsigned C type u (uint32_t or uint64_t) for wrapping
    arithmetic: `2u` is an unsigned int, so `0u - 2u` would wrap at 32 bits where
    uint64_t arithmetic is due; UINT64_C(2) has uint64_t's width."""
    return atom(f"UINT64_C({v})" if u == "uint64_t" else f"{v}u")


def _float_literal(v: float, dtype: DType) -> CExpr:
    if math.isnan(v):
        return atom("NAN")
    if math.isinf(v):
        return CExpr("-INFINITY", Prec.UNARY) if v < 0 else atom("INFINITY")
    if dtype.bits == 32:
        text = str(np.float32(v))  # shortest text that reads back as this float32
        text = f"{text}f" if any(c in text for c in ".e") else f"{text}.0f"
    else:
        text = repr(v)
    return CExpr(text, Prec.UNARY) if text.startswith("-") else atom(text)


def dt_int(width: int) -> DType:
    """The signed integer dtype of a float's width (32 or 64 bits)."""
    return int32 if width == 32 else int64


class ExprEmitter:
    """Renders expressions. `name_of(kind, ir_name)` resolves a variable ("var")
    or buffer ("buf") to its C name; `use_helper` and `use_header` record the
    helpers and headers the text needs; `staged(buffer_name)` gives the element
    that stands for a buffer's accesses while a loop stages them (None: the buffer
    itself). While `blend` is set, a select is a call of a `helpers.BLEND` helper,
    which has no branch, rather than C's `?:`. With `fma` set, a float add or subtract
    with a product operand is one `fmaf`/`fma` call (`lower.contraction`)."""

    def __init__(
        self,
        name_of: Callable[[str, str], str],
        use_helper: Callable[[str], None],
        use_header: Callable[[str], None],
        staged: Callable[[str], CExpr | None] = lambda name: None,
    ):
        self.name_of = name_of
        self.use_helper = use_helper
        self.use_header = use_header
        self.staged = staged
        self.blend = False
        self.fma = False
        # infinities and NaN by their bits, not <math.h>'s INFINITY and NAN (portable C:
        # <math.h> only where libm is called, so a freestanding build compiles)
        self.libm_free = False

    # ------------------------------------------------------------ dispatch

    def __call__(self, e: Expr) -> CExpr:
        match e:
            case Const(value, dtype):
                if dtype.is_float and not math.isfinite(float(value)):
                    if self.libm_free:
                        return self._nonfinite(float(value), dtype)
                    self.use_header("math.h")
                if dtype.is_int and int(value) == _INT64_MIN:
                    self.use_header("stdint.h")
                return literal(value, dtype)
            case Var(name):
                return atom(self.name_of("var", name))
            case Load(buffer, indices):
                return self.staged(buffer.name) or self.element(buffer, indices)
            case PackedLoad(buffer, indices, lanes):
                return self.packed(buffer, indices[0], lanes)
            case Binary():
                return self.binary(e)
            case Compare(op, a, b):
                return binary(_COMPARE[op], self(a), self(b))
            case Unary():
                return self.unary(e)
            case Call():
                return self.call(e)
            case Select(cond, a, b, dtype):
                if self.blend:
                    name = helpers.BLEND[helpers.SUFFIX[dtype.name]]
                    self.use_helper(name)
                    return call(name, self(cond), self(a), self(b))
                return ternary(self(cond), self(a), self(b))
            case Cast(a, dtype):
                return self.cast(a, dtype)
        raise TypeError(f"not a loop-IR expression: {e!r}")

    def _nonfinite(self, v: float, dtype: DType) -> CExpr:
        """An infinity or NaN of float32 or float64, as the bits of an integer (the
        bitcast helper folds to the constant)."""
        width = 32 if dtype.bits == 32 else 64
        bits = int(np.array(v, f"float{width}").view(f"int{width}"))
        name = helpers.bitcast_name(dt_int(width), dtype)
        self.use_helper(name)
        return call(name, literal(bits, dt_int(width)))

    # ------------------------------------------------------------ memory

    def element(self, buffer: Buffer, indices: tuple[Expr, ...]) -> CExpr:
        """`buf[offset]`: accesses reach the target flat (the `flatten` pass)."""
        if len(indices) != 1:
            raise ValueError(f"access to {buffer.name} is not flat: {len(indices)} indices "
                             "(targets take loop IR through tdsl.lower.finish)")
        return subscript(self.name_of("buf", buffer.name), self(indices[0]))

    def packed(self, buffer: Buffer, first: Expr, lanes: int) -> CExpr:
        """The `lanes` elements from `first` as one uint32_t word, the first lowest: the
        elements, read through an unsigned pointer of their width at the first (which
        may alias them), or'ed into place. Written out here, not in a helper function:
        gcc merges them into one load only after deciding what to inline, so at -Os a
        helper would stay a call of a single load; and only constant offsets from one
        pointer are merged."""
        bits = 32 // lanes
        base = cast(f"const uint{bits}_t *", unary("&", self.element(buffer, (first,))))
        out = None
        for k in range(lanes):
            elem = cast("uint32_t", subscript(f"({base.text})", atom(str(k))))
            part = elem if k == 0 else binary("<<", elem, atom(str(bits * k)))
            out = part if out is None else binary("|", out, part)
        assert out is not None
        return out

    # ------------------------------------------------------------ operators

    def binary(self, e: Binary) -> CExpr:
        op: str = e.op
        t = e.dtype
        if t in INDEX_TYPES:
            return self._index_binary(e)
        if t.is_bool:  # numpy: + is or, * is and; min is and, max is or on 0/1
            op = {"add": "or", "mul": "and", "min": "and", "max": "or"}.get(op, op)
            if op not in _BITWISE:
                raise TypeError(f"{op} is not defined on bool in the loop IR")
        if op in _BITWISE and not t.is_float:
            return binary(_BITWISE[op], self(e.a), self(e.b))
        if op in _HELPER_OPS and t.is_int:
            return self._helper(op, t, e.a, e.b)
        if op in _TRUNCATING and t.is_int:  # the divisor is safe: exact in C's types
            return binary(_TRUNCATING[op], self(e.a), self(e.b))
        if op == "shl" and t.is_int:  # in the unsigned type: no overflow, then wrap back
            shifted = binary("<<", cast(wrap_ctype(t), self(e.a)), self(e.b))
            return cast(ctype(t), shifted)
        if op in ("ashr", "lshr") and t.is_int:  # the count is in [0, bits)
            return cast(ctype(t), binary(">>", self(e.a), self(e.b)))
        if op == "trem" and t.is_float:
            self.use_header("math.h")
            return call("fmodf" if t.bits == 32 else "fmod", self(e.a), self(e.b))
        if t.is_float and self.fma and (fused := fused_product(e)) is not None:
            return self._fma(op, *fused)
        if t.is_float and op in _PLAIN:
            return binary(_PLAIN[op], self(e.a), self(e.b))
        if t.is_int and op in _WRAPPING:
            return self._wrapped_result(e)
        raise TypeError(f"the loop IR has no {op} on {t!r}")

    def _fma(self, op: str, product: Binary, other: Expr, first: bool) -> CExpr:
        """`p * q op other` (`first`) or `other op p * q` as one `fmaf`/`fma` call, which
        gcc makes one FMA instruction (vectorized like any other) on hosts that have it."""
        self.use_header("math.h")
        p, q, c = self(product.a), self(product.b), self(other)
        if op == "sub":
            if first:
                c = unary("-", c)
            else:
                p = unary("-", p)
        return call("fmaf" if product.dtype.bits == 32 else "fma", p, q, c)

    def _index_binary(self, e: Binary) -> CExpr:
        op, a, b = e.op, e.a, e.b
        if op in ("add", "sub") and isinstance(b, Const) and b.value < 0:
            op, b = ("sub" if op == "add" else "add"), Const(-b.value, e.dtype)
        if op in _PLAIN and op != "truediv":
            return binary(_PLAIN[op], self(a), self(b), exact=True)
        if op in ("pdiv", "pmod", "tdiv", "trem"):
            return binary("/" if op in ("pdiv", "tdiv") else "%", self(a), self(b))
        if op in _BITWISE:
            return binary(_BITWISE[op], self(a), self(b))
        if op in _HELPER_OPS:
            return self._helper(op, e.dtype, a, b)
        raise TypeError(f"the loop IR has no {op} on index")

    def _helper(self, op: str, t: DType, *args: Expr) -> CExpr:
        name = helpers.helper_name(op, t)
        self.use_helper(name)
        return call(name, *(self(a) for a in args))

    # Wrapping arithmetic: the value is computed in U = uint32_t or uint64_t
    # and cast back once; nested add/sub/mul/neg of the same dtype stay in U.

    def _wrapped_result(self, e: Expr) -> CExpr:
        inner = self._wrapped(e, e.dtype)
        t = ctype(e.dtype)
        return inner if t == wrap_ctype(e.dtype) else cast(t, inner)

    def _wrapped(self, e: Expr, t: DType) -> CExpr:
        """The value of `e` (of dtype `t`) modulo 2**bits, in t's unsigned type."""
        u = wrap_ctype(t)
        if e.dtype != t:
            return cast(u, self(e))
        match e:
            case Binary(op, a, b, _) if op in _WRAPPING:
                if op in ("add", "sub") and isinstance(b, Const) and int(b.value) < 0:
                    op = "sub" if op == "add" else "add"
                    negated = _unsigned(-int(b.value), u)
                    return binary(_WRAPPING[op], self._wrapped(a, t), negated, exact=True)
                return binary(_WRAPPING[op], self._wrapped(a, t), self._wrapped(b, t), exact=True)
            case Unary("neg", a, _):
                return unary("-", self._wrapped(a, t))
            case Const(value, _):
                v = int(value)
                return _unsigned(v, u) if v >= 0 else cast(u, literal(v, t))
            case Load(buffer, _) if ctype(buffer.dtype) == u:
                return self(e)
        return cast(u, self(e))

    def unary(self, e: Unary) -> CExpr:
        t = e.dtype
        if e.op == "neg":
            if t.is_float or t in INDEX_TYPES:
                return unary("-", self(e.a))
            if t.is_int:
                return self._wrapped_result(e)
        elif e.op == "invert":
            if t.is_bool:
                return unary("!", self(e.a))
            if t.is_int:
                inverted = unary("~", self(e.a))
                narrow = t.kind == "u" and t.bits < 32  # ~ on a promoted uint8 is negative
                return cast(ctype(t), inverted) if narrow else inverted
        raise TypeError(f"the loop IR has no {e.op} on {t!r}")

    def call(self, e: Call) -> CExpr:
        fn, t = e.fn, e.dtype
        if fn in DSP_CALLS:  # ACLE's intrinsic, or its helper (helpers.DSP_HELPERS)
            name = f"dsp_{fn}" if f"dsp_{fn}" in helpers.DSP_HELPERS else f"__{fn}"
            if name in helpers.DSP_HELPERS:
                self.use_helper(name)
            return call(name, *(self(a) for a in e.args))
        if fn == "bitcast":
            (a,) = e.args
            name = helpers.bitcast_name(a.dtype, t)
            self.use_helper(name)
            return call(name, self(a))
        if fn == "clock":
            self.use_helper(helpers.CLOCK)
            return call(helpers.CLOCK)
        if fn in _LIBM_2 and t.is_float and len(e.args) == 2:
            self.use_header("math.h")
            return call(f"{fn}{'f' if t.bits == 32 else ''}", *(self(a) for a in e.args))
        if len(e.args) != 1:
            raise TypeError(f"{fn} takes one argument, got {len(e.args)}")
        (a,) = e.args
        if t.is_float and (fn in _LIBM or fn in _LIBM_NAME or fn == "abs") and not (
                fn == "exp" and t.bits == 32):
            self.use_header("math.h")
            suffix = "f" if t.bits == 32 else ""
            name = "fabs" if fn == "abs" else _LIBM_NAME.get(fn, fn)
            return call(f"{name}{suffix}", self(a))
        raise TypeError(f"the loop IR has no call {fn} on {t!r} (not legalised?)")

    def cast(self, a: Expr, to: DType) -> CExpr:
        src = a.dtype
        value = self(a)
        if to.is_bool:
            return value if src.is_bool else binary("!=", value, atom("0"))
        if ctype(src) == ctype(to):
            return value  # index <-> int64, bool -> uint8: same values
        if src.is_float and to.is_int:  # through int64, as tdsl.dtypes.astype
            name = helpers.TO_INT64[helpers.SUFFIX[src.name]]
            self.use_helper(name)
            value = call(name, value)
            return value if to.bits == 64 and to.is_signed else cast(ctype(to), value)
        return cast(ctype(to), value)
