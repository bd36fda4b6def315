"""Loop IR -> LLVM IR text, through llvmlite's IR builder.

`emit_module(func)` renders one `LoweredFunc` as a module whose entry point is

    i32 NAME(ptr noalias readonly IN..., ptr noalias OUT..., i64 SIZE...)

(inputs, outputs and sizes in the LoweredFunc's order), returning 0, or 1
(`abi.OUT_OF_MEMORY`) when a heap allocation failed, in which case everything
already allocated has been freed (`abi`'s unwind policy).

- Loops are canonical: a header with a phi named after the loop variable, the
  body, a latch. A VECTORIZED loop is vector code (`vector.py`), in the
  chunks `lower.vectors.plan` gives it. One the plan refuses is a plain loop
  with `llvm.loop.vectorize.*` hints (width: the largest power of two <=
  min(max_extent, 64)) when nothing but UNROLLED loops is nested in it,
  since LLVM only vectorizes innermost loops; UNROLLED loops carry
  `llvm.loop.unroll.full`. A SERIAL loop the auto_simd pass marked
  (`For.auto_vector`: an outer loop around a reduction, which LLVM's loop
  vectorizer of innermost loops leaves scalar) is vector code too, in the
  chunks of `lower.vectors.auto_vector_plan` at the width it was marked for
  (`host.host_vector_bytes` when lowered for LLVM). LLVM's loop vectorizer takes
  the other loops (see jit.py). A `TransposingCopy` (the transpose pass) is
  8 x 8 tiles of shuffles (`idioms.emit_transposing_copy`) and a
  `GroupedProducts` (the group pass) x86's multiply-adds where the host has
  the instructions, their loop nests elsewhere; a `StreamedStores` (host C's)
  is its loop, whose contiguous vector stores of outputs stored nontemporal
  are streaming stores anyway.
- A PARALLEL loop is a task of tdsl's thread pool (the outline pass made it one,
  `ir.Task`): its body is the function `i32 NAME.TASK.task(i64 lo, i64 hi, ptr
  env)`, which runs iterations [lo, hi) on the values and buffers of the task,
  read from the struct `env` the caller fills, and returns 0, or 1 when an
  iteration failed (after freeing what the iteration allocated). The caller
  passes both to `abi.PARALLEL_FOR` (see runtime.py), which runs it in chunks on
  the pool's threads and reports a failure, after which the caller unwinds.
- Temps, as the allocate pass placed them (`ir.Storage`): one on the stack
  is an `alloca` (align 64) in the entry block of the function that uses it
  (the outlined body for temps inside a parallel loop); one on the heap is
  `aligned_alloc` (64 bytes)/`free` (see `_HEAP`), with the byte count checked
  for overflow.
  There is no workspace.
- Every load and store carries `!alias.scope`/`!noalias` metadata, one scope
  per buffer: distinct buffers never overlap.
- The entry point's symbol is NAME unless that could shadow a function the
  module calls (`entry_symbol`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from types import MappingProxyType

from llvmlite import ir

from ..dtypes import index
from ..lower.abi import OUT_OF_MEMORY, PARALLEL_FOR
from ..lower.contraction import chain_step, fused_product
from ..lower.ir import (
    ATOMIC_OLD,
    Allocate,
    Block,
    Buffer,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    For,
    ForKind,
    GroupedProducts,
    If,
    Let,
    LoweredFunc,
    Select,
    Stmt,
    Storage,
    Store,
    StreamedStores,
    TransposingCopy,
    Unary,
    Var,
    constant_elements,
)
from ..lower.ir import Binary as BinaryExpr
from ..lower.ir import Load as LoadExpr
from ..lower.rewrite import atomic_fetch, walk_stmts
from ..lower.vectors import auto_vector_plan
from ..lower.vectors import plan as vector_plan
from . import ops
from .idioms import emit_idiom
from .ops import I1, I8, I32, I64, PTR, VOID
from .vector import emit_vector_loop

MAX_VECTOR_WIDTH = 64


class _ArgAttributes(ir.values.ArgumentAttributes):
    _known = MappingProxyType({**ir.values.ArgumentAttributes._known, "readonly": False})


# aligned_alloc and free under names LLVM does not know (runtime.py binds them),
# so it never elides a heap temp whose contents it can forward: an allocation
# that cannot succeed is always reported, as by the C backend.
_HEAP = {"aligned_alloc": ("tdsl_aligned_alloc", PTR, (I64, I64)),
         "free": ("tdsl_free", VOID, (PTR,))}
# heap temps start at a multiple of this, like stack temps and the C backend's: a
# 64-byte vector load from a temp then never spans two cache lines (malloc's 16-byte
# alignment made a packed sgemm panel 1.4x slower)
HEAP_ALIGN = 64


# Functions generated code, or LLVM's lowering of it, may call.
_LIBM = "exp exp2 expm1 log log2 log10 log1p sin cos tan sinh cosh tanh asin acos atan atan2"
_LIBM += " sqrt cbrt floor ceil trunc round rint nearbyint fabs fmod pow ldexp copysign fmin fmax"
_LIBM += " fma sincos hypot erf"
_RESERVED = frozenset(
    {f"{fn}{suffix}" for fn in _LIBM.split() for suffix in ("", "f")}
    | {"malloc", "aligned_alloc", "free", "memset", "memcpy", "memmove", "memcmp", "bcmp"}
    | {PARALLEL_FOR}
    | {symbol for symbol, _, _ in _HEAP.values()}
)


def entry_symbol(name: str) -> str:
    """The entry point's symbol: the kernel's name, or tdsl.NAME if that
    could shadow a function the module calls (a kernel named `exp` that
    calls exp, directly or through llvm.exp) or is not ASCII (escaped)."""
    if not name.isascii():
        return "tdsl." + name.encode("ascii", "backslashreplace").decode()
    if name in _RESERVED or name.startswith(("llvm.", "__")):
        return f"tdsl.{name}"
    return name


def emit_module(func: LoweredFunc) -> str:
    """The LLVM IR text of `func` (see the module docstring for the ABI)."""
    module = ir.Module(name=func.name)
    module.triple = ""  # the JIT targets the host
    _ModuleEmitter(module, func).emit()
    return str(module)


class _ModuleEmitter:
    def __init__(self, module: ir.Module, func: LoweredFunc):
        self.module = module
        self.func = func
        self._scopes: dict[str, ir.MDValue] = {}
        self._alias: dict[str, tuple[ir.MDValue, ir.MDValue]] = {}

    def emit(self) -> None:
        func = self.func
        buffers = func.inputs + func.outputs
        fnty = ir.FunctionType(I32, [PTR] * len(buffers) + [I64] * len(func.sizes))
        fn = ops.Function(self.module, fnty, entry_symbol(func.name))
        fn.attributes.add("nounwind")
        em = _FunctionEmitter(self, fn)
        for arg, buf in zip(fn.args[: len(buffers)], buffers, strict=True):
            arg.name = buf.name
            arg.attributes = _ArgAttributes(
                ["noalias"] + (["readonly"] if buf.kind == "input" else [])
            )
            em.ptrs[buf.name] = arg
        for arg, var in zip(fn.args[len(buffers) :], func.sizes, strict=True):
            arg.name = var.name
            em.scope[var.name] = arg
        if func.status is None:
            em.stmt(func.body)
            self.fence_streams(em.b)
            em.b.ret(ir.Constant(I32, 0))
        else:  # the kernel's own status: 0 unless the body sets it
            status = em.alloca(I32, func.status.name, align=4)
            em.b.store(ir.Constant(I32, 0), status)
            em.ptrs[func.status.name] = status
            em.stmt(func.body)
            self.fence_streams(em.b)
            em.b.ret(em.b.load(status, typ=I32))
        em.finish()

    def fence_streams(self, b: ir.IRBuilder) -> None:
        """After a function's streaming stores (`LoweredFunc.nontemporal`), which are
        weakly ordered: a full fence (x86's mfence), so that the thread that joins a
        parallel loop, and the caller, see every element."""
        if self.func.nontemporal:
            b.fence("seq_cst")

    def unique_base(self, base: str) -> str:
        """`base`, or `base2`, ...: a prefix no task function uses yet."""
        name, n = base, 1
        while f"{name}.task" in self.module.globals:
            n += 1
            name = f"{base}{n}"
        return name

    def node(self, *operands) -> ir.MDValue:
        """A new metadata node (not `add_metadata`'s cache, which hashes operands)."""
        return ir.values.MDValue(self.module, operands, name=str(len(self.module.metadata)))

    def self_referential(self, *operands) -> ir.MDValue:
        """A metadata node whose first operand is itself, so it is never merged."""
        node = self.node()
        node.operands = (node, *operands)
        return node

    def loop_id(self, hints: list[tuple[str, int | None]]) -> ir.MDValue:
        """An `llvm.loop` node: itself first, then the hints."""
        props = []
        for key, value in hints:
            ops_ = [ir.MetaDataString(self.module, key)]
            if value is not None:
                ops_.append(ir.Constant(I1 if key.endswith("enable") else I32, value))
            props.append(self.module.add_metadata(ops_))
        return self.self_referential(*props)

    def alias_metadata(self, buffer: str) -> tuple[ir.MDValue, ir.MDValue]:
        """(`!alias.scope`, `!noalias`) for accesses to `buffer`.

        Distinct buffers never overlap. Arguments say so with `noalias`; this
        says it for pointers an outlined parallel body loads from its
        environment too, so its loops vectorize without runtime alias checks.
        """
        if not self._scopes:
            domain = self.self_referential(ir.MetaDataString(self.module, self.func.name))
            for name in all_buffers(self.func):
                self._scopes[name] = self.self_referential(
                    domain, ir.MetaDataString(self.module, name)
                )
        if buffer not in self._alias:
            others = [s for name, s in self._scopes.items() if name != buffer]
            self._alias[buffer] = (self.node(self._scopes[buffer]), self.node(*others))
        return self._alias[buffer]

    def task_function(self, loop: For, env_ty: ir.Type) -> ir.Function:
        """The function of parallel loop `loop`'s task (`i32 (i64 lo, i64 hi, ptr env)`):
        iterations [lo, hi) of its body, which reads the task's values and buffers
        from the fields of `env` in that order; 0, or 1 when an iteration failed."""
        task = loop.task
        assert task is not None
        base = self.unique_base(f"{self.func.name}.{task.name}")
        fn = ops.Function(self.module, ir.FunctionType(I32, [I64, I64, PTR]), f"{base}.task")
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        lo, hi, env = fn.args
        lo.name, hi.name, env.name = "lo", "hi", "env"
        em = _FunctionEmitter(self, fn)
        em.in_task = True
        k = -1
        for v in task.values:
            k += 1
            em.scope[v.name] = em.b.load(field(em.b, env, env_ty, k), name=v.name,
                                         typ=env_ty.elements[k])
        for buf in task.buffers:
            k += 1
            em.ptrs[buf.name] = em.b.load(field(em.b, env, env_ty, k), name=buf.name, typ=PTR)
        em.counted_loop(loop.var, lo, hi, loop.body, hints=None)
        self.fence_streams(em.b)
        em.b.ret(ir.Constant(I32, 0))
        em.finish()
        return fn


def all_buffers(func: LoweredFunc) -> list[str]:
    """Names of the arguments, the function's status, then of the temps in order of
    allocation."""
    names = [b.name for b in func.inputs + func.outputs]
    if func.status is not None:
        names.append(func.status.name)
    for s in walk_stmts(func.body):
        if isinstance(s, Allocate) and s.buffer.name not in names:
            names.append(s.buffer.name)
    return names


def field(b: ir.IRBuilder, env: ir.Value, env_ty: ir.Type, k: int) -> ir.Value:
    """Pointer to field k of an environment struct."""
    return b.gep(
        env, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True, source_etype=env_ty
    )


class _FunctionEmitter:
    """Emits statements into one LLVM function.

    `scope` maps variable names to SSA values, `ptrs` buffer names to
    pointers; `heap` lists the live heap temps' pointers a failure must free.
    A task's function (`in_task`, a parallel loop's body) and the entry point
    both return 1 for a failure.
    """

    def __init__(self, mod: _ModuleEmitter, fn: ir.Function):
        self.mod = mod
        self.fn = fn
        self.allocas = ir.IRBuilder(fn.append_basic_block("entry"))
        self.start = fn.append_basic_block("start")
        self.b = ir.IRBuilder(self.start)
        self.scope: dict[str, ir.Value] = {}
        self.ptrs: dict[str, ir.Value] = {}
        self.heap: list[ir.Value] = []
        self.in_task = False
        self.status = mod.func.status_name

    def finish(self) -> None:
        self.allocas.branch(self.start)

    def alloca(self, ty: ir.Type, name: str, align: int) -> ir.Value:
        """Stack memory in the entry block, allocated once per call."""
        p = self.allocas.alloca(ty, name=name)
        p.align = align
        p.type = PTR  # opaque pointers throughout: each access names its type
        return p

    # ------------------------------------------------------------- blocks

    def new_block(self, name: str) -> ir.Block:
        """A block placed later (with `place`), so blocks read in program order."""
        return ir.Block(parent=self.fn, name=name)

    def place(self, block: ir.Block) -> None:
        self.fn.blocks.append(block)
        self.b.position_at_end(block)

    @contextmanager
    def bind(self, table: dict, name: str, value: ir.Value):
        old = table.get(name)
        table[name] = value
        try:
            yield
        finally:
            if old is None:
                del table[name]
            else:
                table[name] = old

    def heap_call(self, fn: str, *args: ir.Value, name: str = "") -> ir.Value:
        """Call aligned_alloc or free (see `_HEAP`)."""
        symbol, ret, params = _HEAP[fn]
        decl = ops.declare(self.mod.module, symbol, ret, list(params), ("nounwind",))
        return self.b.call(decl, list(args), name=name)

    def fail_here(self) -> None:
        """Free the live heap temps and report failure (terminates the block)."""
        for p in reversed(self.heap):
            self.heap_call("free", p)
        self.b.ret(ir.Constant(I32, 1 if self.in_task else OUT_OF_MEMORY))

    # --------------------------------------------------------- statements

    def stmt(self, s: Stmt) -> None:
        b = self.b
        match s:
            case Block(stmts=stmts):
                self.block(stmts)
            case Store(atomic=True):
                self.atomic_store(s)
            case Store(buffer=buf, indices=idx, value=value):
                step = chain_step(s)
                if step is not None:  # acc + x with no FMA (lower.contraction)
                    acc, x = (self.typed(v, buf.dtype) for v in step)
                    value = b.fadd(acc, x)
                else:
                    value = self.typed(value, buf.dtype)
                self.annotate(b.store(value, self.address(buf, idx), align=buf.dtype.itemsize), buf)
            case Let(name=name, value=value, body=body):
                v = self.expr(value)
                if isinstance(v, ir.Instruction) and not v.name:
                    v.name = name
                with self.bind(self.scope, name, v):
                    self.stmt(body)
            case If():
                self.branch(s)
            case For(kind=ForKind.PARALLEL):
                self.parallel(s)
            case For(kind=ForKind.VECTORIZED) if (plan := vector_plan(s, self.status)).vectorized:
                emit_vector_loop(self, s, plan)
            case For(auto_vector=int(width)):
                auto = auto_vector_plan(s, width, self.status)
                assert auto is not None, f"loop {s.var} is marked auto simd without a plan"
                emit_vector_loop(self, s, auto)
            case TransposingCopy() | GroupedProducts() | StreamedStores():
                emit_idiom(self, s)
            case For():
                lo, hi = self.expr(s.start), self.expr(s.end)
                self.counted_loop(s.var, lo, hi, s.body, self.loop_hints(s))
            case Allocate():
                self.allocate(s)
            case _:
                raise TypeError(f"unknown loop-IR statement {s!r}")

    def block(self, stmts: tuple[Stmt, ...]) -> None:
        for x in stmts:
            self.stmt(x)

    def atomic_store(self, s: Store) -> None:
        """An atomic read-modify-write (`Store.atomic`). In an outlined parallel body:
        `atomicrmw` when the value is an integer operation it has, else a
        compare-and-swap loop on the element's bits; elsewhere a load and a store."""
        b, buf = self.b, s.buffer
        ty, align = ops.lltype(buf.dtype), buf.dtype.itemsize
        ptr = self.address(buf, s.indices)
        if not self.in_task:  # not in a parallel body: nothing runs at once
            old = self.annotate(b.load(ptr, typ=ty, align=align), buf)
            with self.bind(self.scope, ATOMIC_OLD, old):
                new = self.typed(s.value, buf.dtype)
            self.annotate(b.store(new, ptr, align=align), buf)
            return
        fetch = atomic_fetch(s)
        if fetch is not None:
            op, operand = fetch
            b.atomic_rmw(op, ptr, self.typed(operand, buf.dtype), "monotonic")
            return
        bits = ir.IntType(buf.dtype.bits)
        first = b.load_atomic(ptr, "monotonic", align, typ=bits)
        pre = b.block
        loop, done = self.new_block("atomic.retry"), self.new_block("atomic.done")
        b.branch(loop)
        self.place(loop)
        seen = b.phi(bits, name="old.bits")
        seen.add_incoming(first, pre)
        old = b.bitcast(seen, ty) if ty != bits else seen
        with self.bind(self.scope, ATOMIC_OLD, old):
            new = self.typed(s.value, buf.dtype)
        new_bits = b.bitcast(new, bits) if ty != bits else new
        pair = b.cmpxchg(ptr, seen, new_bits, "monotonic", "monotonic")
        seen.add_incoming(b.extract_value(pair, 0), b.block)
        b.cbranch(b.extract_value(pair, 1), done, loop)
        self.place(done)

    def branch(self, s: If) -> None:
        other = s.else_
        self.if_then_else(self.cond(s.cond), lambda: self.stmt(s.then),
                          None if other is None else lambda: self.stmt(other))

    def if_then_else(self, cond: ir.Value, then: Callable[[], None],
                     other: Callable[[], None] | None = None, name: str = "if") -> None:
        """if (cond) then() else other(): each emits its branch's code."""
        then_bb = self.new_block(f"{name}.then")
        other_bb = self.new_block(f"{name}.else") if other is not None else None
        end = self.new_block(f"{name}.end")
        self.b.cbranch(cond, then_bb, other_bb or end)
        self.place(then_bb)
        then()
        self.b.branch(end)
        if other is not None and other_bb is not None:  # one is there when the other is
            self.place(other_bb)
            other()
            self.b.branch(end)
        self.place(end)

    def counted_loop(self, var: str, lo: ir.Value, hi: ir.Value, body: Stmt | None, hints,
                     emit: Callable[[ir.Value], None] | None = None) -> None:
        """for var in [lo, hi): `body`, or what `emit(var's value)` emits."""
        b = self.b
        pre = b.block
        header, exit_ = self.new_block(f"{var}.header"), self.new_block(f"{var}.exit")
        b.branch(header)
        self.place(header)
        i = b.phi(I64, name=var)
        i.add_incoming(lo, pre)
        body_bb = self.new_block(f"{var}.body")
        b.cbranch(b.icmp_signed("<", i, hi), body_bb, exit_)
        self.place(body_bb)
        with self.bind(self.scope, var, i):
            if emit is not None:
                emit(i)
            else:
                assert body is not None
                self.stmt(body)
        latch = self.new_block(f"{var}.latch")
        b.branch(latch)
        self.place(latch)
        step = b.add(i, ir.Constant(I64, 1), name=f"{var}.next", flags=("nsw",))
        i.add_incoming(step, latch)
        backedge = b.branch(header)
        if hints:
            backedge.set_metadata("llvm.loop", self.mod.loop_id(hints))
        self.place(exit_)

    def loop_hints(self, s: For) -> list[tuple[str, int | None]]:
        if s.kind is ForKind.UNROLLED:
            return [("llvm.loop.unroll.full", None)]
        if s.kind is not ForKind.VECTORIZED or not _only_unrolled_loops(s.body):
            return []
        if s.max_extent is None:
            return [("llvm.loop.vectorize.enable", 1)]
        width = min(s.max_extent, MAX_VECTOR_WIDTH)
        if width < 2:
            return []
        width = 1 << (width.bit_length() - 1)
        return [("llvm.loop.vectorize.enable", 1), ("llvm.loop.vectorize.width", width)]

    def parallel(self, s: For) -> None:
        """Parallel loop `s` as a call of the thread pool with its task's function and
        an environment holding the task's values and buffers."""
        task = s.task
        if task is None:
            raise ValueError(f"parallel loop {s.var} of {self.mod.func.name} has no task "
                             "(targets take loop IR through tdsl.lower.finish, whose outline "
                             "pass makes one)")
        b = self.b
        values = [self.scope[v.name] for v in task.values]
        values += [self.ptrs[buf.name] for buf in task.buffers]
        env_ty = ir.LiteralStructType([v.type for v in values] or [I8])
        fn = self.mod.task_function(s, env_ty)
        lo, hi = self.expr(s.start), self.expr(s.end)
        env = self.alloca(env_ty, f"{task.name}.env", align=8)
        for k, v in enumerate(values):
            b.store(v, field(b, env, env_ty, k))
        run = ops.declare(self.mod.module, PARALLEL_FOR, I32, [PTR, PTR, I64, I64])
        status = b.call(run, [fn, env, lo, hi], name=f"{task.name}.status")
        if not task.fails:
            return
        fail, after = self.new_block(f"{task.name}.failed"), self.new_block(f"{task.name}.joined")
        b.cbranch(b.icmp_unsigned("!=", status, ir.Constant(I32, 0)), fail, after)
        self.place(fail)
        self.fail_here()
        self.place(after)

    def allocate(self, s: Allocate) -> None:
        buf = s.buffer
        elty = ops.lltype(buf.dtype)
        if s.storage is Storage.STACK:
            count = constant_elements(buf)
            assert count is not None, f"{buf.name} is on the stack without a constant size"
            p = self.alloca(ir.ArrayType(elty, count), buf.name, align=64)
            with self.bind(self.ptrs, buf.name, p):
                self.stmt(s.body)
            return
        if s.storage is not Storage.HEAP:
            where = "no storage" if s.storage is None else f"storage {s.storage.value}"
            raise ValueError(f"temp buffer {buf.name} has {where}; the LLVM backend places "
                             "temps on the stack or the heap (the allocate pass decides)")
        b = self.b
        nbytes, overflow = ir.Constant(I64, buf.dtype.itemsize), ir.Constant(I1, 0)
        for extent in buf.shape:
            product = b.smul_with_overflow(nbytes, self.typed(extent, index))
            nbytes = b.extract_value(product, 0)
            overflow = b.or_(overflow, b.extract_value(product, 1))
        # At least one byte, rounded up to a multiple of the alignment (as aligned_alloc
        # requires; at most 2^63 - 1 + 63, so the rounding cannot wrap); a size beyond
        # i64 asks for SIZE_MAX bytes, which aligned_alloc refuses.
        one, impossible = ir.Constant(I64, 1), ir.Constant(I64, -1)
        nbytes = b.select(b.icmp_signed("<", nbytes, one), one, nbytes)
        nbytes = b.and_(b.add(nbytes, ir.Constant(I64, HEAP_ALIGN - 1)),
                        ir.Constant(I64, -HEAP_ALIGN))
        nbytes = b.select(overflow, impossible, nbytes, name=f"{buf.name}.bytes")
        p = self.heap_call("aligned_alloc", ir.Constant(I64, HEAP_ALIGN), nbytes, name=buf.name)
        fail, ok = self.new_block(f"{buf.name}.failed"), self.new_block(f"{buf.name}.ok")
        b.cbranch(b.icmp_unsigned("==", p, ir.Constant(PTR, None)), fail, ok)
        self.place(fail)
        self.fail_here()
        self.place(ok)
        self.heap.append(p)
        with self.bind(self.ptrs, buf.name, p):
            self.stmt(s.body)
        self.heap.pop()
        self.heap_call("free", p)

    # -------------------------------------------------------- expressions

    def address(self, buf: Buffer, indices: tuple[Expr, ...]) -> ir.Value:
        """The element's address: accesses reach the target flat (the `flatten` pass)."""
        if len(indices) != 1:
            raise ValueError(f"access to {buf.name!r} is not flat: {len(indices)} indices "
                             "(targets take loop IR through tdsl.lower.finish)")
        offset = self.typed(indices[0], index)
        try:
            base = self.ptrs[buf.name]
        except KeyError:
            raise ValueError(f"buffer {buf.name!r} is used outside its allocation") from None
        return self.b.gep(base, [offset], inbounds=True, source_etype=ops.lltype(buf.dtype))

    def annotate(self, access: ir.Instruction, buf: Buffer) -> ir.Instruction:
        scope, noalias = self.mod.alias_metadata(buf.name)
        access.set_metadata("alias.scope", scope)
        access.set_metadata("noalias", noalias)
        return access

    def typed(self, e: Expr, dtype) -> ir.Value:
        """`e` converted to `dtype` when it has another one."""
        v = self.expr(e)
        return v if e.dtype == dtype else ops.cast(self.b, v, e.dtype, dtype)

    def cond(self, e: Expr) -> ir.Value:
        """`e` as an i1 condition (logical operations on conditions stay in i1)."""
        match e:
            case Compare():
                return ops.compare_i1(
                    self.b, e.op, e.a.dtype, self.expr(e.a), self.typed(e.b, e.a.dtype)
                )
            case BinaryExpr(op="and" | "or" | "xor", a=x, b=y, dtype=dtype) if dtype.is_bool:
                logical = {"and": self.b.and_, "or": self.b.or_, "xor": self.b.xor}[e.op]
                return logical(self.cond(x), self.cond(y))
        return ops.truth(self.b, self.expr(e), e.dtype)

    def expr(self, e: Expr) -> ir.Value:
        b = self.b
        match e:
            case Const(value=value, dtype=dtype):
                return ops.const(value, dtype)
            case Var(name=name):
                try:
                    return self.scope[name]
                except KeyError:
                    raise ValueError(f"variable {name!r} is used outside its scope") from None
            case LoadExpr(buffer=buf, indices=idx):
                ty = ops.lltype(buf.dtype)
                ptr = self.address(buf, idx)
                return self.annotate(b.load(ptr, typ=ty, align=buf.dtype.itemsize), buf)
            case BinaryExpr(op=op, a=x, b=y, dtype=dtype):
                fused = fused_product(e)
                if fused is not None:
                    prod, other, first = fused
                    return ops.mul_add(b, op, first, (self.typed(prod.a, dtype),
                                                      self.typed(prod.b, dtype)),
                                       self.typed(other, dtype))
                return ops.binary(b, op, dtype, self.typed(x, dtype), self.typed(y, dtype))
            case Compare():
                return b.zext(self.cond(e), I8)
            case Unary(op=op, a=x, dtype=dtype):
                return ops.unary(b, op, dtype, self.typed(x, dtype))
            case Call(fn="bitcast", args=(x,), dtype=dtype):
                return ops.call(b, "bitcast", dtype, self.expr(x))
            case Call(fn=fn, args=args, dtype=dtype):
                return ops.call(b, fn, dtype, *(self.typed(x, dtype) for x in args))
            case Select(cond=c, a=x, b=y, dtype=dtype):
                return b.select(self.cond(c), self.typed(x, dtype), self.typed(y, dtype))
            case Cast(a=x, dtype=dtype):
                return ops.cast(b, self.expr(x), x.dtype, dtype)
            case _:
                raise TypeError(f"unknown loop-IR expression {e!r}")


def _only_unrolled_loops(s: Stmt) -> bool:
    """No loops in `s` but UNROLLED ones (LLVM vectorizes innermost loops only)."""
    return all(x.kind is ForKind.UNROLLED for x in walk_stmts(s) if isinstance(x, For))

