"""The float32 exp of every target, so that exp vectorizes without a vector math library.

The `legalise` pass writes it out in core operations; no target has a copy.

    y = clamp(x, LO, HI)                  (a NaN x stays NaN, and so does every step after)
    k = round(y * log2 e)                 (adding MAGIC = 1.5 * 2^23 rounds to an integer
                                           held in the low bits of the sum)
    r = (y - k * LN2_HI) - k * LN2_LO     (Cody-Waite: LN2_HI has 9 bits, k * LN2_HI is exact)
    exp(y) = p(r) * 2^k1 * 2^k2           (p: degree-7 Taylor polynomial, truncation < 0.1 ulp
                                           on |r| <= ln(2) / 2; k1 = floor(k / 2) and
                                           k2 = k - k1, each a normal power of two whose
                                           bits are (k_i + 127) << 23, so k down to -150
                                           gives numpy's subnormal results, rounded once)

Within 1 ulp of the correctly rounded exp (numpy's float32 exp is within 2); inf, -inf,
NaN and overflow as numpy. Only the operations a vectorizer handles: multiply-adds,
compares and selects, integer adds and shifts, and bit reinterpretation. The clamp is
written `x < LO ? LO : x` (then the same with HI), which x86 does in one max (min)
instruction, and the shifts are single instructions where an integer multiply is not.
"""

from __future__ import annotations

MAGIC = 12582912.0  # 1.5 * 2^23
MAGIC_BITS = 0x4B400000
LOG2E = 1.4426950408889634
LN2_HI, LN2_LO = 0.693359375, -2.12194440e-4
LO, HI = -104.0, 89.0  # float32 exp is 0 below LO and inf above HI
EXPONENT_SHIFT = 23  # (e + 127) << EXPONENT_SHIFT: the bits of 2^e
# Taylor coefficients 1/n!, highest degree first (Horner order), down to degree 1
TAYLOR = tuple(1.0 / f for f in (5040, 720, 120, 24, 6, 2, 1))
