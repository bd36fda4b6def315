"""The loop-IR verifier, run between passes.

Checks: every variable is declared before use (sizes, loop variables,
lets); loop variables are not redeclared in their own scope; indices have
an index dtype (`index`, or `index32` once the index32 pass has narrowed them); either every access has one index per dimension of its
buffer or, once the `flatten` pass has run, every access has exactly one (its
row-major offset); Binary/Compare operands share a dtype; the core operations
of the legalise pass are used where they are defined (`tdiv` on integers, `trem`
not on bool, `pdiv`/`pmod` on index, `bitcast` between a float and the int of
its width, each function with its number of arguments); vectorized and
unrolled loops have a constant max extent; every
temp buffer is used only inside its Allocate; a name names one buffer; every
operation, function, loop kind and buffer kind is one of its vocabulary (the
Literal types and `ForKind` of the loop IR), so a misspelt one is refused here
naming the valid ones instead of reaching a backend; the Arm DSP operations and
packed loads appear only where an `IfFeature` tests for them; every allocation has
its storage once the allocate pass has run, and one on the stack has a
constant size within `ir.STACK_LIMIT`; a loop with a task (`ir.Task`, from the
outline pass) is a parallel loop outside any other parallel loop, its task's
values and buffers are exactly what its body uses from outside, and task names
are unique; a loop marked auto simd is serial; grouped products are 2 or 4 narrow
products into int32 sums over whole 512-bit vectors, a transposing copy copies between
two buffers of one 32-bit type, and streamed stores stage outputs stored nontemporal.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import get_args

from ... import dtypes as dt
from .. import ir
from ..rewrite import ScopedVisitor, stmt_exprs, walk_exprs, walk_stmts
from .outline import captures


class VerifyError(AssertionError):
    pass


def _vocabulary(alias: object) -> frozenset[str]:
    return frozenset(get_args(alias))


_BINARY, _COMPARE = _vocabulary(ir.BinaryOp), _vocabulary(ir.CompareOp)
_UNARY, _CALL = _vocabulary(ir.UnaryOp), _vocabulary(ir.CallFn)
_BUFFER_KINDS = _vocabulary(ir.BufferKind)
_FEATURES = _vocabulary(ir.Feature)


_ARITY = {"copysign": 2, "atan2": 2, "pow": 2, "clock": 0, "saturating_add": 2, "saturating_sub": 2,
          "rounding_shift_right": 2, "rounding_mul_shift_right": 3, "requantize": 3,
          "sxtab16": 2, "sxtab16_ror8": 2, "uxtab16": 2, "uxtab16_ror8": 2, "smlad": 3,
          "smlabb": 3, "smlatt": 3, "ssat": 2, "usat": 2}
# (every other function takes one argument)


def _operation(e: ir.Binary | ir.Call) -> None:
    """The operation is defined for its operands."""
    if isinstance(e, ir.Binary):
        d = e.dtype
        if e.op in ("pdiv", "pmod") and d not in dt.INDEX_TYPES:
            raise VerifyError(f"{e.op} on {d!r}: index only")
        if e.op == "tdiv" and not d.is_int or e.op == "trem" and d.is_bool:
            raise VerifyError(f"{e.op} on {d!r}")
        return
    if _ARITY.get(e.fn, 1) != len(e.args):
        raise VerifyError(f"call {e.fn} of {len(e.args)} arguments")
    if e.fn == "clock" and e.dtype != dt.index:
        raise VerifyError(f"clock of {e.dtype!r}: index only")
    if e.fn == "bitcast":
        src = e.args[0].dtype
        if (src.bits != e.dtype.bits or src.is_float == e.dtype.is_float
                or src.is_bool or e.dtype.is_bool):
            raise VerifyError(f"bitcast of {src!r} to {e.dtype!r}")


def _known(value: object, valid: frozenset[str], what: str) -> None:
    """A node's field holds one of the values of its vocabulary."""
    if value not in valid:
        raise VerifyError(f"{what} {value!r} is not one of: {', '.join(sorted(valid))}")


class _Verifier(ScopedVisitor):
    placed = True  # allocations have their storage (the allocate pass has run)

    def expr(self, e: ir.Expr) -> None:
        match e:
            case ir.Var(name):
                if name not in self.scope:
                    raise VerifyError(f"variable {name} used outside its scope")
            case ir.Load(buf, idx):
                self.buffer(buf, idx)
            case ir.Binary(op, a, b, d):
                _known(op, _BINARY, "binary operation")
                _operation(e)
                if d in dt.INDEX_TYPES:
                    if a.dtype != d or b.dtype != d:
                        raise VerifyError(f"index {op} on {a.dtype!r}, {b.dtype!r}")
                elif op in ("and", "or") and d == dt.bool_:
                    pass
                elif a.dtype != b.dtype:
                    raise VerifyError(f"{op} on different dtypes {a.dtype!r}, {b.dtype!r}")
            case ir.Compare(op, a, b):
                _known(op, _COMPARE, "comparison")
                if a.dtype != b.dtype:
                    raise VerifyError(f"compare {op} on different dtypes {a.dtype!r}, {b.dtype!r}")
            case ir.Unary(op):
                _known(op, _UNARY, "unary operation")
            case ir.Call(fn):
                _known(fn, _CALL, "function")
                _operation(e)
            case ir.PackedLoad(buf, idx, lanes):
                self.buffer(buf, idx)
                if buf.dtype.bits * lanes != 32 or not buf.dtype.is_int:
                    raise VerifyError(f"packed load of {lanes} {buf.dtype!r} elements of "
                                      f"{buf.name}: four 8-bit or two 16-bit integers")

    def stmt(self, s: ir.Stmt) -> None:
        match s:
            case ir.For():
                self.loop(s)
            case ir.GroupedProducts() | ir.TransposingCopy() | ir.StreamedStores():
                _idiom(s, self.scope)
            case ir.Store(buf, idx, v):
                self.buffer(buf, idx)
                if v.dtype != buf.dtype:
                    raise VerifyError(f"store of {v.dtype!r} into {buf.name} of {buf.dtype!r}")
            case ir.Allocate(buf):
                if s.storage is None and self.placed:
                    raise VerifyError(f"temp buffer {buf.name} has no storage (the allocate "
                                      "pass gives it one)")
                if s.storage is ir.Storage.STACK and not ir.fits_stack(buf):
                    raise VerifyError(f"temp buffer {buf.name} is on the stack but its size is "
                                      f"not a constant of at most {ir.STACK_LIMIT} bytes")
            case ir.Let() | ir.If() | ir.Block():
                pass
            case ir.IfFeature(feature):
                _known(feature, _FEATURES, "target feature")
            case ir.Binder(lets):
                raise VerifyError(f"the binder of {', '.join(n for n, _ in lets)} is still in "
                                  "the loop nest (the place_binders pass replaces it by lets)")
            case _:
                raise VerifyError(f"unknown statement {s!r}")

    def loop(self, s: ir.For) -> None:
        """A loop's kind, its variable, its extent and its marks."""
        var, kind, mx, mark = s.var, s.kind, s.max_extent, s.reassociate
        if mark is not None and self.placed:
            raise VerifyError(f"loop {var} is still marked for reassociation (the "
                              "reassociate pass rewrites it before allocate)")
        if not isinstance(kind, ir.ForKind):
            raise VerifyError(f"loop {var} has kind {kind!r}, not one of: "
                              f"{', '.join(f'ForKind.{k.name}' for k in ir.ForKind)}")
        if var in self.scope:
            raise VerifyError(f"loop variable {var} shadows an enclosing name")
        if kind in (ir.ForKind.VECTORIZED, ir.ForKind.UNROLLED) and mx is None:
            raise VerifyError(f"{kind.value} loop {var} has no constant extent")
        if s.auto_vector is not None and (kind is not ir.ForKind.SERIAL
                                          or s.auto_vector < 1):
            raise VerifyError(f"{kind.value} loop {var} is marked auto simd for "
                              f"{s.auto_vector} bytes (serial loops only, of at "
                              "least one byte)")

    def buffer(self, buf: ir.Buffer, idx: tuple[ir.Expr, ...]) -> None:
        _known(buf.kind, _BUFFER_KINDS, f"buffer {buf.name} of kind")
        if buf.kind == "temp" and buf.name not in self.buffers:
            raise VerifyError(f"temp buffer {buf.name} used outside its Allocate")
        for i in idx:
            if i.dtype not in dt.INDEX_TYPES:
                raise VerifyError(f"index of {buf.name} has dtype {i.dtype!r}")


def _idiom(s: ir.Stmt, scope: frozenset[str]) -> None:
    """A statement of the passes that plan for a backend (group, transpose, stream)."""
    match s:
        case ir.GroupedProducts():
            _grouped(s)
        case ir.TransposingCopy(dst=dst, src=src, batch=batch):
            if dst.name == src.name or dst.dtype != src.dtype or dst.dtype.bits != 32:
                raise VerifyError(f"transposing copy of {src.name} ({src.dtype!r}) to "
                                  f"{dst.name} ({dst.dtype!r}): two buffers of one 32-bit "
                                  "type")
            if min(s.rows, s.cols) < 1:
                raise VerifyError(f"transposing copy to {dst.name} of {s.rows} x {s.cols}")
            if batch is not None and batch.var in scope:
                raise VerifyError(f"batch variable {batch.var} shadows an enclosing name")
        case ir.StreamedStores(loop, buffers, firsts, extent):
            if not isinstance(loop, ir.For) or len(buffers) != len(firsts) or extent < 1:
                raise VerifyError(f"streamed stores of {', '.join(b.name for b in buffers)}"
                                  " need a loop, a first element per buffer and an extent "
                                  "of at least 1")
            for b in buffers:
                if b.kind != "output":
                    raise VerifyError(f"streamed stores of {b.name}, buffer of kind {b.kind} "
                                      "(outputs only)")


def _grouped(g: ir.GroupedProducts) -> None:
    """A group of 2 or 4 products into int32 sums, over whole 512-bit vectors of them."""
    if g.size not in (2, 4) or g.acc.dtype != dt.int32 or g.acc.name == g.b.name:
        raise VerifyError(f"grouped products into {g.acc.name} ({g.acc.dtype!r}) of {g.size} "
                          f"operands from {g.b.name}: 2 or 4, into int32, from another buffer")
    if g.lanes < 16 or g.lanes % 16:
        raise VerifyError(f"grouped products into {g.acc.name} over {g.lanes} lanes: a "
                          "multiple of 16")


def _declared_buffers(func: ir.LoweredFunc) -> None:
    """The arguments and allocations: each of a known kind, each name one buffer."""
    seen: dict[str, ir.Buffer] = {}
    status = (func.status,) if func.status is not None else ()
    for b in func.inputs + func.outputs + status + tuple(
            s.buffer for s in walk_stmts(func.body) if isinstance(s, ir.Allocate)):
        _known(b.kind, _BUFFER_KINDS, f"buffer {b.name} of kind")
        if seen.setdefault(b.name, b) is not b and seen[b.name] != b:
            raise VerifyError(f"two different buffers are named {b.name}")


def _accesses(func: ir.LoweredFunc) -> Iterator[tuple[ir.Buffer, tuple[ir.Expr, ...]]]:
    """(buffer, indices) of every load and store of `func`."""
    for s in walk_stmts(func.body):
        if isinstance(s, ir.Store):
            yield s.buffer, s.indices
        for top in stmt_exprs(s):
            for e in walk_exprs(top):
                if isinstance(e, ir.Load):
                    yield e.buffer, e.indices


def _ranks(func: ir.LoweredFunc) -> None:
    """Every access per dimension, or every access flat (one index)."""
    accesses = list(_accesses(func))
    if all(len(idx) == 1 for _, idx in accesses):
        return
    for buf, idx in accesses:
        if len(idx) != len(buf.shape):
            raise VerifyError(f"{buf.name} has rank {len(buf.shape)}, indexed with {len(idx)} "
                              "(accesses are flat only when all of them are)")


def _dsp_placed(func: ir.LoweredFunc) -> None:
    """The Arm DSP operations and packed loads only in the first branch of an
    IfFeature("arm_dsp"), in a function whose isa has them."""
    inside: set[int] = set()
    for s in walk_stmts(func.body):
        if isinstance(s, ir.IfFeature):
            if func.isa != "armv7e-m":
                raise VerifyError(f"a test for {s.feature} in a function for isa {func.isa!r}")
            inside.update(id(x) for x in walk_stmts(s.then))
    for s in walk_stmts(func.body):
        if id(s) in inside:
            continue
        for top in stmt_exprs(s):
            for e in walk_exprs(top):
                if isinstance(e, ir.PackedLoad) or isinstance(e, ir.Call) and e.fn in ir.DSP_CALLS:
                    raise VerifyError(f"{type(e).__name__} {getattr(e, 'fn', '')} outside the "
                                      "first branch of an IfFeature('arm_dsp')".replace("  ", " "))


def _tasks(s: ir.Stmt, inside: str | None = None, names: set[str] | None = None) -> None:
    """Tasks on outermost parallel loops only, each with the captures of its body."""
    names = set() if names is None else names
    match s:
        case ir.For(var=var, kind=kind, task=task, body=body):
            if task is not None:
                if kind is not ir.ForKind.PARALLEL:
                    raise VerifyError(f"{kind.value} loop {var} has a task")
                if task.name in names:
                    raise VerifyError(f"two tasks are named {task.name}")
                names.add(task.name)
                values, buffers = captures(s)
                if set(values) != set(task.values) or set(buffers) != set(task.buffers):
                    raise VerifyError(f"the task of loop {var} does not capture what its body "
                                      "uses from outside")
            if kind is ir.ForKind.PARALLEL and inside is not None:
                raise VerifyError(f"parallel loop {var} is inside parallel loop {inside}, "
                                  "whose task runs it")
            if task is not None:
                inside = var
            _tasks(body, inside, names)
        case ir.Let(body=body) | ir.Allocate(body=body):
            _tasks(body, inside, names)
        case ir.IfFeature(then=then, else_=other):
            _tasks(then, inside, names)
            _tasks(other, inside, names)
        case (ir.GroupedProducts(fallback=body) | ir.TransposingCopy(fallback=body)
              | ir.StreamedStores(loop=body)):
            _tasks(body, inside, names)
        case ir.If(then=then, else_=other):
            _tasks(then, inside, names)
            if other is not None:
                _tasks(other, inside, names)
        case ir.Block(stmts=stmts):
            for x in stmts:
                _tasks(x, inside, names)


def verify(func: ir.LoweredFunc, pending: frozenset[str] = frozenset(),
           placed: bool = True) -> ir.LoweredFunc:
    """`func`, once its invariants are checked (VerifyError otherwise). Before the
    allocate pass, `pending` names the temp buffers it has yet to place (used anywhere
    until then) and `placed=False` lets allocations go without their storage."""
    _declared_buffers(func)
    _ranks(func)
    held = pending | ({func.status.name} if func.status is not None else set())
    v = _Verifier(scope=(x.name for x in func.sizes), buffers=held)
    v.placed = placed
    for b in func.inputs + func.outputs:
        for e in b.shape:
            v.visit_expr(e)
    v.visit(func.body)
    _dsp_placed(func)
    _tasks(func.body)
    for x in walk_stmts(func.body):
        if isinstance(x, ir.StreamedStores) and {b.name for b in x.buffers} - func.nontemporal:
            raise VerifyError(f"streamed stores of {', '.join(b.name for b in x.buffers)}, "
                              "not all stored nontemporal (LoweredFunc.nontemporal)")
    return func
