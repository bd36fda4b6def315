"""TVM's MetaSchedule as a benchmark peer: the six kernels tuned, not hand-scheduled.

    python benchmarks/tune.py --tuners tvm-ms --kernels sgemm-1024   tune (and record the time)
    python benchmarks/sgemm.py --peer tvm-ms --size 1024            measure what was tuned

Each kernel is the plain tensor expression (tvm.te, no schedule) as a TensorIR
function, tuned by `tvm.s_tir.meta_schedule.tune_tir` with the trial budget of
td.tune (`--trials`, 64 by default: max_trials_global), its default search
(evolutionary, an XGBoost cost model, measured candidates) for the host CPU
(-mcpu=native, num-cores = TVM_NUM_THREADS). Tuning writes MetaSchedule's database
into benchmarks/.metaschedule/<kernel>-<target>-<machine>/ with the wall time it took
(tuning.json); measuring compiles the best record of that database
(`tir_integration.compile_tir`), so a run of run.py does not tune again. A kernel
not tuned on this machine is reported "not tuned".
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import time
from pathlib import Path

os.environ.setdefault("TVM_NUM_THREADS", "2")

import harness  # noqa: E402
import tvm  # noqa: E402
from tvm import te  # noqa: E402

from tdsl.tune.machine import fingerprint_id  # noqa: E402

F32 = "float32"
ROOT = Path(__file__).resolve().parent / ".metaschedule"
BUILD_TIMEOUT = 180  # seconds per candidate build


def target() -> tvm.target.Target:
    from peer_tvm import target as tvm_target

    return tvm_target()


def sgemm(m: int, k: int, n: int):
    A = te.placeholder((m, k), F32, name="A")
    B = te.placeholder((k, n), F32, name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return [A, B, C]


def conv2d(ci: int, co: int, h: int, w: int):
    inp = te.placeholder((ci, h, w), F32, name="inp")
    W = te.placeholder((co, ci, 3, 3), F32, name="w")
    P = te.compute((ci, h + 2, w + 2), lambda c, y, x: te.if_then_else(
        te.all(y >= 1, y <= h, x >= 1, x <= w), inp[c, y - 1, x - 1], 0.0), name="P")
    c = te.reduce_axis((0, ci), name="c")
    ry = te.reduce_axis((0, 3), name="ry")
    rx = te.reduce_axis((0, 3), name="rx")
    out = te.compute((co, h, w), lambda k, y, x: te.sum(
        P[c, y + ry, x + rx] * W[k, c, ry, rx], axis=[c, ry, rx]), name="out")
    return [inp, W, out]


def blur(h: int, w: int):
    inp = te.placeholder((h, w), F32, name="inp")
    third = tvm.tirx.const(3.0, F32)
    bx = te.compute((h, w - 2), lambda y, x: (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) / third,
                    name="bx")
    by = te.compute((h - 2, w - 2),
                    lambda y, x: (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / third, name="by")
    return [inp, by]


def softmax(rows: int, cols: int):
    X = te.placeholder((rows, cols), F32, name="X")
    c1 = te.reduce_axis((0, cols), name="c1")
    mx = te.compute((rows,), lambda r: te.max(X[r, c1], axis=c1), name="mx")
    e = te.compute((rows, cols), lambda r, c: te.exp(X[r, c] - mx[r]), name="e")
    c2 = te.reduce_axis((0, cols), name="c2")
    total = te.compute((rows,), lambda r: te.sum(e[r, c2], axis=c2), name="total")
    out = te.compute((rows, cols), lambda r, c: e[r, c] / total[r], name="out")
    return [X, out]


def layernorm(rows: int, cols: int):
    X = te.placeholder((rows, cols), F32, name="X")
    g = te.placeholder((cols,), F32, name="g")
    b = te.placeholder((cols,), F32, name="b")
    c1 = te.reduce_axis((0, cols), name="c1")
    total = te.compute((rows,), lambda r: te.sum(X[r, c1], axis=c1), name="total")
    d = te.compute((rows, cols), lambda r, c: X[r, c] - total[r] / float(cols), name="d")
    c2 = te.reduce_axis((0, cols), name="c2")
    sq = te.compute((rows,), lambda r: te.sum(d[r, c2] * d[r, c2], axis=c2), name="sq")
    out = te.compute((rows, cols), lambda r, c: d[r, c] / te.sqrt(sq[r] / float(cols) + 1e-5)
                     * g[c] + b[c], name="out")
    return [X, g, b, out]


def depthwise(ch: int, h: int, w: int):
    inp = te.placeholder((ch, h, w), F32, name="inp")
    W = te.placeholder((ch, 3, 3), F32, name="w")
    P = te.compute((ch, h + 2, w + 2), lambda c, y, x: te.if_then_else(
        te.all(y >= 1, y <= h, x >= 1, x <= w), inp[c, y - 1, x - 1], 0.0), name="P")
    ry = te.reduce_axis((0, 3), name="ry")
    rx = te.reduce_axis((0, 3), name="rx")
    out = te.compute((ch, h, w), lambda c, y, x: te.sum(P[c, y + ry, x + rx] * W[c, ry, rx],
                                                        axis=[ry, rx]), name="out")
    return [inp, W, out]


BUILDERS = {"sgemm": sgemm, "conv2d": conv2d, "blur": blur, "softmax": softmax,
            "layernorm": layernorm, "depthwise": depthwise}


def work_dir(script: str, size: str) -> Path:
    """Where MetaSchedule's database of one kernel on this machine is kept."""
    threads = os.environ.get("TVM_NUM_THREADS", "2")
    return ROOT / f"{script}-{size}-t{threads}-{fingerprint_id()}"


def prim_func(script: str, size: str):
    module = harness.kernel_module(script)
    return te.create_prim_func(BUILDERS[script](*module.SIZES[size]))


def tune(script: str, size: str, trials: int) -> dict:
    """Tune one kernel with MetaSchedule (`trials` measured candidates); record and
    return {"wall_s", "trials", "work_dir"}."""
    from tvm.s_tir import meta_schedule as ms

    d = work_dir(script, size)
    d.mkdir(parents=True, exist_ok=True)
    mod = tvm.IRModule({"main": prim_func(script, size)})
    t0 = time.perf_counter()
    # MetaSchedule's builder gives a candidate 30 s by default; a build worker's first
    # build imports tvm.s_tir.tensor_intrin, which alone takes 10-50 s on a 2-core
    # machine: the workers import it when they start instead, and builds get longer
    warm = functools.partial(importlib.import_module, "tvm.s_tir.tensor_intrin")
    ms.tune_tir(mod, target(), str(d), max_trials_global=trials,
                num_trials_per_iter=min(trials, 16), seed=0,
                builder=ms.builder.LocalBuilder(timeout_sec=BUILD_TIMEOUT, initializer=warm))
    wall = time.perf_counter() - t0
    info = {"wall_s": round(wall, 1), "trials": trials, "work_dir": str(d)}
    (d / "tuning.json").write_text(json.dumps(info))
    return info


def compile_kernel(script: str, size: str):
    """(compiled function, tuning record) of the best schedule MetaSchedule recorded."""
    from tvm.s_tir import meta_schedule as ms

    d = work_dir(script, size)
    info = json.loads((d / "tuning.json").read_text())
    database = ms.database.JSONDatabase(path_workload=str(d / "database_workload.json"),
                                        path_tuning_record=str(d / "database_tuning_record.json"),
                                        allow_missing=False)
    mod = tvm.IRModule({"main": prim_func(script, size)})
    sch = ms.tir_integration.compile_tir(database, mod, target())
    if sch is None:
        raise RuntimeError("MetaSchedule's database has no record of this kernel")
    lib = tvm.compile(sch.mod, target=target())
    return lib["main"], info


def tuned(script: str, size: str) -> bool:
    return (work_dir(script, size) / "tuning.json").exists()


def peer(script: str, size: str) -> harness.Peer | None:
    """The MetaSchedule peer of a kernel script at one size; None when not tuned here."""
    from peer_tvm import runner

    if not tuned(script, size):
        return None
    module = harness.kernel_module(script)
    dims = module.SIZES[size]
    arrays = module.inputs(size)
    ref = module.numpy_peer(size)
    compiled, info = compile_kernel(script, size)
    fn = runner(compiled, [arrays[a] for a in harness.PEER_ARGS[script]],
                harness.output_shape(script, dims))
    return harness.Peer(ref.kernel, fn, ref.work, ref.unit,
                        {"tune_s": info["wall_s"], "trials": info["trials"],
                         "threads": os.environ.get("TVM_NUM_THREADS")})


def _check(script: str, size: str) -> None:
    """Tune a tiny kernel with 4 trials and check it against numpy (a smoke test)."""
    tune(script, size, 4)
    p = peer(script, size)
    assert p is not None
    c = harness.kernel_module(script).case("c", "best", size)
    err = harness.check(p.fn(), c.reference(), c.rtol, c.atol)
    print(script, size, p.info, "ok" if err is None else f"WRONG {err}")


if __name__ == "__main__":
    import sys

    _check(sys.argv[1], sys.argv[2])
