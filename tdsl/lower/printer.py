"""The loop nest as readable text: what `print(td.lower(s))` shows.

Division and remainder print as `/` and `%` whatever their rounding: `//` is
floor division, `/` truncates on ints (pdiv, tdiv), and `%` is the floor
modulo before `legalise` and the truncating remainder (pmod, trem) after it. Shifts
print as `<<` and `>>`, and the logical right shift of legalised unsigned code as `>>>`."""

from __future__ import annotations

from . import ir

_PREC = {"or": 1, "xor": 2, "and": 3, "cmp": 4, "lshift": 5, "rshift": 5, "shl": 5, "ashr": 5,
         "lshr": 5, "add": 6, "sub": 6, "mul": 7, "truediv": 7, "floordiv": 7, "mod": 7,
         "pdiv": 7, "pmod": 7, "tdiv": 7, "trem": 7}
_UNARY = 8
_SYM = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
        "pdiv": "/", "pmod": "%", "tdiv": "/", "trem": "%", "and": "&", "or": "|", "xor": "^", "eq": "==", "ne": "!=",
        "lshift": "<<", "rshift": ">>", "shl": "<<", "ashr": ">>", "lshr": ">>>",
        "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def expr(e: ir.Expr, prec: int = 0) -> str:
    match e:
        case ir.Const(v, d):
            if d.is_float:
                return repr(float(v))
            return str(bool(v)) if d.is_bool else str(v)
        case ir.Var(name):
            return name
        case ir.Load(buf, idx):
            return f"{buf.name}[{', '.join(expr(i) for i in idx)}]"
        case ir.PackedLoad(buf, idx, lanes):
            return f"{buf.name}[{', '.join(expr(i) for i in idx)} +: {lanes}]"
        case ir.Binary("min" | "max", a, b):
            return f"{e.op}({expr(a)}, {expr(b)})"
        case ir.Binary(op, a, b, d):
            p = _PREC[op]
            sym = op if d.is_bool and op in ("and", "or") else _SYM[op]
            s = f"{expr(a, p)} {sym} {expr(b, p + 1)}"
            return f"({s})" if p < prec else s
        case ir.Compare(op, a, b):
            p = _PREC["cmp"]
            s = f"{expr(a, p + 1)} {_SYM[op]} {expr(b, p + 1)}"
            return f"({s})" if p < prec else s
        case ir.Unary("neg", a):
            return f"-{expr(a, _UNARY)}"
        case ir.Unary(_, a):
            return f"~{expr(a, _UNARY)}"
        case ir.Call("bitcast", (a,), d):
            return f"bitcast({expr(a)}, {d.name})"
        case ir.Call(fn, args):
            return f"{fn}({', '.join(expr(a) for a in args)})"
        case ir.Select(c, a, b):
            return f"select({expr(c)}, {expr(a)}, {expr(b)})"
        case ir.Cast(a, d):
            return f"{d.name}({expr(a)})"
    return repr(e)


def _lines(s: ir.Stmt, ind: int, out: list[str], streamed: frozenset[str] = frozenset()) -> None:
    pad = "  " * ind
    match s:
        case ir.For(var, start, end, kind, body, _, mark, task, auto):
            tags = ([] if kind is ir.ForKind.SERIAL else [kind.value]) + (
                [] if mark is None else [f"reassociate {mark.op} into {mark.buffer.name}"]) + (
                [] if task is None else [_task(task)]) + (
                [] if auto is None else [f"auto simd ({auto} bytes)"])
            tag = f"  # {', '.join(tags)}" if tags else ""
            out.append(f"{pad}for {var} in {expr(start)} .. {expr(end)}:{tag}")
            _lines(body, ind + 1, out, streamed)
        case ir.If(c, t, e):
            out.append(f"{pad}if {expr(c)}:")
            _lines(t, ind + 1, out, streamed)
            if e is not None:
                out.append(f"{pad}else:")
                _lines(e, ind + 1, out, streamed)
        case ir.Block(stmts):
            for x in stmts:
                _lines(x, ind, out, streamed)
        case ir.IfFeature(feature, t, e):
            out.append(f"{pad}if target has {feature}:")
            _lines(t, ind + 1, out, streamed)
            out.append(f"{pad}else:")
            _lines(e, ind + 1, out, streamed)
        case ir.Store(buf, idx, v, atomic):
            how = "atomic " if atomic else "nontemporal " if buf.name in streamed else ""
            out.append(f"{pad}{how}{buf.name}[{', '.join(expr(i) for i in idx)}] = {expr(v)}")
        case ir.Let(name, v, body):
            out.append(f"{pad}let {name} = {expr(v)}")
            _lines(body, ind, out, streamed)
        case ir.Binder(lets):
            out.append(f"{pad}bind {', '.join(f'{n} = {expr(v)}' for n, v in lets)}")
        case ir.GroupedProducts():
            _grouped(s, ind, out, streamed)
        case ir.TransposingCopy():
            _transpose(s, ind, out, streamed)
        case ir.StreamedStores(loop, buffers, _, extent):
            names = ", ".join(b.name for b in buffers)
            out.append(f"{pad}stream {names} through the stack ({extent} elements each):")
            _lines(loop, ind + 1, out, streamed)
        case ir.Allocate(buf, body):
            shape = ", ".join(expr(x) for x in buf.shape)
            out.append(f"{pad}allocate {buf.name}[{shape}] {buf.dtype.name}")
            _lines(body, ind, out, streamed)


def _grouped(g: ir.GroupedProducts, ind: int, out: list[str], streamed: frozenset[str]) -> None:
    """`if target has FEATURE:` the group as one statement, `else:` its loops."""
    pad = "  " * ind
    guard = "" if g.guard is None else f" and {expr(g.guard)}"
    xs = ", ".join(expr(x) for x in g.xs)
    out.append(f"{pad}if target has {g.feature}{guard}:")
    out.append(f"{pad}  {g.acc.name}[{expr(g.acc_first)} +: {g.lanes}] += products of "
               f"({xs}) with {g.b.name}[{expr(g.b_first)} +: {g.lanes * g.size}] "
               f"in groups of {g.size}")
    out.append(f"{pad}else:")
    _lines(g.fallback, ind + 1, out, streamed)


def _transpose(t: ir.TransposingCopy, ind: int, out: list[str], streamed: frozenset[str]) -> None:
    """`if target has FEATURE:` the copy in tiles, `else:` its loop nest."""
    pad = "  " * ind
    out.append(f"{pad}if target has {t.feature}:")
    inner = pad + "  "
    if t.batch is not None:
        out.append(f"{inner}for {t.batch.var} in {expr(t.batch.start)} .. {expr(t.batch.end)}:")
        inner += "  "
    out.append(f"{inner}transpose {t.dst.name}[{expr(t.dst_base)} + c * {t.dst_stride} + r] = "
               f"{t.src.name}[{expr(t.src_base)} + r * {t.src_stride} + c] "
               f"for r < {t.rows}, c < {t.cols}")
    out.append(f"{pad}else:")
    _lines(t.fallback, ind + 1, out, streamed)


def _task(t: ir.Task) -> str:
    """`task NAME(values; buffers)`, `may fail` when an iteration may."""
    names = ", ".join(v.name for v in t.values) + "; " + ", ".join(b.name for b in t.buffers)
    return f"task {t.name}({names.strip('; ')})" + (", may fail" if t.fails else "")


def _arg(b: ir.Buffer) -> str:
    return f"{b.name}: {b.dtype.name}[{', '.join(expr(x) for x in b.shape)}]"


def show(func: ir.LoweredFunc) -> str:
    args = [_arg(b) for b in func.inputs + func.outputs] + [f"{v.name}: int64" for v in func.sizes]
    out = [f"func {func.name}({', '.join(args)}):"]
    _lines(func.body, 1, out, func.nontemporal)
    return "\n".join(out)


__all__ = ["show", "expr"]
