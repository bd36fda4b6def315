"""`python -m tdsl.fuzz`: run a differential fuzz campaign, replay a finding, or
promote a fixed finding to a regression test.

    python -m tdsl.fuzz --minutes 10 --target c [--jobs 2] [--sanitize] [--out DIR]
    python -m tdsl.fuzz --replay fuzz-findings/wrong-c-seed0-case12.py [--target llvm]
    python -m tdsl.fuzz --triage fuzz-findings/*.py --target c
    python -m tdsl.fuzz --promote fuzz-findings/wrong-c-seed0-case12.py
"""

from __future__ import annotations

import argparse
import sys

from .campaign import Options, run
from .gen import FEATURES


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tdsl.fuzz", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", choices=("c", "llvm"), default="c")
    p.add_argument("--seed", type=int, default=0, help="campaign seed (case i is (seed, i))")
    p.add_argument("--minutes", type=float, help="time budget for trials")
    p.add_argument("--trials", type=int, help="number of trials")
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--sanitize", action="store_true",
                   help="also build every 4th case's host C and portable C with ASan+UBSan")
    p.add_argument("--sanitize-every", type=int, default=4, metavar="N")
    p.add_argument("--out", default="fuzz-findings", help="log and reproducers (default %(default)s)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per case, build included")
    p.add_argument("--max-stages", type=int, default=5)
    p.add_argument("--auto-every", type=int, default=3, metavar="N",
                   help="schedule every Nth case with td.autotemplate, its knobs set at random "
                        "(the candidates td.tune tries); 0: never (default %(default)s)")
    p.add_argument("--shrink", type=int, default=5, help="distinct findings to shrink (0: none)")
    p.add_argument("--shrink-seconds", type=float, default=240.0, help="budget per finding")
    p.add_argument("--exclude", action="append", default=[], choices=FEATURES,
                   help="leave a generator feature out (e.g. while a known bug in it is fixed)")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--replay", metavar="FILE", help="run a reproducer in a worker; print its class")
    p.add_argument("--triage", metavar="FILE", nargs="+",
                   help="replay findings with each generator feature left out in turn")
    p.add_argument("--promote", metavar="FILE",
                   help="copy a reproducer that now passes on both targets to tests/fuzz_regressions/")
    return p


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    if a.replay or a.promote or a.triage:
        from .replay import promote, replay, triage

        if a.triage:
            return triage(a.triage, a.target, a.timeout)
        if a.replay:
            return replay(a.replay, a.target, a.timeout)
        return promote(a.promote, a.timeout)
    if a.minutes is None and a.trials is None:
        a.minutes = 10.0
    opts = Options(target=a.target, seed=a.seed, minutes=a.minutes, trials=a.trials,
                   jobs=a.jobs, sanitize=a.sanitize, sanitize_every=a.sanitize_every,
                   out=a.out, timeout=a.timeout, max_stages=a.max_stages, shrink=a.shrink,
                   shrink_seconds=a.shrink_seconds, quiet=a.quiet, exclude=tuple(a.exclude),
                   auto_every=a.auto_every)
    summary = run(opts)
    bad = sum(summary.counts[c] for c in ("wrong", "crashed", "timed out", "error", "sanitizer"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
