"""td.autoschedule / td.autotemplate: legal, correct schedules from rules, on both backends."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tdsl as td
from tdsl.tune.auto import machine

TARGETS = ["c", "llvm"]
RNG = np.random.default_rng(5)


def rand(*shape):
    return RNG.standard_normal(shape, dtype=np.float32)


def matmul(m=64, k=48, n=96):
    i, j, kk = td.dims("i j k")
    A = td.input("A", {i: m, kk: k}, td.float32)
    B = td.input("B", {kk: k, j: n}, td.float32)
    return td.compute("C", {i: m, j: n}, td.sum(A[i, kk] * B[kk, j], over=kk))


def check(out, arrays, want, target, s=None, rtol=1e-4):
    s = s or td.autoschedule(out, target=target)
    got = td.build(s, target=target)(**arrays)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * float(np.abs(want).max()))
    return s


@pytest.mark.parametrize("target", TARGETS)
def test_a_matmul_gets_a_register_tile_and_a_packed_panel(target):
    C = matmul()
    a, b = rand(64, 48), rand(48, 96)
    s = check(C, {"A": a, "B": b}, a @ b, target)
    methods = [p.method for p in s.primitives]
    assert {"cache_write", "cache_read", "unroll", "vectorize", "parallel"} <= set(methods)
    t = td.autotemplate(C, target=target)
    assert t.instantiate() == s
    lanes = machine().vector_bytes // 4
    # the hand schedules' register tiles are in the space the tuner searches
    assert {4, 8} <= set(t.knobs["C.tile_i"]) and {2 * lanes, 4 * lanes} <= set(t.knobs["C.tile_j"])


@pytest.mark.parametrize("target", TARGETS)
def test_a_blur_computes_its_producer_per_strip_of_rows(target):
    x, y = td.dims("x y")
    inp = td.input("inp", {y: 70, x: 96}, td.float32)
    bx = td.compute("bx", {y: 70, x: 94}, (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) / 3)
    by = td.compute("by", {y: 68, x: 94}, (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3)
    img = rand(70, 96)
    hx = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) / np.float32(3)
    s = check(by, {"inp": img}, (hx[:-2] + hx[1:-1] + hx[2:]) / np.float32(3), target)
    assert any(p.method == "compute_at" and p.loop == "y_o" for p in s.primitives)


@pytest.mark.parametrize("target", TARGETS)
def test_softmax_stages_run_per_row_with_reductions_in_vector_lanes(target):
    r, c = td.dims("r c")
    X = td.input("X", {r: 12, c: 512}, td.float32)
    mx = td.compute("mx", {r: 12}, td.max(X[r, c], over=c))
    e = td.compute("e", {r: 12, c: 512}, td.exp(X[r, c] - mx[r]))
    total = td.compute("total", {r: 12}, td.sum(e[r, c], over=c))
    out = td.compute("out", {r: 12, c: 512}, e[r, c] / total[r])
    x = rand(12, 512)
    ex = np.exp(x - x.max(axis=1, keepdims=True))
    s = check(out, {"X": x}, ex / ex.sum(axis=1, keepdims=True), target)
    # each reduction into vector lanes, then its partials into COMBINE lanes
    names = [p.name for p in s.primitives if p.method == "rfactor"]
    assert sorted(names) == ["mx_rf", "mx_rf2", "total_rf", "total_rf2"]
    t = td.autotemplate(out, target=target)
    plain = t.instantiate(**{"mx.combine": None, "total.combine": None})
    assert [p.method for p in plain.primitives].count("rfactor") == 2
    check(out, {"X": x}, ex / ex.sum(axis=1, keepdims=True), target, plain)


def layernorm(rows, cols):
    r, c = td.dims("r c")
    X = td.input("X", {r: rows, c: cols}, td.float32)
    total = td.compute("total", {r: rows}, td.sum(X[r, c], over=c))
    mean = td.compute("mean", {r: rows}, total[r] / cols)
    d = td.compute("d", {r: rows, c: cols}, X[r, c] - mean[r])
    sq = td.compute("sq", {r: rows}, td.sum(d[r, c] * d[r, c], over=c))
    return td.compute("out", {r: rows, c: cols}, d[r, c] / td.sqrt(sq[r] / cols + 1e-5))


def conv_depthwise(c, h, w):
    ch, y, x, ry, rx = td.dims("c y x ry rx")
    inp = td.input("inp", {ch: c, y: h, x: w}, td.float32)
    wt = td.input("w", {ch: c, ry: 3, rx: 3}, td.float32)
    P = td.compute("P", {ch: c, y: h + 2, x: w + 2}, td.pad(inp, 0.0)[ch, y - 1, x - 1])
    return td.compute("out", {ch: c, y: h, x: w},
                      td.sum(P[ch, y + ry, x + rx] * wt[ch, ry, rx], over=(ry, rx)))


def two_mm(n):
    i, j, k, m = td.dims("i j k m")
    A = td.input("A", {i: n, k: n}, td.float32)
    B = td.input("B", {k: n, j: n}, td.float32)
    C = td.input("C", {j: n, m: n}, td.float32)
    T = td.compute("T", {i: n, j: n}, td.sum(A[i, k] * B[k, j], over=k))
    return td.compute("D", {i: n, m: n}, td.sum(T[i, j] * C[j, m], over=j))


def heat3d(n):
    z, y, x = td.dims("z y x")
    U = td.input("U", {z: n, y: n, x: n}, td.float32)
    return td.compute("V", {z: n - 2, y: n - 2, x: n - 2},
                      U[z + 1, y + 1, x + 1] + 0.125 * (U[z, y + 1, x + 1] + U[z + 2, y + 1, x + 1]
                                                        + U[z + 1, y, x + 1] + U[z + 1, y + 2, x + 1]))


def covariance(n, m):
    s, i, j = td.dims("s i j")
    X = td.input("X", {s: n, i: m}, td.float32)
    total = td.compute("total", {i: m}, td.sum(X[s, i], over=s))
    D = td.compute("D", {s: n, i: m}, X[s, i] - total[i] / n)
    S = td.compute("S", {i: m, j: m}, td.sum(D[s, i] * D[s, j], over=s))
    return td.compute("cov", {i: m, j: m}, S[i, j] / (n - 1))


@pytest.mark.parametrize("target", TARGETS)
def test_kernels_nobody_scheduled_come_out_correct(target):
    x = rand(16, 256)
    d = x - x.mean(axis=1, keepdims=True)
    check(layernorm(16, 256), {"X": x},
          d / np.sqrt((d * d).mean(axis=1, keepdims=True) + np.float32(1e-5)), target)
    inp, w = rand(4, 18, 32), rand(4, 3, 3)
    p = np.pad(inp, ((0, 0), (1, 1), (1, 1)))
    want = sum(p[:, a:a + 18, b:b + 32] * w[:, a, b][:, None, None] for a in range(3) for b in range(3))
    check(conv_depthwise(4, 18, 32), {"inp": inp, "w": w}, want, target)
    a, b, c = rand(64, 64), rand(64, 64), rand(64, 64)
    check(two_mm(64), {"A": a, "B": b, "C": c}, (a @ b) @ c, target, rtol=1e-3)
    u = rand(20, 20, 20)
    cc = u[1:-1, 1:-1, 1:-1]
    check(heat3d(20), {"U": u}, cc + np.float32(0.125) * (u[:-2, 1:-1, 1:-1] + u[2:, 1:-1, 1:-1]
                                                         + u[1:-1, :-2, 1:-1] + u[1:-1, 2:, 1:-1]),
          target)
    xs = rand(80, 48)
    check(covariance(80, 48), {"X": xs}, np.cov(xs, rowvar=False).astype(np.float32), target,
          rtol=1e-3)


def test_symbolic_sizes_take_hints_and_the_schedule_holds_for_any_size():
    i, j = td.dims("i j")
    N = td.size("N")
    X = td.input("X", {i: N, j: 200}, td.float32)
    Y = td.compute("Y", {i: N, j: 200}, td.exp(X[i, j]) * 2)
    s = td.autoschedule(Y, N=4096)
    assert s.primitives, "a 4096 x 200 pointwise stage gets vector lanes and threads"
    f = td.build(s)
    for n in (1, 7, 33):
        x = rand(n, 200)
        np.testing.assert_allclose(f(X=x), np.exp(x) * 2, rtol=1e-6)
    assert td.autoschedule(Y) == td.autoschedule(Y, N=1024)
    with pytest.raises(td.TdslError, match="M is not a size of this pipeline; its sizes are: N"):
        td.autoschedule(Y, M=3)


def test_the_result_is_a_plain_schedule_that_round_trips():
    C = matmul()
    s = td.autoschedule(C)
    assert isinstance(s, td.Schedule)
    assert td.Schedule.from_json(s.to_json(), C) == s
    assert eval(repr(s), {"td": td, "C": C, "B": C.expr.body.b.tensor}) == s
    t = td.autotemplate(C)
    assert td.Template.from_json(t.to_json(), C) == t
    assert json.loads(t.to_json())["calls"]


def test_updates_and_integer_stages_are_left_alone_or_kept_serial():
    (r,) = td.dims("r")
    x = td.input("x", {r: 4096}, td.int32)
    y = td.compute("y", {r: 4096}, x[r])
    td.update(y[r], y[r - 1] + x[r], over={r: (1, 4096)})
    s = td.autoschedule(y)
    xs = RNG.integers(-100, 100, 4096).astype(np.int32)
    np.testing.assert_array_equal(td.build(s)(x=xs), np.cumsum(xs, dtype=np.int32))


def test_unknown_target_is_refused():
    with pytest.raises(td.TdslError, match="unknown target 'gpu'"):
        td.autoschedule(matmul(), target="gpu")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, 10**6), target=st.sampled_from(TARGETS))
def test_generated_pipelines_with_random_knob_values_are_legal_and_exact(index, target):
    """The fuzzer's pipelines, scheduled by the auto-scheduler's template with its knobs
    set at random: refused (a combination the primitives reject) or exact."""
    from tdsl.fuzz.case import run_task

    res = run_task({"seed": 4242, "index": index, "target": target, "auto": True,
                    "max_stages": 5}, lambda msg: None)
    assert res["class"] in ("exact", "rejected"), res
    if res["class"] == "rejected":
        assert res["detail"].startswith(("ScheduleError", "DefinitionError")), res["detail"]


def conv3x3(ci, co, h, w):
    c, k, y, x, ry, rx = td.dims("c k y x ry rx")
    inp = td.input("inp", {c: ci, y: h, x: w}, td.float32)
    wt = td.input("w", {k: co, c: ci, ry: 3, rx: 3}, td.float32)
    P = td.compute("P", {c: ci, y: h + 2, x: w + 2}, td.pad(inp, 0.0)[c, y - 1, x - 1])
    return td.compute("out", {k: co, y: h, x: w},
                      td.sum(P[c, y + ry, x + rx] * wt[k, c, ry, rx], over=(c, ry, rx)))


def conv3x3_numpy(a, w):
    h, wd = a.shape[1:]
    p = np.pad(a, ((0, 0), (1, 1), (1, 1)))
    return sum(np.einsum("cyx,kc->kyx", p[:, i:i + h, j:j + wd], w[:, :, i, j])
               for i in range(3) for j in range(3))


@pytest.mark.parametrize("target", TARGETS)
def test_a_convolution_vectorizes_output_channels_with_packed_weights(target):
    out = conv3x3(8, 32, 10, 12)
    a, w = rand(8, 10, 12), rand(32, 8, 3, 3)
    s = check(out, {"inp": a, "w": w}, conv3x3_numpy(a, w), target)
    layouts = {p.stage: p.dims for p in s.primitives if p.method == "layout"}
    assert layouts == {"out_acc": ("y", "x", "k"), "w_p": ("c", "ry", "rx", "k")}


@pytest.mark.parametrize("target", TARGETS)
def test_a_convolution_unrolls_the_filter_by_knobs(target):
    """The filter's columns are unrolled around the register tile by default, its rows
    only when the knob says so; every combination computes numpy's values."""
    out = conv3x3(4, 16, 6, 9)
    a, w = rand(4, 6, 9), rand(16, 4, 3, 3)
    want = conv3x3_numpy(a, w)
    t = td.autotemplate(out, target=target)
    assert t.knobs["out.unroll_rx"] == ("rx", None)
    assert t.knobs["out.unroll_ry"] == (None, "ry")
    for cols, rows in (("rx", None), ("rx", "ry"), (None, "ry")):
        s = t.instantiate(**{"out.unroll_rx": cols, "out.unroll_ry": rows})
        unrolled = {p.loop for p in s.primitives if p.method == "unroll" and p.stage == "out_acc"}
        assert {"rx", "ry"} & unrolled == {d for d in (cols, rows) if d}
        check(out, {"inp": a, "w": w}, want, target, s=s)


@pytest.mark.parametrize("target", TARGETS)
def test_a_convolution_slides_its_padded_input_over_strips_of_rows(target):
    """With rows enough for the cores (two strips per core), the padded input is stored
    per strip of rows and computed per row (a sliding window), the strips on threads and
    the filter's rows unrolled; strips of every offered height, and the padded input
    per row or at the root, compute numpy's values, rows not dividing into strips too."""
    two = td.Machine.avx512(cores=2)
    out = conv3x3(3, 16, 18, 10)
    a, w = rand(3, 18, 10), rand(16, 3, 3, 3)
    want = conv3x3_numpy(a, w)
    t = td.autotemplate(out, target=target, machine=two)
    assert t.knobs["P.at"] == ("strips", "y", "root")
    assert t.knobs["out.strip"] == (5, 9, 3)  # 18 rows: 4, 2 and 8 strips
    assert t.defaults["out.unroll_ry"] == "ry"
    s = t.instantiate()
    def prim(method, stage):
        return next(p for p in s.primitives if p.method == method
                    and getattr(p.stage, "name", p.stage) == stage)
    assert (prim("store_at", "P").loop, prim("compute_at", "P").loop) == ("y", "y_s")
    assert prim("parallel", "out").loop == "y"
    assert [(p.loop, p.factor) for p in s.primitives
            if p.method == "split" and p.stage is out and p.loop == "y"] == [("y", 5)]
    check(out, {"inp": a, "w": w}, want, target, s=s)
    for knobs in ({"out.strip": 9}, {"out.strip": 3, "out.unroll_ry": None},
                  {"P.at": "y"}, {"P.at": "root"}, {"out.parallel": "k_o"}):
        check(out, {"inp": a, "w": w}, want, target, s=t.instantiate(**knobs))
    # one core, or rows too few to share: no strips, the filter's rows a knob, off
    for model, h in ((td.Machine.avx512(cores=1), 18), (two, 15)):
        small = td.autotemplate(conv3x3(3, 16, h, 10), target=target, machine=model)
        assert small.knobs["P.at"] == ("y", "root") and "out.strip" not in small.knobs
        assert small.defaults["out.unroll_ry"] is None


@settings(max_examples=6, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("target", TARGETS)
def test_a_convolution_on_strips_of_rows_is_exact_for_any_shape_and_knobs(target, data):
    """Shapes with rows enough for strips on 2 cores (some not dividing into them), and
    any choice of every knob of the template: numpy's values."""
    ci = data.draw(st.integers(1, 3), label="ci")
    co = data.draw(st.sampled_from([16, 32]), label="co")
    h = data.draw(st.integers(16, 41), label="h")
    w = data.draw(st.integers(3, 17), label="w")
    out = conv3x3(ci, co, h, w)
    t = td.autotemplate(out, target=target, machine=td.Machine.avx512(cores=2))
    assert t.defaults["P.at"] == "strips"
    values = {n: data.draw(st.sampled_from(c), label=n) for n, c in t.knobs.items()}
    a, wt = rand(ci, h, w), rand(co, ci, 3, 3)
    try:
        chosen = t.instantiate(**values)
    except td.ScheduleError:
        return  # a combination the primitives refuse (the tuner records it as rejected)
    check(out, {"inp": a, "w": wt}, conv3x3_numpy(a, wt), target, chosen)


@pytest.mark.parametrize("target", TARGETS)
def test_an_output_beyond_the_cache_is_streamed_and_a_small_one_is_not(target):
    """Sizes are hints: a 4096 x N output with N = 4096 is 64 MB, past any last-level
    cache this rule assumes, and gets streaming stores (a knob); the same pipeline built
    and run at N = 96 gives numpy's values. An output other stages read is not streamed."""
    r, c = td.dims("r c")
    N = td.size("N")
    X = td.input("X", {r: 64, c: N}, td.float32)
    out = td.compute("out", {r: 64, c: N}, td.exp(X[r, c]) * 2)
    small = td.autotemplate(out, target=target, N=96)
    assert "out.stream" not in small.knobs
    assert "store_nontemporal" not in [p.method for p in small.instantiate().primitives]
    rows = (machine().llc // (64 * 4)) * 2 + 64  # an output twice the cache
    big = td.autotemplate(out, target=target, N=rows)
    assert big.knobs["out.stream"] == ("out", None)
    s = big.instantiate()
    assert s.primitives[-1] == td.StoreNontemporal(out)
    x = rand(64, 96)
    check(out, {"X": x}, np.exp(x) * 2, target, s=s, rtol=1e-5)
    # read by another stage (a second output): ordinary stores
    total = td.compute("total", {r: 64}, td.sum(out[r, c], over=c))
    both = td.autotemplate((out, total), target=target, N=rows)
    assert "out.stream" not in both.knobs


@pytest.mark.parametrize("target", TARGETS)
def test_a_streamed_stage_writes_a_cache_line_per_chunk_and_a_strips_producer_long_chunks(target):
    """Vector chunks by default: a stage streamed by default one 64-byte line (16 floats
    with AVX-512, 2 vectors with AVX2), the producer a stencil computes per strip 4
    vectors, any other stage 2 vectors; the blur at these defaults (sizes as hints) runs
    exact at a small size."""
    from tdsl.tune.machine import Machine

    x, y = td.dims("x y")
    H, W = td.size("H"), td.size("W")
    inp = td.input("inp", {y: H + 2, x: W + 2}, td.float32)
    bx = td.compute("bx", {y: H + 2, x: W}, (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) / 3)
    by = td.compute("by", {y: H, x: W}, (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3)
    guest = Machine.avx512(cores=2, l2=2 << 20, llc=480 << 20)
    big = td.autotemplate(by, target=target, machine=guest, H=4094, W=4094)
    assert big.defaults["by.stream"] == "by"
    assert (big.defaults["bx.vector"], big.defaults["by.vector"]) == (64, 16)
    small = td.autotemplate(by, target=target, machine=guest, H=94, W=94)
    assert "by.stream" not in small.knobs
    assert (small.defaults["bx.vector"], small.defaults["by.vector"]) == (64, 32)
    avx2 = td.autotemplate(by, target=target, machine=Machine.avx2(cores=2, l2=1 << 20,
                                                                   llc=32 << 20),
                           H=4094, W=4094)
    assert (avx2.defaults["bx.vector"], avx2.defaults["by.vector"]) == (32, 16)
    img = rand(98, 100)
    hx = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) / np.float32(3)
    want = (hx[:-2] + hx[1:-1] + hx[2:]) / np.float32(3)
    got = td.build(big.instantiate(), target=target)(inp=img, H=96, W=98)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def depthwise(ch=5, h=9, w=13):
    c, y, x, ry, rx = td.dims("c y x ry rx")
    inp = td.input("inp", {c: ch, y: h, x: w}, td.float32)
    wt = td.input("w", {c: ch, ry: 3, rx: 3}, td.float32)
    return td.compute("out", {c: ch, y: h, x: w}, td.sum(
        td.pad(inp, 0.0)[c, y + ry - 1, x + rx - 1] * wt[c, ry, rx], over=(ry, rx)))


@settings(max_examples=6, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("target", TARGETS)
def test_a_stencil_reduction_sums_vectors_over_its_taps_or_tiles_an_accumulator(target, data):
    """A depthwise convolution's nine taps: by default each vector of outputs is summed
    over the unrolled taps in registers (no accumulator); the template's "form" knob
    offers the accumulator tile instead. Every choice is exact."""
    ch, h, w = data.draw(st.sampled_from([(5, 9, 13), (3, 17, 40), (2, 6, 33)]))
    out = depthwise(ch, h, w)
    t = td.autotemplate(out, target=target)
    assert t.knobs["out.form"] == ("strip", "acc") and t.defaults["out.form"] == "strip"
    default = t.instantiate()
    assert not any(p.method == "cache_write" for p in default.primitives)
    assert t.instantiate(**{"out.form": "acc"}).primitives[0].method == "cache_write"
    values = {n: data.draw(st.sampled_from(c), label=n) for n, c in t.knobs.items()}
    a, wt = rand(ch, h, w), rand(ch, 3, 3)
    p = np.pad(a, ((0, 0), (1, 1), (1, 1)))
    want = sum(p[:, i:i + h, j:j + w] * wt[:, i, j][:, None, None]
               for i in range(3) for j in range(3))
    check(out, {"inp": a, "w": wt}, want, target, default)
    try:
        chosen = t.instantiate(**values)
    except td.ScheduleError:
        return  # a combination the primitives refuse (the tuner records it as rejected)
    check(out, {"inp": a, "w": wt}, want, target, chosen)


def test_streaming_is_a_knob_past_the_cores_caches_and_the_default_past_their_share_of_the_llc():
    """On a 2-core guest of a server with a 480 MB L3, the rules count on 16 MB of it per
    core: a 64 MB output (with its input, past 32 MB) is streamed by default, a 12 MB one
    offers the choice with ordinary stores first, a 1 MB one has no knob; a 3 MB one,
    whose 3 MB input fits in the two 2 MB L2s that ordinary stores would push it out
    of, is streamed by default."""
    from tdsl.tune.auto import LLC_PER_CORE
    from tdsl.tune.machine import Machine

    guest = Machine.avx512(cores=2, l2=2 << 20, llc=480 << 20)
    assert LLC_PER_CORE == 16 << 20
    r, c = td.dims("r c")
    N = td.size("N")
    X = td.input("X", {r: 4096, c: N}, td.float32)
    out = td.compute("out", {r: 4096, c: N}, X[r, c] * 3)
    for n, want in ((4096, ("out", None)), (768, (None, "out")), (192, ("out", None)),
                    (64, None)):
        t = td.autotemplate(out, machine=guest, N=n)
        assert t.knobs.get("out.stream") == want, (n, t.knobs)
    whole = Machine.avx512(cores=32, l2=2 << 20, llc=480 << 20)  # the socket's own view
    assert td.autotemplate(out, machine=whole, N=4096).knobs["out.stream"] == (None, "out")
