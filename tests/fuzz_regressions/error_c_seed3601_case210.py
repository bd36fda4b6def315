"""tdsl fuzz finding.

class: error
target: c
seed: 3601
case: 210
shrunk: yes

Traceback (most recent call last):
  File "/work/main/tdsl/fuzz/case.py", line 91, in run_task
    judge(task, send, res)
  File "/work/main/tdsl/fuzz/case.py", line 126, in judge
    f = build(task, send, res, s)
        ^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/main/tdsl/fuzz/case.py", line 170, in build
    res["nest_lines"] = str(td.lower(s)).count("\\n") + 1
                            ^^^^^^^^^^^
  File "/work/main/tdsl/api.py", line 45, in lower
    return lower_schedule(as_schedule(s), name, trace=trace, late=trace)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/main/tdsl/lower/__init__.py", line 181, in lower_schedule
    steps = bounded(what, lambda: _lower(sched, name, what, trace, workspace, passes))
            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/main/tdsl/lower/poly/budget.py", line 253, in bounded
    raise value
tdsl.lower.passes.verify.VerifyError: temp buffer s2 used outside its Allocate
"""

# ruff: noqa: E712, UP034
import numpy as np

import tdsl as td

INPUTS = {}

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

W = td.size('W')
y, x, k1, = td.dims('y x k1')
s2 = td.compute('s2', {x: 1}, td.cast(x, td.float32))
s3 = td.compute('s3', {y: 1}, td.reduce(lambda acc: (td.maximum(acc[0], td.pad(s2, -0.5)[k1]), td.where(td.pad(s2, -0.5)[k1] > acc[0], k1, acc[1])), init=(-np.inf, 0), over={k1: (1, 1)}, dtype=(td.float32, td.int64))[1])
outputs = [s3]
s = td.schedule(outputs)
s = s.split('s3', 'y', 8)
s = s.tile('s3', y_o=1, y_i=16)
s = s.compute_at('s2', 's3', 'y_i_o')
arrays = make_arrays(1915885644, False)
arrays.update({})  # sizes no input shape may bind

TARGET = 'c'
TOL = 1037.970703125
BASE = 1e-05  # that of the least precise float type
SCALE = 1.0  # largest magnitude of any stage
SPEC = '{"sizes": {"W": 1}, "dims": {"y": 1, "x": 1}, "inputs": [], "stages": [{"kind": "compute", "name": "s2", "dims": ["x"], "expr": ["cast", "float32", ["d", "x"]]}, {"kind": "compute", "name": "s3", "dims": ["y"], "expr": ["r", "foldmax", ["a", "s2", ["pad", -0.5], [["i", "k1"]]], [["k1", "1", "1"]], "float32"]}], "outputs": ["s3"], "array_seed": 1915885644, "special_values": false, "tol": 1037.970703125, "schedule": [["split", ["s3", "y", 8], {}], ["tile", ["s3"], {"y_o": 1, "y_i": 16}], ["compute_at", ["s2", "s3", "y_i_o"], {}]], "scale": 1.0}'


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
