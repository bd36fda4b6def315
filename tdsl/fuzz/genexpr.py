"""Random stages for `gen.Gen`: pointwise expressions, stencils through boundary
views, data-dependent indices, (nested, triangular) reductions and updates.

Every builder returns `(node, dtype, exact)`; see `gen` for the node format and
what "exact" means.
"""

from __future__ import annotations

import numpy as np

from .gen import FLOATS, INTS, NARROW, kind, promote

CMP = ("<", "<=", ">", ">=", "==", "!=")
RANGES = {"int8": (-128, 127), "int16": (-32768, 32767), "uint8": (0, 255),
          "uint16": (0, 65535), "int32": (-1e6, 1e6), "int64": (-1e6, 1e6),
          "uint32": (0, 1e6), "uint64": (0, 1e6)}


class Ctx:
    """Where an expression is generated: the stage's dims, reduction dims standing
    in for data dims, and how much nesting is left."""

    def __init__(self, dims, subst=None, red_ok=True):
        self.dims = list(dims)
        self.subst = dict(subst or {})
        self.red_ok = red_ok

    def base(self, d):
        return self.subst.get(d) or (d if d in self.dims else None)

    def values(self):
        return self.dims + list(self.subst.values())


def scalar(g, dtype):
    """A Python scalar that fits `dtype` (it takes the other operand's dtype)."""
    k = kind(dtype)
    if k == "b":
        return ["c", bool(g.chance(0.5)), None]
    if k == "f":
        return ["c", float(g.pick((0.5, -1.5, 2.0, 3.0, -0.25))), None]
    if g.corner(0.08):  # at the dtype's limits (a Python scalar takes its dtype)
        info = np.iinfo(dtype)
        return ["c", int(g.corner_pick((info.min, info.max, info.max - 1))), None]
    lo = 0 if k == "u" else -3
    return ["c", int(g.rng.integers(lo, 4)), None]


def leaf(g, ctx):
    r = g.rng.random()
    if r < 0.12 and ctx.values():
        return ["d", g.pick(ctx.values())], "int32", True
    if r < 0.22:
        dtype = g.pick(("float32", "int32", "int8", "uint16", "bool", "float64"))
        if g.corner(0.2):
            dtype = g.corner_pick(("uint64", "int64"))
        value = scalar(g, dtype)[1]
        return ["c", value, dtype], dtype, True
    return access(g, ctx)


def pick_tensor(g, need_dim=None, ints=False):
    names = [n for n, t in g.tensors.items()
             if (need_dim is None or need_dim in t["dims"])
             and (not ints or kind(t["dtype"]) in "iu")]
    if not names:
        return None
    stages = [n for n in names if g.tensors[n]["role"] == "stage"]
    if stages and g.chance(0.5):
        return stages[-1]
    return g.pick(names)


def view_for(g, name):
    r = g.rng.random()
    if r < 0.45:
        return None
    if r < 0.62:
        return "clamp"
    if r < 0.75:
        return g.pick(("mirror", "mirror_interior", "wrap"))
    k = kind(g.tensors[name]["dtype"])
    value = {"b": True, "u": 3, "i": -1, "f": -0.5}[k] if g.chance(0.5) else (
        False if k == "b" else 0)
    return ["pad", value]


def index_for(g, ctx, d, view):
    base = ctx.base(d)
    if view is None:
        return ["i", base if base is not None else "0"]
    if base is None:
        return ["i", str(int(g.rng.integers(-1, 4)))]
    off = int(g.rng.integers(-2, 3)) if g.chance(0.6) else 0
    text = f"2 * {base}" if g.chance(0.08) else base
    return ["i", text if off == 0 else f"{text} {'+' if off > 0 else '-'} {abs(off)}"]


def access(g, ctx, name=None, view="random"):
    if name is None and "lut" in g.tensors and g.chance(0.15):
        return lut_access(g, ctx)
    name = name or pick_tensor(g)
    t = g.tensors[name]
    v = view_for(g, name) if view == "random" else view
    idx = [index_for(g, ctx, d, v) for d in t["dims"]]
    if idx and g.chance(0.08) and pick_tensor(g, ints=True):
        pos = int(g.rng.integers(len(idx)))  # a data-dependent index among affine ones
        idx[pos] = access(g, ctx, pick_tensor(g, ints=True))[0]
        if v is None and g.chance(0.5):  # a plain one out of range is an ArgumentError
            v = "clamp"
        if v != "clamp" and v is not None and "pad-data-index" in g.exclude:
            v = "clamp"
        if v is None and g.corner(0.25):  # promised in range: Python's % keeps it so
            v = "assume_in_range"
            idx[pos] = ["b", "%", idx[pos], ["i", g.ext_code(t["dims"][pos])]]
        if v in (None, "assume_in_range") and len(idx) > 1 and g.corner(0.3):
            # an affine index beside it past the edge: refused when built (as td.evaluate
            # refuses it), or at least reported by the call; never a result
            other = g.corner_pick([k for k in range(len(idx)) if k != pos])
            idx[other] = ["i", f"{idx[other][1]} + {int(g.corners.integers(1, 3))}"]
    return ["a", name, v, idx], t["dtype"], t["exact"]


def lut_access(g, ctx):
    src = pick_tensor(g, ints=True)
    if src is None or src == "lut":
        return access(g, ctx, pick_tensor(g) if pick_tensor(g) != "lut" else None, "random")
    node, _, _ = access(g, ctx, src)
    if g.chance(0.3):
        node = ["b", "+", node, scalar(g, g.tensors[src]["dtype"])]
    t = g.tensors["lut"]
    v = view_for(g, "lut")
    if v is None and g.chance(0.5):  # a plain one out of range is an ArgumentError
        v = "clamp"
    if v not in (None, "clamp") and "pad-data-index" in g.exclude:
        v = "clamp"
    return ["a", "lut", v, [node]], t["dtype"], t["exact"]


def expr(g, ctx, depth):
    if depth <= 0 or g.chance(0.25):
        return leaf(g, ctx)
    r = g.rng.random()
    if r < 0.40:
        return binary(g, expr(g, ctx, depth - 1), expr(g, ctx, depth - 1))
    if r < 0.48:
        a = expr(g, ctx, depth - 1)
        return binary(g, a, (scalar(g, a[1]), a[1], True), scalar_rhs=True)
    if r < 0.55:
        return unary(g, expr(g, ctx, depth - 1))
    if r < 0.64:
        return math(g, expr(g, ctx, depth - 1))
    if r < 0.72:
        return where(g, ctx, depth)
    if r < 0.80:
        return cast(g, expr(g, ctx, depth - 1))
    if r < 0.84:
        return compare(g, ctx, depth)
    if ctx.red_ok and g.n_red < 4 and g.chance(0.6) and "nested-reduction" not in g.exclude:
        return reduction(g, ctx, depth)  # inside an expression: computed where it is used
    return binary(g, expr(g, ctx, depth - 1), leaf(g, ctx))


def fit(a, b):
    """Operands numpy can combine: a bfloat16 next to a type ml_dtypes does not promote
    it with (float16, ints wider than 8 bits) is cast to float32 first."""
    try:
        promote(a[1], b[1])
    except TypeError:
        if a[1] == "bfloat16":
            a = (["cast", "float32", a[0]], "float32", a[2])
        else:
            b = (["cast", "float32", b[0]], "float32", b[2])
    return a, b


def binary(g, a, b, scalar_rhs=False):
    a, b = fit(a, b)
    (na, da, ea), (nb, db, eb) = a, b
    r = da if scalar_rhs else promote(da, db)
    k = kind(r)
    if k == "b":
        ops = ["&", "|", "^", "max", "min", "+", "*"]
    elif k in "iu":
        ops = ["+", "-", "*", "//", "%", "&", "|", "^", "max", "min", "/"]
    else:
        ops = ["+", "-", "*", "/", "max", "min"] + (["//", "%"] if ea and eb else [])
    op = g.pick(ops)
    if op == "-" and "bool" in (da, db):
        op = "+"
    if op == "/":
        r = promote(r, "float64") if k != "f" else r
        if kind(db) == "f" and not eb:  # near a pole, rounding is amplified without bound
            nb = ["b", "+", ["u", "abs", nb], ["c", 1.0, None]]
    exact = ea and eb and (kind(r) != "f" or op in ("max", "min"))
    if kind(r) == "f" and not exact:
        g.tol *= 1.5
    return ["b", op, na, nb], r, exact


def unary(g, a):
    node, d, e = a
    k = kind(d)
    op = g.pick(["abs"] + (["neg"] if k != "b" else []) + (["invert"] if k != "f" else []))
    return ["u", op, node], d, e


def as_float(g, a):
    node, d, e = a
    if kind(d) == "f":
        return a
    t = g.pick(FLOATS)
    return ["cast", t, node], t, e


SIN_COS_RANGE = 100.0


def clip(node, bound: float):
    """`node` clipped to [-bound, bound]."""
    return ["b", "min", ["b", "max", node, ["c", -bound, None]], ["c", bound, None]]


def math(g, a):
    node, d, e = as_float(g, a)
    fn = g.pick(("exp", "log", "sqrt", "sin", "cos", "tanh", "floor", "ceil", "exp2", "log2",
                 "round", "erf"))
    if fn in ("floor", "ceil", "round") and not e:
        fn = "tanh"
    if fn in ("exp", "exp2"):
        node = clip(node, 20.0)
    elif fn in ("sin", "cos"):
        # a large argument's last bit decides the result: cos(exp(20)) is cos of
        # 485165184 (exp correctly rounded) or of 485165216 (numpy's float32 exp, one
        # ulp off), 0.002 or -0.55 (seed 3002 case 1993)
        node = clip(node, SIN_COS_RANGE)
    elif fn in ("log", "log2"):
        node = ["b", "+", ["u", "abs", node], ["c", 1.0, None]]
    elif fn == "sqrt" and not e:
        node = ["u", "abs", node]
    if fn not in ("floor", "ceil", "round"):
        g.tol *= 4
    return ["f", fn, node], d, e and fn in ("floor", "ceil", "round")


def exact_operand(g, ctx, depth):
    """An operand of a discontinuous operation: an exact expression (see gen.py). After
    four inexact tries, an exact leaf (an input or exact stage, a constant, a dim), or
    the first dim's value or the constant 1."""
    for _ in range(4):
        a = expr(g, ctx, depth - 1)
        if a[2]:
            return a
    if g.chance(0.5):
        a = leaf(g, Ctx(ctx.dims, ctx.subst, False))
        if a[2]:  # a leaf may read a stage computed through a math call
            return a
    return ["d", ctx.values()[0]] if ctx.values() else ["c", 1, "int32"], "int32", True


def compare(g, ctx, depth):
    a, b = fit(exact_operand(g, ctx, depth), exact_operand(g, ctx, depth))
    if g.corner(0.12) and "bool" not in (a[1], b[1]):
        # a uint64 against a signed integer: numpy compares them exactly, though their
        # common dtype is float64
        signed = g.corner_pick(("int8", "int32", "int64"))
        a = (["cast", "uint64", safe(a[0], a[1], "uint64")], "uint64", True)
        b = (["cast", signed, safe(b[0], b[1], signed)], signed, True)
        if g.corner(0.5):
            a, b = b, a
    if "bool" in (a[1], b[1]) and a[1] != b[1]:
        b = (scalar(g, a[1]), a[1], True)
        return ["cmp", g.pick(CMP), a[0], b[0]], "bool", True
    return ["cmp", g.pick(CMP), a[0], b[0]], "bool", True


def where(g, ctx, depth):
    cond = compare(g, ctx, depth)
    (na, da, ea), (nb, db, eb) = fit(expr(g, ctx, depth - 1), expr(g, ctx, depth - 1))
    return ["w", cond[0], na, nb], promote(da, db), ea and eb


def cast(g, a):
    node, d, e = a
    target = g.pick(("float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                     "uint16", "uint32", "uint64", "bool", *NARROW))
    if kind(d) == "f" and kind(target) != "f" and not e:
        target = g.pick(FLOATS)
    return ["cast", target, safe(node, d, target)], target, e


def safe(node, d, target):
    """`node` (of dtype d) made safe to convert to `target`: a float going to an
    integer is clamped into range and NaN becomes 0 (C leaves the rest undefined)."""
    if kind(d) == "f" and kind(target) in "iu":
        lo, hi = RANGES[target]
        clamped = ["b", "min", ["b", "max", node, ["c", float(lo), None]], ["c", float(hi), None]]
        return ["w", ["cmp", "==", node, node], clamped, ["c", 0.0, None]]
    return node


def reduce_over(g, ctx, d, k):
    """Bounds of reduction dim k standing in for data dim d (never out of d's range)."""
    ext = g.ext_code(d)
    same = [s for s in ctx.dims if g.ext_code(s) == ext]
    if g.corner(0.06):  # empty: a sum is 0, a max the lowest value, an argmax the range's end
        bound = ext if g.corner(0.5) or not same else g.corner_pick(same)
        return [[k, bound, bound]]
    r = g.rng.random()
    if r < 0.15:
        return ["infer", k]
    if r < 0.5 or not same and r < 0.8:
        return [[k, None, ext]]
    if r < 0.8 or not same:
        return [[k, "1", ext]]
    s = g.pick(same)
    return [[k, "0", f"{s} + 1"]] if g.chance(0.5) else [[k, s, ext]]


def reduction(g, ctx, depth):
    d = g.pick([d for d in g.data_dims() if pick_tensor(g, need_dim=d)] or g.data_dims())
    name = pick_tensor(g, need_dim=d)
    if name is None:
        return leaf(g, ctx)
    k = f"k{g.n_red}"
    g.n_red += 1
    over = reduce_over(g, ctx, d, k)
    inner = Ctx(ctx.dims, {**ctx.subst, d: k}, ctx.red_ok and g.chance(0.3))
    view = None if over[0] == "infer" else "random"
    body = access(g, inner, name, view)
    if g.chance(0.5):
        body = binary(g, body, expr(g, inner, depth - 1))
    if g.chance(0.12):  # value and index in one pass (td.reduce): the index, exact
        return ["r", g.pick(("foldmax", "foldmin")), body[0], over, body[1]], "int64", True
    if g.corner(0.08) and body[2] and over[0] != "infer" and len(over) == 1:
        return ["r", g.corner_pick(("argmax", "argmin")), body[0], over, None], "int64", True
    op = g.pick(("sum", "sum", "prod", "max", "min"))
    dtype = None
    if body[1] == "bool" and op in ("sum", "prod"):
        dtype = "int32"
    elif body[1] in INTS and op in ("sum", "prod") and g.chance(0.3):
        dtype = g.pick(("int32", "int64", "float64"))
    out = dtype or body[1]
    exact = kind(out) != "f" or (op in ("max", "min") and body[2])
    if not exact:
        g.tol *= 1 + g.ext_value(d)
    node = ["r", op, body[0], over, dtype]
    if not ctx.subst and g.corner(0.15):  # a stage of its own name, maybe under a helper
        node.append(f"n{k}")
        return helper(g, (node, out, exact))
    return node, out, exact


def helper(g, a):
    """`a` under one of the helpers that use their operand more than once (a named
    reduction there is still one stage), or `a` itself."""
    node, d, e = a
    k = kind(d)
    choices = ["same", "twice"] + (["isnan", "isinf"] if k == "f" else []) + (
        ["satcast"] if k in "fiu" else []) + (["pow"] if k in "iu" else [])
    h = g.corner_pick(choices)
    if h == "same":
        return a
    if h == "twice":  # read twice in one expression
        return binary(g, a, a)
    if h in ("isnan", "isinf"):
        return ["h", h, node], "bool", e
    if h == "satcast":
        target = g.corner_pick(("int8", "uint8", "int16", "uint32"))
        return ["h", "satcast", node, target], target, e
    return ["h", "pow", node, int(g.corner_pick((2, 3)))], d, e


# ---------------------------------------------------------------- stages


def make_stage(g, name):
    """Append a compute stage (pointwise, stencil or reduction), maybe with updates."""
    dims = g.some_dims()
    ctx = Ctx(dims, red_ok=g.chance(0.4))
    if g.chance(0.4) and g.n_red < 3:
        node, dtype, exact = reduction(g, ctx, 2)
        if g.chance(0.05):
            node, dtype, exact = binary(g, (node, dtype, exact), access(g, ctx))
    else:
        node, dtype, exact = expr(g, ctx, int(g.rng.integers(1, 4)))
    g.stages.append({"kind": "compute", "name": name, "dims": dims, "expr": node})
    g.add_tensor(name, dims, dtype, exact, "stage")
    for n in range(0 if "update" in g.exclude else 2 if g.chance(0.25) else
                   1 if g.chance(0.25) else 0):
        make_update(g, name, dims, n)


# (group size, x's type, b's type) of a grouped product: the five kinds
# lower.passes.group.grouped_products turns into one x86 instruction per 16 lanes (int16
# pairs; an unsigned and a signed byte in quads), then two near misses it must leave
# as loops (int8 x int8 quads: vpdpbusd needs an unsigned operand; int8 pairs)
GROUP_KINDS = ((2, "int8", "int16"), (2, "uint8", "int16"), (2, "int16", "int16"),
               (4, "uint8", "int8"), (4, "int8", "uint8"), (4, "int8", "int8"),
               (2, "int8", "int8"))
GROUP_DIMS = ("j", "q", "p", "e")  # its columns, k, the groups of k, a group's index


def make_grouped(g, n: int) -> int:
    """A small-integer matrix product summed in groups, as quantized kernels write it:
    out[i, j] = sum over (ko, t) of int32(gx[i, G ko + t]) * int32(gb_G[ko, j, t]), its
    right operand packed in groups of G values of k (by a stage s{n} from input gb, or
    given packed). `schedgen.group_tile` gives it the register tile that makes
    consecutive vectorized loops of it one x86 multiply-add per 16 lanes. Returns how
    many stage names it took (out is the last of them)."""
    size, xt, bt = g.pick(GROUP_KINDS[:5] if g.chance(0.85) else GROUP_KINDS[5:])
    i = g.pick(g.data_dims())
    groups = int(g.rng.integers(1, 6))
    g.dims.update(j=g.pick((16, 32, 48, 64, 64, 20)), q=groups * size, p=groups, e=size)
    if g.chance(0.15):  # a size: the last tile's lanes are known only at the call
        g.sizes["J"] = g.dims["j"]
        g.dims["j"] = "J"
    g.private.update(GROUP_DIMS)
    g.add_tensor("gx", [i, "q"], xt, True, "input")
    ko, t = f"k{g.n_red}", f"k{g.n_red + 1}"
    g.n_red += 2
    names = 1
    if g.chance(0.5):  # packed by a stage of the pipeline
        g.add_tensor("gb", ["q", "j"], bt, True, "input")
        packed = f"s{n}"
        g.stages.append({"kind": "compute", "name": packed, "dims": ["p", "j", "e"],
                         "expr": ["a", "gb", None, [["i", f"{size} * p + e"], ["i", "j"]]]})
        g.add_tensor(packed, ["p", "j", "e"], bt, True, "stage")
        names = 2
    else:
        packed = "gb"
        g.add_tensor("gb", ["p", "j", "e"], bt, True, "input")
    x = ["cast", "int32", ["a", "gx", None, [["i", i], ["i", f"{size} * {ko} + {t}"]]]]
    b = ["cast", "int32", ["a", packed, None, [["i", ko], ["i", "j"], ["i", t]]]]
    body = ["b", "*", x, b] if g.chance(0.8) else ["b", "*", b, x]
    name = f"s{n + names - 1}"
    over = [[ko, None, g.ext_code("p")], [t, None, g.ext_code("e")]]
    g.stages.append({"kind": "compute", "name": name, "dims": [i, "j"],
                     "expr": ["r", "sum", body, over, None],
                     "grouped": {"i": i, "j": "j", "ko": ko, "t": t}})
    g.add_tensor(name, [i, "j"], "int32", True, "stage")
    return names


def _scatter_source(g, name):
    """Integer tensors other than stage `name` (an index into it must not read it)."""
    return [n for n, t in g.tensors.items() if n != name and kind(t["dtype"]) in "iu"]


def make_update(g, name, dims, n):
    t = g.tensors[name]
    # a reduction in the value may read the stage being updated (a triangular solve)
    ctx = Ctx(dims, red_ok=g.chance(0.5) and "nested-reduction" not in g.exclude)
    over = [[d, None, g.ext_code(d)] for d in dims]
    idx = {d: d for d in dims}
    r = g.rng.random()
    d = g.pick(dims)
    pos = dims.index(d)
    if r < 0.35:  # a scan: y[d] = y[d - 1] op v
        over[pos] = [d, "1", g.ext_code(d)]
        prev = ["a", name, None, [["i", f"{e} - 1" if e == d else e] for e in dims]]
    elif r < 0.5:  # an anti-dependence: y[d] = y[d + 1] op v
        over[pos] = [d, "0", f"{g.ext_code(d)} - 1"]
        prev = ["a", name, None, [["i", f"{e} + 1" if e == d else e] for e in dims]]
    elif r < 0.62 and _scatter_source(g, name):  # a scatter: y[.., data, ..] op= v
        src = g.pick(_scatter_source(g, name))
        node = access(g, ctx, src)[0]
        if g.chance(0.6):  # in range; else an index out of range is an ArgumentError
            node = ["b", "%", node, ["i", g.ext_code(d)]]
        idx[d] = node
        others = [e for e in dims if e != d]
        if others and g.corner(0.2):  # another index past the edge: refused, never written
            e = g.corner_pick(others)
            idx[e] = ["i", f"{e} + {int(g.corners.integers(1, 3))}"]
        prev = ["a", name, None, [idx[e] if isinstance(idx[e], list) else ["i", idx[e]]
                                  for e in dims]]
    elif r < 0.7 and len(dims) >= 2:  # a triangle of the first two dims
        d0, d1 = dims[0], dims[1]
        over[1] = [d1, "0", f"td.minimum({d0} + 1, {g.ext_code(d1)})"]
        prev = ["a", name, None, [["i", e] for e in dims]]
    else:  # in place over everything
        prev = ["a", name, None, [["i", e] for e in dims]]
    value = expr(g, ctx, 2)
    node, dtype, exact = binary(g, (prev, t["dtype"], t["exact"]), value)
    if kind(dtype) == "f" and kind(t["dtype"]) != "f":  # tdsl converts the value to y's dtype
        node = ["cast", t["dtype"], safe(node, dtype, t["dtype"])] if exact else prev
    t["exact"] = t["exact"] and exact
    target = [idx[e] if isinstance(idx[e], list) else ["i", idx[e]] for e in dims]
    g.stages.append({"kind": "update", "stage": name, "name": f"{name}.u{n}",
                     "target": target, "value": node, "over": over})
