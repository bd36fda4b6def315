"""Vectorized loops as LLVM vector code, following `lower.vectors.plan`.

A VECTORIZED loop whose plan says it can run as vector code is emitted as
its chunks (a loop over the chunks of one width, a chunk per remainder
width, or a last chunk with its extra lanes masked off), each chunk the body
once, on vectors of the chunk's lanes (`_Chunk`):

- a value the same in every lane stays a scalar and is splat where it meets
  a vector; an index linear in the lane (`base + stride * lane`) is kept as
  its base until something needs the vector;
- loads and stores as the plan's access kinds say: contiguous ones are one
  vector load or store (`llvm.masked.load`/`store` under a mask), broadcast
  ones a scalar access, strided ones a scalar access per lane
  (`llvm.masked.gather`/`scatter` under a mask), the rest gather/scatter;
- a condition that differs between lanes narrows the mask for its branches,
  each branch skipped when no lane of the mask is left; a select's guarded arm
  (`vectors.guarded_arm`, a read through `td.pad`) is evaluated under the mask
  of its condition, its loads at unclamped indices masked;
- a temp allocated inside the loop is an array with a copy per lane.

Loops the plan refuses stay scalar loops with LLVM's vectorizer hints
(codegen.py), and `Kernel.vectorization` says why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from llvmlite import ir

from ..dtypes import DType, index
from ..lower.contraction import fused_product
from ..lower.ir import (
    Allocate,
    Binary,
    Block,
    Buffer,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    For,
    ForKind,
    If,
    Let,
    Load,
    Select,
    Stmt,
    Storage,
    Store,
    Unary,
    Var,
    constant_elements,
    int_value,
)
from ..lower.vectors import (
    UNIFORM,
    Shape,
    VectorLoop,
    guarded_arm,
    lane_shape,
)
from . import ops
from .ops import I1, I8, I32, I64, PTR

if TYPE_CHECKING:
    from .codegen import _FunctionEmitter


# the alignment a streaming store needs (`_Chunk.streaming_store`)
STREAM_ALIGN = 16


class _V(NamedTuple):
    """A value over the lanes: kind "u" (one scalar for every lane), "l" (index
    `value + stride * lane`) or "v" (a vector)."""

    kind: str
    value: ir.Value
    stride: int = 0


def emit_vector_loop(fe: _FunctionEmitter, loop: For, plan: VectorLoop) -> None:
    """Emit `loop` as vector code, chunk by chunk (see the module docstring)."""
    b = fe.b
    start, end = fe.typed(loop.start, index), fe.typed(loop.end, index)
    if plan.masked_tail:
        width = plan.chunks[0]
        span = b.sub(end, start, flags=("nsw",))
        trips = b.sdiv(span, ir.Constant(I64, width))
        zero = ir.Constant(I64, 0)
        trips = b.select(b.icmp_signed("<", trips, zero), zero, trips)
        _chunk_loop(fe, loop, start, trips, width)
        rest = b.add(start, b.mul(trips, ir.Constant(I64, width), flags=("nsw",)), flags=("nsw",))
        tail, after = fe.new_block(f"{loop.var}.tail"), fe.new_block(f"{loop.var}.done")
        b.cbranch(b.icmp_signed("<", rest, end), tail, after)
        fe.place(tail)
        lanes = b.add(_splat(b, rest, width), _steps(width, 1), flags=("nsw",))
        mask = b.icmp_signed("<", lanes, _splat(b, end, width))
        _Chunk(fe, loop, width, rest, mask).stmt(loop.body)
        b.branch(after)
        fe.place(after)
        return
    offset = 0
    runs: list[list[int]] = []  # [width, count] runs of equal widths
    for w in plan.chunks:
        if runs and runs[-1][0] == w:
            runs[-1][1] += 1
        else:
            runs.append([w, 1])
    for width, count in runs:
        first = b.add(start, ir.Constant(I64, offset), flags=("nsw",)) if offset else start
        if count == 1:
            _Chunk(fe, loop, width, first, None).stmt(loop.body)
        else:
            _chunk_loop(fe, loop, first, ir.Constant(I64, count), width)
        offset += width * count


def _chunk_loop(fe: _FunctionEmitter, loop: For, first: ir.Value, trips: ir.Value,
                width: int) -> None:
    """for c in [0, trips): the chunk of `width` lanes at first + c * width."""
    def body(c: ir.Value) -> None:
        b = fe.b
        base = b.add(first, b.mul(c, ir.Constant(I64, width), flags=("nsw",)), flags=("nsw",))
        _Chunk(fe, loop, width, base, None).stmt(loop.body)

    fe.counted_loop(f"{loop.var}.chunk", ir.Constant(I64, 0), trips, None, None, emit=body)


def _splat(b: ir.IRBuilder, x: ir.Value, width: int) -> ir.Value:
    vty = ir.VectorType(x.type, width)
    if isinstance(x, ir.Constant) and isinstance(x.constant, (int, float)):
        return ir.Constant(vty, x.constant)
    one = b.insert_element(ir.Constant(vty, ir.Undefined), x, ir.Constant(I32, 0))
    return b.shuffle_vector(one, ir.Constant(vty, ir.Undefined),
                            ir.Constant(ir.VectorType(I32, width), 0))


def _shape(v: _V) -> Shape:
    """The `vectors.Shape` of an emitted value."""
    if v.kind == "u":
        return UNIFORM
    return Shape("linear", v.stride) if v.kind == "l" else Shape("varying")


def _steps(width: int, stride: int) -> ir.Constant:
    """<0, stride, 2 * stride, ...> as i64 lanes."""
    return ir.Constant(ir.VectorType(I64, width), [stride * n for n in range(width)])


class _Chunk:
    """Emits a vectorized loop's body once for one chunk of `width` lanes starting at
    iteration `base`; `mask` (<width x i1>) marks the lanes that run, None all."""

    def __init__(self, fe: _FunctionEmitter, loop: For, width: int, base: ir.Value,
                 mask: ir.Value | None):
        self.fe = fe
        self.b = fe.b
        self.width = width
        self.mask = mask
        # the loop's name on its first lane, so the code reads like the loop nest
        first = fe.b.add(base, ir.Constant(I64, 0), name=loop.var)
        self.scope: dict[str, _V] = {loop.var: _V("l", first, 1)}
        self.private: dict[str, ir.Value] = {}  # lane-private temps: a copy per lane
        # loads of a guarded select arm at unclamped indices: safe only on masked lanes
        self.unclamped: frozenset[Load] = frozenset()

    # ---------------------------------------------------------------- helpers

    def vec(self, v: _V) -> ir.Value:
        """`v` as a vector of the chunk's lanes."""
        if v.kind == "v":
            return v.value
        splat = _splat(self.b, v.value, self.width)
        if v.kind == "u":
            return splat
        return self.b.add(splat, _steps(self.width, v.stride), flags=("nsw",))

    def vty(self, dtype: DType) -> ir.VectorType:
        return ir.VectorType(ops.lltype(dtype), self.width)

    def all_lanes(self) -> ir.Value:
        return self.mask if self.mask is not None else ir.Constant(ir.VectorType(I1, self.width), 1)

    def typed(self, e: Expr, dtype: DType) -> _V:
        v = self.expr(e)
        if e.dtype == dtype:
            return v
        if v.kind == "u":
            return _V("u", ops.cast(self.b, v.value, e.dtype, dtype))
        return _V("v", ops.cast(self.b, self.vec(v), e.dtype, dtype))

    def uniform(self, *vs: _V) -> bool:
        return all(v.kind == "u" for v in vs)

    def masked_intrinsic(self, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Instruction:
        fn = ops.declare(self.b.module, name, ret, [a.type for a in args])
        return self.b.call(fn, args)

    def pointers(self, buf: Buffer, offsets: ir.Value) -> ir.Value:
        """<width x ptr>: the addresses of `buf`'s elements at `offsets` (a vector)."""
        g = self.b.gep(self.base(buf), [offsets], inbounds=True,
                       source_etype=ops.lltype(buf.dtype))
        g.type = ir.VectorType(PTR, self.width)
        return g

    def base(self, buf: Buffer) -> ir.Value:
        if buf.name in self.private:
            return self.private[buf.name]
        try:
            return self.fe.ptrs[buf.name]
        except KeyError:
            raise ValueError(f"buffer {buf.name!r} is used outside its allocation") from None

    def scalar_address(self, buf: Buffer, offset: ir.Value) -> ir.Value:
        return self.b.gep(self.base(buf), [offset], inbounds=True,
                          source_etype=ops.lltype(buf.dtype))

    def lane_offsets(self, buf: Buffer, idx: _V) -> tuple[str, ir.Value]:
        """("contiguous", scalar offset of lane 0) or ("lanes", a vector of offsets):
        where the lanes of an access with index `idx` are (see `vectors.access_kind`)."""
        b, w = self.b, self.width
        if buf.name in self.private:  # element e of lane l at e * width + l
            if idx.kind == "u":
                return "contiguous", b.mul(idx.value, ir.Constant(I64, w), flags=("nsw",))
            scaled = b.mul(self.vec(idx), ir.Constant(ir.VectorType(I64, w), w), flags=("nsw",))
            return "lanes", b.add(scaled, _steps(w, 1), flags=("nsw",))
        if idx.kind == "l" and idx.stride == 1:
            return "contiguous", idx.value
        return "lanes", self.vec(idx)

    # ------------------------------------------------------------ memory

    def load(self, buf: Buffer, index_expr: Expr, guarded: bool = False) -> _V:
        """A load of `buf` at `index_expr`; `guarded`: the index is in bounds only on the
        lanes of the mask (an unclamped load of a guarded select arm)."""
        b, fe = self.b, self.fe
        align = buf.dtype.itemsize
        elty = ops.lltype(buf.dtype)
        idx = self.typed(index_expr, index)
        if idx.kind == "u" and buf.name not in self.private:
            ptr = self.scalar_address(buf, idx.value)
            if guarded:  # one element for the lanes of the mask, none without them
                vty = self.vty(buf.dtype)
                name = f"llvm.masked.gather.{ops._suffix(vty)}.v{self.width}p0"
                return _V("v", fe.annotate(self.masked_intrinsic(name, vty, [
                    _splat(b, ptr, self.width), ir.Constant(I32, align), self.all_lanes(),
                    ir.Constant(vty, None)]), buf))
            return _V("u", fe.annotate(b.load(ptr, typ=elty, align=align), buf))
        where, offsets = self.lane_offsets(buf, idx)
        vty = self.vty(buf.dtype)
        private = buf.name in self.private
        if where == "contiguous":
            ptr = self.scalar_address(buf, offsets)
            if self.mask is None or private:
                return _V("v", fe.annotate(b.load(ptr, typ=vty, align=align), buf))
            name = f"llvm.masked.load.{ops._suffix(vty)}.p0"
            return _V("v", fe.annotate(self.masked_intrinsic(
                name, vty, [ptr, ir.Constant(I32, align), self.mask, ir.Constant(vty, None)]),
                buf))
        if idx.kind == "l" and self.mask is None:  # strided: a scalar load per lane
            out = ir.Constant(vty, ir.Undefined)
            for lane in range(self.width):
                at = b.add(idx.value, ir.Constant(I64, idx.stride * lane), flags=("nsw",))
                one = fe.annotate(b.load(self.scalar_address(buf, at), typ=elty, align=align),
                                  buf)
                out = b.insert_element(out, one, ir.Constant(I32, lane))
            return _V("v", out)
        ptrs = self.pointers(buf, offsets)
        name = f"llvm.masked.gather.{ops._suffix(vty)}.v{self.width}p0"
        return _V("v", fe.annotate(self.masked_intrinsic(
            name, vty, [ptrs, ir.Constant(I32, align), self.all_lanes(), ir.Constant(vty, None)]),
            buf))

    def store(self, s: Store) -> None:
        b, fe, buf = self.b, self.fe, s.buffer
        align = buf.dtype.itemsize
        idx = self.typed(s.indices[0], index)
        value = self.typed(s.value, buf.dtype)
        if idx.kind == "u" and buf.name not in self.private:
            assert value.kind == "u", f"lanes store different values into one element of {buf.name}"
            fe.annotate(b.store(value.value, self.scalar_address(buf, idx.value), align=align), buf)
            return
        vec = self.vec(value)
        where, offsets = self.lane_offsets(buf, idx)
        if where == "contiguous":
            ptr = self.scalar_address(buf, offsets)
            if self.mask is None and buf.name in fe.mod.func.nontemporal:
                self.streaming_store(vec, ptr, buf)
                return
            if self.mask is None:
                fe.annotate(b.store(vec, ptr, align=align), buf)
                return
            name = f"llvm.masked.store.{ops._suffix(vec.type)}.p0"
            fe.annotate(self.masked_intrinsic(
                name, ir.VoidType(), [vec, ptr, ir.Constant(I32, align), self.mask]), buf)
            return
        if idx.kind == "l" and self.mask is None:  # strided: a scalar store per lane
            for lane in range(self.width):
                at = b.add(idx.value, ir.Constant(I64, idx.stride * lane), flags=("nsw",))
                one = b.extract_element(vec, ir.Constant(I32, lane))
                fe.annotate(b.store(one, self.scalar_address(buf, at), align=align), buf)
            return
        name = f"llvm.masked.scatter.{ops._suffix(vec.type)}.v{self.width}p0"
        fe.annotate(self.masked_intrinsic(
            name, ir.VoidType(),
            [vec, self.pointers(buf, offsets), ir.Constant(I32, align), self.all_lanes()]), buf)

    def streaming_store(self, vec: ir.Value, ptr: ir.Value, buf: Buffer) -> None:
        """A non-temporal store of `vec` at `ptr`. x86's streaming vector stores need a
        16-byte aligned address (an under-aligned one would be split into scalar
        stores): at one, `vec` in one store. At an address 8 bytes past one (every other
        row of an image of even width, in floats), when `vec` is whole 16-byte chunks,
        its first and last 8 bytes go out as 64-bit streaming stores and the chunks
        between as 16-byte aligned ones. Otherwise an ordinary store."""
        b, fe = self.b, self.fe
        size = buf.dtype.itemsize
        low = b.and_(b.ptrtoint(ptr, I64), ir.Constant(I64, STREAM_ALIGN - 1))
        stream, plain = fe.new_block(f"{buf.name}.stream"), fe.new_block(f"{buf.name}.store")
        done = fe.new_block(f"{buf.name}.stored")

        def streamed(value: ir.Value, where: ir.Value, align: int) -> None:
            st = fe.annotate(b.store(value, where, align=align), buf)
            st.set_metadata("nontemporal", b.module.add_metadata([ir.Constant(I32, 1)]))

        nbytes = self.width * size
        if nbytes % STREAM_ALIGN or nbytes < 2 * STREAM_ALIGN or 8 % size:
            b.cbranch(b.icmp_unsigned("==", low, ir.Constant(I64, 0)), stream, plain)
        else:
            shifted = fe.new_block(f"{buf.name}.stream8")
            switch = b.switch(low, plain)
            switch.add_case(ir.Constant(I64, 0), stream)
            switch.add_case(ir.Constant(I64, 8), shifted)
            fe.place(shifted)
            lanes = 8 // size  # lanes in 8 bytes
            elty = vec.type.element

            def part(first: int, n: int) -> ir.Value:
                mask = ir.Constant(ir.VectorType(I32, n), [ir.Constant(I32, first + k)
                                                           for k in range(n)])
                return b.shuffle_vector(vec, ir.Constant(vec.type, ir.Undefined), mask)

            def at(first: int) -> ir.Value:
                return b.gep(ptr, [ir.Constant(I64, first)], inbounds=True, source_etype=elty)

            last = self.width - lanes
            streamed(b.bitcast(part(0, lanes), I64), ptr, 8)
            streamed(part(lanes, last - lanes), at(lanes), 16)
            streamed(b.bitcast(part(last, lanes), I64), at(last), 8)
            b.branch(done)
        fe.place(stream)
        streamed(vec, ptr, STREAM_ALIGN)
        b.branch(done)
        fe.place(plain)
        fe.annotate(b.store(vec, ptr, align=size), buf)
        b.branch(done)
        fe.place(done)

    # -------------------------------------------------------- statements

    def stmt(self, s: Stmt) -> None:
        match s:
            case Block(stmts=stmts):
                for x in stmts:
                    self.stmt(x)
            case Store(atomic=False):
                self.store(s)
            case Let(name=name, value=value, body=body):
                with self.fe.bind(self.scope, name, self.expr(value)):
                    self.stmt(body)
            case If():
                self.branch(s)
            case For(kind=kind, var=var, start=start, end=end, body=body) if (
                    kind is not ForKind.PARALLEL):
                lo, hi = self.typed(start, index), self.typed(end, index)
                assert self.uniform(lo, hi), f"loop {var} has bounds that differ between lanes"

                def inner(i: ir.Value) -> None:
                    with self.fe.bind(self.scope, var, _V("u", i)):
                        self.stmt(body)

                self.fe.counted_loop(var, lo.value, hi.value, None, None, emit=inner)
            case Allocate(buffer=buf, body=body, storage=Storage.STACK):
                count = constant_elements(buf)
                assert count is not None, f"{buf.name} is on the stack without a constant size"
                elty = ops.lltype(buf.dtype)
                ptr = self.fe.alloca(ir.ArrayType(elty, count * self.width), buf.name, align=64)
                self.private[buf.name] = ptr
                self.stmt(body)
                del self.private[buf.name]
            case _:
                raise TypeError(f"statement {type(s).__name__} cannot run as vector code: "
                                "lower.vectors.plan should have refused the loop")

    def branch(self, s: If) -> None:
        b, fe = self.b, self.fe
        c, other = self.cond(s.cond), s.else_
        if c.kind == "u":
            fe.if_then_else(c.value, lambda: self.stmt(s.then),
                            None if other is None else lambda: self.stmt(other))
            return
        outer = self.mask
        yes = c.value if outer is None else b.and_(outer, c.value)
        self.masked(yes, s.then)
        if other is not None:
            no = b.xor(c.value, ir.Constant(c.value.type, 1))
            self.masked(no if outer is None else b.and_(outer, no), other)
        self.mask = outer

    def masked(self, mask: ir.Value, body: Stmt) -> None:
        """Run `body` on the lanes of `mask`, or not at all when it has none."""
        b = self.b
        fn = ops.declare(b.module, f"llvm.vector.reduce.or.v{self.width}i1", I1, [mask.type])

        def run() -> None:
            self.mask = mask
            self.stmt(body)

        self.fe.if_then_else(b.call(fn, [mask]), run, name="lanes")

    # ------------------------------------------------------- expressions

    def cond(self, e: Expr) -> _V:
        """`e` as an i1 condition: a scalar i1, or <width x i1>."""
        b = self.b
        match e:
            case Compare(op=op, a=x, b=y):
                va, vb = self.expr(x), self.typed(y, x.dtype)
                if self.uniform(va, vb):
                    return _V("u", ops.compare_i1(b, op, x.dtype, va.value, vb.value))
                return _V("v", ops.compare_i1(b, op, x.dtype, self.vec(va), self.vec(vb)))
            case Binary(op="and" | "or" | "xor", a=x, b=y, dtype=dtype) if dtype.is_bool:
                logical = {"and": b.and_, "or": b.or_, "xor": b.xor}[e.op]
                ca, cb = self.cond(x), self.cond(y)
                if self.uniform(ca, cb):
                    return _V("u", logical(ca.value, cb.value))
                return _V("v", logical(self.vec(ca), self.vec(cb)))
        v = self.expr(e)
        if v.kind == "u":
            return _V("u", ops.truth(b, v.value, e.dtype))
        return _V("v", ops.truth(b, self.vec(v), e.dtype))

    def select(self, e: Select) -> _V:
        """A select; a guarded arm (`vectors.guarded_arm`) is evaluated on the lanes of
        the condition alone, its unclamped loads masked."""
        b, dtype = self.b, e.dtype
        vc = self.cond(e.cond)
        guarded = guarded_arm(e, self.varies)
        if guarded is None:
            va = self.typed(e.a, dtype)
        else:
            va = self.under(vc, guarded[1], lambda: self.typed(guarded[0], dtype))
        vb = self.typed(e.b, dtype)
        if self.uniform(vc, va, vb):
            return _V("u", b.select(vc.value, va.value, vb.value))
        cond = vc.value if vc.kind == "u" else self.vec(vc)
        return _V("v", b.select(cond, self.vec(va), self.vec(vb)))

    def varies(self, e: Expr) -> bool:
        """Whether `e` differs between lanes (`vectors.lane_shape` on the chunk's scope)."""
        env = {name: _shape(v) for name, v in self.scope.items()}
        return lane_shape(e, env, frozenset(self.private)).kind != "uniform"

    def under(self, c: _V, unclamped: frozenset[Load], emit: Callable[[], _V]) -> _V:
        """`emit()` with the mask narrowed to the lanes where `c` holds, and the loads
        `unclamped` done on those lanes alone."""
        outer, before = self.mask, self.unclamped
        lanes = self.vec(c) if c.kind == "v" else _splat(self.b, c.value, self.width)
        self.mask = lanes if outer is None else self.b.and_(outer, lanes)
        self.unclamped = before | unclamped
        try:
            return emit()
        finally:
            self.mask, self.unclamped = outer, before

    def lift(self, operands: list[_V], op: Callable[..., ir.Value]) -> _V:
        """`op` on scalars when every operand is uniform, else on vectors."""
        if self.uniform(*operands):
            return _V("u", op(*(v.value for v in operands)))
        return _V("v", op(*(self.vec(v) for v in operands)))

    def linear(self, op: str, va: _V, vb: _V | None, e: Expr) -> _V | None:
        """The index operation `op` of `e` on operands `va`, `vb` (None for a unary one),
        kept linear in the lane (the rules of `vectors.lane_shape`); None when the
        result is not linear."""
        b = self.b
        if vb is None:
            if va.kind == "l" and op == "neg":
                return _V("l", b.sub(ir.Constant(I64, 0), va.value, flags=("nsw",)), -va.stride)
            return None
        if op not in ("add", "sub", "mul") or "l" not in (va.kind, vb.kind):
            return None
        if "v" in (va.kind, vb.kind):
            return None
        if op == "mul":
            assert isinstance(e, Binary)
            lin, c = (va, int_value(e.b)) if va.kind == "l" else (vb, int_value(e.a))
            if c is None:
                return None
            scaled = b.mul(lin.value, ir.Constant(I64, c), flags=("nsw",))
            return _V("l", scaled, lin.stride * c) if c else _V("u", scaled)
        value = ops.binary(b, op, index, va.value, vb.value)
        stride = va.stride + (vb.stride if op == "add" else -vb.stride)
        return _V("l", value, stride) if stride else _V("u", value)

    def binary(self, e: Binary | Unary, op: str, va: _V, vb: _V | None) -> _V:
        """A binary (or, with `vb` None, unary) operation on evaluated operands."""
        b, dtype = self.b, e.dtype
        lin = self.linear(op, va, vb, e) if dtype == index else None
        if lin is not None:
            return lin
        if vb is None:
            return self.lift([va], lambda p: ops.unary(b, op, dtype, p))
        return self.lift([va, vb], lambda p, q: ops.binary(b, op, dtype, p, q))

    def expr(self, e: Expr) -> _V:
        b = self.b
        match e:
            case Const(value=value, dtype=dtype):
                return _V("u", ops.const(value, dtype))
            case Var(name=name):
                if name in self.scope:
                    return self.scope[name]
                return _V("u", self.fe.expr(e))
            case Load(buffer=buf, indices=(idx,)):
                return self.load(buf, idx, e in self.unclamped)
            case Binary(op=op, a=x, b=y, dtype=dtype):
                fused = fused_product(e)
                if fused is not None:
                    prod, other, first = fused
                    operands = [self.typed(prod.a, dtype), self.typed(prod.b, dtype),
                                self.typed(other, dtype)]
                    return self.lift(operands, lambda p, q, r: ops.mul_add(
                        b, op, first, (p, q), r))
                return self.binary(e, op, self.typed(x, dtype), self.typed(y, dtype))
            case Compare():
                c = self.cond(e)
                if c.kind == "u":
                    return _V("u", b.zext(c.value, I8))
                return _V("v", b.zext(c.value, ir.VectorType(I8, self.width)))
            case Unary(op=op, a=x, dtype=dtype):
                return self.binary(e, op, self.typed(x, dtype), None)
            case Call(fn="bitcast", args=(x,), dtype=dtype):
                return self.lift([self.expr(x)], lambda p: ops.call(b, "bitcast", dtype, p))
            case Call(fn=fn, args=args, dtype=dtype):
                return self.lift([self.typed(x, dtype) for x in args],
                                 lambda *ps: ops.call(b, fn, dtype, *ps))
            case Select():
                return self.select(e)
            case Cast(a=x, dtype=dtype):
                v = self.expr(x)
                if v.kind == "u":
                    return _V("u", ops.cast(b, v.value, x.dtype, dtype))
                return _V("v", ops.cast(b, self.vec(v), x.dtype, dtype))
        raise TypeError(f"unknown loop-IR expression {e!r}")
