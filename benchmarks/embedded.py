"""embedded: tdsl's portable C on emulated microcontrollers: code, stack, memory, instructions.

    python benchmarks/embedded.py                     # every example kernel, both cores, -Os and -O2
    python benchmarks/embedded.py --kernels blur qmatmul --isas cortex-m4
    python benchmarks/embedded.py --readme examples/embedded/README.md   # rewrite its tables

Each kernel of examples/embedded/kernels.py is emitted with `td.emit_c`, linked
with the project's own start-up code (examples/embedded/baremetal/) and run
under qemu on an emulated Cortex-M4 (mps2-an386, arm-none-eabi-gcc, hard float)
and RV32IMC core (virt, riscv64-unknown-elf-gcc with picolibc), at -Os and -O2.
For each it reports:

    text, data, bss   bytes the link keeps from the kernel's object (its entry point
                      and the helpers it calls; gc-sections drops the rest)
    stack             bytes of stack at most (gcc -fstack-usage: the entry's frame and
                      the largest helper frame)
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
        "softmax": lambda: {"X": (3 * rng.standard_normal((8, 40))).astype(f32)},
        "qmatmul": lambda: {"A": rng.integers(-128, 128, (16, 32), dtype=np.int8),
                            "B": rng.integers(-128, 128, (32, 12), dtype=np.int8)},
        "scale": lambda: {"a": rng.integers(-32768, 32768, 256, dtype=np.int16),
                          "b": rng.integers(-32768, 32768, 256, dtype=np.int16)},
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


def measure(name: str, make: Callable, inputs: dict[str, np.ndarray], target, opt: str,
            work: Path) -> Row:
    """Emit, build, run and measure one kernel."""
    prog, want = harness.kernel_program(make(), name, inputs, work / "kernel")
    b = harness.build(prog, target, opt, work / f"{target.name}{opt}")
    result = harness.run(b)
    size = harness.linked_size(b)
    ws = harness.data_size(b, "workspace") if prog.workspace else 0
    check = compare(result.outputs, want) if result.status == 0 else f"status {result.status}"
    return Row(name, target.name, opt, size.text, size.data, size.bss,
               harness.stack_usage(b, name), ws, result.instructions, check)


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table."""
    head = ("| kernel | core | opt | text | data | bss | stack | workspace | instructions | check |\n"
            "|--------|------|-----|-----:|-----:|----:|------:|----------:|-------------:|-------|")
    lines = [head]
    for r in rows:
        lines.append(f"| `{r.kernel}` | {r.isa} | {r.opt} | {r.text:,} | {r.data} | {r.bss} | "
                     f"{r.stack} | {r.workspace:,} | {r.instructions:,} | {r.check} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernels", nargs="*", default=list(kernels.KERNELS),
                   help="example kernels to measure (default: all)")
    p.add_argument("--isas", nargs="*", default=list(harness.TARGETS),
                   help=f"cores (default: {' '.join(harness.TARGETS)})")
    p.add_argument("--opts", nargs="*", default=list(OPTS), help="optimisation levels")
    p.add_argument("--work", type=Path, default=None, help="build directory (default: a temp dir)")
    args = p.parse_args(argv)
    targets = []
    for isa in args.isas:
        t = harness.TARGETS[isa]
        missing = t.missing()
        if missing:
            print(f"{isa}: skipped, {', '.join(missing)} missing (apt-get install {t.apt})")
            continue
        targets.append(t)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        rows = []
        for name in args.kernels:
            inputs = _inputs(name, np.random.default_rng(0))
            for t in targets:
                for opt in args.opts:
                    rows.append(measure(name, kernels.KERNELS[name], inputs, t, opt,
                                        work / name))
    print(table(rows))
    return 0 if all(not r.check.startswith(("WRONG", "status")) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
