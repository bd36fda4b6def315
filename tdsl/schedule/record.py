"""Primitive, the base of the schedule's records, and the checked lookups every
primitive's `apply` makes: the stage it names, a loop of it by name, a fresh loop
name. Their errors are ScheduleErrors that name the primitive (`schedule_error`).

Every primitive names its stage by the Stage object and its loops by name
(a `Dim` is accepted and turned into its name). `apply` validates against the
current state and raises ScheduleError naming the primitive, the stage and
the loop, and saying what would be valid.
"""

from __future__ import annotations

from dataclasses import Field, fields
from typing import TYPE_CHECKING, ClassVar

from ..compute import Dim, Stage, Update
from ..compute.definitions import Tensor
from ..errors import ScheduleError
from .state import Loop, State


def loop_name(ref, method: str) -> str:
    """The loop name `ref` gives (a name, or a td.dim for its name), for primitive `method`."""
    if isinstance(ref, Dim):
        return ref.name
    if isinstance(ref, str) and ref.isidentifier():
        return ref
    raise ScheduleError(
        f"{method}: {ref!r} is not a loop name; name loops by a string that is a Python identifier "
        "(e.g. 'y_o') or by a td.dim")


# what a primitive names a stage by: the object, or the name of a stage that a
# restaging primitive (cache_write, cache_read, rfactor) added
StageRef = Stage | Update | str

_EXAMPLE_NAMES = {"names": ("y_outer", "y_inner")}


class Primitive:
    """Base of schedule records. Subclasses are frozen dataclasses."""

    method: ClassVar[str]
    loop_fields: ClassVar[tuple[str, ...]] = ()
    if TYPE_CHECKING:
        __dataclass_fields__: ClassVar[dict[str, Field[object]]]

    def __post_init__(self):
        types = {f.name: str(f.type) for f in fields(self)}
        for f in self.loop_fields:
            v = getattr(self, f)
            if isinstance(v, str) and types[f].startswith("tuple"):
                raise ScheduleError(
                    f"{self.method}: {f}={v!r} must be a list of loop names, not one string "
                    f"(e.g. {f}={_EXAMPLE_NAMES.get(f, ('y', 'x'))!r})")
            if isinstance(v, (tuple, list)):
                v = tuple(loop_name(x, self.method) for x in v)
            elif v is not None:
                v = loop_name(v, self.method)
            object.__setattr__(self, f, v)

    def to_dict(self) -> dict:
        d: dict = {"type": type(self).__name__}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, (Tensor, Update)):
                v = v.name
            elif isinstance(v, tuple):
                v = [list(x) if isinstance(x, tuple) else
                     x.name if isinstance(x, (Tensor, Update)) else x for x in v]
            d[f.name] = v
        return d

    def describe(self) -> str:
        args = []
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in ("names", "name") and v is None or f.name == "reassociate" and not v:
                continue
            if f.name == "reassociate":
                args.append(f"reassociate={v!r}")
                continue
            args.append(shown(v, f.name in ("stage", "consumer", "second")))
        return f"{self.method}({', '.join(args)})"

    def apply(self, state: State) -> None:
        raise NotImplementedError


def shown(value, named: bool) -> str:
    """An argument of a primitive as a message shows it: stages by name."""
    if isinstance(value, (Tensor, Update)):
        return value.name
    if named and isinstance(value, str):
        return value
    if isinstance(value, tuple) and any(isinstance(x, (Tensor, Update)) for x in value):
        return "[" + ", ".join(shown(x, True) for x in value) + "]"
    return repr(value)


def schedule_error(prim: Primitive, msg: str) -> ScheduleError:
    """A ScheduleError whose message names the primitive as it was called."""
    return ScheduleError(f"{prim.describe()}: {msg}")


def resolve_stage(prim: Primitive, state: State, stage) -> Stage:
    """The stage or update `stage` names in `state`, when it has loops of its own to
    schedule."""
    found = state.resolve(stage) if isinstance(stage, (Stage, Update, str)) else None
    if found is None:
        valid = ", ".join(s.name for s in state.pipeline.schedulables)
        raise schedule_error(prim, f"{_not_schedulable(state, stage)}; schedulable stages are: "
                                   f"{valid}")
    stage = found
    if state.compute[stage].kind == "inline":
        raise schedule_error(prim, f"stage {stage.name} is inlined (compute_inline) and has no "
                                   "loops of its own")
    if state.compute[stage].kind == "fused":
        first = state.compute[stage].consumer
        assert first is not None  # as fuse_updates places it
        raise schedule_error(prim, f"{stage.name} runs in the loops of {first.name} (fuse_updates) "
                                   f"and has no loops of its own; schedule {first.name}")
    return stage


def _not_schedulable(state: State, ref) -> str:
    """Why `ref` names no schedulable stage of the pipeline `state` schedules."""
    if isinstance(ref, str):
        return f"there is no stage named {ref!r} in this pipeline"
    if isinstance(ref, (Stage, Update)):
        kind = "update" if isinstance(ref, Update) else "stage"
        return (f"{kind} {ref.name!r} is not part of this pipeline (it belongs to another "
                "pipeline, or the outputs do not depend on it)")
    if isinstance(ref, Tensor):
        if any(t is ref for t in state.pipeline.inputs):
            return f"{ref.name!r} is an input of this pipeline and has no loops"
        return f"{ref.name!r} is an input of another pipeline, not of this one"
    return f"{ref!r} is not a stage"


def find_loop(prim: Primitive, state: State, stage: Stage, name: str) -> tuple[int, Loop]:
    """The position and loop of `stage`'s loop called `name`."""
    try:
        return state.find(stage, name)
    except KeyError:
        loops = " ".join(state.loop_names(stage))
        raise schedule_error(prim, f"stage {stage.name} has no loop {name!r}; its loops are: "
                                   f"{loops}") from None


def fresh_loop_name(prim: Primitive, state: State, stage: Stage, name: str, replacing: set[str]) -> str:
    """`name`, when it may name a new loop of `stage` (taking the place of the loops
    in `replacing`)."""
    if not name.isidentifier():
        raise schedule_error(prim, f"{name!r} is not a valid loop name")
    if name in set(state.loop_names(stage)) - replacing:
        raise schedule_error(prim, f"stage {stage.name} already has a loop named {name!r}; pick "
                                   "another with names=")
    return name


def mark_touched(prim: Primitive, state: State, stage: Stage) -> None:
    """Record that a loop primitive changed `stage`'s loops."""
    state.touched.add(stage)
