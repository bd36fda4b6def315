"""The Kernel object that `td.build` returns.

All argument checking happens in Python before native code runs; the
backend module only ever sees C-contiguous arrays of the exact dtypes and
shapes the generated code assumes.
"""

from __future__ import annotations

import heapq
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..compute.binding import aligned_empty, allocate_outputs, bind_arguments
from ..compute.evaluate import evaluate
from ..compute.work import flops
from ..display import code_html, details, escape, rate_text, seconds_text, table
from ..errors import ArgumentError, RuntimeFailure
from ..lower import ir
from ..lower.abi import INDEX_OUT_OF_RANGE, STATUS
from ..lower.vectors import VectorReport, report

# Handlers of calls whose arrays are not numpy's (dask arrays, xarray objects): each
# takes (kernel, arrays) and returns the result, or NotImplemented to pass. tdsl.chunked
# registers one, so that the runtime needs no import of the layers above it.
FOREIGN: list = []
# a kernel's page shows its loop nest open when it has at most this many lines
NEST_OPEN_LINES = 30


@dataclass(frozen=True)
class Timing:
    """Wall-clock seconds per call: median and minimum over `runs` timed calls (`times`
    has each), and the work one call does when it is known: `flops`, the floating-point
    operations of the algorithm (see `tdsl.compute.work`), and `elements`, the output
    elements it writes. `rate` is the work per second of the median.

        t = f.benchmark(A=a, B=b, runs=20)
        t.median, t.min     # seconds
    """

    median: float
    min: float
    runs: int
    times: tuple[float, ...]
    flops: float | None = None
    elements: int | None = None

    @property
    def max(self) -> float:
        """The slowest timed call."""
        return max(self.times) if self.times else self.min

    @property
    def rate(self) -> tuple[float, str] | None:
        """(work per second, unit): FLOP/s when the algorithm does float arithmetic,
        else output elements/s; None when neither is known."""
        if self.median <= 0:
            return None
        if self.flops:
            return self.flops / self.median, "FLOP/s"
        if self.elements:
            return self.elements / self.median, " elements/s"
        return None

    @property
    def gflops(self) -> float | None:
        """Billions of floating-point operations per second at the median, if known."""
        return self.flops / self.median / 1e9 if self.flops and self.median > 0 else None

    def __repr__(self) -> str:
        rate = self.rate
        tail = "" if rate is None else f", {rate_text(*rate)}"
        return (f"Timing(median={self.median * 1e3:.3f} ms, min={self.min * 1e3:.3f} ms, "
                f"max={self.max * 1e3:.3f} ms, runs={self.runs}{tail})")

    def _repr_html_(self) -> str:
        """In Jupyter: median, spread (min..max), runs and the rate when the work is known."""
        rate = self.rate
        tail = "" if rate is None else f" &middot; <b>{escape(rate_text(*rate))}</b>"
        return (f"<div><b>{seconds_text(self.median)}</b> median per call "
                f"(spread {seconds_text(self.min)} .. {seconds_text(self.max)} over {self.runs} "
                f"runs){tail}</div>")


# Outputs a call allocates start on a cache line from this many bytes on (smaller ones
# as numpy allocates them: `binding.new_array`)
ALIGNED_OUTPUT_BYTES = 4096
PLANS = 8  # argument signatures a kernel remembers


# What a plan's `run(arrays)` returns instead of the outputs: MISS when the arguments do
# not have its signature (another plan may have it), RECHECK when they have it but a
# given output may overlap another argument or is read-only (the full check then
# refuses the call, or allows an overlap-free interleaving np.may_share_memory cannot
# tell apart).
MISS, RECHECK = object(), object()


def _plan_function(slots: list, signature: dict, given: list[int], sizes: list[int],
                   outputs: list[int], names: dict) -> Callable:
    """`run(arrays)` of a plan, written out for its signature and buffers (as
    `dataclasses` writes its methods): `slots` has per buffer (inputs, then outputs) the
    argument's name, or the (shape, dtype) of a new output (aligned when of
    ALIGNED_OUTPUT_BYTES or more); `signature` maps each argument's name to its (type,
    dtype, shape, strides); `given` lists the buffers that are outputs the caller gave;
    `names` holds the entry point (`entry`), `from_buffer` (`fb`) and `failed`."""
    lines, args = ["def run(arrays):", f"    if len(arrays) != {len(signature)}:",
                   "        return MISS"], []
    for k, slot in enumerate(slots):
        if isinstance(slot, str):
            names[f"name{k}"] = slot
            kind, dtype, shape, strides = signature[slot]
            names.update({f"kind{k}": kind, f"dtype{k}": dtype, f"shape{k}": shape,
                          f"strides{k}": strides})
            lines.append(f"    b{k} = arrays.get(name{k})")
            lines.append(f"    if type(b{k}) is not kind{k} or b{k}.shape != shape{k} or "
                         f"b{k}.strides != strides{k} or (b{k}.dtype is not dtype{k} and "
                         f"b{k}.dtype != dtype{k}):")
            lines.append("        return MISS")
        else:
            names[f"shape{k}"], names[f"dtype{k}"] = slot
            nbytes = math.prod(slot[0]) * slot[1].itemsize
            how = "aligned_empty" if nbytes >= ALIGNED_OUTPUT_BYTES else "empty"
            lines.append(f"    b{k} = {how}(shape{k}, dtype{k})")
        args.append(f"b{k}")
    named = [k for k, slot in enumerate(slots) if isinstance(slot, str)]
    for k in given:
        others = " or ".join(f"overlap(b{k}, b{j})" for j in named if j != k)
        lines.append(f"    if not b{k}.flags.writeable{' or ' + others if others else ''}:")
        lines.append("        return RECHECK")
    numbers = ", ".join(str(int(n)) for n in sizes)
    lines.append(f"    status = entry({', '.join(f'fb({a})' for a in args)}"
                 f"{', ' if args and sizes else ''}{numbers})")
    lines.append(f"    if status:\n        failed(status, [{', '.join(args)}], [{numbers}])")
    result = ", ".join(f"b{k}" for k in outputs)
    lines.append(f"    return {result}" if len(outputs) == 1 else f"    return ({result},)")
    names.update(empty=np.empty, aligned_empty=aligned_empty, overlap=np.may_share_memory,
                 RECHECK=RECHECK, MISS=MISS)
    exec("\n".join(lines), names)  # the text is built above from ints and names only
    return names["run"]


def _settled(times: list[float], accuracy: float) -> bool:
    """Whether the three fastest of `times` are within `accuracy` of each other."""
    if len(times) < 3:
        return False
    fastest = heapq.nsmallest(3, times)
    return fastest[2] <= fastest[0] * (1 + accuracy)


class Kernel:
    """A compiled pipeline: call it with numpy arrays by name.

        f = td.build(td.schedule(C).tile(C, i=32, j=64))
        c = f(A=a, B=b)          # outputs allocated and returned
        f(A=a, B=b, C=c)         # or written into arrays given by name
        print(f.loop_nest)       # what was compiled; f.source is the C or LLVM IR

    `schedule`, `pipeline`, `lowered` (the loop nest IR), `target` ("c" or "llvm")
    and `build_seconds` record how it was built; `vectorization` says what became of
    each vectorized loop.
    """

    def __init__(self, schedule, func: ir.LoweredFunc, module, target: str, build_seconds: float,
                 vectorization: VectorReport | None = None):
        self.schedule = schedule
        self.pipeline = schedule.pipeline
        self.lowered = func
        self.target = target
        self.build_seconds = build_seconds
        self._module = module
        self._vectorization = vectorization
        self._inputs = [b.name for b in func.inputs]
        self._outputs = [b.name for b in func.outputs]
        self._sizes = [v.name for v in func.sizes]
        self._work: dict[tuple[tuple[str, int], ...], float | None] = {}
        # the plans of the signatures seen last, the latest first (`_remember`)
        self._plans: tuple[Callable[[dict], object], ...] = ()
        self._entry = module.entry
        self._from_buffer = module.from_buffer

    @property
    def args(self) -> list[str]:
        """Parameter names in call order: inputs, outputs, then sizes."""
        return self._inputs + self._outputs + self._sizes

    @property
    def source(self) -> str:
        """The generated C or LLVM IR."""
        return self._module.source

    @property
    def vectorization(self) -> VectorReport:
        """What became of each vectorized loop: its lanes and chunks, and how each load
        and store is done (contiguous, broadcast, strided, gather), or why it does not
        run as vector code. `print(f.vectorization)`:

            C: loop j_i (8 copies): vectorized, 16 lanes (1 broadcast, 3 contiguous)
        """
        if self._vectorization is None:
            from ..lower import finish

            self._vectorization = report(finish(self.lowered))
        return self._vectorization

    @property
    def loop_nest(self) -> str:
        """The compiled loop nest as text, as `td.lower` prints it."""
        return str(self.lowered)

    def _prepare(self, kwargs, remember: bool = True
                 ) -> tuple[list[np.ndarray], list[int], dict[str, np.ndarray]]:
        bound = bind_arguments(self.pipeline, kwargs)
        outs = allocate_outputs(self.pipeline, bound, ALIGNED_OUTPUT_BYTES)
        arrays = [bound.inputs[n] for n in self._inputs] + [outs[n] for n in self._outputs]
        sizes = [bound.sizes[n] for n in self._sizes]
        if remember and all(a is kwargs.get(n) for n, a in zip(self._inputs, arrays)):
            self._remember(kwargs, bound.outputs, arrays, sizes)
        return arrays, sizes, outs

    def _remember(self, kwargs: dict, given: dict, arrays: list[np.ndarray],
                  sizes: list[int]) -> None:
        """Keep the plan of this call's signature, its arguments having passed every
        check and needed no copy: a function that does what the call did for any
        arguments with the same names, types, dtypes, shapes and strides."""
        try:
            signature = {n: (type(v), v.dtype, v.shape, v.strides) for n, v in kwargs.items()}
        except AttributeError:  # a size given as an int, an output given as None
            return
        slots: list[str | tuple] = []
        for k, name in enumerate(self._inputs + self._outputs):
            slots.append(name if name in kwargs else (arrays[k].shape, arrays[k].dtype))
        outputs = list(range(len(self._inputs), len(slots)))
        mine = [k for k in outputs if given.get(self._outputs[k - len(self._inputs)]) is not None]
        names = {"entry": self._entry, "fb": self._from_buffer, "failed": self._failed}
        run = _plan_function(slots, signature, mine, sizes, outputs, names)
        self._plans = (run, *self._plans[:PLANS - 1])

    def profile(self, *positional, runs: int = 3, **arrays):
        """Where this kernel's time goes: a `Profile` of the time per call of each stage
        (exclusive: its producers computed inside it are their own rows) and of each
        parallel loop (its wall time and how busy its threads were), measured over
        `runs` calls on these arrays (as for `benchmark`: by name, or one dict).

            p = f.profile(A=a, B=b)
            print(p)            # a table; in Jupyter, with a bar per row
            p.by_stage()        # {"C": 0.0021, "Bp": 0.0003, ...} seconds
            p.plot()            # a matplotlib bar chart

        The times come from a second build of the kernel with clock reads around each
        stage's loop nest and each parallel loop (made once, on first use); this kernel
        is not changed, and `p.plain` is its own time for comparison (the clock reads
        cost a little: `p.total` is the instrumented kernel's time). Inside a parallel
        loop, the stages share the loop's wall time in proportion to their threads' time.
        A producer computed inside a loop that runs very many times (more than 32768 per
        call) is timed together with its consumer, as one row naming both."""
        from .profile import profile_kernel

        if len(positional) == 1 and isinstance(positional[0], dict) and not arrays:
            arrays, positional = dict(positional[0]), ()
        self._positional(positional)
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise ArgumentError(f"profile: runs must be an int >= 1, got {runs!r}")
        return profile_kernel(self, arrays, runs)

    def work(self, **sizes: int) -> float | None:
        """Floating-point operations of one call with these symbolic sizes (None when
        a domain's size is not known): the work `benchmark`'s rate is measured by."""
        key = tuple(sorted(sizes.items()))
        if key not in self._work:
            self._work[key] = flops(self.pipeline, sizes)
        return self._work[key]

    def _run(self, arrays, sizes) -> None:
        status = self._module.run(arrays, sizes)  # checked by bind_arguments
        if status:
            self._failed(status, arrays, sizes)

    def _failed(self, status: int, arrays, sizes) -> None:
        """Raise the error of a call that returned `status` (not 0)."""
        if status == INDEX_OUT_OF_RANGE:
            raise self._index_error(arrays, sizes)
        raise RuntimeFailure(
                f"kernel {self.lowered.name} failed: {STATUS.get(status, f'status {status}')}")

    def _index_error(self, arrays, sizes) -> ArgumentError:
        """The call's data has a data-dependent index out of range: td.evaluate on the
        same inputs names the tensor, the index and the first point in order."""
        inputs = dict(zip(self._inputs, arrays))
        try:
            evaluate(self.pipeline.outputs, **inputs, **dict(zip(self._sizes, sizes)))
        except ArgumentError as e:
            return ArgumentError(f"kernel {self.lowered.name}: {e}")
        return ArgumentError(f"kernel {self.lowered.name}: {STATUS[INDEX_OUT_OF_RANGE]}")

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
        """Run the kernel on arrays given by name; returns the output(s). An output not
        passed by name is allocated; one of 4 KiB or more (`ALIGNED_OUTPUT_BYTES`)
        starts on a 64-byte boundary (a cache line: a vector load or store of a row then
        never straddles two lines; numpy's own arrays are only 16-byte aligned).

        Every argument is checked before native code runs (`bind_arguments`). What
        depends only on the arguments' names, types, dtypes, shapes and strides (sizes,
        output shapes, which argument is which) is worked out at the first call with a
        signature and reused by later calls with the same one (a plan, `_remember`),
        which still
        check what can change between them: that given outputs are writeable and share
        no memory with the other arguments.

        Dask arrays run chunk by chunk and give dask arrays (`td.map_blocks`);
        `xarray.DataArray`s are matched to the inputs by dim name and give DataArrays."""
        if args:
            self._positional(args)
        plans = self._plans
        for run in plans:
            result = run(arrays)
            if result is MISS:
                continue
            if result is RECHECK:
                break
            if run is not plans[0]:  # the latest first
                self._plans = (run, *(p for p in self._plans if p is not run))
            return result
        else:
            result = None
            for handler in FOREIGN:
                handled = handler(self, arrays)
                if handled is not NotImplemented:
                    return handled
        buffers, sizes, outs = self._prepare(arrays, remember=result is not RECHECK)
        self._run(buffers, sizes)
        result = tuple(outs[n] for n in self._outputs)
        return result[0] if len(result) == 1 else result

    def benchmark(self, *positional, runs: int = 10, warmup: int = 2, min_seconds: float = 0.0,
                  accuracy: float | None = None, **arrays) -> Timing:
        """Time calls with the given arrays (checked once): a `Timing` with the median, min
        and max over `runs`, and the work of a call (its float operations and output
        elements), so `timing.rate` is GFLOP/s-ready.

        `f.benchmark(a=A, b=B, runs=20)` calls the kernel `warmup` times, then at
        least `runs` times and for at least `min_seconds`.

        With `accuracy` (a fraction, e.g. 0.05), timing stops early: as soon as the
        three fastest calls so far (and at least `min_seconds`) are within `accuracy` of
        each other, the floor of the kernel's time is known well enough, and `runs`
        becomes the most calls made. This keeps an edit -> rebuild -> time cycle in a
        notebook short; `Timing.runs` tells how many calls were made.

            f.benchmark(A=a, B=b, warmup=1, accuracy=0.05)   # usually 3 to 5 calls

        A kernel whose arguments are named `runs`, `warmup`, `min_seconds` or `accuracy`
        takes its arrays as one dict instead: `f.benchmark({"runs": R, "b": B}, runs=20)`.
        """
        if len(positional) == 1 and isinstance(positional[0], dict) and not arrays:
            arrays, positional = dict(positional[0]), ()
        self._positional(positional)
        clash = [n for n in ("runs", "warmup", "min_seconds", "accuracy") if n in self.args]
        if clash and any(isinstance(v, np.ndarray) for v in (runs, warmup, min_seconds, accuracy)):
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
        if accuracy is not None and (isinstance(accuracy, bool) or not isinstance(
                accuracy, (int, float)) or not 0 < accuracy < 1):
            raise ArgumentError(
                f"benchmark: accuracy must be None or a fraction in (0, 1), e.g. 0.05, got {accuracy!r}")
        args, sizes, outs = self._prepare(arrays)
        for _ in range(warmup):
            self._run(args, sizes)
        times: list[float] = []
        start = time.perf_counter()
        while len(times) < runs or time.perf_counter() - start < min_seconds:
            t0 = time.perf_counter()
            self._run(args, sizes)
            times.append(time.perf_counter() - t0)
            if accuracy is not None and _settled(times, accuracy) and \
                    time.perf_counter() - start >= min_seconds:
                break
        named = dict(zip(self._sizes, sizes))
        elements = sum(int(outs[n].size) for n in self._outputs)
        return Timing(statistics.median(times), min(times), len(times), tuple(times),
                      flops=self.work(**named), elements=elements)

    def __repr__(self) -> str:
        return f"<tdsl.Kernel {self.lowered.name}({', '.join(self.args)}) target={self.target}>"

    def _repr_html_(self) -> str:
        """In Jupyter: the arguments, the loop nest and the generated code (collapsed)."""
        args = table([a.split(": ", 1) for a in self._describe_args()], ("argument", "kind"))
        return (
            f"<div><b>tdsl kernel</b> <code>{escape(self.lowered.name)}</code> "
            f"(target {escape(self.target)}, built in {self.build_seconds * 1e3:.0f} ms)"
            + details("Arguments", args, True)
            + self._nest_html()
            + self._vectorization_html()
            + details(f"Generated {'C' if self.target == 'c' else 'LLVM IR'}",
                      code_html(self.source, "c" if self.target == "c" else "llvm"))
            + "</div>")

    def _nest_html(self) -> str:
        """The loop nest, open only when it is short (an auto-scheduled kernel's runs to
        well over a hundred lines)."""
        lines = self.loop_nest.count("\n") + 1
        return details(f"Loop nest ({lines} lines)", code_html(self.loop_nest, "nest"),
                       lines <= NEST_OPEN_LINES)

    def _vectorization_html(self) -> str:
        """A section on the vectorized loops, open when one does not run as vector code."""
        report = self.vectorization
        if not len(report):
            return ""
        missed = len(report.missed)
        title = f"Vectorized loops ({len(report)}" + (f", {missed} not vectorized)" if missed
                                                       else ")")
        return details(title, f"<pre>{escape(str(report))}</pre>", missed > 0)

    def _describe_args(self) -> list[str]:
        from ..lower.printer import expr

        out = []
        for b in self.lowered.inputs + self.lowered.outputs:
            role = "input" if b.kind == "input" else "output"
            out.append(f"{b.name}: {role} {b.dtype.name}[{', '.join(expr(e) for e in b.shape)}]")
        out += [f"{n}: size (int)" for n in self._sizes]
        return out
