"""The Kernel object that `td.build` returns.

All argument checking happens in Python before native code runs; the
backend module only ever sees C-contiguous arrays of the exact dtypes and
shapes the generated code assumes.
"""

from __future__ import annotations

import html
import statistics
import time
from dataclasses import dataclass

import numpy as np

from ..compute.binding import allocate_outputs, bind_arguments
from ..errors import ArgumentError, RuntimeFailure
from ..lower import ir
from ..lower.abi import STATUS


@dataclass(frozen=True)
class Timing:
    """Wall-clock seconds per call: median and minimum over `runs` timed calls.

    `times` holds each timed call's seconds; `Kernel.benchmark` returns one:

        t = f.benchmark(A=a, B=b, runs=20)
        t.median, t.min     # seconds
    """

    median: float
    min: float
    runs: int
    times: tuple[float, ...]

    def __repr__(self) -> str:
        return f"Timing(median={self.median * 1e3:.3f} ms, min={self.min * 1e3:.3f} ms, runs={self.runs})"

    def _repr_html_(self) -> str:
        """In Jupyter: median, spread and runs."""
        hi = max(self.times) if self.times else self.min
        return (f"<div><b>{self.median * 1e3:.3f} ms</b> median per call "
                f"(min {self.min * 1e3:.3f}, max {hi * 1e3:.3f} ms over {self.runs} runs)</div>")


class Kernel:
    """A compiled pipeline: call it with numpy arrays by name.

        f = td.build(td.schedule(C).tile(C, i=32, j=64))
        c = f(A=a, B=b)          # outputs allocated and returned
        f(A=a, B=b, C=c)         # or written into arrays given by name
        print(f.loop_nest)       # what was compiled; f.source is the C or LLVM IR

    `schedule`, `pipeline`, `lowered` (the loop nest IR), `target` ("c" or "llvm")
    and `build_seconds` record how it was built.
    """

    def __init__(self, schedule, func: ir.LoweredFunc, module, target: str, build_seconds: float):
        self.schedule = schedule
        self.pipeline = schedule.pipeline
        self.lowered = func
        self.target = target
        self.build_seconds = build_seconds
        self._module = module
        self._inputs = [b.name for b in func.inputs]
        self._outputs = [b.name for b in func.outputs]
        self._sizes = [v.name for v in func.sizes]

    @property
    def args(self) -> list[str]:
        """Parameter names in call order: inputs, outputs, then sizes."""
        return self._inputs + self._outputs + self._sizes

    @property
    def source(self) -> str:
        """The generated C or LLVM IR."""
        return self._module.source

    @property
    def loop_nest(self) -> str:
        """The compiled loop nest as text, as `td.lower` prints it."""
        return str(self.lowered)

    def _prepare(self, kwargs) -> tuple[list[np.ndarray], list[int], dict[str, np.ndarray]]:
        bound = bind_arguments(self.pipeline, kwargs)
        outs = allocate_outputs(self.pipeline, bound)
        arrays = [bound.inputs[n] for n in self._inputs] + [outs[n] for n in self._outputs]
        sizes = [bound.sizes[n] for n in self._sizes]
        return arrays, sizes, outs

    def _run(self, arrays, sizes) -> None:
        status = self._module.run(arrays, sizes)  # checked by bind_arguments
        if status:
            raise RuntimeFailure(
                f"kernel {self.lowered.name} failed: {STATUS.get(status, f'status {status}')}")

    def _positional(self, args: tuple) -> None:
        if args:
            parts = [f"inputs {', '.join(self._inputs)}" if self._inputs else "no inputs",
                     f"optional outputs {', '.join(self._outputs)}"]
            if self._sizes:
                parts.append(f"optional sizes {', '.join(self._sizes)}")
            call = ", ".join(f"{n}=..." for n in self._inputs)
            raise ArgumentError(
                f"kernel {self.lowered.name} got {len(args)} positional argument(s); arrays are "
                f"passed by name, e.g. f({call}); its arguments are {'; '.join(parts)}")

    def __call__(self, *args, **arrays):
        """Run the kernel on arrays given by name; returns the output(s)."""
        self._positional(args)
        buffers, sizes, outs = self._prepare(arrays)
        self._run(buffers, sizes)
        result = tuple(outs[n] for n in self._outputs)
        return result[0] if len(result) == 1 else result

    def benchmark(self, *positional, runs: int = 10, warmup: int = 2, min_seconds: float = 0.0,
                  **arrays) -> Timing:
        """Time calls with the given arrays (checked once): median and min over `runs`.

        `f.benchmark(a=A, b=B, runs=20)` calls the kernel `warmup` times, then at
        least `runs` times and for at least `min_seconds`. A kernel whose
        arguments are named `runs`, `warmup` or `min_seconds` takes its arrays as
        one dict instead: `f.benchmark({"runs": R, "b": B}, runs=20)`.
        """
        if len(positional) == 1 and isinstance(positional[0], dict) and not arrays:
            arrays, positional = dict(positional[0]), ()
        self._positional(positional)
        clash = [n for n in ("runs", "warmup", "min_seconds") if n in self.args]
        if clash and any(isinstance(v, np.ndarray) for v in (runs, warmup, min_seconds)):
            raise ArgumentError(
                f"benchmark: kernel {self.lowered.name} has an argument named {clash[0]!r}, which "
                f"benchmark() reads as its own option; pass the arrays as one dict: "
                f"f.benchmark({{{', '.join(repr(n) + ': ...' for n in self._inputs)}}}, runs=10)")
        for what, v, least in (("runs", runs, 1), ("warmup", warmup, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < least:
                raise ArgumentError(f"benchmark: {what} must be an int >= {least}, got {v!r}")
        if isinstance(min_seconds, bool) or not isinstance(min_seconds, (int, float)) or \
                not min_seconds >= 0:
            raise ArgumentError(f"benchmark: min_seconds must be a number >= 0, got {min_seconds!r}")
        args, sizes, _ = self._prepare(arrays)
        for _ in range(warmup):
            self._run(args, sizes)
        times: list[float] = []
        start = time.perf_counter()
        while len(times) < runs or time.perf_counter() - start < min_seconds:
            t0 = time.perf_counter()
            self._run(args, sizes)
            times.append(time.perf_counter() - t0)
        return Timing(statistics.median(times), min(times), len(times), tuple(times))

    def __repr__(self) -> str:
        return f"<tdsl.Kernel {self.lowered.name}({', '.join(self.args)}) target={self.target}>"

    def _repr_html_(self) -> str:
        from ..display import code_html, details

        args = "".join(
            f"<li><code>{html.escape(a)}</code></li>" for a in self._describe_args())
        return (
            f"<div><b>tdsl kernel</b> <code>{html.escape(self.lowered.name)}</code> "
            f"(target {self.target}, built in {self.build_seconds * 1e3:.0f} ms)"
            f"<p>Arguments:</p><ul>{args}</ul>"
            + details("Loop nest", code_html(self.loop_nest, "nest"), True)
            + details("Generated code", code_html(self.source, "c" if self.target == "c" else "llvm"))
            + "</div>")

    def _describe_args(self) -> list[str]:
        from ..lower.printer import expr

        out = []
        for b in self.lowered.inputs + self.lowered.outputs:
            role = "input" if b.kind == "input" else "output"
            out.append(f"{b.name}: {role} {b.dtype.name}[{', '.join(expr(e) for e in b.shape)}]")
        out += [f"{n}: size (int)" for n in self._sizes]
        return out
