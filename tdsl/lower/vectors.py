"""What a vectorized loop becomes: lanes, chunks, and how each access is done.

A VECTORIZED loop of the final loop IR (after the late passes) runs its body
once per *chunk* of consecutive iterations, each iteration a lane of a
vector. `plan(loop)` decides, without looking at any target:

- whether the loop can run as vector code at all, and if not why (an atomic
  update, whose lanes may hit one element; a parallel loop or a heap temp
  inside; an inner loop whose bounds differ between lanes);
- its chunks: a loop of `extent` iterations is cut into chunks of `width`
  lanes (the largest power of two <= min(extent, MAX_LANES)); a constant
  remainder becomes smaller power-of-two chunks (24 = 16 + 8), a remainder
  known only at run time one chunk whose extra lanes are masked off;
- the shape of every index over the lanes (`Shape`): the same in every lane,
  linear (`base + stride * lane`), or varying, and from that the kind of
  each load and store (`Access`): contiguous vector access, broadcast of one
  element, strided (one element per lane, no gather instruction), or a
  gather/scatter where an index is data-dependent or not affine in the lane.

A read through `td.pad` is a select whose first arm loads at a clamped index;
where the select's condition makes the clamp the identity (`guarded_arm`), the
arm's load is done on the condition's lanes alone, at the index itself: a
masked contiguous load in a loop's boundary chunk, not a gather. (The C
backend keeps the clamp and leaves the choice to the C compiler: gcc does not
if-convert every such load into a masked one.)

A temp allocated inside the loop is private to each lane: it is widened to
one copy per lane, element e of lane l at `e * width + l`, so an access with
an index the same in every lane is contiguous.

The LLVM backend emits exactly this plan (`backend_llvm.vector`); the C
backend asks the C compiler for the same loops with `#pragma omp simd`.

Two idioms of vectorized loops, small-integer products taken in groups and
transposing copies, are recognised by passes of their own (`passes.group`,
`passes.transpose`), which make them statements of the loop IR.

`report(func)` lists the plan of every vectorized loop of a function, which
`Kernel.vectorization` shows and `td.build` warns about.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .. import dtypes as dt
from . import ir
from .passes.simplify import constant_difference, normalize
from .rewrite import (
    Rewriter,
    Substitute,
    expr_children,
    expr_vars,
    stmt_exprs,
    walk_exprs,
    walk_stmts,
)

MAX_LANES = 64  # the widest chunk, in lanes


@dataclass(frozen=True)
class Shape:
    """How a value varies over the lanes of a chunk: `uniform` (one value for every
    lane), `linear` (lane l holds base + stride * l, index values only) or `varying`.
    `data` marks a value read from memory at a lane-dependent place."""

    kind: str
    stride: int = 0
    data: bool = False


UNIFORM = Shape("uniform")
LANE = Shape("linear", 1)


def _varying(*shapes: Shape) -> Shape:
    return Shape("varying", data=any(s.data for s in shapes))


def lane_shape(e: ir.Expr, env: Mapping[str, Shape], private: frozenset[str]) -> Shape:
    """The shape of `e` over the lanes, given the shapes of the variables bound in the
    loop (`env`; unlisted variables are uniform) and the names of lane-private temps."""
    match e:
        case ir.Const():
            return UNIFORM
        case ir.Var(name=name):
            return env.get(name, UNIFORM)
        case ir.Load(buffer=buf, indices=idx):
            shapes = [lane_shape(x, env, private) for x in idx]
            if buf.name not in private and all(s.kind == "uniform" for s in shapes):
                return UNIFORM
            return Shape("varying", data=True)
        case ir.Binary():
            return _binary_shape(e, lane_shape(e.a, env, private), lane_shape(e.b, env, private))
        case ir.Unary(op=op, a=a, dtype=dtype):
            sa = lane_shape(a, env, private)
            if sa.kind == "linear" and op == "neg" and dtype == dt.index:
                return Shape("linear", -sa.stride)
            return sa if sa.kind == "uniform" else _varying(sa)
        case ir.Compare(a=a, b=b):
            shapes = [lane_shape(a, env, private), lane_shape(b, env, private)]
        case ir.Select(cond=c, a=a, b=b):
            shapes = [lane_shape(x, env, private) for x in (c, a, b)]
        case ir.Call(args=args):
            shapes = [lane_shape(x, env, private) for x in args]
        case ir.Cast(a=a):
            shapes = [lane_shape(a, env, private)]
        case _:
            raise TypeError(f"unknown loop-IR expression {e!r}")
    if all(s.kind == "uniform" for s in shapes):
        return UNIFORM
    return _varying(*shapes)


def _binary_shape(e: ir.Binary, sa: Shape, sb: Shape) -> Shape:
    """The shape of `e` from its operands' shapes: index sums and differences of linear
    values, and their products with a constant, stay linear."""
    if sa.kind == sb.kind == "uniform":
        return UNIFORM
    if e.dtype == dt.index and "varying" not in (sa.kind, sb.kind):
        if e.op in ("add", "sub"):
            stride = sa.stride + (sb.stride if e.op == "add" else -sb.stride)
            return Shape("linear", stride) if stride else UNIFORM
        if e.op == "mul":
            c = ir.int_value(e.b) if sa.kind == "linear" else ir.int_value(e.a)
            lin = sa if sa.kind == "linear" else sb
            if c is not None:
                return Shape("linear", lin.stride * c) if c else UNIFORM
    return _varying(sa, sb)


# ------------------------------------------------------ loads guarded by a select

def _conjuncts(c: ir.Expr) -> Iterator[ir.Expr]:
    if isinstance(c, ir.Binary) and c.op == "and" and c.dtype.is_bool:
        yield from _conjuncts(c.a)
        yield from _conjuncts(c.b)
    else:
        yield c


# a comparison `a op b` as `p - q >= least`: (p, q, least)
_AS_NONNEG = {"ge": (0, 1, 0), "gt": (0, 1, 1), "le": (1, 0, 0), "lt": (1, 0, 1)}


def _proves_nonneg(facts: tuple[ir.Expr, ...], e: ir.Expr) -> bool:
    """Whether the comparisons `facts`, all holding, make index expression `e` >= 0:
    some fact says p - q >= least, and e - (p - q) is a constant k with least + k >= 0."""
    for f in facts:
        if not (isinstance(f, ir.Compare) and f.a.dtype == dt.index and f.b.dtype == dt.index):
            continue
        forms = [_AS_NONNEG[f.op]] if f.op in _AS_NONNEG else \
            [(0, 1, 0), (1, 0, 0)] if f.op == "eq" else []
        for p, q, least in forms:
            sides = (f.a, f.b)
            k = constant_difference(e, ir.Binary("sub", sides[p], sides[q], dt.index))
            if k is not None and least + k >= 0:
                return True
    return False


def _unclamped(e: ir.Expr, facts: tuple[ir.Expr, ...]) -> ir.Expr:
    """Index expression `e` with each min and max that `facts` make the identity
    replaced by the operand it picks (`max(x - 1, 0)` is `x - 1` where `x - 1 >= 0`)."""
    if not (isinstance(e, ir.Binary | ir.Unary) and e.dtype == dt.index):
        return e
    if isinstance(e, ir.Unary):
        a = _unclamped(e.a, facts)
        return e if a is e.a else replace(e, a=a)
    a, b = _unclamped(e.a, facts), _unclamped(e.b, facts)
    if e.op in ("min", "max"):
        a_minus_b = ir.Binary("sub", a, b, dt.index)
        b_minus_a = ir.Binary("sub", b, a, dt.index)
        if _proves_nonneg(facts, a_minus_b if e.op == "max" else b_minus_a):
            return a
        if _proves_nonneg(facts, b_minus_a if e.op == "max" else a_minus_b):
            return b
    return e if a is e.a and b is e.b else replace(e, a=a, b=b)


def guarded_arm(sel: ir.Select, varying: Callable[[ir.Expr], bool]
                ) -> tuple[ir.Expr, frozenset[ir.Load]] | None:
    """The first arm of `sel` with its loads at unclamped indices, and those loads; None
    when no load changes.

    A read through `td.pad` is `select(0 <= e < n, t[clamp(e)], v)`: the clamp keeps the
    load in bounds on the lanes the select then discards. Where the condition holds the
    clamp is the identity, so a load done only on those lanes (masked) can use `e`
    itself: a contiguous masked load in place of a gather. A load's index is replaced
    when the condition's comparisons prove a min or max in it the identity and the new
    index differs between lanes (`varying`); a load whose new index is the same in every
    lane keeps its clamp, as it is then done unmasked. The caller evaluates the returned
    arm with the lanes of `sel.cond` masked."""
    rewrite = _Unclamp(tuple(_conjuncts(sel.cond)), varying)
    arm = rewrite.visit_expr(sel.a)
    return (arm, frozenset(rewrite.changed)) if rewrite.changed else None


class _Unclamp(Rewriter):
    """Loads at unclamped indices (see `guarded_arm`)."""

    def __init__(self, facts: tuple[ir.Expr, ...], varying: Callable[[ir.Expr], bool]):
        self.facts = facts
        self.varying = varying
        self.changed: list[ir.Load] = []

    def expr(self, e: ir.Expr) -> ir.Expr | None:
        if not isinstance(e, ir.Load) or len(e.indices) != 1:
            return None
        idx = _unclamped(e.indices[0], self.facts)
        if idx is e.indices[0] or not self.varying(idx):
            return None
        load = replace(e, indices=(idx,))
        self.changed.append(load)
        return load


def access_kind(shape: Shape, private: bool) -> str:
    """How a load or store with an index of this shape is done: "contiguous",
    "broadcast" (one element for every lane; for a store, one element written once),
    "strided", "gather" (data-dependent index) or "nonaffine" (a gather whose index
    is computed from the lane, not read from memory)."""
    if private:  # element e of lane l at e * width + l
        return "contiguous" if shape.kind == "uniform" else ("gather" if shape.data
                                                             else "nonaffine")
    if shape.kind == "uniform":
        return "broadcast"
    if shape.kind == "linear":
        return "contiguous" if shape.stride == 1 else "strided"
    return "gather" if shape.data else "nonaffine"


@dataclass(frozen=True)
class Access:
    """One load or store of a vectorized loop, as the plan does it."""

    buffer: str
    store: bool
    kind: str  # see access_kind
    masked: bool  # under a condition that differs between lanes, or in a masked chunk


@dataclass(frozen=True)
class VectorLoop:
    """The plan of one vectorized loop (an entry of `Kernel.vectorization`).

    stages: the stages (buffers) the loop writes; loop: its variable; extent: its
    iteration count when constant, else None (then `max_extent` bounds it);
    vectorized: whether it runs as vector code, and if not `reason` says why;
    chunks: the widths of its chunks (a loop of 24 runs as 16 + 8; a loop of
    unknown extent as chunks of the first width, the last one masked: `masked_tail`);
    accesses: each load and store of its body and how it is done."""

    stages: tuple[str, ...]
    loop: str
    extent: int | None
    max_extent: int
    vectorized: bool
    reason: str = ""
    chunks: tuple[int, ...] = ()
    masked_tail: bool = False
    accesses: tuple[Access, ...] = field(default=())
    copies: int = 1  # identical loops of the nest (copies made by unroll or partition)

    def counts(self) -> dict[str, int]:
        """Accesses by kind (see `access_kind`)."""
        out: dict[str, int] = {}
        for a in self.accesses:
            out[a.kind] = out.get(a.kind, 0) + 1
        return out

    def __str__(self) -> str:
        where = f"{'/'.join(self.stages) or 'no stage'}: loop {self.loop}"
        if self.copies > 1:
            where += f" ({self.copies} copies)"
        if not self.vectorized:
            return f"{where}: not vectorized ({self.reason})"
        if self.masked_tail:
            chunks = f"chunks of {self.chunks[0]} lanes, the last one masked"
        else:
            chunks = " + ".join(map(str, self.chunks)) + " lanes"
        counts = ", ".join(f"{n} {k}" for k, n in sorted(self.counts().items()))
        masked = sum(a.masked for a in self.accesses)
        extra = f", {masked} masked" if masked else ""
        return f"{where}: vectorized, {chunks} ({counts or 'no memory access'}{extra})"


class VectorReport:
    """What became of each vectorized loop of a kernel (`Kernel.vectorization`).

    Iterate it for `VectorLoop` entries, one per distinct loop (copies of one loop
    made by unrolling or loop partitioning are counted, not repeated); `missed` lists
    the loops that do not run as vector code, each with the reason. Printing it shows
    one line per loop:

        C: loop j_i (8 copies): vectorized, 16 lanes (1 broadcast, 3 contiguous)
        h: loop x: not vectorized (it makes an atomic update of h, ...)

    The LLVM backend emits exactly this. The C backend gives the loops vectorized here
    to the C compiler as `#pragma omp simd` loops, whose own vectorizer does the rest,
    and the loops missed here as plain loops.
    """

    def __init__(self, loops: tuple[VectorLoop, ...]):
        self.loops = loops

    def __iter__(self) -> Iterator[VectorLoop]:
        return iter(self.loops)

    def __len__(self) -> int:
        return len(self.loops)

    def __getitem__(self, n: int) -> VectorLoop:
        return self.loops[n]

    @property
    def missed(self) -> tuple[VectorLoop, ...]:
        """The vectorized loops that do not run as vector code."""
        return tuple(x for x in self.loops if not x.vectorized)

    def __str__(self) -> str:
        return "\n".join(map(str, self.loops)) or "no vectorized loops"

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


class NotVectorizable(Exception):
    """Why a vectorized loop's body cannot run as vector code (internal)."""


def chunk_widths(extent: int | None, max_extent: int,
                 lanes: int = MAX_LANES) -> tuple[tuple[int, ...], bool]:
    """(widths, masked_tail): the chunks a loop runs in (see the module docstring), at
    most `lanes` wide."""
    top = min(max_extent if extent is None else extent, lanes)
    width = 1 << (max(top, 1).bit_length() - 1)
    if extent is None:
        return (width,), True
    widths = [width] * (extent // width)
    rest = extent % width
    while rest:
        w = 1 << (rest.bit_length() - 1)
        widths.append(w)
        rest -= w
    return tuple(widths), False


def loop_extent(loop: ir.For) -> int | None:
    """end - start of `loop` when it is a constant."""
    return constant_difference(loop.end, loop.start)


def index_step(index: ir.Expr, var: str) -> int | None:
    """How much index `index` grows when loop variable `var` grows by 1, when that is a
    constant (None when it is not, or `index` is not provably affine in `var`)."""
    one = ir.Const(1, index.dtype)
    more = Substitute({var: ir.Binary("add", ir.Var(var), one, index.dtype)}).visit_expr(index)
    return constant_difference(more, index)


def index_at(index: ir.Expr, values: Mapping[str, ir.Expr]) -> ir.Expr:
    """Index `index` with the variables in `values` replaced, simplified."""
    return normalize(Substitute(dict(values)).visit_expr(index))


def plan(loop: ir.For, status: str | None = None, lanes: int | None = None) -> VectorLoop:
    """The plan of one VECTORIZED loop of final loop IR (see the module docstring).
    `status` names the function's status buffer, which is not a stage. With `lanes`,
    the plan of any loop (`auto_vector_plan`) in chunks of at most that many lanes,
    whatever its extent."""
    assert lanes is not None or loop.kind is ir.ForKind.VECTORIZED, (
        f"loop {loop.var} is not vectorized")
    written = sorted({s.buffer.name for s in walk_stmts(loop.body) if isinstance(s, ir.Store)}
                     - {status} - _allocated(loop.body))
    extent = loop_extent(loop)
    max_extent = loop.max_extent if loop.max_extent is not None else extent
    if lanes is not None and max_extent is None:
        max_extent = lanes
    base = VectorLoop(tuple(written), loop.var, extent, max_extent or 0, False)
    if max_extent is None:
        return replace(base, reason="its extent has no constant bound")
    chunks, masked_tail = chunk_widths(extent, max_extent, lanes or MAX_LANES)
    if max(chunks) < 2:
        return replace(base, reason="it has fewer than two iterations")
    walker = _Walker(chunks[0], status)
    try:
        walker.stmt(loop.body, {loop.var: LANE}, frozenset(), masked_tail)
    except NotVectorizable as e:
        return replace(base, reason=str(e))
    return replace(base, vectorized=True, chunks=chunks, masked_tail=masked_tail,
                 accesses=tuple(walker.accesses))


def _allocated(s: ir.Stmt) -> set[str]:
    return {x.buffer.name for x in walk_stmts(s) if isinstance(x, ir.Allocate)}


class _Walker:
    """Checks a vectorized loop's body and lists its accesses (see `plan`)."""

    def __init__(self, width: int, status: str | None):
        self.width = width
        self.status = status  # the function's status: not listed among the accesses
        self.accesses: list[Access] = []

    def loads(self, e: ir.Expr, env: dict[str, Shape], private: frozenset[str],
              masked: bool) -> Shape:
        """Lists the loads of `e` and returns its shape."""
        self.list_loads(e, env, private, masked)
        return lane_shape(e, env, private)

    def list_loads(self, e: ir.Expr, env: dict[str, Shape], private: frozenset[str],
                   masked: bool) -> None:
        """The loads of `e`; those of a guarded select arm (`guarded_arm`) at their
        unclamped indices, masked."""
        if isinstance(e, ir.Select):
            guarded = guarded_arm(e, lambda x: lane_shape(x, env, private).kind != "uniform")
            if guarded is not None:
                self.list_loads(e.cond, env, private, masked)
                self.list_loads(guarded[0], env, private, True)
                self.list_loads(e.b, env, private, masked)
                return
        if isinstance(e, ir.Load):
            shape = lane_shape(e.indices[0], env, private)
            kind = access_kind(shape, e.buffer.name in private)
            self.accesses.append(Access(e.buffer.name, False, kind, masked))
        for x in expr_children(e):
            self.list_loads(x, env, private, masked)

    def stmt(self, s: ir.Stmt, env: dict[str, Shape], private: frozenset[str],
             masked: bool) -> None:
        match s:
            case ir.Block(stmts=stmts):
                for x in stmts:
                    self.stmt(x, env, private, masked)
            case ir.Store(atomic=True):
                raise NotVectorizable(f"it makes an atomic update of {s.buffer.name}, "
                                      "which lanes may make to one element")
            case ir.Store():
                self.store(s, env, private, masked)
            case ir.Let(name=name, value=value, body=body):
                shape = self.loads(value, env, private, masked)
                self.stmt(body, {**env, name: shape}, private, masked)
            case ir.If(cond=cond, then=then, else_=other):
                varying = self.loads(cond, env, private, masked).kind != "uniform"
                self.stmt(then, env, private, masked or varying)
                if other is not None:
                    self.stmt(other, env, private, masked or varying)
            case ir.For(kind=ir.ForKind.PARALLEL):
                raise NotVectorizable(f"parallel loop {s.var} is inside it")
            case ir.For(var=var, start=start, end=end, body=body):
                for bound in (start, end):
                    if self.loads(bound, env, private, masked).kind != "uniform":
                        raise NotVectorizable(f"the bounds of loop {var} inside it differ "
                                              "between its iterations")
                self.stmt(body, {**env, var: UNIFORM}, private, masked)
            case ir.Allocate(buffer=buf, body=body):
                self.check_private(s)
                self.stmt(body, env, private | {buf.name}, masked)
            case ir.GroupedProducts(fallback=body) | ir.TransposingCopy(fallback=body):
                self.stmt(body, env, private, masked)  # as the loops they stand for
            case ir.StreamedStores(loop=body):
                self.stmt(body, env, private, masked)
            case _:
                raise TypeError(f"unknown loop-IR statement {s!r}")

    def store(self, s: ir.Store, env: dict[str, Shape], private: frozenset[str],
              masked: bool) -> None:
        buf = s.buffer
        if len(s.indices) != 1:
            raise ValueError(f"access to {buf.name!r} is not flat")
        shape = self.loads(s.indices[0], env, private, masked)
        vshape = self.loads(s.value, env, private, masked)
        kind = access_kind(shape, buf.name in private)
        if kind == "broadcast" and vshape.kind != "uniform":
            raise NotVectorizable(f"every lane stores a different value into one "
                                  f"element of {buf.name}")
        if buf.name != self.status:
            self.accesses.append(Access(buf.name, True, kind, masked))

    def check_private(self, s: ir.Allocate) -> None:
        """A temp allocated inside the loop: it needs a copy per lane, on the stack."""
        buf = s.buffer
        count = ir.constant_elements(buf)
        if s.storage is not ir.Storage.STACK or count is None:
            raise NotVectorizable(f"temp {buf.name} inside it is not a stack array "
                                  "(each lane needs its own copy)")
        if count * buf.dtype.itemsize * self.width > ir.STACK_LIMIT:
            raise NotVectorizable(f"temp {buf.name} inside it is too large for a "
                                  f"copy per lane ({count} elements)")


def report(func: ir.LoweredFunc) -> VectorReport:
    """The plan of every outermost VECTORIZED loop of final loop IR, in program order,
    identical plans merged (a vectorized loop inside another one runs as a loop over
    the outer one's lanes)."""
    status = func.status_name
    out: list[VectorLoop] = []

    def visit(s: ir.Stmt) -> None:
        match s:
            case ir.For(kind=ir.ForKind.VECTORIZED):
                out.append(plan(s, status))
            case ir.For(body=body) | ir.Let(body=body) | ir.Allocate(body=body):
                visit(body)
            case ir.GroupedProducts(fallback=body) | ir.TransposingCopy(fallback=body):
                visit(body)
            case ir.StreamedStores(loop=body):
                visit(body)
            case ir.Block(stmts=stmts):
                for x in stmts:
                    visit(x)
            case ir.If(then=then, else_=other):
                visit(then)
                if other is not None:
                    visit(other)

    visit(func.body)
    merged: dict[VectorLoop, int] = {}
    for x in out:
        merged[x] = merged.get(x, 0) + 1
    return VectorReport(tuple(replace(x, copies=n) for x, n in merged.items()))


def independent(loop: ir.For, status: str | None = None) -> bool:
    """Whether the iterations of `loop` are independent, by a test on the loop IR alone:
    every buffer the body writes (other than temps allocated inside it) is read and
    written only at one index, the same expression everywhere, linear in the loop's
    variable with a stride other than 0 and otherwise made of variables bound outside
    the loop. Each iteration then touches its own element of each such buffer, and
    no iteration reads what another writes. Conservative: False when unsure (an
    atomic update, a parallel loop inside, two spellings of one index). `status` names
    the function's status, which every writer sets to the same code."""
    private = _allocated(loop.body) | {status}
    written: dict[str, tuple[ir.Expr, ...]] = {}
    for s in walk_stmts(loop.body):
        if isinstance(s, ir.Store) and s.buffer.name not in private:
            if s.atomic or written.get(s.buffer.name, s.indices) != s.indices:
                return False
            written[s.buffer.name] = s.indices
        if isinstance(s, ir.For) and s.kind is ir.ForKind.PARALLEL:
            return False
    inner = _bound_inside(loop.body)
    for indices in written.values():
        if len(indices) != 1 or expr_vars(indices[0]) & inner:
            return False
        shape = lane_shape(indices[0], {loop.var: LANE}, frozenset())
        if shape.kind != "linear":
            return False
    for s in walk_stmts(loop.body):
        for e in stmt_exprs(s):
            for x in walk_exprs(e):
                if isinstance(x, ir.Load) and x.buffer.name in written and (
                        x.indices != written[x.buffer.name]):
                    return False
    return True


def _bound_inside(s: ir.Stmt) -> set[str]:
    """The variables bound inside `s`: loop variables and let names."""
    return {x.var for x in walk_stmts(s) if isinstance(x, ir.For)} | {
        x.name for x in walk_stmts(s) if isinstance(x, ir.Let)}


def auto_vector_plan(loop: ir.For, vector_bytes: int,
                     status: str | None = None) -> VectorLoop | None:
    """The plan to run a loop no schedule vectorized as vector code, when that is safe
    and pays; None otherwise. It is for what a loop vectorizer of innermost loops
    cannot do: a SERIAL loop with a loop inside (an outer loop around a reduction, as
    an unscheduled matmul's j around its k), whose iterations are `independent`, with
    no vectorized or parallel loop inside, whose plan has a contiguous access and no
    strided or gathered one. Its lanes fill `vector_bytes` with the widest element
    the loop stores."""
    if loop.kind is not ir.ForKind.SERIAL:
        return None
    inside = list(walk_stmts(loop.body))
    loops = [x for x in inside if isinstance(x, ir.For)]
    if not loops or any(x.kind in (ir.ForKind.VECTORIZED, ir.ForKind.PARALLEL) for x in loops):
        return None
    widest = max((x.buffer.dtype.itemsize for x in inside if isinstance(x, ir.Store)),
                 default=4)
    lanes = vector_bytes // widest
    if lanes < 2 or not independent(loop, status):
        return None
    out = plan(loop, status, lanes=lanes)
    kinds = out.counts()
    if not out.vectorized or "contiguous" not in kinds or set(kinds) - {"contiguous",
                                                                        "broadcast"}:
        return None
    return out
