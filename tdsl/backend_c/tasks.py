"""Parallel loops as tasks of the thread pool, in host C: the body of a parallel loop
(`ir.Task`, from the outline pass) a static function of its own with `restrict` pointer
parameters (`Outline`), called once per iteration by the task's function, which runs a
chunk of iterations and reads what the body needs from an environment struct the
kernel fills; the kernel calls `abi.PARALLEL_FOR` with both. Each function takes the
renderer writing the file (`render._Renderer`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..lower.abi import OUT_OF_MEMORY
from ..lower.ir import Buffer, For
from . import helpers
from .helpers import ctype
from .writer import CWriter, prototype

if TYPE_CHECKING:
    from .render import _Renderer


@dataclass
class Region:
    """Code that runs on one thread: the function body or a parallel loop's body."""

    parallel: bool
    live: list[str] = field(default_factory=list)  # heap temporaries to free on failure


@dataclass
class Outline:
    """A parallel loop's body being written as a function of its own (host C).

    A task's function reads the kernel's pointers from its environment struct, and
    pointers read from a struct lose `restrict`: gcc must then assume a store to an
    output may change an input, and keeps every intermediate store of a sum
    accumulated in the output (a depthwise convolution stored its vector ten times
    per tap row, when gcc's OpenMP lowering did the same). So the body is a static
    function whose pointer parameters are `restrict`, called once per iteration by
    the task's function (and inlined by gcc, which keeps the restrict information).
    Its parameters are the task's values and buffers (`ir.Task`); the names it
    finds in scopes below `boundary` must be among them (`allowed`)."""

    boundary: int  # scopes at this level and deeper belong to the function
    allowed: frozenset[tuple[str, str]]  # ("var" | "buf", name) the task captures


def task(r: _Renderer, s: For) -> None:
    """Parallel loop `s` as a call of the thread pool (`abi.PARALLEL_FOR`) with its
    task's function and environment (`ir.Task`); that function calls the body's
    (`Outline`) once per iteration. Their text goes before the entry point."""
    task = s.task
    if task is None:
        raise ValueError(f"parallel loop {s.var} of {r.func.name} has no task (targets "
                         "take loop IR through tdsl.lower.finish, whose outline pass "
                         "makes one)")
    w = r.w
    values = [(v, r.name_of("var", v.name)) for v in task.values]
    buffers = [(b, r.name_of("buf", b.name)) for b in task.buffers]
    start, end = r.expr(s.start), r.expr(s.end)
    body_fn = w.fresh(f"{r.name}_{s.var}_body", level=0)
    task_fn = w.fresh(f"{r.name}_{task.name}_task", level=0)
    env_type = w.fresh(f"{r.name}_{task.name}_env", level=0)
    var, body = _task_body(r, s, values, buffers)
    params = [f"int64_t {var}"] + [f"{ctype(v.dtype)} {c}" for v, c in values] + [
        f"{_pointer(r, b)} *restrict {c}" for b, c in buffers]
    returns = "static int" if task.fails else "static void"
    header = prototype(body_fn, ", ".join(params), returns=returns)
    r.tasks.append("\n".join([f"{header} {{", *body, "}", ""]))
    r.tasks.append(_task_function(r, task, var, values, buffers,
                                  (body_fn, task_fn, env_type)))
    r.use_helper(helpers.PARALLEL_FOR)
    w.open("")
    env = "NULL"
    if values or buffers:
        env = w.fresh(f"{task.name}_env")
        fields = ", ".join(c for _, c in values + buffers)
        w.line(f"struct {env_type} {env} = {{{fields}}};")
        env = f"&{env}"
    run = f"{helpers.PARALLEL_FOR}({task_fn}, {env}, {start}, {end})"
    if task.fails:
        w.open(f"if ({run} != 0)")
        r.unwind(r.regions[-1])
        w.line(f"return {OUT_OF_MEMORY};")
        w.close()
    else:
        w.line(f"{run};")
    w.close()


def _task_body(r: _Renderer, s: For, values: list, buffers: list) -> tuple[str, list[str]]:
    """(the loop variable's C name, the lines of the body's function, unindented
    but for the function's own level)."""
    w, task = r.w, s.task
    assert task is not None
    start, depth = len(w.lines), w.depth
    allowed = frozenset([("var", v.name) for v, _ in values]
                        + [("buf", b.name) for b, _ in buffers])
    saved = r.outline, r.in_parallel
    with w.scope():
        w.depth += 1
        var = w.bind(("var", s.var), s.var)
        r.ctypes[(("var", s.var), var)] = "int64_t"
        r.outline, r.in_parallel = Outline(w.level, allowed), True
        r.regions.append(Region(parallel=True))
        try:
            r.stmt(s.body)
            if task.fails:
                w.line("return 0;")
        finally:
            r.regions.pop()
            r.outline, r.in_parallel = saved
            w.depth -= 1
    body = [line[len(w.INDENT) * depth:] if line else line for line in w.lines[start:]]
    del w.lines[start:]
    return var, body


def _task_function(r: _Renderer, task, var: str, values: list, buffers: list,
                   names: tuple[str, str, str]) -> str:
    """The task's environment struct and its function `int F(lo, hi, env)`, which
    runs iterations [lo, hi) and returns 1 when one of them failed."""
    body_fn, task_fn, env_type = names
    taken = {c for _, c in values + buffers} | {var, *names}
    own = CWriter(reserved=helpers.NAMES | taken)
    lo, hi, arg, env = (own.fresh(x) for x in ("lo", "hi", "arg", "env"))
    i = CWriter.INDENT
    lines = []
    if values or buffers:
        lines.append(f"struct {env_type} {{")
        lines += [f"{i}{ctype(v.dtype)} {c};" for v, c in values]
        lines += [f"{i}{_pointer(r, b)} *{c};" for b, c in buffers]
        lines += ["};", ""]
    lines.append(f"static int {task_fn}(int64_t {lo}, int64_t {hi}, void *{arg}) {{")
    if values or buffers:
        lines.append(f"{i}const struct {env_type} *{env} = {arg};")
        lines += [f"{i}const {ctype(v.dtype)} {c} = {env}->{c};" for v, c in values]
        lines += [f"{i}{_pointer(r, b)} *restrict {c} = {env}->{c};" for b, c in buffers]
    else:
        lines.append(f"{i}(void){arg};")
    lines.append(f"{i}for (int64_t {var} = {lo}; {var} < {hi}; {var}++) {{")
    call_ = f"{body_fn}({', '.join([var] + [c for _, c in values + buffers])})"
    if task.fails:
        lines += [f"{i * 2}if ({call_} != 0) {{", f"{i * 3}return 1;", f"{i * 2}}}"]
    else:
        lines.append(f"{i * 2}{call_};")
    lines += [f"{i}}}", f"{i}return 0;", "}", ""]
    return "\n".join(lines)


def _pointer(r: _Renderer, buf: Buffer) -> str:
    """The element type a pointer to `buf` has: `const` for an input."""
    return f"{'const ' if buf.kind == 'input' else ''}{ctype(buf.dtype)}"
