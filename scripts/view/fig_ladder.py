"""plot.py's figure of a ladder sweep (summary.json's "ladder" section): sweep_ladder.png, the final
val loss against training compute on log axes, every seed's run and each variant's fitted curve
L(C) = E + A C^-alpha over the ladder's computes, beside each variant's compute multiplier against
the baseline at each rung with its 95% bootstrap interval (below 1: the variant needs less compute),
and, open and flagged "?", each multiplier the analysis carried past the ladder (the curves' and the
trend's; none further than the decades the sweep allows, ladder.extrapolate_decades) or read at a
rung where the baseline has no run (its curve extrapolated there). Where the
analysis gave no interval (one seed) the panel's title says why instead of promising bars."""
from __future__ import annotations

import math
import sys
import textwrap

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import ticker
from matplotlib.figure import Figure

from metrics_record import is_number
from plot_inputs import Sweep
from plot_style import Palette, tag


def fitted(fit: dict, compute: np.ndarray) -> np.ndarray | None:
    """The fitted curve at these computes, or None where the variant has no fit."""
    if not all(is_number(fit.get(k)) for k in ("E", "A", "alpha")):
        return None
    return fit["E"] + fit["A"] * compute ** (-fit["alpha"])


class PlainTicks(ticker.Formatter):
    """Tick labels as plain numbers (3.4, 0.97), not powers of ten: with as many decimals as
    the ticks' spacing needs on a linear axis, and on a log axis whose ticks span less than a
    decade (10.800, 10.805, ... rather than 10.8 six times), else three significant digits."""

    decimals: int | None = None

    def __init__(self, only: tuple[int, ...] = ()):
        self.only = only  # label only these multiples of a power of ten (2 and 5 for minor ticks), when given

    def set_locs(self, locs):
        super().set_locs(locs)
        xs = sorted(float(x) for x in locs)
        self.decimals = None
        log = self.axis is not None and self.axis.get_scale() == "log"
        if len(xs) >= 2 and (not log or (xs[0] > 0 and xs[-1] / xs[0] < 10)):
            step = min(b - a for a, b in zip(xs, xs[1:]))
            self.decimals = next((d for d in range(10) if all(abs(round(x, d) - x) < step / 1000 for x in xs)), 9)

    def __call__(self, x, pos=None) -> str:
        if self.only and x > 0 and round(x / 10 ** math.floor(math.log10(x) + 1e-9), 6) not in self.only:
            return ""
        return f"{x:.{self.decimals}f}" if self.decimals is not None else f"{x:.3g}"


def plain_log_y(ax, values: list) -> None:
    """A loss or ratio axis on a log scale where the values span a factor of 4 or more, else
    linear (a log axis over a narrow range has too few ticks to read), labelled by
    PlainTicks. The minor ticks (2, 3, ... 9 within a decade, or the linear ticks matplotlib
    puts in a range narrower than that) are labelled within less than a decade, where they
    are the only labels; over two decades at most, those at 2 and 5; over more, none, where
    their labels would run into each other."""
    vals = [v for v in values if is_number(v) and v > 0]
    span = max(vals) / min(vals) if vals else 1.0
    if span >= 4:
        ax.set_yscale("log")
        ax.yaxis.set_minor_formatter(PlainTicks() if span < 10 else PlainTicks(only=(2, 5)) if span <= 100
                                     else ticker.NullFormatter())
    ax.yaxis.set_major_formatter(PlainTicks())


def rule_words(analysis: dict) -> str:
    """The loss panel's title: the E rule the curves were fitted by, or why there are none."""
    if isinstance(analysis.get("e_rule"), str):
        return f"each seed's run and the fitted curves (E rule: {analysis['e_rule']})"
    why = analysis.get("e_rule_why") or "no rule for E"
    return "each seed's run; no fitted curve:\n" + textwrap.fill(why, 70)


def loss_panel(ax, ladder: dict, pal: Palette, order: list) -> None:
    obs = ladder.get("observations", [])
    fits = ladder["analysis"].get("fits", {})
    computes = [o["compute"] for o in obs]
    grid = np.geomspace(min(computes) / 1.3, max(computes) * 1.3, 100)
    for var, c in zip(order, pal.colours(order)):
        mine = [o for o in obs if o["variant"] == var]
        if not mine:
            continue
        ax.plot([o["compute"] for o in mine], [o["loss"] for o in mine], ls="none", marker=pal.marker(var),
                color=c, alpha=0.35, ms=4)
        by_rung: dict[str, list] = {}
        for o in mine:
            by_rung.setdefault(o["rung"], []).append(o)
        ax.plot([np.mean([o["compute"] for o in os]) for os in by_rung.values()],
                [np.mean([o["loss"] for o in os]) for os in by_rung.values()], ls="none",
                marker=pal.marker(var), color=c, ms=8, mec="white")  # the mean over seeds
        f = fits.get(var, {})
        curve = fitted(f, grid)
        label = tag(var) if curve is None else (
            f"{tag(var)}: {f['E']:.3f} + {f['A']:.3g} C^-{f['alpha']:.3f}")
        if curve is not None:
            ax.plot(grid, curve, color=c, lw=1.8, label=label)
        else:
            ax.plot([], [], color=c, marker=pal.marker(var), ls="none", label=f"{label} (no fit)")
    ax.set_xscale("log")
    plain_log_y(ax, [o["loss"] for o in obs])
    ax.set_xlabel("training compute C (FLOPs)")
    ax.set_ylabel("final val loss")
    ax.grid(alpha=0.3, which="both")
    ax.legend(frameon=False, fontsize="small")
    ax.set_title(rule_words(ladder["analysis"]), fontsize="medium")


def extrapolated_points(ax, analysis: dict, var: str, colour, marker: str) -> list:
    """The variant's multipliers carried past the ladder, open markers flagged "?" with their intervals:
    the curves' with solid bars, the trend's line beside it with dashed ones; the values drawn, for the
    axis's scale."""
    drawn, labelled = [], False
    for t in (analysis.get("extrapolation") or {}).get(var, []):
        if not t.get("extrapolation") or not is_number(t.get("compute")):
            continue
        for key, ci_key, ls, shift in (("multiplier", "ci95", "-", 1.0), ("trend_multiplier", "trend_ci95", "--", 1.15)):
            m = t.get(key)
            if not is_number(m) or m <= 0:
                continue
            ci = t.get(ci_key)
            err = [[m - ci[0]], [ci[1] - m]] if isinstance(ci, list) else None
            label = None if labelled else f"{tag(var)} past the ladder? (curves; the trend's line dashed)"
            labelled = True
            bars = ax.errorbar([t["compute"] * shift], [m], yerr=err, color=colour, marker=marker, mfc="white",
                               capsize=3, lw=1, ls="none", label=label)
            for line in bars[2]:
                line.set_linestyle(ls)
            ax.annotate("?", (t["compute"] * shift, m), textcoords="offset points", xytext=(4, 3),
                        fontsize="small", color=colour)
            drawn += [m] + (list(ci) if isinstance(ci, list) else [])
    return drawn


def multiplier_panel(ax, ladder: dict, baseline: str, pal: Palette, order: list) -> None:
    rungs = ladder["analysis"].get("rungs", [])
    names = {i: r["name"] for i, r in enumerate(ladder["rungs"])}
    drawn = False
    shown: list = []  # every multiplier and interval end drawn, for the axis's scale
    variants = [v for v in order if v != baseline]
    for k, (var, c) in enumerate(zip(variants, pal.colours(variants))):
        # measured: the baseline has a result at the rung; guessed: it has none, and the multiplier
        # extrapolates its curve (open markers flagged "?", not joined to the measured ones)
        series = {False: ([], [], [], []), True: ([], [], [], [])}
        for r in rungs:
            m = r.get("variants", {}).get(var, {})
            if not is_number(m.get("multiplier")):
                continue
            ci = m.get("multiplier_ci95")
            x = m.get("compute") or (r.get("baseline") or {}).get("compute")
            if not is_number(x):  # neither the variant nor the baseline says where the rung is
                continue
            xs, ys, lo, hi = series[m.get("extrapolation") is True]
            xs.append(x * 1.04 ** (k - (len(variants) - 1) / 2))  # variants side by side at one rung
            ys.append(m["multiplier"])
            lo.append(m["multiplier"] - ci[0] if ci else 0)
            hi.append(ci[1] - m["multiplier"] if ci else 0)
        for guessed, (xs, ys, lo, hi) in series.items():
            shown += ys + [y - d for y, d in zip(ys, lo)] + [y + d for y, d in zip(ys, hi)]
            if not xs:
                continue
            label = f"{tag(var)} / {baseline}" + (f" where {baseline} has no run? (its curve extrapolated)"
                                                  if guessed else "")
            ax.errorbar(xs, ys, yerr=[lo, hi], color=c, marker=pal.marker(var), capsize=4, lw=1.4, label=label,
                        **({"ls": "none", "mfc": "white"} if guessed else {}))
            for x, y in zip(xs, ys) if guessed else ():
                ax.annotate("?", (x, y), textcoords="offset points", xytext=(4, 3), fontsize="small", color=c)
            drawn = True
        shown += extrapolated_points(ax, ladder["analysis"], var, c, pal.marker(var))
    ax.axhline(1, color="0.4", lw=0.8)
    ax.set_xscale("log")
    plain_log_y(ax, shown + [1.0])
    ax.set_xlabel("training compute C (FLOPs)")
    ax.set_ylabel(f"compute multiplier vs {baseline}\n(< 1: the variant needs less compute)")
    ax.grid(alpha=0.3, which="both")
    at = {r["rung"]: r["baseline"]["compute"] for r in rungs  # null: the baseline has no run at this rung
          if is_number((r.get("baseline") or {}).get("compute"))}
    if at and not drawn:  # the axis spans the rungs, not matplotlib's empty 1 to 10
        ax.set_xlim(min(at.values()) / 2, max(at.values()) * 2)
    for rung, x in at.items():  # the rung's name along the bottom edge (one off the axis is not drawn)
        ax.annotate(names.get(rung, str(rung)), (x, 0.02), xycoords=ax.get_xaxis_transform(), ha="center",
                    fontsize="x-small", color="0.4", annotation_clip=True)
    if drawn:
        ax.legend(frameon=False, fontsize="small")
    else:
        whys = [m["why"] for r in rungs for m in (r.get("variants") or {}).values() if isinstance(m.get("why"), str)]
        ax.text(0.5, 0.5, textwrap.fill("no multiplier: " + whys[0] if whys else "no multiplier yet", 50),
                ha="center", va="center", transform=ax.transAxes)
    none = (ladder["analysis"].get("bootstrap") or {}).get("none")
    ax.set_title("multiplier at each rung, 95% bootstrap interval over seeds" if not isinstance(none, str)
                 else textwrap.fill("multiplier at each rung; no interval: " + none, 70), fontsize="medium")


def ladder_figure(sweep: Sweep) -> Figure | None:
    """The ladder's two panels, or None (with a line on stderr) before any rung has a finished run."""
    ladder = sweep.summary.get("ladder")
    if not ladder:
        return None
    if not ladder.get("observations") or "error" in ladder.get("analysis", {}):
        why = ladder.get("analysis", {}).get("error", "no finished run")
        print(f"plot.py: {sweep.path}: ladder: {why}; no ladder figure", file=sys.stderr)
        return None
    baseline = sweep.summary.get("baseline")
    order = list(sweep.summary.get("variants") or [])
    pal = Palette(order, baseline)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2), layout="constrained")
    loss_panel(left, ladder, pal, order)
    multiplier_panel(right, ladder, baseline, pal, order)
    left_out = len(ladder.get("left_out", []))
    n, runs = len(ladder["rungs"]), len(ladder["observations"])
    fig.suptitle(f"Ladder {sweep.path.resolve().name}: {n} rung{'s' * (n != 1)}, {runs} run{'s' * (runs != 1)} "
                 "in the fit"
                 + (f", {left_out} left out (report.md says why)" if left_out else ""))
    return fig
