#!/usr/bin/env python3
"""The GPU verdict on xsagpt's fused kernels, in stages that fit a lent GPU's
10-minute command limit (`bash scripts/bench/bench_gpu.sh verdict` runs this).

A lent GPU comes rarely, for 15 minutes of device time, 10 minutes a command, and goes back
30 s after a call ends. So the verdict is a list of named stages, each bounded
(at most 6 minutes on a bare 16-core H200, the build included), whose results stay
in the results folder: running the same command again skips the stages already
done and does the next ones, so two or three calls in a row give the whole
verdict. A call starts no stage its remaining time cannot hold; every call ends by
printing the table with what is known so far (scripts/bench/verdict_table.py), missing
cells `pending`, failed ones `FAILED (reason)`. A failing stage never hides the
others' results. Nothing large is kept: parity runs' checkpoints live in a scratch
folder only until their parameter differences are taken, and the results folder
holds only text and JSON, so its bundle (in $OUT when the device tool sets it)
stays under 1 MiB; the bundler refuses anything else. Each stage's processes run in a
group of their own and are killed with the call, by a signal or kill -9
(verdict/procs.py).

    python3 scripts/bench/bench_verdict.py [--cpu-dry-run] [--budget S] [--only a,b] [--retry-failed] [--sanitizer]

With --cpu-dry-run the same stages run here at tiny sizes (the CUDA tests skip,
nothing is decided), into out/gpu-dry-run/. XSAGPT_VERDICT_BREAK=STAGE breaks that
stage on purpose (its run gets an invalid setting), to see the others survive.
"""
import argparse
import sys

# The verdict's modules, in the package beside this file (verdict/__init__.py lists them).
from verdict import cli
from verdict.schedule import Verdict


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.arguments(ap, 540, "preflight always runs")
    ap.add_argument("--sanitizer", action="store_true", help="add compute-sanitizer (memcheck, racecheck) over the "
                                                             "kernel tests")
    args = ap.parse_args()
    v = cli.open_results(Verdict, args, 540)
    sys.exit(v.call(args.only, args.retry_failed, args.sanitizer))


if __name__ == "__main__":
    main()
