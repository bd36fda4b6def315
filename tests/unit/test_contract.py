"""The user-facing contract, the matrix multiply of docs/user-guide.md ("A matrix multiply,
scheduled"), run as written, on both backends."""

from __future__ import annotations

import types

import numpy as np
import pytest

import tdsl as td


@pytest.fixture
def contract():
    i, j, k = td.dims("i j k")
    N = td.size("N")
    A = td.input("A", {i: N, k: 512}, td.float32)
    B = td.input("B", {k: 512, j: 256}, td.float32)
    C = td.compute("C", {i: N, j: 256}, td.sum(A[i, k] * B[k, j], over=k))
    s = (td.schedule(C)
         .tile(C, i=32, j=64)
         .split(C, k, 4)
         .reorder(C, "i_o j_o k_o i_i k_i j_i")
         .vectorize(C, "j_i")
         .parallel(C, "i_o"))
    return A, B, C, s


def test_contract_example(contract, backend):
    A, B, C, s = contract
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (70, 512)).astype(np.float32)  # 70: a tail tile in i
    b = rng.uniform(-1, 1, (512, 256)).astype(np.float32)
    f = td.build(s, target=backend)
    c = f(A=a, B=b)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    out = np.zeros((70, 256), np.float32)
    assert f(A=a, B=b, C=out) is out
    np.testing.assert_array_equal(out, c)
    assert f.args == ["A", "B", "C", "N"]
    assert "i_o" in f.source and "j_i" in f.source
    nest = str(td.lower(s))
    assert "for i_o in" in nest and "# parallel" in nest and "# vectorized" in nest
    ref = td.evaluate(C, A=a, B=b)
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4)
    t = f.benchmark(A=a, B=b, runs=3)
    assert t.runs >= 3 and 0 < t.min <= t.median
    assert "Loop nest" in f._repr_html_()


def test_schedule_from_records_and_json(contract):
    A, B, C, s = contract
    again = td.schedule(C, list(s.primitives))
    assert again == s
    assert td.Schedule.from_json(s.to_json(), C) == s


def test_several_outputs_return_a_tuple(backend):
    x = td.dim("x")
    a = td.input("a", {x: 10}, td.int32)
    p = td.compute("p", {x: 10}, a[x] + 1)
    q = td.compute("q", {x: 10}, p[x] * 3)
    f = td.build(td.schedule((q, p)), target=backend)
    av = np.arange(10, dtype=np.int32)
    got_q, got_p = f(a=av)
    np.testing.assert_array_equal(got_p, av + 1)
    np.testing.assert_array_equal(got_q, (av + 1) * 3)
    assert f.args == ["a", "q", "p"]


def test_argument_checks_happen_before_native_code(contract, backend):
    A, B, C, s = contract
    f = td.build(s, target=backend)
    a = np.zeros((3, 512), np.float32)
    b = np.zeros((512, 256), np.float32)
    with pytest.raises(td.ArgumentError, match="float32"):
        f(A=a.astype(np.float64), B=b)
    with pytest.raises(td.ArgumentError, match="missing|not given|required"):
        f(A=a)
    with pytest.raises(td.ArgumentError, match="unknown argument"):
        f(A=a, B=b, Q=a)
    with pytest.raises(td.ArgumentError):
        f(A=np.zeros((3, 511), np.float32), B=b)
    with pytest.raises(td.ArgumentError):
        f(A=a, B=b, C=np.zeros((4, 256), np.float32))
    # a non-contiguous input is copied, and the answer is still right
    big = np.ones((3, 1024), np.float32)
    np.testing.assert_allclose(f(A=big[:, ::2], B=b), np.zeros((3, 256)))


def test_compile_error_keeps_source():
    from tdsl.backend_c import compile_source

    with pytest.raises(td.CompileError) as e:
        compile_source("int broken( {")
    assert e.value.source_path and "error" in e.value.log


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_benchmark_arrays_named_like_its_options(backend):
    """An input named `runs` cannot be passed as runs=...: benchmark takes one dict of arrays."""
    (i,) = td.dims("i")
    runs = td.input("runs", {i: 8}, td.float32)
    warmup = td.input("warmup", {i: 8}, td.float32)
    out = td.compute("out", {i: 8}, runs[i] * warmup[i])
    f = td.build(td.schedule(out), target=backend)
    r, w = np.arange(8, dtype=np.float32), np.full(8, 2, np.float32)
    np.testing.assert_array_equal(f(runs=r, warmup=w), r * w)
    t = f.benchmark({"runs": r, "warmup": w}, runs=3, warmup=0)
    assert t.runs >= 3 and 0 < t.min <= t.median
    with pytest.raises(td.ArgumentError, match=r"argument named 'runs'.*one dict"):
        f.benchmark(runs=r, warmup=w)


def test_benchmark_stops_early_once_the_fastest_calls_agree(monkeypatch):
    """With `accuracy`, timing ends as soon as the three fastest calls are within it of
    each other (Halide's rule); without it, `runs` calls are made."""
    from tdsl.runtime.kernel import _settled

    assert not _settled([1.0, 1.0], 0.05)
    assert _settled([1.0, 9.0, 1.02, 1.04], 0.05)
    assert not _settled([1.0, 9.0, 1.02, 1.06], 0.05)
    x = td.dim("x")
    a = td.input("a", {x: 8}, td.float32)
    f = td.build(td.schedule(td.compute("b", {x: 8}, a[x] * 2)))
    arr = np.ones(8, np.float32)
    delays = iter([0.03, 0.002, 0.002, 0.03, 0.002] + [0.002] * 100)
    clock = [0.0]  # a clock of its own: each call takes exactly its delay, however busy
    # the machine (real sleeps of 2 ms took 3 on a loaded host and settled nothing)

    def slow_run(args, sizes):
        clock[0] += next(delays)

    import tdsl.runtime.kernel as kernel_module

    monkeypatch.setattr(kernel_module, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(f, "_run", slow_run)
    t = f.benchmark(a=arr, runs=50, warmup=0, accuracy=0.5)
    assert t.runs == 5 and t.min < 0.01 < t.max  # the 2 ms calls settled it at the fifth
    t = f.benchmark(a=arr, runs=7, warmup=0)
    assert t.runs == 7
    t = f.benchmark(a=arr, runs=50, warmup=0, accuracy=0.5, min_seconds=0.05)
    assert t.runs > 5 and sum(t.times) >= 0.045  # min_seconds still holds
