"""A standing differential fuzzer for tdsl: random pipelines x random schedules
x awkward sizes, each run in a worker process with a time limit and judged
against `td.evaluate`.

    python -m tdsl.fuzz --minutes 10 --target c     # or --target llvm, --jobs 2, --sanitize

Modules, in the order a trial meets them: `gen`/`genexpr` (a random algorithm as
plain data, from (seed, index)), `render` (that data as tdsl code, and
standalone reproducers), `schedgen` (random primitives, in the worker),
`case` (build, call, compare: the outcome classes), `oracle` (tolerances),
`sanitize` (ASan+UBSan builds of host and portable C), `pool` (workers with
time limits), `shrink`, `campaign` (log, findings, summary) and `replay`
(reproducers back into the fuzzer, and into tests/fuzz_regressions/).
Only tdsl's public API is used.
"""

from .campaign import Options, Summary, run
from .case import CLASSES, FAILURES

__all__ = ["CLASSES", "FAILURES", "Options", "Summary", "run"]
