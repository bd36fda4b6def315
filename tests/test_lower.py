"""Lowering: printed loop nests (golden files), bounds inference and access checks."""

from __future__ import annotations

from pathlib import Path

import pytest

import tdsl as td

GOLDEN = Path(__file__).parent / "golden"


def matmul():
    i, j, k = td.dims("i j k")
    N = td.size("N")
    A = td.input("A", {i: N, k: 512}, td.float32)
    B = td.input("B", {k: 512, j: 256}, td.float32)
    C = td.compute("C", {i: N, j: 256}, td.sum(A[i, k] * B[k, j], over=k))
    return C


def blur():
    x, y = td.dims("x y")
    W, H = td.size("W"), td.size("H")
    inp = td.input("inp", {y: H, x: W}, td.float32)
    bx = td.compute("bx", {y: H, x: W - 2}, (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) / 3)
    by = td.compute("by", {y: H - 2, x: W - 2}, (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3)
    return bx, by


def cases():
    C = matmul()
    bx, by = blur()
    return {
        "matmul_tiled": (td.schedule(C).tile(C, i=32, j=64).split(C, "k", 4)
                         .reorder(C, "i_o j_o k_o i_i k_i j_i").vectorize(C, "j_i")
                         .parallel(C, "i_o")),
        "matmul_unrolled": td.schedule(C).split(C, "k", 4).unroll(C, "k_i"),
        "blur_root": td.schedule(by),
        "blur_inline": td.schedule(by).compute_inline(bx),
        "blur_compute_at": (td.schedule(by).split(by, "y", 8).compute_at(bx, by, "y_o")
                            .parallel(by, "y_o")),
        "blur_store_at": (td.schedule(by).split(by, "y", 8).compute_at(bx, by, "y_i")
                          .store_at(bx, by, "y_o")),
    }


@pytest.mark.parametrize("name", list(cases()))
def test_loop_nest_golden(name, update_golden):
    text = str(td.lower(cases()[name])) + "\n"
    path = GOLDEN / f"{name}.txt"
    if update_golden or not path.exists():
        path.write_text(text)
    assert text == path.read_text()


def test_compute_at_buffer_is_the_needed_box():
    bx, by = blur()
    f = td.lower(td.schedule(by).split(by, "y", 8).compute_at(bx, by, "y_o"))
    text = str(f)
    # eight output rows need ten rows of bx; the buffer is that box, not the whole image
    assert "allocate bx[10, W - 2]" in text
    assert "for y in 8 * y_o .. min(H, 8 * y_o + 10)" in text


def test_out_of_range_read_is_rejected_with_a_point():
    x = td.dim("x")
    N = td.size("N")
    a = td.input("a", {x: N}, td.float32)
    b = td.compute("b", {x: N}, a[x + 1])
    with pytest.raises(td.DefinitionError) as e:
        td.lower(b)
    msg = str(e.value)
    assert "a[x + 1]" in msg and "out of range" in msg and "td.clamp" in msg


def test_split_tail_is_guarded_by_bounds():
    x = td.dim("x")
    a = td.input("a", {x: 10}, td.int32)
    b = td.compute("b", {x: 10}, a[x] + 1)
    text = str(td.lower(td.schedule(b).split(b, "x", 4)))
    assert "for x_i in 0 .. min(4, -4 * x_o + 10)" in text or "min(4, 10 - 4 * x_o)" in text


@pytest.mark.parametrize("name", ["matmul_tiled", "blur_compute_at", "blur_inline"])
def test_generated_c_golden(name, update_golden):
    from tdsl.backend_c import render

    text = render(td.lower(cases()[name]))
    path = GOLDEN / f"{name}.c"
    if update_golden or not path.exists():
        path.write_text(text)
    assert text == path.read_text()
