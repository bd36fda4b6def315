"""Constant folding and index simplification.

Guarantees: the result computes the same values; index arithmetic on
constants is folded, `x + 0`, `x * 1`, `x - 0` vanish, min/max of constants
fold, min/max and comparisons of index expressions that differ by a constant
fold (`4*i + 3 < 4*i + 4` is true), and `If` on a constant condition keeps
only the taken branch. Boolean constants fold away (`True and e` is `e`,
`False and e` is `False`, `e or True` is `True`, `not False` is `True`,
`select(False, a, b)` is `b`, `select(c, a, a)` is `a`), and comparisons of
index expressions and min/max of them are decided by the ranges of the
variables in scope: a loop variable lies in [start, end - 1] of its loop, a
let variable in the range of its value, and inside `if c` (or its `else`)
the comparisons of one variable with constants that `c` asserts (or denies)
narrow that range (`v != c` only when c is an end of it). A loop whose range is empty for every value of the
variables around it is removed.

On integer values (which wrap, as numpy's do) constants fold too, a cast of a
constant included, and `x + 0`, `x - 0`, `x * 1` are `x`, `x * 0` is 0; a store of an
element's own value back to it (`a[i] = a[i]`, not atomic) is removed, and so is a
loop or a let whose body is then empty (a let nothing reads goes too): what a partitioned padded convolution leaves where
the padding contributes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from ... import dtypes as dt
from .. import ir
from ..build import add, binary, const, mul, neg, sub
from ..rewrite import Rewriter, free_vars

_FOLD: dict[str, Callable[[int, int], int | None]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "min": min,
    "max": max,
    "floordiv": lambda a, b: a // b if b else None,
    "mod": lambda a, b: a % b if b else None,
    "pdiv": lambda a, b: a // b if b and a >= 0 and b > 0 else None,
    "pmod": lambda a, b: a % b if b and a >= 0 and b > 0 else None,
}


def _is(e: ir.Expr, v: int) -> bool:
    return isinstance(e, ir.Const) and e.value == v


def _linear(e: ir.Expr, scale: int, terms: dict[ir.Expr, int], constant: list[int]) -> None:
    """Accumulate `scale * e` as {atom: coefficient} plus a constant."""
    match e:
        case ir.Const(int() as v):
            constant[0] += scale * v
        case ir.Binary("add", a, b):
            _linear(a, scale, terms, constant)
            _linear(b, scale, terms, constant)
        case ir.Binary("sub", a, b):
            _linear(a, scale, terms, constant)
            _linear(b, -scale, terms, constant)
        case ir.Unary("neg", a):
            _linear(a, -scale, terms, constant)
        case ir.Binary("mul", ir.Const(int() as c), a) | ir.Binary("mul", a, ir.Const(int() as c)):
            _linear(a, scale * c, terms, constant)
        case _:
            terms[e] = terms.get(e, 0) + scale


def _term(atom: ir.Expr, c: int) -> ir.Expr:
    c = abs(c)
    return atom if c == 1 else mul(const(c, dt.index), atom)


def normalize(e: ir.Expr) -> ir.Expr:
    """Rewrite an index expression as a sum of terms: positive terms, negative terms, constant."""
    terms: dict[ir.Expr, int] = {}
    constant = [0]
    _linear(e, 1, terms, constant)
    terms = {a: c for a, c in terms.items() if c}
    if constant[0] and len(terms) == 1:
        (atom, c), = terms.items()
        if c == 1 and isinstance(atom, ir.Binary) and atom.op in ("min", "max"):
            k = const(constant[0], dt.index)
            return binary(atom.op, normalize(add(atom.a, k)), normalize(add(atom.b, k)))
    pos = [_term(a, c) for a, c in terms.items() if c > 0]
    negative = [_term(a, c) for a, c in terms.items() if c < 0]
    out: ir.Expr
    if not pos:
        if negative and not constant[0]:
            out = neg(negative.pop(0))
        else:
            out = const(constant[0], dt.index)
            if negative:
                out = sub(out, negative.pop(0))
    else:
        out = pos[0]
        for t in pos[1:]:
            out = add(out, t)
    for t in negative:
        out = sub(out, t)
    if pos and constant[0]:
        out = binary("add" if constant[0] > 0 else "sub", out, const(abs(constant[0]), dt.index))
    return out


_COMPARE: dict[ir.CompareOp, Callable[[int], bool]] = {
    "lt": lambda d: d < 0,
    "le": lambda d: d <= 0,
    "gt": lambda d: d > 0,
    "ge": lambda d: d >= 0,
    "eq": lambda d: d == 0,
    "ne": lambda d: d != 0,
}


def constant_difference(a: ir.Expr, b: ir.Expr) -> int | None:
    """a - b when it is a constant (both index expressions), else None."""
    if a.dtype != dt.index or b.dtype != dt.index:
        return None
    return ir.int_value(normalize(sub(a, b)))


Range = tuple[int | None, int | None]  # inclusive bounds; None is unbounded
_ANY: Range = (None, None)


def _add(a: Range, b: Range) -> Range:
    return (None if a[0] is None or b[0] is None else a[0] + b[0],
            None if a[1] is None or b[1] is None else a[1] + b[1])


def _scale(a: Range, c: int) -> Range:
    lo = None if a[0] is None else a[0] * c
    hi = None if a[1] is None else a[1] * c
    return (lo, hi) if c >= 0 else (hi, lo)


def _hull(a: Range, b: Range) -> Range:
    return (None if a[0] is None or b[0] is None else min(a[0], b[0]),
            None if a[1] is None or b[1] is None else max(a[1], b[1]))


def _meet(a: Range, b: Range) -> Range:
    lo = a[0] if b[0] is None else b[0] if a[0] is None else max(a[0], b[0])
    hi = a[1] if b[1] is None else b[1] if a[1] is None else min(a[1], b[1])
    return lo, hi


def _decide(op: ir.CompareOp, d: Range) -> bool | None:
    """The truth of `d op 0` for every value in range `d`, or None when it depends."""
    lo, hi = d
    below = hi is not None and hi < 0  # d < 0 always
    above = lo is not None and lo > 0  # d > 0 always
    nonpos = hi is not None and hi <= 0
    nonneg = lo is not None and lo >= 0
    zero = nonpos and nonneg
    answers = {
        "lt": (below, nonneg), "le": (nonpos, above), "gt": (above, nonpos),
        "ge": (nonneg, below), "eq": (zero, below or above), "ne": (below or above, zero),
    }
    yes, no = answers[op]
    return True if yes else False if no else None


class _Simplify(Rewriter):
    """Folds bottom-up; `ranges` holds what the enclosing loops, lets and ifs say about
    the index variables in scope."""

    def __init__(self) -> None:
        self.ranges: dict[str, Range] = {}

    # ------------------------------------------------------------ ranges

    def range_of(self, e: ir.Expr) -> Range:
        """Bounds of an index expression given the ranges in scope."""
        terms: dict[ir.Expr, int] = {}
        constant = [0]
        _linear(e, 1, terms, constant)
        out: Range = (constant[0], constant[0])
        for atom, c in terms.items():
            if c:
                out = _add(out, _scale(self._atom_range(atom), c))
        return out

    def _atom_range(self, e: ir.Expr) -> Range:
        match e:
            case ir.Var(name):
                return self.ranges.get(name, _ANY)
            case ir.Binary("min", a, b):
                ra, rb = self.range_of(a), self.range_of(b)
                return (None if ra[0] is None or rb[0] is None else min(ra[0], rb[0]),
                        rb[1] if ra[1] is None else ra[1] if rb[1] is None else min(ra[1], rb[1]))
            case ir.Binary("max", a, b):
                ra, rb = self.range_of(a), self.range_of(b)
                return (rb[0] if ra[0] is None else ra[0] if rb[0] is None else max(ra[0], rb[0]),
                        None if ra[1] is None or rb[1] is None else max(ra[1], rb[1]))
            case ir.Binary("floordiv" | "pdiv", a, ir.Const(int() as c)) if c > 0:
                lo, hi = self.range_of(a)
                return (None if lo is None else lo // c, None if hi is None else hi // c)
            case ir.Binary("mod" | "pmod", a, ir.Const(int() as c)) if c > 0:
                lo, hi = self.range_of(a)
                if lo is not None and hi is not None and lo // c == hi // c:
                    return lo % c, hi % c
                return (0 if e.op == "mod" or (lo is not None and lo >= 0) else -(c - 1), c - 1)
            case ir.Select(_, a, b) if e.dtype == dt.index:
                return _hull(self.range_of(a), self.range_of(b))
        return _ANY

    @contextmanager
    def narrowed(self, facts: dict[str, Range]) -> Iterator[None]:
        saved = dict(self.ranges)
        for name, r in facts.items():
            self.ranges[name] = _meet(self.ranges.get(name, _ANY), r)
        try:
            yield
        finally:
            self.ranges = saved

    def _facts(self, c: ir.Expr, holds: bool) -> dict[str, Range]:
        """Ranges of single variables that condition `c` being `holds` implies."""
        match c:
            case ir.Binary(op, a, b, d) if d == dt.bool_ and op == ("and" if holds else "or"):
                out = self._facts(a, holds)
                for name, r in self._facts(b, holds).items():
                    out[name] = _meet(out.get(name, _ANY), r)
                return out
            case ir.Unary("invert", a, d) if d == dt.bool_:
                return self._facts(a, not holds)
            case ir.Compare(op, a, b) if a.dtype == dt.index and b.dtype == dt.index:
                if not holds:
                    op = ir.NEGATED[op]
                terms: dict[ir.Expr, int] = {}
                constant = [0]
                _linear(sub(a, b), 1, terms, constant)
                terms = {t: k for t, k in terms.items() if k}
                if len(terms) != 1:
                    return {}
                (atom, k), = terms.items()
                if not isinstance(atom, ir.Var):
                    return {}
                if op == "ne":  # an end of the variable's range excluded narrows it
                    lo, hi = self.ranges.get(atom.name, _ANY)
                    if constant[0] % k:
                        return {}
                    v = -constant[0] // k
                    return ({atom.name: (v + 1, hi)} if v == lo else
                            {atom.name: (lo, v - 1)} if v == hi else {})
                return {atom.name: solved} if (solved := _solve(op, k, constant[0])) else {}
        return {}

    # ------------------------------------------------------------ statements

    def visit(self, s: ir.Stmt) -> ir.Stmt:
        new: ir.Stmt
        match s:
            case ir.For(var, start, end, kind, body, mx):
                start, end = self.visit_expr(start), self.visit_expr(end)
                lo, hi = self.range_of(start)[0], self.range_of(end)[1]
                if lo is not None and hi is not None and hi <= lo:
                    return ir.Block(())  # runs no iteration
                with self.narrowed({var: (lo, None if hi is None else hi - 1)}):
                    new = ir.For(var, start, end, kind, self.visit(body), mx)
            case ir.Let(name, v, body):
                v = self.visit_expr(v)
                with self.narrowed({name: self.range_of(v)} if v.dtype == dt.index else {}):
                    new = ir.Let(name, v, self.visit(body))
            case ir.If(c, t, e):
                c = self.visit_expr(c)
                if isinstance(c, ir.Const):
                    return self.visit(t if c.value else (e or ir.Block(())))
                with self.narrowed(self._facts(c, True)):
                    t = self.visit(t)
                with self.narrowed(self._facts(c, False)):
                    e = None if e is None else self.visit(e)
                new = ir.If(c, t, e)
            case _:
                return super().visit(s)
        if new == s:
            new = s
        out = self.stmt(new)
        return new if out is None else out

    # ------------------------------------------------------------ expressions

    def _boolean(self, e: ir.Expr) -> ir.Expr | None:
        match e:
            case ir.Binary("and", ir.Const(v), b, d) | ir.Binary("and", b, ir.Const(v), d) \
                    if d == dt.bool_:
                return b if v else const(False, dt.bool_)
            case ir.Binary("or", ir.Const(v), b, d) | ir.Binary("or", b, ir.Const(v), d) \
                    if d == dt.bool_:
                return const(True, dt.bool_) if v else b
            case ir.Unary("invert", ir.Const(v), d) if d == dt.bool_:
                return const(not v, dt.bool_)
            case ir.Select(ir.Const(v), a, b):
                return a if v else b
            case ir.Select(_, a, b) if a == b:
                return a
        return None

    def expr(self, e: ir.Expr) -> ir.Expr | None:
        folded = self._boolean(e)
        if folded is not None:
            return folded
        if isinstance(e, ir.Compare) and e.op in _COMPARE:
            return self._compare(e)
        if isinstance(e, ir.Binary) and e.op in ("min", "max"):
            chosen = self._min_max(e)
            if chosen is not None:
                return chosen
        if isinstance(e, ir.Binary) and e.dtype == dt.index:
            return _index_binary(e)
        if e.dtype.is_int and e.dtype != dt.index:
            return _int_value(e)
        if isinstance(e, ir.Unary) and e.dtype == dt.index and isinstance(e.a, ir.Const):
            return const(-e.a.value, dt.index)
        return None

    def _compare(self, e: ir.Compare) -> ir.Expr | None:
        """A comparison decided by the difference of its sides or by their ranges."""
        d = constant_difference(e.a, e.b)
        if d is not None:
            return const(_COMPARE[e.op](d), dt.bool_)
        if e.a.dtype == dt.index and e.b.dtype == dt.index:
            known = _decide(e.op, self.range_of(sub(e.a, e.b)))
            return None if known is None else const(known, dt.bool_)
        return None

    def _min_max(self, e: ir.Binary) -> ir.Expr | None:
        """The operand a min or max picks, where that is known."""
        d = constant_difference(e.a, e.b)
        if d is not None:
            return e.a if (d <= 0) == (e.op == "min") else e.b
        if e.dtype == dt.index:
            # a - b in [0, 5] decides neither "a <= b" nor its negation, yet a >= b
            span = self.range_of(sub(e.a, e.b))
            if _decide("le", span):
                return e.a if e.op == "min" else e.b
            if _decide("ge", span):
                return e.b if e.op == "min" else e.a
        return None

    def stmt(self, s: ir.Stmt) -> ir.Stmt | None:
        if isinstance(s, ir.If) and isinstance(s.cond, ir.Const):
            return s.then if s.cond.value else (s.else_ or ir.Block(()))
        if isinstance(s, ir.Store) and not s.atomic and s.value == ir.Load(s.buffer, s.indices):
            return ir.Block(())  # a[i] = a[i]
        if isinstance(s, ir.For | ir.Let) and s.body == ir.Block(()) and (
                not isinstance(s, ir.For) or s.reassociate is None):
            return ir.Block(())  # a loop or a binding of nothing
        if isinstance(s, ir.Let) and s.name not in free_vars(s.body):
            return s.body  # a binding nothing reads (the bound of a loop removed)
        if isinstance(s, ir.Block):
            flat: list[ir.Stmt] = []
            for x in s.stmts:
                flat.extend(x.stmts if isinstance(x, ir.Block) else (x,))
            if len(flat) == 1:
                return flat[0]
            if len(flat) != len(s.stmts):
                return ir.Block(tuple(flat))
        return None


def _wrap(v: int, t: dt.DType) -> int:
    """`v` wrapped into integer dtype `t`, as numpy's arithmetic wraps."""
    v &= (1 << t.bits) - 1
    return v - (1 << t.bits) if t.is_signed and v >> (t.bits - 1) else v


_WRAPPING: dict[str, Callable[[int, int], int]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "min": min, "max": max, "and": lambda a, b: a & b, "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b}


def _int_value(e: ir.Expr) -> ir.Expr | None:
    """An integer (not index) node folded: constants, a cast of one, the identities."""
    t = e.dtype
    match e:
        case ir.Cast(ir.Const(int() as v, src), _) if src.is_int and not src.is_bool:
            return const(_wrap(v, t), t)
        case ir.Binary(op, ir.Const(int() as a), ir.Const(int() as b), _) if op in _WRAPPING:
            return const(_wrap(_WRAPPING[op](a, b), t), t)
        case ir.Binary("add" | "sub", a, ir.Const(0)) | ir.Binary("add", ir.Const(0), a):
            return a
        case ir.Binary("mul", a, ir.Const(1)) | ir.Binary("mul", ir.Const(1), a):
            return a
        case ir.Binary("mul", _, ir.Const(0)) | ir.Binary("mul", ir.Const(0), _):
            return const(0, t)
    return None


def _index_binary(e: ir.Binary) -> ir.Expr | None:
    """Index arithmetic folded: constants, normal form of sums and products, identities."""
    a, b = e.a, e.b
    ca, cb = ir.int_value(a), ir.int_value(b)
    if ca is not None and cb is not None and e.op in _FOLD:
        v = _FOLD[e.op](ca, cb)
        return const(v, dt.index) if v is not None else None
    if e.op in ("add", "sub", "mul"):
        n = normalize(e)
        return None if n == e else n
    if e.op == "add" and _is(b, 0) or e.op == "sub" and _is(b, 0):
        return a
    if e.op == "add" and _is(a, 0):
        return b
    if e.op == "mul" and _is(b, 1):
        return a
    if e.op == "mul" and _is(a, 1):
        return b
    if e.op == "mul" and (_is(a, 0) or _is(b, 0)):
        return const(0, dt.index)
    if e.op == "sub" and isinstance(a, ir.Binary) and a.op == "add" and a.b == b:
        return a.a  # (x + y) - y
    return None


def _solve(op: ir.CompareOp, k: int, c: int) -> Range | None:
    """The range of v where `k * v + c op 0` (k != 0), or None if it is not an interval."""
    if op == "ne":
        return None
    if op == "eq":
        return (-c // k, -c // k) if c % k == 0 else None  # no solution: nothing to narrow
    # k*v <= m, or k*v >= m
    upper = {"lt": -c - 1, "le": -c}.get(op)
    if upper is not None:
        return (None, upper // k) if k > 0 else (-(-upper // k), None)
    lower = {"gt": -c + 1, "ge": -c}[op]
    return (-(-lower // k), None) if k > 0 else (None, lower // k)


def simplify(func: ir.LoweredFunc) -> ir.LoweredFunc:
    return replace(func, body=_Simplify().visit(func.body))
