"""tdsl fuzz finding.

class: wrong
target: llvm
seed: 31
case: 13
shrunk: yes

output s2: 64 of 64 elements differ; at [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4)]: expected [12, 25, 19, 25, 18], got [103, 103, 103, 103, 103]
"""

import numpy as np

import tdsl as td

INPUTS = {'in0': ((8, 8, 2), 'uint8')}

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

C = td.size('C')
y, x, c, k0, k1, = td.dims('y x c k0 k1')
in0 = td.input('in0', {y: 8, x: 8, c: C}, td.uint8)
s0 = td.compute('s0', {x: 8, c: C}, td.sum(in0[k0, in0[k0, x, c], c], over={k0: 8}))
s1 = td.compute('s1', {y: 8, x: 8, c: C}, s0[x, c])
s2 = td.compute('s2', {y: 8, x: 8}, td.max(s1[y, x, k1], over={k1: (1, C)}))
outputs = [s2]
s = td.schedule(outputs)
s = s.tile('s1', x=7, c=16)
s = s.tile('s2', y=4, x=16)
s = s.fuse('s2', 'y_i', 'x_i')
s = s.compute_at('s1', 's2', 'y_i_x_i')
s = s.fuse('s1', 'x_i', 'c_i')
s = s.reorder('s1', 'x_i_c_i', 'x_o', 'c_o', 'y')
arrays = make_arrays(1944984942, False)
arrays.update({'C': 2})  # sizes no input shape may bind

TARGET = 'llvm'
TOL = 1.0
BASE = 1e-12  # float32's when any tensor is float32
SCALE = 1.0  # largest magnitude of any stage
SPEC = '{"sizes": {"C": 2}, "dims": {"y": 8, "x": 8, "c": "C"}, "inputs": [{"name": "in0", "dims": ["y", "x", "c"], "dtype": "uint8"}], "stages": [{"kind": "compute", "name": "s0", "dims": ["x", "c"], "expr": ["r", "sum", ["a", "in0", null, [["i", "k0"], ["a", "in0", null, [["i", "k0"], ["i", "x"], ["i", "c"]]], ["i", "c"]]], [["k0", null, "8"]], null]}, {"kind": "compute", "name": "s1", "dims": ["y", "x", "c"], "expr": ["a", "s0", null, [["i", "x"], ["i", "c"]]]}, {"kind": "compute", "name": "s2", "dims": ["y", "x"], "expr": ["r", "max", ["a", "s1", null, [["i", "y"], ["i", "x"], ["i", "k1"]]], [["k1", "1", "C"]], null]}], "outputs": ["s2"], "array_seed": 1944984942, "special_values": false, "tol": 1.0, "schedule": [["tile", ["s1"], {"x": 7, "c": 16}], ["tile", ["s2"], {"y": 4, "x": 16}], ["fuse", ["s2", "y_i", "x_i"], {}], ["compute_at", ["s1", "s2", "y_i_x_i"], {}], ["fuse", ["s1", "x_i", "c_i"], {}], ["reorder", ["s1", "x_i_c_i", "x_o", "c_o", "y"], {}]], "scale": 1.0}'


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
