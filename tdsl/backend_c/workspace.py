"""The portable flavour's workspace: where each temporary lives in the memory the
caller passes to a `td.emit_c` kernel.

A slot holds one temporary's whole buffer (its shape is an expression of sizes
only) rounded up to ALIGN bytes; slots do not overlap, and a temporary allocated
inside a loop reuses its slot on every iteration.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import index
from ..lower.ir import Allocate, Binary, Buffer, Const, Expr, LoweredFunc
from ..lower.layout import element_count, index_add, index_mul
from ..lower.rewrite import walk_stmts

ALIGN = 64  # bytes; every slot starts at a multiple of this from the workspace


@dataclass(frozen=True, slots=True)
class Slot:
    """Where one temporary lives: `offset` bytes into the workspace (a multiple
    of ALIGN), `count` elements of its dtype."""

    buffer: Buffer
    offset: Expr
    count: Expr


@dataclass(frozen=True, slots=True)
class Workspace:
    """The slots in order, their total bytes and the alignment the workspace needs."""

    slots: tuple[Slot, ...]
    total: Expr  # bytes: the sum of the slots, each rounded up to ALIGN
    align: int  # the alignment the workspace pointer needs: the widest element

    @property
    def constant(self) -> int | None:
        """The total bytes when they do not depend on sizes, else None."""
        return int(self.total.value) if isinstance(self.total, Const) else None


def _round_up(nbytes: Expr) -> Expr:
    if isinstance(nbytes, Const):
        return Const(-(-int(nbytes.value) // ALIGN) * ALIGN, index)
    up = Binary("pdiv", index_add(nbytes, Const(ALIGN - 1, index)), Const(ALIGN, index), index)
    return index_mul(up, Const(ALIGN, index))


def workspace_layout(func: LoweredFunc) -> Workspace | None:
    """One slot per temporary of `func` in the order first allocated; None without any."""
    temps: dict[str, Buffer] = {}
    for s in walk_stmts(func.body):
        if isinstance(s, Allocate):
            temps.setdefault(s.buffer.name, s.buffer)
    if not temps:
        return None
    slots: list[Slot] = []
    offset: Expr = Const(0, index)
    for buf in temps.values():
        count = element_count(buf.shape)
        slots.append(Slot(buf, offset, count))
        offset = index_add(offset, _round_up(index_mul(count, Const(buf.dtype.itemsize, index))))
    align = max(b.dtype.itemsize for b in temps.values())
    return Workspace(tuple(slots), offset, align)
