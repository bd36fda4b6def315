"""Legalisation: numpy's operations become core operations every target maps one to one.

The loop IR carries numpy's semantics (`ir`): integer `//` and `%` floor and
never trap (`x // 0 == x % 0 == 0`, `MIN // -1 == MIN`), float `//` and `%`
follow numpy's npy_divmod, float `min`/`max` propagate NaN, integer `abs`
wraps (`abs(MIN) == MIN`) and is the identity on unsigned ints, `floor` and
`ceil` keep integers as they are, and float32 `exp` is `lower.fastexp`'s
algorithm. This pass writes each of them out in core operations, so that the
targets hold no copy of these semantics:

    tdiv trem    truncating division and remainder (C's `/` and `%`, LLVM's
                 sdiv/udiv and srem/urem; `trem` on floats is C's fmod, LLVM's
                 frem), only ever given a divisor that is not 0 and, for signed
                 ints, a pair that is not (MIN, -1)
    copysign     of floats
    bitcast      the bits of a float as the int of its width, or back
    and compare, select, the wrapping integer arithmetic and float arithmetic
    every target maps already

A constant divisor gives the short form (`x // 3` is `q - 1` or `q` by the sign
of `x % 3`, and just the truncating division when `x` is an index expression
known not to be negative, such as a loop variable from 0; on a signed integer a
power of two is an arithmetic shift, `x // 4` is `x >> 2` and `x % 4` is `x & 3`);
anything else gets a safe divisor first.

An operand an expansion uses more than once, and a partial result it reuses,
is bound by a `Let` placed just before the statement that holds the
expression (named after its role: `x`, `q`, `d`, ...), so that the text of
each expression stays short and the targets compute it once. That moves its
evaluation before the statement, which changes nothing: expressions have no
effects, and the operations left in them cannot trap. Buffer shapes and
expressions outside a function (`legalise_expr`) are rewritten without
bindings, the operands repeated.

float16 and bfloat16 were computed in float32 and rounded back by the narrow
pass just before (`passes.narrow`, through the same statement rewriter,
`BindingRewriter`), so no operation on them is left. The fixed-point operations (`td.saturating_add`,
`td.requantize`, ...) are written out in core operations (`passes.fixed_point`).

Guarantees: the result computes the same values; no `Binary` floordiv or mod,
no float `min`/`max`, no `Call` abs of an int, floor or ceil of an int or
bool, no fixed-point call and no float32 `exp` is left in the function (bodies and the shapes of
temp buffers); int and index `min`/`max`, float `abs` and the other calls are
core and stay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from ... import dtypes as dt
from .. import ir
from ..build import (
    add,
    and_,
    ashr,
    binary,
    bitcast,
    call,
    compare,
    const,
    eq,
    ge,
    gt,
    invert,
    lshr,
    lt,
    mul,
    ne,
    neg,
    or_,
    select,
    shl,
    sub,
    tdiv,
    trem,
    truediv,
    xor,
)
from ..fastexp import (
    EXPONENT_BIAS,
    EXPONENT_SHIFT,
    HI,
    LN2_HI,
    LN2_LO,
    LO,
    LOG2E,
    MAGIC,
    POLY,
)
from ..rewrite import Rewriter, bound_names, expr_vars, fresh_name
from .fixed_point import fixed_point_node

Bind = Callable[[ir.Expr, str], ir.Expr]
Nonnegative = Callable[[ir.Expr], bool]
# what a node becomes (its operands rewritten already), or None when it stays
NodeRule = Callable[[ir.Expr, Bind, Nonnegative], "ir.Expr | None"]


def _no_binding(e: ir.Expr, role: str) -> ir.Expr:
    return e


# ---------------------------------------------------------------- builders


def _minimum(t: dt.DType) -> int:
    return -(1 << (t.bits - 1))


# ---------------------------------------------------------------- integers


def _int_divmod(op: str, a: ir.Expr, b: ir.Expr, bind: Bind,
                nonnegative: Callable[[ir.Expr], bool]) -> ir.Expr:
    """`a // b` or `a % b` on an integer dtype (or index): floor, never trapping."""
    t = a.dtype
    zero, one = const(0, t), const(1, t)
    c = ir.int_value(b)
    if c == 0:
        return zero
    if c is not None and c > 0 and nonnegative(a):  # floor is truncation
        trunc: ir.BinaryOp = "tdiv" if op == "floordiv" else "trem"
        if t == dt.index:
            trunc = "pdiv" if trunc == "tdiv" else "pmod"
        return binary(trunc, a, b)
    if t.is_signed and c == -1:  # x // -1 wraps (MIN // -1 == MIN); x % -1 == 0
        return neg(a) if op == "floordiv" else zero
    if c is not None and c > 1 and c & (c - 1) == 0 and t.is_signed and t != dt.index:
        # a power of two: the arithmetic shift floors, the mask is the floor remainder
        k = c.bit_length() - 1
        return ashr(a, const(k, t)) if op == "floordiv" else and_(a, const(c - 1, t))
    if c is not None or not t.is_signed:
        if c is None:  # unsigned: a divisor of 0 becomes 1, so x % 0 is 0 already
            b = bind(b, "b")
            d = bind(select(eq(b, zero), one, b), "d")
        else:
            d = b
        if not t.is_signed:
            if op == "mod":
                return trem(a, d)
            q: ir.Expr = tdiv(a, d)
            return q if c is not None else select(eq(b, zero), zero, q)
        # a signed constant divisor: truncation rounds toward zero, the floor steps down
        # where the remainder's sign is not the divisor's
        assert c is not None  # signed, so the branch above is for a constant divisor
        a = bind(a, "x")
        rem: ir.Expr = trem(a, d)
        below: ir.CompareOp = "lt" if c > 0 else "gt"
        adjust: ir.Expr = compare(below, rem, zero)
        if op == "mod":
            rem = bind(rem, "r")
            return select(compare(below, rem, zero), add(rem, d), rem)
        q = bind(tdiv(a, d), "q")
        return select(adjust, sub(q, one), q)
    # a signed divisor: 0 and the pair (MIN, -1) divide by 1 instead (0 // 0 is then
    # replaced, x % 1 and MIN // 1 are the results already)
    a, b = bind(a, "x"), bind(b, "y")
    unsafe = or_(eq(b, zero),
                 and_(eq(a, const(_minimum(t), t)), eq(b, const(-1, t))))
    d = bind(select(unsafe, one, b), "d")
    r = bind(trem(a, d), "r")
    adjust = and_(ne(r, zero), lt(xor(r, d), zero))
    if op == "mod":
        return select(adjust, add(r, d), r)
    q = bind(tdiv(a, d), "q")
    return select(eq(b, zero), zero, select(adjust, sub(q, one), q))


# ---------------------------------------------------------------- floats


def _float_divmod(op: str, a: ir.Expr, b: ir.Expr, bind: Bind) -> ir.Expr:
    """numpy's npy_divmod: the floor quotient, or the remainder with the divisor's sign."""
    t = a.dtype
    zero, one = const(0.0, t), const(1.0, t)
    a, b = bind(a, "x"), bind(b, "y")
    m = bind(trem(a, b), "m")
    nonzero = ne(m, zero)  # NaN too
    m_negative = lt(m, zero)
    signs_differ: ir.Expr
    if isinstance(b, ir.Const):  # the divisor's sign is known
        signs_differ = invert(m_negative) if b.value < 0 else m_negative
    else:
        signs_differ = xor(lt(b, zero), m_negative)
    adjust = and_(nonzero, signs_differ)
    if op == "mod":  # b == 0 gives fmod's NaN, which the adjustments leave alone
        m = select(adjust, add(m, b), m)
        return select(nonzero, m, call("copysign", (zero, b), t))
    v = bind(truediv(sub(a, m), b), "v")
    v = bind(select(adjust, sub(v, one), v), "v")
    f = bind(call("floor", (v,), t), "f")
    snapped = select(gt(sub(v, f), const(0.5, t)), add(f, one), f)
    quot = select(ne(v, zero), snapped,
                   call("copysign", (zero, truediv(a, b)), t))
    if isinstance(b, ir.Const):
        return truediv(a, b) if b.value == 0 else quot
    return select(eq(b, zero), truediv(a, b), quot)


def _float_minmax(op: str, a: ir.Expr, b: ir.Expr, bind: Bind) -> ir.Expr:
    """np.minimum / np.maximum: a NaN in either operand wins (a's when both are); on
    ties, b. As `a != a ? a : (a > b ? a : b)`: the inner select is x86's one-instruction
    max (min), which returns its second operand on ties and NaN, and a reduction's
    accumulator `a` then waits for one max and one blend per step, not two compares,
    an or and a blend (C softmax 5.9 -> 4.6 ms)."""
    a, b = bind(a, "x"), bind(b, "y")
    inner = select(compare("lt" if op == "min" else "gt", a, b), a, b)
    return select(ne(a, a), a, inner)


def _exp_f32(x: ir.Expr, bind: Bind) -> ir.Expr:
    """np.exp on float32 by `lower.fastexp`'s algorithm."""
    f32, i32 = dt.float32, dt.int32

    def c(v: float) -> ir.Const:
        return const(v, f32)

    def fma(a: ir.Expr, m: ir.Expr, addend: ir.Expr) -> ir.Expr:  # a * m + addend, which the targets may fuse
        return add(mul(a, m), addend)

    x = bind(x, "x")
    # x < LO ? LO : x, then the same against HI: one max and one min instruction on
    # targets whose min/max return the second operand when one is NaN; a NaN x goes
    # through to the result (every later operation takes a NaN operand to NaN)
    lo = bind(select(lt(x, c(LO)), c(LO), x), "y")
    y = bind(select(gt(lo, c(HI)), c(HI), lo), "y")
    t = bind(fma(y, c(LOG2E), c(MAGIC)), "t")
    k = bind(sub(t, c(MAGIC)), "k")
    r = bind(sub(sub(y, mul(k, c(LN2_HI))), mul(k, c(LN2_LO))),
             "r")
    p: ir.Expr = c(POLY[0])
    for coef in (*POLY[1:], 1.0, 1.0):
        p = fma(r, p, c(coef))
    p = bind(p, "p")
    # k << 23 from t's bits, k1 << 23 with k1 = floor(k / 2), and the bits of 2^k1, 2^k2
    a = bind(shl(bitcast(t, i32), const(EXPONENT_SHIFT, i32)), "a")
    h = bind(shl(ashr(a, const(EXPONENT_SHIFT + 1, i32)), const(EXPONENT_SHIFT, i32)),
             "h")
    power1 = bitcast(add(h, const(EXPONENT_BIAS, i32)), f32)
    power2 = bitcast(sub(add(a, const(EXPONENT_BIAS, i32)), h), f32)
    return mul(mul(p, power1), power2)


# ---------------------------------------------------------------- one node


def _never(e: ir.Expr) -> bool:
    return False


def legalise_node(e: ir.Expr, bind: Bind = _no_binding,
                  nonnegative: Callable[[ir.Expr], bool] = _never) -> ir.Expr | None:
    """The core-operation form of `e` (whose operands are legal already), or None when
    `e` is core. `bind(value, role)` may bind a value used more than once to a variable;
    `nonnegative(x)` says whether integer `x` is known to be at least 0 (a floor division
    of it by a positive constant is then a truncating one: `pdiv` on index)."""
    def legal(n: ir.Expr) -> ir.Expr:
        return legalise_node(n, bind, nonnegative) or n

    fixed = fixed_point_node(e, bind, legal)
    if fixed is not None:
        return fixed
    match e:
        case ir.Binary("floordiv" | "mod", a, b, t) if t.is_int:
            return _int_divmod(e.op, a, b, bind, nonnegative)
        case ir.Binary("floordiv" | "mod", a, b, t) if t.is_float:
            return _float_divmod(e.op, a, b, bind)
        case ir.Binary("min" | "max", a, b, t) if t.is_float:
            return _float_minmax(e.op, a, b, bind)
        case ir.Call("abs", (a,), t) if t.is_signed:
            a = bind(a, "x")  # abs(MIN) == MIN: the negation wraps
            return select(lt(a, const(0, t)), neg(a), a)
        case ir.Call("abs" | "floor" | "ceil", (a,), t) if not t.is_float:
            return a  # unsigned ints and bool, and integers kept as they are
        case ir.Call("exp", (a,), t) if t == dt.float32:
            return _exp_f32(a, bind)
        case ir.Binary("lshift" | "rshift", a, b, t) if t.is_int:
            return _shift(e.op, a, b, bind)
    return None


def _shift(op: str, a: ir.Expr, b: ir.Expr, bind: Bind) -> ir.Expr:
    """numpy's shifts: a count outside [0, bits) shifts everything out (0, or -1 for a
    negative signed value shifted right); the core shift sees the count masked into
    range, so it is defined on every target."""
    t = a.dtype
    b = bind(b, "n")
    inside = lt(b, const(t.bits, t)) if not t.is_signed else and_(
        ge(b, const(0, t)), lt(b, const(t.bits, t)))
    count = and_(b, const(t.bits - 1, t))
    if op == "lshift":
        return select(inside, shl(a, count), const(0, t))
    if not t.is_signed:
        return select(inside, lshr(a, count), const(0, t))
    a = bind(a, "x")
    return select(inside, ashr(a, count),
                   select(lt(a, const(0, t)), const(-1, t), const(0, t)))


class _Expressions(Rewriter):
    """Rewrites bottom-up by `rule` (default: legalises); loads see `buffer(their
    buffer)`; `nonnegative` names the variables known to be at least 0."""

    def __init__(self, bind: Bind, buffer: Callable[[ir.Buffer], ir.Buffer] = lambda b: b,
                 rule: NodeRule = legalise_node):
        self.bind = bind
        self.buffer = buffer
        self.rule = rule
        self.nonnegative: set[str] = set()

    def known_nonnegative(self, e: ir.Expr) -> bool:
        match e:
            case ir.Const(value) if isinstance(value, int):
                return value >= 0
            case ir.Var(name):
                return name in self.nonnegative
            case ir.Binary("add" | "mul" | "min" | "pdiv" | "pmod", a, b, t) if t == dt.index:
                return self.known_nonnegative(a) and self.known_nonnegative(b)
            case ir.Binary("max", a, b, t) if t == dt.index:
                return self.known_nonnegative(a) or self.known_nonnegative(b)
        return False

    def expr(self, e: ir.Expr) -> ir.Expr | None:
        if isinstance(e, ir.Load):
            buf = self.buffer(e.buffer)
            return None if buf is e.buffer else ir.Load(buf, e.indices)
        return self.rule(e, self.bind, self.known_nonnegative)


def legalise_expr(e: ir.Expr) -> ir.Expr:
    """`e` in core operations, operands repeated where used more than once (for an
    expression with no statement to bind them before, such as a size check)."""
    return _Expressions(_no_binding).visit_expr(e)


# ---------------------------------------------------------------- statements


class BindingRewriter(Rewriter):
    """Rewrites each statement's own expressions node by node with `rule` (default:
    legalises them), binding what they reuse in `Let`s around the statement; names are
    fresh in the whole function (`taken`: the names in use). Temp buffers' shapes are
    legalised."""

    def __init__(self, taken: set[str], rule: NodeRule = legalise_node):
        self.taken = taken
        self.pending: list[tuple[str, ir.Expr]] = []
        self.buffers: dict[str, ir.Buffer] = {}
        self.exprs = _Expressions(self._bind, self.buffer, rule)

    def _bind(self, value: ir.Expr, role: str) -> ir.Expr:
        if isinstance(value, (ir.Var, ir.Const)) or ir.ATOMIC_OLD in expr_vars(value):
            return value  # (an atomic store's old value is bound inside the store only)
        for name, bound in self.pending:  # the same operand bound for another expansion
            if bound == value:
                return ir.Var(name, value.dtype)
        name = fresh_name(role, self.taken)
        self.pending.append((name, value))
        return ir.Var(name, value.dtype)

    def _own(self, *es: ir.Expr) -> tuple[list[ir.Expr], list[tuple[str, ir.Expr]]]:
        """The statement's expressions legalised, and the bindings they need."""
        self.pending = []
        out = [self.exprs.visit_expr(e) for e in es]
        lets, self.pending = self.pending, []
        return out, lets

    @contextmanager
    def _nonnegative(self, name: str, value: ir.Expr) -> Iterator[None]:
        """Inside: `name` (bound to `value`, or its loop's start) is known to be at least
        0 when `value` is, and is not when it is not (a let may shadow)."""
        known = self.exprs.nonnegative
        saved = name in known
        if self.exprs.known_nonnegative(value):
            known.add(name)
        else:
            known.discard(name)
        try:
            yield
        finally:
            if saved:
                known.add(name)
            else:
                known.discard(name)

    def buffer(self, buf: ir.Buffer) -> ir.Buffer:
        """A temp buffer with its shape legalised (the targets size it from its shape)."""
        if buf.kind != "temp":
            return buf
        if buf.name not in self.buffers:
            shape = tuple(legalise_expr(x) for x in buf.shape)
            new = ir.Buffer(buf.name, buf.dtype, shape, buf.kind)
            self.buffers[buf.name] = buf if new == buf else new
        return self.buffers[buf.name]

    def visit(self, s: ir.Stmt) -> ir.Stmt:
        new: ir.Stmt
        lets: list[tuple[str, ir.Expr]] = []
        match s:
            case ir.For(var, start, end, kind, body, mx):
                (start, end), lets = self._own(start, end)
                with self._nonnegative(var, start):
                    new = ir.For(var, start, end, kind, self.visit(body), mx)
            case ir.If(c, t, e):
                (c,), lets = self._own(c)
                new = ir.If(c, self.visit(t), None if e is None else self.visit(e))
            case ir.Store(buf, idx, v, atomic):
                (*own, v), lets = self._own(*idx, v)
                new = ir.Store(self.buffer(buf), tuple(own), v, atomic)
            case ir.Let(name, v, body):
                (v,), lets = self._own(v)
                with self._nonnegative(name, v):
                    new = ir.Let(name, v, self.visit(body))
            case ir.Block(stmts):
                new = ir.Block(tuple(self.visit(x) for x in stmts))
            case ir.Allocate(buf, body, storage):
                new = ir.Allocate(self.buffer(buf), self.visit(body), storage)
            case _:
                raise AssertionError(f"unknown statement {s!r}")
        for name, value in reversed(lets):
            new = ir.Let(name, value, new)
        return s if new == s else new


def legalise(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` in core operations only (see the module)."""
    taken = {v.name for v in func.sizes} | bound_names(func.body)
    return replace(func, body=BindingRewriter(taken).visit(func.body))
