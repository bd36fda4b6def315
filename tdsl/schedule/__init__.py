"""The schedule language: immutable schedules of frozen primitive records."""

from .knob import Knob, knob
from .primitives import (
    Atomic,
    ComputeAt,
    ComputeInline,
    Fuse,
    FuseUpdates,
    Parallel,
    Primitive,
    Reorder,
    Split,
    StoreAt,
    StoreNontemporal,
    StoreRoot,
    Tile,
    Unroll,
    Vectorize,
)
from .schedule import Schedule, schedule
from .staging import CacheRead, CacheWrite, Layout, RFactor
from .state import LDim, LFuse, LInner, Loop, LoopExpr, LOuter, Placement, State
from .template import Template

__all__ = [
    "Atomic", "CacheRead", "CacheWrite", "Layout", "RFactor", "ComputeAt", "ComputeInline", "Fuse", "FuseUpdates", "LDim", "LFuse", "LInner", "LOuter", "Loop", "LoopExpr",
    "Parallel", "Placement", "Primitive", "Reorder", "Schedule", "Split", "State", "StoreAt", "StoreRoot", "StoreNontemporal",
    "Template", "Tile", "Unroll", "Vectorize", "Knob", "knob", "schedule",
]
