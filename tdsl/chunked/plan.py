"""Planning a chunked run: the chunk grid, each chunk's windows, the dask graph.

`plan(f, **arrays)` binds the arrays' shapes to the pipeline's sizes, takes the chunk
grid of the outputs from the inputs' chunks (by dim, as tdsl dims are objects shared
between tensors), asks bounds inference for the window of every tensor each chunk
needs (`lower.poly.footprint`), builds the kernel of one chunk once (`rewrite`,
`task`), and writes the graph: per chunk, a task gathering each input's window from
the input blocks it overlaps, and a task running the kernel on them. A reduction of the
output over a dim the inputs are chunked along gets a task per (chunk, part of the
reduced range), whose partial results dask combines in a tree.
"""

from __future__ import annotations

import hashlib
import itertools
import json as jsonlib
import math
import operator
import pickle
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..api import as_schedule, build
from ..compute import expr as cx
from ..compute.binding import _bind_sizes, _check_extents, _check_names, _check_shape, eval_extent
from ..compute.definitions import Stage
from ..compute.pipeline import Pipeline
from ..display import escape, table
from ..errors import ArgumentError, ChunkingError, ChunkingWarning
from ..lower.poly.budget import AnalysisLimitError
from ..lower.poly.footprint import Block, Windows, bounded_windows
from ..runtime import Kernel
from ..schedule import Schedule
from .deps import require
from .rewrite import Layout, extent_size, origin_size, split_sizes
from .task import Program, assemble, pick, run_chunk, run_partial

_COMBINE = {"sum", "prod", "max", "min"}


@dataclass(frozen=True)
class _Grid:
    """The chunked dims of the outputs and the split reduction dims: each with its
    chunks (lengths), and its global extent."""

    dims: tuple[cx.Dim, ...]
    chunks: tuple[tuple[int, ...], ...]
    extents: tuple[cx.Expr, ...]
    split: tuple[cx.Dim, ...]  # the last len(split) of `dims`

    def blocks(self) -> list[tuple[tuple[int, ...], tuple[tuple[int, int], ...]]]:
        """Every chunk: its index along each dim, and its (origin, extent) along each."""
        starts = [np.concatenate([[0], np.cumsum(c)[:-1]]).astype(int) for c in self.chunks]
        out = []
        for idx in itertools.product(*(range(len(c)) for c in self.chunks)):
            out.append((idx, tuple((int(starts[k][i]), int(self.chunks[k][i]))
                                   for k, i in enumerate(idx))))
        return out


class ChunkPlan:
    """How a kernel runs over chunked arrays: the chunk grid, the halos bounds inference
    found, and the dask graph (`arrays()`). Made by `td.chunk_plan`; `td.map_blocks`
    is `td.chunk_plan(...).arrays()`.

        p = td.chunk_plan(f, A=darr)       # darr: a dask array
        p.halos                            # {"A": {"y": (2, 2), "x": (2, 2)}}
        out = p.arrays()                   # a dask array, lazy
        out.compute()

    `halos[input][dim]` is (before, after): the most elements beyond a chunk's block
    along that dim that any chunk reads (at the array's edges a boundary view reads
    inside the array, so edge chunks read less). `grid` lists the chunks of each
    chunked dim, `kernel` is the kernel one chunk runs (its sizes are the windows'),
    `windows(k)` the windows chunk number `k` reads and computes."""

    def __init__(self, schedule: Schedule, target: str, arrays: Mapping[str, Any],
                 sizes: dict[str, int], grid: _Grid, windows: Windows, program: Program,
                 kernel: Kernel, split_op: str | None):
        self.schedule = schedule
        self.target = target
        self.pipeline = schedule.pipeline
        self._arrays = dict(arrays)
        self.sizes = sizes
        self._grid = grid
        self._windows = windows
        self.program = program
        self.kernel = kernel
        self._split_op = split_op
        self._blocks = grid.blocks()

    @property
    def grid(self) -> dict[str, tuple[int, ...]]:
        """The chunks (lengths) of each chunked dim, by name: the outputs' dims, then any
        reduction dim whose partial results are combined across chunks."""
        return {d.name: c for d, c in zip(self._grid.dims, self._grid.chunks)}

    @property
    def halos(self) -> dict[str, dict[str, tuple[int, int]]]:
        """Per input, per chunked dim it has: (before, after), the most elements beyond a
        chunk's block that a chunk away from the array's edges reads along that dim (at
        the edges, a boundary view reads inside the array instead; a wrap view there
        reads the far side, which `windows` shows)."""
        out: dict[str, dict[str, tuple[int, int]]] = {}
        for t in self.pipeline.inputs:
            dims: dict[str, tuple[int, int]] = {}
            for k, d in enumerate(t.dims):
                if d not in self._grid.dims:
                    continue
                g = self._grid.dims.index(d)
                n = sum(self._grid.chunks[g])
                pairs = [(blk[g], boxes[t.name][k])
                         for (_, blk), boxes in zip(self._blocks, self._windows.boxes)]
                inner = [(b, w) for b, w in pairs if 0 < b[0] and b[0] + b[1] < n] or pairs
                dims[d.name] = (max(o - lo for (o, _), (lo, _) in inner),
                                max(hi - (o + h - 1) for (o, h), (_, hi) in inner))
            out[t.name] = dims
        return out

    def windows(self, k: int) -> dict[str, tuple[tuple[int, int], ...]]:
        """Chunk number `k`'s window of every tensor: per dim, the indices [lo, hi)."""
        return {n: tuple((lo, hi + 1) for lo, hi in box)
                for n, box in self._windows.boxes[k].items()}

    @property
    def nchunks(self) -> int:
        """How many chunk tasks the graph has."""
        return len(self._blocks)

    def __repr__(self) -> str:
        grid = ", ".join(f"{n}: {len(c)} chunks" for n, c in self.grid.items()) or "one chunk"
        halos = "; ".join(f"{n} " + ", ".join(f"{d} -{a}/+{b}" for d, (a, b) in h.items())
                          for n, h in self.halos.items() if h)
        return f"<tdsl.ChunkPlan {self.nchunks} tasks ({grid}); halos: {halos or 'none'}>"

    def _repr_html_(self) -> str:
        """In Jupyter: the grid and the halos of every input."""
        rows = [(n, d, str(a), str(b)) for n, h in self.halos.items() for d, (a, b) in h.items()]
        grid = ", ".join(f"{n}: {len(c)} chunks of up to {max(c)}" for n, c in self.grid.items())
        return (f"<div><b>tdsl chunk plan</b>: {self.nchunks} chunk tasks ({escape(grid or 'one chunk')})"
                + table(rows, ("input", "dim", "halo before", "halo after")) + "</div>")

    # ------------------------------------------------------------ the graph

    def arrays(self):
        """The outputs as dask arrays (a tuple when there are several), computed lazily,
        chunk by chunk."""
        da = require("dask.array", "dask")
        from dask.highlevelgraph import HighLevelGraph

        # the graph's names: of this kernel on these arrays (dask's names of the inputs
        # say what they hold) in these chunks, so that two runs never share a key
        token = hashlib.sha256(repr((
            self.program.key, sorted((n, a.name) for n, a in self._arrays.items()),
            self._grid.chunks, sorted(self.sizes.items()))).encode()).hexdigest()[:16]
        prog_key = f"tdsl-kernel-{self.program.key[:16]}"
        layer: dict = {prog_key: self.program}
        deps = [a for a in self._arrays.values()]
        name = f"tdsl-{self.pipeline.outputs[0].name}-{token}"
        gathers = self._gather_tasks(layer, token)
        outs = self.pipeline.outputs
        n_grid = len(self._grid.dims) - len(self._grid.split)
        for c, ((idx, blk), boxes) in enumerate(zip(self._blocks, self._windows.boxes)):
            sizes = self._sizes(blk, boxes)
            cuts = tuple(self._cut(o, blk, boxes) for o in outs)
            args = [gathers[(t.name, c)] for t in self.pipeline.inputs]
            if self._grid.split:
                key = (name, _flat_index(idx[n_grid:], self._grid.chunks[n_grid:]),
                       *self._out_index(outs[0], idx))
                layer[key] = (run_partial, prog_key, sizes, cuts, *args)
            else:
                layer[(name, *self._out_index(outs[0], idx))] = (run_chunk, prog_key, sizes,
                                                                 cuts, *args)
        graph = HighLevelGraph.from_collections(name, layer, dependencies=deps)
        if self._grid.split:
            return self._combine(da, graph, name)
        if len(outs) == 1:
            return da.Array(graph, name, self._out_chunks(outs[0]), dtype=outs[0].dtype.np,
                            meta=np.empty((0,) * outs[0].ndim, outs[0].dtype.np))
        result = []
        base = da.Array(graph, name, self._out_chunks(outs[0]), dtype=outs[0].dtype.np,
                        meta=np.empty((0,) * outs[0].ndim, outs[0].dtype.np))
        for k, o in enumerate(outs):
            sub = f"{name}-{o.name}"
            lay = {(sub, *self._out_index(o, idx)): (pick, (name, *self._out_index(outs[0], idx)), k)
                   for idx, _ in self._blocks}
            g = HighLevelGraph.from_collections(sub, lay, dependencies=[base])
            result.append(da.Array(g, sub, self._out_chunks(o), dtype=o.dtype.np,
                                   meta=np.empty((0,) * o.ndim, o.dtype.np)))
        return tuple(result)

    def _combine(self, da, graph, name):
        """The partial results of a split reduction, combined by dask in a tree."""
        out = self.pipeline.outputs[0]
        n_grid = len(self._grid.dims) - len(self._grid.split)
        parts = math.prod(len(c) for c in self._grid.chunks[n_grid:])
        chunks = ((1,) * parts, *self._out_chunks(out))
        partial = da.Array(graph, name, chunks, dtype=out.dtype.np,
                           meta=np.empty((0,) * (out.ndim + 1), out.dtype.np))
        op = self._split_op
        if op == "sum":
            return partial.sum(axis=0, dtype=out.dtype.np)
        if op == "prod":
            return partial.prod(axis=0, dtype=out.dtype.np)
        return partial.max(axis=0) if op == "max" else partial.min(axis=0)

    def _out_index(self, o: Stage, idx: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(idx[self._grid.dims.index(d)] if d in self._grid.dims else 0 for d in o.dims)

    def _out_chunks(self, o: Stage) -> tuple[tuple[int, ...], ...]:
        return tuple(self._grid.chunks[self._grid.dims.index(d)] if d in self._grid.dims
                     else (eval_extent(e, self.sizes),) for d, e in zip(o.dims, o.shape))

    def _cut(self, o: Stage, blk, boxes) -> tuple[slice, ...]:
        """The chunk's block of output `o` inside the window the kernel computes."""
        box = boxes[o.name]
        out = []
        for k, d in enumerate(o.dims):
            lo, hi = box[k]
            if d in self._grid.dims:
                org, h = blk[self._grid.dims.index(d)]
                out.append(slice(org - lo, org - lo + h))
            else:
                out.append(slice(0 - lo, eval_extent(o.shape[k], self.sizes) - lo))
        return tuple(out)

    def _sizes(self, blk, boxes) -> dict[str, int]:
        """The values of the chunk kernel's sizes for one chunk."""
        want = {s.name for s in self.kernel.pipeline.sizes}
        out = {n: v for n, v in self.sizes.items() if n in want}
        layout = self.program.layout
        for n, t in enumerate(self.pipeline.tensors):
            for k, flag in enumerate(layout.windowed.get(t.name, ())):
                if flag:
                    lo, hi = boxes[t.name][k]
                    out[origin_size(n, k)] = lo + 1
                    out[extent_size(n, k)] = hi - lo + 1
        n_grid = len(self._grid.dims) - len(self._grid.split)
        for j in range(len(self._grid.split)):
            so, sn = split_sizes(j)
            o, h = blk[n_grid + j]
            out[so], out[sn] = o + 1, h
        return {n: v for n, v in out.items() if n in want}

    def _gather_tasks(self, layer: dict, token: str) -> dict[tuple[str, int], tuple]:
        """A task per (input, chunk) that assembles the input's window from the parts of
        the blocks it overlaps; each part that is not a whole block is cut by a task of
        its own, which runs where the block is, so only the part travels (as
        `map_overlap` moves only the strips of the neighbours)."""
        keys: dict[tuple[str, int], tuple] = {}
        for t in self.pipeline.inputs:
            arr = self._arrays[t.name]
            bounds = [np.concatenate([[0], np.cumsum(c)]).astype(int) for c in arr.chunks]
            gname = f"tdsl-window-{t.name}-{token}"
            pname = f"tdsl-part-{t.name}-{token}"
            for c, boxes in enumerate(self._windows.boxes):
                key = (gname, c)
                layer[key] = (assemble, _pieces(arr.name, bounds, boxes[t.name], layer,
                                                (pname, c)))
                keys[(t.name, c)] = key
        return keys


def _pieces(name: str, bounds: Sequence[np.ndarray], box: Sequence[tuple[int, int]],
            layer: dict, part: tuple):
    """Nested lists (one level per dim) of the keys of the parts of the blocks of array
    `name` (block boundaries `bounds` per dim) inside `box`: a block's own key where the
    part is the whole block, else a task of `layer` cutting it (keys `part` + a count)."""
    per_dim = []
    for b, (lo, hi) in zip(bounds, box):
        first = int(np.searchsorted(b, lo, side="right")) - 1
        last = int(np.searchsorted(b, hi, side="right")) - 1
        per_dim.append([(i, slice(max(lo, int(b[i])) - int(b[i]),
                                  min(hi + 1, int(b[i + 1])) - int(b[i])),
                         int(b[i + 1]) - int(b[i])) for i in range(first, last + 1)])
    count = iter(range(1 << 62))

    def nest(k: int, idx: tuple, sl: tuple, whole: bool):
        if k == len(per_dim):
            if whole:
                return (name, *idx)
            key = (*part, next(count))
            layer[key] = (operator.getitem, (name, *idx), sl)
            return key
        return [nest(k + 1, idx + (i,), sl + (s,), whole and s.stop - s.start == n)
                for i, s, n in per_dim[k]]

    return nest(0, (), (), True)


def _flat_index(idx: Sequence[int], chunks: Sequence[Sequence[int]]) -> int:
    flat = 0
    for i, c in zip(idx, chunks):
        flat = flat * len(c) + i
    return flat


# ---------------------------------------------------------------- planning


def _as_dask(name: str, a, da):
    if isinstance(a, da.Array):
        return a
    if isinstance(a, np.ndarray):
        return da.from_array(a, chunks=a.shape or ())
    raise ArgumentError(
        f"input {name!r} must be a dask array (or a numpy array, taken as one chunk), got "
        f"{type(a).__name__}")


def _bind(pipeline: Pipeline, arrays: dict[str, Any], da) -> tuple[dict, dict[str, int]]:
    """The inputs as dask arrays, checked (names, dtypes, ranks, shapes), and the sizes."""
    _check_names(pipeline, arrays, allow_outputs=False)
    missing = [t.name for t in pipeline.inputs if t.name not in arrays]
    if missing:
        raise ArgumentError(f"missing input(s) {', '.join(missing)}; pass every input by name "
                            f"({', '.join(f'{t.name}=...' for t in pipeline.inputs)})")
    given = {t.name: _as_dask(t.name, arrays[t.name], da) for t in pipeline.inputs}
    for t in pipeline.inputs:
        a = given[t.name]
        if a.dtype != t.dtype.np:
            raise ArgumentError(f"input {t.name!r} has dtype {a.dtype} but must be {t.dtype.name}; "
                                f"convert it explicitly, e.g. {t.name}.astype(np.{t.dtype.name})")
        if a.ndim != t.ndim:
            raise ArgumentError(f"input {t.name!r} has {a.ndim} dimension(s) but must have "
                                f"{t.ndim}: ({', '.join(d.name for d in t.dims)})")
        if any(math.isnan(n) for n in a.shape):
            raise ArgumentError(f"input {t.name!r} has unknown chunk sizes (shape {a.shape}); "
                                f"call {t.name}.compute_chunk_sizes() first")
    explicit = {k: v for k, v in arrays.items() if k not in given}
    args = [("input", t, given[t.name]) for t in pipeline.inputs]
    sizes = _bind_sizes(pipeline, explicit, args)
    for role, t, a in args:
        _check_shape(role, t, a, sizes)
    _check_extents(pipeline, sizes)
    return given, sizes


def _reduction_dims(pipeline: Pipeline) -> dict[cx.Dim, list[str]]:
    """Every dim some reduction reduces over, with the stages where it does."""
    out: dict[cx.Dim, list[str]] = {}
    for x in pipeline.schedulables:
        e = x.expr if isinstance(x, Stage) else x.value
        for n in cx.walk(e):
            if isinstance(n, cx.Reduce):
                for ax in n.axes:
                    out.setdefault(ax.dim, []).append(x.name)
    return out


def _grid(pipeline: Pipeline, arrays: Mapping, sizes: dict[str, int], chunks,
          reassociate: bool) -> tuple[_Grid, str | None]:
    outs = pipeline.outputs
    order: list[cx.Dim] = []
    ext: dict[cx.Dim, cx.Expr] = {}
    for o in outs:
        for d, e in zip(o.dims, o.shape):
            if d not in ext:
                order.append(d)
                ext[d] = e
    wanted = _wanted_chunks(chunks, order, pipeline)
    dims, grid_chunks, extents = [], [], []
    for d in order:
        n = eval_extent(ext[d], sizes)
        c = wanted.get(d.name) or _input_chunks(pipeline, arrays, d, n, sizes)
        c = _normalise(c, n, d.name)
        if len(c) > 1:
            other = [o.name for o in outs if d in o.dims and eval_extent(o.extent(d), sizes) != n]
            if other:
                raise ChunkingError(
                    f"outputs {', '.join(other)} have another length along dim {d.name} than "
                    f"{outs[0].name}, along whose chunks the others run; build a kernel per "
                    f"output, or give {d.name} one chunk (chunks={{{d.name!r}: -1}})", (d.name,))
            missing = [o.name for o in outs if d not in o.dims]
            if missing:
                raise ChunkingError(
                    f"outputs {', '.join(missing)} have no dim {d.name}, along which the "
                    f"chunks of the other outputs run; build a kernel per output, or give "
                    f"{d.name} one chunk (chunks={{{d.name!r}: -1}})", (d.name,))
            dims.append(d)
            grid_chunks.append(c)
            extents.append(ext[d])
    split, op = _split(pipeline, arrays, set(order), reassociate)
    for d, c, e in split:
        dims.append(d)
        grid_chunks.append(c)
        extents.append(e)
    return _Grid(tuple(dims), tuple(grid_chunks), tuple(extents),
                 tuple(d for d, _, _ in split)), op


def _wanted_chunks(chunks, order: Sequence[cx.Dim], pipeline: Pipeline) -> dict[str, object]:
    if chunks is None:
        return {}
    if not isinstance(chunks, Mapping):
        raise ArgumentError(f"chunks= must be a dict {{dim name: chunk length or tuple of "
                            f"lengths}}, e.g. chunks={{'y': 256}}; got {chunks!r}")
    names = {d.name for d in order}
    for k in chunks:
        if k not in names:
            raise ArgumentError(f"chunks= names dim {k!r}, which is not a dim of the outputs "
                                f"({', '.join(sorted(names))})")
    return dict(chunks)


def _input_chunks(pipeline: Pipeline, arrays: Mapping, d: cx.Dim, n: int,
                  sizes: dict[str, int]) -> tuple[int, ...]:
    """The chunks along `d` of the first input with dim `d` of the same length and more
    than one chunk along it (one chunk if none has)."""
    for t in pipeline.inputs:
        if d in t.dims:
            k = t.dims.index(d)
            c = tuple(int(x) for x in arrays[t.name].chunks[k])
            if sum(c) == n and len(c) > 1:
                return c
    return (n,)


def _normalise(c, n: int, name: str) -> tuple[int, ...]:
    if isinstance(c, bool):
        raise ArgumentError(f"chunks for {name}: {c!r} is not a chunk length")
    if isinstance(c, int | np.integer):
        c = int(c)
        if c == -1:
            return (n,)
        if c < 1:
            raise ArgumentError(f"chunks for {name}: a chunk length must be at least 1 (or -1 "
                                f"for one chunk), got {c}")
        return tuple([c] * (n // c) + ([n % c] if n % c else []))
    c = tuple(int(x) for x in c)
    if not c or any(x < 1 for x in c) or sum(c) != n:
        raise ArgumentError(f"chunks for {name}: {c!r} must be positive lengths adding up to "
                            f"{n}, the length of {name}")
    return c


def _split(pipeline: Pipeline, arrays: Mapping, grid: set, reassociate: bool
           ) -> tuple[list[tuple[cx.Dim, tuple[int, ...], cx.Expr]], str | None]:
    """The reduction dims the inputs are chunked along, whose partial results are combined
    across chunks: only those of the output's own td.sum/prod/max/min, for integers
    always, for floats with reassociate=True; anything else is an ArgumentError naming
    the dim."""
    reduced = _reduction_dims(pipeline)
    out: list[tuple[cx.Dim, tuple[int, ...], cx.Expr]] = []
    op = None
    for t in pipeline.inputs:
        for k, d in enumerate(t.dims):
            c = tuple(int(x) for x in arrays[t.name].chunks[k])
            if len(c) < 2 or d in grid or d not in reduced or any(d is x for x, _, _ in out):
                continue
            where = ", ".join(sorted(set(reduced[d])))
            o = pipeline.outputs[0]
            red = o.reduction
            own = (len(pipeline.outputs) == 1 and red is not None and red.op in _COMBINE
                   and any(ax.dim is d for ax in red.axes) and reduced[d] == [o.name])
            fix = (f"rechunk {t.name} to one chunk along {d.name} ({t.name}.rechunk({{{k}: -1}})), "
                   "so that each task reads its whole range")
            if not own:
                raise ChunkingError(
                    f"dim {d.name} is reduced over (in {where}) and input {t.name} is chunked "
                    f"along it ({len(c)} chunks); only the output's own td.sum, td.prod, td.max "
                    f"or td.min can be combined across chunks; {fix}", (d.name,))
            assert red is not None
            if red.dtype.is_float and not reassociate:
                raise ChunkingError(
                    f"{o.name} reduces over dim {d.name}, along which input {t.name} is chunked "
                    f"({len(c)} chunks): its partial results per chunk would be combined in "
                    f"another order, which rounds floats differently; pass reassociate=True "
                    f"to allow it, or {fix}", (d.name,))
            out.append((d, c, t.shape[k]))
            op = red.op
    return out, op


def _program_key(pipeline: Pipeline, json: str, target: str, layout: Layout) -> str:
    return hashlib.sha256(pickle.dumps((pipeline, json, target, layout))).hexdigest()


def _program(pipeline: Pipeline, json: str, target: str, layout: Layout,
             threads: int | None) -> tuple[Program, Kernel]:
    """The program of the chunk kernel, and the kernel, built here first (mistakes show
    now, not in a worker)."""
    key = _program_key(pipeline, json, target, layout)
    program = Program(key, pipeline, json, target, layout, threads)
    return program, program.kernel()


def chunk_plan(f, target: str | None = None, reassociate: bool = False,
               threads: int | None = None, chunks=None, **arrays) -> ChunkPlan:
    """Plan a kernel's run over dask arrays, chunk by chunk (see `td.map_blocks`), and
    show what bounds inference found: the halos of every input, the chunk grid.

        p = td.chunk_plan(f, A=darr)
        p.halos        # {"A": {"y": (2, 2), "x": (2, 2)}}
        p.arrays()     # the lazy dask array(s) td.map_blocks returns
    """
    da = require("dask.array", "dask")
    sched, target = _schedule_of(f, target)
    pipeline = sched.pipeline
    if not isinstance(reassociate, bool):
        raise ArgumentError(f"reassociate= must be True or False, got {reassociate!r}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise ArgumentError(f"threads= must be None or an int of at least 1, got {threads!r}")
    given, sizes = _bind(pipeline, arrays, da)
    grid, op = _grid(pipeline, given, sizes, chunks, reassociate)
    blocks = grid.blocks()
    block = Block(grid.dims, grid.extents)
    win = bounded_windows(pipeline, block, sizes, [b for _, b in blocks])
    layout = _layout(pipeline, win, sizes, grid)
    json = sched.to_json()
    program, kernel = _build(pipeline, json, target, layout, threads)
    return ChunkPlan(sched, target, given, sizes, grid, win, program, kernel, op)


def _build(pipeline: Pipeline, json: str, target: str, layout: Layout,
           threads: int | None) -> tuple[Program, Kernel]:
    """The chunk kernel with the schedule; where the regions of stages computed inside
    another's loops are too costly to infer over a chunk's symbolic windows, with each
    stage computed over its whole window instead (a chunk is a tile already), with a
    ChunkingWarning."""
    unfused = _unfused(json)
    failure = _TOO_COSTLY.get(_program_key(pipeline, json, target, layout))
    if failure is None or unfused == json:
        try:
            return _program(pipeline, json, target, layout, threads)
        except AnalysisLimitError as e:
            if unfused == json:
                raise
            failure = _TOO_COSTLY[_program_key(pipeline, json, target, layout)] = e
    built = _program(pipeline, unfused, target, layout, threads)
    warnings.warn(
        f"the kernel of one chunk of {', '.join(o.name for o in pipeline.outputs)} computes "
        f"every stage over its whole window, without the schedule's compute_at and store_at: "
        f"over a chunk's windows, whose origins and extents are sizes, the regions of the "
        f"stages were too costly to infer ({failure})", ChunkingWarning, stacklevel=3)
    return built


# the chunk kernels whose schedule proved too costly to lower (by program key), so that
# planning again does not spend the analysis' time limit again
_TOO_COSTLY: dict[str, AnalysisLimitError] = {}


def _unfused(json: str) -> str:
    """The schedule's JSON without its compute_at and store_at primitives."""
    data = jsonlib.loads(json)
    data["primitives"] = [p for p in data["primitives"]
                          if p.get("type") not in ("ComputeAt", "StoreAt")]
    return jsonlib.dumps(data, indent=1)


def _schedule_of(f, target: str | None) -> tuple[Schedule, str]:
    if isinstance(f, Kernel):
        if target is not None and target != f.target:
            raise ArgumentError(f"target={target!r}, but the kernel was built for {f.target!r}")
        return f.schedule, f.target
    sched = as_schedule(f)
    target = target or "c"
    if target not in ("c", "llvm"):
        build(sched, target=target)  # raises the ArgumentError naming the valid targets
    return sched, target


def _layout(pipeline: Pipeline, win: Windows, sizes: dict[str, int], grid: _Grid) -> Layout:
    """Which windows are not whole in some chunk."""
    windowed: dict[str, tuple[bool, ...]] = {}
    for t in pipeline.tensors:
        full = tuple((0, eval_extent(e, sizes) - 1) for e in t.shape)
        flags = [False] * t.ndim
        for boxes in win.boxes:
            for k, (b, f) in enumerate(zip(boxes[t.name], full)):
                if b != f:
                    flags[k] = True
        windowed[t.name] = tuple(flags)
    return Layout(windowed, tuple(d.name for d in grid.split))


def map_blocks(f, target: str | None = None, reassociate: bool = False,
               threads: int | None = None, chunks=None, **arrays):
    """Run a kernel over dask arrays chunk by chunk: a lazy dask array (a tuple of them
    for several outputs) whose every chunk is computed from exactly the region of each
    input it needs.

        blur = td.build(s)                       # or a schedule, or the output stage(s)
        a = dask.array.from_zarr("in.zarr")      # chunks (2048, 2048)
        out = td.map_blocks(blur, A=a)           # chunks of the output: those of A
        out.to_zarr("out.zarr")                  # or out.compute()

    The halos (how far beyond its block each chunk reads, per input, dim and side)
    come from bounds inference over the whole pipeline; `td.chunk_plan` shows them.
    Boundary views (`td.clamp`, `td.pad`, `td.mirror`, `td.mirror_interior`,
    `td.wrap`) keep their meaning at the array's edges, not the chunk's. One kernel,
    built once per process with the windows' extents as sizes, serves every chunk.

    `f`: a Kernel, a Schedule or output stage(s) (built for `target`, default "c").
    Inputs are passed by name: dask arrays, or numpy arrays (one chunk each); sizes
    that no shape binds as ints. The outputs are chunked along each dim as the first
    input with that dim is (`chunks={"y": 512}` chooses). A reduction of the output over
    a dim the inputs are chunked along is computed as a partial result per chunk,
    combined in a tree: for integers always, for floats with `reassociate=True`. Each
    call of the kernel runs its parallel loops on `threads` threads, by default 1: dask
    runs the chunks in parallel (a worker of N threads runs N calls at once).

    `xarray.DataArray` inputs are matched to the inputs' dims by name (see
    docs/chunked.md); the outputs are then DataArrays, with the surviving coordinates."""
    from .xr import is_dataarray, unwrap, wrap

    if any(is_dataarray(v) for v in arrays.values()):
        sched, _ = _schedule_of(f, target)
        data, given = unwrap(sched.pipeline, arrays)
        result = chunk_plan(f, target, reassociate, threads, chunks, **data).arrays()
        return wrap(sched.pipeline, result, given)
    return chunk_plan(f, target, reassociate, threads, chunks, **arrays).arrays()
