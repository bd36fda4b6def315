"""tdsl: a tensor DSL with named dimensions, a separate schedule language and
polyhedral lowering to C and LLVM.

    i, j, k = td.dims("i j k")
    C = td.compute("C", {i: N, j: 256}, td.sum(A[i, k] * B[k, j], over=k))
    f = td.build(td.schedule(C).tile(C, i=32, j=64).vectorize(C, "j_i"))
"""

from . import dtypes
from .api import build, lower
from .chunked import ChunkPlan, chunk_plan, map_blocks
from .compute import abs_ as abs
from .compute import (
    argmax,
    argmin,
    assume_in_range,
    clamp,
    compute,
    dim,
    dims,
    input,
    max,
    maximum,
    min,
    minimum,
    mirror,
    mirror_interior,
    pad,
    prod,
    reduce,
    size,
    sum,
    update,
    where,
    wrap,
)
from .compute.evaluate import evaluate
from .compute.expr import (
    atan2,
    cast,
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
    pow,
    round,
    rsqrt,
    saturating_cast,
    sin,
    sqrt,
    tanh,
)
from .compute.fixed_point import (
    requantize,
    rounding_mul_shift_right,
    rounding_shift_right,
    saturating_add,
    saturating_sub,
)
from .dtypes import (
    bfloat16,
    bool_,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)
from .emit import emit_c
from .errors import (
    ArgumentError,
    ChunkingError,
    ChunkingWarning,
    CompileError,
    DefinitionError,
    InternalError,
    MissingDependency,
    OutOfBoundsError,
    RuntimeFailure,
    ScheduleError,
    TdslError,
    TuningError,
    VectorizationWarning,
)
from .limits import set_compile_timeout
from .lower.picture import plot_iteration_space
from .runtime import Kernel, Timing, num_threads, set_num_threads, threads
from .schedule import (
    Atomic,
    CacheRead,
    CacheWrite,
    ComputeAt,
    ComputeInline,
    Fuse,
    FuseUpdates,
    Knob,
    Layout,
    Parallel,
    Reorder,
    RFactor,
    Schedule,
    Split,
    StoreAt,
    StoreNontemporal,
    StoreRoot,
    Template,
    Tile,
    Unroll,
    Vectorize,
    knob,
    schedule,
)
from .tune import Machine, TuneResult, autoschedule, autotemplate, explore, tune

__version__ = "0.1.0"


def __getattr__(name: str):
    """Names that are not here: a schedule primitive (`td.split`) is a method of
    td.Schedule, and the error says so instead of a bare AttributeError."""
    if not name.startswith("_") and callable(getattr(Schedule, name, None)):
        raise AttributeError(
            f"module 'tdsl' has no attribute {name!r}: {name} is a schedule primitive, a "
            f"method of td.Schedule: td.schedule(C).{name}(...); help(td.Schedule.{name})",
            name=name, obj=None)
    raise AttributeError(f"module 'tdsl' has no attribute {name!r}", name=name, obj=None)

__all__ = [
    "ArgumentError", "Atomic", "CacheRead", "CacheWrite", "ChunkPlan", "ChunkingError", "ChunkingWarning", "chunk_plan", "map_blocks", "CompileError", "ComputeAt", "ComputeInline", "DefinitionError", "Fuse", "FuseUpdates",
    "InternalError", "Kernel", "Knob", "Layout", "MissingDependency", "OutOfBoundsError", "Parallel", "Reorder", "RFactor", "RuntimeFailure", "Schedule", "ScheduleError", "Split",
    "Machine", "StoreAt", "StoreRoot", "StoreNontemporal", "TdslError", "TuneResult", "TuningError", "Template", "Tile", "Timing", "Unroll", "VectorizationWarning", "Vectorize", "abs", "argmax", "argmin", "atan2", "erf", "exp2", "isinf", "isnan", "log2", "pow", "round", "rsqrt", "saturating_cast", "saturating_add", "saturating_sub", "rounding_shift_right", "rounding_mul_shift_right", "requantize", "autoschedule", "autotemplate", "bool_", "build",
    "assume_in_range", "cast", "ceil", "clamp", "compute", "cos", "dim", "dims", "dtypes", "emit_c", "evaluate", "exp", "explore",
    "bfloat16", "float16", "float32", "float64", "floor", "input", "int8", "knob", "int16", "int32", "int64", "log", "lower",
    "max", "maximum", "min", "minimum", "num_threads", "set_num_threads", "threads", "mirror", "mirror_interior", "pad", "plot_iteration_space", "prod", "reduce", "schedule", "set_compile_timeout", "sin", "size", "sqrt", "sum",
    "tanh", "tune", "uint8", "uint16", "uint32", "uint64", "update", "where", "wrap",
]
