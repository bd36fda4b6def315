"""td.tune: measured search over a template's knobs, its log, isolation and executors."""

import json
import os
import time

import numpy as np
import pytest

import tdsl as td

RNG = np.random.default_rng(3)
A_ = RNG.standard_normal((48, 40), dtype=np.float32)
B_ = RNG.standard_normal((40, 32), dtype=np.float32)


def matmul():
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: 48, k: 40}, td.float32)
    B = td.input("B", {k: 40, j: 32}, td.float32)
    return td.compute("C", {i: 48, j: 32}, td.sum(A[i, k] * B[k, j], over=k))


def template(C):
    return (td.schedule(C)
            .tile(C, i=td.knob("ti", [4, 8, 16]), j=td.knob("tj", [8, 16]))
            .vectorize(C, "j_i")
            .parallel(C, td.knob("par", ["i_o", None])))


def measured(r):
    return [h for h in r.history if h["status"] == "ok"]


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_tune_finds_the_fastest_of_its_trials_and_it_computes_the_matmul(target, tmp_path):
    C = matmul()
    r = td.tune(template(C), target=target, trials=4, progress=False, confirm=0, A=A_, B=B_)
    assert len(r.history) == 4 and all(h["status"] == "ok" for h in r.history)
    assert r.time == min(h["time"] for h in r.history)
    best = min(r.history, key=lambda h: h["time"])
    assert r.knobs == best["knobs"] and r.schedule == template(C).instantiate(**best["knobs"])
    assert r.history[0]["knobs"] == template(C).defaults  # the defaults are tried first
    np.testing.assert_allclose(td.build(r.schedule, target=target)(A=A_, B=B_), A_ @ B_,
                               rtol=1e-5, atol=1e-5)


def test_the_log_resumes_measuring_nothing_twice_and_from_log_reads_the_best(tmp_path):
    C = matmul()
    log = tmp_path / "C.tune.jsonl"
    first = td.tune(template(C), trials=5, log=str(log), progress=False, confirm=0, A=A_, B=B_)
    lines = log.read_text().splitlines()
    assert len(lines) == 5
    recs = [json.loads(x) for x in lines]
    assert {r["key"]["target"] for r in recs} == {"c"}
    assert all(r["machine"]["cpu"] for r in recs)
    # 12 combinations: the second run measures the 7 left, then has nothing to try
    second = td.tune(template(C), trials=20, log=str(log), progress=False, confirm=0,
                     A=A_, B=B_)
    assert len(log.read_text().splitlines()) == 12
    keys = [json.dumps(r["knobs"], sort_keys=True) for r in map(json.loads, log.read_text().splitlines())]
    assert len(set(keys)) == 12
    assert len(second.history) == 12 and second.time <= first.time
    s = td.Schedule.from_log(str(log), C, target="c")
    assert s == second.schedule
    # a third run finds every candidate recorded and measures none
    before = log.read_text()
    td.tune(template(C), trials=3, log=str(log), progress=False, confirm=0, A=A_, B=B_)
    assert log.read_text() == before


def test_from_log_says_what_the_log_holds_when_nothing_matches(tmp_path):
    C = matmul()
    log = tmp_path / "t.jsonl"
    td.tune(template(C), trials=1, log=str(log), progress=False, A=A_, B=B_)
    with pytest.raises(td.TuningError, match=r"no successful trial of C for target='llvm'.*holds: C target=c"):
        td.Schedule.from_log(str(log), C, target="llvm")
    with pytest.raises(td.TuningError, match="no successful trial"):
        td.Schedule.from_log(str(tmp_path / "absent.jsonl"), C)


def test_a_malformed_log_is_refused_naming_the_file_and_line(tmp_path):
    C = matmul()
    log = tmp_path / "bad.jsonl"
    td.tune(template(C), trials=1, log=str(log), progress=False, A=A_, B=B_)
    good = log.read_text()
    log.write_text(good + "{not json}\n")
    with pytest.raises(td.TuningError, match=r"bad.jsonl, line 2: not JSON"):
        td.Schedule.from_log(str(log), C)
    rec = json.loads(good)
    rec["status"] = "ok"
    rec["time"] = -1
    log.write_text(json.dumps(rec) + "\n")
    with pytest.raises(td.TuningError, match="line 1: a record with status ok needs a positive time"):
        td.tune(template(C), trials=1, log=str(log), progress=False, A=A_, B=B_)
    # the last line of a writer killed mid-write is skipped
    log.write_text(good + good[: len(good) // 2])
    assert td.Schedule.from_log(str(log), C) == td.Schedule.from_json(
        json.dumps(json.loads(good)["schedule"]), C)


def _fault(knobs):
    """Test hook run in the trial's child: a different failure per register tile."""
    if knobs["ti"] == 4 and knobs["tj"] == 8:
        os.abort()
    if knobs["ti"] == 8 and knobs["tj"] == 8:
        time.sleep(60)
    if knobs["ti"] == 16 and knobs["tj"] == 8:
        return "wrong"
    return None


def test_crashes_hangs_wrong_answers_and_illegal_candidates_are_recorded_and_the_run_goes_on(tmp_path):
    C = matmul()
    t = (td.schedule(C)
         .tile(C, i=td.knob("ti", [4, 8, 16]), j=td.knob("tj", [8, 16]))
         .vectorize(C, "j_i")
         .parallel(C, td.knob("par", ["i_o", "k"])))  # k carries the reduction: refused
    log = tmp_path / "faults.jsonl"
    r = td.tune(t, trials=12, log=str(log), progress=False, timeout=8, confirm=0, _fault=_fault,
                A=A_, B=B_)
    by = {(h["knobs"]["ti"], h["knobs"]["tj"], h["knobs"]["par"]): h for h in r.history}
    assert len(by) == 12
    assert by[(4, 8, "i_o")]["status"] == "crashed" and "SIGABRT" in by[(4, 8, "i_o")]["message"]
    assert by[(8, 8, "i_o")]["status"] == "timeout" and "run phase" in by[(8, 8, "i_o")]["message"]
    assert by[(16, 8, "i_o")]["status"] == "wrong" and "differ" in by[(16, 8, "i_o")]["message"]
    assert all(by[(ti, tj, "k")]["status"] == "rejected" for ti in (4, 8, 16) for tj in (8, 16))
    assert "reduction" in by[(4, 8, "k")]["message"]
    assert [by[(ti, 16, "i_o")]["status"] for ti in (4, 8, 16)] == ["ok"] * 3
    assert r.knobs["tj"] == 16 and r.knobs["par"] == "i_o"
    assert len(log.read_text().splitlines()) == 12


def test_a_combination_the_template_refuses_is_rejected_without_a_build():
    C = matmul()
    t = td.schedule(C).split(C, "i", td.knob("f", [4, 8])).split(C, td.knob("which", ["i_i", "i"]), 2)
    r = td.tune(t, trials=4, progress=False, A=A_, B=B_)
    rejected = [h for h in r.history if h["status"] == "rejected"]
    assert len(rejected) == 2 and all(h["knobs"]["which"] == "i" for h in rejected)
    assert "no loop 'i'" in rejected[0]["message"]


def test_an_illegal_candidate_is_recorded_with_the_dependence_it_breaks(tmp_path):
    (r,) = td.dims("r")
    x = td.input("x", {r: 64}, td.float32)
    y = td.compute("y", {r: 64}, x[r])
    u = td.update(y[r], y[r - 1] + x[r], over={r: (1, 64)})  # a prefix sum: serial
    t = td.schedule(y).split(u, "r", td.knob("f", [4, 8])).parallel(u, td.knob("p", ["r_o", None]))
    log = tmp_path / "scan.jsonl"
    xs = RNG.standard_normal(64, dtype=np.float32)
    res = td.tune(t, trials=4, log=str(log), progress=False, x=xs)
    status = {(h["knobs"]["f"], h["knobs"]["p"]): h["status"] for h in res.history}
    assert status == {(4, "r_o"): "illegal", (8, "r_o"): "illegal", (4, None): "ok", (8, None): "ok"}
    assert "flow dependence on y" in res.history[0]["message"]
    assert res.knobs["p"] is None
    np.testing.assert_allclose(td.build(res.schedule)(x=xs), np.cumsum(xs), rtol=1e-5, atol=1e-5)
    with pytest.raises(td.TuningError, match="no candidate of the 1 tried ran correctly.*illegal"):
        td.tune(t.instantiate(p="r_o"), trials=2, progress=False, x=xs)


def test_bad_options_are_refused():
    C = matmul()
    with pytest.raises(td.ArgumentError, match="trials must be an int >= 1"):
        td.tune(template(C), trials=0, A=A_, B=B_)
    with pytest.raises(td.ArgumentError, match="unknown target 'gpu'"):
        td.tune(template(C), target="gpu", A=A_, B=B_)
    with pytest.raises(td.ArgumentError, match="missing input"):
        td.tune(template(C), trials=1, A=A_)
    with pytest.raises(td.TuningError, match="takes output stage"):
        td.tune("C", A=A_, B=B_)


def test_a_symbolic_size_is_part_of_the_key(tmp_path):
    i, j = td.dims("i j")
    N = td.size("N")
    X = td.input("X", {i: N, j: 16}, td.float32)
    Y = td.compute("Y", {i: N, j: 16}, X[i, j] * 2 + 1)
    t = td.schedule(Y).split(Y, "i", td.knob("f", [2, 4]))
    log = str(tmp_path / "y.jsonl")
    x = RNG.standard_normal((10, 16), dtype=np.float32)
    td.tune(t, trials=2, log=log, progress=False, X=x)
    assert td.Schedule.from_log(log, Y, N=10).loops(Y)[:2] == ["i_o", "i_i"]
    with pytest.raises(td.TuningError, match=r"sizes=\{'N': 11\}"):
        td.Schedule.from_log(log, Y, N=11)
    with pytest.raises(td.TuningError, match="give the symbolic sizes.*N=1024"):
        td.Schedule.from_log(log, Y)


def test_tune_result_shows_itself(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    r = td.tune(template(matmul()), trials=3, progress=False, A=A_, B=B_)
    assert "TuneResult(time=" in repr(r)
    page = r._repr_html_()
    assert "best" in page and "3 ok" in page and "ti" in page
    fig = r.plot()
    line = fig.axes[0].lines[0]
    np.testing.assert_allclose(line.get_ydata(), [h["time"] * 1e3 for h in r.history])


try:
    import distributed
except ImportError:  # the dask extra is not installed
    distributed = None
needs_dask = pytest.mark.skipif(distributed is None, reason="the dask extra is not installed")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as c, distributed.Client(c) as client:
        yield c, client


@needs_dask
def test_tuning_on_a_dask_cluster_writes_the_same_records(cluster, tmp_path):
    _, client = cluster
    C = matmul()
    local = tmp_path / "local.jsonl"
    dask = tmp_path / "dask.jsonl"
    td.tune(template(C), trials=3, log=str(local), progress=False, A=A_, B=B_)
    r = td.tune(template(C), trials=4, log=str(dask), executor=client.get_executor(), jobs=2,
                progress=False, A=A_, B=B_)
    recs = [json.loads(x) for x in dask.read_text().splitlines()]
    trials = [x for x in recs if x["phase"] == "search"]
    assert len(trials) == 4 and all(x["status"] == "ok" for x in recs)
    # the leaders (and the defaults when they are not among them) were re-timed on the
    # cluster too, the result the chosen one
    confirmed = [x for x in recs if x["phase"] == "confirm"]
    defaults = json.dumps(r.template.canonical(r.template.defaults), sort_keys=True)
    assert defaults in {json.dumps(x["knobs"], sort_keys=True) for x in confirmed}
    assert len(confirmed) in (3, 4) and sum(x["chosen"] for x in confirmed) == 1
    assert r.knobs == next(x for x in confirmed if x["chosen"])["knobs"]
    # each record has the fields of a local record of its phase (search, confirm)
    mine = [json.loads(x) for x in local.read_text().splitlines()]
    fields = {x["phase"]: set(x) for x in mine}
    assert set(fields) == {"search", "confirm"}
    assert all(set(x) == fields[x["phase"]] and x["key"] == mine[0]["key"] for x in recs)
    assert all(x["machine"]["cpu"] for x in recs)
    np.testing.assert_allclose(td.build(r.schedule)(A=A_, B=B_), A_ @ B_, rtol=1e-5, atol=1e-5)


def _dead(pid: int, seconds: float = 10.0) -> bool:
    """Whether process `pid` is gone or a zombie (its parent has not reaped it yet)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


@needs_dask
def test_killing_a_dask_worker_mid_run_loses_no_recorded_trial(cluster, tmp_path):
    c, client = cluster
    C = matmul()
    log = tmp_path / "kill.jsonl"
    victim = next(iter(client.run(os.getpid).values()))

    class Killing:
        """An executor that kills one worker process after the first result arrives."""

        def __init__(self, inner):
            self.inner, self.killed = inner, False

        def submit(self, fn, *args):
            fut = self.inner.submit(fn, *args)
            fut.add_done_callback(self._after)
            return fut

        def _after(self, fut):
            if not self.killed:
                self.killed = True
                os.kill(victim, 9)

    r = td.tune(template(C), trials=6, log=str(log), executor=Killing(client.get_executor()),
                jobs=2, progress=False, confirm=0, A=A_, B=B_)
    assert _dead(victim)  # the worker was killed
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(recs) == 6 == len(r.history)
    assert sum(x["status"] == "ok" for x in recs) >= 4
    assert not any("lost" in x["message"] for x in recs)  # a lost worker is not a trial
    assert {json.dumps(x["knobs"], sort_keys=True) for x in recs} == {
        json.dumps(h["knobs"], sort_keys=True) for h in r.history}


def test_given_outputs_tune_searches_the_auto_schedulers_knobs_from_its_choice():
    C = matmul()
    r = td.tune(C, target="llvm", trials=3, progress=False, A=A_, B=B_)
    t = td.autotemplate(C, target="llvm")
    assert r.history[0]["knobs"] == t.defaults  # the auto-scheduler's choice is the seed
    assert set(r.knobs) == set(t.knobs) and all(n.startswith("C.") for n in r.knobs)
    np.testing.assert_allclose(td.build(r.schedule, target="llvm")(A=A_, B=B_), A_ @ B_,
                               rtol=1e-5, atol=1e-5)


SCRIPT = """
import json, sys
import numpy as np
import tdsl as td

i, j, k = td.dims("i j k")
A = td.input("A", {i: 16, k: 8}, td.float32)
B = td.input("B", {k: 8, j: 16}, td.float32)
C = td.compute("C", {i: 16, j: 16}, td.sum(A[i, k] * B[k, j], over=k))
a = np.ones((16, 8), np.float32)
b = np.ones((8, 16), np.float32)
t = td.schedule(C).split(C, "i", td.knob("f", [2, 4]))
r = td.tune(t, trials=2, log=sys.argv[1], progress=False, A=a, B=b)   # no __main__ guard
print("best", r.knobs)
"""


def test_a_plain_script_without_a_main_guard_tunes(tmp_path):
    """A script calling td.tune at top level ran itself again in each worker of a
    multiprocessing pool, which died before its first trial and left a bogus failed trial
    ("the worker was lost") in the log. The workers never import the script."""
    import subprocess
    import sys

    script, log = tmp_path / "tune_me.py", tmp_path / "C.tune.jsonl"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(log)], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("best") == 1  # the script ran once
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    assert [r["status"] for r in recs if r.get("phase") != "confirm"] == ["ok", "ok"]


class KillWorker:
    """Fault hook: the trial's child kills the worker process that runs it (its parent),
    `times` times in all (counted in a file), as the kernel's out-of-memory killer might."""

    def __init__(self, count_file, times):
        self.count_file, self.times = str(count_file), times

    def __call__(self, knobs):
        import signal

        with open(self.count_file, "a+") as f:
            f.seek(0)
            n = len(f.read())
            if n < self.times:
                f.write("x")
                f.flush()
                os.kill(os.getppid(), signal.SIGKILL)
                os._exit(1)  # at once: the pipe to the tuner closes when this child is gone too
        return None


def test_a_lost_worker_is_not_a_trial_its_candidate_runs_again(tmp_path):
    C = matmul()
    log = tmp_path / "C.tune.jsonl"
    r = td.tune(template(C), trials=3, log=str(log), progress=False,
                _fault=KillWorker(tmp_path / "kills", 1), A=A_, B=B_)
    assert (tmp_path / "kills").read_text() == "x"  # a worker was killed once
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    recs = [x for x in recs if x.get("phase") != "confirm"]
    assert [x["status"] for x in recs] == ["ok"] * 3 == [h["status"] for h in r.history]


def test_a_candidate_whose_worker_keeps_dying_stops_the_run_and_is_not_recorded(tmp_path):
    C = matmul()
    log = tmp_path / "C.tune.jsonl"
    with pytest.raises(td.TuningError, match="lost the trial of .* 3 times.*nothing was recorded"):
        td.tune(template(C), trials=3, log=str(log), progress=False,
                _fault=KillWorker(tmp_path / "kills", 99), A=A_, B=B_)
    assert not log.exists() or log.read_text() == ""


class RecordingBar:
    """Stands in for tqdm: keeps what the tuner tells its progress bar."""

    made: list = []

    def __init__(self, total, desc, unit, leave):
        self.total, self.desc, self.n, self.closed = total, desc, 0, False
        RecordingBar.made.append(self)

    def update(self, n):
        self.n += n

    def set_postfix_str(self, text):
        pass

    def refresh(self):
        pass

    def close(self):
        self.closed = True


def test_a_resumed_run_fills_its_progress_bar(tmp_path, monkeypatch):
    """Resuming with 8 trials asked and 4 of the 8 combinations in the log ran the 4
    left and stopped the bar at 4/8, which a notebook draws red as if interrupted."""
    import tqdm.auto

    monkeypatch.setattr(tqdm.auto, "tqdm", RecordingBar)
    RecordingBar.made.clear()
    C = matmul()
    t = (td.schedule(C).tile(C, i=td.knob("ti", [4, 8]), j=td.knob("tj", [8, 16]))
         .parallel(C, td.knob("par", ["i_o", None])))
    log = str(tmp_path / "C.tune.jsonl")
    td.tune(t, trials=4, log=log, A=A_, B=B_)
    td.tune(t, trials=8, log=log, A=A_, B=B_)
    first, second = RecordingBar.made
    assert (first.n, first.total, first.desc) == (4, 4, "tuning")
    assert (second.n, second.total) == (4, 4) and "4 from the log" in second.desc
    assert second.closed


def _abort_at_ti4(knobs):
    if knobs["ti"] == 4:
        os.abort()


def test_the_plot_tells_rejected_candidates_from_failed_trials():
    C = matmul()
    t = (td.schedule(C).tile(C, i=td.knob("ti", [4, 8]), j=16).vectorize(C, "j_i")
         .parallel(C, td.knob("par", ["i_o", "k"])))  # k: refused by the template
    r = td.tune(t, trials=4, progress=False, _fault=_abort_at_ti4, A=A_, B=B_)
    assert sorted(r.counts().items()) == [("crashed", 1), ("ok", 1), ("rejected", 2)]
    labels = {line.get_label(): len(line.get_xdata()) for line in r.plot().axes[0].lines}
    assert labels["rejected"] == 2 and labels["failed"] == 1 and labels["trial"] == 1
