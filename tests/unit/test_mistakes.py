"""A catalogue of user mistakes, one test each.

Every entry is something a user can plausibly get wrong; each must raise the
specific `td.TdslError` subclass, with a message that names the object at
fault (the stage, loop, argument, field or file) and, where it makes sense,
says what would be valid. The substrings asserted are those parts of the
message. Environment mistakes that tdsl recovers from (an unusable cache
directory) must warn instead, naming the directory.
"""

from __future__ import annotations

import functools
import json
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import tdsl as td
from tdsl.backend_c import compile_source

# ---------------------------------------------------------------- the algorithms the mistakes use

y, x, k = td.dims("y x k")
r = td.dim("r")
N = td.size("N")
A = td.input("A", {y: N, x: 8}, td.float32)
B = td.input("B", {x: 8, k: 4}, td.float32)
C = td.compute("C", {y: N, k: 4}, td.sum(A[y, x] * B[x, k], over=x))

img = td.input("img", {y: 16, x: 16}, td.uint16)
bx = td.compute("bx", {y: 16, x: 14}, img[y, x] + img[y, x + 1] + img[y, x + 2])
by = td.compute("by", {y: 14, x: 14}, bx[y, x] + bx[y + 1, x] + bx[y + 2, x])

seq = td.input("seq", {r: 32}, td.int32)
scan = td.compute("scan", {r: 32}, seq[r])
step = td.update(scan[r], scan[r - 1] + seq[r], over={r: (1, 32)})

# another pipeline, with dims of the same names
y2, x2 = td.dims("y x")
other_in = td.input("other_in", {y2: 4}, td.float32)
other = td.compute("other", {y2: 4}, other_in[y2] * 2)


def a_arr(n: int = 5) -> np.ndarray:
    return np.ones((n, 8), np.float32)


def b_arr() -> np.ndarray:
    return np.ones((8, 4), np.float32)


@functools.cache
def kernel() -> td.Kernel:
    return td.build(td.schedule(C))


@functools.cache
def blur_kernel() -> td.Kernel:
    return td.build(td.schedule(by))


def sched() -> td.Schedule:
    return td.schedule(C)


def blur() -> td.Schedule:
    return td.schedule(by)


def json_of(**changes) -> str:
    """The JSON of `split(C, y, 4)` with the split record's fields changed."""
    data = json.loads(sched().split(C, y, 4).to_json())
    data["primitives"][0].update(changes)
    return json.dumps(data)


def json_with(**changes) -> str:
    data = json.loads(sched().split(C, y, 4).to_json())
    data.update(changes)
    return json.dumps(data)


# ---------------------------------------------------------------- the catalogue


@dataclass(frozen=True)
class Mistake:
    id: str
    act: Callable[[], object]
    error: type
    says: tuple[str, ...]


CATALOGUE: list[Mistake] = []


def M(id_: str, act: Callable[[], object], error: type, *says: str) -> None:
    CATALOGUE.append(Mistake(id_, act, error, says))


D, S, Ar, Co = td.DefinitionError, td.ScheduleError, td.ArgumentError, td.CompileError

# dims, sizes and tensors
M("dims-not-a-string", lambda: td.dims(5), D, 'td.dims', 'td.dims("y x")', '5')
M("dims-empty", lambda: td.dims(" "), D, "td.dims", "one string")
M("dim-name-starts-with-digit", lambda: td.dim("1x"), D, "'1x'", 'Python identifier')
M("dim-name-keyword", lambda: td.dim("for"), D, "'for'", 'Python identifier')
M("dim-name-with-space", lambda: td.dim("a b"), D, "'a b'", 'Python identifier')
M("size-not-a-string", lambda: td.size(3), D, 'size name 3', 'Python identifier')
M("size-name-invalid", lambda: td.size("N-1"), D, "'N-1'", 'Python identifier')
M("input-dtype-unknown", lambda: td.input("Q", {y: 8}, "float128"), D, "'float128'", 'td.float32')
M("input-name-invalid", lambda: td.input("1Q", {y: 8}, td.float32), D, "input name '1Q'", 'Python identifier')
M("input-name-not-a-string", lambda: td.input(7, {y: 8}, td.float32), D, 'input name 7')
M("input-shape-empty", lambda: td.input("Q", {}, td.float32), D, "input 'Q'", 'non-empty dict {dim: extent}')
M("input-shape-list", lambda: td.input("Q", [y, x], td.float32), D, "input 'Q'", 'dict {dim: extent}')
M("input-shape-key-string", lambda: td.input("Q", {"y": 8}, td.float32), D, "input 'Q'", "'y'", 'td.dim')
M("input-extent-zero", lambda: td.input("Q", {y: 0}, td.float32), D, "input 'Q', dim y", 'at least 1')
M("input-extent-negative", lambda: td.input("Q", {y: -3}, td.float32), D, "input 'Q', dim y", '-3', 'at least 1')
M("input-extent-float", lambda: td.input("Q", {y: 2.5}, td.float32), D, "input 'Q', dim y", '2.5', 'an int, a td.size')
M("input-extent-string", lambda: td.input("Q", {y: "N"}, td.float32), D, "input 'Q', dim y", "'N'", 'an int, a td.size')
M("input-extent-float-expression", lambda: td.input("Q", {y: N * 0.5}, td.float32), D, "input 'Q', dim y", 'td.float64', 'integer expressions')
M("input-two-dims-named-alike", lambda: td.input("Q", {y: 4, y2: 4}, td.float32), D, "input 'Q'", 'two different td.dim objects', "'y'")
M("reduction-dim-named-like-a-stage-dim", lambda: td.compute(
    "Q", {y: N}, td.sum(A[y, 0] * td.cast(y2, td.float32), over={y2: 4})), D,
  "stage 'Q'", "two different td.dim objects", "'y'", "own name")
M("update-over-dims-named-alike", lambda: td.update(scan[r], seq[r], over={r: 32, y2: 1, y: 1}), D,
  "td.update of scan", "two different td.dim objects", "'y'")
M("compute-name-keyword", lambda: td.compute("def", {y: N, x: 8}, A[y, x]), D, "stage name 'def'", 'Python identifier')
M("compute-too-few-indices", lambda: td.compute("Q", {y: N}, A[y]), D, 'A has 2 dimension(s) (y, x)', 'indexed with 1')
M("compute-too-many-indices", lambda: td.compute("Q", {y: N, x: 8}, A[y, x, k]), D, 'A has 2 dimension(s) (y, x)', 'indexed with 3')
M("index-float", lambda: A[y, 1.5], D, 'A: index 1 (1.5)', 'integers')
M("index-slice", lambda: A[y, 0:3], D, 'A[...]', 'slices', 'index with dims')
M("index-string", lambda: A[y, "x"], D, "'x' (str)", 'valid operands')
M("index-float-expression", lambda: A[y, B[x, k]], D, 'A: index 1 (B[x, k])', 'td.float32', 'integers')
M("compute-stray-dim", lambda: td.compute("Q", {y: N}, A[y, x]), D, "stage 'Q'", "['x']", "its loops are ['y']", 'over=dim')
M("compute-dim-of-another-pipeline", lambda: td.compute("Q", {y: N, x: 8}, A[y2, x]), D, "stage 'Q'", "'y'", 'two different dims', 'same Dim object')
M("compute-expr-string", lambda: td.compute("Q", {y: N, x: 8}, "A[y, x]"), D, "'A[y, x]' (str)", 'valid operands')
M("compute-expr-list", lambda: td.compute("Q", {y: N, x: 8}, [A[y, x]]), D, '(list)', 'valid operands')
M("compute-expr-unindexed-tensor", lambda: td.compute("Q", {y: N, x: 8}, A), D, "stage 'Q'", 'index it')
M("compute-expr-none", lambda: td.compute("Q", {y: N, x: 8}, None), D, 'None (NoneType)', 'valid operands')
M("tensor-plus-scalar", lambda: A + 1, D, "tensor 'A'", 'without indices', 'A[y, x]')
M("scalar-times-tensor", lambda: 2 * A, D, "tensor 'A'", 'A[y, x]')
M("expr-plus-tensor", lambda: A[y, x] + A, D, "tensor 'A'", 'without indices', 'index it')
M("negate-tensor", lambda: -A, D, "tensor 'A'", 'A[y, x]')
M("numpy-exp-of-expression", lambda: np.exp(A[y, x]), D, 'np.exp', 'A[y, x]', 'td.exp')
M("numpy-maximum-of-expression", lambda: np.maximum(A[y, x], 0), D, 'np.maximum', 'A[y, x]', 'td.maximum')
M("numpy-exp-of-tensor", lambda: np.exp(A), D, "tensor 'A'", 'A[y, x]')
M("numpy-array-times-expression", lambda: np.ones(3) * A[y, x], D, 'numpy array', 'A[y, x]', 'td.input')
M("integer-power-of-an-expression", lambda: td.cast(A[y, x], td.int32) ** td.cast(A[y, x], td.int32),
  D, '**', 'Python int exponent', 'td.cast(x, td.float64) ** e')
M("integer-power-negative", lambda: td.cast(A[y, x], td.int32) ** -2, D, '** -2', 'negative integer powers')
M("shift-of-a-float", lambda: A[y, x] << 2, D, '<<', 'needs integer or bool operands', 'td.cast')
M("if-on-expression", lambda: bool(A[y, x] > 0), D, 'A[y, x] > 0.0', 'no truth value', 'td.where')
M("and-on-expressions", lambda: (A[y, x] > 0) and (A[y, x] < 1), D, 'A[y, x] > 0.0', '& | ~')
M("bitwise-and-on-float", lambda: A[y, x] & 1, D, 'A[y, x] & 1', 'integer or bool operands', 'td.float32')
M("constant-out-of-range", lambda: img[y, x] + 70000, D, '70000', 'td.uint16', 'img[y, x]', 'wider dtype')
M("cast-to-number", lambda: td.cast(A[y, x], 5), D, 'dtype 5', 'td.float32')
M("where-non-bool-condition", lambda: td.where(A[y, x], 1.0, 2.0), D, 'td.where', 'bool condition', 'td.float32')
M("sum-without-over", lambda: td.sum(A[y, x]), D, 'td.sum', 'over=', 'over=k')
M("sum-over-number", lambda: td.sum(A[y, x], over=5), D, 'td.sum', 'over= must be a dim')
M("sum-over-string", lambda: td.sum(A[y, x], over="x"), D, 'td.sum', 'over= must be a dim')
M("sum-over-own-dim", lambda: td.compute("Q", {y: N, x: 8}, td.sum(A[y, x], over=y)), D, "stage 'Q'", "['y']", 'different td.dim')
M("sum-over-zero-extent", lambda: td.sum(A[y, x], over={x: 0}), D, 'td.sum over x', 'at least 1')
M("sum-over-bad-bounds", lambda: td.sum(A[y, x], over={x: (0,)}), D, 'td.sum', 'bounds of x', '(lo, hi)', '(0,)')
M("sum-reduction-dim-unused-extent", lambda: td.compute("Q", {y: N}, td.sum(A[y, 0], over=k)), D, 'reduction dim k', 'over={k: 16}')
M("clamp-of-number", lambda: td.clamp(5), D, 'td.clamp', 'td.input or td.compute', '5')
M("clamp-of-expression", lambda: td.clamp(A[y, x]), D, 'td.clamp', 'A[y, x]')
M("pad-value-expression", lambda: td.pad(A, A[y, x]), D, 'td.pad(A, value)', 'constant')
M("pad-value-string", lambda: td.pad(A, "zero"), D, "'zero' (str)")
M("clamp-view-too-few-indices", lambda: td.clamp(A)[y], D, 'A has 2 dimension(s) (y, x)', 'indexed with 1')
M("read-past-the-edge", lambda: td.build(td.compute("Q", {y: N, x: 8}, A[y, x + 1])), D, 'Q accesses A[y, x + 1] out of range', 'A[y=0, x=8]', 'td.clamp(A)')
M("read-before-the-start", lambda: td.build(td.compute("Q", {y: N, x: 8}, A[y - 1, x])), D, 'Q accesses A[y - 1, x] out of range', 'A[y=-1, x=', 'td.pad(A, 0)')
M("update-of-an-input", lambda: td.update(A[y, x], A[y, x] + 1, over={y: N, x: 8}), D, 'td.update', 'stage made by td.compute', 'A[y, x]')
M("update-target-not-an-access", lambda: td.update(5, 1, over={r: 32}), D, 'td.update', 'e.g. y[r]', 'got 5')
M("update-dim-not-in-over", lambda: td.update(scan[r], scan[r - 1], over={}), D, 'td.update of scan', 'over= must be a dict')
M("update-over-bad-bounds", lambda: td.update(scan[r], scan[r] + 1, over={r: (1, 2, 3)}), D, 'td.update of scan', 'bounds of r', '(lo, hi)')
M("update-over-not-a-dict", lambda: td.update(scan[r], scan[r] + 1, over=r), D, 'td.update of scan', 'over= must be a dict')
M("two-stages-named-alike", lambda: td.schedule(td.compute("C", {y: N, k: 4}, C[y, k] + 1)), D, 'two different tensors', "'C'")

# building and lowering entry points
M("schedule-of-a-number", lambda: td.schedule(5), D, 'outputs', 'td.compute', 'got 5')
M("schedule-of-nothing", lambda: td.schedule([]), D, 'at least one output stage')
M("schedule-of-an-input", lambda: td.schedule(A), D, 'stages made by td.compute', 'Input A')
M("schedule-primitive-list-with-junk", lambda: td.schedule(C, [5]), S, '5 is not a schedule primitive', 'td.Split')
M("build-a-number", lambda: td.build(5), S, 'td.schedule(...)', 'got 5')
M("build-unknown-target", lambda: td.build(sched(), target="cuda"), Ar, "'cuda'", 'c, llvm')
M("lower-a-string", lambda: td.lower("C"), S, 'td.schedule(...)', "'C'")

# schedules: stages and loops
M("split-unknown-stage", lambda: sched().split("Z", y, 4), S, "'Z'", 'stages are: C')
M("split-an-input", lambda: sched().split(A, y, 4), S, "split(A, 'y', 4)", "'A' is an input", 'schedulable stages are: C')
M("split-stage-of-another-pipeline", lambda: sched().split(other, y2, 2), S, "stage 'other' is not part of this pipeline", 'schedulable stages are: C')
M("split-input-of-another-pipeline", lambda: sched().split(other_in, y2, 2), S, "'other_in' is an input of another pipeline", 'schedulable stages are: C')
M("split-unknown-loop", lambda: sched().split(C, "z", 4), S, "stage C has no loop 'z'", 'its loops are: y k x')
M("split-dim-of-another-stage", lambda: blur().split(bx, "q", 4), S, "stage bx has no loop 'q'", 'its loops are: y x')
M("split-loop-not-a-name", lambda: sched().split(C, 3, 4), S, 'split', '3 is not a loop name', 'Python identifier', 'td.dim')
M("split-factor-zero", lambda: sched().split(C, y, 0), S, "split(C, 'y', 0)", 'positive int')
M("split-factor-negative", lambda: sched().split(C, y, -2), S, "split(C, 'y', -2)", 'positive int')
M("split-factor-float", lambda: sched().split(C, y, 2.5), S, "split(C, 'y', 2.5)", 'positive int')
M("split-factor-bool", lambda: sched().split(C, y, True), S, "split(C, 'y', True)", 'positive int')
M("split-factor-string", lambda: sched().split(C, y, "4"), S, "split(C, 'y', '4')", 'positive int')
M("split-one-name", lambda: sched().split(C, y, 4, names=("a",)), S, "split(C, 'y', 4, ('a',))", 'two loop names')
M("split-names-one-string", lambda: sched().split(C, y, 4, names="ab"), S, 'split', "names='ab'", 'list of loop names')
M("split-names-repeat", lambda: sched().split(C, y, 4, names=("a", "a")), S, 'different names', "'a' twice")
M("split-name-taken", lambda: sched().split(C, y, 4, names=("k", "y_i")), S, "stage C already has a loop named 'k'", 'names=')
M("split-name-invalid", lambda: sched().split(C, y, 4, names=("y-o", "y_i")), S, "'y-o' is not a loop name", "Python identifier")
M("split-twice", lambda: sched().split(C, y, 4).split(C, y, 2), S, "split(C, 'y', 2)", "no loop 'y'", 'y_o y_i k x')
M("split-after-vectorize", lambda: sched().vectorize(C, k).split(C, k, 2), S, "split(C, 'k', 2)", 'already vectorized', 'split it before')
M("tile-unknown-loop", lambda: sched().tile(C, y=4, z=4), S, 'tile(C, y=4, z=4)', "no loop 'z'", 'y k x')
M("tile-not-adjacent", lambda: sched().tile(C, y=4, x=4), S, 'tile(C, y=4, x=4)', 'adjacent', 'y k x', 'reorder')
M("tile-wrong-order", lambda: sched().tile(C, k=2, y=4), S, 'tile(C, k=2, y=4)', 'adjacent and in this order', 'y k x')
M("tile-factor-zero", lambda: sched().tile(C, y=0, k=2), S, 'tile(C, y=0, k=2)', 'positive int')
M("reorder-unknown-loop", lambda: sched().reorder(C, "y k q"), S, 'reorder', "no loop 'q'", 'y k x')
M("reorder-repeated-loop", lambda: sched().reorder(C, "y y x"), S, 'reorder', "['y'] listed more than once")
M("reorder-update-against-dependence",
  lambda: td.build(td.schedule(scan).split(step, r, 4).reorder(step, "r_i r_o")), S, 'scan.u0', 'r_i r_o', 'flow dependence on scan', 'scan[r - 1]')
M("fuse-not-adjacent", lambda: sched().fuse(C, y, x), S, "fuse(C, 'y', 'x')", 'directly outside', 'y k x')
M("fuse-unknown-loop", lambda: sched().fuse(C, y, "q"), S, "fuse(C, 'y', 'q')", "no loop 'q'")
M("fuse-wrong-order", lambda: sched().fuse(C, k, y), S, "fuse(C, 'k', 'y')", 'k must be directly outside y')
M("vectorize-symbolic-extent", lambda: sched().vectorize(C, y), S, "vectorize(C, 'y')", 'no constant extent', "split(C, 'y', 8)")
M("vectorize-unknown-loop", lambda: sched().vectorize(C, "q"), S, "vectorize(C, 'q')", "no loop 'q'", 'y k x')
M("vectorize-reduction-without-reassociate", lambda: td.build(sched().vectorize(C, x)), S, "vectorize(C, 'x')", 'reduction loop', 'reassociate=True')
M("unroll-symbolic-extent", lambda: sched().unroll(C, y), S, "unroll(C, 'y')", 'no constant extent', "split(C, 'y', 8)")
M("unroll-unknown-loop", lambda: sched().unroll(C, "y_i"), S, "unroll(C, 'y_i')", "no loop 'y_i'")
M("parallel-reduction-without-reassociate", lambda: td.build(sched().parallel(C, x)), S, "parallel(C, 'x')", 'reduction loop', 'reassociate=True')
M("parallel-scan-update", lambda: td.build(td.schedule(scan).parallel(step, r)), S, "parallel(scan.u0, 'r')", 'flow dependence on scan', 'cannot run in parallel')
M("vectorize-scan-update", lambda: td.build(td.schedule(scan).vectorize(step, r)), S, "vectorize(scan.u0, 'r')", 'flow dependence', 'vector lanes')
# schedules: placement
M("inline-an-output", lambda: blur().compute_inline(by), S, 'compute_inline(by)', 'output', 'only intermediate stages')
M("inline-an-input", lambda: blur().compute_inline(img), S, 'compute_inline(img)', "'img' is an input", 'bx, by')
M("inline-then-split", lambda: blur().compute_inline(bx).split(bx, y, 2), S, "split(bx, 'y', 2)", 'inlined')
M("inline-twice", lambda: blur().compute_inline(bx).compute_inline(bx), S, 'compute_inline(bx)', 'inlined')
M("compute-at-unknown-loop", lambda: blur().compute_at(bx, by, "y_o"), S, "compute_at(bx, by, 'y_o')", "no loop 'y_o'", 'y x')
M("compute-at-not-a-consumer", lambda: blur().compute_at(bx, bx, y), S, "compute_at(bx, bx, 'y')", 'its own loops')
M("compute-at-output", lambda: blur().compute_at(by, bx, y), S, "compute_at(by, bx, 'y')", 'output', 'intermediate stages')
M("compute-at-input", lambda: blur().compute_at(img, by, y), S, "compute_at(img, by, 'y')", "'img' is an input")
M("compute-at-consumer-of-another-pipeline", lambda: blur().compute_at(bx, other, y2), S, "stage 'other' is not part of this pipeline", 'bx, by')
M("store-at-unknown-loop", lambda: blur().store_at(bx, by, "q"), S, "store_at(bx, by, 'q')", "no loop 'q'", 'y x')
M("store-at-deeper-than-compute-at", lambda: td.build(
    blur().split(by, y, 2).compute_at(bx, by, "y_o").store_at(bx, by, "x")), S, "store_at(bx, by, 'x')", 'encloses the compute level', "compute_at(bx, by, 'y_o')")
M("compute-at-inlined", lambda: blur().compute_inline(bx).compute_at(bx, by, y), S, "compute_at(bx, by, 'y')", 'inlined')
# schedules: stage-adding primitives
M("cache-write-an-input", lambda: sched().cache_write(A), S, 'cache_write(A)', "'A' is an input", 'stages are: C')
M("cache-write-name-taken", lambda: sched().cache_write(C, "A"), S, "cache_write(C, 'A')", "already has a tensor named 'A'", 'name=')
M("cache-write-name-invalid", lambda: sched().cache_write(C, "1local"), S, "'1local'", 'Python identifier')
M("cache-write-name-keyword", lambda: sched().cache_write(C, "while"), S, "'while'", 'Python identifier')
M("cache-read-not-read-by-consumer", lambda: blur().cache_read(img, [by]), S, 'cache_read(img, [by])', 'by does not read img', 'its readers are: bx')
M("cache-read-tensor-of-another-pipeline", lambda: sched().cache_read(other_in), S, "'other_in' is not a tensor of this pipeline", 'A, B, C')
M("cache-read-name-taken", lambda: sched().cache_read(B, name="C"), S, "already has a tensor named 'C'", 'name=')
M("rfactor-loop-not-a-reduction", lambda: sched().rfactor(C, y, 2), S, "rfactor(C, 'y', 2)", "'y' is not a reduction dim", 'its reduction dims are: x')
M("rfactor-factor-zero", lambda: sched().rfactor(C, x, 0), S, "rfactor(C, 'x', 0)", 'at least 2')
M("rfactor-stage-without-reduction", lambda: blur().rfactor(bx, x, 2), S, "rfactor(bx, 'x', 2)", 'not a reduction')
M("rfactor-unknown-loop", lambda: sched().rfactor(C, "q", 2), S, "'q' is not a reduction dim of C", 'x')
M("layout-of-an-output", lambda: blur().layout(by, "x y"), S, 'layout(by', 'by is an output', 'intermediate stages')
M("layout-missing-dim", lambda: blur().layout(bx, "x"), S, 'layout(bx', 'each dim of bx once', 'y x')
M("layout-repeated-dim", lambda: blur().layout(bx, "x x"), S, 'layout(bx', 'each dim of bx once', 'y x')
M("layout-unknown-dim", lambda: blur().layout(bx, "x q"), S, 'layout(bx', 'each dim of bx once', 'y x')
M("loops-of-unknown-stage", lambda: sched().loops("Z"), S, "'Z'", 'stages are: C')
M("primitive-record-stage-number", lambda: td.schedule(C, [td.Split(7, "y", 2)]), S, "split(7, 'y', 2)", '7 is not a stage', 'stages are: C')

# schedule JSON
M("json-malformed", lambda: td.Schedule.from_json("{", C), S, 'schedule JSON is malformed', 'line 1 column 2')
M("json-not-an-object", lambda: td.Schedule.from_json("[]", C), S, 'must be an object with version 1', 'list')
M("json-wrong-version", lambda: td.Schedule.from_json(json_with(version=2), C), S, '"version" must be 1', 'got 2')
M("json-other-outputs", lambda: td.Schedule.from_json(json_with(outputs=["by"]), C), S, "['by']", "['C']")
M("json-primitives-number", lambda: td.Schedule.from_json(json_with(primitives=5), C), S, '"primitives" must be a list', 'got 5')
M("json-primitives-object", lambda: td.Schedule.from_json(json_with(primitives={"a": 1}), C), S, '"primitives" must be a list')
M("json-primitive-number", lambda: td.Schedule.from_json(json_with(primitives=[5]), C), S, 'unknown primitive record 5', 'Split, Tile')
M("json-unknown-type", lambda: td.Schedule.from_json(json_of(type="Spilt"), C), S, "'Spilt'", 'Split, Tile')
M("json-missing-field", lambda: td.Schedule.from_json(json_of(factor=None) .replace(
    '"factor": null, ', ''), C), S, 'bad Split record', "'factor'")
M("json-extra-field", lambda: td.Schedule.from_json(json_of(colour="red"), C), S, 'bad Split record', "'colour'")
M("json-names-one-string", lambda: td.Schedule.from_json(json_of(names="ab"), C), S, "names='ab'", 'list of loop names')
M("json-stage-number", lambda: td.Schedule.from_json(json_of(stage=5), C), S, 'stage by 5', 'named by string')
M("json-stage-unknown", lambda: td.Schedule.from_json(json_of(stage="Z"), C), S, "no stage named 'Z'", 'stages are: C')
M("json-loop-number", lambda: td.Schedule.from_json(json_of(loop=3), C), S, '3 is not a loop name')
M("json-factor-string", lambda: td.Schedule.from_json(json_of(factor="4"), C), S, "split(C, 'y', '4')", 'positive int')
M("json-consumers-number", lambda: td.Schedule.from_json(json.dumps({
    "version": 1, "outputs": ["C"],
    "primitives": [{"type": "CacheRead", "tensor": "B", "consumers": 5, "name": None}]}), C), S, 'bad CacheRead record', '"consumers" must be a list', 'got 5')
M("json-not-a-string", lambda: td.Schedule.from_json(5, C), S, 'Schedule.from_json', 'JSON text', 'got int')

# calling a kernel (and td.evaluate, which checks arguments the same way)
M("call-missing-input", lambda: kernel()(A=a_arr()), Ar, "missing input(s) 'B'", 'float32 array over {x: 8, k: 4}', 'A=..., B=...')
M("call-no-arguments", lambda: kernel()(), Ar, "'A'", "'B'", 'A=..., B=...')
M("call-unknown-argument", lambda: kernel()(A=a_arr(), B=b_arr(), Q=1), Ar, "unknown argument 'Q'", 'inputs A, B; outputs C; sizes N')
M("call-misspelt-argument", lambda: kernel()(A=a_arr(), BB=b_arr()), Ar, "unknown argument 'BB'", "did you mean 'B'?")
M("call-lowercase-name", lambda: kernel()(a=a_arr(), b=b_arr()), Ar, "unknown argument 'a'", 'inputs A, B')
M("call-positional", lambda: kernel()(a_arr(), b_arr()), Ar, '2 positional argument(s)', 'by name', 'f(A=..., B=...)', 'optional outputs C')
M("call-intermediate-stage", lambda: blur_kernel()(img=np.ones((16, 16), np.uint16),
                                                  bx=np.ones((16, 14), np.uint16)), Ar, "'bx' is an intermediate stage", 'inputs img; outputs by')
M("call-wrong-dtype", lambda: kernel()(A=a_arr().astype(np.float64), B=b_arr()), Ar, "input 'A' has dtype float64", 'must be float32', 'A.astype(np.float32)')
M("call-int-for-float", lambda: kernel()(A=np.ones((5, 8), np.int32), B=b_arr()), Ar, "input 'A' has dtype int32", 'must be float32')
M("call-list-not-array", lambda: kernel()(A=[[1.0] * 8] * 5, B=b_arr()), Ar, "input 'A' must be a numpy array", 'got list', 'np.asarray')
M("call-scalar-not-array", lambda: kernel()(A=1.0, B=b_arr()), Ar, "input 'A' must be a numpy array", 'got float')
M("call-wrong-rank", lambda: kernel()(A=np.ones(8, np.float32), B=b_arr()), Ar, "input 'A' has 1 dimension(s)", 'must have 2: (y, x)')
M("call-wrong-fixed-extent", lambda: kernel()(A=np.ones((5, 7), np.float32), B=b_arr()), Ar, "input 'A' has length 7 on axis 1 (dim x)", 'must have 8', '(5, 8)')
M("call-transposed", lambda: kernel()(A=a_arr(), B=b_arr().T.copy()), Ar, "input 'B' has length 4 on axis 0 (dim x)", '(8, 4)')
M("call-inconsistent-size", lambda: kernel()(A=a_arr(5), B=b_arr(),
                                             C=np.empty((6, 4), np.float32)), Ar, 'inconsistent size N', "input 'A' has length 5", "output 'C' has length 6")
M("call-size-float", lambda: kernel()(A=a_arr(), B=b_arr(), N=2.5), Ar, 'size N must be an int', '2.5', 'N=16')
M("call-size-bool", lambda: kernel()(A=a_arr(), B=b_arr(), N=True), Ar, 'size N must be an int', 'True')
M("call-size-disagrees", lambda: kernel()(A=a_arr(5), B=b_arr(), N=6), Ar, 'inconsistent size N', 'N=6 was given', "input 'A' has length 5")
M("call-empty-array", lambda: kernel()(A=np.ones((0, 8), np.float32), B=b_arr()), Ar, 'size N must be at least 1', "input 'A' has length 0")
M("call-output-wrong-dtype", lambda: kernel()(A=a_arr(), B=b_arr(),
                                              C=np.empty((5, 4), np.float64)), Ar, "output 'C' has dtype float64", 'float32')
M("call-output-read-only", lambda: kernel()(A=a_arr(), B=b_arr(), C=_read_only((5, 4))), Ar, "output 'C' is read-only", 'writeable')
M("call-output-not-contiguous", lambda: kernel()(A=a_arr(), B=b_arr(),
                                                 C=np.empty((5, 8), np.float32)[:, ::2]), Ar, "output 'C' is not C-contiguous", 'np.empty((5, 4), np.float32)')
M("call-output-aliases-input", lambda: _aliased(), Ar, "output 'C' shares memory with input 'A'", 'A.copy()')
M("call-output-too-large", lambda: td.evaluate(td.compute(
    "huge", {y: N, x: 2**31 - 1}, td.cast(y, td.float32)), N=2**31 - 1), Ar, "output 'huge'", '(2147483647, 2147483647)', 'too large', 'N = 2147483647')
M("call-size-unbindable", lambda: td.evaluate(td.compute("Z", {y: N}, td.cast(y, td.float32))), Ar, 'size N cannot be bound', 'Z dim y', 'N=16')
M("call-size-zero", lambda: td.evaluate(td.compute("Z", {y: N}, td.cast(y, td.float32)), N=0), Ar, 'size N must be at least 1', 'N=0')
M("benchmark-zero-runs", lambda: kernel().benchmark(runs=0, A=a_arr(), B=b_arr()), Ar, 'benchmark', 'runs must be an int >= 1', 'got 0')
M("benchmark-negative-warmup", lambda: kernel().benchmark(warmup=-1, A=a_arr(), B=b_arr()), Ar, 'warmup must be an int >= 0', 'got -1')
M("benchmark-runs-float", lambda: kernel().benchmark(runs=2.5, A=a_arr(), B=b_arr()), Ar, 'runs must be an int >= 1', '2.5')
M("benchmark-accuracy-one", lambda: kernel().benchmark(accuracy=1.0, A=a_arr(), B=b_arr()), Ar, 'accuracy must be None or a fraction in (0, 1)', 'got 1.0')
M("benchmark-accuracy-bool", lambda: kernel().benchmark(accuracy=True, A=a_arr(), B=b_arr()), Ar, 'accuracy must be', 'got True')
M("benchmark-positional", lambda: kernel().benchmark(a_arr(), b_arr()), Ar, 'positional', 'by name', 'A=..., B=...')
M("evaluate-positional", lambda: td.evaluate(C, a_arr(), b_arr()), Ar, 'td.evaluate', 'by position', 'A=..., B=...')
M("evaluate-missing-input", lambda: td.evaluate(C, A=a_arr()), Ar, "missing input(s) 'B'", 'A=..., B=...')
M("evaluate-of-an-input", lambda: td.evaluate(A, A=a_arr()), D, 'stages made by td.compute', 'Input A')

# the environment: the compiler and the compile cache
M("compile-timeout-zero", lambda: td.set_compile_timeout(0), Ar, 'compile timeout', 'positive, finite number of seconds', '0')
M("compile-timeout-infinite", lambda: td.set_compile_timeout(float("inf")), Ar, "compile timeout", "finite", "inf")
M("compile-timeout-string", lambda: td.set_compile_timeout("60"), Ar, 'compile timeout', "'60'")
M("compiler-not-found", lambda: compile_source("int f(void){return 0;}\n", compiler="no-such-cc", cache_dir=_scratch()), Co, "'no-such-cc'", 'PATH')
M("compiler-rejects-source", lambda: compile_source("int f(void){return 0}\n", cache_dir=_scratch()), Co, 'exit status 1', 'generated source kept at', 'expected')

# emit_c
M("emit-name-starts-with-digit", lambda: td.emit_c(sched(), "1kernel", _scratch()), Ar, "kernel name '1kernel'", "e.g. 'blur3x3'")
M("emit-name-c-keyword", lambda: td.emit_c(sched(), "int", _scratch()), Ar, "kernel name 'int'", 'C keyword')
M("emit-name-with-dash", lambda: td.emit_c(sched(), "my-kernel", _scratch()), Ar, "kernel name 'my-kernel'", 'letters, digits and underscores')
M("emit-name-underscore", lambda: td.emit_c(sched(), "_k", _scratch()), Ar, "kernel name '_k'", "not starting with a digit or '_'")
M("emit-name-not-a-string", lambda: td.emit_c(sched(), 5, _scratch()), Ar, 'kernel name 5')
M("emit-directory-under-a-file", lambda: td.emit_c(sched(), "kern", _under_a_file()), Ar, 'kern.c and kern.h', 'plain_file', 'Not a directory')
M("emit-a-number", lambda: td.emit_c(5, "kern", _scratch()), S, 'td.schedule(...)', 'got 5')

# boundary views, reductions and updates, more
M("clamp-view-plus-scalar", lambda: td.clamp(A) + 1, D, "tensor 'A' used without indices", "A[y, x]")
M("pad-value-out-of-range", lambda: td.pad(img, 70000), D, "70000", "td.uint16")
M("pad-negative-for-unsigned", lambda: td.pad(img, -1), D, "-1", "td.uint16")
M("clamp-view-float-index", lambda: td.clamp(A)[y, 1.5], D, "A: index 1 (1.5)", "integers")
M("update-through-a-view", lambda: td.update(td.clamp(scan)[r], scan[r - 1], over={r: (1, 32)}),
  D, "td.update", "td.clamp(scan)[r]", "stage made by td.compute")
M("update-value-reduction-over-its-own-dim", lambda: td.update(scan[r], td.sum(seq[r], over={r: 32}), over={r: 32}),
  D, "td.update of scan", "reduces over r", "a name an enclosing loop already has")
M("update-target-index-reduction", lambda: td.update(scan[td.sum(seq[k], over={k: 32}) % 32], 1, over={r: 32}),
  D, "td.update of scan", "contains a reduction")
M("sum-over-float-bound", lambda: td.sum(A[y, x], over={x: (0, 2.5)}), D, "td.sum over x", "bound 2.5")
M("sum-of-bool-without-dtype", lambda: td.sum(A[y, x] > 0, over=x), D, "bool expression", "dtype=td.int32")
M("sum-over-string-key", lambda: td.sum(A[y, x], over={"x": 8}), D, "over= key 'x'", "td.dim")
M("sum-nested-over-the-same-dim", lambda: td.compute(
    "Q", {y: N}, td.sum(td.sum(A[y, x], over=x), over=x)), D, "stage 'Q'", "reduces over x",
  "a name an enclosing loop already has (y, x)", "another name")
M("extent-with-reduction", lambda: td.input("Q", {y: N + td.sum(A[y, x], over=x)}, td.float32),
  D, "input 'Q', dim y", "only use sizes and constants")
M("extent-is-a-dim", lambda: td.input("Q", {y: x}, td.float32), D, "input 'Q', dim y", "not x")
M("stage-larger-than-its-input", lambda: td.build(td.compute("Q", {y: N, x: 9}, A[y, x])),
  D, "Q accesses A[y, x] out of range", "x=8", "td.clamp(A)")
M("input-dtype-object", lambda: td.input("Q", {y: 4}, object), D, "unsupported dtype", "td.float32")
M("cast-to-none", lambda: td.cast(A[y, x], None), D, "unsupported dtype None", "td.float32")

# schedules, more
M("vectorize-reassociate-string", lambda: sched().vectorize(C, x, reassociate="yes"), S,
  "vectorize(C, 'x', reassociate='yes')", "True or False")
M("tile-without-factors", lambda: sched().tile(C), S, "tile", "at least one loop", "tile(C, i=32, j=64)")
M("reorder-nothing", lambda: sched().reorder(C), S, "reorder(C", "at least two loops")
M("fuse-loop-with-itself", lambda: sched().fuse(C, y, y), S, "fuse(C, 'y', 'y')", "y k x")
M("compute-at-stage-that-does-not-use-it", lambda: td.schedule((by, C)).compute_at(bx, C, y), S,
  "compute_at(bx, C, 'y')", "C does not use bx", "consumers are: by")
M("layout-of-inlined", lambda: blur().compute_inline(bx).layout(bx, "x y"), S, "layout(bx", "inlined")
M("cache-write-twice", lambda: sched().cache_write(C).cache_write(C), S,
  "cache_write(C)", "'C_local'", "name=")
M("cache-write-after-split", lambda: sched().split(C, y, 2).cache_write(C), S,
  "cache_write(C)", "already scheduled", "apply cache_write first")
M("rfactor-names-repeat", lambda: sched().rfactor(C, x, 2, names=("a", "a")), S, "rfactor(C", "'a'", "names=")
M("rfactor-name-taken", lambda: sched().rfactor(C, x, 2, name="A"), S, "tensor named 'A'", "name=")
M("rfactor-names-one-string", lambda: sched().rfactor(C, x, 2, names="ab"), S,
  "names='ab'", "list of loop names")
M("json-tile-factors-string", lambda: td.Schedule.from_json(json.dumps({
    "version": 1, "outputs": ["C"], "primitives": [{"type": "Tile", "stage": "C", "factors": "ab"}]}), C),
  S, "tile", "(loop, factor) pairs", "'ab'")
M("json-tile-factor-pair-short", lambda: td.Schedule.from_json(json.dumps({
    "version": 1, "outputs": ["C"], "primitives": [{"type": "Tile", "stage": "C", "factors": [["y"]]}]}),
    C), S, "tile", "(loop, factor) pairs", "('y',)")
M("json-reorder-loops-string", lambda: td.Schedule.from_json(json.dumps({
    "version": 1, "outputs": ["C"], "primitives": [{"type": "Reorder", "stage": "C", "loops": "k y x"}]}),
    C), S, "reorder", "loops='k y x'", "list of loop names")
M("json-layout-dims-string", lambda: td.Schedule.from_json(json.dumps({
    "version": 1, "outputs": ["by"], "primitives": [{"type": "Layout", "stage": "bx", "dims": "xy"}]}),
    by), S, "layout", "dims='xy'", "list of loop names")
M("from-json-for-a-number", lambda: td.Schedule.from_json(sched().to_json(), 5), D, "outputs", "got 5")

# arguments, more
M("call-size-string", lambda: kernel()(A=a_arr(), B=b_arr(), N="5"), Ar, "size N must be an int", "'5' (str)")
M("call-input-none", lambda: kernel()(A=None, B=b_arr()), Ar, "input 'A' must be a numpy array", "NoneType")
M("call-output-wrong-shape", lambda: kernel()(A=a_arr(), B=b_arr(), C=np.empty((5, 5), np.float32)),
  Ar, "output 'C' has length 5 on axis 1 (dim k)", "must have 4", "(5, 4)")
M("call-output-list", lambda: kernel()(A=a_arr(), B=b_arr(), C=[[0.0] * 4] * 5), Ar,
  "output 'C' must be a numpy array", "got list")
M("evaluate-output-wrong-shape", lambda: td.evaluate(C, A=a_arr(), B=b_arr(),
                                                     C=np.empty((5, 3), np.float32)),
  Ar, "output 'C' has length 3 on axis 1 (dim k)", "(5, 4)")
M("evaluate-a-number", lambda: td.evaluate(5), D, "outputs", "td.compute", "got 5")


# ---------------------------------------------------------------- helpers the entries use

_SCRATCH: list = []


def _scratch() -> str:
    return str(_SCRATCH[-1] / "out")


def _under_a_file() -> str:
    blocker = _SCRATCH[-1] / "plain_file"
    blocker.write_text("not a directory")
    return str(blocker / "out")


def _read_only(shape) -> np.ndarray:
    a = np.empty(shape, np.float32)
    a.flags.writeable = False
    return a


def _aliased():
    buf = np.ones((5, 8), np.float32)
    return kernel()(A=buf, B=b_arr(), C=buf.reshape(-1)[:20].reshape(5, 4))


# ---------------------------------------------------------------- the tests


@pytest.mark.parametrize("case", CATALOGUE, ids=[c.id for c in CATALOGUE])
def test_mistake(case: Mistake, tmp_path):
    _SCRATCH.append(tmp_path)
    try:
        with pytest.raises(td.TdslError) as info:
            case.act()
    finally:
        _SCRATCH.pop()
    err = info.value
    assert type(err) is case.error, f"{type(err).__name__} instead of {case.error.__name__}: {err}"
    message = str(err)
    for part in case.says:
        assert part in message, f"{part!r} not in the message: {message}"
    if os.environ.get("TDSL_SHOW_MISTAKES"):
        print(f"\n[{case.id}] {type(err).__name__}: {message}")


def test_catalogue_ids_are_unique_and_many():
    ids = [c.id for c in CATALOGUE]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 120


UNUSABLE_CACHES = {
    "cache-under-a-regular-file": lambda tmp: _file_in(tmp) / "cache",
    "cache-is-a-regular-file": lambda tmp: _file_in(tmp),
}


def _file_in(tmp):
    blocker = tmp / "plain_file"
    blocker.write_text("not a directory")
    return blocker


@pytest.mark.parametrize("where", list(UNUSABLE_CACHES))
def test_unusable_cache_directory_warns_and_still_builds(where, tmp_path):
    cache = UNUSABLE_CACHES[where](tmp_path)
    src = f"int tdsl_mistake_{where.replace('-', '_')}(int v) {{ return v; }}\n"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        path = compile_source(src, cache_dir=cache)
    assert os.path.exists(path)
    messages = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
    assert messages and str(cache) in messages[0] and "temporary directory" in messages[0]


# ---------------------------------------------------------------- what the fixes must not break


def test_printed_expressions_keep_boundary_views():
    e = td.clamp(A)[y - 1, x] + td.pad(A, 0)[y + 1, x]
    assert repr(e) == "td.clamp(A)[y - 1, x] + td.pad(A, 0.0)[y + 1, x]"
    stage = td.compute("edges", {y: N, x: 8}, e)
    assert "td.clamp(A)[y - 1, x]" in repr(stage.expr)


def test_numpy_scalars_still_combine_with_expressions():
    """A numpy scalar on either side of an operator is a typed operand, as in numpy."""
    e = A[y, x]
    column = np.ones(3, np.float32)
    for scalar in (np.float32(2), np.float64(2), np.int64(3), np.uint8(1)):
        for left, right, want in ((scalar, e, scalar * column), (e, scalar, column * scalar)):
            built = left * right
            assert built.dtype == td.dtypes.as_dtype(want.dtype), (left, right)
    assert repr(np.float32(2) * e) == "2.0 * A[y, x]"
    assert repr(np.float32(1) < e) == "1.0 < A[y, x]"
    assert repr(np.float32(1) - e) == "1.0 - A[y, x]"


def test_emit_c_creates_a_missing_directory(tmp_path):
    out = tmp_path / "a" / "b"
    c_path, h_path = td.emit_c(sched(), "kern", out)
    assert c_path.exists() and h_path.exists() and c_path.parent == out


def test_a_one_dim_tuple_from_td_dims_gets_a_hint():
    x = td.dims("x")  # a 1-tuple
    with pytest.raises(td.DefinitionError, match=r"tuple of one dim.*x = td.dim\('x'\)"):
        td.input("X", {x: 4}, td.float32)


def test_a_transposed_array_is_named_not_the_array_its_size_made_look_wrong():
    """N and K bound from a transposed A made B look wrong; the message lists the shapes
    and names the array that fits with its axes reversed."""
    i, j, k = td.dims("i j k")
    N, K, M = td.size("N"), td.size("K"), td.size("M")
    A = td.input("A", {i: N, k: K}, td.float32)
    B = td.input("B", {k: K, j: M}, td.float32)
    C = td.compute("C", {i: N, j: M}, td.sum(A[i, k] * B[k, j], over=k))
    f = td.build(td.schedule(C))
    a, b = np.ones((10, 6), np.float32), np.ones((6, 4), np.float32)
    with pytest.raises(td.ArgumentError) as e:
        f(A=a.T, B=b)
    assert "Shapes given: A (6, 10) for [N, K]; B (6, 4) for [K, M]" in str(e.value)
    assert "A with its axes reversed, shape (10, 6), would fit: is A transposed?" in str(e.value)
    with pytest.raises(td.ArgumentError, match="is B transposed"):
        f(A=a, B=b.T)


def test_a_schedule_primitive_looked_up_on_the_module_points_to_the_schedule():
    with pytest.raises(AttributeError, match=r"split is a schedule primitive.*help\(td.Schedule.split\)"):
        td.split  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'$"):
        td.nothing_here  # noqa: B018
    assert "split" in td.Schedule.split.__doc__ or td.Schedule.split.__doc__


def _raise_from_user_code():
    (i,) = td.dims("i")
    X = td.input("X", {i: 8}, td.float32)
    Y = td.compute("Y", {i: 8}, X[i] + 1)
    td.schedule(Y).split(Y, "nope", 2)


def test_in_ipython_a_user_error_shows_the_users_frames_and_the_message_only():
    with pytest.raises(td.ScheduleError) as e:
        _raise_from_user_code()
    (shown,) = e.value._render_traceback_()
    assert shown.startswith("Traceback (most recent call last):")
    assert "_raise_from_user_code" in shown and "td.schedule(Y).split(Y, \"nope\", 2)" in shown
    package = os.path.dirname(td.__file__)
    assert package not in shown
    assert shown.rstrip().splitlines()[-1].startswith("tdsl.errors.ScheduleError: split")
    td.TdslError.internal_frames = True
    try:
        (everything,) = e.value._render_traceback_()
    finally:
        td.TdslError.internal_frames = False
    assert package in everything
