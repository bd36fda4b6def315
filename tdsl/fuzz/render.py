"""Specs to Python: the tdsl program a case runs, and standalone reproducers.

`program(spec)` is the code every run executes (so what is tested is exactly
what a reproducer shows): it defines `outputs`, `s` (the schedule, without its
primitives unless `schedule=True`) and `arrays` (the inputs, from a seed).
`reproducer(spec, finding)` wraps it in a file that runs on its own
(`python FILE [c|llvm]`) and that `tests/fuzz/test_fuzz_regressions.py` replays.
"""

from __future__ import annotations

import json
import re

from .oracle import float_base

ARRAYS = '''
def make_array(rng, shape, dtype, special, edges=False):
    """Random input data: small values, sometimes extremes, NaN and infinities; with
    `edges`, integers at their dtype's limits in some places."""
    dt = td.dtypes.as_dtype(dtype).np  # (bfloat16: ml_dtypes')
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dt.kind == "f" or dt.name == "bfloat16":
        a = rng.uniform(-4, 4, size=shape).astype(dt)
        if special and a.size:
            flat = a.reshape(-1)
            for v in (np.nan, np.inf, -np.inf, 0.0, -0.0):
                flat[rng.integers(a.size)] = v
        return a
    info = np.iinfo(dt)
    if special or rng.random() < 0.3:
        a = rng.integers(info.min, int(info.max) + 1, size=shape, dtype=dt)
    else:
        lo = 0 if dt.kind == "u" else -6
        a = rng.integers(lo, 7, size=shape).astype(dt)
    if edges and a.size:
        flat = a.reshape(-1)
        for v in (info.min, info.max, info.max - 1, info.max // 2 + 1, 0):
            flat[rng.integers(a.size)] = v
    return a


def make_arrays(seed, special, edges=False):
    rng = np.random.default_rng(seed)
    return {name: make_array(rng, shape, dtype, special, edges)
            for name, (shape, dtype) in INPUTS.items()}
'''


def dtype_code(name: str) -> str:
    return "td.bool_" if name == "bool" else f"td.{name}"


def expr(n) -> str:
    """Python source of an expression node."""
    match n[0]:
        case "c":
            return repr(n[1]) if n[2] is None else f"td.cast({n[1]!r}, {dtype_code(n[2])})"
        case "d" | "i":
            return n[1]
        case "a":
            return f"{view(n[1], n[2])}[{', '.join(expr(i) for i in n[3])}]"
        case "b":
            if n[1] in ("max", "min"):
                return f"td.{n[1]}imum({expr(n[2])}, {expr(n[3])})"
            return f"({expr(n[2])} {n[1]} {expr(n[3])})"
        case "u":
            return {"neg": "(-{})", "invert": "(~{})", "abs": "td.abs({})"}[n[1]].format(expr(n[2]))
        case "f":
            return f"td.{n[1]}({expr(n[2])})"
        case "cmp":
            return f"({expr(n[2])} {n[1]} {expr(n[3])})"
        case "w":
            return f"td.where({expr(n[1])}, {expr(n[2])}, {expr(n[3])})"
        case "cast":
            return f"td.cast({expr(n[2])}, {dtype_code(n[1])})"
        case "r" if n[1].startswith("fold"):
            return fold(n)
        case "r":
            dtype = f", dtype={dtype_code(n[4])}" if n[4] else ""
            name = f", name={n[5]!r}" if len(n) > 5 else ""
            return f"td.{n[1]}({expr(n[2])}, over={over(n[3])}{dtype}{name})"
        case "h":
            return helper(n)
    raise ValueError(f"unknown expression node {n!r}")


def helper(n) -> str:
    """["h", helper, x, arg]: see `gen`."""
    if n[1] == "satcast":
        return f"td.saturating_cast({expr(n[2])}, {dtype_code(n[3])})"
    if n[1] == "pow":
        return f"({expr(n[2])} ** {n[3]})"
    return f"td.{n[1]}({expr(n[2])})"


def fold(n) -> str:
    """["r", "foldmax" or "foldmin", body, over, body's dtype]: the first index where the
    body is largest (smallest), with the extreme value, in one td.reduce."""
    body, d = expr(n[2]), n[4]
    k = n[3][1] if n[3][0] == "infer" else n[3][0][0]
    big = n[1] == "foldmax"
    if d == "bool":
        start = "False" if big else "True"
    elif d.startswith(("float", "bfloat")):
        start = "-np.inf" if big else "np.inf"
    else:
        start = f"int(np.iinfo(np.{d}).{'min' if big else 'max'})"
    pick, cmp = ("td.maximum", ">") if big else ("td.minimum", "<")
    return (f"td.reduce(lambda acc: ({pick}(acc[0], {body}), td.where({body} {cmp} acc[0], {k}, "
            f"acc[1])), init=({start}, 0), over={over(n[3])}, dtype=({dtype_code(d)}, "
            f"td.int64))[1]")


def view(name, v) -> str:
    if v is None:
        return name
    if v in ("clamp", "mirror", "mirror_interior", "wrap", "assume_in_range"):
        return f"td.{v}({name})"
    return f"td.pad({name}, {v[1]!r})"


def over(o) -> str:
    if o[0] == "infer":
        return o[1]
    parts = [f"{d}: {hi}" if lo is None else f"{d}: ({lo}, {hi})" for d, lo, hi in o]
    return "{" + ", ".join(parts) + "}"


def reduction_dims(spec) -> list[str]:
    found = set()

    def walk(n):
        if isinstance(n, dict):
            walk(list(n.values()))
        elif isinstance(n, list):
            if n and n[0] == "r":
                found.update([n[3][1]] if n[3][0] == "infer" else [k for k, _, _ in n[3]])
            for m in n:
                walk(m)
    walk(spec["stages"])
    return sorted(found, key=lambda k: int(k[1:]))


def shape(spec, dims) -> str:
    return "{" + ", ".join(f"{d}: {spec['dims'][d]}" for d in dims) + "}"


def algorithm(spec) -> list[str]:
    """Lines defining sizes, dims, inputs, stages and `outputs`."""
    lines = [f"{n} = td.size({n!r})" for n in spec["sizes"]]
    names = list(spec["dims"]) + reduction_dims(spec)
    lines.append(f"{', '.join(names)}, = td.dims({' '.join(names)!r})")
    for t in spec["inputs"]:
        lines.append(f"{t['name']} = td.input({t['name']!r}, {shape(spec, t['dims'])}, "
                     f"{dtype_code(t['dtype'])})")
    for st in spec["stages"]:
        if st["kind"] == "compute":
            lines.append(f"{st['name']} = td.compute({st['name']!r}, {shape(spec, st['dims'])}, "
                         f"{expr(st['expr'])})")
        else:
            target = f"{st['stage']}[{', '.join(expr(i) for i in st['target'])}]"
            lines.append(f"td.update({target}, {expr(st['value'])}, over={over(st['over'])})")
    lines.append(f"outputs = [{', '.join(spec['outputs'])}]")
    return lines


def call(op) -> str:
    method, args, kwargs = op
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"s = s.{method}({', '.join(parts)})"


def tensors_read(node) -> set[str]:
    found = set()

    def walk(n):
        if isinstance(n, dict):
            walk(list(n.values()))
        elif isinstance(n, list):
            if n and n[0] == "a":
                found.add(n[1])
            for m in n:
                walk(m)
    walk(node)
    return found


def reachable(spec) -> set[str]:
    """Names of the tensors the outputs depend on."""
    seen, todo = set(), list(spec["outputs"])
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for st in spec["stages"]:
            if st.get("name") == name or st.get("stage") == name:
                todo += tensors_read(st)
    return seen


def used_sizes(spec) -> dict:
    """The sizes the reachable part of the pipeline uses, with their values."""
    used = reachable(spec)
    names: set[str] = set()

    def walk(n):
        if isinstance(n, list) and n and n[0] in ("i", "d"):
            names.update(text_names(n[1]))
        elif isinstance(n, list) and n and n[0] == "r" and n[3][0] != "infer":
            for _, lo, hi in n[3]:
                names.update(text_names(f"{lo} {hi}"))
        if isinstance(n, list):
            for m in n:
                walk(m)
    for st in spec["stages"]:
        if (st.get("stage") or st["name"]) in used:
            names.update(st.get("dims", []))
            walk([st.get("expr"), st.get("target"), st.get("value")])
            for _, lo, hi in st.get("over", []):
                names.update(text_names(f"{lo} {hi}"))
    for t in spec["inputs"]:
        if t["name"] in used:
            names.update(t["dims"])
    sizes = {e for d, e in spec["dims"].items() if d in names and isinstance(e, str)}
    sizes.update(n for n in names if n in spec["sizes"])
    return {n: spec["sizes"][n] for n in sorted(sizes)}


def text_names(text: str) -> list[str]:
    return re.findall(r"[A-Za-z_][A-Za-z_0-9]*", text)


def stage_shape(spec, name: str) -> tuple[int, ...]:
    """The shape of compute stage `name` with the spec's sizes."""
    (st,) = [st for st in spec["stages"] if st["kind"] == "compute" and st["name"] == name]
    return tuple(spec["sizes"][e] if isinstance(e, str) else e
                 for e in (spec["dims"][d] for d in st["dims"]))


def input_shapes(spec) -> dict:
    def value(e):
        return spec["sizes"][e] if isinstance(e, str) else e
    used = reachable(spec)
    return {t["name"]: (tuple(value(spec["dims"][d]) for d in t["dims"]), t["dtype"])
            for t in spec["inputs"] if t["name"] in used}


def program(spec, schedule: bool = False) -> str:
    """Module source defining `outputs`, `s` and `arrays` for a spec."""
    # the expressions as the generator built them: `a == True` compares a tensor
    lines = ["# ruff: noqa: E712, UP034", "import numpy as np", "", "import tdsl as td", "",
             f"INPUTS = {input_shapes(spec)!r}",
             ARRAYS, *algorithm(spec), "s = td.schedule(outputs)"]
    if schedule:
        lines += [call(op) for op in spec["schedule"]]
    edges = ", edges=True" if spec.get("edge_values") else ""  # older specs have none
    lines.append(f"arrays = make_arrays({spec['array_seed']}, {spec['special_values']}{edges})")
    lines.append(f"arrays.update({used_sizes(spec)!r})  # sizes no input shape may bind")
    return "\n".join(lines) + "\n"


MAIN = '''

def main(target=TARGET):
    """Build on `target`, call twice, compare with td.evaluate; print what differs."""
    with np.errstate(all="ignore"):
        f = td.build(s, target=target)
        got = f(**arrays)
        got = got if isinstance(got, tuple) else (got,)
        wants = td.evaluate(outputs, **arrays)  # all of them: an output may not use a size
        wants = wants if isinstance(wants, tuple) else (wants,)
        for out, g, want in zip(outputs, got, wants):
            if want.dtype.kind == "f" or want.dtype.name == "bfloat16":
                want = want.astype(np.float64)
                scale = max(SCALE, float(np.max(np.abs(want[np.isfinite(want)]), initial=0)))
                tol = BASE * TOL * scale
                same = np.isclose(got_f := g.astype(np.float64), want, rtol=0, atol=tol,
                                  equal_nan=True) | (got_f == want)
            else:
                same = g == want
            if not np.all(same):
                print(f"{out.name}: WRONG at {np.argwhere(~same)[:5].tolist()}")
                print("expected:", want[~same][:10], "\\nactual:  ", g[~same][:10])
                return 1
    print("ok")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else TARGET))
'''


def reproducer(spec, finding: dict) -> str:
    """A standalone Python file reproducing a finding (see the module docstring)."""
    head = [f"{k}: {v}" for k, v in finding.items() if k not in ("spec", "detail")]
    detail = str(finding.get("detail", "")).replace('"""', "'''").replace("\\", "\\\\")
    doc = ("tdsl fuzz finding.\n\n" + "\n".join(head) + "\n\n" + detail.strip()[:3000]).strip()
    return ('"""' + doc + '\n"""\n\n' + program(spec, schedule=True)
            + f"\nTARGET = {finding.get('target', 'c')!r}\nTOL = {spec['tol']!r}\n"
            + f"BASE = {float_base(spec)!r}  # that of the least precise float type\n"
            + f"SCALE = {spec.get('scale', 1.0)!r}  # largest magnitude of any stage\n"
            + f"SPEC = {json.dumps(spec)!r}\n" + MAIN)
