"""The default executor of td.tune: fresh Python processes that run trials.

Each worker is a `python` running `serve()`, started with the tuning process's
`sys.path` and reading (function, arguments) pairs, pickled, from a pipe. Unlike a
multiprocessing pool, a worker never imports the script that started it: a script
that calls `td.tune` at top level, without `if __name__ == "__main__":`, tunes as it
would in a notebook instead of running itself again in every worker (which killed
the pool before its first trial). A worker is a fresh interpreter, not a fork of the
tuning process, whose OpenMP threads would not survive a fork.

A worker that dies is not a trial that failed: its future raises `WorkerLost`, and
the next task starts a new worker.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from typing import IO, Any

from ..errors import TuningError


class WorkerLost(Exception):
    """The worker process running a task ended before answering (killed, or out of
    memory): the task never finished, so it says nothing about the candidate."""


def _write(stream: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _read_bytes(stream: IO[bytes]) -> bytes | None:
    head = stream.read(8)
    if len(head) < 8:
        return None
    (n,) = struct.unpack("<Q", head)
    data = stream.read(n)
    return data if len(data) == n else None


class _Worker:
    """One worker process and the pipes to it."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # tdsl itself as here
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from tdsl.tune.workers import serve; serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, env=env, close_fds=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.send, self.receive = self.proc.stdin, self.proc.stdout
        _write(self.send, list(sys.path))

    def call(self, fn: Any, args: tuple[Any, ...]) -> tuple[str, Any]:
        """("ok", value) or ("raised", exception) from the worker; WorkerLost when it
        ends first."""
        try:
            _write(self.send, (fn, args))
        except (BrokenPipeError, OSError) as e:
            raise WorkerLost(f"the worker process could not be reached: {e}") from None
        data = _read_bytes(self.receive)
        if data is None:
            code = self.proc.wait()
            why = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
            raise WorkerLost(f"the worker process {why}")
        answer: tuple[str, Any] = pickle.loads(data)
        return answer

    def stop(self) -> None:
        for stream in (self.send, self.receive):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class LocalWorkers(cf.Executor):
    """A concurrent.futures executor over `jobs` worker processes (see the module's
    docstring); td.tune's default. Tasks run in submission order, one per worker at a
    time; `shutdown` stops the workers."""

    def __init__(self, jobs: int = 1):
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise TuningError(f"LocalWorkers: jobs must be an int >= 1, got {jobs!r}")
        self._tasks: queue.Queue[Any] = queue.Queue()
        self._closed = False
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._serve, daemon=True,
                                          name=f"tdsl-tune-worker-{n}") for n in range(jobs)]
        for t in self._threads:
            t.start()

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:  # type: ignore[no-untyped-def]
        """Run fn(*args) in a worker; keyword arguments are not supported."""
        if kwargs:
            raise TypeError("LocalWorkers.submit takes positional arguments only")
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot submit to LocalWorkers after shutdown")
            fut: cf.Future = cf.Future()
            self._tasks.put((fut, fn, args))
            return fut

    def _serve(self) -> None:
        worker: _Worker | None = None
        try:
            while True:
                item = self._tasks.get()
                if item is None:
                    return
                fut, fn, args = item
                if not fut.set_running_or_notify_cancel():
                    continue
                if worker is None:
                    worker = _Worker()
                try:
                    kind, value = worker.call(fn, args)
                except WorkerLost as e:
                    worker.stop()
                    worker = None
                    fut.set_exception(e)
                    continue
                if kind == "ok":
                    fut.set_result(value)
                else:
                    fut.set_exception(value)
        finally:
            if worker is not None:
                worker.stop()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
        if cancel_futures:
            while True:
                try:
                    item = self._tasks.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in self._threads:
            self._tasks.put(None)
        if wait:
            for t in self._threads:
                t.join()


def serve() -> None:
    """The worker's side: set sys.path, then answer each task until the pipe closes.
    Anything the task prints goes to stderr, so it cannot break the answers."""
    receive = sys.stdin.buffer
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    data = _read_bytes(receive)
    if data is None:
        return
    sys.path[:] = pickle.loads(data)
    while True:
        data = _read_bytes(receive)
        if data is None:
            return
        try:
            fn, args = pickle.loads(data)
        except Exception as e:  # noqa: BLE001 - reported to the tuner, which explains it
            _write(answers, ("raised", TuningError(
                f"a tuning worker could not read its task ({type(e).__name__}: {e}); "
                "everything td.tune is given (a fault hook included) must be importable "
                "by name, not defined in the script being run")))
            continue
        try:
            answer: tuple[str, Any] = ("ok", fn(*args))
        except BaseException as e:  # noqa: BLE001 - the caller's future raises it
            answer = ("raised", e)
        try:
            _write(answers, answer)
        except (pickle.PicklingError, TypeError, AttributeError) as e:
            _write(answers, ("raised", TuningError(f"a tuning worker could not send its "
                                                  f"answer: {type(e).__name__}: {e}")))
