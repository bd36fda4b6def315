"""Access relations: which elements of a tensor each statement instance touches.

Affine indices map exactly; `td.clamp`/`td.pad` views map through the clamp (a
piecewise affine function); a data-dependent index may touch its whole axis.
`check_accesses` proves every affine read of a plain tensor in bounds, or
raises DefinitionError with one offending point.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import islpy as isl

from ...compute import expr as cx
from ...compute.definitions import Stage, Tensor
from ...compute.periods import ONE_PERIOD, Form
from ...compute.traversal import is_affine_index
from ...compute.views import BoundaryView
from ...errors import DefinitionError
from .affine import Vars, pwaff, space

if TYPE_CHECKING:
    from .nest import Statement

_REMAPPED = ("mirror", "mirror_interior", "wrap")
# whether `access_map(..., remap=True)` maps mirror and wrap reads within one period
_EXACT_REMAP: contextvars.ContextVar[bool] = contextvars.ContextVar("exact_remap", default=True)


@contextlib.contextmanager
def whole_axis_remaps() -> Iterator[None]:
    """Inside, `access_map` takes every mirror or wrap read to be anywhere along its
    axis, `remap` or not: the regions of a lowering whose exact ones were too costly."""
    token = _EXACT_REMAP.set(False)
    try:
        yield
    finally:
        _EXACT_REMAP.reset(token)


def reads_remapped_stage(exprs: Iterable[cx.Expr]) -> bool:
    """Whether any of `exprs` reads a stage (not an input) through a mirror or wrap
    view: only then does `remap` change a region."""
    return any(isinstance(n, cx.Access) and isinstance(n.tensor, BoundaryView)
               and n.tensor.mode in _REMAPPED and isinstance(n.tensor.tensor, Stage)
               for e in exprs for n in cx.walk(e))


def functions_map(vals: list[isl.PwAff], domain: isl.Set) -> isl.Map:
    """instance -> (vals[0](instance), vals[1](instance), ...), for instances in `domain`."""
    m = isl.Map.from_pw_aff(vals[0])
    for v in vals[1:]:
        m = m.flat_range_product(isl.Map.from_pw_aff(v))
    return m.intersect_domain(domain)


@dataclass(frozen=True, eq=False)
class Scoped:
    """An access and the axes of the reductions inside the expression that enclose it
    (outermost first): its instances range over their points too."""

    access: cx.Access
    axes: tuple[cx.Axis, ...] = ()

    def __repr__(self) -> str:
        return repr(self.access)


def access_map(stmt: Statement, acc: cx.Access | Scoped, remap: bool = False) -> isl.Map:
    """The elements of the accessed tensor that `acc` may read, per statement instance.

    An access inside a reduction of the expression reads at every point of that
    reduction: the reduction's dims are existentially quantified. A mirror or wrap
    view's read is anywhere along its axis, or with `remap` where it reads within one
    period (`_remapped`: tighter, at a cost in isl's time that only the regions a
    stage is computed over are worth)."""
    scoped = acc if isinstance(acc, Scoped) else Scoped(acc)
    own = set(stmt.dims)
    extra = [ax for ax in scoped.axes if ax.dim not in own]
    if not extra:
        return _map(scoped.access, stmt.vars, stmt.dim_names, stmt.domain, remap)
    base_names = stmt.isl_names
    sp = stmt.vars.space
    params = [str(sp.get_dim_name(isl.dim_type.param, k)) for k in range(sp.dim(isl.dim_type.param))]
    tuple_name = stmt.domain.get_tuple_name()
    ext = [f"tdsl_r{n}" for n in range(len(extra))]
    vs = Vars(space(tuple_name, base_names + ext, params))
    names = dict(stmt.dim_names)
    dom = stmt.domain.add_dims(isl.dim_type.set, len(ext))
    for n, name in enumerate(ext):
        dom = dom.set_dim_name(isl.dim_type.set, len(base_names) + n, name)
    if tuple_name:
        dom = dom.set_tuple_name(tuple_name)
    for ax, name in zip(extra, ext):
        x = vs[name]
        dom = dom & x.ge_set(pwaff(ax.lo, vs, names)) & x.lt_set(pwaff(ax.hi, vs, names))
        names[ax.dim] = name
    m = _map(scoped.access, vs, names, dom, remap)
    m = m.project_out(isl.dim_type.in_, len(base_names), len(ext))
    return m.set_tuple_name(isl.dim_type.in_, tuple_name) if tuple_name else m


def _map(acc: cx.Access, vs: Vars, names: Mapping[cx.Dim, str], domain: isl.Set,
         remap: bool = False) -> isl.Map:
    t = acc.tensor
    base: Tensor = t.tensor if isinstance(t, BoundaryView) else t
    m = None
    for ix, ext in zip(acc.indices, base.shape):
        e = pwaff(ext, vs, names)
        remaps = isinstance(t, BoundaryView) and t.mode in _REMAPPED
        if is_affine_index(ix) and not remaps:
            f = pwaff(ix, vs, names)
            if isinstance(t, BoundaryView):
                f = f.max(vs.const(0)).min(e - 1)
            part = isl.Map.from_pw_aff(f)
        elif is_affine_index(ix) and remap and _EXACT_REMAP.get():
            assert isinstance(t, BoundaryView)
            part = _remapped(t.mode, pwaff(ix, vs, names), e, vs)
        else:  # data-dependent, or reflected or wrapped: any element along this axis
            part = _anywhere(vs, e)
        m = part if m is None else m.flat_range_product(part)
    assert m is not None, "a tensor has at least one dim"
    return m.intersect_domain(domain).set_tuple_name(isl.dim_type.out, base.name)


def _anywhere(vs: Vars, n: isl.PwAff) -> isl.Map:
    """instance -> any index in [0, n)."""
    anyx = isl.Set("{ [o] : }").align_params(vs.space.params())
    lo = isl.Map.from_pw_aff(vs.const(0)).apply_range(isl.Map("{ [a] -> [b] : b >= a }"))
    hi = isl.Map.from_pw_aff(n - 1).apply_range(isl.Map("{ [a] -> [b] : b <= a }"))
    return (lo & hi).intersect_range(anyx)


def _remapped(mode: str, f: isl.PwAff, n: isl.PwAff, vs: Vars) -> isl.Map:
    """The index a mirror, mirror-interior or wrap view of extent `n` reads at affine
    index `f` (`compute.evaluate.remap`): exact within one period of the axis, where it
    is `f` reflected or shifted once (`compute.periods.ONE_PERIOD`); any index beyond
    (several reflections: a remainder by a size, which is not quasi-affine)."""
    zero = vs.const(0)

    def form(x: Form) -> isl.PwAff:
        return x.build(f, n, vs.const, lambda a, b: a + b, lambda a, b: a - b)

    part, covered = None, None
    pieces = [(f, f.ge_set(zero) & f.lt_set(n))] + [
        (form(p.value), f.ge_set(form(p.lo)) & f.lt_set(form(p.hi))) for p in ONE_PERIOD[mode]]
    for value, where in pieces:
        # a piece holds only where its value is an index (a check: every piece reads
        # within [0, n) where it applies)
        where = where & value.ge_set(zero) & value.lt_set(n)
        piece = isl.Map.from_pw_aff(value).intersect_domain(where)
        part = piece if part is None else part.union(piece)
        covered = where if covered is None else covered.union(where)
    assert part is not None and covered is not None
    return part.union(_anywhere(vs, n).subtract_domain(covered)).coalesce()


def reads(e: cx.Expr, tensor: Tensor | None = None) -> list[Scoped]:
    """The accesses of `tensor` (of any tensor, when None) in `e`, each with the axes of
    the reductions inside `e` whose loops enclose it in the code.

    A reduction inside another runs inside the step of the innermost enclosing reduction
    whose dims it uses, and before all of them when it uses none (`statement_writer`,
    `StatementWriter.reduction`): its reads happen even where an enclosing reduction it does
    not use has an empty range, so that reduction's axes are not among theirs."""
    out: list[Scoped] = []

    def visit(n: cx.Expr, scopes: tuple[tuple[cx.Axis, ...], ...]) -> None:
        if isinstance(n, cx.Access):
            t = n.tensor.tensor if isinstance(n.tensor, BoundaryView) else n.tensor
            if tensor is None or t is tensor:
                out.append(Scoped(n, tuple(ax for axes in scopes for ax in axes)))
        if isinstance(n, cx.Reduce):
            free = set(cx.free_dims(n))
            level = max((k + 1 for k, axes in enumerate(scopes)
                         if any(ax.dim in free for ax in axes)), default=0)
            visit(n.body, scopes[:level] + (n.axes,))
            return
        for c in cx.children(n):
            visit(c, scopes)

    visit(e, ())
    return out


def tensor_set(t: Tensor, params: list[str]) -> isl.Set:
    names = [d.name for d in t.dims]
    vs = Vars(space(t.name, names, params))
    return _declared_tensor(t, vs)


def _declared_tensor(t: Tensor, vs: Vars) -> isl.Set:
    s = vs.universe()
    for d, ext in zip(t.dims, t.shape):
        x = vs[d.name]
        s = s & x.ge_set(vs.const(0)) & x.lt_set(pwaff(ext, vs, {}))
    return s


def check_accesses(stmt_decl: Statement, expr: cx.Expr, context: isl.Set,
                   params: list[str]) -> None:
    """Every affine index of an access to a plain tensor (or through a
    `td.assume_in_range` view, whose promise covers data-dependent indices only) stays
    inside the tensor, for every size. An access that mixes affine and data-dependent
    indices is checked on its affine axes: the data-dependent ones map anywhere along
    their axes (`_anywhere`, in range by construction) and are tested when the kernel
    runs."""
    for r in reads(expr):
        n = r.access
        if isinstance(n.tensor, BoundaryView):
            if n.tensor.mode != "assume_in_range":
                continue
            n = cx.Access(n.tensor.tensor, n.indices)
            r = Scoped(n, r.axes)
        if not any(is_affine_index(i) for i in n.indices):
            continue
        assert isinstance(n.tensor, Tensor)  # a plain access, after the views above
        img = access_map(stmt_decl, r).intersect_params(context).range()
        bad = img - tensor_set(n.tensor, params)
        if not bad.is_empty():
            pt = bad.sample_point()
            where = _point_text(pt, stmt_decl, n)
            raise DefinitionError(
                f"{stmt_decl.stage.name} accesses {n!r} out of range{where}; indices must stay "
                f"within {n.tensor!r}; use td.clamp({n.tensor.name}) or td.pad({n.tensor.name}, 0) "
                "to read past the edges")


def _point_text(pt: isl.Point, stmt: Statement, acc: cx.Access) -> str:
    try:
        sp = pt.get_space()
        names = [d.name for d in acc.tensor.dims]  # the range of an access map has no names
        vals = [f"{names[k]}={pt.get_coordinate_val(isl.dim_type.set, k).to_python()}"
                for k in range(sp.dim(isl.dim_type.set))]
        pars = [f"{sp.get_dim_name(isl.dim_type.param, k)}={pt.get_coordinate_val(isl.dim_type.param, k).to_python()}"
                for k in range(sp.dim(isl.dim_type.param))]
        return f" (it reads {acc.tensor.name}[{', '.join(vals)}] when {', '.join(pars)})" if pars else \
            f" (it reads {acc.tensor.name}[{', '.join(vals)}])"
    except Exception:  # the point is only decoration for the message
        return ""
