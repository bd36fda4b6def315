"""The immutable Schedule: outputs plus an ordered list of primitive records.

Each chained call validates one primitive against the state the previous
ones produced and returns a new Schedule; the old one is unchanged.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from typing import Any

from ..compute import Stage, Update
from ..compute.pipeline import Pipeline
from ..errors import ScheduleError
from .knob import knobs_in
from .primitives import (
    PRIMITIVES,
    Atomic,
    ComputeAt,
    ComputeInline,
    Fuse,
    FuseUpdates,
    Parallel,
    Primitive,
    Reorder,
    Split,
    StageRef,
    StoreAt,
    StoreNontemporal,
    StoreRoot,
    Tile,
    Unroll,
    Vectorize,
)
from .staging import CacheRead, CacheWrite, Layout, RFactor
from .state import State

_LEGALITY_CHECK: Callable[[Schedule], None] | None = None


_LOG_READER: Callable[..., Schedule] | None = None


def set_log_reader(read: Callable[..., Schedule]) -> None:
    """Install what `Schedule.from_log` calls (tdsl.tune installs its log's reader on
    import: the tuning log is a layer above schedules)."""
    global _LOG_READER
    _LOG_READER = read


def set_legality_check(check: Callable[[Schedule], None]) -> None:
    """Install the check `Schedule.check` runs (tdsl.lower installs its own on import:
    the schedule layer records and validates names, lowering proves legality)."""
    global _LEGALITY_CHECK
    _LEGALITY_CHECK = check

PRIMITIVES = {**PRIMITIVES, **{c.__name__: c for c in (CacheWrite, CacheRead, RFactor, Layout)}}

JSON_VERSION = 1


class Schedule:
    """`td.schedule(C)` then chained primitives; `s.primitives` lists the records."""

    __slots__ = {
        "outputs": "The output stages scheduled, a tuple.",
        "pipeline": "Every stage and input the outputs depend on (td.compute's Pipeline).",
        "primitives": "The primitive records applied, in order (td.Split(...), ...).",
        "_state": None,
    }

    def __init__(self, outputs, primitives: Iterable[Primitive] = (), *, _pipeline=None,
                 _state=None):
        pipeline = _pipeline or Pipeline(outputs)
        self.outputs: tuple[Stage, ...] = pipeline.outputs
        self.pipeline = pipeline
        state = _state or State.initial(pipeline)
        prims = tuple(primitives)
        if prims:
            state = state.copy()
            for p in prims:
                if not isinstance(p, Primitive):
                    raise ScheduleError(f"{p!r} is not a schedule primitive (td.Split, td.Tile, ...)")
                p.apply(state)
        self.primitives: tuple[Primitive, ...] = prims
        self._state = state

    @property
    def state(self) -> State:
        """The loops, placements and layouts the primitives produced (internal record)."""
        return self._state

    def append(self, prim: Primitive) -> Schedule:
        """This schedule with one more primitive record, checked against it:
        `s.append(td.Split(C, "i", 8))` is `s.split(C, "i", 8)`."""
        st = self._state.copy()
        prim.apply(st)
        return Schedule(self.outputs, (), _pipeline=self.pipeline, _state=st)._with(
            self.primitives + (prim,))

    def _with(self, prims) -> Schedule:
        self.primitives = prims
        return self

    def _stage(self, s) -> StageRef:
        """A stage named by string: the user's object, or the name of a stage a restaging
        primitive (cache_write, cache_read, rfactor) added."""
        if isinstance(s, str):
            for x in self.pipeline.schedulables:
                if x.name == s:
                    return x
            if self._state.resolve(s) is not None:
                return s
            valid = ", ".join(x.name for x in self._state.pipeline.schedulables)
            raise ScheduleError(f"no stage named {s!r} in this pipeline; stages are: {valid}")
        return s

    def check(self) -> None:
        """Prove this schedule legal (dependences kept, parallel loops race-free), or raise
        ScheduleError naming the primitive, the dependence and a conflicting pair.

        The proof is lowering's (it needs the polyhedral model); lowering provides it
        through `set_legality_check` when it is imported, as `import tdsl` does."""
        self._require_current()
        if _LEGALITY_CHECK is None:
            raise ScheduleError("no legality check is available: import tdsl (tdsl.lower "
                                "provides it) before checking a schedule")
        _LEGALITY_CHECK(self)

    # ------------------------------------------------------------ primitives

    def split(self, stage, loop, factor: int, names=None) -> Schedule:
        return self.append(Split(self._stage(stage), loop, factor, _names(names)))

    def tile(self, stage, **factors: int) -> Schedule:
        return self.append(Tile(self._stage(stage), tuple(factors.items())))

    def reorder(self, stage, *loops) -> Schedule:
        return self.append(Reorder(self._stage(stage), _listed(loops)))

    def fuse(self, stage, outer, inner, name: str | None = None) -> Schedule:
        return self.append(Fuse(self._stage(stage), outer, inner, name))

    def vectorize(self, stage, loop, reassociate: bool = False) -> Schedule:
        return self.append(Vectorize(self._stage(stage), loop, reassociate))

    def unroll(self, stage, loop) -> Schedule:
        return self.append(Unroll(self._stage(stage), loop))

    def parallel(self, stage, loop, reassociate: bool = False) -> Schedule:
        return self.append(Parallel(self._stage(stage), loop, reassociate))

    def fuse_updates(self, first, second) -> Schedule:
        return self.append(FuseUpdates(self._stage(first), self._stage(second)))

    def atomic(self, stage) -> Schedule:
        return self.append(Atomic(self._stage(stage)))

    def store_nontemporal(self, stage) -> Schedule:
        return self.append(StoreNontemporal(self._stage(stage)))

    def compute_inline(self, stage) -> Schedule:
        return self.append(ComputeInline(self._stage(stage)))

    def compute_at(self, stage, consumer, loop) -> Schedule:
        return self.append(ComputeAt(self._stage(stage), self._stage(consumer), loop))

    def store_at(self, stage, consumer, loop) -> Schedule:
        return self.append(StoreAt(self._stage(stage), self._stage(consumer), loop))

    def store_root(self, stage) -> Schedule:
        return self.append(StoreRoot(self._stage(stage)))

    def cache_write(self, stage, name: str | None = None) -> Schedule:
        return self.append(CacheWrite(self._stage(stage), name))

    def cache_read(self, tensor, consumers=(), name: str | None = None) -> Schedule:
        if isinstance(consumers, (str, Stage)):
            consumers = (consumers,)
        if isinstance(tensor, str) and tensor in self.pipeline.by_name:
            tensor = self.pipeline.by_name[tensor]
        elif isinstance(tensor, str) or isinstance(tensor, Stage):
            tensor = self._stage(tensor)
        return self.append(CacheRead(tensor, tuple(self._stage(c) for c in consumers), name))

    def rfactor(self, stage, loop, factor: int, names=None, name: str | None = None) -> Schedule:
        return self.append(RFactor(self._stage(stage), loop, factor, _names(names), name))

    def layout(self, stage, *dims) -> Schedule:
        return self.append(Layout(self._stage(stage), _listed(dims)))

    # ------------------------------------------------------------ data

    def loops(self, stage) -> list[str]:
        """The current loop names of a stage, outermost first."""
        found = self._state.resolve(self._stage(stage))
        if found is None:
            raise ScheduleError(f"{stage!r} is not a stage of this pipeline")
        return self._state.loop_names(found)

    def __eq__(self, other) -> bool:
        # the pipeline's updates too: a schedule of y made before td.update(y[...], ...)
        # and one made after schedule different pipelines
        return (isinstance(other, Schedule) and self.outputs == other.outputs
                and self.pipeline.updates == other.pipeline.updates
                and self.primitives == other.primitives)

    def __hash__(self) -> int:
        return hash((self.outputs, self.pipeline.updates, self.primitives))

    def _require_current(self) -> None:
        """Refuse to compile a schedule whose stages gained updates after it was made: it
        schedules the pipeline as it was then, which no longer means what `y` means."""
        late = self.pipeline.stale()
        if late is not None:
            outs = ", ".join(o.name for o in self.outputs)
            raise ScheduleError(
                f"update {late.name} ({late!r}) was defined after this schedule of {outs} was "
                "made, so the schedule does not cover it; make the schedule again "
                f"(td.schedule({outs}) and the same primitives)")

    def to_json(self) -> str:
        """The schedule as JSON text (outputs by name, then each primitive's record);
        `td.Schedule.from_json(text, C)` reads it back."""
        return json.dumps({
            "version": JSON_VERSION,
            "outputs": [o.name for o in self.outputs],
            "primitives": [p.to_dict() for p in self.primitives],
        }, indent=1)

    @classmethod
    def from_json(cls, text: str, outputs) -> Schedule:
        """The schedule `to_json` wrote, for these output stages (each primitive checked
        again): `td.Schedule.from_json(open("C.json").read(), C)`."""
        if not isinstance(text, (str, bytes, bytearray)):
            raise ScheduleError(
                f"Schedule.from_json takes the JSON text (a str, e.g. from s.to_json()), got "
                f"{type(text).__name__}")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ScheduleError(f"schedule JSON is malformed: {e}") from None
        if not isinstance(data, dict):
            raise ScheduleError(
                f"schedule JSON must be an object with version {JSON_VERSION}, got a "
                f"{type(data).__name__}")
        if data.get("version") != JSON_VERSION:
            raise ScheduleError(
                f'schedule JSON field "version" must be {JSON_VERSION}, got {data.get("version")!r}')
        pipeline = Pipeline(outputs)
        names = [o.name for o in pipeline.outputs]
        if data.get("outputs", names) != names:
            raise ScheduleError(f"schedule JSON is for outputs {data.get('outputs')}, not {names}")
        records = data.get("primitives", [])
        if not isinstance(records, list):
            raise ScheduleError(
                f'schedule JSON field "primitives" must be a list of primitive records, got '
                f"{records!r}")
        sched = cls(pipeline.outputs, _pipeline=pipeline)
        for rec in records:
            sched = sched.append(_from_dict(rec, pipeline))
        return sched

    @classmethod
    def from_log(cls, path, outputs, target: str = "c", **sizes: Any) -> Schedule:
        """The best schedule a tuning log (written by td.tune) records for these
        outputs, target and symbolic sizes, as measured on this machine. An application
        ships the log and never tunes:

            s = td.Schedule.from_log("C.tune.jsonl", C, target="c", N=1024)

        On a machine the log has no record of, the best few records of other machines
        are re-measured here against `td.autoschedule`'s choice, a short bounded step,
        and one of them is returned only when it is faster beyond noise: a log never
        makes a kernel slower than no log would. The measurements are appended to the
        log (or, when it cannot be written, to a companion file in the user's cache
        directory), so this happens once per machine. `arrays={"A": a, ...}` times on
        those arrays instead of made-up ones; `transfer=False` returns the best record
        of any machine without measuring.

        Raises td.TuningError, listing what the log does hold, when nothing matches."""
        if _LOG_READER is None:
            raise ScheduleError("no tuning log reader is available: import tdsl (tdsl.tune "
                                "provides it) before reading a log")
        return _LOG_READER(path, outputs, target, **sizes)

    def _repr_html_(self) -> str:
        """In Jupyter: the primitives as the Python that rebuilds them, and each stage's
        loops (outermost first, with how each runs) and where the stage is computed."""
        from ..display import code_html, details, escape, table

        st = self._state
        rows = []
        for x in st.pipeline.schedulables:
            found = st.resolve(x)
            if found is None:
                continue
            where = st.compute.get(found)
            if where is not None and where.kind == "inline":
                rows.append((x.name, "(inlined)", "inlined into its consumers"))
                continue
            loops = " ".join(lp.name + ("" if lp.kind == "serial" else f" ({lp.kind})")
                             for lp in st.loops[found])
            at = "root" if where is None or where.kind == "root" else \
                f"at {getattr(where.consumer, 'name', where.consumer)}.{where.loop}"
            rows.append((x.name, loops, at))
        loops_table = table(rows, ("stage", "loops, outermost first", "computed"))
        return (f"<div><b>schedule</b> of {escape(', '.join(o.name for o in self.outputs))}, "
                f"{len(self.primitives)} primitives{code_html(repr(self))}"
                f"{details('loops of each stage', loops_table, True)}</div>")

    def __repr__(self) -> str:
        outs = ", ".join(o.name for o in self.outputs)
        head = f"td.schedule({outs if len(self.outputs) == 1 else '(' + outs + ',)'})"
        calls = [_method_call(p) for p in self.primitives]
        if not calls:
            return head
        return "(" + head + "".join(f"\n   .{c}" for c in calls) + ")"


PRIMITIVE_METHODS = ("split", "tile", "reorder", "fuse", "vectorize", "unroll", "parallel", "atomic", "fuse_updates",
                     "compute_inline", "compute_at", "store_at", "store_root", "cache_write",
                     "cache_read",
                     "rfactor", "layout", "store_nontemporal")


def _knob_aware(name: str) -> None:
    """Make Schedule.<name> return a td.Template when any argument is a td.knob."""
    plain = getattr(Schedule, name)

    @functools.wraps(plain)
    def method(self, *args, **kwargs):
        if knobs_in(args) or knobs_in(kwargs):
            from .template import Template

            return Template(self).then(name, args, kwargs)
        return plain(self, *args, **kwargs)

    if not method.__doc__:
        prim = next((c for c in PRIMITIVES.values() if getattr(c, "method", None) == name), None)
        method.__doc__ = prim.__doc__ if prim is not None else None
    setattr(Schedule, name, method)


for _name in PRIMITIVE_METHODS:
    _knob_aware(_name)


def _branch(self, choice, branches):
    from .template import Template

    return Template(self).branch(choice, branches)


_branch.__name__ = _branch.__qualname__ = "branch"
Schedule.branch = _branch  # type: ignore[attr-defined]


def _names(names):
    """names= as given: a string stays a string so the primitive can refuse it
    (tuple("ab") would silently be ("a", "b"))."""
    return names if names is None or isinstance(names, str) else tuple(names)


def _listed(names: tuple) -> tuple:
    """Loop or dim names given as "a b c", as one list or tuple, or as separate arguments."""
    if len(names) == 1 and isinstance(names[0], str):
        return tuple(names[0].split())
    if len(names) == 1 and isinstance(names[0], (list, tuple)):
        return tuple(names[0])
    return tuple(names)


def _from_dict(rec: dict, pipeline: Pipeline) -> Primitive:
    if not isinstance(rec, dict) or rec.get("type") not in PRIMITIVES:
        raise ScheduleError(f"unknown primitive record {rec!r}; known: {', '.join(PRIMITIVES)}")
    cls = PRIMITIVES[rec["type"]]
    kwargs = {}
    for k, v in rec.items():
        if k == "type":
            continue
        if k in ("stage", "consumer", "tensor", "second"):
            v = _lookup(v, pipeline)
        elif k == "consumers":
            if v is not None and not isinstance(v, list):
                raise ScheduleError(
                    f'bad {rec["type"]} record {rec!r}: "consumers" must be a list of stage '
                    f"names, got {v!r}")
            v = tuple(_lookup(x, pipeline) for x in v) if v is not None else ()
        elif isinstance(v, list):
            v = tuple(tuple(x) if isinstance(x, list) else x for x in v)
        kwargs[k] = v
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ScheduleError(f"bad {rec['type']} record {rec!r}: {e}") from None


def _lookup(name, pipeline):
    """The user's stage of that name; other names (stages that restaging primitives add)
    stay names, checked when the primitive applies."""
    if not isinstance(name, str):
        raise ScheduleError(f"schedule JSON names a stage by {name!r}; stages are named by string")
    return next((x for x in pipeline.schedulables if x.name == name), pipeline.by_name.get(name, name))


def _ref(x) -> str:
    """Python code naming a stage or update, given variables named like the stages."""
    if isinstance(x, str):
        return repr(x)
    return f"{x.stage.name}.updates[{x.index}]" if isinstance(x, Update) else x.name


def _kw(key: str, value) -> str:
    return f", {key}={value!r}" if value is not None else ""


def _method_call(p: Primitive) -> str:
    match p:
        case Tile(stage, factors):
            return f"tile({_ref(stage)}, {', '.join(f'{n}={f}' for n, f in factors)})"
        case Split(stage, loop, factor, names):
            extra = f", names={names!r}" if names else ""
            return f"split({_ref(stage)}, {loop!r}, {factor}{extra})"
        case Reorder(stage, loops):
            return f"reorder({_ref(stage)}, {' '.join(loops)!r})"
        case Fuse(stage, outer, inner, name):
            extra = f", name={name!r}" if name else ""
            return f"fuse({_ref(stage)}, {outer!r}, {inner!r}{extra})"
        case FuseUpdates(stage, second):
            return f"fuse_updates({_ref(stage)}, {_ref(second)})"
        case ComputeInline(stage) | Atomic(stage) | StoreNontemporal(stage) | StoreRoot(stage):
            return f"{p.method}({_ref(stage)})"
        case ComputeAt(stage, consumer, loop) | StoreAt(stage, consumer, loop):
            return f"{p.method}({_ref(stage)}, {_ref(consumer)}, {loop!r})"
        case CacheWrite(stage, name):
            return f"cache_write({_ref(stage)}{_kw('name', name)})"
        case CacheRead(tensor, consumers, name):
            users = f", [{', '.join(_ref(c) for c in consumers)}]" if consumers else ""
            return f"cache_read({_ref(tensor)}{users}{_kw('name', name)})"
        case RFactor(stage, loop, factor, names, name):
            return (f"rfactor({_ref(stage)}, {loop!r}, {factor}{_kw('names', names)}"
                    f"{_kw('name', name)})")
        case Layout(stage, dims):
            return f"layout({_ref(stage)}, {' '.join(dims)!r})"
        case Vectorize(stage, loop, True) | Parallel(stage, loop, True):
            return f"{p.method}({_ref(stage)}, {loop!r}, reassociate=True)"
        case Vectorize(stage, loop) | Unroll(stage, loop) | Parallel(stage, loop):
            return f"{p.method}({_ref(stage)}, {loop!r})"
    raise AssertionError(p)


def schedule(outputs, primitives: Iterable[Primitive] = ()) -> Schedule:
    """`td.schedule(C)` or `td.schedule((C, D), [td.Split(C, "k", 4), ...])`."""
    return Schedule(outputs, primitives)
