"""tdsl fuzz finding.

class: error
target: llvm
seed: 202
case: 14

Traceback (most recent call last):
  File "/work/main/tdsl/fuzz/case.py", line 108, in judge
    want = td.evaluate(outputs, **arrays)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/main/tdsl/compute/evaluate.py", line 125, in evaluate
    _define(stage, values, bound.sizes, out)
  File "/work/main/tdsl/compute/evaluate.py", line 150, in _define
    _reduce(pts, red, 0, out)
  File "/work/main/tdsl/compute/evaluate.py", line 160, in _reduce
    _points(pts, red.axes, level, step)
  File "/work/main/tdsl/compute/evaluate.py", line 188, in _points
    _points(pts, axes, level + 1, step)
  File "/work/main/tdsl/compute/evaluate.py", line 181, in _points
    step()
  File "/work/main/tdsl/compute/evaluate.py", line 157, in step
    body = pts.value(red.body)
           ^^^^^^^^^^^^^^^^^^^
  File "/work/main/tdsl/compute/evaluate.py", line 324, in value
    v = astype(self.value(a), d)
               ^^^^^^^^^^^^^
  File "/work/main/tdsl/compute/evaluate.py", line 307, in value
    v = NUMPY_BINARY[op](self.value(a), self.value(b))
                                        ^^^^^^^^^^^^^
  File "/work/main/tdsl/compute/evaluate.py", line 324, in value
    v = astype(self.value(a), d)
               ^^^^^^^^^^^^^
  File "/work/main/tdsl/compute/evaluate.py", line 324, in value
    v = astype(self.value(a), d)
               ^^^^^^^^^^^^^
  File "/work/main/tdsl/compute/evaluate.py", line 305, in value
    v = self.access(e)
        ^^^^^^^^^^^^^^
  File "/work/main/tdsl/compute/evaluate.py", line 417, in access
    idx, inside = self.locate(e)
                  ^^^^^^^^^^^^^^
  File "/work/main/tdsl/compute/evaluate.py", line 449, in locate
    self._bad_index(e, pos, v, n, write)
  File "/work/main/tdsl/compute/evaluate.py", line 494, in _bad_index
    raise ArgumentError(
tdsl.errors.ArgumentError: stage 's2': s1[td.pad(s1, -1)[k2 + 2]] reads s1 at a data-dependent index 36 on axis 0 (dim y of s1) at y=0, k2=6; valid indices are 0..30. Fix the data, or index a view that defines such indices: td.clamp(s1) reads the nearest element, td.pad(s1, value) a constant, td.wrap(s1) wraps around

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/work/main/tdsl/fuzz/case.py", line 90, in run_task
    judge(task, send, res)
  File "/work/main/tdsl/fuzz/case.py", line 113, in judge
    f = build(task, send, res, s)
        ^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/main/tdsl/fuzz/case.py", line 169, in build
    res["nest_lines"] = str(td.lower(s)).count("\\n") + 1
                            ^^^^^^^^^^^
  File "/work/main/tdsl/api.py", line 45, in lower
    return lower_schedule(as_schedule(s), name, trace=trace, late=trace)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/main/tdsl/lower/__init__.py", line 179, in lower_schedule
    steps = bounded(what, lambda: _lower(sched, name, what, trace, workspace, passes))
            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
"""

# ruff: noqa: E712, UP034
import numpy as np

import tdsl as td

INPUTS = {'in0': ((31,), 'int32'), 'in1': ((31,), 'bool')}

def make_array(rng, shape, dtype, special):
    """Random input data: small values, sometimes extremes, NaN and infinities."""
    dt = td.dtypes.as_dtype(dtype).np  # (bfloat16: ml_dtypes')
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dt.kind == "f" or dt.name == "bfloat16":
        a = rng.uniform(-4, 4, size=shape).astype(dt)
        if special and a.size:
            flat = a.reshape(-1)
            for v in (np.nan, np.inf, -np.inf, 0.0, -0.0):
                flat[rng.integers(a.size)] = v
        return a
    info = np.iinfo(dt)
    if special or rng.random() < 0.3:
        return rng.integers(info.min, int(info.max) + 1, size=shape, dtype=dt)
    lo = 0 if dt.kind == "u" else -6
    return rng.integers(lo, 7, size=shape).astype(dt)


def make_arrays(seed, special):
    rng = np.random.default_rng(seed)
    return {name: make_array(rng, shape, dtype, special)
            for name, (shape, dtype) in INPUTS.items()}

H = td.size('H')
y, k0, k1, k2, = td.dims('y k0 k1 k2')
in0 = td.input('in0', {y: H}, td.int32)
in1 = td.input('in1', {y: H}, td.bool_)
in2 = td.input('in2', {y: H}, td.float32)
s0 = td.compute('s0', {y: H}, td.min(td.maximum(td.pad(in1, True)[k0], td.cast(y, td.bfloat16)), over={k0: (1, H)}))
td.update(s0[y], td.maximum(s0[y - 1], (td.where((td.clamp(in1)[2 * y - 1] == True), s0[y], td.clamp(s0)[y + 2]) - (y * td.cast(td.pad(s0, 0)[y], td.float32)))), over={y: (1, H)})
td.update(s0[y], (s0[y - 1] / (td.abs(((td.clamp(in1)[2 * y] * y) * td.cast(s0[y], td.float32))) + 1.0)), over={y: (1, H)})
s1 = td.compute('s1', {y: H}, td.reduce(lambda acc: (td.minimum(acc[0], in1[k1]), td.where(in1[k1] < acc[0], k1, acc[1])), init=(True, 0), over={k1: (0, y + 1)}, dtype=(td.bool_, td.int64))[1])
td.update(s1[y], (s1[y - 1] + y), over={y: (1, H)})
s2 = td.compute('s2', {y: H}, td.prod((td.pad(in0, 0)[k2] | td.cast(s1[td.pad(s1, -1)[k2 + 2]], td.uint8)), over={k2: H}, dtype=td.int64))
td.update(s2[y], s2[y - 1], over={y: (1, H)})
td.update(s2[(in0[y] % H)], s2[(in0[y] % H)], over={y: H})
s3 = td.compute('s3', {y: H}, td.abs((s2[y] % (in1[y] // y))))
s4 = td.compute('s4', {y: H}, (td.mirror_interior(s3)[y + 1] % in1[y]))
outputs = [s4]
s = td.schedule(outputs)
s = s.split('s1', 'y', 4)
s = s.parallel('s1', 'y_o')
s = s.split('s2.u0', 'y', 4)
s = s.split('s2.u1', 'y', 2)
s = s.split('s2.u1', 'y_o', 8)
s = s.compute_at('s3', 's4', 'y')
s = s.store_at('s3', 's4', 'y')
s = s.split('s3', 'y', 2)
s = s.unroll('s3', 'y_i')
arrays = make_arrays(357473504, True)
arrays.update({'H': 31})  # sizes no input shape may bind

TARGET = 'llvm'
TOL = 68.34375
BASE = 0.008  # that of the least precise float type
SCALE = 1.0  # largest magnitude of any stage
SPEC = '{"sizes": {"H": 31}, "dims": {"y": "H"}, "inputs": [{"name": "in0", "dims": ["y"], "dtype": "int32"}, {"name": "in1", "dims": ["y"], "dtype": "bool"}, {"name": "in2", "dims": ["y"], "dtype": "float32"}], "stages": [{"kind": "compute", "name": "s0", "dims": ["y"], "expr": ["r", "min", ["b", "max", ["a", "in1", ["pad", true], [["i", "k0"]]], ["cast", "bfloat16", ["d", "y"]]], [["k0", "1", "H"]], null]}, {"kind": "update", "stage": "s0", "name": "s0.u0", "target": [["i", "y"]], "value": ["b", "max", ["a", "s0", null, [["i", "y - 1"]]], ["b", "-", ["w", ["cmp", "==", ["a", "in1", "clamp", [["i", "2 * y - 1"]]], ["c", true, null]], ["a", "s0", null, [["i", "y"]]], ["a", "s0", "clamp", [["i", "y + 2"]]]], ["b", "*", ["d", "y"], ["cast", "float32", ["a", "s0", ["pad", 0], [["i", "y"]]]]]]], "over": [["y", "1", "H"]]}, {"kind": "update", "stage": "s0", "name": "s0.u1", "target": [["i", "y"]], "value": ["b", "/", ["a", "s0", null, [["i", "y - 1"]]], ["b", "+", ["u", "abs", ["b", "*", ["b", "*", ["a", "in1", "clamp", [["i", "2 * y"]]], ["d", "y"]], ["cast", "float32", ["a", "s0", null, [["i", "y"]]]]]], ["c", 1.0, null]]], "over": [["y", "1", "H"]]}, {"kind": "compute", "name": "s1", "dims": ["y"], "expr": ["r", "foldmin", ["a", "in1", null, [["i", "k1"]]], [["k1", "0", "y + 1"]], "bool"]}, {"kind": "update", "stage": "s1", "name": "s1.u0", "target": [["i", "y"]], "value": ["b", "+", ["a", "s1", null, [["i", "y - 1"]]], ["d", "y"]], "over": [["y", "1", "H"]]}, {"kind": "compute", "name": "s2", "dims": ["y"], "expr": ["r", "prod", ["b", "|", ["a", "in0", ["pad", 0], [["i", "k2"]]], ["cast", "uint8", ["a", "s1", null, [["a", "s1", ["pad", -1], [["i", "k2 + 2"]]]]]]], [["k2", null, "H"]], "int64"]}, {"kind": "update", "stage": "s2", "name": "s2.u0", "target": [["i", "y"]], "value": ["a", "s2", null, [["i", "y - 1"]]], "over": [["y", "1", "H"]]}, {"kind": "update", "stage": "s2", "name": "s2.u1", "target": [["b", "%", ["a", "in0", null, [["i", "y"]]], ["i", "H"]]], "value": ["a", "s2", null, [["b", "%", ["a", "in0", null, [["i", "y"]]], ["i", "H"]]]], "over": [["y", null, "H"]]}, {"kind": "compute", "name": "s3", "dims": ["y"], "expr": ["u", "abs", ["b", "%", ["a", "s2", null, [["i", "y"]]], ["b", "//", ["a", "in1", null, [["i", "y"]]], ["d", "y"]]]]}, {"kind": "compute", "name": "s4", "dims": ["y"], "expr": ["b", "%", ["a", "s3", "mirror_interior", [["i", "y + 1"]]], ["a", "in1", null, [["i", "y"]]]]}], "outputs": ["s4"], "array_seed": 357473504, "special_values": true, "tol": 68.34375, "schedule": [["split", ["s1", "y", 4], {}], ["parallel", ["s1", "y_o"], {}], ["split", ["s2.u0", "y", 4], {}], ["split", ["s2.u1", "y", 2], {}], ["split", ["s2.u1", "y_o", 8], {}], ["compute_at", ["s3", "s4", "y"], {}], ["store_at", ["s3", "s4", "y"], {}], ["split", ["s3", "y", 2], {}], ["unroll", ["s3", "y_i"], {}]]}'


def main(target=TARGET):
    """Build on `target`, call twice, compare with td.evaluate; print what differs."""
    with np.errstate(all="ignore"):
        f = td.build(s, target=target)
        got = f(**arrays)
        got = got if isinstance(got, tuple) else (got,)
        for out, g in zip(outputs, got):
            want = td.evaluate(out, **arrays)
            if want.dtype.kind == "f" or want.dtype.name == "bfloat16":
                want = want.astype(np.float64)
                scale = max(SCALE, float(np.max(np.abs(want[np.isfinite(want)]), initial=0)))
                tol = BASE * TOL * scale
                same = np.isclose(got_f := g.astype(np.float64), want, rtol=0, atol=tol,
                                  equal_nan=True) | (got_f == want)
            else:
                same = g == want
            if not np.all(same):
                print(f"{out.name}: WRONG at {np.argwhere(~same)[:5].tolist()}")
                print("expected:", want[~same][:10], "\nactual:  ", g[~same][:10])
                return 1
    print("ok")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else TARGET))
