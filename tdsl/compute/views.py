"""Boundary views: `td.clamp`, `td.pad`, `td.mirror`, `td.mirror_interior`, `td.wrap`
and `td.assume_in_range`, views of a tensor that may be indexed out of range (each says
what such an index reads)."""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import DefinitionError
from .definitions import Tensor, TensorLike
from .nodes import Cast, Const, _coerce, const

# the views that read another element of the tensor for an index out of range (`pad`
# reads its value instead)
REMAPPING_VIEWS = ("clamp", "mirror", "mirror_interior", "wrap")


class BoundaryView(TensorLike):
    """`td.clamp(t)`, `td.pad(t, value)`, `td.mirror(t)`, `td.mirror_interior(t)`,
    `td.wrap(t)`: a view of `t` that may be indexed out of range."""

    def __init__(self, tensor: TensorLike, mode: str, value=None):
        if isinstance(tensor, BoundaryView):
            tensor = tensor.tensor
        if not isinstance(tensor, Tensor):
            raise DefinitionError(f"td.{mode} needs a tensor (td.input or td.compute), got {tensor!r}")
        v = _coerce(value, tensor.dtype) if mode == "pad" else None
        if v is not None and not isinstance(v, Const):
            if isinstance(v, Cast) and isinstance(v.a, Const):
                v = const(v.a.value, tensor.dtype) if dt.scalar_fits(v.a.value, tensor.dtype) else v
            else:
                raise DefinitionError(f"td.pad({tensor.name}, value): value must be a constant")
        self.tensor: Tensor = tensor
        self.mode = mode
        self.name = tensor.name
        self.dtype = tensor.dtype
        self.value = v
        self._seal()

    @property
    def dims(self):
        return self.tensor.dims

    @property
    def shape(self):
        return self.tensor.shape

    def __repr__(self) -> str:
        extra = f", {self.value!r}" if self.mode == "pad" else ""
        return f"td.{self.mode}({self.tensor.name}{extra})"


def clamp(t: Tensor) -> BoundaryView:
    """A view of `t` whose out-of-range indices read the nearest edge element."""
    return BoundaryView(t, "clamp")


def mirror(t: Tensor) -> BoundaryView:
    """A view of `t` reflected at its edges, the edge element repeated: along an axis of
    n elements, index -1 reads 0, -2 reads 1, n reads n - 1 (numpy's pad mode
    "symmetric"; Halide's mirror_image). Far indices repeat with period 2n."""
    return BoundaryView(t, "mirror")


def mirror_interior(t: Tensor) -> BoundaryView:
    """A view of `t` reflected about its edge elements: index -1 reads 1, -2 reads 2, n
    reads n - 2 (numpy's pad mode "reflect"; Halide's mirror_interior). Far indices repeat
    with period 2n - 2; an axis of one element always reads it."""
    return BoundaryView(t, "mirror_interior")


def wrap(t: Tensor) -> BoundaryView:
    """A view of `t` repeated along every axis: index -1 reads n - 1, n reads 0 (numpy's
    pad mode "wrap"; Halide's repeat_image)."""
    return BoundaryView(t, "wrap")


def assume_in_range(t: Tensor) -> BoundaryView:
    """A view of `t` whose indices are promised to be in range: the answer to "this
    data-dependent index is always valid, do not test it".

    A kernel reads through it with no check: no `ArgumentError`, no test in the loop
    (which then stays branch-free and vectorizes). A broken promise reads the nearest
    edge element, as `td.clamp(t)` does, never memory outside `t`; `td.evaluate`, the
    reference, checks the promise and raises `ArgumentError`.

        lut = td.input("lut", {v: 16}, td.float32)
        out = td.compute("out", {i: N}, td.assume_in_range(lut)[codes[i] & 15])
    """
    return BoundaryView(t, "assume_in_range")


def pad(t: Tensor, value=0) -> BoundaryView:
    """A view of `t` whose out-of-range indices read `value`."""
    return BoundaryView(t, "pad", value)

