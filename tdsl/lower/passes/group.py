"""The group pass: small-integer products taken in groups.

Consecutive vectorized loops that add small-integer products to the same int32
lanes, one for each element of a packed operand's groups of 2 or 4
(`grouped_products`), are what a small-integer matrix product unrolls to. This pass
makes each such run of loops, outside simd loops (`simd_regions`), one
`ir.GroupedProducts` statement holding the loops as its fallback: both targets do each
16 lanes of it as one multiply-add where the CPU has it (x86 AVX-512BW's `vpmaddwd` and
VNNI's `vpdpwssd` for int16 pairs, VNNI's `vpdpbusd` for quads of an unsigned and a
signed byte) and run the loops where it does not. Portable C has its own form of the
idiom (the dsp pass); loops storing an output stored nontemporal are left as they are.
"""

from __future__ import annotations

from ... import dtypes as dt
from .. import ir
from ..build import le
from ..rewrite import expr_vars, walk_exprs
from ..vectors import MAX_LANES, index_at, index_step, loop_extent
from .simd_regions import OutsideSimd
from .simplify import constant_difference

# `grouped_products` takes loops of a multiple of this many lanes: one 512-bit vector of
# int32 sums
GROUP_LANES = 16
# (group size, the uniform operand's types, the vector operand's types): int16 pairs
# (x86's vpmaddwd, VNNI's vpdpwssd) and quads of an unsigned and a signed byte, either
# way round (VNNI's vpdpbusd); every product and every sum of a group is exact in int32
# but for a pair of -32768 * -32768, which wraps as the int32 sum does
GROUPS = ((4, ("uint8",), ("int8",)), (4, ("int8",), ("uint8",)),
          (2, ("int8", "uint8", "int16"), ("int16",)))


def _in_a_row(loads: list[ir.Load]) -> bool:
    """Whether the t-th load reads the same flat buffer as the first, at its index + t."""
    first = loads[0]
    return all(x.buffer == first.buffer and len(x.indices) == len(first.indices) == 1
               and constant_difference(x.indices[0], first.indices[0]) == t
               for t, x in enumerate(loads))


def _product_step(s: ir.Stmt) -> tuple[ir.For, ir.Store, ir.Expr, ir.Load] | None:
    """(loop, store, x, b-load) when `s` is a vectorized loop holding only
    `acc[i] = acc[i] + int32(x) * int32(b[j])` (either operand order) with acc int32,
    x, b of integer types narrower than 32 bits and x the same in every lane."""
    if not (isinstance(s, ir.For) and s.kind is ir.ForKind.VECTORIZED and s.reassociate is None):
        return None
    st = s.body
    if not (isinstance(st, ir.Store) and not st.atomic and st.buffer.dtype == dt.int32
            and len(st.indices) == 1):
        return None
    v = st.value
    if not (isinstance(v, ir.Binary) and v.op == "add" and v.dtype == dt.int32):
        return None
    narrow = ("int8", "uint8", "int16")
    for old, prod in ((v.a, v.b), (v.b, v.a)):
        if not (isinstance(old, ir.Load) and old.buffer == st.buffer and old.indices == st.indices):
            continue
        if not (isinstance(prod, ir.Binary) and prod.op == "mul" and prod.dtype == dt.int32):
            continue
        for x, y in ((prod.a, prod.b), (prod.b, prod.a)):
            if not (isinstance(x, ir.Cast) and isinstance(y, ir.Cast)):
                continue
            load = y.a
            if (isinstance(load, ir.Load) and load.dtype.name in narrow and len(load.indices) == 1
                    and x.a.dtype.name in narrow and s.var not in expr_vars(x.a)):
                return s, st, x.a, load
    return None


def grouped_products(stmts: tuple[ir.Stmt, ...], k: int) -> ir.GroupedProducts | None:
    """The statements of a block from `stmts[k]` on as an `ir.GroupedProducts` (the largest
    group of `GROUPS` that fits), or None.

    Besides the form: the n loops run over the same range of a multiple of
    GROUP_LANES lanes, at most MAX_LANES (a constant range, or one cut short at its
    end: the group then has a guard, see `ir.GroupedProducts`); the n stores have the same index, which
    advances by 1 with the loop; b is another buffer than acc, read at j + t by the t-th loop (j
    advancing by n); each x is the same in every lane and reads nothing of acc (so
    it is what it was before the first loop stored). Each lane then updates its own
    element of acc, and doing a lane's n products together gives the same int32
    sums, which wrap alike in any order."""
    steps: list[tuple[ir.For, ir.Store, ir.Expr, ir.Load]] = []
    for s in stmts[k:k + 4]:
        step = _product_step(s)
        if step is None:
            break
        steps.append(step)
    for n, xtypes, btypes in GROUPS:
        if len(steps) >= n:
            found = _group(steps[:n], xtypes, btypes)
            if found is not None:
                return found
    return None


def _group(steps: list[tuple[ir.For, ir.Store, ir.Expr, ir.Load]], xtypes: tuple[str, ...],
           btypes: tuple[str, ...]) -> ir.GroupedProducts | None:
    n = len(steps)
    loop, first, _, b0 = steps[0]
    acc, var = first.buffer, loop.var
    lanes, guard = _full_lanes(loop)
    if lanes is None or not 0 < lanes <= MAX_LANES or lanes % GROUP_LANES:
        return None
    if b0.buffer.name == acc.name or b0.dtype.name not in btypes:
        return None
    j0 = b0.indices[0]
    if index_step(first.indices[0], var) != 1 or index_step(j0, var) != n:
        return None
    for lt, st, x, _ in steps:
        if (lt.var, lt.start, lt.end) != (var, loop.start, loop.end):
            return None
        if st.buffer != acc or st.indices != first.indices:
            return None
        if x.dtype.name not in xtypes:  # (x is the same in every lane: _product_step)
            return None
        if any(isinstance(e, ir.Load) and e.buffer.name == acc.name for e in walk_exprs(x)):
            return None
    if not _in_a_row([bt for _, _, _, bt in steps]):
        return None
    first_lane = {var: loop.start}
    xs = tuple(x for _, _, x, _ in steps)
    loads = [x for x in xs if isinstance(x, ir.Load)]
    packed = loads[0] if len(loads) == n and _in_a_row(loads) else None
    return ir.GroupedProducts(acc, index_at(first.indices[0], first_lane), xs, b0.buffer,
                              index_at(j0, first_lane), lanes, guard, packed,
                              ir.Block(tuple(lt for lt, _, _, _ in steps)))


def _full_lanes(loop: ir.For) -> tuple[int | None, ir.Expr | None]:
    """(lanes, None) for a loop over a constant number of lanes; (lanes, hi <= e) for
    one ending at min(hi, e) with hi - start constant (a split's last tile, cut
    short where e says); (None, None) otherwise."""
    lanes = loop_extent(loop)
    if lanes is not None:
        return lanes, None
    end = loop.end
    if isinstance(end, ir.Binary) and end.op == "min":
        for hi, e in ((end.a, end.b), (end.b, end.a)):
            lanes = constant_difference(hi, loop.start)
            if lanes is not None:
                return lanes, le(hi, e)
    return None, None


class _Group(OutsideSimd):
    def run(self, stmts: tuple[ir.Stmt, ...], k: int) -> tuple[int, ir.Stmt] | None:
        group = grouped_products(stmts, k)
        if group is None or {group.acc.name, group.b.name} & self.func.nontemporal:
            return None
        return group.size, group


def group_products(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` with every run of loops `grouped_products` takes, outside simd loops and
    storing no output stored nontemporal, one `ir.GroupedProducts`; portable functions
    unchanged."""
    if func.portable:
        return func
    return _Group(func).run_on(func)
