"""The compiler's steps as the documentation lists them are the compiler's own: the
user guide's list of `td.lower(s, trace=True)` steps, and the architecture page's
`PASSES:` and `LATE_PASSES` lines against `tdsl.lower.PASSES` / `LATE_PASSES`. A change
to the pipeline fails here until the pages say the same."""

from __future__ import annotations

import re
from pathlib import Path

import tdsl as td
from tdsl.lower import LATE_PASSES, PASSES

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _trace_steps() -> list[str]:
    (i,) = td.dims("i")
    X = td.input("X", {i: 16}, td.float32)
    Y = td.compute("Y", {i: 16}, X[i] * 2)
    return [name for name, _ in td.lower(td.schedule(Y).split(Y, "i", 4), trace=True)]


def test_the_user_guides_trace_steps_are_the_compilers():
    page = (DOCS / "user-guide.md").read_text()
    m = re.search(r"<!-- trace-steps -->(.*?)<!-- /trace-steps -->", page, re.S)
    assert m, "docs/user-guide.md lost its <!-- trace-steps --> list"
    assert re.findall(r"`(\w+)`", m.group(1)) == _trace_steps()


def _listed(page: str, label: str) -> list[str]:
    """The names after `label` on the architecture page, up to its `->`."""
    m = re.search(rf"{label}[^:\n]*:\s*(.*?)->", page, re.S)
    assert m, f"docs/architecture.md lost its {label} line"
    return m.group(1).split()


def test_the_architecture_pages_pass_lists_are_the_compilers():
    page = (DOCS / "architecture.md").read_text()
    assert _listed(page, r"\n\s+PASSES") == [name for name, _ in PASSES]
    assert _listed(page, "LATE_PASSES") == [name for name, _ in LATE_PASSES]
    steps = _trace_steps()
    assert steps[-len(LATE_PASSES):] == [name for name, _ in LATE_PASSES]


def test_every_public_name_is_on_the_api_page():
    """docs/api.md lists what it documents by name; a new public name must be added."""
    page = (DOCS / "api.md").read_text()
    shown = set(re.findall(r"^::: [\w.]*?(\w+)$", page, re.M)) | set(re.findall(r"`td\.(\w+)`", page))
    assert sorted(set(td.__all__) - shown - {"dtypes"}) == []
