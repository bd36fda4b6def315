"""Layering: every package imports only from the layers below it (docs/architecture.md:
compute <- schedule <- lower <- backends <- runtime/api), the backends know the
loop IR and not the polyhedral model, and only `lower` uses isl."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2] / "tdsl"

# each part of tdsl and the parts it may import (besides itself)
BASE = {"errors", "display"}
ALLOWED = {
    "errors": set(),
    "display": {"errors"},  # HTML helpers every part's notebook display uses
    "limits": BASE,
    "dtypes": BASE,
    "compute": BASE | {"dtypes"},
    "schedule": BASE | {"dtypes", "compute"},
    "lower": BASE | {"dtypes", "compute", "schedule"},
    "backend_c": BASE | {"dtypes", "limits", "lower"},
    "backend_llvm": BASE | {"dtypes", "limits", "lower"},
    "runtime": BASE | {"dtypes", "compute", "lower"},
    "api": BASE | {"dtypes", "compute", "schedule", "lower", "backend_c", "backend_llvm",
                   "runtime", "limits"},
    "emit": BASE | {"dtypes", "compute", "schedule", "lower", "backend_c", "runtime", "api"},
    "cli": BASE | {"api", "emit"},
    # the auto-scheduler, the tuner and its log, td.explore: above the backends, like the
    # runtime, through the public API (td.build) and the algorithm and schedule objects
    "tune": BASE | {"dtypes", "compute", "schedule", "api", "runtime", "limits"},
    # kernels over dask arrays and xarray objects: above the runtime, through td.build,
    # with the footprints of chunks from lower.poly.footprint
    "chunked": BASE | {"dtypes", "compute", "schedule", "lower", "runtime", "api"},
    "fuzz": None,  # a client of the public API (it imports `tdsl` itself)
    "__init__": None,
    "__main__": None,
}
# what of `lower` a backend may see: the loop IR, its traversals and printer, the kernel
# ABI, the row-major layout, the plan of vectorized loops and which products are fused
# (float32 exp reaches them legalised)
BACKEND_VIEW = {"lower.ir", "lower.rewrite", "lower.printer", "lower.abi", "lower.layout",
                "lower.vectors", "lower.contraction"}
ISL_USERS = {"lower"}
# the one module of a backend that other parts may import: the thread pool both targets'
# kernels call (built by the C target's compiler), and the runtime sets threads through
SHARED = {"backend_c.pool": {"backend_llvm", "runtime"}}


def _part(path: Path) -> str:
    rel = path.relative_to(ROOT).parts
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")


def _imports(path: Path):
    """(module inside tdsl, e.g. 'lower.ir', or None) and top-level third-party names."""
    depth = len(path.relative_to(ROOT).parts)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                top = (node.module or "").split(".")
                if top[0] == "tdsl":
                    yield ".".join(top[1:]) or None, None
                else:
                    yield None, top[0]
            elif node.level >= depth:  # reaches the tdsl package
                if node.module:
                    yield node.module, None
                else:
                    for a in node.names:
                        yield a.name, None
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                yield (".".join(parts[1:]) or None, None) if parts[0] == "tdsl" else (None, parts[0])


FILES = sorted(ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_imports_follow_the_layers(path):
    part = _part(path)
    assert part in ALLOWED, f"{part} is not in the layering table; add it"
    allowed = ALLOWED[part]
    for module, third in _imports(path):
        if third is not None:
            if third == "islpy":
                assert part in ISL_USERS, f"{path.name} ({part}) uses isl"
            continue
        if module is None or allowed is None:
            continue
        target = module.split(".")[0]
        if target == part or part in SHARED.get(module, ()):
            continue
        assert target in allowed, f"{path.relative_to(ROOT)} ({part}) imports {module}"
        if part.startswith("backend_") and target == "lower":
            assert module in BACKEND_VIEW, f"{path.relative_to(ROOT)} sees {module}"


def test_the_table_covers_every_part():
    assert {_part(p) for p in FILES} <= ALLOWED.keys()
