"""Portable C for embedded toolchains: `td.emit_c` and the `tdsl emit-c` command.

    td.emit_c(s, "blur", "out/")   # out/blur.c and out/blur.h

`NAME.c` is one C99 translation unit that includes only <stdint.h>,
<stddef.h>, <math.h> when it calls libm, and its own header; it has no heap,
no threads and no globals. Intermediates live in a caller-provided
workspace. `NAME.h` declares the entry point (and `NAME_workspace_size` when
there is a workspace) and documents every argument, the return codes, the
algorithm and the schedule as JSON, so the pair can be regenerated.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from . import dtypes as dt
from .api import as_schedule
from .backend_c import helpers
from .backend_c.checks import ERR_SIZES, ERR_WORKSPACE
from .backend_c.render import CSource, render_standalone
from .backend_c.workspace import bytes_macro
from .backend_c.writer import CWriter, sanitize
from .compute import expr as cx
from .compute.pipeline import Pipeline
from .compute.printer import show
from .errors import ArgumentError, TdslError
from .lower import ir, lower_schedule
from .lower.abi import INDEX_OUT_OF_RANGE
from .lower.passes.legalise import legalise_expr
from .lower.poly.statement_writer import index_expr
from .lower.printer import expr as ir_text
from .runtime import Kernel
from .schedule import Schedule


def emit_c(schedule, name: str, out_dir, isa: str = "generic") -> tuple[Path, Path]:
    """Write `out_dir/NAME.c` and `out_dir/NAME.h` for a schedule (or output
    stages, or a kernel from `td.build`); returns the two paths.

    `isa="armv7e-m"` lets int8 and int16 dot products use the Arm DSP extension
    (Cortex-M4, M7, M33: SMLAD after SXTB16, through ACLE's intrinsics from
    <arm_acle.h>), under `#if defined(__ARM_FEATURE_DSP)` with the plain C in the
    `#else`, so the file still builds for any target; `isa="generic"` (the default)
    writes plain C99 only."""
    sched = _schedule_of(schedule)
    _check_name(name)
    if isa not in ir.ISAS:
        raise ArgumentError(f"isa {isa!r} is not one tdsl emits C for; valid: "
                            f"{', '.join(repr(x) for x in ir.ISAS)}")
    func = lower_schedule(sched, name, workspace=True, portable=True, isa=isa)  # type: ignore[arg-type]
    conditions = extent_conditions(sched.pipeline)
    checks = tuple(ir.Compare(cond.op, legalise_expr(cond.a), legalise_expr(cond.b))
                   for cond, _ in conditions)
    c = render_standalone(func, checks, f"{name}.h")
    header = render_header(sched, func, c, [text for _, text in conditions])
    out = Path(out_dir)
    c_path, h_path = out / f"{name}.c", out / f"{name}.h"
    try:
        out.mkdir(parents=True, exist_ok=True)
        c_path.write_text(c.source, encoding="utf-8")
        h_path.write_text(header, encoding="utf-8")
    except OSError as e:
        raise ArgumentError(
            f"cannot write {name}.c and {name}.h into {out_dir}: {e.strerror or e}; give a "
            "directory that exists or can be created, and is writable") from None
    return c_path, h_path


def _schedule_of(s) -> Schedule:
    return s.schedule if isinstance(s, Kernel) else as_schedule(s)


def _check_name(name) -> None:
    reserved = CWriter(reserved=helpers.NAMES).reserved
    bad = not isinstance(name, str) or sanitize(name) != name or name.startswith("_")
    if bad or name in reserved or f"{name}_workspace_size" in reserved:
        raise ArgumentError(
            f"kernel name {name!r} cannot name a C function: use letters, digits and "
            "underscores, not starting with a digit or '_', and not a C keyword or "
            "library name (e.g. 'blur3x3')")


# ---------------------------------------------------------------- size checks


def extent_conditions(pipeline: Pipeline) -> list[tuple[ir.Compare, str]]:
    """Every extent that is an expression of sizes must be at least 1: the loop-IR
    condition and its text, once per distinct extent (a bare size is checked anyway)."""
    out: dict[ir.Compare, str] = {}
    for t in pipeline.tensors:
        for ext in t.shape:
            if isinstance(ext, (cx.Const, cx.Size)):
                continue
            cond = ir.Compare("ge", index_expr(ext, {}), ir.Const(1, dt.index))
            out.setdefault(cond, f"{show(ext)} >= 1")
    return list(out.items())


# ---------------------------------------------------------------- the header


def render_header(sched: Schedule, func: ir.LoweredFunc, c: CSource,
                  conditions: list[str]) -> str:
    """NAME.h: the documentation comment, then the declarations."""
    name = func.name
    guard = f"TDSL_{name.upper()}_H"
    doc = _doc(sched, func, c, conditions)
    comment = "/*" + "\n".join(f" * {line}".rstrip() for line in doc)[2:] + "\n */\n"
    decls = "\n".join(d.replace("*restrict ", "*") for d in c.declarations)
    if c.workspace is not None:
        sizes = tuple(v.name for v in func.sizes)
        decls += (f"\n\n/* The workspace's bytes at compile time (what {name}_workspace_size returns\n"
                  f"   for sizes {name} accepts), e.g. for a static buffer aligned to "
                  f"{c.workspace.align} bytes. */\n{bytes_macro(name, c.workspace, sizes)}")
    return (f"{comment}#ifndef {guard}\n#define {guard}\n\n"
            "#include <stddef.h>\n#include <stdint.h>\n\n"
            '#ifdef __cplusplus\nextern "C" {\n#endif\n\n'
            f"{decls}\n\n"
            f"#ifdef __cplusplus\n}}\n#endif\n\n#endif /* {guard} */\n")


def _doc(sched: Schedule, func: ir.LoweredFunc, c: CSource, conditions: list[str]) -> list[str]:
    name, pipeline = func.name, sched.pipeline
    lines = [f"{name}.h: generated by tdsl (portable C99); the code is in {name}.c.", ""]
    lines += [f"    {d}" for d in c.declarations for d in d.splitlines()]
    lines += ["", "Arrays are dense and row-major in the order of their dims (the last dim varies",
              "fastest), of exactly the C type shown; inputs and outputs must not overlap.", ""]
    width = max(len(t.name) for t in pipeline.tensors)
    for buf in (*func.inputs, *func.outputs):
        t = pipeline.by_name[buf.name]
        shape = ", ".join(f"{d.name}: {show(e)}" for d, e in zip(t.dims, t.shape))
        lines.append(f"  {t.name:<{width}}  {buf.kind:<6}  {t.dtype.name} "
                     f"({helpers.ctype(t.dtype)}) [{shape}]")
    if func.sizes:
        names = ", ".join(v.name for v in func.sizes)
        lines.append(f"  {names}  int64_t size{'s' if len(func.sizes) > 1 else ''}, "
                     "each in [1, INT32_MAX]")
    lines += _workspace_doc(func, c)
    lines += ["", *_returns(func, c, conditions), "", "Algorithm:"]
    lines += [f"    {s}" for s in _algorithm(pipeline)]
    outputs = ", ".join(o.name for o in pipeline.outputs)
    lines += ["", f"Schedule, as td.Schedule.from_json(text, [{outputs}]) reads it:"]
    lines += [f"    {s}" for s in _schedule_json(sched)]
    return lines


def _returns(func: ir.LoweredFunc, c: CSource, conditions: list[str]) -> list[str]:
    ws = c.workspace
    codes = ["0 on success, every output written;"]
    if func.sizes:
        why = "below 1 or above INT32_MAX"
        if conditions:  # each condition stays on one line
            why += ", or unless " + " and ".join(t.replace(" ", "\0") for t in conditions)
        if ws and ws.constant is None:
            why += ", or when the workspace would exceed PTRDIFF_MAX bytes"
        if func.index_limits:  # each bound stays on one line
            bounds = " and ".join(f"{_polynomial(p)}\0<=\0INT32_MAX" for p in func.index_limits)
            why += f", or unless {bounds} (a bound on its indices, which are 32-bit)"
        codes.append(f"{ERR_SIZES} when a size is invalid: {why};")
    if ws:
        codes.append(f"{ERR_WORKSPACE} when workspace is NULL or not aligned to {ws.align} bytes;")
    refusals = len(codes) - 1
    if func.status is not None:
        codes.append(f"{INDEX_OUT_OF_RANGE} when a data-dependent index was outside its array: that "
                     "access used the nearest element, and the outputs are written;")
    codes[-1] = codes[-1][:-1] + "."
    lines = ["Returns"]
    for code in codes:
        wrapped = textwrap.wrap(code, 84, initial_indent="  ", subsequent_indent="    ")
        lines += [line.replace("\0", " ") for line in wrapped]
    if refusals:
        lines.append(f"Nothing is written when the result is {ERR_SIZES}"
                     + (f" or {ERR_WORKSPACE}." if ws else "."))
    shared = " and workspace" if ws else ""
    lines += ["Calls share no state: concurrent calls are safe when each has its own",
              f"outputs{shared}."]
    return lines


def _polynomial(terms: tuple[tuple[int, tuple[str, ...]], ...]) -> str:
    """`17*H*W\0+\034*H` for an index limit (`LoweredFunc.index_limits`); \0 stands for a
    space where the text must not break."""
    parts = ["*".join(([str(c)] if c != 1 or not names else []) + list(names))
             for c, names in sorted(terms, key=lambda t: (-len(t[1]), t[1]))]
    return "\0+\0".join(parts)


def _workspace_doc(func: ir.LoweredFunc, c: CSource) -> list[str]:
    ws = c.workspace
    if ws is None:
        return []
    sizes = ", ".join(v.name for v in func.sizes)
    total = ws.constant if ws.constant is not None else f"{func.name}_workspace_size({sizes})"
    lines = [f"  workspace  {total} bytes ({func.name}_WORKSPACE_BYTES), aligned to {ws.align} bytes,",
             "             holding the intermediates (in slots reused at every iteration):"]
    for slot in ws.slots:
        b = slot.buffer
        shape = ", ".join(ir_text(e) for e in b.shape)
        lines.append(f"               {b.name} {b.dtype.name} [{shape}] at byte {ir_text(slot.offset)}")
    return lines


def _algorithm(pipeline: Pipeline) -> list[str]:
    out = []
    for s in pipeline.stages:
        out.append(f"{s.name}[{', '.join(d.name for d in s.dims)}] = {show(s.expr)}")
        out += [repr(u) for u in pipeline.updates_of(s)]
    return [line.replace("*/", "* /") for line in out]


def _schedule_json(sched: Schedule) -> list[str]:
    """`sched.to_json()` one primitive per line; `*/` is written `*\\/` (the same JSON)."""
    data = json.loads(sched.to_json())
    prims = data.pop("primitives")
    head = json.dumps(data)[:-1] + ', "primitives": ['
    body = [f" {json.dumps(p)}," for p in prims]
    if body:
        body[-1] = body[-1][:-1]
    lines = [head, *body, "]}"] if body else [head + "]}"]
    return [line.replace("*/", "*\\/") for line in lines]


# ---------------------------------------------------------------- command line

USAGE = "tdsl emit-c path/to/module.py:function --out DIR [--name NAME] [--isa ISA]"
DESCRIPTION = ("Write DIR/NAME.c and DIR/NAME.h: the schedule that FUNCTION returns as standalone "
               "C99 (no heap, no runtime) for embedded toolchains.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", metavar="MODULE:FUNCTION",
                   help="a Python file (or importable module) and a function in it that "
                        "returns a schedule, output stage(s) or a kernel")
    p.add_argument("--out", required=True, metavar="DIR", help="directory for NAME.c and NAME.h")
    p.add_argument("--name", default=None,
                   help="C name of the kernel and its files (default: the function's name)")
    p.add_argument("--isa", default="generic", choices=ir.ISAS,
                   help="instruction set the C may use beyond C99 under a preprocessor test: "
                        "armv7e-m for the Arm DSP extension's dot products (default: generic)")


def add_emit_c_parser(subparsers) -> argparse.ArgumentParser:
    """Register `emit-c` on a `tdsl` command parser's subparsers."""
    p = subparsers.add_parser("emit-c", help="write standalone C99 (NAME.c, NAME.h) for a schedule",
                              description=DESCRIPTION)
    add_arguments(p)
    p.set_defaults(run=lambda args, out: run(args, out))
    return p


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Emit the files; TdslError propagates (the caller reports it)."""
    fn = load_function(args.target)
    c_path, h_path = emit_c(fn(), args.name or fn.__name__, args.out, isa=args.isa)
    print(f"wrote {c_path} and {h_path}", file=out or sys.stdout)
    return 0


def emit_c_command(argv: Sequence[str] | None = None) -> int:
    """`tdsl emit-c ...` as a function: 0 on success, 2 when tdsl refuses the input."""
    p = argparse.ArgumentParser(prog="tdsl emit-c", usage=USAGE, description=DESCRIPTION)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except TdslError as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


def load_function(spec: str):
    """The function named by `path/to/module.py:function` or `package.module:function`."""
    where, sep, attr = spec.rpartition(":")
    if not sep or not where or not attr:
        raise TdslError(f"{spec!r} does not name a function; write {USAGE.split()[2]}")
    if where.endswith(".py") or "/" in where or "\\" in where:
        module = _load_file(Path(where))
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as e:
            raise TdslError(f"cannot import module {where!r}: {e}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise TdslError(f"{where} has no function {attr!r}; it has: {', '.join(found) or 'none'}")
    return fn


def _load_file(path: Path):
    if not path.is_file():
        raise TdslError(f"no Python file at {path}")
    spec = importlib.util.spec_from_file_location(f"tdsl_emit_{path.stem}", path)
    assert spec is not None and spec.loader is not None  # a .py file that exists has both
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.resolve().parent))  # so the file can import its neighbours
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.resolve().parent))
    return module

