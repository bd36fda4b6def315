"""The loop-IR verifier: scopes, and the closed vocabularies of ops and kinds."""

from __future__ import annotations

from typing import get_args

import pytest

from tdsl import dtypes as dt
from tdsl.compute import expr as cx
from tdsl.compute import fixed_point
from tdsl.lower import ir
from tdsl.lower.passes.verify import VerifyError, verify
from tdsl.schedule.state import LoopKind

N = ir.Var("N")
OUT = ir.Buffer("out", dt.int32, (N,), "output")
c = ir.index_const
ZERO = c(0)
X = ir.Const(1, dt.int32)


def _func(body: ir.Stmt, out: ir.Buffer = OUT) -> ir.LoweredFunc:
    return ir.LoweredFunc("k", (), (out,), (N,), body)


def _store(value: ir.Expr, index: ir.Expr = ZERO) -> ir.Store:
    return ir.Store(OUT, (index,), value)


def _loop(var: str, body: ir.Stmt, kind=ir.ForKind.SERIAL) -> ir.For:
    return ir.For(var, c(0), N, kind, body, None)


def test_a_clock_takes_no_argument_and_reads_an_index():
    verify(_func(ir.Let("t", ir.Call("clock", (), dt.index), _store(X))))
    with pytest.raises(VerifyError, match="call clock of 1 arguments"):
        verify(_func(ir.Let("t", ir.Call("clock", (c(1),), dt.index), _store(X))))
    with pytest.raises(VerifyError, match="clock of .*index only"):
        verify(_func(_store(ir.Call("clock", (), dt.int32))))


@pytest.mark.parametrize("body, message", [
    (ir.Block((ir.Let("x", c(1), _store(X)), _store(X, ir.Var("x")))),
     "variable x used outside its scope"),
    (ir.Block((_loop("i", _store(X)), _store(X, ir.Var("i")))), "variable i used outside its scope"),
    (ir.Let("i", c(1), _loop("i", _store(X))), "loop variable i shadows an enclosing name"),
    (_loop("N", _store(X)), "loop variable N shadows an enclosing name"),
])
def test_names_are_used_only_where_they_are_bound(body, message):
    with pytest.raises(VerifyError, match=message):
        verify(_func(body))


def test_a_let_may_shadow_a_let():
    verify(_func(ir.Let("x", c(1), ir.Let("x", ir.Var("x"), _store(X, ir.Var("x"))))))


@pytest.mark.parametrize("body, message", [
    (_store(ir.Binary("plus", X, X, dt.int32)),  # type: ignore[arg-type]
     "binary operation 'plus' is not one of: add, and, ashr, floordiv, .*, xor"),
    (_store(ir.Cast(ir.Compare("lte", X, X), dt.int32)),  # type: ignore[arg-type]
     "comparison 'lte' is not one of: eq, ge, gt, le, lt, ne"),
    (_store(ir.Unary("not", X, dt.int32)),  # type: ignore[arg-type]
     "unary operation 'not' is not one of: invert, neg"),
    (_store(ir.Call("expf", (X,), dt.int32)),  # type: ignore[arg-type]
     "function 'expf' is not one of: abs, atan2, bitcast, ceil, clock, copysign, cos, erf, exp, "
     "exp2, floor, log, log2, pow, requantize, round, rounding_mul_shift_right, "
     "rounding_shift_right, saturating_add, saturating_sub, sin, smlabb, smlad, smlatt, sqrt, "
     "ssat, sxtab16, sxtab16_ror8, sxtb16, sxtb16_ror8, tanh, usat, uxtab16, uxtab16_ror8, "
     "uxtb16, uxtb16_ror8"),
    (ir.For("i", c(0), N, "vectorized", _store(X), 4),  # type: ignore[arg-type]
     "loop i has kind 'vectorized', not one of: ForKind.SERIAL, ForKind.PARALLEL, "
     "ForKind.VECTORIZED, ForKind.UNROLLED"),
    (ir.Allocate(ir.Buffer("t", dt.int32, (c(4),), "scratch"), _store(X)),  # type: ignore[arg-type]
     "buffer t of kind 'scratch' is not one of: input, output, temp"),
    (ir.Store(ir.Buffer("u", dt.int32, (c(4),), "tmp"), (c(0),), X),  # type: ignore[arg-type]
     "buffer u of kind 'tmp' is not one of: input, output, temp"),
])
def test_bad_vocabulary_is_refused_naming_the_valid_values(body, message):
    with pytest.raises(VerifyError, match=message):
        verify(_func(body))


def test_a_bad_argument_kind_is_refused():
    out = ir.Buffer("out", dt.int32, (N,), "result")  # type: ignore[arg-type]
    with pytest.raises(VerifyError, match="buffer out of kind 'result' is not one of"):
        verify(_func(ir.Block(()), out))


def test_the_vocabularies_agree_with_their_tables():
    # lowering turns a schedule's loop kind into the loop IR's by value
    assert {k.value for k in ir.ForKind} == set(get_args(LoopKind))
    # the algorithm's operations are numpy's, and each has a loop-IR operation of its name
    assert set(cx.NUMPY_BINARY) == set(get_args(cx.BinaryOp)) <= set(get_args(ir.BinaryOp))
    assert set(cx.NUMPY_COMPARE) == set(get_args(cx.CompareOp)) == set(get_args(ir.CompareOp))
    # (besides the fixed-point operations, whose values are their own), and the loop IR
    # adds the core functions of the legalise pass, the clock of the profile pass and the
    # Arm DSP extension's operations, which only the dsp pass writes
    assert set(cx.NUMPY_CALL) | set(fixed_point.VALUES) == set(get_args(cx.CallFn)) == set(
        get_args(ir.CallFn)) - {"copysign", "bitcast", "clock"} - ir.DSP_CALLS
    assert set(get_args(cx.UnaryOp)) == set(get_args(ir.UnaryOp))
    assert set(ir.NEGATED) == set(ir.NEGATED.values()) == set(get_args(ir.CompareOp))
