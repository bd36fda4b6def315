"""tdsl fuzz finding.

class: error
target: c
seed: 555
case: 30
shrunk: yes

Traceback (most recent call last):
  File "/work/wt/try/tdsl/fuzz/case.py", line 73, in run_task
    judge(task, send, res)
  File "/work/wt/try/tdsl/fuzz/case.py", line 97, in judge
    f = build(task, send, res, s)
        ^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/wt/try/tdsl/fuzz/case.py", line 125, in build
    td.lower(s)
  File "/work/wt/try/tdsl/api.py", line 27, in lower
    return lower_schedule(_as_schedule(s), name)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/wt/try/tdsl/lower/__init__.py", line 63, in lower_schedule
    func = verify(convert(model, ast, vectors, name))
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/wt/try/tdsl/lower/passes/verify.py", line 103, in verify
    _stmt(func.body, scope, set())
  File "/work/wt/try/tdsl/lower/passes/verify.py", line 73, in _stmt
    _stmt(x, scope, bufs)
  File "/work/wt/try/tdsl/lower/passes/verify.py", line 62, in _stmt
    _stmt(body, scope | {var}, bufs)
  File "/work/wt/try/tdsl/lower/passes/verify.py", line 84, in _stmt
    _stmt(body, scope, bufs | {buf.name})
  File "/work/wt/try/tdsl/lower/passes/verify.py", line 73, in _stmt
    _stmt(x, scope, bufs)
  File "/work/wt/try/tdsl/lower/passes/verify.py", line 70, in _stmt
    _stmt(e, scope, bufs)
  File "/work/wt/try/tdsl/lower/passes/verify.py", line 73, in _stmt
    _stmt(x, scope, bufs)
  File "/work/wt/try/tdsl/lower/passes/verify.py", line 68, in _stmt
    _stmt(t, scope, bufs)
  File "/work/wt/try/tdsl/lower/passes/verify.py", line 86, in _stmt
    raise VerifyError(f"unknown statement {s!r}")
tdsl.lower.passes.verify.VerifyError: unknown statement <tdsl.lower.poly.from_ast._Bind object at 0x7fce00888190>
"""

import numpy as np

import tdsl as td

INPUTS = {'lut': ((1,), 'float32')}

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

L = td.size('L')
y, x, c, v, k0, = td.dims('y x c v k0')
lut = td.input('lut', {v: 1}, td.float32)
s1 = td.compute('s1', {y: 1, x: 1, c: 4}, lut[0])
s2 = td.compute('s2', {y: 1, c: 4}, td.sum(td.clamp(s1)[y, -1, 2 * k0 - 1], over={k0: 16}))
outputs = [s2]
s = td.schedule(outputs)
s = s.fuse('s2', 'c', 'k0')
s = s.split('s2', 'c_k0', 1)
s = s.compute_at('s1', 's2', 'c_k0_o')
arrays = make_arrays(1468697686, False)
arrays.update({})  # sizes no input shape may bind

TARGET = 'c'
TOL = 74358.0
BASE = 1e-05  # float32's when any tensor is float32
SCALE = 18.518007278442383  # largest magnitude of any stage
SPEC = '{"sizes": {"L": 1}, "dims": {"y": 1, "x": 1, "c": 4, "v": 1}, "inputs": [{"name": "lut", "dims": ["v"], "dtype": "float32"}], "stages": [{"kind": "compute", "name": "s1", "dims": ["y", "x", "c"], "expr": ["a", "lut", null, [["i", "0"]]]}, {"kind": "compute", "name": "s2", "dims": ["y", "c"], "expr": ["r", "sum", ["a", "s1", "clamp", [["i", "y"], ["i", "-1"], ["i", "2 * k0 - 1"]]], [["k0", null, "16"]], null]}], "outputs": ["s2"], "array_seed": 1468697686, "special_values": false, "tol": 74358.0, "schedule": [["fuse", ["s2", "c", "k0"], {}], ["split", ["s2", "c_k0", 1], {}], ["compute_at", ["s1", "s2", "c_k0_o"], {}]], "scale": 18.518007278442383}'


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
