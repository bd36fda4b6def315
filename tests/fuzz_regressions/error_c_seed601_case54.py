"""tdsl fuzz finding.

class: error
target: c
seed: 601
case: 54
shrunk: yes

Traceback (most recent call last):
  File "/work/wt/atomic/tdsl/fuzz/case.py", line 89, in run_task
    judge(task, send, res)
  File "/work/wt/atomic/tdsl/fuzz/case.py", line 124, in judge
    f = build(task, send, res, s)
        ^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/wt/atomic/tdsl/fuzz/case.py", line 168, in build
    res["nest_lines"] = str(td.lower(s)).count("\\n") + 1
                            ^^^^^^^^^^^
  File "/work/wt/atomic/tdsl/api.py", line 44, in lower
    return lower_schedule(as_schedule(s), name, trace=trace, late=trace)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/wt/atomic/tdsl/lower/__init__.py", line 175, in lower_schedule
    steps = bounded(what, lambda: _lower(sched, name, what, trace, workspace,
            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/wt/atomic/tdsl/lower/poly/budget.py", line 245, in bounded
    raise value
KeyError: 17
"""

import numpy as np

import tdsl as td

INPUTS = {'in0': ((1, 1, 1), 'float32')}

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
C = td.size('C')
L = td.size('L')
y, x, c, v, k0, = td.dims('y x c v k0')
in0 = td.input('in0', {y: H, x: H, c: C}, td.float32)
in1 = td.input('in1', {y: H, x: H, c: C}, td.uint32)
lut = td.input('lut', {v: L}, td.uint32)
s0 = td.compute('s0', {x: H, c: C}, td.reduce(lambda acc: (td.minimum(acc[0], in0[k0, x, c]), td.where(in0[k0, x, c] < acc[0], k0, acc[1])), init=(np.inf, 0), over={k0: (1, H)}, dtype=(td.float32, td.int64))[1])
s1 = td.compute('s1', {y: H, x: H, c: C}, td.clamp(s0)[s0[x, c], c])
outputs = [s1]
s = td.schedule(outputs)
s = s.compute_inline('s0')
arrays = make_arrays(1946835815, False)
arrays.update({'C': 1, 'H': 1})  # sizes no input shape may bind

TARGET = 'c'
TOL = 1.0
BASE = 1e-05  # that of the least precise float type
SCALE = 3.3354814052581787  # largest magnitude of any stage
SPEC = '{"sizes": {"H": 1, "C": 1, "L": 1}, "dims": {"y": "H", "x": "H", "c": "C", "v": "L"}, "inputs": [{"name": "in0", "dims": ["y", "x", "c"], "dtype": "float32"}, {"name": "in1", "dims": ["y", "x", "c"], "dtype": "uint32"}, {"name": "lut", "dims": ["v"], "dtype": "uint32"}], "stages": [{"kind": "compute", "name": "s0", "dims": ["x", "c"], "expr": ["r", "foldmin", ["a", "in0", null, [["i", "k0"], ["i", "x"], ["i", "c"]]], [["k0", "1", "H"]], "float32"]}, {"kind": "compute", "name": "s1", "dims": ["y", "x", "c"], "expr": ["a", "s0", "clamp", [["a", "s0", null, [["i", "x"], ["i", "c"]]], ["i", "c"]]]}], "outputs": ["s1"], "array_seed": 1946835815, "special_values": false, "tol": 1.0, "schedule": [["compute_inline", ["s0"], {}]], "scale": 3.3354814052581787}'


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
