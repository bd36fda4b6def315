"""Standalone portable C: one C99 translation unit with no heap and no runtime.

`render_standalone(func, requires, header)` renders `func` in the portable
flavour (no pragmas, no extensions; parallel and vectorized loops are plain
loops) with three additions:

- Every temporary lives in a slot of a caller-provided workspace, the last
  parameter `void *workspace`, present only when there are temporaries. A
  slot holds the temporary's whole buffer (its shape is an expression of
  sizes only) rounded up to 64 bytes; slots do not overlap, and a temporary
  allocated inside a loop reuses its slot on every iteration.
- The entry point first checks its size arguments: each size in
  [1, INT32_MAX], every condition in `requires` (comparisons of sizes, such
  as a derived extent being at least 1) and a workspace that fits in the
  address space; it returns 1 when one fails and 2 when the workspace is
  NULL or not aligned for its widest element, before touching any array.
- `size_t NAME_workspace_size(sizes)` reports the workspace bytes, or 0 for
  sizes the entry point rejects.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import index
from ..lower.ir import Allocate, Binary, Buffer, Compare, Const, Expr, LoweredFunc, Var
from ..lower.rewrite import walk_exprs, walk_stmts
from . import helpers
from .expr import element_count, index_add, index_mul
from .helpers import ctype
from .render import FLAVOURS, _bind_params, _header, _Renderer
from .writer import CWriter, atom, binary, call, cast

ALIGN = 64  # bytes; every slot starts at a multiple of this from the workspace
ERR_SIZES, ERR_WORKSPACE = 1, 2
_NEGATE = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}
@dataclass(frozen=True, slots=True)
class Slot:
    """Where one temporary lives: `offset` bytes into the workspace (a multiple
    of ALIGN), `count` elements of its dtype."""

    buffer: Buffer
    offset: Expr
    count: Expr


@dataclass(frozen=True, slots=True)
class Workspace:
    slots: tuple[Slot, ...]
    total: Expr  # bytes: the sum of the slots, each rounded up to ALIGN
    align: int  # the alignment the workspace pointer needs: the widest element

    @property
    def constant(self) -> int | None:
        return int(self.total.value) if isinstance(self.total, Const) else None


@dataclass(frozen=True, slots=True)
class Standalone:
    """The C source, the declarations a header needs (in order) and the layout."""

    source: str
    declarations: tuple[str, ...]
    workspace: Workspace | None


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
    slots, offset = [], Const(0, index)
    for buf in temps.values():
        count = element_count(buf.shape)
        slots.append(Slot(buf, offset, count))
        offset = index_add(offset, _round_up(index_mul(count, Const(buf.dtype.itemsize, index))))
    align = max(b.dtype.itemsize for b in temps.values())
    return Workspace(tuple(slots), offset, align)


def render_standalone(func: LoweredFunc, requires: tuple[Compare, ...] = (),
                      header: str | None = None) -> Standalone:
    """`func` as standalone C99 (see the module docstring).

    `requires` are conditions on the sizes, checked in order after each size
    is known to be in [1, INT32_MAX]; `header` is a file the source includes
    (its own header, so the compiler checks that the two agree)."""
    return _StandaloneRenderer(func, requires, header).run()


class _StandaloneRenderer(_Renderer):
    """The portable renderer with workspace temporaries, size checks and the extra functions."""

    def __init__(self, func: LoweredFunc, requires: tuple[Compare, ...], header: str | None):
        super().__init__(func, FLAVOURS["portable"])
        self.w = CWriter(reserved=helpers.NAMES)
        self.requires = requires
        self.include = header
        self.layout = workspace_layout(func)
        self.ws_param: str | None = None
        self.ws_base: str | None = None

    # ------------------------------------------------------------ file

    def run(self) -> Standalone:
        w, func, layout = self.w, self.func, self.layout
        self.name = self._public(func.name)
        size_fn = self._public(f"{func.name}_workspace_size") if layout else None
        valid_fn = bytes_fn = None
        if layout and layout.constant is None:
            bytes_fn = w.fresh(f"{func.name}_workspace_bytes", level=0)
            self._bytes_function(bytes_fn)
            w.line()
        if func.sizes:  # without sizes there is nothing to check
            valid_fn = w.fresh(f"{func.name}_sizes_valid", level=0)
            self._valid_function(valid_fn, bytes_fn)
            w.line()
        declarations: list[str] = []
        if size_fn:
            declarations.append(self._size_function(size_fn, valid_fn, bytes_fn))
            w.line()
        declarations.append(self._entry(valid_fn))
        return Standalone(self._assemble(w.text()), tuple(declarations), layout)

    def _public(self, name: str) -> str:
        got = self.w.fresh(name, level=0)
        if got != name:
            raise ValueError(f"{name!r} is not a valid, free C identifier (it would be {got!r})")
        return name

    def _sizes(self) -> str:
        """The size parameters, bound in the current scope."""
        params = [f"int64_t {self.w.bind(('var', v.name), v.name)}" for v in self.func.sizes]
        return ", ".join(params) or "void"

    def _assemble(self, body: str) -> str:
        parts = [f"/* {self.name}: generated by tdsl (portable C99). */\n"]
        for h in self.helpers:
            self.headers |= helpers.definition(h)[1]
        includes = [f"#include <{h}>\n" for h in ("math.h", "stddef.h", "stdint.h")
                    if h in self.headers]
        if self.include:
            includes.append(f'\n#include "{self.include}"\n')
        parts.append("".join(includes))
        parts.extend(helpers.definition(h)[0] for h in self.helpers)
        parts.append(body)
        return "\n".join(parts)

    # ------------------------------------------------------------ the functions

    def _valid_function(self, name: str, bytes_fn: str | None) -> None:
        w = self.w
        w.line("/* 1 when the sizes are valid for this kernel, else 0. */")
        with w.scope():
            w.open(f"static int {name}({self._sizes()})")
            for v in self.func.sizes:
                c = atom(self._name_of("var", v.name))
                out = binary("||", binary("<", c, atom("1")), binary(">", c, atom("INT32_MAX")))
                self._reject(out, "0")
            for cond in self.requires:
                self._reject(self.expr(Compare(_NEGATE[cond.op], cond.a, cond.b)), "0")
            if self.layout and self.layout.constant is None:
                nbytes = call(bytes_fn, *self._size_args())
                too_big = binary(">", nbytes, cast("uint64_t", atom("PTRDIFF_MAX")))
                self._reject(too_big, "0")
            w.line("return 1;")
            w.close()

    def _reject(self, cond, value: str) -> None:
        self.w.open(f"if ({cond})")
        self.w.line(f"return {value};")
        self.w.close()

    def _size_args(self) -> list:
        return [atom(self._name_of("var", v.name)) for v in self.func.sizes]

    def _bytes_function(self, name: str) -> None:
        """The workspace bytes in uint64_t, saturating instead of overflowing;
        called only for sizes whose extents are at least 1."""
        w = self.w
        self._use_helper(helpers.MUL_SAT)
        self._use_helper(helpers.ADD_SAT)
        w.line("/* Workspace bytes, or UINT64_MAX when that does not fit in 64 bits. */")
        with w.scope():
            w.open(f"static uint64_t {name}({self._sizes()})")
            used = {v.name for b in self.layout.slots for e in b.buffer.shape
                    for v in walk_exprs(e) if isinstance(v, Var)}
            for v in self.func.sizes:
                if v.name not in used:
                    w.line(f"(void){self._name_of('var', v.name)};")
            acc = w.fresh("nbytes")
            w.line(f"uint64_t {acc} = 0;")
            for slot in self.layout.slots:
                nbytes = self._slot_bytes(slot.buffer)
                w.line(f"{acc} = {call(helpers.ADD_SAT, atom(acc), nbytes)};  /* {slot.buffer.name} */")
            w.line(f"return {acc};")
            w.close()

    def _slot_bytes(self, buf: Buffer):
        """C text of a buffer's bytes rounded up to ALIGN, in saturating uint64_t."""
        scale = buf.dtype.itemsize
        for f in buf.shape:
            if isinstance(f, Const):
                scale *= int(f.value)
        value = atom(f"{scale}u")
        for f in buf.shape:
            if not isinstance(f, Const):
                value = call(helpers.MUL_SAT, value, cast("uint64_t", self.expr(f)))
        rounded = call(helpers.ADD_SAT, value, atom(f"{ALIGN - 1}u"))
        return binary("&", rounded, atom(f"~(uint64_t){ALIGN - 1}u"))

    def _size_function(self, name: str, valid_fn: str | None, bytes_fn: str | None) -> str:
        w = self.w
        w.line("/* Bytes of workspace the kernel needs for these sizes; 0 if it rejects them. */")
        with w.scope():
            proto = f"size_t {name}({self._sizes()})"
            w.open(proto)
            args = ", ".join(a.text for a in self._size_args())
            nbytes = f"(size_t){bytes_fn}({args})" if bytes_fn else f"{self.layout.constant}u"
            w.line(f"return {valid_fn}({args}) ? {nbytes} : 0;" if valid_fn else f"return {nbytes};")
            w.close()
        self.headers.add("stddef.h")
        return proto + ";"

    def _entry(self, valid_fn: str | None) -> str:
        w = self.w
        with w.scope():
            params = _bind_params(self.func, w)
            if self.layout:
                self.ws_param = w.bind(("workspace",), "workspace")
                params = f"{params}, void *{self.ws_param}"
            proto = _header(self.name, params)
            w.open(proto)
            self.body_level = w.level
            if valid_fn:
                args = ", ".join(a.text for a in self._size_args())
                self._reject(atom(f"!{valid_fn}({args})"), str(ERR_SIZES))
            if self.layout:
                self._workspace_prologue()
            self.stmt(self.func.body)
            w.line("return 0;")
            w.close()
        return f"{proto};"

    def _workspace_prologue(self) -> None:
        w, ws = self.w, self.ws_param
        misaligned = binary("!=", binary("%", cast("uintptr_t", atom(ws)),
                                         atom(str(self.layout.align))), atom("0"))
        self._reject(binary("||", binary("==", atom(ws), atom("NULL")), misaligned),
                     str(ERR_WORKSPACE))
        self.headers.add("stddef.h")
        self.ws_base = w.bind(("workspace_bytes",), "ws")
        w.line(f"unsigned char *{self.ws_base} = {ws};")

    # ------------------------------------------------------------ temporaries

    def allocate(self, s: Allocate) -> None:
        buf, w = s.buffer, self.w
        slot = next(x for x in self.layout.slots if x.buffer.name == buf.name)
        t = ctype(buf.dtype)
        offset = self.expr(slot.offset)
        base = atom(self.ws_base) if offset.text == "0" else binary("+", atom(self.ws_base), offset)
        with w.binding(("buf", buf.name), buf.name) as name:
            w.line(f"{t} *restrict {name} = {cast(f'{t} *', base)};")
            self.stmt(s.body)

    def _may_fail(self, s) -> bool:
        return False  # nothing is allocated at run time
