"""The IR builder (`tdsl.lower.build`): each constructor builds the node it names, in its
first operand's dtype, a number operand a constant of the other operand's dtype
(tests/meta/test_builder_use.py checks that the passes use it)."""

from __future__ import annotations

import pytest

from tdsl import dtypes as dt
from tdsl.lower import build as b
from tdsl.lower import ir


def test_each_constructor_builds_its_node_in_its_first_operands_dtype():
    x, y = ir.Var("x"), ir.Var("y")
    w = ir.Load(ir.Buffer("w", dt.uint32, (ir.index_const(4),), "input"), (x,))
    assert b.add(x, y) == ir.Binary("add", x, y, dt.index)
    assert b.sub(w, 1) == ir.Binary("sub", w, ir.Const(1, dt.uint32), dt.uint32)
    assert b.shl(w, 16) == ir.Binary("shl", w, ir.Const(16, dt.uint32), dt.uint32)
    assert b.minimum(x, b.index(3)) == ir.Binary("min", x, ir.index_const(3), dt.index)
    assert b.mul(2, x) == ir.Binary("mul", ir.Const(2, dt.index), x, dt.index)
    assert b.lt(x, 0) == ir.Compare("lt", x, ir.index_const(0))
    assert b.and_(b.ge(x, 0), b.lt(x, y)) == ir.Binary(
        "and", ir.Compare("ge", x, ir.index_const(0)), ir.Compare("lt", x, y), dt.bool_)
    assert b.select(b.eq(w, 0), 7, w) == ir.Select(
        ir.Compare("eq", w, ir.Const(0, dt.uint32)), ir.Const(7, dt.uint32), w, dt.uint32)
    assert b.neg(x) == ir.Unary("neg", x, dt.index)
    assert b.unary("invert", w) == ir.Unary("invert", w, dt.uint32)
    assert b.bitcast(w, dt.float32) == ir.Call("bitcast", (w,), dt.float32)
    assert b.call("abs", [x], dt.index) == ir.Call("abs", (x,), dt.index)
    assert b.cast(w, dt.int64) == ir.Cast(w, dt.int64)
    assert b.const(0.5, dt.float32) == ir.Const(0.5, dt.float32)
    assert b.all_of([b.lt(x, 1), b.lt(y, 2), b.gt(x, y)]) == b.and_(
        b.and_(b.lt(x, 1), b.lt(y, 2)), b.gt(x, y))


def test_two_numbers_need_a_dtype():
    with pytest.raises(TypeError, match="use const"):
        b.add(1, 2)
