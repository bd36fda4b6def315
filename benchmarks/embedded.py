"""embedded: tdsl's portable C on emulated microcontrollers: code, stack, memory, instructions.

    python benchmarks/embedded.py                     # everything, both cores, -Os and -O2
    python benchmarks/embedded.py --sections examples --kernels blur qmatmul --isas cortex-m4
    python benchmarks/embedded.py --readme examples/embedded/README.md   # rewrite its tables

Three sections. "cmsis": the quantized layers of kernels.py (int8 FC 256 -> 64,
3x3 conv 16x16x16 -> 16, 3x3 depthwise 32x32x16) against CMSIS-NN's functions on the
same data and parameters, outputs compared byte for byte. CMSIS-NN is never part of
the repository: the benchmark reads it from the git-ignored benchmarks/.cmsis-nn
(`git clone --depth 1 https://github.com/ARM-software/CMSIS-NN benchmarks/.cmsis-nn`)
and leaves its columns out, saying so, when it is not there. "blur": the uint8 blur
with a sliding window against the same algorithm without one. "examples": every
kernel of examples/embedded/kernels.py. With --readme the tables replace the marked
sections of examples/embedded/README.md: its figures are this script's, not typed.

Each kernel is emitted with `td.emit_c` (for the Cortex-M4 with isa="armv7e-m"), linked
with the project's own start-up code (examples/embedded/baremetal/) and run
under qemu on an emulated Cortex-M4 (mps2-an386, arm-none-eabi-gcc, hard float)
and RV32IMC core (virt, riscv64-unknown-elf-gcc with picolibc), at -Os and -O2.
For each it reports:

    text, data, bss   bytes the link keeps from the kernel's object (its entry point
                      and the helpers it calls; gc-sections drops the rest)
    stack             bytes of stack at most (gcc -fstack-usage and -fcallgraph-info:
                      the deepest chain of frames from the entry point)
    workspace         bytes of caller-provided memory (NAME_WORKSPACE_BYTES)
    instructions      executed from the call to its return (a qemu TCG plugin counting
                      between two marker functions; exact and repeatable, unlike times
                      on a shared machine)
    check             outputs against td.evaluate: "exact" (bit for bit), "close"
                      (floats, to 1e-5), or what differed

Every figure is deterministic: the same toolchains give the same table.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "embedded"
OPTS = ("-Os", "-O2")


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


harness = _load("tdsl_baremetal_harness", EXAMPLES / "baremetal" / "harness.py")
kernels = _load("tdsl_embedded_kernels", EXAMPLES / "kernels.py")


# ---------------------------------------------------------------- the example kernels


def _inputs(name: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Inputs of the sizes the README describes (symbolic sizes bound by them)."""
    f32 = np.float32
    return {
        "matmul": lambda: {"A": rng.uniform(-1, 1, (24, 20)).astype(f32),
                           "B": rng.uniform(-1, 1, (20, 28)).astype(f32)},
        "blur_root": lambda: {"inp": rng.random((48, 64), dtype=f32)},
        "blur": lambda: {"inp": rng.random((48, 64), dtype=f32)},
        "blur_sliding": lambda: {"inp": rng.integers(0, 256, (240, 320), dtype=np.uint8)},
        "softmax": lambda: {"X": (3 * rng.standard_normal((8, 40))).astype(f32)},
        "qmatmul": lambda: {"A": rng.integers(-128, 128, (16, 32), dtype=np.int8),
                            "B": rng.integers(-128, 128, (32, 12), dtype=np.int8)},
        "scale": lambda: {"a": rng.integers(-32768, 32768, 256, dtype=np.int16),
                          "b": rng.integers(-32768, 32768, 256, dtype=np.int16)},
        "avgpool_s8": lambda: {"input": rng.integers(-128, 128, (16, 16, 16), dtype=np.int8)},
        "maxpool_s8": lambda: {"input": rng.integers(-128, 128, (16, 16, 16), dtype=np.int8)},
        **{q.name: (lambda q=q: q.inputs) for q in layers()},
    }[name]()


@dataclass
class Row:
    """One kernel built for one core at one optimisation level, and what it measured."""

    kernel: str
    isa: str
    opt: str
    text: int
    data: int
    bss: int
    stack: int
    workspace: int
    instructions: int
    check: str


def compare(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> str:
    """'exact' when every output equals its reference bit for bit, 'close' when floats
    differ within 1e-5, else what differed."""
    verdict = "exact"
    for k, w in want.items():
        g = got[k]
        if g.shape == w.shape and np.array_equal(g.view(np.uint8), w.view(np.uint8)):
            continue
        if w.dtype.kind == "f" and np.allclose(g, w, rtol=1e-5, atol=1e-5):
            verdict = "close"
            continue
        bad = int(np.sum(g != w))
        return f"WRONG: {k} differs in {bad} of {w.size}"
    return verdict


def workspace_bytes(sched, name: str, inputs: dict[str, np.ndarray]) -> int:
    """The bytes of workspace the kernel asks for (NAME_WORKSPACE_BYTES) at these inputs."""
    from tdsl.backend_c.workspace import workspace_layout
    from tdsl.compute.binding import bind_arguments
    from tdsl.lower import lower_schedule
    from tdsl.lower.count import index_value

    layout = workspace_layout(lower_schedule(sched, name, workspace=True, portable=True))
    if layout is None:
        return 0
    return index_value(layout.total, bind_arguments(sched.pipeline, inputs).sizes)


def measure(name: str, make: Callable, inputs: dict[str, np.ndarray], target, opt: str,
            work: Path) -> tuple[Row, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Emit, build, run and measure one kernel: its row, its outputs and numpy's."""
    prog, want = harness.kernel_program(make(), name, inputs, work / f"kernel-{target.isa}",
                                        isa=target.isa)
    b = harness.build(prog, target, opt, work / f"{target.name}{opt}")
    result = harness.run(b)
    size = harness.linked_size(b)
    ws = workspace_bytes(make(), name, inputs)
    check = compare(result.outputs, want) if result.status == 0 else f"status {result.status}"
    row = Row(name, target.name, opt, size.text, size.data, size.bss,
              harness.stack_usage(b, name), ws, result.instructions, check)
    return row, result.outputs, want


# ---------------------------------------------------------------- CMSIS-NN

CMSIS_DIR = ROOT / "benchmarks" / ".cmsis-nn"  # git-ignored: never part of the repository
CMSIS_URL = "https://github.com/ARM-software/CMSIS-NN"
CMSIS_GET = f"git clone --depth 1 {CMSIS_URL} {CMSIS_DIR.relative_to(ROOT)}"
# the parts of CMSIS-NN the compared layers use (the link keeps what they call)
CMSIS_PARTS = ("ConvolutionFunctions", "FullyConnectedFunctions", "NNSupportFunctions",
               "PoolingFunctions")


def cmsis_version(root: Path) -> str:
    """The CMSIS-NN release the folder holds (git describe, or what was recorded at its
    extraction in .tdsl-version), else 'unknown version'."""
    recorded = root / ".tdsl-version"
    if recorded.exists():
        return recorded.read_text().strip()
    import subprocess

    proc = subprocess.run(["git", "-C", str(root), "describe", "--tags", "--always"],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else "unknown version"


def cmsis_library(root: Path, target, opt: str, work: Path) -> tuple[Path, Path]:
    """CMSIS-NN's sources (`CMSIS_PARTS`) compiled for `target` at `opt` with the same
    flags as tdsl's kernels, in a static library; (the library, the directory of its
    objects and their call graphs). Built once per directory."""
    import subprocess

    out = work / f"cmsis-{target.name}{opt}"
    lib = out / "libcmsisnn.a"
    if lib.exists():
        return lib, out
    out.mkdir(parents=True, exist_ok=True)
    objects = []
    for part in CMSIS_PARTS:
        for src in sorted((root / "Source" / part).glob("*.c")):
            if src.stem.endswith(("_f16", "_f32")):
                continue  # floating point layers, which need headers of their own
            obj = out / f"{src.stem}.o"
            cmd = [target.cc, *target.cflags, opt, "-ffunction-sections", "-fdata-sections",
                   "-fstack-usage", "-fcallgraph-info=su", f"-I{root / 'Include'}", "-c",
                   str(src), "-o", str(obj)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise harness.HarnessError(f"{' '.join(cmd)}:\n{proc.stderr}")
            objects.append(str(obj))
    subprocess.run([f"{target.tool_prefix}ar", "rcs", str(lib), *objects], check=True)
    return lib, out


# The layers compared with CMSIS-NN: the same data and parameters for both. Offsets and
# scales as a TFLite model would have them: inputs with zero point -128, outputs with
# zero point 3; per-channel multipliers in [2^30, 2^31) and shifts that keep the outputs
# spread over int8 rather than saturated.
INPUT_OFFSET, OUTPUT_OFFSET, ACT_MIN, ACT_MAX = 128, -3, -128, 127
FC_MULTIPLIER, FC_SHIFT = 1518500250, -12


@dataclass
class Layer:
    """A layer computed by a tdsl kernel and by a CMSIS-NN function."""

    name: str
    what: str
    schedule: Callable[[], object]
    inputs: dict[str, np.ndarray]
    cmsis_setup: str  # C: the parameter structs (static const), `need` = scratch bytes
    cmsis_call: str  # C: status = arm_...(...);
    extra: bool = False  # beyond the three layers of the issue: a table of their own


def _per_channel(rng: np.random.Generator, n: int, shift: int) -> dict[str, np.ndarray]:
    return {"multiplier": rng.integers(2**30, 2**31 - 1, n, dtype=np.int32),
            "shift": (shift + rng.integers(-1, 2, n)).astype(np.int32)}


def _activation() -> str:
    return f"{{{ACT_MIN}, {ACT_MAX}}}"


def layers() -> list[Layer]:
    """The three layers compared first: FC 256 -> 64, 3x3 conv 16x16x16 -> 16, 3x3
    depthwise 32x32x16; then 2x2 average and max pooling of 16x16x16 (`extra`)."""
    rng = np.random.default_rng(2024)
    i8 = np.int8

    def s8(*shape):
        return rng.integers(-128, 128, shape, dtype=i8)

    out = []
    fc = {"input": s8(256), "filter": s8(64, 256),
          "bias": rng.integers(-20000, 20000, 64, dtype=np.int32)}
    out.append(Layer(
        "fc_s8", "int8 fully connected 256 -> 64, per-tensor",
        lambda: kernels.fc_s8(256, 64, INPUT_OFFSET, OUTPUT_OFFSET, FC_MULTIPLIER, FC_SHIFT,
                              ACT_MIN, ACT_MAX), fc,
        cmsis_setup=f"""
static const cmsis_nn_fc_params fc = {{{INPUT_OFFSET}, 0, {OUTPUT_OFFSET}, {_activation()}}};
static const cmsis_nn_per_tensor_quant_params quant = {{{FC_MULTIPLIER}, {FC_SHIFT}}};
static const cmsis_nn_dims in_dims = {{1, 1, 1, 256}}, filter_dims = {{256, 1, 1, 64}};
static const cmsis_nn_dims bias_dims = {{1, 1, 1, 64}}, out_dims = {{1, 1, 1, 64}};
int32_t need = arm_fully_connected_s8_get_buffer_size(&filter_dims);
cmsis_nn_context ctx = {{cmsis_scratch, need}};""",
        cmsis_call="status = arm_fully_connected_s8(&ctx, &fc, &quant, &in_dims, input, "
                   "&filter_dims, filter, &bias_dims, bias, &out_dims, output);"))
    conv = {"input": s8(16, 16, 16), "filter": s8(16, 3, 3, 16),
            "bias": rng.integers(-20000, 20000, 16, dtype=np.int32), **_per_channel(rng, 16, -12)}
    out.append(Layer(
        "conv_s8", "int8 3x3 convolution 16x16x16 -> 16, padding 1, per-channel",
        lambda: kernels.conv_s8(16, 16, 16, 16, INPUT_OFFSET, OUTPUT_OFFSET, ACT_MIN, ACT_MAX),
        conv, cmsis_setup=f"""
static const cmsis_nn_conv_params conv = {{{INPUT_OFFSET}, {OUTPUT_OFFSET}, {{1, 1}}, {{1, 1}},
                                          {{1, 1}}, {_activation()}}};
static const cmsis_nn_per_channel_quant_params quant = {{(int32_t *)multiplier,
                                                        (int32_t *)shift}};
static const cmsis_nn_dims in_dims = {{1, 16, 16, 16}}, filter_dims = {{16, 3, 3, 16}};
static const cmsis_nn_dims bias_dims = {{1, 1, 1, 16}}, out_dims = {{1, 16, 16, 16}};
int32_t need = arm_convolve_wrapper_s8_get_buffer_size(&conv, &in_dims, &filter_dims,
                                                        &out_dims);
cmsis_nn_context ctx = {{cmsis_scratch, need}};""",
        cmsis_call="status = arm_convolve_wrapper_s8(&ctx, &conv, &quant, &in_dims, input, "
                   "&filter_dims, filter, &bias_dims, bias, &out_dims, output);"))
    dw = {"input": s8(32, 32, 16), "filter": s8(3, 3, 16),
          "bias": rng.integers(-5000, 5000, 16, dtype=np.int32), **_per_channel(rng, 16, -10)}
    out.append(Layer(
        "depthwise_s8", "int8 3x3 depthwise convolution 32x32x16, padding 1, per-channel",
        lambda: kernels.depthwise_s8(32, 32, 16, INPUT_OFFSET, OUTPUT_OFFSET, ACT_MIN,
                                     ACT_MAX),
        dw, cmsis_setup=f"""
static const cmsis_nn_dw_conv_params conv = {{{INPUT_OFFSET}, {OUTPUT_OFFSET}, 1, {{1, 1}},
                                             {{1, 1}}, {{1, 1}}, {_activation()}}};
static const cmsis_nn_per_channel_quant_params quant = {{(int32_t *)multiplier,
                                                        (int32_t *)shift}};
static const cmsis_nn_dims in_dims = {{1, 32, 32, 16}}, filter_dims = {{1, 3, 3, 16}};
static const cmsis_nn_dims bias_dims = {{1, 1, 1, 16}}, out_dims = {{1, 32, 32, 16}};
int32_t need = arm_depthwise_conv_wrapper_s8_get_buffer_size(&conv, &in_dims, &filter_dims,
                                                             &out_dims);
cmsis_nn_context ctx = {{cmsis_scratch, need}};""",
        cmsis_call="status = arm_depthwise_conv_wrapper_s8(&ctx, &conv, &quant, &in_dims, "
                   "input, &filter_dims, filter, &bias_dims, bias, &out_dims, output);"))
    pool_setup = f"""
static const cmsis_nn_pool_params pool = {{{{2, 2}}, {{0, 0}}, {_activation()}}};
static const cmsis_nn_dims in_dims = {{1, 16, 16, 16}}, filter_dims = {{1, 2, 2, 1}};
static const cmsis_nn_dims out_dims = {{1, 8, 8, 16}};"""
    for name, what, fn, size in (
            ("avgpool_s8", "int8 2x2 average pooling 16x16x16, stride 2", "arm_avgpool_s8",
             "arm_avgpool_s8_get_buffer_size(8, 16)"),
            ("maxpool_s8", "int8 2x2 max pooling 16x16x16, stride 2", "arm_max_pool_s8", "0")):
        out.append(Layer(
            name, what, lambda name=name: kernels.KERNELS[name](16, 16, 16, ACT_MIN, ACT_MAX),
            {"input": s8(16, 16, 16)},
            cmsis_setup=f"{pool_setup}\nint32_t need = {size};\n"
                        "cmsis_nn_context ctx = {cmsis_scratch, need};",
            cmsis_call=f"status = {fn}(&ctx, &pool, &in_dims, input, &filter_dims, &out_dims, "
                       "output);", extra=True))
    return out


CMSIS_SCRATCH = 16 * 1024  # bytes of static scratch memory offered to CMSIS-NN


@dataclass
class Comparison:
    """One layer on one core at one level: tdsl's row, CMSIS-NN's figures, and whether the
    two computed the same bytes."""

    layer: str
    isa: str
    opt: str
    tdsl: Row
    cmsis: Row | None
    same: bool | None


def measure_cmsis(layer: Layer, root: Path, target, opt: str, work: Path,
                  want: dict[str, np.ndarray]) -> tuple[Row, dict[str, np.ndarray]]:
    """Build and run CMSIS-NN's function for a layer; its row and outputs."""
    lib, objdir = cmsis_library(root, target, opt, work)
    arrays = [harness.Array(k, v) for k, v in layer.inputs.items()]
    arrays += [harness.Array(k, np.zeros_like(v), output=True) for k, v in want.items()]
    arrays.append(harness.Array("scratch_bytes", np.zeros(1, np.int32), output=True))
    setup = layer.cmsis_setup + f"""
if (need < 0 || need > {CMSIS_SCRATCH}) return 98;
scratch_bytes[0] = need;"""
    prog = harness.Program(
        f"cmsis_{layer.name}", (), (root / "Include",), tuple(arrays), call=layer.cmsis_call,
        prelude=f'#include "arm_nnfunctions.h"\n\nstatic int32_t cmsis_scratch[{CMSIS_SCRATCH // 4}];',
        setup=setup, libraries=(lib,))
    b = harness.build(prog, target, opt, work / f"cmsis_{layer.name}_{target.name}{opt}")
    result = harness.run(b)
    outs = {k: v for k, v in result.outputs.items() if k != "scratch_bytes"}
    size = harness.linked_size(b, objects=[], archives=[lib])
    entry = re.search(r"status = (\w+)\(", layer.cmsis_call).group(1)  # type: ignore[union-attr]
    row = Row(f"cmsis:{entry}", target.name, opt, size.text, size.data, size.bss,
              harness.stack_usage(b, entry, [objdir]),
              int(result.outputs["scratch_bytes"][0]), result.instructions,
              compare(outs, want) if result.status == 0 else f"status {result.status}")
    return row, outs


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table."""
    head = ("| kernel | core | opt | text | data | bss | stack | workspace | instructions | check |\n"
            "|--------|------|-----|-----:|-----:|----:|------:|----------:|-------------:|-------|")
    lines = [head]
    for r in rows:
        lines.append(f"| `{r.kernel}` | {r.isa} | {r.opt} | {r.text:,} | {r.data} | {r.bss} | "
                     f"{r.stack} | {r.workspace:,} | {r.instructions:,} | {r.check} |")
    return "\n".join(lines)


def comparison_table(comps: list[Comparison]) -> str:
    """tdsl against CMSIS-NN, one line per layer and level."""
    head = ("| layer | opt | instructions tdsl | CMSIS-NN | tdsl / CMSIS-NN | text tdsl | "
            "CMSIS-NN | stack tdsl | CMSIS-NN | RAM tdsl | CMSIS-NN | outputs |\n"
            "|-------|-----|------------------:|---------:|----------------:|----------:|"
            "---------:|-----------:|---------:|---------:|---------:|---------|")
    lines = [head]
    for c in comps:
        t, m = c.tdsl, c.cmsis
        if m is None:
            lines.append(f"| `{c.layer}` | {c.opt} | {t.instructions:,} | - | - | {t.text:,} | - "
                         f"| {t.stack} | - | {t.workspace:,} | - | {t.check} |")
            continue
        same = "bit-exact, equal" if c.same else "DIFFER"
        lines.append(f"| `{c.layer}` | {c.opt} | {t.instructions:,} | {m.instructions:,} | "
                     f"{t.instructions / m.instructions:.2f} | {t.text:,} | {m.text:,} | "
                     f"{t.stack} | {m.stack} | {t.workspace:,} | {m.workspace:,} | {same} |")
    return "\n".join(lines)


def compare_with_cmsis(targets, opts, work: Path, out) -> tuple[str, bool]:
    """The layers on each core and level, tdsl and CMSIS-NN (when present); the section's
    text and whether everything agreed."""
    root = CMSIS_DIR if (CMSIS_DIR / "Include" / "arm_nnfunctions.h").exists() else None
    lines = []
    if root is None:
        lines.append(f"CMSIS-NN: not found in {CMSIS_DIR.relative_to(ROOT)} (it is never part of "
                     f"the repository); get it with\n\n    {CMSIS_GET}\n\nThe CMSIS-NN "
                     "columns are left out.")
    else:
        lines.append(f"CMSIS-NN {cmsis_version(root)} ({CMSIS_URL}), from "
                     f"{CMSIS_DIR.relative_to(ROOT)}, built with the same compiler and flags.")
    ok = True
    for target in targets:
        comps: list[Comparison] = []
        extras: list[Comparison] = []
        for layer in layers():
            for opt in opts:
                here = work / layer.name
                row, got, want = measure(layer.name, layer.schedule, layer.inputs, target, opt,
                                         here)
                ok &= row.check == "exact"
                cm, same = None, None
                if root is not None:
                    cm, theirs = measure_cmsis(layer, root, target, opt, here, want)
                    same = all(np.array_equal(got[k], theirs[k]) for k in want)
                    ok &= same and cm.check == "exact"
                (extras if layer.extra else comps).append(
                    Comparison(layer.name, target.name, opt, row, cm, same))
                print(f"  {layer.name} {target.name} {opt}: tdsl {row.instructions:,}"
                      + (f", CMSIS-NN {cm.instructions:,}" if cm else ""), file=out)
        lines.append(f"\nOn the emulated {target.name}:\n\n{comparison_table(comps)}")
        lines.append(f"\nPooling, on the same core:\n\n{comparison_table(extras)}")
    return "\n".join(lines), ok


# ---------------------------------------------------------------- the sliding window


def blur_variants() -> dict[str, object]:
    """The 240x320 uint8 blur of kernels.py (blur_sliding) and two schedules of the same
    algorithm to compare it with: bx per output row without store_root (its three rows
    recomputed for each row), and bx whole (at the root)."""
    sliding = kernels.blur_sliding()
    plain = sliding.primitives[:-1]  # without store_root
    import tdsl as td

    outs = sliding.outputs
    return {"compute_at(bx, by, y), store_root(bx)": sliding,
            "compute_at(bx, by, y)": td.schedule(outs, plain),
            "bx at the root": td.schedule(outs)}


def blur_section(targets, opts, work: Path, out) -> tuple[str, bool]:
    """The blur with and without a sliding window: bx values computed (counted by running
    the loop nest), workspace, instructions per core and level, outputs on every target."""
    import tdsl as td
    from tdsl.lower import lower_schedule
    from tdsl.lower.count import count_stores

    inputs = _inputs("blur_sliding", np.random.default_rng(0))
    want = td.evaluate(kernels.blur_sliding().outputs[0], **inputs)
    head = ("| schedule | bx values computed | workspace (bytes) | "
            + " | ".join(f"instructions {t.name} {o}" for t in targets for o in opts)
            + " | outputs |")
    lines = [head, "|" + "---|" * (4 + len(targets) * len(opts))]
    ok = True
    for label, sched in blur_variants().items():
        func = lower_schedule(sched, "blur", workspace=True, portable=True)
        computed = count_stores(func, "bx", {})
        counts, checks = [], []
        for backend in ("c", "llvm"):
            got = td.build(sched, target=backend)(**inputs)
            checks.append(f"{'host C' if backend == 'c' else 'LLVM'} "
                          f"{'exact' if np.array_equal(got, want) else 'WRONG'}")
        ws = 0
        for t in targets:
            tchecks = set()
            for opt in opts:
                row, _, _ = measure("blur_sliding", lambda s=sched: s, inputs, t, opt,
                                    work / f"blur-{len(lines)}")
                ws = row.workspace
                counts.append(f"{row.instructions:,}")
                tchecks.add(row.check)
                print(f"  blur [{label}] {t.name} {opt}: {row.instructions:,}", file=out)
            checks.append(f"{t.name} {'/'.join(sorted(tchecks))}")
        ok &= all("WRONG" not in c and "status" not in c for c in checks)
        lines.append(f"| `{label}` | {computed:,} | {ws:,} | {' | '.join(counts)} | "
                     f"{', '.join(checks)} |")
    text = ("A 3x3 box blur of a 240 x 320 uint8 image (sums in uint16, divided by 9): bx, the "
            "sum of three pixels of a row, is 240 x 318 = 76,320 values.\n\n" + "\n".join(lines))
    return text, ok


# ---------------------------------------------------------------- the README


def replace_section(text: str, name: str, body: str) -> str:
    """`text` with what lies between `<!-- embedded.py: NAME -->` and
    `<!-- /embedded.py: NAME -->` replaced by `body` (an error if the markers are not there)."""
    start, end = f"<!-- embedded.py: {name} -->", f"<!-- /embedded.py: {name} -->"
    a, b = text.find(start), text.find(end)
    if a < 0 or b < a:
        raise SystemExit(f"the README has no section {start} ... {end}")
    return text[:a + len(start)] + "\n" + body.strip() + "\n" + text[b:]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sections", nargs="*", default=["cmsis", "blur", "examples"],
                   choices=["cmsis", "blur", "examples"], help="what to measure (default: all)")
    p.add_argument("--kernels", nargs="*", default=list(kernels.KERNELS),
                   help="example kernels to measure (default: all)")
    p.add_argument("--isas", nargs="*", default=list(harness.TARGETS),
                   help=f"cores (default: {' '.join(harness.TARGETS)})")
    p.add_argument("--cmsis-isas", nargs="*", default=["cortex-m4"],
                   help="cores for the CMSIS-NN comparison (default: cortex-m4)")
    p.add_argument("--opts", nargs="*", default=list(OPTS), help="optimisation levels")
    p.add_argument("--work", type=Path, default=None, help="build directory (default: a temp dir)")
    p.add_argument("--readme", type=Path, default=None,
                   help="write the tables into this README's marked sections too")
    args = p.parse_args(argv)

    def available(isas):
        found = []
        for isa in isas:
            t = harness.TARGETS[isa]
            missing = t.missing()
            if missing:
                print(f"{isa}: skipped, {', '.join(missing)} missing (apt-get install {t.apt})")
            else:
                found.append(t)
        return found

    ok = True
    sections: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        if "cmsis" in args.sections:
            text, good = compare_with_cmsis(available(args.cmsis_isas), args.opts,
                                            work / "cmsis", sys.stderr)
            ok &= good
            sections["cmsis"] = text
        if "blur" in args.sections:
            text, good = blur_section(available(args.isas), args.opts, work / "blur", sys.stderr)
            ok &= good
            sections["blur"] = text
        if "examples" in args.sections:
            rows = []
            targets = available(args.isas)
            for name in args.kernels:
                inputs = _inputs(name, np.random.default_rng(0))
                for t in targets:
                    for opt in args.opts:
                        rows.append(measure(name, kernels.KERNELS[name], inputs, t, opt,
                                            work / "examples" / name)[0])
                        print(f"  {name} {t.name} {opt}: {rows[-1].instructions:,}",
                              file=sys.stderr)
            ok &= all(not r.check.startswith(("WRONG", "status")) for r in rows)
            sections["examples"] = table(rows)
    titles = {"cmsis": "tdsl against CMSIS-NN", "blur": "The blur's sliding window",
              "examples": "The example kernels"}
    for name, text in sections.items():
        print(f"## {titles[name]}\n\n{text}\n")
    if args.readme is not None:
        readme = args.readme.read_text()
        for name, text in sections.items():
            readme = replace_section(readme, name, text)
        args.readme.write_text(readme)
        print(f"wrote the sections {', '.join(sections)} into {args.readme}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
