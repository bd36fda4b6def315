"""The stream pass: host C's nontemporal stores staged through the stack.

Stores to an output scheduled `store_nontemporal` (`LoweredFunc.nontemporal`) bypass
the caches. LLVM makes a vector loop's contiguous stores streaming ones itself; the C
compiler has no streaming-store builtin and makes none of a loop's ordinary stores.
So for host C, a simd loop (`simd_regions`) that stores such a buffer as whole runs
stores it into a 64-byte aligned stack buffer instead, which `ir.StreamedStores` copies
out with streaming stores after the loop. A buffer qualifies when the loop has a
constant extent of at most `STREAM_STAGE_BYTES` of it and stores it at index `base +
var` (base not depending on the loop) and only there, outside any branch or inner
loop, and reads it only at that index, in the values of those stores after the first
(an element summed in the iteration: its reads find the stack buffer's lane, set
earlier in the same iteration). Other targets and portable functions are unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator

from .. import ir
from ..build import add, const, sub
from ..rewrite import bound_names, expr_vars, stmt_exprs, walk_exprs, walk_stmts
from ..vectors import loop_extent
from .simd_regions import OutsideSimd, starts_simd

# the most bytes of a loop's streamed stores of one buffer that go through the stack
STREAM_STAGE_BYTES = 1024


def _straight_line(s: ir.Stmt) -> Iterator[ir.Stmt]:
    """The statements `s` runs once each time it runs: through blocks, lets and
    allocations, not into loops or branches."""
    yield s
    match s:
        case ir.Block(stmts):
            for x in stmts:
                yield from _straight_line(x)
        case ir.Let(body=body) | ir.Allocate(body=body):
            yield from _straight_line(body)


def _unit_stride(e: ir.Expr, var: str) -> bool:
    """Whether index `e` is `var` plus terms that do not use it."""
    match e:
        case ir.Var(name):
            return name == var
        case ir.Binary("add", a, b):
            return (_unit_stride(a, var) and var not in expr_vars(b)
                    or _unit_stride(b, var) and var not in expr_vars(a))
        case ir.Binary("sub", a, b):
            return _unit_stride(a, var) and var not in expr_vars(b)
    return False


def _first_lane(e: ir.Expr, var: str, start: ir.Expr) -> ir.Expr:
    """Index `e` (`_unit_stride` in `var`) at var = start, written without the term."""
    def drop(x: ir.Expr) -> ir.Expr | None:  # x without var: None for nothing left
        match x:
            case ir.Var(name) if name == var:
                return None
            case ir.Binary("add", a, b) if var in expr_vars(a):
                rest = drop(a)
                return b if rest is None else add(rest, b)
            case ir.Binary("add", a, b):
                rest = drop(b)
                return a if rest is None else add(a, rest)
            case ir.Binary("sub", a, b):
                rest = drop(a)
                return sub(const(0, x.dtype) if rest is None else rest, b)
        raise AssertionError(f"{x!r} is not a unit-stride index in {var}")

    base = drop(e)
    if ir.int_value(start) == 0:
        return const(0, e.dtype) if base is None else base
    return start if base is None else add(base, start)


def streamed(s: ir.For, nontemporal: frozenset[str]) -> dict[ir.Buffer, ir.Expr]:
    """The buffers of `nontemporal` whose stores simd loop `s` stages (see the module
    docstring), each with its store's index, in the order of their names."""
    trips = loop_extent(s)
    if trips is None or trips <= 0:
        return {}
    body = s.body
    inner = bound_names(body) | {s.var}
    found: dict[ir.Buffer, ir.Expr] = {}
    written = {x.buffer.name: x.buffer for x in walk_stmts(body) if isinstance(x, ir.Store)}
    for _, buf in sorted(written.items()):
        if buf.name not in nontemporal or trips * buf.dtype.itemsize > STREAM_STAGE_BYTES:
            continue
        stores = [x for x in walk_stmts(body) if isinstance(x, ir.Store) and x.buffer == buf]
        top = [x for x in _straight_line(body) if isinstance(x, ir.Store) and x.buffer == buf]
        if top != stores or any(x.atomic or x.indices != stores[0].indices for x in stores):
            continue
        reads = [e for x in walk_stmts(body) for root in stmt_exprs(x)
                 for e in walk_exprs(root) if isinstance(e, ir.Load) and e.buffer == buf]
        later = [e for x in stores[1:] for e in walk_exprs(x.value)
                 if isinstance(e, ir.Load) and e.buffer == buf]
        if len(reads) != len(later) or any(e.indices != stores[0].indices for e in reads):
            continue
        index = stores[0].indices[0]
        if _unit_stride(index, s.var) and not (expr_vars(index) - {s.var}) & inner:
            found[buf] = index
    return found


class _Stream(OutsideSimd):
    def loop(self, s: ir.For) -> ir.Stmt | None:
        if not starts_simd(s, self.status):
            return None
        found = streamed(s, self.func.nontemporal)
        if not found:
            return s
        extent = loop_extent(s)
        assert extent is not None
        firsts = tuple(_first_lane(index, s.var, s.start) for index in found.values())
        return ir.StreamedStores(s, tuple(found), firsts, extent)


def stream_stores(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` with each simd loop that stages streamed stores (host C) inside an
    `ir.StreamedStores`; other targets and portable functions unchanged."""
    if func.portable or func.target.backend != "c" or not func.nontemporal:
        return func
    return _Stream(func).run_on(func)
