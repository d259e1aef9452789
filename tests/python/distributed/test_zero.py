"""Sharded optimizer state (train.shard_optimizer, ZeRO-1) with the real binary on
CPU: two Gloo ranks under torchrun, as in test_distributed.py. A sharded run is
bit-identical to an unsharded one (each parameter's update is computed by one
rank with the same kernel and broadcast, not recomputed differently), so it also
matches one process within test_distributed's tolerance; its checkpoints hold the
same full optimizer state, and resume exactly, sharded or not."""
import re

import pytest
import torch

from distrun import run, torchrun, weights, write_config
from tinyrun import metrics

SHARD = "train.shard_optimizer=true"


def ckpt(run_dir, step):
    return torch.load(run_dir / "checkpoints" / f"step_{step:08d}.pt", weights_only=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, shards, build_dir):
    """The same 6 steps: one process, and two ranks unsharded and sharded."""
    d = tmp_path_factory.mktemp("zero_runs")
    cfg = write_config(d / "cfg.json", shards)
    xsagpt = str(build_dir / "xsagpt")
    logs = {
        "one": run([xsagpt, "train", "-c", cfg, "--out", d / "one", "--set", "train.micro_batch=8"]),
        "one_sharded": run([xsagpt, "train", "-c", cfg, "--out", d / "one_sharded", "--set", "train.micro_batch=8",
                            "--set", SHARD]),
        "two": run(torchrun(build_dir, "-c", cfg, "--out", d / "two")),
        "sharded": run(torchrun(build_dir, "-c", cfg, "--out", d / "sharded", "--set", SHARD)),
    }
    return {"cfg": cfg, "dir": d, "logs": logs, **{k: d / k for k in logs}}


def assert_same_run(a, b, steps=range(1, 7)):
    """Losses and checkpoints (weights and optimizer state) equal bit for bit."""
    for kind in ("train_loss", "val_loss"):
        ma, mb = metrics(a, kind), metrics(b, kind)
        assert {s: ma[s] for s in mb} == mb, (kind, ma, mb)
    assert sorted(metrics(b)) == list(steps)
    for step in (s for s in (3, 6) if s in steps):
        ca, cb = ckpt(a, step), ckpt(b, step)
        for k in ca["model"]:
            assert torch.equal(ca["model"][k], cb["model"][k]), (step, k)
        for part in ("exp_avg", "exp_avg_sq", "step"):
            assert ca["optimizer"][part].keys() == cb["optimizer"][part].keys(), part
            for k, t in ca["optimizer"][part].items():
                assert torch.equal(t, cb["optimizer"][part][k]), (step, part, k)


def test_sharded_run_equals_unsharded_bit_for_bit(runs):
    assert_same_run(runs["two"], runs["sharded"])
    # The checkpoint holds every parameter's full state, assembled on rank 0.
    c = ckpt(runs["sharded"], 6)
    assert c["optimizer"]["exp_avg"].keys() == c["model"].keys()  # the default head is untied: its own parameter
    assert all(t.item() == 6 for t in c["optimizer"]["step"].values())
    assert "parameters: identical on all 2 ranks" in runs["logs"]["sharded"]


def test_sharded_run_matches_one_process(runs):
    one, sharded = runs["one"], runs["sharded"]
    for kind in ("train_loss", "val_loss"):
        a, b = metrics(one, kind), metrics(sharded, kind)
        assert a.keys() == b.keys() and all(abs(a[s] - b[s]) < 1e-5 for s in a), (kind, a, b)
    wa, wb = weights(one / "checkpoints" / "step_00000006.pt"), weights(sharded / "checkpoints" / "step_00000006.pt")
    assert max((wa[k] - wb[k]).abs().max().item() for k in wa) < 1e-5


def to_bytes(text):
    value, unit = text.split()
    return float(value) * {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit]


def test_log_shows_the_state_each_rank_holds(runs):
    n_params = sum(t.numel() for t in ckpt(runs["two"], 6)["model"].values())  # untied head: all are parameters
    full = 8 * n_params  # exp_avg and exp_avg_sq in float32
    m = re.search(r"AdamW state sharded over 2 ranks \(ZeRO-1\): (\S+ \S+), (\S+ \S+) on ranks 0\.\.1, "
                  r"instead of (\S+ \S+) on each", runs["logs"]["sharded"])
    assert m, runs["logs"]["sharded"]
    r0, r1, total = map(to_bytes, m.groups())
    assert total == pytest.approx(full, rel=1e-2)
    assert r0 + r1 == pytest.approx(full, rel=1e-2)
    assert max(r0, r1) < 0.6 * full  # balanced halves (the embedding alone is ~0.3 of this model)
    assert re.search(r"AdamW state \S+ \S+ on each of 2 ranks \(not sharded", runs["logs"]["two"])


def test_one_process_ignores_the_setting(runs):
    assert "train.shard_optimizer: one process, nothing to shard" in runs["logs"]["one_sharded"]
    assert_same_run(runs["one"], runs["one_sharded"])


@pytest.mark.parametrize("first,then", [("sharded", SHARD), ("sharded", "train.shard_optimizer=false"),
                                         ("two", SHARD)])
def test_resume_across_settings_is_exact(runs, build_dir, first, then):
    """Resuming step 3's checkpoint, sharded or not, gives the straight run's steps 4 to 6."""
    out = runs["dir"] / f"resume_{first}_{then.split('=')[1]}"
    log = run(torchrun(build_dir, "-c", runs["cfg"], "--out", out, "--set", then,
                       "--resume", runs[first] / "checkpoints" / "step_00000003.pt"))
    assert "at step 3" in log
    assert_same_run(runs["two"], out, steps=range(4, 7))
