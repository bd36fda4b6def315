"""tdsl fuzz finding.

class: wrong
target: llvm
seed: 102
case: 31

td.evaluate raised ArgumentError (update s0.u0 (td.update(s0[td.wrap(lut)[3] % 11], s0[td.wrap(lut)[3] % 11] - s0[lut[0]] * td.cast(td.where(td.cast(in0[y], td.float64) < td.cast(y, td.float64), td.clamp(lut)[-1], lut[0]), td.float64), over={y: (0, 11)})): s0[lut[0]] reads s0 at a data-dependent index -1174215901 on axis 0 (dim y of s0) at y=0; valid indices are 0..10. Fix the data, or index a view that defines such indices: td.clamp(s0) reads the nearest element, td.pad(s0, value) a constant, td.wrap(s0) wraps around), the kernel returned normally
"""

import numpy as np

import tdsl as td

INPUTS = {'in0': ((11,), 'float32'), 'in1': ((11,), 'float32'), 'lut': ((1,), 'int32')}

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
y, v, k0, = td.dims('y v k0')
in0 = td.input('in0', {y: 11}, td.float32)
in1 = td.input('in1', {y: 11}, td.float32)
lut = td.input('lut', {v: L}, td.int32)
s0 = td.compute('s0', {y: 11}, (((in1[y] + td.mirror_interior(lut)[-1]) / in1[y]) - (td.minimum(td.clamp(in0)[lut[0]], in1[y]) / td.where((lut[0] >= in1[y]), in0[y], y))))
td.update(s0[(td.wrap(lut)[3] % 11)], (s0[(td.wrap(lut)[3] % 11)] - (td.cast(s0[lut[0]], td.float64) * td.where((in0[y] < y), td.clamp(lut)[-1], lut[0]))), over={y: 11})
s1 = td.compute('s1', {y: 11}, (td.cos(td.minimum(td.maximum(td.cast(lut[0], td.float32), -100.0), 100.0)) / (td.abs(s0[y]) + 1.0)))
td.update(s1[y], td.minimum(s1[y], td.maximum((td.cast(2, td.uint16) / (td.abs(s0[y]) + 1.0)), (lut[0] / td.clamp(in0)[y + 2]))), over={y: 11})
s2 = td.compute('s2', {y: 11}, td.prod((td.wrap(s0)[k0] - (in0[k0] - td.clamp(s1)[k0])), over={k0: 11}))
s3 = td.compute('s3', {y: 11}, ((td.cast(td.clamp(s2)[y], td.float64) * td.cast(s2[y], td.float32)) / (td.abs(s2[y]) + 1.0)))
td.update(s3[y], (s3[y + 1] * td.cast((td.pad(in0, 0)[y + 2] // y), td.float64)), over={y: (0, 11 - 1)})
td.update(s3[y], (s3[y + 1] / (td.abs(s3[y]) + 1.0)), over={y: (0, 11 - 1)})
outputs = [s1, s3]
s = td.schedule(outputs)
s = s.atomic('s1.u0')
s = s.parallel('s0', 'y')
s = s.unroll('s1', 'y')
s = s.parallel('s2', 'k0', reassociate=True)
s = s.parallel('s2', 'y')
s = s.split('s0.u0', 'y', 1)
s = s.vectorize('s1.u0', 'y')
s = s.layout('s0', 'y')
s = s.parallel('s3', 'y')
arrays = make_arrays(1770237305, False)
arrays.update({'L': 1})  # sizes no input shape may bind

TARGET = 'llvm'
TOL = 70938.81024169922
BASE = 1e-05  # float32's when any tensor is float32
SCALE = 1.0  # largest magnitude of any stage
SPEC = '{"sizes": {"L": 1}, "dims": {"y": 11, "v": "L"}, "inputs": [{"name": "in0", "dims": ["y"], "dtype": "float32"}, {"name": "in1", "dims": ["y"], "dtype": "float32"}, {"name": "lut", "dims": ["v"], "dtype": "int32"}], "stages": [{"kind": "compute", "name": "s0", "dims": ["y"], "expr": ["b", "-", ["b", "/", ["b", "+", ["a", "in1", null, [["i", "y"]]], ["a", "lut", "mirror_interior", [["i", "-1"]]]], ["a", "in1", null, [["i", "y"]]]], ["b", "/", ["b", "min", ["a", "in0", "clamp", [["a", "lut", null, [["i", "0"]]]]], ["a", "in1", null, [["i", "y"]]]], ["w", ["cmp", ">=", ["a", "lut", null, [["i", "0"]]], ["a", "in1", null, [["i", "y"]]]], ["a", "in0", null, [["i", "y"]]], ["d", "y"]]]]}, {"kind": "update", "stage": "s0", "name": "s0.u0", "target": [["b", "%", ["a", "lut", "wrap", [["i", "3"]]], ["i", "11"]]], "value": ["b", "-", ["a", "s0", null, [["b", "%", ["a", "lut", "wrap", [["i", "3"]]], ["i", "11"]]]], ["b", "*", ["cast", "float64", ["a", "s0", null, [["a", "lut", null, [["i", "0"]]]]]], ["w", ["cmp", "<", ["a", "in0", null, [["i", "y"]]], ["d", "y"]], ["a", "lut", "clamp", [["i", "-1"]]], ["a", "lut", null, [["i", "0"]]]]]], "over": [["y", null, "11"]]}, {"kind": "compute", "name": "s1", "dims": ["y"], "expr": ["b", "/", ["f", "cos", ["b", "min", ["b", "max", ["cast", "float32", ["a", "lut", null, [["i", "0"]]]], ["c", -100.0, null]], ["c", 100.0, null]]], ["b", "+", ["u", "abs", ["a", "s0", null, [["i", "y"]]]], ["c", 1.0, null]]]}, {"kind": "update", "stage": "s1", "name": "s1.u0", "target": [["i", "y"]], "value": ["b", "min", ["a", "s1", null, [["i", "y"]]], ["b", "max", ["b", "/", ["c", 2, "uint16"], ["b", "+", ["u", "abs", ["a", "s0", null, [["i", "y"]]]], ["c", 1.0, null]]], ["b", "/", ["a", "lut", null, [["i", "0"]]], ["a", "in0", "clamp", [["i", "y + 2"]]]]]], "over": [["y", null, "11"]]}, {"kind": "compute", "name": "s2", "dims": ["y"], "expr": ["r", "prod", ["b", "-", ["a", "s0", "wrap", [["i", "k0"]]], ["b", "-", ["a", "in0", null, [["i", "k0"]]], ["a", "s1", "clamp", [["i", "k0"]]]]], [["k0", null, "11"]], null]}, {"kind": "compute", "name": "s3", "dims": ["y"], "expr": ["b", "/", ["b", "*", ["cast", "float64", ["a", "s2", "clamp", [["i", "y"]]]], ["cast", "float32", ["a", "s2", null, [["i", "y"]]]]], ["b", "+", ["u", "abs", ["a", "s2", null, [["i", "y"]]]], ["c", 1.0, null]]]}, {"kind": "update", "stage": "s3", "name": "s3.u0", "target": [["i", "y"]], "value": ["b", "*", ["a", "s3", null, [["i", "y + 1"]]], ["cast", "float64", ["b", "//", ["a", "in0", ["pad", 0], [["i", "y + 2"]]], ["d", "y"]]]], "over": [["y", "0", "11 - 1"]]}, {"kind": "update", "stage": "s3", "name": "s3.u1", "target": [["i", "y"]], "value": ["b", "/", ["a", "s3", null, [["i", "y + 1"]]], ["b", "+", ["u", "abs", ["a", "s3", null, [["i", "y"]]]], ["c", 1.0, null]]], "over": [["y", "0", "11 - 1"]]}], "outputs": ["s1", "s3"], "array_seed": 1770237305, "special_values": false, "tol": 70938.81024169922, "schedule": [["atomic", ["s1.u0"], {}], ["parallel", ["s0", "y"], {}], ["unroll", ["s1", "y"], {}], ["parallel", ["s2", "k0"], {"reassociate": true}], ["parallel", ["s2", "y"], {}], ["split", ["s0.u0", "y", 1], {}], ["vectorize", ["s1.u0", "y"], {}], ["layout", ["s0", "y"], {}], ["parallel", ["s3", "y"], {}]]}'


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
