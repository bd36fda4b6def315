"""Portable C bare-metal: every example kernel on an emulated Cortex-M4 and RV32IMC core.

examples/embedded/baremetal/harness.py links each kernel `td.emit_c` writes with
the project's own start-up code, linker script and semihosting, runs it under
qemu-system-arm (mps2-an386) and qemu-system-riscv32 (virt), and reads the
outputs back: they must equal `td.evaluate` (exactly for integers, to rounding
for floats). The instruction counter (a qemu TCG plugin built here) is checked
for what benchmarks/embedded.py relies on: counts exact and repeatable.

A missing toolchain or emulator fails these tests when CI is set (.ci/run installs
them), and skips them with the apt command otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from test_emit_c import NAMES, TEST_KERNELS, _inputs

from tdsl.emit import load_function

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "embedded"
IN_CI = os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def _load_harness():
    spec = importlib.util.spec_from_file_location("tdsl_baremetal_harness",
                                                  EXAMPLES / "baremetal" / "harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


harness = _load_harness()


@pytest.fixture(params=list(harness.TARGETS))
def target(request):
    """Each emulated core in turn; its toolchain and emulator must be installed."""
    t = harness.TARGETS[request.param]
    missing = t.missing()
    if missing:
        why = f"{', '.join(missing)} missing for {t.name} (apt-get install {t.apt})"
        if IN_CI:
            pytest.fail(why)
        pytest.skip(why)
    return t


def check(name: str, got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert got.keys() == want.keys()
    for k, w in want.items():
        if w.dtype.kind == "f":
            np.testing.assert_allclose(got[k], w, rtol=1e-5, atol=1e-5, err_msg=f"{name}: {k}")
        else:
            np.testing.assert_array_equal(got[k], w, err_msg=f"{name}: {k}")


@pytest.mark.parametrize("name", NAMES)
def test_example_kernels_run_bare_metal(target, name, tmp_path):
    make = TEST_KERNELS.get(name) or load_function(f"{EXAMPLES / 'kernels.py'}:{name}")
    inputs = _inputs(name, np.random.default_rng(NAMES.index(name)))
    prog, want = harness.kernel_program(make(), name, inputs, tmp_path / "kernel", target.isa)
    opt = "-O2" if NAMES.index(name) % 2 else "-Os"  # both levels, half the builds
    result = harness.run(harness.build(prog, target, opt, tmp_path / "build"))
    assert result.status == 0
    check(name, result.outputs, want)
    assert result.instructions > 0


def _loop_program(n: int) -> object:
    """A program whose counted call runs a loop of `n` volatile stores (`n` read from a
    volatile, so the code is the same for every `n`)."""
    prelude = (f"static volatile int32_t sink, trips = {n};\n"
               "__attribute__((noinline)) static int spin(int32_t n) {\n"
               "    for (int32_t i = 0; i < n; i++) sink = i;\n"
               "    return 0;\n"
               "}\n")
    out = np.zeros(1, np.int32)
    return harness.Program(f"loop{n}", (), (), (harness.Array("out", out, output=True),),
                           call="status = spin(trips);\nout[0] = sink;", prelude=prelude)


def test_instruction_counts_are_exact_and_repeatable(target, tmp_path):
    """The count between the markers grows by the same amount for each 100 iterations
    (past the first, which may set the loop up), and the same build counts the same
    twice."""
    counts = []
    for n in (100, 200, 300):
        b = harness.build(_loop_program(n), target, "-O2", tmp_path / f"loop{n}")
        first, again = harness.run(b), harness.run(b)
        assert first.instructions == again.instructions
        assert first.outputs["out"][0] == n - 1
        counts.append(first.instructions)
    step = counts[1] - counts[0]
    assert step >= 200 and counts[2] - counts[1] == step  # a store, an add, a compare: >= 2


def test_a_fault_is_reported(target, tmp_path):
    """A kernel that faults stops the run with an error naming the fault, not a hang."""
    call = ("volatile uint32_t *bad = (volatile uint32_t *)(uintptr_t)0xFFFFFFF0u;\n"
            "out[0] = *bad;\nstatus = 0;")
    prog = harness.Program("fault", (), (), (harness.Array("out", np.zeros(1, np.uint32),
                                                           output=True),), call=call)
    b = harness.build(prog, target, "-O2", tmp_path / "fault")
    with pytest.raises(harness.HarnessError, match="fault"):
        harness.run(b, timeout=60)


def test_sizes_and_stack_are_measured(target, tmp_path):
    """What benchmarks/embedded.py reports: the kernel's own linked code and data, its
    stack from gcc's -fstack-usage, and the library functions it calls."""
    name = "qmatmul"
    make = load_function(f"{EXAMPLES / 'kernels.py'}:{name}")
    inputs = _inputs(name, np.random.default_rng(0))
    prog, _ = harness.kernel_program(make(), name, inputs, tmp_path / "kernel")
    b = harness.build(prog, target, "-Os", tmp_path / "build")
    size = harness.linked_size(b)
    assert 0 < size.text < 1024 and size.data == 0 and size.bss == 0
    assert 0 < harness.stack_usage(b, name) < 256
    assert harness.library_calls(b) == []


def _benchmark():
    spec = importlib.util.spec_from_file_location("tdsl_embedded_benchmark",
                                                  ROOT / "benchmarks" / "embedded.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["qmatmul", "blur_sliding", "fc_s8"])
def test_the_readme_tables_are_the_benchmarks(target, name, tmp_path):
    """examples/embedded/README.md's figures are what benchmarks/embedded.py measures
    (instructions are exact, so the rows match to the unit with the toolchains .ci/run
    installs): a row of each core at each level, re-measured here."""
    bench = _benchmark()
    readme = (EXAMPLES / "README.md").read_text()
    inputs = bench._inputs(name, np.random.default_rng(0))
    for opt in ("-Os", "-O2"):
        row, _, _ = bench.measure(name, bench.kernels.KERNELS[name], inputs, target, opt,
                                  tmp_path / opt)
        line = bench.table([row]).splitlines()[-1]
        assert line in readme, f"{line}\nis not in the README: run benchmarks/embedded.py --readme"


def test_readme_sections_are_replaced_between_their_markers():
    bench = _benchmark()
    text = "a\n<!-- embedded.py: x -->\nold\n<!-- /embedded.py: x -->\nb\n"
    assert bench.replace_section(text, "x", "new") == \
        "a\n<!-- embedded.py: x -->\nnew\n<!-- /embedded.py: x -->\nb\n"
    with pytest.raises(SystemExit, match="no section"):
        bench.replace_section(text, "y", "new")
    readme = (EXAMPLES / "README.md").read_text()
    for name in ("cmsis", "blur", "examples"):
        assert f"<!-- embedded.py: {name} -->" in readme
