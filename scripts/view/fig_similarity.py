"""plot.py's figures of the attention diagnostics logged at each evaluation (the val lines'
cos_y_v and xsa_gate, with train.eval_similarity_sequences): similarity.png for runs,
cos(y_i, v_i) of every layer against tokens and, for gated models, each layer's gate
tanh(alpha); sweep_similarity.png for a sweep, a panel per layer (at most 6, evenly spaced),
per variant the mean over seeds with their range shaded, the gates in a second row."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import ticker
from matplotlib.figure import Figure

from plot_inputs import Run, Sweep, runs_by_setting, setting_keys, sweep_variants
from metrics_record import is_number
from plot_style import Palette, describe, si, sort_key, tag


def layer_curves(run: Run) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """A run's diagnostics over training from its val lines: tokens, cos(y_i, v_i) as (evaluations,
    layers), and each layer's gate over its heads as mean and (min, max), (evaluations, layers) and
    (2, evaluations, layers), nan where a layer has no gate; None without gates. Only the evaluations
    that measured the bias count (nothing when it is off)."""
    recs = [r for r in run.val_records if isinstance(r.get("cos_y_v"), list) and r["cos_y_v"]]
    if not recs:
        return np.zeros(0), np.zeros((0, 0)), None, None
    n = max(len(r["cos_y_v"]) for r in recs)
    tokens = np.array([r["tokens"] for r in recs], dtype=np.float64)
    cos = np.array([[float(c) if is_number(c) else np.nan for c in r["cos_y_v"]] +
                    [np.nan] * (n - len(r["cos_y_v"])) for r in recs])
    if not any(isinstance(r.get("xsa_gate"), list) for r in recs):
        return tokens, cos, None, None
    gate = np.full((3, len(recs), n), np.nan)
    for i, r in enumerate(recs):
        for j, g in enumerate((r.get("xsa_gate") or [])[:n]):
            if isinstance(g, dict):
                gate[:, i, j] = [g.get("mean", np.nan), g.get("min", np.nan), g.get("max", np.nan)]
    return tokens, cos, gate[0], gate[1:]


def shown_layers(n: int, most: int = 6) -> list[int]:
    """Every layer up to `most`, else `most` evenly spaced ones, the first and the last among them."""
    return list(range(n)) if n <= most else sorted({round(i * (n - 1) / (most - 1)) for i in range(most)})


def similarity_figure(runs: list[Run]) -> Figure | None:
    """cos(y_i, v_i) of every layer over training and, for gated runs, where the gates stand; each run
    in its variant's colour family, a shade per layer (light: first layer, dark: last)."""
    data = [(r, *layer_curves(r)) for r in runs]
    data = [d for d in data if len(d[1])]
    if not data:
        return None
    gated = any(d[3] is not None for d in data)
    fig, axes = plt.subplots(1, 2 if gated else 1, figsize=(13 if gated else 7, 4.6), squeeze=False,
                             layout="constrained")
    pal = Palette([r.variant for r, *_ in data])
    for run, tokens, cos, gate, band in data:
        cmap = plt.get_cmap(pal.cmap(run.variant))
        n = cos.shape[1]
        for j in range(n):
            c = cmap(0.35 + 0.6 * j / max(1, n - 1))
            axes[0, 0].plot(tokens, cos[:, j], color=c, lw=1.5, marker=pal.marker(run.variant), ms=3,
                            label=f"{run.label} [{tag(run.variant)}] layer {j}")
            if gate is not None and gated and np.isfinite(gate[:, j]).any():
                axes[0, 1].plot(tokens, gate[:, j], color=c, lw=1.5, label=f"{run.label} layer {j}")
                axes[0, 1].fill_between(tokens, band[0][:, j], band[1][:, j], color=c, alpha=0.15, lw=0)
    axes[0, 0].set_title("similarity bias: mean cos($y_i$, $v_i$) per layer")
    axes[0, 0].set_ylabel("cos($y_i$, $v_i$)")
    if gated:
        axes[0, 1].set_title("XSA gate tanh($\\alpha$) per layer: mean over heads (shaded: min to max)")
        axes[0, 1].set_ylabel("gate (0: SA, 1: XSA)")
    for ax in axes.flat:
        ax.set_xlabel("tokens seen")
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(si))
        ax.grid(alpha=0.3)
        ax.legend(frameon=False, fontsize="x-small", ncols=2)
    fig.suptitle("Attention diagnostics over training (at each evaluation)")
    return fig


def sweep_similarity_figure(sweep: Sweep) -> Figure | None:
    """A panel per shown layer: each variant's cos(y_i, v_i) against tokens, the mean over its seeds
    (on the evaluations every seed has) with their range shaded; with gated variants a second row of
    each layer's mean gate the same way. Points that differ in keys besides the variant and the seed
    are separate lines."""
    names, baseline = sweep_variants(sweep)
    pal = Palette(names, baseline)
    others = setting_keys(sweep)
    groups: dict[tuple, list] = {}
    for var, rest, run in runs_by_setting(sweep):
        tokens, cos, gate, _ = layer_curves(run)
        if len(tokens):
            groups.setdefault((var, rest), []).append((tokens, cos, gate))
    if not groups:
        return None
    n = max(c.shape[1] for g in groups.values() for _, c, _ in g)
    layers = shown_layers(n)
    gated = any(g is not None for grp in groups.values() for _, _, g in grp)
    rows = 2 if gated else 1
    fig, axes = plt.subplots(rows, len(layers), figsize=(max(7, 3.6 * len(layers)), 3.6 * rows + 0.8),
                             squeeze=False, sharex=True, layout="constrained")
    order = sorted(groups, key=lambda k: (pal.index.get(k[0], len(names)), sort_key(k[1])))
    for key, c in zip(order, pal.colours([k[0] for k in order])):
        var, rest = key
        label = tag(var) + (f" ({describe(dict(zip(others, rest)))})" if others else "") + f" n={len(groups[key])}"
        for row, which in enumerate(("cos", "gate")[:rows]):
            curves = [(t, (cs if which == "cos" else g)) for t, cs, g in groups[key]]
            curves = [(t, m) for t, m in curves if m is not None]
            if not curves:
                continue
            # The evaluations every seed made (the same schedule; a point still training has fewer).
            common = sorted(set.intersection(*(set(t.tolist()) for t, _ in curves)))
            if not common:
                continue
            for ax, j in zip(axes[row], layers):
                ys = np.array([[m[list(t).index(x), j] if j < m.shape[1] else np.nan for x in common]
                               for t, m in curves])
                if not np.isfinite(ys).any():
                    continue
                ax.plot(common, np.nanmean(ys, axis=0), color=c, lw=1.6, marker=pal.marker(var), ms=3, label=label)
                if len(curves) > 1:
                    ax.fill_between(common, np.nanmin(ys, axis=0), np.nanmax(ys, axis=0), color=c, alpha=0.2, lw=0)
    for j, ax in zip(layers, axes[0]):
        ax.set_title(f"layer {j}: cos($y_i$, $v_i$)", fontsize="medium")
    if gated:
        for j, ax in zip(layers, axes[1]):
            ax.set_title(f"layer {j}: gate tanh($\\alpha$), mean over heads", fontsize="medium")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(si))
    for ax in axes[-1]:
        ax.set_xlabel("tokens seen")
        ax.xaxis.set_tick_params(labelbottom=True)
    axes[0, 0].legend(frameon=False, fontsize="small")
    shown = "" if len(layers) == n else f" (layers {', '.join(map(str, layers))} of {n})"
    fig.suptitle(f"Sweep {sweep.path.resolve().name}: similarity bias over training{shown}, "
                 "mean over seeds (shaded: min to max)")
    return fig
