"""The LLVM backend survives what LLVM itself gets wrong.

The llvmlite wheel's LLVM is built with assertions on: an assertion that
fails inside one of its passes aborts the process. Cases that once did so are
built here in a child Python, so that a regression fails the test instead of
killing pytest.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Aborted in LLVM's loop vectorizer ("VPlan cost model and legacy cost model
# disagreed") on the consumer's loop, which no schedule asked to vectorize.
ISSUE16 = """
import numpy as np, tdsl as td
y, x, k = td.dims("y x k")
a = td.input("a", {y: 13, x: 1}, td.uint32)
r = td.compute("r", {y: 13}, td.min(td.maximum(td.clamp(a)[y + 2, k + 1], 0), over={k: 1}))
out = td.compute("out", {y: 13, x: 1}, td.maximum(
    a[y, x] // a[y, x] % td.maximum(td.pad(a, 0)[y + 2, x - 1], td.clamp(a)[y - 1, x - 1]), r[y]))
s = td.schedule(out).cache_write(r, name="ca0").compute_at("ca0", r, "y").parallel("ca0", "y")
"""


def run_child(script: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `script` in a fresh interpreter importing this checkout's tdsl."""
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r})\n" + textwrap.dedent(script)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_issue16_builds_and_is_exact():
    p = run_child(ISSUE16 + """
import warnings
f = td.build(s, target="llvm")
rng = np.random.default_rng(16)
arrays = [np.zeros((13, 1), np.uint32), np.full((13, 1), 2**32 - 1, np.uint32)]
arrays += [rng.integers(0, 2**32, (13, 1), dtype=np.uint32) for _ in range(5)]
arrays += [rng.integers(0, 4, (13, 1), dtype=np.uint32) for _ in range(5)]
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # numpy warns about x // 0
    for av in arrays:
        np.testing.assert_array_equal(f(a=av), td.evaluate(out, a=av))
print("exact", len(arrays))
""")
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stderr[-3000:]}"
    assert "exact 12" in p.stdout
