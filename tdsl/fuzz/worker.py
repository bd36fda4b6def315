"""A worker process: reads tasks as JSON lines on stdin, answers on the original
stdout (anything printed, by Python or by native code, goes to stderr).

Run as `python -m tdsl.fuzz.worker MAX_TASKS`; it exits after MAX_TASKS tasks so
memory held by built kernels is returned, and the pool starts a fresh one.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys


def main() -> None:
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(msg: dict) -> None:
        proto.write(json.dumps(msg, default=str) + "\n")
        proto.flush()

    from .case import run_task

    send({"type": "ready"})
    for n, line in enumerate(sys.stdin):
        task = json.loads(line)
        print(f"--- task {task.get('id')}", file=sys.stderr, flush=True)
        if task.get("timeout"):  # where it hangs, in the log the parent shows
            faulthandler.dump_traceback_later(max(1.0, task["timeout"] - 2), exit=False)
        self_test(task.get("self_test"))
        result = (slow_sanitize(task, send) if task.get("self_test") == "slow-sanitize"
                  else run_task(task, send))
        faulthandler.cancel_dump_traceback_later()
        send({"type": "result", "result": result})
        if n + 1 >= limit:
            break


def self_test(what) -> None:
    """Misbehave on purpose, so tests can check that the pool records it."""
    if what == "abort":
        os.abort()
    elif what == "hang":
        import time

        time.sleep(3600)


def slow_sanitize(task: dict, send) -> dict:
    """Spend 60% of the time limit building and as much again in the sanitized builds."""
    import time

    send({"type": "phase", "phase": "build"})
    time.sleep(0.6 * task["timeout"])
    send({"type": "phase", "phase": "sanitize"})
    time.sleep(0.6 * task["timeout"])
    return {"class": "exact"}


if __name__ == "__main__":
    main()
