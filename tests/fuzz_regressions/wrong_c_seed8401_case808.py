"""tdsl fuzz finding.

class: wrong
target: c
seed: 8401
case: 808
shrunk: yes

output s2: 1 of 56 elements differ; at [(1, 6, 3)]: expected [15.874410292000555], got [3.566858716944747]
"""

# ruff: noqa: E712, UP034
import numpy as np

import tdsl as td

INPUTS = {'in0': ((2, 7, 4), 'float64'), 'lut': ((16,), 'uint8')}

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

L = td.size('L')
y, x, c, v, = td.dims('y x c v')
in0 = td.input('in0', {y: 2, x: 7, c: 4}, td.float64)
lut = td.input('lut', {v: 16}, td.uint8)
s0 = td.compute('s0', {y: 2, x: 7, c: 4}, (td.maximum(td.cast(2.0, td.float32), -0.25) * (-in0[y, x, c])))
s1 = td.compute('s1', {y: 2, x: 7, c: 4}, in0[y, x, c])
td.update(s1[y, x, c], td.maximum(s1[y - 1, x, c], ((td.pad(lut, 0)[2] - td.mirror(s1)[y, lut[td.pad(lut, 0)[1]], c - 2]) + td.clamp(lut)[2])), over={y: (1, 2), x: 7, c: 4})
td.update(s1[y, x, c], (s1[y, x - 1, c] + td.cast(2.0, td.float64)), over={y: 2, x: (1, 7), c: 4})
s2 = td.compute('s2', {y: 2, x: 7, c: 4}, td.pad(s1, 0)[y - 1, x, c])
outputs = [s2]
s = td.schedule(outputs)
s = s.tile('s2', y=8, x=2)
s = s.fuse('s2', 'y_i', 'x_i')
s = s.reorder('s2', 'y_i_x_i', 'y_o', 'x_o', 'c')
s = s.unroll('s1.u1', 'c')
s = s.parallel('s1.u1', 'y')
s = s.layout('s1', 'c', 'y', 'x')
s = s.unroll('s1', 'c')
arrays = make_arrays(877832696, False)
arrays.update({})  # sizes no input shape may bind

TARGET = 'c'
TOL = 7.59375
BASE = 1e-05  # that of the least precise float type
SCALE = 17.387409486734732  # largest magnitude of any stage
SPEC = '{"sizes": {"L": 16}, "dims": {"y": 2, "x": 7, "c": 4, "v": 16}, "inputs": [{"name": "in0", "dims": ["y", "x", "c"], "dtype": "float64"}, {"name": "lut", "dims": ["v"], "dtype": "uint8"}], "stages": [{"kind": "compute", "name": "s0", "dims": ["y", "x", "c"], "expr": ["b", "*", ["b", "max", ["c", 2.0, "float32"], ["c", -0.25, null]], ["u", "neg", ["a", "in0", null, [["i", "y"], ["i", "x"], ["i", "c"]]]]]}, {"kind": "compute", "name": "s1", "dims": ["y", "x", "c"], "expr": ["a", "in0", null, [["i", "y"], ["i", "x"], ["i", "c"]]]}, {"kind": "update", "stage": "s1", "name": "s1.u0", "target": [["i", "y"], ["i", "x"], ["i", "c"]], "value": ["b", "max", ["a", "s1", null, [["i", "y - 1"], ["i", "x"], ["i", "c"]]], ["b", "+", ["b", "-", ["a", "lut", ["pad", 0], [["i", "2"]]], ["a", "s1", "mirror", [["i", "y"], ["a", "lut", null, [["a", "lut", ["pad", 0], [["i", "1"]]]]], ["i", "c - 2"]]]], ["a", "lut", "clamp", [["i", "2"]]]]], "over": [["y", "1", "2"], ["x", null, "7"], ["c", null, "4"]]}, {"kind": "update", "stage": "s1", "name": "s1.u1", "target": [["i", "y"], ["i", "x"], ["i", "c"]], "value": ["b", "+", ["a", "s1", null, [["i", "y"], ["i", "x - 1"], ["i", "c"]]], ["c", 2.0, "float64"]], "over": [["y", null, "2"], ["x", "1", "7"], ["c", null, "4"]]}, {"kind": "compute", "name": "s2", "dims": ["y", "x", "c"], "expr": ["a", "s1", ["pad", 0], [["i", "y - 1"], ["i", "x"], ["i", "c"]]]}], "outputs": ["s2"], "array_seed": 877832696, "special_values": false, "tol": 7.59375, "schedule": [["tile", ["s2"], {"y": 8, "x": 2}], ["fuse", ["s2", "y_i", "x_i"], {}], ["reorder", ["s2", "y_i_x_i", "y_o", "x_o", "c"], {}], ["unroll", ["s1.u1", "c"], {}], ["parallel", ["s1.u1", "y"], {}], ["layout", ["s1", "c", "y", "x"], {}], ["unroll", ["s1", "c"], {}]], "scale": 17.387409486734732}'


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
