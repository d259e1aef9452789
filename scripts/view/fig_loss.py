"""plot.py's figures of runs given by their dirs: loss_vs_step.png and loss_vs_tokens.png, the
train and val loss of every run overlaid; val_gap.png, the second run's val loss minus the
first's, when exactly two runs are given."""
from __future__ import annotations

import sys
from collections.abc import Iterator

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import ticker
from matplotlib.figure import Figure

from plot_inputs import Run
from plot_style import Palette, ema, focus_ylim, si, smooth_note, tag


def loss_figures(runs: list[Run], smooth: float | None, logx: bool, ylim) -> Iterator[tuple[str, Figure]]:
    """Train and val loss of all runs overlaid, against step and against tokens; and the second
    run's val loss minus the first's when two runs are given."""
    pal = Palette([r.variant for r in runs])
    cols = pal.colours([r.variant for r in runs])
    for xname, xlabel in (("step", "step"), ("tokens", "tokens seen")):
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharex=True, layout="constrained")
        train_curves, val_curves = [], []
        for run, c in zip(runs, cols):
            label = f"{run.label} [{tag(run.variant)}]"
            x = getattr(run.train, xname)
            if len(x):
                y = ema(run.train.loss, smooth)
                if not np.array_equal(y, run.train.loss):
                    axes[0].plot(x, run.train.loss, color=c, alpha=0.15, lw=0.8)
                axes[0].plot(x, y, color=c, lw=1.6, label=label)
                train_curves.append((x, y))
            xv = getattr(run.val, xname)
            if len(xv):
                axes[1].plot(xv, run.val.loss, color=c, lw=1.6, marker=pal.marker(run.variant),
                             ms=4, label=label)
                val_curves.append((xv, run.val.loss))
        for ax, title, curves in ((axes[0], f"train loss ({smooth_note(smooth)})", train_curves),
                                  (axes[1], "val loss", val_curves)):
            ax.set_title(title)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("loss (nats/token)")
            ax.grid(alpha=0.3)
            if logx:
                ax.set_xscale("log")
            if xname == "tokens":
                ax.xaxis.set_major_formatter(ticker.FuncFormatter(si))
            if not curves:
                ax.text(0.5, 0.5, "no records yet", ha="center", va="center", transform=ax.transAxes)
            focus_ylim(ax, curves, ylim, logx)
        entries = {}  # label -> handle over both panels: a run may have only val records so far
        for ax in axes:
            for h, l in zip(*ax.get_legend_handles_labels()):
                entries.setdefault(l, h)
        fig.legend(entries.values(), entries.keys(), loc="outside lower center", ncols=min(len(entries), 3),
                   frameon=False)
        fig.suptitle(f"Loss against {xlabel}")
        yield f"loss_vs_{xname}.png", fig

    if len(runs) == 2:
        yield "val_gap.png", val_gap(runs[0], runs[1], logx)


def val_gap(base: Run, other: Run, logx: bool) -> Figure | None:
    """The second run minus the first (the baseline) at the token counts both evaluated at."""
    base_at = dict(zip(base.val.tokens, base.val.loss))
    common = [(t, l - base_at[t]) for t, l in zip(other.val.tokens, other.val.loss) if t in base_at]
    if not common:
        print(f"plot.py: {base.label} and {other.label} share no val points (tokens); no val_gap.png",
              file=sys.stderr)
        return None
    pal = Palette([base.variant, other.variant])
    t, d = map(np.array, zip(*common))
    fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    ax.axhline(0, color="0.4", lw=0.8)
    ax.plot(t, d, color="0.15", marker="o", ms=4, lw=1.4)
    for where, cmap, label in ((d < 0, pal.cmap(other.variant), f"{other.label} lower"),
                               (d > 0, pal.cmap(base.variant), f"{base.label} lower")):
        if where.any():
            ax.fill_between(t, d, 0, where=where, interpolate=True, color=plt.get_cmap(cmap)(0.5), alpha=0.2,
                            lw=0, label=label)
    ax.set_title(f"val loss: {other.label} [{tag(other.variant)}] minus {base.label} [{tag(base.variant)}]")
    ax.set_xlabel("tokens seen")
    ax.set_ylabel("val loss difference")
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(si))
    if logx:
        ax.set_xscale("log")
    ax.grid(alpha=0.3)
    ax.legend(frameon=False)
    return fig
