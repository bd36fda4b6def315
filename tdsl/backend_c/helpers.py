"""The `static inline` helpers generated C may call, and the C types.

A kernel's source contains only the helpers it uses. Each gives an IR
operation numpy's meaning where plain C would differ: floor division and
modulo (never trapping), NaN-propagating min/max, wrapping abs, a float32
exp that vectorizes (see EXP_F32), and aligned temporary storage (host C) or
sizing a workspace with saturating arithmetic (standalone C).
"""

from __future__ import annotations

from ..dtypes import DType
from ..lower.fastexp import (
    EXPONENT_ONE,
    HALF_LOG2E,
    HI,
    LN2_HI,
    LN2_LO,
    LO,
    LOG2E,
    MAGIC,
    MAGIC_BITS,
    TAYLOR,
)

CTYPE = {
    "float32": "float",
    "float64": "double",
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint8": "uint8_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "bool": "uint8_t",
    "index": "int64_t",
}

# Suffixes name a helper's C type; bool behaves as uint8 and index as int64.
SUFFIX = {
    "float32": "f32",
    "float64": "f64",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "bool": "u8",
    "index": "i64",
}

_SUFFIX_CTYPE = {s: CTYPE[name] for name, s in SUFFIX.items()}

OPS = ("floordiv", "mod", "min", "max", "abs")
ALLOC = "alloc_temp"
MUL_SAT, ADD_SAT = "mul_sat_u64", "add_sat_u64"  # sizing a workspace without overflow
EXP_F32 = "exp_f32"
TO_INT64 = {"f32": "toi64_f32", "f64": "toi64_f64"}  # float -> int64, defined everywhere
NAMES = frozenset({f"{op}_{s}" for op in OPS for s in _SUFFIX_CTYPE}
                  | {ALLOC, MUL_SAT, ADD_SAT, EXP_F32, *TO_INT64.values()})



def ctype(dtype: DType) -> str:
    return CTYPE[dtype.name]


def wrap_ctype(dtype: DType) -> str:
    """The unsigned type in which `dtype` adds, subtracts and multiplies without
    undefined behaviour or promotion to int: 32 bits at least."""
    return "uint64_t" if dtype.bits == 64 else "uint32_t"


def helper_name(op: str, dtype: DType) -> str:
    return f"{op}_{SUFFIX[dtype.name]}"


def definition(name: str) -> tuple[str, frozenset[str]]:
    """C text of helper `name` and the headers it needs."""
    if name == ALLOC:
        return _ALLOC.strip() + "\n", frozenset({"stdint.h", "stdlib.h"})
    if name == EXP_F32:
        return _exp_f32().strip() + "\n", frozenset({"stdint.h"})
    if name in _SATURATING:
        return _SATURATING[name].strip() + "\n", frozenset({"stdint.h"})
    if name in TO_INT64.values():
        t = _SUFFIX_CTYPE[name.split("_")[1]]
        return _TOI64.format(t=t, name=name).strip() + "\n", frozenset({"stdint.h"})
    op, sfx = name.split("_")
    t = _SUFFIX_CTYPE[sfx]
    if sfx[0] == "f":
        f = "f" if sfx == "f32" else ""
        lit = (lambda x: f"{x}f") if f else str
        text = _FLOAT[op].format(
            t=t, f=f, name=name, zero=lit("0.0"), one=lit("1.0"), half=lit("0.5")
        )
        return text.strip() + "\n", frozenset({"math.h"})
    u = "uint64_t" if sfx.endswith("64") else "uint32_t"
    table = _SIGNED if sfx[0] == "i" else _UNSIGNED
    return table[op].format(t=t, u=u, name=name).strip() + "\n", frozenset({"stdint.h"})


_MINMAX = {
    "min": """
static inline {t} {name}({t} a, {t} b) {{
    return a < b ? a : b;
}}
""",
    "max": """
static inline {t} {name}({t} a, {t} b) {{
    return a > b ? a : b;
}}
""",
}

_SIGNED = {
    **_MINMAX,
    "floordiv": """
/* Floor division as numpy: x // 0 == 0 and MIN // -1 == MIN (wraps). */
static inline {t} {name}({t} a, {t} b) {{
    if (b == 0) {{
        return 0;
    }}
    if (b == -1) {{
        return ({t})-({u})a;
    }}
    {t} q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}}
""",
    "mod": """
/* Python's modulo (sign of the divisor) as numpy: x % 0 == 0. */
static inline {t} {name}({t} a, {t} b) {{
    if (b == 0 || b == -1) {{
        return 0;
    }}
    {t} r = a % b;
    return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}}
""",
    "abs": """
/* abs that wraps as numpy's: abs(MIN) == MIN. */
static inline {t} {name}({t} a) {{
    return a < 0 ? ({t})-({u})a : a;
}}
""",
}

_UNSIGNED = {
    **_MINMAX,
    "floordiv": """
static inline {t} {name}({t} a, {t} b) {{
    return b == 0 ? 0 : a / b;
}}
""",
    "mod": """
static inline {t} {name}({t} a, {t} b) {{
    return b == 0 ? 0 : a % b;
}}
""",
    "abs": """
static inline {t} {name}({t} a) {{
    return a;
}}
""",
}

# tdsl.dtypes.astype: truncation toward zero within int64's range (numpy's result),
# NaN -> 0, saturation beyond; a plain C conversion of those values is undefined.
_TOI64 = """
static inline int64_t {name}({t} a) {{
    if (a != a) {{
        return 0;
    }}
    if (a >= ({t})9223372036854775807.0) {{
        return INT64_MAX;
    }}
    return a < ({t})-9223372036854775807.0 ? INT64_MIN : (int64_t)a;
}}
"""

# numpy's npy_floor_divide / npy_remainder (npy_divmod), so results match bit for bit.
_FLOAT = {
    "floordiv": """
/* Floor division as numpy's npy_divmod computes it. */
static inline {t} {name}({t} a, {t} b) {{
    if (b == {zero}) {{
        return a / b;
    }}
    {t} mod = fmod{f}(a, b);
    {t} quot = (a - mod) / b;
    if (mod != {zero} && (b < {zero}) != (mod < {zero})) {{
        quot -= {one};
    }}
    if (quot == {zero}) {{
        return copysign{f}({zero}, a / b);
    }}
    {t} q = floor{f}(quot);
    return quot - q > {half} ? q + {one} : q;
}}
""",
    "mod": """
/* Python's modulo (sign of the divisor) as numpy's npy_divmod computes it. */
static inline {t} {name}({t} a, {t} b) {{
    {t} mod = fmod{f}(a, b);
    if (b == {zero}) {{
        return mod;
    }}
    if (mod == {zero}) {{
        return copysign{f}({zero}, b);
    }}
    return (b < {zero}) != (mod < {zero}) ? mod + b : mod;
}}
""",
    "min": """
/* np.minimum: NaN in either operand propagates. */
static inline {t} {name}({t} a, {t} b) {{
    return (a < b || a != a) ? a : b;
}}
""",
    "max": """
/* np.maximum: NaN in either operand propagates. */
static inline {t} {name}({t} a, {t} b) {{
    return (a > b || a != a) ? a : b;
}}
""",
}

_ALLOC = """
/* 64-byte aligned storage for `count` elements of `size` bytes, or NULL. */
static void *alloc_temp(int64_t count, size_t size) {
    if (count < 1) {
        count = 1;
    }
    if ((uint64_t)count > (SIZE_MAX - 63) / size) {
        return NULL;
    }
    return aligned_alloc(64, ((size_t)count * size + 63) & ~(size_t)63);
}
"""

_SATURATING = {
    MUL_SAT: """
/* a * b, or UINT64_MAX when the product does not fit. */
static inline uint64_t mul_sat_u64(uint64_t a, uint64_t b) {
    return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}
""",
    ADD_SAT: """
/* a + b, or UINT64_MAX when the sum does not fit. */
static inline uint64_t add_sat_u64(uint64_t a, uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}
""",
}


def _exp_f32() -> str:
    """The C text of `lower.fastexp`'s algorithm."""
    horner = f"{TAYLOR[0]!r}f"
    for c in TAYLOR[1:]:
        horner = f"{c!r}f + r * ({horner})"
    return f"""
/* np.exp on float32 from operations a vectorizer handles (within 1 ulp of exact): x = k ln2 + r,
   exp(r) by a degree-7 polynomial, 2^k as two powers of two built from their bits. */
static inline float exp_f32(float x) {{
    union {{ float f; int32_t i; }} t, t2, s1, s2;
    float y = x > {LO!r}f ? (x < {HI!r}f ? x : {HI!r}f) : {LO!r}f;  /* NaN: LO */
    t.f = y * {LOG2E!r}f + {MAGIC!r}f;
    t2.f = y * {HALF_LOG2E!r}f + {MAGIC!r}f;
    float k = t.f - {MAGIC!r}f;
    float r = (y - k * {LN2_HI!r}f) - k * {LN2_LO!r}f;
    float p = 1.0f + r * ({horner});
    int32_t k1 = t2.i - {MAGIC_BITS:#x};
    int32_t k2 = t.i - {MAGIC_BITS:#x} - k1;
    s1.i = (k1 + 127) * {EXPONENT_ONE};
    s2.i = (k2 + 127) * {EXPONENT_ONE};
    float out = p * s1.f * s2.f;
    return x != x ? x : out;
}}
"""
