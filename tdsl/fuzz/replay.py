"""Replaying reproducers, and promoting fixed ones to regression tests.

A reproducer carries its spec (`SPEC = '...'`, JSON); replaying runs that spec
in a worker, as the campaign did, and prints the outcome. `promote` replays on
both targets and, when both are exact, copies the file into
`tests/fuzz_regressions/`, which `tests/fuzz/test_fuzz_regressions.py` runs.
`triage` tells which generator features a finding needs (is it a known bug?).
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
        pool.run([{"id": "replay", "spec": spec, "target": target, "sanitize": sanitize,
                   "lenient": True}],
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


def without_pad_data_index(n):
    """The spec with every data-dependent read through td.pad made through td.clamp."""
    if isinstance(n, dict):
        return {k: without_pad_data_index(v) for k, v in n.items()}
    if isinstance(n, list):
        if n and n[0] == "a" and isinstance(n[2], list) and any(i[0] != "i" for i in n[3]):
            return ["a", n[1], "clamp", [without_pad_data_index(i) for i in n[3]]]
        return [without_pad_data_index(m) for m in n]
    return n


def variants(spec):
    """(feature, the spec without it) for each generator feature the spec uses."""
    found = [("pad-data-index", without_pad_data_index(spec)),
             ("update", {**spec, "stages": [s for s in spec["stages"] if s["kind"] != "update"]}),
             ("multi-output", {**spec, "outputs": spec["outputs"][-1:]}),
             ("special-values", {**spec, "special_values": False})]
    return [(name, v) for name, v in found if v != spec]


def triage(paths, target: str, timeout: float = 60.0) -> int:
    """For each finding, which generator features it needs: a finding that goes away
    without a feature (`--exclude` names) is likely the known bug of that feature."""
    for path in paths:
        spec = load_spec(path)
        first = outcome(spec, target, timeout)["class"]
        needs = [name for name, v in variants(spec)
                 if outcome({**v, "schedule": spec["schedule"]}, target, timeout)["class"]
                 in ("exact", "rejected")]
        print(f"{path} on {target}: {first}; goes away without: {', '.join(needs) or 'nothing'}",
              flush=True)
    return 0
