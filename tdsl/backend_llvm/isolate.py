"""Running LLVM's work in a child process, so that LLVM cannot end ours.

The llvmlite wheel's LLVM is built with assertions on: an assertion that
fails inside one of its passes calls abort(), and a crash in it is a crash of
the interpreter. `run(fn, *args, what=...)` computes `fn(*args)` in a
compile server, a child process forked from this one, and returns the result
(or raises the exception `fn` raised there). If the server dies instead,
`run` raises `CompileError` with what the server wrote to stderr since the
request (where LLVM prints the failed assertion); the next `run` starts a new
server.

Why a server forked once rather than a fork per build or a fresh
interpreter (measured on the demo kernels of benchmarks/compile_latency.py,
on the shared 2-core machine): a fresh interpreter needs about 0.25 s to
start and import llvmlite; a fork per build cost 15-60 ms on builds of
100-300 ms (the fork, and the pages the child copies as it touches the
parent's memory); a request to a running server costs a pipe round trip of
10-25 microseconds, and cold builds took the same time as in process
(matmul 87 against 78 ms, blur 114 against 119, softmax 70 against 63:
within the machine's noise). The server is forked from this process at its
first request (10-40 ms, once), so it already has LLVM, the target machine
and the tdsl modules loaded and needs no start-up of its own.

Rules that keep it sound: requests are serialised (the caller holds the LLVM
lock, and `run` takes its own); a process forked from this one forgets the
server it inherited and starts its own (`os.register_at_fork`), so two
processes never share one; the server ignores SIGINT (a Ctrl-C meant for the
user's process must not kill a compile it has asked for) and leaves when its
request pipe closes, that is when this process exits. Functions are sent by
reference (pickle), so they must be module-level. Where `os.fork` does not
exist, `run` calls `fn` in process.
"""

from __future__ import annotations

import atexit
import os
import pickle
import select
import signal
import struct
import tempfile
import threading
from collections.abc import Callable
from typing import TypeVar, cast

from ..errors import CompileError
from ..limits import compile_timeout

T = TypeVar("T")

STDERR_LIMIT = 8000  # characters of the server's stderr kept in a CompileError
_HEADER = struct.Struct("<Q")  # the byte length of each message

_lock = threading.Lock()
_server: _Server | None = None


def available() -> bool:
    """Whether work can run in a child process here."""
    return hasattr(os, "fork")


def run(fn: Callable[..., T], *args, what: str) -> T:
    """`fn(*args)`, computed in the compile server; `what` names the work in errors."""
    global _server
    if not available():
        return fn(*args)
    with _lock:
        if _server is None:
            try:
                _server = _Server()
            except OSError as e:  # no process or file to spare
                raise CompileError(f"could not start the LLVM compile server for {what}: {e}; "
                                   "backend_llvm.build(func, isolated=False) compiles in "
                                   "process") from None
        server = _server
        try:
            ok, value = server.request(fn, args)
        except _Died as died:
            _server = None
            raise CompileError(f"LLVM {died.how} while {what}{_assertion(died.log)}",
                               log=died.log) from None
        except BaseException:  # e.g. KeyboardInterrupt: its reply would answer the next request
            _server = None
            server.kill()
            raise
    if ok:
        return cast(T, value)  # the child's result of fn, unpickled
    assert isinstance(value, BaseException)  # a failed request answers with its exception
    raise value


def stop() -> None:
    """End the compile server, if one runs; the next `run` starts a new one."""
    global _server
    with _lock:
        if _server is not None:
            _server.close()
            _server = None


def _forget_after_fork() -> None:
    global _server, _lock
    _lock = threading.Lock()
    if _server is not None:
        _server.abandon()
        _server = None


if available():
    os.register_at_fork(after_in_child=_forget_after_fork)
    atexit.register(stop)  # the server leaves with the process, its files closed


class _Died(Exception):
    def __init__(self, how: str, log: str):
        self.how, self.log = how, log


class _Server:
    def __init__(self):
        self.err = tempfile.TemporaryFile()
        requests_r, self.requests = os.pipe()
        self.replies, replies_w = os.pipe()
        try:
            self.pid = os.fork()
        except OSError:
            for fd in (requests_r, self.requests, self.replies, replies_w):
                os.close(fd)
            self.err.close()
            raise
        if self.pid == 0:  # the server: never returns
            code = 1
            try:
                os.close(self.requests)
                os.close(self.replies)
                _serve(requests_r, replies_w, self.err.fileno())
                code = 0
            finally:
                os._exit(code)
        os.close(requests_r)
        os.close(replies_w)

    def request(self, fn, args) -> tuple[bool, object]:
        start = self.err.seek(0, os.SEEK_END)
        limit = compile_timeout()
        try:
            _send(self.requests, pickle.dumps((fn, args)))
            ready, _, _ = select.select([self.replies], [], [], limit)
            if not ready:  # still compiling: stop it
                self.kill()
                raise _Died(f"ran longer than the compile time limit of {limit:g} s "
                            "(td.set_compile_timeout(seconds) raises it)", "")
            reply = _receive(self.replies)
        except OSError:
            reply = None
        if reply is None:
            self.err.seek(start)
            log = self.err.read().decode(errors="replace")[-STDERR_LIMIT:]
            how = self._reap()
            raise _Died(how, log)
        return pickle.loads(reply)

    def _reap(self) -> str:
        self.abandon()
        _, status = os.waitpid(self.pid, 0)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                return f"crashed ({signal.Signals(sig).name})"
            except ValueError:
                return f"crashed (signal {sig})"
        return f"exited with status {os.waitstatus_to_exitcode(status)}"

    def kill(self) -> None:
        self.abandon()
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)

    def close(self) -> None:
        self.abandon()  # the server sees its request pipe close, and leaves
        os.waitpid(self.pid, 0)

    def abandon(self) -> None:
        for fd in (self.requests, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass
        self.requests = self.replies = -1
        self.err.close()


def _serve(requests: int, replies: int, err: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for fd in (1, 2):  # LLVM's messages; and this process's stdout is not held open
        os.dup2(err, fd)
    while (message := _receive(requests)) is not None:
        try:
            fn, args = pickle.loads(message)
            result = (True, fn(*args))
        except Exception as e:  # the caller raises it
            result = (False, e)
        try:
            data = pickle.dumps(result)
        except Exception as e:  # an unpicklable result or exception
            data = pickle.dumps((False, CompileError(f"{type(e).__name__}: {e}")))
        _send(replies, data)


def _send(fd: int, data: bytes) -> None:
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _receive(fd: int) -> bytes | None:
    """One message, or None when the other end has closed."""
    header = _read(fd, _HEADER.size)
    if header is None:
        return None
    return _read(fd, _HEADER.unpack(header)[0])


def _read(fd: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _assertion(log: str) -> str:
    """': <the failed assertion or fatal error>', from the server's stderr."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in reversed(lines):
        if "Assertion" in line or "LLVM ERROR" in line:
            return f": {line}"
    return f": {lines[-1]}" if lines else ""
