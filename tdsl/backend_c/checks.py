"""The portable entry point's checks, as C: before a checked entry point
(`Flavour.checked_entry`, `td.emit_c`) the function that tells whether its sizes are
valid (each in [1, INT32_MAX], the `requires` conditions, the polynomials of the
`index32` pass's limits, a workspace that fits in the address space), the workspace's
bytes in saturating uint64_t, `NAME_workspace_size`, and the entry point's test of the
workspace pointer. Each function takes the renderer writing the file (`render._Renderer`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lower.ir import NEGATED, Buffer, Compare, Const, Var
from ..lower.rewrite import walk_exprs
from . import helpers
from .writer import CExpr, atom, binary, call, cast

ERR_SIZES, ERR_WORKSPACE = 1, 2  # the portable entry point's refusals

if TYPE_CHECKING:
    from .render import _Renderer


def checks(r: _Renderer, declarations: list[str]) -> str | None:
    """The functions before a checked entry point: the workspace bytes, the size
    check and NAME_workspace_size (declared); the size check's name, if any."""
    w, func, layout = r.w, r.func, r.layout
    size_fn = public_name(r, f"{func.name}_workspace_size") if layout else None
    valid_fn = bytes_fn = None
    if layout and layout.constant is None:
        bytes_fn = w.fresh(f"{func.name}_workspace_bytes", level=0)
        _bytes_function(r, bytes_fn)
        w.line()
    if func.sizes:  # without sizes there is nothing to check
        valid_fn = w.fresh(f"{func.name}_sizes_valid", level=0)
        _valid_function(r, valid_fn, bytes_fn)
        w.line()
    if size_fn:
        declarations.append(_size_function(r, size_fn, valid_fn, bytes_fn))
        w.line()
    return valid_fn


def public_name(r: _Renderer, name: str) -> str:
    """`name` as a file-level C identifier, which it must be as it is (a public name)."""
    got = r.w.fresh(name, level=0)
    if got != name:
        raise ValueError(f"{name!r} is not a valid, free C identifier (it would be {got!r})")
    return name


def _sizes(r: _Renderer) -> str:
    """The size parameters, bound in the current scope."""
    params = [f"int64_t {r.w.bind(('var', v.name), v.name)}" for v in r.func.sizes]
    return ", ".join(params) or "void"


def _valid_function(r: _Renderer, name: str, bytes_fn: str | None) -> None:
    w = r.w
    w.line("/* 1 when the sizes are valid for this kernel, else 0. */")
    with w.scope():
        w.open(f"static int {name}({_sizes(r)})")
        for v in r.func.sizes:
            c = atom(r.name_of("var", v.name))
            out = binary("||", binary("<", c, atom("1")), binary(">", c, atom("INT32_MAX")))
            reject(r, out, "0")
        for cond in r.requires:
            reject(r, r.expr(Compare(NEGATED[cond.op], cond.a, cond.b)), "0")
        for limit in r.func.index_limits:  # 32-bit index arithmetic (index32)
            reject(r, binary(">", _polynomial(r, limit), atom("INT32_MAX")), "0")
        if bytes_fn is not None:  # the workspace depends on the sizes
            nbytes = call(bytes_fn, *size_args(r))
            too_big = binary(">", nbytes, cast("uint64_t", atom("PTRDIFF_MAX")))
            reject(r, too_big, "0")
        w.line("return 1;")
        w.close()


def _polynomial(r: _Renderer, terms: tuple[tuple[int, tuple[str, ...]], ...]) -> CExpr:
    """C text of a polynomial in the sizes (`LoweredFunc.index_limits`) in saturating
    uint64_t: no overflow, whatever the sizes."""
    r.use_helper(helpers.MUL_SAT)
    r.use_helper(helpers.ADD_SAT)
    total = None
    for coef, names in terms:
        term = atom(f"{coef}u")
        for n in names:
            term = call(helpers.MUL_SAT, term, cast("uint64_t", atom(r.name_of("var", n))))
        total = term if total is None else call(helpers.ADD_SAT, total, term)
    assert total is not None
    return total


def reject(r: _Renderer, cond, value: str) -> None:
    """`if (cond) return value;`."""
    r.w.open(f"if ({cond})")
    r.w.line(f"return {value};")
    r.w.close()


def size_args(r: _Renderer) -> list:
    """The size parameters' C names, as arguments in order."""
    return [atom(r.name_of("var", v.name)) for v in r.func.sizes]


def _bytes_function(r: _Renderer, name: str) -> None:
    """The workspace bytes in uint64_t, saturating instead of overflowing;
    called only for sizes whose extents are at least 1."""
    w, layout = r.w, r.layout
    assert layout is not None
    r.use_helper(helpers.MUL_SAT)
    r.use_helper(helpers.ADD_SAT)
    w.line("/* Workspace bytes, or UINT64_MAX when that does not fit in 64 bits. */")
    with w.scope():
        w.open(f"static uint64_t {name}({_sizes(r)})")
        used = {v.name for b in layout.slots for e in b.buffer.shape
                for v in walk_exprs(e) if isinstance(v, Var)}
        for v in r.func.sizes:
            if v.name not in used:
                w.line(f"(void){r.name_of('var', v.name)};")
        acc = w.fresh("nbytes")
        w.line(f"uint64_t {acc} = 0;")
        for slot in layout.slots:
            nbytes = _slot_bytes(r, slot.buffer)
            w.line(f"{acc} = {call(helpers.ADD_SAT, atom(acc), nbytes)};  /* {slot.buffer.name} */")
        w.line(f"return {acc};")
        w.close()


def _slot_bytes(r: _Renderer, buf: Buffer):
    """C text of a buffer's bytes, in saturating uint64_t."""
    scale = buf.dtype.itemsize
    for f in buf.shape:
        if isinstance(f, Const):
            scale *= int(f.value)
    value = atom(f"{scale}u")
    for f in buf.shape:
        if not isinstance(f, Const):
            value = call(helpers.MUL_SAT, value, cast("uint64_t", r.expr(f)))
    return value


def _size_function(r: _Renderer, name: str, valid_fn: str | None, bytes_fn: str | None) -> str:
    w = r.w
    w.line("/* Bytes of workspace the kernel needs for these sizes; 0 if it rejects them. */")
    with w.scope():
        proto = f"size_t {name}({_sizes(r)})"
        w.open(proto)
        args = ", ".join(a.text for a in size_args(r))
        constant = r.layout.constant if r.layout else None
        nbytes = f"(size_t){bytes_fn}({args})" if bytes_fn else f"{constant}u"
        w.line(f"return {valid_fn}({args}) ? {nbytes} : 0;" if valid_fn else f"return {nbytes};")
        w.close()
    r.headers.add("stddef.h")
    return proto + ";"


def workspace_prologue(r: _Renderer) -> None:
    """The entry point's test of its workspace pointer (NULL or misaligned: ERR_WORKSPACE),
    then the byte pointer the slots are reached through."""
    w, ws, layout = r.w, r.ws_param, r.layout
    assert ws is not None and layout is not None
    misaligned = binary("!=", binary("%", cast("uintptr_t", atom(ws)),
                                 atom(str(layout.align))), atom("0"))
    reject(r, binary("||", binary("==", atom(ws), atom("NULL")), misaligned),
           str(ERR_WORKSPACE))
    r.headers.add("stddef.h")
    r.ws_base = w.bind(("workspace_bytes",), "ws")
    w.line(f"unsigned char *{r.ws_base} = {ws};")
