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
"xsa gate=sa"); the baseline (the sweep's, else the first variant met) is drawn in blues, the other variants in oranges, greens,
purples, reds, ..., several runs of one variant in shades of its colour. Figures go to DIR (default
<first PATH>/plots); each written path is printed. A PATH that is none of these, or a run with no
metrics yet, is an error (exit 2) naming it.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")  # files only: no display on training machines
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib import ticker  # noqa: E402

# A run's variant name: config.json's "variant", or for older runs the same rule on the
# model keys, in one helper beside table2.py (loaded from its file: scripts/ is no package).
_spec = importlib.util.spec_from_file_location(
    "run_variant", pathlib.Path(__file__).resolve().parent.parent / "eval" / "run_variant.py")
_run_variant = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_run_variant)
variant_of = _run_variant.variant_of

ATTENTION_KEY = "model.attention"
SEED_KEY = "train.seed"
# The baseline first: colour families and markers (the markers tell variants apart in greyscale too).
CMAPS = ["Blues", "Oranges", "Greens", "Purples", "Reds", "YlOrBr", "PuRd", "BuGn"]
MARKERS = ["o", "s", "D", "^", "v", "P", "X", "*"]
DPI = 150


class PlotError(Exception):
    """Bad input: the message names the path and what was expected."""


class NoRecords(PlotError):
    """A run without train or val records: an error for a run asked for, but within a sweep
    just a point not started yet."""


# ----------------------------------------------------------------------------------------------
# Loading


@dataclasses.dataclass
class Series:
    step: np.ndarray
    tokens: np.ndarray
    loss: np.ndarray
    time: np.ndarray  # wall-clock seconds (time_s); nan where a record has none


@dataclasses.dataclass
class Run:
    path: pathlib.Path
    label: str
    variant: str | None  # config.json's "variant", else its attention keys; None without a model
    train: Series
    val: Series
    val_records: list[dict] = dataclasses.field(default_factory=list)  # the val lines, as logged


@dataclasses.dataclass
class Sweep:
    path: pathlib.Path
    summary: dict
    runs: dict[str, Run]  # point name -> run, for points that have logged anything


@dataclasses.dataclass
class Analysis:
    path: pathlib.Path
    label: str
    variant: str | None
    layers: list[dict]


def read_json(path: pathlib.Path) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise PlotError(f"{path}: not valid JSON ({e})") from None
    except OSError as e:
        raise PlotError(f"{path}: cannot read ({e.strerror})") from None
    if not isinstance(data, dict):
        raise PlotError(f"{path}: expected a JSON object")
    return data


def read_metrics(path: pathlib.Path) -> tuple[list[dict], list[dict]]:
    """Train and val records of a metrics.jsonl, in step order, stale records dropped.

    A run resumed from a checkpoint logs again from the checkpoint's step, so a step that does
    not exceed the last one of its kind marks a restart: what the crashed process logged from
    there on is stale and replaced (for the other kind, only what lies strictly after it, since
    e.g. the val loss at the checkpoint's own step stays valid). A repeated (step, kind) thus
    keeps its last occurrence. A torn last line (a crash mid-write) is skipped."""
    records: dict[str, list[dict]] = {"train": [], "val": []}
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise PlotError(f"{path}: cannot read ({e.strerror})") from None
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if lineno == len(lines):
                print(f"plot.py: {path}:{lineno}: skipping torn last line", file=sys.stderr)
                continue
            raise PlotError(f"{path}:{lineno}: not a JSON object") from None
        kind = "val" if "val_loss" in rec else "train" if "train_loss" in rec else None
        if kind is None:
            continue  # other record kinds are not plotted
        for key in ("step", "tokens", f"{kind}_loss"):
            if not isinstance(rec.get(key), (int, float)):
                raise PlotError(f"{path}:{lineno}: expected a number for '{key}'")
        step, other = rec["step"], "val" if kind == "train" else "train"
        if records[kind] and step <= records[kind][-1]["step"]:
            records[kind] = [r for r in records[kind] if r["step"] < step]
            records[other] = [r for r in records[other] if r["step"] <= step]
        records[kind].append(rec)
    return records["train"], records["val"]


def series(records: list[dict], key: str) -> Series:
    return Series(
        step=np.array([r["step"] for r in records], dtype=np.int64),
        tokens=np.array([r["tokens"] for r in records], dtype=np.float64),
        loss=np.array([r[key] for r in records], dtype=np.float64),
        time=np.array([r["time_s"] if isinstance(r.get("time_s"), (int, float)) else np.nan for r in records],
                      dtype=np.float64),
    )


def load_run(path: pathlib.Path, label: str | None = None) -> Run:
    metrics = path / "metrics.jsonl"
    if not metrics.is_file():
        raise NoRecords(f"{path}: no metrics.jsonl (has this run logged anything yet?)")
    train, val = read_metrics(metrics)
    if not train and not val:
        raise NoRecords(f"{metrics}: no train or val records")
    config = read_json(path / "config.json") if (path / "config.json").is_file() else {}
    return Run(path, label or path.name, variant_of(config), series(train, "train_loss"), series(val, "val_loss"),
               val)


def load_sweep(path: pathlib.Path) -> Sweep:
    summary = read_json(path / "summary.json")
    if not isinstance(summary.get("points"), list) or not isinstance(summary.get("keys"), list):
        raise PlotError(f"{path / 'summary.json'}: expected 'keys' and 'points' lists")
    # A point the summary found invalid (another config's run in its directory, or files
    # that disagree with each other) is drawn nowhere, as it is compared nowhere.
    for p in summary["points"]:
        if isinstance(p, dict) and p.get("status") == "invalid":
            print(f"plot.py: {path}: point {p.get('name')} left out: {p.get('error')}", file=sys.stderr)
    summary = {**summary, "points": [p for p in summary["points"]
                                     if not (isinstance(p, dict) and p.get("status") == "invalid")]}
    runs = {}
    for p in summary["points"]:
        for key in ("name", "dir", "values"):
            if key not in p:
                raise PlotError(f"{path / 'summary.json'}: a point has no '{key}'")
        try:
            runs[p["name"]] = load_run(path / p["dir"], label=p["name"])
        except NoRecords:
            pass
    if not runs and not any(isinstance(p.get("final_val_loss"), (int, float)) for p in summary["points"]):
        raise PlotError(f"{path}: no point of the sweep has logged anything yet")
    return Sweep(path, summary, runs)


def load_analysis(path: pathlib.Path) -> Analysis:
    data = read_json(path)
    layers = data.get("layers")
    if not isinstance(layers, list) or not layers:
        raise PlotError(f"{path}: expected a non-empty 'layers' list (an xsagpt analyze output)")
    for i, layer in enumerate(layers):
        for key in ("layer", "value_cos_sim", "attn_diag", "cos_y_v"):
            if not isinstance(layer.get(key), (int, float)):
                raise PlotError(f"{path}: layers[{i}] needs a number for '{key}'")
    att = data.get("attention")
    label = path.parent.name if path.name == "analysis.json" else path.stem
    return Analysis(path, label, att if isinstance(att, str) else None, sorted(layers, key=lambda l: l["layer"]))


def classify(path: pathlib.Path) -> list[tuple[str, pathlib.Path]]:
    """What a PATH holds: [(kind, path)] with kind in run, sweep, analysis."""
    if path.is_file():
        if path.suffix == ".json":
            return [("analysis", path)]
        raise PlotError(f"{path}: a file, but not an analysis .json")
    if not path.is_dir():
        raise PlotError(f"{path}: no such file or directory")
    if (path / "summary.json").is_file():
        return [("sweep", path)]
    if (path / "sweep.json").is_file():
        raise PlotError(f"{path}: sweep dir without summary.json (has the sweep started?)")
    kinds = []
    if (path / "metrics.jsonl").is_file():
        kinds.append(("run", path))
    elif (path / "config.json").is_file():
        raise PlotError(f"{path}: run dir without metrics.jsonl (has this run logged anything yet?)")
    if (path / "analysis.json").is_file():
        kinds.append(("analysis", path / "analysis.json"))
    if not kinds:
        raise PlotError(f"{path}: not a run dir (metrics.jsonl), a sweep dir (summary.json) "
                        "or an analysis (analysis.json)")
    return kinds


def unique_labels(paths: list[pathlib.Path]) -> list[str]:
    """Dir names, lengthened by parent dirs until no two runs share a label."""
    depth = 1
    while True:
        labels = ["/".join(p.resolve().parts[-depth:]) for p in paths]
        if len(set(labels)) == len(labels) or depth >= max(len(p.resolve().parts) for p in paths):
            return labels
        depth += 1


# ----------------------------------------------------------------------------------------------
# Drawing helpers


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
    return f"{v:g}" if isinstance(v, (int, float)) else str(v)


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


def save(fig, out_dir: pathlib.Path, name: str) -> pathlib.Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    print(path)
    return path


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


# ----------------------------------------------------------------------------------------------
# Figures


def plot_runs(runs: list[Run], out_dir: pathlib.Path, smooth: float | None, logx: bool, ylim) -> list[pathlib.Path]:
    """Train and val loss of all runs overlaid, against step and against tokens; and the second
    run's val loss minus the first's when two runs are given."""
    pal = Palette([r.variant for r in runs])
    cols = pal.colours([r.variant for r in runs])
    written = []
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
        written.append(save(fig, out_dir, f"loss_vs_{xname}.png"))

    if len(runs) == 2:
        written += plot_val_gap(runs[0], runs[1], out_dir, logx)
    return written


def plot_val_gap(base: Run, other: Run, out_dir: pathlib.Path, logx: bool) -> list[pathlib.Path]:
    """The second run minus the first (the baseline) at the token counts both evaluated at."""
    base_at = dict(zip(base.val.tokens, base.val.loss))
    common = [(t, l - base_at[t]) for t, l in zip(other.val.tokens, other.val.loss) if t in base_at]
    if not common:
        print(f"plot.py: {base.label} and {other.label} share no val points (tokens); no val_gap.png",
              file=sys.stderr)
        return []
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
    return [save(fig, out_dir, "val_gap.png")]


def plot_sweep(sweep: Sweep, out_dir: pathlib.Path, prefix: str, smooth: float | None, logx: bool, ylim) -> list[pathlib.Path]:
    written = plot_sweep_final(sweep, out_dir, prefix)
    if sweep.runs:
        written += plot_sweep_curves(sweep, out_dir, prefix, smooth, logx, ylim)
        if sweep.summary.get("variants"):
            written += plot_sweep_variants(sweep, out_dir, prefix)
        written += plot_sweep_similarity(sweep, out_dir, prefix)
    return written


def point_variant(sweep: Sweep, point: dict) -> str | None:
    """The sweep's name for a point's variant; in summaries without one, its attention value or run."""
    v = point.get("variant") or point["values"].get(ATTENTION_KEY)
    if v is None and point["name"] in sweep.runs:  # attention not swept: the run's config says
        v = sweep.runs[point["name"]].variant
    return v if isinstance(v, str) and v else None


def sweep_variants(sweep: Sweep) -> tuple[list, str | None]:
    """The variants in order and the baseline: the summary's, else the order met with "sa" (the
    older sweeps' baseline) or else the first as the baseline."""
    names = list(sweep.summary.get("variants") or [])
    for p in sweep.summary["points"]:
        v = point_variant(sweep, p)
        if v is not None and v not in names:
            names.append(v)
    baseline = sweep.summary.get("baseline") or ("sa" if "sa" in names else names[0] if names else None)
    return names, baseline


def other_keys(sweep: Sweep) -> list[str]:
    """The swept keys besides the variant (the older sweeps' model.attention)."""
    return [k for k in sweep.summary["keys"] if k != ATTENTION_KEY]


def sort_key(values: tuple) -> list:
    """Numbers by value, before strings (a swept key may hold either)."""
    return [(0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v)) for v in values]


def describe(values: dict) -> str:
    return ", ".join(f"{k.split('.')[-1]}={number(v)}" for k, v in values.items()) or "all"


def plot_sweep_final(sweep: Sweep, out_dir: pathlib.Path, prefix: str) -> list[pathlib.Path]:
    """Per swept numeric key: final val loss against it (mean over seeds), one line per variant (and
    per value of the other keys), above each variant minus the baseline (mean of the per-seed
    differences)."""
    keys = [k for k in other_keys(sweep) if k != SEED_KEY]
    points = [p for p in sweep.summary["points"] if isinstance(p.get("final_val_loss"), (int, float))]
    numeric = [k for k in keys if all(isinstance(p["values"].get(k), (int, float)) for p in sweep.summary["points"])]
    if not numeric:
        print(f"plot.py: {sweep.path}: no numeric swept key besides the variant and the seed; no final-loss figure",
              file=sys.stderr)
        return []
    failed = [p for p in sweep.summary["points"] if p.get("status") == "failed"]
    if not points:
        print(f"plot.py: {sweep.path}: no point has finished ({len(failed)} failed); no final-loss figure",
              file=sys.stderr)
        return []
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
        xs = [p["values"][key] for p in failed if isinstance(p["values"].get(key), (int, float))]
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
    return [save(fig, out_dir, f"{prefix}sweep_final.png")]


def plot_sweep_curves(sweep: Sweep, out_dir: pathlib.Path, prefix: str, smooth: float | None, logx: bool, ylim) -> list[pathlib.Path]:
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
    return [save(fig, out_dir, f"{prefix}sweep_curves.png")]


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


def plot_sweep_variants(sweep: Sweep, out_dir: pathlib.Path, prefix: str) -> list[pathlib.Path]:
    """Per setting of the keys besides the variant and the seed, one row: val loss against wall-clock
    time beside val loss against tokens, each variant the mean over its seeds (interpolated on a
    common grid over the range every seed covers) with their range shaded. The dashed line on the
    time panel is the baseline's final time, where report.md compares at equal time."""
    names, baseline = sweep_variants(sweep)
    pal = Palette(names, baseline)
    others = [k for k in other_keys(sweep) if k != SEED_KEY]
    rows: dict[tuple, dict] = {}
    for p in sweep.summary["points"]:
        run = sweep.runs.get(p["name"])
        if run is not None and len(run.val.step):
            rows.setdefault(tuple(p["values"].get(k) for k in others), {}).setdefault(
                point_variant(sweep, p), []).append(run)
    if not rows:
        return []
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
    return [save(fig, out_dir, f"{prefix}sweep_variants.png")]


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
    cos = np.array([[float(c) if isinstance(c, (int, float)) else np.nan for c in r["cos_y_v"]] +
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


def plot_similarity(runs: list[Run], out_dir: pathlib.Path) -> list[pathlib.Path]:
    """cos(y_i, v_i) of every layer over training and, for gated runs, where the gates stand; each run
    in its variant's colour family, a shade per layer (light: first layer, dark: last)."""
    data = [(r, *layer_curves(r)) for r in runs]
    data = [d for d in data if len(d[1])]
    if not data:
        return []
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
    return [save(fig, out_dir, "similarity.png")]


def plot_sweep_similarity(sweep: Sweep, out_dir: pathlib.Path, prefix: str) -> list[pathlib.Path]:
    """A panel per shown layer: each variant's cos(y_i, v_i) against tokens, the mean over its seeds
    (on the evaluations every seed has) with their range shaded; with gated variants a second row of
    each layer's mean gate the same way. Points that differ in keys besides the variant and the seed
    are separate lines."""
    names, baseline = sweep_variants(sweep)
    pal = Palette(names, baseline)
    others = [k for k in other_keys(sweep) if k != SEED_KEY]
    groups: dict[tuple, list] = {}
    for p in sweep.summary["points"]:
        run = sweep.runs.get(p["name"])
        if run is None:
            continue
        tokens, cos, gate, _ = layer_curves(run)
        if len(tokens):
            key = (point_variant(sweep, p), tuple(p["values"].get(k) for k in others))
            groups.setdefault(key, []).append((tokens, cos, gate))
    if not groups:
        return []
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
    return [save(fig, out_dir, f"{prefix}sweep_similarity.png")]


def plot_analysis(analyses: list[Analysis], out_dir: pathlib.Path) -> list[pathlib.Path]:
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
        z = [(l["layer"], l["cos_z_v"]) for l in a.layers if isinstance(l.get("cos_z_v"), (int, float))]
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
    return [save(fig, out_dir, "analysis.png")]


# ----------------------------------------------------------------------------------------------


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
    except PlotError as e:
        print(f"plot.py: error: {e}", file=sys.stderr)
        return 2

    first = args.paths[0]
    out_dir = args.out or (first.parent if first.is_file() else first) / "plots"
    if runs:
        plot_runs(runs, out_dir, args.smooth, args.logx, args.ylim)
        plot_similarity(runs, out_dir)
    for sweep in sweeps:
        prefix = f"{sweep.path.resolve().name}_" if len(sweeps) > 1 else ""
        plot_sweep(sweep, out_dir, prefix, args.smooth, args.logx, args.ylim)
    if analyses:
        plot_analysis(analyses, out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
