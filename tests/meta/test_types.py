"""Type checking: mypy finds no error in tdsl, with the configuration of pyproject.toml
(`[tool.mypy]`; the compiler core, `tdsl.lower`, checked strictly)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not installed (it comes with the dev extra: pip install -e '.[dev]')")
def test_mypy_finds_no_errors(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "tdsl", "--cache-dir", str(tmp_path / "mypy-cache")],
        cwd=ROOT, capture_output=True, text=True)
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"mypy tdsl failed:\n{output}"
    assert "Success: no issues found" in output, output
