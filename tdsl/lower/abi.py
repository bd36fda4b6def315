"""The kernel ABI every target implements, and the one check of a call's arguments.

A lowered function becomes a native function

    int name(T0 *in0, ..., Tk *out0, ..., int64_t size0, ...)

arrays first (inputs, then outputs, in `LoweredFunc` order, each a pointer to
the first element of a C-contiguous array of the buffer's dtype), then the
sizes in `LoweredFunc.sizes` order. It returns a status (`STATUS`): 0, or a
failure that left the outputs unspecified: OUT_OF_MEMORY, or INDEX_OUT_OF_RANGE
when a data-dependent index of a plain tensor fell outside it (every such access
is clamped, so nothing is read or written outside an array, and the kernel runs
to its end). Host C, portable C and LLVM
kernels all follow it; the modules the backends return offer `call`
(arguments checked here first) and `run` (unchecked, for a caller that has
checked them already, as `Kernel` has through the algorithm's binding).

Unwinding, every target alike. Only a temp buffer on the heap (`ir.Storage.HEAP`,
see `may_fail`) can fail to be allocated; one on the stack or in a workspace
cannot. When one fails, the kernel frees every heap buffer it holds, the latest
allocated first, and returns OUT_OF_MEMORY. A parallel loop's task never returns
from the kernel: a failing iteration frees what it allocated and returns 1 from
its chunk, skipping the rest of it; the pool starts no chunk after it and returns
1, and the kernel unwinds the code around the loop as above.

Parallel loops run on tdsl's thread pool (`backend_c/pool.c`), the same for every
host target: a kernel calls

    int PARALLEL_FOR(int (*task)(int64_t lo, int64_t hi, void *env), void *env,
                     int64_t lo, int64_t hi)

with the function the outline pass made of the loop (`ir.Task`), which runs
iterations [lo, hi) of the loop on the values and buffers in `env` and returns 0,
or 1 when an iteration failed. The pool runs it on chunks of about trips /
(CHUNKS_PER_THREAD * threads) iterations (at least 1), smaller ones down to a single
iteration at the loop's end (so threads of equal speed finish together), taken from a
shared counter
by the calling thread and whichever of its workers are free, and returns when every
chunk taken has finished: a thread whose core is busy with another process holds
up the loop's end by the one small chunk it holds, and a thread that holds none
is never waited for. It returns the first failure and starts no chunk after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..errors import ArgumentError
from .ir import Allocate, Binary, Buffer, Const, Expr, LoweredFunc, Stmt, Storage, Var
from .rewrite import walk_stmts

CHUNKS_PER_THREAD = 8
PARALLEL_FOR = "tdsl_parallel_for"  # the thread pool's entry point, as kernels call it
OK = 0
OUT_OF_MEMORY = 1
INDEX_OUT_OF_RANGE = 3  # 2 is the portable entry point's refusal of a workspace
STATUS = {OK: "success", OUT_OF_MEMORY: "out of memory while allocating an intermediate buffer",
          INDEX_OUT_OF_RANGE: "a data-dependent index was out of its tensor's range (the "
                              "access read or wrote the nearest element instead)"}


def may_fail(s: Stmt) -> bool:
    """Whether running `s` may fail for want of memory: it allocates on the heap."""
    return any(isinstance(x, Allocate) and x.storage is Storage.HEAP for x in walk_stmts(s))


_INDEX_OPS: dict[str, Callable[[int, int], int]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b if b else 0,
    "mod": lambda a, b: a % b if b else 0,
    "pdiv": lambda a, b: a // b if b else 0,
    "pmod": lambda a, b: a % b if b else 0,
    "min": min,
    "max": max,
}


def evaluate_index(e: Expr, sizes: dict[str, int]) -> int | None:
    """The value of an index expression of sizes and constants; None when it uses
    anything else."""
    match e:
        case Const(value=value):
            return int(value)
        case Var(name=name):
            return sizes.get(name)
        case Binary(op=op, a=a, b=b) if op in _INDEX_OPS:
            x, y = evaluate_index(a, sizes), evaluate_index(b, sizes)
            return None if x is None or y is None else _INDEX_OPS[op](x, y)
    return None


def element_count(shape: tuple[Expr, ...], sizes: dict[str, int]) -> int | None:
    """The number of elements of a buffer of `shape` for these sizes (None when a shape
    is beyond `evaluate_index`)."""
    count = 1
    for extent in shape:
        value = evaluate_index(extent, sizes)
        if value is None:
            return None
        count *= max(value, 0)
    return count


def check_call(func: LoweredFunc, arrays: Sequence[object], sizes: Sequence[int]) -> None:
    """Raise ArgumentError unless `arrays` and `sizes` are a valid call of `func`."""
    buffers = func.inputs + func.outputs
    if len(arrays) != len(buffers) or len(sizes) != len(func.sizes):
        raise ArgumentError(
            f"{func.name} takes {len(buffers)} arrays "
            f"({', '.join(b.name for b in buffers)}) and {len(func.sizes)} sizes "
            f"({', '.join(v.name for v in func.sizes)}); "
            f"got {len(arrays)} arrays and {len(sizes)} sizes")
    values = {v.name: int(s) for v, s in zip(func.sizes, sizes, strict=True)}
    for array, buf in zip(arrays, buffers, strict=True):
        _check_array(array, buf, values, func.name)


def _check_array(array: object, buf: Buffer, sizes: dict[str, int], kernel: str) -> None:
    where = f"{kernel}: argument {buf.name!r}"
    if not isinstance(array, np.ndarray):
        raise ArgumentError(f"{where} must be a numpy array, got {type(array).__name__}")
    if array.dtype != buf.dtype.np:
        raise ArgumentError(f"{where} must have dtype {buf.dtype.name}, got {array.dtype}")
    if not array.flags.c_contiguous:
        raise ArgumentError(f"{where} must be C-contiguous (np.ascontiguousarray makes a copy)")
    if buf.kind == "output" and not array.flags.writeable:
        raise ArgumentError(f"{where} is an output and must be writeable")
    count = element_count(buf.shape, sizes)
    if count is not None and array.size != count:
        raise ArgumentError(f"{where} must have {count} elements, got {array.size}")
