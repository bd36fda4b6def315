"""A reduction loop fused with a pure loop: the init still covers every output element.

The init ran the update's pure loops plus a plain loop over each dim fused with a
reduction dim; with a non-divisible split that schedule mixes a dim with its split
parts, and isl's AST generator dropped the values of the plain loop: rows were never
initialised and the results depended on leftover memory.
"""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td


def _row_sums(h, w):
    y, x, k = td.dims("y x k")
    a = td.input("a", {y: h, x: w}, td.float32)
    out = td.compute("out", {y: h, x: w}, td.sum(a[y, k] + a[y, x], over={k: w}))
    return out


SCHEDULES = {
    "fused_k_with_split_y": lambda s, o: (
        s.split(o, "y", 2).fuse(o, "y_i", "x").split(o, "y_o", 2)
        .reorder(o, "k y_o_i y_i_x y_o_o").fuse(o, "k", "y_o_i")),
    "tiled_k_fused_with_x": lambda s, o: (
        s.reorder(o, "k x y").tile(o, k=2, x=1).fuse(o, "k_i", "x_i")),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("shape", [(3, 3), (7, 5), (8, 24)])
def test_init_covers_every_element(name, shape, backend):
    out = _row_sums(*shape)
    s = SCHEDULES[name](td.schedule(out), out)
    a = np.random.default_rng(1).uniform(-2, 2, shape).astype(np.float32)
    want = td.evaluate(out, a=a)
    f = td.build(s, target=backend)
    for fill in (np.nan, 1e30):  # whatever the output held before is overwritten
        got = f(a=a, out=np.full(shape, fill, np.float32))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
