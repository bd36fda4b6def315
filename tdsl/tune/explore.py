"""td.explore: a control per knob of a template; each change rebuilds, times and shows."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ..display import code_html, escape, rate_text, require, seconds_text
from ..errors import ArgumentError, MissingDependency, TdslError
from ..runtime import Kernel, Timing
from ..schedule import Schedule, Template

# what one change may spend timing the kernel, once built (it runs at least once)
TIME_BUDGET = 0.15


class _NoneChoice:
    """What a control holds for the choice None: ipywidgets reads a value of None as
    "nothing selected" and shows a blank control, so None travels as this instead."""

    def __repr__(self) -> str:
        return "None"


_NONE = _NoneChoice()


def _to_widget(value: Any) -> Any:
    return _NONE if value is None else value


def _from_widget(value: Any) -> Any:
    return None if value is _NONE else value


@dataclass(frozen=True)
class Outcome:
    """What one knob combination gave: its schedule, kernel, loop nest and timing, or
    the error that stopped it (then the fields after it may be missing)."""

    schedule: Schedule | None
    kernel: Kernel | None
    nest: str
    timing: Timing | None
    error: str | None
    seconds: float  # what building and timing it took


class Explorer:
    """What `td.explore` returns: in Jupyter a widget (a control per knob, then the time,
    the rate and the loop nest of the current choice, and with `profile` on, its time per
    stage); in code, call `update(**values)` and read `.schedule`, `.nest`, `.time`
    (median seconds), `.rate`, `.timing`, `.error` and `.profile`. `.controls` are the
    widgets by knob name (made on first use)."""

    def __init__(self, template: Template, target: str, arrays: dict[str, Any], runs: int,
                 profile: bool = False):
        from ..compute.binding import bind_arguments

        self.template, self.target, self.arrays, self.runs = template, target, arrays, runs
        self.profiling = profile
        self._profiles: dict[str, Any] = {}
        bind_arguments(template.pipeline, arrays, allow_outputs=False)  # wrong arrays: raise now
        self.values: dict[str, Any] = dict(template.defaults)
        self.builds = 0  # combinations built so far (the others came from the cache)
        self._cache: dict[str, Outcome] = {}
        self._current: Outcome | None = None
        self._widget: Any = None
        self._controls: dict[str, Any] = {}
        self._outputs: dict[str, Any] = {}
        self.update()

    # ------------------------------------------------------------ the state

    @property
    def outcome(self) -> Outcome:
        """The current combination's result."""
        assert self._current is not None, "set by __init__"
        return self._current

    @property
    def schedule(self) -> Schedule | None:
        return self.outcome.schedule

    @property
    def kernel(self) -> Kernel | None:
        return self.outcome.kernel

    @property
    def nest(self) -> str:
        return self.outcome.nest

    @property
    def timing(self) -> Timing | None:
        return self.outcome.timing

    @property
    def error(self) -> str | None:
        return self.outcome.error

    @property
    def time(self) -> float | None:
        """Median seconds per call of the current choice (None if it failed)."""
        return None if self.timing is None else self.timing.median

    @property
    def rate(self) -> tuple[float, str] | None:
        """(work per second, unit) of the current choice: FLOP/s when the algorithm's
        float operations are known, else output elements/s (see `Timing.rate`)."""
        return None if self.timing is None else self.timing.rate

    @property
    def seconds(self) -> float:
        """What building and timing the current choice took (when it was first made)."""
        return self.outcome.seconds

    @property
    def profile(self) -> Any:
        """The current choice's `Profile` (`Kernel.profile`: time per stage and per
        parallel loop), made on first use and kept; None when the choice failed."""
        if self.kernel is None:
            return None
        key = json.dumps(self.values, sort_keys=True)
        if key not in self._profiles:
            self._profiles[key] = self.kernel.profile(self.arrays, runs=max(1, min(3, self.runs)))
        return self._profiles[key]

    def profile_html(self) -> str:
        """The current choice's profile as HTML when profiling is on (else empty)."""
        if not self.profiling or self.kernel is None:
            return ""
        try:
            return self.profile._repr_html_()
        except TdslError as e:
            return f"<div style='color:#b00'>profile failed: {escape(str(e))}</div>"

    def update(self, **values: Any) -> Explorer:
        """Choose knob values (the others keep theirs), then build, check and time that
        combination, once: a combination seen before comes from the cache. A refused
        combination or a failed build sets `.error` instead of raising; an unknown knob
        or a value that is not one of its choices raises ScheduleError."""
        chosen = self.template.choose(**{**self.values, **values})
        self.values = chosen
        key = json.dumps(chosen, sort_keys=True)
        if key not in self._cache:
            self._cache[key] = self._make(chosen)
            self.builds += 1
        self._current = self._cache[key]
        self._refresh()
        return self

    def _make(self, chosen: dict[str, Any]) -> Outcome:
        from ..api import build

        t0 = time.perf_counter()
        sched: Schedule | None = None
        kernel: Kernel | None = None
        nest, timing, err = "", None, None
        try:
            sched = self.template.instantiate(**chosen)
            kernel = build(sched, target=self.target)
            nest = kernel.loop_nest
            timing = self._time(kernel)
        except TdslError as e:
            err = f"{type(e).__name__}: {e}"
        except Exception as e:  # noqa: BLE001 - a widget callback must not raise; show it
            err = f"internal error, please report it: {type(e).__name__}: {e}"
        return Outcome(sched, kernel, nest, timing, err, time.perf_counter() - t0)

    def _time(self, kernel: Kernel) -> Timing:
        """A short benchmark: one call, then up to `runs` more within TIME_BUDGET."""
        first = kernel.benchmark(self.arrays, runs=1, warmup=0)
        n = min(self.runs, int(TIME_BUDGET / max(first.median, 1e-9)))
        return first if n <= 1 else kernel.benchmark(self.arrays, runs=n, warmup=0)

    # ------------------------------------------------------------ the widget

    def time_html(self) -> str:
        """The time of the current choice, or why it failed."""
        if self.error is not None:
            return f"<div style='color:#b00'><b>failed</b>: {escape(self.error)}</div>"
        t = self.timing
        assert t is not None
        return (f"<div><b>{seconds_text(t.median)}</b> per call (median of {t.runs}; "
                f"{seconds_text(t.min)} .. {seconds_text(t.max)}) &middot; "
                f"{self.seconds:.2f} s to build and time</div>")

    def rate_html(self) -> str:
        """The rate of the current choice (empty when it failed or the work is unknown)."""
        rate = self.rate
        return "" if rate is None else f"<div><b>{escape(rate_text(*rate))}</b></div>"

    def nest_html(self) -> str:
        """The loop nest of the current choice, highlighted (empty when it failed)."""
        return code_html(self.nest, "nest") if self.nest else ""

    @property
    def controls(self) -> dict[str, Any]:
        """The widget's controls by knob name (a plain schedule has none); setting a
        control's value runs `update` with it."""
        self.widget()
        return self._controls

    @property
    def outputs(self) -> dict[str, Any]:
        """The widget's HTML outputs: "time", "rate" and "nest"."""
        self.widget()
        return self._outputs

    def widget(self) -> Any:
        """The ipywidgets box (made on first use)."""
        if self._widget is None:
            self._widget = self._make_widget()
            self._refresh()
        return self._widget

    def _control(self, w: Any, name: str, choices: tuple[Any, ...]) -> Any:
        options = [(repr(v), _to_widget(v)) for v in choices]
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in choices)
        style = {"description_width": "initial"}
        value = _to_widget(self.values[name])
        if numbers and len(choices) > 1:
            return w.SelectionSlider(options=options, value=value, description=name,
                                     continuous_update=False, style=style)
        return w.Dropdown(options=options, value=value, description=name, style=style)

    def _make_widget(self) -> Any:
        w = require("ipywidgets", "td.explore")
        for name, choices in self.template.knobs.items():
            c = self._control(w, name, choices)
            c.observe(lambda change, n=name: self.update(**{n: _from_widget(change["new"])}),
                      names="value")
            self._controls[name] = c
        self._outputs = {"time": w.HTML(), "rate": w.HTML(), "nest": w.HTML(),
                         "profile": w.HTML()}
        toggle = w.ToggleButton(value=self.profiling, description="profile per stage")

        def switch(change: dict[str, Any]) -> None:
            self.profiling = bool(change["new"])
            self._refresh()

        toggle.observe(switch, names="value")
        head = w.HTML(f"<b>td.explore</b>: {escape(self.template.pipeline.outputs[0].name)} "
                      f"on {escape(self.target)}")
        return w.VBox([head, *self._controls.values(), toggle, *self._outputs.values()])

    def _refresh(self) -> None:
        if self._widget is None:
            return
        for name, c in self._controls.items():  # update(...) from code moves the controls too
            want = _to_widget(self.values[name])
            if c.value != want or type(c.value) is not type(want):
                c.value = want
        self._outputs["time"].value = self.time_html()
        self._outputs["rate"].value = self.rate_html()
        self._outputs["nest"].value = self.nest_html()
        self._outputs["profile"].value = self.profile_html()

    def static_html(self) -> str:
        """The current choice as plain HTML: the knob values, the time, the rate and the
        loop nest. A saved notebook, a rendered page or a viewer without the widget
        extension shows this in the widget's place."""
        rows = "".join(f"<tr><td><code>{escape(k)}</code></td><td><code>{escape(repr(v))}"
                       f"</code></td></tr>" for k, v in self.values.items())
        return (f"<div><b>td.explore</b>: {escape(self.template.pipeline.outputs[0].name)} "
                f"on {escape(self.target)} <i>(a snapshot: the controls need a running "
                f"kernel)</i><table>{rows}</table>{self.time_html()}{self.rate_html()}"
                f"{self.nest_html()}</div>")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The widget for Jupyter, with `static_html` and the repr as fallbacks for
        whatever cannot show a live widget (without ipywidgets: those two alone)."""
        bundle: dict[str, Any] = {"text/plain": repr(self), "text/html": self.static_html()}
        try:
            widget = self.widget()
        except MissingDependency:
            return bundle
        live = widget._repr_mimebundle_(include=include, exclude=exclude) or {}
        bundle.update((k, v) for k, v in live.items() if k not in bundle)
        return bundle

    def __repr__(self) -> str:
        if self.error is not None:
            return f"<Explorer {self.values}: {self.error}>"
        rate = "" if self.rate is None else f", {rate_text(*self.rate)}"
        return f"<Explorer {self.values}: {seconds_text(self.time or 0)}{rate}>"


def explore(template, target: str = "c", *, runs: int = 5, profile: bool = False,
            **arrays) -> Explorer:
    """Tune by hand in Jupyter: a control for every knob of `template` (a slider for
    numbers, a dropdown otherwise); each change instantiates, builds and times the
    kernel (a short benchmark: up to `runs` calls within 0.15 s), then shows the loop
    nest, the time and the rate (GFLOP/s, or elements/s when the algorithm does no
    float arithmetic). Built kernels are kept per combination, so going back is
    instant. An illegal combination or a failed build shows its error in the widget.

        t = td.schedule(C).tile(C, i=td.knob("ti", [8, 16, 32]), j=64)
        ex = td.explore(t, target="llvm", A=a, B=b)   # the widget, in a notebook

    With `profile=True` (or the widget's "profile per stage" button) each choice also
    shows where its time goes, stage by stage and per parallel loop (`Kernel.profile`:
    an instrumented second build, so each change takes longer); `.profile` gives it in
    code either way.

    A plain Schedule shows with no controls. Outside a notebook, call the Explorer's
    `update(ti=16)` and read `.time`, `.rate`, `.nest`, `.error`, `.profile`. Needs
    ipywidgets for the widget (`pip install 'tdsl[notebook]'`)."""
    if isinstance(template, Schedule):
        template = Template(template)
    if not isinstance(template, Template):
        raise ArgumentError(f"td.explore takes a td.Template or a td.Schedule, got {template!r}")
    if target not in ("c", "llvm"):
        raise ArgumentError(f"unknown target {target!r}; valid targets are c, llvm")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ArgumentError(f"td.explore: runs must be an int >= 1, got {runs!r}")
    return Explorer(template, target, arrays, runs, profile=bool(profile))
