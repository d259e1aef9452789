#!/usr/bin/env python3
"""The paper's Table 2 for a set of evaluated runs: one row per model, the eight
downstream tasks with the paper's metric for each (accuracy for BoolQ, LAMBADA,
SocialIQA, WinoGrande; length-normalised accuracy for ARC-Easy, HellaSwag,
OpenBookQA, PIQA), in percent, their average, and for XSA rows the difference of
averages against their SA partner.

    .venv/bin/python scripts/table2.py results/sa-1.4b results/xsa-1.4b
    .venv/bin/python scripts/table2.py "XSA 1.4B=results/xsa-1.4b" eval.json

Each argument is [LABEL=]PATH where PATH is
  - lm-eval's --output_path (a results_*.json file, or a folder holding them: the
    newest per folder is read), from scripts/lm_eval_xsagpt.py --model xsagpt;
  - or the JSON report of `xsagpt eval` (every model in it becomes a row; its task
    names must be the lm-eval names below to land in the paper's columns).
SA or XSA is read from the model config the bridge stores in lm-eval's results
(else from the run's config.json beside the checkpoint named in model_args) or from
the xsagpt eval report. XSA rows are paired with the SA row
whose model config is the same apart from the attention keys, else with the only
SA row; Avg is over the tasks a row has (marked * when some are missing).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

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
ATTENTION_KEYS = ("attention", "xsa_layers", "xsa_gate")


def run_config(checkpoint: str) -> dict | None:
    """The run's config.json for a run directory or a checkpoints/step_*.pt inside one."""
    p = pathlib.Path(checkpoint)
    for cand in (p / "config.json", p.parent.parent / "config.json", p.parent / "config.json"):
        if cand.is_file():
            return json.loads(cand.read_text())
    return None


def newest_results(path: pathlib.Path) -> pathlib.Path:
    if path.is_file():
        return path
    found = sorted(path.rglob("results_*.json"), key=lambda f: f.stat().st_mtime)
    if not found:
        sys.exit(f"{path}: no results_*.json (lm-eval's --output_path) in this folder")
    return found[-1]


def rows_from(label: str | None, path: pathlib.Path) -> list[dict]:
    if not path.exists():
        sys.exit(f"{path}: no such file or folder")
    path = newest_results(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        sys.exit(f"{path}: not JSON ({e})")
    if "models" in data and "tasks" in data:  # xsagpt eval report
        rows = []
        for m in data["models"]:
            rows.append({"label": label or m["checkpoint"], "attention": m.get("attention"),
                         "model": m.get("model"), "scores": {t: r for t, r in m["results"].items()}})
        if label and len(rows) > 1:
            for i, r in enumerate(rows):
                r["label"] = f"{label} [{i + 1}]"
        return rows
    if "results" not in data:
        sys.exit(f"{path}: neither lm-eval results (a 'results' key) nor an xsagpt eval report")
    scores = {}
    for task, metrics in data["results"].items():
        scores[task] = {k.split(",")[0]: v for k, v in metrics.items() if isinstance(v, (int, float))}
    info = data.get("config", {}).get("xsagpt") or {}  # written by lm_eval_xsagpt.py's get_model_info
    model_args = data.get("config", {}).get("model_args", "")
    if isinstance(model_args, str):
        model_args = dict(kv.split("=", 1) for kv in model_args.split(",") if "=" in kv)
    checkpoint = info.get("checkpoint") or model_args.get("checkpoint")
    model = info.get("model")
    if model is None and checkpoint:
        cfg = run_config(checkpoint)
        model = cfg.get("model") if cfg else None
    return [{"label": label or checkpoint or str(path), "attention": model.get("attention", "sa") if model else None,
             "model": model, "scores": scores}]


def partner(row: dict, rows: list[dict]) -> dict | None:
    sa = [r for r in rows if r["attention"] == "sa"]
    strip = lambda m: {k: v for k, v in (m or {}).items() if k not in ATTENTION_KEYS}  # noqa: E731
    for r in sa:
        if row["model"] is not None and r["model"] is not None and strip(r["model"]) == strip(row["model"]):
            return r
    return sa[0] if len(sa) == 1 else None


def table(rows: list[dict]) -> str:
    for r in rows:
        vals = [r["scores"].get(t, {}).get(m) for t, _, m in TASKS]
        r["cells"] = [None if v is None else 100 * v for v in vals]
        present = [v for v in r["cells"] if v is not None]
        r["avg"] = sum(present) / len(present) if present else None
        r["partial"] = len(present) < len(TASKS)
    width = max([5] + [len(r["label"]) for r in rows])
    head = f"{'model':<{width}}  {'attn':<4}" + "".join(f" {title:>9}" for _, title, _ in TASKS)
    head += f" {'Avg':>7} {'ΔAvg':>7}"
    metric = f"{'':<{width}}  {'':<4}" + "".join(f" {m:>9}" for _, _, m in TASKS)
    lines = [head, metric]
    for r in rows:
        cells = "".join(f" {'-' if v is None else f'{v:.2f}':>9}" for v in r["cells"])
        avg = "-" if r["avg"] is None else f"{r['avg']:.2f}" + ("*" if r["partial"] else "")
        delta = ""
        if r["attention"] == "xsa":
            p = partner(r, rows)
            if p is not None and p["avg"] is not None and r["avg"] is not None:
                delta = f"{r['avg'] - p['avg']:+.2f}"
        lines.append(f"{r['label']:<{width}}  {(r['attention'] or '?'):<4}{cells} {avg:>7} {delta:>7}")
    if any(r["partial"] for r in rows):
        lines.append("* average over the tasks present only")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="[LABEL=]PATH: lm-eval results (file or folder) or an xsagpt eval report")
    args = ap.parse_args(argv)
    rows = []
    for spec in args.runs:
        # A path may hold "=" itself (sweep points: model.attention=xsa): a label only if it is not a path.
        label, _, path = spec.partition("=") if "=" in spec and not pathlib.Path(spec).exists() else ("", "", spec)
        rows += rows_from(label or None, pathlib.Path(path))
    print(table(rows))


if __name__ == "__main__":
    main()
