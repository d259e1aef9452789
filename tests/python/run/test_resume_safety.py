"""Stopping and resuming a run loses nothing: end to end with the real binary, each test
a case that once failed (its "Before:" comment says how).

One trainer owns a run directory; a resume is staged until its first checkpoint lands,
so a failed one leaves the finished run as it was; checkpoints prove themselves (CRC,
finite weights, run id; a plain PyTorch state dict is no checkpoint); SIGHUP saves
like SIGTERM and a closed stderr pipe does not kill a run; a resume between log lines
logs what an uninterrupted run logs. All on the CPU, also where a GPU is present."""
import json
import os
import shutil
import signal
import subprocess

import numpy as np
import torch

from shardio import write_shard
from tinyrun import ckpt_steps, cpu_config, metrics, snapshot, start_training, wait_for


# ---- one owner per run directory ----------------------------------------------------

def test_a_second_trainer_in_a_busy_run_dir_is_refused_naming_the_holder(tmp_path, shards, xsagpt, build_dir):
    cfg = cpu_config(tmp_path, shards, max_steps=100000, ckpt_interval=5, eval_interval=0)
    run = tmp_path / "run"
    first = start_training(build_dir, "-c", cfg)
    try:
        assert wait_for(lambda: (run / "checkpoints").exists() and ckpt_steps(run), first)
        for extra in ((), ("--resume", "auto"), ("--overwrite",)):
            proc = xsagpt("train", "-c", cfg, *extra, check=False)
            # Before: interleaved metrics with duplicate steps; with --resume auto both exited 0.
            assert proc.returncode == 2, proc.stderr
            assert f"out_dir {run} is in use: pid {first.pid} on host {os.uname().nodename}" in proc.stderr
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    assert first.returncode == 0
    steps = [json.loads(l)["step"] for l in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, len(steps) + 1))
    # The lock goes with the process: the run continues at once.
    xsagpt("train", "-c", cfg, "--resume", "auto", "--set", f"train.max_steps={steps[-1] + 1}")


# ---- a resume is staged until its first checkpoint lands ------------------------------


def test_a_resume_that_fails_after_training_began_leaves_the_finished_run_as_it_was(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=4, ckpt_interval=4, eval_interval=2)
    run = tmp_path / "run"
    xsagpt("train", "-c", cfg)
    before = snapshot(run)
    # The first failure seen: a new val shard with ids >= vocab_size. Before: trained 10 steps,
    # failed at the eval, and had deleted done.json, rewritten config.json, appended metrics.
    bad_val = tmp_path / "bad_val"
    bad_val.mkdir()
    write_shard(bad_val / "val_000000.bin", np.full(4096, 300, dtype=np.int64))
    proc = xsagpt("train", "-c", cfg, "--resume", "auto", "--set", "train.max_steps=14", "--set",
                  f"data.val={bad_val}/val_*.bin", check=False)
    assert proc.returncode == 1 and "token id 300 at token offset 0" in proc.stderr
    assert snapshot(run) == before
    # A failure once training has begun (here the weights diverge before the first new
    # checkpoint): before, done.json was deleted, config.json rewritten, metrics appended.
    proc = xsagpt("train", "-c", cfg, "--resume", "auto", "--set", "train.max_steps=14", "--set", "train.lr=1e9",
                  "--set", "train.grad_clip=0", "--set", "train.warmup_steps=0", "--set", "train.ckpt_interval=10",
                  check=False)
    assert proc.returncode == 1 and "not finite" in proc.stderr, proc.stderr
    assert "The last good checkpoint, " + str(run / "checkpoints" / "step_00000004.pt") in proc.stderr
    assert snapshot(run) == before
    # Resumed for real, the run continues as if nothing had happened.
    xsagpt("train", "-c", cfg, "--resume", "auto", "--set", "train.max_steps=8")
    assert sorted(metrics(run)) == list(range(1, 9)) and json.loads((run / "done.json").read_text())["step"] == 8


# ---- checkpoints prove themselves -----------------------------------------------------

def test_a_foreign_checkpoint_copied_into_checkpoints_is_not_adopted(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=8, ckpt_interval=4)
    mine, other = tmp_path / "mine", tmp_path / "other"
    xsagpt("train", "-c", cfg, "--out", mine, "--set", "train.max_steps=4")
    xsagpt("train", "-c", cfg, "--out", other, "--set", "train.seed=7")
    foreign = mine / "checkpoints" / "step_00000008.pt"
    shutil.copy(other / "checkpoints" / "step_00000008.pt", foreign)
    before = snapshot(mine)
    proc = xsagpt("train", "-c", cfg, "--out", mine, "--resume", "auto", check=False)
    # Before: adopted; done.json then reported the other run's step and losses.
    assert proc.returncode == 1
    assert f"{foreign} lies in {mine}/checkpoints but belongs to another run" in proc.stderr
    assert snapshot(mine) == before
    # A copy under a name that is not its step is refused too.
    foreign.unlink()
    shutil.copy(mine / "checkpoints" / "step_00000004.pt", mine / "checkpoints" / "step_00000006.pt")
    proc = xsagpt("train", "-c", cfg, "--out", mine, "--resume", "auto", check=False)
    assert proc.returncode == 1 and "its name says step 6 but it holds step 4" in proc.stderr


def test_a_flipped_bit_in_a_checkpoint_is_detected(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=4, ckpt_interval=4)
    run = tmp_path / "run"
    xsagpt("train", "-c", cfg, "--set", "train.max_steps=2", "--set", "train.ckpt_interval=2")
    path = run / "checkpoints" / "step_00000002.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10  # the middle of the file: tensor bytes
    path.write_bytes(bytes(data))
    before = snapshot(run)
    for cmd in (("train", "-c", cfg, "--resume", "auto"), ("sample", "--checkpoint", path, "--prompt-ids", "1,2")):
        proc = xsagpt(*cmd, check=False)
        # Before: loaded, and the resumed run went on with different losses.
        assert proc.returncode == 1, (cmd, proc.stderr)
        assert f"{path}: corrupt checkpoint, its bytes changed since it was written: record " in proc.stderr
        assert "CRC-32" in proc.stderr
    assert snapshot(run) == before


def test_nan_weights_are_never_saved_nor_loaded(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=4, ckpt_interval=2)
    run = tmp_path / "run"
    xsagpt("train", "-c", cfg)
    path = run / "checkpoints" / "step_00000004.pt"
    ck = torch.load(path, weights_only=True)
    name = sorted(ck["model"])[0]
    ck["model"][name].view(-1)[0] = float("nan")
    torch.save(ck, path)
    for cmd in (("sample", "--checkpoint", path, "--prompt-ids", "1,2"), ("analyze", "--checkpoint", path),
                ("train", "-c", cfg, "--resume", "auto", "--set", "train.max_steps=6")):
        proc = xsagpt(*cmd, check=False)
        # Before: sample and score printed null log-probs and exited 0; resume went on.
        assert proc.returncode == 1, (cmd, proc.stderr)
        assert f"{path}: model.{name} holds NaN or infinite values" in proc.stderr
    # A diverging run stops before saving NaN weights, and names the real last good checkpoint.
    fresh = tmp_path / "fresh"
    proc = xsagpt("train", "-c", cfg, "--out", fresh, "--set", "train.lr=1e9", "--set", "train.grad_clip=0",
                  "--set", "train.warmup_steps=0", "--set", "train.max_steps=40", check=False)
    assert proc.returncode == 1 and "not finite" in proc.stderr
    for step in ckpt_steps(fresh):
        saved = torch.load(fresh / "checkpoints" / f"step_{step:08d}.pt", weights_only=True)
        assert all(torch.isfinite(t).all() for t in saved["model"].values())
    if ckpt_steps(fresh):
        newest = fresh / "checkpoints" / f"step_{ckpt_steps(fresh)[-1]:08d}.pt"
        assert f"The last good checkpoint, {newest}, is kept." in proc.stderr
    else:  # before: "the last good checkpoint is kept" with none there
        assert f"No checkpoint was saved in {fresh}" in proc.stderr


def test_resume_through_a_symlink_to_the_runs_own_checkpoint(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=4, ckpt_interval=2)
    run = tmp_path / "run"
    xsagpt("train", "-c", cfg)
    link = tmp_path / "latest.pt"
    link.symlink_to(run / "checkpoints" / "step_00000004.pt")
    proc = xsagpt("train", "-c", cfg, "--resume", link, "--set", "train.max_steps=6")
    # Before: refused as "another run".
    assert "another run" not in proc.stderr and sorted(metrics(run)) == list(range(1, 7))


def test_a_plain_pytorch_state_dict_is_not_taken_for_a_checkpoint(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    path = tmp_path / "state_dict.pt"
    torch.save(torch.nn.Linear(4, 4).state_dict(), path)
    proc = xsagpt("train", "-c", cfg, "--resume", path, check=False)
    # Before: "INTERNAL ASSERT FAILED ... please report a bug to PyTorch".
    assert proc.returncode == 1
    assert f"{path}: not an xsagpt checkpoint" in proc.stderr
    assert "INTERNAL ASSERT" not in proc.stderr and "report a bug" not in proc.stderr
    assert not (tmp_path / "run").exists()


# ---- signals ------------------------------------------------------------------------

def test_sighup_saves_and_a_closed_stderr_pipe_does_not_kill_the_run(tmp_path, shards, xsagpt, build_dir):
    cfg = cpu_config(tmp_path, shards, max_steps=100000, ckpt_interval=1000, eval_interval=0)
    run = tmp_path / "run"
    proc = start_training(build_dir, "-c", cfg)
    assert wait_for(lambda: (run / "metrics.jsonl").exists() and len(metrics(run)) >= 3, proc)
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    # Before: killed by SIGHUP (exit 129) with no checkpoint.
    assert proc.returncode == 0, err
    assert "stopped by signal 1" in err and ckpt_steps(run) == [max(metrics(run))]

    piped = tmp_path / "piped"
    proc = subprocess.Popen(f"'{build_dir}/xsagpt' train -c '{cfg}' --out '{piped}' --set train.max_steps=60 "
                            f"2>&1 >/dev/null | head -c 200 >/dev/null; echo ${{PIPESTATUS[0]}}",
                            shell=True, executable="/bin/bash", stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=300)
    # Before: SIGPIPE (exit 141) at the first log line after head exited, no checkpoint.
    assert out.strip() == "0"
    assert json.loads((piped / "done.json").read_text())["step"] == 60


# ---- the loss window --------------------------------------------------------------------

def test_a_resume_between_log_lines_logs_what_an_uninterrupted_run_logs(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=12, log_interval=5, ckpt_interval=7, eval_interval=0)
    xsagpt("train", "-c", cfg, "--out", tmp_path / "a")
    # The same run continued from its step-7 checkpoint, two steps after a log line.
    xsagpt("train", "-c", cfg, "--out", tmp_path / "b", "--resume",
           tmp_path / "a" / "checkpoints" / "step_00000007.pt")
    a, b = metrics(tmp_path / "a"), metrics(tmp_path / "b")
    assert sorted(a) == [5, 10, 12] and sorted(b) == [10, 12]
    # Before: b's step-10 line averaged steps 8-10 only (3.2196 against 3.2008).
    assert b[10] == a[10] and b[12] == a[12]
    done_a, done_b = (json.loads((tmp_path / r / "done.json").read_text()) for r in "ab")
    assert done_b["final_train_loss"] == done_a["final_train_loss"] == a[12]
    ck = torch.load(tmp_path / "a" / "checkpoints" / "step_00000007.pt", weights_only=True)
    assert ck["train_window"]["steps"] == 2 and ck["train_window"]["loss_sum"] > 0
