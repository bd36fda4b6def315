"""Element types and numpy's promotion rules.

The mapping to numpy dtypes is exact; result types of arithmetic are computed
by asking numpy itself (on empty arrays), so tdsl's expression types are, by
construction, numpy's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import DefinitionError, MissingDependency


@dataclass(frozen=True, slots=True)
class DType:
    """An element type: td.float32, td.float64, td.float16, td.bfloat16, td.int8 ..
    td.int64, td.uint8 .. td.uint64, td.bool_. `name` is numpy's name ("float32"),
    `kind` one of "f" float, "i" signed, "u" unsigned, "b" bool, `bits` the width; `.np`
    is the numpy dtype.

        A = td.input("A", {i: N}, td.float32)
        td.cast(A[i], td.int32)

    float16 and bfloat16 are storage types: each operation on them is computed in
    float32 and its result rounded to nearest even, as numpy (and ml_dtypes, which
    provides bfloat16 to numpy: pip install 'tdsl[bfloat16]') compute them.
    """

    name: str  # numpy name: "float32", "int8", "bool", ...
    kind: str  # "f" float, "i" signed, "u" unsigned, "b" bool
    bits: int

    @property
    def np(self) -> np.dtype:
        if self.name == "bfloat16":
            return np.dtype(_ml_dtypes().bfloat16)
        return np.dtype(self.name)

    @property
    def is_narrow_float(self) -> bool:
        """float16 or bfloat16: stored in 16 bits, computed in float32."""
        return self.kind == "f" and self.bits == 16

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    @property
    def is_signed(self) -> bool:
        return self.kind == "i"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    def __repr__(self) -> str:
        return f"td.{self.name if self.name != 'bool' else 'bool_'}"


float16 = DType("float16", "f", 16)
bfloat16 = DType("bfloat16", "f", 16)
float32 = DType("float32", "f", 32)
float64 = DType("float64", "f", 64)
int8 = DType("int8", "i", 8)
int16 = DType("int16", "i", 16)
int32 = DType("int32", "i", 32)
int64 = DType("int64", "i", 64)
uint8 = DType("uint8", "u", 8)
uint16 = DType("uint16", "u", 16)
uint32 = DType("uint32", "u", 32)
uint64 = DType("uint64", "u", 64)
bool_ = DType("bool", "b", 8)

# Loop-IR only: 64-bit index arithmetic (loop variables, sizes, offsets),
# which never wraps in practice and is emitted without wrapping emulation.
index = DType("index", "i", 64)
# Loop-IR only: the same index arithmetic in 32 bits, where the `index32` pass proves
# every index value fits (portable C for 32-bit cores, sizes checked at entry)
index32 = DType("index32", "i", 32)
INDEX_TYPES = (index, index32)

ALL = (float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool_)
_BY_NAME = {d.name: d for d in ALL}


def as_dtype(x) -> DType:
    """Normalise a tdsl dtype, numpy dtype or dtype name to a `DType`."""
    if isinstance(x, DType):
        if x is index:
            return int64
        if x is index32:
            return int32
        return x
    if isinstance(x, str) and x == "bfloat16":
        return bfloat16
    try:
        name = np.dtype(x).name if x is not None else None  # numpy reads None as float64
    except TypeError:
        name = None
    if name in _BY_NAME:
        return _BY_NAME[name]
    valid = ", ".join(repr(d) for d in ALL)
    raise DefinitionError(f"unsupported dtype {x!r}; valid dtypes are {valid}")


def _ml_dtypes():
    """ml_dtypes, which gives numpy its bfloat16 (an optional dependency)."""
    try:
        import ml_dtypes
    except ImportError:
        raise MissingDependency(
            "td.bfloat16 needs the package ml_dtypes, which gives numpy its bfloat16: "
            "pip install 'tdsl[bfloat16]'") from None
    return ml_dtypes


def _probe(a: DType) -> np.ndarray:
    return np.zeros(0, dtype=a.np)


def numpy_result(op, operands: list) -> DType:
    """The dtype numpy gives for `op` applied to operands.

    Each operand is a `DType` (an array of that dtype) or a Python scalar
    (weak, NEP 50). Raises DefinitionError when numpy's answer is not a
    tdsl dtype (complex, float128).
    """
    args = [_probe(o) if isinstance(o, DType) else o for o in operands]
    with np.errstate(all="ignore"):
        try:
            res = op(*args)
        except np.exceptions.DTypePromotionError:
            shown = ", ".join(repr(o) for o in operands)
            raise DefinitionError(
                f"numpy has no common dtype for {getattr(op, '__name__', op)}({shown}); cast "
                "an operand first (td.cast(x, td.float32))") from None
        except (OverflowError, TypeError) as e:
            raise DefinitionError(str(e)) from None
    name = np.asarray(res).dtype.name
    if name not in _BY_NAME:
        shown = ", ".join(repr(o) for o in operands)
        raise DefinitionError(
            f"numpy gives {name} for {getattr(op, '__name__', op)}({shown}), which tdsl does not "
            f"support; cast the operands first (td.cast(x, td.float32) or td.float64)"
        )
    return _BY_NAME[name]


def scalar_fits(value, dtype: DType) -> bool:
    if dtype.is_float or isinstance(value, bool):
        return True
    if isinstance(value, float):
        return False
    info = np.iinfo(dtype.name) if dtype.is_int else None
    return info is None or info.min <= value <= info.max


def astype(x, dtype: DType) -> np.ndarray:
    """numpy's `astype`, with one rule where numpy leaves it to the platform.

    A float converts to an integer type by truncation toward zero to int64, then
    wraps to the target width (exactly numpy's result for every value within
    int64's range, e.g. -1.5 -> uint8 255); NaN becomes 0 and values beyond
    int64's range saturate to its limits. Both backends convert the same way.
    """
    a = np.asarray(x)
    if a.dtype.name == "bfloat16":  # ml_dtypes' (kind "V"): exact in float32
        a = a.astype(np.float32)
    if not (a.dtype.kind == "f" and dtype.is_int):
        return a.astype(dtype.np)
    lo, hi = float(np.iinfo(np.int64).min), float(np.iinfo(np.int64).max)
    with np.errstate(invalid="ignore"):
        wide = np.where(np.isnan(a), 0, np.clip(a, lo, hi))
        wide = np.where(wide >= hi, np.iinfo(np.int64).max, wide.astype(np.int64))
    return wide.astype(np.int64).astype(dtype.np)
