"""Kernels over chunked data: dask arrays chunk by chunk, xarray objects by dim name.

    out = td.map_blocks(f, A=darr)         # a lazy dask array; halos inferred
    td.chunk_plan(f, A=darr).halos         # what bounds inference found
    f(A=dataarray)                         # xarray: dims matched by name

See docs/chunked.md for the semantics.
"""

from .plan import ChunkPlan, chunk_plan, map_blocks

__all__ = ["ChunkPlan", "chunk_plan", "map_blocks"]
