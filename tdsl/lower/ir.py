"""The loop IR: where lowering ends and both backends begin.

A small closed IR of frozen, slotted dataclasses. Expressions carry a dtype:
one of the tdsl element types (numpy semantics: same-dtype integers wrap,
`floordiv`/`mod` floor, `truediv` is float division) or `dtypes.index`, the
64-bit type of loop variables, sizes and offsets, whose arithmetic is plain
and never wraps in practice. The last passes (`flatten`, `legalise`) leave
one row-major offset per access and only core operations, which is what the
targets take.

Operands of a `Binary` or `Compare` always have the same dtype (lowering
inserts `Cast`s), except that a `Binary` of dtype index takes index operands.

Neither backend knows about isl; `lower` knows nothing about C or LLVM.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal, TypeVar, dataclass_transform, get_args

from ..compute import ops
from ..dtypes import DType, index

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True)
def _node(cls: type[_T]) -> type[_T]:
    """Make `cls` a frozen, slotted dataclass: an IR node."""
    return dataclass(frozen=True, slots=True)(cls)


class Expr:
    """Base of the loop IR's expressions."""

    __slots__ = ()

    if TYPE_CHECKING:
        # a field of some nodes, a property computed from the operands of others

        @property
        def dtype(self) -> DType:
            """The element type of the expression's value."""
            ...


@_node
class Const(Expr):
    value: int | float | bool
    dtype: DType


def index_const(n: int) -> Const:
    """An integer constant of the index type."""
    return Const(int(n), index)


def int_value(e: Expr) -> int | None:
    """The value of `e` when it is an integer constant (as index constants are), else None."""
    return e.value if isinstance(e, Const) and isinstance(e.value, int) else None


@_node
class Var(Expr):
    """A loop variable, symbolic size or offset (dtype index)."""

    name: str
    dtype: DType = index


# "input" and "output" buffers are kernel arguments, a "temp" is allocated by an `Allocate`
BufferKind = Literal["input", "output", "temp"]


@_node
class Buffer:
    """A dense row-major array. `shape` entries are index expressions of sizes only."""

    name: str
    dtype: DType
    shape: tuple[Expr, ...]
    kind: BufferKind


@_node
class Load(Expr):
    buffer: Buffer
    indices: tuple[Expr, ...]  # one index expression (dtype index) per buffer dim

    @property
    def dtype(self) -> DType:
        return self.buffer.dtype


# numpy's operations of those names (`compute.ops`, the algorithm's vocabulary, which
# these extend; lshift/rshift: numpy's shifts, any count);
# pdiv and pmod are index only (C semantics: the numerator known non-negative, the
# divisor a positive constant); tdiv, trem, shl, ashr and lshr are core operations
# from the legalise pass (truncating; trem on floats is fmod; the divisor is never
# 0, nor -1 with a signed MIN numerator; a shift count is in [0, bits))
BinaryOp = Literal[ops.BinaryOp, "pdiv", "pmod", "tdiv", "trem", "shl", "ashr", "lshr"]
CompareOp = ops.CompareOp
UnaryOp = ops.UnaryOp  # invert on bool is logical not
# core, from the legalise pass: copysign (2 args); bitcast (the bits of a float as the
# int of its width, or back). atan2 and pow take 2 args; round is rint (halves to even).
# clock (no args, index): a monotonic clock in nanoseconds, read where it stands (only
# the profile pass writes it, in a kernel of its own).
# The fixed-point operations (`compute.fixed_point`) are written out by the legalise pass.
# The Arm DSP operations (`DSP_CALLS`) come from the dsp pass, only inside the first branch
# of an `IfFeature("arm_dsp", ...)`
DspFn = Literal["sxtb16", "sxtb16_ror8", "uxtb16", "uxtb16_ror8", "sxtab16", "sxtab16_ror8",
                "uxtab16", "uxtab16_ror8", "smlad", "smlabb", "smlatt", "ssat", "usat"]
CallFn = Literal[ops.CallFn, "copysign", "bitcast", "clock", DspFn]
# Arm v7E-M DSP operations on 32-bit words holding two 16-bit halves (ACLE's intrinsics of
# those names; "_ror8": of the word rotated right by 8 bits): x(t)b16(w) is bytes 0 and 2
# of w sign- (zero-) extended into the low and high halves (bytes 1 and 3 with _ror8);
# x(t)ab16(a, w) adds them to a's halves (each half wrapping); smlad(a, b, acc) is
# acc + a.lo * b.lo + a.hi * b.hi on the signed halves, wrapping in int32; smlabb(a, b,
# acc) is acc + a.lo * b.lo, smlatt(a, b, acc) acc + a.hi * b.hi; ssat(x, n) is x clamped
# to [-2^(n-1), 2^(n-1) - 1], usat(x, n) to [0, 2^n - 1] (n a constant)
DSP_CALLS: frozenset[DspFn] = frozenset(get_args(DspFn))

# the comparison that holds exactly where `op` does not (on integers: NaN aside)
NEGATED: dict[CompareOp, CompareOp] = {
    "lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}


@_node
class Binary(Expr):
    op: BinaryOp
    a: Expr
    b: Expr
    dtype: DType


@_node
class Compare(Expr):
    op: CompareOp
    a: Expr
    b: Expr

    @property
    def dtype(self) -> DType:
        from ..dtypes import bool_

        return bool_


@_node
class Unary(Expr):
    op: UnaryOp
    a: Expr
    dtype: DType


@_node
class Call(Expr):
    fn: CallFn
    args: tuple[Expr, ...]
    dtype: DType


@_node
class PackedLoad(Expr):
    """The `lanes` consecutive elements of an 8-bit (4 lanes) or 16-bit (2 lanes)
    buffer from flat index `indices[0]`, as one uint32 word, the first element in the
    low bits (a 32-bit load on a little-endian core, aligned or not). From the dsp pass,
    inside an `IfFeature` only."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    lanes: int

    @property
    def dtype(self) -> DType:
        from ..dtypes import uint32

        return uint32


@_node
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr
    dtype: DType


@_node
class Cast(Expr):
    a: Expr
    dtype: DType


# ---------------------------------------------------------------- statements


class Stmt:
    __slots__ = ()


class ForKind(Enum):
    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"


@_node
class Reassociation:
    """The mark of a reduction loop scheduled with `reassociate=True`: its iterations
    accumulate `op` into `buffer` (from `identity`) and may be regrouped. `what` names
    the primitive, for the error when the loop's body does not allow it. Lowering
    marks the loop; the reassociate pass rewrites it and removes the mark."""

    buffer: Buffer
    op: BinaryOp
    identity: int | float | bool
    what: str


@_node
class Task:
    """A parallel loop made a task of the thread pool (the `outline` pass): its body
    becomes a function of its own that runs a chunk of the loop's iterations, called
    by the pool's threads (`abi.PARALLEL_FOR`).

    `name` is unique among the function's tasks (the targets name the task's
    function after it); the body reads `values` (variables bound outside the loop:
    sizes, enclosing loop variables, lets, with their dtypes) and `buffers` (arrays,
    the status and temps allocated outside the loop) from its caller, in that order;
    `fails` says that an iteration may fail to allocate (`abi.may_fail`), in which
    case the chunk reports it and no chunk starts after it."""

    name: str
    values: tuple[Var, ...]
    buffers: tuple[Buffer, ...]
    fails: bool


@_node
class For(Stmt):
    """for var in [start, end): body. `max_extent` bounds end - start when known;
    `reassociate` marks a reduction loop the reassociate pass has yet to rewrite;
    `task`, on a parallel loop once the outline pass has run, how it runs on the
    thread pool; `auto_vector`, on a serial loop no schedule vectorized, the vector
    bytes the auto_simd pass planned it for (`lower.vectors.auto_vector_plan`): the
    targets run it as vector code."""

    var: str
    start: Expr
    end: Expr
    kind: ForKind
    body: Stmt
    max_extent: int | None = None
    reassociate: Reassociation | None = None
    task: Task | None = None
    auto_vector: int | None = None


@_node
class If(Stmt):
    cond: Expr
    then: Stmt
    else_: Stmt | None = None


@_node
class Block(Stmt):
    stmts: tuple[Stmt, ...]


# a target feature a portable function may test for (C: `__ARM_FEATURE_DSP`)
Feature = Literal["arm_dsp"]


@_node
class IfFeature(Stmt):
    """`then` where the compiler targets `feature`, else `else_`: the same effect, the
    first through operations of the feature (C: `#if` on the compiler's feature macro).
    From the dsp pass, for portable C only."""

    feature: Feature
    then: Stmt
    else_: Stmt


@_node
class Binder(Stmt):
    """The bounds of a block (`poly.model.Group.bounds`: names and their values) set for
    the statements after it, where isl's AST placed the block's binder statement. Only
    in what `convert` returns: the place_binders pass replaces each by lets around the
    statements that use the bounds, and the verifier refuses it."""

    lets: tuple[tuple[str, Expr], ...]


# an x86 extension a grouped product or a transposing copy is done with (LLVM's name)
X86Feature = Literal["avx512bw", "avx512vnni", "avx512vl"]


@_node
class GroupedProducts(Stmt):
    """n consecutive vectorized loops over the same lanes (the group pass)

        for v in [lo, hi): acc[i] = acc[i] + int32(xs[0]) * int32(b[j])
        ...
        for v in [lo, hi): acc[i] = acc[i] + int32(xs[n - 1]) * int32(b[j + n - 1])

    with i advancing by 1 and j by n with v: together, acc[i] += the n products of
    the group per lane, which x86 does for 16 lanes in one instruction, reading b's
    16 n values as one vector: pairs of int16 (`vpmaddwd`, VNNI's `vpdpwssd`), quads
    of bytes (VNNI's `vpdpbusd`, one operand unsigned and the other signed).
    `acc_first` and `b_first` are the indices at v = lo; `packed`, when the xs are
    loads of consecutive elements of one buffer, the first of them.

    `guard` is None when the loops always run over `lanes` lanes. The last tile of
    a split that does not divide its loop ends the loops at hi = min(lo + lanes, e):
    then `guard` is the condition lo + lanes <= e under which all lanes are there,
    and where it fails the loops themselves run. `fallback` is the loops themselves,
    which a target runs where the CPU lacks `feature` (or the guard fails)."""

    acc: Buffer
    acc_first: Expr
    xs: tuple[Expr, ...]
    b: Buffer
    b_first: Expr
    lanes: int
    guard: Expr | None
    packed: Load | None
    fallback: Stmt

    @property
    def size(self) -> int:
        """The number of products in a group: 2 or 4."""
        return len(self.xs)

    @property
    def feature(self) -> X86Feature:
        """The x86 extension whose instruction does the group (LLVM's name): avx512bw for
        pairs, avx512vnni for quads."""
        return "avx512bw" if self.size == 2 else "avx512vnni"

    @property
    def x_unsigned(self) -> bool:
        """Whether the uniform operands are the unsigned bytes of a quad (b the signed);
        `vpdpbusd` takes the unsigned operand first."""
        return self.size == 4 and self.b.dtype.name == "int8"


@_node
class Batch:
    """The loop around a transposing copy's block (`TransposingCopy.batch`): one copy
    for each `var` in [start, end)."""

    var: str
    start: Expr
    end: Expr


@_node
class TransposingCopy(Stmt):
    """A loop nest `for c: [for b:] vectorized for r: dst[d + c * dst_stride + r] =
    src[s + r * src_stride + c]` (the transpose pass): with d and s the indices at the
    first iterations of c and r (`dst_base`, `src_base`), a copy of a block of `rows` x
    `cols` 32-bit elements to its transpose, done in tiles of vector shuffles; with
    `batch` (the loop over b), one such copy per iteration of b, whose variable the
    bases may read. `fallback` is the loop nest itself, which a target runs where the
    CPU lacks `feature`."""

    dst: Buffer
    dst_base: Expr
    dst_stride: int
    src: Buffer
    src_base: Expr
    src_stride: int
    rows: int
    cols: int
    batch: Batch | None
    fallback: Stmt

    @property
    def feature(self) -> X86Feature:
        """The x86 extension the tiles of shuffles take (masked 256-bit loads and stores)."""
        return "avx512vl"


@_node
class StreamedStores(Stmt):
    """Simd loop `loop` (vectorized, or marked `auto_vector`) whose stores of each of
    `buffers` (outputs stored nontemporal, `LoweredFunc.nontemporal`) go to a stack
    buffer of `extent` elements instead, lane k standing for iteration start + k,
    copied out after the loop with streaming stores from the element at `firsts[n]`
    of `buffers[n]` on (the stream pass, for host C: its compiler makes no streaming
    stores of a loop's ordinary ones). In the loop, each of `buffers` is stored, and
    read, only at that element of the iteration."""

    loop: For
    buffers: tuple[Buffer, ...]
    firsts: tuple[Expr, ...]
    extent: int


# the variable an atomic store's value reads: the element's value before the store
ATOMIC_OLD = "tdsl_old"


@_node
class Store(Stmt):
    """`buffer[indices] = value`.

    An atomic store (`atomic=True`) is a read-modify-write that threads running it
    on the same element do not lose: its value is a function of
    `Var(ATOMIC_OLD, buffer.dtype)`, the element's value before the store, and the
    element becomes that function of it, as one indivisible step (a compare-and-swap
    loop, or the target's atomic add). The value reads no other element of `buffer`.
    """

    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr
    atomic: bool = False


@_node
class Let(Stmt):
    """Bind `name` to `value` for `body`; uses are `Var(name, value.dtype)`."""

    name: str
    value: Expr
    body: Stmt


class Storage(Enum):
    """Where a temp buffer lives. The allocate pass decides it (`passes.allocate`), the
    verifier checks it, the backends only read it; what a failure does is `abi`'s
    unwind policy.

    STACK      an array of constant size, at most STACK_LIMIT bytes, in the frame of
               the function that runs the Allocate; cannot fail
    HEAP       obtained from the system allocator when the Allocate runs and released
               after its body; the one kind of allocation that can fail
    WORKSPACE  a slot of a workspace the caller passes in (portable C, `td.emit_c`),
               for every temp that is not `register_sized` (those stay on the
               stack, as locals); cannot fail (the entry point checks the
               workspace first)
    """

    STACK = "stack"
    HEAP = "heap"
    WORKSPACE = "workspace"


@_node
class Allocate(Stmt):
    """A temp buffer live for `body`; its element count is the product of its shape.

    `storage` is None until the allocate pass has placed the buffer."""

    buffer: Buffer
    body: Stmt
    storage: Storage | None = None


STACK_LIMIT = 64 * 1024  # bytes; larger or symbolic temps live on the heap (or in a workspace)


def constant_elements(buf: Buffer) -> int | None:
    """The element count of a buffer of constant shape; None when its shape has a size."""
    count = 1
    for extent in buf.shape:
        if not isinstance(extent, Const):
            return None
        count *= max(int(extent.value), 0)
    return count


# a temp of at most this many elements and bytes is register-sized: a target that takes
# its caller's workspace (portable C) keeps it in locals, which its compiler holds in
# registers (a reduction's accumulator, a block of a few sums), not in the workspace
REGISTER_ELEMENTS, REGISTER_BYTES = 8, 32


def register_sized(buf: Buffer) -> bool:
    """Whether a temp buffer is small enough for registers: a constant shape of at most
    REGISTER_ELEMENTS elements and REGISTER_BYTES bytes."""
    count = constant_elements(buf)
    return (count is not None and count <= REGISTER_ELEMENTS
            and count * buf.dtype.itemsize <= REGISTER_BYTES)


def fits_stack(buf: Buffer) -> bool:
    """Whether a temp buffer may live on the stack: constant shape, at most STACK_LIMIT bytes."""
    count = constant_elements(buf)
    return count is not None and count * buf.dtype.itemsize <= STACK_LIMIT


@_node
class Target:
    """The target a function is lowered for (`LoweredFunc.target`), which the late
    passes that plan for a backend read: `backend` "c" (host C through the C
    compiler: auto-SIMD loops of constant extent cut into whole vectors and the rest,
    streamed stores staged through the stack) or "llvm"; `vector_bytes`, the widest
    vector the auto_simd pass plans loops for."""

    backend: Literal["c", "llvm"] = "c"
    vector_bytes: int = 64


HOST_C = Target("c", 64)


# what a portable function may use beyond C99 (`LoweredFunc.isa`)
Isa = Literal["generic", "armv7e-m"]
ISAS: tuple[Isa, ...] = ("generic", "armv7e-m")


@_node
class LoweredFunc:
    """A whole kernel: arguments in call order, then its body.

    inputs and outputs are buffers (kind "input"/"output") in declaration
    order; sizes are index Vars in alphabetical order. A buffer name names one
    buffer throughout the function.

    `status`, when given, is a one-element int32 temp buffer the function itself
    holds: 0 when it starts, set by the body to a status of `abi.STATUS` (every
    writer stores the same code, so writes from parallel iterations agree), and
    returned at the end when nothing failed before.

    `nontemporal` names the outputs whose contiguous vector stores bypass the
    caches (`Schedule.store_nontemporal`); the targets fence after them.

    `portable` marks a function lowered for portable C (`td.emit_c`): small cores, a
    compiler tdsl does not control, code size counted; `isa` names the instruction set
    it may use beyond plain C ("armv7e-m": the Arm DSP extension, under a test of the
    compiler's feature macro).

    `target` is what the late passes that plan for one backend plan for (`Target`;
    `lower.finish` sets it); a portable function's is not read.

    `index_limits`, set by the `index32` pass when the body's index arithmetic is
    32-bit (`dtypes.index32`), are polynomials in the sizes, each a sum of
    `coefficient * size * size ...` terms given as (coefficient, size names); the
    entry point refuses sizes for which one exceeds INT32_MAX.
    """

    name: str
    inputs: tuple[Buffer, ...]
    outputs: tuple[Buffer, ...]
    sizes: tuple[Var, ...]
    body: Stmt
    status: Buffer | None = None
    nontemporal: frozenset[str] = frozenset()
    index_limits: tuple[tuple[tuple[int, tuple[str, ...]], ...], ...] = ()
    portable: bool = False
    isa: Isa = "generic"
    target: Target = HOST_C

    @property
    def status_name(self) -> str | None:
        """The name of the status buffer, if the function has one."""
        return self.status.name if self.status is not None else None

    def __str__(self) -> str:
        from .printer import show

        return show(self)

    def __repr__(self) -> str:
        """The loop nest, as `print` shows it (a REPL echoing `td.lower(s)` shows the nest,
        not the node's fields)."""
        return str(self)

    def _repr_html_(self) -> str:
        """In Jupyter: the loop nest as td.lower prints it, highlighted."""
        from ..display import code_html, escape

        return f"<div><b>loop nest</b> {escape(self.name)}{code_html(str(self), 'nest')}</div>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """In IPython's terminal: the loop nest, not the node's fields."""
        p.text(str(self))
