"""What gcc makes of the host C: parallel loop bodies keep `restrict`, vectorized loops
that read through `td.pad` stay vector code at both edges.

These check the compiler's output for the C tdsl writes (its vectorization report,
its assembly), compared between two builds rather than against fixed counts, so
they hold on any x86 host; and every kernel is checked against numpy.
"""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from test_parallel import rows_that_alias

import tdsl as td
from tdsl.backend_c import load as c_load
from tdsl.backend_c.compile import (
    DEFAULT_FLAGS,
    LARGE_SOURCE,
    NO_THREAD_JUMPS,
    NO_UNSWITCH,
    find_compiler,
)
from tdsl.backend_c.load import flags_for

rng = np.random.default_rng(11)
# compile to assembly only: the flags tdsl builds with, without linking a library
FLAGS = [f for f in DEFAULT_FLAGS if f != "-shared"]
# the host has AVX-512 (32 vector registers of 512 bits)
AVX512 = "avx512f" in open("/proc/cpuinfo").read()


def _gcc(src: str, tmp_path, *extra: str) -> subprocess.CompletedProcess:
    path = tmp_path / "k.c"
    path.write_text(src)
    return subprocess.run([find_compiler(), *FLAGS, *extra, "-S", "-o", str(tmp_path / "k.s"),
                           str(path)], capture_output=True, text=True, check=True)


def _vector_stores(src: str, tmp_path) -> int:
    _gcc(src, tmp_path)
    asm = (tmp_path / "k.s").read_text()
    return len(re.findall(r"^\s*vmov\w*\s+%[xyz]mm\d+, [^%\n]*\(", asm, flags=re.M))


def _taps(parallel: bool):
    """out[c, x] = sum of three taps along x, x vectorized, taps unrolled; the sum is
    accumulated in out itself (no cache_write)."""
    c, x, r = td.dims("c x r")
    inp = td.input("inp", {c: 8, x: 66}, td.float32)
    w = td.input("w", {c: 8, r: 3}, td.float32)
    out = td.compute("out", {c: 8, x: 64}, td.sum(inp[c, x + r] * w[c, r], over=r))
    s = (td.schedule(out).split(out, "x", 16).reorder(out, "c x_o x_i r")
         .unroll(out, "r").vectorize(out, "x_i"))
    return out, (s.parallel(out, "c") if parallel else s)


def test_parallel_loop_body_is_a_function_with_restrict_pointers():
    out, s = _taps(parallel=True)
    f = td.build(s, target="c")
    start = f.source.index("static void")
    head = f.source[start:f.source.index("{", start)]
    assert re.search(r"const float \*restrict inp\b", head), head
    assert re.search(r"(?<!const )float \*restrict out\b", head), head
    entry = f.source[f.source.index("int tdsl_out("):]
    assert "tdsl_parallel_for(tdsl_out_c_task, " in entry, entry
    task = f.source[f.source.index("static int tdsl_out_c_task("):]
    assert "tdsl_out_c_body(c, " in task[:task.index("\n}")], task
    a = rng.standard_normal((8, 66)).astype(np.float32)
    w = rng.standard_normal((8, 3)).astype(np.float32)
    ref = sum(a[:, k:k + 64] * w[:, k:k + 1] for k in range(3))
    np.testing.assert_allclose(f(inp=a, w=w), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(td.build(s, target="llvm")(inp=a, w=w), ref, rtol=1e-5, atol=1e-5)


def test_sum_accumulated_in_the_output_is_stored_once_inside_a_parallel_loop(tmp_path):
    # inside an OpenMP region gcc no longer knows out does not alias inp and w, and
    # stored the partial sum after every tap; in a function with restrict parameters
    # it keeps the sum in a register, as in the same loop nest run serially
    serial = _vector_stores(td.build(_taps(parallel=False)[1], target="c").source, tmp_path)
    parallel = _vector_stores(td.build(_taps(parallel=True)[1], target="c").source, tmp_path)
    assert serial >= 1
    assert parallel <= serial, (parallel, serial)


@pytest.mark.parametrize("parallel", [False, True])
def test_padded_reads_at_both_edges_are_vector_code(tmp_path, parallel):
    # the last chunk reads td.pad's right edge (`x + 1 < 112 ? a[...] : 0`), which only
    # the last lane of the last chunk takes; gcc's jump threading made that a second
    # exit of the loop and left it scalar
    y, x = td.dims("y x")
    a = td.input("a", {y: 4, x: 112}, td.float32)
    p = td.pad(a, 0.0)
    out = td.compute("out", {y: 4, x: 112}, p[y, x - 1] + 2 * p[y, x] + 3 * p[y, x + 1])
    s = td.schedule(out).split(out, "x", 16).vectorize(out, "x_i")
    if parallel:
        s = s.parallel(out, "y")
    f = td.build(s, target="c")
    av = rng.standard_normal((4, 112)).astype(np.float32)
    q = np.pad(av, ((0, 0), (1, 1)))
    np.testing.assert_allclose(f(a=av), q[:, :-2] + 2 * q[:, 1:-1] + 3 * q[:, 2:], rtol=1e-5,
                               atol=1e-6)
    lines = f.source.splitlines()
    # gcc names a loop by its header's line or its first statement's (1-based)
    simd = [(n + 2, n + 3) for n, ln in enumerate(lines) if ln.strip() == "#pragma omp simd"]
    assert len(simd) >= 3, f.source  # left edge, interior, right edge
    assert NO_THREAD_JUMPS in flags_for(f.lowered)
    report = _gcc(f.source, tmp_path, NO_THREAD_JUMPS, "-fopt-info-vec-all").stderr
    done = {int(m) for m in re.findall(r"k\.c:(\d+):\d+: optimized: loop vectorized", report)}
    missed = [loop for loop in simd if not done.intersection(loop)]
    assert not missed, (missed, report)


def test_jump_threading_is_off_only_for_simd_loops_with_selects_and_no_loops_inside():
    """gcc 12 with -fno-thread-jumps miscompiles a simd loop that holds a select and
    loops of its own (fuzz C seed 3701 case 283: s1[y, x, c] = pad(in1)[y + 2, x]
    vectorized along y read the wrong x); without a select the flag only slows gcc's
    code down. The kernel is right either way now."""
    y, x, c = td.dims("y x c")
    in1 = td.input("in1", {y: 4, x: 2}, td.float32)
    s1 = td.compute("s1", {y: 4, x: 2, c: 2}, td.pad(in1, 0.0)[y + 2, x])
    av = np.arange(1, 9, dtype=np.float32).reshape(4, 2)
    outer = td.build(td.schedule(s1).vectorize(s1, "y"), target="c")
    assert NO_THREAD_JUMPS not in flags_for(outer.lowered)
    np.testing.assert_array_equal(outer(in1=av), td.evaluate(s1, in1=av))
    inner = td.build(td.schedule(s1).reorder(s1, "x c y").vectorize(s1, "y"), target="c")
    assert NO_THREAD_JUMPS in flags_for(inner.lowered)
    np.testing.assert_array_equal(inner(in1=av), td.evaluate(s1, in1=av))
    plain = td.compute("p", {y: 4, x: 2}, in1[y, x] * 2)
    f = td.build(td.schedule(plain).vectorize(plain, "x"), target="c")
    assert NO_THREAD_JUMPS not in flags_for(f.lowered)


def test_a_large_kernel_is_compiled_without_gcc_loop_unswitching(monkeypatch):
    """gcc's loop unswitching made a 172 KB kernel of the fuzzer take 100 s to compile
    (seed 8101, case 461: a hundred unrolled vector loops; 22 s without it), so a
    source over LARGE_SOURCE bytes is built without it, and a small one with it."""
    used = []
    real = c_load.compile_source

    def spy(source, flags, **kw):
        used.append(flags)
        return real(source, flags, **kw)

    monkeypatch.setattr(c_load, "compile_source", spy)
    y, x = td.dims("y x")
    a = td.input("a", {y: 10, x: 100}, td.float32)
    value = td.where(a[y, x] > 0, a[y, x] * 3 - td.clamp(a)[y, x + 2],
                     td.clamp(a)[y, x - 1] - td.clamp(a)[y, x + 1])
    big = td.compute("big", {y: 10, x: 100}, value)
    f = td.build(td.schedule(big).unroll(big, "y").unroll(big, "x"), target="c")
    assert len(f.source) > LARGE_SOURCE and NO_UNSWITCH in used[-1]
    av = np.random.default_rng(3).standard_normal((10, 100)).astype(np.float32)
    want = td.evaluate(big, a=av)
    np.testing.assert_allclose(f(a=av), want, rtol=1e-6, atol=1e-6)  # a * 3 - b: one FMA
    small = td.build(td.schedule(big), target="c")
    assert len(small.source) < LARGE_SOURCE and NO_UNSWITCH not in used[-1]
    np.testing.assert_allclose(small(a=av), want, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(not AVX512,
                    reason="the tile is sized for 32 vector registers (AVX-512)")
def test_a_register_tile_takes_its_vectors_from_registers(tmp_path):
    """A 4 x 64 matmul register tile (16 accumulators in zmm registers): each k step
    loads B's 4 vectors once and broadcasts A's 4 values, then 16 FMAs with register
    operands. gcc 12 tuning for AMD Zen (its choice on a Zen 4) folded a load into every
    FMA, 16 loads per step where 4 do (sgemm 12.0 against 9.7 ms on Zen 4), unless
    it schedules before allocating registers (`-fschedule-insns -fsched-pressure`)."""
    i, j, k = td.dims("i j k")
    A = td.input("A", {i: 8, k: 1024}, td.float32)
    B = td.input("B", {k: 1024, j: 128}, td.float32)
    C = td.compute("C", {i: 8, j: 128}, td.sum(A[i, k] * B[k, j], over=k))
    s = (td.schedule(C).cache_write(C, "Cacc").cache_read("B", ["Cacc"], "Bp")
         .tile(C, i=4, j=64).reorder(C, "j_o i_o i_i j_i").parallel(C, "j_o").vectorize(C, "j_i")
         .compute_at("Bp", C, "j_o").vectorize("Bp", "j").compute_at("Cacc", C, "i_o")
         .split("Cacc", "j", 16, names=("j_u", "j_v")).reorder("Cacc", "k i j_u j_v")
         .unroll("Cacc", "i").unroll("Cacc", "j_u").vectorize("Cacc", "j_v"))
    f = td.build(s, target="c")
    rng = np.random.default_rng(4)
    av = rng.standard_normal((8, 1024)).astype(np.float32)
    bv = rng.standard_normal((1024, 128)).astype(np.float32)
    np.testing.assert_allclose(f(A=av, B=bv), av @ bv, rtol=1e-4, atol=1e-4)
    _gcc(f.source, tmp_path)
    asm = (tmp_path / "k.s").read_text()
    fmas = re.findall(r"^\s*vfmadd\w+\s+(\S+), %zmm\d+, %zmm\d+$", asm, flags=re.M)
    assert len(fmas) >= 16, asm
    assert all(op.startswith("%zmm") for op in fmas), fmas


def _loops(asm: str) -> list[list[str]]:
    """The instructions of each loop in gcc's assembly: from a label to the jump back."""
    lines = asm.splitlines()
    loops = []
    for n, line in enumerate(lines):
        m = re.match(r"^(\.L\d+):$", line)
        if not m:
            continue
        for end in range(n + 1, len(lines)):
            if re.match(rf"^\s*j\w+\s+{re.escape(m.group(1))}$", lines[end]):
                loops.append(lines[n + 1:end])
                break
    return loops


@pytest.mark.skipif(not AVX512,
                    reason="the partial sums fill four zmm registers (AVX-512)")
def test_partial_sums_of_a_row_in_a_stack_buffer_stay_in_registers(tmp_path):
    """A row sum rfactored into 64 partials (vectorized), read from a row computed into a
    stack buffer: gcc 12 kept the partials in registers only when the row was reached
    through a `restrict` pointer; through the array itself, every step loaded, added and
    stored the four vectors (softmax on C 5.7 against 5.5 ms)."""
    r, c = td.dims("r c")
    X = td.input("X", {r: 16, c: 4096}, td.float32)
    e = td.compute("e", {r: 16, c: 4096}, X[r, c] * 2.0)
    total = td.compute("total", {r: 16}, td.sum(e[r, c], over=c))
    s = (td.schedule(total).rfactor(total, "c", 64).compute_at(e, total, "r")
         .compute_at("total_rf", total, "r").reorder("total_rf", "c_o c_i")
         .vectorize("total_rf", "c_i").vectorize(e, "c"))
    f = td.build(s, target="c")
    xv = np.random.default_rng(5).standard_normal((16, 4096)).astype(np.float32)
    np.testing.assert_allclose(f(X=xv), (xv * 2).sum(axis=1), rtol=1e-4, atol=1e-3)
    _gcc(f.source, tmp_path)
    sums = [body for body in _loops((tmp_path / "k.s").read_text())
            if sum("vaddps" in x for x in body) >= 4]
    assert sums
    for body in sums:
        spills = [x for x in body if re.match(r"^\s*vmov\w*\s+%zmm\d+, \S*\(%rsp\)", x)]
        assert not spills, "\n".join(body)


def test_gcc_carries_no_stores_across_iterations_of_a_parallel_loop(tmp_path):
    """The kernel whose rows alias as flat addresses (`test_parallel.rows_that_alias`),
    checked in gcc's own account of it (its predictive-commoning dump): carried stores
    would race only now and then."""
    s, _, _ = rows_that_alias()
    _gcc(td.build(s, target="c").source, tmp_path, "-fdump-tree-pcom-details")
    dumps = "".join(p.read_text() for p in tmp_path.glob("*pcom*"))
    assert "Store-stores chain" not in dumps and "Executing predictive commoning" not in dumps


def test_a_streamed_row_that_is_not_16_byte_aligned_is_stored_with_vector_moves(tmp_path):
    """Rows of 30 floats (120 bytes) start 16-byte aligned only every other row, the
    others 8 bytes past a boundary. stream_store must copy any chunk it does not
    stream with a size gcc knows (a vector move): copying the rest of a chunk whose
    length depends on the path taken became byte-copy loops, and streaming made blur
    slower. With AVX-512 the rows 8 bytes off stream too (64-bit streaming stores at
    both ends of a chunk)."""
    y, x = td.dims("y x")
    a = td.input("a", {y: 8, x: 30}, td.float32)
    out = td.compute("out", {y: 8, x: 30}, a[y, x] * 3.0)
    s = td.schedule(out).split(out, "x", 16).vectorize(out, "x_i").store_nontemporal(out)
    f = td.build(s, target="c")
    assert "stream_store(&out[" in f.source
    for offset in (0, 1, 2, 3):  # the output array's own alignment varies too
        raw = np.empty(8 * 30 + 4, np.float32)
        dst = raw[offset:offset + 240].reshape(8, 30)
        av = rng.standard_normal((8, 30)).astype(np.float32)
        f(a=av, out=dst)
        np.testing.assert_array_equal(dst, av * np.float32(3.0))
    _gcc(f.source, tmp_path)
    asm = (tmp_path / "k.s").read_text()
    assert re.search(r"movnt", asm), "no streaming store at all"
    bytewise = re.findall(r"^\s*(movb|movzbl|rep movs\w*)\b", asm, flags=re.M)
    assert not bytewise and "memcpy" not in asm, bytewise
    if AVX512:
        assert re.search(r"^\s*movnti\s", asm, flags=re.M), "rows 8 bytes off do not stream"
