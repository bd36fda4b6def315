"""The `static inline` helpers generated C may call, and the C types.

A kernel's source contains only the helpers it uses. Each maps one core
operation of the loop IR that is not one C operator (integer min/max, a
float's bits as an int and back, float to int64 conversion as numpy's, a
select with no branch), or
gives aligned temporary storage (host C) or sizes a workspace with saturating
arithmetic (standalone C). numpy's floor division and modulo, NaN-propagating
min/max, abs and float32 exp reach the backend as core operations already
(`lower.passes.legalise`), so they need no helper.
"""

from __future__ import annotations

from ..dtypes import DType
from ..lower.abi import PARALLEL_FOR as PARALLEL_FOR_SYMBOL

CTYPE = {
    "float16": "uint16_t",  # 16-bit floats only move (lower.passes.narrow): their bits
    "bfloat16": "uint16_t",
    "float32": "float",
    "float64": "double",
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint8": "uint8_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
    "bool": "uint8_t",
    "index": "int64_t",
    "index32": "int32_t",
}

# Suffixes name a helper's C type; bool behaves as uint8, index as int64, index32 as int32.
SUFFIX = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "bool": "u8",
    "index": "i64",
    "index32": "i32",
}

_SUFFIX_CTYPE = {s: CTYPE[name] for name, s in SUFFIX.items()}

OPS = ("min", "max")
# c ? a : b with no branch, per type: blend_f32, blend_i64, ... (render: the selects of
# a loop vectorized around loops of its own, which gcc 12 vectorizes only without
# control flow)
BLEND = {s: f"blend_{s}" for s in _SUFFIX_CTYPE}
ALLOC = "alloc_temp"
MUL_SAT, ADD_SAT = "mul_sat_u64", "add_sat_u64"  # sizing a workspace without overflow
PARALLEL_FOR = PARALLEL_FOR_SYMBOL  # the thread pool's entry point (backend_c/pool.c)
TO_INT64 = {"f32": "toi64_f32", "f64": "toi64_f64"}  # float -> int64, defined everywhere
# a float's bits as the int of its width and back: bitcast_i32_f32, bitcast_f32_i32, ...
BITCASTS = (("f32", "i32"), ("f32", "u32"), ("f64", "i64"), ("f16", "u16"), ("bf16", "u16"))
BITCAST = frozenset(n for f, i in BITCASTS for n in (f"bitcast_{i}_{f}", f"bitcast_{f}_{i}"))
STREAM_STORE, STREAM_FENCE = "stream_store", "stream_fence"  # Schedule.store_nontemporal
CLOCK = "clock_ns"  # the loop IR's clock: a monotonic clock in nanoseconds (Kernel.profile)
# a block of 32-bit elements copied to its transpose (lower.passes.transpose.transposing_copy), per type
TRANSPOSE = {s: f"transpose_{s}" for s in ("f32", "i32", "u32")}
# int32 sums of small-integer products taken in groups (render: lower.vectors.
# grouped_products): int16 pairs; quads of unsigned x and signed b bytes, and the reverse
PAIR_MADD, QUAD_MADD_U8I8, QUAD_MADD_I8U8 = "pair_madd_i16", "quad_madd_u8i8", "quad_madd_i8u8"
# The Arm DSP extension (lower.passes.dsp), defined only where the compiler targets it
# (`DSP_FEATURE`), each named dsp_<operation>: the sign- (zero-) extensions of a word
# rotated by 8 bits, which ACLE has as an intrinsic of a rotation (gcc 12 then rotates
# in an instruction of its own; the instruction rotates for free, as the helper's
# inline assembly does under gcc), and the multiply-accumulates, which under gcc are
# volatile inline assembly, as CMSIS-NN writes them for the same reason: gcc 12 -O2
# otherwise schedules every load of an unrolled block ahead of its arithmetic and
# spills what that keeps live (1,272,700 against 1,167,179 instructions for the
# depthwise convolution of benchmarks/embedded.py); other compilers get ACLE's
# intrinsics
DSP_FEATURE = "__ARM_FEATURE_DSP"
DSP_ROTATED = {"sxtb16_ror8": "sxtb16", "uxtb16_ror8": "uxtb16", "sxtab16_ror8": "sxtab16",
               "uxtab16_ror8": "uxtab16"}
DSP_MAC = ("smlad", "smlabb", "smlatt")
DSP_HELPERS = frozenset(f"dsp_{fn}" for fn in (*DSP_ROTATED, *DSP_MAC))
NAMES = frozenset({f"{op}_{s}" for op in OPS for s in _SUFFIX_CTYPE if s[0] != "f"}
                  | {ALLOC, MUL_SAT, ADD_SAT, PARALLEL_FOR, STREAM_STORE, STREAM_FENCE, PAIR_MADD, CLOCK,
                     QUAD_MADD_U8I8, QUAD_MADD_I8U8,
                     *TO_INT64.values(), *TRANSPOSE.values(), *BLEND.values()} | BITCAST
                  | DSP_HELPERS)



def ctype(dtype: DType) -> str:
    return CTYPE[dtype.name]


def wrap_ctype(dtype: DType) -> str:
    """The unsigned type in which `dtype` adds, subtracts and multiplies without
    undefined behaviour or promotion to int: 32 bits at least."""
    return "uint64_t" if dtype.bits == 64 else "uint32_t"


def helper_name(op: str, dtype: DType) -> str:
    return f"{op}_{SUFFIX[dtype.name]}"


def bitcast_name(src: DType, dst: DType) -> str:
    """The helper that reads the bits of a `src` value as a `dst` (a float and an int of
    the same width)."""
    name = f"bitcast_{SUFFIX[dst.name]}_{SUFFIX[src.name]}"
    if name not in BITCAST:
        raise TypeError(f"the loop IR has no bitcast of {src!r} to {dst!r}")
    return name


def definition(name: str) -> tuple[str, frozenset[str]]:
    """C text of helper `name` and the headers it needs (a helper of `DSP_HELPERS` is
    placed under a test of `DSP_FEATURE`, after <arm_acle.h>)."""
    if name in DSP_HELPERS:
        fn = name[len("dsp_"):]
        if fn in DSP_MAC:
            text = _MAC.format(name=name, fn=fn)
            return text.strip() + "\n", frozenset({"stdint.h"})
        base = DSP_ROTATED[fn]
        two = base.endswith("ab16")
        params = "int32_t a, uint32_t x" if two else "uint32_t x"
        asm_in = '"r"(a), "r"(x)' if two else '"r"(x)'
        operands = "%0, %1, %2" if two else "%0, %1"
        acle = f"__{base}(a, x >> 8 | x << 24)" if two else f"__{base}(x >> 8 | x << 24)"
        text = _ROTATED.format(name=name, base=base, params=params, asm_in=asm_in,
                               operands=operands, acle=acle)
        return text.strip() + "\n", frozenset({"stdint.h"})
    if name == ALLOC:
        return _ALLOC.strip() + "\n", frozenset({"stdint.h", "stdlib.h"})
    if name in BITCAST:
        _, dst, src = name.split("_")
        text = _BITCAST.format(name=name, t=_SUFFIX_CTYPE[dst], s=_SUFFIX_CTYPE[src])
        return text.strip() + "\n", frozenset({"stdint.h"})
    if name == CLOCK:
        return _CLOCK.strip() + "\n", frozenset({"stdint.h", "time.h"})
    if name == PARALLEL_FOR:
        return _PARALLEL_FOR.strip() + "\n", frozenset({"stdint.h"})
    if name in _STREAM:
        return _STREAM[name].strip() + "\n", frozenset({"stdint.h", "string.h"})
    if name in _SATURATING:
        return _SATURATING[name].strip() + "\n", frozenset({"stdint.h"})
    if name == PAIR_MADD:
        return _PAIR_MADD.strip() + "\n", frozenset({"stdint.h"})
    if name in (QUAD_MADD_U8I8, QUAD_MADD_I8U8):
        x, b = ("uint8_t", "int8_t") if name == QUAD_MADD_U8I8 else ("int8_t", "uint8_t")
        operands = "x, v" if name == QUAD_MADD_U8I8 else "v, x"
        text = _QUAD_MADD.format(name=name, x=x, b=b, operands=operands)
        return text.strip() + "\n", frozenset({"stdint.h", "string.h"})
    if name in TRANSPOSE.values():
        t = _SUFFIX_CTYPE[name.split("_")[1]]
        return _TRANSPOSE.format(t=t, name=name).strip() + "\n", frozenset({"stdint.h"})
    if name in BLEND.values():
        sfx = name.split("_")[1]
        t = _SUFFIX_CTYPE[sfx]
        if sfx in ("f32", "f64"):
            u = "uint32_t" if sfx == "f32" else "uint64_t"
            return _BLEND_FLOAT.format(t=t, u=u, name=name).strip() + "\n", frozenset({"stdint.h"})
        u = "uint64_t" if t.endswith("64_t") else "uint32_t"
        return _BLEND_INT.format(t=t, u=u, name=name).strip() + "\n", frozenset({"stdint.h"})
    if name in TO_INT64.values():
        t = _SUFFIX_CTYPE[name.split("_")[1]]
        return _TOI64.format(t=t, name=name).strip() + "\n", frozenset({"stdint.h"})
    op, sfx = name.split("_")
    t = _SUFFIX_CTYPE[sfx]
    return _MINMAX[op].format(t=t, name=name).strip() + "\n", frozenset({"stdint.h"})


_ROTATED = """
/* {base} of the operand rotated right by 8 bits: the rotation is free in the instruction. */
static inline int32_t {name}({params}) {{
#if defined(__GNUC__) && !defined(__clang__)
    int32_t r;
    __asm__("{base} {operands}, ror #8" : "=r"(r) : {asm_in});
    return r;
#else
    return {acle};
#endif
}}
"""

_MAC = """
/* __{fn}(a, b, acc), kept in place among the loads under gcc (see helpers.py). */
static inline int32_t {name}(int32_t a, int32_t b, int32_t acc) {{
#if defined(__GNUC__) && !defined(__clang__)
    int32_t r;
    __asm__ volatile("{fn} %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
    return r;
#else
    return __{fn}(a, b, acc);
#endif
}}
"""

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

# Both values are computed before the call (as a select of the loop IR allows: its
# arms are safe to evaluate anywhere), and the bits are chosen by a mask.
_BLEND_FLOAT = """
/* c ? a : b, without a branch. */
static inline {t} {name}(int c, {t} a, {t} b) {{
    union {{ {t} f; {u} u; }} x, y;
    x.f = a;
    y.f = b;
    const {u} m = -({u})(c != 0);
    x.u = (x.u & m) | (y.u & ~m);
    return x.f;
}}
"""

_BLEND_INT = """
/* c ? a : b, without a branch. */
static inline {t} {name}(int c, {t} a, {t} b) {{
    const {u} m = -({u})(c != 0);
    return ({t})((({u})a & m) | (({u})b & ~m));
}}
"""

_BITCAST = """
/* The bits of a {s} as a {t}. */
static inline {t} {name}({s} a) {{
    union {{ {s} from; {t} to; }} u;
    u.from = a;
    return u.to;
}}
"""

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

_CLOCK = """
static inline int64_t clock_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + (int64_t)t.tv_nsec;
}
"""

# A parallel loop runs on tdsl's thread pool (`lower.abi.PARALLEL_FOR`), which the
# dynamic loader binds when the kernel is loaded
_PARALLEL_FOR = f"""
/* Runs task(lo, hi, env) on chunks of [lo, hi) on tdsl's thread pool, the calling
   thread included; 0, or what a failed chunk returned. */
int {PARALLEL_FOR_SYMBOL}(int (*task)(int64_t, int64_t, void *), void *env, int64_t lo,
                      int64_t hi);
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

# Streaming (non-temporal) stores: SSE2's, where the compiler targets x86; an
# ordinary copy elsewhere (the values are the same)
_SSE2 = """
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
"""

_STREAM = {
    STREAM_STORE: _SSE2 + """
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* Copy `bytes` bytes from `src` (64-byte aligned) to `dst`, past the caches where the
   target has streaming stores and `dst` is 16-byte aligned: in vectors of 64 bytes
   with AVX-512 where `dst` and `bytes` allow (the usual case: one test, then the
   stores), otherwise of 16 bytes and the rest as usual. With AVX-512, a `dst` 8 bytes
   past a 16-byte boundary (every other row of an image of even width, in floats)
   streams too, 64 bytes as 8 bytes, three vectors of 16 from the boundary, 8 bytes. */
static inline void stream_store(void *restrict dst, const void *restrict src, int64_t bytes) {
    char *d = (char *)dst;
    const char *s = (const char *)src;
#if defined(__AVX512F__)
    if ((((uintptr_t)d | (uintptr_t)bytes) & 63) == 0) {
        for (int64_t done = 0; done < bytes; done += 64) {
            _mm512_stream_si512((void *)(d + done), _mm512_load_si512((const void *)(s + done)));
        }
        return;
    }
    if (((uintptr_t)d & 15) == 8 && (bytes & 63) == 0) {
        for (int64_t done = 0; done < bytes; done += 64) {
            const __m512i v = _mm512_load_si512((const void *)(s + done));
            const __m512i w = _mm512_alignr_epi64(v, v, 1);  /* bytes 8 .. 63, then 0 .. 7 */
            _mm_stream_si64((long long *)(d + done), _mm_cvtsi128_si64(_mm512_castsi512_si128(v)));
            _mm_stream_si128((__m128i *)(d + done + 8), _mm512_castsi512_si128(w));
            _mm_stream_si128((__m128i *)(d + done + 24), _mm512_extracti32x4_epi32(w, 1));
            _mm_stream_si128((__m128i *)(d + done + 40), _mm512_extracti32x4_epi32(w, 2));
            _mm_stream_si64((long long *)(d + done + 56),
                            _mm_cvtsi128_si64(_mm512_extracti32x4_epi32(w, 3)));
        }
        return;
    }
#endif
#if defined(__SSE2__)
    if (((uintptr_t)d & 15) == 0) {
        int64_t done = 0;
        for (; done + 16 <= bytes; done += 16) {
            _mm_stream_si128((__m128i *)(d + done), _mm_load_si128((const __m128i *)(s + done)));
        }
        memcpy(d + done, s + done, (size_t)(bytes - done));
        return;
    }
#endif
    /* each path copies with a size the compiler knows when `bytes` is a constant (a
       vector move, not a copy loop of unknown length) */
    memcpy(d, s, (size_t)bytes);
}
""",
    STREAM_FENCE: _SSE2 + """
/* Order the streaming stores before the kernel returns (they are weakly ordered). */
static inline void stream_fence(void) {
#if defined(__SSE2__)
    _mm_sfence();
#endif
}
""",
}

# Pairs of int16 products summed into int32 lanes: AVX-512BW's vpmaddwd, or with VNNI
# vpdpwssd, which adds the sums to the accumulator in the same instruction. The
# renderer calls it only where AVX-512BW is defined (the loops themselves otherwise).
_PAIR_MADD = """
#if defined(__AVX512BW__)
#include <immintrin.h>

/* acc[l] += x0 * b[2 l] + x1 * b[2 l + 1] for l < lanes, a multiple of 16, in int32
   arithmetic that wraps. */
static inline void pair_madd_i16(int32_t *restrict acc, const int16_t *restrict b, int16_t x0,
                                 int16_t x1, int64_t lanes) {
    const __m512i x = _mm512_set1_epi32((int32_t)((uint32_t)(uint16_t)x0
                                                  | (uint32_t)(uint16_t)x1 << 16));
    for (int64_t l = 0; l < lanes; l += 16) {
        __m512i sums = _mm512_loadu_si512((const void *)(acc + l));
        const __m512i v = _mm512_loadu_si512((const void *)(b + 2 * l));
#if defined(__AVX512VNNI__)
        sums = _mm512_dpwssd_epi32(sums, x, v);
#else
        sums = _mm512_add_epi32(sums, _mm512_madd_epi16(x, v));
#endif
        _mm512_storeu_si512((void *)(acc + l), sums);
    }
}
#endif
"""

# Quads of byte products summed into int32 lanes: VNNI's vpdpbusd, which multiplies
# unsigned bytes of its first operand by signed bytes of its second (so x and b swap
# places when x is the signed one). Called only where VNNI is defined.
_QUAD_MADD = """
#if defined(__AVX512VNNI__)
#include <immintrin.h>

/* The four bytes at p as one 32-bit value, the first lowest (x86 is little-endian). */
static inline uint32_t quad_bytes(const void *p) {{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}}

/* acc[l] += x0 * b[4 l] + x1 * b[4 l + 1] + x2 * b[4 l + 2] + x3 * b[4 l + 3] for
   l < lanes, a multiple of 16, in int32 arithmetic; xs holds x0 .. x3 ({x}) in its
   bytes, x0 lowest. */
static inline void {name}(int32_t *restrict acc, const {b} *restrict b, uint32_t xs,
                          int64_t lanes) {{
    const __m512i x = _mm512_set1_epi32((int32_t)xs);
    for (int64_t l = 0; l < lanes; l += 16) {{
        const __m512i sums = _mm512_loadu_si512((const void *)(acc + l));
        const __m512i v = _mm512_loadu_si512((const void *)(b + 4 * l));
        _mm512_storeu_si512((void *)(acc + l), _mm512_dpbusd_epi32(sums, {operands}));
    }}
}}
#endif
"""

# A block of 32-bit elements copied to its transpose: with AVX-512, 16 x 16 tiles are
# loaded as 16 vectors (masked at the block's edges, which never touches an element
# outside it), transposed in registers (4 rounds of 16 shuffles) and stored as 16
# vectors; elsewhere, the loops themselves. The vector moves and shuffles copy bits,
# so any 32-bit type goes through them unchanged.
_TRANSPOSE = """
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* dst[c * dst_stride + r] = src[r * src_stride + c] for r < rows, c < cols.
   With AVX-512: a block with at most 8 rows or columns in 8 x 8 tiles of 256-bit
   vectors (a 16 x 16 tile would be mostly zeros), others in 16 x 16 tiles; masked
   loads and stores at the edges, so nothing outside the block is read or written. */
static inline void {name}({t} *restrict dst, int64_t dst_stride, const {t} *restrict src,
                          int64_t src_stride, int64_t rows, int64_t cols) {{
#if defined(__AVX512F__) && defined(__AVX512VL__)
    if (rows <= 8 || cols <= 8) {{
        for (int64_t c0 = 0; c0 < cols; c0 += 8) {{
            const int64_t cn = cols - c0 < 8 ? cols - c0 : 8;
            const __mmask8 in_c = (__mmask8)((1u << cn) - 1u);
            for (int64_t r0 = 0; r0 < rows; r0 += 8) {{
                const int64_t rn = rows - r0 < 8 ? rows - r0 : 8;
                const __mmask8 in_r = (__mmask8)((1u << rn) - 1u);
                __m256 v[8], t[8];
                #pragma GCC unroll 8
                for (int i = 0; i < 8; i++) {{
                    v[i] = i < rn ? _mm256_maskz_loadu_ps(in_c, src + (r0 + i) * src_stride + c0)
                                  : _mm256_setzero_ps();
                }}
                #pragma GCC unroll 4
                for (int i = 0; i < 8; i += 2) {{
                    t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
                    t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
                }}
                #pragma GCC unroll 2
                for (int i = 0; i < 8; i += 4) {{
                    v[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
                    v[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
                    v[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
                    v[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
                }}
                #pragma GCC unroll 4
                for (int i = 0; i < 4; i++) {{
                    t[i] = _mm256_permute2f128_ps(v[i], v[i + 4], 0x20);
                    t[i + 4] = _mm256_permute2f128_ps(v[i], v[i + 4], 0x31);
                }}
                #pragma GCC unroll 8
                for (int j = 0; j < 8; j++) {{
                    if (j < cn) {{
                        _mm256_mask_storeu_ps(dst + (c0 + j) * dst_stride + r0, in_r, t[j]);
                    }}
                }}
            }}
        }}
        return;
    }}
#endif
#if defined(__AVX512F__)
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {{
        const int64_t cn = cols - c0 < 16 ? cols - c0 : 16;
        const __mmask16 in_c = (__mmask16)((1u << cn) - 1u);
        for (int64_t r0 = 0; r0 < rows; r0 += 16) {{
            const int64_t rn = rows - r0 < 16 ? rows - r0 : 16;
            const __mmask16 in_r = (__mmask16)((1u << rn) - 1u);
            __m512 v[16], t[16];
            #pragma GCC unroll 16
            for (int i = 0; i < 16; i++) {{
                v[i] = i < rn ? _mm512_maskz_loadu_ps(in_c, src + (r0 + i) * src_stride + c0)
                              : _mm512_setzero_ps();
            }}
            #pragma GCC unroll 8
            for (int i = 0; i < 16; i += 2) {{
                t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
                t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
            }}
            #pragma GCC unroll 4
            for (int i = 0; i < 16; i += 4) {{
                v[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
                v[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
                v[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
                v[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
            }}
            #pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {{
                t[i] = _mm512_shuffle_f32x4(v[i], v[i + 4], 0x88);
                t[i + 4] = _mm512_shuffle_f32x4(v[i], v[i + 4], 0xDD);
                t[i + 8] = _mm512_shuffle_f32x4(v[i + 8], v[i + 12], 0x88);
                t[i + 12] = _mm512_shuffle_f32x4(v[i + 8], v[i + 12], 0xDD);
            }}
            #pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {{
                v[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
                v[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
                v[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
                v[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xDD);
            }}
            #pragma GCC unroll 16
            for (int j = 0; j < 16; j++) {{
                if (j < cn) {{
                    _mm512_mask_storeu_ps(dst + (c0 + j) * dst_stride + r0, in_r, v[j]);
                }}
            }}
        }}
    }}
#else
    for (int64_t c = 0; c < cols; c++) {{
        for (int64_t r = 0; r < rows; r++) {{
            dst[c * dst_stride + r] = src[r * src_stride + c];
        }}
    }}
#endif
}}
"""
