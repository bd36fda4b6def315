"""Worker processes with a wall-clock limit per task.

Each worker (`tdsl.fuzz.worker`) runs in its own session with OMP_NUM_THREADS=2,
the parent's `tdsl` on PYTHONPATH and a private compile cache. A task that
overruns its time limit gets its worker's whole process group killed (compiler
children included) and is reported as "timed out"; a worker that dies (a signal
such as SIGSEGV or SIGABRT, or an exit) reports its task as "crashed". Either
way a fresh worker takes its place, so the campaign goes on.

The limit covers a trial from its start to its answer, except that the
sanitized builds (`FRESH_BUDGET` phases) start a limit of their own: they
lower the schedule twice more and compile it three times, which for a large
unrolled kernel on a busy machine alone can take most of a minute, and a trial
counted "timed out" should be one that hangs, not one that did all of that.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

import tdsl

FRESH_BUDGET = ("sanitize",)

def child_env(cache_dir: str) -> dict:
    env = dict(os.environ)
    root = str(Path(tdsl.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    env["OMP_NUM_THREADS"] = "2"
    env["XDG_CACHE_HOME"] = cache_dir
    env["PYTHONFAULTHANDLER"] = "1"
    return env


class Worker:
    """One worker process and the task it is running."""

    def __init__(self, env: dict, log_dir: str, max_tasks: int):
        self.err = tempfile.NamedTemporaryFile(dir=log_dir, prefix="worker-", suffix=".log",
                                               delete=False)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tdsl.fuzz.worker", str(max_tasks)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, env=env,
            start_new_session=True)
        self.buf = b""
        self.task: dict | None = None
        self.started = 0.0
        self.spec = None
        self.phase = "start"
        self.err_offset = 0
        self.done = 0
        self.lower_s: float | None = None
        self.lower_cpu_s: float | None = None

    @property
    def stdin(self) -> IO[bytes]:
        """The pipe the worker reads its tasks from."""
        assert self.proc.stdin is not None  # opened with stdin=PIPE
        return self.proc.stdin

    @property
    def stdout(self) -> IO[bytes]:
        """The pipe the worker writes its reports to."""
        assert self.proc.stdout is not None  # opened with stdout=PIPE
        return self.proc.stdout

    def give(self, task: dict, timeout: float) -> None:
        task = {**task, "timeout": timeout}
        self.task, self.started, self.spec, self.phase = task, time.monotonic(), None, "start"
        self.lower_s = self.lower_cpu_s = None
        self.err.flush()
        self.err_offset = os.path.getsize(self.err.name)
        self.stdin.write((json.dumps(task) + "\n").encode())
        self.stdin.flush()

    def stderr_tail(self, n: int = 3000) -> str:
        with open(self.err.name, "rb") as f:
            f.seek(self.err_offset)
            return f.read().decode(errors="replace")[-n:]

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        self.err.close()
        os.unlink(self.err.name)


class Pool:
    """Runs tasks on `jobs` workers; `run(tasks, on_result)` returns when all are done
    (or `deadline`, a time.monotonic() value, has passed: then no new task starts)."""

    def __init__(self, jobs: int = 1, timeout: float = 60.0, max_tasks: int = 40):
        self.jobs, self.timeout, self.max_tasks = jobs, timeout, max_tasks
        self.tmp = tempfile.TemporaryDirectory(prefix="tdsl-fuzz-")
        self.env = child_env(os.path.join(self.tmp.name, "cache"))
        self.workers: list[Worker] = []
        self.sel = selectors.DefaultSelector()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for w in self.workers:
            w.close()
        self.tmp.cleanup()

    def spawn(self) -> Worker:
        w = Worker(self.env, self.tmp.name, self.max_tasks)
        os.set_blocking(w.stdout.fileno(), False)
        self.sel.register(w.stdout, selectors.EVENT_READ, w)
        self.workers.append(w)
        return w

    def retire(self, w: Worker) -> None:
        """Stop using `w` (once: finishing its last task may already have retired it)."""
        if w not in self.workers:
            return
        self.sel.unregister(w.stdout)
        self.workers.remove(w)
        w.close()

    def run(self, tasks, on_result, deadline: float | None = None) -> None:
        tasks = iter(tasks)
        exhausted = False
        while True:
            while not exhausted and len(self.workers) < self.jobs:
                self.spawn()
            for w in [w for w in self.workers if w.task is None]:
                if exhausted or (deadline is not None and time.monotonic() > deadline):
                    exhausted = True
                    break
                task = next(tasks, None)
                if task is None:
                    exhausted = True
                    break
                w.give(task, self.timeout)
            busy = [w for w in self.workers if w.task is not None]
            if not busy:
                return
            self.poll(busy, on_result)

    def poll(self, busy, on_result) -> None:
        now = time.monotonic()
        wait = max(0.05, min(w.started + self.timeout - now for w in busy))
        for key, _ in self.sel.select(timeout=min(wait, 1.0)):
            self.read(key.data, on_result)
        for w in list(self.workers):
            if w.task is not None and time.monotonic() - w.started > self.timeout:
                w.kill()
                self.finish(w, on_result, {"class": "timed out", "detail":
                            f"over {self.timeout:.0f} s in phase {w.phase}\n{w.stderr_tail()}"})
                self.retire(w)

    def read(self, w: Worker, on_result) -> None:
        try:
            data = os.read(w.stdout.fileno(), 1 << 20)
        except BlockingIOError:
            return
        if not data:
            self.died(w, on_result)
            return
        w.buf += data
        while b"\n" in w.buf:
            line, w.buf = w.buf.split(b"\n", 1)
            self.message(w, json.loads(line), on_result)

    def message(self, w: Worker, msg: dict, on_result) -> None:
        if msg["type"] == "spec":
            w.spec = msg["spec"]
        elif msg["type"] == "ops" and w.spec is not None:
            w.spec = {**w.spec, "schedule": msg["ops"]}
        elif msg["type"] == "phase":
            w.phase = msg["phase"]
            if w.phase in FRESH_BUDGET:
                w.started = time.monotonic()
            w.lower_s = msg.get("lower_s", w.lower_s)
            w.lower_cpu_s = msg.get("lower_cpu_s", w.lower_cpu_s)
        elif msg["type"] == "result" and w.task is not None:
            self.finish(w, on_result, msg["result"])

    def died(self, w: Worker, on_result) -> None:
        code = w.proc.wait()
        if w.task is not None:
            how = (f"killed by {signal.Signals(-code).name}" if code < 0
                   else f"exited with status {code}")
            self.finish(w, on_result, {"class": "crashed", "signal": how,
                                       "detail": f"{how} in phase {w.phase}\n{w.stderr_tail()}"})
        self.retire(w)

    def finish(self, w: Worker, on_result, result: dict) -> None:
        task, w.task = w.task, None
        result.setdefault("lower_s", w.lower_s)
        result.setdefault("lower_cpu_s", w.lower_cpu_s)
        result["seconds"] = round(time.monotonic() - w.started, 3)
        w.done += 1
        if w.done >= self.max_tasks:
            self.retire(w)  # it exits by itself now: start a fresh one for the next task
        on_result(task, w.spec, result)
