#!/usr/bin/env python3
"""Draws xsagpt's figures (PNG) from what `xsagpt train`, `sweep` and `analyze` write.

    python scripts/view/plot.py PATH... [--out DIR] [--smooth A] [--logx] [--ylim LO HI]

Each PATH is one of:
  run dir       (config.json + metrics.jsonl): loss_vs_step.png and loss_vs_tokens.png, the train
                and val loss of every run given, overlaid; val_gap.png, the second run's val loss
                minus the first's against tokens, when exactly two runs are given.
  sweep dir     (summary.json + a run dir per point): sweep_final.png, the final val loss against
                each swept numeric value (seeds averaged) with one line per variant (the shape of
                the paper's figures 3-5) above each variant minus the baseline; sweep_curves.png,
                the loss curves of each point, the variants together; sweep_variants.png, val loss
                against wall-clock time beside val loss against tokens, per variant the mean over
                seeds with their range shaded (sweeps summarised with variants).
                With the similarity bias in the runs' val lines (train.eval_similarity_sequences):
                sweep_similarity.png, cos(y_i, v_i) against tokens, a panel per layer (at most 6,
                evenly spaced), per variant the mean over seeds with their range shaded; with gated
                variants the same of each layer's mean gate tanh(alpha) below.
  run dir, also: similarity.png when the val lines carry the similarity bias: cos(y_i, v_i) of
                every layer against tokens and, for gated models, each layer's gate tanh(alpha),
                the mean over heads with their range shaded.
  analysis.json (from `xsagpt analyze`, or a dir holding one): analysis.png, value cosine
                similarity, diagonal attention a_ii and cos(y_i, v_i) (for XSA also cos(z_i, v_i))
                against layer index (the paper's figure 1).
A dir may be a run and hold an analysis.json; it then gets both. A run's variant is the sweep's name
for it, else config.json's "variant" (for older runs its attention keys: sa, xsa, "xsa layers=last 3",
"xsa gate=sa"); the baseline (the one summary.json names, else the first variant met) is drawn in
blues, the other variants in oranges, greens, purples, reds, ..., several runs of one variant in
shades of its colour. Figures go to DIR (default
<first PATH>/plots); each written path is printed. Every metrics.jsonl is read by
metrics_record.py, shared with track.py: a loss the trainer logged as null (not finite: the run
diverged) is left out of its curve, which ends at its last finite value, with a note on stderr,
so a diverged sweep point costs the other points none of their figures. A PATH that is none of
these, a run with no metrics yet, or a metrics.jsonl line with a value that is not what the
trainer writes (a step that is negative or past 2^63-1; a negative tokens or time_s; a loss, a time
or a layer's cos_y_v or xsa_gate that is no number or null, such as true) is an error (exit 2)
naming it, and the line and key. So is a literal NaN, Infinity or -Infinity (or 1e999) in any file
read (finite_json.py: xsagpt writes null), named by file and line, and a summary.json whose points
or ladder section have another shape than `xsagpt sweep` writes, named by the key's path. So is a figures folder that
cannot be made or written (under a file, under /proc, on a read-only disk), in one line naming
it; a figure is written whole or not at all (a temporary file renamed over its name).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import socket
import sys
from collections.abc import Iterable, Iterator

import matplotlib

matplotlib.use("Agg")  # files only: no display on training machines
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

# The modules beside this file: what is read, how it looks, and a module per figure.
from fig_analysis import analysis_figure  # noqa: E402
from fig_ladder import ladder_figure  # noqa: E402
from fig_loss import loss_figures  # noqa: E402
from fig_similarity import similarity_figure, sweep_similarity_figure  # noqa: E402
from fig_sweep import curves_figure, final_figure  # noqa: E402
from fig_variants import variants_figure  # noqa: E402
from out_folder import folder_problem  # noqa: E402
from plot_inputs import (PlotError, Run, Sweep, classify, load_analysis, load_run, load_sweep,  # noqa: E402
                         unique_labels)

DPI = 150


def run_figures(runs: list[Run], smooth: float | None, logx: bool, ylim) -> Iterator[tuple[str, Figure | None]]:
    """(file name, figure) of the runs given, each drawn when asked for; None: nothing to draw."""
    yield from loss_figures(runs, smooth, logx, ylim)
    yield "similarity.png", similarity_figure(runs)


def sweep_figures(sweep: Sweep, smooth: float | None, logx: bool, ylim) -> Iterator[tuple[str, Figure | None]]:
    """The same for a sweep: its final losses, and once a point has logged, its curves."""
    yield "sweep_final.png", final_figure(sweep)
    yield "sweep_ladder.png", ladder_figure(sweep)
    if sweep.runs:
        yield "sweep_curves.png", curves_figure(sweep, smooth, logx, ylim)
        if sweep.summary.get("variants"):
            yield "sweep_variants.png", variants_figure(sweep)
        yield "sweep_similarity.png", sweep_similarity_figure(sweep)


def save(figures: Iterable[tuple[str, Figure | None]], out_dir: pathlib.Path, prefix: str = "") -> None:
    """Writes each figure as it is drawn (one open at a time) and prints its path. A figure goes
    to a temporary file renamed over its name, so a write that fails (a full disk) leaves the
    figure drawn before, never a cut-off one; the temporary is this process's own (host and pid),
    as several processes sharing a sweep directory may draw its figures at once."""
    for name, fig in figures:
        if fig is None:
            continue
        path = out_dir / f"{prefix}{name}"
        tmp = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.tmp")
        try:
            fig.savefig(tmp, dpi=DPI, format="png")
            tmp.replace(path)
        except OSError as e:
            if tmp.is_file():
                tmp.unlink()
            raise PlotError(f"{path}: cannot write the figure ({e.strerror or e})") from None
        finally:
            plt.close(fig)
        print(path)


def make_folder(out_dir: pathlib.Path) -> None:
    """The figures' folder, made before anything is drawn: one under a file, under /proc or
    in a read-only run is an error naming it."""
    if why := folder_problem(out_dir, "figures folder"):
        raise PlotError(f"{why}; name another with --out")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="See the module docstring for the figures each input gives.")
    ap.add_argument("paths", nargs="+", type=pathlib.Path, metavar="PATH",
                    help="run dir, sweep dir, analysis.json or a dir holding one")
    ap.add_argument("--out", type=pathlib.Path, help="output dir (default: <first PATH>/plots)")
    ap.add_argument("--smooth", type=float, metavar="A",
                    help="EMA factor for train loss, 0 (raw) to <1 (default: each point averages "
                         "about the last 1%% of the steps before it)")
    ap.add_argument("--logx", action="store_true", help="log-scale step/token axes")
    ap.add_argument("--ylim", type=float, nargs=2, metavar=("LO", "HI"),
                    help="loss axis range (default: fit the last 90%% of training)")
    args = ap.parse_args(argv)
    if args.smooth is not None and not 0 <= args.smooth < 1:
        ap.error(f"--smooth must be in [0, 1), got {args.smooth}")

    try:
        found = [item for p in args.paths for item in classify(p)]
        run_paths = [p for k, p in found if k == "run"]
        runs = [load_run(p, label) for p, label in zip(run_paths, unique_labels(run_paths))] if run_paths else []
        sweeps = [load_sweep(p) for k, p in found if k == "sweep"]
        analyses = [load_analysis(p) for k, p in found if k == "analysis"]
        first = args.paths[0]
        out_dir = args.out or (first.parent if first.is_file() else first) / "plots"
        make_folder(out_dir)
        if runs:
            save(run_figures(runs, args.smooth, args.logx, args.ylim), out_dir)
        for sweep in sweeps:
            prefix = f"{sweep.path.resolve().name}_" if len(sweeps) > 1 else ""
            save(sweep_figures(sweep, args.smooth, args.logx, args.ylim), out_dir, prefix)
        if analyses:
            save([("analysis.png", analysis_figure(analyses))], out_dir)
    except PlotError as e:
        print(f"plot.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
