"""C source to a shared library, cached by content hash.

The key covers the source, the compiler (its resolved path and `--version`),
the host CPU (for -march=native) and the flags. A library is built under a
unique temporary name in the cache directory and published with `os.replace`
as `<key>-<digest>.so`, its name carrying its own SHA-256, so processes
building the same kernel at once all succeed and nobody ever loads a
half-written file; `<key>.ref` (also replaced atomically) records the name,
size and hash, and a library is loaded only when it still matches them —
a truncated or overwritten entry is rebuilt, never loaded. The source is kept
next to the library (`<key>.c`), which is where a compiler error points. An
unusable cache directory (read-only, or under a regular file) falls back to a
temporary directory for the process, with a warning. The compiler runs under
a time limit (`tdsl.limits.set_compile_timeout`).

A library in the cache is code this process runs, so the cache is used only when
it is the user's own: the directory is created private (0700), and a directory
that another user owns, or that group or others may write (or that sits under a
directory others may rename it in: not owned by root or the user, or writable by
group or others without the sticky bit), is not read; neither is an entry that
another user owns or that group or others may write, nor a symbolic link. Such a
cache falls back to the private temporary directory, with a warning. The size and
SHA-256 of the `.ref` guard against damage; ownership and modes against tampering.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import os
import platform
import shutil
import signal
import stat
import subprocess
import tempfile
import uuid
import warnings
from pathlib import Path

from ..errors import CompileError
from ..limits import compile_timeout

# -mprefer-vector-width=512 -fno-tree-slp-vectorize: vectorized loops use the host's widest
# vectors (twice the FMA throughput of 256-bit ones on cores with full-width AVX-512);
# gcc 12's SLP vectorizer (straight-line code) miscompiles some unrolled code with
# 512-bit vectors, so it is off: tdsl's vector loops are loops, which the loop
# vectorizer handles, and register tiles are loops over vector lanes.
# -ffp-contract=off: gcc fuses a multiply into an add only when every use of the product
# is an add, so equal expressions could round differently; the C says which products
# are fused (`fmaf`/`fma`, as `lower.contraction` decides, like the LLVM target) and
# gcc fuses nothing else. Float results match numpy to rounding, not bit for bit;
# integer results are always exact.
# -fno-trapping-math: kernels never look at floating-point exception flags, so gcc may
# compute both sides of a float select. Without it, on targets without masked vector
# operations (AVX2), a select among float operations (a clamp, a NaN test, as in
# tdsl's float32 exp) leaves control flow that keeps the loop from vectorizing. The
# values computed do not change.
# -fschedule-insns -fsched-pressure: instruction scheduling before register allocation,
# weighing register pressure. Without it, gcc 12 tuning for AMD Zen (which it picks for
# a Zen 4 with -march=native) folds every load of a register tile's B vector into the
# FMAs that use it, one load per FMA, and a 512-bit load is two on Zen 4: sgemm 1024^3
# ran 12.0 ms against 9.7 with the flags (LLVM: 9.7), the int8 matmul 3.08 against 2.53;
# no benchmark kernel ran slower.
# Jump threading stays on by default; `load.flags_for` turns it off for kernels whose
# vectorized loops hold a select (NO_THREAD_JUMPS).
DEFAULT_FLAGS: tuple[str, ...] = (
    "-O3",
    "-march=native",
    "-mprefer-vector-width=512",
    "-fno-tree-slp-vectorize",
    "-fno-trapping-math",
    "-ffp-contract=off",
    "-fschedule-insns",
    "-fsched-pressure",
    "-fno-predictive-commoning",
    "-fopenmp-simd",
    "-fPIC",
    "-shared",
)
# -fopenmp-simd: the `#pragma omp simd` loops, and no OpenMP runtime: parallel loops run
# on tdsl's thread pool (pool.c), whose symbol the kernel leaves to the dynamic loader.
# -fno-predictive-commoning: gcc 12's predictive commoning carries a store from one
# iteration to a later one that stores the same address and writes it back after the
# loop, together with values it loaded before the loop for iterations that did not run.
# In a parallel loop's body, where each thread runs only some iterations, those are
# stores into other threads' elements: a buffer laid out (c, y, x) with y parallel, where
# block c of row y is row y + c H as a flat address, lost rows to stale values now and
# then (fuzz C seed 8401, case 808). Without it no benchmark kernel is slower (depthwise
# 3x3 is 13% faster on a Zen 4).
# -fno-thread-jumps: in a vectorized loop whose last iteration takes the other arm of
# a branch (a read through td.pad at a row's right edge: `x < 111 ? in[x + 1] : 0`),
# jump threading sends that arm straight to the loop's exit, and the loop, now with
# two exits, stays scalar (gcc 12): without it the branch becomes a masked load
# (depthwise 3x3: 0.185 -> 0.105 ms). But gcc 12 with it miscompiles a simd loop that
# holds such a select and loops of its own (outer-loop vectorization: one copy of the
# inner loops' values per vector, not per lane; fuzz C seed 3701 case 283), and it
# slows loops without selects (blur: 4.45 -> 4.94 ms); so `load.flags_for` adds it
# only where a vectorized loop holds a select and no vectorized loop holds a loop.
NO_THREAD_JUMPS = "-fno-thread-jumps"
# -fno-unswitch-loops for sources over LARGE_SOURCE bytes: gcc 12's loop unswitching
# copies a loop for each invariant condition it finds, and on a function of a hundred
# unrolled vector loops the copies make the later passes superlinear (a 172 KB kernel
# of the fuzzer, seed 8101 case 461: 100 s to compile, 22 s without unswitching; LLVM
# builds it in 6.5 s). tdsl unswitches the conditions it knows of itself
# (`passes.unswitch`); smaller sources keep gcc's (an unscheduled depthwise 3x3 runs
# 5% faster with it).
NO_UNSWITCH = "-fno-unswitch-loops"
LARGE_SOURCE = 64 * 1024
LIBS: tuple[str, ...] = ("-lm",)
_KEY_VERSION = "tdsl-c-1"
_LOG_LINES = 60


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/tdsl`, or `~/.cache/tdsl`."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tdsl"


def find_compiler(compiler: str | None = None) -> str:
    """Absolute path of `compiler` (a name or path), or of the system's cc/gcc/clang."""
    candidates = [compiler] if compiler else ["cc", "gcc", "clang"]
    for name in candidates:
        found = shutil.which(name)
        if found:
            return os.path.realpath(found)
    if compiler:
        raise CompileError(f"cannot find the C compiler {compiler!r} on PATH")
    raise CompileError(
        "cannot find a C compiler (cc, gcc or clang) on PATH; install one (for example "
        "`apt install gcc`), or build with td.build(..., target=\"llvm\"), which needs none")


@functools.cache
def compiler_identity(path: str) -> str:
    """The compiler's `--version` text; computed once per process and compiler."""
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, check=False,
                              timeout=60)
    except subprocess.TimeoutExpired:
        raise CompileError(f"the C compiler {path} did not answer `--version` within 60 s") from None
    except OSError as e:
        raise CompileError(f"cannot run the C compiler {path}: {e}") from None
    return proc.stdout.strip()


@functools.cache
def host_identity() -> str:
    """The machine and, where Linux says, the CPU model and features: code built
    with -march=native in a shared cache must not reach a different CPU."""
    parts = [platform.machine()]
    try:
        with open("/proc/cpuinfo") as f:
            seen = set()
            for line in f:
                key = line.split(":", 1)[0].strip()
                if key in ("model name", "flags", "Features") and key not in seen:
                    seen.add(key)
                    parts.append(line.strip())
    except OSError:
        parts.append(platform.processor())
    return "\n".join(parts)


def cache_key(src: str, compiler: str, flags: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    identity = (compiler, compiler_identity(compiler), host_identity())
    for part in (_KEY_VERSION, *identity, *flags, "", *LIBS, "", src):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def compile_source(
    src: str,
    flags: tuple[str, ...] = DEFAULT_FLAGS,
    *,
    cache_dir: str | os.PathLike | None = None,
    compiler: str | None = None,
    timeout: float | None = None,
) -> str:
    """Path of a shared library built from C source `src` (cached).

    A cached library is used only if its size and SHA-256 match what was recorded
    when it was published; a damaged one is rebuilt. When the cache directory cannot
    be created or written, the library is built in a temporary directory of this
    process instead, with a warning. `timeout` (seconds, default: the value of
    `set_compile_timeout`) bounds the compiler's run.
    """
    flags = tuple(flags)
    cc = find_compiler(compiler)
    key = cache_key(src, cc, flags)
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    try:
        _prepare(directory)
        found = _cached(directory, key)
        if found is not None:
            return found
        return _build(src, cc, flags, directory, key, timeout)
    except _Unusable as e:
        warnings.warn(
            f"the tdsl compile cache {directory} is unusable ({e.reason}); building in a "
            f"temporary directory for this process instead (set XDG_CACHE_HOME to a "
            f"writable directory of your own to keep compiled kernels)",
            RuntimeWarning,
            stacklevel=2,
        )
    fallback = _fallback_dir()
    found = _cached(fallback, key)
    if found is not None:
        return found
    try:
        return _build(src, cc, flags, fallback, key, timeout)
    except _Unusable as e:
        raise CompileError(
            f"cannot write compiled kernels to {directory} nor to the temporary directory "
            f"{fallback}: {e.reason}") from None


class _Unusable(Exception):
    """The cache directory cannot be created or written (internal: caught here)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _prepare(directory: Path) -> None:
    """Create `directory` (private) if it is missing; refuse it (`_Unusable`) unless it
    is a directory this process may trust with code it will load (`_distrust`)."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise _Unusable(f"{type(e).__name__}: {e.strerror or e}") from None
    if not directory.is_dir():
        raise _Unusable(f"{directory} is not a directory")
    reason = _distrust(directory)
    if reason is not None:
        raise _Unusable(reason)


def _distrust(directory: Path) -> str | None:
    """Why a library in `directory` could be another user's code, or None.

    The directory must belong to this user and be writable by nobody else; every
    directory above it must belong to root or this user and be writable by nobody
    else, or have the sticky bit (as /tmp has: others cannot rename what is ours)."""
    me = os.geteuid()
    try:
        real = directory.resolve(strict=True)
        st = os.stat(real)
    except OSError as e:
        return f"{type(e).__name__}: {e.strerror or e}"
    if st.st_uid != me:
        return (f"it belongs to another user (uid {st.st_uid}), and a library there would "
                "run as you")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (f"group or others may write to it (mode {stat.S_IMODE(st.st_mode):o}), and "
                f"could plant a library that runs as you; `chmod go-w {real}` makes it private")
    for parent in real.parents:
        try:
            up = os.stat(parent)
        except OSError as e:
            return f"{type(e).__name__}: {e.strerror or e}"
        if up.st_uid not in (0, me):
            return f"{parent} above it belongs to another user (uid {up.st_uid})"
        if up.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not up.st_mode & stat.S_ISVTX:
            return (f"{parent} above it may be written by group or others without the "
                    "sticky bit, who could replace the cache")
    return None


def _read_own(path: Path) -> bytes | None:
    """The bytes of `path` if it is a regular file (not a symbolic link) of this user that
    group and others may not write; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid()
                or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    except OSError:
        return None
    finally:
        os.close(fd)


_FALLBACK: list[Path] = []


def _fallback_dir() -> Path:
    """A private temporary directory for this process, removed at exit."""
    if not _FALLBACK:
        try:
            path = Path(tempfile.mkdtemp(prefix="tdsl-cache-"))
        except OSError as e:
            raise CompileError(
                f"the compile cache is unusable and no temporary directory can be made either "
                f"({e}); set XDG_CACHE_HOME or TMPDIR to a writable directory") from None
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        _FALLBACK.append(path)
    return _FALLBACK[0]


def _cached(directory: Path, key: str) -> str | None:
    """The published library for `key` in `directory` if it is intact, else None.

    `<key>.ref` names the library file (`<key>-<digest>.so`, content-addressed, so
    every process that publishes it writes the same bytes) with its size and SHA-256.
    """
    raw = _read_own(directory / f"{key}.ref")
    try:
        ref = raw.decode().split() if raw is not None else []
    except UnicodeDecodeError:
        return None
    if len(ref) != 3 or not ref[2].startswith(key) or "/" in ref[2]:
        return None
    digest, size, name = ref
    lib = directory / name
    data = _read_own(lib)
    if data is None or str(len(data)) != size or hashlib.sha256(data).hexdigest() != digest:
        return None
    return str(lib)


def _build(src: str, cc: str, flags: tuple[str, ...], directory: Path, key: str,
           timeout: float | None) -> str:
    source = directory / f"{key}.c"
    try:
        _publish(source, src.encode())
    except OSError as e:
        raise _Unusable(f"{type(e).__name__}: {e.strerror or e}") from None
    tmp = directory / f".{key}.{os.getpid()}.{uuid.uuid4().hex[:12]}.so"
    cmd = [cc, *flags, "-o", str(tmp), str(source), *LIBS]
    limit = compile_timeout() if timeout is None else timeout
    try:
        proc = _run_bounded(cmd, limit)
    except subprocess.TimeoutExpired:
        tmp.unlink(missing_ok=True)
        raise CompileError(
            f"the C compiler did not finish within {limit:g} s on the generated source kept "
            f"at {source}\ncommand: {' '.join(cmd)}\nraise the limit with "
            f"td.set_compile_timeout(seconds), or simplify the schedule (less unrolling)",
            str(source)) from None
    except OSError as e:
        raise CompileError(f"cannot run the C compiler {cc}: {e}", str(source)) from None
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        log = (proc.stderr or proc.stdout).strip()
        raise CompileError(_message(cmd, proc.returncode, source, log), str(source), log)
    try:
        data = tmp.read_bytes()
    except OSError:
        log = (proc.stderr or proc.stdout).strip()
        raise CompileError(
            f"the C compiler exited with status 0 but wrote no library ({tmp.name}) for the "
            f"generated source kept at {source}\ncommand: {' '.join(cmd)}\n{log}",
            str(source), log) from None
    digest = hashlib.sha256(data).hexdigest()
    lib = directory / f"{key}-{digest[:16]}.so"
    try:
        os.chmod(tmp, 0o700)  # the compiler's mode follows the umask; an entry is private
        os.replace(tmp, lib)
        _publish(directory / f"{key}.ref", f"{digest} {len(data)} {lib.name}\n".encode())
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise _Unusable(f"{type(e).__name__}: {e.strerror or e}") from None
    return str(lib)


def _run_bounded(cmd: list[str], limit: float) -> subprocess.CompletedProcess:
    """Run `cmd` in its own process group; past `limit` seconds the whole group (the
    driver and the cc1/as/ld it started) is killed and TimeoutExpired raised."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _publish(path: Path, data: bytes) -> None:
    """Write `path` atomically (readers see the old file or the whole new one)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}")
    try:
        tmp.write_bytes(data)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def _message(cmd: list[str], status: int, source: Path, log: str) -> str:
    lines = log.splitlines()
    if len(lines) > _LOG_LINES:
        lines = [*lines[:_LOG_LINES], f"... ({len(lines) - _LOG_LINES} more lines)"]
    shown = "\n".join(lines)
    return (
        f"the C compiler failed (exit status {status}) on the generated source kept at "
        f"{source}\ncommand: {' '.join(cmd)}\n{shown}"
    )
