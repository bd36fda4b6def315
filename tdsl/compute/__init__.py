"""The algorithm language: named dims, tensors, stages and index expressions."""

from .definitions import Input, Stage, Tensor, Update, compute, input, update
from .fixed_point import (
    requantize,
    rounding_mul_shift_right,
    rounding_shift_right,
    saturating_add,
    saturating_sub,
)
from .functions import (
    abs_,
    atan2,
    ceil,
    cos,
    erf,
    exp,
    exp2,
    floor,
    isinf,
    isnan,
    log,
    log2,
    maximum,
    minimum,
    pow,
    round,
    rsqrt,
    saturating_cast,
    sin,
    sqrt,
    tanh,
    where,
)
from .naming import dim, dims, size
from .nodes import (
    Access,
    Axis,
    Binary,
    Call,
    Cast,
    Compare,
    Const,
    Dim,
    Expr,
    Reduce,
    Select,
    Size,
    Unary,
    cast,
    const,
)
from .pipeline import Pipeline
from .reductions import argmax, argmin, identity, max, min, prod, reduce, sum
from .views import BoundaryView, assume_in_range, clamp, mirror, mirror_interior, pad, wrap

__all__ = [
    "Access", "Axis", "Binary", "BoundaryView", "Call", "Cast", "Compare", "Const", "Dim", "Expr",
    "Input", "Pipeline", "Reduce", "Select", "Size", "Stage", "Tensor", "Unary", "Update", "abs_", "argmax", "argmin", "cast",
    "assume_in_range", "ceil", "clamp", "compute", "const", "cos", "dim", "dims", "exp", "floor", "identity", "input",
    "log", "max", "maximum", "min", "minimum", "mirror", "mirror_interior", "pad", "prod", "reduce", "sin", "size", "sqrt", "sum", "tanh",
    "update", "where", "atan2", "erf", "exp2", "isinf", "isnan", "log2", "pow", "round", "rsqrt", "saturating_cast", "wrap",
    "requantize", "rounding_mul_shift_right", "rounding_shift_right", "saturating_add",
    "saturating_sub",
]
