"""The learning-rate schedules through the real binary (optim/schedule.h): every rate a
wsd run logs against the schedule written out here in float64 from its definition
(warmup, the peak, then 1 - sqrt down to min_lr_ratio over the last decay_fraction), a
wsd run resumed from its checkpoint continuing bit for bit, and a wsd run branched from
the stable phase of a longer one (its max_steps changed on resume, before either decay)
ending bit for bit where the same config trained from scratch ends."""
import math

import torch

from tinyrun import metrics, run_config

LOGGED = ("train_loss", "val_loss", "grad_norm", "lr")


def wsd(peak, min_ratio, warmup, steps, fraction, step):
    """The rate of 0-based step `step`, from the definition in docs/training.md."""
    n = math.floor(fraction * steps + 0.5)
    low = peak * min_ratio
    if step < warmup:
        return peak * (step + 1) / warmup
    if step >= steps:
        return low
    if step < steps - n:
        return peak
    return low + (peak - low) * (1 - math.sqrt((step - (steps - n)) / n))


def test_every_wsd_rate_is_the_formulas(tmp_path, shards, xsagpt):
    cfg = run_config(tmp_path, shards, schedule="wsd", decay_fraction=0.3, max_steps=23, warmup_steps=3,
                     min_lr_ratio=0.05, lr=2e-2)
    xsagpt("train", "-c", cfg)
    logged = metrics(tmp_path / "run", "lr")  # the line of step k logs the rate its k-th step took
    assert sorted(logged) == list(range(1, 24))
    expected = {k: wsd(2e-2, 0.05, 3, 23, 0.3, k - 1) for k in logged}
    # Non-trivial: 15 steps at the peak (the warmup's last, the stable phase and the decay's first),
    # then the rest of a 7-step decay (round(6.9)) ending near the floor.
    assert sum(v == 2e-2 for v in expected.values()) == 15 and expected[23] < 2e-2 * 0.25
    for k, lr in logged.items():
        assert math.isclose(lr, expected[k], rel_tol=1e-14, abs_tol=0), (k, lr, expected[k])


def final_weights(run):
    return torch.load(sorted((run / "checkpoints").glob("step_*.pt"))[-1], weights_only=True)["model"]


def test_a_wsd_run_resumes_and_branches_bit_for_bit(tmp_path, shards, xsagpt):
    # 20 steps decaying over the last 5: a resume from step 8 (stable) and from 16 (decaying).
    short = run_config(tmp_path, shards, schedule="wsd", decay_fraction=0.25, max_steps=20, ckpt_interval=8,
                       keep_checkpoints=5)
    xsagpt("train", "-c", short, "--out", tmp_path / "straight")
    for step in (8, 16):
        ckpt = tmp_path / "straight" / "checkpoints" / f"step_{step:08d}.pt"
        xsagpt("train", "-c", short, "--resume", ckpt, "--out", tmp_path / f"resumed{step}")
        for logged in LOGGED:
            ours, theirs = metrics(tmp_path / f"resumed{step}", logged), metrics(tmp_path / "straight", logged)
            assert ours and ours == {k: v for k, v in theirs.items() if k > step}, (step, logged)
    # A 40-step run's stable phase (its decay starts at 30) branched at step 8 into the 20-step run.
    long = run_config(tmp_path, shards, schedule="wsd", decay_fraction=0.25, max_steps=40, ckpt_interval=8,
                      keep_checkpoints=5)
    xsagpt("train", "-c", long, "--out", tmp_path / "long")
    assert metrics(tmp_path / "long")[20] != metrics(tmp_path / "straight")[20]  # the comparison can fail
    branch = xsagpt("train", "-c", short, "--resume", tmp_path / "long" / "checkpoints" / "step_00000008.pt",
                    "--out", tmp_path / "branch")
    assert "train.max_steps: 40 in the checkpoint, 20 now" in branch.stderr
    for logged in LOGGED:
        ours, theirs = metrics(tmp_path / "branch", logged), metrics(tmp_path / "straight", logged)
        assert ours and ours == {k: v for k, v in theirs.items() if k > 8}, logged
    ours, theirs = final_weights(tmp_path / "branch"), final_weights(tmp_path / "straight")
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)
