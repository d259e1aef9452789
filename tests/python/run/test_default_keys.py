"""A kind's key at its default is the same config as the key left out, end to end with
the real binary: resume, a sweep's variants and a sweep continued under --force read a
saved config for what it means (src/config/config_diff.h: saved_meaning). A gated run
trained without model.out_gate resumes with it spelled out; an elementwise checkpoint
resumed with the key left out is refused by the config check naming the key, before
any tensor is read; model.xsa_layers "last N" on an N-layer model is null; two variants
that spell one model are refused; a sweep whose file now spells a default out trains
nothing again."""
import json

import pytest

from tinyrun import metrics, write_run_config

STEPS = 4


def train(xsagpt, cfg, *args, check=True):
    return xsagpt("train", "-c", cfg, *args, check=check)


@pytest.fixture(scope="module")
def gated_run(tmp_path_factory, shards, xsagpt):
    """A gated run of 4 steps, trained without model.out_gate in its config."""
    d = tmp_path_factory.mktemp("gated")
    cfg = write_run_config(d / "cfg.json", shards, d / "run", model={"attention": "gated"}, max_steps=STEPS,
                           ckpt_interval=STEPS)
    train(xsagpt, cfg)
    assert "out_gate" not in json.loads((d / "run" / "config.json").read_text())["model"]
    return cfg


def test_a_run_without_the_key_resumes_with_its_default_spelled_out(gated_run, xsagpt):
    # Before: "model.out_gate is null in the checkpoint but "headwise" in this config".
    proc = train(xsagpt, gated_run, "--resume", "auto", "--set", "train.max_steps=6", "--set",
                 "model.out_gate=headwise", check=False)
    assert proc.returncode == 0, proc.stderr
    assert max(metrics(json.loads(gated_run.read_text())["out_dir"])) == 6


def test_an_elementwise_checkpoint_with_the_key_left_out_is_refused_by_name(tmp_path, shards, xsagpt):
    cfg = write_run_config(tmp_path / "cfg.json", shards, tmp_path / "run",
                           model={"attention": "gated", "out_gate": "elementwise"}, max_steps=STEPS,
                           ckpt_interval=STEPS)
    train(xsagpt, cfg)
    left_out = write_run_config(tmp_path / "left.json", shards, tmp_path / "run", model={"attention": "gated"},
                                max_steps=6, ckpt_interval=STEPS)
    before = (tmp_path / "run" / "metrics.jsonl").read_text()
    # Before: the config check passed and loading failed on a tensor's shape, naming no key.
    proc = train(xsagpt, left_out, "--resume", "auto", check=False)
    assert proc.returncode != 0
    assert ('model.out_gate is "elementwise" in the checkpoint but "headwise" in this config' in proc.stderr), \
        proc.stderr
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == before  # nothing of the run changed


@pytest.mark.parametrize("kind", ["xsa", "xsa_token"])
def test_last_n_of_n_layers_is_every_layer(tmp_path, shards, xsagpt, kind):
    cfg = write_run_config(tmp_path / "cfg.json", shards, tmp_path / "run",
                           model={"attention": kind, "xsa_layers": "last 2"}, max_steps=STEPS, ckpt_interval=STEPS)
    train(xsagpt, cfg)  # tinyrun's model has two layers
    proc = train(xsagpt, cfg, "--resume", "auto", "--set", "train.max_steps=6", "--set", "model.xsa_layers=null",
                 check=False)
    assert proc.returncode == 0, proc.stderr


def sweep_file(path, base, out_dir, variants, baseline):
    path.write_text(json.dumps({"base": str(base), "variants": variants, "baseline": baseline,
                                "grid": {"train.seed": [1]}, "out_dir": str(out_dir)}))
    return path


def test_variants_that_spell_one_model_are_refused(tmp_path, shards, xsagpt):
    base = write_run_config(tmp_path / "base.json", shards, tmp_path / "unused", max_steps=STEPS)
    spec = sweep_file(tmp_path / "s.json", base, tmp_path / "sw",
                      {"gated": {"model.attention": "gated"},
                       "headwise": {"model.attention": "gated", "model.out_gate": "headwise"}}, "gated")
    # Before: both trained, the same run twice under two names.
    proc = xsagpt("sweep", "-c", spec, "--no-plot", check=False)
    assert proc.returncode != 0
    assert "points gated,train.seed=1 and headwise,train.seed=1 resolve to the same run config" in proc.stderr
    assert not (tmp_path / "sw").exists()


def test_a_sweep_that_spells_a_default_out_trains_nothing_again(tmp_path, shards, xsagpt):
    base = write_run_config(tmp_path / "base.json", shards, tmp_path / "unused", max_steps=STEPS)
    variants = {"sa": {}, "gated": {"model.attention": "gated"}}
    xsagpt("sweep", "-c", sweep_file(tmp_path / "s.json", base, tmp_path / "sw", variants, "sa"), "--no-plot")
    before = (tmp_path / "sw" / "gated,train.seed=1" / "metrics.jsonl").read_text()
    variants["gated"]["model.out_gate"] = "headwise"
    # Before: the gated point counted as another config, and --force trained it again.
    proc = xsagpt("sweep", "-c", sweep_file(tmp_path / "s.json", base, tmp_path / "sw", variants, "sa"), "--no-plot",
                  "--force")
    assert proc.stderr.count("finished, skipping") == 2, proc.stderr
    assert (tmp_path / "sw" / "gated,train.seed=1" / "metrics.jsonl").read_text() == before
