"""Checkpoints written by earlier versions stay resumable: tests/fixtures/checkpoint_v1
holds a step-4 checkpoint that the trainer wrote before its state was split into parts
that save themselves, and the metrics of the same run continued to step 8 without a
break. Resuming the checkpoint with this binary must log those metrics bit for bit, and
what it saves must have the same layout, so that torch.load readers and older
checkpoints keep working."""
import json
import math
import pathlib
import shutil

import pytest
import torch

FIXTURE = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "checkpoint_v1"
CHECKPOINT = "step_00000004.pt"
# What a metrics line says about the run (time and throughput differ between sessions).
CURVE_KEYS = ("step", "tokens", "train_loss", "val_loss", "grad_norm", "lr")


def read_lines(path):
    return [json.loads(l) for l in pathlib.Path(path).read_text().splitlines()]


def curve(lines, after=-1):
    return [{k: l[k] for k in CURVE_KEYS if k in l} for l in lines if l["step"] > after]


@pytest.fixture
def old_run(tmp_path):
    """The fixture's run directory as the old binary left it after its step-4 checkpoint
    (metrics up to step 4), its shards, and a config pointing at both; returns the
    config file."""
    shutil.copytree(FIXTURE / "data", tmp_path / "data")
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copy(FIXTURE / "run" / "checkpoints" / CHECKPOINT, run / "checkpoints")
    for name in ("run.json", "config.json"):
        shutil.copy(FIXTURE / "run" / name, run)
    kept = [l for l in (FIXTURE / "uninterrupted_metrics.jsonl").read_text().splitlines(keepends=True)
            if json.loads(l)["step"] <= 4]
    (run / "metrics.jsonl").write_text("".join(kept))
    cfg = json.loads((FIXTURE / "run" / "config.json").read_text())
    cfg["data"]["train"] = str(tmp_path / "data" / "train_*.bin")
    cfg["data"]["val"] = str(tmp_path / "data" / "val_*.bin")
    cfg["out_dir"] = str(run)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def layout(value):
    """The structure of a checkpoint entry: dict keys with their layouts, tensor dtypes,
    Python types of the rest (values differ between runs, the layout may not)."""
    if isinstance(value, dict):
        return {k: layout(v) for k, v in value.items()}
    if isinstance(value, torch.Tensor):
        return str(value.dtype)
    if isinstance(value, list):
        return [layout(v) for v in value[:1]]
    return type(value).__name__


def test_a_version_1_checkpoint_resumes_bit_for_bit(tmp_path, old_run, xsagpt):
    reference = read_lines(FIXTURE / "uninterrupted_metrics.jsonl")
    later = curve(reference, after=4)
    # Non-trivial: the steps after the checkpoint log train lines (one of them averaging
    # the step the checkpoint's window holds), a val line, and losses that still move.
    assert [l["step"] for l in later] == [6, 8, 8]
    assert len({l.get("train_loss", l.get("val_loss")) for l in later}) == 3
    assert all(math.isfinite(v) for l in later for v in l.values())

    # Does this machine compute what the one that wrote the fixture did? Only then can
    # resuming the fixture's state reproduce this machine's uninterrupted run bit for bit.
    # The same run from scratch (deterministic on one machine: test_train.py) says so by
    # its step-4 state: equal logged losses are not enough. MKL's GEMMs and ATen's
    # vectorized kernels take a path per instruction set (AVX-512, AVX2, none), and two
    # x86-64 machines can log the same rounded losses up to step 4 while their weights
    # already differ in the last bits, which the steps after it show.
    fresh = tmp_path / "fresh"
    xsagpt("train", "-c", old_run, "--out", fresh)
    fixture_state = torch.load(FIXTURE / "run" / "checkpoints" / CHECKPOINT, weights_only=True)
    fresh_state = torch.load(fresh / "checkpoints" / CHECKPOINT, weights_only=True)
    same_machine = (curve(read_lines(fresh / "metrics.jsonl")) == curve(reference)
                    and same_tensors(fresh_state, fixture_state))

    proc = xsagpt("train", "-c", old_run, "--resume", "auto")
    run = json.loads(old_run.read_text())["out_dir"]
    assert f"resumed from {run}/checkpoints/{CHECKPOINT} at step 4" in proc.stderr
    resumed = curve(read_lines(pathlib.Path(run) / "metrics.jsonl"))
    assert [l for l in resumed if l["step"] <= 4] == [l for l in curve(reference) if l["step"] <= 4]
    done = json.loads((pathlib.Path(run) / "done.json").read_text())
    expected_done = json.loads((FIXTURE / "uninterrupted_done.json").read_text())
    if same_machine:
        assert curve(read_lines(pathlib.Path(run) / "metrics.jsonl"), after=4) == later
        assert (done["final_train_loss"], done["final_val_loss"]) == (
            expected_done["final_train_loss"], expected_done["final_val_loss"])
    else:
        # Another machine's kernels started from another state: the continuation is
        # compared closely instead, which still tells a state loaded whole from one loaded
        # in part (a lost moment, window or generator moves these by far more than 1e-4).
        # That resuming is exact on every machine is test_resume.py's, with the machine's
        # own checkpoints.
        got = curve(read_lines(pathlib.Path(run) / "metrics.jsonl"), after=4)
        assert [l.keys() for l in got] == [l.keys() for l in later]
        for g, want in zip(got, later):
            for k in want:
                assert g[k] == pytest.approx(want[k], rel=1e-4), (k, g, want)

    # What this binary saves has the layout of what the old one saved.
    old = fixture_state
    new = torch.load(pathlib.Path(run) / "checkpoints" / "step_00000008.pt", weights_only=True)
    assert old["format"] == "xsagpt-checkpoint" and old["version"] == 1 and old["step"] == 4
    new_layout, old_layout = layout(new), layout(old)
    # The run config may gain keys (a key newer than a checkpoint takes its default on resume);
    # every key the old one saved stays, with its type.
    assert holds(new_layout.pop("config"), old_layout.pop("config"))
    # Entries newer than this fixture are optional on load (absent: not checked); every
    # entry it has keeps its layout.
    newer = {k: new_layout[k] for k in set(new_layout) - set(old_layout)}
    assert newer == {"kernels": "str", "val_sequences": "int", "rank_changes": []}  # a run that kept its ranks
    assert {k: new_layout[k] for k in old_layout} == old_layout


def tensors(value, path=""):
    """Every tensor of the training state in a checkpoint entry, by path."""
    if isinstance(value, dict):
        return {p: t for k, v in value.items() for p, t in tensors(v, f"{path}/{k}").items()}
    return {path: value} if isinstance(value, torch.Tensor) else {}


def same_tensors(a, b):
    """Whether two checkpoints hold the same weights, optimizer state and generators, bit for bit."""
    ta, tb = (tensors({k: c[k] for k in ("model", "optimizer", "rng")}) for c in (a, b))
    assert len(ta) > 10 and ta.keys() == tb.keys()
    return all(torch.equal(ta[k], tb[k]) for k in ta)


def holds(new, old):
    """Whether layout `new` has everything layout `old` has, dict keys possibly added."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and holds(new[k], v) for k, v in old.items())
    return new == old


def test_a_version_1_checkpoint_of_the_final_step_finishes_the_run_with_its_losses(old_run, xsagpt):
    # With max_steps 4 the checkpoint is the run's last: nothing trains, and done.json
    # gets the losses the checkpoint recorded (the train line of step 3, the val loss
    # of step 4).
    reference = read_lines(FIXTURE / "uninterrupted_metrics.jsonl")
    train3 = next(l["train_loss"] for l in reference if l["step"] == 3 and "train_loss" in l)
    val4 = next(l["val_loss"] for l in reference if l["step"] == 4 and "val_loss" in l)
    proc = xsagpt("train", "-c", old_run, "--resume", "auto", "--set", "train.max_steps=4")
    assert "already finished at step 4" in proc.stderr
    run = pathlib.Path(json.loads(old_run.read_text())["out_dir"])
    done = json.loads((run / "done.json").read_text())
    assert (done["step"], done["tokens"]) == (4, 4 * 4 * 32)
    assert (done["final_train_loss"], done["final_val_loss"]) == (train3, val4)
