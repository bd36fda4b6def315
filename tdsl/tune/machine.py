"""Which machine measured a trial, and what the auto-scheduler's rules size things by.

Two views of the machine the process runs on:

- `fingerprint()`: the facts a kernel's speed depends on (CPU model, widest vector
  ISA, usable threads, architecture), recorded with every trial of a tuning log; two
  records are comparable when their fingerprints are equal (`same_machine`).
- `machine()`: a `Machine`, the model the rules of `td.autoschedule` read: vector
  width and registers (from the CPU's flags), caches (Linux's /sys), cores
  (`os.sched_getaffinity`), and how many independent FMA chains keep the FMA units
  busy and whether 512-bit vectors compute faster than 256-bit ones (measured once,
  a few milliseconds of a JIT-compiled loop, and cached per fingerprint in the
  user's cache directory).

`Machine` is a plain value: tests and users simulate another machine by passing
one (`td.autoschedule(C, machine=Machine(...))`, or `Machine.avx2()`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import platform
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# vector instruction sets, widest first, as /proc/cpuinfo names them
_ISAS = ("avx512f", "avx2", "avx", "sse4_2", "neon", "asimd")
# bytes of a vector register of each
_VECTOR_BYTES = {"avx512f": 64, "avx2": 32, "avx": 32, "sse4_2": 16, "neon": 16, "asimd": 16}
# what the probe file holds (a change of the probe makes old files stale)
_PROBE_VERSION = 1


def _cpuinfo() -> tuple[str, set[str]]:
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
    return model, flags


def _threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@functools.cache
def fingerprint() -> dict[str, object]:
    """CPU model, widest vector instruction set, usable threads and architecture of this
    machine. Two trials are comparable when their fingerprints are equal."""
    model, flags = _cpuinfo()
    isa = next((x for x in _ISAS if x in flags), "")
    return {"cpu": model or platform.processor() or platform.machine(), "isa": isa,
            "threads": _threads(), "arch": platform.machine()}


def same_machine(a: object, b: object) -> bool:
    """Whether two recorded fingerprints describe the same kind of machine."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    return all(a.get(k) == b.get(k) for k in ("cpu", "isa", "threads", "arch"))


def fingerprint_id(fp: dict[str, object] | None = None) -> str:
    """A short stable name of a fingerprint (this machine's by default)."""
    fp = fp if fp is not None else fingerprint()
    text = json.dumps({k: fp.get(k) for k in ("cpu", "isa", "threads", "arch")}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Machine:
    """What the auto-scheduler's rules size things by.

    vector_bytes   the widest vector register the rules use (64: AVX-512, 32: AVX2)
    registers      vector registers (32 with AVX-512 or on AArch64, else 16)
    l1, l2, llc    data cache bytes: per core, per core, last level (shared)
    cores          threads this process may run on
    fma_chains     independent FMA chains that keep the FMA units busy (latency x
                   units: 8 on a core with two FMA units of 4 cycles); a register
                   tile needs at least this many accumulators
    wide_speedup   FLOP/s of 512-bit FMAs over 256-bit ones (2 with two 512-bit units,
                   about 1 where 512-bit operations are split in two, as on Zen 4)
    isa            the widest vector instruction set ("avx512f", "avx2", ...)
    """

    vector_bytes: int
    registers: int
    l1: int
    l2: int
    cores: int
    llc: int = 32 << 20
    fma_chains: int = 8
    wide_speedup: float = 2.0
    isa: str = ""

    @staticmethod
    def avx2(**changes: Any) -> Machine:
        """A typical AVX2 machine (16 registers of 32 bytes, two FMA units), with `changes`."""
        base = Machine(32, 16, 32 << 10, 1 << 20, 8, 32 << 20, 8, 1.0, "avx2")
        return dataclasses.replace(base, **changes)

    @staticmethod
    def avx512(**changes: Any) -> Machine:
        """A typical AVX-512 server core (32 registers of 64 bytes, two 512-bit FMA units),
        with `changes`."""
        base = Machine(64, 32, 48 << 10, 2 << 20, 8, 64 << 20, 8, 2.0, "avx512f")
        return dataclasses.replace(base, **changes)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _cache_size(index: int, default: int) -> int:
    try:
        with open(f"/sys/devices/system/cpu/cpu0/cache/index{index}/size") as f:
            text = f.read().strip()
        if text.endswith("K"):
            return int(text[:-1]) * 1024
        if text.endswith("M"):
            return int(text[:-1]) << 20
        return int(text)
    except (OSError, ValueError):
        return default


def _cache_levels() -> tuple[int, int, int]:
    """(L1 data, L2, last level) bytes, from /sys (the index of each level varies)."""
    found: dict[int, int] = {}
    for index in range(8):
        base = f"/sys/devices/system/cpu/cpu0/cache/index{index}"
        try:
            with open(f"{base}/level") as f:
                level = int(f.read())
            with open(f"{base}/type") as f:
                kind = f.read().strip()
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified"):
            found[level] = _cache_size(index, 0)
    l1 = found.get(1) or 32 << 10
    l2 = found.get(2) or 1 << 20
    llc = found.get(max(found)) if found else 0
    return l1, l2, max(llc or 32 << 20, l2)


@functools.cache
def machine() -> Machine:
    """This machine's model: the flags, caches and cores are read, the FMA figures
    measured once per fingerprint and kept in the user's cache directory (defaults
    where neither works)."""
    fp = fingerprint()
    isa = str(fp["isa"])
    vector = _VECTOR_BYTES.get(isa, 16)
    registers = 32 if isa == "avx512f" or fp["arch"] in ("aarch64", "arm64") else 16
    l1, l2, llc = _cache_levels()
    threads = fp["threads"]
    probe = _probe()
    return Machine(vector, registers, l1, l2, threads if isinstance(threads, int) else 1, llc,
                   int(probe.get("fma_chains", 8)), float(probe.get("wide_speedup", 2.0)), isa)


# ---------------------------------------------------------------- the FMA probe


def _cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tdsl" / f"machine-{fingerprint_id()}.json"


def _read_probe(path: Path) -> dict[str, Any] | None:
    """The cached probe, if the file is this user's, private to writes, and current."""
    try:
        st = path.stat()
        if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != _PROBE_VERSION:
        return None
    chains, speedup = data.get("fma_chains"), data.get("wide_speedup")
    if not (isinstance(chains, int) and 1 <= chains <= 32
            and isinstance(speedup, (int, float)) and 0.25 <= speedup <= 4):
        return None
    return data


def _probe() -> dict[str, Any]:
    """The FMA figures: cached, else measured and cached; {} when they cannot be measured
    (not x86-64 or AArch64, or LLVM refused)."""
    path = _cache_file()
    cached = _read_probe(path)
    if cached is not None:
        return cached
    try:
        data = {"version": _PROBE_VERSION, **measure_fma()}
    except Exception:  # noqa: BLE001 - the model falls back to common values
        return {}
    with contextlib.suppress(OSError):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    return data


def _chain_ir(lanes: int, chains: int) -> str:
    """LLVM IR of `float probe(i64 n)`: `chains` independent FMA chains on <lanes x float>."""
    vt = f"<{lanes} x float>"
    one = f"<{', '.join(['float 1.0'] * lanes)}>"
    mul = f"<{', '.join(['float 0x3FEFFFFFE0000000'] * lanes)}>"  # just under 1
    add = f"<{', '.join(['float 0x3E80000000000000'] * lanes)}>"
    lines = [f"declare {vt} @llvm.fma.v{lanes}f32({vt}, {vt}, {vt})",
             "define float @probe(i64 %n) {", "entry:", "  br label %loop", "loop:",
             "  %i = phi i64 [0, %entry], [%i1, %loop]"]
    for c in range(chains):
        lines.append(f"  %a{c} = phi {vt} [{one}, %entry], [%b{c}, %loop]")
    for c in range(chains):
        lines.append(f"  %b{c} = call {vt} @llvm.fma.v{lanes}f32({vt} %a{c}, {vt} {mul}, "
                     f"{vt} {add})")
    lines += ["  %i1 = add i64 %i, 1", "  %done = icmp eq i64 %i1, %n",
              "  br i1 %done, label %exit, label %loop", "exit:"]
    acc = "%b0"
    for c in range(1, chains):
        lines.append(f"  %s{c} = fadd {vt} {acc}, %b{c}")
        acc = f"%s{c}"
    lines += [f"  %r = extractelement {vt} {acc}, i32 0", "  ret float %r", "}"]
    return "\n".join(lines)


def measure_fma(repeats: int = 5) -> dict[str, Any]:
    """How many independent FMA chains saturate this core (the throughput of k chains
    at its plateau over one chain) and 512-bit over 256-bit FMA throughput; each
    figure the fastest of `repeats` timings (the least disturbed by other processes)."""
    import ctypes

    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    wide = "+avx512f" in features
    keep = []

    def rate(lanes: int, chains: int) -> float:
        # a target machine per engine: an MCJIT engine owns the one it is given
        tm = llvm.Target.from_default_triple().create_target_machine(
            cpu=cpu, features=features, opt=2, jit=True)
        mod = llvm.parse_assembly(_chain_ir(lanes, chains))
        mod.triple, mod.data_layout = tm.triple, str(tm.target_data)
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        keep.append(engine)
        fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(engine.get_function_address("probe"))
        n = 200_000
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(n)
            best = min(best, time.perf_counter() - t0)
        return n * chains * lanes / best  # float FMAs per second

    counts = (1, 2, 4, 6, 8, 10, 12, 16)
    rates = [rate(8, c) for c in counts]
    top = max(rates)
    # one chain runs one FMA per latency; the plateau, units per cycle: their ratio is
    # latency x units (the extremes only: the steps between are the noisiest)
    one = max(r / c for c, r in zip(counts[:3], rates[:3]))  # below the plateau: linear
    chains = max(1, min(32, round(top / one)))
    speedup = rate(16, chains) / rate(8, chains) if wide else 1.0
    return {"fma_chains": int(chains), "wide_speedup": round(speedup, 2),
            "rates": [round(r / 1e9, 2) for r in rates], "cpu": cpu}
