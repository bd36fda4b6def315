"""Which float multiplies and adds are one FMA: one rule for every host target.

A product that is an operand of an add or a subtract in its own float type is fused
with it into one multiply-add, rounded once (`fused_product`); each such pair on its
own, whatever else uses the product, so two copies of one expression round alike
(an argmin over tied values then picks numpy's first index). Left to a compiler,
fusion depends on uses: LLVM fuses a multiply with a single use, gcc one whose uses
are all adds, and equal expressions rounded differently (fuzz LLVM seed 7402,
case 498). Targets therefore turn the compiler's own contraction off and write the
fused pairs themselves: `llvm.fmuladd` on LLVM, `fmaf`/`fma` in host C.

One exception: the step of a scalar float reduction into a one-element accumulator
(`chain_step`, an inline `td.sum` computed lane by lane) is not fused outside
vectorized loops. Its adds form a chain, one after the other, whose speed is their
latency: unfused, the multiply leaves the chain, which costs an add's latency per
step where an FMA costs more (3 against 4 cycles on AMD Zen; equal elsewhere). In a
vectorized loop throughput counts, and the step is fused like any other.

Portable C (`td.emit_c`) writes `a * b + c` and leaves contraction to the embedded
compiler: a target without FMA hardware would call a slow software `fmaf`.
"""

from __future__ import annotations

from .ir import Binary, Expr, Load, Store, constant_elements


def fused_product(e: Binary) -> tuple[Binary, Expr, bool] | None:
    """(product, other operand, whether the product comes first) when float `e` =
    `x op y` (op "add" or "sub") has a product in its own type as an operand, to be
    computed with it as one multiply-add; else None. The first operand is the one
    fused when both are products.

    `p * q + c` and `c + p * q` are fma(p, q, c); `p * q - c` is fma(p, q, -c) and
    `c - p * q` is fma(-p, q, c): negation is exact, so each is rounded once."""
    if not (e.dtype.is_float and e.op in ("add", "sub")):
        return None
    for x, other, first in ((e.a, e.b, True), (e.b, e.a, False)):
        if isinstance(x, Binary) and x.op == "mul" and x.dtype == e.dtype:
            return x, other, first
    return None


def chain_step(s: Store) -> tuple[Load, Expr] | None:
    """(accumulator, x) when `s` is the step `acc[0] = acc[0] + x` of a scalar float
    reduction into a one-element temp accumulator, which targets compute as an add of
    `x` left unfused outside vectorized loops (see the module docstring); else None."""
    buf, v = s.buffer, s.value
    if not (buf.dtype.is_float and buf.kind == "temp" and constant_elements(buf) == 1):
        return None
    if not (isinstance(v, Binary) and v.op == "add" and v.dtype == buf.dtype):
        return None
    for acc, x in ((v.a, v.b), (v.b, v.a)):
        if isinstance(acc, Load) and acc.buffer == buf and acc.indices == s.indices:
            return acc, x
    return None
