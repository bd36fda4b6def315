"""How a stage's stores are made: `atomic` (an update's read-modify-writes, atomic so
its loops may run in parallel) and `store_nontemporal` (streaming stores of an output)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..compute import Update
from ..compute.definitions import read_modify_write
from .record import Primitive, StageRef, resolve_stage, schedule_error
from .state import State


@dataclass(frozen=True)
class Atomic(Primitive):
    """Run an update as atomic read-modify-writes, so its loops may run in parallel
    (and in any order) although two iterations update the same element.

    For an update `y[idx] = y[idx] op e` (op one of + - * min max & | ^ in y's dtype,
    `e` and `idx` not reading y), e.g. a histogram:

    Before:                                after atomic(hist.u0), parallel(hist.u0, "y"):
        for y in 0 .. 480:                     for y in 0 .. 480:  # parallel
          for x in 0 .. 640:                     for x in 0 .. 640:
            hist[img[y, x]] =                      atomic hist[img[y, x]] =
                hist[img[y, x]] + 1                    hist[img[y, x]] + 1

    Each element's updates then apply in no fixed order: exact for integers, min
    and max; float sums and products round as in another order. Atomic updates run
    in parallel loops, not as vector lanes. Where lanes or threads often hit one
    element, `rfactor` of the update (private partial results, merged after) is
    faster.
    """

    stage: StageRef
    method: ClassVar[str] = "atomic"

    def apply(self, state: State) -> None:
        u = resolve_stage(self, state, self.stage)
        if not isinstance(u, Update):
            raise schedule_error(self, f"{u.name} is a stage; atomic applies to an update of one "
                                       f"(td.update), e.g. {u.name}.u0")
        if read_modify_write(u.value, u.target()) is None:
            t = u.target()
            raise schedule_error(self, f"the value of {u.name} is {u.value!r}; an atomic update "
                                       f"reads its target only as `{t!r} op e` with op one of + - * "
                                       f"min max & | ^ in {u.dtype!r} and e not reading "
                                       f"{u.stage.name} (cast e to {u.dtype!r} if it has another "
                                       "dtype)")
        state.atomic.add(u)


@dataclass(frozen=True)
class StoreNontemporal(Primitive):
    """Write an output of the pipeline past the caches (non-temporal stores).

    The loop nest does not change; the vector stores of a vectorized loop that
    write whole runs of the output's elements (contiguous stores) become streaming
    stores, which go to memory without reading the lines they fill into the cache
    first. An output written once, larger than the last-level cache and not read
    back soon, then costs one memory transfer per line instead of two (a read for
    ownership, then the write back): a softmax or a layer norm of a 64 MB matrix,
    whose output is the only traffic besides its input. Where the output is read
    again soon (by the caller, or a consumer in the same pipeline) the read comes
    from memory, which is slower.

    Before (vectorize(out, "x_i")):            after store_nontemporal(out):
        for y in 0 .. 4096:                        for y in 0 .. 4096:
          for x_o in 0 .. 512:                       for x_o in 0 .. 512:
            for x_i in 0 .. 8:  # vectorized           for x_i in 0 .. 8:  # vectorized
              out[y, 8 * x_o + x_i] = ...                nontemporal out[y, 8 * x_o + x_i] = ...

    Values are the same. Only contiguous vector stores stream; scalar, strided,
    scattered and masked stores (a tail chunk) are ordinary ones, and so is a store
    whose address is not aligned to 16 bytes (checked when it runs). On LLVM every
    target that has streaming stores uses them; the C backend uses them on x86
    (SSE) and writes ordinary stores elsewhere. A kernel with streaming stores
    fences after them, so threads and the caller see every element.
    """

    stage: StageRef
    method: ClassVar[str] = "store_nontemporal"

    def apply(self, state: State) -> None:
        stage = resolve_stage(self, state, self.stage)
        outputs = state.pipeline.outputs
        if isinstance(stage, Update) or stage not in outputs:
            valid = ", ".join(o.name for o in outputs)
            what = "an update" if isinstance(stage, Update) else "not an output of the pipeline"
            raise schedule_error(self, f"{stage.name} is {what}; streaming stores apply to the "
                                       f"buffers of the pipeline's outputs: {valid}")
        state.nontemporal.add(stage.name)
