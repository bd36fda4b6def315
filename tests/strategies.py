"""Hypothesis strategies: random small pipelines and random valid schedules."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

import tdsl as td
from tdsl.schedule.state import LFuse

DTYPES = [td.float32, td.float64, td.int8, td.int32, td.uint16]
EXTENTS = [1, 2, 3, 5, 7, 8, 13, 16]
# image extents also include sizes that give each of two threads several iterations of a
# parallel loop, split or not, so that iterations sharing storage can race
IMAGE_EXTENTS = EXTENTS + [24, 37]


@dataclass
class Case:
    outputs: tuple
    stages: list  # every stage, producers first
    arrays: dict  # input name -> numpy array
    description: str


def _array(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    npd = np.dtype(dtype.name)
    if dtype.is_float:
        return rng.uniform(-4, 4, size=shape).astype(npd)
    info = np.iinfo(npd)
    lo, hi = max(info.min, -100), min(info.max, 100)
    return rng.integers(lo, hi + 1, size=shape).astype(npd)


def _combine(draw, a, b, dtype):
    op = draw(st.sampled_from(["add", "sub", "mul", "max", "min"] + (
        ["floordiv", "mod"] if dtype.is_int else ["div"])))
    match op:
        case "add":
            return a + b
        case "sub":
            return a - b
        case "mul":
            return a * b
        case "max":
            return td.maximum(a, b)
        case "min":
            return td.minimum(a, b)
        case "floordiv":
            return a // b
        case "mod":
            return a % b
        case "div":
            return a / (abs(b) + 1)
    raise AssertionError(op)


@st.composite
def pipelines(draw) -> Case:
    dtype = draw(st.sampled_from(DTYPES))
    kind = draw(st.sampled_from(["elementwise", "reduce", "stencil", "chain3", "stencils",
                                 "matmul", "inline", "solve", "gather", "scatter"]))
    symbolic = draw(st.booleans())
    h, w = draw(st.sampled_from(IMAGE_EXTENTS)), draw(st.sampled_from(IMAGE_EXTENTS))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    y, x, k = td.dims("y x k")
    H = td.size("H") if symbolic else h
    W = td.size("W") if symbolic else w
    arrays = {}

    def inp(name, shape, npshape, dt=dtype):
        arrays[name] = _array(rng, npshape, dt)
        return td.input(name, shape, dt)

    if kind == "elementwise":
        a = inp("a", {y: H, x: W}, (h, w))
        b = inp("b", {y: H, x: W}, (h, w))
        p = td.compute("p", {y: H, x: W}, _combine(draw, a[y, x], b[y, x], dtype))
        out = td.compute("out", {y: H, x: W}, _combine(draw, p[y, x], a[y, x], dtype))
        stages = [p, out]
    elif kind == "reduce":
        a = inp("a", {y: H, x: W}, (h, w))
        op = draw(st.sampled_from([td.sum, td.max, td.min]))
        r = td.compute("r", {y: H}, op(a[y, k], over={k: W}))
        out = td.compute("out", {y: H, x: W}, _combine(draw, a[y, x], r[y], dtype))
        stages = [r, out]
    elif kind == "stencil":
        a = inp("a", {y: H, x: W}, (h, w))
        c = td.clamp(a)
        bx = td.compute("bx", {y: H, x: W}, c[y, x - 1] + c[y, x] + c[y, x + 1])
        cb = td.clamp(bx) if draw(st.booleans()) else td.pad(bx, 1)
        out = td.compute("out", {y: H, x: W}, cb[y - 1, x] + cb[y, x] * 2 + cb[y + 1, x])
        stages = [bx, out]
    elif kind == "chain3":
        a = inp("a", {y: H, x: W}, (h, w))
        f = td.compute("f", {y: H, x: W}, a[y, x] * 2 + 1)
        g = td.compute("g", {y: H, x: W}, _combine(draw, f[y, x], td.clamp(f)[y, x + 1], dtype))
        out = td.compute("out", {y: H, x: W}, td.sum(g[y, k] + a[y, x], over={k: W}))
        stages = [f, g, out]
    elif kind == "stencils":  # three clamped stencils in a row, each read with a halo
        a = inp("a", {y: H, x: W}, (h, w))
        c = td.clamp
        s0 = td.compute("s0", {y: H, x: W}, c(a)[y + 1, x - 1] + c(a)[y, x + 2])
        s1 = td.compute("s1", {y: H, x: W}, _combine(draw, c(s0)[y - 1, x + 1], s0[y, x], dtype))
        out = td.compute("out", {y: H, x: W}, c(s1)[y + 2, x] + c(s1)[y, x - 1])
        stages = [s0, s1, out]
    elif kind == "inline":  # reductions inside expressions: nested, triangular, inlined
        a = inp("a", {y: H, x: W}, (h, w))
        j = td.dim("j")
        op = draw(st.sampled_from([td.sum, td.max, td.min]))
        p = td.compute("p", {y: H, x: W}, _combine(draw, a[y, x], op(a[y, k], over={k: W}), dtype))
        box = td.compute("box", {y: H, x: W}, td.sum(td.clamp(p)[y + k - 1, x], over={k: 3}))
        inner = op(a[y, j], over={j: (0, k + 1)})
        out = td.compute("out", {y: H, x: W},
                         _combine(draw, box[y, x], td.sum(p[y, k] - inner, over={k: (0, x + 1)}),
                                  dtype))
        stages = [p, box, out]
    elif kind == "solve":  # an update whose value reduces over what it has already written
        a = inp("a", {y: H, x: W}, (h, w))
        out = td.compute("out", {y: H, x: W}, a[y, x])
        scale = 1 if dtype.is_int else 0.25
        td.update(out[y, x], _combine(draw, out[y, x], td.sum(out[y, k] * scale, over={k: (0, x)}),
                                      dtype), over={y: H, x: W})
        stages = [out]
    elif kind == "gather":  # a data-dependent index into a table, and edges remapped
        a = inp("a", {y: H, x: W}, (h, w))
        n = td.dim("n")
        lut = inp("lut", {n: 13}, (13,))
        ix = inp("ix", {y: H, x: W}, (h, w), td.int32)
        view = draw(st.sampled_from([td.mirror, td.mirror_interior, td.wrap, td.clamp]))
        dy, dx = draw(st.integers(-3, 3)), draw(st.integers(-3, 3))
        g = td.compute("g", {y: H, x: W}, _combine(draw, lut[ix[y, x] % 13],
                                                    view(a)[y + dy, x + dx], dtype))
        out = td.compute("out", {y: H, x: W}, _combine(draw, g[y, x], td.clamp(g)[y, x - 1],
                                                      dtype))
        stages = [g, out]
    elif kind == "scatter":  # a histogram-like update: elements hit by several iterations
        a = inp("a", {y: H, x: W}, (h, w))
        ix = inp("ix", {y: H, x: W}, (h, w), td.int32)
        out = td.compute("out", {x: W}, td.cast(x * 3 - 5, dtype))
        at = out[ix[y, x] % W]
        # exact in any order, so atomic and rfactored runs equal td.evaluate bit for bit
        td.update(at, at + a[y, x] if dtype.is_int else td.maximum(at, a[y, x]),
                  over={y: H, x: W})
        stages = [out]
    else:
        K = draw(st.sampled_from(EXTENTS))
        a = inp("a", {y: H, k: K}, (h, K))
        b = inp("b", {k: K, x: W}, (K, w))
        out = td.compute("out", {y: H, x: W}, td.sum(a[y, k] * b[k, x], over=k))
        stages = [out]
    return Case((stages[-1],), stages, arrays,
                f"{kind} {dtype!r} {'symbolic' if symbolic else 'constant'} {h}x{w}")


def _loop_ops(draw, s, stage):
    for _ in range(draw(st.integers(0, 4))):
        loops = s.loops(stage)
        op = draw(st.sampled_from(["split", "tile", "reorder", "fuse", "vectorize", "unroll",
                                   "parallel"]))
        try:
            if op == "split":
                s = s.split(stage, draw(st.sampled_from(loops)), draw(st.sampled_from([1, 2, 3, 4, 8])))
            elif op == "tile" and len(loops) >= 2:
                n = draw(st.integers(0, len(loops) - 2))
                f1, f2 = draw(st.sampled_from([2, 3, 4])), draw(st.sampled_from([2, 4, 5]))
                s = s.tile(stage, **{loops[n]: f1, loops[n + 1]: f2})
            elif op == "reorder" and len(loops) >= 2:
                s = s.reorder(stage, *draw(st.permutations(loops)))
            elif op == "fuse" and len(loops) >= 2:
                n = draw(st.integers(0, len(loops) - 2))
                s = s.fuse(stage, loops[n], loops[n + 1])
            elif op == "unroll":
                s = s.unroll(stage, draw(st.sampled_from(loops)))
            elif op in ("vectorize", "parallel"):
                s = getattr(s, op)(stage, draw(st.sampled_from(loops)),
                                   reassociate=draw(st.booleans()))
        except td.ScheduleError:
            pass  # an invalid pick; the primitive's own checks are tested elsewhere
    return s


def _update_ops(draw, s, u):
    """Maybe make update `u` atomic, or rfactor it (then maybe run its partial results in
    parallel), then loop primitives on it; kept only when legal (an update's dependences
    are proven when it is built, not when a primitive is applied)."""
    how = draw(st.sampled_from(["loops", "atomic", "rfactor", "none"]))
    try:
        if how == "atomic":
            t = _loop_ops(draw, s.atomic(u), u)
        elif how == "rfactor":
            loop = draw(st.sampled_from(s.loops(u)))
            t = s.rfactor(u, loop, draw(st.sampled_from([2, 3, 4])), name="part")
            if draw(st.booleans()):
                t = t.parallel("part.u0", f"{loop}_i")
            t = _loop_ops(draw, t, "part.u0")
        elif how == "loops":
            t = _loop_ops(draw, s, u)
        else:
            return s
        t.check()
        return t
    except td.ScheduleError:
        return s


def _fuse_ops(draw, s, stage):
    """Maybe split or tile a loop of `stage` (factors that divide or not, 16 beyond most
    extents), maybe reorder, then fuse two adjacent loops."""
    loops = s.loops(stage)
    pre = draw(st.sampled_from(["none", "split", "tile"]))
    try:
        if pre == "split":
            s = s.split(stage, draw(st.sampled_from(loops)), draw(st.sampled_from([2, 3, 16])))
        elif pre == "tile" and len(loops) >= 2:
            n = draw(st.integers(0, len(loops) - 2))
            f1, f2 = draw(st.sampled_from([1, 2, 3])), draw(st.sampled_from([2, 5, 16]))
            s = s.tile(stage, **{loops[n]: f1, loops[n + 1]: f2})
    except td.ScheduleError:
        pass
    loops = s.loops(stage)
    if len(loops) < 2:
        return s
    try:
        if draw(st.booleans()):
            s = s.reorder(stage, *draw(st.permutations(loops)))
            loops = s.loops(stage)
        n = draw(st.integers(0, len(loops) - 2))
        s = s.fuse(stage, loops[n], loops[n + 1])
    except td.ScheduleError:
        pass  # e.g. an inner loop of symbolic extent
    return s


def _at_loop(draw, s, consumer) -> int:
    """A loop of `consumer` to compute a producer at: often a fused one when there is one."""
    loops = s.loops(consumer)
    resolved = s.state.resolve(consumer)
    fused = [n for n, lp in enumerate(s.state.loops[resolved]) if isinstance(lp.expr, LFuse)]
    if fused and draw(st.booleans()):
        return draw(st.sampled_from(fused))
    return draw(st.integers(0, len(loops) - 1))


def _restage(draw, s, case: Case):
    """Maybe add stages: cache_write, cache_read or rfactor of random stages; each new
    stage is placed at a random loop of the stage that reads it. Returns the schedule
    and the new stages' names with their consumers."""
    added = []
    for n in range(draw(st.integers(0, 2))):
        op = draw(st.sampled_from(["cache_write", "cache_read", "rfactor"]))
        stage = draw(st.sampled_from(case.stages))
        name = f"{op}{n}"
        try:
            if op == "cache_write":
                s = s.cache_write(stage, name)
                added.append((name, stage))
            elif op == "cache_read":
                readers = [c for c in case.stages if any(
                    t.name == stage.name for t in _reads(c))] or [stage]
                reader = draw(st.sampled_from(readers))
                source = stage if reader is not stage else _reads(stage)[0]
                s = s.cache_read(source, [reader], name)
                added.append((name, reader))
            elif stage.reduction is not None:
                k = draw(st.sampled_from(stage.reduction.axes)).dim.name
                s = s.rfactor(stage, k, draw(st.sampled_from([2, 3, 4, 8])), name=name)
                added.append((name, stage))
        except td.ScheduleError:
            pass  # e.g. the stage's loops were scheduled, or the name's source is gone
    return s, added


@st.composite
def schedules(draw, case: Case, fused: bool = False):
    """A random schedule of `case`; with `fused`, every stage fuses loops (after a split,
    tile or reorder) before its other loop primitives, on producers and consumers alike."""
    s = td.schedule(case.outputs)
    fused = fused or draw(st.integers(0, 3)) == 0
    s, added = _restage(draw, s, case)
    for name, consumer in added:
        if draw(st.booleans()):
            loops = s.loops(consumer)
            try:
                s = s.compute_at(name, consumer, loops[draw(st.integers(0, len(loops) - 1))])
            except td.ScheduleError:
                pass
        if draw(st.booleans()):
            dims = [d.name for d in s.state.resolve(name).dims]
            try:
                s = s.layout(name, *draw(st.permutations(dims)))
            except td.ScheduleError:
                pass
        s = _loop_ops(draw, s, name)
    for stage in case.stages:
        if fused:
            s = _fuse_ops(draw, s, stage)
        s = _loop_ops(draw, s, stage)
        for u in stage.updates:
            s = _update_ops(draw, s, u)
    for stage in case.stages[:-1]:
        where = draw(st.sampled_from(["root", "inline", "at", "at_store"]
                                     + (["at", "at_store"] if fused else [])))
        consumers = [c for c in case.stages if stage in _reads(c)]
        consumer = consumers[0]
        try:
            if where == "inline":
                s = s.compute_inline(stage)
            elif where.startswith("at"):
                loops = s.loops(consumer)
                n = _at_loop(draw, s, consumer)
                s = s.compute_at(stage, consumer, loops[n])
                if where == "at_store":
                    s = s.store_at(stage, consumer, loops[draw(st.integers(0, n))])
        except td.ScheduleError:
            pass
    if draw(st.integers(0, 2)) == 0:  # the output's vector stores past the caches
        s = s.store_nontemporal(case.stages[-1])
    return s


def _reads(stage):
    """What a stage's definition and updates read."""
    from tdsl.compute.pipeline import stage_reads

    return stage_reads(stage, stage.updates)
