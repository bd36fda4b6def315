"""The algorithm's expression nodes, and the constructors that type them as numpy does
(`const`, `binary`, `compare`, `unary`, `call`, `power`, `cast`), which the nodes'
operators build with.

Nodes are frozen, slotted dataclasses compared by identity (`==` builds a
comparison node, so structural equality is spelled `structure(a) == structure(b)`,
`compute.traversal`). Every node
carries its numpy dtype, computed at construction by asking numpy, so the
arithmetic means exactly what numpy means: same-dtype integers wrap, Python
scalars are weak (NEP 50), `/` is true division, `//` and `%` floor.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar, dataclass_transform

import numpy as np

from .. import dtypes as dt
from ..dtypes import DType
from ..errors import DefinitionError
from .ops import (
    NUMPY_BINARY,
    NUMPY_CALL,
    NUMPY_COMPARE,
    BinaryOp,
    CallFn,
    CompareOp,
    ReduceOp,
    UnaryOp,
)

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

    def __add__(self, other):
        return binary("add", self, other)

    def __radd__(self, other):
        return binary("add", other, self)

    def __sub__(self, other):
        return binary("sub", self, other)

    def __rsub__(self, other):
        return binary("sub", other, self)

    def __mul__(self, other):
        return binary("mul", self, other)

    def __rmul__(self, other):
        return binary("mul", other, self)

    def __truediv__(self, other):
        return binary("truediv", self, other)

    def __rtruediv__(self, other):
        return binary("truediv", other, self)

    def __floordiv__(self, other):
        return binary("floordiv", self, other)

    def __rfloordiv__(self, other):
        return binary("floordiv", other, self)

    def __mod__(self, other):
        return binary("mod", self, other)

    def __rmod__(self, other):
        return binary("mod", other, self)

    def __and__(self, other):
        return binary("and", self, other)

    def __rand__(self, other):
        return binary("and", other, self)

    def __or__(self, other):
        return binary("or", self, other)

    def __ror__(self, other):
        return binary("or", other, self)

    def __xor__(self, other):
        return binary("xor", self, other)

    def __rxor__(self, other):
        return binary("xor", other, self)

    def __neg__(self):
        return unary("neg", self)

    def __pow__(self, other):
        return power(self, other)

    def __rpow__(self, other):
        return power(other, self)

    def __lshift__(self, other):
        return binary("lshift", self, other)

    def __rlshift__(self, other):
        return binary("lshift", other, self)

    def __rshift__(self, other):
        return binary("rshift", self, other)

    def __rrshift__(self, other):
        return binary("rshift", other, self)

    def __pos__(self):
        return self

    def __abs__(self):
        return call("abs", self)

    def __invert__(self):
        return unary("invert", self)

    def __eq__(self, other):  # type: ignore[override]
        return compare("eq", self, other)

    def __ne__(self, other):  # type: ignore[override]
        return compare("ne", self, other)

    def __lt__(self, other):
        return compare("lt", self, other)

    def __le__(self, other):
        return compare("le", self, other)

    def __gt__(self, other):
        return compare("gt", self, other)

    def __ge__(self, other):
        return compare("ge", self, other)

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
