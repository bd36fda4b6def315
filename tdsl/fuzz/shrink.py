"""Shrinking a failing case while it keeps failing the same way.

Candidates, biggest cuts first: drop schedule primitives (halves, then one at a
time), keep one output, cut the pipeline after an earlier stage, drop updates,
make sizes and extents smaller (1, 2, half), turn off special input values, and
replace an expression by one of its operands. Each candidate runs in a worker
with the campaign's time limit, with primitives that no longer apply left out
(`lenient`). A candidate is kept when its outcome has the same signature (class,
and the exception type or signal); the search restarts from it until no
candidate is kept or the time budget is spent.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

from . import render

EXPR_CHILDREN = {"b": (2, 3), "u": (2,), "f": (2,), "cmp": (2, 3), "w": (1, 2, 3), "cast": (2,),
                 "r": (2,), "h": (2,)}


def signature(result: dict) -> tuple:
    return (result["class"], result.get("kind") or result.get("signal") or "",
            result.get("sanitizer_kind", ""))


def schedule_cuts(spec):
    ops = spec["schedule"]
    n = len(ops)
    if n >= 4:
        yield {**spec, "schedule": ops[: n // 2]}
        yield {**spec, "schedule": ops[n // 2:]}
    for i in reversed(range(n)):
        yield {**spec, "schedule": ops[:i] + ops[i + 1:]}


def pipeline_cuts(spec):
    used = render.reachable(spec)
    live = [st for st in spec["stages"] if (st.get("stage") or st["name"]) in used]
    if len(live) < len(spec["stages"]):
        yield {**spec, "stages": live,
               "inputs": [t for t in spec["inputs"] if t["name"] in used]}
    if len(spec["outputs"]) > 1:
        for o in spec["outputs"]:
            yield {**spec, "outputs": [o]}
    stages = spec["stages"]
    for i, st in enumerate(stages):
        if st["kind"] == "compute" and st["name"] not in spec["outputs"]:
            keep = [s for s in stages[: i + 1]] + [
                s for s in stages[i + 1:] if s.get("stage") == st["name"]]
            yield {**spec, "stages": keep, "outputs": [st["name"]]}
    for i, st in enumerate(stages):
        if st["kind"] == "update":
            yield {**spec, "stages": stages[:i] + stages[i + 1:]}


def size_cuts(spec):
    for name, v in spec["sizes"].items():
        for smaller in sorted({1, 2, v // 2} - {0}):
            if smaller < v:
                yield {**spec, "sizes": {**spec["sizes"], name: smaller}}
    for d, e in spec["dims"].items():
        if isinstance(e, int):
            for smaller in sorted({1, 2, e // 2} - {0}):
                if smaller < e:
                    yield {**spec, "dims": {**spec["dims"], d: smaller}}
    if spec.get("special_values"):
        yield {**spec, "special_values": False}


def expr_paths(node, path=()):
    if isinstance(node, list) and node and node[0] in EXPR_CHILDREN:
        yield path
        for i in EXPR_CHILDREN[node[0]]:
            yield from expr_paths(node[i], (*path, i))


def expr_cuts(spec):
    for si, st in enumerate(spec["stages"]):
        key = "expr" if st["kind"] == "compute" else "value"
        for path in expr_paths(st[key]):
            node = st[key]
            for i in path:
                node = node[i]
            for child in EXPR_CHILDREN[node[0]]:
                new = copy.deepcopy(spec)
                if not path:
                    new["stages"][si][key] = copy.deepcopy(node[child])
                else:
                    parent = new["stages"][si][key]
                    for i in path[:-1]:
                        parent = parent[i]
                    parent[path[-1]] = copy.deepcopy(node[child])
                yield new


def candidates(spec):
    yield from schedule_cuts(spec)
    yield from pipeline_cuts(spec)
    yield from size_cuts(spec)
    yield from expr_cuts(spec)


def try_spec(pool, task, spec):
    found: dict[str, dict] = {}

    def done(t, s, r):
        found.update(spec=s, result=r)

    pool.run([{**task, "id": f"shrink-{task['id']}", "spec": spec, "lenient": True}], done)
    return found.get("spec") or spec, found["result"]


def shrink(pool, task, spec, result, seconds: float):
    """The smallest spec found that fails like `result`, with its result."""
    want = signature(result)
    deadline = time.monotonic() + seconds
    best, best_result, improved = spec, result, True
    while improved and time.monotonic() < deadline:
        improved = False
        for cand in candidates(best):
            if time.monotonic() > deadline:
                break
            kept, res = try_spec(pool, task, cand)
            if signature(res) == want:
                best, best_result, improved = kept, res, True
                break
    return best, best_result


def shrink_findings(pool, opts, findings) -> None:
    """Shrink up to `opts.shrink` findings of distinct signatures; rewrite their files."""
    seen: set[tuple] = set()
    for task, spec, result, path in findings:
        sig = (signature(result), task["target"], task["index"] if result["class"] in (
            "wrong", "timed out") else None)  # one crash or error of a kind is enough
        if sig in seen or len(seen) >= opts.shrink:
            continue
        seen.add(sig)
        if not opts.quiet:
            print(f"shrinking {path} ...", flush=True)
        small, res = shrink(pool, task, spec, result, opts.shrink_seconds)
        Path(str(path).removesuffix(".py") + ".orig.py").write_text(Path(path).read_text())
        info = {"class": res["class"], "target": task["target"], "seed": task["seed"],
                "case": task["index"], "shrunk": "yes", "detail": res.get("detail", "")}
        Path(path).write_text(render.reproducer(small, info))
