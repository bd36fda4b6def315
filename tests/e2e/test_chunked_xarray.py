"""Kernels called with xarray.DataArrays: dims matched by name in any order, coordinates
of the surviving dims kept, dask-backed DataArrays run chunk by chunk."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tdsl as td

xr = pytest.importorskip("xarray")
da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")


def _pipeline():
    """C[t, y, x] = clamp(A)[t, y - 1, x] + mirror(A)[t, y, x + 1] * w[x]; S[t] = sum over y, x."""
    t, y, x = td.dims("t y x")
    T, H, W = td.size("T"), td.size("H"), td.size("W")
    A = td.input("A", {t: T, y: H, x: W}, td.int32)
    w = td.input("w", {x: W}, td.int32)
    C = td.compute("C", {t: T, y: H, x: W},
                   td.clamp(A)[t, y - 1, x] + td.mirror(A)[t, y, x + 1] * w[x])
    return A, w, C


def _data():
    a = np.random.default_rng(0).integers(-20, 20, (3, 5, 7)).astype(np.int32)
    w = np.arange(7, dtype=np.int32) - 3
    coords = {"t": [10, 20, 30], "y": np.linspace(0, 1, 5), "x": list("abcdefg"),
              "label": ("t", ["p", "q", "r"]), "grid": (("y", "x"), np.ones((5, 7)))}
    A = xr.DataArray(a, dims=("t", "y", "x"), coords=coords, attrs={"units": "K"})
    return a, w, A


@pytest.mark.parametrize("order", list(itertools.permutations(("t", "y", "x"))),
                         ids=lambda o: "".join(o))
def test_dims_are_matched_by_name_in_every_order(order):
    _, _, C = _pipeline()
    f = td.build(C)
    a, w, A = _data()
    got = f(A=A.transpose(*order), w=xr.DataArray(w, dims=("x",)))
    assert isinstance(got, xr.DataArray)
    assert got.dims == ("t", "y", "x") and got.name == "C"
    np.testing.assert_array_equal(got.values, f(A=a, w=w))
    for name in ("t", "y", "x", "label", "grid"):  # every dim of theirs survives
        assert name in got.coords
        np.testing.assert_array_equal(got.coords[name].values, A.coords[name].values)


def test_a_reduction_keeps_the_coordinates_of_the_dims_that_survive():
    t, y, x = td.dims("t y x")
    A = td.input("A", {t: 3, y: 5, x: 7}, td.int32)
    S = td.compute("S", {t: 3}, td.sum(A[t, y, x], over=(y, x)))
    a, _, XA = _data()
    got = td.build(S)(A=XA.transpose("x", "t", "y"))
    assert got.dims == ("t",)
    assert set(got.coords) == {"t", "label"}
    np.testing.assert_array_equal(got.values, a.sum(axis=(1, 2)))


def test_numpy_and_dataarray_inputs_mix():
    _, _, C = _pipeline()
    f = td.build(C)
    a, w, A = _data()
    got = f(A=A.transpose("x", "y", "t"), w=w)
    np.testing.assert_array_equal(got.values, f(A=a, w=w))


def test_a_dask_backed_dataarray_runs_chunk_by_chunk():
    _, _, C = _pipeline()
    f = td.build(C)
    a, w, A = _data()
    lazy = f(A=A.transpose("y", "x", "t").chunk({"y": 2, "x": 3, "t": 1}),
             w=xr.DataArray(w, dims=("x",)))
    assert isinstance(lazy.data, da.Array)
    assert lazy.chunks == ((1, 1, 1), (2, 2, 1), (3, 3, 1))
    with dask.config.set(scheduler="sync"):
        got = lazy.compute()
    np.testing.assert_array_equal(got.values, f(A=a, w=w))
    np.testing.assert_array_equal(got.coords["x"].values, A.coords["x"].values)
    also = td.map_blocks(f, A=A.chunk({"y": 2}), w=w)  # the same through td.map_blocks
    assert isinstance(also, xr.DataArray)
    with dask.config.set(scheduler="sync"):
        np.testing.assert_array_equal(also.values, got.values)


@pytest.mark.parametrize("change, message", [
    (lambda A: A.rename(x="z"), r"has no dim 'x' and has dim 'z', which A has not"),
    (lambda A: A.isel(t=0), r"has no dim 't'"),
    (lambda A: A.expand_dims("band"), r"has dim 'band', which A has not"),
])
def test_a_missing_or_extra_dim_is_an_argument_error_naming_it(change, message):
    _, _, C = _pipeline()
    _, w, A = _data()
    with pytest.raises(td.ArgumentError, match=message):
        td.build(C)(A=change(A), w=w)


def test_a_dataset_is_refused_with_the_fix():
    _, _, C = _pipeline()
    _, w, A = _data()
    with pytest.raises(td.ArgumentError, match=r"xarray.Dataset; pass its variable"):
        td.build(C)(A=A.to_dataset(name="A"), w=w)
