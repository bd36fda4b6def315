"""compute_inline: substitute inlined stages into their consumers' definitions."""

from __future__ import annotations

import operator
from collections.abc import Callable

from ... import dtypes as dt
from ...compute import expr as cx
from ...compute import periods
from ...compute.definitions import Stage, Update
from ...compute.pipeline import Pipeline
from ...compute.traversal import is_affine_index
from ...compute.views import BoundaryView
from ...errors import ScheduleError
from ...schedule.state import Schedulable


def _signed(i: cx.Expr) -> cx.Expr:
    """A uint64 index as an int64, beyond int64's range its largest value (as the kernels
    and td.evaluate read it); numpy would compute a uint64 next to an int in float64."""
    if i.dtype != dt.uint64:
        return i
    return cx.cast(cx.minimum(i, cx.const((1 << 63) - 1, dt.uint64)), dt.int64)


def _clamped(idx: tuple[cx.Expr, ...], shape: tuple[cx.Expr, ...]) -> tuple[cx.Expr, ...]:
    return tuple(cx.minimum(cx.maximum(_signed(i), 0), cx.cast(e, dt.int32) - 1)
                 for i, e in zip(idx, shape))


def _remapped(mode: str, idx: tuple[cx.Expr, ...], shape: tuple[cx.Expr, ...]
              ) -> tuple[cx.Expr, ...]:
    """The indices a mirror, mirror-interior or wrap view reads (`periods.anywhere`)."""
    return tuple(periods.anywhere(mode, _signed(i), cx.cast(e, dt.int32), _EXPR_INDEX)
                 for i, e in zip(idx, shape))


_EXPR_INDEX = periods.Arith(
    const=lambda k: k, add=operator.add, sub=operator.sub, mul=operator.mul,
    mod=operator.mod, max=cx.maximum, less=operator.lt, select=cx.where)


def _in_range(idx: tuple[cx.Expr, ...], shape: tuple[cx.Expr, ...]) -> cx.Expr:
    conds: list[cx.Expr] = [(_signed(i) >= 0) & (_signed(i) < cx.cast(e, dt.int32))
                            for i, e in zip(idx, shape)]
    out = conds[0]
    for c in conds[1:]:
        out = out & c
    return out


def _renamed_reductions(e: cx.Expr) -> cx.Expr:
    """`e` with every reduction over dims of its own (new Dim objects of the same names),
    so that a copy inlined into a consumer never shares a dim with the consumer's loops."""

    def fresh(n: cx.Expr) -> cx.Expr | None:
        if not isinstance(n, cx.Reduce):
            return None
        new = {ax.dim: cx.Dim(ax.dim.name) for ax in n.axes}
        axes = tuple(cx.Axis(new[ax.dim], cx.substitute(ax.lo, new), cx.substitute(ax.hi, new))
                     for ax in n.axes)
        return cx.Reduce(n.op, cx.substitute(n.body, new), axes, n.dtype)

    return cx.transform(e, fresh)


def _checked(n: cx.Expr, inlined: set[Stage]) -> cx.Expr | None:
    """A read of an inlined producer with its data-dependent indices, as written in the
    definition, marked to be checked: substituting an inner read can make such an index
    affine (s1[s1[0]] with s1 a constant reads s1[7]), never proven in range."""
    if not isinstance(n, cx.Access) or isinstance(n.tensor, BoundaryView) \
            or n.tensor not in inlined or all(is_affine_index(i) for i in n.indices):
        return None
    return cx.Access(n.tensor, tuple(
        i if is_affine_index(i) or isinstance(i, cx.Checked)
        else cx.Checked(i, cx.cast(e, dt.int32)) for i, e in zip(n.indices, n.tensor.shape)))


def _marked(e: cx.Expr, inlined: set[Stage]) -> cx.Expr:
    return cx.transform(e, lambda n: _checked(n, inlined))


def _reads(i: cx.Expr) -> bool:
    """Whether an index reads a tensor (its reads may have data-dependent indices)."""
    return any(isinstance(n, cx.Access) for n in cx.walk(i))


def _kept(v: cx.Expr, p: Stage, indices: tuple[cx.Expr, ...], definition: cx.Expr,
          keep: Callable[[cx.Expr], bool]) -> cx.Expr:
    """v, p's value at `indices`, with every index `keep` selects whose dim p's
    definition does not use kept in a select whose arms are both v: the substitution
    drops such an index, and with it the range checks of what it reads (a data-dependent
    index of a plain read, marked Checked; a read inside a view's index), which a kernel
    must still make (td.evaluate raises ArgumentError for them)."""
    used = set(cx.free_dims(definition))
    for d, i in zip(p.dims, indices):
        if d not in used and keep(i):  # checked all the same
            v = cx.Select(i >= 0, v, v, v.dtype)
    return v


def effective_exprs(pipeline: Pipeline, inlined: set[Stage]
                    ) -> tuple[dict[Schedulable, cx.Expr], dict[Update, cx.Access]]:
    """Each stage's definition and each update's value (first dict), and each update's
    target Access (second dict), with every inlined producer substituted in."""
    done: dict[Schedulable, cx.Expr] = {}

    def value_at(p: Stage, idx: tuple[cx.Expr, ...]) -> cx.Expr:
        mapping = {d: (i if i.dtype == dt.int32 else cx.Cast(i, dt.int32)) for d, i in zip(p.dims, idx)}
        v = cx.substitute(_renamed_reductions(done[p]), mapping)
        for n in cx.walk(v):
            if isinstance(n, cx.Reduce) and not all(
                    is_affine_index(b) for ax in n.axes for b in (ax.lo, ax.hi)):
                raise ScheduleError(
                    f"compute_inline({p.name}): {p.name} is read at a data-dependent index, and "
                    f"the bounds of its reduction over {', '.join(ax.dim.name for ax in n.axes)} "
                    f"depend on that index; compute {p.name} at root or inside a consumer's loop "
                    "instead")
        return v

    def rewrite(n: cx.Expr) -> cx.Expr | None:
        if not isinstance(n, cx.Access):
            return None
        t = n.tensor
        base = t.tensor if isinstance(t, BoundaryView) else t
        if base not in inlined:
            return None
        if not isinstance(t, BoundaryView):
            # a data-dependent index must be in range (affine ones are proven so): `_checked`
            # marked each (before the substitution, which can make one affine); the
            # producer's dims take its clamped value, and the kernel reports one out of range
            idx = n.indices
            return _kept(value_at(base, idx), base, idx, done[base],
                         lambda i: isinstance(i, cx.Checked))
        if t.mode in ("mirror", "mirror_interior", "wrap"):
            return _kept(value_at(base, _remapped(t.mode, n.indices, base.shape)), base,
                         n.indices, done[base], _reads)
        safe = _clamped(n.indices, base.shape)
        v = value_at(base, safe)
        if t.mode in ("clamp", "assume_in_range"):
            return _kept(v, base, n.indices, done[base], _reads)
        assert t.value is not None  # a pad view has its value
        return cx.Select(_in_range(n.indices, base.shape), v, t.value, v.dtype)

    for s in pipeline.stages:  # in dependency order, so producers are rewritten first
        done[s] = cx.transform(_marked(s.expr, inlined), rewrite)
    targets: dict[Update, cx.Access] = {}
    for s in pipeline.stages:
        for u in pipeline.updates_of(s):
            done[u] = cx.transform(_marked(u.value, inlined), rewrite)
            target = cx.transform(_marked(u.target(), inlined), rewrite)
            assert isinstance(target, cx.Access)  # a stage with updates is never inlined
            targets[u] = target
    return done, targets
