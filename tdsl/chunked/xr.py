"""xarray: a kernel called with `xarray.DataArray`s, dims matched by name.

Each input's DataArray must have exactly the dims of the tdsl input, by name, in any
order; it is transposed to the input's order. The outputs are DataArrays over the
output stages' dims (by name, in the stages' order), named after the stages, with
every coordinate of the inputs whose dims all survive in an output with the same
lengths. DataArrays backed by dask arrays go through `td.map_blocks` (the result is
lazy, backed by dask too); numpy-backed ones through a plain call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..compute.definitions import Stage
from ..compute.pipeline import Pipeline
from ..errors import ArgumentError
from .deps import require


def is_foreign(v: object) -> bool:
    """Whether `v` is a dask array or an xarray object (what a plain call cannot take)."""
    top = type(v).__module__.split(".", 1)[0]
    return top in ("dask", "xarray")


def is_dataarray(v: object) -> bool:
    return type(v).__module__.split(".", 1)[0] == "xarray"


def unwrap(pipeline: Pipeline, arrays: Mapping[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """The arrays with each DataArray replaced by its data in the input's dim order,
    and the DataArrays given (for their coordinates)."""
    xr = require("xarray", "xarray")
    out: dict[str, Any] = {}
    given = []
    by_name = pipeline.by_name
    for name, v in arrays.items():
        if isinstance(v, xr.Dataset):
            raise ArgumentError(f"argument {name!r} is an xarray.Dataset; pass its variable, "
                                f"e.g. {name}=ds[{name!r}]")
        if not isinstance(v, xr.DataArray):
            out[name] = v
            continue
        t = by_name.get(name)
        if t is None or isinstance(t, Stage):
            out[name] = v  # the plain binding names the mistake
            continue
        want = [d.name for d in t.dims]
        have = [str(d) for d in v.dims]
        missing = [d for d in want if d not in have]
        extra = [d for d in have if d not in want]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"has no dim {', '.join(repr(d) for d in missing)}")
            if extra:
                parts.append(f"has dim {', '.join(repr(d) for d in extra)}, which {name} has not")
            raise ArgumentError(
                f"input {name!r}: the DataArray over ({', '.join(have)}) "
                f"{' and '.join(parts)}; {name} is over ({', '.join(want)}) (dims are matched "
                f"by name: rename with .rename({{old: new}}), add one with .expand_dims, drop "
                f"one with .isel)")
        v = v.transpose(*want)
        out[name] = v.data
        given.append(v)
    return out, given


def wrap(pipeline: Pipeline, result, given: list[Any]):
    """The output array(s) as DataArrays, with the coordinates that survive."""
    xr = require("xarray", "xarray")
    outs = result if isinstance(result, tuple) else (result,)
    wrapped = []
    for o, data in zip(pipeline.outputs, outs):
        dims = [d.name for d in o.dims]
        lengths = dict(zip(dims, data.shape))
        coords: dict[str, Any] = {}
        for g in given:
            for cname, c in g.coords.items():
                cdims = [str(d) for d in c.dims]
                if cname in coords or not all(d in lengths for d in cdims):
                    continue
                if all(c.sizes[d] == lengths[d] for d in cdims):
                    coords[str(cname)] = c
        wrapped.append(xr.DataArray(data, dims=dims, coords=coords, name=o.name))
    return tuple(wrapped) if len(wrapped) > 1 else wrapped[0]


def call(kernel, arrays: Mapping[str, Any], options: Mapping[str, Any] | None = None):
    """A kernel called with DataArrays or dask arrays among its arguments: DataArrays
    out for DataArrays in, dask arrays out for dask arrays in."""
    from .plan import map_blocks

    opts = dict(options or {})
    data, given = unwrap(kernel.pipeline, arrays)
    lazy = any(is_foreign(v) for v in data.values())
    if lazy:
        result = map_blocks(kernel, **opts, **data)
    else:
        result = kernel(**{k: np.ascontiguousarray(v) if isinstance(v, np.ndarray) else v
                           for k, v in data.items()})
    return wrap(kernel.pipeline, result, given) if given else result
