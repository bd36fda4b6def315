"""Checking and binding the arguments of a pipeline call.

Shared by `td.evaluate` and compiled kernels. Everything a caller passes is
checked here before anything is computed; each mistake raises `ArgumentError`
naming the argument and saying what would be valid. Nothing is cast silently:
an array of the wrong dtype is refused, not converted.

Symbolic sizes are bound from any axis whose extent is exactly that size
(inputs first, then given outputs) or from an explicit integer (`N=5`); every
other extent is then evaluated with the bound sizes and checked.
"""

from __future__ import annotations

import ctypes
import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..dtypes import DType
from ..errors import ArgumentError, DefinitionError
from .definitions import Stage, Tensor
from .nodes import Binary, Call, Cast, Compare, Const, Expr, Select, Size, Unary
from .pipeline import Pipeline
from .traversal import sizes_in

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Bound:
    """Checked arguments: C-contiguous inputs of the exact dtype, the output
    arrays the caller gave (None where not given) and every size's value."""

    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray | None]
    sizes: dict[str, int]


# ---------------------------------------------------------------- extents


def _floordiv(a: int, b: int) -> int:
    return a // b if b else 0  # numpy's integer answer for a zero divisor


def _mod(a: int, b: int) -> int:
    return a % b if b else 0


_INT_OPS: dict[str, Callable[[int, int], int]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": _floordiv,
    "mod": _mod,
    "min": min,
    "max": max,
}
_INT_COMPARE = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}


def eval_extent(expr: Expr, sizes: dict[str, int]) -> int:
    """The value of an extent or bound expression of sizes and constants.

    Exact integer arithmetic (no wrapping); `//` and `%` floor, and give 0 for
    a zero divisor as numpy does. `sizes` maps size names to values.
    """
    match expr:
        case Const(v, d) if not d.is_float:
            return int(v)
        case Size(name):
            if name not in sizes:
                raise ArgumentError(f"size {name} is not bound; pass it explicitly, e.g. {name}=16")
            return int(sizes[name])
        case Cast(a, d) if d.is_int:
            return eval_extent(a, sizes)
        case Unary("neg", a):
            return -eval_extent(a, sizes)
        case Binary(op, a, b) if op in _INT_OPS:
            return _INT_OPS[op](eval_extent(a, sizes), eval_extent(b, sizes))
        case Call("abs", (a,)):
            return abs(eval_extent(a, sizes))
        case Select(Compare(op, x, y), a, b):
            cond = _INT_COMPARE[op](eval_extent(x, sizes), eval_extent(y, sizes))
            return eval_extent(a if cond else b, sizes)
    raise DefinitionError(
        f"extent {expr!r} is not an integer expression of sizes and constants "
        "(use + - * // %, td.minimum/td.maximum and integer constants)"
    )


# ---------------------------------------------------------------- arguments


def _np_name(d: DType) -> str:
    return "np.bool_" if d.is_bool else f"np.{d.name}"


def _describe(t: Tensor) -> str:
    shape = ", ".join(f"{d.name}: {e!r}" for d, e in zip(t.dims, t.shape, strict=True))
    return f"{t.dtype.name} array over {{{shape}}}"


def _check_names(pipeline: Pipeline, kwargs: dict, allow_outputs: bool) -> None:
    inputs = [t.name for t in pipeline.inputs]
    outputs = [s.name for s in pipeline.outputs]
    sizes = [s.name for s in pipeline.sizes]
    valid = inputs + (outputs if allow_outputs else []) + sizes
    parts = [f"inputs {', '.join(inputs)}" if inputs else "no inputs"]
    if allow_outputs:
        parts.append(f"outputs {', '.join(outputs)}")
    if sizes:
        parts.append(f"sizes {', '.join(sizes)}")
    listing = "; ".join(parts)
    for name in kwargs:
        if name in valid:
            continue
        if name in outputs:
            raise ArgumentError(
                f"output {name!r} cannot be passed here; outputs are allocated and returned. "
                f"Valid arguments: {listing}"
            )
        if isinstance(pipeline.by_name.get(name), Stage):
            raise ArgumentError(
                f"{name!r} is an intermediate stage, computed internally, not an argument. "
                f"Valid arguments: {listing}"
            )
        close = difflib.get_close_matches(str(name), valid, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ArgumentError(f"unknown argument {name!r}{hint}. Valid arguments: {listing}")


def _check_array(t: Tensor, a, role: str) -> np.ndarray:
    """Type, dtype and rank of one array argument (shape comes after sizes are bound)."""
    want = t.dtype
    if not isinstance(a, np.ndarray):
        raise ArgumentError(
            f"{role} {t.name!r} must be a numpy array ({_describe(t)}), got "
            f"{type(a).__name__}; convert it with np.asarray({t.name}, dtype={_np_name(want)})"
        )
    if a.dtype != want.np:
        fix = (
            f"convert it explicitly, e.g. {t.name}.astype({_np_name(want)}); tdsl does not cast silently"
            if role == "input"
            else f"pass an array of dtype {want.name}, e.g. np.empty(shape, {_np_name(want)})"
        )
        raise ArgumentError(f"{role} {t.name!r} has dtype {a.dtype} but must be {want.name}; {fix}")
    if a.ndim != t.ndim:
        names = ", ".join(d.name for d in t.dims)
        raise ArgumentError(
            f"{role} {t.name!r} has {a.ndim} dimension(s) (shape {a.shape}) but must have "
            f"{t.ndim}: ({names})"
        )
    return a


def _bind_sizes(pipeline: Pipeline, kwargs: dict, args: list) -> dict[str, int]:
    """Values of all sizes: given explicitly, or read from an axis of exactly that extent."""
    bound: dict[str, tuple[int, str]] = {}
    for s in pipeline.sizes:
        if s.name in kwargs:
            v = kwargs[s.name]
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise ArgumentError(
                    f"size {s.name} must be an int, got {v!r} ({type(v).__name__}); "
                    f"e.g. {s.name}=16"
                )
            bound[s.name] = (int(v), f"{s.name}={int(v)} was given")
    for role, t, a in args:
        for axis, (d, ext) in enumerate(zip(t.dims, t.shape, strict=True)):
            if not isinstance(ext, Size):
                continue
            n = a.shape[axis]
            here = f"{role} {t.name!r} has length {n} on axis {axis} (dim {d.name})"
            if ext.name not in bound:
                bound[ext.name] = (n, here)
            elif bound[ext.name][0] != n:
                raise ArgumentError(
                    f"inconsistent size {ext.name}: {bound[ext.name][1]}, but {here}; "
                    f"every axis of extent {ext.name} must have the same length"
                )
    for s in pipeline.sizes:
        if s.name not in bound:
            raise ArgumentError(
                f"size {s.name} cannot be bound from any argument's shape (it is used in "
                f"{_uses(pipeline, s)}); pass it explicitly, e.g. {s.name}=16"
            )
        v, where = bound[s.name]
        if v < 1:
            raise ArgumentError(f"size {s.name} must be at least 1, but {where}")
        if v > _INT32_MAX:
            raise ArgumentError(f"size {s.name} = {v} exceeds the int32 range of sizes ({where})")
    return {name: v for name, (v, _) in sorted(bound.items())}


def _bind_shapes(pipeline: Pipeline, kwargs: dict, args: list) -> dict[str, int]:
    """The sizes, bound from the arguments' shapes, once every shape is checked."""
    sizes = _bind_sizes(pipeline, kwargs, args)
    for role, t, a in args:
        _check_shape(role, t, a, sizes)
    return sizes


def _shapes_hint(pipeline: Pipeline, kwargs: dict, args: list) -> str:
    """What follows a shape error: every array's shape against its declaration, and,
    when one array with its axes reversed would fit, that it is probably transposed (a
    size read from the wrong axis of one array made another array look wrong)."""
    given = "; ".join(f"{t.name} {tuple(a.shape)} for [{', '.join(repr(e) for e in t.shape)}]"
                      for _, t, a in args)
    fits = []
    for n, (role, t, a) in enumerate(args):
        if a.ndim < 2:
            continue
        swapped = args[:n] + [(role, t, a.T)] + args[n + 1:]
        try:
            _bind_shapes(pipeline, kwargs, swapped)
        except ArgumentError:
            continue
        fits.append(f"{t.name} with its axes reversed, shape {tuple(a.T.shape)}, would fit: "
                    f"is {t.name} transposed?")
    return f". Shapes given: {given}" + (f". {fits[0]}" if len(fits) == 1 else "")


def _uses(pipeline: Pipeline, s: Size) -> str:
    uses = []
    for t in pipeline.tensors:
        for d, ext in zip(t.dims, t.shape, strict=True):
            if any(x is s for x in sizes_in(ext)):
                uses.append(f"{t.name} dim {d.name}: {ext!r}")
        if isinstance(t, Stage) and any(x is s for x in sizes_in(t.expr)):
            uses.append(f"the definition of {t.name}")
    return ", ".join(uses)


def _show_sizes(ext: Expr, sizes: dict[str, int]) -> str:
    used = sizes_in(ext)
    if isinstance(ext, (Const, Size)) or not used:
        return ""
    return " with " + ", ".join(f"{s.name} = {sizes[s.name]}" for s in used)


def _check_shape(role: str, t: Tensor, a: np.ndarray, sizes: dict[str, int]) -> None:
    for axis, (d, ext) in enumerate(zip(t.dims, t.shape, strict=True)):
        want = eval_extent(ext, sizes)
        if a.shape[axis] != want:
            shown = str(want) if isinstance(ext, Const) else f"{ext!r} = {want}"
            raise ArgumentError(
                f"{role} {t.name!r} has length {a.shape[axis]} on axis {axis} (dim {d.name}) "
                f"but must have {shown}{_show_sizes(ext, sizes)}; expected shape "
                f"{_shape(t, sizes)}"
            )


def _shape(t: Tensor, sizes: dict[str, int]) -> tuple[int, ...]:
    return tuple(eval_extent(e, sizes) for e in t.shape)


def _check_extents(pipeline: Pipeline, sizes: dict[str, int]) -> None:
    for t in pipeline.tensors:
        for d, ext in zip(t.dims, t.shape, strict=True):
            v = eval_extent(ext, sizes)
            if v < 1:
                raise ArgumentError(
                    f"{t.name!r} dim {d.name} has extent {ext!r} = {v}{_show_sizes(ext, sizes)}; "
                    "extents must be at least 1: pass larger arrays"
                )


def _check_output_layout(t: Tensor, a: np.ndarray) -> None:
    fresh = f"np.empty({a.shape}, {_np_name(t.dtype)})"
    if not a.flags.writeable:
        raise ArgumentError(
            f"output {t.name!r} is read-only; pass a writeable array, e.g. {fresh}, "
            "or leave it out to have it allocated and returned"
        )
    if not a.flags.c_contiguous:
        raise ArgumentError(
            f"output {t.name!r} is not C-contiguous (strides {a.strides}); pass a dense "
            f"row-major array, e.g. {fresh}, or leave it out to have it allocated and returned"
        )


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    if not np.may_share_memory(a, b):
        return False
    try:
        # numpy's stub allows only the flags -1 and 0, but any positive bound works
        return bool(np.shares_memory(a, b, max_work=10**6))  # type: ignore[arg-type]
    except np.exceptions.TooHardError:
        return True  # cannot tell cheaply: refuse rather than risk it


def _check_aliasing(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> None:
    names = list(outputs)
    for n, out in enumerate(names):
        for name, a in inputs.items():
            if _overlap(outputs[out], a):
                raise ArgumentError(
                    f"output {out!r} shares memory with input {name!r}; outputs must not "
                    f"overlap inputs: pass {name}.copy() or a separate output array"
                )
        for other in names[n + 1 :]:
            if _overlap(outputs[out], outputs[other]):
                raise ArgumentError(
                    f"outputs {out!r} and {other!r} share memory; pass separate arrays"
                )


def bind_arguments(pipeline: Pipeline, kwargs: dict, *, allow_outputs: bool = True) -> Bound:
    """Check the keyword arguments of a call of `pipeline` and bind its sizes.

    Names may be inputs (required), output stages (optional arrays to write
    into; None counts as not given) and sizes (explicit ints). Raises
    ArgumentError for the first mistake found, before anything is computed.
    """
    _check_names(pipeline, kwargs, allow_outputs)
    missing = [t for t in pipeline.inputs if t.name not in kwargs]
    if missing:
        shown = "; ".join(f"{t.name!r} ({_describe(t)})" for t in missing)
        call = ", ".join(f"{t.name}=..." for t in pipeline.inputs)
        raise ArgumentError(f"missing input(s) {shown}; pass every input by name: ({call})")
    inputs = {t.name: _check_array(t, kwargs[t.name], "input") for t in pipeline.inputs}
    outputs = {
        s.name: _check_array(s, kwargs[s.name], "output")
        for s in pipeline.outputs
        if kwargs.get(s.name) is not None
    }
    by_name = pipeline.by_name
    args = [("input", by_name[n], a) for n, a in inputs.items()]
    args += [("output", by_name[n], a) for n, a in outputs.items()]
    try:
        sizes = _bind_shapes(pipeline, kwargs, args)
    except ArgumentError as e:
        raise ArgumentError(f"{e}{_shapes_hint(pipeline, kwargs, args)}") from None
    _check_extents(pipeline, sizes)
    for name, a in outputs.items():
        _check_output_layout(by_name[name], a)
    _check_aliasing(inputs, outputs)
    return Bound(
        inputs={n: np.ascontiguousarray(a) for n, a in inputs.items()},
        outputs={s.name: outputs.get(s.name) for s in pipeline.outputs},
        sizes=sizes,
    )


def allocate_outputs(pipeline: Pipeline, bound: Bound, aligned_from: int = 0
                     ) -> dict[str, np.ndarray]:
    """The output arrays by name: those given, and new uninitialised ones for the rest
    (`allocate`: aligned when of `aligned_from` bytes or more)."""
    out = {}
    for s in pipeline.outputs:
        given = bound.outputs.get(s.name)
        out[s.name] = given if given is not None else allocate(
            s, bound.sizes, aligned_from=aligned_from)
    return out


# Arrays tdsl allocates start on a 64-byte boundary: a cache line, and an AVX-512
# vector, so that a kernel's vector loads and stores of a row do not straddle two lines
# (numpy's own allocations are 16-byte aligned).
ALIGNMENT = 64


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an `ALIGNMENT`-byte
    boundary (a view into a slightly larger byte buffer)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, np.uint8)
    # the address through ctypes.addressof: a third of what raw.ctypes.data costs
    start = -ctypes.addressof(ctypes.c_char.from_buffer(raw.data)) % ALIGNMENT
    return np.ndarray(shape, dtype, raw, start)


def new_array(shape: tuple[int, ...], dtype: np.dtype, aligned_from: int = 0) -> np.ndarray:
    """An uninitialised C-contiguous array, `ALIGNMENT`-byte aligned (`aligned_empty`)
    when it has `aligned_from` bytes or more, else as numpy allocates it (16-byte
    aligned: finding the address to align a small array costs more than a kernel's
    whole work on it)."""
    if aligned_from and math.prod(shape) * dtype.itemsize < aligned_from:
        return np.empty(shape, dtype)
    return aligned_empty(shape, dtype)


def allocate(s: Stage, sizes: dict[str, int], role: str = "output",
             aligned_from: int = 0) -> np.ndarray:
    """An uninitialised array for stage `s` (`new_array`: `ALIGNMENT`-byte aligned
    when of `aligned_from` bytes or more, 0: always); ArgumentError naming it when too
    large."""
    shape = _shape(s, sizes)
    try:
        return new_array(shape, s.dtype.np, aligned_from)
    except (ValueError, MemoryError, OverflowError):
        nbytes = int(np.prod(shape, dtype=object)) * s.dtype.np.itemsize
        raise ArgumentError(
            f"{role} {s.name!r} of shape {shape} ({s.dtype.name}, {nbytes:,} bytes) is too "
            f"large to allocate; use smaller sizes{_sizes_text(sizes)}") from None


def _sizes_text(sizes: dict[str, int]) -> str:
    return f" (now {', '.join(f'{k} = {v}' for k, v in sizes.items())})" if sizes else ""
