"""Counting what a loop nest does, by running its control flow.

`count_stores(func, buffer, sizes)` runs a loop-IR function's loops, lets and
branches on the given sizes, without any data, and counts the stores into one
buffer: how many values of an intermediate a schedule computes (a stage computed
per block recomputes the blocks' overlap; one with a sliding window computes each
value once). Only control flow that depends on indices can be run: a loop bound or
branch condition that reads memory is an error. The plain branch of an `IfFeature`
is the one run (both compute the same values).
"""

from __future__ import annotations

from collections.abc import Mapping

from . import ir


class NotIndexOnly(ValueError):
    """The control flow reads data."""


def index_value(e: ir.Expr, env: Mapping[str, int]) -> int:
    """An index expression (or a comparison or boolean of them) at the variables' values."""
    match e:
        case ir.Const(v):
            return int(v)
        case ir.Var(n):
            return env[n]
        case ir.Unary("neg", a):
            return -index_value(a, env)
        case ir.Unary("invert", a):
            return int(not index_value(a, env))
        case ir.Compare(op, a, b):
            x, y = index_value(a, env), index_value(b, env)
            return int({"lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y, "eq": x == y,
                        "ne": x != y}[op])
        case ir.Select(c, a, b):
            return index_value(a, env) if index_value(c, env) else index_value(b, env)
        case ir.Cast(a):
            return index_value(a, env)
        case ir.Binary(op, a, b):
            x, y = index_value(a, env), index_value(b, env)
            if op in ("pdiv", "tdiv", "pmod", "trem"):
                q = abs(x) // abs(y) * (1 if (x >= 0) == (y > 0) else -1)
                return q if op in ("pdiv", "tdiv") else x - q * y
            if op in ("floordiv", "mod"):
                return (x // y if op == "floordiv" else x % y) if y else 0
            return {"add": x + y, "sub": x - y, "mul": x * y, "min": min(x, y),
                    "max": max(x, y), "and": x & y, "or": x | y, "xor": x ^ y}[op]
    raise NotIndexOnly(f"the control flow reads {e!r}, which is not an index expression")


def count_stores(func: ir.LoweredFunc, buffer: str, sizes: Mapping[str, int]) -> int:
    """How many times `func` stores into buffer `buffer` at these sizes (see the module)."""
    total = 0

    def run(s: ir.Stmt, env: dict[str, int]) -> None:
        nonlocal total
        match s:
            case ir.For(var, start, end, _, body):
                for v in range(index_value(start, env), index_value(end, env)):
                    run(body, {**env, var: v})
            case ir.Let(name, value, body):
                indexish = value.dtype.name.startswith("index") or value.dtype.is_bool
                run(body, {**env, name: index_value(value, env)} if indexish else env)
            case ir.If(c, t, e):
                if index_value(c, env):
                    run(t, env)
                elif e is not None:
                    run(e, env)
            case ir.Block(stmts):
                for x in stmts:
                    run(x, env)
            case ir.Allocate(_, body):
                run(body, env)
            case ir.IfFeature(_, _, plain):
                run(plain, env)
            case ir.Store(buf) if buf.name == buffer:
                total += 1

    run(func.body, dict(sizes))
    return total


__all__ = ["NotIndexOnly", "count_stores", "index_value"]
