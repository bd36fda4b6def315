"""td.map_blocks on a real cluster: two worker processes, chunks on both, the chunk
kernel built once per process and never per task."""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")


def _kernels_built() -> int:
    from tdsl.chunked import task

    return len(task._KERNELS)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, worker_dashboard_address=None)
    c = distributed.Client(cluster, timeout=60)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def test_a_pipeline_runs_on_two_worker_processes(client):
    y, x = td.dims("y x")
    H, W = td.size("H"), td.size("W")
    A = td.input("A", {y: H, x: W}, td.int32)
    B = td.compute("B", {y: H, x: W}, td.clamp(A)[y - 1, x] + td.mirror(A)[y, x + 2] * 2)
    C = td.compute("C", {y: H, x: W}, td.pad(B, 1)[y + 1, x - 1] - B[y, x])
    f = td.build(td.schedule(C).parallel(C, y))
    a = np.random.default_rng(0).integers(-50, 50, (96, 80)).astype(np.int32)
    out = td.map_blocks(f, A=da.from_array(a, chunks=(16, 20)))
    assert out.npartitions == 24
    with distributed.get_task_stream(client) as ts:
        got = client.compute(out).result(timeout=300)
    assert np.array_equal(got, f(A=a))
    ran = {t["worker"] for t in ts.data if "tdsl-C" in str(t["key"])}
    assert len(ran) == 2, "chunks ran on both worker processes"
    built = client.run(_kernels_built)
    assert sorted(built.values()) == [1, 1], "one build per worker process, not per task"
