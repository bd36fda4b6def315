"""The algorithm's operations by name, and what each means: numpy's ufunc of that name.

The names are closed vocabularies (`Literal`s), the ones the expression nodes carry
(`Binary.op`, `Call.fn`, ...); the loop IR's vocabularies (`lower.ir`) extend them with
the operations lowering writes. The reference evaluator and the backend tests use the
tables below.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

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
