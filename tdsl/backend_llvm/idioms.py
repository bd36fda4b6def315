"""The statements of the passes that plan for a target, as LLVM IR.

A `TransposingCopy` (the transpose pass) is done in 8 x 8 tiles
(`emit_transposing_copy`) where the host has AVX-512VL: eight row vectors in, three
stages of shuffles, eight column vectors out, masked at the block's edges. A
`GroupedProducts` (the group pass) is x86's multiply-adds on 16 lanes at a time where
the host has the instruction (`vpmaddwd`, VNNI's `vpdpbusd`). Where the host lacks
them, the loops each holds (`fallback`). A `StreamedStores` (host C's staging of
streamed stores) is its loop, whose contiguous vector stores of outputs stored
nontemporal are streaming stores here anyway (`vector._Chunk.streaming_store`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from ..dtypes import index, int16
from ..lower.ir import Buffer, GroupedProducts, StreamedStores, TransposingCopy
from . import ops
from .host import host_has
from .ops import I1, I32, I64

if TYPE_CHECKING:
    from .codegen import _FunctionEmitter


def emit_idiom(fe: _FunctionEmitter, s: TransposingCopy | GroupedProducts | StreamedStores
               ) -> None:
    """A statement of the passes that plan for a target: tiles of shuffles or x86's
    multiply-adds where the host has the instructions, else the loops themselves;
    the loop of a `StreamedStores` (host C's staging), whose contiguous vector stores
    of outputs stored nontemporal are streaming stores here anyway."""
    match s:
        case TransposingCopy() if host_has(s.feature):
            emit_transposing_copy(fe, s)
        case GroupedProducts() if host_has(s.feature):
            _grouped_or_loops(fe, s)
        case TransposingCopy(fallback=fallback) | GroupedProducts(fallback=fallback):
            fe.stmt(fallback)
        case StreamedStores(loop=loop):
            fe.stmt(loop)

def _grouped_or_loops(fe: _FunctionEmitter, g: GroupedProducts) -> None:
    """The group (the group pass); where it has a guard (the last tile of a split, cut
    short), the loops themselves (`fallback`) when lanes are missing."""
    if g.guard is None:
        _grouped_products(fe, g)
        return
    fe.if_then_else(fe.cond(g.guard), lambda: _grouped_products(fe, g),
                    lambda: fe.stmt(g.fallback), name="group")

def _grouped_products(fe: _FunctionEmitter, g: GroupedProducts) -> None:
    """acc[l] += the group's products, 16 lanes at a time: x86's `vpmaddwd` on
    int16 pairs (then an add, which LLVM folds into `vpdpwssd` where the host has
    VNNI), or VNNI's `vpdpbusd` on byte quads (unsigned operand first). The
    group's uniform operands are packed into one 32-bit value, splat."""
    b = fe.b
    lanes16 = ir.VectorType(I32, 16)
    bits = 32 // g.size
    packed: ir.Value = ir.Constant(I32, 0)
    for t, x in enumerate(g.xs):
        part = b.zext(fe.typed(x, int16) if g.size == 2 else fe.expr(x), I32)
        if bits * t:
            part = b.shl(part, ir.Constant(I32, bits * t))
        packed = b.or_(packed, part)
    splat = b.insert_element(ir.Constant(lanes16, ir.Undefined), packed, ir.Constant(I32, 0))
    splat = b.shuffle_vector(splat, ir.Constant(lanes16, ir.Undefined),
                             ir.Constant(lanes16, [0] * 16))
    elem = ir.IntType(bits)
    wide = ir.VectorType(elem, 16 * g.size)
    xs = b.bitcast(splat, wide)
    if g.size == 2:
        madd = ops.declare(fe.mod.module, "llvm.x86.avx512.pmaddw.d.512", lanes16,
                           [wide, wide], ("nounwind", "readnone"))
    else:
        madd = ops.declare(fe.mod.module, "llvm.x86.avx512.vpdpbusd.512", lanes16,
                           [lanes16, wide, wide], ("nounwind", "readnone"))
    acc0, b0 = fe.address(g.acc, (g.acc_first,)), fe.address(g.b, (g.b_first,))
    for lane in range(0, g.lanes, 16):
        at = b.gep(acc0, [ir.Constant(I64, lane)], inbounds=True, source_etype=I32)
        from_ = b.gep(b0, [ir.Constant(I64, g.size * lane)], inbounds=True,
                      source_etype=elem)
        sums = fe.annotate(b.load(at, typ=lanes16, align=4), g.acc)
        vs = fe.annotate(b.load(from_, typ=wide, align=g.b.dtype.itemsize), g.b)
        if g.size == 2:
            total = b.add(sums, b.call(madd, [xs, vs]))
        elif g.x_unsigned:
            total = b.call(madd, [sums, xs, vs])
        else:
            total = b.call(madd, [sums, vs, xs])
        fe.annotate(b.store(total, at, align=4), g.acc)


# a transposing copy's tile: TILE x TILE elements, TILE row vectors in and out
TILE = 8
# its three stages of shuffles (x86: unpack, shufps, vperm2f128 / vinsertf128): each
# makes vector `out` of the stage from vectors `a` and `b` of the one before with a
# mask over their 16 lanes: interleave lanes, then pairs of lanes, then 128-bit halves
_INTERLEAVE = ((0, 8, 1, 9, 4, 12, 5, 13), (2, 10, 3, 11, 6, 14, 7, 15))
_PAIRS = ((0, 1, 8, 9, 4, 5, 12, 13), (2, 3, 10, 11, 6, 7, 14, 15))
_HALVES = ((0, 1, 2, 3, 8, 9, 10, 11), (4, 5, 6, 7, 12, 13, 14, 15))
_STAGES = (  # (out, a, b, mask)
    tuple((i + h, i, i + 1, _INTERLEAVE[h]) for i in (0, 2, 4, 6) for h in (0, 1)),
    tuple((i + 2 * p + h, i + p, i + p + 2, _PAIRS[h])
          for i in (0, 4) for p in (0, 1) for h in (0, 1)),
    tuple((i + 4 * h, i, i + 4, _HALVES[h]) for i in range(4) for h in (0, 1)),
)


def emit_transposing_copy(fe: _FunctionEmitter, t: TransposingCopy) -> None:
    """The copy `t` in TILE x TILE tiles: the full ones in loops, those at the block's
    right and bottom edges with masked loads and stores (nothing outside the block is
    read or written); with a batch loop, all of that in each of its iterations."""
    if t.batch is None:
        _transpose_block(fe, t)
        return
    lo, hi = fe.expr(t.batch.start), fe.expr(t.batch.end)
    fe.counted_loop(t.batch.var, lo, hi, None, [], emit=lambda _: _transpose_block(fe, t))


def _transpose_block(fe: _FunctionEmitter, t: TransposingCopy) -> None:
    b = fe.b
    dst0, src0 = fe.typed(t.dst_base, index), fe.typed(t.src_base, index)

    def repeat(name: str, count: int, emit: Callable[[ir.Value], None]) -> None:
        if count == 1:
            emit(ir.Constant(I64, 0))
        elif count > 1:
            fe.counted_loop(name, ir.Constant(I64, 0), ir.Constant(I64, count), None, [],
                            emit=emit)

    def tiles(c_count: int, c_first: int, cn: int, r_count: int, r_first: int, rn: int) -> None:
        def columns(ci: ir.Value) -> None:
            c0 = b.add(ir.Constant(I64, c_first), b.mul(ci, ir.Constant(I64, TILE)))

            def rows(ri: ir.Value) -> None:
                r0 = b.add(ir.Constant(I64, r_first), b.mul(ri, ir.Constant(I64, TILE)))
                _transpose_tile(fe, t, b.add(dst0, r0), b.add(src0, c0), c0, r0, cn, rn)
            repeat(f"{t.dst.name}.tile_r", r_count, rows)
        repeat(f"{t.dst.name}.tile_c", c_count, columns)

    full_c, cn = divmod(t.cols, TILE)
    full_r, rn = divmod(t.rows, TILE)
    for c_count, c_first, c_lanes in ((full_c, 0, TILE), (1 if cn else 0, full_c * TILE, cn)):
        for r_count, r_first, r_lanes in ((full_r, 0, TILE), (1 if rn else 0, full_r * TILE, rn)):
            if c_count and r_count:
                tiles(c_count, c_first, c_lanes, r_count, r_first, r_lanes)


def _transpose_tile(fe: _FunctionEmitter, t: TransposingCopy, dst: ir.Value, src: ir.Value,
                    c0: ir.Value, r0: ir.Value, cn: int, rn: int) -> None:
    """dst[(c0 + j) * dst_stride + i] = src[(r0 + i) * src_stride + j] for i < rn, j < cn
    (`dst` and `src` already hold r0 and c0)."""
    b = fe.b
    elty = ops.lltype(t.dst.dtype)
    vty = ir.VectorType(elty, TILE)
    align = ir.Constant(I32, t.dst.dtype.itemsize)

    def mask(n: int) -> ir.Constant:
        return ir.Constant(ir.VectorType(I1, TILE), [i < n for i in range(TILE)])

    def address(buf: Buffer, offset: ir.Value) -> ir.Value:
        return b.gep(fe.ptrs[buf.name], [offset], inbounds=True, source_etype=elty)

    def call(name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Instruction:
        return b.call(ops.declare(b.module, name, ret, [a.type for a in args]), args)

    vectors: list[ir.Value] = []
    for i in range(TILE):
        if i >= rn:  # rows past the block: lanes no store keeps
            vectors.append(ir.Constant(vty, ir.Undefined))
            continue
        row = b.add(r0, ir.Constant(I64, i))
        ptr = address(t.src, b.add(src, b.mul(row, ir.Constant(I64, t.src_stride))))
        if cn == TILE:
            load = b.load(ptr, typ=vty, align=t.src.dtype.itemsize)
        else:
            load = call(f"llvm.masked.load.{ops._suffix(vty)}.p0", vty,
                        [ptr, align, mask(cn), ir.Constant(vty, ir.Undefined)])
        vectors.append(fe.annotate(load, t.src))
    for stage in _STAGES:
        out: list[ir.Value] = [ir.Constant(vty, ir.Undefined)] * TILE
        for k, x, y, m in stage:
            out[k] = b.shuffle_vector(vectors[x], vectors[y],
                                      ir.Constant(ir.VectorType(I32, TILE), list(m)))
        vectors = out
    for j in range(cn):
        col = b.add(c0, ir.Constant(I64, j))
        ptr = address(t.dst, b.add(dst, b.mul(col, ir.Constant(I64, t.dst_stride))))
        if rn == TILE:
            store = b.store(vectors[j], ptr, align=t.dst.dtype.itemsize)
        else:
            store = call(f"llvm.masked.store.{ops._suffix(vty)}.p0", ir.VoidType(),
                         [vectors[j], ptr, align, mask(rn)])
        fe.annotate(store, t.dst)
