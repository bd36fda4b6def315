"""The statements of the passes that plan for a target, as host C: grouped products
(the group pass) as calls of a multiply-add helper under a test of the compiler's
feature macro, transposing copies (the transpose pass) as calls of `helpers.TRANSPOSE`,
streamed stores (the stream pass) through a stack buffer copied out by
`helpers.STREAM_STORE`, and the fence after them. Portable C writes the loops these
statements hold. Each function takes the renderer writing the file
(`render._Renderer`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lower.ir import GroupedProducts, StreamedStores, TransposingCopy
from . import helpers
from .helpers import ctype
from .writer import CExpr, atom, binary, cast, subscript

if TYPE_CHECKING:
    from .render import _Renderer


def grouped(r: _Renderer, g: GroupedProducts) -> None:
    """Grouped products (the group pass) as one call of a multiply-add helper where
    the C compiler targets the instruction, the loops (`fallback`) otherwise: in host
    C; portable C, which has no helper for it, writes the loops."""
    if not r.flavour.gnu:
        r.stmt(g.fallback)
        return
    acc = r.expr.element(g.acc, (g.acc_first,))
    b = r.expr.element(g.b, (g.b_first,))
    if g.size == 2:
        name = helpers.PAIR_MADD
        xs = ", ".join(cast("int16_t", r.expr(x)).text for x in g.xs)
    else:
        name = helpers.QUAD_MADD_U8I8 if g.x_unsigned else helpers.QUAD_MADD_I8U8
        xs = _quad_operand(r, g)
    r.use_helper(name)
    w = r.w
    w.line(f"#if defined(__{g.feature.upper()}__)")
    if g.guard is None:
        w.line(f"{name}(&{acc}, &{b}, {xs}, {g.lanes});")
    else:  # the last tile of a split, cut short: the loops where lanes are missing
        w.open(f"if ({r.expr(g.guard)})")
        w.line(f"{name}(&{acc}, &{b}, {xs}, {g.lanes});")
        w.middle("} else {")
        r.stmt(g.fallback)
        w.close()
    w.line("#else")
    r.stmt(g.fallback)
    w.line("#endif")


def _quad_operand(r: _Renderer, g: GroupedProducts) -> str:
    """A quad's four bytes as one uint32_t, the first lowest: one 32-bit load when they
    are consecutive elements of one buffer (gcc would load and shift each)."""
    first = g.packed
    if first is not None:
        return f"quad_bytes(&{r.expr.element(first.buffer, first.indices)})"
    parts = [cast("uint32_t", cast("uint8_t", r.expr(x))).text for x in g.xs]
    return " | ".join(p if t == 0 else f"{p} << {8 * t}" for t, p in enumerate(parts))


def streamed(r: _Renderer, s: StreamedStores) -> None:
    """A simd loop whose stores of `s.buffers` go to stack buffers, copied out
    after it with streaming stores (the stream pass): in host C; portable C, which
    has no streaming stores, writes the loop."""
    loop = s.loop
    if not r.flavour.gnu:
        r.loop(loop)
        return
    w = r.w
    w.open("")
    first = r.expr(loop.start)
    copies = []
    for buf, index in zip(s.buffers, s.firsts, strict=True):
        stage = w.fresh(f"{buf.name}_stream")
        w.line(f"{ctype(buf.dtype)} {stage}[{s.extent}] __attribute__((aligned(64)));")
        r.staged[buf.name] = (stage, loop.var, first)
        at = r.expr.element(buf, (index,))
        copies.append(f"{helpers.STREAM_STORE}(&{at}, {stage}, "
                      f"{s.extent * buf.dtype.itemsize});")
    r.use_helper(helpers.STREAM_STORE)
    r.loop(loop)
    for buf in s.buffers:
        del r.staged[buf.name]
    for line in copies:
        w.line(line)
    w.close()


def transpose(r: _Renderer, t: TransposingCopy) -> None:
    """A transposing copy (the transpose pass) as one call of `helpers.TRANSPOSE`
    (which tests the compiler's AVX-512 macros itself), or with a batch loop, that
    loop around the call: in host C; portable C writes the loop nest (`fallback`)."""
    if not r.flavour.gnu:
        r.stmt(t.fallback)
        return
    name = helpers.TRANSPOSE[helpers.SUFFIX[t.dst.dtype.name]]
    r.use_helper(name)
    w = r.w
    with w.scope():
        if t.batch is not None:
            b = t.batch
            start, end = r.expr(b.start), r.expr(b.end)
            v = w.bind(("var", b.var), b.var)
            w.open(f"for (int64_t {v} = {start}; {binary('<', atom(v), end)}; {v}++)")
            r.ctypes[(("var", b.var), v)] = "int64_t"
        dst = r.expr.element(t.dst, (t.dst_base,))
        src = r.expr.element(t.src, (t.src_base,))
        w.line(f"{name}(&{dst}, {t.dst_stride}, &{src}, {t.src_stride}, {t.rows}, "
               f"{t.cols});")
        if t.batch is not None:
            w.close()


def staged_lane(r: _Renderer, name: str) -> CExpr | None:
    """The stack buffer's lane that stands for buffer `name`'s element in the loop
    staging its stores (`StreamedStores`; accessed only at that element there), or None."""
    if name not in r.staged:
        return None
    stage, var, first = r.staged[name]
    lane = atom(r.name_of("var", var))
    return subscript(stage, lane if first.text == "0" else binary("-", lane, first))


def fence_streams(r: _Renderer) -> None:
    """The fence after a host function's streaming stores (`LoweredFunc.nontemporal`),
    which are weakly ordered, so that its caller sees every element."""
    if r.func.nontemporal and r.flavour.gnu:
        r.use_helper(helpers.STREAM_FENCE)
        r.w.line(f"{helpers.STREAM_FENCE}();")
