"""tdsl fuzz finding.

class: wrong
target: c
seed: 801
case: 400
shrunk: yes

td.evaluate raised ArgumentError (update s3.u0 (td.update(s3[y], s2[td.clamp(in1)[y - 2]], over={y: (0, 31)})): s2[td.clamp(in1)[y - 2]] reads s2 at a data-dependent index -2 on axis 0 (dim y of s2) at y=3; valid indices are 0..30. Fix the data, or index a view that defines such indices: td.clamp(s2) reads the nearest element, td.pad(s2, value) a constant, td.wrap(s2) wraps around), the kernel returned normally
"""

import numpy as np

import tdsl as td

INPUTS = {'in1': ((31,), 'int32')}

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

y, k0, k1, = td.dims('y k0 k1')
in0 = td.input('in0', {y: 31}, td.float32)
in1 = td.input('in1', {y: 31}, td.int32)
s0 = td.compute('s0', {y: 31}, in1[y])
s1 = td.compute('s1', {y: 31}, td.prod(s0[k0], over={k0: 31}))
s2 = td.compute('s2', {y: 31}, td.max(s1[k1], over={k1: (1, 31)}))
s3 = td.compute('s3', {y: 31}, td.clamp(s2)[y - 2])
td.update(s3[y], s2[td.clamp(in1)[y - 2]], over={y: 31})
outputs = [s3]
s = td.schedule(outputs)
s = s.compute_inline('s2')
arrays = make_arrays(2011319881, False)
arrays.update({})  # sizes no input shape may bind

TARGET = 'c'
TOL = 26244.0
BASE = 1e-05  # that of the least precise float type
SCALE = 1.0  # largest magnitude of any stage
SPEC = '{"sizes": {}, "dims": {"y": 31}, "inputs": [{"name": "in0", "dims": ["y"], "dtype": "float32"}, {"name": "in1", "dims": ["y"], "dtype": "int32"}], "stages": [{"kind": "compute", "name": "s0", "dims": ["y"], "expr": ["a", "in1", null, [["i", "y"]]]}, {"kind": "compute", "name": "s1", "dims": ["y"], "expr": ["r", "prod", ["a", "s0", null, [["i", "k0"]]], [["k0", null, "31"]], null]}, {"kind": "compute", "name": "s2", "dims": ["y"], "expr": ["r", "max", ["a", "s1", null, [["i", "k1"]]], [["k1", "1", "31"]], null]}, {"kind": "compute", "name": "s3", "dims": ["y"], "expr": ["a", "s2", "clamp", [["i", "y - 2"]]]}, {"kind": "update", "stage": "s3", "name": "s3.u0", "target": [["i", "y"]], "value": ["a", "s2", null, [["a", "in1", "clamp", [["i", "y - 2"]]]]], "over": [["y", null, "31"]]}], "outputs": ["s3"], "array_seed": 2011319881, "special_values": false, "tol": 26244.0, "schedule": [["compute_inline", ["s2"], {}]]}'


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
