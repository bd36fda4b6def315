"""C source to a shared library, cached by content hash.

The key covers the source, the compiler (its resolved path and `--version`),
the host CPU (for -march=native) and the flags. A library is built under a unique temporary name in the cache
directory and published with `os.replace`, so processes building the same
kernel at once all succeed and nobody ever loads a half-written file. The
source is kept next to the library (`<key>.c`), which is where a compiler
error points.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
import uuid
from pathlib import Path

from ..errors import CompileError

# -mprefer-vector-width=512 -fno-tree-slp-vectorize: vectorized loops use the host's widest
# vectors (twice the FMA throughput of 256-bit ones on cores with full-width AVX-512);
# gcc 12's SLP vectorizer (straight-line code) miscompiles some unrolled code with
# 512-bit vectors, so it is off: tdsl's vector loops are loops, which the loop
# vectorizer handles, and register tiles are loops over vector lanes.
# Multiply-adds may contract to FMA (gcc's default), so float results match numpy to
# rounding, not bit for bit; integer results are always exact.
DEFAULT_FLAGS: tuple[str, ...] = (
    "-O3",
    "-march=native",
    "-mprefer-vector-width=512",
    "-fno-tree-slp-vectorize",
    "-fopenmp",
    "-fPIC",
    "-shared",
)
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
    wanted = compiler or "a C compiler (cc, gcc or clang)"
    raise CompileError(f"cannot find {wanted} on PATH; install gcc or pass compiler=")


@functools.cache
def compiler_identity(path: str) -> str:
    """The compiler's `--version` text; computed once per process and compiler."""
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
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
) -> str:
    """Path of a shared library built from C source `src` (cached)."""
    flags = tuple(flags)
    cc = find_compiler(compiler)
    key = cache_key(src, cc, flags)
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    lib = directory / f"{key}.so"
    if lib.exists():
        return str(lib)
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / f"{key}.c"
    _publish(source, src.encode())
    tmp = directory / f".{key}.{os.getpid()}.{uuid.uuid4().hex[:12]}.so"
    cmd = [cc, *flags, "-o", str(tmp), str(source), *LIBS]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as e:
        raise CompileError(f"cannot run the C compiler {cc}: {e}", str(source)) from None
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        log = (proc.stderr or proc.stdout).strip()
        raise CompileError(_message(cmd, proc.returncode, source, log), str(source), log)
    os.replace(tmp, lib)
    return str(lib)


def _publish(path: Path, data: bytes) -> None:
    """Write `path` atomically (readers see the old file or the whole new one)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _message(cmd: list[str], status: int, source: Path, log: str) -> str:
    lines = log.splitlines()
    if len(lines) > _LOG_LINES:
        lines = [*lines[:_LOG_LINES], f"... ({len(lines) - _LOG_LINES} more lines)"]
    shown = "\n".join(lines)
    return (
        f"the C compiler failed (exit status {status}) on the generated source kept at "
        f"{source}\ncommand: {' '.join(cmd)}\n{shown}"
    )
