"""Kernels over chunked data: dask arrays chunk by chunk, xarray objects by dim name.

    out = td.map_blocks(f, A=darr)         # a lazy dask array; halos inferred
    td.chunk_plan(f, A=darr).halos         # what bounds inference found
    f(A=dataarray)                         # xarray: dims matched by name

See docs/chunked.md for the semantics.
"""

from ..runtime.kernel import FOREIGN
from .plan import ChunkPlan, chunk_plan, map_blocks
from .xr import call, is_foreign


def _foreign_call(kernel, arrays):
    if not any(is_foreign(v) for v in arrays.values()):
        return NotImplemented
    return call(kernel, arrays)


FOREIGN.append(_foreign_call)

__all__ = ["ChunkPlan", "chunk_plan", "map_blocks"]
