"""The compiler's steps as the documentation lists them are the compiler's own: the
user guide's list of `td.lower(s, trace=True)` steps, and the architecture page's
`PIPELINE:` line against `tdsl.lower.PIPELINE` (names in order, and which steps apply
to portable C or profiling only). A change to the pipeline fails here until the pages
say the same."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import tdsl as td
from tdsl.lower import PIPELINE, steps

DOCS = Path(__file__).resolve().parents[2] / "docs"
# the architecture page's marks of a step that applies to one kind of build
ONLY = {"*": "profile", "+": "portable", "": None}


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
    """The names after `label:` on the architecture page, up to its `->`."""
    m = re.search(rf"{label}:\s*(.*?)->", page, re.S)
    assert m, f"docs/architecture.md lost its {label} line"
    return m.group(1).split()


def test_the_architecture_pages_pipeline_is_the_compilers():
    listed = _listed((DOCS / "architecture.md").read_text(), "PIPELINE")
    marked = [re.fullmatch(r"(\w+)([*+]?)", word) for word in listed]
    assert all(marked), f"PIPELINE line: {listed}"
    assert [(m.group(1), ONLY[m.group(2)]) for m in marked if m] == [
        (step.name, step.only) for step in PIPELINE]


def test_the_lower_modules_docstring_lists_the_pipeline():
    """`tdsl.lower`'s docstring says what each step guarantees, one step a line, in order."""
    doc = importlib.import_module("tdsl.lower").__doc__  # (td.lower is the function)
    assert doc and "then `PIPELINE`" in doc
    listed = re.findall(r"^    (\w+) {2,}", doc.split("then `PIPELINE`", 1)[1], re.M)
    assert listed == [step.name for step in PIPELINE]


def test_a_trace_shows_every_step_a_host_build_runs():
    assert _trace_steps() == [step.name for step in steps()]
    assert "instrument" not in _trace_steps() and "index32" not in _trace_steps()


def test_every_public_name_is_on_the_api_page():
    """docs/api.md lists what it documents by name; a new public name must be added."""
    page = (DOCS / "api.md").read_text()
    shown = set(re.findall(r"^::: [\w.]*?(\w+)$", page, re.M)) | set(re.findall(r"`td\.(\w+)`", page))
    assert sorted(set(td.__all__) - shown - {"dtypes"}) == []
