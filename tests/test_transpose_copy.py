"""A copy to the transpose in host C (render._transposing_copy, helpers.TRANSPOSE).

A loop nest that stores a block of 32-bit elements to its transpose (a plain
transpose, or a cache written in one layout and stored in another) becomes one
call of `transpose_<type>`: 16 x 16 tiles in vector registers with AVX-512, the
loops themselves elsewhere. Values are compared bit for bit with numpy (NaN
payloads included), on both code paths of the helper and on both backends.
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
from tdsl.lower import finish, lower_schedule

ELIGIBLE = (td.float32, td.int32, td.uint32)
OTHERS = (td.float64, td.int16, td.uint8)
# the helper's two code paths: AVX-512 where the host has it, and the plain loops
PATHS = {"native": DEFAULT_FLAGS, "no-avx512": (*DEFAULT_FLAGS, "-mno-avx512f")}


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


@pytest.mark.parametrize("h, w", [(40, 37), (9, 8), (17, 33)])
def test_the_copy_reads_nothing_past_its_block(h, w):
    values = random_bits((w, h), td.float32, seed=3)
    guarded = Guarded(values)
    try:
        source, out = run_c(transpose(h, w, td.float32), DEFAULT_FLAGS, A=guarded.array)
    finally:
        guarded.release()
    assert "transpose_f32(&" in source
    assert same_bits(out, values.T.copy())


@pytest.mark.parametrize("dtype", ELIGIBLE + OTHERS, ids=lambda d: d.name)
def test_only_32_bit_blocks_of_at_least_8_by_8_go_to_the_helper(dtype):
    big = run_c(transpose(12, 10, dtype), DEFAULT_FLAGS, A=random_bits((10, 12), dtype))
    small = run_c(transpose(7, 30, dtype), DEFAULT_FLAGS, A=random_bits((30, 7), dtype))
    assert ("transpose_" in big[0]) == (dtype in ELIGIBLE)
    assert "transpose_" not in small[0]
    assert same_bits(big[1], random_bits((10, 12), dtype).T.copy())
    assert same_bits(small[1], random_bits((30, 7), dtype).T.copy())


def test_a_cache_stored_in_another_layout_is_copied_by_the_helper():
    a = np.random.default_rng(1).standard_normal((24, 48)).astype(np.float32)
    source, out = run_c(relaid(24, 48, td.float32, (12, 16)), DEFAULT_FLAGS, A=a)
    assert "transpose_f32(&" in source
    np.testing.assert_array_equal(out, a + a)


@pytest.mark.parametrize("target", ["c", "llvm"])
@settings(max_examples=40, deadline=None)
@given(h=st.integers(1, 45), w=st.integers(1, 45), ty=st.integers(1, 20),
       tx=st.integers(1, 20), dtype=st.sampled_from(ELIGIBLE + OTHERS),
       how=st.sampled_from(["plain", "tiled", "relaid"]))
def test_transposing_copies_match_numpy(target, h, w, ty, tx, dtype, how):
    if how == "plain":
        s, a = transpose(h, w, dtype), random_bits((w, h), dtype, seed=h * w)
        expected = a.T.copy()
    elif how == "tiled":
        s, a = transpose(h, w, dtype, (ty, tx)), random_bits((w, h), dtype, seed=h * w)
        expected = a.T.copy()
    else:
        a = (np.arange(h * w) % 97).reshape(h, w).astype(dtype.np)
        s, expected = relaid(h, w, dtype, (ty, tx)), a + a
    got = td.build(s, target=target)(A=a)
    assert same_bits(got, expected)
