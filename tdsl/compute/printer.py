"""Readable text for algorithm expressions (used by repr and error messages)."""

from __future__ import annotations

from .nodes import (
    Acc,
    Access,
    Binary,
    Call,
    Cast,
    Checked,
    Compare,
    Const,
    Dim,
    Expr,
    Item,
    Pack,
    Reduce,
    Select,
    Size,
    Unary,
)

# Python's precedence, loosest first: comparisons < | < ^ < & < shifts < + - < * / // % < -x ~x
_PREC = {"cmp": 1, "or": 2, "xor": 3, "and": 4, "lshift": 5, "rshift": 5, "add": 6, "sub": 6,
         "mul": 7, "truediv": 7, "floordiv": 7, "mod": 7}
_UNARY = 8
_SYM = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
        "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>", "eq": "==", "ne": "!=", "lt": "<", "le": "<=",
        "gt": ">", "ge": ">="}


def show(e: Expr, prec: int = 0) -> str:
    match e:
        case Const(v, d):
            return repr(v) if d.is_float or d.is_bool else str(v)
        case Dim(name) | Size(name):
            return name
        case Access(t, idx):
            view = getattr(t, "mode", None)  # a boundary view shows as written: td.clamp(a)[...]
            head = repr(t) if view is not None else t.name
            return f"{head}[{', '.join(show(i) for i in idx)}]"
        case Binary("min" | "max", a, b):
            return f"td.{'minimum' if e.op == 'min' else 'maximum'}({show(a)}, {show(b)})"
        case Binary(op, a, b):
            p = _PREC[op]
            s = f"{show(a, p)} {_SYM[op]} {show(b, p + 1)}"
            return f"({s})" if p < prec else s
        case Compare(op, a, b):
            p = _PREC["cmp"]
            s = f"{show(a, p + 1)} {_SYM[op]} {show(b, p + 1)}"
            return f"({s})" if p < prec else s
        case Unary("neg", a):
            return f"-{show(a, _UNARY)}"
        case Unary(_, a):
            return f"~{show(a, _UNARY)}"
        case Call(fn, args):
            return f"td.{fn}({', '.join(show(a) for a in args)})"
        case Cast(a, d):
            return f"td.cast({show(a)}, {d!r})"
        case Checked(a, n):
            return f"checked({show(a)}, {show(n)})"
        case Select(c, a, b):
            return f"td.where({show(c)}, {show(a)}, {show(b)})"
        case Item() | Acc() | Reduce():
            return _reduction(e)
    return object.__repr__(e)


def _reduction(e: Expr) -> str:
    match e:
        case Item(Reduce("fold", Pack() as pack, axes), index):
            start = ", ".join(show(x) for x in pack.starts)
            step = ", ".join(show(x) for x in pack.steps)
            return (f"td.reduce(lambda acc{pack.token}: ({step},), init=({start},), "
                    f"over={{{_over(axes)}}})[{index}]")
        case Acc(token, index):
            return f"acc{token}[{index}]"
        case Reduce(op, body, axes):
            return f"td.{op}({show(body)}, over={{{_over(axes)}}})"
    return object.__repr__(e)


def _over(axes) -> str:
    return ", ".join(f"{ax.dim.name}: ({show(ax.lo)}, {show(ax.hi)})" for ax in axes)
