"""Arrays tdsl allocates (a kernel's outputs, td.evaluate's) start on a 64-byte
boundary, whatever the dtype and shape, and hold the right values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tdsl as td
from tdsl.compute.binding import ALIGNMENT, aligned_empty

DTYPES = (td.float32, td.float64, td.int8, td.int16, td.uint8, td.float16)


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=0, max_size=3),
       dtype=st.sampled_from([np.float32, np.float64, np.int8, np.uint16, np.complex128]))
def test_aligned_empty_is_aligned_contiguous_and_independent(shape, dtype):
    arrays = [aligned_empty(tuple(shape), dtype) for _ in range(3)]
    for a in arrays:
        assert a.ctypes.data % ALIGNMENT == 0
        assert a.shape == tuple(shape) and a.dtype == np.dtype(dtype)
        assert a.flags["C_CONTIGUOUS"] and a.flags["WRITEABLE"]
    for k, a in enumerate(arrays):
        a[...] = k
    assert [int(np.real(a.flat[0])) for a in arrays] == [0, 1, 2]


@pytest.mark.parametrize("target", ["c", "llvm"])
@settings(max_examples=12, deadline=None)
@given(h=st.integers(1, 13), w=st.integers(1, 37), dtype=st.sampled_from(DTYPES),
       wide=st.booleans())
def test_kernel_outputs_of_4_kib_or_more_are_aligned_and_all_are_correct(target, h, w, dtype,
                                                                         wide):
    """Outputs a kernel allocates start on a cache line from ALIGNED_OUTPUT_BYTES on;
    smaller ones as numpy allocates them (aligning them costs more than their work)."""
    from tdsl.runtime.kernel import ALIGNED_OUTPUT_BYTES

    w = w * 64 if wide else w  # 64 to 2368 columns: some outputs of 4 KiB and more
    y, x = td.dims("y x")
    A = td.input("A", {y: h, x: w}, dtype)
    B = td.compute("B", {y: h, x: w}, A[y, x] + A[y, x])
    f = td.build(td.schedule(B).vectorize(B, "x") if w % 4 == 0 and w <= 64 else td.schedule(B),
                 target=target)
    a = (np.arange(h * w) % 7).reshape(h, w).astype(dtype.np)
    for _ in range(3):  # numpy's allocator puts most arrays 16 bytes off a line
        out = f(A=a)  # the first call binds the signature, the next ones reuse it
        if out.nbytes >= ALIGNED_OUTPUT_BYTES:
            assert out.ctypes.data % ALIGNMENT == 0
        np.testing.assert_array_equal(out, td.evaluate(B, A=a))
        np.testing.assert_array_equal(out, a + a)


def test_evaluate_outputs_are_aligned():
    (i,) = td.dims("i")
    A = td.input("A", {i: 5}, td.float32)
    B = td.compute("B", {i: 5}, A[i] * 3)
    out = td.evaluate(B, A=np.arange(5, dtype=np.float32))
    assert out.ctypes.data % ALIGNMENT == 0
    np.testing.assert_array_equal(out, np.arange(5, dtype=np.float32) * 3)
