"""A sweep directory of an older version continues under this one without --force, and
its finished points are not trained again. The older version's run configs lack the
keys added since (model.gelu, model.parametrization, model.mup_base_width, model.mup_base_head_dim,
train.eval_similarity_sequences, train.eval_similarity_positions, train.schedule,
train.decay_fraction), each added with a default that does what runs did before it; a key a saved config lacks means its default (config/config_diff.h), for a
sweep's point checks as for a resume.

The point is tests/fixtures/checkpoint_v1's run, which the trainer of commit 00f7127
(before those keys) wrote: its config.json, run.json and step-4 checkpoint of 8 steps,
whose own config lacks the keys too. A finished point of that version is the same run
once finished here, its config.json put back to that version's keys (the fixture's
config.json says which); done.json and metrics.jsonl have kept their format since."""
import json
import os
import pathlib
import shutil

FIXTURE = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "checkpoint_v1"
ADDED = {"model": {"gelu", "parametrization", "mup_base_width", "mup_base_head_dim"},
         "train": {"eval_similarity_sequences", "eval_similarity_positions", "schedule", "decay_fraction",
                   "ckpt_steps"}}


def old_keys():
    """The sections' keys in the fixture's config.json, as the older version wrote them."""
    cfg = json.loads((FIXTURE / "run" / "config.json").read_text())
    return {s: set(cfg[s]) for s in ("model", "data", "train")}, set(cfg)


def files(run):
    """Every file of a run directory with its bytes and mtime."""
    return {p.relative_to(run).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(run.rglob("*")) if p.is_file() and p.name != ".lock"}


def test_a_sweep_of_an_older_version_continues_and_keeps_its_finished_points(tmp_path, xsagpt):
    sections, top = old_keys()
    for section, keys in ADDED.items():
        assert not keys & sections[section]  # the fixture predates them: the case is real

    shutil.copytree(FIXTURE / "data", tmp_path / "data")
    cfg = json.loads((FIXTURE / "run" / "config.json").read_text())
    cfg["data"] = {**cfg["data"], "train": str(tmp_path / "data" / "train_*.bin"),
                   "val": str(tmp_path / "data" / "val_*.bin")}
    sw = tmp_path / "sw"
    point = sw / "xsa"
    # The point as the older version left it at its step-4 checkpoint; only its data paths
    # follow the shards here (a resume takes the same files spelled another way).
    (point / "checkpoints").mkdir(parents=True)
    shutil.copy(FIXTURE / "run" / "checkpoints" / "step_00000004.pt", point / "checkpoints")
    shutil.copy(FIXTURE / "run" / "run.json", point)
    (point / "config.json").write_text(json.dumps({**cfg, "out_dir": str(point)}, indent=2))
    history = "".join(l for l in (FIXTURE / "uninterrupted_metrics.jsonl").read_text().splitlines(keepends=True)
                      if json.loads(l)["step"] <= 4)
    (point / "metrics.jsonl").write_text(history)

    base = tmp_path / "base.json"
    base.write_text(json.dumps({**cfg, "out_dir": str(tmp_path / "unused")}))
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"base": str(base), "variants": {"xsa": {}}, "baseline": "xsa", "out_dir": str(sw)}))

    # The interrupted point continues from its checkpoint: same run id, its history kept.
    proc = xsagpt("sweep", "-c", spec, "--no-plot")
    assert "resumed from" in proc.stderr and "at step 4" in proc.stderr
    assert "config changed" not in proc.stderr
    assert (point / "run.json").read_text() == (FIXTURE / "run" / "run.json").read_text()
    assert (point / "metrics.jsonl").read_text().startswith(history)
    done = json.loads((point / "done.json").read_text())
    assert done["step"] == 8

    # The same point finished by the older version: its config.json has that version's keys.
    saved = json.loads((point / "config.json").read_text())
    for section, keys in ADDED.items():
        assert keys <= set(saved[section])  # this version wrote them: taking them out is the change tested
        for k in keys:
            del saved[section][k]
    saved.pop("variant")
    assert {s: set(saved[s]) for s in ("model", "data", "train")} == sections and set(saved) == top
    (point / "config.json").write_text(json.dumps(saved, indent=2))
    before = files(point)
    assert any(name.startswith("checkpoints/") for name in before)

    proc = xsagpt("sweep", "-c", spec, "--no-plot")
    assert "[1/1] xsa: finished, skipping" in proc.stderr
    assert files(point) == before  # nothing trained, nothing rewritten
    (status,) = [p["status"] for p in json.loads((sw / "summary.json").read_text())["points"]]
    assert status == "done"

    # A key that is absent but whose default is not what the sweep asks now is a difference.
    cfg["train"]["eval_similarity_sequences"] = 2
    base.write_text(json.dumps({**cfg, "out_dir": str(tmp_path / "unused")}))
    proc = xsagpt("sweep", "-c", spec, "--no-plot", check=False)
    assert proc.returncode != 0
    assert "train.eval_similarity_sequences is missing there (its default 4), 2 here" in proc.stderr
    assert files(point) == before
