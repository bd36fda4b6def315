"""The machine model the auto-scheduler's rules read, on simulated machines, and
td.autoschedule / td.tune starting from a user's schedule."""

import json
import os

import numpy as np
import pytest

import tdsl as td
from tdsl.tune import machine as mm
from tdsl.tune.machine import Machine

RNG = np.random.default_rng(11)

SIMULATED = {
    "avx2": Machine.avx2(),
    "avx512": Machine.avx512(),
    "avx512-split": Machine.avx512(wide_speedup=1.0),  # 512-bit FMAs in two halves (Zen 4)
    "small-caches": Machine.avx2(l1=8 << 10, l2=64 << 10, llc=256 << 10),
    "one-core-sse": Machine(16, 16, 32 << 10, 256 << 10, 1, 4 << 20, 4, 1.0, "sse4_2"),
}


def rand(*shape):
    return RNG.standard_normal(shape, dtype=np.float32)


def matmul(m, k, n):
    i, j, kk = td.dims("i j k")
    A = td.input("A", {i: m, kk: k}, td.float32)
    B = td.input("B", {kk: k, j: n}, td.float32)
    return td.compute("C", {i: m, j: n}, td.sum(A[i, kk] * B[kk, j], over=kk))


def blur(h, w):
    x, y = td.dims("x y")
    inp = td.input("inp", {y: h, x: w}, td.float32)
    bx = td.compute("bx", {y: h, x: w - 2}, (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) / 3)
    return td.compute("by", {y: h - 2, x: w - 2}, (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3)


def blur_ref(img):
    hx = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) / np.float32(3)
    return (hx[:-2] + hx[1:-1] + hx[2:]) / np.float32(3)


def softmax(rows, cols):
    r, c = td.dims("r c")
    X = td.input("X", {r: rows, c: cols}, td.float32)
    mx = td.compute("mx", {r: rows}, td.max(X[r, c], over=c))
    e = td.compute("e", {r: rows, c: cols}, td.exp(X[r, c] - mx[r]))
    total = td.compute("total", {r: rows}, td.sum(e[r, c], over=c))
    return td.compute("out", {r: rows, c: cols}, e[r, c] / total[r])


def conv2d(ci, co, h, w):
    k, c, y, x, ry, rx = td.dims("k c y x ry rx")
    inp = td.input("inp", {c: ci, y: h, x: w}, td.float32)
    wt = td.input("w", {k: co, c: ci, ry: 3, rx: 3}, td.float32)
    P = td.compute("P", {c: ci, y: h + 2, x: w + 2}, td.pad(inp, 0.0)[c, y - 1, x - 1])
    return td.compute("out", {k: co, y: h, x: w},
                      td.sum(P[c, y + ry, x + rx] * wt[k, c, ry, rx], over=(c, ry, rx)))


def conv_ref(inp, w):
    p = np.pad(inp, ((0, 0), (1, 1), (1, 1)))
    h, wd = inp.shape[1:]
    out = np.zeros((w.shape[0], h, wd), np.float32)
    for a in range(3):
        for b in range(3):
            out += np.einsum("kc,cyx->kyx", w[:, :, a, b], p[:, a:a + h, b:b + wd])
    return out


def depthwise(ch, h, w):
    c, y, x, ry, rx = td.dims("c y x ry rx")
    inp = td.input("inp", {c: ch, y: h, x: w}, td.float32)
    wt = td.input("w", {c: ch, ry: 3, rx: 3}, td.float32)
    padded = td.pad(inp, 0.0)
    return td.compute("out", {c: ch, y: h, x: w},
                      td.sum(padded[c, y + ry - 1, x + rx - 1] * wt[c, ry, rx], over=(ry, rx)))


def depthwise_ref(inp, w):
    p = np.pad(inp, ((0, 0), (1, 1), (1, 1)))
    h, wd = inp.shape[1:]
    return sum(w[:, a, b, None, None] * p[:, a:a + h, b:b + wd]
               for a in range(3) for b in range(3))


def cases():
    a, b = rand(50, 40), rand(40, 70)
    img = rand(40, 70)
    x = rand(6, 256)
    ex = np.exp(x - x.max(axis=1, keepdims=True))
    ci, cw = rand(3, 10, 12), rand(32, 3, 3, 3)
    return [
        ("matmul", matmul(50, 40, 70), {"A": a, "B": b}, a @ b),
        ("blur", blur(40, 70), {"inp": img}, blur_ref(img)),
        ("softmax", softmax(6, 256), {"X": x}, ex / ex.sum(axis=1, keepdims=True)),
        ("conv2d", conv2d(3, 32, 10, 12), {"inp": ci, "w": cw}, conv_ref(ci, cw)),
    ]


@pytest.mark.parametrize("name", list(SIMULATED))
def test_schedules_for_simulated_machines_are_legal_and_match_numpy(name, backend):
    m = SIMULATED[name]
    for kernel, out, arrays, want in cases():
        s = td.autoschedule(out, target=backend, machine=m)
        s.check()  # legal
        got = td.build(s, target=backend)(**arrays)
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * float(np.abs(want).max()),
                                   err_msg=f"{kernel} scheduled for {name}")


@pytest.mark.parametrize("name", list(SIMULATED))
def test_register_tiles_fit_the_simulated_registers_and_lanes(name):
    m = SIMULATED[name]
    t = td.autotemplate(matmul(512, 512, 512), machine=m)
    lanes = m.vector_bytes // 4  # the widest vectors, split in two halves or not
    rows, cols = t.defaults["C.tile_i"], t.defaults["C.tile_j"]
    assert cols % lanes == 0
    assert min(t.knobs["C.tile_j"]) == lanes  # the choices are in this machine's vectors
    accumulators = rows * cols // lanes
    assert accumulators + cols // lanes + 1 <= m.registers
    assert accumulators >= m.fma_chains


def test_split_vector_units_keep_the_widest_vectors_and_offer_half_ones(backend):
    """512-bit FMAs split in two halves (Zen 4): register tiles and stencils still use
    the widest vectors (half the instructions for the same FLOPs); a stencil's strip
    width also offers half a vector, which no other AVX-512 machine is offered."""
    split, whole = SIMULATED["avx512-split"], SIMULATED["avx512"]
    mm_split = td.autotemplate(matmul(512, 512, 512), machine=split)
    assert min(mm_split.knobs["C.tile_j"]) == 16
    assert mm_split.defaults == td.autotemplate(matmul(512, 512, 512), machine=whole).defaults
    ts = td.autotemplate(depthwise(8, 30, 40), machine=split, target=backend)
    tw = td.autotemplate(depthwise(8, 30, 40), machine=whole, target=backend)
    assert ts.knobs["out.vector_x"] == (16, 32, 8) and ts.defaults["out.vector_x"] == 16
    assert tw.knobs["out.vector_x"] == (16, 32)
    inp, w = rand(8, 30, 40), rand(8, 3, 3)
    want = depthwise_ref(inp, w)
    for width in ts.knobs["out.vector_x"]:
        k = td.build(ts.instantiate(**{"out.vector_x": width}), target=backend)
        np.testing.assert_allclose(k(inp=inp, w=w), want, rtol=1e-5, atol=1e-5,
                                   err_msg=f"vector_x={width}")


def test_the_rules_change_with_the_machine():
    t2 = td.autotemplate(matmul(512, 512, 512), machine=SIMULATED["avx2"])
    t5 = td.autotemplate(matmul(512, 512, 512), machine=SIMULATED["avx512"])
    assert t5.defaults["C.tile_j"] > t2.defaults["C.tile_j"]
    big = td.autotemplate(blur(2048, 2048), machine=Machine.avx2(l2=2 << 20))
    small = td.autotemplate(blur(2048, 2048), machine=SIMULATED["small-caches"])
    assert small.defaults["by.strip"] < big.defaults["by.strip"]
    one = td.autotemplate(blur(2048, 2048), machine=SIMULATED["one-core-sse"])
    assert one.defaults["by.parallel"] is None  # one core: nothing to gain from threads
    assert "parallel" not in [p.method for p in one.instantiate().primitives]


def test_this_machine_is_read_from_its_flags_caches_and_affinity():
    m = mm.machine()
    fp = mm.fingerprint()
    assert m.cores == len(os.sched_getaffinity(0)) == fp["threads"]
    assert m.vector_bytes == {"avx512f": 64, "avx2": 32, "avx": 32}.get(fp["isa"], 16)
    assert 0 < m.l1 <= m.l2 <= m.llc
    assert 1 <= m.fma_chains <= 32


def test_the_fma_probe_runs_once_and_is_cached_privately(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []

    def fake():
        calls.append(1)
        return {"fma_chains": 6, "wide_speedup": 1.0}

    monkeypatch.setattr(mm, "measure_fma", fake)
    assert mm._probe()["fma_chains"] == 6
    assert mm._probe()["fma_chains"] == 6
    assert len(calls) == 1  # the second read the cache
    path = mm._cache_file()
    assert path.parent == tmp_path / "tdsl" and (path.stat().st_mode & 0o077) == 0
    # a file others may write, or with values out of range, is measured again
    path.chmod(0o666)
    mm._probe()
    assert len(calls) == 2
    path.write_text(json.dumps({"version": 1, "fma_chains": 500, "wide_speedup": 1}))
    path.chmod(0o600)
    mm._probe()
    assert len(calls) == 3


def test_the_real_probe_measures_plausible_figures():
    r = mm.measure_fma(repeats=2)
    assert 1 <= r["fma_chains"] <= 32 and 0.25 <= r["wide_speedup"] <= 4


def test_a_machine_that_is_not_a_machine_is_refused():
    with pytest.raises(td.TdslError, match="Machine"):
        td.autoschedule(matmul(8, 8, 8), machine={"vector_bytes": 32})


# ---------------------------------------------------------------- the user's schedule


def test_autoschedule_keeps_every_primitive_the_user_wrote(backend):
    out = softmax(8, 256)
    mine = td.schedule(out).split(out, "c", 32).parallel(out, "r")
    s = td.autoschedule(mine, target=backend)
    assert s.primitives[:len(mine.primitives)] == mine.primitives
    added = s.primitives[len(mine.primitives):]
    assert added, "the stages the user left were scheduled"
    assert all(getattr(p, "stage", None) is not out and getattr(p, "consumer", None) is not out
               for p in added if not isinstance(getattr(p, "stage", None), str))
    x = rand(8, 256)
    ex = np.exp(x - x.max(axis=1, keepdims=True))
    got = td.build(s, target=backend)(X=x)
    np.testing.assert_allclose(got, ex / ex.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_autoschedule_of_a_fully_scheduled_kernel_adds_nothing_to_its_stage():
    C = matmul(64, 64, 64)
    mine = td.schedule(C).tile(C, i=8, j=16).vectorize(C, "j_i")
    s = td.autoschedule(mine)
    assert s.primitives == mine.primitives
    # the designed signature still works with outputs
    assert td.autoschedule(C, target="c").primitives


def test_tune_from_a_users_schedule_keeps_it_in_every_candidate(tmp_path):
    out = blur(34, 66)
    mine = td.schedule(out).split(out, "y", 8)
    img = rand(34, 66)
    r = td.tune(mine, target="c", trials=3, progress=False, runs=1, min_seconds=0, inp=img)
    assert r.template.knobs and "by.strip" not in r.template.knobs  # only bx is chosen
    assert len({json.dumps(rec["knobs"]) for rec in r.history}) == len(r.history) > 1
    assert r.schedule.primitives[:1] == mine.primitives
    for rec in r.history:
        if rec["status"] == "ok":
            first = td.Schedule.from_json(json.dumps(rec["schedule"]), [out]).primitives[0]
            assert first == mine.primitives[0]
    np.testing.assert_allclose(td.build(r.schedule)(inp=img), blur_ref(img), rtol=1e-5)
