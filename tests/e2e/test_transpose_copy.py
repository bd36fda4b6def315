"""A copy to the transpose in host C (the transpose pass, lower.passes.transpose,
backend_c.helpers.TRANSPOSE).

A loop nest that stores a block of 32-bit elements to its transpose (a plain
transpose, or a cache written in one layout and stored in another) becomes one
call of `transpose_<type>` (a call per iteration of a loop between the nest's two
loops): 8 x 8 or 16 x 16 tiles in vector registers with AVX-512, the loops themselves
elsewhere. Values are compared bit for bit with numpy (NaN payloads included), on every
code path of the helper and on both backends.
"""

from __future__ import annotations

import ctypes
import mmap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tdsl as td
from tdsl.backend_c import DEFAULT_FLAGS
from tdsl.backend_c import build as build_c
from tdsl.backend_llvm.host import host_has
from tdsl.lower import finish, ir, lower_schedule
from tdsl.lower.passes.transpose import transposing_copy

ELIGIBLE = (td.float32, td.int32, td.uint32)
OTHERS = (td.float64, td.int16, td.uint8)
# the helper's code paths: 8 x 8 tiles (AVX-512 with 256-bit masked moves) or 16 x 16
# where the host has AVX-512, 16 x 16 only without AVX512VL, and the plain loops
PATHS = {"native": DEFAULT_FLAGS, "no-avx512vl": (*DEFAULT_FLAGS, "-mno-avx512vl"),
         "no-avx512": (*DEFAULT_FLAGS, "-mno-avx512f")}


def random_bits(shape, dtype, seed=0) -> np.ndarray:
    """Arbitrary bit patterns of `dtype` (for floats: NaNs with payloads, infinities,
    subnormals), so a copy that changes any bit is caught."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(*shape, dtype.np.itemsize), dtype=np.uint8)
    return raw.view(dtype.np).reshape(shape).copy()


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.tobytes() == b.tobytes()


class Guarded:
    """An array whose last byte is followed by a page that cannot be read: a kernel
    that reads past its end (a vector load not masked at a block's edge) crashes."""

    def __init__(self, values: np.ndarray):
        page, nbytes = mmap.PAGESIZE, values.nbytes
        pages = -(-nbytes // page) + 1
        self.map = mmap.mmap(-1, pages * page)
        raw = np.frombuffer(self.map, np.uint8)
        self.guard = raw.ctypes.data + (pages - 1) * page
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        assert self.libc.mprotect(self.guard, page, 0) == 0  # PROT_NONE
        end = (pages - 1) * page
        self.array = raw[end - nbytes:end].view(values.dtype).reshape(values.shape)
        self.array[...] = values

    def release(self) -> None:
        rw = mmap.PROT_READ | mmap.PROT_WRITE
        assert self.libc.mprotect(self.guard, mmap.PAGESIZE, rw) == 0
        del self.array
        self.map.close()


def transpose(h: int, w: int, dtype, tile: tuple[int, int] | None = None):
    y, x = td.dims("y x")
    A = td.input("A", {x: w, y: h}, dtype)
    out = td.compute("out", {y: h, x: w}, A[x, y])
    s = td.schedule(out)
    if tile is None:
        return s.vectorize(out, "x")
    return s.tile(out, y=tile[0], x=tile[1]).vectorize(out, "x_i")


def relaid(h: int, w: int, dtype, tile: tuple[int, int]):
    """out = A + A through a cache T laid out [x, y], computed per tile: the copy
    from T to out transposes."""
    y, x = td.dims("y x")
    A = td.input("A", {y: h, x: w}, dtype)
    out = td.compute("out", {y: h, x: w}, A[y, x] + A[y, x])
    return (td.schedule(out).cache_write(out, "T").layout("T", "x y")
            .tile(out, y=tile[0], x=tile[1]).vectorize(out, "x_i")
            .compute_at("T", out, "x_o"))


def relaid3(d: int, h: int, w: int, dtype, tile: tuple[int, int, int]):
    """out = A through a cache T laid out [y, x, k] (a convolution's register tile),
    computed per tile: the copy from T to out is `for k_i: for y_i: simd for x_i`, a
    transpose of (x_i, k_i) for each y_i."""
    k, y, x = td.dims("k y x")
    A = td.input("A", {k: d, y: h, x: w}, dtype)
    out = td.compute("out", {k: d, y: h, x: w}, A[k, y, x])
    return (td.schedule(out).cache_write(out, "T").layout("T", "y x k")
            .tile(out, k=tile[0], y=tile[1], x=tile[2])
            .reorder(out, "k_o y_o x_o k_i y_i x_i").vectorize(out, "x_i")
            .compute_at("T", out, "x_o"))


def run_c(schedule, flags, **arrays):
    module = build_c(finish(lower_schedule(schedule, "k", late=False)), flags=flags)
    out_buf = module.func.outputs[0]
    shape = tuple(int(e.value) for e in out_buf.shape)
    out = np.empty(shape, out_buf.dtype.np)
    assert module.call([*arrays.values(), out], []) == 0
    return module.source, out


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("dtype", ELIGIBLE, ids=lambda d: d.name)
@pytest.mark.parametrize("h, w", [(40, 37), (16, 16), (8, 9), (33, 70)])
def test_a_transpose_is_one_call_and_copies_every_bit(path, dtype, h, w):
    a = random_bits((w, h), dtype)
    source, out = run_c(transpose(h, w, dtype), PATHS[path], A=a)
    assert source.count(f"transpose_{td.backend_c.helpers.SUFFIX[dtype.name]}(&") == 1
    assert same_bits(out, a.T.copy())


@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize("h, w", [(40, 37), (9, 8), (17, 33), (5, 11), (13, 6)])
def test_the_copy_reads_nothing_past_its_block(target, h, w):
    values = random_bits((w, h), td.float32, seed=3)
    guarded = Guarded(values)
    try:
        if target == "c":
            source, out = run_c(transpose(h, w, td.float32), DEFAULT_FLAGS, A=guarded.array)
        else:
            f = td.build(transpose(h, w, td.float32), target="llvm")
            source, out = f.source, f(A=guarded.array)
    finally:
        guarded.release()
    assert "transpose_f32(&" in source if target == "c" else (
        "shufflevector" in source or not host_has("avx512vl"))
    assert same_bits(out, values.T.copy())


@pytest.mark.parametrize("dtype", ELIGIBLE + OTHERS, ids=lambda d: d.name)
def test_only_32_bit_blocks_of_at_least_4_by_4_go_to_the_helper(dtype):
    big = run_c(transpose(12, 10, dtype), DEFAULT_FLAGS, A=random_bits((10, 12), dtype))
    narrow = run_c(transpose(4, 30, dtype), DEFAULT_FLAGS, A=random_bits((30, 4), dtype))
    small = run_c(transpose(3, 30, dtype), DEFAULT_FLAGS, A=random_bits((30, 3), dtype))
    assert ("transpose_" in big[0]) == (dtype in ELIGIBLE)
    assert ("transpose_" in narrow[0]) == (dtype in ELIGIBLE)
    assert "transpose_" not in small[0]
    assert same_bits(big[1], random_bits((10, 12), dtype).T.copy())
    assert same_bits(narrow[1], random_bits((30, 4), dtype).T.copy())
    assert same_bits(small[1], random_bits((30, 3), dtype).T.copy())


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("dtype", ELIGIBLE, ids=lambda d: d.name)
@pytest.mark.parametrize("d, h, w, tile", [(64, 4, 14, (32, 2, 7)), (20, 3, 9, (20, 3, 9)),
                                           (48, 2, 32, (16, 1, 16))])
def test_a_copy_with_a_loop_between_its_two_goes_to_the_helper(path, dtype, d, h, w, tile):
    a = random_bits((d, h, w), dtype, seed=d + w)
    source, out = run_c(relaid3(d, h, w, dtype, tile), PATHS[path], A=a)
    call = [line.strip() for line in source.splitlines()
            if f"transpose_{td.backend_c.helpers.SUFFIX[dtype.name]}(&" in line]
    assert len(call) == 1 and call[0].endswith(f", {tile[2]}, {tile[0]});")
    assert same_bits(out, a)


def _copy_nest(d_batch: int, batch_trips: int = 2) -> ir.For:
    """for c < 8: for b < batch_trips: simd for r < 8: dst[8 c + d_batch b + r] =
    src[16 r + c + 128 b], by hand (no schedule makes the overlapping ones)."""
    f32 = td.float32
    dst = ir.Buffer("dst", f32, (ir.index_const(4096),), "output")
    src = ir.Buffer("src", f32, (ir.index_const(4096),), "input")
    c, b, r = ir.Var("c"), ir.Var("b"), ir.Var("r")

    def lin(*terms):
        out: ir.Expr = ir.index_const(0)
        for k, v in terms:
            out = ir.Binary("add", out, ir.Binary("mul", ir.index_const(k), v, ir.index),
                            ir.index)
        return out

    store = ir.Store(dst, (lin((8, c), (d_batch, b), (1, r)),),
                     ir.Load(src, (lin((16, r), (1, c), (128, b)),)))
    zero = ir.index_const(0)
    inner = ir.For("r", zero, ir.index_const(8), ir.ForKind.VECTORIZED, store)
    mid = ir.For("b", zero, ir.index_const(batch_trips), ir.ForKind.SERIAL, inner)
    return ir.For("c", zero, ir.index_const(8), ir.ForKind.SERIAL, mid)


def test_a_copy_with_a_loop_between_goes_to_the_helper_only_if_no_element_is_stored_twice():
    assert transposing_copy(_copy_nest(64)) is not None  # rows of 64 apart: disjoint
    assert transposing_copy(_copy_nest(64, 1)) is not None
    assert transposing_copy(_copy_nest(0)) is None  # b stores the same block twice
    assert transposing_copy(_copy_nest(4)) is None  # blocks overlapping by half a row
    assert transposing_copy(_copy_nest(60)) is None  # the last row of b=0 meets b=1's
    assert transposing_copy(_copy_nest(0, 1)) is not None  # one iteration of b


def test_a_cache_stored_in_another_layout_is_copied_by_the_helper():
    a = np.random.default_rng(1).standard_normal((24, 48)).astype(np.float32)
    source, out = run_c(relaid(24, 48, td.float32, (12, 16)), DEFAULT_FLAGS, A=a)
    assert "transpose_f32(&" in source
    np.testing.assert_array_equal(out, a + a)


@pytest.mark.parametrize("target", ["c", "llvm"])
@settings(max_examples=40, deadline=None)
@given(h=st.integers(1, 45), w=st.integers(1, 45), ty=st.integers(1, 20),
       tx=st.integers(1, 20), dtype=st.sampled_from(ELIGIBLE + OTHERS),
       tk=st.integers(1, 40), how=st.sampled_from(["plain", "tiled", "relaid", "relaid3"]))
def test_transposing_copies_match_numpy(target, h, w, ty, tx, tk, dtype, how):
    if how == "plain":
        s, a = transpose(h, w, dtype), random_bits((w, h), dtype, seed=h * w)
        expected = a.T.copy()
    elif how == "tiled":
        s, a = transpose(h, w, dtype, (ty, tx)), random_bits((w, h), dtype, seed=h * w)
        expected = a.T.copy()
    elif how == "relaid":
        a = (np.arange(h * w) % 97).reshape(h, w).astype(dtype.np)
        s, expected = relaid(h, w, dtype, (ty, tx)), a + a
    else:  # a channel dimension of tk + 5 elements (tiles of tk: a partial last one)
        a = random_bits((tk + 5, h, w), dtype, seed=h * w + tk)
        s, expected = relaid3(tk + 5, h, w, dtype, (tk, ty, tx)), a
    got = td.build(s, target=target)(A=a)
    assert same_bits(got, expected)


@pytest.mark.skipif(not host_has("avx512vl"), reason="LLVM's tiles of shuffles need AVX-512")
@pytest.mark.parametrize("dtype", ELIGIBLE, ids=lambda d: d.name)
@pytest.mark.parametrize("how, shape, tile", [
    ("plain", (13, 21), None), ("tiled", (36, 32), (12, 16)), ("tiled", (32, 36), (16, 12)),
    ("relaid3", (64, 4, 14), (32, 2, 7)), ("relaid3", (16, 2, 16), (16, 1, 8))])
def test_llvm_copies_a_block_to_its_transpose_in_tiles_of_shuffles(dtype, how, shape, tile):
    """Whole tiles of 8 x 8 unmasked, a block's last rows with masked stores (rows: the
    length of the runs stored; every tile and block here divides its loop)."""
    if how == "relaid3":
        a = random_bits(shape, dtype, seed=5)
        s, expected = relaid3(*shape, dtype, tile), a
    else:
        h, w = shape
        a = random_bits((w, h), dtype, seed=6)
        s, expected = transpose(h, w, dtype, tile), a.T.copy()
    f = td.build(s, target="llvm")
    rows = (tile[-1] if tile else shape[0]) if how != "relaid3" else tile[2]
    assert "shufflevector" in f.source
    assert ("llvm.masked.store" in f.source) == (rows % 8 != 0)
    assert same_bits(f(A=a), expected)
