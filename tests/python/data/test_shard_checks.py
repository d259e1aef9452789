"""Token shards are checked before anything is written and while a run reads them: end
to end with the real binary. Token ids beyond the vocabulary are found before the run
directory exists; bad files, a FIFO and a shard rewritten in place at the same size or
truncated under a running job are named, and the checkpoints already written stay
loadable. All on the CPU, also where a GPU is present."""
import os
import pathlib
import shutil
import subprocess

import numpy as np
import torch

from tinyrun import ckpt_steps, cpu_config, run_config, snapshot, start_training, wait_for, write_run_config


def test_token_ids_beyond_the_vocabulary_are_found_before_out_dir_exists(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    proc = xsagpt("train", "-c", cfg, "--set", "model.vocab_size=200", check=False)
    # Before: found at the first batch, after config.json and metrics.jsonl were made.
    assert proc.returncode == 1
    assert "is >= vocab_size 200" in proc.stderr and "nothing was written" in proc.stderr
    assert not (tmp_path / "run").exists()
    xsagpt("train", "-c", cfg)  # the fixed start is not refused as "already holds a run"


def rewrite_in_place(shard: pathlib.Path):
    """Other tokens, the same size, the same inode (what `cp new old` or an editor does)."""
    header = 1024
    n = (shard.stat().st_size - header) // 2
    with open(shard, "r+b") as f:
        f.seek(header)
        f.write(((np.arange(n) * 7 + 3) % 256).astype("<u2").tobytes())


def test_a_shard_rewritten_in_place_at_the_same_size_is_detected(tmp_path, shards, xsagpt, build_dir):
    data = tmp_path / "data"
    shutil.copytree(shards, data)
    cfg = cpu_config(tmp_path, data, max_steps=100000, ckpt_interval=5, eval_interval=0)
    run = tmp_path / "run"
    proc = start_training(build_dir, "-c", cfg)
    assert wait_for(lambda: (run / "checkpoints").exists() and ckpt_steps(run), proc)
    size = (data / "train_000001.bin").stat().st_size
    rewrite_in_place(data / "train_000001.bin")
    assert (data / "train_000001.bin").stat().st_size == size
    _, err = proc.communicate(timeout=120)
    # Before: the run went on reading the new tokens, without a word.
    assert proc.returncode == 1, err
    assert f"data shard {data / 'train_000001.bin'}: modified" in err and "--resume auto" in err
    # And at resume, by the content fingerprint the checkpoint holds.
    cfg = cpu_config(tmp_path, data, max_steps=4, ckpt_interval=4)
    xsagpt("train", "-c", cfg, "--out", tmp_path / "short")
    rewrite_in_place(data / "train_000002.bin")
    before = snapshot(tmp_path / "short")
    proc = xsagpt("train", "-c", cfg, "--out", tmp_path / "short", "--resume", "auto", "--set", "train.max_steps=8",
                  check=False)
    # Before: the resume digest (names and token counts) matched and the run went on.
    assert proc.returncode == 1
    assert f"data shard {data / 'train_000002.bin'} holds other tokens than when the checkpoint was saved" in proc.stderr
    assert snapshot(tmp_path / "short") == before


def test_a_fifo_shard_is_named_for_what_it_is(tmp_path, shards, xsagpt):
    os.mkfifo(tmp_path / "val_000000.bin")
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    proc = xsagpt("train", "-c", cfg, "--set", f"data.val={tmp_path}/val_*.bin", check=False, timeout=60)
    # Before: "matched no files", though it matched one.
    assert proc.returncode != 0
    assert f"'{tmp_path}/val_000000.bin' is a FIFO (named pipe)" in proc.stderr, proc.stderr
    assert "matched no files" not in proc.stderr
    assert not (tmp_path / "run").exists()


def test_a_shard_truncated_during_training_is_named(tmp_path, shards, xsagpt, build_dir):
    data = tmp_path / "data"
    shutil.copytree(shards, data)
    cfg = cpu_config(tmp_path, data, max_steps=100000, ckpt_interval=5, eval_interval=0)
    run = tmp_path / "run"
    proc = subprocess.Popen([build_dir / "xsagpt", "train", "-c", cfg], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: ckpt_steps(run) if (run / "checkpoints").exists() else False, proc)
    for shard in data.glob("train_*.bin"):
        os.truncate(shard, 1024)  # keep the header: every token is gone
    _, err = proc.communicate(timeout=60)
    # Before: killed by SIGBUS (exit 135) without a word. Now one of two checks names the
    # shard, whichever the timing meets first: the SIGBUS handler, when the loader touches a
    # page past the new end, or the size check after each copied row (a row that ended
    # within the last mapped page reads zeros, no fault).
    assert proc.returncode == 1, err
    assert "data shard " + str(data / "train_00000") in err and "--resume auto" in err
    assert ("xsagpt: error: data shard" in err and "truncated or rewritten on disk while this run read it" in err) or \
        "truncated on disk while the run read it" in err, err
    for step in ckpt_steps(run):
        torch.load(run / "checkpoints" / f"step_{step:08d}.pt", weights_only=True)


def test_bad_data_files_are_named(tmp_path, shards, xsagpt):
    cfg = run_config(tmp_path, shards)
    proc = xsagpt("train", "-c", cfg, "--set", f"data.train={tmp_path}/nothing_*.bin", check=False)
    assert proc.returncode != 0 and "nothing_*.bin" in proc.stderr + proc.stdout


def test_a_val_shard_truncated_while_the_run_reads_it_stops_the_run_naming_it(tmp_path, own_shards, spawn):
    cfg = write_run_config(tmp_path / "cfg.json", own_shards, tmp_path / "run", max_steps=100000, eval_interval=2,
                           ckpt_interval=2)
    proc = spawn("train", "-c", cfg)
    assert wait_for(lambda: list((tmp_path / "run").glob("checkpoints/step_*.pt")), proc)
    val = own_shards / "val_000000.bin"
    # Cut inside the first page: the evaluated tokens past the new end read as zeros, no fault.
    os.truncate(val, 1500)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # before: evaluated the zeros and went on with exit 0 in the end
        raise AssertionError("the run went on evaluating a truncated val shard")
    assert proc.returncode == 1, err
    assert f"data shard {val}: 1500 bytes now, 9216 when this run opened it" in err and "--resume auto" in err
    assert not (tmp_path / "run" / "done.json").exists()


def test_a_shard_that_is_a_directory_is_refused_not_skipped(tmp_path, own_shards, xsagpt):
    (own_shards / "train_000003.bin").mkdir()  # beside two real train shards the pattern matches
    cfg = cpu_config(tmp_path, own_shards, max_steps=2)
    proc = xsagpt("train", "-c", cfg, check=False)
    # Before: exit 0, having trained on the other shards without a word.
    assert proc.returncode != 0
    assert f"'{own_shards}/train_000003.bin' is a directory" in proc.stderr, proc.stderr
    assert not (tmp_path / "run").exists()
    check = xsagpt("data", "--check", f"{own_shards}/train_*.bin", check=False)
    # Before: 0 errors over the two files it read.
    assert check.returncode != 0 and f"'{own_shards}/train_000003.bin' is a directory" in check.stderr
