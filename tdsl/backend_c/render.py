"""Loop IR to C source text: `render(func, flavour)` and `signature(func)`.

The entry point is

    int NAME(const T *restrict in1, ..., T *restrict out1, ..., int64_t size1, ...)

with inputs, outputs and sizes in the `LoweredFunc`'s order. It returns 0 on
success and 1 when temporary storage cannot be allocated; it then frees what
it had allocated and never returns from inside an OpenMP parallel region (a
failing parallel iteration sets a shared status and skips the rest of
itself; the status is checked after the loop).

Flavours: "host" (C11, OpenMP pragmas, GCC extensions, heap temporaries) and
"portable" (C99, no pragmas or extensions; temporaries that do not fit on the
stack are refused). `standalone.render_standalone` builds on the portable
flavour for embedded targets: every temporary in a caller-provided workspace,
size arguments checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..lower.abi import OUT_OF_MEMORY, may_fail
from ..lower.ir import (
    Allocate,
    Block,
    Const,
    For,
    ForKind,
    If,
    Let,
    LoweredFunc,
    Stmt,
    Storage,
    Store,
    constant_elements,
)
from ..lower.rewrite import walk_stmts
from . import helpers
from .expr import ExprEmitter, element_count
from .helpers import ctype
from .writer import CWriter, atom, binary


@dataclass(frozen=True, slots=True)
class Flavour:
    name: str
    openmp: bool  # parallel and simd pragmas
    gnu: bool  # GCC extensions: unroll pragma, aligned attribute
    heap: bool  # temporaries too large for the stack are malloc'ed


FLAVOURS = {
    "host": Flavour("host", openmp=True, gnu=True, heap=True),
    "portable": Flavour("portable", openmp=False, gnu=False, heap=False),
}


# Host C is compiled at -O3, whose loop vectorizer (gcc 12 with AVX-512) miscompiles
# some loops tdsl never asked to vectorize: outer loops whose inner loops it unrolled
# completely. Vectorized loops are `#pragma omp simd` loops; every other loop with a
# loop of at most SHORT_LOOP iterations inside (one gcc may unroll completely) starts
# with this statement, which keeps the loop vectorizer out of it and costs nothing at
# run time. Other loops are left to the compiler (it vectorizes and interchanges
# unscheduled loop nests).
SCALAR_LOOP = "TDSL_SCALAR_LOOP"
SHORT_LOOP = 32
_SCALAR_LOOP_DEFINITION = (
    "/* A loop with a short loop inside that the schedule does not vectorize stays out of\n"
    "   the loop vectorizer, which does not touch a loop containing an asm statement. */\n"
    f"#define {SCALAR_LOOP} __asm__ __volatile__(\"\")\n"
)
_HEADER_ORDER = ("math.h", "stddef.h", "stdint.h", "stdlib.h")


def render(func: LoweredFunc, flavour: str = "host") -> str:
    """The C source of `func` as one translation unit."""
    if flavour not in FLAVOURS:
        raise ValueError(f"unknown C flavour {flavour!r}; valid: {', '.join(FLAVOURS)}")
    return _Renderer(func, FLAVOURS[flavour]).run()


def signature(func: LoweredFunc) -> str:
    """The entry point's prototype, e.g. for cffi's `cdef`."""
    w = CWriter(reserved=helpers.NAMES)
    name = entry_name(func, w)
    return f"int {name}({_bind_params(func, w)});"


def entry_name(func: LoweredFunc, w: CWriter | None = None) -> str:
    """The C name of `func`'s entry point (its IR name made a valid, free identifier)."""
    return (w or CWriter(reserved=helpers.NAMES)).fresh(func.name)


def _bind_params(func: LoweredFunc, w: CWriter) -> str:
    params = []
    for buf in func.inputs:
        params.append(f"const {ctype(buf.dtype)} *restrict {w.bind(('buf', buf.name), buf.name)}")
    for buf in func.outputs:
        params.append(f"{ctype(buf.dtype)} *restrict {w.bind(('buf', buf.name), buf.name)}")
    for var in func.sizes:
        params.append(f"int64_t {w.bind(('var', var.name), var.name)}")
    return ", ".join(params) or "void"


def _header(name: str, params: str, width: int = 100) -> str:
    """`int name(params)`, one parameter per line when that is too long."""
    line = f"int {name}({params})"
    if len(line) + 2 <= width:
        return line
    indent = CWriter.INDENT
    return f"int {name}(\n{indent}" + f",\n{indent}".join(params.split(", ")) + "\n)"


def _short(s: Stmt) -> bool:
    """A loop of at most SHORT_LOOP iterations (a constant bound on its trip count)."""
    if not isinstance(s, For):
        return False
    if isinstance(s.start, Const) and isinstance(s.end, Const):
        return int(s.end.value) - int(s.start.value) <= SHORT_LOOP
    return s.max_extent is not None and s.max_extent <= SHORT_LOOP


@dataclass
class _Region:
    """Code that runs on one thread: the function body or a parallel loop's body."""

    parallel: bool
    var: str = ""  # the parallel loop's variable
    live: list[str] = field(default_factory=list)  # heap temporaries to free on failure
    loops: int = 0  # serial loops entered inside the region (so `continue` would not do)
    end_label: str | None = None  # end of the parallel iteration, once a failure needs it


class _Renderer:
    def __init__(self, func: LoweredFunc, flavour: Flavour):
        self.func = func
        self.flavour = flavour
        self.w = CWriter(reserved=helpers.NAMES)
        self.headers: set[str] = {"stdint.h"}
        self.helpers: dict[str, None] = {}  # ordered set
        self.expr = ExprEmitter(self._name_of, self._use_helper, self.headers.add)
        self.regions = [_Region(parallel=False)]
        self.in_parallel = False
        self.in_simd = False
        self.status: str | None = None
        self.scalar_loops = False  # a loop was kept out of the loop vectorizer
        self.labels: set[str] = set()

    # ------------------------------------------------------------ file

    def run(self) -> str:
        w = self.w
        name = self.name = entry_name(self.func, w)
        with w.scope():
            w.open(_header(name, _bind_params(self.func, w)))
            self.body_level = w.level
            first = len(w.lines)
            self.stmt(self.func.body)
            w.line("return 0;")
            w.close()
        if self.status is not None:
            w.lines.insert(first, f"{w.INDENT}int {self.status} = 0;")
        return self._assemble(w.text())

    def _assemble(self, body: str) -> str:
        parts = [f"/* {self.name}: generated by tdsl ({self.flavour.name} C). */\n"]
        for h in self.helpers:
            self.headers |= helpers.definition(h)[1]
        includes = [f"#include <{h}>\n" for h in _HEADER_ORDER if h in self.headers]
        parts.append("".join(includes))
        if self.scalar_loops:
            parts.append(_SCALAR_LOOP_DEFINITION)
        parts.extend(helpers.definition(h)[0] for h in self.helpers)
        parts.append(body)
        return "\n".join(parts)

    def _use_helper(self, name: str) -> None:
        self.helpers.setdefault(name, None)

    def _name_of(self, kind: str, name: str) -> str:
        found = self.w.lookup((kind, name))
        if found is None:
            what = "buffer" if kind == "buf" else "variable"
            raise ValueError(f"loop IR of {self.func.name} uses {what} {name!r} outside its scope")
        return found

    # ------------------------------------------------------------ statements

    def stmt(self, s: Stmt) -> None:
        match s:
            case Block(stmts):
                for child in stmts:
                    self.stmt(child)
            case Store(buffer, indices, value):
                self.w.line(f"{self.expr.element(buffer, indices)} = {self.expr(value)};")
            case For():
                self.loop(s)
            case If():
                self.branch(s)
            case Let(name, value, body):
                text = self.expr(value)
                with self.w.binding(("var", name), name) as c:
                    self.w.line(f"const {ctype(value.dtype)} {c} = {text};")
                    self.stmt(body)
            case Allocate():
                self.allocate(s)
            case _:
                raise TypeError(f"not a loop-IR statement: {s!r}")

    def branch(self, s: If) -> None:
        w = self.w
        w.open(f"if ({self.expr(s.cond)})")
        self.stmt(s.then)
        other = s.else_
        while isinstance(other, If):
            w.middle(f"}} else if ({self.expr(other.cond)}) {{")
            self.stmt(other.then)
            other = other.else_
        if other is not None:
            w.middle("} else {")
            self.stmt(other)
        w.close()

    def loop(self, s: For) -> None:
        w = self.w
        start, end = self.expr(s.start), self.expr(s.end)
        pragma, parallel, simd = self._pragma(s)
        region = self.regions[-1]
        with w.scope():
            v = w.bind(("var", s.var), s.var)
            if pragma:
                w.line(pragma)
            w.open(f"for (int64_t {v} = {start}; {binary('<', atom(v), end)}; {v}++)")
            if self._scalar(s, simd):
                self.scalar_loops = True
                w.line(f"{SCALAR_LOOP};")
            saved = self.in_parallel, self.in_simd
            if parallel:
                self.regions.append(_Region(parallel=True, var=v))
                self.in_parallel = True
            else:
                region.loops += 1
            self.in_simd = self.in_simd or simd
            self.stmt(s.body)
            self.in_parallel, self.in_simd = saved
            if parallel:
                inner = self.regions.pop()
                if inner.end_label:
                    w.line(f"{inner.end_label}: ;")
            else:
                region.loops -= 1
            w.close()
        if parallel and self._may_fail(s.body):
            w.open(f"if ({self._status()} != 0)")
            self._unwind(region)
            w.line(f"return {OUT_OF_MEMORY};")
            w.close()

    def _scalar(self, s: For, simd: bool) -> bool:
        """Whether loop `s` is kept out of the C compiler's loop vectorizer: a host loop
        with a short loop inside, unless it is vectorized, inside a vectorized loop, or
        to be unrolled."""
        return (self.flavour.gnu and not (simd or self.in_simd)
                and s.kind not in (ForKind.VECTORIZED, ForKind.UNROLLED)
                and any(_short(x) for x in walk_stmts(s.body)))

    def _pragma(self, s: For) -> tuple[str | None, bool, bool]:
        """(pragma line, starts a parallel region, starts a simd region).

        Parallel loops nested in a parallel or simd loop run serially, and a
        loop whose body may fail to allocate is not a simd loop (it must be
        able to leave an iteration early)."""
        fl = self.flavour
        if s.kind is ForKind.PARALLEL and fl.openmp and not (self.in_parallel or self.in_simd):
            return "#pragma omp parallel for schedule(static)", True, False
        if s.kind is ForKind.VECTORIZED and fl.openmp and not self.in_simd:
            if not self._may_fail(s.body):
                return "#pragma omp simd", False, True
        if s.kind is ForKind.UNROLLED and fl.gnu and s.max_extent:
            return f"#pragma GCC unroll {min(s.max_extent, 65534)}", False, False
        return None, False, False

    # ------------------------------------------------------------ temporaries

    def allocate(self, s: Allocate) -> None:
        buf, w = s.buffer, self.w
        t = ctype(buf.dtype)
        if s.storage is Storage.STACK:
            count = constant_elements(buf)
            assert count is not None, f"{buf.name} is on the stack without a constant size"
            align = " __attribute__((aligned(64)))" if self.flavour.gnu else ""
            with w.binding(("buf", buf.name), buf.name) as name:
                w.line(f"{t} {name}[{max(count, 1)}]{align};")
                self.stmt(s.body)
            return
        if s.storage is not Storage.HEAP or not self.flavour.heap:
            raise ValueError(
                f"temporary {buf.name} needs symbolic or large storage: the "
                f"{self.flavour.name} C flavour has no heap; render_standalone (td.emit_c) "
                "places temporaries in a caller-provided workspace"
            )
        self._use_helper(helpers.ALLOC)
        size = self.expr(element_count(buf.shape))
        region = self.regions[-1]
        with w.binding(("buf", buf.name), buf.name) as name:
            w.line(f"{t} *restrict {name} = {helpers.ALLOC}({size}, sizeof({t}));")
            w.open(f"if ({name} == NULL)")
            self._fail()
            w.close()
            region.live.append(name)
            self.stmt(s.body)
            region.live.pop()
            w.line(f"free({name});")

    def _fail(self) -> None:
        """Leave after an allocation failed: free this region's temporaries, then
        return 1, or in a parallel iteration record the failure and skip the rest."""
        w, region = self.w, self.regions[-1]
        self._unwind(region)
        if not region.parallel:
            w.line(f"return {OUT_OF_MEMORY};")
            return
        w.line("#pragma omp atomic write")
        w.line(f"{self._status()} = 1;")
        if region.loops == 0:
            w.line("continue;")
            return
        if region.end_label is None:
            region.end_label = self._label(f"next_{region.var}")
        w.line(f"goto {region.end_label};")

    def _unwind(self, region: _Region) -> None:
        for name in reversed(region.live):
            self.w.line(f"free({name});")

    def _status(self) -> str:
        if self.status is None:
            self.status = self.w.bind(("status",), "status", level=self.body_level)
        return self.status

    def _label(self, hint: str) -> str:
        name, n = hint, 0
        while name in self.labels:
            n += 1
            name = f"{hint}_{n}"
        self.labels.add(name)
        return name

    def _may_fail(self, s: Stmt) -> bool:
        return may_fail(s)
