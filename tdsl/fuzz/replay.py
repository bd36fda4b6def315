"""Replaying reproducers, and promoting fixed ones to regression tests.

A reproducer carries its spec (`SPEC = '...'`, JSON); replaying runs that spec
in a worker, as the campaign did, and prints the outcome. `promote` replays on
both targets and, when both are exact, copies the file into
`tests/fuzz_regressions/`, which `tests/test_fuzz_regressions.py` runs.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path

from .pool import Pool

REGRESSIONS = Path(__file__).resolve().parents[2] / "tests" / "fuzz_regressions"


def load_spec(path) -> dict:
    """The spec recorded in a reproducer file."""
    m = re.search(r"^SPEC = (.*)$", Path(path).read_text(), re.M)
    if not m:
        raise ValueError(f"{path} has no SPEC line; is it a tdsl fuzz reproducer?")
    return json.loads(ast.literal_eval(m.group(1)))


def outcome(spec, target: str, timeout: float, sanitize: bool = False) -> dict:
    found = {}
    with Pool(1, timeout) as pool:
        pool.run([{"id": "replay", "spec": spec, "target": target, "sanitize": sanitize}],
                 lambda t, s, r: found.update(r))
    return found


def replay(path, target: str, timeout: float = 60.0) -> int:
    res = outcome(load_spec(path), target, timeout)
    print(f"{path} on {target}: {res['class']}")
    if res.get("detail"):
        print(res["detail"])
    return 0 if res["class"] in ("exact", "rejected") else 1


def promote(path, timeout: float = 60.0) -> int:
    spec = load_spec(path)
    for target in ("c", "llvm"):
        res = outcome(spec, target, timeout)
        if res["class"] != "exact":
            print(f"{path} is still {res['class']} on {target}; not promoted\n{res.get('detail')}")
            return 1
    REGRESSIONS.mkdir(parents=True, exist_ok=True)
    dest = REGRESSIONS / Path(path).name.replace("-", "_")
    shutil.copyfile(path, dest)
    print(f"promoted to {dest}")
    return 0
