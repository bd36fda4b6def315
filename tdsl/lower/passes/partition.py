"""Loop partitioning: an interior where reads through boundary views need no clamp,
and a split's whole vector tiles apart from its last one, cut short.

A read through `td.clamp(t)` indexes with `min(max(e, 0), n - 1)`, and one through
`td.pad(t, v)` tests `0 <= e < n` (after `simplify`, a side it proved stays away).
For a serial or parallel loop over `v` with a vectorized loop inside, take each such min, max or test in a load's
index or a select's condition whose `e` is `a * v + r`, with `a` a positive
constant and `r` made of variables bound outside the loop, sizes, constants and the
variables of loops inside it that start at a constant and have a constant trip
bound. Then `e <= m` (or `e >= m`) holds for every iteration inside `v`'s
iteration when `v` lies in an interval computed from `r`'s least and greatest
values. The loop becomes three: before the interval, the interval, after it (any
of them may be empty); in the middle copy those mins, maxes and tests are replaced
by `e` (or true), so its reads are plain loads, which vectorize as such. The
middle copy's inner loops are partitioned in turn. Only reads inside vectorized
loops count, a loop is copied only while small (MAX_STATEMENTS), and the copies
together at most double the function (GROWTH), or add MAX_STATEMENTS to a small one.

A serial loop over `v` is cut the same way for the end of a vectorized loop inside,
min(m, e) with e = -a * v + r falling as v grows (a split whose factor does not
divide its loop, or a size known only at the call: `for x_i in 0 .. min(16, W - 16
x_o)`): in the interior, where e >= m for every iteration inside, the end is m, so
the vector loop runs over a constant number of lanes with no test of its own
(what the targets emit for a loop cut short checks every tile), and the tail after
it keeps the min. A parallel loop is not cut for this: that would make a second
parallel region.

In portable C (`LoweredFunc.portable`) every serial or parallel loop is partitioned
so, not only those around a vectorized loop, and every read counts: on a small core
a range test in an inner loop costs a compare and a branch at every step (a padded
convolution's interior then runs with none); the copies before and after the
interval are partitioned in turn where their inner loops have sites of their own
(a border row of a padded convolution tests only the taps that fall outside).

Guarantees: the result computes the same values; a min, max or test is replaced
only inside the interval where it equals what replaces it (its e, its m, or true)
for every iteration of the loops inside; loops are copied only while the loop stays below a size limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from ... import dtypes as dt
from .. import ir
from ..build import add, const, floordiv, index, maximum, minimum, mul, neg, sub
from ..rewrite import Rewriter, _rebuild_expr, expr_children, stmt_count, walk_stmts
from .simplify import normalize

MAX_STATEMENTS = 200  # a loop larger than this is not copied
GROWTH = 2  # nor once the copies would make the function this many times larger (or add
# more than MAX_STATEMENTS to a smaller one)

# A linear form: coefficients per variable name, and a constant. An opaque term that
# reads no variable of interest is kept as an expression with coefficient 1.
Linear = tuple[dict[str, int], int, tuple[ir.Expr, ...]]


def _linear(e: ir.Expr, watched: set[str]) -> Linear | None:
    """`e` as sum(coef * var) + const + opaque terms, or None when a watched variable
    appears other than linearly."""
    match e:
        case ir.Const(int() as c, _) if e.dtype == dt.index:
            return {}, c, ()
        case ir.Var(name):
            return {name: 1}, 0, ()
        case ir.Binary("add" | "sub", a, b, t) if t == dt.index:
            la, lb = _linear(a, watched), _linear(b, watched)
            if la is None or lb is None:
                return None
            s = 1 if e.op == "add" else -1
            coefs = dict(la[0])
            for k, c in lb[0].items():
                coefs[k] = coefs.get(k, 0) + s * c
            if s < 0 and lb[2]:
                return None  # an opaque term subtracted: keep it simple
            return coefs, la[1] + s * lb[1], la[2] + lb[2]
        case ir.Binary("mul", a, ir.Const(int() as c), t) | ir.Binary("mul", ir.Const(int() as c), a, t) \
                if t == dt.index:
            la = _linear(a, watched)
            if la is None or la[2]:
                return None
            return {k: c * v for k, v in la[0].items()}, c * la[1], ()
    if any(isinstance(x, ir.Load) or isinstance(x, ir.Var) and x.name in watched
           for x in _walk(e)):
        return None  # not linear in the loop's variables, or reads memory the loop may write
    return {}, 0, (e,)


def _walk(e: ir.Expr) -> Iterator[ir.Expr]:
    yield e
    for c in expr_children(e):
        yield from _walk(c)


def _sum(coefs: dict[str, int], constant: int, opaque: tuple[ir.Expr, ...]) -> ir.Expr:
    out: ir.Expr = index(constant)
    for name, c in sorted(coefs.items()):
        if c:
            term: ir.Expr = ir.Var(name) if c == 1 else mul(index(c), ir.Var(name))
            out = add(out, term)
    for x in opaque:
        out = add(out, x)
    return out


@dataclass(frozen=True)
class _Site:
    """`node` is the identity (or true) where v >= lo (when lo) and v <= hi (when hi).
    An `exact` site's `e` reads no variable of a loop inside v's: then outside that
    range `node` is `outside` (false, or the bound m) at every iteration inside."""

    node: ir.Expr
    replacement: ir.Expr
    lo: ir.Expr | None = None
    hi: ir.Expr | None = None
    exact: bool = False
    outside: ir.Expr | None = None
    tail: bool = False  # the end of a vectorized loop cut short


def _floordiv(a: ir.Expr, b: int) -> ir.Expr:
    a = normalize(a)  # one form for one value: sites with the same bound share it
    return a if b == 1 else floordiv(a, index(b))


def _ceildiv(a: ir.Expr, b: int) -> ir.Expr:
    return a if b == 1 else neg(_floordiv(neg(a), b))


class _Finder:
    """The sites of loop `v` (see the module docstring) in a loop body."""

    def __init__(self, v: str, inner: dict[str, tuple[int, int] | None],
                 in_vector: bool = False, tails: bool = False) -> None:
        self.v = v
        self.inner = inner  # loop var inside -> (least, greatest value), None: unknown
        self.in_vector = in_vector  # only reads inside a vectorized loop count
        self.tails = tails  # also the ends of vectorized loops cut short (`tail`)

    def bounds(self, e: ir.Expr, sign: int = 1) -> tuple[int, ir.Expr, ir.Expr] | None:
        """(a, least r, greatest r) with e = a * v + r, a > 0; None if e is not so. A
        min or max of e with an invariant bound around it (the other side of a clamp, a
        site itself, so the identity in the interior) is looked through. With sign -1:
        e = -a * v + r, nothing looked through (a tail's bound). `self.exact` says
        afterwards whether r reads no variable of an inner loop."""
        self.exact = True
        while sign > 0 and isinstance(e, ir.Binary) and e.op in ("min", "max") \
                and self.invariant(e.b):
            e = e.a
        lin = _linear(e, {self.v, *self.inner})
        if lin is None:
            return None
        coefs, const, opaque = lin
        a = sign * coefs.pop(self.v, 0)
        if a <= 0:
            return None
        outer = {k: c for k, c in coefs.items() if k not in self.inner}
        if any(c for k, c in coefs.items() if k in self.inner):
            self.exact = False
        least, greatest = const, const
        for k, c in coefs.items():
            if k in self.inner:
                rng = self.inner[k]
                if rng is None:
                    return None
                least += c * (rng[0] if c > 0 else rng[1])
                greatest += c * (rng[1] if c > 0 else rng[0])
        return a, _sum(outer, least, opaque), _sum(outer, greatest, opaque)

    def invariant(self, m: ir.Expr) -> bool:
        """`m` has the same value in every iteration: it reads no memory (which the loop
        may write) and no variable bound inside."""
        return not any(isinstance(x, ir.Load) or isinstance(x, ir.Var) and x.name in
                       {self.v, *self.inner} for x in _walk(m))

    def site(self, n: ir.Expr) -> _Site | None:
        false = const(False, dt.bool_)
        match n:
            case ir.Binary("min", e, m, t) if t == dt.index and self.invariant(m):
                b = self.bounds(e)  # e <= m  <=>  v <= (m - r_max) / a
                if b is not None:
                    return _Site(n, e, hi=_floordiv(sub(m, b[2]), b[0]),
                                 exact=self.exact, outside=m)
            case ir.Binary("max", e, m, t) if t == dt.index and self.invariant(m):
                b = self.bounds(e)  # e >= m  <=>  v >= (m - r_min) / a
                if b is not None:
                    return _Site(n, e, lo=_ceildiv(sub(m, b[1]), b[0]),
                                 exact=self.exact, outside=m)
            case ir.Compare("ge", e, m) if e.dtype == dt.index and self.invariant(m):
                b = self.bounds(e)
                if b is not None:
                    return _Site(n, const(True, dt.bool_),
                                 lo=_ceildiv(sub(m, b[1]), b[0]),
                                 exact=self.exact, outside=false)
            case ir.Compare("lt", e, m) if e.dtype == dt.index and self.invariant(m):
                b = self.bounds(e)  # e < m  <=>  e <= m - 1
                if b is not None:
                    top = sub(sub(m, index(1)), b[2])
                    return _Site(n, const(True, dt.bool_), hi=_floordiv(top, b[0]),
                                 exact=self.exact, outside=false)
        return None

    def tail(self, end: ir.Expr) -> _Site | None:
        """A vectorized loop ending at min(m, e), e = -a * v + r falling as v grows: the
        last tile of a split that does not divide its loop. Its end is m, so its
        number of lanes a constant, while e >= m, that is v <= (least r - m) / a."""
        if not (isinstance(end, ir.Binary) and end.op == "min" and end.dtype == dt.index):
            return None
        for m, e in ((end.a, end.b), (end.b, end.a)):
            if self.invariant(m):
                b = self.bounds(e, sign=-1)
                if b is not None:
                    return _Site(end, m, hi=_floordiv(sub(b[1], m), b[0]),
                                 tail=True)
        return None

    def collect(self, s: ir.Stmt, out: list[_Site]) -> None:
        """The sites in the loads' indices and selects' conditions under `s`, and with
        `tails` in the ends of vectorized loops."""
        match s:
            case ir.For(var, start, end, _, body, mx):
                lo, hi = _constant(start), _constant(end)
                known = None
                if lo is not None and hi is not None:
                    known = (lo, hi - 1)
                elif lo is not None and mx is not None:
                    known = (lo, lo + mx - 1)
                vector = self.in_vector or s.kind is ir.ForKind.VECTORIZED
                site = self.tail(end) if vector and self.tails else None
                if site is not None:
                    out.append(site)
                _Finder(self.v, {**self.inner, var: known}, vector, self.tails).collect(body, out)
                return
            case ir.Let(name, _, body):
                _Finder(self.v, {**self.inner, name: None}, self.in_vector,
                        self.tails).collect(body, out)
                return
        for x in walk_shallow(s):
            self.collect(x, out)
        if self.in_vector:
            for e in _exprs(s):
                self.scan(e, out, in_index=False)

    def scan(self, e: ir.Expr, out: list[_Site], in_index: bool) -> None:
        match e:
            case ir.Load(_, idx):
                for i in idx:
                    self.scan(i, out, in_index=True)
                return
            case ir.Select(c, a, b, _):
                self.scan(c, out, in_index=True)
                self.scan(a, out, in_index)
                self.scan(b, out, in_index)
                return
        if in_index:
            site = self.site(e)
            if site is not None:
                out.append(site)
        for c in expr_children(e):
            self.scan(c, out, in_index)


def walk_shallow(s: ir.Stmt) -> list[ir.Stmt]:
    """The statements directly inside `s` (not through loops or lets, which `collect`
    enters itself)."""
    match s:
        case ir.Block(stmts):
            return list(stmts)
        case ir.If(_, then, else_):
            return [then] + ([else_] if else_ is not None else [])
        case ir.Allocate(_, body):
            return [body]
    return []


def _exprs(s: ir.Stmt) -> tuple[ir.Expr, ...]:
    match s:
        case ir.Store(_, idx, v):
            return (*idx, v)
        case ir.If(c):
            return (c,)
    return ()


def _replace(e: ir.Expr, by_node: dict[int, ir.Expr]) -> ir.Expr:
    """`e` with each site node (by identity, outermost first) replaced by its identity."""
    r = by_node.get(id(e))
    if r is not None:
        return _replace(r, by_node)
    kids = expr_children(e)
    new = tuple(_replace(k, by_node) for k in kids)
    return e if all(a is b for a, b in zip(new, kids)) else _rebuild_expr(e, new)


class _Replace(Rewriter):
    """Statements with the site nodes replaced (outermost first, so a clamp's two sides
    both go): by what they are inside the interval, or with `outside`, by what they are
    outside it."""

    def __init__(self, sites: list[_Site], outside: bool = False) -> None:
        self.by_node: dict[int, ir.Expr] = {}
        for x in sites:
            by = x.outside if outside else x.replacement
            if by is not None:
                self.by_node[id(x.node)] = by

    def visit_expr(self, e: ir.Expr) -> ir.Expr:
        return _replace(e, self.by_node)


_FOLD: dict[str, Callable[[int, int], int]] = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
         "min": min, "max": max, "floordiv": lambda a, b: a // b}


def _constant(e: ir.Expr) -> int | None:
    """The value of an index expression of constants, or None."""
    match e:
        case ir.Const(int() as c, _):
            return c
        case ir.Unary("neg", a, _):
            v = _constant(a)
            return None if v is None else -v
        case ir.Binary(op, a, b, _) if op in _FOLD:
            x, y = _constant(a), _constant(b)
            if x is None or y is None or (op == "floordiv" and y == 0):
                return None
            return int(_FOLD[op](x, y))
    return None


def _vectorized(s: ir.Stmt) -> bool:
    """Whether a vectorized loop is inside `s` (the loops worth copying: an interior
    without clamps makes their reads plain vector loads)."""
    return any(isinstance(x, ir.For) and x.kind is ir.ForKind.VECTORIZED for x in walk_stmts(s))


class _Partition:
    """Top down: a loop with sites is split in three and its interior copy's body is
    partitioned in turn; the copies before and after are left as they are."""

    def __init__(self, budget: int, every: bool = False) -> None:
        self.count = 0
        self.budget = budget  # statements the copies may still add
        self.every = every  # every loop, every read (portable C)

    def visit(self, s: ir.Stmt) -> ir.Stmt:
        match s:
            case ir.For():
                return self.loop(s)
            case ir.Block(stmts):
                return ir.Block(tuple(self.visit(x) for x in stmts))
            case ir.If(c, t, e):
                return ir.If(c, self.visit(t), self.visit(e) if e is not None else None)
            case ir.Let(name, v, body):
                return ir.Let(name, v, self.visit(body))
            case ir.Allocate(buf, body, storage):
                return ir.Allocate(buf, self.visit(body), storage)
        return s

    def loop(self, s: ir.For) -> ir.Stmt:
        sites: list[_Site] = []
        size = stmt_count(s)
        if (s.kind in (ir.ForKind.SERIAL, ir.ForKind.PARALLEL) and s.reassociate is None
                and size <= MAX_STATEMENTS and 2 * size + 3 <= self.budget
                and (self.every or _vectorized(s.body))):
            # a parallel loop is not cut for a tail: that would be two parallel regions
            _Finder(s.var, {}, in_vector=self.every,
                    tails=s.kind is ir.ForKind.SERIAL).collect(s.body, sites)
            if self.every:  # exact sites only: the loop whose variable decides the test
                sites = [x for x in sites if x.exact or x.tail]
        if not sites:
            return replace(s, body=self.visit(s.body))
        self.budget -= 2 * size + 3  # two more copies, two lets and a block
        self.count += 1
        first, after = f"{s.var}_in{self.count}", f"{s.var}_out{self.count}"
        a: ir.Expr = s.start
        for lo in dict.fromkeys(x.lo for x in sites if x.lo is not None):
            a = maximum(a, lo)
        a = minimum(a, s.end)
        b: ir.Expr = s.end
        for hi in dict.fromkeys(x.hi for x in sites if x.hi is not None):
            b = minimum(b, add(hi, index(1)))
        ca, cb = _constant(a), _constant(b)
        a_at: ir.Expr
        b_at: ir.Expr
        if ca is not None and cb is not None:  # constant sizes: no lets, no empty loops
            a_at, b_at = index(ca), index(max(cb, ca))
        else:
            a_at, b_at = ir.Var(first), ir.Var(after)
            b = maximum(b, a_at)
        interior = replace(s, start=a_at, end=b_at,
                           body=self.visit(_Replace(sites).visit(s.body)))
        parts = [replace(s, end=a_at), interior, replace(s, start=b_at)]
        if self.every:  # outside the interval: what exact sites are there, then the
            # inner loops in turn
            for k, side in ((0, "lo"), (2, "hi")):
                on_side = [x for x in sites if getattr(x, side) is not None]
                outer = s.body
                if on_side and all(x.exact for x in on_side) and \
                        len(dict.fromkeys(getattr(x, side) for x in on_side)) == 1:
                    outer = _Replace(on_side, outside=True).visit(outer)
                parts[k] = replace(parts[k], body=self.visit(outer))
        start, end = _constant(s.start), _constant(s.end)
        if ca is not None and cb is not None:
            keep = [start is None or ca > start, cb > ca, end is None or end > max(cb, ca)]
            body: ir.Stmt = ir.Block(tuple(p for p, k in zip(parts, keep) if k))
            return body
        return ir.Let(first, a, ir.Let(after, b, ir.Block(tuple(parts))))


def partition(func: ir.LoweredFunc) -> ir.LoweredFunc:
    """`func` with loops partitioned around reads through boundary views (see the module)."""
    budget = max((GROWTH - 1) * stmt_count(func.body), MAX_STATEMENTS)
    return replace(func, body=_Partition(budget, every=func.portable).visit(func.body))
