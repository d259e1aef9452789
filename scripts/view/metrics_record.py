"""What a metrics.jsonl line may hold, checked in one place for the scripts that read it
(plot.py through plot_inputs.py, and track.py): every key they read, with the type the
trainer writes (src/run/metrics.h, src/train/progress.cpp, src/train/eval_diagnostics.h).

JSON has no NaN, so the trainer writes a value it could not measure as null: null passes
wherever a number may stand. true and false do not: Python counts them as the integers 1
and 0, so without this check a damaged `true` would be drawn or mirrored as 1.0. A line
that fails is damaged as a whole (an edit, a disk error, another program's line); the
callers name it with its line number and the first problem found, and use none of it."""
from __future__ import annotations

import json

# The numbers of a train line (train_loss, lr, grad_norm, tokens_per_s, mfu) and of a val
# line (val_loss), and those both carry.
NUMBER_KEYS = ("tokens", "time_s", "train_loss", "val_loss", "lr", "grad_norm", "tokens_per_s", "mfu")
GATE_KEYS = ("mean", "min", "max")  # an xsa_gate layer's summary over its heads


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
    """Why a parsed line is no metrics record, or None. `step` must be an integer; the keys in
    `required` must be there and not null; every other key read must have its type when it is
    there: a number or null (NUMBER_KEYS), cos_y_v a list of those (one per layer), xsa_gate a
    list of null (a layer without a gate) or objects whose mean, min and max are."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    step = rec.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        return f"step is {_shown(step)}, not an integer"
    for key in required:
        if rec.get(key) is None:
            return f"{key} is {'null' if key in rec else 'missing'}; expected a number"
    for key in NUMBER_KEYS:
        if why := _number_problem(key, rec.get(key)):
            return why
    return (_per_layer_problem("cos_y_v", rec.get("cos_y_v"), "a number per layer", _number_problem)
            or _per_layer_problem("xsa_gate", rec.get("xsa_gate"), "per layer null or its gate's mean, min and max",
                                  _gate_problem))
