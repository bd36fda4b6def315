"""Kernels over chunked dask arrays (`td.map_blocks`, `td.chunk_plan`): every chunking
gives the answer of one call on the whole arrays, bit for bit on integers, on both
backends; halos come from bounds inference; boundary views keep their meaning at the
array's edges; what cannot run chunk by chunk is refused, naming the dim."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tdsl as td
from tdsl.fuzz import gen, oracle, render

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")


@pytest.fixture(autouse=True)
def _sync_scheduler():
    """One task at a time, in this thread (the same for every example of a test)."""
    with dask.config.set(scheduler="sync"):
        yield


def _stencil(dtype=td.int32):
    """Two stages reading through every boundary view, with symbolic sizes."""
    y, x = td.dims("y x")
    H, W = td.size("H"), td.size("W")
    A = td.input("A", {y: H, x: W}, dtype)
    B = td.compute("B", {y: H, x: W},
                   td.clamp(A)[y - 1, x] + td.clamp(A)[y + 1, x] * 3 - td.mirror(A)[y, x - 2])
    C = td.compute("C", {y: H, x: W},
                   td.mirror_interior(B)[y, x - 1] + B[y, x] - td.wrap(B)[y + 1, x + 2]
                   + td.pad(A, 7)[y - 2, x + 1])
    return A, B, C


def _ints(shape, seed=0, dtype=np.int32):
    return np.random.default_rng(seed).integers(-1000, 1000, shape).astype(dtype)


@pytest.mark.parametrize("chunks", [(5, 4), (1, 1), (1, 23), (17, 1), (2, 3), (16, 22), (3, 7)])
def test_every_chunking_equals_the_whole_call(backend, chunks):
    """Chunks smaller than the halo (1 and 2 against halos of 2 to 3), size-1 chunks,
    uneven edge chunks: the same bits as the whole array in one call."""
    _, _, C = _stencil()
    f = td.build(C, target=backend)
    a = _ints((17, 23))
    got = td.map_blocks(f, A=da.from_array(a, chunks=chunks)).compute()
    assert np.array_equal(got, f(A=a))
    assert np.array_equal(got, td.evaluate(C, A=a))


def test_the_halos_are_inferred_for_the_whole_pipeline():
    _, _, C = _stencil()
    p = td.chunk_plan(td.build(C), A=da.from_array(_ints((40, 50)), chunks=(10, 10)))
    # y: B reads A at y -+ 1, C reads B at y + 1 and pad(A) at y - 2; x: B reads A at
    # x - 2, C reads B at x - 1 .. x + 2 and pad(A) at x + 1
    assert p.halos == {"A": {"y": (2, 2), "x": (3, 2)}}
    assert p.grid == {"y": (10, 10, 10, 10), "x": (10,) * 5}
    assert p.nchunks == 20
    # an interior chunk reads exactly its block and the halo; a corner chunk only
    # what its boundary views read inside the array, and the far side a wrap reads
    inner = p.windows(6)  # y block 1, x block 1
    assert inner["A"] == ((8, 22), (7, 22))
    assert inner["C"] == ((10, 20), (10, 20))
    assert "halos: A y -2/+2, x -3/+2" in repr(p)


def test_one_kernel_serves_every_chunk_size():
    """The windows' extents are sizes: one build, whatever the chunks' shapes."""
    _, _, C = _stencil()
    p = td.chunk_plan(C, A=da.from_array(_ints((13, 11)), chunks=(4, 3)))
    sizes = {s.name for s in p.kernel.pipeline.sizes}
    assert {"H", "W"} <= sizes and any(n.startswith("tdsl_n") for n in sizes)


def test_fixed_extents_run_chunked_too():
    """A pipeline whose extents are constants: its chunk kernel has symbolic windows."""
    y, x = td.dims("y x")
    A = td.input("A", {y: 12, x: 9}, td.int16)
    B = td.compute("B", {y: 12, x: 9}, td.clamp(A)[y + 1, x - 1] - td.pad(A, 3)[y - 1, x + 2])
    a = _ints((12, 9), 1, np.int16)
    got = td.map_blocks(B, A=da.from_array(a, chunks=(5, 2))).compute()
    assert np.array_equal(got, td.evaluate(B, A=a))


def _blur():
    """A two-stage 3x3 blur with clamped edges."""
    y, x = td.dims("y x")
    H, W = td.size("H"), td.size("W")
    A = td.input("A", {y: H, x: W}, td.float32)
    B = td.compute("B", {y: H, x: W},
                   (td.clamp(A)[y - 1, x] + A[y, x] + td.clamp(A)[y + 1, x]) * (1 / 3))
    C = td.compute("C", {y: H, x: W},
                   (td.clamp(B)[y, x - 1] + B[y, x] + td.pad(B, 0)[y, x + 1]) * (1 / 3))
    return A, B, C


def test_a_schedule_runs_on_the_chunks(backend):
    A, B, C = _blur()
    s = (td.schedule(C).split(C, "x", 8).vectorize(C, "x_i").parallel(C, "y")
         .split(B, "x", 8).vectorize(B, "x_i"))
    f = td.build(s, target=backend)
    a = np.random.default_rng(2).standard_normal((40, 70)).astype(np.float32)
    p = td.chunk_plan(f, A=da.from_array(a, chunks=(13, 32)))
    assert "# vectorized" in p.kernel.loop_nest and "# parallel" in p.kernel.loop_nest
    np.testing.assert_allclose(p.arrays().compute(), td.evaluate(C, A=a), rtol=1e-5, atol=1e-4)


def test_a_fusion_too_costly_to_analyse_over_a_chunk_runs_unfused_with_a_warning(monkeypatch):
    """compute_at over a chunk's windows, whose origins and extents are sizes: where
    isl's regions of the fused stage exceed the analysis budget (here: made to), the
    chunk kernel computes the stage over its whole window instead, and says so."""
    from tdsl.chunked import plan
    from tdsl.lower.poly.budget import AnalysisLimitError

    real = plan._program

    def costly(pipeline, json, *args):
        if "ComputeAt" in json:
            raise AnalysisLimitError("lowering the schedule of C: (made to fail)")
        return real(pipeline, json, *args)

    monkeypatch.setattr(plan, "_program", costly)
    A, B, C = _stencil(td.float32)
    f = td.build(td.schedule(C).tile(C, y=8, x=16).compute_at(B, C, "y_o"))
    a = np.random.default_rng(2).standard_normal((24, 40)).astype(np.float32)
    with pytest.warns(td.ChunkingWarning, match="without the schedule's compute_at"):
        p = td.chunk_plan(f, A=da.from_array(a, chunks=(13, 32)))
    assert "ComputeAt" not in p.program.schedule_json
    np.testing.assert_allclose(p.arrays().compute(), td.evaluate(C, A=a), rtol=1e-5, atol=1e-4)


def test_a_schedule_that_needs_constant_extents_says_so():
    y, x = td.dims("y x")
    A = td.input("A", {y: 8, x: 8}, td.float32)
    B = td.compute("B", {y: 8, x: 8}, A[y, x] * 2)
    f = td.build(td.schedule(B).vectorize(B, "x"))
    with pytest.raises(td.ScheduleError, match="symbolic extents"):
        td.map_blocks(f, A=da.from_array(np.ones((8, 8), np.float32), chunks=(4, 4)))


def test_a_reduction_over_a_chunked_dim_is_a_tree_of_partial_results(backend):
    i, k = td.dims("i k")
    N, K = td.size("N"), td.size("K")
    A = td.input("A", {i: N, k: K}, td.int64)
    S = td.compute("S", {i: N}, td.sum(td.clamp(A)[i + 1, k] * A[i, k], over=k))
    f = td.build(S, target=backend)
    a = _ints((9, 31), 3, np.int64)
    arr = da.from_array(a, chunks=(4, 5))
    p = td.chunk_plan(f, A=arr)
    assert p.grid == {"i": (4, 4, 1), "k": (5,) * 6 + (1,)}
    out = td.map_blocks(f, A=arr)
    assert np.array_equal(out.compute(), f(A=a))


@pytest.mark.parametrize("op", ["max", "min", "prod"])
def test_integer_max_min_prod_combine_exactly(op):
    i, k = td.dims("i k")
    A = td.input("A", {i: 6, k: 20}, td.int32)
    S = td.compute("S", {i: 6}, getattr(td, op)(A[i, k], over=k))
    a = _ints((6, 20), 4) % 7 + 1
    got = td.map_blocks(S, A=da.from_array(a, chunks=(6, 3))).compute()
    assert np.array_equal(got, td.evaluate(S, A=a))


def test_a_float_reduction_over_a_chunked_dim_needs_reassociate():
    i, k = td.dims("i k")
    A = td.input("A", {i: 6, k: 20}, td.float32)
    S = td.compute("S", {i: 6}, td.sum(A[i, k], over=k))
    a = np.random.default_rng(5).standard_normal((6, 20)).astype(np.float32)
    arr = da.from_array(a, chunks=(3, 7))
    with pytest.raises(td.ChunkingError, match="reduces over dim k.*reassociate=True") as e:
        td.map_blocks(S, A=arr)
    assert e.value.dims == ("k",)
    got = td.map_blocks(S, A=arr, reassociate=True).compute()
    np.testing.assert_allclose(got, a.sum(axis=1), rtol=1e-5, atol=1e-5)
    whole = td.map_blocks(S, A=arr.rechunk({1: -1})).compute()  # the fix it names
    np.testing.assert_allclose(whole, a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_a_reduction_that_cannot_be_combined_is_refused_naming_the_dim():
    i, k = td.dims("i k")
    A = td.input("A", {i: 6, k: 20}, td.int32)
    best = td.compute("best", {i: 6}, td.argmax(A[i, k], over=k))
    T = td.compute("T", {i: 6}, td.sum(A[i, k], over=k) * 2)  # not the whole definition
    arr = da.from_array(_ints((6, 20)), chunks=(6, 5))
    for out in (best, T):
        with pytest.raises(td.ChunkingError, match="dim k is reduced over") as e:
            td.map_blocks(out, A=arr)
        assert e.value.dims == ("k",)


def test_a_recurrence_along_a_chunked_dim_is_refused_and_runs_unchunked():
    r, = td.dims("r")
    N = td.size("N")
    x = td.input("x", {r: N}, td.int64)
    y = td.compute("y", {r: N}, x[r])
    td.update(y[r], y[r - 1] + x[r], over={r: (1, N)})
    a = np.arange(1, 41, dtype=np.int64)
    with pytest.raises(td.ChunkingError, match="recurrence along a chunked dim: r") as e:
        td.map_blocks(y, x=da.from_array(a, chunks=7))
    assert e.value.dims == ("r",)
    got = td.map_blocks(y, x=da.from_array(a, chunks=-1)).compute()
    assert np.array_equal(got, np.cumsum(a))


def test_a_pointwise_update_runs_chunked():
    y, x = td.dims("y x")
    H, W = td.size("H"), td.size("W")
    A = td.input("A", {y: H, x: W}, td.int32)
    B = td.compute("B", {y: H, x: W}, td.clamp(A)[y, x + 1])
    td.update(B[y, x], B[y, x] * 3 + td.clamp(A)[y - 1, x], over={y: H, x: (1, W)})
    C = td.compute("C", {y: H, x: W}, td.pad(B, -5)[y + 1, x - 1])
    a = _ints((11, 14), 6)
    got = td.map_blocks(C, A=da.from_array(a, chunks=(3, 4))).compute()
    assert np.array_equal(got, td.evaluate(C, A=a))


def test_several_outputs_come_back_as_several_arrays(backend):
    _, B, C = _stencil()
    f = td.build(td.schedule((B, C)), target=backend)
    a = _ints((12, 10), 7)
    b, c = td.map_blocks(f, A=da.from_array(a, chunks=(5, 3)))
    wb, wc = f(A=a)
    assert np.array_equal(b.compute(), wb) and np.array_equal(c.compute(), wc)


def test_calling_a_kernel_with_a_dask_array_is_lazy():
    _, _, C = _stencil()
    f = td.build(C)
    a = _ints((9, 9), 8)
    out = f(A=da.from_array(a, chunks=4))
    assert isinstance(out, da.Array) and out.chunks == ((4, 4, 1), (4, 4, 1))
    assert np.array_equal(out.compute(), f(A=a))


def test_two_runs_on_other_arrays_share_no_key():
    _, _, C = _stencil()
    f = td.build(C)
    a, b = _ints((9, 9), 1), _ints((9, 9), 2)
    x = td.map_blocks(f, A=da.from_array(a, chunks=4))
    y = td.map_blocks(f, A=da.from_array(b, chunks=4))
    z = td.map_blocks(f, A=da.from_array(a, chunks=5))
    assert x.name != y.name and x.name != z.name
    gx, gy, gz = dask.compute(x, y, z)
    assert np.array_equal(gx, f(A=a)) and np.array_equal(gy, f(A=b))
    assert np.array_equal(gz, gx)


def test_chunks_choose_the_output_grid():
    _, _, C = _stencil()
    a = _ints((10, 12), 9)
    out = td.map_blocks(C, A=da.from_array(a, chunks=(10, 12)), chunks={"y": 3, "x": (5, 7)})
    assert out.chunks == ((3, 3, 3, 1), (5, 7))
    assert np.array_equal(out.compute(), td.evaluate(C, A=a))


@pytest.mark.parametrize("kwargs, message", [
    ({"A": np.zeros((4, 4), np.float32)}, "dtype float32 but must be int32"),
    ({}, "missing input"),
    ({"A": np.zeros((4, 4), np.int32), "Q": 1}, "unknown argument 'Q'"),
    ({"A": np.zeros((4,), np.int32)}, "1 dimension"),
    ({"A": np.zeros((4, 4), np.int32), "chunks": {"z": 2}}, "not a dim of the outputs"),
    ({"A": np.zeros((4, 4), np.int32), "chunks": {"y": (3, 3)}}, "adding up to 4"),
    ({"A": np.zeros((4, 4), np.int32), "threads": 0}, "threads="),
    ({"A": [[1]]}, "must be a dask array"),
])
def test_mistakes_are_argument_errors(kwargs, message):
    _, _, C = _stencil()
    with pytest.raises(td.ArgumentError, match=message):
        td.map_blocks(C, **kwargs)


def test_a_missing_dask_names_the_extra(monkeypatch):
    import builtins

    real = builtins.__import__

    def fake(name, *args, **kwargs):
        if name.startswith("dask"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake)
    import importlib

    monkeypatch.setattr(importlib, "import_module", lambda n: fake(n))
    _, _, C = _stencil()
    with pytest.raises(td.MissingDependency, match=r"tdsl\[chunked\]"):
        td.map_blocks(C, A=np.zeros((3, 3), np.int32))


def test_threads_per_call():
    from tdsl.chunked.task import Program

    _, _, C = _stencil()
    p = td.chunk_plan(C, A=da.from_array(_ints((6, 6)), chunks=3), threads=2)
    assert p.program.thread_count() == 2
    q = td.chunk_plan(C, A=da.from_array(_ints((6, 6)), chunks=3))
    assert isinstance(q.program, Program) and q.program.thread_count() == 1


# ---------------------------------------------------------------- random pipelines


def _random_chunks(rng, n: int) -> tuple[int, ...]:
    kind = rng.integers(4)
    if kind == 0:
        return (1,) * n  # size-1 chunks
    if kind == 1:
        return (n,)
    out, left = [], n
    while left:
        c = int(min(left, rng.integers(1, max(2, n // 2 + 1))))
        out.append(c)
        left -= c
    return tuple(out)


def _chunked_run(f, arrays, rng):
    """td.map_blocks on random chunkings of `arrays`; a dim a ChunkingError names gets
    one chunk, until the plan is accepted."""
    dims = {t.name: [d.name for d in t.dims] for t in f.pipeline.inputs}
    given = {}
    for name, a in arrays.items():
        if isinstance(a, np.ndarray):
            given[name] = da.from_array(a, chunks=tuple(_random_chunks(rng, n) for n in a.shape))
        else:
            given[name] = a
    for _ in range(8):
        try:
            return td.map_blocks(f, reassociate=True, **given)
        except td.ChunkingError as e:
            assert e.dims, str(e)
            for name in dims:
                axes = {k: -1 for k, n in enumerate(dims[name]) if n in e.dims}
                given[name] = given[name].rechunk(axes)
    raise AssertionError("no chunking accepted")


# a case builds two kernels and runs many small tasks: a quarter of the profile's examples
@settings(max_examples=max(8, settings.default.max_examples // 3),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.filter_too_much])
@given(index=st.integers(0, 10**6), chunk_seed=st.integers(0, 2**31))
def test_random_pipelines_chunked_equal_the_whole_call(backend, index, chunk_seed):
    """Pipelines of the fuzz generator (boundary views, multi-stage stencils, updates,
    reductions, lookups) x random chunkings == one call on the whole arrays."""
    spec = gen.generate(4301, index, 3)
    ns: dict = {}
    try:
        exec(compile(render.program(spec), "<case>", "exec"), ns)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = td.build(ns["s"], target=backend)
            want = f(**ns["arrays"])
    except (td.DefinitionError, td.ScheduleError, td.ArgumentError):
        assume(False)  # an algorithm (or data) tdsl refuses as a whole is no case here
    rng = np.random.default_rng(chunk_seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = dask.compute(_chunked_run(f, ns["arrays"], rng))[0]
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    scale = oracle.magnitude(ns["arrays"].values())
    for out, g, w in zip(f.pipeline.outputs, got, want):
        if oracle.is_float(w.dtype):
            msg = oracle.mismatch(g, w, spec["tol"] * 8, oracle.float_base(spec), scale,
                                  overflow=True)
            assert msg is None, f"{out.name}: {msg}\n{render.program(spec)}"
        else:
            assert oracle.identical(g, w), f"{out.name} differs\n{render.program(spec)}"


def test_the_benchmark_compares_the_same_blur():
    """benchmarks/chunked.py: tdsl's chunked blur, dask's map_overlap with scipy's filter
    over the same chunks, and one whole-array call agree."""
    import importlib.util
    from pathlib import Path

    pytest.importorskip("scipy")
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "chunked.py"
    spec = importlib.util.spec_from_file_location("chunked_benchmark", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    f = bench.kernel()
    a = np.random.default_rng(11).standard_normal((70, 90)).astype(np.float32)
    arr = da.from_array(a, chunks=(32, 32))
    ours = td.map_blocks(f, A=arr, threads=1).compute()
    theirs = arr.map_overlap(bench.scipy_blur, depth=1, boundary="nearest",
                             dtype=np.float32).compute()
    np.testing.assert_allclose(ours, f(A=a), rtol=0, atol=0)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
