"""Row-major layout: a buffer's element count and the flat offset of an element.

Index arithmetic that folds constants as it builds, shared by the `flatten`
pass (offsets) and the targets (allocation sizes, workspace layouts), so that
every target computes sizes and offsets as the same expressions.
"""

from __future__ import annotations

from .. import dtypes as dt
from . import ir


def index_mul(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    """`a * b` on index expressions, constants folded and factors of 0 and 1 dropped."""
    ca, cb = ir.int_value(a), ir.int_value(b)
    if ca is not None and cb is not None:
        return ir.index_const(ca * cb)
    if ca == 0 or cb == 0:
        return ir.index_const(0)
    if cb == 1:
        return a
    if ca == 1:
        return b
    return ir.Binary("mul", a, b, dt.index)


def index_add(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    """`a + b` on index expressions, constants folded and terms of 0 dropped."""
    ca, cb = ir.int_value(a), ir.int_value(b)
    if ca is not None and cb is not None:
        return ir.index_const(ca + cb)
    if cb == 0:
        return a
    if ca == 0:
        return b
    return ir.Binary("add", a, b, dt.index)


def scaled(e: ir.Expr, factors: tuple[ir.Expr, ...]) -> ir.Expr:
    """`e` times the product of `factors`: the symbolic ones in order, then one
    constant (`i * M * 4` for factors (M, 4))."""
    scale = 1
    for f in factors:
        c = ir.int_value(f)
        if c is None:
            e = index_mul(e, f)
        else:
            scale *= c
    return index_mul(e, ir.index_const(scale))


def element_count(shape: tuple[ir.Expr, ...]) -> ir.Expr:
    """The product of `shape`, constant factors folded into one (last)."""
    return scaled(ir.index_const(1), shape)


def flat_index(buffer: ir.Buffer, indices: tuple[ir.Expr, ...]) -> ir.Expr:
    """Row-major offset: `i * M * 4 + j * 4 + k` for shape (N, M, 4)."""
    if len(indices) != len(buffer.shape):
        raise ValueError(
            f"buffer {buffer.name} has {len(buffer.shape)} dims but is indexed with "
            f"{len(indices)} indices"
        )
    total: ir.Expr = ir.index_const(0)
    for k, idx in enumerate(indices):
        total = index_add(total, scaled(idx, buffer.shape[k + 1 :]))
    return total
