"""The on-disk compile cache heals itself and degrades gracefully; the compiler is bounded.

Damaged entries are exercised in a subprocess: loading a truncated shared object
would kill the interpreter with SIGBUS, so the test must survive that to fail.
"""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess
import sys
import textwrap
import time
import warnings

import pytest

import tdsl as td
from tdsl.backend_c import compile as c_compile
from tdsl.backend_c import compile_source

ROOT = pathlib.Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import numpy as np
    import tdsl as td
    x = td.dim("x")
    a = td.input("a", {x: 16}, td.int32)
    b = td.compute("b", {x: 16}, a[x] * 3 + 1)
    f = td.build(td.schedule(b))
    print(f(a=np.arange(16, dtype=np.int32)).tolist())
""")
EXPECTED = str([3 * v + 1 for v in range(16)])


def _run(env_overrides: dict[str, str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="always", **env_overrides)
    return subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, timeout=240, check=False)


def _libraries(cache: pathlib.Path) -> list[pathlib.Path]:
    return sorted((cache / "tdsl").glob("*.so"))


def _damage(path: pathlib.Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        with open(path, "r+b") as f:  # in place, as a full disk or a killed copy leaves it
            f.truncate(len(data) // 3)
    elif how == "empty":
        with open(path, "r+b") as f:
            f.truncate(0)
    else:
        with open(path, "r+b") as f:
            f.write(b"\x7fELF" + os.urandom(len(data) - 4))


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage"])
def test_damaged_cached_library_is_rebuilt(tmp_path, how):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    first = _run(env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == EXPECTED
    (lib,) = _libraries(tmp_path)
    intact = lib.read_bytes()
    _damage(lib, how)
    second = _run(env)
    assert second.returncode == 0, f"exit {second.returncode}: {second.stderr}"
    assert second.stdout.strip() == EXPECTED
    assert lib.read_bytes() == intact  # the entry was rebuilt, not left damaged
    third = _run(env)
    assert third.returncode == 0 and third.stdout.strip() == EXPECTED


def test_processes_rebuilding_one_damaged_entry_at_once_all_succeed(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    assert _run(env).returncode == 0
    (lib,) = _libraries(tmp_path)
    intact = lib.read_bytes()
    _damage(lib, "truncated")
    full = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=full) for _ in range(3)]
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, f"exit {proc.returncode}: {err}"
        assert out.strip() == EXPECTED
    assert lib.read_bytes() == intact
    assert not [p for p in os.listdir(tmp_path / "tdsl") if p.startswith(".")]


def test_cache_under_a_regular_file_falls_back_with_a_warning(tmp_path):
    blocker = tmp_path / "home"
    blocker.write_text("not a directory")
    proc = _run({"XDG_CACHE_HOME": "", "HOME": str(blocker)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == EXPECTED
    assert "compile cache" in proc.stderr and "temporary directory" in proc.stderr
    assert str(blocker) in proc.stderr


def test_read_only_cache_directory_falls_back_with_a_warning(tmp_path, monkeypatch):
    cache = tmp_path / "ro"
    cache.mkdir()
    cache.chmod(stat.S_IRUSR | stat.S_IXUSR)
    if os.geteuid() == 0:  # root ignores the mode: make writes there fail as they would
        real = pathlib.Path.write_bytes

        def refuse(self, data):
            if cache in self.parents:
                raise PermissionError(13, "Permission denied", str(self))
            return real(self, data)

        monkeypatch.setattr(pathlib.Path, "write_bytes", refuse)
    src = "int tdsl_ro_probe(int x) { return x + 1; }\n"
    try:
        with pytest.warns(RuntimeWarning, match=r"compile cache .*ro.* unusable.*Permission"):
            path = compile_source(src, cache_dir=cache)
    finally:
        cache.chmod(stat.S_IRWXU)
    assert os.path.exists(path) and cache not in pathlib.Path(path).parents
    assert list(cache.iterdir()) == []


def test_valid_entry_in_a_read_only_directory_is_used_without_warning(tmp_path):
    src = "int tdsl_ro_reuse(int x) { return x + 2; }\n"
    path = compile_source(src, cache_dir=tmp_path)
    tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert compile_source(src, cache_dir=tmp_path) == path
    finally:
        tmp_path.chmod(stat.S_IRWXU)


def _fake_compiler(tmp_path: pathlib.Path, body: str) -> str:
    script = tmp_path / "fakecc"
    script.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo fakecc 1.0; exit 0; fi\n" + body)
    script.chmod(0o755)
    return str(script)


def test_compiler_that_hangs_is_a_compile_error(tmp_path):
    cc = _fake_compiler(tmp_path, "exec sleep 30\n")
    with pytest.raises(td.CompileError, match=r"(?s)within 0\.5 s.*td\.set_compile_timeout") as info:
        compile_source("int tdsl_hang(void) { return 0; }\n", cache_dir=tmp_path / "c",
                       compiler=cc, timeout=0.5)
    assert info.value.source_path and os.path.exists(info.value.source_path)
    assert not list((tmp_path / "c").glob("*.so"))


def test_timeout_kills_what_the_compiler_started(tmp_path):
    marker = tmp_path / "grandchild.pid"
    cc = _fake_compiler(tmp_path, f"sleep 30 & echo $! > {marker}\nwait\n")
    with pytest.raises(td.CompileError, match=r"within 0\.5 s"):
        compile_source("int tdsl_hang3(void) { return 0; }\n", cache_dir=tmp_path / "c",
                       compiler=cc, timeout=0.5)
    pid = int(marker.read_text())
    for _ in range(50):  # the kill is delivered at once; reaping by init may take a moment
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        if _zombie(pid):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the compiler's child process {pid} survived the timeout")


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def test_compile_timeout_is_settable_and_checked(tmp_path):
    cc = _fake_compiler(tmp_path, "exec sleep 30\n")
    old = td.set_compile_timeout(0.5)
    try:
        with pytest.raises(td.CompileError, match=r"within 0\.5 s"):
            compile_source("int tdsl_hang2(void) { return 0; }\n", cache_dir=tmp_path / "c",
                           compiler=cc)
    finally:
        assert td.set_compile_timeout(old) == 0.5
    for bad in (0, -1, "10", True, float("nan"), float("inf")):
        with pytest.raises(td.ArgumentError, match="positive, finite number of seconds"):
            td.set_compile_timeout(bad)


def test_compiler_that_writes_nothing_is_a_compile_error(tmp_path):
    cc = _fake_compiler(tmp_path, "echo pretending; exit 0\n")
    with pytest.raises(td.CompileError, match="exited with status 0 but wrote no library"):
        compile_source("int tdsl_silent(void) { return 0; }\n", cache_dir=tmp_path / "c",
                       compiler=cc)


def test_missing_compiler_message_points_to_something_that_exists(monkeypatch):
    monkeypatch.setattr(c_compile.shutil, "which", lambda name: None)
    with pytest.raises(td.CompileError) as info:
        c_compile.find_compiler()
    message = str(info.value)
    assert "compiler=" not in message
    assert "install" in message and 'target="llvm"' in message
    with pytest.raises(td.CompileError, match="'no-such-cc'"):
        c_compile.find_compiler("no-such-cc")


# ---------------------------------------------------------------- whose cache it is

EVIL = textwrap.dedent("""
    #include <stdio.h>
    __attribute__((constructor)) static void planted(void) {
        FILE *f = fopen("%s", "w");
        if (f) { fputs("ran", f); fclose(f); }
    }
    int tdsl_planted_marker(void) { return 1; }
""")


def _plant(tmp_path: pathlib.Path, cache: pathlib.Path) -> pathlib.Path:
    """Replace the one cached library under `cache` by one whose constructor writes a
    marker file, and rewrite its `.ref` so that size and SHA-256 match the new bytes (as
    someone who can write to the cache would): the marker's path."""
    import hashlib

    marker = tmp_path / "planted-ran"
    src = tmp_path / "planted.c"
    src.write_text(EVIL % marker)
    (lib,) = _libraries(cache)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    data = lib.read_bytes()
    (ref,) = (cache / "tdsl").glob("*.ref")
    ref.write_text(f"{hashlib.sha256(data).hexdigest()} {len(data)} {lib.name}\n")
    return marker


def _seeded(tmp_path: pathlib.Path) -> pathlib.Path:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    first = _run({"XDG_CACHE_HOME": str(cache)})
    assert first.returncode == 0 and first.stdout.strip() == EXPECTED, first.stderr
    return cache


def test_new_cache_directories_and_entries_are_private(tmp_path):
    cache = _seeded(tmp_path)
    assert stat.S_IMODE(os.stat(cache / "tdsl").st_mode) == 0o700
    for entry in (cache / "tdsl").iterdir():
        assert not os.stat(entry).st_mode & (stat.S_IRWXG | stat.S_IRWXO), entry


def test_planted_library_in_a_private_cache_of_ones_own_is_loaded(tmp_path):
    """The control: the planted library passes the size and SHA-256 check, so in a
    cache that is truly the user's own it is loaded (its marker appears). The tests
    below see no marker because of ownership and modes, not because planting failed."""
    cache = _seeded(tmp_path)
    marker = _plant(tmp_path, cache)
    for entry in (cache / "tdsl").iterdir():
        entry.chmod(0o600 if entry.suffix != ".so" else 0o700)
    _run({"XDG_CACHE_HOME": str(cache)})
    assert marker.exists()


@pytest.mark.parametrize("how", ["world-writable directory", "group-writable directory",
                                 "group-writable entry", "symlinked entry"])
def test_planted_library_in_a_shared_cache_is_never_loaded(tmp_path, how):
    cache = _seeded(tmp_path)
    marker = _plant(tmp_path, cache)
    (lib,) = _libraries(cache)
    if how == "world-writable directory":
        (cache / "tdsl").chmod(0o777)
    elif how == "group-writable directory":
        (cache / "tdsl").chmod(0o770)
    elif how == "group-writable entry":
        lib.chmod(0o770)
    else:
        moved = tmp_path / "elsewhere.so"
        lib.rename(moved)
        lib.symlink_to(moved)
    proc = _run({"XDG_CACHE_HOME": str(cache)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == EXPECTED
    assert not marker.exists(), f"the planted library ran ({how})"
    if "directory" in how:
        assert "compile cache" in proc.stderr and "may write" in proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another user needs root")
@pytest.mark.parametrize("what", ["directory", "entry", "parent"])
def test_planted_library_owned_by_another_user_is_never_loaded(tmp_path, what):
    """A second user (uid 65534, `nobody`) owns the cache directory, the library, or a
    directory above the cache: the library is not loaded, the kernel still runs."""
    cache = _seeded(tmp_path)
    marker = _plant(tmp_path, cache)
    (lib,) = _libraries(cache)
    if what == "directory":
        os.chown(cache / "tdsl", 65534, 65534)
        (cache / "tdsl").chmod(0o755)
    elif what == "entry":
        for entry in (cache / "tdsl").iterdir():
            os.chown(entry, 65534, 65534)
    else:
        os.chown(cache, 65534, 65534)
    proc = _run({"XDG_CACHE_HOME": str(cache)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == EXPECTED
    assert not marker.exists(), f"the planted library ran (another user owns the {what})"
    if what != "entry":
        assert "another user" in proc.stderr
