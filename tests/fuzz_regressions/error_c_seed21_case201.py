"""tdsl fuzz finding.

class: error
target: c
seed: 21
case: 201
shrunk: yes

Traceback (most recent call last):
  File "/work/wt/fuzz/tdsl/fuzz/case.py", line 73, in run_task
    judge(task, send, res)
  File "/work/wt/fuzz/tdsl/fuzz/case.py", line 97, in judge
    f = build(task, send, res, s)
        ^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/wt/fuzz/tdsl/fuzz/case.py", line 125, in build
    td.lower(s)
  File "/work/wt/fuzz/tdsl/api.py", line 27, in lower
    return lower_schedule(_as_schedule(s), name)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/wt/fuzz/tdsl/lower/__init__.py", line 46, in lower_schedule
    func = verify(convert(model, ast, vectors, name))
                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/wt/fuzz/tdsl/lower/from_ast.py", line 321, in convert
    buffers = buffers_for(model)
              ^^^^^^^^^^^^^^^^^^
  File "/work/wt/fuzz/tdsl/lower/from_ast.py", line 306, in buffers_for
    shape = tuple(_extent(e, conv_sizes) for e in box.extents)
            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/wt/fuzz/tdsl/lower/from_ast.py", line 306, in <genexpr>
    shape = tuple(_extent(e, conv_sizes) for e in box.extents)
                  ^^^^^^^^^^^^^^^^^^^^^^
  File "/work/wt/fuzz/tdsl/lower/from_ast.py", line 316, in _extent
    return pwaff_to_ir(pa, [], sizes)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/wt/fuzz/tdsl/lower/affine.py", line 130, in pwaff_to_ir
    return ast_expr_to_ir(build.expr_from_pw_aff(pa), names)
                          ^^^^^^^^^^^^^^^^^^^^^^^^^^
islpy._isl.Error: call to isl_ast_build_expr_from_pw_aff failed: cannot handle void expression in /project/isl/isl_ast_build_expr.c:2267
"""

import numpy as np

import tdsl as td

INPUTS = {}

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
in0 = td.input('in0', {y: 1}, td.uint32)
in1 = td.input('in1', {y: 1, x: 1, c: 1}, td.int32)
lut = td.input('lut', {v: 1}, td.uint16)
s0 = td.compute('s0', {y: 1, x: 1, c: 1}, c)
s1 = td.compute('s1', {y: 1, x: 1, c: 1}, td.min(td.clamp(s0)[y + 1, x, k0], over={k0: (1, 1)}))
outputs = [s1]
s = td.schedule(outputs)
s = s.compute_at('s0', 's1', 'k0')
arrays = make_arrays(1307348266, False)
arrays.update({})  # sizes no input shape may bind

TARGET = 'c'
TOL = 1.0
BASE = 1e-12  # float32's when any tensor is float32
SCALE = 1.0  # largest magnitude of any stage
SPEC = '{"sizes": {"L": 1}, "dims": {"y": 1, "x": 1, "c": 1, "v": 1}, "inputs": [{"name": "in0", "dims": ["y"], "dtype": "uint32"}, {"name": "in1", "dims": ["y", "x", "c"], "dtype": "int32"}, {"name": "lut", "dims": ["v"], "dtype": "uint16"}], "stages": [{"kind": "compute", "name": "s0", "dims": ["y", "x", "c"], "expr": ["d", "c"]}, {"kind": "compute", "name": "s1", "dims": ["y", "x", "c"], "expr": ["r", "min", ["a", "s0", "clamp", [["i", "y + 1"], ["i", "x"], ["i", "k0"]]], [["k0", "1", "1"]], null]}], "outputs": ["s1"], "array_seed": 1307348266, "special_values": false, "tol": 1.0, "schedule": [["compute_at", ["s0", "s1", "k0"], {}]], "scale": 1.0}'


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
