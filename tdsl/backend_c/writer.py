"""A small C writer: indentation, lexical scopes, unique names, precedence.

Statements are emitted line by line into a `CWriter`; expressions are built
as `CExpr` values that know their precedence, so `binary`, `unary` and the
rest add exactly the parentheses C needs (plus the few that gcc's
-Wparentheses asks for).
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum


class Prec(IntEnum):
    """C operator precedence, loosest first."""

    TERNARY = 3
    LOR = 4
    LAND = 5
    BOR = 6
    BXOR = 7
    BAND = 8
    EQUALITY = 9
    RELATIONAL = 10
    SHIFT = 11
    ADDITIVE = 12
    MULTIPLICATIVE = 13
    UNARY = 15
    POSTFIX = 16


BINARY_PREC = {
    "*": Prec.MULTIPLICATIVE,
    "/": Prec.MULTIPLICATIVE,
    "%": Prec.MULTIPLICATIVE,
    "+": Prec.ADDITIVE,
    "-": Prec.ADDITIVE,
    "<<": Prec.SHIFT,
    ">>": Prec.SHIFT,
    "<": Prec.RELATIONAL,
    "<=": Prec.RELATIONAL,
    ">": Prec.RELATIONAL,
    ">=": Prec.RELATIONAL,
    "==": Prec.EQUALITY,
    "!=": Prec.EQUALITY,
    "&": Prec.BAND,
    "^": Prec.BXOR,
    "|": Prec.BOR,
    "&&": Prec.LAND,
    "||": Prec.LOR,
}

_BITWISE = {Prec.BAND, Prec.BXOR, Prec.BOR}
_COMPARISON = {Prec.EQUALITY, Prec.RELATIONAL}


def _clarify(prec: Prec, operand: CExpr, op: str) -> bool:
    """Parentheses C does not need but readers (and gcc's -Wparentheses) want:
    `(a & b) | c`, `(a + b) & c`, `(a < b) == c`, `(a && b) || c`, `(a + b) >> c`."""
    if operand.op is None:
        return False
    if prec in _COMPARISON:
        return operand.prec in _COMPARISON
    if prec == Prec.SHIFT:
        return operand.prec == Prec.ADDITIVE
    if operand.op == op:
        return False
    return prec in _BITWISE or prec == Prec.LOR


@dataclass(frozen=True, slots=True)
class CExpr:
    """C expression text with the precedence of its outermost operator."""

    text: str
    prec: Prec = Prec.POSTFIX
    op: str | None = None  # outermost binary operator, if any
    # the operators of the unparenthesised chain at that precedence (`x % 5 * J`: % and *)
    chain: frozenset[str] = frozenset()

    def __str__(self) -> str:
        return self.text


def paren(e: CExpr) -> str:
    return f"({e.text})"


def atom(text: str) -> CExpr:
    return CExpr(text, Prec.POSTFIX)


# For exact (integer) arithmetic, `a + (b - c)` is `a + b - c` and `a * (b * c)` is `a * b * c`.
_REASSOCIABLE = {"+": ("+", "-"), "*": ("*",)}


def binary(op: str, a: CExpr, b: CExpr, exact: bool = False) -> CExpr:
    """`a op b` for a left-associative C operator, minimally parenthesised.

    `exact` says the arithmetic is associative (integers that do not overflow,
    or wrap modulo 2**n), so a right operand of `+` or `*` needs no parentheses
    for a reader either."""
    prec = BINARY_PREC[op]
    chain = {op}

    def side(e: CExpr, right: bool) -> str:
        tight = e.prec > prec or (e.prec == prec and not right)
        if right and exact and e.prec == prec and e.chain <= set(_REASSOCIABLE.get(op, ())):
            tight = True  # every operator of its chain regroups: not `2 * (j % 5 * J)`
        if tight and not _clarify(prec, e, op):
            if e.prec == prec:
                chain.update(e.chain)
            return e.text
        return paren(e)

    text = f"{side(a, False)} {op} {side(b, True)}"
    return CExpr(text, prec, op, frozenset(chain))


def unary(op: str, a: CExpr) -> CExpr:
    """A prefix operator or cast: `-x`, `!x`, `~x`, `(int32_t)x`."""
    text = a.text if a.prec >= Prec.UNARY else paren(a)
    if op in ("-", "+") and text.startswith(op):
        text = f"({text})"  # `- -x`, never `--x`
    return CExpr(f"{op}{text}", Prec.UNARY)


def cast(ctype: str, a: CExpr) -> CExpr:
    return unary(f"({ctype})", a)


def ternary(c: CExpr, a: CExpr, b: CExpr) -> CExpr:
    def side(e: CExpr) -> str:
        return e.text if e.prec > Prec.TERNARY else paren(e)

    # a bitwise condition (`a & b ? x : y`) is parenthesised: clang warns about it
    cond = paren(c) if Prec.BOR <= c.prec <= Prec.BAND else side(c)
    return CExpr(f"{cond} ? {side(a)} : {side(b)}", Prec.TERNARY)


def call(fn: str, *args: CExpr) -> CExpr:
    return atom(f"{fn}({', '.join(a.text for a in args)})")


def subscript(base: str, index: CExpr) -> CExpr:
    return atom(f"{base}[{index.text}]")


# ------------------------------------------------------------------- names

C_KEYWORDS = frozenset(
    """auto break case char const continue default do double else enum extern float for
    goto if inline int long register restrict return short signed sizeof static struct
    switch typedef union unsigned void volatile while _Alignas _Alignof _Atomic _Bool
    _Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local bool true false
    alignas alignof static_assert thread_local nullptr typeof asm""".split()
)

# Names from the headers generated code includes, whether or not a given
# kernel uses them: reserving them all keeps renaming independent of which
# helpers a kernel happens to need.
LIBRARY_NAMES = frozenset(
    """int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t intptr_t uintptr_t
    size_t ptrdiff_t NULL SIZE_MAX INT8_MIN INT16_MIN INT32_MIN INT64_MIN INT8_MAX INT16_MAX
    INT32_MAX INT64_MAX UINT8_MAX UINT16_MAX UINT32_MAX UINT64_MAX INFINITY NAN HUGE_VAL
    malloc free calloc realloc aligned_alloc abort exit main errno div ldiv lldiv qsort rand
    exp expf log logf sqrt sqrtf sin sinf cos cosf tanh tanhf floor floorf ceil ceilf
    fabs fabsf fmod fmodf copysign copysignf isnan isinf isless isgreater abs labs llabs
    omp_get_thread_num omp_get_num_threads omp_get_max_threads""".split()
)

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def sanitize(name: str) -> str:
    """A valid C identifier close to `name` (not yet checked for collisions)."""
    if _IDENT.match(name):
        out = name
    else:
        out = re.sub(r"[^A-Za-z0-9_]", "_", name) or "v"
        if out[0].isdigit():
            out = "v" + out
    if out.startswith("__") or (out[0] == "_" and len(out) > 1 and out[1].isupper()):
        out = "v" + out  # reserved for the implementation
    return out


class CWriter:
    """Lines of C with indentation and lexical scopes.

    Each scope records the C names declared in it and a map from a binding key
    (for example `("var", "i")`) to the C name chosen for it. A new name never
    shadows a visible one and never redeclares one in the current block, so a
    binding can be emitted inline without opening a block of its own.
    """

    INDENT = "    "

    def __init__(self, reserved: frozenset[str] = frozenset()):
        self.lines: list[str] = []
        self.depth = 0
        self.reserved = C_KEYWORDS | LIBRARY_NAMES | reserved
        self._scopes: list[tuple[set[str], dict[object, str]]] = [(set(), {})]

    # -- text

    def line(self, text: str = "") -> None:
        self.lines.append(f"{self.INDENT * self.depth}{text}" if text else "")

    def open(self, header: str) -> None:
        """`header {` and a new indented scope; `close` ends it."""
        self.line(f"{header} {{" if header else "{")
        self.depth += 1
        self._scopes.append((set(), {}))

    def close(self, closer: str = "}") -> None:
        self._scopes.pop()
        self.depth -= 1
        self.line(closer)

    def middle(self, text: str) -> None:
        """End the current block and start the next one: `} else {`."""
        self._scopes.pop()
        self.depth -= 1
        self.line(text)
        self.depth += 1
        self._scopes.append((set(), {}))

    @contextmanager
    def block(self, header: str):
        """`header {`, an indented body in a new scope, then `}`."""
        self.open(header)
        yield
        self.close()

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    # -- scopes and names

    @contextmanager
    def scope(self):
        self._scopes.append((set(), {}))
        try:
            yield
        finally:
            self._scopes.pop()

    def _visible(self, name: str) -> bool:
        return any(name in declared for declared, _ in self._scopes)

    @property
    def level(self) -> int:
        """The current scope's level, for `bind(..., level=)` later."""
        return len(self._scopes) - 1

    def fresh(self, hint: str, level: int = -1) -> str:
        """A C name based on `hint` that is neither reserved nor visible here;
        declared in the scope at `level` (default: the current one)."""
        base = sanitize(hint)
        name, n = base, 0
        while name in self.reserved or self._visible(name):
            n += 1
            name = f"{base}_{n}"
        self._scopes[level][0].add(name)
        return name

    def bind(self, key: object, hint: str, level: int = -1) -> str:
        """Declare a fresh C name for `key` (in the scope at `level`) and return it."""
        name = self.fresh(hint, level)
        self._scopes[level][1][key] = name
        return name

    @contextmanager
    def binding(self, key: object, hint: str):
        """Bind `key` for the duration of the `with` body only.

        The C name stays declared in the scope (the C declaration does), so a
        later binding in the same block gets another name.
        """
        bound = self._scopes[-1][1]
        previous = bound.get(key)
        name = self.bind(key, hint)
        try:
            yield name
        finally:
            if previous is None:
                del bound[key]
            else:
                bound[key] = previous

    def lookup(self, key: object) -> str | None:
        found = self.lookup_level(key)
        return None if found is None else found[0]

    def lookup_level(self, key: object) -> tuple[str, int] | None:
        """The C name bound to `key` and the level of the scope that binds it."""
        for level in range(len(self._scopes) - 1, -1, -1):
            bound = self._scopes[level][1]
            if key in bound:
                return bound[key], level
        return None


def prototype(name: str, params: str, width: int = 100, returns: str = "int") -> str:
    """`returns name(params)`, one parameter per line when that is too long."""
    line = f"{returns} {name}({params})"
    if len(line) + 2 <= width:
        return line
    indent = CWriter.INDENT
    return f"{returns} {name}(\n{indent}" + f",\n{indent}".join(params.split(", ")) + "\n)"
