"""Knobs: named, open choices that stand in a schedule where a value goes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ScheduleError

# what a knob may choose between: values a JSON log can hold exactly
Choice = int | float | str | bool | None
_FIRST: Any = object()


@dataclass(frozen=True)
class Knob:
    """A named choice between a few values, placed where a schedule takes a factor, a loop
    name or any other argument; a schedule with knobs is a `td.Template`.

    Made with `td.knob(name, choices, default=...)`; `default` is the value the template
    takes when nobody chooses (the first choice unless given)."""

    name: str
    choices: tuple[Choice, ...]
    default: Choice

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or any(c.isspace() for c in self.name):
            raise ScheduleError(
                f"knob name {self.name!r} must be a non-empty string without spaces (e.g. 'ti' "
                "or 'C.ti')")
        if isinstance(self.choices, (str, bytes)) or not hasattr(self.choices, "__iter__"):
            raise ScheduleError(
                f"knob {self.name!r}: choices must be a list of values (e.g. [16, 32, 64]), "
                f"got {self.choices!r}")
        choices = tuple(self.choices)
        if not choices:
            raise ScheduleError(f"knob {self.name!r} needs at least one choice")
        for c in choices:
            if not isinstance(c, (int, float, str, bool, type(None))):
                raise ScheduleError(
                    f"knob {self.name!r}: choice {c!r} is a {type(c).__name__}; choices are "
                    "ints, floats, strings, booleans or None (values a tuning log can record)")
        if len({_typed(c) for c in choices}) != len(choices):
            raise ScheduleError(f"knob {self.name!r} lists a choice twice: {list(choices)!r}")
        object.__setattr__(self, "choices", choices)
        default = choices[0] if self.default is _FIRST else self.default
        if not any(_typed(default) == _typed(c) for c in choices):
            raise ScheduleError(
                f"knob {self.name!r}: default {default!r} is not one of its choices "
                f"{list(choices)!r}")
        object.__setattr__(self, "default", default)

    def accepts(self, value: object) -> bool:
        """Whether `value` is one of the choices (True is not 1 here, as in a JSON log)."""
        return any(_typed(value) == _typed(c) for c in self.choices)

    def __repr__(self) -> str:
        extra = "" if self.default == self.choices[0] and \
            _typed(self.default) == _typed(self.choices[0]) else f", default={self.default!r}"
        return f"td.knob({self.name!r}, {list(self.choices)!r}{extra})"


def _typed(v: object) -> tuple[str, object]:
    """A choice with its type, so that True, 1 and 1.0 are three different choices."""
    return (type(v).__name__, v)


def knob(name: str, choices, default: Choice = _FIRST) -> Knob:
    """A named open choice for a schedule template.

    Put it wherever a schedule primitive takes a value, and the schedule becomes a
    `td.Template` whose `instantiate(name=value)` makes plain schedules:

        t = td.schedule(C).tile(C, i=td.knob("ti", [16, 32, 64]), j=64)
        t.knobs               # {'ti': (16, 32, 64)}
        s = t.instantiate(ti=32)

    A knob whose chosen value is None leaves its whole primitive out, which makes a
    primitive optional: `.parallel(C, td.knob("par", ["i_o", None]))`.

    choices: ints, floats, strings, booleans or None. default: the choice taken when
    none is given (the first one unless said)."""
    return Knob(name, choices, default)


def knobs_in(value: object) -> list[Knob]:
    """The knobs inside an argument (looking into lists, tuples and dict values)."""
    if isinstance(value, Knob):
        return [value]
    if isinstance(value, (list, tuple)):
        return [k for v in value for k in knobs_in(v)]
    if isinstance(value, dict):
        return [k for v in value.values() for k in knobs_in(v)]
    return []
