"""Names and extents: `td.dim`, `td.dims`, `td.size`, and the checks every definition
applies to the names, extents and bounds it is given (a valid, unreserved identifier;
an extent that is a positive int or an integer expression of sizes; dims of distinct
names in one place)."""

from __future__ import annotations

import keyword

from .. import dtypes as dt
from ..errors import DefinitionError
from .nodes import Access, Dim, Expr, Reduce, Size, const
from .traversal import walk

Extent = int | Size | Expr


def check_name(name, what: str) -> str:
    """`name`, when it is a Python identifier that is not reserved (no leading '_' or
    'tdsl'); DefinitionError naming `what` otherwise."""
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise DefinitionError(f"{what} name {name!r} is not valid: use a Python identifier")
    if name.startswith("_") or name.startswith("tdsl"):
        raise DefinitionError(f"{what} name {name!r} is reserved: names may not start with '_' or 'tdsl'")
    return name


def dims(names: str) -> tuple[Dim, ...]:
    """`i, j = td.dims("i j")`: several named dimensions."""
    if not isinstance(names, str) or not names.replace(",", " ").split():
        raise DefinitionError(
            f"td.dims takes the dims' names in one string, e.g. td.dims(\"y x\"), got {names!r}")
    return tuple(dim(n) for n in names.replace(",", " ").split())


def dim(name: str) -> Dim:
    """A named dimension: `x = td.dim("x")`."""
    return Dim(check_name(name, "dimension"))


def size(name: str) -> Size:
    """A symbolic extent, bound from argument shapes at call time."""
    return Size(check_name(name, "size"))


def checked_extent(extent, what: str) -> Expr:
    """Normalise an extent: a positive int, a Size, or an affine expression of sizes."""
    if isinstance(extent, bool) or not isinstance(extent, (int, Expr)):
        raise DefinitionError(
            f"{what}: extent {extent!r} must be an int, a td.size or an expression of sizes")
    if isinstance(extent, int):
        if extent < 1:
            raise DefinitionError(f"{what}: extent {extent} must be at least 1")
        return const(extent, dt.int64)
    bad = [n for n in walk(extent) if isinstance(n, (Dim, Access, Reduce))]
    if bad:
        raise DefinitionError(
            f"{what}: extent {extent!r} may only use sizes and constants, not {bad[0]!r}")
    if not extent.dtype.is_int:
        raise DefinitionError(
            f"{what}: extent {extent!r} has dtype {extent.dtype!r}; extents are integer "
            "expressions of sizes (use // for division)")
    return extent


def checked_bound(bound, what: str) -> Expr:
    """A bound of a range (an int or an expression) as an expression."""
    if isinstance(bound, bool) or not isinstance(bound, (int, Expr)):
        raise DefinitionError(f"{what}: bound {bound!r} must be an int or an affine expression")
    return const(bound, dt.int64) if isinstance(bound, int) else bound


def one_dim_hint(key: object) -> str:
    """For a 1-tuple of a dim: td.dims always returns a tuple, even of one dim."""
    if isinstance(key, tuple) and len(key) == 1 and isinstance(key[0], Dim):
        n = key[0].name
        return (f" but a tuple of one dim: td.dims returns a tuple even for one name; "
                f"write {n} = td.dim({n!r}) or ({n},) = td.dims({n!r})")
    return ""


def distinct_names(dims: list, what: str, where: str) -> None:
    """Loops and error messages name dims by name: two dims of one name in one place
    could not be told apart."""
    names = [d.name for d in dims]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is None:
        return
    same = [d for d in dims if d.name == twice]
    kind = ("the same dim is listed twice" if same[0] is same[1] else
            f"two different td.dim objects are both named {twice!r}")
    raise DefinitionError(
        f"{what}: {kind} in {where} ({', '.join(names)}); loops are named after dims, so "
        "each needs its own name, e.g. td.dims(\"y x\")")
