"""tdsl fuzz finding.

class: wrong
target: c
seed: 5311
case: 184
shrunk: yes

td.evaluate raised ArgumentError (update s2.u0 (td.update(s2[y, x, c], td.clamp(s2)[y, x, td.mirror_interior(s1)[in0[in1[y, x, c]], x - 2, c]], over={y: (0, H), x: (0, W), c: (0, C)})): in0[in1[y, x, c]] reads in0 at a data-dependent index -5 on axis 0 (dim y of in0) at y=0, x=0, c=0; valid indices are 0..0. Fix the data, or index a view that defines such indices: td.clamp(in0) reads the nearest element, td.pad(in0, value) a constant, td.wrap(in0) wraps around), the kernel returned a result
"""

# ruff: noqa: E712, UP034
import numpy as np

import tdsl as td

INPUTS = {'in0': ((1,), 'uint64'), 'in1': ((1, 1, 1), 'int32'), 'in2': ((1, 1, 1), 'float64')}

def make_array(rng, shape, dtype, special, edges=False):
    """Random input data: small values, sometimes extremes, NaN and infinities; with
    `edges`, integers at their dtype's limits in some places."""
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
        a = rng.integers(info.min, int(info.max) + 1, size=shape, dtype=dt)
    else:
        lo = 0 if dt.kind == "u" else -6
        a = rng.integers(lo, 7, size=shape).astype(dt)
    if edges and a.size:
        flat = a.reshape(-1)
        for v in (info.min, info.max, info.max - 1, info.max // 2 + 1, 0):
            flat[rng.integers(a.size)] = v
    return a


def make_arrays(seed, special, edges=False):
    rng = np.random.default_rng(seed)
    return {name: make_array(rng, shape, dtype, special, edges)
            for name, (shape, dtype) in INPUTS.items()}

H = td.size('H')
W = td.size('W')
C = td.size('C')
y, x, c, k0, = td.dims('y x c k0')
in0 = td.input('in0', {y: H}, td.uint64)
in1 = td.input('in1', {y: H, x: W, c: C}, td.int32)
in2 = td.input('in2', {y: H, x: W, c: C}, td.float64)
s1 = td.compute('s1', {y: H, x: W, c: C}, x)
s2 = td.compute('s2', {y: H, x: W, c: C}, td.max(td.pad(in2, 0)[in0[y], k0 - 1, c], over={k0: (1, W)}))
td.update(s2[y, x, c], td.clamp(s2)[y, x, td.mirror_interior(s1)[in0[in1[y, x, c]], x - 2, c]], over={y: H, x: W, c: C})
outputs = [s2]
s = td.schedule(outputs)
s = s.compute_inline('s1')
arrays = make_arrays(1776944642, False)
arrays.update({'C': 1, 'H': 1, 'W': 1})  # sizes no input shape may bind

TARGET = 'c'
TOL = 68.34375
BASE = 1e-12  # that of the least precise float type
SCALE = 1.0  # largest magnitude of any stage
SPEC = '{"sizes": {"H": 1, "W": 1, "C": 1}, "dims": {"y": "H", "x": "W", "c": "C"}, "inputs": [{"name": "in0", "dims": ["y"], "dtype": "uint64"}, {"name": "in1", "dims": ["y", "x", "c"], "dtype": "int32"}, {"name": "in2", "dims": ["y", "x", "c"], "dtype": "float64"}], "stages": [{"kind": "compute", "name": "s1", "dims": ["y", "x", "c"], "expr": ["d", "x"]}, {"kind": "compute", "name": "s2", "dims": ["y", "x", "c"], "expr": ["r", "max", ["a", "in2", ["pad", 0], [["a", "in0", null, [["i", "y"]]], ["i", "k0 - 1"], ["i", "c"]]], [["k0", "1", "W"]], null]}, {"kind": "update", "stage": "s2", "name": "s2.u0", "target": [["i", "y"], ["i", "x"], ["i", "c"]], "value": ["a", "s2", "clamp", [["i", "y"], ["i", "x"], ["a", "s1", "mirror_interior", [["a", "in0", null, [["a", "in1", null, [["i", "y"], ["i", "x"], ["i", "c"]]]]], ["i", "x - 2"], ["i", "c"]]]]], "over": [["y", null, "H"], ["x", null, "W"], ["c", null, "C"]]}], "outputs": ["s2"], "array_seed": 1776944642, "special_values": false, "edge_values": false, "tol": 68.34375, "schedule": [["compute_inline", ["s1"], {}]]}'


def main(target=TARGET):
    """Build on `target`, call twice, compare with td.evaluate; print what differs."""
    with np.errstate(all="ignore"):
        f = td.build(s, target=target)
        got = f(**arrays)
        got = got if isinstance(got, tuple) else (got,)
        wants = td.evaluate(outputs, **arrays)  # all of them: an output may not use a size
        wants = wants if isinstance(wants, tuple) else (wants,)
        for out, g, want in zip(outputs, got, wants):
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
