"""td.explore: a control per knob of a template; each change rebuilds, times and shows."""

from __future__ import annotations

import html
import json
import time
from typing import Any

from ..errors import TdslError
from ..schedule import Schedule, Template


class Explorer:
    """What `td.explore` returns: in Jupyter a widget (a dropdown per knob, then the time,
    the rate and the loop nest of the current choice); in code, call `update(**values)`
    and read `.schedule`, `.nest`, `.time` (median seconds), `.rate` and `.error`."""

    def __init__(self, template: Template, target: str, arrays: dict[str, Any], runs: int):
        from ..compute.binding import bind_arguments
        from .tuner import _work

        self.template, self.target, self.arrays, self.runs = template, target, arrays, runs
        sizes = dict(bind_arguments(template.pipeline, arrays, allow_outputs=False).sizes)
        self.work = _work(template.pipeline, sizes)  # points of the iteration spaces
        self.values: dict[str, Any] = dict(template.defaults)
        self.schedule: Schedule | None = None
        self.nest = ""
        self.time: float | None = None
        self.error: str | None = None
        self.seconds = 0.0  # what the last change took: build and timing
        self._cache: dict[str, tuple[Schedule | None, str, float | None, str | None]] = {}
        self._widget: Any = None
        self.update()

    @property
    def rate(self) -> float | None:
        """Iteration points per second (a matmul's point is one multiply-add)."""
        return self.work / self.time if self.time else None

    def update(self, **values: Any) -> Explorer:
        """Choose knob values (the others keep theirs), build, check and time; a refused
        combination or a failed build sets `.error` instead of raising."""
        from ..api import build

        self.values.update(values)
        key = json.dumps(self.values, sort_keys=True)
        t0 = time.perf_counter()
        if key not in self._cache:
            sched: Schedule | None = None
            nest, secs, err = "", None, None
            try:
                sched = self.template.instantiate(**self.values)
                f = build(sched, target=self.target)
                nest = f.loop_nest
                secs = f.benchmark(runs=self.runs, warmup=1, **self.arrays).median
            except TdslError as e:
                err = f"{type(e).__name__}: {e}"
            self._cache[key] = (sched, nest, secs, err)
        self.schedule, self.nest, self.time, self.error = self._cache[key]
        self.seconds = time.perf_counter() - t0
        self._refresh()
        return self

    # ------------------------------------------------------------ the widget

    def summary_html(self) -> str:
        """The time and rate of the current choice, or why it failed."""
        if self.error is not None:
            return f"<div style='color:#b00'>{html.escape(self.error)}</div>"
        rate = self.rate or 0.0
        return (f"<div><b>{(self.time or 0) * 1e3:.3f} ms</b> per call &middot; "
                f"{rate / 1e9:.2f} G points/s &middot; {self.seconds:.2f} s to build and time"
                "</div>")

    def widget(self) -> Any:
        """The ipywidgets box (made on first use)."""
        if self._widget is None:
            self._widget = self._make_widget()
            self._refresh()
        return self._widget

    def _make_widget(self) -> Any:
        try:
            import ipywidgets as w
        except ImportError:
            raise TdslError("td.explore needs ipywidgets: pip install 'tdsl[notebook]'") from None
        controls = {}
        for name, choices in self.template.knobs.items():
            c = w.Dropdown(options=[(repr(v), v) for v in choices], value=self.values[name],
                           description=name, style={"description_width": "initial"})
            c.observe(lambda change, n=name: self.update(**{n: change["new"]}), names="value")
            controls[name] = c
        self.controls = controls
        self._summary = w.HTML()
        self._nest = w.HTML()
        return w.VBox([*controls.values(), self._summary, self._nest])

    def _refresh(self) -> None:
        if self._widget is None:
            return
        from ..display import code_html

        self._summary.value = self.summary_html()
        self._nest.value = code_html(self.nest, "nest") if self.nest else ""

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget())

    def __repr__(self) -> str:
        if self.error is not None:
            return f"<Explorer {self.values}: {self.error}>"
        return f"<Explorer {self.values}: {(self.time or 0) * 1e3:.3f} ms>"


def explore(template, target: str = "c", *, runs: int = 3, **arrays) -> Explorer:
    """Tune by hand in Jupyter: a dropdown for every knob of `template`; each change
    instantiates, builds, checks the arguments and times the kernel (`runs` calls),
    then shows the time, the rate and the loop nest. Built kernels are kept per
    combination, so going back is instant. A refused combination shows its error.

        t = td.schedule(C).tile(C, i=td.knob("ti", [8, 16, 32]), j=64)
        td.explore(t, A=a, B=b)

    A plain Schedule shows with no controls. Outside a notebook, use the returned
    Explorer's `update(ti=16)` and read `.time`, `.nest`, `.error`."""
    if isinstance(template, Schedule):
        template = Template(template)
    if not isinstance(template, Template):
        raise TdslError(f"td.explore takes a td.Template or a td.Schedule, got {template!r}")
    if target not in ("c", "llvm"):
        raise TdslError(f"unknown target {target!r}; valid targets are c, llvm")
    return Explorer(template, target, arrays, runs)
