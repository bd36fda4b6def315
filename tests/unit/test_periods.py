"""The one-period pieces of mirror, mirror-interior and wrap reads (compute.periods):
the table agrees with `evaluate.remap`, and the two places that evaluate it (the
regions of `poly.access`, the kernel index of `poly.statement_writer`) read what it says."""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest

import tdsl as td
from tdsl import dtypes as dt
from tdsl.compute.evaluate import remap
from tdsl.compute.periods import ONE_PERIOD, Form
from tdsl.lower import ir
from tdsl.lower.poly.access import _remapped
from tdsl.lower.poly.affine import Vars, space
from tdsl.lower.poly.statement_writer import _remap

MODES = sorted(ONE_PERIOD)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", range(1, 14))
def test_pieces_read_within_the_axis_what_remap_reads(mode, n):
    covered = set()
    for p in ONE_PERIOD[mode]:
        lo, hi = p.lo.at(0, n), p.hi.at(0, n)
        for v in range(lo, hi):
            assert v not in covered and not 0 <= v < n
            covered.add(v)
            assert 0 <= p.value.at(v, n) < n
            assert p.value.at(v, n) == remap(mode, v, n), (mode, n, v)
    assert covered == _once(mode, n)


def _once(mode: str, n: int) -> set[int]:
    """The indices a view reads by one reflection or shift: n of them on either side
    (mirror_interior's edge index is not repeated, so n - 1)."""
    k = n - 1 if mode == "mirror_interior" else n
    return set(range(-k, 0)) | set(range(n, n + k))


@pytest.mark.parametrize("coefs", [(0, 0, 0), (1, 0, 0), (-1, 2, -1), (2, -1, 3), (0, -2, 5)])
def test_form_builds_the_same_value_in_any_arithmetic(coefs):
    f = Form(*coefs)
    for v in range(-5, 6):
        for n in range(1, 5):
            got = f.build(v, n, lambda k: k, lambda a, b: a + b, lambda a, b: a - b)
            text = f.build("v", "n", str, lambda a, b: f"({a} + {b})", lambda a, b: f"({a} - {b})")
            assert got == f.at(v, n) == eval(text, {"v": v, "n": n})


def _isl_reads(mode: str, n: int) -> dict[int, set[int]]:
    vs = Vars(space("S", ["i"], []))
    m = _remapped(mode, vs["i"], vs.const(n), vs)
    out: dict[int, set[int]] = {}
    m.foreach_basic_map(lambda b: _points(b, out))
    return out


def _points(bmap: isl.BasicMap, out: dict[int, set[int]]) -> None:
    bounded = bmap.intersect_domain(isl.BasicSet("{ [i] : -60 <= i < 60 }").set_tuple_name(
        bmap.get_tuple_name(isl.dim_type.in_)))
    wrapped = isl.Map.from_basic_map(bounded).wrap()
    wrapped.foreach_point(lambda p: out.setdefault(
        p.get_coordinate_val(isl.dim_type.set, 0).to_python(), set()).add(
        p.get_coordinate_val(isl.dim_type.set, 1).to_python()))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_regions_are_exact_within_a_period_and_the_whole_axis_beyond(mode, n):
    reads = _isl_reads(mode, n)
    exact = _once(mode, n) | set(range(n))
    for v in range(-60, 60):
        if v in exact:
            assert reads[v] == {remap(mode, v, n)}, (mode, n, v)
        else:
            assert reads[v] == set(range(n)), (mode, n, v)


def _value(e: ir.Expr, env: dict[str, int]) -> int:
    match e:
        case ir.Const(value=c):
            return int(c)
        case ir.Var(name=name):
            return env[name]
        case ir.Binary(op="and", a=a, b=b):
            return int(bool(_value(a, env)) and bool(_value(b, env)))
        case ir.Binary(op=op, a=a, b=b):
            x, y = _value(a, env), _value(b, env)
            ops = {"add": int.__add__, "sub": int.__sub__, "mul": int.__mul__,
                   "mod": int.__mod__, "min": min, "max": max}
            return ops[op](x, y)
        case ir.Compare(op=op, a=a, b=b):
            x, y = _value(a, env), _value(b, env)
            return int({"lt": x < y, "ge": x >= y, "le": x <= y, "gt": x > y}[op])
        case ir.Select(cond=c, a=a, b=b):
            return _value(a, env) if _value(c, env) else _value(b, env)
    raise AssertionError(f"unexpected {e!r}")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_kernel_index_is_what_remap_reads_everywhere(mode, n):
    e = _remap(mode, ir.Var("v", dt.index), ir.Var("n", dt.index))
    for v in range(-40, 40):
        assert _value(e, {"v": v, "n": n}) == remap(mode, v, n), (mode, n, v)


PAD_MODES = {"mirror": "symmetric", "mirror_interior": "reflect", "wrap": "wrap"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", range(1, 9))
def test_remainder_formula_reads_what_numpys_pad_reads(mode, n):
    """`periods.anywhere` in numpy's arithmetic (`evaluate.remap`), on ints and arrays,
    against np.pad, several periods out on both sides."""
    reach = 5 * n + 3
    want = np.pad(np.arange(n), reach, mode=PAD_MODES[mode])  # index v at [v + reach]
    vs = np.arange(-reach, n + reach)
    assert remap(mode, vs, n).tolist() == want.tolist()
    assert [remap(mode, int(v), n) for v in vs] == want.tolist()


@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [1, 2, 5])
def test_an_inlined_stage_read_through_a_view_far_out_reads_what_np_pad_reads(target, mode, n):
    """The remainder formula in compute expressions (`poly.inline`): a view of a stage
    that is inlined, read several periods beyond both edges."""
    (x,) = td.dims("x")
    reach = 4 * n + 2
    A = td.input("A", {x: n}, td.int32)
    B = td.compute("B", {x: n}, A[x] * 3)
    view = getattr(td, mode)(B)
    C = td.compute("C", {x: n + 2 * reach}, view[x - reach])
    a = np.arange(1, n + 1, dtype=np.int32)
    got = td.build(td.schedule(C).compute_inline(B), target=target)(A=a)
    np.testing.assert_array_equal(got, np.pad(a * 3, reach, mode=PAD_MODES[mode]))
