"""The portable flavour's workspace: where each temporary lives in the memory the
caller passes to a `td.emit_c` kernel.

A slot holds one temporary's whole buffer (its shape is an expression of sizes
only); slots do not overlap, and a temporary allocated inside a loop reuses its
slot on every iteration. The slots come in order of decreasing element size, so
each starts at a multiple of its own element's size with no padding between
them: the workspace needs the alignment of its widest element and nothing more
(what the target's loads need, not a host's cache line), and its size is the sum
of the buffers' bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import index
from ..errors import InternalError
from ..lower.ir import (
    Allocate,
    Binary,
    Buffer,
    Compare,
    Const,
    Expr,
    LoweredFunc,
    Select,
    Unary,
    Var,
    register_sized,
)
from ..lower.layout import element_count, index_add, index_mul
from ..lower.rewrite import walk_stmts


@dataclass(frozen=True, slots=True)
class Slot:
    """Where one temporary lives: `offset` bytes into the workspace (a multiple of
    its element size), `count` elements of its dtype."""

    buffer: Buffer
    offset: Expr
    count: Expr


@dataclass(frozen=True, slots=True)
class Workspace:
    """The slots in order, their total bytes and the alignment the workspace needs."""

    slots: tuple[Slot, ...]
    total: Expr  # bytes: the sum of the slots
    align: int  # the alignment the workspace pointer needs: the widest element

    @property
    def constant(self) -> int | None:
        """The total bytes when they do not depend on sizes, else None."""
        return int(self.total.value) if isinstance(self.total, Const) else None


def workspace_layout(func: LoweredFunc) -> Workspace | None:
    """One slot per temporary of `func` that lives in a workspace (all but those of
    register size, `ir.register_sized`, which stay locals), widest elements first,
    then in the order first allocated; None without any. (`func` may be lowered
    with or without a workspace: the slots are the same.)"""
    temps: dict[str, Buffer] = {}
    for s in walk_stmts(func.body):
        if isinstance(s, Allocate) and not register_sized(s.buffer):
            temps.setdefault(s.buffer.name, s.buffer)
    if not temps:
        return None
    slots: list[Slot] = []
    offset: Expr = Const(0, index)
    for buf in sorted(temps.values(), key=lambda b: -b.dtype.itemsize):
        count = element_count(buf.shape)
        slots.append(Slot(buf, offset, count))
        offset = index_add(offset, index_mul(count, Const(buf.dtype.itemsize, index)))
    align = max(b.dtype.itemsize for b in temps.values())
    return Workspace(tuple(slots), offset, align)


def bytes_macro(name: str, ws: Workspace, sizes: tuple[str, ...]) -> str:
    """`#define NAME_WORKSPACE_BYTES ...`: the workspace's bytes as a constant, or as a
    function-like macro of the sizes (in int64_t arithmetic, exact for the sizes the
    kernel accepts), so that a caller can size a static buffer at compile time."""
    macro = f"{name}_WORKSPACE_BYTES"
    if ws.constant is not None:
        return f"#define {macro} {ws.constant}u"
    params = ", ".join(sizes)
    return f"#define {macro}({params}) ((size_t)({_macro_text(ws.total)}))"


def _macro_text(e: Expr) -> str:
    """C text of an index expression of sizes, every size a macro parameter."""
    match e:
        case Const(value):
            return f"INT64_C({int(value)})"
        case Var(name):
            return f"(int64_t)({name})"
        case Unary("neg", a):
            return f"(-{_macro_text(a)})"
        case Binary("add" | "sub" | "mul" as op, a, b):
            sym = {"add": "+", "sub": "-", "mul": "*"}[op]
            return f"({_macro_text(a)} {sym} {_macro_text(b)})"
        case Binary("min" | "max" as op, a, b):
            x, y = _macro_text(a), _macro_text(b)
            return f"({x} {'<' if op == 'min' else '>'} {y} ? {x} : {y})"
        case Binary("pdiv" | "pmod" as op, a, b):  # a known non-negative
            return f"({_macro_text(a)} {'/' if op == 'pdiv' else '%'} {_macro_text(b)})"
        case Binary("tdiv" | "trem" as op, a, b):  # C's own (the legalise pass's)
            return f"({_macro_text(a)} {'/' if op == 'tdiv' else '%'} {_macro_text(b)})"
        case Select(cond, x, y):
            return f"({_condition_text(cond)} ? {_macro_text(x)} : {_macro_text(y)})"
        case Binary("floordiv", a, Const(int() as d)) if d > 0:
            x = _macro_text(a)
            return f"({x} >= 0 ? {x} / INT64_C({d}) : -((INT64_C({d} - 1) - {x}) / INT64_C({d})))"
    raise InternalError(f"a workspace size is not an expression of sizes C can print: {e!r}")


def _condition_text(e: Expr) -> str:
    """C text of a condition on sizes (comparisons joined by and, or, not) in a
    workspace size."""
    match e:
        case Compare(op, a, b):
            sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[op]
            return f"({_macro_text(a)} {sym} {_macro_text(b)})"
        case Binary("and" | "or" as op, a, b) if a.dtype.is_bool:
            sym = "&&" if op == "and" else "||"
            return f"({_condition_text(a)} {sym} {_condition_text(b)})"
        case Unary("invert", a) if a.dtype.is_bool:
            return f"(!{_condition_text(a)})"
        case Const(value) if e.dtype.is_bool:
            return "1" if value else "0"
    raise InternalError(f"a workspace size's condition is not one C can print: {e!r}")
