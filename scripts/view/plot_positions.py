#!/usr/bin/env python3
"""Compares attention variants position by position, from `xsagpt analyze --positions`.

    python scripts/view/plot_positions.py sa=runs/sa/loss_by_position.json \\
        xsa-last3=runs/xsa-last3/loss_by_position.json --baseline sa --out positions.png

Each argument NAME=PATH names one loss_by_position.json (or a run directory holding one).
Files are grouped by sequence length: within a group, each variant's loss in every
position bucket (1, 2-3, 4-7, ...) is taken minus the baseline's, paired by training
seed (train.seed in the file's config) where a name has several files, one per seed.
The figure has two panels against the bucket's first position (log2): the baseline's
loss, and each variant's difference to it, mean over seeds with +-1 sd where there is
more than one seed (several sequence lengths: one line style per length). The same
numbers are printed as a table, and with --json written as JSON. Below zero: the
variant's loss is lower than the baseline's at those positions.

A name without a file at the baseline's sequence length, a seed the baseline lacks,
bucket ranges that differ within a group, a missing --baseline, a literal NaN or Infinity
in a file (finite_json.py, plot.py's rule: named with its line), or an --out or --json
that cannot be written are errors (exit 2) naming the file.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

import matplotlib

matplotlib.use("Agg")  # files only
import matplotlib.pyplot as plt  # noqa: E402

from finite_json import NotFinite, loads  # noqa: E402  beside this file: no NaN or Infinity literal

DPI = 110


def fail(msg: str) -> None:
    print(f"plot_positions.py: {msg}", file=sys.stderr)
    sys.exit(2)


def read(arg: str) -> dict:
    """NAME=PATH -> {"name", "path", "seq_len", "seed", "ranges", "loss"} (loss per bucket)."""
    name, sep, path = arg.partition("=")
    if not sep or not name or not path:
        fail(f"{arg!r}: expected NAME=PATH (a loss_by_position.json or a run directory holding one)")
    p = pathlib.Path(path)
    if p.is_dir():
        p = p / "loss_by_position.json"
    try:
        j = loads(p.read_text())
        buckets = j["buckets"]
        ranges = [(int(b["first"]), int(b["last"])) for b in buckets]
        loss = [float(b["mean_loss"]) for b in buckets]
        seq_len = int(j["seq_len"])
    except NotFinite as e:
        fail(f"{p}:{e.lineno}: {e}")
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{p}: not a loss_by_position.json of `xsagpt analyze --positions` ({e})")
    seed = (j.get("config") or {}).get("train", {}).get("seed")
    return {"name": name, "path": p, "seq_len": seq_len, "seed": seed, "ranges": ranges, "loss": loss}


def compare(files: list[dict], baseline: str) -> list[dict]:
    """Per sequence length and variant: the baseline's mean loss per bucket and the
    variant's paired differences (mean, sd, n seeds)."""
    if baseline not in {f["name"] for f in files}:
        fail(f"--baseline {baseline!r}: no file of that name (names: {sorted({f['name'] for f in files})})")
    out = []
    for T in sorted({f["seq_len"] for f in files}):
        group = [f for f in files if f["seq_len"] == T]
        base = {f["seed"]: f for f in group if f["name"] == baseline}
        if not base:
            fail(f"sequence length {T}: no {baseline} file ({', '.join(str(f['path']) for f in group)})")
        ranges = next(iter(base.values()))["ranges"]
        for f in group:
            if f["ranges"] != ranges:
                fail(f"{f['path']}: buckets {f['ranges']} differ from the baseline's {ranges} at length {T}")
        base_loss = [statistics.fmean(b["loss"][i] for b in base.values()) for i in range(len(ranges))]
        for name in dict.fromkeys(f["name"] for f in group if f["name"] != baseline):
            runs = [f for f in group if f["name"] == name]
            diffs = []
            for f in runs:
                if f["seed"] not in base:
                    fail(f"{f['path']}: seed {f['seed']} has no {baseline} file at length {T} to pair with")
                diffs.append([a - b for a, b in zip(f["loss"], base[f["seed"]]["loss"])])
            n = len(diffs)
            mean = [statistics.fmean(d[i] for d in diffs) for i in range(len(ranges))]
            sd = [statistics.stdev(d[i] for d in diffs) if n > 1 else None for i in range(len(ranges))]
            out.append({"seq_len": T, "variant": name, "baseline": baseline, "seeds": n, "ranges": ranges,
                        "baseline_loss": base_loss, "diff_mean": mean, "diff_sd": sd})
    if not out:
        fail("no variant besides the baseline")
    return out


def table(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        lines.append(f"{r['variant']} - {r['baseline']}, seq_len {r['seq_len']}, {r['seeds']} seed(s):")
        lines.append(f"  {'positions':>13} {'baseline':>9} {'diff':>9} {'sd':>8}")
        for (a, b), base, m, s in zip(r["ranges"], r["baseline_loss"], r["diff_mean"], r["diff_sd"]):
            pos = str(a) if a == b else f"{a}-{b}"
            lines.append(f"  {pos:>13} {base:9.4f} {m:+9.4f} {'-' if s is None else f'{s:8.4f}':>8}")
    return "\n".join(lines)


def draw(rows: list[dict], out: pathlib.Path, title: str | None) -> None:
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True, gridspec_kw={"height_ratios": [1, 1.4]})
    lengths = sorted({r["seq_len"] for r in rows})
    styles = ["-", "--", ":", "-."]
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    colours = {v: plt.cm.tab10(i % 10) for i, v in enumerate(variants)}
    for k, T in enumerate(lengths):
        r0 = next(r for r in rows if r["seq_len"] == T)
        x = [a for a, _ in r0["ranges"]]
        suffix = f", T={T}" if len(lengths) > 1 else ""
        top.plot(x, r0["baseline_loss"], color="black", ls=styles[k % 4], marker="o", ms=3,
                 label=f"{r0['baseline']}{suffix}")
    for r in rows:
        x = [a for a, _ in r["ranges"]]
        ls = styles[lengths.index(r["seq_len"]) % 4]
        c = colours[r["variant"]]
        label = f"{r['variant']} - {r['baseline']}" + (f", T={r['seq_len']}" if len(lengths) > 1 else "")
        label += f" ({r['seeds']} seeds, +-1 sd)" if r["seeds"] > 1 else ""
        bottom.plot(x, r["diff_mean"], color=c, ls=ls, marker="o", ms=3, label=label)
        if r["seeds"] > 1:
            lo = [m - s for m, s in zip(r["diff_mean"], r["diff_sd"])]
            hi = [m + s for m, s in zip(r["diff_mean"], r["diff_sd"])]
            bottom.fill_between(x, lo, hi, color=c, alpha=0.15, lw=0)
    bottom.axhline(0.0, color="grey", lw=0.8)
    top.set_ylabel("baseline val loss (nats)")
    bottom.set_ylabel("difference to baseline (nats)")
    bottom.set_xlabel("token position (bucket start; bucket = [2^k, 2^(k+1)-1])")
    bottom.set_xscale("log", base=2)
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    top.set_title(title or "validation loss by token position")
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("files", nargs="+", metavar="NAME=PATH")
    ap.add_argument("--baseline", required=True, help="the NAME every other variant is compared with")
    ap.add_argument("--out", default="loss_by_position.png", help="PNG to write (default: %(default)s)")
    ap.add_argument("--json", help="also write the compared numbers to this JSON file")
    ap.add_argument("--title", help="figure title")
    a = ap.parse_args(argv)
    rows = compare([read(f) for f in a.files], a.baseline)
    print(table(rows))
    out = pathlib.Path(a.out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        draw(rows, out, a.title)
        print(out)
        if a.json:
            pathlib.Path(a.json).write_text(json.dumps(rows, indent=2) + "\n")
            print(a.json)
    except OSError as e:  # a folder under a file or on a read-only disk: one line, not a traceback
        fail(f"cannot write {out}{' or ' + a.json if a.json else ''}: {e.filename or ''}: {e.strerror or e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
