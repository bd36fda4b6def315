"""dsp: int8 and int16 dot products on the Arm DSP extension (portable C, isa "armv7e-m").

The Cortex-M4, M7 and M33 multiply two pairs of 16-bit halves and add both
products to an accumulator in one instruction (SMLAD), and sign-extend two
bytes of a word into two halves in one more (SXTB16, or SXTAB16, which adds a
pair of halves as it does). This pass finds the products a schedule groups for
that, in the form the x86 path groups them for vpmaddwd/vpdpbusd
(`lower.passes.group.grouped_products`), and writes them with those operations:

lanes  n consecutive vectorized loops over the same constant range of lanes v
       (at most MAX_LANES), the t-th storing `acc[i] = acc[i] + p_t * q_t` (int32),
       p_t the same in every lane, and p_t, q_t each a narrow operand (below) at the
       t-th element from a first one: an accumulator per lane, the p operands shared
       by the lanes. A quad of bytes (n = 4) is one word, extended into two pairs of
       halves once, each lane's quad of q loaded as one word and extended, then two
       SMLADs per lane; a pair of int16 (n = 2) is one word, one SMLAD per lane.
chain  n consecutive statements `acc[i] = acc[i] + p_t * q_t` into the same element
       (a reduction loop unrolled by the schedule), both operands consecutive: the
       same, for one accumulator.
quad   one vectorized loop over 4 lanes storing `acc[i] = acc[i] + p * q`, p and q
       8-bit operands whose indices advance by 1 with the lane, i by any step: the
       four lanes' elements of each operand are one word, extended into the halves of
       lanes 0, 2 and 1, 3, and each lane's product is one multiply-accumulate of a
       half (SMLABB, SMLATT): a depthwise convolution's channels.

A narrow operand is `int32(b[j])` of an int8, uint8 or int16 buffer b, plus an
integer constant c (the input offset of a quantized layer) for 8-bit ones: its
values then fit in the 16-bit halves exactly (`[-128 + c, 127 + c]`); the constant
is added in SXTAB16's halves. The loads are of one buffer each, at indices whose
constant differences are 0, 1, .., n - 1.

And a store whose value clamps an int32 to the range of a narrower integer
(`min(max(x, -2^(n-1)), 2^(n-1) - 1)`, as td.saturating_cast and an activation
clamp write it, or `[0, 2^n - 1]`) clamps with one SSAT (USAT): gcc keeps the bounds
of such a clamp in registers in a loop, and then compares and moves twice instead.

Each group, and each such store, becomes an `IfFeature("arm_dsp", dsp, plain)`: the statements through
`ir.PackedLoad` and `ir.DSP_CALLS` where the compiler targets the extension, the
original statements otherwise (the C file builds anywhere). The lanes are written
out one by one in the first branch (the accumulators of a block stay in
registers).

Guarantees: both branches compute the same values: each lane's accumulator gets
the same n products (int32 sums, which wrap alike in any order; products of 16-bit
halves are exact); no operand reads the accumulator's buffer, so the order of the
lanes' updates does not matter either.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ... import dtypes as dt
from .. import ir
from ..build import add, call, const, index
from ..rewrite import Rewriter, Substitute, bound_names, expr_vars, fresh_name, substitute
from .simplify import constant_difference, normalize

MAX_LANES = 8  # lanes written out one by one (accumulators held in registers)
_NARROW = ("int8", "uint8", "int16")


@dataclass(frozen=True)
class Operand:
    """`int32(load) + offset`, the load of an 8- or 16-bit integer buffer."""

    load: ir.Load
    offset: int

    @property
    def bits(self) -> int:
        return self.load.buffer.dtype.bits

    @property
    def signed(self) -> bool:
        return self.load.buffer.dtype.is_signed


def operand(e: ir.Expr) -> Operand | None:
    """`e` as a narrow operand, or None."""
    offset = 0
    match e:
        case ir.Binary("add", x, ir.Const(int() as c), t) | ir.Binary("add", ir.Const(int() as c), x, t) \
                if t == dt.int32:
            e, offset = x, c
        case ir.Binary("sub", x, ir.Const(int() as c), t) if t == dt.int32:
            e, offset = x, -c
    if not (isinstance(e, ir.Cast) and e.dtype == dt.int32 and isinstance(e.a, ir.Load)):
        return None
    load = e.a
    if load.buffer.dtype.name not in _NARROW or len(load.indices) != 1:
        return None
    if offset and load.buffer.dtype.bits != 8:
        return None  # no halfword add that cannot overflow: 16-bit operands carry none
    lo = (-128 if load.buffer.dtype.is_signed else 0) + offset
    hi = (127 if load.buffer.dtype.is_signed else 255) + offset
    if not -(2**15) <= lo <= hi < 2**15:
        return None
    return Operand(load, offset)


@dataclass(frozen=True)
class Step:
    """`acc[i] = acc[i] + p * q`."""

    store: ir.Store
    p: Operand
    q: Operand


def step(s: ir.Stmt) -> Step | None:
    """Statement `s` as a product step, or None."""
    if not (isinstance(s, ir.Store) and not s.atomic and s.buffer.dtype == dt.int32
            and len(s.indices) == 1):
        return None
    v = s.value
    if not (isinstance(v, ir.Binary) and v.op == "add" and v.dtype == dt.int32):
        return None
    for old, prod in ((v.a, v.b), (v.b, v.a)):
        if old != ir.Load(s.buffer, s.indices):
            continue
        if isinstance(prod, ir.Binary) and prod.op == "mul" and prod.dtype == dt.int32:
            p, q = operand(prod.a), operand(prod.b)
            if p is not None and q is not None:
                return Step(s, p, q)
    return None


def _consecutive(ops: list[Operand]) -> bool:
    """One buffer, one offset, indices at 0, 1, .. from the first."""
    first = ops[0]
    return all(o.load.buffer == first.load.buffer and o.offset == first.offset
               and constant_difference(o.load.indices[0], first.load.indices[0]) == t
               for t, o in enumerate(ops))


def _group_size(ops: list[Operand]) -> int:
    return 4 if ops[0].bits == 8 else 2


class _Names:
    def __init__(self, taken: set[str]) -> None:
        self.taken = taken

    def fresh(self, base: str) -> str:
        return fresh_name(base, self.taken)


def _call(fn: str, *args: ir.Expr) -> ir.Expr:
    return call(fn, args, dt.int32)  # type: ignore[arg-type]


def _extend(o: Operand, word: ir.Expr, high: bool) -> ir.Expr:
    """The halves of bytes 0 and 2 (or 1 and 3, `high`) of an 8-bit operand's word, its
    offset added; a 16-bit operand's word is its pair of halves already."""
    if o.bits == 16:
        return word
    fn = ("s" if o.signed else "u") + ("xtab16" if o.offset else "xtb16") + ("_ror8" if high else "")
    if not o.offset:
        return _call(fn, word)
    pair = (o.offset & 0xFFFF) | ((o.offset & 0xFFFF) << 16)
    pair = pair - (1 << 32) if pair >= 1 << 31 else pair
    return _call(fn, const(pair, dt.int32), word)


def _words(o: Operand, names: _Names, role: str, lets: list[tuple[str, ir.Expr]]
           ) -> list[ir.Expr]:
    """The operand's group as the one or two pairs of halves SMLAD takes (bound by `lets`)."""
    load = ir.PackedLoad(o.load.buffer, o.load.indices, _group_size([o]))
    name = names.fresh(f"{role}_word")
    lets.append((name, load))
    word = ir.Var(name, dt.uint32)
    if o.bits == 16:
        return [word]
    out: list[ir.Expr] = []
    for high in (False, True):
        half = names.fresh(f"{role}_{'odd' if high else 'even'}")
        lets.append((half, _extend(o, word, high)))
        out.append(ir.Var(half, dt.int32))
    return out


def _with_lets(lets: list[tuple[str, ir.Expr]], body: ir.Stmt) -> ir.Stmt:
    for name, value in reversed(lets):
        body = ir.Let(name, value, body)
    return body


def _accumulate(acc: ir.Store, ps: list[ir.Expr], qs: list[ir.Expr]) -> ir.Stmt:
    stores: list[ir.Stmt] = []
    for p, q in zip(ps, qs):
        old = ir.Load(acc.buffer, acc.indices)
        stores.append(ir.Store(acc.buffer, acc.indices, _call("smlad", p, q, old)))
    return ir.Block(tuple(stores))


# ---------------------------------------------------------------- lanes


def _lane_group(stmts: tuple[ir.Stmt, ...], k: int, names: _Names) -> tuple[int, ir.Stmt] | None:
    """(statements used, their replacement) for a lanes group at stmts[k], or None."""
    loops = []
    for s in stmts[k:k + 4]:
        if not (isinstance(s, ir.For) and s.kind is ir.ForKind.VECTORIZED and s.reassociate is None):
            break
        st = step(s.body)
        if st is None:
            break
        loops.append((s, st))
    for n in (4, 2):
        if len(loops) >= n:
            found = _lanes(loops[:n], names)
            if found is not None:
                return n, found
    return None


def _lanes(loops: list[tuple[ir.For, Step]], names: _Names) -> ir.Stmt | None:
    first, st0 = loops[0]
    var, n = first.var, len(loops)
    trips = constant_difference(first.end, first.start)
    if trips is None or not 0 < trips <= MAX_LANES:
        return None
    if any((s.var, s.start, s.end) != (var, first.start, first.end) for s, _ in loops):
        return None
    if any(st.store.buffer != st0.store.buffer or st.store.indices != st0.store.indices
           for _, st in loops):
        return None
    # which operand is shared by the lanes
    for shared in ("p", "q"):
        ps = [getattr(st, shared) for _, st in loops]
        qs = [getattr(st, "q" if shared == "p" else "p") for _, st in loops]
        if any(var in expr_vars(o.load.indices[0]) for o in ps):
            continue
        if _group_size(ps) != n or _group_size(qs) != n or not _consecutive(ps) \
                or not _consecutive(qs):
            continue
        lets: list[tuple[str, ir.Expr]] = []
        pw = _words(ps[0], names, "x", lets)
        lanes: list[ir.Stmt] = []
        for lane in range(trips):
            at = {var: normalize(add(first.start, index(lane)))}
            q0 = qs[0]
            load = Substitute(at).visit_expr(q0.load)
            assert isinstance(load, ir.Load)
            q_lane = replace(q0, load=ir.Load(load.buffer, (normalize(load.indices[0]),)))
            acc = substitute(st0.store, at)
            assert isinstance(acc, ir.Store)
            acc = replace(acc, indices=tuple(normalize(i) for i in acc.indices))
            lane_lets: list[tuple[str, ir.Expr]] = []
            qw = _words(q_lane, names, "w", lane_lets)
            lanes.append(_with_lets(lane_lets, _accumulate(acc, qw, pw)))
        dsp = _with_lets(lets, ir.Block(tuple(lanes)))
        return ir.IfFeature("arm_dsp", dsp, ir.Block(tuple(s for s, _ in loops)))
    return None


# ---------------------------------------------------------------- chains


def _chain_group(stmts: tuple[ir.Stmt, ...], k: int, names: _Names) -> tuple[int, ir.Stmt] | None:
    steps = []
    for s in stmts[k:k + 4]:
        st = step(s)
        if st is None:
            break
        steps.append(st)
    for n in (4, 2):
        if len(steps) < n:
            continue
        chain = steps[:n]
        st0 = chain[0]
        if any(st.store.buffer != st0.store.buffer or st.store.indices != st0.store.indices
               for st in chain):
            continue
        ps, qs = [st.p for st in chain], [st.q for st in chain]
        if _group_size(ps) != n or _group_size(qs) != n or not _consecutive(ps) \
                or not _consecutive(qs):
            continue
        lets: list[tuple[str, ir.Expr]] = []
        pw = _words(ps[0], names, "x", lets)
        qw = _words(qs[0], names, "w", lets)
        dsp = _with_lets(lets, _accumulate(st0.store, pw, qw))
        return n, ir.IfFeature("arm_dsp", dsp, ir.Block(tuple(st.store for st in chain)))
    return None


# ---------------------------------------------------------------- quads of lanes


def _quad_group(stmts: tuple[ir.Stmt, ...], k: int, names: _Names) -> tuple[int, ir.Stmt] | None:
    s = stmts[k]
    if not (isinstance(s, ir.For) and s.kind is ir.ForKind.VECTORIZED and s.reassociate is None):
        return None
    if constant_difference(s.end, s.start) != 4:
        return None
    st = step(s.body)
    if st is None or st.p.bits != 8 or st.q.bits != 8:
        return None
    var = s.var
    if any(index_step(o.load.indices[0], var) != 1 for o in (st.p, st.q)):
        return None
    if index_step(st.store.indices[0], var) in (None, 0):
        return None
    first = {var: s.start}
    lets: list[tuple[str, ir.Expr]] = []
    words = []
    for o, role in ((st.p, "x"), (st.q, "w")):
        load = Substitute(first).visit_expr(o.load)
        assert isinstance(load, ir.Load)
        words.append(_words(replace(o, load=ir.Load(load.buffer, (normalize(load.indices[0]),))),
                            names, role, lets))
    (p_even, p_odd), (q_even, q_odd) = words
    stores: list[ir.Stmt] = []
    for lane, (fn, p, q) in enumerate((("smlabb", p_even, q_even), ("smlabb", p_odd, q_odd),
                                      ("smlatt", p_even, q_even), ("smlatt", p_odd, q_odd))):
        at = {var: normalize(add(s.start, index(lane)))}
        acc = substitute(st.store, at)
        assert isinstance(acc, ir.Store)
        idx = tuple(normalize(i) for i in acc.indices)
        stores.append(ir.Store(acc.buffer, idx, _call(fn, p, q, ir.Load(acc.buffer, idx))))
    return 1, ir.IfFeature("arm_dsp", _with_lets(lets, ir.Block(tuple(stores))), s)


def index_step(e: ir.Expr, var: str) -> int | None:
    """How much index `e` grows when `var` grows by 1, when that is a constant."""
    at0 = Substitute({var: index(0)}).visit_expr(e)
    at1 = Substitute({var: index(1)}).visit_expr(e)
    return constant_difference(at1, at0)


# ---------------------------------------------------------------- saturation


def saturation(e: ir.Expr) -> ir.Expr | None:
    """`ssat(x, n)` or `usat(x, n)` for a clamp of int32 `x` to an n-bit range, else None."""
    if not (isinstance(e, ir.Binary) and e.op in ("min", "max") and e.dtype == dt.int32):
        return None
    inner = e.a
    if not (isinstance(inner, ir.Binary) and inner.op in ("min", "max") and inner.op != e.op):
        return None
    bounds = {e.op: ir.int_value(e.b), inner.op: ir.int_value(inner.b)}
    lo, hi = bounds["max"], bounds["min"]
    if lo is None or hi is None:
        return None
    for n in range(1, 32):
        if (lo, hi) == (-(1 << (n - 1)), (1 << (n - 1)) - 1):
            return _call("ssat", inner.a, const(n, dt.int32))
        if (lo, hi) == (0, (1 << n) - 1):
            return _call("usat", inner.a, const(n, dt.int32))
    return None


class _Saturate(Rewriter):
    def __init__(self) -> None:
        self.found = False

    def expr(self, e: ir.Expr) -> ir.Expr | None:
        sat = saturation(e)
        if sat is not None:
            self.found = True
        return sat


def _saturated(s: ir.Stmt) -> ir.Stmt | None:
    if not (isinstance(s, ir.Store) and not s.atomic):
        return None
    r = _Saturate()
    value = r.visit_expr(s.value)
    if not r.found:
        return None
    return ir.IfFeature("arm_dsp", replace(s, value=value), s)


class _Groups(Rewriter):
    def __init__(self, names: _Names) -> None:
        self.names = names

    def stmt(self, s: ir.Stmt) -> ir.Stmt | None:
        if isinstance(s, ir.For):
            quad = _quad_group((s,), 0, self.names)
            return None if quad is None else quad[1]
        if isinstance(s, ir.Store):
            return _saturated(s)
        if not isinstance(s, ir.Block):
            return None
        out: list[ir.Stmt] = []
        k, changed = 0, False
        stmts = s.stmts
        while k < len(stmts):
            found = _lane_group(stmts, k, self.names) or _chain_group(stmts, k, self.names)
            if found is None:
                out.append(stmts[k])
                k += 1
                continue
            n, new = found
            out.append(new)
            k += n
            changed = True
        return ir.Block(tuple(out)) if changed else None


def use_dsp(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` with its grouped int8/int16 products on the Arm DSP extension, when its
    isa is "armv7e-m" (see the module); unchanged otherwise."""
    if func.isa != "armv7e-m":
        return func
    names = _Names({v.name for v in func.sizes} | bound_names(func.body))
    return replace(func, body=_Groups(names).visit(func.body))
