"""plot.py's figure of `xsagpt analyze` outputs: analysis.png, value cosine similarity,
diagonal attention a_ii and cos(y_i, v_i) (for XSA also cos(z_i, v_i)) against the layer
index (the paper's figure 1)."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib import ticker
from matplotlib.figure import Figure

from plot_inputs import Analysis
from metrics_record import is_number
from plot_style import Palette, tag


def analysis_figure(analyses: list[Analysis]) -> Figure:
    """The paper's figure 1: per layer, how alike values are, how much a token attends to itself,
    and how aligned the attention output is with its own value (for XSA before and after the
    projection removes that component)."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4), layout="constrained")
    pal = Palette([a.variant for a in analyses])
    for a, c in zip(analyses, pal.colours([a.variant for a in analyses])):
        label = f"{a.label} [{tag(a.variant)}]"
        layer = [l["layer"] for l in a.layers]
        m = pal.marker(a.variant)
        axes[0].plot(layer, [l["value_cos_sim"] for l in a.layers], color=c, marker=m, lw=1.8, label=label)
        axes[1].plot(layer, [l["attn_diag"] for l in a.layers], color=c, marker=m, lw=1.8, label=label)
        axes[2].plot(layer, [l["cos_y_v"] for l in a.layers], color=c, marker=m, lw=1.8, label=f"{label} cos(y, v)")
        z = [(l["layer"], l["cos_z_v"]) for l in a.layers if is_number(l.get("cos_z_v"))]
        if z:
            axes[2].plot(*zip(*z), color=c, marker=m, mfc="none", lw=1.4, ls="--", label=f"{label} cos(z, v)")
    titles = ("value cosine similarity", "mean diagonal attention $a_{ii}$", "cos($y_i$, $v_i$) and cos($z_i$, $v_i$)")
    for ax, title in zip(axes, titles):
        ax.set_title(title)
        ax.set_xlabel("layer")
        ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(frameon=False, fontsize="small")
    axes[2].axhline(0, color="0.4", lw=0.8)
    fig.suptitle("Attention similarity bias per layer (mean over heads and sequences)")
    return fig
