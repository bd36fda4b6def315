"""The schedule primitives: frozen records, each with a checked `apply` to a State.

The records are defined by what they change: the loops (`schedule.loops`), where a
stage is computed and stored (`schedule.placement`), how its stores are made
(`schedule.stores`); the restaging ones (`cache_write`, `cache_read`, `rfactor`,
`layout`) in `schedule.staging`. Their base and shared checks are in
`schedule.record`. This module lists them by record name (`PRIMITIVES`) and keeps
their old import path.
"""

from __future__ import annotations

from .loops import Fuse, Parallel, Reorder, Split, Tile, Unroll, Vectorize
from .placement import ComputeAt, ComputeInline, FuseUpdates, StoreAt, StoreRoot, same_domain
from .record import Primitive, StageRef
from .stores import Atomic, StoreNontemporal

PRIMITIVES: dict[str, type[Primitive]] = {
    c.__name__: c
    for c in (Split, Tile, Reorder, Fuse, Vectorize, Unroll, Parallel, Atomic, FuseUpdates,
              ComputeInline, ComputeAt, StoreAt, StoreRoot, StoreNontemporal)
}

__all__ = [
    "PRIMITIVES", "Atomic", "ComputeAt", "ComputeInline", "Fuse", "FuseUpdates", "Parallel",
    "Primitive", "Reorder", "Split", "StageRef", "StoreAt", "StoreNontemporal", "StoreRoot",
    "Tile", "Unroll", "Vectorize", "same_domain",
]
