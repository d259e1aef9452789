"""Nothing lost, ever: end-to-end with the real binary, one test per way a run can lose work.

A full disk while saving a checkpoint or writing metrics, a resume that fails, a
start that fails validation, a resume from another run's checkpoint or an older one of
its own, a run killed between its last checkpoint and done.json: each must leave every
good file intact and say what happened. (The same for sweep points is in
sweep/test_sweep_failures.py, for shards in data/test_shard_checks.py.)
All on the CPU, also where a GPU is present (runs are compared bit for bit).
Disk-full tests mount a small tmpfs, which needs root; elsewhere they skip (the C++
tests in tests/cpp/run/test_run_dir.cpp inject the same write failures without root)."""
import json
import os
import pathlib
import subprocess

import pytest
import torch

from tinyrun import ckpt_steps, cpu_config, metrics, snapshot


def lines_are_whole(path: pathlib.Path) -> list:
    text = path.read_text()
    assert text.endswith("\n"), "metrics.jsonl ends mid-line"
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture
def small_disk(tmp_path):
    """mount(size) -> a fresh tmpfs of that many bytes; remount(size) resizes it."""
    if os.geteuid() != 0:
        pytest.skip("disk-full tests mount a small tmpfs, which needs root; "
                    "tests/cpp/run/test_run_dir.cpp injects the same write failures without it")
    mnt = tmp_path / "small_disk"
    mnt.mkdir()
    mounted = []

    def mount(size):
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
        mounted.append(mnt)
        return mnt

    def remount(size):
        subprocess.run(["mount", "-o", f"remount,size={size}", str(mnt)], check=True)

    mount.remount = remount
    yield mount
    for m in mounted:
        subprocess.run(["umount", "-l", str(m)], check=False)


def test_full_disk_while_saving_a_checkpoint_is_a_clean_error(tmp_path, shards, xsagpt, small_disk):
    cfg = cpu_config(tmp_path, shards, max_steps=6, ckpt_interval=3)
    xsagpt("train", "-c", cfg, "--out", tmp_path / "straight")
    ckpt_bytes = (tmp_path / "straight" / "checkpoints" / "step_00000003.pt").stat().st_size
    # Room for one checkpoint, config.json and metrics, but not for a second checkpoint beside it.
    disk = small_disk(ckpt_bytes * 3 // 2)
    run = disk / "run"
    proc = xsagpt("train", "-c", cfg, "--out", run, check=False)
    # Before: exit 134, an uncaught c10::Error with a C++ frame dump, the .tmp left filling the disk.
    assert proc.returncode == 1, proc.stderr
    assert f"{run}/checkpoints/step_00000006.pt: cannot write: No space left on device" in proc.stderr
    assert "partial file was removed" in proc.stderr
    assert "terminate" not in proc.stderr and "frame #" not in proc.stderr
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_00000003.pt"]
    good = torch.load(run / "checkpoints" / "step_00000003.pt", weights_only=True)
    ref = torch.load(tmp_path / "straight" / "checkpoints" / "step_00000003.pt", weights_only=True)
    assert all(torch.equal(good["model"][k], ref["model"][k]) for k in ref["model"])
    lines_are_whole(run / "metrics.jsonl")
    assert metrics(run) == metrics(tmp_path / "straight")  # the steps logged before the save are all there
    assert not (run / "done.json").exists()
    # Space freed: the run resumes from the good checkpoint and ends exactly as without the failure.
    small_disk.remount(ckpt_bytes * 4)
    xsagpt("train", "-c", cfg, "--out", run, "--resume", "auto")
    assert metrics(run) == metrics(tmp_path / "straight")
    assert metrics(run, "val_loss") == metrics(tmp_path / "straight", "val_loss")


def test_full_disk_while_logging_stops_the_run_naming_metrics(tmp_path, shards, xsagpt, small_disk):
    cfg = cpu_config(tmp_path, shards, max_steps=400, ckpt_interval=0, eval_interval=0)
    run = small_disk(16 * 1024) / "run"
    proc = xsagpt("train", "-c", cfg, "--out", run, check=False)
    # Before: exit 0 after silently dropping the lines that did not fit, the file cut mid-line.
    assert proc.returncode == 1, proc.stderr
    assert f"{run}/metrics.jsonl: cannot write: No space left on device; the run stops at step" in proc.stderr
    lines = lines_are_whole(run / "metrics.jsonl")
    assert [l["step"] for l in lines] == list(range(1, len(lines) + 1))  # each step logged, in order, whole
    assert 10 < len(lines) < 400


def test_resume_on_a_full_disk_leaves_the_finished_run_as_it_was(tmp_path, shards, xsagpt, small_disk):
    cfg = cpu_config(tmp_path, shards, max_steps=4, ckpt_interval=4)
    disk = small_disk(4 * 1024 * 1024)
    run = disk / "run"
    xsagpt("train", "-c", cfg, "--out", run)
    before = snapshot(run)
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)  # fill the disk to the last byte
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    proc = xsagpt("train", "-c", cfg, "--out", run, "--resume", "auto", "--set", "train.max_steps=8", check=False)
    # Before: the history was rewritten truncated (lines lost, one glued onto the next).
    assert proc.returncode == 1, proc.stderr
    assert "No space left on device" in proc.stderr and str(run) in proc.stderr
    assert snapshot(run) == before  # done.json, config.json, metrics and checkpoint as they were
    filler.unlink()
    xsagpt("train", "-c", cfg, "--out", run, "--resume", "auto", "--set", "train.max_steps=8")
    assert sorted(metrics(run)) == list(range(1, 9))
    lines_are_whole(run / "metrics.jsonl")


def test_a_failed_resume_leaves_a_finished_run_intact(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=8, ckpt_interval=4)
    run = tmp_path / "run"
    xsagpt("train", "-c", cfg)
    before = snapshot(run)
    done = json.loads((run / "done.json").read_text())
    # The checkpoint's loader state does not fit seq_len 16: found before anything is touched.
    proc = xsagpt("train", "-c", cfg, "--resume", "auto", "--set", "train.max_steps=15", "--set", "train.seq_len=16",
                  check=False)
    assert proc.returncode == 1
    assert f"{run}/checkpoints/step_00000008.pt: loader state does not fit" in proc.stderr
    assert "saved with seq_len 32, this loader has 16" in proc.stderr
    # Before: done.json was deleted and config.json rewritten with the rejected settings.
    assert snapshot(run) == before
    # And "already finished" shows the real losses (before: "train loss nan, val loss nan").
    again = xsagpt("train", "-c", cfg, "--resume", "auto")
    assert (f"already finished at step 8 (train.max_steps = 8): train loss {done['final_train_loss']:.4f}, "
            f"val loss {done['final_val_loss']:.4f}") in again.stderr
    assert snapshot(run) == before


def test_a_start_that_fails_validation_creates_nothing(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    bad = tmp_path / "bad_shards"
    bad.mkdir()
    (bad / "train_0.bin").write_bytes(b"\x01")  # odd size: not a shard
    for override, named in ((f"data.train={bad}/train_*.bin", f"{bad}/train_0.bin: not a token shard"),
                            (f"data.val={tmp_path}/none_*.bin", f"'{tmp_path}/none_*.bin' matched no files")):
        proc = xsagpt("train", "-c", cfg, "--set", override, check=False)
        assert proc.returncode == 1 and named in proc.stderr
        # Before: config.json was left behind, and the fixed rerun was refused ("already holds a run").
        assert not (tmp_path / "run").exists()
    xsagpt("train", "-c", cfg)
    before = snapshot(tmp_path / "run")
    proc = xsagpt("train", "-c", cfg, "--overwrite", "--set", f"data.train={bad}/train_*.bin", check=False)
    assert proc.returncode == 1
    assert snapshot(tmp_path / "run") == before  # --overwrite discards the old run only for one that can start


def test_resuming_another_runs_checkpoint_is_refused_naming_both(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=8, ckpt_interval=2, keep_checkpoints=10)
    base, mix = tmp_path / "base", tmp_path / "mix"
    xsagpt("train", "-c", cfg, "--out", base)
    xsagpt("train", "-c", cfg, "--out", mix, "--set", "train.seed=7", "--set", "train.max_steps=10")
    before = snapshot(mix)
    from_ = base / "checkpoints" / "step_00000004.pt"
    proc = xsagpt("train", "-c", cfg, "--out", mix, "--resume", from_, check=False)
    # Before: exit 0, mix's metrics cut to the new run's, its done.json overwritten, new checkpoints pruned.
    assert proc.returncode == 2
    assert f"out_dir {mix} already holds another run (checkpoints up to step 10" in proc.stderr
    assert f"{from_} is a checkpoint of {base}" in proc.stderr
    assert snapshot(mix) == before
    # With --overwrite: a clean continuation, exactly the base run's steps 5-8 and nothing of the old run.
    xsagpt("train", "-c", cfg, "--out", mix, "--resume", from_, "--overwrite")
    assert metrics(mix) == {s: l for s, l in metrics(base).items() if s > 4}
    assert ckpt_steps(mix) == [6, 8]
    assert json.loads((mix / "done.json").read_text())["step"] == 8


def test_resuming_an_older_checkpoint_of_the_run_needs_overwrite(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=8, ckpt_interval=2, keep_checkpoints=10)
    run = tmp_path / "run"
    xsagpt("train", "-c", cfg)
    straight = metrics(run), metrics(run, "val_loss")
    before = snapshot(run)
    older = run / "checkpoints" / "step_00000004.pt"
    proc = xsagpt("train", "-c", cfg, "--resume", older, check=False)
    assert proc.returncode == 2 and "which has checkpoints up to step 8" in proc.stderr
    assert snapshot(run) == before
    # Checkpoints every 5 steps now: 5 and 8 are new, the old 6 must be gone rather than kept as "newer".
    xsagpt("train", "-c", cfg, "--resume", older, "--overwrite", "--set", "train.ckpt_interval=5")
    assert (metrics(run), metrics(run, "val_loss")) == straight
    assert ckpt_steps(run) == [2, 4, 5, 8]


def test_a_run_killed_after_its_final_checkpoint_is_finished_by_resume(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=6, ckpt_interval=3)
    run = tmp_path / "run"
    xsagpt("train", "-c", cfg)
    done = json.loads((run / "done.json").read_text())
    assert done["final_train_loss"] == metrics(run)[6] and done["final_val_loss"] == metrics(run, "val_loss")[6]
    # kill -9 between the final checkpoint and done.json leaves exactly this:
    (run / "done.json").unlink()
    proc = xsagpt("train", "-c", cfg, "--resume", "auto")
    # Before: "already finished ... train loss nan, val loss nan", and still no done.json.
    assert f"train loss {done['final_train_loss']:.4f}, val loss {done['final_val_loss']:.4f}" in proc.stderr
    again = json.loads((run / "done.json").read_text())
    assert {k: again[k] for k in ("step", "tokens", "final_train_loss", "final_val_loss")} == \
           {k: done[k] for k in ("step", "tokens", "final_train_loss", "final_val_loss")}
    # A checkpoint written before checkpoints carried the losses: they come from metrics.jsonl.
    (run / "done.json").unlink()
    path = run / "checkpoints" / "step_00000006.pt"
    ck = torch.load(path, weights_only=True)
    del ck["train_loss"], ck["val_loss"]
    torch.save(ck, path)
    xsagpt("train", "-c", cfg, "--resume", "auto")
    again = json.loads((run / "done.json").read_text())
    assert again["final_train_loss"] == done["final_train_loss"] and again["final_val_loss"] == done["final_val_loss"]
