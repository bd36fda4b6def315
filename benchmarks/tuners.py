"""tdsl's auto-scheduler and tuner against Halide's autoschedulers and TVM's MetaSchedule.

One command, for a quiet machine (nothing else running: the tuners measure, and
every figure is a ratio of two timings):

    pip install -e '.[bench]'                  Halide 21 (its autoschedulers are plugins
                                               of the wheel), TVM 0.27, XGBoost
    python benchmarks/tuners.py                about 2 to 4 hours on 2 cores
    python benchmarks/tuners.py --quick        tiny sizes, 8 trials: checks that every
                                               part runs (a few minutes), no figures

It runs, each step in processes of its own, for the six kernels that have Halide
and TVM versions (sgemm 1024^3, conv2d, blur, softmax, layernorm, depthwise):

1. `tune.py --tuners tdsl tvm-ms --trials 64`: td.tune on C and LLVM, and
   MetaSchedule's tune_tir, each with 64 measured trials on this machine (the trials
   go to benchmarks/tuned.jsonl, MetaSchedule's database to benchmarks/.metaschedule/,
   the wall times to benchmarks/tuning_times.jsonl);
2. `trials.py`: 16 trials of the cost model against the 64 of the search before it,
   the two winners re-timed side by side;
3. `run.py --rounds 3` on those kernels with the peers that matter here: tdsl's hand
   schedules, `auto` (td.autoschedule) and `tuned` (td.Schedule.from_log of the log
   step 1 wrote) on both targets, numpy, Halide and TVM by hand, Halide's Mullapudi2016,
   Adams2019 and Li2018, and MetaSchedule's result; then the tuning wall times.

Everything prints as markdown, ready to paste; `--skip-tuning` reuses what step 1
recorded on this machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNELS = ("sgemm-1024", "conv2d", "blur", "softmax", "layernorm", "depthwise")
PEERS = ("tdsl-c", "tdsl-llvm", "tdsl-c-auto", "tdsl-llvm-auto", "tdsl-c-tuned",
         "tdsl-llvm-tuned", "numpy", "halide", "tvm", "halide-mullapudi2016",
         "halide-adams2019", "halide-li2018", "tvm-ms")


def step(title: str, cmd: list[str]) -> int:
    print(f"\n## {title}\n\n`{' '.join(Path(c).name if c.endswith('.py') else c for c in cmd[1:])}`"
          "\n", flush=True)
    return subprocess.run(cmd, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--kernels", nargs="+", choices=KERNELS, default=list(KERNELS))
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--skip-tuning", action="store_true")
    p.add_argument("--skip-trials", action="store_true", help="leave out the 16-vs-64 step")
    args = p.parse_args(argv)
    py = sys.executable
    quick = ["--quick"] if args.quick else []
    trials = ["--trials", str(8 if args.quick else args.trials)]
    failed = 0
    if not args.skip_tuning:
        failed |= step("Tuning: td.tune and MetaSchedule", [
            py, str(HERE / "tune.py"), "--kernels", *args.kernels, "--tuners", "tdsl", "tvm-ms",
            *trials, *quick])
    if not args.skip_trials:
        few = ["--few", "4", "--many", "8"] if args.quick else []
        failed |= step("16 trials against 64", [
            py, str(HERE / "trials.py"), "--kernels", *args.kernels, *few, *quick])
    rounds = ["--rounds", "1"] if args.quick else ["--rounds", "3"]
    failed |= step("Against Halide's autoschedulers and MetaSchedule", [
        py, str(HERE / "run.py"), "--kernels", *args.kernels, "--peers", *PEERS, "--markdown",
        *rounds, *quick])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
