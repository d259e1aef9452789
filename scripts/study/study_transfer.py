#!/usr/bin/env python3
"""The μP transfer study (results in docs/mup-transfer.md): is each attention kind's
best learning rate flat across width under model.parametrization "mup", as it is not under
"sp"? Reads a sweep of configs/sweeps/mup-transfer.json (each point's config.json: its
attention, parametrization and d_model; summary.json: its train.lr, train.seed and final val
loss) and prints, per kind and parametrization, a markdown table: the final val loss at each
width and rate (mean over seeds), the best rate at each width, each seed's best, and the
optimum read off a parabola through the best rate and its two neighbours in log rate (a rate
between the tried ones; none where the best is at the edge of the range tried); then the
spread of those optima across widths (largest over smallest). With --figure it draws the
curves: a panel per kind and parametrization, a line per width, each best rate marked.

    build/xsagpt sweep -c configs/sweeps/mup-transfer.json
    .venv/bin/python scripts/study/study_transfer.py runs/mup-transfer --figure docs/figures/mup-transfer.png
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import pathlib
import statistics
import sys


def read_points(sweep: pathlib.Path) -> dict:
    """(kind, parametrization) -> width -> rate -> {seed: final val loss}, the finished points.
    At mup_base_width a mup model is its sp twin bit for bit (tests/cpp/model/test_mup.cpp), so
    the sweep runs that width once, under sp, and it stands for both."""
    summary = json.loads((sweep / "summary.json").read_text())
    out: dict = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(dict)))
    base = {}
    order, rank = summary["variants"], {}  # the kinds in the order of the sweep's variants, baseline first
    for p in summary["points"]:
        loss = p.get("final_val_loss")
        if p.get("status") != "done" or not isinstance(loss, (int, float)) or not math.isfinite(loss):
            continue
        model = json.loads((sweep / p["dir"] / "config.json").read_text())["model"]
        kind = model["attention"]
        rank[kind] = min(rank.get(kind, len(order)), order.index(p["variant"]))
        key = (kind, model["parametrization"])
        out[key][model["d_model"]][p["values"]["train.lr"]][p["values"]["train.seed"]] = loss
        if key[1] == "sp" and model["d_model"] == model.get("mup_base_width"):
            base.setdefault(kind, {})[p["values"]["train.lr"], p["values"]["train.seed"]] = (model["d_model"], loss)
    for kind, runs in base.items():
        for (lr, seed), (width, loss) in runs.items():
            if (kind, "mup") in out:
                out[kind, "mup"][width][lr].setdefault(seed, loss)
    return dict(sorted(out.items(), key=lambda kv: (rank[kv[0][0]], kv[0][1] != "sp")))


def parabola_optimum(rates: list[float], losses: list[float], best: int) -> float | None:
    """The vertex of the parabola through the best rate and its neighbours, in log rate; None
    at the edge of the range, or where the three points do not curve upwards."""
    if best == 0 or best == len(rates) - 1:
        return None
    (x0, x1, x2) = (math.log(rates[i]) for i in (best - 1, best, best + 1))
    (y0, y1, y2) = (losses[i] for i in (best - 1, best, best + 1))
    num = (x1 - x0) ** 2 * (y1 - y2) - (x1 - x2) ** 2 * (y1 - y0)
    den = (x1 - x0) * (y1 - y2) - (x1 - x2) * (y1 - y0)
    if den >= 0:  # a straight line or a parabola that opens downwards: no minimum
        return None
    return math.exp(x1 - 0.5 * num / den)


def width_row(by_rate: dict) -> dict:
    rates = sorted(by_rate)
    seeds = sorted({s for r in rates for s in by_rate[r]})
    full = [r for r in rates if all(s in by_rate[r] for s in seeds)]  # rates every seed finished
    means = [statistics.mean(by_rate[r].values()) for r in full]
    best = min(range(len(full)), key=means.__getitem__) if full else None
    seed_best = {s: min(full, key=lambda r: by_rate[r][s]) for s in seeds} if full else {}
    return {"rates": full, "means": means, "best": None if best is None else full[best],
            "edge": best is not None and best in (0, len(full) - 1), "seed_best": seed_best,
            "optimum": None if best is None else parabola_optimum(full, means, best), "seeds": seeds}


def fmt_rate(r: float | None) -> str:
    return "-" if r is None else f"{r:.3g}"


def report(data: dict) -> str:
    lines = []
    for (kind, param) in data:
        widths = sorted(data[kind, param])
        rows = {w: width_row(data[kind, param][w]) for w in widths}
        rates = sorted({r for w in widths for r in rows[w]["rates"]})
        lines.append(f"\n**{kind}, {param}** (final val loss, mean over seeds "
                     f"{', '.join(map(str, rows[widths[0]]['seeds']))}; best per width in bold)\n")
        lines.append("| d_model | " + " | ".join(f"lr {fmt_rate(r)}" for r in rates) +
                     " | best | each seed's best | parabola optimum |")
        lines.append("|---:|" + "---:|" * len(rates) + "---:|---|---:|")
        for w in widths:
            row = rows[w]
            cells = []
            for r in rates:
                if r not in row["rates"]:
                    cells.append("-")
                    continue
                m = row["means"][row["rates"].index(r)]
                cells.append(f"**{m:.4f}**" if r == row["best"] else f"{m:.4f}")
            seed_best = ", ".join(fmt_rate(row["seed_best"][s]) for s in row["seeds"])
            lines.append(f"| {w} | " + " | ".join(cells) + f" | {fmt_rate(row['best'])}{' (edge)' if row['edge'] else ''}"
                         f" | {seed_best} | {fmt_rate(row['optimum'])} |")
        optima = [rows[w]["optimum"] for w in widths]
        bests = [rows[w]["best"] for w in widths if rows[w]["best"] is not None]
        spread = max(bests) / min(bests) if bests else None
        if all(o is not None for o in optima):
            lines.append(f"\nbest rates {fmt_rate(min(bests))}-{fmt_rate(max(bests))} ({spread:.3g}x); parabola optima "
                         f"{fmt_rate(min(optima))}-{fmt_rate(max(optima))}, spread {max(optima) / min(optima):.2f}x "
                         f"across d_model {widths[0]}-{widths[-1]}")
        else:
            edge = [w for w in widths if rows[w]["optimum"] is None]
            lines.append(f"\nbest rates {fmt_rate(min(bests)) if bests else '-'}-{fmt_rate(max(bests)) if bests else '-'}"
                         f"{f' ({spread:.3g}x)' if spread else ''}; no optimum inside the range tried at d_model "
                         f"{', '.join(map(str, edge))}: the spread there is unknown")
    return "\n".join(lines) + "\n"


def figure(data: dict, path: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    kinds = list(dict.fromkeys(kind for kind, _ in data))
    params = ["sp", "mup"]
    fig, axes = plt.subplots(len(params), len(kinds), figsize=(4.2 * len(kinds), 7), squeeze=False, sharey=True,
                             layout="constrained")
    for col, kind in enumerate(kinds):
        for row, param in enumerate(params):
            ax = axes[row, col]
            widths = sorted(data.get((kind, param), {}))
            colours = plt.get_cmap("viridis")([i / max(1, len(widths) - 1) * 0.9 for i in range(len(widths))])
            for w, c in zip(widths, colours):
                r = width_row(data[kind, param][w])
                ax.plot(r["rates"], r["means"], marker="o", ms=4, color=c, label=f"d_model {w}")
                if r["best"] is not None:
                    ax.plot([r["best"]], [min(r["means"])], marker="*", ms=14, color=c, mec="k", zorder=3)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{kind}, {param}")
            ax.grid(alpha=0.3)
            if row == len(params) - 1:
                ax.set_xlabel("peak learning rate (train.lr)")
            if col == 0:
                ax.set_ylabel("final val loss")
            ax.legend(fontsize="small", frameon=False)
    fig.suptitle("Best rate across width: sp (top) against mup (bottom); stars mark each width's best")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(path, file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep", type=pathlib.Path, help="the sweep directory (runs/mup-transfer)")
    ap.add_argument("--figure", type=pathlib.Path, help="draw the curves into this PNG")
    args = ap.parse_args()
    if not (args.sweep / "summary.json").is_file():
        sys.exit(f"{args.sweep}: no summary.json (run the sweep, or xsagpt sweep -c ... --summarize)")
    data = read_points(args.sweep)
    if not data:
        sys.exit(f"{args.sweep}: no finished point")
    print(report(data))
    if args.figure:
        figure(data, args.figure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
