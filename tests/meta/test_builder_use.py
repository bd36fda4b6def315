"""The passes build loop-IR expressions through `tdsl.lower.build`, never by spelling
out nodes (`ir.Binary(op, a, b, dtype)`) or with constructors of their own."""

from __future__ import annotations

import ast
from pathlib import Path

PASSES = Path(__file__).resolve().parents[2] / "tdsl" / "lower" / "passes"

def _spelt_out(path: Path) -> list[str]:
    """The expression nodes a module builds by their class (`ir.Binary(...)` and the like;
    a `case ir.Binary(...)` pattern is no construction)."""
    nodes = ("Binary", "Compare", "Select", "Unary", "Const", "Cast", "Call", "index_const")
    return [f"{path.name}:{n.lineno} ir.{n.func.attr}" for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "ir"
            and n.func.attr in nodes]


def test_the_passes_build_expressions_through_the_builder():
    found = [x for p in sorted(PASSES.glob("*.py")) for x in _spelt_out(p)]
    assert found == [], "use tdsl.lower.build instead of spelling out nodes"
