"""tdsl's thread pool (backend_c/pool.c) and the outline pass that makes parallel loops
its tasks: exact results under concurrent callers, a busy machine, nested loops,
failures and fork; one pool per process, shared by every calling thread (Dask's too).
Timing is for benchmarks/ (contention.py); these tests check results and bounds."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_parallel import busy_cores

import tdsl as td
from tdsl.backend_c import build as build_c
from tdsl.backend_c import pool as pool_module
from tdsl.backend_llvm import build as build_llvm
from tdsl.lower import abi, finish, ir
from tdsl.lower.passes.verify import VerifyError, verify
from tdsl.lower.rewrite import walk_stmts

BUILD = {"c": build_c, "llvm": build_llvm}
# what a script of a test needs on sys.path to import the tests' modules: the tests
# folder (strategies.py) and every tier (a test module imports from the others)
_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_PATHS = [_TESTS, *(os.path.join(_TESTS, t) for t in ("unit", "e2e", "meta", "fuzz"))]
DEADLINE = 240  # seconds a whole threaded test may take before it counts as a deadlock


@pytest.fixture(autouse=True)
def pool():
    if pool_module.load() is None:
        pytest.skip(f"the thread pool is not available ({pool_module.unavailable()})")
    return pool_module.load()


def stencil_steps(n: int = 97, steps: int = 4):
    """`steps` integer stencil stages in a row, each with its rows parallel: a kernel
    with several parallel loops per call (as a time loop has), exact on integers."""
    y, x = td.dims("y x")
    a = td.input("a", {y: n, x: n}, td.int64)
    stage = a
    for k in range(steps):
        c = td.clamp(stage)
        stage = td.compute(f"s{k}", {y: n, x: n},
                           c[y - 1, x] + c[y + 1, x] * 3 + c[y, x - 1] * 5 - c[y, x + 1] + k)
    s = td.schedule(stage)
    for k in range(steps):
        s = s.parallel(f"s{k}", "y")
    return stage, s


def run_threads(work, count: int) -> list:
    """`work(k)` in `count` Python threads at once; their results, or the first error.
    Fails when a thread has not finished within DEADLINE seconds (a deadlock)."""
    results: list = [None] * count
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            results[k] = work(k)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    assert not any(t.is_alive() for t in threads), "a calling thread never finished"
    if errors:
        raise errors[0]
    return results


# ---------------------------------------------------------------- the outline pass


def test_outline_gives_each_outermost_parallel_loop_a_task_with_its_captures():
    _, s = stencil_steps(9, 2)
    func = finish(td.lower(s))
    tasks = [x for x in walk_stmts(func.body) if isinstance(x, ir.For) and x.task]
    assert [t.task.name for t in tasks] == ["y", "y_2"]
    for loop in tasks:
        assert loop.kind is ir.ForKind.PARALLEL and not loop.task.fails
        assert not loop.task.values  # constant bounds: nothing but buffers from outside
        assert {b.name for b in loop.task.buffers} <= {"a", "s0", "s1"}
    assert "task y(" in str(func) and "task y_2(" in str(func)


def test_a_parallel_loop_inside_another_runs_serially_in_its_task(backend, threads):
    y, x = td.dims("y x")
    H, W = td.size("H"), td.size("W")
    a = td.input("a", {y: H, x: W}, td.int32)
    o = td.compute("o", {y: H, x: W}, a[y, x] * 3 - y + x * W)
    s = td.schedule(o).parallel(o, "y").parallel(o, "x")
    func = finish(td.lower(s))
    loops = [x for x in walk_stmts(func.body) if isinstance(x, ir.For)]
    assert [(f.var, f.kind, f.task is not None) for f in loops] == [
        ("y", ir.ForKind.PARALLEL, True), ("x", ir.ForKind.SERIAL, False)]
    assert [v.name for v in loops[0].task.values] == ["W"]
    threads(2)
    av = np.random.default_rng(0).integers(-99, 99, (37, 23), dtype=np.int32)
    f = td.build(s, target=backend)
    for _ in range(50):
        np.testing.assert_array_equal(f(a=av), td.evaluate(o, a=av))


def test_the_verifier_refuses_a_task_that_misses_a_capture_or_a_nested_one():
    y, x = td.dims("y x")
    H = td.size("H")
    a = td.input("a", {y: H, x: 8}, td.int32)
    o = td.compute("o", {y: H, x: 8}, a[y, x] + y)
    func = finish(td.lower(td.schedule(o).parallel(o, "y")))
    loop = next(s for s in walk_stmts(func.body) if isinstance(s, ir.For) and s.task)
    short = replace(loop, task=replace(loop.task, buffers=loop.task.buffers[:-1]))
    with pytest.raises(VerifyError, match="does not capture"):
        verify(replace(func, body=short))
    inner = replace(loop, var="z", start=ir.index_const(0), end=ir.index_const(2), task=None)
    nested = replace(loop, body=ir.Block((loop.body, inner)))
    with pytest.raises(VerifyError, match="inside parallel loop y"):
        verify(replace(func, body=nested))


def test_a_parallel_loop_without_a_task_is_refused_by_the_host_targets():
    y = td.dim("y")
    a = td.input("a", {y: 64}, td.float32)
    o = td.compute("o", {y: 64}, a[y] * 2)
    func = finish(td.lower(td.schedule(o).parallel(o, "y")))
    bare = func_without_tasks(func)
    for target in ("c", "llvm"):
        with pytest.raises(ValueError, match="has no task"):
            BUILD[target](bare)


def func_without_tasks(func: ir.LoweredFunc) -> ir.LoweredFunc:
    from tdsl.lower.rewrite import Rewriter

    class Strip(Rewriter):
        def stmt(self, s: ir.Stmt) -> ir.Stmt | None:
            return replace(s, task=None) if isinstance(s, ir.For) and s.task else None

    return replace(func, body=Strip().visit(func.body))


# ---------------------------------------------------------------- failures


def test_out_of_memory_inside_a_parallel_loop_unwinds_on_both_targets(backend, threads):
    """A heap temp allocated per iteration of a parallel loop: when it cannot be had,
    the chunk reports it, the pool starts no other chunk and the kernel returns
    OUT_OF_MEMORY; with a size that fits it computes the answer."""
    y, x = td.dims("y x")
    H, W = td.size("H"), td.size("W")
    a = td.input("a", {y: H, x: W}, td.float32)
    p = td.compute("p", {y: H, x: W}, a[y, x] * 2)
    o = td.compute("o", {y: H, x: W}, p[y, x] + 1)
    func = finish(td.lower(td.schedule(o).parallel(o, "y").compute_at(p, o, "y")))
    loop = next(s for s in walk_stmts(func.body) if isinstance(s, ir.For) and s.task)
    assert loop.task.fails
    module = BUILD[backend](func)
    threads(2)
    av = np.ones((64, 4), np.float32)
    out = np.zeros((64, 4), np.float32)
    for _ in range(20):
        assert module.run([av, out], [64, 2**61]) == abi.OUT_OF_MEMORY
        assert module.run([av, out], [64, 4]) == abi.OK
        np.testing.assert_array_equal(out, av * 2 + 1)


# ---------------------------------------------------------------- concurrency


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_several_python_threads_calling_parallel_kernels_get_exact_results(target):
    out, s = stencil_steps()
    f = td.build(s, target=target)
    rng = np.random.default_rng(1)
    inputs = [rng.integers(-1000, 1000, (97, 97), dtype=np.int64) for _ in range(6)]
    wants = [td.evaluate(out, a=a) for a in inputs]

    def work(k: int) -> int:
        wrong = 0
        with td.threads(1 + k % 3):  # 1, 2 and 3 threads per call, side by side
            for n in range(60):
                got = f(a=inputs[(k + n) % 6])
                wrong += not np.array_equal(got, wants[(k + n) % 6])
        return wrong

    assert run_threads(work, 6) == [0] * 6


def test_calls_while_other_processes_spin_are_exact_and_end(backend, threads):
    out, s = stencil_steps(131, 6)
    f = td.build(s, target=backend)
    a = np.random.default_rng(2).integers(-1000, 1000, (131, 131), dtype=np.int64)
    want = td.evaluate(out, a=a)
    threads(2)
    with busy_cores():
        results = run_threads(lambda k: sum(not np.array_equal(f(a=a), want)
                                            for _ in range(40)), 3)
    assert results == [0, 0, 0]


def test_both_targets_share_one_pool_from_concurrent_threads(threads):
    out, s = stencil_steps(61, 3)
    kernels = [td.build(s, target=t) for t in ("c", "llvm")]
    a = np.random.default_rng(3).integers(-1000, 1000, (61, 61), dtype=np.int64)
    want = td.evaluate(out, a=a)
    results = run_threads(lambda k: sum(not np.array_equal(kernels[k % 2](a=a), want)
                                        for _ in range(80)), 4)
    assert results == [0] * 4


SHARED_POOL = """
import os, sys, threading
sys.path[:0] = {paths!r}
import numpy as np
import tdsl as td
from tdsl.backend_c import pool
from test_pool import stencil_steps

def os_threads():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))

out, s = stencil_steps(97, 4)
f = td.build(s, target={target!r})
a = np.random.default_rng(0).integers(-1000, 1000, (97, 97), dtype=np.int64)
want = td.evaluate(out, a=a)
before = os_threads()
wrong, counts = [], []
def work():
    counts.append(td.num_threads())
    wrong.append(sum(not np.array_equal(f(a=a), want) for _ in range(40)))
callers = [threading.Thread(target=work) for _ in range({callers})]
for t in callers: t.start()
peak = max(os_threads() for _ in range(200))
for t in callers: t.join()
print(sum(wrong), before, peak, pool.load().stats()["workers"], pool.cores(), set(counts))
"""


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_n_calling_threads_share_one_pool_not_n_pools(target):
    """What a Dask worker with N threads does: N threads call parallel kernels at once.
    Each call may use td.num_threads() threads (all cores by default), but there is one
    pool of at most cores - 1 workers for the process: the process gains the N callers
    and those workers, never N x cores threads (libgomp gave each calling thread a team
    of its own)."""
    callers = 6
    script = SHARED_POOL.format(paths=TEST_PATHS, target=target, callers=callers)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=DEADLINE, env=env)
    assert proc.returncode == 0, proc.stderr
    wrong, before, peak, workers, cores, counts = proc.stdout.split(maxsplit=5)
    assert int(wrong) == 0
    assert counts.strip() == f"{{{cores}}}"  # each call may use every core
    assert int(workers) <= max(int(cores) - 1, 0)
    assert int(peak) <= int(before) + callers + max(int(cores) - 1, 0)


DASK_CALLS = """
import numpy as np
import tdsl as td
from test_pool import stencil_steps

out, s = stencil_steps(97, 4)
f = td.build(s, target={target!r})

def call(seed):
    a = np.random.default_rng(seed).integers(-1000, 1000, (97, 97), dtype=np.int64)
    ok = all(np.array_equal(f(a=a), td.evaluate(out, a=a)) for _ in range(5))
    return ok, td.num_threads()

def one_thread(seed):
    with td.threads(1):
        return call(seed)
"""

DASK = """
import sys
sys.path[:0] = [{here!r}, *{paths!r}]
from distributed import Client, LocalCluster
from tdsl.backend_c import pool
from dask_calls import call, one_thread

if __name__ == "__main__":
    with LocalCluster(n_workers=1, threads_per_worker=4, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        results = client.gather(client.map(call, range(16)))
        ones = client.gather(client.map(one_thread, range(100, 108)))
    counts = sorted({{n for _, n in results}})
    print(all(ok for ok, _ in results + ones), str(counts).replace(" ", ""),
          sorted({{n for _, n in ones}}), pool.load().stats()["workers"], pool.cores())
"""


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_kernels_in_a_dask_worker_share_the_process_pool(target, tmp_path):
    """A Dask worker of 4 threads runs 16 kernel calls at once: every result exact; a
    call uses at most the calling thread's setting (all cores by default, 1 inside
    td.threads(1)), and the whole worker has at most cores - 1 pool threads."""
    pytest.importorskip("distributed")
    (tmp_path / "dask_calls.py").write_text(DASK_CALLS.format(target=target))
    script = DASK.format(here=str(tmp_path), paths=TEST_PATHS)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=DEADLINE, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ok, counts, ones, workers, cores = proc.stdout.split()
    assert ok == "True" and counts == f"[{cores}]" and ones == "[1]"
    assert int(workers) <= max(int(cores) - 1, 0)


def test_a_forked_child_runs_parallel_kernels_on_a_pool_of_its_own(threads):
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    out, s = stencil_steps(61, 3)
    f = td.build(s, target="c")
    a = np.random.default_rng(4).integers(-1000, 1000, (61, 61), dtype=np.int64)
    want = td.evaluate(out, a=a)
    threads(2)
    assert np.array_equal(f(a=a), want)  # the parent's workers are running
    pid = os.fork()
    if pid == 0:  # the child: its parent's workers are gone
        code = 1
        try:
            code = 0 if all(np.array_equal(f(a=a), want) for _ in range(30)) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert np.array_equal(f(a=a), want)


def test_the_pool_reports_its_workers_and_loops(threads):
    out, s = stencil_steps(61, 2)
    f = td.build(s, target="c")
    a = np.zeros((61, 61), np.int64)
    before = pool_module.load().stats()
    threads(2)
    for _ in range(5):
        f(a=a)
    after = pool_module.load().stats()
    assert after["loops"] - before["loops"] == 10  # two parallel loops per call
    assert 1 <= after["workers"]


def test_threads_setting_is_per_python_thread():
    seen = run_threads(lambda k: (td.set_num_threads(k + 1), td.num_threads())[1], 3)
    assert seen == [1, 2, 3]
    assert td.num_threads() == pool_module.default_threads()


def test_numpy_blas_and_parallel_kernels_take_turns_in_one_process(backend):
    """What a notebook does: a BLAS product (numpy's own threads, which spin a while after
    it) then a parallel kernel, again and again, in one process; also from two Python
    threads at once. Every result is exact (the times are benchmarks/notebook_mix.py's)."""
    out, s = stencil_steps(97, 4)
    f = td.build(s, target=backend)
    rng = np.random.default_rng(5)
    m = rng.standard_normal((192, 192))
    a = rng.integers(-1000, 1000, (97, 97), dtype=np.int64)
    want, product = td.evaluate(out, a=a), m @ m

    def work(k: int) -> int:
        wrong = 0
        for _ in range(30):
            wrong += not np.array_equal(m @ m, product)
            wrong += not np.array_equal(f(a=a), want)
        return wrong

    assert work(0) == 0
    assert run_threads(work, 2) == [0, 0]


def test_a_worker_sharing_a_cpu_with_another_moves_off_it_and_keeps_its_affinity(pool):
    """A worker about to run a chunk on a CPU where another thread of the pool runs one
    moves to a CPU where none does, and its affinity is what it was before; with one
    CPU allowed it stays (pool.c: spread)."""
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        pytest.skip("one CPU: nowhere to move to")
    seen = []

    def on_a_fresh_thread(mask):  # a thread of its own: no move in the last MOVE_NS
        def run():
            os.sched_setaffinity(0, mask)
            before = os.sched_getaffinity(0)
            alone = pool.spread(0)
            shared = pool.spread(1)
            seen.append((alone, shared, os.sched_getaffinity(0) == before))
        t = threading.Thread(target=run)
        t.start()
        t.join(DEADLINE)

    on_a_fresh_thread(allowed)
    on_a_fresh_thread({min(allowed)})
    (alone, shared, kept), (one, still, kept_one) = seen
    if alone == -1:
        pytest.skip("the pool counts CPUs on Linux only")
    assert shared != alone and shared in allowed and kept
    assert one == still == min(allowed) and kept_one


def test_workers_keep_their_affinity_after_moving_under_load(pool):
    """Calls on two threads while a competitor spins on every CPU but the caller's:
    exact results, and every thread of the process ends with the affinity it started
    with (moves off a shared CPU restore it)."""
    if len(os.sched_getaffinity(0)) < 2 or not os.path.isdir("/proc/self/task"):
        pytest.skip("needs two CPUs and Linux's /proc")
    proc = subprocess.run([sys.executable, "-c", MOVES.format(paths=TEST_PATHS)],
                          capture_output=True, text=True, timeout=DEADLINE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    wrong, kept = proc.stdout.split()
    assert wrong == "0" and kept == "True"


MOVES = """
import os, subprocess, sys, threading
sys.path[:0] = {paths!r}
import numpy as np
import tdsl as td
from test_pool import stencil_steps
everyone = os.sched_getaffinity(0)
td.set_num_threads(2)
kernels = []
for target in ("c", "llvm"):
    out, s = stencil_steps(131, 6)
    a = np.random.default_rng(5).integers(-1000, 1000, (131, 131), dtype=np.int64)
    kernels.append((td.build(s, target=target), a, td.evaluate(out, a=a)))
    kernels[-1][0](a=a)  # the pool's workers start with every CPU allowed
cpu = min(everyone)
os.sched_setaffinity(0, {{cpu}})   # the caller on one CPU, competitors on the others
spin = [subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{{{{c}}}}}})\\nwhile True: pass"])
        for c in everyone if c != cpu]
try:
    wrong = sum(not np.array_equal(f(a=a), want) for f, a, want in kernels for _ in range(300))
finally:
    for p in spin:
        p.kill()
os.sched_setaffinity(0, everyone)
kept = all(os.sched_getaffinity(int(t)) == everyone for t in os.listdir("/proc/self/task"))
print(wrong, kept)
"""


@settings(max_examples=300, deadline=None)
@given(trips=st.integers(1, 5000) | st.sampled_from([56, 4096, 1 << 20, (1 << 25) + 7]),
       threads=st.integers(2, 64))
def test_chunks_cover_the_loop_once_and_shrink_at_its_end(trips, threads):
    """A loop's chunks: every iteration in exactly one, in order; none larger than
    trips / (CHUNKS_PER_THREAD * threads) (or 1) but where the count would pass the
    pool's counter; and the last 2 * threads chunks, taken when the threads are about
    to finish, are single iterations, so equal threads end together. The tail of
    smaller chunks is short: at most 2 * threads per halving of the chunk, and one."""
    pool = pool_module.load()
    chunks = pool.chunks(trips, threads)
    assert chunks[0][0] == 0 and chunks[-1][1] == trips
    assert all(a < b for a, b in chunks)
    assert all(b == a2 for (_, b), (a2, _) in zip(chunks, chunks[1:]))
    sizes = [b - a for a, b in chunks]
    c = sizes[0]
    assert max(sizes) == c
    if trips < 1 << 22:
        assert c == max(1, trips // (abi.CHUNKS_PER_THREAD * threads))
    assert sizes[-min(len(sizes), 2 * threads):] == [1] * min(len(sizes), 2 * threads)
    full = sum(1 for x in sizes if x == c)
    assert len(sizes) - full <= 1 + 2 * threads * c.bit_length()


def test_56_rows_on_two_threads():
    """conv2d's 56 output rows on 2 threads: 17 chunks of 3, the one row left over, and
    four single rows (equal chunks of 3 gave one thread 10 of 19 and 29 rows against
    27); softmax's 4096 rows: chunks of 256, then 4 of each half down to 1."""
    pool = pool_module.load()
    assert [b - a for a, b in pool.chunks(56, 2)] == [3] * 17 + [1] * 5
    sizes = [b - a for a, b in pool.chunks(4096, 2)]
    assert sizes == [256] * 12 + [4] + [s for s in (128, 64, 32, 16, 8, 4, 2, 1)
                                        for _ in range(4)]
