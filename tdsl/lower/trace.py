"""The loop IR of one lowering after each step of the pipeline (`td.lower(s, trace=True)`)."""

from __future__ import annotations

from collections.abc import Iterator

from . import ir


class Trace:
    """The loop IR of one lowering after `convert` and after each pass, in order.

    Printing it shows each step whose IR differs from the step before (an unchanged
    step is listed by name); `trace[name]` is the IR after the last step of that name,
    `trace.final` the lowered function."""

    def __init__(self, steps: list[tuple[str, ir.LoweredFunc]]):
        self.steps = steps

    @property
    def final(self) -> ir.LoweredFunc:
        return self.steps[-1][1]

    def __getitem__(self, name: str) -> ir.LoweredFunc:
        for step_name, func in reversed(self.steps):
            if step_name == name:
                return func
        raise KeyError(f"no step named {name!r}; steps: {', '.join(n for n, _ in self.steps)}")

    def __iter__(self) -> Iterator[tuple[str, ir.LoweredFunc]]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def _repr_html_(self) -> str:
        """In Jupyter: one collapsible section per step, the last one that changed open."""
        from ..display import code_html, details

        changed = [n for n, (_, f) in enumerate(self.steps) if n == 0 or f != self.steps[n - 1][1]]
        parts = []
        for n, (step_name, func) in enumerate(self.steps):
            if n in changed:
                parts.append(details(f"after {step_name}", code_html(str(func), "nest"),
                                     n == changed[-1]))
            else:
                parts.append(details(f"after {step_name}: unchanged", "", False))
        return f"<div><b>lowering trace</b>, {len(self.steps)} steps{''.join(parts)}</div>"

    def __repr__(self) -> str:
        out, before = [], None
        for step_name, func in self.steps:
            if func == before:
                out.append(f"--- after {step_name}: unchanged")
            else:
                out.append(f"--- after {step_name}:\n{func}")
            before = func
        return "\n".join(out)
