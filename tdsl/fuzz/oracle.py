"""Comparing a kernel's results with `td.evaluate`.

Integers and bools must be equal. Floats are compared with an absolute
tolerance of `base * tol * scale`, where scale is at least 1 and the largest
finite magnitude of any input or stage of the case (a difference of two large
intermediates may be small and carry their rounding error): `base` is 1e-5 for float32,
1e-12 for float64, 1e-3 for float16 and 8e-3 for bfloat16, and `tol` is the case's error growth (the generator
multiplies it by the length of every float reduction and by 4 for every math
call), so reassociated sums and libm-versus-numpy differences pass while a
wrong element does not. NaN must be NaN where numpy has NaN, and infinities
must match exactly, except in a case whose schedule reassociates a reduction
(`reassociates`): a float sum or product taken in another order may overflow
where the sequential one does not, or the other way round (a float16 product of
19 values in [-4, 4] is -inf in index order and -38048 over 7 partial products),
so there a non-finite value on either side passes.
"""

from __future__ import annotations

import json

import numpy as np

BASE = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 1e-5, "float64": 1e-12}


def is_float(d: np.dtype) -> bool:
    """Whether arrays of `d` hold floats (ml_dtypes' bfloat16 has numpy kind "V")."""
    return d.kind == "f" or d.name == "bfloat16"


def magnitude(arrays) -> float:
    """The largest finite magnitude in float arrays (1 at least)."""
    m = 1.0
    for a in arrays:
        if isinstance(a, np.ndarray) and is_float(a.dtype) and a.size:
            a = a.astype(np.float64)
            finite = a[np.isfinite(a)]
            m = max(m, float(np.max(np.abs(finite), initial=0.0)))
    return m


def primitives(schedule_json: str) -> list[dict]:
    """The primitive records of a schedule's JSON (`Schedule.to_json()`)."""
    return json.loads(schedule_json).get("primitives", [])


def reassociates(schedule_json: str) -> bool:
    """Whether a schedule (`Schedule.to_json()`) reorders the terms of a reduction:
    an rfactor, or a loop vectorized or parallelized with `reassociate=True`."""
    return any(p.get("type") == "RFactor" or p.get("reassociate")
               for p in primitives(schedule_json))


def parallel(schedule_json: str) -> bool:
    """Whether a schedule (`Schedule.to_json()`) parallelizes a loop."""
    return any(p.get("type") == "Parallel" for p in primitives(schedule_json))


def mismatch(got: np.ndarray, want: np.ndarray, tol: float, base=None,
             scale: float = 1.0, overflow: bool = False) -> str | None:
    """None when `got` matches `want`, else a description of the first differences.
    With `overflow`, a non-finite value on either side of a float matches anything."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"shape/dtype {got.shape} {got.dtype}, expected {want.shape} {want.dtype}"
    if is_float(want.dtype):
        g, w = got.astype(np.float64), want.astype(np.float64)
        finite = np.isfinite(w)
        scale = max(scale, magnitude([want]))
        atol = (base if base is not None else BASE[want.dtype.name]) * tol * scale
        with np.errstate(all="ignore"):
            same = (g == w) | (np.isnan(g) & np.isnan(w)) | (
                finite & np.isfinite(g) & (np.abs(g - w) <= atol))
            if overflow:
                same |= ~finite | ~np.isfinite(g)
    else:
        same = got == want
    if np.all(same):
        return None
    bad = np.argwhere(~same)
    first = [tuple(int(v) for v in p) for p in bad[:5]]
    return (f"{len(bad)} of {want.size} elements differ; at {first}: expected "
            f"{[want[p].item() for p in first]}, got {[got[p].item() for p in first]}")


def identical(a: np.ndarray, b: np.ndarray) -> bool:
    """Bitwise equality (NaN equals NaN of the same bits)."""
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def float_base(spec) -> float:
    """The tolerance base of a case: that of its least precise float type."""
    text = repr(spec.get("inputs")) + repr(spec.get("stages"))
    for name in ("bfloat16", "'float16'", "float32"):
        if name in text:
            return BASE[name.strip("'")]
    return BASE["float64"]


def check_results(outputs, got, want, tol, base, scale=1.0, overflow=False) -> str | None:
    """Compare tuples of results output by output; a message for the first mismatch."""
    for out, g, w in zip(outputs, got, want):
        msg = mismatch(g, w, tol, base, scale, overflow)
        if msg:
            return f"output {out.name}: {msg}"
    return None
