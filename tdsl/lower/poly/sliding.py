"""Sliding windows and storage folding (Halide's), for a stage stored outside the loop it
is computed in.

`store_at(P, C, outer)` with `compute_at(P, C, inner)` keeps P's buffer across the
iterations of the compute loop `inner` (and of the loops between). When the block of
P that consecutive iterations need overlaps, the buffer already holds the overlap:
each iteration computes only the part of its block the previous iteration did not
(the first iteration, of each iteration of the loops outside it, computes its whole
block). When the window slides along one dim of P, monotonically, the buffer keeps
only the rows in flight: its extent along that dim is the largest block (a constant),
and each row r lives at r mod that many (storage folding: a circular buffer). A
3x3 blur's horizontal pass computed per output row and stored at the root computes
each row once and keeps three.

Where the window cannot slide the schedule is refused: the compute loop (or a loop
between it and the store level) is parallel, so its iterations cannot take each
other's rows (the legality check refuses the buffer its threads would share); or the
window moves along more than one dim, or moves backwards.
Blocks that do not overlap (a pointwise producer, disjoint tiles) are computed as
before.

Guarantees: every point of P a reader needs is computed before it is read, in the
same iteration of every loop outside the compute loop and inside the store level, or
an earlier iteration of the compute loop; no point is computed twice in one
iteration of the store level (for the iterations of one run of the compute loop);
with folding, a row is overwritten only once every reader of it has run (the window's
low end only rises, and the buffer holds its largest extent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import islpy as isl

from ...compute.definitions import Stage
from ...errors import ScheduleError

if TYPE_CHECKING:
    from .nest import Band


@dataclass(frozen=True)
class Window:
    """How a stage's block moves with its compute loop: `dim`, the stage dim its bounds
    move along (None: the same block every iteration), and `fold`, the rows of that dim
    its buffer keeps (None: no folding; the buffer holds the store level's whole block)."""

    dim: int | None
    fold: int | None


def _previous(domain: isl.Set) -> isl.MultiAff:
    """The prefix of the previous iteration of the compute loop (the last prefix dim)."""
    sp = domain.get_space()
    ma = isl.MultiAff.identity(sp.map_from_set())
    last = domain.dim(isl.dim_type.set) - 1
    one = isl.Val.int_from_si(domain.get_ctx(), -1)
    return ma.set_aff(last, ma.get_aff(last).add_constant_val(one))


def window(stage: Stage, prefix: list[Band], depth: int, los: list[isl.PwAff],
           his: list[isl.PwAff], domain: isl.Set, context: isl.Set,
           what: str) -> Window | None:
    """The window of `stage`'s block (bounds `los`, `his` over the prefix values in
    `domain`, the last prefix dim the compute loop) stored `depth` loops deep, or None
    when consecutive blocks do not overlap (nothing to reuse). `what` names the
    schedule's primitives in errors."""
    ma = _previous(domain)
    prev = isl.Map.from_multi_aff(ma)
    both = prev.intersect_domain(domain).intersect_range(domain).domain()
    both = both.intersect_params(context)
    if both.is_empty():
        return None  # the compute loop runs once per iteration of the loops around it
    before = [(lo.pullback_multi_aff(ma), hi.pullback_multi_aff(ma)) for lo, hi in zip(los, his)]
    overlap = both
    for (lo, hi), (plo, phi) in zip(zip(los, his), before):
        overlap = overlap & lo.le_set(phi) & plo.le_set(hi)
    if overlap.is_empty():
        return None
    loop = prefix[-1]
    if any(b.kind == "parallel" for b in prefix[depth:]):
        # iterations on other threads cannot take each other's rows: no window, and the
        # legality check refuses the buffer the threads would share
        return None
    moving = []
    for k, ((lo, hi), (plo, phi)) in enumerate(zip(zip(los, his), before)):
        if not ((lo.ne_set(plo) | hi.ne_set(phi)) & both).is_empty():
            moving.append(k)
    if len(moving) > 1:
        dims = ", ".join(stage.dims[k].name for k in moving)
        raise ScheduleError(
            f"{what}: the block of {stage.name} that {loop.owner.name}'s loop "
            f"{loop.loop.name} needs moves along {dims} at once, so its window does not slide "
            f"monotonically along one dim; compute {stage.name} at a loop whose iterations move "
            f"it along one dim (a row loop), or store it at the compute level")
    if not moving:
        return Window(None, None)
    k = moving[0]
    (lo, hi), (plo, phi) = (los[k], his[k]), before[k]
    if not ((lo.lt_set(plo) | hi.lt_set(phi)) & both).is_empty():
        raise ScheduleError(
            f"{what}: the block of {stage.name} that {loop.owner.name}'s loop "
            f"{loop.loop.name} needs moves backwards along {stage.dims[k].name} at some "
            f"iteration, so its window does not slide monotonically; compute {stage.name} at a "
            f"loop that runs forward over {stage.dims[k].name}, or store it at the compute "
            f"level")
    extent = (hi - lo + 1).intersect_domain(domain.intersect_params(context))
    biggest = extent.max_val()
    fold = biggest.to_python() if biggest.is_int() else None
    return Window(k, fold)


def slid(block: isl.Set, m: int) -> isl.Set:
    """`block` (over prefix dims then the stage's dims, the last prefix dim the compute
    loop) without what the previous iteration of the compute loop computed."""
    per = isl.Map.from_domain(block).move_dims(
        isl.dim_type.out, 0, isl.dim_type.in_, m, block.dim(isl.dim_type.set) - m)
    where = per.domain()
    prev = isl.Map.from_multi_aff(_previous(where)).intersect_range(where)
    done = prev.apply_range(per)
    new = per.subtract(done)
    out = new.wrap().flatten()
    out = out.set_tuple_name(block.get_tuple_name()) if block.has_tuple_name() else out
    for k in range(block.dim(isl.dim_type.set)):
        name = block.get_dim_name(isl.dim_type.set, k)
        if name is not None:
            out = out.set_dim_name(isl.dim_type.set, k, name)
    return out.coalesce()
