"""Reads of a mirror, mirror-interior or wrap view: within one period of its axis, and
anywhere.

A view of extent n reads index v itself for 0 <= v < n. Up to one period beyond either
edge, what it reads is affine in v and n: v reflected once (mirror, mirror_interior)
or shifted once (wrap). Past that, it is a remainder by a multiple of n (`anywhere`,
numpy's pad modes "symmetric", "reflect" and "wrap"), which is not affine.

`ONE_PERIOD` lists those two affine pieces per mode, as data, for the two places that
must agree on them: the regions bounds inference computes a stage over
(`lower.poly.access`, isl maps) and the index the kernel reads at
(`lower.poly.statement_writer`, loop IR). Each evaluates the forms with its own arithmetic
(`Form.build`).

    mode             left of 0                  right of n - 1
    mirror           -n <= v < 0:     -v - 1    n <= v < 2n:     2n - 1 - v
    mirror_interior  1 - n <= v < 0:  -v        n <= v < 2n - 1: 2n - 2 - v
    wrap             -n <= v < 0:     v + n     n <= v < 2n:     v - n

For every n >= 1 each piece reads an index in [0, n) wherever it applies (a piece of
mirror_interior is empty for n = 1), and agrees with `anywhere` there.

`anywhere(mode, v, n, arith)` is the remainder formula, written once for the three
arithmetics that evaluate it: `td.evaluate`'s (numpy), the inlined expression's
(`lower.poly.inline`) and the kernel's (`lower.poly.statement_writer`, beyond one period).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Form:
    """The affine form `v * index + n * extent + c`."""

    v: int
    n: int
    c: int

    def build(self, index: T, extent: T, const: Callable[[int], T],
              add: Callable[[T, T], T], sub: Callable[[T, T], T]) -> T:
        """The form in another arithmetic (`const(k)` a constant, `add` and `sub`):
        the terms of positive coefficient added up (from `const(0)` when there are
        none), then the others subtracted, a term |coefficient| times."""
        plus: list[T] = []
        minus: list[T] = []
        for coef, x in ((self.v, index), (self.n, extent)):
            (plus if coef > 0 else minus).extend([x] * abs(coef))
        if self.c:
            (plus if self.c > 0 else minus).append(const(abs(self.c)))
        out = plus[0] if plus else const(0)
        for t in plus[1:]:
            out = add(out, t)
        for t in minus:
            out = sub(out, t)
        return out

    def at(self, index: int, extent: int) -> int:
        """The form's value for integers (what the other arithmetics must agree with)."""
        return self.v * index + self.n * extent + self.c


@dataclass(frozen=True)
class Piece:
    """Where `lo <= index < hi` (forms of the extent alone), the view reads `value`."""

    lo: Form
    hi: Form
    value: Form


def _f(v: int = 0, n: int = 0, c: int = 0) -> Form:
    return Form(v, n, c)


ONE_PERIOD: dict[str, tuple[Piece, Piece]] = {
    # -1 -> 0, n -> n - 1
    "mirror": (Piece(_f(n=-1), _f(), _f(v=-1, c=-1)),
               Piece(_f(n=1), _f(n=2), _f(v=-1, n=2, c=-1))),
    # -1 -> 1, n -> n - 2
    "mirror_interior": (Piece(_f(n=-1, c=1), _f(), _f(v=-1)),
                        Piece(_f(n=1), _f(n=2, c=-1), _f(v=-1, n=2, c=-2))),
    # -1 -> n - 1, n -> 0
    "wrap": (Piece(_f(n=-1), _f(), _f(v=1, n=1)),
             Piece(_f(n=1), _f(n=2), _f(v=1, n=-1))),
}


@dataclass(frozen=True)
class Arith(Generic[T]):
    """An arithmetic on indices: constants, numpy's `+ - * % max` (floor remainder) and
    a choice `select(less(a, b), x, y)`, x where a < b, else y."""

    const: Callable[[int], T]
    add: Callable[[T, T], T]
    sub: Callable[[T, T], T]
    mul: Callable[[T, T], T]
    mod: Callable[[T, T], T]
    max: Callable[[T, T], T]
    less: Callable[[T, T], Any]
    select: Callable[[Any, T, T], T]


def anywhere(mode: str, index: T, extent: T, a: Arith[T]) -> T:
    """The index in [0, n) that a view of extent n >= 1 reads at any index v: v mod n
    (wrap); else v mod the period p (2n for mirror, max(2n - 2, 1) for
    mirror_interior), m, itself while m < n, reflected beyond (p - 1 - m for mirror,
    p - m for mirror_interior)."""
    if mode == "wrap":
        return a.mod(index, extent)
    two = a.mul(a.const(2), extent)
    period = two if mode == "mirror" else a.max(a.sub(two, a.const(2)), a.const(1))
    m = a.mod(index, period)
    back = a.sub(a.sub(period, a.const(1)), m) if mode == "mirror" else a.sub(period, m)
    return a.select(a.less(m, extent), m, back)
