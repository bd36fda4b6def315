"""tdsl fuzz finding.

class: wrong
target: c
seed: 9931
case: 204
shrunk: yes

output s2: 32 of 32 elements differ; at [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4)]: expected [-101452, 216548, -240094, 204709, 88464], got [234489, 82128, -377960, -84712, -136032]
"""

# ruff: noqa: E712, UP034
import numpy as np

import tdsl as td

INPUTS = {'gx': ((1, 10), 'uint8'), 'gb': ((5, 32, 2), 'int16')}

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

C = td.size('C')
L = td.size('L')
J = td.size('J')
y, x, c, v, j, q, p, e, k1, k2, = td.dims('y x c v j q p e k1 k2')
gx = td.input('gx', {c: C, q: 10}, td.uint8)
gb = td.input('gb', {p: 5, j: J, e: 2}, td.int16)
s2 = td.compute('s2', {c: C, j: J}, td.sum((gx[c, 2 * k1 + k2] * td.cast(gb[k1, j, k2], td.int32)), over={k1: 5, k2: 2}))
outputs = [s2]
s = td.schedule(outputs)
s = s.split('s2', 'j', 32)
s = s.reorder('s2', 'c', 'j_o', 'k1', 'k2', 'j_i')
s = s.unroll('s2', 'k2')
s = s.vectorize('s2', 'j_i')
s = s.tile('s2', j_o=7, k1=5)
s = s.fuse('s2', 'j_o_i', 'k1_i')
arrays = make_arrays(2141180023, False)
arrays.update({'C': 1, 'J': 32})  # sizes no input shape may bind

TARGET = 'c'
TOL = 4.0
BASE = 1e-12  # that of the least precise float type
SCALE = 1.0  # largest magnitude of any stage
SPEC = '{"sizes": {"C": 1, "L": 1, "J": 32}, "dims": {"y": 1, "x": 1, "c": "C", "v": 1, "j": "J", "q": 10, "p": 5, "e": 2}, "inputs": [{"name": "gx", "dims": ["c", "q"], "dtype": "uint8"}, {"name": "gb", "dims": ["p", "j", "e"], "dtype": "int16"}], "stages": [{"kind": "compute", "name": "s2", "dims": ["c", "j"], "expr": ["r", "sum", ["b", "*", ["a", "gx", null, [["i", "c"], ["i", "2 * k1 + k2"]]], ["cast", "int32", ["a", "gb", null, [["i", "k1"], ["i", "j"], ["i", "k2"]]]]], [["k1", null, "5"], ["k2", null, "2"]], null], "grouped": {"i": "c", "j": "j", "ko": "k1", "t": "k2"}}], "outputs": ["s2"], "array_seed": 2141180023, "special_values": false, "tol": 4.0, "schedule": [["split", ["s2", "j", 32], {}], ["reorder", ["s2", "c", "j_o", "k1", "k2", "j_i"], {}], ["unroll", ["s2", "k2"], {}], ["vectorize", ["s2", "j_i"], {}], ["tile", ["s2"], {"j_o": 7, "k1": 5}], ["fuse", ["s2", "j_o_i", "k1_i"], {}]], "scale": 1.0}'


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
