"""Random algorithms as plain data ("specs"), reproducible from (seed, index).

A spec is a JSON-able dict: sizes, dims with extents, inputs, stages (computes
and updates) whose expressions are nested lists, the outputs, the seed of the
input arrays and (filled in later by `schedgen`) the schedule as a list of
`[method, args, kwargs]` calls. `render.program` turns a spec into tdsl code;
nothing here imports tdsl, so generating is cheap and cannot crash.

Expression nodes (first element names the node):

    ["c", value, dtype|None]        constant (None: a Python scalar)
    ["d", dim]                      a dim used as a value (int32)
    ["a", tensor, view, [idx...]]   an access; view None | "clamp" | "mirror" |
                                    "mirror_interior" | "wrap" | "assume_in_range" |
                                    ["pad", v]
    ["b", op, x, y]                 + - * / // % & | ^ max min
    ["u", op, x]                    neg invert abs
    ["f", fn, x]                    exp log sqrt sin cos tanh floor ceil
    ["cmp", op, x, y]               < <= > >= == !=
    ["w", cond, x, y]               td.where
    ["cast", dtype, x]
    ["r", op, body, over, dtype]    td.sum/prod/max/min/argmax/argmin; over
                                    [[dim, lo, hi]...] (lo None: an extent) or
                                    ["infer", dim]; op foldmax/foldmin: the index of a
                                    value-and-index td.reduce (dtype: the body's); a
                                    sixth element names the reduction (a stage)
    ["h", helper, x, arg]           isnan isinf (no arg); satcast (arg: the dtype of
                                    td.saturating_cast); pow (arg: an int exponent)
    ["i", text]                     an affine index/bound written out (y + 1)

A compute stage made by `genexpr.make_grouped` also carries "grouped": the names
of its row, column and two reduction dims, for `schedgen.group_tile`.

Floats carry an "exact" flag while generating: an expression is exact when
every backend must give numpy's bits (inputs, constants, min/max, casts,
comparisons of exact operands). Discontinuous operations (comparisons, floor,
`//`, `%`, casts to int or bool) only take exact operands, so a float rounding
difference (FMA contraction, a reassociated sum, libm against numpy) can never
flip a branch and be mistaken for a wrong answer.
"""

from __future__ import annotations

import numpy as np

try:  # numpy's bfloat16
    import ml_dtypes  # noqa: F401

    NARROW: tuple[str, ...] = ("float16", "bfloat16")
except ImportError:
    NARROW = ("float16",)
DTYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
          "uint64", "bool", *NARROW)
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOATS = ("float32", "float64")
AWKWARD = (1, 1, 2, 3, 4, 5, 7, 8, 11, 13, 16, 17, 31)
MATH = ("exp", "log", "sqrt", "sin", "cos", "tanh", "floor", "ceil")


def promote(a: str, b: str) -> str:
    """numpy's result dtype of a binary operation on arrays of dtypes a and b."""
    return np.result_type(np.zeros(0, a), np.zeros(0, b)).name


def kind(d: str) -> str:
    return "f" if d in NARROW else np.dtype(d).kind


class Gen:
    """One random algorithm; `spec()` is the result."""

    def __init__(self, rng: np.random.Generator, max_stages: int = 5, exclude=()):
        self.rng = rng
        # the draws of the generator's later corners (edge constants and values, checked
        # accesses beside affine ones past the edge, mixed-sign comparisons, empty
        # ranges, argmax, named reductions under helpers) come from a stream of their
        # own, so that adding them left every other draw of a case as it was
        self.corners = np.random.default_rng(rng.bit_generator.seed_seq.spawn(1)[0])  # type: ignore[attr-defined]
        self.exclude = set(exclude)
        self.max_stages = max_stages
        self.sizes: dict[str, int] = {}
        self.dims: dict[str, str | int] = {}
        self.tensors: dict[str, dict] = {}  # name -> {dims, dtype, exact, kind}
        self.inputs: list[dict] = []
        self.stages: list[dict] = []
        self.n_red = 0
        self.private = {"v"}  # dims only their own tensors use (a lut's, a grouped product's)
        self.tol = 1.0  # growth of float error: reductions and math calls multiply it

    # -------------------------------------------------------------- helpers

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def corner(self, p: float) -> bool:
        """Whether to take one of the later corners (drawn from `corners`)."""
        return bool(self.corners.random() < p)

    def corner_pick(self, seq):
        return seq[int(self.corners.integers(len(seq)))]

    def ext(self, d: str):
        return self.dims[d]

    def ext_code(self, d: str) -> str:
        e = self.dims[d]
        return e if isinstance(e, str) else str(e)

    def ext_value(self, d: str) -> int:
        e = self.dims[d]
        return self.sizes[e] if isinstance(e, str) else e

    # -------------------------------------------------------------- shapes

    def make_dims(self) -> None:
        names = ["y", "x", "c"][: int(self.rng.integers(1, 4))]
        for n, d in enumerate(names):
            value = self.pick(AWKWARD)
            if self.chance(0.4):
                size = "HWC"[n]
                self.sizes[size] = value
                self.dims[d] = size
            else:
                self.dims[d] = value
        if len(names) >= 2 and self.chance(0.3):  # square: triangles and transposes fit
            self.dims[names[1]] = self.dims[names[0]]

    def some_dims(self) -> list[str]:
        names = self.data_dims()
        if len(names) == 1 or self.chance(0.5):
            return names
        keep = [d for d in names if self.chance(0.6)] or [self.pick(names)]
        return keep

    def make_inputs(self) -> None:
        for n in range(int(self.rng.integers(1, 4))):
            dtype = self.pick(DTYPES) if self.chance(0.6) else self.pick(("float32", "int32"))
            self.add_tensor(f"in{n}", self.some_dims(), dtype, True, "input")
        if self.chance(0.35):
            self.sizes.setdefault("L", self.pick((1, 3, 5, 16)))
            self.dims["v"] = "L" if self.chance(0.5) else self.sizes["L"]
            self.add_tensor("lut", ["v"], self.pick(DTYPES), True, "input")

    def add_tensor(self, name, dims, dtype, exact, role) -> None:
        self.tensors[name] = {"dims": list(dims), "dtype": dtype, "exact": exact, "role": role}
        if role == "input":
            self.inputs.append({"name": name, "dims": list(dims), "dtype": dtype})

    def data_dims(self) -> list[str]:
        return [d for d in self.dims if d not in self.private]

    # -------------------------------------------------------------- spec

    def spec(self) -> dict:
        self.make_dims()
        self.make_inputs()
        from .genexpr import make_grouped, make_stage

        count, first = int(self.rng.integers(1, self.max_stages + 1)), 0
        grouped = "grouped" not in self.exclude and self.chance(0.12)
        last = grouped and self.chance(0.5)  # the output, else read by what follows
        if grouped:
            count -= 1
        if grouped and not last:
            first = make_grouped(self, 0)
        for n in range(first, first + count):
            make_stage(self, f"s{n}")
        if last:
            make_grouped(self, first + count)
        computes = [s["name"] for s in self.stages if s["kind"] == "compute"]
        outputs = [computes[-1]]
        if len(computes) >= 2 and self.chance(0.15) and "multi-output" not in self.exclude:
            outputs.insert(0, self.pick(computes[:-1]))
        return {
            "sizes": self.sizes, "dims": self.dims, "inputs": self.inputs,
            "stages": self.stages, "outputs": outputs,
            "array_seed": int(self.rng.integers(2**31)), "special_values": self.chance(0.2) and "special-values" not in self.exclude,
            "edge_values": self.corner(0.25),
            "tol": min(self.tol, 1e6), "schedule": [],
        }


# Features a campaign may leave out (`--exclude`), e.g. while a known bug in
# them is being fixed: the rest of each case stays as it would have been drawn.
FEATURES = ("pad-data-index", "nested-reduction", "update", "multi-output", "special-values",
            "grouped")


def generate(seed: int, index: int, max_stages: int = 5, exclude=()) -> dict:
    """The algorithm of case `index` of a campaign with `seed` (no schedule yet)."""
    rng = np.random.default_rng([seed, index])
    return Gen(rng, max_stages, exclude).spec()
