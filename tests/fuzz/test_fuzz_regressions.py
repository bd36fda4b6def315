"""Fixed fuzz findings stay fixed: every reproducer in tests/fuzz_regressions/ on
both backends must give td.evaluate's answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tdsl.fuzz.case import run_task
from tdsl.fuzz.replay import load_spec

FILES = sorted((Path(__file__).parents[1] / "fuzz_regressions").glob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_fuzz_regression(path, backend):
    res = run_task({"id": path.stem, "spec": load_spec(path), "target": backend},
                   lambda msg: None)
    assert res["class"] == "exact", res["detail"]
