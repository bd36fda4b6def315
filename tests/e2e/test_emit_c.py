"""`td.emit_c` and `tdsl emit-c`: standalone C99 on real toolchains, against numpy.

Each example kernel of examples/embedded/kernels.py is emitted once, then
built with a generated C test driver (which reads the inputs from a binary
file, checks that invalid sizes and a missing workspace are refused without
writing, runs the kernel and writes the outputs) by gcc and clang with
`-std=c99 -Wall -Wextra -Werror -pedantic`, by gcc with AddressSanitizer and
UBSan around a workspace of exactly `NAME_workspace_size` bytes, and
statically for 32-bit ARM Linux to run under qemu-arm; the kernel alone is
compiled for Cortex-M4 with arm-none-eabi-gcc. Outputs must equal
`td.evaluate`: exactly for integers, to rounding for floats.

A missing toolchain fails these tests when CI is set, and skips them otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import pipelines, schedules
from test_differential import ALLOWED_REJECTIONS
from test_parallel import three_stencils, three_stencils_restaged

import tdsl as td
from tdsl.backend_c import helpers
from tdsl.backend_c.helpers import ctype
from tdsl.backend_c.workspace import workspace_layout
from tdsl.compute.binding import bind_arguments
from tdsl.emit import add_emit_c_parser, emit_c_command, extent_conditions, load_function
from tdsl.lower import ir
from tdsl.lower.rewrite import walk_stmts

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "embedded"
KERNELS = EXAMPLES / "kernels.py"
IN_CI = os.environ.get("CI", "").lower() not in ("", "0", "false", "no")

STRICT = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic")
CORTEX_M4 = ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16")
INT32_MAX = 2**31 - 1
PTRDIFF_MAX_64 = 2**63 - 1
SANITIZE = (*STRICT, "-O1", "-g1", "-ffp-contract=off", "-fsanitize=address,undefined",
            "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-DCANARY=0")
ASAN_ENV = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0"}


def tool(name: str) -> str:
    """Path of a toolchain command; fails under CI and skips elsewhere when it is missing."""
    found = shutil.which(name)
    if found is None:
        why = (f"{name} is not installed (apt-get install clang gcc-arm-none-eabi "
               "libnewlib-arm-none-eabi gcc-arm-linux-gnueabihf libc6-dev-armhf-cross qemu-user)")
        if IN_CI:
            pytest.fail(why)
        pytest.skip(why)
    return found


def run(cmd, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n" \
        f"{proc.stdout}\n{proc.stderr}"
    return proc


# ---------------------------------------------------------------- the kernels


def _inputs(name: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    f32 = np.float32
    return {
        "matmul": lambda: {"A": rng.uniform(-1, 1, (24, 20)).astype(f32),
                           "B": rng.uniform(-1, 1, (20, 28)).astype(f32)},
        "blur_root": lambda: {"inp": rng.random((13, 21), dtype=f32)},
        "blur": lambda: {"inp": rng.random((29, 37), dtype=f32)},
        "blur_sliding": lambda: {"inp": rng.integers(0, 256, (240, 320), dtype=np.uint8)},
        "softmax": lambda: {"X": (3 * rng.standard_normal((5, 40))).astype(f32)},
        "qmatmul": lambda: {"A": rng.integers(-128, 128, (16, 32), dtype=np.int8),
                            "B": rng.integers(-128, 128, (32, 12), dtype=np.int8)},
        "scale": lambda: {"a": _int16_edges(rng), "b": _int16_edges(rng)[::-1].copy()},
        "int_ops": lambda: {"a": _int8_edges(rng), "b": _int8_edges(rng)[::-1].copy()},
        "fused_at": lambda: {"a": rng.integers(-1000, 1000, (9, 16), dtype=np.int32)},
        "inline_reductions": lambda: {"a": rng.integers(-50, 50, (7, 12), dtype=np.int32)},
        "padded_at": lambda: {"a": rng.integers(0, 8, (7, 1), dtype=np.uint8)},
        "fc_s8": lambda: {"input": _s8(rng, 256), "filter": _s8(rng, 64, 256),
                          "bias": rng.integers(-20000, 20000, 64, dtype=np.int32)},
        "conv_s8": lambda: {"input": _s8(rng, 16, 16, 16), "filter": _s8(rng, 16, 3, 3, 16),
                            **_per_channel(rng, 16, -12)},
        "depthwise_s8": lambda: {"input": _s8(rng, 32, 32, 16), "filter": _s8(rng, 3, 3, 16),
                                 **_per_channel(rng, 16, -10)},
        "avgpool_s8": lambda: {"input": _s8(rng, 16, 16, 16)},
        "maxpool_s8": lambda: {"input": _s8(rng, 16, 16, 16)},
    }[name]()


def _s8(rng, *shape) -> np.ndarray:
    """int8 values, the extremes among them."""
    a = rng.integers(-128, 128, shape, dtype=np.int8)
    a.reshape(-1)[:2] = (-128, 127)
    return a


def _per_channel(rng, n: int, shift: int) -> dict[str, np.ndarray]:
    """Biases and per-channel requantization parameters as a quantized model has them."""
    return {"bias": rng.integers(-20000, 20000, n, dtype=np.int32),
            "multiplier": rng.integers(2**30, 2**31 - 1, n, dtype=np.int32),
            "shift": (shift + rng.integers(-1, 2, n)).astype(np.int32)}


def _int8_edges(rng) -> np.ndarray:
    edges = np.array([-128, -127, -3, -1, 0, 1, 2, 3, 127], dtype=np.int8)
    return np.concatenate([edges, rng.integers(-128, 128, 15, dtype=np.int8)])


def _int16_edges(rng) -> np.ndarray:
    edges = np.array([-32768, -32767, -7, -1, 0, 1, 7, 32766, 32767], dtype=np.int16)
    return np.concatenate([edges, rng.integers(-32768, 32768, 20, dtype=np.int16)])


def int_ops() -> td.Schedule:
    """Seven outputs of five integer dtypes: wrapping, floor division and modulo by
    zero and by -1, abs, min/max, invert, narrowing and saturating casts, shifts; no
    sizes, one intermediate (a constant workspace)."""
    n = td.dim("n")
    a = td.input("a", {n: 24}, td.int8)
    b = td.input("b", {n: 24}, td.int8)
    t = td.compute("t", {n: 24}, td.cast(a[n], td.int32) * 1000 - td.cast(b[n], td.int32) * 77)
    o8 = td.compute("o8", {n: 24}, a[n] * b[n] + a[n] // b[n] - a[n] % b[n])
    u16 = td.cast(t[n], td.uint16)
    o16 = td.compute("o16", {n: 24}, u16 * u16 - (u16 // 3) % 250)
    w = td.cast(b[n], td.int32) - 3
    o32 = td.compute("o32", {n: 24}, td.abs(t[n] * t[n] * t[n]) // w + td.maximum(t[n], -w) % w)
    wide = td.cast(t[n], td.int64) * 3037000499 // (td.cast(a[n], td.int64) - 1)
    o64 = td.compute("o64", {n: 24}, wide)
    inv = ~td.cast(t[n], td.uint32) // 7 + td.minimum(td.cast(a[n], td.uint32), 5)
    ou = td.compute("ou", {n: 24}, inv)
    tr = td.compute("tr", {n: 24}, td.cast(t[n], td.int8) - td.cast(-t[n], td.int16))
    # shifts by any count (numpy shifts everything out), saturating casts
    sh = td.compute("sh", {n: 24}, (a[n] << (b[n] % 11)) ^ td.saturating_cast(t[n] >> (a[n] % 40), td.int8))
    return td.schedule((o8, o16, o32, o64, ou, tr, sh))


def padded_at() -> td.Schedule:
    """A producer computed at its consumer's row, read through a pad at rows y + 2 and
    2 y: its block's rows are piecewise in H (a select on a range of H), and so is the
    workspace, which the header's NAME_WORKSPACE_BYTES macro must write in C (a fuzz
    campaign's emit_c failed on it)."""
    y, x = td.dims("y x")
    H = td.size("H")
    a = td.input("a", {y: H, x: 1}, td.uint8)
    s0 = td.compute("s0", {y: H, x: 1}, a[y, x] > 3)
    s1 = td.compute("s1", {y: H, x: 1}, td.pad(s0, False)[y, x + 1] | s0[y, x])
    s2 = td.compute("s2", {y: H, x: 1}, td.cast(
        td.pad(s1, True)[y + 2, x] & td.pad(s1, True)[2 * y, x], td.uint8) + a[y, x])
    return td.schedule(s2).compute_at(s1, s2, "y")


def fused_at() -> td.Schedule:
    """A row minimum and a tiled, reordered producer computed at a fused loop with the
    consumer's y_o loop inside it: blocks over rows of one parity, bounds set per
    iteration, buffers (and the workspace) sized by the symbolic row count."""
    y, x, k = td.dims("y x k")
    H = td.size("H")
    a = td.input("a", {y: H, x: 16}, td.int32)
    r = td.compute("r", {y: H}, td.min(a[y, k], over={k: 16}))
    p = td.compute("p", {y: H, x: 16}, a[y, x] * 3 + 1)
    out = td.compute("out", {y: H, x: 16}, p[y, x] - r[y])
    return (td.schedule(out).tile(out, y=2, x=16).fuse(out, "y_i", "x_i")
            .reorder(out, "x_o y_i_x_i y_o").compute_at(r, out, "y_i_x_i")
            .reorder(p, "x y").tile(p, x=7, y=1).compute_at(p, out, "y_i_x_i"))


def inline_reductions() -> td.Schedule:
    """Reductions inside expressions: an argmax per row, a triangular solve whose value
    reduces over what the update has written, and a nested reduction over a symbolic
    extent; one a named stage computed per row."""
    y, x, k, j = td.dims("y x k j")
    H = td.size("H")
    a = td.input("a", {y: H, x: 12}, td.int32)
    best = td.compute("best", {y: H}, td.argmax(a[y, x] % 7, over=x) * 10
                      + td.sum(a[y, k], over=k, name="rowsum") // 3)
    solve = td.compute("solve", {y: H, x: 12}, a[y, x])
    td.update(solve[y, x], solve[y, x] - td.sum(solve[y, k] * (x - k), over={k: (0, x)}),
              over={y: H, x: 12})
    nest = td.compute("nest", {y: H}, td.sum(td.max(a[j, k], over={k: (0, x + 1)}) * a[y, x],
                                             over={x: 12, j: (0, y + 1)}))
    return td.schedule((best, solve, nest)).compute_at("rowsum", best, "y")


TEST_KERNELS = {"int_ops": int_ops, "fused_at": fused_at, "inline_reductions": inline_reductions,
                "padded_at": padded_at}
NAMES = ["matmul", "blur_root", "blur", "blur_sliding", "softmax", "qmatmul", "scale", "int_ops", "fused_at",
         "inline_reductions", "padded_at", "fc_s8", "conv_s8", "depthwise_s8", "avgpool_s8", "maxpool_s8"]


@dataclass
class Emitted:
    name: str
    dir: Path
    func: ir.LoweredFunc
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    sizes: dict[str, int]
    schedule: td.Schedule
    rtol: float = 1e-5

    @property
    def exact(self) -> bool:
        return all(not a.dtype.kind == "f" for a in self.expected.values())


@pytest.fixture(scope="module", params=NAMES)
def emitted(request, tmp_path_factory) -> Emitted:
    name = request.param
    make = TEST_KERNELS.get(name) or load_function(f"{KERNELS}:{name}")
    sched = make()
    out = tmp_path_factory.mktemp(name)
    td.emit_c(sched, name, out)
    inputs = _inputs(name, np.random.default_rng(NAMES.index(name)))
    ref = td.evaluate(sched.outputs, **inputs)
    ref = ref if isinstance(ref, tuple) else (ref,)
    expected = {o.name: r for o, r in zip(sched.outputs, ref, strict=True)}
    sizes = bind_arguments(sched.pipeline, inputs).sizes
    e = Emitted(name, out, td.lower(sched, name), inputs, expected, sizes, sched)
    (out / "inputs.bin").write_bytes(b"".join(inputs[b.name].tobytes() for b in e.func.inputs))
    (out / "driver.c").write_text(driver_source(e))
    return e


# ---------------------------------------------------------------- the driver


def ir_value(e: ir.Expr, sizes: dict[str, int]) -> int:
    """An index expression of sizes, evaluated exactly."""
    match e:
        case ir.Const(v):
            return int(v)
        case ir.Var(n):
            return sizes[n]
        case ir.Binary(op, a, b):
            x, y = ir_value(a, sizes), ir_value(b, sizes)
            if op in ("and", "or"):  # of conditions (0 or 1)
                return x & y if op == "and" else x | y
            return {"add": x + y, "sub": x - y, "mul": x * y, "min": min(x, y), "max": max(x, y),
                    "pdiv": x // y, "floordiv": x // y, "pmod": x % y, "mod": x % y}[op]
        case ir.Unary("neg", a):
            return -ir_value(a, sizes)
        case ir.Select(c, a, b):
            return ir_value(a, sizes) if ir_value(c, sizes) else ir_value(b, sizes)
        case ir.Compare(op, a, b):
            x, y = ir_value(a, sizes), ir_value(b, sizes)
            return int({"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y,
                        "ge": x >= y}[op])
    raise AssertionError(e)


def workspace_bytes(e: Emitted, sizes: dict[str, int]) -> int:
    layout = workspace_layout(e.func)
    return 0 if layout is None else ir_value(layout.total, sizes)


def rejected_sizes(e: Emitted) -> list[dict[str, int]]:
    """Size arguments the kernel must refuse: out of range, an extent below 1,
    or a workspace larger than PTRDIFF_MAX."""
    cases = []
    conditions = [c for c, _ in extent_conditions(e.schedule.pipeline)]
    for v in e.func.sizes:
        cases += [{**e.sizes, v.name: bad} for bad in (0, -1, INT32_MAX + 1)]
        small = next((k for k in range(1, 10) if any(
            ir_value(c.a, {**e.sizes, v.name: k}) < 1 for c in conditions)), None)
        if small is not None:
            cases.append({**e.sizes, v.name: small})
    if e.func.sizes and workspace_bytes(e, {v.name: INT32_MAX for v in e.func.sizes}) > \
            PTRDIFF_MAX_64:
        cases.append({v.name: INT32_MAX for v in e.func.sizes})
    return cases


def _call(e: Emitted, sizes: dict[str, int], workspace: str) -> str:
    args = [b.name for b in (*e.func.inputs, *e.func.outputs)]
    args += [f"INT64_C({sizes[v.name]})" for v in e.func.sizes]
    if workspace_layout(e.func) is not None:
        args.append(workspace)
    return f"{e.name}({', '.join(args)})"


def driver_source(e: Emitted) -> str:
    """main(argc, argv): read argv[1], check the refusals, run, write argv[2]; exit 0 if all is well."""
    arrays = [(b, e.inputs.get(b.name, e.expected.get(b.name))) for b in
              (*e.func.inputs, *e.func.outputs)]
    lines = ["#include <stdint.h>", "#include <stdio.h>", "#include <stdlib.h>",
             "#include <string.h>", f'#include "{e.name}.h"', "",
             "#ifndef CANARY", "#define CANARY 64", "#endif", "",
             "int main(int argc, char **argv) {", "    FILE *f;",
             "    if (argc != 3 || (f = fopen(argv[1], \"rb\")) == NULL) return 100;"]
    for b, a in arrays:
        t = ctype(b.dtype)
        lines.append(f"    {t} *{b.name} = malloc({a.nbytes});")
        lines.append(f"    if ({b.name} == NULL) return 101;")
        if b.kind == "input":
            lines.append(f"    if (fread({b.name}, 1, {a.nbytes}, f) != {a.nbytes}) return 102;")
        else:
            lines.append(f"    memset({b.name}, 0x5a, {a.nbytes});")
    lines.append("    fclose(f);")
    has_ws = workspace_layout(e.func) is not None
    need = workspace_bytes(e, e.sizes)
    if has_ws:
        sizes = ", ".join(f"INT64_C({e.sizes[v.name]})" for v in e.func.sizes)
        symbolic = workspace_layout(e.func).constant is None  # else a plain constant
        macro = f"{e.name}_WORKSPACE_BYTES" + (f"({sizes})" if symbolic else "")
        lines += [f"    size_t need = {e.name}_workspace_size({sizes});",
                  f"    if (need != {need}u) return 103;",
                  f"    if ({macro} != need) return 112;  /* the header's macro agrees */",
                  "    unsigned char *ws = malloc(need + CANARY);",
                  "    if (ws == NULL) return 104;",
                  "    memset(ws, 0xff, need + CANARY);  /* garbage the kernel must overwrite */"]
    for n, bad in enumerate(rejected_sizes(e)):
        lines.append(f"    if ({_call(e, bad, 'ws')} != 1) return {10 + n};")
        if has_ws:
            args = ", ".join(f"INT64_C({bad[v.name]})" for v in e.func.sizes)
            lines.append(f"    if ({e.name}_workspace_size({args}) != 0) return {50 + n};")
    if has_ws:
        lines.append(f"    if ({_call(e, e.sizes, 'NULL')} != 2) return 105;")
    for b, a in arrays:
        if b.kind == "output":
            lines += [f"    for (size_t q = 0; q < {a.nbytes}; q++)",
                      f"        if (((unsigned char *){b.name})[q] != 0x5a) return 106;"]
    lines.append(f"    if ({_call(e, e.sizes, 'ws')} != 0) return 107;")
    if has_ws:
        lines += ["    for (size_t q = need; q < need + CANARY; q++)",
                  "        if (ws[q] != 0xff) return 108;  /* written past the workspace */"]
    lines.append("    if ((f = fopen(argv[2], \"wb\")) == NULL) return 109;")
    for b, a in arrays:
        if b.kind == "output":
            lines.append(f"    if (fwrite({b.name}, 1, {a.nbytes}, f) != {a.nbytes}) return 110;")
    lines.append("    if (fclose(f) != 0) return 111;")
    lines += [f"    free({b.name});" for b, _ in arrays]
    lines += ["    free(ws);"] if has_ws else []
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)


def check_outputs(e: Emitted, path: Path, label: str) -> None:
    data, start = path.read_bytes(), 0
    for b in e.func.outputs:
        want = e.expected[b.name]
        got = np.frombuffer(data[start:start + want.nbytes], want.dtype).reshape(want.shape)
        start += want.nbytes
        if e.exact:
            np.testing.assert_array_equal(got, want, err_msg=f"{e.name} ({label})")
        else:
            np.testing.assert_allclose(got, want, rtol=e.rtol, atol=e.rtol,
                                       err_msg=f"{e.name} ({label}): {e.schedule!r}")
    assert start == len(data)


def build_and_run(e: Emitted, label: str, cc: str, flags, runner=(), env=None) -> None:
    exe = e.dir / f"driver_{label}"
    run([cc, *flags, "-I", e.dir, e.dir / f"{e.name}.c", e.dir / "driver.c", "-o", exe, "-lm"])
    out = e.dir / f"outputs_{label}.bin"
    proc = subprocess.run([*runner, exe, e.dir / "inputs.bin", out], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, f"{e.name} ({label}) driver exited {proc.returncode}:\n" \
        f"{proc.stderr}\n{(e.dir / 'driver.c').read_text()}"
    check_outputs(e, out, label)


# ---------------------------------------------------------------- toolchains


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_native_strict_c99_matches_numpy(emitted, compiler):
    flags = (*STRICT, "-O2", "-ffp-contract=off")
    build_and_run(emitted, compiler, tool(compiler), flags)


def test_sanitized_with_exact_workspace(emitted):
    """ASan around a workspace of exactly NAME_workspace_size bytes, UBSan for
    signed overflow and other undefined behaviour (integer kernels wrap in unsigned)."""
    build_and_run(emitted, "asan", tool("gcc"), SANITIZE, env=ASAN_ENV)


def test_arm_linux_under_qemu_matches_numpy(emitted):
    cc = tool("arm-linux-gnueabihf-gcc")
    qemu = tool("qemu-arm")
    build_and_run(emitted, "qemu", cc, (*STRICT, "-O2", "-ffp-contract=off", "-static"),
                  runner=(qemu,))


def test_cortex_m4_object(emitted):
    cc = tool("arm-none-eabi-gcc")
    obj = emitted.dir / f"{emitted.name}.m4.o"
    run([cc, *STRICT, *CORTEX_M4, "-Os", "-c", emitted.dir / f"{emitted.name}.c", "-o", obj])
    size = run([tool("arm-none-eabi-size"), obj]).stdout.split("\n")[1].split()
    text, data, bss = map(int, size[:3])
    assert text > 0 and data == 0 and bss == 0, f"{emitted.name}: mutable or static data"


@pytest.mark.parametrize("compiler", ["gcc", "clang", "arm-none-eabi-gcc"])
def test_every_helper_is_strict_c99(tmp_path, compiler):
    """All helpers a kernel may use, in one translation unit, warning-free."""
    texts, headers = [], {"math.h", "stddef.h", "stdint.h"}
    # the host-only ones: aligned heap storage, and the POSIX clock of a profiled kernel;
    # the Arm DSP ones have their own test
    for name in sorted(helpers.NAMES - {helpers.ALLOC, helpers.CLOCK} - helpers.DSP_HELPERS):
        try:
            text, needs = helpers.definition(name)
        except KeyError:  # a name reserved for a helper that does not exist
            continue
        texts.append(text)
        headers |= needs
    assert len(texts) > 20
    # the Arm DSP extension's, under their test (compiled where the target has it)
    dsp = [helpers.definition(n)[0] for n in sorted(helpers.DSP_HELPERS)]
    texts.append("\n".join([f"#if defined({helpers.DSP_FEATURE})", "#include <arm_acle.h>",
                            *dsp, "#endif", ""]))
    src = "".join(f"#include <{h}>\n" for h in sorted(headers)) + "\n" + "\n".join(texts)
    path = tmp_path / "helpers.c"
    path.write_text(src)
    target = CORTEX_M4 if compiler.startswith("arm") else ()
    run([tool(compiler), *STRICT, "-Wno-unused-function", *target, "-c", path, "-o",
         tmp_path / "helpers.o"])


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                HealthCheck.data_too_large])
@given(data=st.data())
def test_random_schedules_match_numpy(data):
    """Schedule invariance for standalone C: random pipelines x random schedules,
    built by gcc with ASan and UBSan around an exact workspace."""
    cc = tool("gcc")
    case = data.draw(pipelines(), label="pipeline")
    sched = data.draw(schedules(case), label="schedule")
    try:
        func = td.lower(sched, "random")
    except td.ScheduleError as e:
        assert any(m in str(e) for m in ALLOWED_REJECTIONS), f"unexpected rejection: {e}"
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        td.emit_c(sched, "random", out)
        want = td.evaluate(case.outputs[0], **case.arrays)
        sizes = bind_arguments(sched.pipeline, case.arrays).sizes
        e = Emitted("random", out, func, case.arrays, {case.outputs[0].name: want}, sizes, sched,
                    rtol=1e-4 if want.dtype == np.float32 else 1e-9)
        (out / "inputs.bin").write_bytes(b"".join(e.inputs[b.name].tobytes() for b in func.inputs))
        (out / "driver.c").write_text(driver_source(e))
        build_and_run(e, "asan", cc, SANITIZE, env=ASAN_ENV)


@pytest.mark.parametrize("how", ["plain", "cache_read", "cache_write", "rfactor"])
def test_buffers_inside_a_parallel_loop_share_one_slot(tmp_path, how):
    """Portable C of kernels whose scratch buffers host code allocates inside a parallel
    loop (plain here), several times over in the branches isl makes: one workspace slot
    per buffer, reused by every iteration, exact under ASan and UBSan."""
    if how == "plain":
        sched, out, arrays = three_stencils()
    else:
        sched, out, arrays, _ = three_stencils_restaged(how)
    func = td.lower(sched, "kernel")
    allocated = [s.buffer for s in walk_stmts(func.body) if isinstance(s, ir.Allocate)]
    layout = workspace_layout(func)
    assert len(allocated) > len(set(allocated))  # some buffer is allocated in several places
    # one slot per buffer, but for those of register size, which stay locals
    in_workspace = {b.name for b in allocated if not ir.register_sized(b)}
    assert sorted(slot.buffer.name for slot in layout.slots) == sorted(in_workspace)
    td.emit_c(sched, "kernel", tmp_path)
    e = Emitted("kernel", tmp_path, func, arrays, {out.name: td.evaluate(out, **arrays)}, {},
                sched)
    (tmp_path / "inputs.bin").write_bytes(b"".join(arrays[b.name].tobytes() for b in func.inputs))
    (tmp_path / "driver.c").write_text(driver_source(e))
    build_and_run(e, "asan", tool("gcc"), SANITIZE, env=ASAN_ENV)


# ---------------------------------------------------------------- the files


def test_source_uses_only_the_portable_subset(emitted):
    src = (emitted.dir / f"{emitted.name}.c").read_text()
    includes = set(re.findall(r"#include [<\"]([^>\"]+)[>\"]", src))
    assert includes <= {"stdint.h", "stddef.h", "math.h", f"{emitted.name}.h"}
    for banned in ("malloc", "free(", "#pragma", "__attribute__", "_Thread", "omp_", "tdsl_parallel_for", "static float",
                   "static int32_t", "__builtin"):
        assert banned not in src, banned
    assert ("math.h" in includes) == bool(re.search(r"\b(expf?|fmodf?|INFINITY|NAN)\b", src))


def test_header_documents_the_kernel(emitted):
    h = (emitted.dir / f"{emitted.name}.h").read_text()
    func, sched = emitted.func, emitted.schedule
    for b in (*func.inputs, *func.outputs):
        assert re.search(rf"^ \*   {b.name} +{b.kind} +{b.dtype.name} \({ctype(b.dtype)}\) \[",
                         h, re.M), b.name
    has_ws = workspace_layout(func) is not None
    assert bool(re.search(r"void \*workspace\s*\);", h)) == has_ws
    assert (f"size_t {emitted.name}_workspace_size(" in h) == has_ws
    text = h.split("reads it:\n", 1)[1].split("*/", 1)[0]
    text = "\n".join(line[3:] for line in text.splitlines())
    rebuilt = td.Schedule.from_json(text, sched.outputs)
    assert rebuilt.primitives == sched.primitives
    assert json.loads(text)["outputs"] == [o.name for o in sched.outputs]


def test_cli_emits_both_files(tmp_path, capsys):
    status = emit_c_command([f"{KERNELS}:blur", "--out", str(tmp_path), "--name", "blur3x3"])
    assert status == 0
    assert (tmp_path / "blur3x3.c").is_file() and (tmp_path / "blur3x3.h").is_file()
    assert "int blur3x3(" in (tmp_path / "blur3x3.h").read_text()
    assert "blur3x3.c" in capsys.readouterr().out


def test_subcommand_registers_on_the_tdsl_parser(tmp_path, capsys):
    """What tdsl/cli.py does with `add_emit_c_parser(sub)`."""
    p = argparse.ArgumentParser(prog="tdsl")
    add_emit_c_parser(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(["emit-c", f"{KERNELS}:qmatmul", "--out", str(tmp_path)])
    assert args.run(args, sys.stdout) == 0
    assert (tmp_path / "qmatmul.h").is_file() and "qmatmul.c" in capsys.readouterr().out


def test_cli_reports_mistakes(tmp_path, capsys):
    assert emit_c_command([f"{KERNELS}:nope", "--out", str(tmp_path)]) == 2
    assert "has no function 'nope'" in capsys.readouterr().err
    assert emit_c_command([f"{tmp_path}/missing.py:f", "--out", str(tmp_path)]) == 2
    assert "no Python file" in capsys.readouterr().err
    assert emit_c_command([f"{KERNELS}:blur", "--out", str(tmp_path), "--name", "2d"]) == 2
    assert "cannot name a C function" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["exp", "for", "a-b", "_x", "2d", ""])
def test_bad_kernel_names_are_refused(tmp_path, name):
    sched = load_function(f"{KERNELS}:matmul")()
    with pytest.raises(td.TdslError, match="cannot name a C function"):
        td.emit_c(sched, name, tmp_path)


def test_kernel_object_and_stages_are_accepted(tmp_path):
    sched = load_function(f"{KERNELS}:scale")()
    td.emit_c(td.build(sched), "from_kernel", tmp_path)
    td.emit_c(sched.outputs[0], "from_stage", tmp_path)
    assert "int from_kernel(" in (tmp_path / "from_kernel.h").read_text()
    assert "int from_stage(" in (tmp_path / "from_stage.h").read_text()


def test_example_makefile_reports_cortex_m4_size(tmp_path):
    tool("arm-none-eabi-gcc")
    make = tool("make")
    env = {**os.environ, "PYTHON": sys.executable}
    proc = run([make, "-C", EXAMPLES, f"BUILD={tmp_path}", "KERNEL=blur"], env=env)
    assert re.search(r"text\s+data\s+bss", proc.stdout), proc.stdout
    assert re.search(r"blur\.o", proc.stdout)




@pytest.mark.parametrize("isa", ["generic", "armv7e-m"])
def test_every_example_builds_freestanding_with_clang(tmp_path, isa):
    """No C library: clang for a bare Cortex-M4 finds only its own <stdint.h>,
    <stddef.h> and <arm_acle.h>, so a kernel includes <math.h> only where it calls libm
    (an infinity is written by its bits, not as INFINITY); every example compiles with
    -Werror, for both isas, and calls nothing of libm."""
    clang = tool("clang")
    from tdsl.emit import load_function as load

    kernels = load(f"{KERNELS}:matmul").__globals__["KERNELS"]
    for name, make in kernels.items():
        c, _ = td.emit_c(make(), name, tmp_path, isa=isa)
        assert "#include <math.h>" not in c.read_text(), name
        obj = tmp_path / f"{name}.o"
        run([clang, "--target=thumbv7em-none-eabi", *CORTEX_M4, "-ffreestanding", *STRICT,
             "-O2", "-I", tmp_path, "-c", c, "-o", obj])
        undefined = set(run([tool("arm-none-eabi-nm"), "-u", obj]).stdout.split())
        libm = {f"{f}{s}" for f in ("exp", "log", "sqrt", "fmod", "pow", "rint", "floor")
                for s in ("", "f")}
        assert not undefined & libm, (name, undefined & libm)


def test_portable_c_does_not_unroll_what_the_schedule_did_not_ask_for():
    """An inline reduction of at most 32 points is unrolled for host targets (straight
    code to vectorize); portable C keeps it a loop (code size counts on a small core),
    unless the schedule unrolls it."""
    from tdsl.lower import lower_schedule

    y, x, ky, kx = td.dims("y x ky kx")
    inp = td.input("inp", {y: 10, x: 12}, td.float32)
    out = td.compute("out", {y: 8, x: 10},
                     td.sum(inp[y + ky, x + kx], over={ky: 3, kx: 3}) * 0.5)
    sched = td.schedule(out)

    def kinds(func):
        return [s.kind for s in walk_stmts(func.body) if isinstance(s, ir.For)]

    host = td.lower(sched, trace=True)["convert"]
    assert kinds(host).count(ir.ForKind.UNROLLED) == 2
    portable = lower_schedule(sched, workspace=True, portable=True, trace=True)
    assert kinds(portable["convert"]) == [ir.ForKind.SERIAL] * 4
    assert len(kinds(portable.final)) == 4  # and they stay loops
