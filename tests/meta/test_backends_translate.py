"""The backends only translate: no module under tdsl/backend_c/ or tdsl/backend_llvm/
builds or rewrites loop-IR statements. Every loop-IR -> loop-IR change is a named pass
of `tdsl.lower` (what `td.lower(s, trace=True)` shows); a backend maps the nodes it is
given to C text or LLVM instructions.

Read from each module's syntax tree: a call of a statement class of `tdsl.lower.ir`
(imported by name or reached as `ir.X`), a call of `dataclasses.replace` (the way a
frozen node is rewritten), and a use of the rewriters of `tdsl.lower.rewrite`
(`Rewriter`, `Substitute`, `substitute`) are refused."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tdsl.lower import ir

ROOT = Path(__file__).parents[2] / "tdsl"
FILES = sorted([*ROOT.joinpath("backend_c").rglob("*.py"),
                *ROOT.joinpath("backend_llvm").rglob("*.py")])
STATEMENTS = frozenset(name for name, value in vars(ir).items()
                       if isinstance(value, type) and issubclass(value, ir.Stmt))
REWRITERS = frozenset({"Rewriter", "Substitute", "substitute"})


def _names(tree: ast.AST) -> tuple[dict[str, str], set[str], set[str]]:
    """(local name -> statement class, names of the `ir` module, local names of
    `dataclasses.replace` and the rewriters) as the module imports them."""
    stmts: dict[str, str] = {}
    modules: set[str] = set()
    banned: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = node.module or ""
        for alias in node.names:
            local = alias.asname or alias.name
            if module.endswith("lower.ir") and alias.name in STATEMENTS:
                stmts[local] = alias.name
            elif module.endswith("lower") and alias.name == "ir":
                modules.add(local)
            elif module == "dataclasses" and alias.name == "replace":
                banned.add(local)
            elif module.endswith("lower.rewrite") and alias.name in REWRITERS:
                banned.add(local)
    return stmts, modules, banned


def _offences(source: str) -> list[str]:
    tree = ast.parse(source)
    stmts, modules, banned = _names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Name) and fn.id in stmts:
                found.append(f"line {node.lineno}: builds a loop-IR {stmts[fn.id]}")
            elif (isinstance(fn, ast.Attribute) and fn.attr in STATEMENTS
                  and isinstance(fn.value, ast.Name) and fn.value.id in modules):
                found.append(f"line {node.lineno}: builds a loop-IR {fn.attr}")
            elif (isinstance(fn, ast.Attribute) and fn.attr == "replace"
                  and isinstance(fn.value, ast.Name) and fn.value.id == "dataclasses"):
                found.append(f"line {node.lineno}: rewrites a node with dataclasses.replace")
        if isinstance(node, ast.Name) and node.id in banned:
            found.append(f"line {node.lineno}: uses {node.id}")
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                if isinstance(base, ast.Attribute) and base.attr in REWRITERS:
                    found.append(f"line {node.lineno}: {node.name} is a {base.attr}")
    return found


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_the_backend_builds_no_loop_ir(path):
    offences = _offences(path.read_text())
    assert not offences, (
        f"{path.relative_to(ROOT)} changes loop IR, which is a pass's job (tdsl/lower/passes): "
        + "; ".join(offences))


def test_the_check_sees_each_way_of_changing_loop_ir():
    """The check itself: each form it refuses, and what it lets through."""
    refused = [
        "from ..lower.ir import For\nFor('i', a, b, k, s)",
        "from ..lower.ir import Block as B\nB(())",
        "from ..lower import ir\nir.Store(b, (i,), v)",
        "from dataclasses import replace\nreplace(loop, end=e)",
        "import dataclasses\ndataclasses.replace(loop, end=e)",
        "from ..lower.rewrite import Rewriter\nclass R(Rewriter):\n    pass",
        "from ..lower import rewrite\nclass R(rewrite.Rewriter):\n    pass",
        "from ..lower.rewrite import substitute\nsubstitute(s, {})",
    ]
    for source in refused:
        assert _offences(source), source
    allowed = [
        "from ..lower.ir import For, Const\nisinstance(s, For)\nConst(0, d)",
        "from ..lower.ir import Binary\nBinary('add', a, b, d)",
        "from ..lower import ir\nmatch s:\n    case ir.For(var=v):\n        pass",
    ]
    for source in allowed:
        assert not _offences(source), source
    assert {"For", "Block", "Store", "Let", "If", "Allocate", "IfFeature"} <= STATEMENTS
