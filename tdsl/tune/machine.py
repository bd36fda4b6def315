"""Which machine measured a trial: the facts a kernel's speed depends on."""

from __future__ import annotations

import functools
import os
import platform

# vector instruction sets, widest first, as /proc/cpuinfo names them
_ISAS = ("avx512f", "avx2", "avx", "sse4_2", "neon", "asimd")


@functools.cache
def fingerprint() -> dict[str, object]:
    """CPU model, widest vector instruction set, usable threads and architecture of this
    machine. Two trials are comparable when their fingerprints are equal."""
    model, flags = "", set[str]()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Model", "Hardware") and not model:
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    isa = next((x for x in _ISAS if x in flags), "")
    try:
        threads = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        threads = os.cpu_count() or 1
    return {"cpu": model or platform.processor() or platform.machine(), "isa": isa,
            "threads": threads, "arch": platform.machine()}


def same_machine(a: object, b: object) -> bool:
    """Whether two recorded fingerprints describe the same kind of machine."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    return all(a.get(k) == b.get(k) for k in ("cpu", "isa", "threads", "arch"))
