"""Box hulls of isl relations: per output dim, the least and greatest value a relation
maps each input to, proven to contain its image (`box_hull`), and the relation between
such bounds (`between`)."""

from __future__ import annotations

import islpy as isl


def to_map(domain: isl.Set, n_in: int) -> isl.Map:
    """`domain` as a map from its first `n_in` dims to the others."""
    n = domain.dim(isl.dim_type.set)
    return isl.Map.from_domain(domain).move_dims(isl.dim_type.out, 0, isl.dim_type.in_, n_in,
                                                 n - n_in)


def box_hull(rel: isl.Map) -> tuple[list[isl.PwAff], list[isl.PwAff]]:
    """Per output dim, the least and greatest value `rel` maps each input to: the box hull
    of the image of every input, proven to contain it.

    isl's parametric lexmin/lexmax has been seen to return a single value of a strided
    set (the rows of one residue class read by a fused loop) when the relation carries
    redundant constraints on its divs; every answer is therefore checked against `rel`
    and, failing that, recomputed without the redundancies, then as the hull over all
    inputs (larger, never smaller)."""
    plain = rel.reset_tuple_id(isl.dim_type.in_).reset_tuple_id(isl.dim_type.out)
    for attempt in (rel, rel.remove_redundancies(),
                    isl.Map.from_domain_and_range(rel.domain(), rel.range())):
        los, his = _box_bounds(attempt)
        if plain.is_subset(between(los, his)):
            return los, his
    raise AssertionError(f"no box found that contains {rel}")


def _box_bounds(rel: isl.Map) -> tuple[list[isl.PwAff], list[isl.PwAff]]:
    n = rel.dim(isl.dim_type.out)
    los, his = [], []
    for k in range(n):
        rk = rel.project_out(isl.dim_type.out, k + 1, n - k - 1).project_out(isl.dim_type.out, 0, k)
        los.append(rk.lexmin_pw_multi_aff().get_pw_aff(0).coalesce())
        his.append(rk.lexmax_pw_multi_aff().get_pw_aff(0).coalesce())
    return los, his


def between(los: list[isl.PwAff], his: list[isl.PwAff]) -> isl.Map:
    """The map from an input to the points of the box [los, his] (per dim) at it."""
    ge = isl.Map("{ [a] -> [b] : b >= a }")
    le = isl.Map("{ [a] -> [b] : b <= a }")
    m = None
    for lo, hi in zip(los, his):
        part = isl.Map.from_pw_aff(lo).apply_range(ge) & isl.Map.from_pw_aff(hi).apply_range(le)
        m = part if m is None else m.flat_range_product(part)
    assert m is not None, "a box has at least one dim"
    return m


def has_divs(function: isl.PwAff) -> bool:
    """Whether a piecewise affine function divides (floor, mod) anywhere."""
    for piece, aff in function.get_pieces():
        if aff.dim(isl.dim_type.div) or any(b.dim(isl.dim_type.div)
                                            for b in piece.get_basic_sets()):
            return True
    return False
