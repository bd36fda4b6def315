"""Run C kernels bare-metal on emulated microcontrollers, check their outputs, count
their instructions.

Two targets, each with this directory's own start-up code, linker script and
semihosting (no board support package, no C library start-up):

    cortex-m4   arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfloat-abi=hard
                -mfpu=fpv4-sp-d16, run by qemu-system-arm -M mps2-an386
    rv32imc     riscv64-unknown-elf-gcc -march=rv32imc -mabi=ilp32 (picolibc's
                rv32im libraries), run by qemu-system-riscv32 -M virt -bios none

A `Program` is the kernel's sources, the arrays it reads and writes, and one C
statement that calls it. `build` writes a `main.c` around the call (the inputs
as constant arrays in flash, the outputs and the workspace as static arrays,
the call between two marker functions, the outputs printed in hex through
semihosting) and compiles every source to an object of its own (with
-fstack-usage) before linking. `run` runs the program under qemu with the
instruction-counting plugin (`insn_count.c`, built once against qemu 7.2's
plugin API) and reads the outputs back as numpy arrays.

    target = TARGETS["cortex-m4"]
    prog = Program("blur", (Path("out/blur.c"),), (Path("out"),),
                   (Array("inp", img), Array("out", np.zeros(...), output=True)),
                   call="status = blur(inp, out);", prelude='#include "blur.h"')
    result = run(build(prog, target, "-O2", Path("build")))
    result.outputs["out"], result.instructions

or, for a schedule, `kernel_program(sched, name, inputs, out_dir, isa)` emits it
and writes the call (and gives numpy's outputs to compare with).

Instruction counts are exact and the same at every run (qemu executes the same
instructions whatever the host's load), so they compare kernels reliably on a
shared machine, unlike times.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PLUGIN_SOURCE = HERE / "insn_count.c"


@dataclass(frozen=True)
class Target:
    """A core, its compiler and flags, and the emulator that runs it."""

    name: str
    cc: str
    tool_prefix: str  # of size, nm: arm-none-eabi-, riscv64-unknown-elf-
    cflags: tuple[str, ...]
    startup: tuple[str, ...]  # this directory's files linked into every program
    ldflags: tuple[str, ...]
    qemu: tuple[str, ...]
    thumb: bool  # function symbols have bit 0 set (Thumb); instructions do not
    apt: str  # the Debian packages with the toolchain and the emulator
    isa: str  # what td.emit_c may use for the core (its `isa` argument)

    @property
    def tools(self) -> tuple[str, ...]:
        """The commands the target needs."""
        return (self.cc, f"{self.tool_prefix}size", f"{self.tool_prefix}nm", self.qemu[0], "gcc")

    def missing(self) -> list[str]:
        """The commands of `tools` that are not installed."""
        return [t for t in self.tools if shutil.which(t) is None]


CORTEX_M4 = Target(
    name="cortex-m4",
    cc="arm-none-eabi-gcc",
    tool_prefix="arm-none-eabi-",
    cflags=("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"),
    startup=("startup_cortex_m4.c",),
    ldflags=("-nostartfiles", f"-T{HERE / 'cortex_m4.ld'}", "-Wl,--gc-sections", "-lc", "-lgcc"),
    qemu=("qemu-system-arm", "-M", "mps2-an386", "-nographic",
          "-semihosting-config", "enable=on,target=native"),
    thumb=True,
    apt="gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm",
    isa="armv7e-m",
)
RV32IMC = Target(
    name="rv32imc",
    cc="riscv64-unknown-elf-gcc",
    tool_prefix="riscv64-unknown-elf-",
    cflags=("-march=rv32imc", "-mabi=ilp32", "--specs=picolibc.specs"),
    startup=("startup_rv32.S", "runtime_rv32.c"),
    ldflags=("-nostartfiles", f"-T{HERE / 'rv32.ld'}", "-Wl,--gc-sections", "-lc", "-lgcc"),
    qemu=("qemu-system-riscv32", "-M", "virt", "-nographic", "-bios", "none",
          "-semihosting-config", "enable=on,target=native"),
    thumb=False,
    apt="gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf qemu-system-misc",
    isa="generic",
)
TARGETS = {t.name: t for t in (CORTEX_M4, RV32IMC)}

# flags for every object: C99, no warnings allowed, each function in its own section
# (so the link keeps only what is called and the map shows each function's size)
COMMON_FLAGS = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-ffunction-sections",
                "-fdata-sections", "-fstack-usage", "-fcallgraph-info=su")


class HarnessError(RuntimeError):
    """A build or a run failed: the command, its output."""


@dataclass(frozen=True)
class Array:
    """A C array of the program: an input (a constant initialised from `values`, in
    flash) or an output (`output=True`: static, zeroed, printed after the call; `values`
    gives its dtype and shape)."""

    name: str
    values: np.ndarray
    output: bool = False


@dataclass(frozen=True)
class Program:
    """Sources to link (each compiled with `cflags` besides the target's), the arrays
    `main.c` defines, and the C statements that call the kernel: they may declare
    locals and must set `int status` (0 for success). `prelude` is C placed before
    `main` (includes, parameter structs); `workspace`, when given, is a C constant
    expression of bytes (`NAME_WORKSPACE_BYTES`): that much 8-byte aligned static
    memory is available to the call as `workspace`."""

    name: str
    sources: tuple[Path, ...]
    include_dirs: tuple[Path, ...]
    arrays: tuple[Array, ...]
    call: str
    prelude: str = ""
    setup: str = ""  # statements run before the counted call (locals of main)
    workspace: str | None = None
    cflags: tuple[str, ...] = ()
    libraries: tuple[Path, ...] = ()  # static libraries linked after the objects


_CTYPES = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "uint16": "uint16_t",
           "int32": "int32_t", "uint32": "uint32_t", "int64": "int64_t", "uint64": "uint64_t",
           "float32": "float", "float64": "double", "float16": "uint16_t",
           "bfloat16": "uint16_t", "bool": "_Bool"}


def _ctype(a: np.ndarray) -> str:
    return _CTYPES[a.dtype.name]


def _initializer(a: np.ndarray) -> str:
    """The elements of `a` as a C initializer list (floats as the integers of their
    bits: `main_source` puts them in a union, so the values are exact)."""
    flat = a.reshape(-1)
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        bits = flat.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])
        items = [_int_literal(int(w), bits.dtype) for w in bits]
    elif a.dtype.kind == "b":
        items = ["1" if v else "0" for v in flat]
    else:
        items = [_int_literal(int(v), a.dtype) for v in flat]
    lines = [", ".join(items[k:k + 16]) for k in range(0, len(items), 16)]
    return "{\n    " + ",\n    ".join(lines) + "\n}"


def _int_literal(v: int, dtype: np.dtype) -> str:
    if dtype.itemsize == 8:
        if v == -(2**63):
            return "INT64_MIN"
        return f"INT64_C({v})" if dtype.kind == "i" else f"UINT64_C({v})"
    if dtype.kind == "i" and v == -(2**31):
        return "INT32_MIN"
    return f"{v}u" if dtype.kind == "u" and v > 2**31 - 1 else str(v)


MAIN_TEMPLATE = """\
/* {name}: generated by examples/embedded/baremetal/harness.py. */
#include <stdint.h>
#include <string.h>

#include "semihost.h"

{prelude}

{arrays}

/* The instructions between these two calls are what the counting plugin counts. */
__attribute__((noinline)) void tdsl_mark_begin(void) {{
    __asm__ volatile("" ::: "memory");
}}

__attribute__((noinline)) void tdsl_mark_end(void) {{
    __asm__ volatile("" ::: "memory");
}}

static void print_hex(const char *label, const void *data, uint32_t nbytes) {{
    static const char digits[] = "0123456789abcdef";
    char line[48 + 2 * 48 + 2];
    const unsigned char *p = data;
    uint32_t done = 0;
    do {{
        uint32_t n = 0, k = 0;
        while (label[n] != 0 && n < 47) {{
            line[n] = label[n];
            n++;
        }}
        line[n++] = ' ';
        for (; k < 48 && done < nbytes; k++, done++) {{
            line[n++] = digits[p[done] >> 4];
            line[n++] = digits[p[done] & 15];
        }}
        line[n++] = '\\n';
        line[n] = 0;
        semihost_puts(line);
    }} while (done < nbytes);
}}

static void print_int(const char *label, long value) {{
    char line[48];
    uint32_t n = 0;
    unsigned long v = value < 0 ? 0ul - (unsigned long)value : (unsigned long)value;
    char digits[24];
    uint32_t d = 0;
    while (label[n] != 0 && n < 20) {{
        line[n] = label[n];
        n++;
    }}
    line[n++] = ' ';
    if (value < 0) line[n++] = '-';
    do {{
        digits[d++] = (char)('0' + v % 10);
        v /= 10;
    }} while (v != 0);
    while (d > 0) line[n++] = digits[--d];
    line[n++] = '\\n';
    line[n] = 0;
    semihost_puts(line);
}}

int main(void) {{
    int status = -1;
{setup}
    tdsl_mark_begin();
    {{
{call}
    }}
    tdsl_mark_end();
    print_int("tdsl-status", status);
{prints}
    return status;
}}
"""


def main_source(prog: Program) -> str:
    """`main.c` of a program (see `Program`)."""
    arrays = []
    for a in prog.arrays:
        n = max(a.values.size, 1)
        t = _ctype(a.values)
        if a.output:
            arrays.append(f"static {t} {a.name}[{n}] __attribute__((aligned(8)));")
        elif a.values.dtype.kind == "f" and a.values.dtype.itemsize > 2:
            # a float input by its bits, read through a union (exact, whatever the parsing)
            bits = f"uint{8 * a.values.dtype.itemsize}_t"
            arrays.append(f"static const union {{ {bits} bits[{n}]; {t} values[{n}]; }} "
                          f"{a.name}_data __attribute__((aligned(8))) = "
                          f"{{{_initializer(a.values)}}};")
            arrays.append(f"#define {a.name} ({a.name}_data.values)")
        else:
            arrays.append(f"static const {t} {a.name}[{n}] __attribute__((aligned(8))) = "
                          f"{_initializer(a.values)};")
    if prog.workspace:
        arrays.append(f"static uint64_t workspace[({prog.workspace} + 7) / 8];")
    prints = [f'    print_hex("tdsl-out-{a.name}", {a.name}, {a.values.nbytes}u);'
              for a in prog.arrays if a.output]
    call = "\n".join(f"        {line}" if line else "" for line in prog.call.splitlines())
    setup = "\n".join(f"    {line}" if line else "" for line in prog.setup.splitlines())
    return MAIN_TEMPLATE.format(name=prog.name, prelude=prog.prelude, arrays="\n".join(arrays),
                                setup=setup, call=call, prints="\n".join(prints))


@dataclass
class Build:
    """A linked program: the ELF, the linker map, and per source its object."""

    program: Program
    target: Target
    opt: str
    elf: Path
    map: Path
    objects: dict[Path, Path] = field(default_factory=dict)  # source -> object


def _run(cmd: list[str | Path], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise HarnessError(f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n"
                           f"{proc.stdout}{proc.stderr}")
    return proc


def build(prog: Program, target: Target, opt: str, out: Path) -> Build:
    """Compile and link `prog` for `target` at optimisation level `opt` in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    main = out / "main.c"
    main.write_text(main_source(prog))
    incs = [f"-I{d}" for d in (HERE, *prog.include_dirs)]
    flags = [*COMMON_FLAGS, *target.cflags, opt, *incs]
    objects: dict[Path, Path] = {}
    for k, src in enumerate((*prog.sources, main)):
        obj = out / f"{k:02d}_{src.stem}.o"
        extra = list(prog.cflags) if src != main else []
        _run([target.cc, *flags, *extra, "-c", src, "-o", obj])
        objects[src] = obj
    startup = []
    for k, name in enumerate(target.startup):
        obj = out / f"startup{k}_{Path(name).stem}.o"
        _run([target.cc, *COMMON_FLAGS, *target.cflags, "-O2", f"-I{HERE}", "-c", HERE / name,
              "-o", obj])
        startup.append(obj)
    elf, mapfile = out / f"{prog.name}.elf", out / f"{prog.name}.map"
    _run([target.cc, *target.cflags, opt, *startup, *objects.values(), *prog.libraries,
          f"-Wl,-Map={mapfile}", *target.ldflags, "-o", elf])
    return Build(prog, target, opt, elf, mapfile, objects)


# ---------------------------------------------------------------- running


_PLUGIN_CACHE: dict[Path, Path] = {}


def plugin(build_dir: Path) -> Path:
    """The instruction-counting plugin, compiled with the host's gcc into `build_dir`
    (once per directory and process)."""
    so = build_dir / "insn_count.so"
    if build_dir not in _PLUGIN_CACHE or not so.exists():
        build_dir.mkdir(parents=True, exist_ok=True)
        _run(["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-o", so,
              PLUGIN_SOURCE])
        _PLUGIN_CACHE[build_dir] = so
    return so


def symbol(b: Build, name: str) -> int:
    """The address of a function of the program (its first instruction)."""
    out = _run([f"{b.target.tool_prefix}nm", b.elf]).stdout
    m = re.search(rf"^([0-9a-f]+) [Tt] {re.escape(name)}$", out, re.M)
    if m is None:
        raise HarnessError(f"no function {name} in {b.elf}")
    return int(m.group(1), 16) & ~1 if b.target.thumb else int(m.group(1), 16)


def data_size(b: Build, name: str) -> int:
    """The bytes of a static variable of the program."""
    out = _run([f"{b.target.tool_prefix}nm", "-S", b.elf]).stdout
    m = re.search(rf"^[0-9a-f]+ ([0-9a-f]+) [BbDdRr] {re.escape(name)}$", out, re.M)
    if m is None:
        raise HarnessError(f"no variable {name} in {b.elf}")
    return int(m.group(1), 16)


@dataclass
class Result:
    """What a run printed: the kernel's status, its outputs, the instructions counted
    between the markers."""

    status: int
    outputs: dict[str, np.ndarray]
    instructions: int
    stdout: str


def run(b: Build, timeout: float = 600) -> Result:
    """Run a built program under qemu with the counting plugin; its outputs and count."""
    so = plugin(b.elf.parent)
    begin, end = symbol(b, "tdsl_mark_begin"), symbol(b, "tdsl_mark_end")
    cmd = [*b.target.qemu, "-kernel", b.elf, "-plugin",
           f"{so},begin={begin:#x},end={end:#x}"]
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=timeout)
    # qemu prints semihosting output on its standard error (there is no chardev for
    # it), as the plugin does; read both
    out = proc.stdout + proc.stderr
    if "tdsl-fault" in out:
        raise HarnessError(f"{b.program.name} on {b.target.name} faulted:\n{out[-4000:]}")
    m = re.search(r"^tdsl-status (-?\d+)\r?$", out, re.M)
    counts = re.findall(r"^tdsl-insns (\d+)\r?$", out, re.M)
    if m is None or len(counts) != 1:
        raise HarnessError(f"{b.program.name} on {b.target.name} did not finish "
                           f"(qemu exited {proc.returncode}):\n{out[-4000:]}")
    status = int(m.group(1))
    if proc.returncode != (status & 0xFF):
        raise HarnessError(f"{b.program.name}: qemu exited {proc.returncode}, the program "
                           f"returned {status}")
    outputs = {}
    for a in b.program.arrays:
        if a.output:
            hexes = re.findall(rf"^tdsl-out-{re.escape(a.name)} ([0-9a-f]*)\r?$", out, re.M)
            data = bytes.fromhex("".join(hexes))
            if len(data) != a.values.nbytes:
                raise HarnessError(f"{a.name}: {len(data)} bytes printed, "
                                   f"{a.values.nbytes} expected")
            outputs[a.name] = np.frombuffer(data, a.values.dtype).reshape(a.values.shape)
    return Result(status, outputs, int(counts[0]), out)


# ---------------------------------------------------------------- measuring


@dataclass(frozen=True)
class CodeSize:
    """Bytes of code and constants (text), initialised data and zeroed data (bss)."""

    text: int
    data: int
    bss: int


_MAP_ENTRY = re.compile(r"^ (\.[\w.$]+)\s*\n?\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S+)$", re.M)


def linked_size(b: Build, objects: list[Path] | None = None,
                archives: list[Path] | None = None) -> CodeSize:
    """The bytes the link kept from `objects` (default: the program's first source)
    and from members of `archives`, by section kind, as the linker map lists them
    (functions the kernel does not reach are dropped by --gc-sections: not counted)."""
    objs = {str(o) for o in (objects if objects is not None
                             else [b.objects[b.program.sources[0]]])}
    arcs = [str(a) for a in archives or []]
    text = b.map.read_text()
    text = text[text.index("Linker script and memory map"):]
    sizes = {"text": 0, "data": 0, "bss": 0}
    for section, _, size, where in _MAP_ENTRY.findall(text):
        owner = where.split("(", 1)[0]
        if owner not in objs and owner not in arcs:
            continue
        kind = ("text" if section.startswith((".text", ".rodata", ".srodata")) else
                "data" if section.startswith((".data", ".sdata")) else
                "bss" if section.startswith((".bss", ".sbss")) else None)
        if kind is not None:
            sizes[kind] += int(size, 16)
    return CodeSize(**sizes)


def stack_usage(b: Build, entry: str, ci_dirs: list[Path] | None = None) -> int:
    """Bytes of stack function `entry` needs at most: its frame plus the deepest chain of
    frames below it, from the call graphs gcc writes with -fcallgraph-info=su (frame
    sizes as -fstack-usage reports them) for the program's objects and the objects in
    `ci_dirs`. A function outside them (the C library's memcpy, say) counts 0; a dynamic
    frame or a recursive call is an error."""
    frames: dict[str, int] = {}
    calls: dict[str, set[str]] = {}
    files = [o.with_suffix(".ci") for o in b.objects.values()]
    for d in ci_dirs or []:
        files += sorted(d.glob("*.ci"))
    for ci in files:
        text = ci.read_text()
        for title, label in re.findall(r'node: \{ title: "([^"]+)" label: "([^"]*)"', text):
            m = re.search(r"\\n(\d+) bytes \((\w+)", label)
            if m is None:
                continue  # declared, not defined here
            if m.group(2) == "dynamic":
                raise HarnessError(f"{title} has a dynamic stack frame")
            frames[title] = int(m.group(1))
        for a, z in re.findall(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"', text):
            calls.setdefault(a, set()).add(z)
    if entry not in frames:
        raise HarnessError(f"no function {entry} in the call graphs")

    def deepest(f: str, path: tuple[str, ...]) -> int:
        if f in path:
            raise HarnessError(f"{' -> '.join((*path, f))}: a recursive call")
        below = [deepest(g, (*path, f)) for g in calls.get(f, ())]
        return frames.get(f, 0) + max(below, default=0)

    return deepest(entry, ())


def library_calls(b: Build, sources: list[Path] | None = None) -> list[str]:
    """The functions the sources' objects call that they do not define (C library or
    compiler runtime: memcpy, __aeabi_ldivmod, ...)."""
    names: set[str] = set()
    for src in sources or [b.program.sources[0]]:
        out = _run([f"{b.target.tool_prefix}nm", "-u", b.objects[src]]).stdout
        names.update(line.split()[-1] for line in out.splitlines() if line.strip())
    return sorted(names)


# ---------------------------------------------------------------- tdsl kernels


def kernel_program(sched, name: str, inputs: dict[str, np.ndarray], out: Path,
                   isa: str = "generic"):
    """A `Program` that runs the schedule `sched` emitted as portable C (`td.emit_c`
    into `out`, for `isa`) on `inputs`, and the outputs numpy's reference gives
    (`td.evaluate`), by name, to compare the run's with."""
    import tdsl as td
    from tdsl.compute.binding import bind_arguments

    td.emit_c(sched, name, out, isa=isa)
    func = td.lower(sched, name)
    want = td.evaluate(sched.outputs, **inputs)
    want = want if isinstance(want, tuple) else (want,)
    expected = {o.name: w for o, w in zip(sched.outputs, want, strict=True)}
    sizes = bind_arguments(sched.pipeline, inputs).sizes
    arrays = [Array(b.name, inputs[b.name]) for b in func.inputs]
    arrays += [Array(b.name, np.zeros_like(expected[b.name]), output=True) for b in func.outputs]
    args = [b.name for b in (*func.inputs, *func.outputs)]
    size_args = [f"INT64_C({sizes[v.name]})" for v in func.sizes]
    args += size_args
    header = (out / f"{name}.h").read_text()
    workspace = None
    if f"{name}_WORKSPACE_BYTES" in header:
        symbolic = f"#define {name}_WORKSPACE_BYTES(" in header
        workspace = f"{name}_WORKSPACE_BYTES" + (f"({', '.join(size_args)})" if symbolic else "")
        args.append("workspace")
    prog = Program(name, (out / f"{name}.c",), (out,), tuple(arrays),
                   call=f"status = {name}({', '.join(args)});",
                   prelude=f'#include "{name}.h"', workspace=workspace)
    return prog, expected
