#!/usr/bin/env python3
"""The paper's Table 2 for a set of evaluated runs, with error bars: one row per
result, the eight downstream tasks with the paper's metric for each (accuracy for
BoolQ, LAMBADA, SocialIQA, WinoGrande; length-normalised accuracy for ARC-Easy,
HellaSwag, OpenBookQA, PIQA), in percent with lm-eval's standard error, and their
average; then, when a model was trained with several seeds, the mean and spread over
seeds and every variant's paired difference to the baseline per task and on average.

    .venv/bin/python scripts/eval/table2.py results/                       # every run lm-eval wrote there
    .venv/bin/python scripts/eval/table2.py results/sa-s1 results/sa-s2 results/xsa-s1 results/xsa-s2
    .venv/bin/python scripts/eval/table2.py "XSA 1.4B=results/xsa-1.4b/results_2026-01-01T00-00-00.json" eval.json
    .venv/bin/python scripts/eval/table2.py results/ --baseline xsa            # every variant against XSA

Each argument is [LABEL=]PATH where PATH is
  - a results_*.json file from lm-eval (scripts/eval/lm_eval_xsagpt.py --model xsagpt);
  - a folder: lm-eval's --output_path or one run's folder in it; each folder holding
    results_*.json gives one row from its newest file (the older ones are named on
    stderr; give a file to pick another);
  - or the JSON report of `xsagpt eval` (every model in it becomes a row; its task
    names must be the lm-eval names below to land in the paper's columns).
The model config and the seed are read from what the bridge stores in lm-eval's
results (else from the run's config.json beside the checkpoint) or from the xsagpt
eval report. A row's variant is the report's name for it, else the run's as its
config.json records it, else (older runs) its attention keys as `xsagpt eval` names them
(sa, xsa, "xsa layers=last 3", "xsa gate=sa", "sa sinks=1"; run_variant.py).
Rows of one variant with the same model config (seed aside) are seeds of one model.
--baseline names the variant every other one is compared with (default: the first
row's). A model is paired with the only baseline model, or, among several, with the one
whose config is the same apart from the variant keys (attention, n_sink and the
attention kinds' own keys and options, e.g. xsa_layers, xsa_gate, out_gate: read from
`xsagpt config --json`, build/xsagpt or $XSAGPT_BIN); seeds are paired by seed value when both sides have the same seeds, else in
the order given.

Errors: a cell's ± is lm-eval's standard error over the task's items; an average's
is sqrt(sum se^2) / tasks. Over seeds, "spread" is the sample standard deviation of
the seeds' scores. The paired difference's combined error is
sqrt(se_SA^2 + se_XSA^2 + sd_delta^2 / seeds): the item sampling error of both sides
(the seeds share the items, so averaging seeds does not shrink it) plus the seed
noise of the mean difference. A difference within that error is marked "~". With two
or more paired seeds, the rows below it give the mean difference's 95% Student's t
interval over the seeds and the paired t-test's two-sided p (scipy.stats.ttest_rel), as
`xsagpt sweep` reports val loss; with one seed no interval exists and the rows say so. Every
variant is tested against the one baseline, so per column the variants' p-values are a family:
the row "p Holm (m variants)" gives them Holm-adjusted (Holm 1979) across the m variants with
a test, which keeps the chance of any false finding among them at the level read. With 3
baseline seeds or more, the row "noise floor" under each delta gives the baseline's own
spread over its seeds (the sample std of "Over seeds"): what reseeding it alone moves.
These treat the seeds as the only noise (the items are shared), so they answer "does
the difference hold across seeds", the combined error "is it beyond item sampling too".
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import os
import pathlib
import statistics
import subprocess
import sys

from table2_rows import rows_from  # beside this file

# (lm-eval task, column title, metric), in the order of the lm_eval --tasks list.
TASKS = [
    ("arc_easy", "ARC-E", "acc_norm"),
    ("boolq", "BoolQ", "acc"),
    ("hellaswag", "HellaSwag", "acc_norm"),
    ("lambada_openai", "LAMBADA", "acc"),
    ("openbookqa", "OBQA", "acc_norm"),
    ("piqa", "PIQA", "acc_norm"),
    ("social_iqa", "SIQA", "acc"),
    ("winogrande", "WinoG", "acc"),
]
ROOT = pathlib.Path(__file__).resolve().parents[2]


@functools.cache
def variant_keys() -> frozenset[str]:
    """The model keys that make the variant, not the model: attention, n_sink and each
    attention kind's own keys, as `xsagpt config --json` lists them (the kinds' table,
    src/config/attention_kinds.cpp), so a kind added there is paired
    here without an edit. Asked only when a variant has several baseline models to
    choose from."""
    binary = pathlib.Path(os.environ.get("XSAGPT_BIN") or ROOT / "build" / "xsagpt")
    if not binary.is_file():
        sys.exit(f"table2.py: pairing a variant with one of several baseline models needs the attention kinds' "
                 f"keys from the xsagpt binary, and {binary} does not exist: build it (bash scripts/setup.sh) "
                 f"or set XSAGPT_BIN")
    kinds = json.loads(subprocess.run([str(binary), "config", "--json"], check=True, capture_output=True,
                                      text=True).stdout)["attention_kinds"]
    return frozenset({"attention", "n_sink"} | {k for kind in kinds for k in kind["keys"]})


def paper_cells(row: dict) -> None:
    """Per task (value, stderr) in percent for the paper's metric, and the average."""
    row["cells"] = []
    for task, _, metric in TASKS:
        s = row["scores"].get(task, {})
        v, se = s.get(metric), s.get(f"{metric}_stderr")
        row["cells"].append(None if v is None else (100 * v, None if se is None else 100 * se))
    present = [c for c in row["cells"] if c is not None]
    row["partial"] = len(present) < len(TASKS)
    if not present:
        row["avg"] = None
        return
    ses = [c[1] for c in present]
    se = None if any(s is None for s in ses) else math.sqrt(sum(s * s for s in ses)) / len(present)
    row["avg"] = (sum(c[0] for c in present) / len(present), se)


def fmt(cell, sign=False) -> str:
    if cell is None:
        return "-"
    v, se = cell
    text = f"{v:+.2f}" if sign else f"{v:.2f}"
    return text if se is None else f"{text}±{se:.2f}"


def strip(model: dict | None) -> dict:
    return {k: v for k, v in (model or {}).items() if k not in variant_keys()}


def group_seeds(rows: list[dict]) -> list[list[dict]]:
    """Rows of the same model config (the seed is not in it): one model, several seeds."""
    groups: list[list[dict]] = []
    for r in rows:
        for g in groups:
            if r["model"] is not None and g[0]["model"] == r["model"] and g[0]["variant"] == r["variant"]:
                g.append(r)
                break
        else:
            groups.append([r])
    return groups


def partner(group: list[dict], groups: list[list[dict]], baseline: str | None) -> list[dict] | None:
    base = [g for g in groups if g[0]["variant"] == baseline]
    if len(base) == 1:
        return base[0]
    for g in base:
        if group[0]["model"] is not None and g[0]["model"] is not None and strip(g[0]["model"]) == strip(group[0]["model"]):
            return g
    return None


def pair_seeds(base: list[dict], other: list[dict]) -> list[tuple[dict, dict]]:
    seeds_base, seeds_other = [r["seed"] for r in base], [r["seed"] for r in other]
    if None not in seeds_base and sorted(seeds_base) == sorted(seeds_other) and len(set(seeds_base)) == len(seeds_base):
        by_seed = {r["seed"]: r for r in other}
        return [(r, by_seed[r["seed"]]) for r in base]
    return list(zip(base, other))


def columns(i: int, rows: list[dict]) -> list:
    """Column i (a task, or len(TASKS) for the average) of each row."""
    return [r["cells"][i] if i < len(TASKS) else r["avg"] for r in rows]


def seed_summary(group: list[dict]) -> list:
    """Per column: (mean over seeds, spread, mean stderr), or None when a seed lacks it."""
    out = []
    for i in range(len(TASKS) + 1):
        cells = columns(i, group)
        if any(c is None for c in cells):
            out.append(None)
            continue
        vals = [c[0] for c in cells]
        ses = [c[1] for c in cells]
        spread = statistics.stdev(vals) if len(vals) > 1 else 0.0
        out.append((statistics.fmean(vals), spread, None if None in ses else statistics.fmean(ses)))
    return out


def paired_delta(pairs: list[tuple[dict, dict]]) -> list:
    """Per column: (mean variant - baseline over paired seeds, combined error, within error?) or None."""
    out = []
    for i in range(len(TASKS) + 1):
        sa, xsa = columns(i, [p[0] for p in pairs]), columns(i, [p[1] for p in pairs])
        if any(c is None for c in sa + xsa):
            out.append(None)
            continue
        deltas = [b[0] - a[0] for a, b in zip(sa, xsa)]
        k = len(deltas)
        mean = statistics.fmean(deltas)
        if any(c[1] is None for c in sa + xsa):
            out.append((mean, None, False))
            continue
        var = statistics.fmean(c[1] ** 2 for c in sa) + statistics.fmean(c[1] ** 2 for c in xsa)
        if k > 1:
            var += statistics.variance(deltas) / k
        err = math.sqrt(var)
        out.append((mean, err, abs(mean) <= err))
    return out


def paired_t(pairs: list[tuple[dict, dict]]) -> list | None:
    """Per column: (95% t interval (lo, hi), paired t-test p) over the seeds, None with fewer than two
    pairs or a missing cell; p is None when the differences do not vary. None without scipy (the eval
    extra, requirements-eval.txt), which the rest of the table does not need."""
    try:
        from scipy import stats
    except ImportError:
        return None
    out = []
    for i in range(len(TASKS) + 1):
        base, other = columns(i, [p[0] for p in pairs]), columns(i, [p[1] for p in pairs])
        if len(pairs) < 2 or any(c is None for c in base + other):
            out.append(None)
            continue
        a, b = [c[0] for c in base], [c[0] for c in other]
        d = [y - x for x, y in zip(a, b)]
        sem = statistics.stdev(d) / math.sqrt(len(d))
        mean = statistics.fmean(d)
        if sem == 0:
            out.append(((mean, mean), None))
            continue
        lo, hi = stats.t.interval(0.95, len(d) - 1, loc=mean, scale=sem)
        out.append(((float(lo), float(hi)), float(stats.ttest_rel(b, a).pvalue)))
    return out


def holm(ps: list) -> list:
    """Holm's step-down adjustment (Holm 1979) of a family of p-values, None (no test) left out of the
    family and kept: sorted ascending, the k-th (from 0) becomes the running maximum of
    min(1, (m - k) p), m the p-values given. As src/stats/holm.h does it for `xsagpt eval`."""
    order = sorted((i for i, p in enumerate(ps) if p is not None), key=lambda i: ps[i])
    out, running = list(ps), 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (len(order) - k) * ps[i]))
        out[i] = running
    return out


def table(rows: list[dict], baseline: str | None = None) -> str:
    for r in rows:
        paper_cells(r)
    if rows and baseline is None:
        baseline = rows[0]["variant"]
    w = max([5] + [len(r["label"]) for r in rows])
    vw = max([7] + [len(r["variant"] or "?") for r in rows])
    cw = 12
    head = f"{'model':<{w}}  {'variant':<{vw}}" + "".join(f" {title:>{cw}}" for _, title, _ in TASKS) + f" {'Avg':>{cw}}"
    metric = f"{'':<{w}}  {'':<{vw}}" + "".join(f" {m:>{cw}}" for _, _, m in TASKS)
    lines = [head, metric]
    for r in rows:
        avg = fmt(r["avg"]) + ("*" if r["partial"] and r["avg"] is not None else "")
        lines.append(f"{r['label']:<{w}}  {(r['variant'] or '?'):<{vw}}" +
                     "".join(f" {fmt(c):>{cw}}" for c in r["cells"]) + f" {avg:>{cw}}")
    lines.append("± lm-eval's standard error over the task's items; Avg: unweighted over tasks, "
                 "± sqrt(sum se^2)/tasks")
    if any(r["partial"] for r in rows):
        lines.append("* average over the tasks present only")

    groups = group_seeds(rows)
    others = [(g, partner(g, groups, baseline)) for g in groups if g[0]["variant"] != baseline]
    if not any(len(g) > 1 for g in groups) and not any(p for _, p in others):
        return "\n".join(lines)
    gw = max(w, 22)
    lines += ["", "Over seeds: mean ± spread (sample std over seeds) [n seeds]"]
    lines.append(f"{'model':<{gw}}  {'variant':<{vw}}" + "".join(f" {title:>{cw}}" for _, title, _ in TASKS) +
                 f" {'Avg':>{cw}}")
    for g in groups:
        name = g[0]["label"] + (f" +{len(g) - 1}" if len(g) > 1 else "")
        cells = "".join(f" {'-' if s is None else f'{s[0]:.2f}±{s[1]:.2f}':>{cw}}" for s in seed_summary(g))
        lines.append(f"{name:<{gw}}  {(g[0]['variant'] or '?'):<{vw}}{cells}  [{len(g)}]")
    near = False
    # Every variant is tested against the one baseline: per column, their p-values are one family,
    # Holm-adjusted together.
    pairs_of = {id(g): pair_seeds(p, g) for g, p in others if p is not None}
    tests = {k: paired_t(pairs) for k, pairs in pairs_of.items() if len(pairs) > 1}
    family = [k for k, t in tests.items() if t is not None]
    held = {k: [] for k in family}
    for i in range(len(TASKS) + 1):
        for k, a in zip(family, holm([None if tests[k][i] is None else tests[k][i][1] for k in family])):
            held[k].append(a)
    for g, p in others:
        if p is None:
            continue
        pairs = pairs_of[id(g)]
        lines += ["", f"{g[0]['variant']} - {baseline}, paired over {len(pairs)} seed(s): {g[0]['label']} - "
                  f"{p[0]['label']}: mean difference ± combined error"]
        cells = []
        for d in paired_delta(pairs):
            if d is None:
                cells.append("-")
                continue
            text = f"{d[0]:+.2f}" + ("" if d[1] is None else f"±{d[1]:.2f}") + ("~" if d[2] else "")
            near = near or d[2]
            cells.append(text)
        lines.append(f"{'delta':<{gw}}  {'':<{vw}}" + "".join(f" {c:>{cw}}" for c in cells))
        if len(p) >= 3:  # the noise floor: the baseline's own spread over its seeds, beside the difference
            floor = [("-" if x is None else f"{x[1]:.2f}") for x in seed_summary(p)]
            lines.append(f"{'noise floor (' + baseline + ' sd)':<{gw}}  {'':<{vw}}" + "".join(f" {c:>{cw}}" for c in floor))
        tt = tests.get(id(g))
        if len(pairs) < 2:
            lines.append(f"{'95% t interval, p':<{gw}}  {'':<{vw}} none: one seed gives no interval over seeds")
            continue
        if tt is None:
            lines.append(f"{'95% t interval, p':<{gw}}  {'':<{vw}} need scipy (pip install -r requirements-eval.txt)")
            continue
        ci = [("-" if t is None else f"{t[0][0]:+.2f}..{t[0][1]:+.2f}") for t in tt]
        ps = [("-" if t is None or t[1] is None else f"{t[1]:.3g}") for t in tt]
        lines.append(f"{'95% t interval':<{gw}}  {'':<{vw}}" + "".join(f" {c:>{cw}}" for c in ci))
        lines.append(f"{'paired t-test p':<{gw}}  {'':<{vw}}" + "".join(f" {c:>{cw}}" for c in ps))
        m = len(family)
        lines.append(f"{f'p Holm ({m} variant' + ('s)' if m != 1 else ')'):<{gw}}  {'':<{vw}}" +
                     "".join(f" {'-' if a is None else f'{a:.3g}':>{cw}}" for a in held[id(g)]))
    if near:
        lines.append("~ |delta| is within the combined error sqrt(se_base^2 + se_variant^2 + sd_delta^2/seeds): "
                     "not distinguishable from no difference at one standard error")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="[LABEL=]PATH: lm-eval results (file or folder) or an xsagpt eval report")
    ap.add_argument("--baseline", metavar="VARIANT",
                    help="the variant every other one is compared with (default: the first row's)")
    args = ap.parse_args(argv)
    rows = []
    for spec in args.runs:
        # A path may hold "=" itself (sweep points: model.attention=xsa): a label only if it is not a path.
        label, _, path = spec.partition("=") if "=" in spec and not pathlib.Path(spec).exists() else ("", "", spec)
        rows += rows_from(label or None, pathlib.Path(path))
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    if args.baseline is not None and args.baseline not in variants:
        sys.exit(f"--baseline: '{args.baseline}' is none of the rows' variants ({', '.join(map(str, variants))})")
    print(table(rows, args.baseline))


if __name__ == "__main__":
    main()
