"""Logs that travel: Schedule.from_log on a machine the log has no record of re-measures
other machines' best against the auto-scheduler's choice and never returns a slower one.
The decisions are checked with a stub measurement (no timing assertions)."""

import json
import os

import numpy as np
import pytest

import tdsl as td
from tdsl.tune import log as tlog
from tdsl.tune import transfer as tr
from tdsl.tune.machine import fingerprint, same_machine

FOREIGN = {"cpu": "Some Other CPU 9000", "isa": "avx2", "threads": 64, "arch": "x86_64"}
RNG = np.random.default_rng(3)


def matmul(n=48):
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: n, k: n}, td.float32)
    B = td.input("B", {k: n, j: n}, td.float32)
    return td.compute("C", {i: n, j: n}, td.sum(A[i, k] * B[k, j], over=k))


def foreign_log(path, C, target="c"):
    """A log of three trials measured on FOREIGN: distinct schedules of C's template."""
    t = td.autotemplate(C, target=target)
    key = tlog.make_key(td.schedule(C).pipeline, target, {})
    names = list(t.knobs)
    recs, seen = [], set()
    for n, values in enumerate(_variants(t)):
        s = t.instantiate(**values)
        if s.to_json() in seen:
            continue
        seen.add(s.to_json())
        recs.append({"v": 1, "key": key, "machine": FOREIGN, "knobs": values, "status": "ok",
                     "time": 0.001 * (n + 1), "message": "", "schedule": json.loads(s.to_json()),
                     "at": "2026-11-01T00:00:00+00:00"})
        if len(recs) == 3:
            break
    assert len(recs) == 3, names
    tlog.append(path, recs)
    return recs


def _variants(t):
    d = dict(t.defaults)
    yield {**d, "C.tile_i": 2}
    yield {**d, "C.tile_i": 4}
    yield {**d, "C.tile_i": 1}
    yield {**d, "C.tile_i": 8}


def schedules_of(recs, C):
    return [td.Schedule.from_json(json.dumps(r["schedule"]), [C]) for r in recs]


class Stub:
    """A measurement: the auto-scheduler's choice takes `auto` seconds, the foreign
    records the times given in order; counts its calls."""

    def __init__(self, auto, others):
        self.auto, self.others, self.calls = auto, others, []

    def __call__(self, outputs, target, texts, arrays):
        self.calls.append(texts)
        return [self.auto, *self.others[:len(texts) - 1]]


def never(*args):
    raise AssertionError("measured again: the log holds this machine's choice already")


def read_transfer(path):
    return [r for r in tlog.read(path) if r.get("phase") == "transfer"]


def test_decide_keeps_the_auto_scheduler_unless_beaten_beyond_noise():
    assert tr.decide(1.0, [0.9, 1.2]) == 0
    assert tr.decide(1.0, [0.99, 0.98]) is None  # within the margin: noise
    assert tr.decide(1.0, [None, 0.5]) == 1
    assert tr.decide(1.0, [None, None]) is None
    assert tr.decide(None, [2.0, 3.0]) == 0  # the auto-scheduler's build failed
    assert tr.decide(None, []) is None


def test_a_faster_foreign_record_is_chosen_recorded_and_read_back(tmp_path, monkeypatch, backend):
    C = matmul()
    log = tmp_path / "C.jsonl"
    recs = foreign_log(log, C, backend)
    stub = Stub(1.0, [0.95, 0.80, 1.10])  # the second foreign record is 20% faster
    monkeypatch.setattr(tr, "measure_here", stub)
    s = td.Schedule.from_log(log, C, target=backend)
    assert s == schedules_of(recs, C)[1]
    assert len(stub.calls) == 1 and len(stub.calls[0]) == 4  # auto + the best three
    assert stub.calls[0][0] == td.autoschedule(C, target=backend).to_json()
    written = read_transfer(log)
    assert len(written) == 4
    assert all(same_machine(r["machine"], fingerprint()) for r in written)
    assert [r["chosen"] for r in written] == [False, False, True, False]
    assert written[0]["origin"] == "auto"
    # the next read on this machine uses its own record, without measuring
    monkeypatch.setattr(tr, "measure_here", never)
    assert td.Schedule.from_log(log, C, target=backend) == s
    a, b = RNG.standard_normal((48, 48), np.float32), RNG.standard_normal((48, 48), np.float32)
    np.testing.assert_allclose(td.build(s, target=backend)(A=a, B=b), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("others", [[1.2, 1.5, 2.0], [0.99, 1.3, 1.0], [None, None, None]])
def test_no_foreign_record_slower_than_the_auto_scheduler_is_returned(tmp_path, monkeypatch,
                                                                       others):
    C = matmul()
    log = tmp_path / "C.jsonl"
    foreign_log(log, C)
    monkeypatch.setattr(tr, "measure_here", Stub(1.0, others))
    s = td.Schedule.from_log(log, C, target="c")
    auto = td.autoschedule(C, target="c")
    assert s == auto
    chosen = [r for r in read_transfer(log) if r["chosen"]]
    assert len(chosen) == 1 and chosen[0]["origin"] == "auto"
    monkeypatch.setattr(tr, "measure_here", never)
    assert td.Schedule.from_log(log, C, target="c") == auto


def test_a_failed_step_falls_back_to_the_auto_scheduler(tmp_path, monkeypatch):
    C = matmul()
    log = tmp_path / "C.jsonl"
    foreign_log(log, C)
    monkeypatch.setattr(tr, "measure_here", Stub(None, [None, None, None]))
    assert td.Schedule.from_log(log, C, target="c") == td.autoschedule(C, target="c")
    assert {r["status"] for r in read_transfer(log)} == {"error"}


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to a read-only file")
def test_a_read_only_log_keeps_its_measurements_in_the_users_cache(tmp_path, monkeypatch):
    C = matmul()
    log = tmp_path / "shipped.jsonl"
    recs = foreign_log(log, C)
    log.chmod(0o444)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(tr, "measure_here", Stub(1.0, [0.5, 2.0, 2.0]))
    s = td.Schedule.from_log(log, C, target="c")
    assert s == schedules_of(recs, C)[0]
    assert not read_transfer(log)
    assert len(tlog.read(tr.companion(log))) == 4
    monkeypatch.setattr(tr, "measure_here", never)
    assert td.Schedule.from_log(log, C, target="c") == s


def test_a_log_that_cannot_be_appended_to_uses_the_companion(tmp_path, monkeypatch):
    C = matmul()
    log = tmp_path / "shipped.jsonl"
    recs = foreign_log(log, C)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    real = tlog.append

    def refuse(path, records):
        if os.path.abspath(path) == os.path.abspath(log):
            raise PermissionError(13, "read-only", str(path))
        real(path, records)

    monkeypatch.setattr(tlog, "append", refuse)
    monkeypatch.setattr(tr, "measure_here", Stub(1.0, [0.5, 2.0, 2.0]))
    assert td.Schedule.from_log(log, C, target="c") == schedules_of(recs, C)[0]
    assert len(tlog.read(tr.companion(log))) == 4


def test_without_transfer_the_best_foreign_record_comes_back_unmeasured(tmp_path, monkeypatch):
    C = matmul()
    log = tmp_path / "C.jsonl"
    recs = foreign_log(log, C)
    monkeypatch.setattr(tr, "measure_here", never)
    assert td.Schedule.from_log(log, C, target="c", transfer=False) == schedules_of(recs, C)[0]


def test_the_real_transfer_step_returns_a_correct_kernel_and_records_it(tmp_path):
    C = matmul(40)
    log = tmp_path / "C.jsonl"
    foreign_log(log, C, "llvm")
    a = RNG.standard_normal((40, 40), np.float32)
    b = RNG.standard_normal((40, 40), np.float32)
    s = td.Schedule.from_log(log, C, target="llvm", arrays={"A": a, "B": b})
    written = read_transfer(log)
    assert len(written) == 4 and sum(r["chosen"] for r in written) == 1
    chosen = next(r for r in written if r["chosen"])
    assert s == td.Schedule.from_json(json.dumps(chosen["schedule"]), [C])
    assert all(r["status"] == "ok" and r["time"] > 0 for r in written)
    np.testing.assert_allclose(td.build(s, target="llvm")(A=a, B=b), a @ b, rtol=1e-4, atol=1e-4)


def test_synthetic_inputs_have_the_pipelines_shapes_and_types():
    n, = td.dims("n")
    N = td.size("N")
    x = td.input("x", {n: N}, td.float32)
    idx = td.input("idx", {n: N}, td.int32)
    y = td.compute("y", {n: N}, x[n] + td.cast(idx[n], td.float32))
    got = tr.synthetic_inputs(td.schedule(y).pipeline, {"N": 100})
    assert got["x"].shape == (100,) and got["x"].dtype == np.float32
    assert got["idx"].dtype == np.int32 and not got["idx"].any()
