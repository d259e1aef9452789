"""The one reader of metrics.jsonl for the scripts: plot.py (through plot_inputs.py, which the
figure modules draw from) and track.py. It knows every key they read, with the type the
trainer writes (src/run/metrics.h, src/train/progress.cpp, src/train/eval_diagnostics.h), and
what a run's history means: which lines are damaged, which a restart made stale, and which
losses were not measured.

JSON has no NaN, so the trainer writes a value it could not measure as null (a loss or a
similarity bias of a model whose weights went NaN, an MFU on a CPU): null passes wherever a
number may stand. A literal NaN, Infinity or -Infinity (or 1e999) does not: it is no JSON
the trainer writes (finite_json.py, the rule every reader here shares). Nor do true and
false: Python counts them as the integers 1 and 0, so without this check a damaged `true`
would be drawn or mirrored as 1.0. Nor does a step outside 0..2^63-1: steps count from 0
(the evaluation before training), a negative one read as a restart would drop the history
after it, and one past the trainer's 64-bit counter has no place on an axis. Nor does a
negative count of tokens or seconds, the axes the curves are drawn against. A line that
fails is damaged as a whole (an edit, a disk error, another program's line); callers name
it with its file, line number and the first problem found, and use none of it."""
from __future__ import annotations

import dataclasses
import json
import pathlib

from finite_json import NotFinite, loads  # beside this file: no NaN or Infinity literal

# The numbers of a train line (train_loss, lr, grad_norm, tokens_per_s, mfu) and of a val
# line (val_loss), and those both carry.
NUMBER_KEYS = ("tokens", "time_s", "train_loss", "val_loss", "lr", "grad_norm", "tokens_per_s", "mfu")
GATE_KEYS = ("mean", "min", "max")  # an xsa_gate layer's summary over its heads
LOSS_KEYS = {"train": "train_loss", "val": "val_loss"}  # a line's kind, by the loss it carries
COUNT_KEYS = ("tokens", "time_s")  # the curves' x axes: counts, never below 0
STEP_MAX = 2**63 - 1  # the trainer's step is a 64-bit signed integer (src/run/metrics.h)


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _shown(v) -> str:
    text = json.dumps(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _number_problem(key: str, v) -> str | None:
    return None if v is None or is_number(v) else f"{key} is {_shown(v)}, not a number"


def _gate_problem(key: str, g) -> str | None:
    if g is None:  # a layer without a gate
        return None
    if not isinstance(g, dict):
        return f"{key} is {_shown(g)}, not null or an object of mean, min and max"
    for k in GATE_KEYS:
        if why := _number_problem(f"{key}.{k}", g.get(k)):
            return why
    return None


def _per_layer_problem(key: str, v, what: str, item_problem) -> str | None:
    if v is None:
        return None
    if not isinstance(v, list):
        return f"{key} is {_shown(v)}, not a list ({what})"
    for i, item in enumerate(v):
        if why := item_problem(f"{key}[{i}]", item):
            return why
    return None


def record_problem(rec, required: tuple[str, ...] = ()) -> str | None:
    """Why a parsed line is no metrics record, or None. `step` must be an integer >= 0; the
    keys in `required` must be there and not null; every other key read must have its type
    when it is there: a number or null (NUMBER_KEYS), cos_y_v a list of those (one per layer),
    xsa_gate a list of null (a layer without a gate) or objects whose mean, min and max are."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    step = rec.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        return f"step is {_shown(step)}, not an integer"
    if step < 0:
        return f"step is {step}; steps count from 0 (the evaluation before training)"
    if step > STEP_MAX:
        return f"step is {_shown(step)}, past 2^63 - 1 (the trainer counts steps in a 64-bit integer)"
    for key in required:
        if rec.get(key) is None:
            return f"{key} is {'null' if key in rec else 'missing'}; expected a number"
    for key in NUMBER_KEYS:
        if why := _number_problem(key, rec.get(key)):
            return why
    for key in COUNT_KEYS:
        if is_number(rec.get(key)) and rec[key] < 0:
            return f"{key} is {_shown(rec[key])}; a count, expected >= 0"
    return (_per_layer_problem("cos_y_v", rec.get("cos_y_v"), "a number per layer", _number_problem)
            or _per_layer_problem("xsa_gate", rec.get("xsa_gate"), "per layer null or its gate's mean, min and max",
                                  _gate_problem))


NOT_JSON = "not JSON (a line cut off by a kill, which the trainer drops on resume, or an edit)"


def parse_line(line: str | bytes) -> tuple[dict | None, str | None]:
    """One line of metrics.jsonl: (the record, None), or (None, why it is damaged)."""
    try:
        rec = loads(line)
    except NotFinite as e:
        return None, str(e)
    except ValueError:
        return None, NOT_JSON
    why = record_problem(rec)
    return (None, why) if why else (rec, None)


def line_kind(rec: dict) -> str | None:
    """"train" or "val" by the loss a record carries; None for another kind of line."""
    return next((kind for kind, key in LOSS_KEYS.items() if key in rec), None)


class MetricsDamage(Exception):
    """A line of a history that is no record: the message is "FILE:LINE: why"."""


@dataclasses.dataclass
class History:
    train: list[dict]  # the train lines, in step order, each with a finite train_loss
    val: list[dict]  # the val lines likewise, each with a finite val_loss
    notes: list[str]  # what was left out and why (a torn last line, losses not measured)


def read_history(path: pathlib.Path) -> History:
    """A run's train and val records as the history holds them now (raises MetricsDamage, or
    OSError when the file cannot be read).

    A run resumed from a checkpoint logs again from the checkpoint's step, so a step that does
    not exceed the last one of its kind marks a restart: what the crashed process logged from
    there on is stale and replaced (for the other kind, only what lies strictly after it, since
    e.g. the val loss at the checkpoint's own step stays valid). A repeated (step, kind) thus
    keeps its last occurrence. A torn last line (a crash mid-write) is left out. So is a line
    whose loss is null, once the restarts are applied: the trainer measured no finite loss
    there (the run diverged), and a curve drawn from the rest ends at its last finite value."""
    records: dict[str, list[dict]] = {"train": [], "val": []}
    notes = []
    lines = path.read_text().splitlines()
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        rec, why = parse_line(line)
        if why == NOT_JSON and lineno == len(lines):
            notes.append(f"{path}:{lineno}: skipping torn last line")
            continue
        kind = line_kind(rec) if rec is not None else None
        if kind is not None:
            why = record_problem(rec, required=("tokens",))  # the x axis of every curve
        if why:
            raise MetricsDamage(f"{path}:{lineno}: {why}")
        if kind is None:
            continue  # other record kinds are not read
        step, other = rec["step"], "val" if kind == "train" else "train"
        if records[kind] and step <= records[kind][-1]["step"]:
            records[kind] = [r for r in records[kind] if r["step"] < step]
            records[other] = [r for r in records[other] if r["step"] <= step]
        records[kind].append(rec)
    for kind, key in LOSS_KEYS.items():
        if unmeasured := [r["step"] for r in records[kind] if r[key] is None]:
            records[kind] = [r for r in records[kind] if r[key] is not None]
            kept = [r["step"] for r in records[kind]]
            ends = f", which ends at step {kept[-1]}" if kept and kept[-1] < unmeasured[0] else ""
            notes.append(f"{path}: {key} is null (not finite: the run diverged) at step "
                         f"{', '.join(map(str, unmeasured))}; left out of its curve{ends}")
    return History(records["train"], records["val"], notes)
