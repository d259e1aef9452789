"""What plot.py reads: run dirs (config.json + metrics.jsonl), sweep dirs (summary.json) and
analysis.json files, checked as they are read, so that each figure module draws from plain
numbers and a bad input is one PlotError naming its file (plot.py turns it into exit 2).
A sweep's variants and baseline are read here too, since every sweep figure groups by them."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import pathlib
import re
import sys
from collections.abc import Iterator

import numpy as np

from finite_json import NotFinite, loads
from ladder_section import ladder_problem
from metrics_record import MetricsDamage, is_number, read_history

# A run's variant name: config.json's "variant", or for older runs the same rule on the
# model keys, in one helper beside table2.py (loaded from its file: scripts/ is no package).
_spec = importlib.util.spec_from_file_location(
    "run_variant", pathlib.Path(__file__).resolve().parent.parent / "eval" / "run_variant.py")
_run_variant = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_run_variant)
variant_of = _run_variant.variant_of

ATTENTION_KEY = "model.attention"
SEED_KEY = "train.seed"


class PlotError(Exception):
    """Bad input: the message names the path and what was expected."""


class NoRecords(PlotError):
    """A run without train or val records: an error for a run asked for, but within a sweep
    just a point not started yet."""


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
    val_records: list[dict] = dataclasses.field(default_factory=list)  # the val lines of the curve (read_metrics)


@dataclasses.dataclass
class Sweep:
    path: pathlib.Path
    summary: dict
    runs: dict[str, Run]  # point name -> run, for points that have logged anything


@dataclasses.dataclass
class Analysis:
    path: pathlib.Path
    label: str
    variant: str | None  # the model's variant name, as a Run's; for an older file, its attention kind
    layers: list[dict]


def read_json(path: pathlib.Path) -> dict:
    """A JSON object from a file, every number in it finite (finite_json.py's rule, as for
    metrics.jsonl): a literal NaN or Infinity is named with its line."""
    try:
        with open(path) as f:
            data = loads(f.read())
    except NotFinite as e:
        raise PlotError(f"{path}:{e.lineno}: {e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PlotError(f"{path}: not valid JSON ({e})") from None
    except OSError as e:
        raise PlotError(f"{path}: cannot read ({e.strerror})") from None
    if not isinstance(data, dict):
        raise PlotError(f"{path}: expected a JSON object")
    return data


def read_metrics(path: pathlib.Path) -> tuple[list[dict], list[dict]]:
    """Train and val records of a metrics.jsonl as metrics_record.read_history reads every
    history (stale records dropped, losses not measured left out); what it left out is said
    on stderr, a damaged line is a PlotError naming it."""
    try:
        history = read_history(path)
    except MetricsDamage as e:
        raise PlotError(str(e)) from None
    except OSError as e:
        raise PlotError(f"{path}: cannot read ({e.strerror})") from None
    for note in history.notes:
        print(f"plot.py: {note}", file=sys.stderr)
    return history.train, history.val


def series(records: list[dict], key: str) -> Series:
    return Series(
        step=np.array([r["step"] for r in records], dtype=np.int64),
        tokens=np.array([r["tokens"] for r in records], dtype=np.float64),
        loss=np.array([r[key] for r in records], dtype=np.float64),
        time=np.array([r["time_s"] if is_number(r.get("time_s")) else np.nan for r in records],
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


def summary_problem(summary: dict) -> str | None:
    """Why a summary.json is not what `xsagpt sweep` writes, in the shapes the figures read:
    'keys' and 'points' lists, every point an object with a name, a folder and its values,
    and the ladder section, when there is one, as ladder_section.py checks it."""
    if not isinstance(summary.get("points"), list) or not isinstance(summary.get("keys"), list):
        return "expected 'keys' and 'points' lists"
    for i, p in enumerate(summary["points"]):
        if not isinstance(p, dict):
            return f"points[{i}] is {json.dumps(p)[:60]}, not an object"
        for key, kind, what in (("name", str, "a string"), ("dir", str, "a string"), ("values", dict, "an object")):
            if key not in p:
                return f"a point has no '{key}'"
            if not isinstance(p[key], kind):
                return f"points[{i}].{key} is {json.dumps(p[key])[:60]}, not {what}"
    return ladder_problem(summary["ladder"]) if summary.get("ladder") is not None else None


def load_sweep(path: pathlib.Path) -> Sweep:
    summary = read_json(path / "summary.json")
    if why := summary_problem(summary):
        raise PlotError(f"{path / 'summary.json'}: {why}")
    # A point the summary found invalid (another config's run in its directory, or files
    # that disagree with each other) is drawn nowhere, as it is compared nowhere.
    for p in summary["points"]:
        if isinstance(p, dict) and p.get("status") == "invalid":
            print(f"plot.py: {path}: point {p.get('name')} left out: {p.get('error')}", file=sys.stderr)
    summary = {**summary, "points": [p for p in summary["points"]
                                     if not (isinstance(p, dict) and p.get("status") == "invalid")]}
    runs = {}
    for p in summary["points"]:
        try:
            runs[p["name"]] = load_run(path / p["dir"], label=p["name"])
        except NoRecords:
            pass
    if not runs and not any(is_number(p.get("final_val_loss")) for p in summary["points"]):
        raise PlotError(f"{path}: no point of the sweep has logged anything yet")
    return Sweep(path, summary, runs)


def load_analysis(path: pathlib.Path) -> Analysis:
    data = read_json(path)
    layers = data.get("layers")
    if not isinstance(layers, list) or not layers:
        raise PlotError(f"{path}: expected a non-empty 'layers' list (an xsagpt analyze output)")
    for i, layer in enumerate(layers):
        for key in ("layer", "value_cos_sim", "attn_diag", "cos_y_v"):
            if not is_number(layer.get(key)):
                raise PlotError(f"{path}: layers[{i}] needs a number for '{key}'")
        if not (layer.get("cos_z_v") is None or is_number(layer["cos_z_v"])):  # null: not XSA
            raise PlotError(f"{path}: layers[{i}] needs a number or null for 'cos_z_v'")
    # analyze writes the model's variant name under "variant" and its words under
    # "description"; a file from before that has the words under "variant", and is
    # labelled by its attention kind, as it always was.
    name = data.get("variant") if "description" in data else data.get("attention")
    label = path.parent.name if path.name == "analysis.json" else path.stem
    return Analysis(path, label, name if isinstance(name, str) else None, sorted(layers, key=lambda l: l["layer"]))


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
# A sweep's variants


def point_variant(sweep: Sweep, point: dict) -> str | None:
    """The sweep's name for a point's variant; in summaries without one, its attention value or run."""
    v = point.get("variant") or point["values"].get(ATTENTION_KEY)
    if v is None and point["name"] in sweep.runs:  # attention not swept: the run's config says
        v = sweep.runs[point["name"]].variant
    return v if isinstance(v, str) and v else None


def sweep_variants(sweep: Sweep) -> tuple[list, str | None]:
    """The variants in order and the baseline: the summary's, else (a summary written before
    sweeps named their baseline) the one its differences pair every variant with, else the
    first variant met."""
    names = list(sweep.summary.get("variants") or [])
    for p in sweep.summary["points"]:
        v = point_variant(sweep, p)
        if v is not None and v not in names:
            names.append(v)
    baseline = sweep.summary.get("baseline") or paired_baseline(sweep.summary) or (names[0] if names else None)
    return names, baseline


def paired_baseline(summary: dict) -> str | None:
    """The baseline an older summary.json's differences name: each pairs two points as
    {"<variant>": point, "<baseline>": point, "<variant>_minus_<baseline>_val_loss": ...}."""
    for d in summary.get("differences") or []:
        for key in d if isinstance(d, dict) else ():
            if m := re.fullmatch(r"(.+)_minus_(.+)_val_loss", key):
                return m.group(2)
    return None


def other_keys(sweep: Sweep) -> list[str]:
    """The swept keys besides the variant (the older sweeps' model.attention)."""
    return [k for k in sweep.summary["keys"] if k != ATTENTION_KEY]


def setting_keys(sweep: Sweep) -> list[str]:
    """The swept keys that a comparison of variants holds fixed: besides the variant and the seed."""
    return [k for k in other_keys(sweep) if k != SEED_KEY]


def runs_by_setting(sweep: Sweep) -> Iterator[tuple[str | None, tuple, Run]]:
    """(variant, values of the setting keys, run) of every point that has logged, in the summary's order."""
    keys = setting_keys(sweep)
    for p in sweep.summary["points"]:
        if p["name"] in sweep.runs:
            yield point_variant(sweep, p), tuple(p["values"].get(k) for k in keys), sweep.runs[p["name"]]
