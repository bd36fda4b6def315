"""Access relations: which elements of a tensor each statement instance touches.

Affine indices map exactly; `td.clamp`/`td.pad` views map through the clamp (a
piecewise affine function); a data-dependent index may touch its whole axis.
`check_accesses` proves every affine read of a plain tensor in bounds, or
raises DefinitionError with one offending point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import islpy as isl

from ...compute import expr as cx
from ...compute.tensor import BoundaryView, Tensor, is_affine_index
from ...errors import DefinitionError
from .affine import Vars, pwaff, space

if TYPE_CHECKING:
    from .model import Statement


def functions_map(vals: list[isl.PwAff], domain: isl.Set) -> isl.Map:
    """instance -> (vals[0](instance), vals[1](instance), ...), for instances in `domain`."""
    m = isl.Map.from_pw_aff(vals[0])
    for v in vals[1:]:
        m = m.flat_range_product(isl.Map.from_pw_aff(v))
    return m.intersect_domain(domain)


def access_map(stmt: Statement, acc: cx.Access) -> isl.Map:
    """The elements of the accessed tensor that `acc` may read, per statement instance."""
    t = acc.tensor
    base: Tensor = t.tensor if isinstance(t, BoundaryView) else t
    vs, names = stmt.vars, stmt.dim_names
    m = None
    for ix, ext in zip(acc.indices, base.shape):
        e = pwaff(ext, vs, names)
        if is_affine_index(ix):
            f = pwaff(ix, vs, names)
            if isinstance(t, BoundaryView):
                f = f.max(vs.const(0)).min(e - 1)
            part = isl.Map.from_pw_aff(f)
        else:  # data-dependent: any element along this axis
            anyx = isl.Set("{ [o] : }").align_params(vs.space.params())
            lo = isl.Map.from_pw_aff(vs.const(0)).apply_range(isl.Map("{ [a] -> [b] : b >= a }"))
            hi = isl.Map.from_pw_aff(e - 1).apply_range(isl.Map("{ [a] -> [b] : b <= a }"))
            part = (lo & hi).intersect_range(anyx)
        m = part if m is None else m.flat_range_product(part)
    assert m is not None, "a tensor has at least one dim"
    return m.intersect_domain(stmt.domain).set_tuple_name(isl.dim_type.out, base.name)


def reads(e: cx.Expr, tensor: Tensor) -> list[cx.Access]:
    out = []
    for n in cx.walk(e):
        if isinstance(n, cx.Access):
            t = n.tensor.tensor if isinstance(n.tensor, BoundaryView) else n.tensor
            if t is tensor:
                out.append(n)
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
    """Every affine read of a plain tensor stays inside it, for every size."""
    for n in cx.walk(expr):
        if not isinstance(n, cx.Access) or isinstance(n.tensor, BoundaryView):
            continue
        if not all(is_affine_index(i) for i in n.indices):
            continue
        img = access_map(stmt_decl, n).intersect_params(context).range()
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
