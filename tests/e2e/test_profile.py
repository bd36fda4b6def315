"""Kernel.profile: time per stage and per parallel loop from an instrumented build that
computes what the kernel computes, on both backends. The counts of entries are exact
and are asserted; the times only for what holds whatever the machine's load."""

import numpy as np
import pytest

import tdsl as td
from tdsl.api import _build_module
from tdsl.lower import finish
from tdsl.lower.passes import profile as prof
from tdsl.lower.passes.verify import verify

RNG = np.random.default_rng(4)


def blur(h=66, w=130):
    x, y = td.dims("x y")
    inp = td.input("inp", {y: h, x: w}, td.float32)
    bx = td.compute("bx", {y: h, x: w - 2}, (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) / 3)
    return td.compute("by", {y: h - 2, x: w - 2}, (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3)


def blur_ref(img):
    hx = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) / np.float32(3)
    return (hx[:-2] + hx[1:-1] + hx[2:]) / np.float32(3)


def matmul(m=48, k=32, n=64):
    i, j, kk = td.dims("i j k")
    A = td.input("A", {i: m, kk: k}, td.float32)
    B = td.input("B", {kk: k, j: n}, td.float32)
    return td.compute("C", {i: m, j: n}, td.sum(A[i, kk] * B[kk, j], over=kk))


def softmax(rows=16, cols=256):
    r, c = td.dims("r c")
    X = td.input("X", {r: rows, c: cols}, td.float32)
    mx = td.compute("mx", {r: rows}, td.max(X[r, c], over=c))
    e = td.compute("e", {r: rows, c: cols}, td.exp(X[r, c] - mx[r]))
    total = td.compute("total", {r: rows}, td.sum(e[r, c], over=c))
    return td.compute("out", {r: rows, c: cols}, e[r, c] / total[r])


def strips(out):
    """Blur in strips of 8 output rows (8 strips), bx per strip, strips in parallel."""
    return (td.schedule(out).split(out, "y", 8).compute_at("bx", out, "y_o")
            .parallel(out, "y_o"))


def instrumented_outputs(s, target, arrays):
    nest = td.lower(s)
    inst = finish(prof.instrument(nest))
    verify(inst)
    regions = prof.plan(nest)
    module = _build_module(target, inst)
    f = td.build(s, target=target)
    buffers, sizes, outs = f._prepare(arrays)
    c = np.zeros(prof.counters(regions), np.int64)
    assert module.run([*buffers, c], sizes) == 0
    return outs, regions, c


@pytest.mark.parametrize("kernel", ["blur-strips", "blur-auto", "matmul-auto", "softmax-auto",
                                    "softmax-plain"])
def test_the_instrumented_kernel_computes_what_the_kernel_computes(kernel, backend):
    if kernel.startswith("blur"):
        out, img = blur(), RNG.standard_normal((66, 130), dtype=np.float32)
        arrays, want = {"inp": img}, blur_ref(img)
    elif kernel.startswith("matmul"):
        out = matmul()
        a, b = RNG.standard_normal((48, 32), np.float32), RNG.standard_normal((32, 64), np.float32)
        arrays, want = {"A": a, "B": b}, a @ b
    else:
        out, x = softmax(), RNG.standard_normal((16, 256), dtype=np.float32)
        ex = np.exp(x - x.max(axis=1, keepdims=True))
        arrays, want = {"X": x}, ex / ex.sum(axis=1, keepdims=True)
    s = {"blur-strips": lambda: strips(out), "softmax-plain": lambda: td.schedule(out)}.get(
        kernel, lambda: td.autoschedule(out, target=backend))()
    outs, regions, c = instrumented_outputs(s, backend, arrays)
    got = outs[out.name]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    f = td.build(s, target=backend)
    assert np.array_equal(got, f(**arrays))  # bit for bit what the kernel computes
    assert (c >= 0).all() and c[1] == 1  # the kernel ran once
    p = f.profile(**arrays)
    assert np.array_equal(f(**arrays), got)  # profiling changed nothing
    assert sum(r.seconds for r in p.rows) == pytest.approx(p.total, rel=1e-9, abs=1e-12)
    stages = {st for r in regions if r.kind == "stage" for st in r.stages}
    assert out.name in stages


def test_entries_of_stages_and_parallel_loops_are_exact(backend):
    out, img = blur(), RNG.standard_normal((66, 130), dtype=np.float32)
    _, regions, c = instrumented_outputs(strips(out), backend, {"inp": img})
    kinds = [(r.kind, r.label) for r in regions]
    assert kinds[0][0] == "kernel" and ("parallel", "y_o") in kinds
    entries = {r.label: int(c[prof.SLOTS * k + 1]) for k, r in enumerate(regions)}
    assert entries["y_o"] == 1  # the parallel loop started once
    assert entries["bx"] == 8 and entries["by"] == 8  # once per strip
    par = next(k for k, r in enumerate(regions) if r.kind == "parallel")
    assert all(r.parent == par and r.in_parallel for r in regions if r.label in ("bx", "by"))
    assert c[prof.SLOTS * par + 2] > 0  # the threads' busy time was measured


def test_a_producer_inside_a_loop_that_runs_too_often_is_timed_with_its_consumer(monkeypatch):
    out, img = blur(), RNG.standard_normal((66, 130), dtype=np.float32)
    s = td.schedule(out).split(out, "y", 2).compute_at("bx", out, "y_o")  # 32 strips
    monkeypatch.setattr(prof, "MAX_ENTRIES", 4)
    outs, regions, c = instrumented_outputs(s, "c", {"inp": img})
    np.testing.assert_allclose(outs["by"], blur_ref(img), rtol=1e-5, atol=1e-6)
    labels = [r.label for r in regions]
    assert "by + bx" in labels or "bx + by" in labels
    assert "bx" not in labels
    assert all(int(c[prof.SLOTS * k + 1]) == 1 for k in range(len(regions)))


def test_the_profile_shows_itself_as_a_table_bars_and_a_plot(backend):
    out, img = blur(), RNG.standard_normal((66, 130), dtype=np.float32)
    f = td.build(strips(out), target=backend)
    p = f.profile(inp=img, runs=2)
    text = str(p)
    assert "parallel y_o" in text and "bx" in text and "threads busy" in text
    html = p._repr_html_()
    assert "<table>" in html and "background:" in html and "bx" in html
    assert set(p.by_stage()) == {"bx", "by"}
    assert p.plain > 0 and p.total > 0
    pytest.importorskip("matplotlib")
    fig = p.plot()
    assert len(fig.axes[0].patches) == len(p.rows)


def test_bad_profile_arguments_are_refused():
    out = blur()
    f = td.build(td.schedule(out))
    with pytest.raises(td.ArgumentError, match="runs must be"):
        f.profile(inp=np.zeros((66, 130), np.float32), runs=0)
    with pytest.raises(td.ArgumentError):
        f.profile(inp=np.zeros((5, 5), np.float32))
    with pytest.raises(td.ArgumentError, match="positional"):
        f.profile(np.zeros((66, 130), np.float32), np.zeros(3))
