"""td.tune: a measured search over a template's knobs, recorded in a log."""

from __future__ import annotations

import concurrent.futures as cf
import datetime
import html
import itertools
import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..compute.binding import bind_arguments
from ..compute.definitions import Stage
from ..compute.pipeline import Pipeline
from ..errors import ArgumentError, ScheduleError, TuningError
from ..schedule import Schedule, Template
from . import log as tlog
from .machine import fingerprint, same_machine
from .measure import run_trial
from .transfer import decide_repeated
from .workers import LocalWorkers

# times a candidate is submitted again after its executor lost it (a worker that died,
# a broken pool) before td.tune gives up: losing a worker says nothing of the candidate
_RESUBMITS = 2

# evaluate the reference with td.evaluate up to this many points of work (the product
# of every stage's domain, reductions included); past it, the unscheduled kernel
_EVALUATE_LIMIT = 2e7


class TuneResult:
    """What td.tune found: `.schedule` (the fastest, a plain Schedule), `.time` (its
    median seconds per call), `.knobs` (its knob values), `.history` (every trial's
    record, in order, including those read from the log), `.confirmed` (the leaders
    re-timed side by side at the end, the chosen one marked), `.plot()`."""

    def __init__(self, template: Template, target: str, history: list[dict[str, Any]],
                 best: dict[str, Any]):
        self.template = template
        self.target = target
        self.history = history
        self.confirmed: list[dict[str, Any]] = []
        self.knobs: dict[str, Any] = dict(best["knobs"])
        self.time: float = best["time"]
        self.schedule: Schedule = Schedule.from_json(json.dumps(best["schedule"]),
                                                     template.outputs)

    def counts(self) -> dict[str, int]:
        """How many trials ended in each status."""
        out: dict[str, int] = {}
        for r in self.history:
            out[r["status"]] = out.get(r["status"], 0) + 1
        return out

    def plot(self):
        """A matplotlib Figure: each trial's time, the best time so far, trials that
        failed (crashed, timed out, wrong, illegal, not built) marked along the bottom,
        and candidates the template rejected (never built) marked apart from them.
        Not one of pyplot's figures: end a notebook cell with it to show it."""
        from ..display import new_figure

        fig = new_figure((7, 3.5))
        ax = fig.add_subplot()
        ok = [(n, r["time"] * 1e3) for n, r in enumerate(self.history, 1) if r["status"] == "ok"]
        bad = [n for n, r in enumerate(self.history, 1) if r["status"] not in ("ok", "rejected")]
        rejected = [n for n, r in enumerate(self.history, 1) if r["status"] == "rejected"]
        if ok:
            xs, ys = zip(*ok)
            ax.plot(xs, ys, "o", ms=4, label="trial", color="tab:blue")
            best, steps = math.inf, []
            for r in self.history:
                if r["status"] == "ok":
                    best = min(best, r["time"] * 1e3)
                steps.append(best)
            ax.step(range(1, len(steps) + 1), steps, where="post", color="tab:orange",
                    label="best so far")
            if bad:
                ax.plot(bad, [min(ys)] * len(bad), "x", color="tab:red", label="failed")
            if rejected:
                ax.plot(rejected, [min(ys)] * len(rejected), "|", color="0.5",
                        label="rejected")
        ax.set_xlabel("trial")
        ax.set_ylabel("ms per call")
        ax.set_title(f"tuning {'/'.join(o.name for o in self.template.outputs)} "
                     f"({self.target})")
        ax.legend(loc="upper right")
        return fig

    def __repr__(self) -> str:
        counts = ", ".join(f"{n} {s}" for s, n in self.counts().items())
        return (f"TuneResult(time={self.time * 1e3:.3f} ms, knobs={self.knobs}, "
                f"trials: {counts})")

    def _repr_html_(self) -> str:
        from ..display import code_html

        counts = ", ".join(f"{n} {html.escape(s)}" for s, n in self.counts().items())
        knobs = "".join(f"<tr><td><code>{html.escape(k)}</code></td><td><code>"
                        f"{html.escape(repr(v))}</code></td></tr>" for k, v in self.knobs.items())
        return (f"<div><b>best {self.time * 1e3:.3f} ms</b> per call on {html.escape(self.target)}"
                f" &middot; {len(self.history)} trials: {counts}"
                f"<table>{knobs}</table>{code_html(repr(self.schedule), 'python')}</div>")


def tune(outputs_or_template, target: str = "c", trials: int = 64, log=None, executor=None, *,
         timeout: float = 60.0, jobs: int | None = None, runs: int = 5,
         min_seconds: float = 0.05, progress: bool = True, seed: int = 0,
         search: str = "model", confirm: int = 3, _fault=None, **arrays) -> TuneResult:
    """Search a template's knobs for the fastest schedule, measuring each candidate.

        r = td.tune(C, target="c", trials=64, log="C.tune.jsonl", A=a, B=b)
        r.schedule, r.time, r.history, r.plot()

    outputs_or_template: output stage(s), whose auto-scheduler template (its rules'
    decisions, `td.autotemplate`) is searched; a Schedule, whose primitives every
    candidate keeps (the auto-scheduler's knobs for the stages it leaves unscheduled
    are searched; to time exactly one schedule, pass `td.Template(s)`); or a
    `td.Template`. The template's defaults are the first candidate; Optuna's TPE sampler
    chooses the rest (every combination, when there are no more than `trials`).

    search: "model" (default): the next candidate is the one the cost model
    (`tdsl.tune.model`: an analytic prior from the machine model, and the effect of each
    knob value learned from the times measured so far and from other machines' records
    in the log) predicts fastest; "tpe": Optuna's TPE sampler. Either way, when the
    template has no more combinations than `trials`, every one is measured.

    confirm: the best `confirm` candidates (distinct schedules), and the template's
    defaults (the auto-scheduler's choice) when they are not among them, are re-timed at
    the end, side by side in interleaved rounds with more runs, twice (each time in a
    process of its own, built afresh, the second in the reverse order). The result
    (recorded in the log as "chosen", with its mean time) is the leader whose gain over
    the defaults holds best across both comparisons, when it ran more than 1% faster than
    them in each (more than 3% when only one comparison could run;
    `tdsl.tune.transfer.decide_repeated`), else the defaults: one lucky measurement does
    not win, a gain seen in one process alone can be that process's code layout, and
    tuning never ends slower than the defaults it started from, even when their record
    in a resumed log was timed on older code or a busier machine.

    A build (lowering and compiling) is cut once it runs past four times the slowest
    build so far (at least 10 s, at most `timeout`): a schedule that takes that long to
    lower is seldom the fast one, and it would cost the time of several trials.

    Each candidate is built, run, checked and timed in a child process: a crash, a
    build or run phase longer than `timeout` seconds, a build failure, an illegal
    schedule or an output that differs from the reference (td.evaluate, or the
    unscheduled kernel for large problems) is a failed trial, recorded with its
    status. Trials run on `executor` (any concurrent.futures.Executor; Dask's
    `Client.get_executor()` runs them on a cluster), `jobs` at once (default 1: two
    timings on one machine disturb each other; the default executor is a local pool
    of that many fresh processes, which never import the calling script, so a plain
    script needs no `if __name__ == "__main__":` guard). An executor of your own may
    fork this process: a forked child runs parallel kernels on a thread pool of its
    own (tdsl's pool starts afresh after fork()); fresh processes ("forkserver") copy
    less memory. A task the executor loses (a worker that dies) is submitted again, up
    to twice, and is never recorded as a trial; past that td.tune raises TuningError.

    log: a JSON-lines file (see tdsl.tune.log) that every trial is appended to as it
    finishes; tuning with an existing log resumes it, measuring no candidate already
    recorded for this key on this machine. `td.Schedule.from_log` reads the best
    back. Arrays are passed by name, as to a kernel; they fix the symbolic sizes.
    """
    template = _as_template(outputs_or_template, target, arrays)
    _check_options(target, trials, timeout, runs)
    pipeline: Pipeline = template.pipeline
    sizes = dict(bind_arguments(pipeline, arrays, allow_outputs=False).sizes)
    key = tlog.make_key(pipeline, target, sizes)
    here = fingerprint()
    past = tlog.matching(tlog.read(log), key) if log is not None else []
    # this machine's trials (a transfer step's measurements are not trials of a template)
    done = {_knob_key(r["knobs"]): r for r in past if same_machine(r.get("machine"), here)
            and r.get("phase") != "transfer"}
    history = list(done.values())
    inputs = {t.name: np.ascontiguousarray(arrays[t.name]) for t in pipeline.inputs}
    base = {"outputs": template.outputs, "target": target, "arrays": inputs, "timeout": timeout,
            "runs": runs, "min_seconds": min_seconds, "fault": _fault,
            "reference": _reference(template.outputs, inputs, sizes)}
    if search not in ("model", "tpe"):
        raise ArgumentError(f"td.tune: search must be 'model' or 'tpe', got {search!r}")
    if isinstance(confirm, bool) or not isinstance(confirm, int) or confirm < 0:
        raise ArgumentError(f"td.tune: confirm must be an int >= 0, got {confirm!r}")
    search_: _Search | _Ranked
    if search == "model" and template.space_size - len(done) > trials:
        search_ = _Ranked(template, trials, done, past, here)
    else:  # Optuna's sampler, or every combination when there are few enough
        search_ = _Search(template, seed, trials, done)
    own = executor is None
    jobs = jobs or 1
    # fresh processes that never import the calling script (a script without a
    # __main__ guard tunes as a notebook does), not forks of this one (a fork copies
    # this process's memory, its compiled kernels and caches, page by page)
    pool = LocalWorkers(jobs) if own else executor
    bar = _progress(progress, search_.planned, len(done))
    completed = False
    confirmed: list[dict[str, Any]] = []
    try:
        _run(search_, pool, jobs, base, key, log, history, bar)
        if confirm > 1:
            confirmed = _confirm(pool, base, log, history, here, confirm,
                                 template.canonical(template.defaults))
        completed = True
    finally:
        if bar is not None:
            if completed:  # the search ended: the bar ends full, even when it ran out early
                bar.total = bar.n
                bar.refresh()
            bar.close()
        if own:
            pool.shutdown(wait=True, cancel_futures=True)
    best = tlog.best(history + confirmed, here)
    if best is None:
        counts = ", ".join(sorted({f"{r['status']}: {r['message'][:200]}" for r in history}))
        raise TuningError(f"no candidate of the {len(history)} tried ran correctly ({counts})")
    result = TuneResult(template, target, history, best)
    result.confirmed = confirmed
    return result


def _as_template(x, target: str, arrays: dict[str, Any]) -> Template:
    if isinstance(x, Template):
        return x
    if isinstance(x, Schedule) or isinstance(x, Stage) or isinstance(x, (tuple, list)) and x \
            and all(isinstance(s, Stage) for s in x):
        from .auto import autotemplate

        outputs = x.outputs if isinstance(x, Schedule) else x
        sizes = dict(bind_arguments(Pipeline(outputs), arrays, allow_outputs=False).sizes)
        return autotemplate(x, target, machine=None, **sizes)
    raise TuningError(
        f"td.tune takes output stage(s), a td.Template or a td.Schedule, got {x!r}")


def _check_options(target: str, trials: int, timeout: float, runs: int) -> None:
    if target not in ("c", "llvm"):
        raise ArgumentError(f"unknown target {target!r}; valid targets are c, llvm")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ArgumentError(f"td.tune: trials must be an int >= 1, got {trials!r}")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ArgumentError(f"td.tune: runs must be an int >= 1, got {runs!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ArgumentError(f"td.tune: timeout must be a number of seconds > 0, got {timeout!r}")


def _reference(outputs, inputs: dict[str, np.ndarray], sizes: dict[str, int]):
    """What every candidate's outputs must match: td.evaluate for small problems, the
    unscheduled C kernel for large ones."""
    pipeline = Pipeline(outputs)
    if _work(pipeline, sizes) <= _EVALUATE_LIMIT:
        from ..compute.evaluate import evaluate

        return evaluate(outputs, **inputs)
    from ..api import build

    return build(Schedule(outputs), target="c")(**inputs)


def _work(pipeline: Pipeline, sizes: dict[str, int]) -> float:
    """Points of work of the pipeline, roughly: each stage's domain, reductions included."""
    from ..compute.expr import Reduce
    from .auto import extent_value

    total = 0.0
    for s in pipeline.stages:
        n = 1.0
        for e in s.shape:
            n *= extent_value(e, sizes)
        if isinstance(s.expr, Reduce):
            for ax in s.expr.axes:
                n *= max(1, extent_value(ax.hi, sizes) - extent_value(ax.lo, sizes))
        total += n
    return total


def _knob_key(knobs: dict[str, Any]) -> str:
    return json.dumps(knobs, sort_keys=True)


class _Search:
    """The candidates to try, in order: the defaults, then Optuna's proposals (or every
    combination, when there are no more than the trials left). A proposal already
    measured is told its recorded time without measuring it again."""

    def __init__(self, template: Template, seed: int, trials: int, done: dict[str, dict]):
        self.template, self.done = template, done
        self.left = trials
        self.names = list(template.knobs)
        fresh = template.space_size - len(done)
        self.grid: Iterator[dict[str, Any]] | None = None
        self.study: Any = None
        if fresh <= trials:
            self.grid = self._every()
        else:
            self.study = _study(template, seed, done)
        self.first: dict[str, Any] | None = dict(template.defaults)
        self.asked: dict[str, Any] = {}
        # how many candidates this run measures at most: those not in the log
        self.planned = max(0, min(trials, fresh))

    def _every(self) -> Iterator[dict[str, Any]]:
        yield dict(self.template.defaults)
        for combo in itertools.product(*self.template.knobs.values()):
            # a branch's knobs do not matter when it is not chosen: the same schedule
            yield self.template.canonical(dict(zip(self.names, combo)))

    def next(self) -> dict[str, Any] | None:
        """The next candidate's knob values to measure, or None when done."""
        if self.left <= 0:
            return None
        if self.grid is not None:
            for values in self.grid:
                k = _knob_key(values)
                if k not in self.done and k not in self.asked:
                    self.asked[k] = None
                    self.left -= 1
                    return values
            return None
        for _ in range(50 * max(1, len(self.names))):
            if self.first is not None:  # the defaults first: the sampler's own seed
                self.study.enqueue_trial(self.first)
                self.first = None
            trial = self.study.ask(self._dists())
            values = self.template.canonical({n: trial.params[n] for n in self.names})
            k = _knob_key(values)
            rec = self.done.get(k)
            if rec is not None or k in self.asked:
                self._tell(trial, rec)
                continue
            self.asked[k] = trial
            self.left -= 1
            return values
        return None

    def _dists(self):
        import optuna

        return {n: optuna.distributions.CategoricalDistribution(c)
                for n, c in self.template.knobs.items()}

    def _tell(self, trial, rec: dict[str, Any] | None) -> None:
        import optuna

        if rec is not None and rec["status"] == "ok":
            self.study.tell(trial, rec["time"])
        else:
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)

    def record(self, values: dict[str, Any], rec: dict[str, Any]) -> None:
        k = _knob_key(values)
        self.done[k] = rec
        trial = self.asked.get(k)
        if trial is not None and self.study is not None:
            self._tell(trial, rec)


class _Ranked:
    """The candidates to try, in order: the defaults, then the one the cost model
    (`tdsl.tune.model`) predicts fastest among those not measured, refitted after each
    result, every EXPLORE-th of them among those with a knob value not measured yet.
    A candidate the template refuses is not counted as a trial."""

    def __init__(self, template: Template, trials: int, done: dict[str, dict],
                 past: list[dict[str, Any]], here: dict[str, object]):
        from .auto import _this_machine
        from .model import EXPLORE, Model

        self.template, self.done, self.left, self.here = template, done, trials, here
        self.model = Model(template, _this_machine())
        for rec in past:  # this machine's trials and other machines' records
            if rec["status"] == "ok" and rec.get("phase") != "transfer":
                self.model.observe(rec["knobs"], rec["time"], rec.get("machine"), here)
        self.asked: set[str] = set()
        self.first: dict[str, Any] | None = dict(template.defaults)
        self.grid = None
        self.planned = max(0, min(trials, template.space_size - len(done)))
        self._refused = 0
        self._proposed = 0
        self._explore = EXPLORE

    def _best(self) -> list[dict[str, Any]]:
        ok = [r for r in self.done.values() if r["status"] == "ok"]
        return [min(ok, key=lambda r: r["time"])["knobs"]] if ok else [self.template.defaults]

    def next(self) -> dict[str, Any] | None:
        """The next candidate's knob values to measure, or None when done."""
        while self.left > 0 and self._refused < 20 * max(1, len(self.template.knobs)):
            if self.first is not None and _knob_key(self.first) not in self.done:
                values, self.first = self.first, None
            else:
                self.first = None
                skip = set(self.done) | self.asked
                self._proposed += 1
                found = self.model.propose(skip, self._best(),
                                           novel=self._proposed % self._explore == 0)
                if found is None:
                    return None
                values = found
            k = _knob_key(values)
            self.asked.add(k)
            try:
                self.template.instantiate(**values)
            except ScheduleError:
                self._refused += 1  # recorded as rejected by the caller, not a trial
                return values
            self.left -= 1
            return values
        return None

    def record(self, values: dict[str, Any], rec: dict[str, Any]) -> None:
        self.done[_knob_key(values)] = rec
        if rec["status"] == "ok":
            self.model.observe(values, rec["time"], self.here, self.here)


def _study(template: Template, seed: int, done: dict[str, dict]):
    try:
        import optuna
    except ImportError:
        raise TuningError("td.tune searches with Optuna, which is not installed: "
                          "pip install 'tdsl[tune]'") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(10, len(template.knobs) * 3))
    study = optuna.create_study(direction="minimize", sampler=sampler)
    dists: dict[str, Any] = {n: optuna.distributions.CategoricalDistribution(c)
                             for n, c in template.knobs.items()}
    for rec in done.values():
        params = rec["knobs"]
        if set(params) != set(dists) or not all(
                template.knob(n).accepts(v) for n, v in params.items()):
            continue  # a record of an older template: nothing the sampler can use
        state = optuna.trial.TrialState.COMPLETE if rec["status"] == "ok" else \
            optuna.trial.TrialState.FAIL
        study.add_trial(optuna.trial.create_trial(
            params=params, distributions=dists, state=state,
            value=rec["time"] if rec["status"] == "ok" else None))
    return study


def _progress(progress: bool, total: int, resumed: int):
    """A tqdm bar over the candidates this run measures (those already in the log are
    counted in its description, not in its total), or None."""
    if not progress:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    desc = f"tuning ({resumed} from the log)" if resumed else "tuning"
    return tqdm(total=total, desc=desc, unit="trial", leave=True)


def _run(search: _Search | _Ranked, pool, jobs: int, base: dict[str, Any], key: dict[str, Any], log,
         history: list[dict[str, Any]], bar) -> None:
    """Keep `jobs` candidates in flight until the search is done; record each result."""
    running: dict[cf.Future, tuple[dict[str, Any], dict[str, Any], dict[str, Any], int]] = {}
    best = min((r["time"] for r in history if r["status"] == "ok"), default=math.inf)
    while True:
        while len(running) < jobs:
            values = search.next()
            if values is None:
                break
            rec = _candidate(search.template, values, key)
            if rec["status"] == "rejected":
                _finish(search, values, rec, log, history, bar)
                continue
            task = {**base, "schedule": json.dumps(rec["schedule"]), "knobs": values,
                    "build_timeout": _build_limit(history, base["timeout"])}
            running[_submit(pool, task)] = (values, rec, task, 0)
        if not running:
            return
        finished, _ = cf.wait(list(running), return_when=cf.FIRST_COMPLETED)
        for fut in finished:
            values, rec, task, lost = running.pop(fut)
            try:
                rec.update(fut.result())
            except TuningError:
                raise
            except Exception as e:  # noqa: BLE001 - the executor lost it: not a trial
                if lost >= _RESUBMITS:
                    raise TuningError(
                        f"the executor lost the trial of {values} {lost + 1} times "
                        f"(last: {type(e).__name__}: {e}); nothing was recorded for it, and "
                        "tuning again with the same log resumes from the trials recorded"
                    ) from e
                running[_submit(pool, task)] = (values, rec, task, lost + 1)
                continue
            if rec["status"] == "ok":
                best = min(best, rec["time"])
            _finish(search, values, rec, log, history, bar)
            if bar is not None and best < math.inf:
                bar.set_postfix_str(f"best {best * 1e3:.3f} ms")


def _submit(pool, task: dict[str, Any]) -> cf.Future:
    try:
        return pool.submit(run_trial, task)
    except Exception as e:  # noqa: BLE001 - a shut-down or broken executor
        raise TuningError(f"td.tune could not submit a trial to its executor: "
                          f"{type(e).__name__}: {e}") from e


# a build is cut past this many times the slowest successful build so far (at least
# BUILD_FLOOR seconds, at most the timeout)
BUILD_FACTOR = 4.0
BUILD_FLOOR = 10.0


def _build_limit(history: list[dict[str, Any]], timeout: float) -> float:
    """Seconds the next candidate's build may take (see tune's docstring)."""
    builds = [r["build_s"] for r in history if r["status"] == "ok" and r.get("build_s")]
    if not builds:
        return timeout
    return min(timeout, max(BUILD_FLOOR, BUILD_FACTOR * max(builds)))


def _confirm(pool, base: dict[str, Any], log, history: list[dict[str, Any]],
             here: dict[str, object], top: int, defaults: dict[str, Any] | None = None
             ) -> list[dict[str, Any]]:
    """Re-time the `top` fastest distinct schedules of this machine, and the record of
    the knob values `defaults` when it is not among them, side by side in two
    comparisons (`_compare_twice`), and record each as a "confirm" record with its mean
    time, the one `transfer.decide_repeated` picks (the fastest when there are no
    defaults) "chosen"; the records (none when fewer than two ran or the step failed)."""
    ok = sorted((r for r in history if r["status"] == "ok" and same_machine(r.get("machine"), here)
                 and r.get("phase") != "transfer"), key=lambda r: r["time"])
    leaders, texts = [], []  # the leaders' schedules as JSON texts, in order
    for r in ok:
        text = json.dumps(r["schedule"], sort_keys=True)
        if text not in texts:
            texts.append(text)
            leaders.append(r)
        if len(leaders) == top:
            break
    d = None  # the defaults' place among the leaders
    if defaults is not None:
        wanted = _knob_key(defaults)
        anchor = next((r for r in ok if _knob_key(r["knobs"]) == wanted), None)
        if anchor is not None:
            text = json.dumps(anchor["schedule"], sort_keys=True)
            if text not in texts:
                texts.append(text)
                leaders.append(anchor)
            d = texts.index(text)
    if len(leaders) < 2:
        return []
    comparisons, machine = _compare_twice(pool, base, leaders)
    if not comparisons:
        return []
    times = [_mean([c[n] for c in comparisons]) for n in range(len(leaders))]
    if d is None:
        win = min((t, n) for n, t in enumerate(times) if t is not None)[1]
    else:
        # the defaults stay unless a leader beats them beyond the noise of a shared
        # machine: in each of the two comparisons (`transfer.decide_repeated`)
        pick = decide_repeated(comparisons, d)
        win = d if pick is None else pick
    at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    out = []
    for n, (r, t) in enumerate(zip(leaders, times)):
        if t is None:
            continue
        out.append({**r, "time": t, "phase": "confirm", "chosen": n == win, "at": at,
                    "machine": machine or here, "message": "",
                    "comparisons": [c[n] for c in comparisons]})
    if log is not None:
        tlog.append(log, out)
    return out


def _compare_twice(pool, base: dict[str, Any], leaders: list[dict[str, Any]]
                   ) -> tuple[list[list[float | None]], Any]:
    """Time `leaders` side by side in two comparisons, one after the other, each in a
    process of its own (built afresh, interleaved rounds, more runs), the second in the
    reverse order: ([a time per leader, None where it failed] per comparison that ran,
    the machine they ran on)."""
    schedules = [json.dumps(r["schedule"]) for r in leaders]
    out: list[list[float | None]] = []
    machine = None
    for order in (list(range(len(leaders))), list(range(len(leaders)))[::-1]):
        task = {**base, "schedules": [schedules[n] for n in order], "rounds": 3,
                "runs": max(10, 2 * base["runs"]), "min_seconds": max(0.1, base["min_seconds"]),
                "knobs": {}}
        try:
            result = _submit(pool, task).result()
        except Exception:  # noqa: BLE001 - the leaders stay as measured
            continue
        if result.get("status") != "ok" or not any(t is not None for t in result["times"]):
            continue
        times: list[float | None] = [None] * len(leaders)
        for n, t in zip(order, result["times"]):
            times[n] = t
        out.append(times)
        machine = result.get("machine", machine)
    return out, machine


def _mean(times: list[float | None]) -> float | None:
    ran = [t for t in times if t is not None]
    return sum(ran) / len(ran) if ran else None


def _candidate(template: Template, values: dict[str, Any], key: dict[str, Any]) -> dict[str, Any]:
    rec: dict[str, Any] = {"v": tlog.VERSION, "key": key, "knobs": values, "time": None,
                           "message": "", "status": "pending", "machine": fingerprint(),
                           "phase": "search", "chosen": False}
    try:
        sched = template.instantiate(**values)
    except ScheduleError as e:
        rec.update(status="rejected", message=str(e)[:1000])
        return rec
    rec["schedule"] = json.loads(sched.to_json())
    return rec


def _finish(search: _Search | _Ranked, values, rec: dict[str, Any], log, history, bar) -> None:
    rec["message"] = str(rec.get("message", ""))[:1000]
    rec["at"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    if rec["status"] != "ok":
        rec["time"] = None
    if log is not None:
        tlog.append(log, [rec])
    history.append(rec)
    search.record(values, rec)
    if bar is not None:
        bar.update(1)
