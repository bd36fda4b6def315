"""The algorithm's tensors, boundary views, reductions and pipelines, from the modules
that define them (`definitions`, `views`, `reductions`, `pipeline`, `naming`), under the
import path they shared before they were split: `from tdsl.compute.tensor import Stage`
keeps working. New code imports from the defining module."""

from .definitions import (
    ATOMIC_OPS,
    Input,
    Stage,
    Tensor,
    TensorLike,
    Update,
    check_inline_reductions,
    compute,
    input,
    lift_named,
    read_modify_write,
    tensors_read,
    update,
)
from .naming import Extent, dim, dims, size
from .pipeline import Pipeline, stage_reads
from .reductions import argmax, argmin, identity, max, min, prod, reduce, sum
from .traversal import is_affine_index
from .views import (
    REMAPPING_VIEWS,
    BoundaryView,
    assume_in_range,
    clamp,
    mirror,
    mirror_interior,
    pad,
    wrap,
)

__all__ = [
    "ATOMIC_OPS", "REMAPPING_VIEWS", "BoundaryView", "Extent", "Input", "Pipeline", "Stage",
    "Tensor", "TensorLike", "Update", "argmax", "argmin", "assume_in_range",
    "check_inline_reductions", "clamp", "compute", "dim", "dims", "identity", "input",
    "is_affine_index", "lift_named", "max", "min", "mirror", "mirror_interior", "pad", "prod",
    "read_modify_write", "reduce", "size", "stage_reads", "sum", "tensors_read", "update",
    "wrap",
]
