"""The code passes ruff's checks as configured in pyproject.toml, complexity cap included.

Runs in the test suite (and so in `.ci/run`) so that a function past the cap, an
unused import or an unsorted import block fails the build, not a review."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason="ruff is not installed")
def test_ruff_finds_nothing():
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "tdsl", "tests",
                        "benchmarks"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
