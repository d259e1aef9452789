"""How plot.py's figures look, shared by every figure module: a colour family and a marker per
variant (the baseline first), the train-loss smoothing, the loss axis's range, and how token
counts and swept values are written on axes and in labels."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from metrics_record import is_number

# The baseline first: colour families and markers (the markers tell variants apart in greyscale too).
CMAPS = ["Blues", "Oranges", "Greens", "Purples", "Reds", "YlOrBr", "PuRd", "BuGn"]
MARKERS = ["o", "s", "D", "^", "v", "P", "X", "*"]


class Palette:
    """A colour family and a marker per variant, in order of first appearance with the baseline first;
    a variant no one listed (None: unknown) is grey."""

    def __init__(self, variants: list, baseline: str | None = None):
        order = ([baseline] if baseline is not None else []) + [v for v in variants if v is not None]
        self.index = {}
        for v in order:
            self.index.setdefault(v, len(self.index))

    def cmap(self, variant) -> str:
        i = self.index.get(variant)
        return "Greys" if i is None else CMAPS[i % len(CMAPS)]

    def marker(self, variant) -> str:
        i = self.index.get(variant)
        return "^" if i is None else MARKERS[i % len(MARKERS)]

    def colours(self, variants: list) -> list:
        """One colour per item: its variant's family, in distinct shades when it repeats."""
        count = {a: variants.count(a) for a in set(variants)}
        seen: dict = {}
        out = []
        for a in variants:
            i = seen.get(a, 0)
            seen[a] = i + 1
            n = count[a]
            shade = 0.75 if n == 1 else 0.95 - 0.5 * i / (n - 1)  # pale shades are unreadable
            out.append(plt.get_cmap(self.cmap(a))(shade))
        return out


def tag(variant: str | None) -> str:
    return variant if variant else "?"


def ema(y: np.ndarray, alpha: float | None) -> np.ndarray:
    """Bias-corrected exponential moving average (alpha = weight of the past; 0 = raw). None
    averages record i over about the last i/100 records, the last 1% of the run so far: a fixed
    factor either lags the steep early descent (badly so on a log axis) or leaves a long run's
    late curve a band of noise."""
    out = np.empty_like(y)
    m = w = 0.0
    for i, v in enumerate(y):
        a = alpha if alpha is not None else 1 - 1 / max(1.0, (i + 1) / 100)
        m = a * m + (1 - a) * v
        w = a * w + (1 - a)
        out[i] = m / w
    return out


def smooth_note(smooth: float | None) -> str:
    return "EMA over the last 1% of steps" if smooth is None else f"EMA {smooth:g}" if smooth > 0 else "raw"


def si(x: float, _pos=None) -> str:
    """Token counts as 512, 20k, 1.5M, 2B."""
    for div, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}"
    return f"{x:.3g}"


def number(v) -> str:
    """Swept values as written in configs: 512, 0.5, 3e-4 (not 0.0003)."""
    if isinstance(v, float) and 0 < abs(v) < 1e-2:
        mantissa, exponent = f"{v:.2e}".split("e")
        return f"{float(mantissa):g}e{int(exponent)}"
    return f"{v:g}" if is_number(v) else str(v)


def focus_ylim(ax, curves: list[tuple[np.ndarray, np.ndarray]], ylim, logx: bool) -> None:
    """Loss falls from ln(vocab) ~ 11 to ~3 in the first few percent of training, which squashes
    the late curves where SA and XSA differ; so unless told (--ylim) or on a log x-axis, the
    y-range covers the last 90% of the x-range only."""
    if ylim:
        ax.set_ylim(*ylim)
        return
    if logx:
        return
    curves = [(x, y) for x, y in curves if len(x)]
    if not curves:
        return
    lo, hi = ax.get_xlim()  # shared between panels: the same cut for train and val
    kept = np.concatenate([y[x >= lo + 0.1 * (hi - lo)] for x, y in curves])
    kept = kept[np.isfinite(kept)]
    if kept.size:
        lo, hi = kept.min(), kept.max()
        pad = 0.05 * (hi - lo) or 0.05 * abs(hi) or 0.1
        ax.set_ylim(lo - pad, hi + pad)


def sort_key(values: tuple) -> list:
    """Numbers by value, before strings (a swept key may hold either)."""
    return [(0, v, "") if is_number(v) else (1, 0, str(v)) for v in values]


def describe(values: dict) -> str:
    return ", ".join(f"{k.split('.')[-1]}={number(v)}" for k, v in values.items()) or "all"
