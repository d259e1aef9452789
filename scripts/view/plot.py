#!/usr/bin/env python3
"""Draws xsagpt's figures (PNG) from what `xsagpt train`, `sweep` and `analyze` write.

    python scripts/view/plot.py PATH... [--out DIR] [--smooth A] [--logx] [--ylim LO HI]

Each PATH is one of:
  run dir       (config.json + metrics.jsonl): loss_vs_step.png and loss_vs_tokens.png, the train
                and val loss of every run given, overlaid; val_gap.png, XSA minus SA val loss
                against tokens, when exactly one SA and one XSA run are given.
  sweep dir     (summary.json + a run dir per point): sweep_final.png, the final val loss against
                each swept value with one line per attention type (the shape of the paper's
                figures 3-5) above the XSA minus SA difference; sweep_curves.png, the loss
                curves of each point, SA and XSA together.
  analysis.json (from `xsagpt analyze`, or a dir holding one): analysis.png, value cosine
                similarity, diagonal attention a_ii and cos(y_i, v_i) (for XSA also cos(z_i, v_i))
                against layer index (the paper's figure 1).
A dir may be a run and hold an analysis.json; it then gets both. SA is drawn in blues and XSA in
oranges everywhere, several runs of one type in shades of its colour. Figures go to DIR (default
<first PATH>/plots); each written path is printed. A PATH that is none of these, or a run with no
metrics yet, is an error (exit 2) naming it.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")  # files only: no display on training machines
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib import ticker  # noqa: E402

ATTENTION_KEY = "model.attention"
FAMILY_CMAP = {"sa": "Blues", "xsa": "Oranges", None: "Greys"}
VAL_MARKER = {"sa": "o", "xsa": "s", None: "^"}  # tells the types apart in greyscale too
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


@dataclasses.dataclass
class Run:
    path: pathlib.Path
    label: str
    attention: str | None  # "sa", "xsa", or None when config.json does not say
    train: Series
    val: Series


@dataclasses.dataclass
class Sweep:
    path: pathlib.Path
    summary: dict
    runs: dict[str, Run]  # point name -> run, for points that have logged anything


@dataclasses.dataclass
class Analysis:
    path: pathlib.Path
    label: str
    attention: str | None
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
    )


def attention_of(config: dict) -> str | None:
    att = config.get("model", {}).get("attention") if isinstance(config, dict) else None
    return att if att in ("sa", "xsa") else None


def load_run(path: pathlib.Path, label: str | None = None) -> Run:
    metrics = path / "metrics.jsonl"
    if not metrics.is_file():
        raise NoRecords(f"{path}: no metrics.jsonl (has this run logged anything yet?)")
    train, val = read_metrics(metrics)
    if not train and not val:
        raise NoRecords(f"{metrics}: no train or val records")
    config = read_json(path / "config.json") if (path / "config.json").is_file() else {}
    return Run(path, label or path.name, attention_of(config), series(train, "train_loss"), series(val, "val_loss"))


def load_sweep(path: pathlib.Path) -> Sweep:
    summary = read_json(path / "summary.json")
    if not isinstance(summary.get("points"), list) or not isinstance(summary.get("keys"), list):
        raise PlotError(f"{path / 'summary.json'}: expected 'keys' and 'points' lists")
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
    return Analysis(path, label, att if att in ("sa", "xsa") else None, sorted(layers, key=lambda l: l["layer"]))


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


def colours(attentions: list[str | None]) -> list:
    """One colour per item: its attention type's family, in distinct shades when it repeats."""
    count = {a: attentions.count(a) for a in set(attentions)}
    seen: dict[str | None, int] = {}
    out = []
    for a in attentions:
        i = seen.get(a, 0)
        seen[a] = i + 1
        n = count[a]
        shade = 0.75 if n == 1 else 0.95 - 0.5 * i / (n - 1)  # pale shades are unreadable
        out.append(plt.get_cmap(FAMILY_CMAP[a])(shade))
    return out


def tag(attention: str | None) -> str:
    return attention.upper() if attention else "?"


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
    """Train and val loss of all runs overlaid, against step and against tokens; and XSA minus
    SA val loss when the runs are one SA/XSA pair."""
    cols = colours([r.attention for r in runs])
    written = []
    for xname, xlabel in (("step", "step"), ("tokens", "tokens seen")):
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharex=True, layout="constrained")
        train_curves, val_curves = [], []
        for run, c in zip(runs, cols):
            label = f"{run.label} [{tag(run.attention)}]"
            x = getattr(run.train, xname)
            if len(x):
                y = ema(run.train.loss, smooth)
                if not np.array_equal(y, run.train.loss):
                    axes[0].plot(x, run.train.loss, color=c, alpha=0.15, lw=0.8)
                axes[0].plot(x, y, color=c, lw=1.6, label=label)
                train_curves.append((x, y))
            xv = getattr(run.val, xname)
            if len(xv):
                axes[1].plot(xv, run.val.loss, color=c, lw=1.6, marker=VAL_MARKER[run.attention],
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

    sa = [r for r in runs if r.attention == "sa"]
    xsa = [r for r in runs if r.attention == "xsa"]
    if len(sa) == 1 and len(xsa) == 1:
        written += plot_val_gap(sa[0], xsa[0], out_dir, logx)
    return written


def plot_val_gap(sa: Run, xsa: Run, out_dir: pathlib.Path, logx: bool) -> list[pathlib.Path]:
    sa_at = dict(zip(sa.val.tokens, sa.val.loss))
    common = [(t, l - sa_at[t]) for t, l in zip(xsa.val.tokens, xsa.val.loss) if t in sa_at]
    if not common:
        print(f"plot.py: {sa.label} and {xsa.label} share no val points (tokens); no val_gap.png",
              file=sys.stderr)
        return []
    t, d = map(np.array, zip(*common))
    fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    ax.axhline(0, color="0.4", lw=0.8)
    ax.plot(t, d, color="0.15", marker="o", ms=4, lw=1.4)
    for where, cmap, label in ((d < 0, "Oranges", "XSA lower"), (d > 0, "Blues", "SA lower")):
        if where.any():
            ax.fill_between(t, d, 0, where=where, interpolate=True, color=plt.get_cmap(cmap)(0.5), alpha=0.2,
                            lw=0, label=label)
    ax.set_title(f"val loss: {xsa.label} [XSA] minus {sa.label} [SA]")
    ax.set_xlabel("tokens seen")
    ax.set_ylabel("XSA − SA val loss")
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
    return written


def point_attention(sweep: Sweep, point: dict) -> str | None:
    att = point["values"].get(ATTENTION_KEY)
    if att is None and point["name"] in sweep.runs:  # attention not swept: the run's config says
        att = sweep.runs[point["name"]].attention
    return att if att in ("sa", "xsa") else None


def sort_key(values: tuple) -> list:
    """Numbers by value, before strings (a swept key may hold either)."""
    return [(0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v)) for v in values]


def describe(values: dict) -> str:
    return ", ".join(f"{k.split('.')[-1]}={number(v)}" for k, v in values.items()) or "all"


def plot_sweep_final(sweep: Sweep, out_dir: pathlib.Path, prefix: str) -> list[pathlib.Path]:
    """Per swept numeric key: final val loss against it, one line per attention type (and per
    value of the other keys), above the XSA minus SA difference."""
    keys = [k for k in sweep.summary["keys"] if k != ATTENTION_KEY]
    points = [p for p in sweep.summary["points"] if isinstance(p.get("final_val_loss"), (int, float))]
    numeric = [k for k in keys if all(isinstance(p["values"].get(k), (int, float)) for p in sweep.summary["points"])]
    if not numeric:
        print(f"plot.py: {sweep.path}: no numeric swept key besides attention; no final-loss figure", file=sys.stderr)
        return []
    failed = [p for p in sweep.summary["points"] if p.get("status") == "failed"]
    if not points:
        print(f"plot.py: {sweep.path}: no point has finished ({len(failed)} failed); no final-loss figure",
              file=sys.stderr)
        return []
    diffs = [d for d in sweep.summary.get("differences", []) if isinstance(d.get("xsa_minus_sa_val_loss"), (int, float))]
    fig, axes = plt.subplots(2, len(numeric), figsize=(6.5 * len(numeric), 7), squeeze=False,
                             sharex="col", height_ratios=[2, 1], layout="constrained")
    for col, key in enumerate(numeric):
        others = [k for k in keys if k != key]
        top, bottom = axes[0, col], axes[1, col]
        # one line per (attention, values of the other keys)
        groups: dict[tuple, list[dict]] = {}
        for p in points:
            groups.setdefault((point_attention(sweep, p), tuple(p["values"].get(k) for k in others)), []).append(p)
        order = sorted(groups, key=lambda g: (str(g[0]), sort_key(g[1])))
        for (att, rest), c in zip(order, colours([g[0] for g in order])):
            ps = sorted(groups[(att, rest)], key=lambda p: p["values"][key])
            label = tag(att) + (f" ({describe(dict(zip(others, rest)))})" if others else "")
            top.plot([p["values"][key] for p in ps], [p["final_val_loss"] for p in ps], color=c,
                     marker=VAL_MARKER[att], ms=6, lw=1.8, label=label)
        # A failed point (diverged, bad data, out of memory: its failed.json) has no
        # loss to plot; a red cross at its value along the top edge says it was tried.
        xs = [p["values"][key] for p in failed if isinstance(p["values"].get(key), (int, float))]
        if xs:
            top.scatter(xs, [0.97] * len(xs), marker="x", s=60, color="tab:red", zorder=3, clip_on=False,
                        transform=top.get_xaxis_transform(), label=f"failed ({len(xs)}: see summary.json)")
        top.set_ylabel("final val loss")
        top.grid(alpha=0.3)
        top.legend(frameon=False, fontsize="small")

        bottom.axhline(0, color="0.4", lw=0.8)
        dgroups: dict[tuple, list[dict]] = {}
        for d in diffs:
            if isinstance(d.get("values", {}).get(key), (int, float)):
                dgroups.setdefault(tuple(d["values"].get(k) for k in others), []).append(d)
        greys = [plt.get_cmap("Greys")(0.9 - 0.5 * i / max(1, len(dgroups) - 1)) for i in range(len(dgroups))]
        for rest, c in zip(sorted(dgroups, key=sort_key), greys):
            ds = sorted(dgroups[rest], key=lambda d: d["values"][key])
            x, y = [d["values"][key] for d in ds], [d["xsa_minus_sa_val_loss"] for d in ds]
            bottom.plot(x, y, color=c, marker="D", ms=5, lw=1.4,
                        label=describe(dict(zip(others, rest))) if others else None)
            for xi, yi in zip(x, y):
                bottom.annotate(f"{yi:+.3f}", (xi, yi), textcoords="offset points", xytext=(0, 6),
                                ha="center", fontsize="x-small")
        if not dgroups:
            bottom.text(0.5, 0.5, "no finished SA/XSA pair yet", ha="center", va="center", transform=bottom.transAxes)
        elif others:
            bottom.legend(frameon=False, fontsize="x-small")
        bottom.set_ylabel("XSA − SA val loss\n(< 0: XSA better)")
        bottom.set_xlabel(key)
        bottom.grid(alpha=0.3)
        bottom.margins(y=0.25)  # room for the value labels
        set_xscale(bottom, [p["values"][key] for p in sweep.summary["points"]], key)
    fig.suptitle(f"Sweep {sweep.path.resolve().name}: final val loss "
                 f"({len(points)} of {len(sweep.summary['points'])} points finished"
                 + (f", {len(failed)} failed)" if failed else ")"))
    return [save(fig, out_dir, f"{prefix}sweep_final.png")]


def plot_sweep_curves(sweep: Sweep, out_dir: pathlib.Path, prefix: str, smooth: float | None, logx: bool, ylim) -> list[pathlib.Path]:
    """One panel per setting of the non-attention keys: SA and XSA train (smoothed, thin) and val
    (markers) loss against tokens."""
    others = [k for k in sweep.summary["keys"] if k != ATTENTION_KEY]
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
        ps = sorted(panels[rest], key=lambda p: str(point_attention(sweep, p)))
        for p, c in zip(ps, colours([point_attention(sweep, p) for p in ps])):
            run, att = sweep.runs[p["name"]], point_attention(sweep, p)
            note = " (failed)" if p.get("status") == "failed" else ""
            if len(run.train.step):
                y = ema(run.train.loss, smooth)
                ax.plot(run.train.tokens, y, color=c, lw=1.0, alpha=0.55, label=f"{tag(att)} train{note}")
                curves.append((run.train.tokens, y))
            if len(run.val.step):
                ax.plot(run.val.tokens, run.val.loss, color=c, lw=1.8, marker=VAL_MARKER[att], ms=4,
                        label=f"{tag(att)} val{note}")
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


def plot_analysis(analyses: list[Analysis], out_dir: pathlib.Path) -> list[pathlib.Path]:
    """The paper's figure 1: per layer, how alike values are, how much a token attends to itself,
    and how aligned the attention output is with its own value (for XSA before and after the
    projection removes that component)."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4), layout="constrained")
    for a, c in zip(analyses, colours([a.attention for a in analyses])):
        label = f"{a.label} [{tag(a.attention)}]"
        layer = [l["layer"] for l in a.layers]
        m = VAL_MARKER[a.attention]
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
    for sweep in sweeps:
        prefix = f"{sweep.path.resolve().name}_" if len(sweeps) > 1 else ""
        plot_sweep(sweep, out_dir, prefix, args.smooth, args.logx, args.ylim)
    if analyses:
        plot_analysis(analyses, out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
