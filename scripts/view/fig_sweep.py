"""plot.py's figures of a sweep's final losses and curves: sweep_final.png, the final val loss
against each swept numeric value (seeds averaged), one line per variant, above each variant
minus the baseline (the shape of the paper's figures 3-5); sweep_curves.png, the train and val
loss of every point, a panel per setting of the keys besides the variant."""
from __future__ import annotations

import math
import sys

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import ticker
from matplotlib.figure import Figure

from plot_inputs import SEED_KEY, Sweep, other_keys, point_variant, setting_keys, sweep_variants
from metrics_record import is_number
from plot_style import Palette, describe, ema, focus_ylim, number, si, smooth_note, sort_key, tag


def set_xscale(ax, values: list, key: str) -> None:
    """Swept values on the axis the paper uses: lr on log10, powers of two (seq_len) on log2,
    anything else spanning a decade on log10; ticks at exactly the swept values."""
    vals = sorted(set(values))
    positive = all(v > 0 for v in vals)
    pow2 = positive and all(float(v).is_integer() and int(v) & (int(v) - 1) == 0 for v in vals)
    if positive and len(vals) > 1 and pow2 and vals[-1] / vals[0] >= 4:
        ax.set_xscale("log", base=2)
    elif positive and len(vals) > 1 and (key.endswith("lr") or vals[-1] / vals[0] >= 10):
        ax.set_xscale("log")
    ax.set_xticks(vals)
    ax.set_xticklabels([number(v) for v in vals])
    ax.xaxis.set_minor_locator(ticker.NullLocator())


def final_figure(sweep: Sweep) -> Figure | None:
    """Per swept numeric key: final val loss against it (mean over seeds), one line per variant (and
    per value of the other keys), above each variant minus the baseline (mean of the per-seed
    differences)."""
    keys = setting_keys(sweep)
    points = [p for p in sweep.summary["points"] if is_number(p.get("final_val_loss"))]
    numeric = [k for k in keys if all(is_number(p["values"].get(k)) for p in sweep.summary["points"])]
    if not numeric:
        print(f"plot.py: {sweep.path}: no numeric swept key besides the variant and the seed; no final-loss figure",
              file=sys.stderr)
        return None
    failed = [p for p in sweep.summary["points"] if p.get("status") == "failed"]
    if not points:
        print(f"plot.py: {sweep.path}: no point has finished ({len(failed)} failed); no final-loss figure",
              file=sys.stderr)
        return None
    names, baseline = sweep_variants(sweep)
    pal = Palette(names, baseline)
    fig, axes = plt.subplots(2, len(numeric), figsize=(6.5 * len(numeric), 7), squeeze=False,
                             sharex="col", height_ratios=[2, 1], layout="constrained")
    for col, key in enumerate(numeric):
        others = [k for k in keys if k != key]
        top, bottom = axes[0, col], axes[1, col]
        # one line per (variant, values of the other keys), the seeds averaged at each x
        groups: dict[tuple, dict] = {}
        for p in points:
            g = groups.setdefault((point_variant(sweep, p), tuple(p["values"].get(k) for k in others)), {})
            g.setdefault(p["values"][key], []).append(p)
        order = sorted(groups, key=lambda g: (pal.index.get(g[0], len(names)), sort_key(g[1])))
        for (var, rest), c in zip(order, pal.colours([g[0] for g in order])):
            xs = sorted(groups[(var, rest)])
            ys = [np.mean([p["final_val_loss"] for p in groups[(var, rest)][x]]) for x in xs]
            label = tag(var) + (f" ({describe(dict(zip(others, rest)))})" if others else "")
            top.plot(xs, ys, color=c, marker=pal.marker(var), ms=6, lw=1.8, label=label)
        # A failed point (diverged, bad data, out of memory: its failed.json) has no
        # loss to plot; a red cross at its value along the top edge says it was tried.
        xs = [p["values"][key] for p in failed if is_number(p["values"].get(key))]
        if xs:
            top.scatter(xs, [0.97] * len(xs), marker="x", s=60, color="tab:red", zorder=3, clip_on=False,
                        transform=top.get_xaxis_transform(), label=f"failed ({len(xs)}: see summary.json)")
        top.set_ylabel("final val loss")
        top.grid(alpha=0.3)
        top.legend(frameon=False, fontsize="small")

        # variant minus baseline: points with the same other values and seed are a pair
        bottom.axhline(0, color="0.4", lw=0.8)
        base_at = {(tuple(p["values"].get(k) for k in others), p["values"][key], p["values"].get(SEED_KEY)):
                   p["final_val_loss"] for p in points if point_variant(sweep, p) == baseline}
        diffs: dict[tuple, dict] = {}
        for p in points:
            var = point_variant(sweep, p)
            rest = tuple(p["values"].get(k) for k in others)
            b = base_at.get((rest, p["values"][key], p["values"].get(SEED_KEY)))
            if var != baseline and b is not None:
                diffs.setdefault((var, rest), {}).setdefault(p["values"][key], []).append(p["final_val_loss"] - b)
        dorder = sorted(diffs, key=lambda g: (pal.index.get(g[0], len(names)), sort_key(g[1])))
        for (var, rest), c in zip(dorder, pal.colours([g[0] for g in dorder])):
            x = sorted(diffs[(var, rest)])
            y = [float(np.mean(diffs[(var, rest)][xi])) for xi in x]
            bottom.plot(x, y, color=c, marker=pal.marker(var), ms=5, lw=1.4,
                        label=tag(var) + (f" ({describe(dict(zip(others, rest)))})" if others else ""))
            for xi, yi in zip(x, y):
                bottom.annotate(f"{yi:+.3f}", (xi, yi), textcoords="offset points", xytext=(0, 6),
                                ha="center", fontsize="x-small")
        if not diffs:
            bottom.text(0.5, 0.5, f"no finished pair with the baseline ({baseline}) yet", ha="center", va="center",
                        transform=bottom.transAxes)
        else:
            bottom.legend(frameon=False, fontsize="x-small")
        bottom.set_ylabel(f"variant − {baseline} val loss\n(< 0: lower than {baseline})")
        bottom.set_xlabel(key)
        bottom.grid(alpha=0.3)
        bottom.margins(y=0.25)  # room for the value labels
        set_xscale(bottom, [p["values"][key] for p in sweep.summary["points"]], key)
    fig.suptitle(f"Sweep {sweep.path.resolve().name}: final val loss "
                 f"({len(points)} of {len(sweep.summary['points'])} points finished"
                 + (f", {len(failed)} failed)" if failed else ")"))
    return fig


def curves_figure(sweep: Sweep, smooth: float | None, logx: bool, ylim) -> Figure:
    """One panel per setting of the keys besides the variant: every variant's train (smoothed, thin)
    and val (markers) loss against tokens."""
    others = other_keys(sweep)
    names, baseline = sweep_variants(sweep)
    pal = Palette(names, baseline)
    panels: dict[tuple, list[dict]] = {}
    for p in sweep.summary["points"]:
        if p["name"] in sweep.runs:
            panels.setdefault(tuple(p["values"].get(k) for k in others), []).append(p)
    keys = sorted(panels, key=sort_key)
    ncols = min(len(keys), 3)
    nrows = math.ceil(len(keys) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(6.5, 5 * ncols), 3.8 * nrows + 0.8), squeeze=False,
                             sharex=True, sharey=True, layout="constrained")
    curves = []
    for ax, rest in zip(axes.flat, keys):
        ps = sorted(panels[rest], key=lambda p: pal.index.get(point_variant(sweep, p), len(names)))
        for p, c in zip(ps, pal.colours([point_variant(sweep, p) for p in ps])):
            run, var = sweep.runs[p["name"]], point_variant(sweep, p)
            note = " (failed)" if p.get("status") == "failed" else ""
            if len(run.train.step):
                y = ema(run.train.loss, smooth)
                ax.plot(run.train.tokens, y, color=c, lw=1.0, alpha=0.55, label=f"{tag(var)} train{note}")
                curves.append((run.train.tokens, y))
            if len(run.val.step):
                ax.plot(run.val.tokens, run.val.loss, color=c, lw=1.8, marker=pal.marker(var), ms=4,
                        label=f"{tag(var)} val{note}")
                curves.append((run.val.tokens, run.val.loss))
        ax.set_title(describe(dict(zip(others, rest))), fontsize="medium")
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(si))
        if logx:
            ax.set_xscale("log")
        ax.grid(alpha=0.3)
        ax.legend(frameon=False, fontsize="small")
    for ax in axes[:, 0]:
        ax.set_ylabel("loss (nats/token)")
    for i, ax in enumerate(axes.flat):
        if i >= len(keys):
            ax.set_visible(False)
        elif i + ncols >= len(keys):  # lowest panel of its column: the x ticks and label go here
            ax.xaxis.set_tick_params(labelbottom=True)
            ax.set_xlabel("tokens seen")
    focus_ylim(axes[0, 0], curves, ylim, logx)  # shared y
    fig.suptitle(f"Sweep {sweep.path.resolve().name}: loss curves per point\n(train: {smooth_note(smooth)})")
    return fig
