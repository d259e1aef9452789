"""plot.py's figure of a sweep's variants over training: sweep_variants.png, val loss against
wall-clock time beside val loss against tokens, per variant the mean over seeds with their
range shaded (sweeps summarised with variants)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import ticker
from matplotlib.figure import Figure

from plot_inputs import Run, Sweep, runs_by_setting, setting_keys, sweep_variants
from plot_style import Palette, describe, focus_ylim, si, sort_key, tag


def val_curve(run: Run, xname: str) -> tuple[np.ndarray, np.ndarray]:
    """A run's val loss against tokens or wall-clock seconds (metrics.jsonl's time_s)."""
    x = run.val.tokens if xname == "tokens" else run.val.time
    keep = np.isfinite(x)
    return x[keep], run.val.loss[keep]


def mean_band(curves: list[tuple[np.ndarray, np.ndarray]], n: int = 60):
    """The seeds' curves on a common grid over the range all of them cover: mean, min and max."""
    curves = [(x, y) for x, y in curves if len(x) >= 2]
    if not curves:
        return None
    lo, hi = max(x[0] for x, _ in curves), min(x[-1] for x, _ in curves)
    if not hi > lo:
        return None
    grid = np.linspace(lo, hi, n)
    ys = np.array([np.interp(grid, x, y) for x, y in curves])
    return grid, ys.mean(axis=0), ys.min(axis=0), ys.max(axis=0)


def variants_figure(sweep: Sweep) -> Figure | None:
    """Per setting of the keys besides the variant and the seed, one row: val loss against wall-clock
    time beside val loss against tokens, each variant the mean over its seeds (interpolated on a
    common grid over the range every seed covers) with their range shaded. The dashed line on the
    time panel is the baseline's final time, where report.md compares at equal time."""
    names, baseline = sweep_variants(sweep)
    pal = Palette(names, baseline)
    others = setting_keys(sweep)
    rows: dict[tuple, dict] = {}
    for var, rest, run in runs_by_setting(sweep):
        if len(run.val.step):
            rows.setdefault(rest, {}).setdefault(var, []).append(run)
    if not rows:
        return None
    keys = sorted(rows, key=sort_key)
    fig, axes = plt.subplots(len(keys), 2, figsize=(13, 4.4 * len(keys) + 0.6), squeeze=False, layout="constrained")
    for (ax_time, ax_tok), rest in zip(axes, keys):
        by_variant = rows[rest]
        order = sorted(by_variant, key=lambda v: pal.index.get(v, len(names)))
        for ax, xname in ((ax_time, "time"), (ax_tok, "tokens")):
            curves = []
            for var, c in zip(order, pal.colours(order)):
                runs = by_variant[var]
                band = mean_band([val_curve(r, xname) for r in runs])
                label = f"{tag(var)} (n={len(runs)})"
                if band is None:  # one evaluation per run: markers only
                    for r in runs:
                        x, y = val_curve(r, xname)
                        ax.plot(x, y, color=c, marker=pal.marker(var), ls="none", label=label)
                        label = None
                    continue
                grid, mean, lo, hi = band
                ax.plot(grid, mean, color=c, lw=1.8, label=label)
                if len(runs) > 1:
                    ax.fill_between(grid, lo, hi, color=c, alpha=0.2, lw=0)
                for r in runs:  # the evaluations themselves, faintly
                    x, y = val_curve(r, xname)
                    ax.plot(x, y, color=c, marker=pal.marker(var), ms=3, ls="none", alpha=0.5)
                curves.append((grid, mean))
            if xname == "time" and baseline in by_variant:
                ends = [val_curve(r, "time")[0][-1] for r in by_variant[baseline] if len(r.val.time)]
                if ends:
                    ax.axvline(float(np.mean(ends)), color="0.3", ls="--", lw=1,
                               label=f"{baseline}'s final time")
            ax.set_xlabel("wall-clock time (s)" if xname == "time" else "tokens seen")
            if xname == "tokens":
                ax.xaxis.set_major_formatter(ticker.FuncFormatter(si))
            ax.set_ylabel("val loss (nats/token)")
            ax.grid(alpha=0.3)
            focus_ylim(ax, curves, None, False)
            ax.legend(frameon=False, fontsize="small")
            where = f" ({describe(dict(zip(others, rest)))})" if others else ""
            ax.set_title(("val loss against wall-clock time" if xname == "time" else "val loss against tokens") + where,
                         fontsize="medium")
    fig.suptitle(f"Sweep {sweep.path.resolve().name}: every variant, mean over seeds (shaded: min to max)")
    return fig
