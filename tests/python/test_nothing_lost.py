"""Nothing lost, ever: end-to-end with the real binary, one test per way a run can lose work.

A full disk while saving a checkpoint or writing metrics, a resume that fails, a
resume from another run's checkpoint, a run killed between its last checkpoint and
done.json, a shard truncated under a running job, a sweep directory with shell
metacharacters: each must leave every good file intact and say what happened.
All on the CPU, also where a GPU is present (runs are compared bit for bit).
Disk-full tests mount a small tmpfs, which needs root; elsewhere they skip (the C++
tests in tests/cpp/test_run_dir.cpp inject the same write failures without root)."""
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import time

import pytest
import torch

from test_train import metrics, run_config, shards, wait_for  # noqa: F401  (fixture re-exported)


def cpu_config(tmp_path, shards, **train):
    """test_train's tiny run, on the CPU on any machine: runs are compared bit for bit."""
    return run_config(tmp_path, shards, device="cpu", **train)


def snapshot(d: pathlib.Path) -> dict:
    """Every file under d with a hash of its bytes, but .lock: the run directory's lock
    file names whichever trainer last held it (train/run_dir.h), refused ones included."""
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file() and p.name != ".lock"}


def ckpt_steps(run: pathlib.Path) -> list:
    return sorted(int(p.stem.split("_")[1]) for p in (run / "checkpoints").glob("step_*.pt"))


def lines_are_whole(path: pathlib.Path) -> list:
    text = path.read_text()
    assert text.endswith("\n"), "metrics.jsonl ends mid-line"
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture
def small_disk(tmp_path):
    """mount(size) -> a fresh tmpfs of that many bytes; remount(size) resizes it."""
    if os.geteuid() != 0:
        pytest.skip("disk-full tests mount a small tmpfs, which needs root; "
                    "tests/cpp/test_run_dir.cpp injects the same write failures without it")
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


def test_a_sweep_point_killed_after_its_final_checkpoint_gets_finished(tmp_path, shards, xsagpt):
    base = cpu_config(tmp_path, shards, max_steps=4, ckpt_interval=4)
    spec = {"base": str(base), "grid": {"model.attention": ["sa", "xsa"]}, "out_dir": str(tmp_path / "sw")}
    (tmp_path / "sw.json").write_text(json.dumps(spec))
    xsagpt("sweep", "-c", tmp_path / "sw.json", "--no-plot")
    (tmp_path / "sw" / "model.attention=xsa" / "done.json").unlink()
    xsagpt("sweep", "-c", tmp_path / "sw.json", "--no-plot")
    summary = json.loads((tmp_path / "sw" / "summary.json").read_text())
    # Before: that point stayed "running" forever and its XSA - SA difference "-".
    assert [p["status"] for p in summary["points"]] == ["done", "done"]
    assert isinstance(summary["differences"][0]["val_loss_minus_baseline"], float)


def test_the_plot_step_runs_without_a_shell(tmp_path, shards, xsagpt):
    base = cpu_config(tmp_path, shards, max_steps=2, ckpt_interval=2, eval_interval=2)
    out = tmp_path / "o'; touch INJECTED; echo '"
    spec = {"base": str(base), "grid": {"train.lr": [1e-2, 3e-3]}, "out_dir": str(out)}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    inside = tmp_path / "inside"
    inside.mkdir()
    proc = xsagpt("sweep", "-c", tmp_path / "s.json", cwd=inside)
    # Before: the plot command, built for `std::system`, ran the `touch` (and a plain apostrophe broke it).
    assert not list(tmp_path.rglob("INJECTED"))
    assert (out / "plots" / "sweep_final.png").exists()
    assert f"figures: {out}/plots" in proc.stdout
    quiet = xsagpt("sweep", "-c", tmp_path / "s.json", "--no-plot", cwd=inside)
    assert "summary:" in quiet.stdout and "figures:" not in quiet.stdout  # before: printed, nothing drawn


def test_grid_values_with_slashes_stay_one_directory_inside_the_sweep(tmp_path, shards, xsagpt):
    base = cpu_config(tmp_path, shards, max_steps=2, ckpt_interval=2, eval_interval=2)
    out = tmp_path / "sweep"
    same = f"{shards}/../{shards.name}/train_000001.bin"  # '/' and '..': the same shard by another path
    spec = {"base": str(base), "grid": {"data.train": [str(shards / "train_000001.bin"), same]}, "out_dir": str(out)}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    xsagpt("sweep", "-c", tmp_path / "s.json", "--no-plot")
    # Before: the first nested directories under the sweep's, the second created them outside it.
    points = sorted(p for p in out.iterdir() if p.is_dir())
    assert len(points) == 2 and all((p / "done.json").exists() for p in points)
    assert sorted(p.name for p in shards.iterdir()) == ["train_000001.bin", "train_000002.bin", "val_000000.bin"]
    summary = json.loads((out / "summary.json").read_text())
    assert [p["values"]["data.train"] for p in summary["points"]] == spec["grid"]["data.train"]
    assert [(out / p["dir"]).exists() for p in summary["points"]] == [True, True]


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
    # Before: killed by SIGBUS (exit 135) without a word.
    assert proc.returncode == 1, err
    assert "xsagpt: error: data shard " + str(data / "train_00000") in err
    assert "truncated or rewritten on disk while this run read it" in err and "--resume auto" in err
    for step in ckpt_steps(run):
        torch.load(run / "checkpoints" / f"step_{step:08d}.pt", weights_only=True)


# ---- smaller problems: messages that name the file or key -----------------------------

def test_inputs_of_the_wrong_kind_are_named(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    proc = xsagpt("tokenize", tmp_path, check=False)
    assert proc.returncode == 2 and f"{tmp_path}: is a directory" in proc.stderr  # before: exit 0, "[]"
    proc = xsagpt("train", "-c", tmp_path, check=False)
    assert proc.returncode == 2 and f"{tmp_path}: is a directory, expected a JSON file" in proc.stderr
    proc = xsagpt("train", "-c", cfg, "--set", "train.eval_tokens=10", check=False)
    assert proc.returncode == 2 and "train.eval_tokens: 10 tokens is less than one validation batch" in proc.stderr
    spec = {"base": str(cfg), "grid": {"train.lr": [1e-3]}, "constant_batch_tokens": "yes",
            "out_dir": str(tmp_path / "sw")}
    (tmp_path / "sw.json").write_text(json.dumps(spec))
    proc = xsagpt("sweep", "-c", tmp_path / "sw.json", check=False)
    assert proc.returncode == 2 and f"{tmp_path}/sw.json: constant_batch_tokens: expected true or false" in proc.stderr


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


def test_model_base_can_be_set_on_the_command_line(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    proc = xsagpt("train", "-c", cfg, "--set", "model.base=tiny", "--set", "model.n_layer=1")
    saved = json.loads((tmp_path / "run" / "config.json").read_text())["model"]
    assert saved["n_layer"] == 1 and saved["vocab_size"] == 256 and proc.returncode == 0


def test_help_names_files_that_exist_and_info_never_overflows(tmp_path, xsagpt, repo_root):
    proc = xsagpt("train", check=False)
    suggested = proc.stderr.split("--config ")[-1].split(")")[0]
    assert (repo_root / suggested).exists(), suggested
    model = {"n_layer": 2000000, "d_model": 3000000, "n_head": 1, "head_dim": 3000000}
    (tmp_path / "huge.json").write_text(json.dumps(model))
    proc = xsagpt("info", "-c", tmp_path / "huge.json", check=False)
    assert proc.returncode == 2 and "more than a 64-bit count can hold" in proc.stderr
    assert "-" not in proc.stdout
