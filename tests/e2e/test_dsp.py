"""The dsp pass: int8/int16 dot products on the Arm DSP extension (td.emit_c isa="armv7e-m").

Each pattern (lanes sharing a quad or pair, a chain into one accumulator, a quad of
lane-consecutive bytes, a saturating clamp) is checked for what it becomes in the
loop IR, and the emitted C for what it computes: the DSP branch on an emulated
Cortex-M4 (bare-metal) and on 32-bit Arm Linux (qemu-arm: ARMv7-A has the
instructions too), the plain branch on the host, all against td.evaluate.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_baremetal import harness
from test_baremetal import target as target  # noqa: F401 - the fixture
from test_emit_c import (
    ASAN_ENV,
    EXAMPLES,
    SANITIZE,
    STRICT,
    Emitted,
    build_and_run,
    driver_source,
    tool,
)

import tdsl as td
from tdsl.compute.binding import bind_arguments
from tdsl.emit import emit_c_command, load_function
from tdsl.lower import ir, lower_schedule
from tdsl.lower.passes.verify import VerifyError, verify
from tdsl.lower.rewrite import stmt_exprs, walk_exprs, walk_stmts


def _portable(sched, isa="armv7e-m") -> ir.LoweredFunc:
    return lower_schedule(sched, "k", workspace=True, portable=True, isa=isa)


def _calls(func: ir.LoweredFunc) -> dict[str, int]:
    found: dict[str, int] = {}
    for s in walk_stmts(func.body):
        for top in stmt_exprs(s):
            for e in walk_exprs(top):
                if isinstance(e, ir.Call) and e.fn in ir.DSP_CALLS:
                    found[e.fn] = found.get(e.fn, 0) + 1
                if isinstance(e, ir.PackedLoad):
                    found["packed"] = found.get("packed", 0) + 1
    return found


def _features(func: ir.LoweredFunc) -> int:
    return sum(isinstance(s, ir.IfFeature) for s in walk_stmts(func.body))


def _kernel(name: str) -> td.Schedule:
    return load_function(f"{EXAMPLES / 'kernels.py'}:{name}")()


# ---------------------------------------------------------------- kernels of each pattern


def dot_i16(n: int = 64) -> td.Schedule:
    """A chain: int16 pairs into one accumulator, the reduction unrolled by 2."""
    i, k = td.dims("i k")
    a = td.input("a", {i: 3, k: n}, td.int16)
    b = td.input("b", {k: n}, td.int16)
    out = td.compute("out", {i: 3}, td.sum(td.cast(a[i, k], td.int32) * td.cast(b[k], td.int32),
                                           over=k))
    return td.schedule(out).split(out, k, 2).unroll(out, "k_i")


def dot_u8_s8(n: int = 32, m: int = 8) -> td.Schedule:
    """Lanes: uint8 inputs with an offset shared by 4 outputs, int8 weights."""
    o, k = td.dims("o k")
    x = td.input("x", {k: n}, td.uint8)
    w = td.input("w", {o: m, k: n}, td.int8)
    acc = td.compute("acc", {o: m}, td.sum((td.cast(x[k], td.int32) - 100)
                                           * td.cast(w[o, k], td.int32), over=k))
    out = td.compute("out", {o: m}, acc[o] * 2)
    return (td.schedule(out).split(out, o, 4).unroll(out, "o_i").compute_at(acc, out, "o_o")
            .split(acc, k, 4).reorder(acc, "k_o k_i o").unroll(acc, "k_i").vectorize(acc, "o"))


def pairs_i16(n: int = 16, m: int = 6) -> td.Schedule:
    """Lanes of int16 pairs: 6 outputs share each pair of x."""
    o, k = td.dims("o k")
    x = td.input("x", {k: n}, td.int16)
    w = td.input("w", {o: m, k: n}, td.int16)
    acc = td.compute("acc", {o: m}, td.sum(td.cast(x[k], td.int32) * td.cast(w[o, k], td.int32),
                                           over=k))
    out = td.compute("out", {o: m}, acc[o] + 1)
    return (td.schedule(out).split(out, o, 6).compute_at(acc, out, "o_o")
            .split(acc, k, 2).reorder(acc, "k_o k_i o").unroll(acc, "k_i").vectorize(acc, "o"))


SCHEDULES = {"fc_s8": lambda: _kernel("fc_s8"), "conv_s8": lambda: _kernel("conv_s8"),
             "depthwise_s8": lambda: _kernel("depthwise_s8"), "dot_i16": dot_i16,
             "dot_u8_s8": dot_u8_s8, "pairs_i16": pairs_i16}


def _inputs(name: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)

    def s8(*shape):
        a = rng.integers(-128, 128, shape, dtype=np.int8)
        a.reshape(-1)[:2] = (-128, 127)
        return a

    def s16(*shape):
        a = rng.integers(-32768, 32768, shape, dtype=np.int16)
        a.reshape(-1)[:3] = (-32768, -32768, 32767)
        return a

    per_channel = {"bias": rng.integers(-20000, 20000, 16, dtype=np.int32),
                   "multiplier": rng.integers(2**30, 2**31 - 1, 16, dtype=np.int32),
                   "shift": rng.integers(-13, -9, 16).astype(np.int32)}
    return {
        "fc_s8": lambda: {"input": s8(256), "filter": s8(64, 256),
                          "bias": rng.integers(-20000, 20000, 64, dtype=np.int32)},
        "conv_s8": lambda: {"input": s8(16, 16, 16), "filter": s8(16, 3, 3, 16), **per_channel},
        "depthwise_s8": lambda: {"input": s8(32, 32, 16), "filter": s8(3, 3, 16), **per_channel},
        "dot_i16": lambda: {"a": s16(3, 64), "b": s16(64)[::-1].copy()},
        "dot_u8_s8": lambda: {"x": rng.integers(0, 256, 32, dtype=np.uint8), "w": s8(8, 32)},
        "pairs_i16": lambda: {"x": s16(16), "w": s16(6, 16)},
    }[name]()


EXPECTED = {  # what each kernel's products become
    "fc_s8": {"smlad", "sxtab16", "sxtab16_ror8", "sxtb16", "sxtb16_ror8", "packed", "ssat"},
    "conv_s8": {"smlad", "sxtab16", "sxtab16_ror8", "sxtb16", "sxtb16_ror8", "packed", "ssat"},
    "depthwise_s8": {"smlabb", "smlatt", "sxtab16", "sxtab16_ror8", "sxtb16", "sxtb16_ror8",
                     "packed", "ssat"},
    "dot_i16": {"smlad", "packed"},
    "dot_u8_s8": {"smlad", "uxtab16", "uxtab16_ror8", "sxtb16", "sxtb16_ror8", "packed"},
    "pairs_i16": {"smlad", "packed"},
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_patterns_become_dsp_operations(name):
    sched = SCHEDULES[name]()
    func = _portable(sched)
    assert set(_calls(func)) == EXPECTED[name], str(func)
    assert _features(func) > 0
    generic = _portable(sched, "generic")
    assert _calls(generic) == {} and _features(generic) == 0
    assert _calls(td.lower(sched)) == {}  # host C: never


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_dsp_branch_on_cortex_m4_matches_numpy(name, target, tmp_path):
    """Bare-metal: the Cortex-M4 build takes the DSP branch (armv7e-m); the RV32IMC one,
    for the same file, the plain one."""
    inputs = _inputs(name)
    prog, want = harness.kernel_program(SCHEDULES[name](), name, inputs, tmp_path / "k",
                                        isa="armv7e-m")
    for opt in ("-Os", "-O2"):
        r = harness.run(harness.build(prog, target, opt, tmp_path / opt))
        assert r.status == 0
        for k, w in want.items():
            np.testing.assert_array_equal(r.outputs[k], w, err_msg=f"{name} {target.name} {opt}")


@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("where", ["host", "arm-linux"])
def test_the_same_file_builds_anywhere(name, where, tmp_path):
    """The file emitted for armv7e-m on the host (the plain branch, with ASan and UBSan)
    and on 32-bit Arm Linux under qemu-arm (ARMv7-A: the DSP branch, with gcc's inline
    assembly): numpy's answer both ways."""
    sched = SCHEDULES[name]()
    td.emit_c(sched, name, tmp_path, isa="armv7e-m")
    inputs = _inputs(name)
    ref = td.evaluate(sched.outputs, **inputs)
    ref = ref if isinstance(ref, tuple) else (ref,)
    expected = {o.name: r for o, r in zip(sched.outputs, ref)}
    e = Emitted(name, tmp_path, td.lower(sched, name), inputs, expected,
                bind_arguments(sched.pipeline, inputs).sizes, sched)
    (tmp_path / "inputs.bin").write_bytes(b"".join(inputs[b.name].tobytes() for b in e.func.inputs))
    (tmp_path / "driver.c").write_text(driver_source(e))
    if where == "host":
        build_and_run(e, "asan", tool("gcc"), SANITIZE, env=ASAN_ENV)
    else:
        cc = tool("arm-linux-gnueabihf-gcc")
        build_and_run(e, "qemu", cc, (*STRICT, "-O2", "-static"), runner=(tool("qemu-arm"),))


def test_dsp_operations_outside_their_test_are_refused():
    from dataclasses import replace

    from tdsl.lower.rewrite import Rewriter

    class Unguard(Rewriter):  # the DSP branch without its test
        def stmt(self, s):
            return s.then if isinstance(s, ir.IfFeature) else None

    func = _portable(dot_i16())
    verify(func)
    with pytest.raises(VerifyError, match="outside the first branch of an IfFeature"):
        verify(replace(func, body=Unguard().visit(func.body)))
    with pytest.raises(VerifyError, match="a test for arm_dsp in a function for isa 'generic'"):
        verify(replace(func, isa="generic"))


def test_isa_is_checked_and_reaches_the_command_line(tmp_path, capsys):
    with pytest.raises(td.ArgumentError, match="isa 'armv8' is not one tdsl emits C for"):
        td.emit_c(dot_i16(), "k", tmp_path, isa="armv8")
    kernels = EXAMPLES / "kernels.py"
    assert emit_c_command([f"{kernels}:fc_s8", "--out", str(tmp_path), "--isa", "armv7e-m"]) == 0
    src = (tmp_path / "fc_s8.c").read_text()
    assert "#if defined(__ARM_FEATURE_DSP)\n#include <arm_acle.h>" in src
    assert "dsp_smlad(" in src and "#else" in src
    assert emit_c_command([f"{kernels}:fc_s8", "--out", str(tmp_path / "g")]) == 0
    assert "arm_acle" not in (tmp_path / "g" / "fc_s8.c").read_text()


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_dsp_file_compiles_for_m4_with_clang_and_gcc(name, tmp_path):
    """Both compilers' routes through the helpers: gcc's inline assembly, clang's ACLE."""
    td.emit_c(SCHEDULES[name](), name, tmp_path, isa="armv7e-m")
    src = tmp_path / f"{name}.c"
    cortex = ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16")
    import subprocess

    for cmd in ([tool("arm-none-eabi-gcc"), *STRICT, *cortex, "-O2", "-c", src],
                [tool("clang"), "--target=thumbv7em-none-eabi", "-ffreestanding", *STRICT,
                 *cortex, "-O2", "-c", src]):
        proc = subprocess.run([*map(str, cmd), "-I", str(tmp_path), "-o",
                               str(tmp_path / "k.o")], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_lanes_over_register_sized_temps_are_written_out():
    """Portable C writes a vectorized loop of at most 8 lanes over a block of
    accumulators out lane by lane (its compiler keeps them in registers only with
    constant indices); host C keeps the loop, and so does portable C for a loop over
    a buffer in the workspace."""
    def vector_loops(func):
        return [s.var for s in walk_stmts(func.body)
                if isinstance(s, ir.For) and s.kind is ir.ForKind.VECTORIZED]

    sched = _kernel("fc_s8")
    assert vector_loops(_portable(sched, "generic")) == []
    assert vector_loops(td.lower(sched))
    blur = _kernel("blur")  # its vectorized loop reads bx, a workspace slot
    assert vector_loops(_portable(blur, "generic"))
