"""The benchmark scripts in benchmarks/: each kernel, at a tiny size, matches numpy.

No timing is asserted; this only keeps the schedules the benchmarks measure
correct as the compiler changes (C backend, every variant the runner measures).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tdsl as td
from tdsl.backend_llvm.host import host_has

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = ("sgemm", "conv2d", "blur", "softmax")
# kernels measured with their best schedule and the auto-scheduler's only (no tuning
# log), each at a tiny size on both targets
NEW_SCRIPTS = ("qmatmul", "layernorm", "depthwise", "twomm", "covariance", "jacobi2d",
               "heat3d")


@pytest.fixture(scope="module")
def scripts():
    sys.path.insert(0, str(BENCH))
    try:
        yield {name: importlib.import_module(name) for name in SCRIPTS + NEW_SCRIPTS}
    finally:
        sys.path.remove(str(BENCH))


CASES = [(s, v) for s, vs in (("sgemm", ("best", "plain")), ("conv2d", ("best", "plain")),
                                ("blur", ("best",)), ("softmax", ("best", "plain")))
         for v in vs]


@pytest.mark.parametrize("script,variant", CASES, ids=[f"{s}-{v}" for s, v in CASES])
def test_benchmark_kernel_matches_numpy(scripts, script, variant):
    module = scripts[script]
    assert variant in module.VARIANTS
    case = module.case("c", variant, "tiny")
    f = td.build(case.schedule_fn(), target="c")
    np.testing.assert_allclose(f(**case.inputs), case.reference(), rtol=case.rtol, atol=case.atol)


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_auto_variant_matches_numpy(scripts, script):
    harness = importlib.import_module("harness")
    case = harness.unscheduled_case(scripts[script], "c", "auto", "tiny")
    f = td.build(case.schedule_fn(), target="c")
    np.testing.assert_allclose(f(**case.inputs), case.reference(), rtol=case.rtol, atol=case.atol)


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_tuned_variant_reads_the_committed_log(scripts, script):
    """tuned.jsonl holds a schedule for each kernel's measured size on both targets; a
    size nobody tuned is reported as not tuned, not as a failure."""
    harness = importlib.import_module("harness")
    module = scripts[script]
    outputs = module.user_algorithm(*module.SIZES[module.DEFAULT_SIZE])
    for target in ("c", "llvm"):  # read only: a transfer step would append to the log
        s = td.Schedule.from_log(harness.TUNED_LOG, outputs, target=target, transfer=False)
        assert s.primitives and td.Schedule.from_json(s.to_json(), outputs) == s
    result = harness.measure(module, "tdsl-c-tuned", "tiny", runs=1, warmup=0, min_seconds=0.0)
    assert result["check"] == "not tuned" and "no successful trial" in result["why"]


NEW_CASES = [(s, v, t) for s in NEW_SCRIPTS for v in ("best", "default", "auto")
             for t in ("c", "llvm")] + [("qmatmul", "f32", t) for t in ("c", "llvm")]


@pytest.mark.parametrize("script,variant,target", NEW_CASES,
                         ids=[f"{s}-{v}-{t}" for s, v, t in NEW_CASES])
def test_new_benchmark_kernel_matches_numpy(scripts, script, variant, target):
    """The kernel script's numpy answer (integers: exactly) against its schedule."""
    harness = importlib.import_module("harness")
    module = scripts[script]
    if variant in harness.UNSCHEDULED:
        assert variant in module.VARIANTS + getattr(module, "EXTRA_VARIANTS", ())
        case = harness.unscheduled_case(module, target, variant, "tiny")
    else:
        case = module.case(target, variant, "tiny")
    f = td.build(case.schedule_fn(), target=target)
    got, want = f(**case.inputs), case.reference()
    assert got.dtype == want.dtype and got.shape == want.shape
    if np.issubdtype(want.dtype, np.integer):
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)


def test_qmatmul_float_accumulation_is_refused_beyond_its_exact_range(scripts):
    q = scripts["qmatmul"]
    q.float_algorithm(3, 1024, 5)
    with pytest.raises(ValueError, match="K <= 1024"):
        q.float_algorithm(3, 1025, 5)


def test_qmatmul_groups_need_whole_groups_and_are_multiply_added(scripts):
    """The qmatmul schedules that pack B in k pairs (int16) or quads (bytes, A made
    unsigned and corrected by B's column sums) give numpy's exact results, and both
    backends do the groups as one multiply-add where the host has it."""
    q = scripts["qmatmul"]
    with pytest.raises(ValueError, match="even K"):
        q.paired_algorithm(3, 7, 5)
    with pytest.raises(ValueError, match="multiple of 4"):
        q.quad_algorithm(3, 6, 5)
    arrays = q.inputs("tiny")
    want = q.exact_reference(**arrays)
    for make, c_helper, intrinsic, feature in (
            (q.paired_schedule, "pair_madd_i16(&", "pmaddw.d.512", "avx512bw"),
            (q.quad_schedule, "quad_madd_u8i8(&", "vpdpbusd.512", "avx512vnni")):
        for target, marker in (("c", c_helper), ("llvm", intrinsic)):
            f = td.build(make(q.SIZES["tiny"], 4, 32), target=target)
            np.testing.assert_array_equal(f(**arrays), want)
            assert (marker in f.source) == (target == "c" or host_has(feature))


def test_qmatmul_reference_is_exact_and_saturates(scripts):
    """numpy's float32 sgemm baseline equals the int64 definition, and the tiny case
    reaches both ends of int8 (so the saturation is tested)."""
    q = scripts["qmatmul"]
    arrays = q.inputs("tiny")
    want = q.exact_reference(**arrays)
    np.testing.assert_array_equal(q.reference(**arrays), want)
    assert (want == 127).any() and (want == -128).any()


@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize("size,tiles", [((37, 70), (4, 8, 4)), ((23, 41), (6, 16, 8)),
                                        ((9, 64), (8, 8, 8))])
def test_covariance_triangle_of_tiles_mirrors(scripts, target, size, tiles):
    """The best covariance schedule sums only on the register tiles that meet the
    triangle i >= j (at these sizes most tiles above it are skipped, with tails in
    both dims) and mirrors the rest: every element equals numpy's D.T @ D."""
    cv = scripts["covariance"]
    n, m = size
    ti, tj, v = tiles
    x = np.random.default_rng(n * m).standard_normal((n, m)).astype(np.float32) + 2
    f = td.build(cv.tiled_schedule(size, ti, tj, v, vm=8, ct=8), target=target)
    np.testing.assert_allclose(f(X=x), cv.reference(x), rtol=1e-5, atol=1e-5)
    # the triangle: S's sum is empty on a tile wholly above the diagonal
    cov = cv.algorithm(n, m, packed=True, triangle=(ti, tj))
    S = next(st for st in td.schedule(cov).pipeline.stages if st.name == "S")
    skipped = td.evaluate(S, X=x)[:ti, -1]
    assert (m - 1) // tj * tj >= ti and (skipped == 0).all()


def test_time_stepped_references_step(scripts):
    """The jacobi-2d and heat-3d baselines change the grid at every step (a
    reference that skipped the steps would compare against the input)."""
    for name in ("jacobi2d", "heat3d"):
        module = scripts[name]
        arrays = module.inputs("tiny")
        n, steps = module.SIZES["tiny"]
        one = module.reference(arrays["A"], arrays["B"], 1)
        more = module.reference(arrays["A"], arrays["B"], steps)
        assert not np.allclose(one, more)
        assert not np.allclose(one[1], arrays["A"])


@pytest.mark.parametrize("script", ("layernorm", "depthwise"))
def test_a_kernel_nobody_tuned_at_a_size_is_reported_not_tuned(scripts, script):
    harness = importlib.import_module("harness")
    result = harness.measure(scripts[script], "tdsl-llvm-tuned", "tiny", runs=1, warmup=0,
                             min_seconds=0.0)
    assert result["check"] == "not tuned" and result["check"] in harness.NOT_FAILURES


def test_every_runner_variant_is_tested(scripts):
    """Every variant run.py measures has a test above (default: the naive-C test)."""
    tested = {(s, v) for s, v in CASES} | {(s, v) for s in SCRIPTS for v in ("auto", "tuned", "default")}
    tested |= {("layernorm", "tuned"), ("depthwise", "tuned")}
    tested |= {(s, v) for s, v, _ in NEW_CASES}
    assert {(s, v) for s in SCRIPTS + NEW_SCRIPTS for v in scripts[s].VARIANTS} <= tested


def test_the_runner_lists_every_script(scripts):
    run = importlib.import_module("run")
    assert {script for _, script, _ in run.KERNELS} == set(SCRIPTS + NEW_SCRIPTS)
    for _, script, size in run.KERNELS:
        assert size in scripts[script].SIZES


def test_each_round_starts_at_another_peer(scripts, monkeypatch):
    """run.py measures every peer once per round, each round starting further along
    the list, and reports each peer's median round."""
    run = importlib.import_module("run")
    peers = ["tdsl-c", "tdsl-llvm", "numpy", *run.EXTERNAL]
    monkeypatch.setattr(run, "script_peers", lambda script, size: peers[:2])
    order: list[str] = []

    def fake(script, size, peer, args):
        order.append(peer)
        return {"kernel": script, "peer": peer, "ms": float(len(order))}

    monkeypatch.setattr(run, "run_one", fake)
    args = run.argparse.Namespace(kernels=["blur"], quick=False, peers=None, rounds=3,
                                  across="median")
    rows, _ = run.measure_all(args)
    rounds = [order[i:i + len(peers)] for i in range(0, len(order), len(peers))]
    assert len(rounds) == 3 and all(sorted(r) == sorted(peers) for r in rounds)
    firsts = [turn * len(peers) // 3 for turn in range(3)]
    assert [r[0] for r in rounds] == [peers[k] for k in firsts]
    assert len(set(firsts)) == 3
    times = {r["peer"]: r["rounds_ms"] for r in rows}
    # tdsl-c is first in the first round, then comes after the peers the rounds start at
    assert times["tdsl-c"] == [float(t * len(peers) + (len(peers) - k) % len(peers) + 1)
                               for t, k in enumerate(firsts)]


def test_the_table_shows_the_median_or_the_fastest_round(scripts):
    """--across picks which of a peer's rounds the table shows; a failed round fails
    the peer whatever the statistic."""
    run = importlib.import_module("run")
    rounds = [{"peer": "p", "ms": ms} for ms in (4.0, 9.0, 5.0, 8.0, 2.0)]
    assert run.pick_round(rounds)["ms"] == 5.0
    fastest = run.pick_round(rounds, "fastest")
    assert fastest["ms"] == 2.0 and fastest["across"] == "fastest"
    assert fastest["rounds_ms"] == [4.0, 9.0, 5.0, 8.0, 2.0]
    assert run.pick_round(rounds[:2], "median")["ms"] == 4.0  # an even count: the lower
    failed = rounds + [{"peer": "p", "check": "mismatch"}]
    assert run.pick_round(failed, "fastest") == {"peer": "p", "check": "mismatch"}


def test_im2col_baseline_is_a_convolution(scripts):
    conv = scripts["conv2d"]
    arrays = conv.inputs("tiny")
    inp, w = arrays["inp"].astype(np.float64), arrays["w"].astype(np.float64)
    ci, h, wd = inp.shape
    padded = np.pad(inp, ((0, 0), (1, 1), (1, 1)))
    direct = np.zeros((w.shape[0], h, wd))
    for ry in range(3):
        for rx in range(3):
            direct += np.einsum("kc,cyx->kyx", w[:, :, ry, rx], padded[:, ry:ry + h, rx:rx + wd])
    np.testing.assert_allclose(conv.im2col_conv(arrays["inp"], arrays["w"]), direct,
                               rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_machine_limits_program(tmp_path):
    exe = tmp_path / "machine"
    subprocess.run(["gcc", "-O3", "-march=native", "-fopenmp", str(BENCH / "machine.c"),
                    "-o", str(exe)], check=True)
    # tiny iteration count and arrays: only the output format is checked
    out = subprocess.run([str(exe), "1000", "100000"], capture_output=True, text=True,
                         check=True, env={"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "passive"})
    records = {r["what"]: r["value"] for r in map(json.loads, out.stdout.splitlines())}
    assert set(records) == {"fma256", "fma512", "copy", "triad", "threads"}
    wide = "avx512f" in Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else False
    assert all(v > 0 for k, v in records.items() if k != "fma512")
    assert records["fma512"] > 0 if wide else records["fma512"] == 0  # no 512-bit registers


PEER_SCRIPTS = ("sgemm", "conv2d", "blur", "softmax", "layernorm", "depthwise")


@pytest.mark.parametrize("package", ["halide", "tvm"])
@pytest.mark.parametrize("script", PEER_SCRIPTS)
def test_external_peer_matches_numpy(scripts, monkeypatch, package, script):
    """Halide and TVM (the optional `bench` extra) at the tiny size: the harness
    measures them and their result passes its check against numpy."""
    pytest.importorskip(package)
    monkeypatch.setenv("HL_NUM_THREADS", "2")
    monkeypatch.setenv("TVM_NUM_THREADS", "2")
    harness = importlib.import_module("harness")
    module = scripts[script]
    peer = importlib.import_module(f"peer_{package}").peer(script, "tiny")
    case = module.case("c", "best", "tiny")
    got = peer.fn()
    assert got.shape == case.reference().shape
    assert harness.check(got, case.reference(), case.rtol, case.atol) is None
    result = harness.measure(module, package, "tiny", runs=2, warmup=1, min_seconds=0.0)
    assert result["check"] == "ok", result
    assert result["rate"] > 0 and "build_s" in result


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_naive_c_and_the_default_variants_match_numpy(scripts, script):
    """The textbook C loop nest (peer gcc-naive) and the kernel with no schedule on both
    targets, the pair the table compares, at a tiny size: measure() checks each result
    against numpy before it times it."""
    harness = importlib.import_module("harness")
    module = scripts[script]
    assert "default" in module.VARIANTS and hasattr(module, "NAIVE_C")
    for peer in (harness.NAIVE, "tdsl-c-default", "tdsl-llvm-default"):
        result = harness.measure(module, peer, "tiny", runs=1, warmup=0, min_seconds=0.0)
        assert result["check"] == "ok", (peer, result)
    peer = harness.naive_peer(module, "tiny")
    case = module.case("c", "best", "tiny")
    np.testing.assert_allclose(peer.fn(), case.reference(), rtol=case.rtol, atol=case.atol)


@pytest.mark.parametrize("which", ["halide-mullapudi2016", "halide-adams2019", "halide-li2018"])
@pytest.mark.parametrize("script", ["sgemm", "blur", "softmax"])
def test_halides_autoschedulers_as_peers_match_numpy(scripts, monkeypatch, which, script):
    """Halide's autoschedulers (plugins of the `halide` wheel, the optional `bench`
    extra) on the plain algorithms, at the tiny size, through the harness."""
    pytest.importorskip("halide")
    monkeypatch.setenv("HL_NUM_THREADS", "2")
    harness = importlib.import_module("harness")
    result = harness.measure(scripts[script], which, "tiny", runs=2, warmup=1, min_seconds=0.0)
    assert result["check"] == "ok", result
    assert result["tune_s"] > 0 and result["rate"] > 0


def test_metaschedule_not_tuned_here_is_reported_so(scripts, monkeypatch, tmp_path):
    """A kernel MetaSchedule has no database for on this machine is "not tuned", a
    reason the suite accepts (tuning it takes benchmarks/tune.py --tuners tvm-ms)."""
    pytest.importorskip("tvm")
    harness = importlib.import_module("harness")
    peer_tvm_ms = importlib.import_module("peer_tvm_ms")
    monkeypatch.setattr(peer_tvm_ms, "ROOT", tmp_path)
    result = harness.measure(scripts["sgemm"], "tvm-ms", "tiny", runs=1, warmup=0,
                             min_seconds=0.0)
    assert result["check"] == "not tuned"


def test_a_missing_peer_package_is_not_installed_not_a_failure(scripts, monkeypatch):
    harness = importlib.import_module("harness")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("halide", "tvm") else real(name, *a))
    for peer in harness.EXTERNAL:
        result = harness.measure(scripts["blur"], peer, "tiny", runs=1, warmup=0,
                                 min_seconds=0.0)
        assert result["check"] == "not installed", (peer, result)


def test_table_ratios(scripts):
    """The suite's table: each row's ratio to its kernel's fastest row, and to the
    fastest peer that is not tdsl (the bar for tdsl's variants); a failed row has none."""
    run = importlib.import_module("run")
    rows = [dict(kernel="k", peer="tdsl-c", ms=1.0, rate=12.0, unit="GFLOP/s"),
            dict(kernel="k", peer="tdsl-llvm-auto", ms=1.0, rate=6.0, unit="GFLOP/s"),
            dict(kernel="k", peer="numpy", ms=2.0, rate=5.0, unit="GFLOP/s"),
            dict(kernel="k", peer="tvm", ms=1.5, rate=8.0, unit="GFLOP/s"),
            dict(kernel="k", peer="halide", check="timed out after 5 s")]
    lines = run.table(rows, {"fma": 24.0, "copy": 10.0}, markdown=True).splitlines()
    assert lines[0].endswith("| ratio to best | to best other |")
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert [c[-2:] for c in cells] == [["1.00", "1.50"], ["0.50", "0.75"],
                                       ["0.42", "0.62"], ["0.67", "1.00"], ["", ""]]
    assert cells[0][4] == "50%" and cells[-1][2] == "timed out after 5 s"
