"""One trial, run inside a worker process: generate (or take) a spec, build it,
run it, judge it.

Outcome classes (`CLASSES`):

- rejected: tdsl refused the algorithm or the schedule with a `DefinitionError`
  or `ScheduleError` — a legitimate answer, not a failure;
- exact: every output matches `td.evaluate`, three calls agree bit for bit
  (with 2 OpenMP threads), no call wrote outside its outputs (each output lies
  inside guard zones, checked after every call), and the sanitized builds are
  clean; or td.evaluate refused the data (ArgumentError) or the algorithm's
  indices (DefinitionError) and the kernel refused them too;
- wrong: an output differs from the reference, two calls differ, a call wrote
  into a guard zone, or the kernel returned a result where td.evaluate refused;
- error: any other exception (an isl or Python traceback, a `CompileError`, an
  `ArgumentError` on valid arguments, a schedule whose JSON does not round-trip);
- crashed / timed out: decided by the parent (the worker died or overran);
- sanitizer: ASan or UBSan reported a problem in a sanitized build (every 4th case
  by default, when its loop nest is at most `SANITIZE_MAX_LINES` lines long).

Lowering time is recorded for every trial, wall-clock (`lower_s`) and processor
time (`lower_cpu_s`, what the lowering budget counts); above `SLOW_LOWERING`
(13 s) of processor time the trial is also counted as slow lowering.
"""

from __future__ import annotations

import faulthandler
import resource
import time
import traceback
import warnings

import numpy as np

import tdsl as td

from . import gen, oracle, render, schedgen

CLASSES = ("rejected", "exact", "wrong", "crashed", "timed out", "error", "sanitizer")
FAILURES = ("wrong", "crashed", "timed out", "error", "sanitizer")
# Lowering stops itself at 10 s of processor time (tdsl's MAX_ISL_SECONDS), after a
# first attempt of 2 s more where a stage is read through a mirror or wrap view
# (EXACT_REGION_SHARE); measured from here, a lowering stopped there shows a little
# more (the fork, the pickled answer, the watchdog's poll: 10.045 s for seed 3101 case
# 342), so "slow" starts a second later: a lowering the budget failed to stop.
SLOW_LOWERING = 13.0
# Sanitized builds only for loop nests up to this many lines: a kernel unrolled into
# thousands of statements takes gcc most of a minute at -O3 and again under ASan
# (seed 3002 case 788: 833 copies, 8485 lines of C), and its statements are copies of
# ones that smaller cases sanitize as well.
SANITIZE_MAX_LINES = 1500
# A kernel with a parallel loop is called again, up to RACE_CALLS times or RACE_SECONDS
# of calls: a race between its threads shows in some calls only (seed 8401 case 808 lost
# a row in 1 of 8 fresh processes, only on the first call).
RACE_CALLS = 200
RACE_SECONDS = 0.05


class Rejected(Exception):
    """The algorithm or schedule was refused by tdsl (not a failure)."""


def prepare(task, send):
    """The spec and the tdsl objects of a task: (spec, outputs, schedule, arrays)."""
    spec = task.get("spec")
    fresh = spec is None
    if fresh:
        spec = gen.generate(task["seed"], task["index"], task.get("max_stages", 5),
                            task.get("exclude", ()))
        send({"type": "spec", "spec": spec})
    ns: dict = {}
    try:
        exec(compile(render.program(spec), "<tdsl-fuzz-case>", "exec"), ns)
    except (td.DefinitionError, td.ScheduleError) as e:
        raise Rejected(f"{type(e).__name__}: {e}") from None
    s = ns["s"]
    try:
        if fresh:
            rng = np.random.default_rng([task["seed"], task["index"], 1])
            send({"type": "phase", "phase": "schedule"})
            if task.get("auto"):
                s, spec["schedule"] = schedgen.auto_schedule(rng, s, task["target"])
            else:
                s, spec["schedule"] = schedgen.generate_schedule(rng, spec, s, send)
        else:
            s, kept = schedgen.apply_ops(s, spec["schedule"], task.get("lenient", False))
            spec = {**spec, "schedule": kept}
    except (td.ScheduleError, td.DefinitionError) as e:  # legality proves the accesses too
        raise Rejected(f"{type(e).__name__}: {e}") from None
    send({"type": "spec", "spec": spec})
    return spec, ns, s, ns["arrays"]


def run_task(task: dict, send) -> dict:
    """Run one trial; `send` passes progress messages (spec, phase) to the parent."""
    res = {"class": "exact", "lower_s": None, "build_s": None, "detail": ""}
    try:
        with np.errstate(all="ignore"):
            judge(task, send, res)
    except Rejected as e:
        res.update({"class": "rejected", "detail": str(e)[:500]})
    except Exception as e:  # noqa: BLE001 - anything that is not a TdslError is a finding
        res.update({"class": "error", "kind": type(e).__name__,
                    "detail": "".join(traceback.format_exception(e))[-4000:]})
    return res


def judge(task, send, res):
    spec, ns, s, arrays = prepare(task, send)
    outputs = ns["outputs"]
    res["n_prims"] = len(spec["schedule"])
    send({"type": "phase", "phase": "check"})
    if td.Schedule.from_json(s.to_json(), outputs) != s:
        raise AssertionError(f"schedule JSON does not round-trip: {s.to_json()}")
    send({"type": "phase", "phase": "evaluate"})
    try:
        want = td.evaluate(outputs, **arrays)
    except td.ScheduleError as e:
        raise Rejected(f"evaluate: {type(e).__name__}: {e}") from None
    except (td.DefinitionError, td.ArgumentError) as e:
        # an index out of range, in the algorithm (DefinitionError) or in the data
        # (ArgumentError): the kernel must refuse it too, when built or when called
        res["checked"] = f"{type(e).__name__}: {e}"
        f = build(task, send, res, s)
        send({"type": "phase", "phase": "call"})
        guards = Guards({o.name: (render.stage_shape(spec, o.name), o.dtype.np)
                         for o in outputs})
        try:
            f(**{k: v for k, v in arrays.items() if k in f.args}, **guards.outputs)
        except td.ArgumentError:
            res["class"] = "exact" if guards.intact() else "wrong"
            if not guards.intact():
                res["detail"] = f"the call wrote outside an output: {guards.report()}"
            return
        res.update({"class": "wrong", "detail": f"td.evaluate raised {type(e).__name__} "
                                                f"({e}), the kernel returned a result"})
        return
    want = want if isinstance(want, tuple) else (want,)
    spec["scale"] = scale(spec, ns, arrays)
    send({"type": "spec", "spec": spec})
    f = build(task, send, res, s)
    args = {k: v for k, v in arrays.items() if k in f.args}
    send({"type": "phase", "phase": "call"})
    msg = calls(f, args, outputs, want, spec)
    if msg:
        res.update({"class": "wrong", "detail": msg})
        return
    if task.get("sanitize") and res["nest_lines"] > SANITIZE_MAX_LINES:
        res["sanitize_skipped"] = f"a {res['nest_lines']}-line loop nest"
    elif task.get("sanitize"):
        from .sanitize import sanitize

        send({"type": "phase", "phase": "sanitize"})  # a timeout of its own: see pool
        if task.get("timeout"):
            faulthandler.dump_traceback_later(max(1.0, task["timeout"] - 2), exit=False)
        res.update(sanitize(s, f, outputs, args, want, spec))


def scale(spec, ns, arrays) -> float:
    """The largest finite float magnitude among the inputs and every stage."""
    used = render.reachable(spec)
    stages = [ns[st["name"]] for st in spec["stages"]
              if st["kind"] == "compute" and st["name"] in used]
    values = td.evaluate(stages, **arrays)
    values = values if isinstance(values, tuple) else (values,)
    return oracle.magnitude([*values, *arrays.values()])


def processor_seconds() -> float:
    """Processor time used so far by this process and the children it has waited for
    (lowering runs in a forked child)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def build(task, send, res, s):
    send({"type": "phase", "phase": "lower"})
    t0, c0 = time.perf_counter(), processor_seconds()

    def lowered() -> None:  # a refused lowering counts its time too
        res["lower_s"] = round(time.perf_counter() - t0, 3)
        res["lower_cpu_s"] = round(processor_seconds() - c0, 3)

    try:
        res["nest_lines"] = str(td.lower(s)).count("\n") + 1
        lowered()
        send({"type": "phase", "phase": "build", "lower_s": res["lower_s"],
              "lower_cpu_s": res["lower_cpu_s"]})
        t0 = time.perf_counter()
        with warnings.catch_warnings():  # random schedules vectorize what they like
            warnings.simplefilter("ignore", td.VectorizationWarning)
            f = td.build(s, target=task["target"])
    except (td.DefinitionError, td.ScheduleError) as e:
        if res["lower_s"] is None:
            lowered()
        raise Rejected(f"{type(e).__name__}: {e}") from None
    res["build_s"] = round(time.perf_counter() - t0, 3)
    res["grouped"] = grouped_products(f.source)
    res["transposed"] = transposing_copies(f.source)
    return f


# how each backend's source writes one grouped product (lower.passes.group.grouped_products)
GROUP_CALLS = ("pair_madd_i16(&", "quad_madd_u8i8(&", "quad_madd_i8u8(&",
               'call <16 x i32> @"llvm.x86.avx512.pmaddw.d.512"',
               'call <16 x i32> @"llvm.x86.avx512.vpdpbusd.512"')


def grouped_products(source: str) -> int:
    """How many grouped products (16 lanes each) a kernel's source does as one
    instruction: how often a campaign reaches them."""
    return sum(source.count(c) for c in GROUP_CALLS)


# how each backend's source starts a copy to the transpose (lower.vectors.
# transposing_copy): host C's helper, LLVM's first shuffle of a tile of 8 x 8
TRANSPOSE_CALLS = ("transpose_f32(&", "transpose_i32(&", "transpose_u32(&",
                   "<8 x i32> <i32 0, i32 8, i32 1, i32 9, i32 4, i32 12, i32 5, i32 13>")


def transposing_copies(source: str) -> int:
    """How many places of a kernel's source copy a block to its transpose in tiles of
    shuffles (LLVM: how many tiles' first shuffles): how often a campaign reaches them."""
    return sum(source.count(c) for c in TRANSPOSE_CALLS)


GUARD = 64  # bytes of sentinel before and after every output a trial passes


class Guards:
    """The outputs of one call, each inside guard zones: the middle of a larger buffer
    whose other bytes hold a sentinel pattern that a write outside the output changes.
    `fill` is what the outputs hold before the call (the sentinel byte by default)."""

    SENTINEL = 0xA5

    def __init__(self, layout: dict, fill=None):
        """`layout`: each output's name -> (shape, numpy dtype)."""
        self.wholes, self.outputs = {}, {}
        for name, (shape, dtype) in layout.items():
            dtype = np.dtype(dtype)
            n = int(np.prod(shape)) * dtype.itemsize
            whole = np.full(n + 2 * GUARD + dtype.itemsize, self.SENTINEL, np.uint8)
            start = GUARD + (-(whole.ctypes.data + GUARD)) % dtype.itemsize  # aligned
            view = whole[start:start + n].view(dtype).reshape(shape)
            if fill is not None:
                view[...] = bool(fill) if dtype.kind == "b" else fill
            self.wholes[name] = (whole, start, n)
            self.outputs[name] = view

    def intact(self) -> bool:
        return not self.report()

    def report(self) -> str:
        """Which guard zones changed, or ''."""
        bad = []
        for name, (whole, start, n) in self.wholes.items():
            before = np.flatnonzero(whole[:start] != self.SENTINEL)
            after = np.flatnonzero(whole[start + n:] != self.SENTINEL)
            if before.size:
                bad.append(f"{name}: {start - before[0]} bytes before its start")
            if after.size:
                bad.append(f"{name}: byte {after[-1] + 1} past its end")
        return "; ".join(bad)


def calls(f, args, outputs, want, spec) -> str | None:
    """Call three times (into sentinel-filled, zeroed and 7-filled outputs), and a
    kernel with a parallel loop more (`repeated`), every output inside guard zones
    checked after each call; a mismatch message."""
    base = oracle.float_base(spec)
    schedule = f.schedule.to_json()
    results = []
    layout = {o.name: (w.shape, w.dtype) for o, w in zip(outputs, want)}
    for fill in (None, 0, 7):
        guards = Guards(layout, fill)
        got = as_tuple(f(**args, **guards.outputs))
        if not guards.intact():
            return f"a call wrote outside an output: {guards.report()}"
        results.append(got)
    first = results[0]
    msg = oracle.check_results(outputs, first, want, spec["tol"], base, spec.get("scale", 1.0),
                               oracle.reassociates(schedule))
    if msg:
        return msg
    for what, again in (("a second call", results[1]),
                        ("a call into pre-filled output arrays", results[2])):
        if not same(first, again):
            return f"{what} gave different results: " + str(
                oracle.check_results(outputs, again, first, 0.0, base))
    if oracle.parallel(schedule):
        return repeated(f, args, outputs, first, base)
    return None


def repeated(f, args, outputs, first, base) -> str | None:
    """Call a kernel with a parallel loop again, up to RACE_CALLS times or RACE_SECONDS: a
    race between its threads shows in some calls only (the fuzzer's other jobs keep the
    cores busy, which preempts threads anywhere and widens the windows)."""
    t0 = time.perf_counter()
    for n in range(RACE_CALLS):
        if time.perf_counter() - t0 > RACE_SECONDS:
            break
        again = as_tuple(f(**args))
        if not same(first, again):
            return f"call {n + 4} of a kernel with a parallel loop gave different results: " + str(
                oracle.check_results(outputs, again, first, 0.0, base))
    return None


def same(first: tuple, again: tuple) -> bool:
    """Whether two calls' outputs are identical, bit for bit."""
    return all(oracle.identical(a, b) for a, b in zip(first, again))


def as_tuple(x):
    return x if isinstance(x, tuple) else (x,)
