"""Loop IR to C source text: one renderer, two flavours.

`render(func, flavour)` gives the C source of a `LoweredFunc`, `signature(func)`
its host prototype, `render_standalone(func, requires, header)` the portable
source with the declarations a header needs. The entry point is

    int NAME(const T *restrict in1, ..., T *restrict out1, ..., int64_t size1, ...)

with inputs, outputs and sizes in the `LoweredFunc`'s order. A flavour
(`Flavour`) is data: what differs between the two C files tdsl writes.

- "host" (`HOST`): C11 that tdsl compiles and loads itself; OpenMP simd pragmas,
  GCC extensions, temporaries on the stack or the heap. A parallel loop runs on
  tdsl's thread pool as the outline pass made it a task (`ir.Task`): its body is a
  static function of its own with `restrict` pointer parameters (`tasks.py`),
  called once per iteration by the task's function, which runs a chunk of
  iterations and reads what the body needs from an environment struct the kernel
  fills; the kernel calls `abi.PARALLEL_FOR` with both. The kernel returns 0, or
  `abi.OUT_OF_MEMORY` when a heap temporary cannot be allocated, unwinding as
  `lower.abi` states: it frees what it had allocated (a failing parallel iteration
  frees its own and returns 1 from its chunk; the pool starts no chunk after it and
  reports it; the kernel then unwinds around the loop).
- "portable" (`PORTABLE`, `td.emit_c`): one C99 translation unit with no
  pragmas, extensions, heap or runtime; parallel and vectorized loops are plain
  loops. Temporaries live in a slot of a caller-provided workspace
  (`workspace.py`), the last parameter `void *workspace`, present only when
  there are any (or on the stack, for IR lowered without a workspace). The
  entry point is named exactly as the kernel and first checks its size
  arguments: each size in [1, INT32_MAX], every condition in `requires`
  (comparisons of sizes, such as a derived extent being at least 1) and a
  workspace that fits in the address space; it returns ERR_SIZES when one
  fails and ERR_WORKSPACE when the workspace is NULL or not aligned for its
  widest element, before touching any array (`checks.py`).
  `size_t NAME_workspace_size(sizes)` reports the workspace bytes, or 0 for sizes
  the entry point rejects.

The statements of the passes that plan for a target (auto-SIMD marks, grouped
products, transposing copies, streamed stores) are written as they say
(`idioms.py`); the renderer decides nothing about the loop IR it is given.

Where each temporary lives was decided by the allocate pass (`ir.Storage`); a
flavour renders the storage it has and refuses the rest. Every temporary, wherever it
lives, is used through a `restrict` pointer (an array on the stack too: `T NAME_storage[N];
T *restrict NAME = NAME_storage;`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..lower.abi import OUT_OF_MEMORY, may_fail
from ..lower.contraction import chain_step
from ..lower.ir import (
    ATOMIC_OLD,
    Allocate,
    Block,
    Buffer,
    Compare,
    Const,
    For,
    ForKind,
    GroupedProducts,
    If,
    IfFeature,
    Let,
    LoweredFunc,
    PackedLoad,
    Stmt,
    Storage,
    Store,
    StreamedStores,
    TransposingCopy,
    constant_elements,
)
from ..lower.layout import element_count
from ..lower.rewrite import atomic_fetch, walk_stmts
from ..lower.vectors import plan as vector_plan
from . import checks, helpers, idioms, tasks
from .checks import ERR_SIZES
from .expr import ExprEmitter
from .helpers import ctype
from .workspace import Workspace, workspace_layout
from .writer import CExpr, CWriter, atom, binary, cast, prototype


@dataclass(frozen=True, slots=True)
class Flavour:
    """What differs between the C tdsl compiles for the host and the C `td.emit_c` writes."""

    name: str
    label: str  # names the C in the file's first line
    openmp: bool  # simd pragmas
    threads: bool  # parallel loops run as tasks of the thread pool (else serially)
    gnu: bool  # GCC extensions: unroll pragma, aligned attribute, scalar-loop statement
    # products fused with the add or subtract they feed as `fmaf`/`fma` calls, as
    # `lower.contraction` says (compiled with the compiler's own contraction off)
    fma: bool
    storage: frozenset[Storage]  # the temporaries' storage it implements
    # the entry point is a library's: named exactly as the kernel, it checks its sizes
    # and workspace first, with NAME_workspace_size beside it
    checked_entry: bool


HOST = Flavour("host", "host C", openmp=True, threads=True, gnu=True, fma=True,
               storage=frozenset({Storage.STACK, Storage.HEAP}), checked_entry=False)
PORTABLE = Flavour("portable", "portable C99", openmp=False, threads=False, gnu=False, fma=False,
                   storage=frozenset({Storage.STACK, Storage.WORKSPACE}), checked_entry=True)
FLAVOURS = {f.name: f for f in (HOST, PORTABLE)}



@dataclass(frozen=True, slots=True)
class CSource:
    """The C source, the declarations a header needs (in order) and the workspace layout."""

    source: str
    declarations: tuple[str, ...]
    workspace: Workspace | None

# Host C is compiled at -O3, whose loop vectorizer (gcc 12 with AVX-512) miscompiles
# some loops tdsl never asked to vectorize: outer loops whose inner loops it unrolled
# completely. Vectorized loops are `#pragma omp simd` loops; every other loop with a
# loop of at most SHORT_LOOP iterations inside (one gcc may unroll completely) starts
# with this statement, which keeps the loop vectorizer out of it and costs nothing at
# run time. Other loops are left to the compiler (it vectorizes and interchanges
# unscheduled loop nests), but for the outer loops around a reduction that the
# auto_simd pass marks (`For.auto_vector`), which are simd loops.
SCALAR_LOOP = "TDSL_SCALAR_LOOP"
SHORT_LOOP = 32
_SCALAR_LOOP_DEFINITION = (
    "/* A loop with a short loop inside that the schedule does not vectorize stays out of\n"
    "   the loop vectorizer, which does not touch a loop containing an asm statement. */\n"
    f"#define {SCALAR_LOOP} __asm__ __volatile__(\"\")\n"
)
_HEADER_ORDER = ("math.h", "stddef.h", "stdint.h", "stdlib.h", "string.h", "time.h")


def render(func: LoweredFunc, flavour: str = "host") -> str:
    """The C source of `func` as one translation unit, in flavour "host" or "portable"."""
    if flavour not in FLAVOURS:
        raise ValueError(f"unknown C flavour {flavour!r}; valid: {', '.join(FLAVOURS)}")
    return _Renderer(func, FLAVOURS[flavour]).run().source


def render_standalone(func: LoweredFunc, requires: tuple[Compare, ...] = (),
                      header: str | None = None) -> CSource:
    """`func` as portable C99 (see the module docstring).

    `requires` are conditions on the sizes, checked in order after each size
    is known to be in [1, INT32_MAX]; `header` is a file the source includes
    (its own header, so the compiler checks that the two agree)."""
    return _Renderer(func, PORTABLE, requires, header).run()


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


def _holds_loop(s: For) -> bool:
    """Whether loop `s` has a loop inside it."""
    return any(isinstance(x, For) for x in walk_stmts(s.body))


def _short(s: Stmt) -> bool:
    """A loop of at most SHORT_LOOP iterations (a constant bound on its trip count)."""
    if not isinstance(s, For):
        return False
    if isinstance(s.start, Const) and isinstance(s.end, Const):
        return int(s.end.value) - int(s.start.value) <= SHORT_LOOP
    return s.max_extent is not None and s.max_extent <= SHORT_LOOP


class _Renderer:
    def __init__(self, func: LoweredFunc, flavour: Flavour,
                 requires: tuple[Compare, ...] = (), include: str | None = None):
        self.func = func
        self.flavour = flavour
        self.requires = requires
        self.include = include  # a header the source includes
        self.w = CWriter(reserved=helpers.NAMES)
        self.headers: set[str] = {"stdint.h"}
        self.helpers: dict[str, None] = {}  # ordered set
        # where each helper is used: "dsp" and "plain" branches of an IfFeature, "all"
        self.helper_where: dict[str, set[str]] = {}
        self.feature_branch = "all"
        self.expr = ExprEmitter(self.name_of, self.use_helper, self.headers.add,
                                 lambda name: idioms.staged_lane(self, name))
        self.expr.fma = flavour.fma
        self.expr.libm_free = not flavour.gnu
        self.regions = [tasks.Region(parallel=False)]
        self.outline: tasks.Outline | None = None
        self.tasks: list[str] = []  # what the task functions of parallel loops need, as text
        self.buffers = {b.name: b for b in (*func.inputs, *func.outputs)}
        self.buffers.update((x.buffer.name, x.buffer) for x in walk_stmts(func.body)
                            if isinstance(x, Allocate))
        if func.status is not None:
            self.buffers[func.status.name] = func.status
        self.ctypes: dict[tuple[object, str], str] = {}  # (key, C name) -> C type of a variable
        self.in_parallel = False
        self.in_simd = False
        self.scalar_loops = False  # a loop was kept out of the loop vectorizer
        in_workspace = any(isinstance(s, Allocate) and s.storage is Storage.WORKSPACE
                           for s in walk_stmts(func.body))
        self.layout = workspace_layout(func) if in_workspace else None
        self.ws_param: str | None = None
        self.ws_base: str | None = None
        # buffer -> (stack buffer, loop variable, first iteration) for the streamed
        # stores of the vectorized loop being written (`_streamed`)
        self.staged: dict[str, tuple[str, str, CExpr]] = {}
        self.dsp = False  # a test for the Arm DSP extension was written
        self.dsp_block = False  # writing the branch for the Arm DSP extension

    # ------------------------------------------------------------ file

    def run(self) -> CSource:
        func, w = self.func, self.w
        declarations: list[str] = []
        valid_fn = None
        if self.flavour.checked_entry:
            self.name = checks.public_name(self, func.name)
            valid_fn = checks.checks(self, declarations)
        else:
            self.name = entry_name(func, w)
        declarations.append(self._entry(valid_fn))
        return CSource(self._assemble(w.text()), tuple(declarations), self.layout)

    def _entry(self, valid_fn: str | None) -> str:
        """The entry point (after the size check `valid_fn`, if any); its prototype."""
        w = self.w
        with w.scope():
            params = _bind_params(self.func, w)
            if self.layout:
                self.ws_param = w.bind(("workspace",), "workspace")
                params = f"{params}, void *{self.ws_param}"
            proto = prototype(self.name, params)
            w.open(proto)
            self.body_level = w.level
            if valid_fn:
                args = ", ".join(a.text for a in checks.size_args(self))
                checks.reject(self, atom(f"!{valid_fn}({args})"), str(ERR_SIZES))
            if self.layout:
                checks.workspace_prologue(self)
            status = self.func.status
            if status is None:
                self.stmt(self.func.body)
                idioms.fence_streams(self)
                w.line("return 0;")
            else:  # the kernel's own status: 0 unless the body sets it
                with w.binding(("buf", status.name), status.name) as name:
                    w.line(f"{ctype(status.dtype)} {name}[1] = {{0}};")
                    self.stmt(self.func.body)
                    idioms.fence_streams(self)
                    w.line(f"return {name}[0];")
            w.close()
        return f"{proto};"

    def _assemble(self, body: str) -> str:
        parts = [f"/* {self.name}: generated by tdsl ({self.flavour.label}). */\n"]
        for h in self.helpers:
            self.headers |= helpers.definition(h)[1]
        includes = [f"#include <{h}>\n" for h in _HEADER_ORDER if h in self.headers]
        if self.include:
            includes.append(f'\n#include "{self.include}"\n')
        parts.append("".join(includes))
        if self.scalar_loops:
            parts.append(_SCALAR_LOOP_DEFINITION)
        # a helper only the Arm DSP branches use goes under the test with <arm_acle.h>,
        # one only the plain branches use under its negation (an unused static function
        # is a warning to clang), the rest for all
        where = self.helper_where
        dsp = [h for h in self.helpers if where[h] == {"dsp"}]
        plain = [h for h in self.helpers if where[h] == {"plain"}]
        if self.dsp:  # the intrinsics and the helpers of the Arm DSP extension
            parts.append("\n".join([f"#if defined({helpers.DSP_FEATURE})",
                                    "#include <arm_acle.h>", "",
                                    *(helpers.definition(h)[0] for h in dsp), "#endif", ""]))
        parts.extend(helpers.definition(h)[0] for h in self.helpers
                     if h not in dsp and h not in plain)
        if plain:
            parts.append("\n".join([f"#if !defined({helpers.DSP_FEATURE})",
                                    *(helpers.definition(h)[0] for h in plain), "#endif", ""]))
        parts.extend(self.tasks)
        parts.append(body)
        return "\n".join(parts)

    def use_helper(self, name: str) -> None:
        self.helpers.setdefault(name, None)
        self.helper_where.setdefault(name, set()).add(self.feature_branch)

    def name_of(self, kind: str, name: str) -> str:
        found = self.w.lookup_level((kind, name))
        if found is None:
            what = "buffer" if kind == "buf" else "variable"
            raise ValueError(f"loop IR of {self.func.name} uses {what} {name!r} outside its scope")
        cname, level = found
        if self.outline is not None and level < self.outline.boundary and (
                kind, name) not in self.outline.allowed:
            raise ValueError(f"loop IR of {self.func.name}: a parallel loop's body uses {name!r} "
                             "from outside, which its task does not capture")
        return cname

    # ------------------------------------------------------------ statements

    def stmt(self, s: Stmt) -> None:
        match s:
            case Block(stmts):
                self.block(stmts)
            case Store(atomic=True):
                self.atomic_store(s)
            case Store(buffer, indices, value):
                at = idioms.staged_lane(self, buffer.name) or self.expr.element(buffer, indices)
                step = chain_step(s) if self.flavour.fma and not self.in_simd else None
                if step is not None:  # acc + x with no FMA (lower.contraction)
                    text = binary("+", self.expr(step[0]), self.expr(step[1]))
                else:
                    text = self.expr(value)
                self.w.line(f"{at} = {text};")
            case For():
                self.loop(s)
            case If():
                self.branch(s)
            case Let(name, PackedLoad(buffer, indices, lanes), body) if self.dsp_block:
                # the word through a pointer of its own: gcc merges the element loads into
                # one (unaligned) load only when they are constant offsets from a pointer
                bits = 32 // lanes
                ptr = self.w.fresh(f"{name}_at")
                at = self.expr.element(buffer, indices)
                self.w.line(f"const uint{bits}_t *{ptr} = (const uint{bits}_t *)&{at};")
                with self.w.binding(("var", name), name) as c:
                    self.ctypes[(("var", name), c)] = "uint32_t"
                    parts = [f"(uint32_t){ptr}[{k}]" + (f" << {bits * k}" if k else "")
                             for k in range(lanes)]
                    self.w.line(f"const uint32_t {c} = {' | '.join(parts)};")
                    self.stmt(body)
            case Let(name, value, body):
                text = self.expr(value)
                with self.w.binding(("var", name), name) as c:
                    self.ctypes[(("var", name), c)] = ctype(value.dtype)
                    self.w.line(f"const {ctype(value.dtype)} {c} = {text};")
                    self.stmt(body)
            case Allocate():
                self.allocate(s)
            case IfFeature(feature, then, other):
                self.if_feature(feature, then, other)
            case GroupedProducts():
                idioms.grouped(self, s)
            case TransposingCopy():
                idioms.transpose(self, s)
            case StreamedStores():
                idioms.streamed(self, s)
            case _:
                raise TypeError(f"not a loop-IR statement: {s!r}")

    def if_feature(self, feature: str, then: Stmt, other: Stmt) -> None:
        """The two branches under the preprocessor's test of the compiler's macro for
        the feature (`helpers.DSP_FEATURE`), each a block of its own."""
        if feature != "arm_dsp" or self.flavour.gnu:
            raise ValueError(f"{self.flavour.name} C has no test for the target feature "
                             f"{feature!r}: portable C for isa 'armv7e-m' does")
        w = self.w
        w.line(f"#if defined({helpers.DSP_FEATURE})")
        self.dsp = True
        for branch, before_close in ((then, "#else"), (other, "#endif")):
            w.open("")
            self.dsp_block = branch is then
            self.feature_branch = "dsp" if branch is then else "plain"
            self.stmt(branch)
            self.dsp_block, self.feature_branch = False, "all"
            w.close()
            w.line(before_close)

    def atomic_store(self, s: Store) -> None:
        """An atomic read-modify-write (`Store.atomic`). Inside a parallel region: the
        atomic integer operation when the value is one, else a compare-and-swap loop
        (which compares bits, so a NaN element is no obstacle); outside one, and in
        portable C, which runs parallel loops serially: a load and a store."""
        w, t = self.w, ctype(s.buffer.dtype)
        elem = self.expr.element(s.buffer, s.indices)
        if not (self.in_parallel and self.flavour.threads):
            w.open("")
            with w.binding(("var", ATOMIC_OLD), ATOMIC_OLD) as old:
                w.line(f"const {t} {old} = {elem};")
                w.line(f"{elem} = {self.expr(s.value)};")
            w.close()
            return
        fetch = atomic_fetch(s)
        if fetch is not None:
            op, operand = fetch
            w.line(f"__atomic_fetch_{op}(&{elem}, {self.expr(operand)}, __ATOMIC_RELAXED);")
            return
        w.open("")
        p = w.bind(("atomic", "ptr"), "tdsl_p")
        new = w.bind(("atomic", "new"), "tdsl_new")
        with w.binding(("var", ATOMIC_OLD), ATOMIC_OLD) as old:
            w.line(f"{t} *{p} = &{elem};")
            w.line(f"{t} {old}, {new};")
            w.line(f"__atomic_load({p}, &{old}, __ATOMIC_RELAXED);")
            w.open("do")
            w.line(f"{new} = {self.expr(s.value)};")
            w.close(f"}} while (!__atomic_compare_exchange({p}, &{old}, &{new}, 1, "
                    "__ATOMIC_RELAXED, __ATOMIC_RELAXED));")
        w.close()

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

    def block(self, stmts: tuple[Stmt, ...]) -> None:
        for x in stmts:
            self.stmt(x)

    def loop(self, s: For) -> None:
        if s.kind is ForKind.PARALLEL and self.flavour.threads:
            tasks.task(self, s)
            return
        pragma, simd = self._pragma(s)
        self._loop(s, pragma, simd)

    def _loop(self, s: For, pragma: str | None, simd: bool) -> None:
        w = self.w
        start, end = self.expr(s.start), self.expr(s.end)
        with w.scope():
            v = w.bind(("var", s.var), s.var)
            if pragma:
                w.line(pragma)
            t = ctype(s.start.dtype)  # int64_t, or int32_t once the index32 pass narrowed
            w.open(f"for ({t} {v} = {start}; {binary('<', atom(v), end)}; {v}++)")
            if self._scalar(s, simd):
                self.scalar_loops = True
                w.line(f"{SCALAR_LOOP};")
            self.ctypes[(("var", s.var), v)] = t
            saved = self.in_simd, self.expr.blend
            self.in_simd = self.in_simd or simd
            # gcc 12 vectorizes a loop around loops of its own only if its body has no
            # control flow outside them: C's `?:` there would keep it scalar. Inside the
            # inner loops `?:` stays (gcc makes a conditional load a masked one there)
            self.expr.blend = simd and _holds_loop(s)
            self.stmt(s.body)
            self.in_simd, self.expr.blend = saved
            w.close()

    def _scalar(self, s: For, simd: bool) -> bool:
        """Whether loop `s` is kept out of the C compiler's loop vectorizer: a host loop
        with a short loop inside, unless it is vectorized, inside a vectorized loop, or
        to be unrolled."""
        return (self.flavour.gnu and not (simd or self.in_simd)
                and s.kind not in (ForKind.VECTORIZED, ForKind.UNROLLED)
                and any(_short(x) for x in walk_stmts(s.body)))

    def _pragma(self, s: For) -> tuple[str | None, bool]:
        """(pragma line, starts a simd region).

        A loop whose body may fail to allocate is not a simd loop (it must be able
        to leave an iteration early), nor is a vectorized loop whose plan
        (`lower.vectors.plan`, what `Kernel.vectorization` reports) says it cannot
        run as vector code: gcc 12 compiled such a loop wrong (an inner loop whose
        trip count differs between lanes; fuzz C seed 8201, case 91), and the C
        compiler may still vectorize a plain loop where it proves that safe. A
        serial loop is a simd loop where the auto_simd pass marked it
        (`For.auto_vector`). Parallel loops are tasks (`_task`), in portable C plain
        loops."""
        fl = self.flavour
        if fl.openmp and not self.in_simd:
            if s.kind is ForKind.VECTORIZED:
                if not may_fail(s.body) and vector_plan(s, self.func.status_name).vectorized:
                    return "#pragma omp simd", True
            elif s.auto_vector is not None:
                return "#pragma omp simd", True
        if s.kind is ForKind.UNROLLED and fl.gnu and s.max_extent:
            return f"#pragma GCC unroll {min(s.max_extent, 65534)}", False
        return None, False

    # ------------------------------------------------------------ temporaries

    def allocate(self, s: Allocate) -> None:
        """A temporary where the allocate pass put it (`ir.Storage`)."""
        buf, storage = s.buffer, s.storage
        if storage is None or storage not in self.flavour.storage:
            have = " or ".join(x.value for x in Storage if x in self.flavour.storage)
            where = "no storage" if storage is None else f"storage {storage.value}"
            raise ValueError(
                f"temporary {buf.name} has {where}: {self.flavour.name} C places temporaries "
                f"on the {have}, as the allocate pass decides (td.emit_c lowers with "
                "workspace=True for a caller-provided workspace)"
            )
        with self.w.binding(("buf", buf.name), buf.name) as name:
            if storage is Storage.STACK:
                self._stack(buf, name)
            elif storage is Storage.WORKSPACE:
                self._slot(buf, name)
            else:
                self._heap(buf, name, s.body)
                return
            self.stmt(s.body)

    def _stack(self, buf: Buffer, name: str) -> None:
        """An array on the stack, used through a `restrict` pointer like every other
        temporary: gcc 12 loses which array an access of a local array reaches once its
        loops are rewritten (after vectorization), so a vectorized accumulation into one
        local array (an rfactor's partial results) read from another (softmax's row of
        exponentials) went through memory at every step instead of staying in registers."""
        count = constant_elements(buf)
        assert count is not None, f"{buf.name} is on the stack without a constant size"
        align = " __attribute__((aligned(64)))" if self.flavour.gnu else ""
        t, storage = ctype(buf.dtype), self.w.fresh(f"{name}_storage")
        self.w.line(f"{t} {storage}[{max(count, 1)}]{align};")
        self.w.line(f"{t} *restrict {name} = {storage};")

    def _slot(self, buf: Buffer, name: str) -> None:
        assert self.layout is not None and self.ws_base is not None
        slot = next(x for x in self.layout.slots if x.buffer.name == buf.name)
        t = ctype(buf.dtype)
        offset = self.expr(slot.offset)
        base = atom(self.ws_base) if offset.text == "0" else binary("+", atom(self.ws_base), offset)
        self.w.line(f"{t} *restrict {name} = {cast(f'{t} *', base)};")

    def _heap(self, buf: Buffer, name: str, body: Stmt) -> None:
        """Allocate, run `body`, free; leave through `_fail` when the allocation fails."""
        w, t = self.w, ctype(buf.dtype)
        self.use_helper(helpers.ALLOC)
        size = self.expr(element_count(buf.shape))
        region = self.regions[-1]
        w.line(f"{t} *restrict {name} = {helpers.ALLOC}({size}, sizeof({t}));")
        w.open(f"if ({name} == NULL)")
        self._fail()
        w.close()
        region.live.append(name)
        self.stmt(body)
        region.live.pop()
        w.line(f"free({name});")

    def _fail(self) -> None:
        """Leave after an allocation failed: free this region's temporaries, then
        return OUT_OF_MEMORY, or in a parallel iteration (an outlined body, `_Outline`)
        return 1, skipping the rest of the iteration; its task's function returns 1 too
        and the pool starts no more chunks (`lower.abi`'s unwind policy)."""
        w, region = self.w, self.regions[-1]
        self.unwind(region)
        w.line(f"return {1 if region.parallel else OUT_OF_MEMORY};")

    def unwind(self, region: tasks.Region) -> None:
        for name in reversed(region.live):
            self.w.line(f"free({name});")

    # ------------------------------------------------------------ the portable checks
