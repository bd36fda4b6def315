"""The exceptions tdsl raises for anything a user can cause.

Every message names the stage, loop or argument at fault and says what would
be valid. `assert` is kept for internal invariants only.
"""


import os
import traceback

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


class TdslError(Exception):
    """Root of every error tdsl raises on bad input.

    In IPython and Jupyter it shows as the calls of your own code that led to it and
    the message, without the frames inside tdsl (set `td.TdslError.internal_frames =
    True` to see them all, as an internal error, `InternalError`, always shows them)."""

    internal_frames = False

    def _render_traceback_(self) -> list[str]:
        """The traceback IPython shows: the frames outside tdsl, then the message."""
        frames = traceback.extract_tb(self.__traceback__)
        if not self.internal_frames:
            kept = [f for f in frames if not os.path.abspath(f.filename).startswith(_PACKAGE)]
            frames = traceback.StackSummary.from_list(kept or frames[:1])
        out = ["Traceback (most recent call last):\n" if frames else ""]
        out += traceback.format_list(frames)
        out += traceback.format_exception_only(type(self), self)
        return ["".join(out).rstrip("\n")]


class DefinitionError(TdslError):
    """The algorithm is malformed: a bad dimension, index, dtype or reduction."""


class ScheduleError(TdslError):
    """A schedule primitive names something that does not exist, or is illegal."""


class ArgumentError(TdslError):
    """A kernel was called with a missing, unknown or ill-shaped array, or a tdsl
    function with an argument it cannot take (an unknown target, a kernel name that
    is not a C identifier, a directory that cannot be written)."""


class CompileError(TdslError):
    """The native compiler rejected the generated code.

    `source_path` is where the generated source was kept; `log` is the
    compiler's own message.
    """

    def __init__(self, message: str, source_path: str | None = None, log: str = ""):
        super().__init__(message)
        self.source_path = source_path
        self.log = log


class InternalError(CompileError):
    """The lowering failed on a schedule it should have compiled: a bug of tdsl, caught
    at build time rather than as wrong code. The message names the analysis step and
    asks for the schedule to be reported; another schedule of the same algorithm (a
    different split, tile or compute_at) usually avoids it."""

    internal_frames = True  # an internal error: every frame helps whoever fixes it


class OutOfBoundsError(InternalError):
    """Generated code could access an array (an input, an output or a scratch buffer)
    outside its extent: an internal error of the lowering, caught at build time (the
    message names the buffer, the index and a point where it leaves the buffer)."""


class RuntimeFailure(TdslError):
    """Generated code reported a failure at run time (for example out of memory)."""


class TuningError(TdslError):
    """td.tune, its log or td.Schedule.from_log cannot do what was asked: a missing
    optional package, a malformed log, no record for a kernel."""


class MissingDependency(TdslError, ImportError):
    """An optional package a feature needs is not installed; the message names the
    pip extra that installs it (`pip install 'tdsl[notebook]'`)."""


class VectorizationWarning(UserWarning):
    """A loop the schedule vectorizes does not run as vector code; the message names
    the stage, the loop and why (`Kernel.vectorization` lists every vectorized loop).
    Silence it with `warnings.simplefilter("ignore", td.VectorizationWarning)`."""


class ChunkingError(ArgumentError):
    """A kernel cannot run over arrays chunked the way they are (`td.map_blocks`): a
    recurrence along a chunked dim, a reduction over one whose partial results may not be
    combined, an update whose points in a chunk are not a box. `dims` names the dims at
    fault; giving each of them one chunk (rechunking the inputs) always works.

        try:
            out = td.map_blocks(f, A=a)
        except td.ChunkingError as e:
            out = td.map_blocks(f, A=a.rechunk({a_axis_of(d): -1 for d in e.dims}))
    """

    def __init__(self, message: str, dims: tuple[str, ...] = ()):
        super().__init__(message)
        self.dims = tuple(dims)


class ChunkingWarning(UserWarning):
    """`td.map_blocks` runs a kernel chunk by chunk with less of its schedule than asked
    (the message says what and why); the answer is the same. Silence it with

        warnings.simplefilter("ignore", td.ChunkingWarning)
    """
