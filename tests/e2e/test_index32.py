"""The index32 pass: portable C's index arithmetic in 32 bits where the sizes allow.

Bounds are checked for soundness on random index expressions (every subexpression's
value, at random sizes, against its polynomial bound); emitted kernels are checked
for 32-bit loops, for a 64-bit fallback where an index cannot be bounded, and for the
entry point's refusal of sizes whose indices could exceed INT32_MAX.
"""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_emit_c import EXAMPLES, STRICT, tool

import tdsl as td
from tdsl import dtypes as dt
from tdsl.emit import load_function
from tdsl.lower import ir, lower_schedule
from tdsl.lower.passes.index32 import _Bounds, dominated, index_bounds

SIZES = ("H", "W")


def _poly_value(p: dict, sizes: dict[str, int]) -> int:
    total = 0
    for m, c in p.items():
        v = c
        for n in m:
            v *= sizes[n]
        total += v
    return total


def _value(e: ir.Expr, env: dict[str, int]) -> int:
    match e:
        case ir.Const(v):
            return int(v)
        case ir.Var(n):
            return env[n]
        case ir.Unary("neg", a):
            return -_value(a, env)
        case ir.Binary(op, a, b):
            x, y = _value(a, env), _value(b, env)
            if op in ("pdiv", "tdiv"):
                q = abs(x) // abs(y)
                return q if (x >= 0) == (y > 0) else -q
            if op in ("pmod", "trem"):
                return x - y * _value(ir.Binary("tdiv", a, b, e.dtype), env)
            if op in ("floordiv", "mod"):
                return x // y if op == "floordiv" else x % y
            return {"add": x + y, "sub": x - y, "mul": x * y, "min": min(x, y),
                    "max": max(x, y)}[op]
        case ir.Select(ir.Compare("lt", a, b), x, y):
            return _value(x, env) if _value(a, env) < _value(b, env) else _value(y, env)
    raise AssertionError(e)


def _leaf(names=(*SIZES, "i")):
    return st.one_of(st.sampled_from([ir.Var(n) for n in names]),
                     st.integers(-40, 40).map(ir.index_const))


def _node(kids):
    binop = st.sampled_from(["add", "sub", "mul", "min", "max"])
    div = st.sampled_from(["tdiv", "trem", "floordiv", "mod", "pdiv", "pmod"])
    return st.one_of(
        st.tuples(binop, kids, kids).map(lambda t: ir.Binary(t[0], t[1], t[2], dt.index)),
        st.tuples(div, kids, st.integers(1, 9)).map(
            lambda t: ir.Binary(t[0], t[1], ir.index_const(t[2]), dt.index)),
        kids.map(lambda a: ir.Unary("neg", a, dt.index)),
        st.tuples(kids, kids, kids, kids).map(
            lambda t: ir.Select(ir.Compare("lt", t[0], t[1]), t[2], t[3], dt.index)))


exprs = st.recursive(_leaf(), _node, max_leaves=8)
ends = st.recursive(_leaf(SIZES), _node, max_leaves=4)  # a loop's end: sizes, constants


@given(e=exprs, h=st.integers(1, 5000), w=st.integers(1, 5000), frac=st.floats(0, 1),
       end=ends)
def test_bounds_hold_for_every_subexpression(e, h, w, frac, end):
    """Inside `for i in 0 .. end`, every subexpression of `e` is at most its bound in
    magnitude, at every i the loop runs (sampled) and any sizes."""
    sizes = {"H": h, "W": w}
    b = _Bounds(set(SIZES))
    loop_bound = b.expr(end)
    stop = _value(end, {**sizes, "i": 0})
    if stop <= 0:
        return
    i = min(int(frac * stop), stop - 1)
    assert abs(i) <= _poly_value(loop_bound, sizes) + 1
    b.env["i"] = loop_bound
    found_before = len(b.found)
    b.expr(e)
    subs = [x for x in _subexprs(e) if x.dtype == dt.index]  # (not the comparisons)
    assert len(b.found) - found_before == len(subs)
    for x, p in zip(subs, b.found[found_before:]):
        assert abs(_value(x, {**sizes, "i": i})) <= _poly_value(p, sizes), x


def _subexprs(e: ir.Expr):
    """Post-order, as `_Bounds.expr` records them."""
    from tdsl.lower.rewrite import expr_children

    for k in expr_children(e):
        yield from _subexprs(k)
    yield e


@given(p=st.dictionaries(st.sampled_from([(), ("H",), ("W",), ("H", "W"), ("H", "H")]),
                         st.integers(0, 50)),
       q=st.dictionaries(st.sampled_from([(), ("H",), ("W",), ("H", "W"), ("H", "H")]),
                         st.integers(0, 50)),
       h=st.integers(1, 1000), w=st.integers(1, 1000))
def test_domination_is_sound(p, q, h, w):
    if dominated(p, q):
        assert _poly_value(p, {"H": h, "W": w}) <= _poly_value(q, {"H": h, "W": w})


def _loops(func: ir.LoweredFunc) -> set:
    from tdsl.lower.rewrite import walk_stmts

    return {s.start.dtype for s in walk_stmts(func.body) if isinstance(s, ir.For)}


@pytest.mark.parametrize("name", ["fc_s8", "conv_s8", "depthwise_s8", "qmatmul", "matmul"])
def test_constant_sizes_give_32_bit_indices_and_no_checks(name, tmp_path):
    sched = load_function(f"{EXAMPLES / 'kernels.py'}:{name}")()
    func = lower_schedule(sched, name, workspace=True, portable=True)
    assert _loops(func) == {dt.index32} and func.index_limits == ()
    c, _ = td.emit_c(sched, name, tmp_path)
    src = c.read_text()
    assert not re.search(r"for \(int64_t", src) and re.search(r"for \(int32_t", src)
    assert "INT32_MAX" not in src  # nothing to check at entry


def test_an_unbounded_index_keeps_64_bits():
    """An index read from int64 data cannot be bounded: the function stays in 64 bits."""
    i, v = td.dims("i v")
    lut = td.input("lut", {v: 16}, td.int32)
    idx = td.input("idx", {i: 8}, td.int64)
    out = td.compute("out", {i: 8}, td.assume_in_range(lut)[idx[i]])
    func = lower_schedule(td.schedule(out), "f", workspace=True, portable=True)
    assert _loops(func) == {dt.index} and index_bounds(func) is None
    small = td.input("small", {i: 8}, td.int16)
    out2 = td.compute("out2", {i: 8}, td.assume_in_range(lut)[small[i]])
    func2 = lower_schedule(td.schedule(out2), "f", workspace=True, portable=True)
    assert _loops(func2) == {dt.index32}


def test_a_bound_no_sizes_can_meet_keeps_64_bits(tmp_path):
    """A gather through a clamped int32 index: its bound is the int32 range times a row,
    above INT32_MAX whatever the sizes, so 32 bits would make an entry point that refuses
    every call (a fuzz campaign found one, refusing H=16, W=1); it stays in 64 bits and
    computes what td.evaluate does."""
    y, x = td.dims("y x")
    H, W = td.size("H"), td.size("W")
    A = td.input("A", {y: H, x: W}, td.float32)
    I = td.input("I", {y: H, x: W}, td.int32)
    out = td.compute("out", {y: H, x: W}, td.clamp(A)[I[y, x], x] * 2)
    sched = td.schedule(out)
    func = lower_schedule(sched, "gather", workspace=True, portable=True)
    assert _loops(func) == {dt.index} and func.index_limits == ()
    td.emit_c(sched, "gather", tmp_path)
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    idx = np.array([[2, -5], [0, 9], [1, 1]], dtype=np.int32)
    want = td.evaluate(out, A=a, I=idx)
    driver = tmp_path / "driver.c"
    values = ", ".join(map(str, a.ravel()))
    indices = ", ".join(map(str, idx.ravel()))
    driver.write_text(f"""#include <stdio.h>
#include "gather.h"
int main(void) {{
    static const float A[6] = {{{values}}};
    static const int32_t I[6] = {{{indices}}};
    float out[6];
    if (gather(A, I, out, 3, 2) != 0) return 1;
    for (int k = 0; k < 6; k++) printf("%g\\n", out[k]);
    return 0;
}}
""")
    exe = tmp_path / "driver"
    subprocess.run([tool("gcc"), *STRICT, "-O1", "-I", tmp_path, tmp_path / "gather.c", driver,
                    "-o", exe], check=True, capture_output=True)
    done = subprocess.run([exe], capture_output=True, text=True)
    assert done.returncode == 0, "the entry point refused valid sizes"
    got = np.array([float(v) for v in done.stdout.split()], dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(got, want)


def test_sizes_beyond_the_32_bit_bound_are_refused(tmp_path):
    """blur's sizes are symbolic: the entry point checks the header's bound on them and
    refuses (1, nothing touched) sizes that pass the per-size check but not the bound."""
    sched = load_function(f"{EXAMPLES / 'kernels.py'}:blur")()
    func = lower_schedule(sched, "blur", workspace=True, portable=True)
    assert func.index_limits and _loops(func) == {dt.index32}
    td.emit_c(sched, "blur", tmp_path)
    header = (tmp_path / "blur.h").read_text()
    assert "<= INT32_MAX (a bound on its indices, which are" in header

    def limit(h: int, w: int) -> int:
        return max(sum(c * np.prod([{"H": h, "W": w}[n] for n in names], dtype=object)
                       for c, names in p) for p in func.index_limits)

    w = 3000
    h_ok = next(h for h in range(200000, 0, -1000) if limit(h, w) <= 2**31 - 1)
    h_bad = next(h for h in range(h_ok, 10**6, 10) if limit(h, w) > 2**31 - 1)
    driver = tmp_path / "driver.c"
    driver.write_text(f"""#include <stdlib.h>
#include "blur.h"
int main(void) {{
    static float ws[1];
    if (blur(NULL, NULL, {h_bad}, {w}, ws) != 1) return 1;
    if (blur_workspace_size({h_bad}, {w}) != 0) return 2;
    if (blur_workspace_size({h_ok}, {w}) == 0) return 3;
    if (blur(NULL, NULL, 4, 3000000000LL, ws) != 1) return 4;
    return 0;
}}
""")
    exe = tmp_path / "driver"
    subprocess.run([tool("gcc"), *STRICT, "-O1", "-I", tmp_path, tmp_path / "blur.c", driver,
                    "-o", exe], check=True, capture_output=True)
    assert subprocess.run([exe]).returncode == 0
