"""tdsl fuzz finding.

class: error
target: llvm
seed: 556
case: 397

VerifyError: variable rf1_x_lo used outside its scope (isl put the binder of the
rfactor block's bounds in a loop of its own, apart from the block's loops)
"""

import numpy as np

import tdsl as td

INPUTS = {'in0': ((4,), 'int64'), 'in1': ((3,), 'float32')}

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

y, x, k0, = td.dims('y x k0')
in0 = td.input('in0', {x: 4}, td.int64)
in1 = td.input('in1', {y: 3}, td.float32)
s0 = td.compute('s0', {x: 4}, (((x + td.cast(-0.25, td.float64)) / td.minimum(in1[0], td.clamp(in0)[x - 2])) / 3.0))
s1 = td.compute('s1', {y: 3, x: 4}, td.maximum(s0[x], in1[y]))
td.update(s1[y, x], td.maximum(s1[y, x], (td.where((td.cast(-0.25, td.float32) < td.cast(-1, td.int32)), td.pad(s0, 0)[x], in0[x]) * s1[y, x])), over={y: 3, x: 4})
s2 = td.compute('s2', {y: 3, x: 4}, td.min(s1[k0, x], over={k0: (0, y + 1)}))
s3 = td.compute('s3', {y: 3, x: 4}, td.minimum((in1[y] * (in0[x] & 1)), (td.minimum(x, td.cast(0.5, td.float64)) - td.minimum(td.clamp(s2)[2 * y, x], s2[y, x]))))
s4 = td.compute('s4', {y: 3, x: 4}, td.where((in0[x] == in0[x]), td.ceil(td.cast(y, td.float32)), td.cast(td.clamp(s2)[y + 1, x + 1], td.float32)))
outputs = [s1, s4]
s = td.schedule(outputs)
s = s.cache_read('in0', ['s4'], name='cr0')
s = s.rfactor('s2', 'k0', 4, name='rf1')
s = s.parallel('s0', 'x')
s = s.tile('s1', y=3, x=3)
s = s.reorder('s1', 'x_i', 'y_o', 'y_i', 'x_o')
s = s.unroll('s1', 'x_o')
s = s.split('s2', 'x', 2)
s = s.tile('s1.u0', y=5, x=16)
s = s.fuse('s1.u0', 'y_i', 'x_i')
s = s.reorder('s1.u0', 'y_o', 'x_o', 'y_i_x_i')
s = s.unroll('s1.u0', 'y_o')
s = s.unroll('rf1', 'k0_i')
s = s.split('rf1', 'y', 4)
s = s.parallel('rf1', 'x')
s = s.layout('cr0', 'x')
s = s.compute_at('s2', 's4', 'x')
s = s.compute_at('rf1', 's2', 'y')
s = s.reorder('s2', 'k0_i', 'x_i', 'y', 'x_o')
s = s.reorder('rf1', 'k0_o', 'x', 'y_i', 'y_o', 'k0_i')
arrays = make_arrays(1185695167, False)
arrays.update({})  # sizes no input shape may bind

TARGET = 'llvm'
TOL = 1383.9609375
BASE = 1e-05  # float32's when any tensor is float32
SCALE = 18.470388650894165  # largest magnitude of any stage
SPEC = '{"sizes": {}, "dims": {"y": 3, "x": 4}, "inputs": [{"name": "in0", "dims": ["x"], "dtype": "int64"}, {"name": "in1", "dims": ["y"], "dtype": "float32"}], "stages": [{"kind": "compute", "name": "s0", "dims": ["x"], "expr": ["b", "/", ["b", "/", ["b", "+", ["d", "x"], ["c", -0.25, "float64"]], ["b", "min", ["a", "in1", null, [["i", "0"]]], ["a", "in0", "clamp", [["i", "x - 2"]]]]], ["c", 3.0, null]]}, {"kind": "compute", "name": "s1", "dims": ["y", "x"], "expr": ["b", "max", ["a", "s0", null, [["i", "x"]]], ["a", "in1", null, [["i", "y"]]]]}, {"kind": "update", "stage": "s1", "name": "s1.u0", "target": [["i", "y"], ["i", "x"]], "value": ["b", "max", ["a", "s1", null, [["i", "y"], ["i", "x"]]], ["b", "*", ["w", ["cmp", "<", ["c", -0.25, "float32"], ["c", -1, "int32"]], ["a", "s0", ["pad", 0], [["i", "x"]]], ["a", "in0", null, [["i", "x"]]]], ["a", "s1", null, [["i", "y"], ["i", "x"]]]]], "over": [["y", null, "3"], ["x", null, "4"]]}, {"kind": "compute", "name": "s2", "dims": ["y", "x"], "expr": ["r", "min", ["a", "s1", null, [["i", "k0"], ["i", "x"]]], [["k0", "0", "y + 1"]], null]}, {"kind": "compute", "name": "s3", "dims": ["y", "x"], "expr": ["b", "min", ["b", "*", ["a", "in1", null, [["i", "y"]]], ["b", "&", ["a", "in0", null, [["i", "x"]]], ["c", 1, null]]], ["b", "-", ["b", "min", ["d", "x"], ["c", 0.5, "float64"]], ["b", "min", ["a", "s2", "clamp", [["i", "2 * y"], ["i", "x"]]], ["a", "s2", null, [["i", "y"], ["i", "x"]]]]]]}, {"kind": "compute", "name": "s4", "dims": ["y", "x"], "expr": ["w", ["cmp", "==", ["a", "in0", null, [["i", "x"]]], ["a", "in0", null, [["i", "x"]]]], ["f", "ceil", ["cast", "float32", ["d", "y"]]], ["cast", "float32", ["a", "s2", "clamp", [["i", "y + 1"], ["i", "x + 1"]]]]]}], "outputs": ["s1", "s4"], "array_seed": 1185695167, "special_values": false, "tol": 1383.9609375, "schedule": [["cache_read", ["in0", ["s4"]], {"name": "cr0"}], ["rfactor", ["s2", "k0", 4], {"name": "rf1"}], ["parallel", ["s0", "x"], {}], ["tile", ["s1"], {"y": 3, "x": 3}], ["reorder", ["s1", "x_i", "y_o", "y_i", "x_o"], {}], ["unroll", ["s1", "x_o"], {}], ["split", ["s2", "x", 2], {}], ["tile", ["s1.u0"], {"y": 5, "x": 16}], ["fuse", ["s1.u0", "y_i", "x_i"], {}], ["reorder", ["s1.u0", "y_o", "x_o", "y_i_x_i"], {}], ["unroll", ["s1.u0", "y_o"], {}], ["unroll", ["rf1", "k0_i"], {}], ["split", ["rf1", "y", 4], {}], ["parallel", ["rf1", "x"], {}], ["layout", ["cr0", "x"], {}], ["compute_at", ["s2", "s4", "x"], {}], ["compute_at", ["rf1", "s2", "y"], {}], ["reorder", ["s2", "k0_i", "x_i", "y", "x_o"], {}], ["reorder", ["rf1", "k0_o", "x", "y_i", "y_o", "k0_i"], {}]], "scale": 18.470388650894165}'


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
