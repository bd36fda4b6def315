"""Templates: schedules with knobs left open, and the plain schedules they make."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..compute import Dim, Update
from ..compute.definitions import Tensor
from ..compute.pipeline import Pipeline
from ..errors import ScheduleError
from .knob import Knob, _typed, knobs_in
from .schedule import JSON_VERSION, PRIMITIVE_METHODS, Schedule, _lookup, _method_call, _ref


@dataclass(frozen=True)
class Call:
    """One primitive call of a template, its arguments as given (knobs included)."""

    method: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    # (knob, value) pairs: the call is made only when every such knob has that value
    # (a branch of `Template.branch`)
    when: tuple[tuple[Knob, Any], ...] = ()

    def knobs(self) -> list[Knob]:
        return [k for k, _ in self.when] + self._argument_knobs()

    def _argument_knobs(self) -> list[Knob]:
        return knobs_in(self.args) + knobs_in([v for _, v in self.kwargs])

    def in_branch(self, values: dict[str, Any]) -> bool:
        """Whether the call's branch (if any) is the one these knob values choose."""
        return all(_typed(values[k.name]) == _typed(v) for k, v in self.when)

    def active(self, values: dict[str, Any]) -> bool:
        """Whether the call is made with these knob values: its branch is chosen, and no
        knob in its arguments is None."""
        return self.in_branch(values) and not any(
            values[k.name] is None for k in self._argument_knobs())

    def bound(self, values: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        """The arguments with each knob replaced by its value; None when the call is left
        out (a knob's value is None, or the call belongs to a branch not chosen)."""
        if not self.active(values):
            return None
        return _bind(self.args, values), {k: _bind(v, values) for k, v in self.kwargs}

    def code(self) -> str:
        args = [_code(a) for a in self.args] + [f"{k}={_code(v)}" for k, v in self.kwargs]
        return f"{self.method}({', '.join(args)})"

    def condition(self) -> str:
        """The branch the call belongs to, as text ("" when it is always made)."""
        return " and ".join(f"{k.name} == {v!r}" for k, v in self.when)


def _frozen(value: Any) -> Any:
    """Lists as tuples, so that calls compare and hash alike however they were written."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


def _bind(value: Any, values: dict[str, Any]) -> Any:
    if isinstance(value, Knob):
        return values[value.name]
    if isinstance(value, tuple):
        return tuple(_bind(v, values) for v in value)
    if isinstance(value, list):
        return [_bind(v, values) for v in value]
    return value


def _code(value: Any) -> str:
    if isinstance(value, (Tensor, Update)):
        return _ref(value)
    if isinstance(value, Dim):
        return repr(value.name)
    if isinstance(value, (list, tuple)):
        return f"[{', '.join(_code(v) for v in value)}]"
    return repr(value)


class Template:
    """A schedule with open choices (`td.knob`s): `t.instantiate(ti=32)` makes a plain
    `td.Schedule`.

    A Schedule's primitive method given a knob anywhere in its arguments returns a
    Template, and a Template's primitive methods chain like a Schedule's:

        t = (td.schedule(C)
               .tile(C, i=td.knob("ti", [16, 32, 64]), j=64)
               .parallel(C, td.knob("par", ["i_o", None])))   # None: no parallel loop
        t.knobs            # {'ti': (16, 32, 64), 'par': ('i_o', None)}
        t.defaults         # {'ti': 16, 'par': 'i_o'}
        t.instantiate(ti=32, par=None)

    Every call is checked at once against the knobs' defaults, so a misspelt loop fails
    where it is written; other combinations are checked when instantiated (an
    impossible one raises ScheduleError, which a tuner records as a rejected
    candidate). `td.Template(s)` wraps a plain schedule as a template with no knobs.
    """

    __slots__ = {
        "base": "The plain td.Schedule the knobbed calls start from.",
        "calls": "The primitive calls after `base`, in order, knobs still open.",
        "_knobs": None, "_default": None, "_size": None,
    }

    def __init__(self, base: Schedule, calls: Iterable[Call] = ()):
        if isinstance(base, Template):
            base, calls = base.base, base.calls + tuple(calls)
        if not isinstance(base, Schedule):
            raise ScheduleError(f"td.Template takes a td.Schedule, got {base!r}")
        self.base = base
        self.calls: tuple[Call, ...] = ()
        self._knobs: dict[str, Knob] = {}
        self._default = base
        self._size: int | None = None  # space_size, counted once
        for c in calls:
            self._add(c)

    # ------------------------------------------------------------ building

    def _add(self, call: Call) -> None:
        for k in call.knobs():
            seen = self._knobs.get(k.name)
            if seen is not None and seen != k:
                raise ScheduleError(
                    f"knob {k.name!r} is used twice with different choices: {seen!r} and {k!r}; "
                    "give each open choice its own name")
            self._knobs.setdefault(k.name, k)
        bound = call.bound(self.defaults)
        if bound is not None:
            args, kwargs = bound
            try:
                self._default = getattr(self._default, call.method)(*args, **kwargs)
            except ScheduleError as e:
                raise ScheduleError(f"{call.code()} with the knobs' defaults: {e}") from None
        self.calls += (call,)

    def then(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Template:
        """This template with one more primitive call (what the chained methods do)."""
        if method not in PRIMITIVE_METHODS:
            raise ScheduleError(
                f"{method!r} is not a schedule primitive; primitives are: "
                f"{', '.join(PRIMITIVE_METHODS)}")
        call = Call(method, _frozen(tuple(args)), tuple((k, _frozen(v)) for k, v in kwargs.items()))
        return Template(self.base, self.calls + (call,))

    def branch(self, choice: Knob, branches: dict[Any, Callable[[Template], Template]]
               ) -> Template:
        """This template followed by one of several sequences of primitives, chosen by the
        knob `choice`: `branches` maps each of its choices to a function that adds that
        sequence to the template it is given (a choice missing from it adds nothing).

            t = td.schedule(out).branch(td.knob("out.form", ["strip", "acc"]), {
                "strip": lambda t: t.split(out, "y", 2).unroll(out, "y_i"),
                "acc":   lambda t: t.cache_write(out, "Acc").compute_at("Acc", out, "y"),
            })
            t.instantiate(**{"out.form": "acc"})    # the calls of "acc" only

        Before:  for c, for y, for x: out = ...
        After (strip):  for c, for y_o, for y_i (unrolled), for x: out = ...

        Each branch is checked at once, made after this template with the knobs'
        defaults; the calls of the branches not chosen are left out (and their knobs do
        not matter: `canonical` sets them to their defaults)."""
        if not isinstance(choice, Knob):
            raise ScheduleError(f"branch: choice must be a td.knob, got {choice!r}")
        bad = [v for v in branches if not choice.accepts(v)]
        if bad:
            raise ScheduleError(f"branch: {bad[0]!r} is not a choice of knob {choice.name!r}; "
                                f"its choices are {list(choice.choices)!r}")
        calls = list(self.calls)
        for value, build in branches.items():
            made = build(Template(self.base, self.calls))
            if not isinstance(made, Template) or made.calls[:len(self.calls)] != self.calls:
                raise ScheduleError(f"branch {value!r} of knob {choice.name!r} must add calls "
                                    "to the template it is given and return it")
            for c in made.calls[len(self.calls):]:
                calls.append(Call(c.method, c.args, c.kwargs, ((choice, value), *c.when)))
        made = Template(self.base, calls)
        for value in branches:  # every branch, checked with the other knobs' defaults
            if _typed(value) != _typed(choice.default):
                made.instantiate(**{choice.name: value})
        return made

    def canonical(self, values: dict[str, Any]) -> dict[str, Any]:
        """`values` with every knob that no call made uses (a knob of a branch not
        chosen) set to its default: two candidates with the same canonical values make
        the same schedule."""
        chosen = self.choose(**values)
        used = {k.name for c in self.calls if c.in_branch(chosen) for k in c.knobs()}
        return {n: (v if n in used else self._knobs[n].default) for n, v in chosen.items()}

    # ------------------------------------------------------------ primitives

    def split(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("split", args, kwargs)

    def tile(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("tile", args, kwargs)

    def reorder(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("reorder", args, kwargs)

    def fuse(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("fuse", args, kwargs)

    def vectorize(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("vectorize", args, kwargs)

    def unroll(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("unroll", args, kwargs)

    def parallel(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("parallel", args, kwargs)

    def fuse_updates(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("fuse_updates", args, kwargs)

    def atomic(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("atomic", args, kwargs)

    def store_nontemporal(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("store_nontemporal", args, kwargs)

    def compute_inline(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("compute_inline", args, kwargs)

    def compute_at(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("compute_at", args, kwargs)

    def store_at(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("store_at", args, kwargs)

    def store_root(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("store_root", args, kwargs)

    def cache_write(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("cache_write", args, kwargs)

    def cache_read(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("cache_read", args, kwargs)

    def rfactor(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("rfactor", args, kwargs)

    def layout(self, *args: Any, **kwargs: Any) -> Template:
        return self.then("layout", args, kwargs)

    # ------------------------------------------------------------ data

    @property
    def outputs(self):
        """The output stages the template schedules, as `td.Schedule.outputs`."""
        return self.base.outputs

    @property
    def pipeline(self) -> Pipeline:
        """The pipeline of the outputs, as `td.Schedule.pipeline`."""
        return self.base.pipeline

    @property
    def knobs(self) -> dict[str, tuple[Any, ...]]:
        """Each knob's name and its choices, in order of first use."""
        return {n: k.choices for n, k in self._knobs.items()}

    @property
    def defaults(self) -> dict[str, Any]:
        """Each knob's default value: what `instantiate()` chooses when not told."""
        return {n: k.default for n, k in self._knobs.items()}

    @property
    def space_size(self) -> int:
        """How many schedules the knobs can make: the product of their numbers of choices,
        less the combinations that differ only in the knobs of a branch not chosen."""
        if self._size is None:
            product = math.prod(len(k.choices) for k in self._knobs.values())
            if not any(c.when for c in self.calls) or product > 100_000:
                self._size = product
            else:
                names = list(self._knobs)
                self._size = len({
                    json.dumps(self.canonical(dict(zip(names, combo))), sort_keys=True,
                               default=repr)
                    for combo in itertools.product(*(k.choices for k in self._knobs.values()))})
        return self._size

    def knob(self, name: str) -> Knob:
        """The knob of that name."""
        try:
            return self._knobs[name]
        except KeyError:
            raise ScheduleError(self._unknown(name)) from None

    def _unknown(self, name: str) -> str:
        have = ", ".join(self._knobs) or "none"
        return f"this template has no knob {name!r}; its knobs are: {have}"

    def loops(self, stage) -> list[str]:
        """The loop names of a stage in the schedule the defaults make."""
        return self._default.loops(stage)

    # ------------------------------------------------------------ instantiation

    def choose(self, **values: Any) -> dict[str, Any]:
        """Every knob's value: the ones given (checked against the choices), the defaults
        for the rest."""
        for name, v in values.items():
            k = self._knobs.get(name)
            if k is None:
                raise ScheduleError(self._unknown(name))
            if not k.accepts(v):
                raise ScheduleError(
                    f"knob {name!r} has no choice {v!r}; its choices are {list(k.choices)!r}")
        chosen = self.defaults
        chosen.update(values)
        return chosen

    def instantiate(self, **values: Any) -> Schedule:
        """The plain schedule for these knob values (the defaults for knobs not given).

        Raises ScheduleError for an unknown knob, a value not among a knob's choices, or a
        combination that makes an invalid schedule."""
        chosen = self.choose(**values)
        if all(_typed(chosen[n]) == _typed(k.default) for n, k in self._knobs.items()):
            return self._default
        s = self.base
        for call in self.calls:
            bound = call.bound(chosen)
            if bound is None:
                continue
            args, kwargs = bound
            try:
                s = getattr(s, call.method)(*args, **kwargs)
            except ScheduleError as e:
                shown = ", ".join(f"{n}={v!r}" for n, v in chosen.items())
                raise ScheduleError(f"with {shown}: {e}") from None
        return s

    def bound_calls(self, **values: Any) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
        """The primitive calls `instantiate(**values)` makes after the plain prefix, as
        (method, args, kwargs) with the knobs replaced by their values."""
        chosen = self.choose(**values)
        out = []
        for call in self.calls:
            bound = call.bound(chosen)
            if bound is not None:
                out.append((call.method, *bound))
        return out

    # ------------------------------------------------------------ text

    def to_json(self) -> str:
        """The template as JSON text; `td.Template.from_json(text, outputs)` rebuilds it."""
        return json.dumps({
            "version": JSON_VERSION,
            "outputs": [o.name for o in self.outputs],
            "primitives": [p.to_dict() for p in self.base.primitives],
            "calls": [{"method": c.method, "args": [_to_json(a) for a in c.args],
                       "kwargs": {k: _to_json(v) for k, v in c.kwargs},
                       **({"when": [[_to_json(k), v] for k, v in c.when]} if c.when else {})}
                      for c in self.calls],
        }, indent=1)

    @classmethod
    def from_json(cls, text: str, outputs) -> Template:
        """The template `to_json` wrote, for these output stages."""
        base = Schedule.from_json(text, outputs)
        data = json.loads(text)
        calls = data.get("calls", [])
        if not isinstance(calls, list):
            raise ScheduleError(f'template JSON field "calls" must be a list, got {calls!r}')
        out = []
        for c in calls:
            if not (isinstance(c, dict) and isinstance(c.get("method"), str)
                    and isinstance(c.get("args", []), list)
                    and isinstance(c.get("kwargs", {}), dict)):
                raise ScheduleError(
                    f'bad template call record {c!r}: it needs "method" (a primitive name), '
                    '"args" (a list) and "kwargs" (an object)')
            if c["method"] not in PRIMITIVE_METHODS:
                raise ScheduleError(
                    f"bad template call record {c!r}: {c['method']!r} is not a schedule "
                    f"primitive; primitives are: {', '.join(PRIMITIVE_METHODS)}")
            when = c.get("when", [])
            if not (isinstance(when, list) and all(
                    isinstance(w, list) and len(w) == 2 and isinstance(w[0], dict)
                    and "knob" in w[0] for w in when)):
                raise ScheduleError(
                    f'bad template call record {c!r}: "when" must be a list of [knob, value] '
                    'pairs')
            out.append(Call(
                c["method"], tuple(_from_json(a, base.pipeline) for a in c.get("args", [])),
                tuple((k, _from_json(v, base.pipeline)) for k, v in c.get("kwargs", {}).items()),
                tuple((_from_json(k, base.pipeline), v) for k, v in when)))
        return cls(base, out)

    def __repr__(self) -> str:
        outs = ", ".join(o.name for o in self.outputs)
        head = f"td.schedule({outs if len(self.outputs) == 1 else '(' + outs + ',)'})"
        calls = [_method_call(p) for p in self.base.primitives] + [
            c.code() + (f"  # when {c.condition()}" if c.when else "") for c in self.calls]
        if not calls:
            return f"td.Template({head})"
        end = "\n)" if any(c.when for c in self.calls) else ")"  # not inside a comment
        return "(" + head + "".join(f"\n   .{c}" for c in calls) + end

    def _repr_html_(self) -> str:
        """In Jupyter: the calls with their knobs, and each knob's choices and default."""
        import html

        from ..display import code_html, table

        rows = [(n, ", ".join(repr(c) for c in k.choices), repr(k.default))
                for n, k in self._knobs.items()]
        return (f"<div><b>template</b> of {html.escape(', '.join(o.name for o in self.outputs))}: "
                f"{len(self._knobs)} knobs, {self.space_size} schedules{code_html(repr(self))}"
                f"{table(rows, ('knob', 'choices', 'default'))}</div>")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Template) and self.base == other.base and self.calls == other.calls

    def __hash__(self) -> int:
        return hash((self.base, self.calls))


def _to_json(value: Any) -> Any:
    if isinstance(value, Knob):
        return {"knob": value.name, "choices": list(value.choices), "default": value.default}
    if isinstance(value, (Tensor, Update)):
        return {"stage": value.name}
    if isinstance(value, Dim):
        return value.name
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    if value is None or isinstance(value, (int, float, str, bool)):
        return value
    raise ScheduleError(f"a template argument {value!r} cannot be written as JSON")


def _from_json(value: Any, pipeline: Pipeline) -> Any:
    if isinstance(value, dict):
        if "knob" in value:
            if "choices" not in value:
                raise ScheduleError(f"bad knob record {value!r}: it needs \"choices\"")
            return Knob(value["knob"], value["choices"], value.get("default", value["choices"][0]
                                                                    if value["choices"] else None))
        if isinstance(value.get("stage"), str):
            return _lookup(value["stage"], pipeline)
        raise ScheduleError(f"bad template argument record {value!r}")
    if isinstance(value, list):
        return tuple(_from_json(v, pipeline) for v in value)
    return value


for _name in PRIMITIVE_METHODS:  # the chained methods say what the Schedule's say
    getattr(Template, _name).__doc__ = getattr(Schedule, _name).__doc__
Schedule.branch.__doc__ = Template.branch.__doc__  # type: ignore[attr-defined]
