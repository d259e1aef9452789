"""scripts/view/metrics_record.py, the one check of a metrics.jsonl line that plot.py and
track.py share: the lines the trainer writes pass, nulls where it measured nothing
included, and a value of another type is named by its key (and layer)."""
import pytest

from metrics_record import record_problem


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
