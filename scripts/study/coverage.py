#!/usr/bin/env python3
"""How often the ladder's 95% intervals hold the truth, at 2, 3 and 5 seeds: simulated
ladders whose curves are chosen, each run through the ladder analysis itself
(src/sweep/ladder_analysis.h, by the build's xsagpt_ladder_analysis), counting the
ladders whose interval holds the true multiplier at the top rung, at every rung, and
the true trend. docs/sweeps-and-plots.md records the result and this command.

Why: with 2 seeds the paired bootstrap has only 3 distinct draws (both seeds once, one
of them twice, the other twice), so its spread is that of three refits, not of a
distribution; whether its interval still holds the truth 95% of the time is a question
for simulation. (For a figure linear in the seeds it must: the replicates' standard
deviation is then |d| / (2 sqrt 2), d the two seeds' difference, and t(0.975, 1) sqrt 2
of them is the paired t interval with one degree of freedom, exact for normal noise. The
multipliers and the trend are refits, not means; this measures them.)

The ladders are those of the C++ coverage test (tests/cpp/sweep/test_ladder_analysis.cpp):
4 rungs at 1e17..1e20 FLOPs, a baseline L = 1.8 + 1.2 (C/1e18)^-0.3 and a variant
1.8 + 1.0 (C/1e18)^-0.34 (a win that grows), each seed shifting both variants alike at a
rung (sd 0.01: its data order) and each run adding its own noise (sd 0.004); E fitted.

  .venv/bin/python scripts/study/coverage.py                        # 300 ladders per seed count
  .venv/bin/python scripts/study/coverage.py --seeds 2 3 5 12 --ladders 500 --noise 1 5
"""
import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
COMPUTES = [1e17, 1e18, 1e19, 1e20]
BASE = (1.8, 1.2, 0.3)  # E, excess loss at 1e18 FLOPs, alpha
VARIANT = (1.8, 1.0, 0.34)


class CoverageError(Exception):
    """A bad argument or a failed analysis; main() prints it and exits 2."""


def whole(low: int):
    """An argument type: an integer >= low."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {v}")
        return v
    return parse


def noise_multiple(text: str) -> float:
    """--noise: a finite multiple > 0 (at 0 every interval has no width, and a coverage read off
    them measures nothing)."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"expected a finite multiple of the noise > 0, got {text!r}")
    return v


def json_out(text: str) -> Path:
    """--json: a file in an existing folder, checked before the simulation, not after it."""
    path = Path(text)
    if path.is_dir() or not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: expected a file in an existing folder")
    return path


def law(p, c):
    E, excess, alpha = p
    return E + excess * (c / 1e18) ** -alpha


def true_multiplier(c: float) -> float:
    """The variant's compute over the baseline's to reach the variant's loss at c."""
    E, excess, alpha = BASE
    return c / (1e18 * ((law(VARIANT, c) - E) / excess) ** (-1 / alpha))


def true_slope() -> float:
    x = np.log(COMPUTES)
    y = np.log([true_multiplier(c) for c in COMPUTES])
    return float(np.polyfit(x, y, 1)[0])


def ladder(rng, seeds: int, noise: float) -> list:
    obs = []
    for s in range(seeds):
        for r, c in enumerate(COMPUTES):
            shift = rng.normal(0, 0.01 * noise)
            for name, p in (("base", BASE), ("variant", VARIANT)):
                obs.append({"variant": name, "rung": r, "seed": s, "compute": c,
                            "loss": law(p, c) + shift + rng.normal(0, 0.004 * noise)})
    return obs


def inside(ci, x) -> bool:
    return isinstance(ci, list) and ci[0] <= x <= ci[1]


def coverage(tool: Path, seeds: int, ladders: int, replicates: int, noise: float, rng) -> dict:
    batch = [{"observations": ladder(rng, seeds, noise), "baseline": "base", "variants": ["variant"], "bootstrap": replicates,
              "rng_seed": k} for k in range(ladders)]
    out = subprocess.run([str(tool)], input=json.dumps({"ladders": batch}), capture_output=True, text=True)
    if out.returncode != 0:
        raise CoverageError(f"{tool} failed (exit {out.returncode}): {out.stderr.strip()}")
    analyses = json.loads(out.stdout)["analyses"]
    slope = true_slope()
    top = rung_hits = rung_total = trend = counted = 0
    for a in analyses:
        rungs = [r["variants"]["variant"] for r in a["rungs"]]
        t = a["trend"]["variant"]
        if not isinstance(rungs[-1].get("multiplier_ci95"), list) or not isinstance(t.get("ci95"), list):
            continue
        counted += 1
        top += inside(rungs[-1]["multiplier_ci95"], true_multiplier(COMPUTES[-1]))
        for c, m in zip(COMPUTES, rungs):
            if isinstance(m.get("multiplier_ci95"), list):
                rung_total += 1
                rung_hits += inside(m["multiplier_ci95"], true_multiplier(c))
        trend += inside(t["ci95"], slope)
    dropped = sum(a["bootstrap"].get("dropped", 0) for a in analyses) / max(1, replicates * len(analyses))
    return {"seeds": seeds, "noise": noise, "ladders": ladders, "with_intervals": counted, "dropped": dropped,
            "top_rung": top / counted if counted else math.nan,
            "every_rung": rung_hits / rung_total if rung_total else math.nan,
            "trend": trend / counted if counted else math.nan}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    # Every argument is checked by its type, so that a bad one is refused by name (exit 2) before
    # anything is simulated.
    ap.add_argument("--seeds", type=whole(2), nargs="+", default=[2, 3, 5], help="seed counts to simulate (each >= 2)")
    ap.add_argument("--ladders", type=whole(1), default=300, help="simulated ladders per seed count")
    ap.add_argument("--replicates", type=whole(2), default=300, help="bootstrap replicates per ladder")
    ap.add_argument("--noise", type=noise_multiple, nargs="+", default=[1.0],
                    help="multiples (> 0) of the seeds' and runs' noise (sd 0.01 and 0.004) to simulate")
    ap.add_argument("--rng-seed", type=whole(0), default=2024, help="the simulation's seed (numpy; >= 0)")
    ap.add_argument("--json", type=json_out, help="also write the table as JSON here (a file in an existing folder)")
    args = ap.parse_args()
    tool = ROOT / os.environ.get("XSAGPT_BUILD_DIR", "build") / "xsagpt_ladder_analysis"
    if not tool.exists():
        print(f"coverage.py: {tool} not found: build the project first (scripts/setup.sh)", file=sys.stderr)
        return 2
    rng = np.random.default_rng(args.rng_seed)
    try:
        rows = [coverage(tool, s, args.ladders, args.replicates, k, rng) for k in args.noise for s in args.seeds]
    except CoverageError as e:
        print(f"coverage.py: error: {e}", file=sys.stderr)
        return 2
    print(f"coverage of the 95% bootstrap intervals over {args.ladders} simulated ladders per row "
          f"({args.replicates} replicates each, numpy seed {args.rng_seed}):")
    print(f"{'noise':>5} {'seeds':>5} {'with intervals':>14} {'replicates dropped':>18} {'top rung':>9} "
          f"{'every rung':>11} {'trend':>7}")
    for r in rows:
        print(f"{r['noise']:>5g} {r['seeds']:>5} {r['with_intervals']:>14} {r['dropped']:>18.3f} "
              f"{r['top_rung']:>9.3f} {r['every_rung']:>11.3f} {r['trend']:>7.3f}")
    if args.json:
        try:
            args.json.write_text(json.dumps(rows, indent=1) + "\n")
        except OSError as e:
            print(f"coverage.py: error: --json {args.json}: {e.strerror}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
