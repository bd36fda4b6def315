"""The transpose pass: copies of a block to its transpose done in tiles of shuffles.

A loop nest that copies a block of 32-bit elements to its transpose
(`transposing_copy`: a cache written in one layout and stored in another, as a
convolution's register tile of channels x pixels stored to a channels-first output)
becomes, outside simd loops (`simd_regions`), an `ir.TransposingCopy` statement
holding the nest as its fallback: the targets do it in 8 x 8 or 16 x 16 tiles of
vector shuffles rather than an element at a time (host C through a helper that tests
the compiler's AVX-512 macros, LLVM where the CPU has AVX-512VL, the nest itself
elsewhere). A copy to an output stored nontemporal is left as it is; portable
functions are unchanged.
"""

from __future__ import annotations

from .. import ir
from ..rewrite import expr_vars
from ..vectors import index_at, index_step, loop_extent
from .simd_regions import OutsideSimd

# A transposing copy is done in tiles of shuffles (`transposing_copy`) when both of its
# loops have at least this many iterations. Measured on a Zen 4 (rows of 4 to 8
# elements, 32 columns, 8 x 8 tiles): 4-5x faster than gcc's element-by-element copy
# at 4 rows
TRANSPOSE_MIN = 4


def _disjoint(steps: list[tuple[int, int]]) -> bool:
    """Whether an index that moves by `step` with each of some loops (`(step, trips)`
    pairs) is different in every iteration of the nest: sorted by step, each step is
    longer than the distance all the shorter ones cover together."""
    covered = 0
    for step, trips in sorted((abs(st), n) for st, n in steps if n > 1):
        if step <= covered:
            return False
        covered += step * (trips - 1)
    return True


def transposing_copy(s: ir.For) -> ir.TransposingCopy | None:
    """`s` as a copy of a block of 32-bit elements to its transpose (its fallback `s`
    itself), or None.

    That is: `s`, a serial or unrolled loop over c, holds only a vectorized loop over
    r, or only a serial or unrolled loop over b that holds only that, and r's loop holds
    only `dst[i] = src[j]` for two distinct buffers of one 32-bit type, i advancing by 1
    with r and j by 1 with c and by a constant other than 0 and +-1 with r; i takes a
    different value in every iteration (so no element is stored twice, and the order of
    the copies does not matter); r's and c's loops have constant extents of at least
    TRANSPOSE_MIN, r's bounds do not depend on c or b, nor b's on c. A cache written in
    one layout and stored in another (`Schedule.cache_write` with `Schedule.layout`)
    ends in such a nest."""
    serial = (ir.ForKind.SERIAL, ir.ForKind.UNROLLED)
    inner = s.body
    if s.kind not in serial or not isinstance(inner, ir.For):
        return None
    batch = None
    if inner.kind in serial and isinstance(inner.body, ir.For):
        batch, inner = inner, inner.body
        if s.var in expr_vars(batch.start) | expr_vars(batch.end):
            return None
    store = inner.body
    if (inner.kind is not ir.ForKind.VECTORIZED or not isinstance(store, ir.Store)
            or store.atomic):
        return None
    load = store.value
    dst = store.buffer
    if not isinstance(load, ir.Load) or load.buffer.name == dst.name:
        return None
    if load.dtype != dst.dtype or dst.dtype.name not in ("float32", "int32", "uint32"):
        return None
    if len(store.indices) != 1 or len(load.indices) != 1:
        return None
    outer = {s.var} | ({batch.var} if batch is not None else set())
    if outer & (expr_vars(inner.start) | expr_vars(inner.end)):
        return None
    rows, cols = loop_extent(inner), loop_extent(s)
    if rows is None or cols is None or min(rows, cols) < TRANSPOSE_MIN:
        return None
    di, si = store.indices[0], load.indices[0]
    d_row, d_col = index_step(di, inner.var), index_step(di, s.var)
    s_row, s_col = index_step(si, inner.var), index_step(si, s.var)
    if d_row != 1 or s_col != 1 or d_col is None or s_row is None or abs(s_row) < 2:
        return None
    steps = [(d_row, rows), (d_col, cols)]
    if batch is not None:
        d_batch, trips = index_step(di, batch.var), loop_extent(batch)
        if d_batch is None or trips is None or index_step(si, batch.var) is None:
            return None
        steps.append((d_batch, trips))
    if not _disjoint(steps):  # with r's step 1, also c's at least rows
        return None
    first = {s.var: s.start, inner.var: inner.start}
    around = None if batch is None else ir.Batch(batch.var, batch.start, batch.end)
    return ir.TransposingCopy(dst, index_at(di, first), d_col, load.buffer, index_at(si, first),
                              s_row, rows, cols, around, s)


class _Transpose(OutsideSimd):
    def loop(self, s: ir.For) -> ir.Stmt | None:
        copy = transposing_copy(s)
        if copy is None or copy.dst.name in self.func.nontemporal:
            return None
        return copy


def transpose_copies(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` with every loop nest `transposing_copy` takes, outside simd loops and not
    storing an output stored nontemporal, one `ir.TransposingCopy`; portable functions
    unchanged."""
    if func.portable:
        return func
    return _Transpose(func).run_on(func)
