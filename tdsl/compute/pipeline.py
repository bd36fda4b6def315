"""Pipelines: the graph of tensors some outputs depend on, in dependency order, with
the updates of each stage as of when the pipeline is made (a snapshot), and the
notebook page that shows it."""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import DefinitionError
from .definitions import Input, Stage, Tensor, Update, tensors_read
from .nodes import Size
from .sealed import Sealed
from .traversal import sizes_in


def stage_reads(stage: Stage, updates: tuple[Update, ...]) -> list[Tensor]:
    """Tensors a stage's definition and the given updates of it read (not the stage itself)."""
    out = dict.fromkeys(tensors_read(stage.expr))
    for u in updates:
        for e in (*u.indices, u.value):
            out.update(dict.fromkeys(tensors_read(e)))
    out.pop(stage, None)
    return list(out)


def _checked_outputs(outputs) -> tuple[Stage, ...]:
    """A pipeline's outputs as a tuple of distinct stages (DefinitionError otherwise)."""
    if isinstance(outputs, Tensor):
        outputs = (outputs,)
    if not isinstance(outputs, (tuple, list)):
        raise DefinitionError(
            f"outputs must be a stage made by td.compute or a tuple of them, got {outputs!r}")
    outputs = tuple(outputs)
    if not outputs:
        raise DefinitionError("a pipeline needs at least one output stage")
    for o in outputs:
        if not isinstance(o, Stage):
            raise DefinitionError(f"outputs must be stages made by td.compute, got {o!r}")
    if len(set(outputs)) != len(outputs):
        raise DefinitionError("an output stage is listed twice")
    return outputs


def _reachable(outputs: tuple[Stage, ...], known: Mapping[Stage, tuple[Update, ...]]
               ) -> dict[Tensor, tuple[Update, ...]]:
    """Every tensor the outputs read, directly or through their updates, with the
    updates of each (those in `known`, else the stage's own as of now; () for inputs)."""
    updates: dict[Tensor, tuple[Update, ...]] = {}
    stack: list[Tensor] = list(outputs)
    while stack:
        t = stack.pop()
        if t in updates:
            continue
        updates[t] = ()
        if isinstance(t, Stage):
            updates[t] = known[t] if t in known else t.updates
            stack.extend(stage_reads(t, updates[t]))
    return updates


def _by_name(tensors: tuple[Tensor, ...]) -> dict[str, Tensor]:
    by_name: dict[str, Tensor] = {}
    for t in tensors:
        if t.name in by_name:
            raise DefinitionError(f"two different tensors are named {t.name!r} in one pipeline")
        by_name[t.name] = t
    return by_name


def _sizes(tensors: tuple[Tensor, ...], updates: Mapping[Tensor, tuple[Update, ...]],
           by_name: Mapping[str, Tensor]) -> tuple[Size, ...]:
    """The symbolic sizes the tensors' shapes, definitions and updates use, by name."""
    sizes: dict[str, Size] = {}
    for t in tensors:
        exprs = list(t.shape) + ([t.expr] if isinstance(t, Stage) else [])
        for u in updates[t]:
            exprs += [u.value, *u.indices, *(b for ax in u.axes for b in (ax.lo, ax.hi))]
        for e in exprs:
            for s in sizes_in(e):
                if sizes.setdefault(s.name, s) is not s:
                    raise DefinitionError(f"two different td.size objects are named {s.name!r}")
                if s.name in by_name:
                    raise DefinitionError(f"size {s.name!r} has the same name as a tensor")
    return tuple(sizes[n] for n in sorted(sizes))


class Pipeline(Sealed):
    """The DAG of tensors that the given outputs depend on, in dependency order.

    A pipeline is a snapshot: each stage it reaches comes with the updates defined
    on it when the pipeline was made (`updates_of`); updates defined later belong to
    pipelines made later. `known` gives the updates of some stages explicitly (a
    schedule primitive that rebuilds a pipeline keeps its snapshot)."""

    def __init__(self, outputs, known: Mapping[Stage, tuple[Update, ...]] | None = None):
        self.outputs: tuple[Stage, ...] = _checked_outputs(outputs)
        updates = _reachable(self.outputs, known or {})
        self._updates = updates
        self.tensors: tuple[Tensor, ...] = _topological(list(updates), self.reads)
        self.inputs = tuple(t for t in self.tensors if isinstance(t, Input))
        self.stages = tuple(t for t in self.tensors if isinstance(t, Stage))
        self.updates: tuple[Update, ...] = tuple(u for s in self.stages for u in updates[s])
        self.by_name = _by_name(self.tensors)
        self.sizes: tuple[Size, ...] = _sizes(self.tensors, updates, self.by_name)
        self._seal()

    def updates_of(self, stage: Stage) -> tuple[Update, ...]:
        """The updates of `stage` in this pipeline, in creation order."""
        return self._updates[stage]

    def reads(self, stage: Stage) -> list[Tensor]:
        """Tensors `stage` and its updates read (not `stage` itself)."""
        return stage_reads(stage, self._updates[stage])

    def consumers(self, tensor: Tensor) -> list[Stage]:
        """The stages of this pipeline that read `tensor`."""
        return [s for s in self.stages if tensor in self.reads(s)]

    def stale(self) -> Update | None:
        """The first update defined on a stage of this pipeline after the pipeline was
        made, or None while the pipeline is current."""
        for s in self.stages:
            if len(s._recorded) > len(self._updates[s]):
                return s._recorded[len(self._updates[s])]
        return None

    @property
    def schedulables(self) -> tuple:
        """Everything with loops: stages, then each stage's updates in order."""
        return tuple(x for s in self.stages for x in (s, *self._updates[s]))

    def stage(self, name: str):
        """The stage (or update, named like "y.u0") called `name`."""
        for x in self.schedulables:
            if x.name == name:
                return x
        valid = ", ".join(x.name for x in self.schedulables)
        raise DefinitionError(f"no stage named {name!r} in this pipeline; stages are: {valid}")


def _topological(tensors: list[Tensor], reads) -> tuple[Tensor, ...]:
    """Producers before consumers, ties broken by creation order; cycles are refused."""
    deps = {t: [d for d in reads(t) if d in tensors] if isinstance(t, Stage) else []
            for t in tensors}
    done: dict[Tensor, None] = {}
    visiting: list[Tensor] = []

    def visit(t: Tensor) -> None:
        if t in done:
            return
        if t in visiting:
            cycle = " -> ".join(x.name for x in visiting[visiting.index(t):] + [t])
            raise DefinitionError(f"the pipeline has a cycle through updates: {cycle}")
        visiting.append(t)
        for d in sorted(deps[t], key=lambda x: x.order):
            visit(d)
        visiting.pop()
        done[t] = None

    for t in sorted(tensors, key=lambda x: x.order):
        visit(t)
    return tuple(done)




def pipeline_page(head: str, lines: list[str], pipeline: Pipeline) -> str:
    """A stage's or update's notebook page: `head`, its code, its pipeline's graph."""
    from ..display import code_html, details, escape, table

    rows = []
    for x in pipeline.tensors:
        dims = ", ".join(f"{d.name}: {e!r}" for d, e in zip(x.dims, x.shape))
        if isinstance(x, Stage):
            reads = ", ".join(r.name for r in pipeline.reads(x))
            rows.append((x.name, "stage", f"{{{dims}}}", x.dtype.name, reads))
            for u in pipeline.updates_of(x):
                over = ", ".join(f"{ax.dim.name}: ({ax.lo!r}, {ax.hi!r})" for ax in u.axes)
                got = ", ".join(t.name for t in tensors_read(u.value))
                rows.append((u.name, f"update of {x.name}", f"over {{{over}}}", "", got))
        else:
            rows.append((x.name, "input", f"{{{dims}}}", x.dtype.name, ""))
    graph = table(rows, ("tensor", "kind", "shape", "dtype", "reads"))
    sizes = ", ".join(z.name for z in pipeline.sizes)
    tail = f"<p>sizes bound at call time: {escape(sizes)}</p>" if sizes else ""
    return (f"<div><b>{escape(head)}</b>{code_html(chr(10).join(lines))}"
            f"{details('pipeline', graph + tail, True)}</div>")
