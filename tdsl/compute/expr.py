"""The algorithm IR: index expressions over named dimensions.

Nodes are frozen, slotted dataclasses compared by identity (`==` builds a
comparison node, so structural equality is spelled `same(a, b)`). Every node
carries its numpy dtype, computed at construction by asking numpy, so the
arithmetic means exactly what numpy means: same-dtype integers wrap, Python
scalars are weak (NEP 50), `/` is true division, `//` and `%` floor.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeVar, dataclass_transform

import numpy as np

from .. import dtypes as dt
from ..dtypes import DType
from ..errors import DefinitionError

if TYPE_CHECKING:
    from .definitions import Tensor
    from .views import BoundaryView

Scalar = int | float | bool
_ids = itertools.count()


class Expr:
    """Base of all expression nodes. Operators build new nodes."""

    __slots__ = ()

    if TYPE_CHECKING:
        # a field of some nodes, a property computed from the operands of others

        @property
        def dtype(self) -> DType:
            """The element type of the expression's value."""
            ...

    def __add__(self, o):
        return binary("add", self, o)

    def __radd__(self, o):
        return binary("add", o, self)

    def __sub__(self, o):
        return binary("sub", self, o)

    def __rsub__(self, o):
        return binary("sub", o, self)

    def __mul__(self, o):
        return binary("mul", self, o)

    def __rmul__(self, o):
        return binary("mul", o, self)

    def __truediv__(self, o):
        return binary("truediv", self, o)

    def __rtruediv__(self, o):
        return binary("truediv", o, self)

    def __floordiv__(self, o):
        return binary("floordiv", self, o)

    def __rfloordiv__(self, o):
        return binary("floordiv", o, self)

    def __mod__(self, o):
        return binary("mod", self, o)

    def __rmod__(self, o):
        return binary("mod", o, self)

    def __and__(self, o):
        return binary("and", self, o)

    def __rand__(self, o):
        return binary("and", o, self)

    def __or__(self, o):
        return binary("or", self, o)

    def __ror__(self, o):
        return binary("or", o, self)

    def __xor__(self, o):
        return binary("xor", self, o)

    def __rxor__(self, o):
        return binary("xor", o, self)

    def __neg__(self):
        return unary("neg", self)

    def __pow__(self, o):
        return power(self, o)

    def __rpow__(self, o):
        return power(o, self)

    def __lshift__(self, o):
        return binary("lshift", self, o)

    def __rlshift__(self, o):
        return binary("lshift", o, self)

    def __rshift__(self, o):
        return binary("rshift", self, o)

    def __rrshift__(self, o):
        return binary("rshift", o, self)

    def __pos__(self):
        return self

    def __abs__(self):
        return call("abs", self)

    def __invert__(self):
        return unary("invert", self)

    def __eq__(self, o):  # type: ignore[override]
        return compare("eq", self, o)

    def __ne__(self, o):  # type: ignore[override]
        return compare("ne", self, o)

    def __lt__(self, o):
        return compare("lt", self, o)

    def __le__(self, o):
        return compare("le", self, o)

    def __gt__(self, o):
        return compare("gt", self, o)

    def __ge__(self, o):
        return compare("ge", self, o)

    __hash__ = object.__hash__

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """numpy scalars combine with expressions through the operators
        (`np.float32(2) * e` is `e`'s multiply); numpy's functions and arrays do not
        compute on expressions, and say which td function does."""
        inputs = tuple(x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x for x in inputs)
        if method == "__call__" and not kwargs and len(inputs) == 2 and not any(
                isinstance(x, np.ndarray) for x in inputs):
            for table, build in ((NUMPY_BINARY, binary), (NUMPY_COMPARE, compare)):
                op = next((k for k, f in table.items() if f is ufunc), None)
                if op is not None and op not in ("min", "max"):
                    return build(op, *inputs)
        if any(isinstance(x, np.ndarray) for x in inputs):
            raise DefinitionError(
                f"a numpy array cannot be combined with the tdsl expression {self!r} (np."
                f"{ufunc.__name__}); declare it as a td.input and index it, or use a scalar")
        td_name = {"absolute": "abs", "maximum": "maximum", "minimum": "minimum",
                   "fmax": "maximum", "fmin": "minimum"}.get(ufunc.__name__, ufunc.__name__)
        known = sorted({*NUMPY_CALL, "maximum", "minimum", "where", "cast"})
        hint = (f"use td.{td_name}(...)" if td_name in known else
                f"tdsl's functions are {', '.join('td.' + k for k in known)}")
        raise DefinitionError(
            f"np.{ufunc.__name__} cannot compute on the tdsl expression {self!r}; {hint}")

    def __bool__(self):
        # `d in dims` and dict lookups compare leaves with ==: answer by identity
        if isinstance(self, Compare) and self.op in ("eq", "ne"):
            if isinstance(self.a, (Dim, Size)) and isinstance(self.b, (Dim, Size)):
                return (self.a is self.b) == (self.op == "eq")
        raise DefinitionError(
            f"the tdsl expression {self!r} has no truth value at definition time; "
            "use td.where(cond, a, b) instead of `if`, and & | ~ instead of and/or/not"
        )

    def __repr__(self) -> str:
        from .printer import show

        return show(self)


_T = TypeVar("_T")


@dataclass_transform(frozen_default=True, eq_default=False)
def _node(cls: type[_T]) -> type[_T]:
    """Make `cls` a frozen, slotted dataclass compared by identity: an expression node."""
    return dataclass(frozen=True, eq=False, slots=True, repr=False)(cls)


@_node
class Const(Expr):
    value: Scalar
    dtype: DType


@_node
class Dim(Expr):
    """A named dimension. Identity is the object; the name is for people."""

    name: str
    uid: int = field(default_factory=lambda: next(_ids))

    @property
    def dtype(self) -> DType:
        return dt.int32


@_node
class Size(Expr):
    """A symbolic extent, bound from argument shapes at call time."""

    name: str
    uid: int = field(default_factory=lambda: next(_ids))

    @property
    def dtype(self) -> DType:
        return dt.int32


@_node
class Access(Expr):
    tensor: Tensor | BoundaryView
    indices: tuple[Expr, ...]

    @property
    def dtype(self) -> DType:
        return self.tensor.dtype


# numpy's operations of those names (the tables NUMPY_BINARY, NUMPY_COMPARE, NUMPY_CALL)
BinaryOp = Literal["add", "sub", "mul", "truediv", "floordiv", "mod", "min", "max",
                   "and", "or", "xor", "lshift", "rshift"]
CompareOp = Literal["eq", "ne", "lt", "le", "gt", "ge"]
UnaryOp = Literal["neg", "invert"]
CallFn = Literal["exp", "log", "sqrt", "sin", "cos", "tanh", "floor", "ceil", "abs",
                 "exp2", "log2", "round", "erf", "atan2", "pow",
                 # fixed point (`compute.fixed_point`), not numpy's: their values are
                 # `fixed_point.VALUES`
                 "saturating_add", "saturating_sub", "rounding_shift_right",
                 "rounding_mul_shift_right", "requantize"]
# "fold": a general reduction (`td.reduce`), whose body is a `Pack`
ReduceOp = Literal["sum", "prod", "max", "min", "fold"]


@_node
class Binary(Expr):
    """Arithmetic on operands already cast to a common dtype (see `binary`)."""

    op: BinaryOp
    a: Expr
    b: Expr
    dtype: DType


@_node
class Compare(Expr):
    op: CompareOp
    a: Expr
    b: Expr

    @property
    def dtype(self) -> DType:
        return dt.bool_


@_node
class Unary(Expr):
    op: UnaryOp
    a: Expr
    dtype: DType


@_node
class Call(Expr):
    fn: CallFn
    args: tuple[Expr, ...]
    dtype: DType


@_node
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr
    dtype: DType


@_node
class Cast(Expr):
    a: Expr
    dtype: DType


@_node
class Checked(Expr):
    """An index `a` that must lie in [0, extent): what lowering writes for a data-dependent
    index of a plain tensor that compute_inline substituted away. Its value is `a` clamped
    into range; a kernel reports an `a` out of range (INDEX_OUT_OF_RANGE), and td.evaluate
    raises ArgumentError, as for the read it stands for."""

    a: Expr
    extent: Expr

    @property
    def dtype(self) -> DType:
        return self.a.dtype


@dataclass(frozen=True, eq=False, slots=True)
class Axis:
    """A reduction dimension ranging over [lo, hi)."""

    dim: Dim
    lo: Expr
    hi: Expr


@_node
class Reduce(Expr):
    """A reduction of `body` over `axes`. `name`, when given, makes a reduction inside an
    expression a stage of that name (see `td.sum`)."""

    op: ReduceOp
    body: Expr
    axes: tuple[Axis, ...]
    dtype: DType
    name: str | None = None


@_node
class Acc(Expr):
    """In a general reduction's step (`td.reduce`): component `index` of the value so far
    of the reduction `token` names."""

    token: int
    index: int
    dtype: DType


@_node
class Pack(Expr):
    """The body of a general reduction (`Reduce` "fold", `td.reduce`): each component's
    start value (an expression of the enclosing dims, computed before the reduction),
    then each component's step, the new value from the `Acc` values so far."""

    items: tuple[Expr, ...]
    token: int

    @property
    def size(self) -> int:
        return len(self.items) // 2

    @property
    def starts(self) -> tuple[Expr, ...]:
        return self.items[: self.size]

    @property
    def steps(self) -> tuple[Expr, ...]:
        return self.items[self.size:]

    @property
    def dtype(self) -> DType:
        return self.items[0].dtype


@_node
class Item(Expr):
    """Component `index` of a general reduction's result (`td.reduce`)."""

    fold: Reduce
    index: int

    @property
    def dtype(self) -> DType:
        assert isinstance(self.fold.body, Pack)
        return self.fold.body.items[self.index].dtype


# ---------------------------------------------------------------- builders

# What each operation means: numpy's ufunc of that name. The reference evaluator
# and the backend tests use these same tables.

NUMPY_BINARY: dict[BinaryOp, np.ufunc] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "truediv": np.true_divide,
    "floordiv": np.floor_divide,
    "mod": np.remainder,
    "min": np.minimum,
    "max": np.maximum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "lshift": np.left_shift,
    "rshift": np.right_shift,
}
NUMPY_COMPARE: dict[CompareOp, np.ufunc] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}
NUMPY_CALL: dict[CallFn, np.ufunc] = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "floor": np.floor,
    "ceil": np.ceil,
    "abs": np.abs,
    "exp2": np.exp2,
    "log2": np.log2,
    "round": np.rint,  # np.round(x) with no decimals: half to even, as rint
    "erf": np.exp,  # numpy has no erf: its result dtype is exp's (see `erf_values`)
    "atan2": np.arctan2,
    "pow": np.power,
}


def erf_values(x: np.ndarray):
    """The error function elementwise, in x's float dtype (math.erf, correctly rounded to
    float64 in practice, then rounded to x's dtype)."""
    import math

    arr = np.asarray(x)
    out = np.vectorize(math.erf, otypes=[np.float64])(arr.astype(np.float64))
    return out.astype(arr.dtype)[()] if arr.ndim == 0 else out.astype(arr.dtype)
# what numpy computes for an operation on two bools
_ON_BOOL: dict[BinaryOp, BinaryOp] = {"add": "or", "mul": "and", "min": "and", "max": "or"}
_SYMBOL = {
    "add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
    "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>",
}
_INTEGER_ONLY = ("and", "or", "xor", "lshift", "rshift")


def const(value, dtype: DType | None = None) -> Expr:
    """A constant; without dtype, a Python scalar takes numpy's default dtype."""
    if isinstance(value, Expr):
        return value if dtype is None else cast(value, dtype)
    if isinstance(value, np.generic):
        dtype = dtype or dt.as_dtype(value.dtype)
        value = value.item()
    if not isinstance(value, (bool, int, float)):
        raise DefinitionError(
            f"cannot use {value!r} ({type(value).__name__}) in a tdsl expression; "
            "valid operands are tdsl expressions, dims, sizes and Python int/float/bool"
        )
    if dtype is None:
        dtype = dt.bool_ if isinstance(value, bool) else dt.int64 if isinstance(value, int) else dt.float64
    if not dt.scalar_fits(value, dtype):
        raise DefinitionError(f"the constant {value!r} does not fit in {dtype!r}")
    if dtype.is_float:
        value = float(value)
    elif dtype.is_bool:
        value = bool(value)
    else:
        value = int(value)
    return Const(value, dtype)


def _operand(x) -> Expr | Scalar:
    if isinstance(x, Expr):
        return x
    if isinstance(x, np.generic):
        return const(x)
    if isinstance(x, (bool, int, float)):
        return x
    if hasattr(x, "dims") and hasattr(x, "dtype"):
        raise DefinitionError(
            f"tensor {getattr(x, 'name', x)!r} used without indices; index it, e.g. T[i, j]"
        )
    raise DefinitionError(
        f"cannot use {x!r} ({type(x).__name__}) in a tdsl expression; "
        "valid operands are tdsl expressions, dims, sizes and Python int/float/bool"
    )


def _probe(x):
    return x.dtype if isinstance(x, Expr) else x


def _coerce(x, dtype: DType) -> Expr:
    if isinstance(x, Expr):
        return x if x.dtype == dtype else Cast(x, dtype)
    return const(x, dtype)


def _check_scalar_range(a, b):
    for s, e in ((a, b), (b, a)):
        if not isinstance(s, Expr) and isinstance(e, Expr) and e.dtype.is_int:
            if isinstance(s, int) and not isinstance(s, bool) and not dt.scalar_fits(s, e.dtype):
                raise DefinitionError(
                    f"the Python integer {s} is out of range for {e.dtype!r} (in an expression "
                    f"with {e!r}); cast the expression to a wider dtype first"
                )


def common_dtype(a, b) -> DType:
    try:
        name = np.result_type(
            *(np.zeros(0, x.dtype.np) if isinstance(x, Expr) else x for x in (a, b))
        ).name
    except np.exceptions.DTypePromotionError:
        # ml_dtypes' bfloat16 with float16 or a wide int: numpy's ufuncs (a comparison,
        # a sum) still compute them, in the type their loop takes
        try:
            return dt.numpy_result(np.add, [_probe(a), _probe(b)])
        except DefinitionError:
            raise DefinitionError(
                f"numpy has no common dtype for {a!r} and {b!r}; cast an operand first "
                "(td.cast(x, td.float32))") from None
    except TypeError as e:
        raise DefinitionError(str(e)) from None
    return dt.as_dtype(name)


def binary(op: BinaryOp, a, b) -> Expr:
    a, b = _operand(a), _operand(b)
    _check_scalar_range(a, b)
    if op in _INTEGER_ONLY:
        floats = [x for x in (a, b) if isinstance(x, float) or isinstance(x, Expr) and x.dtype.is_float]
        if floats:
            raise DefinitionError(
                f"{a!r} {_SYMBOL[op]} {b!r}: {_SYMBOL[op]} needs integer or bool operands, but "
                f"{floats[0]!r} is {getattr(floats[0], 'dtype', 'a float')!r}; compare first "
                "(e.g. x > 0) or td.cast to an integer dtype")
    try:
        res = dt.numpy_result(NUMPY_BINARY[op], [_probe(a), _probe(b)])
    except DefinitionError as e:
        raise DefinitionError(f"{a!r} {_SYMBOL.get(op, op)} {b!r}: {e}") from None
    if op in _INTEGER_ONLY and res.is_float:
        raise DefinitionError(f"{op} needs integer or bool operands, got {res!r}")
    operand = res if op != "truediv" else res
    if res.is_bool:  # numpy: bool + bool is logical or, bool * bool is logical and
        op = _ON_BOOL.get(op, op)
    return Binary(op, _coerce(a, operand), _coerce(b, operand), res)


def compare(op: CompareOp, a, b) -> Expr:
    """`a op b` as numpy 2 compares: exactly, also where numpy's common dtype of the
    operands would lose precision.

    Two cases differ from comparing in the common dtype. A uint64 against a signed
    integer has float64 as its common dtype, but numpy compares the two exactly: so does
    tdsl, as the sign test and the comparison of the non-negative values it stands for.
    A Python integer outside an integer operand's dtype is compared as the number it is
    (numpy 2 does not refuse it there, as arithmetic does): the answer is the same for
    every value of the operand."""
    a, b = _operand(a), _operand(b)
    beyond = _scalar_beyond(op, a, b)
    if beyond is not None:
        return beyond
    c = common_dtype(a, b)
    if c.is_float and all(isinstance(x, Expr) and x.dtype.is_int for x in (a, b)):
        return _unsigned_signed_compare(op, a, b)
    return Compare(op, _coerce(a, c), _coerce(b, c))


_SWAPPED: dict[CompareOp, CompareOp] = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le",
                                        "eq": "eq", "ne": "ne"}


def _scalar_beyond(op: CompareOp, a, b) -> Expr | None:
    """The value of a comparison of an integer expression with a Python integer outside
    its dtype's range (a constant), or None when the comparison is not one."""
    for e, s, o in ((a, b, op), (b, a, _SWAPPED[op])):  # o: the op with e on the left
        if (isinstance(e, Expr) and e.dtype.is_int and isinstance(s, int)
                and not isinstance(s, bool) and not dt.scalar_fits(s, e.dtype)):
            below = s < np.iinfo(e.dtype.np).min  # else above the largest value
            holds = {"eq": False, "ne": True, "gt": below, "ge": below,
                     "lt": not below, "le": not below}[o]
            return const(holds)
    return None


def _unsigned_signed_compare(op: CompareOp, a: Expr, b: Expr) -> Expr:
    """`a op b` for a uint64 and a signed integer, exactly: a negative signed value is
    below every unsigned one; otherwise both compare as uint64."""
    if a.dtype.is_signed:
        return _unsigned_signed_compare(_SWAPPED[op], b, a)
    s = _coerce(b, dt.int64)
    negative = Compare("lt", s, const(0, dt.int64))
    same = Compare(op, _coerce(a, dt.uint64), Cast(s, dt.uint64))
    if op in ("gt", "ge", "ne"):
        return Binary("or", negative, same, dt.bool_)
    return Binary("and", Unary("invert", negative, dt.bool_), same, dt.bool_)


def unary(op: UnaryOp, a) -> Expr:
    a = _operand(a)
    if not isinstance(a, Expr):
        a = const(a)
    if op == "neg":
        if a.dtype.is_bool:
            raise DefinitionError(f"cannot negate the bool expression {a!r}; use ~ for logical not")
        return Unary("neg", a, a.dtype)
    if a.dtype.is_float:
        raise DefinitionError(f"~ needs an integer or bool operand, got {a.dtype!r} in {a!r}")
    return Unary("invert", a, a.dtype)


def call(fn: CallFn, *args) -> Expr:
    operands = [_operand(x) for x in args]
    ops = [x if isinstance(x, Expr) else const(x) for x in operands]
    try:  # Python scalars are weak (NEP 50): td.pow(x, 3.0) of a float32 x is float32
        res = dt.numpy_result(NUMPY_CALL[fn], [_probe(o) for o in operands])
    except DefinitionError as e:
        raise DefinitionError(f"td.{fn}({', '.join(map(repr, ops))}): {e}") from None
    if fn == "abs":
        return Call(fn, tuple(ops), res)
    return Call(fn, tuple(_coerce(o, res) for o in operands), res)


def power(a, b) -> Expr:
    """`a ** b` as numpy's power. On floats, libm's pow. On integers the exponent must be
    a Python int of at least 0 (numpy refuses negative integer powers): the power is
    multiplied out (square and multiply), wrapping as numpy's does."""
    a, b = _operand(a), _operand(b)
    ints = [x for x in (a, b) if isinstance(x, Expr) and not x.dtype.is_float
            or isinstance(x, (int, bool)) and not isinstance(x, float)]
    if len(ints) == 2:
        if isinstance(b, Expr) or isinstance(b, bool):
            raise DefinitionError(
                f"{a!r} ** {b!r}: an integer power needs a Python int exponent; cast to a "
                "float dtype for a computed one (td.cast(x, td.float64) ** e)")
        if b < 0:
            raise DefinitionError(f"{a!r} ** {b}: integers to negative integer powers are not "
                                  "allowed (as in numpy); cast to a float dtype first")
        base = a if isinstance(a, Expr) else const(a)
        res = dt.numpy_result(np.power, [base.dtype, b])
        base = _coerce(base, res)
        out: Expr = const(1, res)
        while b:
            if b & 1:
                out = base if isinstance(out, Const) and out.value == 1 else binary("mul", out, base)
            b >>= 1
            if b:
                base = binary("mul", base, base)
        return out
    return call("pow", a, b)


def cast(e, dtype) -> Expr:
    """Convert to `dtype` as numpy's astype does (ints wrap; floats round to nearest)."""
    d = dt.as_dtype(dtype)
    e = _operand(e)
    if not isinstance(e, Expr):
        return const(e, d) if dt.scalar_fits(e, d) else Cast(const(e), d)
    return e if e.dtype == d else Cast(e, d)


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


# ---------------------------------------------------------------- traversal


def children(e: Expr) -> tuple[Expr, ...]:
    match e:
        case Const() | Dim() | Size():
            return ()
        case Access(_, idx):
            return idx
        case Binary(_, a, b) | Compare(_, a, b):
            return (a, b)
        case Unary(_, a) | Cast(a):
            return (a,)
        case Call(_, args):
            return args
        case Select(c, a, b):
            return (c, a, b)
        case Checked(a, n):
            return (a, n)
        case Reduce(_, body, axes):
            return (body, *(x for ax in axes for x in (ax.lo, ax.hi)))
        case Pack(items):
            return items
        case Item(fold):
            return (fold,)
        case Acc():
            return ()
    raise TypeError(f"not an expression node: {e!r}")


def walk(e: Expr):
    """Pre-order iteration over an expression tree."""
    stack = [e]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(children(n)))


def rebuild(e: Expr, kids: tuple[Expr, ...]) -> Expr:
    match e:
        case Access(t, _):
            return Access(t, kids)
        case Binary(op, _, _, d):
            return Binary(op, kids[0], kids[1], d)
        case Compare(op, _, _):
            return Compare(op, kids[0], kids[1])
        case Unary(op, _, d):
            return Unary(op, kids[0], d)
        case Cast(_, d):
            return Cast(kids[0], d)
        case Call(fn, _, d):
            return Call(fn, kids, d)
        case Select(_, _, _, d):
            return Select(kids[0], kids[1], kids[2], d)
        case Checked():
            return Checked(kids[0], kids[1])
        case Reduce(op, _, axes, d):
            new_axes = tuple(
                Axis(ax.dim, kids[1 + 2 * n], kids[2 + 2 * n]) for n, ax in enumerate(axes)
            )
            return Reduce(op, kids[0], new_axes, d, e.name)
        case Pack(_, token):
            return Pack(kids, token)
        case Item(_, index):
            assert isinstance(kids[0], Reduce)
            return Item(kids[0], index)
    return e


def transform(e: Expr, fn) -> Expr:
    """Bottom-up rewrite: `fn(node)` returns a replacement or None to keep it."""
    kids = children(e)
    if kids:
        new = tuple(transform(k, fn) for k in kids)
        if any(n is not k for n, k in zip(new, kids)):
            e = rebuild(e, new)
    out = fn(e)
    return e if out is None else out


def substitute(e: Expr, mapping: dict) -> Expr:
    """Replace dims (or sizes) by expressions, keyed by the Dim object."""
    return transform(e, lambda n: mapping.get(n) if isinstance(n, (Dim, Size)) else None)


def structure(e: Expr, bound: Mapping[Dim, tuple[object, ...]] | None = None
               ) -> tuple[object, ...]:
    """A key equal for two expressions exactly when they compute the same thing: the same
    nodes, dtypes and constants, the same Size and tensor objects, the same free Dim
    objects, and reduction dims in the same places (whatever their objects)."""
    bound = bound or {}
    match e:
        case Const(v, d):
            return ("const", type(v).__name__, repr(v), d.name)
        case Dim():
            return bound.get(e, ("dim", id(e)))
        case Size():
            return ("size", id(e))
        case Access(t, idx):
            return ("access", id(t), *(structure(x, bound) for x in idx))
        case Reduce(op, body, axes, d):
            inner = dict(bound)
            bounds = []
            for ax in axes:
                bounds.append((structure(ax.lo, inner), structure(ax.hi, inner)))
                inner[ax.dim] = ("bound", len(inner))
            return ("reduce", op, d.name, tuple(bounds), structure(body, inner))
        case Acc(token, index, d):
            return ("acc", token, index, d.name)
        case Item(fold, index):
            return ("item", index, structure(fold, bound))
    head = getattr(e, "op", None) or getattr(e, "fn", None)
    return (type(e).__name__, head, e.dtype.name, *(structure(c, bound) for c in children(e)))


def free_dims(e: Expr) -> list[Dim]:
    seen: dict[Dim, None] = {}
    bound: set = set()
    for n in walk(e):
        if isinstance(n, Reduce):
            bound.update(ax.dim for ax in n.axes)
        if isinstance(n, Dim):
            seen[n] = None
    return [d for d in seen if d not in bound]


def sizes_in(e: Expr) -> list[Size]:
    return list(dict.fromkeys(n for n in walk(e) if isinstance(n, Size)))


def is_affine_index(e: Expr) -> bool:
    """True when `e` is quasi-affine in dims and sizes, or a min/max of such (what isl
    models exactly, as piecewise affine functions)."""
    match e:
        case Const(v, d):
            return d.is_int
        case Dim() | Size():
            return True
        case Cast(a, d):
            return d.is_int and d.bits >= 32 and is_affine_index(a)
        case Unary("neg", a):
            return is_affine_index(a)
        case Binary("add" | "sub" | "min" | "max", a, b):
            return is_affine_index(a) and is_affine_index(b)
        case Binary("mul", a, b):
            return (is_affine_index(a) and isinstance(b, Const)) or (
                isinstance(a, Const) and is_affine_index(b)
            )
        case Binary("floordiv" | "mod", a, Const(v)):
            return is_affine_index(a) and v > 0
    return False
