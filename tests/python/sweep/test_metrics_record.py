"""scripts/view/metrics_record.py, the one reader of metrics.jsonl that plot.py and track.py
share: the lines the trainer writes pass, nulls where it measured nothing included, a value
of another type or a negative step is named by its key (and layer), and a history's losses
that were not measured are left out of its curves, said in a note."""
import pytest

import json
import re

from metrics_record import MetricsDamage, read_history, record_problem


def test_the_trainers_lines_pass():
    train = {"step": 3, "tokens": 1536, "time_s": 0.5, "train_loss": 4.2, "lr": 6e-4, "grad_norm": 1.1,
             "tokens_per_s": 5120.0, "mfu": None, "muon_lr": 0.02}
    val = {"step": 10, "tokens": 5120, "time_s": 1.5, "val_loss": 4.1, "cos_y_v": [0.5, None, 0.25],
           "xsa_gate": [None, {"mean": 0.5, "min": 0.25, "max": 0.75, "heads": [0.25, 0.75]}, None]}
    assert record_problem(train, required=("tokens", "train_loss")) is None
    assert record_problem(val, required=("tokens", "val_loss")) is None


@pytest.mark.parametrize("line, why", [
    ([1, 2], "not a JSON object"),
    ({"step": True}, "step is true, not an integer"),
    ({"step": 2.0}, "step is 2.0, not an integer"),
    ({"step": -5, "tokens": 8, "train_loss": 3.0}, "step is -5; steps count from 0"),
    ({"step": 1, "tokens": 8}, "train_loss is missing; expected a number"),
    ({"step": 1, "tokens": 8, "train_loss": None}, "train_loss is null; expected a number"),
    ({"step": 1, "tokens": 8, "train_loss": 3.0, "mfu": False}, "mfu is false, not a number"),
    ({"step": 1, "tokens": 8, "train_loss": 3.0, "cos_y_v": {"0": 0.5}}, 'cos_y_v is {"0": 0.5}, not a list'),
    ({"step": 1, "tokens": 8, "train_loss": 3.0, "cos_y_v": [0.5, "0.4"]}, 'cos_y_v[1] is "0.4", not a number'),
    ({"step": 1, "tokens": 8, "train_loss": 3.0, "xsa_gate": [None, [0.5]]}, "xsa_gate[1] is [0.5], not null or"),
    ({"step": 1, "tokens": 8, "train_loss": 3.0, "xsa_gate": [{"mean": 0.5, "min": True}]},
     "xsa_gate[0].min is true, not a number"),
])
def test_each_damage_is_named(line, why):
    assert record_problem(line, required=("tokens", "train_loss")).startswith(why)


def write_lines(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_losses_not_measured_are_left_out_and_said(tmp_path):
    # As the trainer ends a run that diverged between its step-4 log and its step-6
    # evaluation (src/train/progress.cpp): the val line holds null (JSON has no NaN).
    recs = [{"step": 0, "tokens": 0, "val_loss": 5.5}]
    recs += [{"step": s, "tokens": 8 * s, "train_loss": 5.0 - 0.1 * s} for s in range(1, 5)]
    recs += [{"step": 3, "tokens": 24, "val_loss": 5.0}, {"step": 6, "tokens": 48, "val_loss": None,
                                                          "cos_y_v": [None, None]}]
    recs.sort(key=lambda r: r["step"])
    h = read_history(write_lines(tmp_path / "m.jsonl", recs))
    assert [r["step"] for r in h.train] == [1, 2, 3, 4]
    assert [(r["step"], r["val_loss"]) for r in h.val] == [(0, 5.5), (3, 5.0)]
    assert h.notes == [f"{tmp_path / 'm.jsonl'}: val_loss is null (not finite: the run diverged) at step 6; "
                       "left out of its curve, which ends at step 3"]


def test_a_resume_past_a_diverged_evaluation_replaces_it(tmp_path):
    # The null at step 6 was logged by a process a resume from step 4 replaced: it is stale, not a gap.
    recs = [{"step": 4, "tokens": 32, "val_loss": 5.0}, {"step": 6, "tokens": 48, "val_loss": None},
            {"step": 5, "tokens": 40, "train_loss": 4.9}, {"step": 6, "tokens": 48, "val_loss": 4.8}]
    h = read_history(write_lines(tmp_path / "m.jsonl", recs))
    assert [(r["step"], r["val_loss"]) for r in h.val] == [(4, 5.0), (6, 4.8)] and h.notes == []


def test_a_negative_step_is_damage_not_a_restart(tmp_path):
    # Before: read as a restart from step -5, erasing every line before it without a word.
    recs = [{"step": s, "tokens": 8 * s, "train_loss": 5.0 - 0.1 * s} for s in range(1, 5)]
    m = write_lines(tmp_path / "m.jsonl", recs + [{"step": -5, "tokens": 8, "train_loss": 3.0}])
    with pytest.raises(MetricsDamage, match="^" + re.escape(f"{m}:5: step is -5; steps count from 0")):
        read_history(m)
