"""tdsl fuzz finding.

class: error
target: llvm
seed: 62
case: 234
shrunk: yes

Traceback (most recent call last):
  File "/tdsl/fuzz/case.py", line 89, in run_task
    judge(task, send, res)
  File "/tdsl/fuzz/case.py", line 124, in judge
    f = build(task, send, res, s)
        ^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/tdsl/fuzz/case.py", line 168, in build
    res["nest_lines"] = str(td.lower(s)).count("\\n") + 1
                            ^^^^^^^^^^^
  File "/tdsl/api.py", line 44, in lower
    return lower_schedule(as_schedule(s), name, trace=trace, late=trace)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/tdsl/lower/__init__.py", line 175, in lower_schedule
    steps = bounded(what, lambda: _lower(sched, name, what, trace, workspace,
            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/tdsl/lower/poly/budget.py", line 245, in bounded
    raise value
islpy._isl.Error: call to isl_ast_build_expr_from_pw_aff failed: cannot handle void expression in /project/isl/isl_ast_build_expr.c:2267
"""

import numpy as np

import tdsl as td

INPUTS = {'in1': ((1,), 'float32')}

def make_array(rng, shape, dtype, special):
    """Random input data: small values, sometimes extremes, NaN and infinities."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dt.kind == "f":
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

y, k0, = td.dims('y k0')
in1 = td.input('in1', {y: 1}, td.float32)
s2 = td.compute('s2', {y: 1}, td.cast(1, td.int32))
s3 = td.compute('s3', {y: 1}, (td.max(s2[k0], over={k0: (1, 1)}) + td.clamp(in1)[y + 2]))
outputs = [s3]
s = td.schedule(outputs)
s = s.compute_at('s2', 's3', 'y')
arrays = make_arrays(1725378375, False)
arrays.update({})  # sizes no input shape may bind

TARGET = "llvm"
TOL = 5.0625
BASE = 1e-05  # float32's when any tensor is float32
SCALE = 2147483648.7908998  # largest magnitude of any stage
SPEC = '{"sizes": {}, "dims": {"y": 1}, "inputs": [{"name": "in1", "dims": ["y"], "dtype": "float32"}], "stages": [{"kind": "compute", "name": "s2", "dims": ["y"], "expr": ["c", 1, "int32"]}, {"kind": "compute", "name": "s3", "dims": ["y"], "expr": ["b", "+", ["r", "max", ["a", "s2", null, [["i", "k0"]]], [["k0", "1", "1"]], null], ["a", "in1", "clamp", [["i", "y + 2"]]]]}], "outputs": ["s3"], "array_seed": 1725378375, "special_values": false, "tol": 5.0625, "schedule": [["compute_at", ["s2", "s3", "y"], {}]], "scale": 2147483648.7908998}'


def main(target=TARGET):
    """Build on `target`, call twice, compare with td.evaluate; print what differs."""
    with np.errstate(all="ignore"):
        f = td.build(s, target=target)
        got = f(**arrays)
        got = got if isinstance(got, tuple) else (got,)
        for out, g in zip(outputs, got):
            want = td.evaluate(out, **arrays)
            if want.dtype.kind == "f":
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
