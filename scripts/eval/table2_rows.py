"""table2.py's rows: what lm-eval's results files (scripts/eval/lm_eval_xsagpt.py) and
`xsagpt eval`'s JSON reports hold, one row per evaluated model: its label, variant,
model config, seed and scores per task, with the run's config.json read where the
results do not carry the model or the seed.
"""
from __future__ import annotations

import json
import pathlib
import sys

from run_variant import variant_of  # beside this file


def run_config(checkpoint: str) -> dict | None:
    """The run's config.json for a run directory or a checkpoints/step_*.pt inside one."""
    p = pathlib.Path(checkpoint)
    for cand in (p / "config.json", p.parent.parent / "config.json", p.parent / "config.json"):
        if cand.is_file():
            return json.loads(cand.read_text())
    return None


def result_files(path: pathlib.Path) -> list[pathlib.Path]:
    """A file as given; for a folder, the newest results_*.json of each folder below it."""
    if path.is_file():
        return [path]
    by_folder: dict[pathlib.Path, list[pathlib.Path]] = {}
    for f in path.rglob("results_*.json"):
        by_folder.setdefault(f.parent, []).append(f)
    if not by_folder:
        sys.exit(f"{path}: no results_*.json (lm-eval's --output_path) in this folder")
    out = []
    for folder in sorted(by_folder):
        files = sorted(by_folder[folder], key=lambda f: (f.stat().st_mtime, f.name))
        if len(files) > 1:
            print(f"table2: {folder}: reading {files[-1].name}, the newest of {len(files)} results files "
                  f"(name a file to read another)", file=sys.stderr)
        out.append(files[-1])
    return out


def _stderr(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None  # lm-eval writes "N/A"


def rows_from_file(label: str | None, path: pathlib.Path) -> list[dict]:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        sys.exit(f"{path}: not JSON ({e})")
    if "models" in data and "tasks" in data:  # xsagpt eval report
        rows = []
        for i, m in enumerate(data["models"]):
            scores = {t: {k: (_stderr(v) if k.endswith("_stderr") else v) for k, v in r.items()}
                      for t, r in m["results"].items()}
            cfg = run_config(m["file"]) if m.get("seed") is None and m.get("file") else None
            rows.append({"label": (f"{label} [{i + 1}]" if len(data["models"]) > 1 else label) if label
                         else m["checkpoint"], "variant": m.get("variant") or variant_of({"model": m.get("model")}),
                         "model": m.get("model"),
                         "seed": m.get("seed", (cfg or {}).get("train", {}).get("seed")) if m.get("seed") is not None
                         else (cfg or {}).get("train", {}).get("seed"), "scores": scores, "file": path})
        return rows
    if "results" not in data:
        sys.exit(f"{path}: neither lm-eval results (a 'results' key) nor an xsagpt eval report")
    scores = {}
    for task, metrics in data["results"].items():
        scores[task] = {k.split(",")[0]: (_stderr(v) if "_stderr" in k else v) for k, v in metrics.items()
                        if k != "alias" and (isinstance(v, (int, float)) or "_stderr" in k)}
    info = data.get("config", {}).get("xsagpt") or {}  # written by lm_eval_xsagpt.py's get_model_info
    model_args = data.get("config", {}).get("model_args", "")
    if isinstance(model_args, str):
        model_args = dict(kv.split("=", 1) for kv in model_args.split(",") if "=" in kv)
    checkpoint = info.get("checkpoint") or model_args.get("checkpoint")
    cfg = run_config(checkpoint) if checkpoint else None
    model = info.get("model") or (cfg or {}).get("model")
    return [{"label": label or (path.parent.name if path.parent.name else str(path)),
             "variant": variant_of(cfg if cfg and cfg.get("model") == model else {"model": model}), "model": model,
             "seed": (cfg or {}).get("train", {}).get("seed"), "scores": scores, "file": path}]


def rows_from(label: str | None, path: pathlib.Path) -> list[dict]:
    if not path.exists():
        sys.exit(f"{path}: no such file or folder")
    files = result_files(path)
    rows = []
    for f in files:
        rows += rows_from_file(f"{label} [{f.parent.name}]" if label and len(files) > 1 else label, f)
    return rows
