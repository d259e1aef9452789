"""Nothing lost when runs are stopped, resumed and fed bad input: end to end with the
real binary, each test a case that once failed.

Sweeps are queues of independent jobs (a failed point is recorded and the rest run);
one trainer owns a run directory; everything a run reads is checked before anything
is written, and a resume is staged until its first checkpoint lands; checkpoints
prove themselves (CRC, finite weights, run id); SIGHUP saves like SIGTERM and a
closed stderr pipe does not kill a run; configs refuse duplicate keys and absurd
sizes. All on the CPU, also where a GPU is present."""
import csv
import json
import os
import pathlib
import shutil
import signal
import subprocess
import time

import numpy as np
import torch

from shardio import write_shard
from test_nothing_lost import ckpt_steps, cpu_config, snapshot
from test_train import metrics, shards, wait_for  # noqa: F401  (fixture re-exported)


def sweep_spec(tmp_path, base, grid, name="sw.json", **extra):
    spec = {"base": str(base), "grid": grid, "out_dir": str(tmp_path / "sw"), **extra}
    (tmp_path / name).write_text(json.dumps(spec))
    return tmp_path / name


def summary_of(tmp_path):
    return json.loads((tmp_path / "sw" / "summary.json").read_text())


def start_training(build_dir, *args):
    return subprocess.Popen([build_dir / "xsagpt", "train", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


# ---- 1, 6, 11, 12: a sweep is a queue of independent jobs ----------------------------

def test_1_a_diverging_point_is_recorded_and_the_rest_of_the_sweep_runs(tmp_path, shards, xsagpt):
    base = cpu_config(tmp_path, shards, max_steps=6, ckpt_interval=3, eval_interval=3, grad_clip=0.0)
    spec = sweep_spec(tmp_path, base, {"train.lr": [1e9, 1e-3]})
    proc = xsagpt("sweep", "-c", spec, "--no-plot", check=False)
    # Before: exit 1 at [1/2]; the second point never ran and no summary was written.
    assert proc.returncode == 1, proc.stderr
    bad, good = tmp_path / "sw" / "train.lr=1000000000.0", tmp_path / "sw" / "train.lr=0.001"
    assert (good / "done.json").exists() and not (bad / "done.json").exists()
    points = {p["name"]: p for p in summary_of(tmp_path)["points"]}
    assert points[good.name]["status"] == "done"
    assert points[bad.name]["status"] == "failed" and "not finite" in points[bad.name]["error"]
    failure = json.loads((bad / "failed.json").read_text())
    assert "not finite" in failure["error"] and failure["config"]["train"]["lr"] == 1e9
    assert "1 of 2 point(s) failed" in proc.stderr and "--retry-failed" in proc.stderr
    rows = list(csv.DictReader((tmp_path / "sw" / "summary.csv").open(newline="")))
    assert [r["status"] for r in rows] == ["failed", "done"] and "not finite" in rows[0]["error"]

    # A rerun leaves the failed point alone (before: it failed on it again, forever) ...
    stamp = (bad / "failed.json").stat().st_mtime_ns
    again = xsagpt("sweep", "-c", spec, "--no-plot", check=False)
    assert again.returncode == 1 and "failed before" in again.stderr and "finished, skipping" in again.stderr
    assert (bad / "failed.json").stat().st_mtime_ns == stamp
    # ... unless asked: --retry-failed runs it again (and it fails again, recorded anew).
    retry = xsagpt("sweep", "-c", spec, "--no-plot", "--retry-failed", check=False)
    assert retry.returncode == 1 and f"[1/2] {bad.name}: failed: " in retry.stderr
    assert (bad / "failed.json").stat().st_mtime_ns != stamp


def test_6_force_reruns_points_whose_resolved_config_changed(tmp_path, shards, xsagpt):
    base = cpu_config(tmp_path, shards, max_steps=10, ckpt_interval=0, eval_interval=0)
    spec = sweep_spec(tmp_path, base, {"model.attention": ["sa", "xsa"]}, set=["train.max_steps=6"])
    xsagpt("sweep", "-c", spec, "--no-plot")
    assert [p["step"] for p in summary_of(tmp_path)["points"]] == [6, 6]
    data = json.loads(spec.read_text())
    data["set"] = ["train.max_steps=10"]
    spec.write_text(json.dumps(data))
    xsagpt("sweep", "-c", spec, "--no-plot", "--force")
    # Before: both points were kept as finished at step 6 and the summary mixed lengths.
    assert [p["step"] for p in summary_of(tmp_path)["points"]] == [10, 10]
    for name in ("model.attention=sa", "model.attention=xsa"):
        assert sorted(metrics(tmp_path / "sw" / name)) == list(range(1, 11))
    # The same sweep file over a changed base config: refused without --force, naming the point.
    cfg = json.loads(base.read_text())
    cfg["train"]["lr"] = 3e-3
    base.write_text(json.dumps(cfg))
    proc = xsagpt("sweep", "-c", spec, "--no-plot", check=False)
    assert proc.returncode == 2 and "point model.attention=sa was run with another config" in proc.stderr


def test_11_two_spellings_of_one_value_are_one_point(tmp_path, shards, xsagpt):
    base = cpu_config(tmp_path, shards, max_steps=2)
    spec = sweep_spec(tmp_path, base, {"train.seed": [1, 1.0]})
    proc = xsagpt("sweep", "-c", spec, "--dry-run", check=False)
    # Before: the same run twice, reported as 2 seeds with sd 0.
    assert proc.returncode == 2
    assert "points train.seed=1 and train.seed=1.0 resolve to the same run config" in proc.stderr


def test_12_summary_csv_quotes_values_with_newlines_and_quotes(tmp_path, shards, xsagpt):
    odd = tmp_path / 'sh"ards\nx'  # ',' would separate two patterns
    shutil.copytree(shards, odd)
    base = cpu_config(tmp_path, shards, max_steps=2, ckpt_interval=2, eval_interval=2)
    values = [str(shards / "train_*.bin"), str(odd / "train_*.bin")]
    spec = sweep_spec(tmp_path, base, {"data.train": values})
    xsagpt("sweep", "-c", spec, "--no-plot")
    rows = list(csv.reader((tmp_path / "sw" / "summary.csv").open(newline="")))
    # Before: the newline split the row and the quote ended the field.
    assert len(rows) == 3 and all(len(r) == len(rows[0]) for r in rows)
    assert [r[1] for r in rows[1:]] == values and [r[2] for r in rows[1:]] == ["done", "done"]


# ---- 4: one owner per run directory ---------------------------------------------------

def test_4_a_second_trainer_in_a_busy_run_dir_is_refused_naming_the_holder(tmp_path, shards, xsagpt, build_dir):
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


# ---- 2, 3: everything checked before anything is written; a resume is staged ----------

def test_3_token_ids_beyond_the_vocabulary_are_found_before_out_dir_exists(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    proc = xsagpt("train", "-c", cfg, "--set", "model.vocab_size=200", check=False)
    # Before: found at the first batch, after config.json and metrics.jsonl were made.
    assert proc.returncode == 1
    assert "is >= vocab_size 200" in proc.stderr and "nothing was written" in proc.stderr
    assert not (tmp_path / "run").exists()
    xsagpt("train", "-c", cfg)  # the fixed start is not refused as "already holds a run"


def test_2_a_resume_that_fails_after_training_began_leaves_the_finished_run_as_it_was(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=4, ckpt_interval=4, eval_interval=2)
    run = tmp_path / "run"
    xsagpt("train", "-c", cfg)
    before = snapshot(run)
    # The repro: a new val shard with ids >= vocab_size. Before: trained 10 steps,
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


# ---- 5, 7, 8, 16: checkpoints prove themselves ------------------------------------------

def test_5_a_foreign_checkpoint_copied_into_checkpoints_is_not_adopted(tmp_path, shards, xsagpt):
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


def test_7_a_flipped_bit_in_a_checkpoint_is_detected(tmp_path, shards, xsagpt):
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


def test_8_nan_weights_are_never_saved_nor_loaded(tmp_path, shards, xsagpt):
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


def test_16_resume_through_a_symlink_to_the_runs_own_checkpoint(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=4, ckpt_interval=2)
    run = tmp_path / "run"
    xsagpt("train", "-c", cfg)
    link = tmp_path / "latest.pt"
    link.symlink_to(run / "checkpoints" / "step_00000004.pt")
    proc = xsagpt("train", "-c", cfg, "--resume", link, "--set", "train.max_steps=6")
    # Before: refused as "another run".
    assert "another run" not in proc.stderr and sorted(metrics(run)) == list(range(1, 7))


# ---- 14: signals --------------------------------------------------------------------

def test_14_sighup_saves_and_a_closed_stderr_pipe_does_not_kill_the_run(tmp_path, shards, xsagpt, build_dir):
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


# ---- 13, 15: config --------------------------------------------------------------------

def test_13_a_duplicate_key_in_a_config_is_an_error_naming_it(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    text = cfg.read_text().replace('"lr": 0.01', '"lr": 0.01, "lr": 0.5')
    assert text.count('"lr"') == 2
    cfg.write_text(text)
    proc = xsagpt("train", "-c", cfg, check=False)
    # Before: trained with lr 0.5, silently.
    assert proc.returncode == 2
    assert f'{cfg}: key "lr" appears twice in "train"' in proc.stderr
    assert not (tmp_path / "run").exists()


def test_15_more_sinks_than_positions_is_refused(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    proc = xsagpt("train", "-c", cfg, "--set", "model.n_sink=100000", check=False)
    # Before: accepted; 7 GB and a 6-minute step.
    assert proc.returncode == 2 and "n_sink: 100000 sinks is more than block_size (64)" in proc.stderr


# ---- 9: shards are immutable while a run uses them -------------------------------------

def rewrite_in_place(shard: pathlib.Path):
    """Other tokens, the same size, the same inode (what `cp new old` or an editor does)."""
    header = 1024
    n = (shard.stat().st_size - header) // 2
    with open(shard, "r+b") as f:
        f.seek(header)
        f.write(((np.arange(n) * 7 + 3) % 256).astype("<u2").tobytes())


def test_9_a_shard_rewritten_in_place_at_the_same_size_is_detected(tmp_path, shards, xsagpt, build_dir):
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


def test_15_a_model_whose_state_cannot_fit_is_refused_before_it_is_built(tmp_path, shards, xsagpt):
    # d_model 65536: ~69G parameters, ~1 TiB of weights, gradients and AdamW state,
    # more than any test machine's RAM. The estimate (model/counts.h) is exact for that part.
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    proc = xsagpt("train", "-c", cfg, "--set", "model.d_model=65536", check=False, timeout=120)
    # Before: the trainer began allocating it (std::bad_alloc, or the OOM killer).
    assert proc.returncode == 2, proc.stderr
    assert "this run cannot fit" in proc.stderr and "of this machine's RAM" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_16_a_fifo_shard_is_named_for_what_it_is(tmp_path, shards, xsagpt):
    os.mkfifo(tmp_path / "val_000000.bin")
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    proc = xsagpt("train", "-c", cfg, "--set", f"data.val={tmp_path}/val_*.bin", check=False, timeout=60)
    # Before: "matched no files", though it matched one.
    assert proc.returncode != 0
    assert f"'{tmp_path}/val_000000.bin' is a FIFO (named pipe)" in proc.stderr, proc.stderr
    assert "matched no files" not in proc.stderr
    assert not (tmp_path / "run").exists()


def test_10_a_resume_between_log_lines_logs_what_an_uninterrupted_run_logs(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=12, log_interval=5, ckpt_interval=7, eval_interval=0)
    xsagpt("train", "-c", cfg, "--out", tmp_path / "a")
    # The same run continued from its step-7 checkpoint, two steps after a log line.
    xsagpt("train", "-c", cfg, "--out", tmp_path / "b", "--resume",
           tmp_path / "a" / "checkpoints" / "step_00000007.pt")
    a, b = metrics(tmp_path / "a"), metrics(tmp_path / "b")
    assert sorted(a) == [5, 10, 12] and sorted(b) == [10, 12]
    # Before: b's step-10 line averaged steps 8-10 only (3.2196 against 3.2008 in the issue).
    assert b[10] == a[10] and b[12] == a[12]
    done_a, done_b = (json.loads((tmp_path / r / "done.json").read_text()) for r in "ab")
    assert done_b["final_train_loss"] == done_a["final_train_loss"] == a[12]
    ck = torch.load(tmp_path / "a" / "checkpoints" / "step_00000007.pt", weights_only=True)
    assert ck["train_window"]["steps"] == 2 and ck["train_window"]["loss_sum"] > 0
