"""The command line both entry points share (bench_verdict.py, lease.py): the options,
checked by name before anything runs, and opening the results folder."""
import argparse
import math
import pathlib
import shutil
import sys

from .ledger import DRY_BUDGET, results_dir, scratch_dir
from .state import StateDamaged


def seconds(text: str) -> float:
    """A --budget: a positive, finite number of seconds (0 or less would start nothing
    and end as if there were nothing to do)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def stage_names(text: str) -> list[str]:
    """An --only: comma-separated stage names, none empty (an empty list would mean every stage)."""
    names = [s.strip() for s in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated stage names, got {text!r}")
    return names


def arguments(ap: argparse.ArgumentParser, budget: float, always: str) -> None:
    """The options both entry points take; `budget` is the default on the device."""
    ap.add_argument("--cpu-dry-run", action="store_true", help="the same stages at tiny sizes on this CPU")
    ap.add_argument("--budget", type=seconds,
                    help=f"seconds this call may spend on stages, more than 0 (default {budget:.0f}: a 600 s command "
                         f"with time to bundle; with --cpu-dry-run {DRY_BUDGET}, no device limit to keep)")
    ap.add_argument("--only", type=stage_names, default=[],
                    help=f"comma-separated stage names to consider ({always})")
    ap.add_argument("--retry-failed", action="store_true", help="run stages that failed in an earlier call again")
    ap.add_argument("--reset", action="store_true", help="forget every earlier stage result first (deletes the "
                                                         "results folder and its scratch folder)")
    ap.add_argument("--out", type=pathlib.Path, help="results folder (default out/gpu, or out/gpu-dry-run); "
                                                      "checkpoints go to a sibling ending in -scratch")


def open_results(cls, args, budget: float):
    """A `cls` (schedule.Verdict) on the results folder args name, after --reset; its
    signal handler installed. A damaged stages.json, or a folder that cannot be made,
    ends the program here, exit 2."""
    args.budget = args.budget if args.budget is not None else DRY_BUDGET if args.cpu_dry_run else budget
    if args.reset:
        res = results_dir(args)
        shutil.rmtree(res, ignore_errors=True)
        shutil.rmtree(scratch_dir(res), ignore_errors=True)
    try:
        v = cls(args)
    except StateDamaged as e:
        print(f"{pathlib.Path(sys.argv[0]).name}: {e}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:  # the folder cannot be made (a file in its place, no permission)
        print(f"{pathlib.Path(sys.argv[0]).name}: results folder {results_dir(args)}: {e.strerror or e}",
              file=sys.stderr)
        sys.exit(2)
    v.procs.stop_on_signals()
    return v
