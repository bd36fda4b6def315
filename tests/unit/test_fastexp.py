"""float32 exp: both backends compute it with the vectorizable algorithm of
`tdsl.lower.fastexp`, within 1 ulp of the correctly rounded result (numpy's own
float32 exp is up to 2 ulp from it), with numpy's special values."""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td


def _exp_kernel():
    i = td.dim("i")
    N = td.size("N")
    X = td.input("X", {i: N}, td.float32)
    return td.compute("E", {i: N}, td.exp(X[i]))


SPECIAL = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-8, -1e-8, 88.72, 88.73, 89.5, 1e4,
                    -87.3, -103.9, -103.97, -104.5, -1e4], np.float32)


@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vectorized"])
def test_exp_float32_matches_numpy(backend, vector):
    E = _exp_kernel()
    s = td.schedule(E)
    if vector:
        s = s.split(E, "i", 16).vectorize(E, "i_i")
    rng = np.random.default_rng(7)
    x = np.concatenate([np.linspace(-110, 95, 100_003, dtype=np.float32),
                        rng.uniform(-104, 89, 200_000).astype(np.float32), SPECIAL])
    with np.errstate(over="ignore"):
        want = np.exp(x)
        exact = np.exp(x.astype(np.float64)).astype(np.float32)  # correctly rounded
    got = td.build(s, target=backend)(X=x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf])
    normal = np.isfinite(want) & (want >= np.finfo(np.float32).tiny)
    ulps = np.abs(got[normal].astype(np.float64) - exact[normal]) / np.spacing(exact[normal])
    assert ulps.max() <= 1.0
    numpy_ulps = np.abs(want[normal].astype(np.float64) - exact[normal]) / np.spacing(exact[normal])
    assert numpy_ulps.max() <= 2.0  # the README's statement about numpy's own error
    tiny = np.isfinite(want) & ~normal  # subnormal results: a few units of the last place
    np.testing.assert_allclose(got[tiny], want[tiny], rtol=0, atol=4e-45)


def test_exp_float32_within_one_ulp_at_every_magnitude(backend):
    """Inputs drawn uniformly over the float32 bit patterns of [-104, 89] (every exponent
    equally often, tiny ones included) and densely around the subnormal, overflow and
    zero boundaries: within 1 ulp of exact for normal results, within one subnormal
    spacing below them."""
    E = _exp_kernel()
    f = td.build(td.schedule(E).split(E, "i", 16).vectorize(E, "i_i"), target=backend)
    rng = np.random.default_rng(17)
    hi, lo = np.float32(89).view(np.int32), np.float32(-104).view(np.int32) & 0x7FFFFFFF
    x = np.concatenate([
        rng.integers(0, hi, 1_000_000, dtype=np.int32).view(np.float32),
        (rng.integers(0, lo, 1_000_000, dtype=np.int32) | np.int32(-2**31)).view(np.float32),
        rng.uniform(-104, -86, 300_000).astype(np.float32),
        rng.uniform(86, 89, 300_000).astype(np.float32),
        rng.uniform(-1e-3, 1e-3, 300_000).astype(np.float32)])
    exact = np.exp(x.astype(np.float64))
    with np.errstate(over="ignore"):
        rounded = exact.astype(np.float32)
    got = f(X=x).astype(np.float64)
    normal = np.isfinite(rounded) & (rounded >= np.finfo(np.float32).tiny)
    assert (np.abs(got[normal] - exact[normal]) / np.spacing(rounded[normal])).max() <= 1.0
    tiny = ~normal & np.isfinite(rounded)
    assert (np.abs(got[tiny] - exact[tiny]) / 2.0**-149).max() <= 1.0
    assert (got[np.isinf(rounded)] == np.inf).all()
