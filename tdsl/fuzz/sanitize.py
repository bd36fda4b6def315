"""A case's C under AddressSanitizer and UndefinedBehaviorSanitizer.

Two flavours of the same schedule: the host C the C backend compiles (OpenMP,
`td.build(s, target="c").source`) and the portable C99 of `td.emit_c`. Each is
compiled together with a small generated `main` into an executable with
`-fsanitize=address,undefined -fno-sanitize-recover=all`; the main reads the
input arrays from binary files, calls the entry point (with a workspace when
the portable kernel needs one), and writes the outputs, which are compared
with `td.evaluate` as for the in-process kernel. A sanitizer report is its own
outcome class, "sanitizer"; differing outputs are "wrong".
"""

from __future__ import annotations

import importlib.resources
import os
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

import tdsl as td

from . import oracle

# -g1: line tables for the sanitizers' stack traces; full -g makes gcc track variables
# through unrolled code, 35 s of compiling for a 256-line kernel (seed 3002 case 1004)
FLAGS = ("-std=gnu11", "-O1", "-g1", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
         "-fno-sanitize-recover=all")
REPORT = re.compile(r"(ERROR: AddressSanitizer.*|runtime error:.*|UndefinedBehaviorSanitizer.*)")

MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *load(const char *path, size_t n) {
    void *p = malloc(n ? n : 1);
    FILE *f = fopen(path, "rb");
    if (!p || !f || fread(p, 1, n, f) != n) { fprintf(stderr, "cannot read %s\n", path); exit(3); }
    fclose(f);
    return p;
}

static void save(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) { fprintf(stderr, "cannot write %s\n", path); exit(3); }
    fclose(f);
}

int main(void) {
"""


def params(source: str, entry: str) -> list[str]:
    """Parameter names of `entry`'s definition or declaration in C source."""
    m = re.search(rf"^(?:int|size_t) {re.escape(entry)}\(([^)]*)\)", source, re.M)
    if not m:
        raise AssertionError(f"no entry point {entry} in the generated C")
    return [p.split()[-1].lstrip("*") for p in m.group(1).split(",") if p.strip() != "void"]


# the thread pool host C kernels call, shipped with tdsl as C source (package data)
POOL_SOURCE = importlib.resources.files("tdsl.backend_c") / "pool.c"
# the start of the host C's main: the thread pool (pool.c, compiled in) runs the
# parallel loops on 2 threads, as the Python process's tests do
POOL_MAIN = """void tdsl_configure(int default_threads, int cores);

int main(void) {
    tdsl_configure(2, 2);
"""


def host_entry(source: str) -> str:
    """The name of the function the host C source defines with an int result (its
    entry point), not of a function it only declares (a prototype ends in `);`)."""
    m = re.search(r"^int (\w+)\([^;{]*\{", source, re.M)
    if not m:
        raise AssertionError("no entry point in the host C source")
    return m.group(1)


def main_c(include, entry, names, args, want, outputs, workspace) -> str:
    lines = [f'#include "{include}"', MAIN]
    for n, v in args.items():
        if isinstance(v, np.ndarray):
            lines.append(f'    void *{n}_ = load("{n}.bin", {v.nbytes});')
    for o, w in zip(outputs, want):
        lines.append(f"    void *{o.name}_ = malloc({max(w.nbytes, 1)}); "
                     f"memset({o.name}_, 7, {w.nbytes});")
    if workspace is not None:
        wargs = ", ".join(f"(int64_t){args[n]}" for n in workspace[1])
        lines.append(f"    void *workspace_ = malloc({workspace[0]}({wargs}));")
    call = []
    for n in names:
        call.append(f"{n}_" if n in args and isinstance(args[n], np.ndarray) or n in
                    {o.name for o in outputs} or n == "workspace" else f"(int64_t){args[n]}")
    lines.append(f"    int rc = {entry}({', '.join(call)});")
    lines.append('    if (rc) { fprintf(stderr, "kernel returned %d\\n", rc); return 4; }')
    for o, w in zip(outputs, want):
        lines.append(f'    save("{o.name}.out", {o.name}_, {w.nbytes});')
    lines.append("    return 0;\n}\n")
    return "\n".join(lines)


def run_flavour(d: Path, flavour: str, main: str, extra: tuple, outputs, want, spec,
                reassociates: bool) -> dict:
    """Build and run one sanitized flavour; `reassociates`: the schedule regroups a
    reduction (`oracle.reassociates`), so float results may round and overflow in
    their own order."""
    (d / f"main_{flavour}.c").write_text(main)
    exe = d / f"main_{flavour}"
    cc = subprocess.run(["gcc", *FLAGS, *extra, f"main_{flavour}.c", "-lm", "-o", exe.name],
                        cwd=d, capture_output=True, text=True, timeout=120)
    if cc.returncode:
        return {"class": "error", "detail": f"sanitized {flavour} C does not compile:\n"
                f"{cc.stderr[-3000:]}"}
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0", "UBSAN_OPTIONS": "print_stacktrace=1",
           "OMP_NUM_THREADS": "2"}
    run = subprocess.run([str(exe)], cwd=d, capture_output=True, text=True, timeout=60, env=env)
    report = REPORT.search(run.stderr)
    if report:
        return {"class": "sanitizer", "sanitizer_kind": f"{flavour}: {report.group(1)[:120]}",
                "detail": f"{flavour} C under ASan+UBSan:\n{run.stderr[-4000:]}"}
    if run.returncode:
        return {"class": "error", "detail": f"sanitized {flavour} C exited with "
                f"{run.returncode}:\n{run.stderr[-3000:]}"}
    got = tuple(np.fromfile(d / f"{o.name}.out", w.dtype).reshape(w.shape)
                for o, w in zip(outputs, want))
    msg = oracle.check_results(outputs, got, want, spec["tol"], oracle.float_base(spec),
                               spec.get("scale", 1.0), reassociates)
    return {"class": "wrong", "detail": f"sanitized {flavour} C: {msg}"} if msg else {}


def sanitize(s, f, outputs, args, want, spec) -> dict:
    """Outcome updates from the sanitized host and portable builds ({} when clean)."""
    reassociates = oracle.reassociates(s.to_json())
    with tempfile.TemporaryDirectory(prefix="tdsl-san-") as tmp:
        d = Path(tmp)
        for n, v in args.items():
            if isinstance(v, np.ndarray):
                np.ascontiguousarray(v).tofile(d / f"{n}.bin")
        host = f.source if f.target == "c" else td.build(s, target="c").source
        (d / "host.c").write_text(host)
        entry = host_entry(host)
        main = main_c("host.c", entry, params(host, entry), args, want, outputs, None)
        # parallel loops on tdsl's thread pool, built in with 2 threads per call
        main = main.replace("int main(void) {\n", POOL_MAIN, 1)
        res = run_flavour(d, "host", main, ("-fopenmp-simd", "-march=native", "-pthread",
                                            str(POOL_SOURCE)), outputs, want, spec,
                          reassociates)
        if res:
            return res
        td.emit_c(s, "fz", str(d))
        header = (d / "fz.h").read_text()
        names = params(header, "fz")
        workspace = ("fz_workspace_size", params(header, "fz_workspace_size")) if (
            "workspace" in names) else None
        main = main_c("fz.c", "fz", names, args, want, outputs, workspace)
        return run_flavour(d, "portable", main, (), outputs, want, spec, reassociates)
