"""The float32 exp of every target, so that exp vectorizes without a vector math library.

The `legalise` pass writes it out in core operations; no target has a copy.

    y = clamp(x, LO, HI)                  (a NaN x stays NaN, and so does every step after)
    t = y * log2 e + MAGIC                (MAGIC = 1.5 * 2^23: t's low bits hold
    k = t - MAGIC                          k = round(y * log2 e), an integer)
    r = (y - k * LN2_HI) - k * LN2_LO     (Cody-Waite: LN2_HI has 9 bits, k * LN2_HI is exact)
    exp(y) = p(r) * 2^k1 * 2^k2           (p: the degree-6 polynomial 1 + r + c2 r^2 + ...
                                           + c6 r^6 closest to exp in relative error on
                                           |r| <= ln(2) / 2 (Remez), off by 3.1e-9, 0.05 of
                                           a float32 ulp; k1 = floor(k / 2), k2 = k - k1,
                                           each a normal power of two, so k down to -150
                                           gives numpy's subnormal results, rounded once)

The powers come from t's bits: k << 23 is bits(t) << 23 (MAGIC's bits shifted out), an
arithmetic shift of that by 24 is k1, and 2^k1, 2^k2 are (k1 + 127) << 23 and
(k - k1 + 127) << 23 read as floats: six integer operations.

Within 1 ulp of the correctly rounded exp (numpy's float32 exp is within 2); inf, -inf,
NaN and overflow as numpy. Only the operations a vectorizer handles: multiply-adds,
compares and selects, integer adds and shifts, and bit reinterpretation. The clamp is
written `x < LO ? LO : x` (then the same with HI), which x86 does in one max (min)
instruction, and the shifts are single instructions where an integer multiply is not.
"""

from __future__ import annotations

MAGIC = 12582912.0  # 1.5 * 2^23
LOG2E = 1.4426950408889634
LN2_HI, LN2_LO = 0.693359375, -2.12194440e-4
LO, HI = -104.0, 89.0  # float32 exp is 0 below LO and inf above HI
EXPONENT_SHIFT = 23  # (e + 127) << EXPONENT_SHIFT: the bits of 2^e
EXPONENT_BIAS = 127 << EXPONENT_SHIFT  # the bits of 2^0
# p's coefficients c6 .. c2, highest degree first (Horner order); c1 = c0 = 1
POLY = (0.0013814613260779770809, 0.008368709824171194323, 0.041668387361261145548,
        0.16666520689833018806, 0.4999999345170843359)
