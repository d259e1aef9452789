"""A run stops and resumes exactly, and its run directory is its own: end to end with the
real binary. Resume after SIGTERM and after kill -9 continues bit for bit; a run
directory is never silently reused, also by two trainers racing to create it;
checkpoints are plain torch.load dicts, and truncated, foreign or non-finite ones are
clear errors; a resume refuses a val shard rewritten since the stop, keeps damaged
metrics lines and does what docs/training.md's resume table says."""
import json
import pathlib
import re
import shutil
import signal
import subprocess

import pytest
import torch

from shardio import read_shard, write_shard
from tinyrun import metrics, run_config, wait_for, write_run_config

# What a resumed run logs that must equal the uninterrupted run's, bit for bit.
LOGGED = ("train_loss", "val_loss", "grad_norm", "lr")


def test_resume_after_sigterm_is_exact(tmp_path, shards, xsagpt, build_dir):
    cfg = run_config(tmp_path, shards, max_steps=60, ckpt_interval=25)
    xsagpt("train", "-c", cfg, "--out", tmp_path / "straight")
    out = tmp_path / "stopped"
    proc = subprocess.Popen([build_dir / "xsagpt", "train", "-c", cfg, "--out", out], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    ok = wait_for(lambda: (out / "metrics.jsonl").exists() and metrics(out), proc)
    assert ok, "run finished before it could be signalled"
    proc.send_signal(signal.SIGTERM)
    log, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, log
    assert "stopped by signal" in log
    ckpts = sorted((out / "checkpoints").glob("step_*.pt"))
    stopped_at = int(ckpts[-1].stem.split("_")[1])
    assert 1 <= stopped_at < 60, "the signal should stop the run early"
    assert not (out / "done.json").exists()
    xsagpt("train", "-c", cfg, "--out", out, "--resume", "auto")
    for logged in LOGGED:
        assert metrics(out, logged) == metrics(tmp_path / "straight", logged), logged


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_resume_after_kill9_is_exact(tmp_path, shards, xsagpt, build_dir, optimizer):
    # 100 steps: on an idle machine 40 (a few ms each) could end between two polls.
    cfg = run_config(tmp_path, shards, max_steps=100, ckpt_interval=4, optimizer=optimizer)
    xsagpt("train", "-c", cfg, "--out", tmp_path / "straight")
    out = tmp_path / "killed"
    proc = subprocess.Popen([build_dir / "xsagpt", "train", "-c", cfg, "--out", out], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    # Kill once a checkpoint exists and steps past it were logged.
    ok = wait_for(lambda: (out / "checkpoints").exists() and any((out / "checkpoints").glob("*.pt"))
                  and max(metrics(out), default=0) % 4 != 0, proc)
    assert ok, "run finished before it could be killed"
    proc.kill()
    proc.wait()
    xsagpt("train", "-c", cfg, "--out", out, "--resume", "auto")
    for logged in LOGGED:
        assert metrics(out, logged) == metrics(tmp_path / "straight", logged), logged


def test_run_directory_is_never_silently_reused(tmp_path, shards, xsagpt):
    cfg = run_config(tmp_path, shards, max_steps=4)
    xsagpt("train", "-c", cfg)
    again = xsagpt("train", "-c", cfg, check=False)
    assert again.returncode == 2 and "already holds a run" in again.stderr + again.stdout
    before = (tmp_path / "run" / "metrics.jsonl").read_text()
    finished = xsagpt("train", "-c", cfg, "--resume", "auto")
    assert "already finished" in finished.stdout + finished.stderr
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == before
    # A longer max_steps continues the finished run from its last checkpoint.
    xsagpt("train", "-c", cfg, "--resume", "auto", "--set", "train.max_steps=6")
    assert max(metrics(tmp_path / "run")) == 6
    xsagpt("train", "-c", cfg, "--overwrite")
    assert max(metrics(tmp_path / "run")) == 4


def test_two_trainers_deciding_to_create_one_out_dir_never_share_it(tmp_path, markov_shards, spawn, xsagpt):
    """Both trainers decide that the run directory is new and are held right there (the
    stop point before it is created), then continued together or one after the other:
    in every trial exactly one trains and the other is refused as "in use" without
    writing anything, and the run it leaves resumes."""
    cfg = write_run_config(tmp_path / "cfg.json", markov_shards, max_steps=2, eval_interval=0, ckpt_interval=2)
    # Eight trials: six released together (in either order), two one after the other.
    for trial in range(8):
        out = tmp_path / f"race{trial}"
        held = [spawn("train", "-c", cfg, "--out", out, stop_at="train:before-creating-out-dir") for _ in range(2)]
        order = held if trial % 2 == 0 else held[::-1]
        if trial % 4 == 3:  # one finishes before the other goes on
            order[0].send_signal(signal.SIGCONT)
            order[0].communicate(timeout=120)
            order[1].send_signal(signal.SIGCONT)
        else:
            for p in order:
                p.send_signal(signal.SIGCONT)
        errs = [p.communicate(timeout=120)[1] for p in held]
        codes = [p.returncode for p in held]
        # Before: both trained (every step twice in metrics.jsonl, config/run.json of one, checkpoints
        # of the other) or the loser failed later on "run.json: cannot rename".
        assert sorted(codes) == [0, 2], f"trial {trial}: exit codes {codes}\n" + "\n".join(errs)
        loser = errs[codes.index(2)]
        assert f"out_dir {out} is in use" in loser, loser
        lines = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
        steps = [l["step"] for l in lines if "train_loss" in l]
        assert steps == [1, 2], f"trial {trial}: {steps}"
        assert sorted(p.name for p in out.iterdir()) == [".lock", "checkpoints", "config.json", "done.json",
                                                        "metrics.jsonl", "run.json"]
    # The run left behind is one run: it continues from its own checkpoint.
    xsagpt("train", "-c", cfg, "--out", tmp_path / "race7", "--resume", "auto", "--set", "train.max_steps=3")
    assert sorted(metrics(tmp_path / "race7")) == [1, 2, 3]


def test_checkpoint_is_a_plain_torch_load_dict(tmp_path, shards, xsagpt):
    cfg = run_config(tmp_path, shards, max_steps=4)
    xsagpt("train", "-c", cfg)
    ckpt = torch.load(tmp_path / "run" / "checkpoints" / "step_00000004.pt", weights_only=True)
    assert ckpt["format"] == "xsagpt-checkpoint" and ckpt["step"] == 4
    model = ckpt["model"]
    assert model["transformer.wte.weight"].shape == (256, 64)
    assert model["transformer.h.1.attn.c_attn.weight"].shape == (3 * 64, 64)
    assert model["lm_head.weight"].shape == (256, 64)  # the default head is its own matrix
    assert not torch.equal(model["lm_head.weight"], model["transformer.wte.weight"])
    assert ckpt["config"]["model"]["attention"] == "xsa"
    assert ckpt["config"]["train"]["max_steps"] == 4
    assert set(ckpt["optimizer"]["exp_avg"]) == set(model)
    assert json.loads((tmp_path / "run" / "config.json").read_text()) == ckpt["config"]


def test_truncated_or_foreign_checkpoint_is_a_clear_error(tmp_path, shards, xsagpt):
    cfg = run_config(tmp_path, shards, max_steps=4)
    xsagpt("train", "-c", cfg)
    good = tmp_path / "run" / "checkpoints" / "step_00000004.pt"
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(3)}, foreign)
    for path, message in ((truncated, "not a readable checkpoint"), (foreign, "not an xsagpt checkpoint"),
                          (tmp_path / "missing.pt", "no such checkpoint")):
        proc = xsagpt("train", "-c", cfg, "--out", tmp_path / "r2", "--resume", path, check=False)
        assert proc.returncode != 0
        assert str(path) in proc.stderr and message in proc.stderr


def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(tmp_path, shards, xsagpt):
    cfg = run_config(tmp_path, shards, lr=1e30, warmup_steps=0, grad_clip=0.0, ckpt_interval=1, max_steps=6)
    proc = xsagpt("train", "-c", cfg, check=False)
    assert proc.returncode != 0
    assert "not finite at step" in proc.stderr
    ckpts = sorted((tmp_path / "run" / "checkpoints").glob("*.pt"))
    bad_step = int(proc.stderr.split("not finite at step ")[1].split(";")[0])
    assert all(int(p.stem.split("_")[1]) < bad_step for p in ckpts)
    for p in ckpts:  # what was kept is loadable and finite
        for t in torch.load(p, weights_only=True)["model"].values():
            assert torch.isfinite(t).all()


def dir_snapshot(d: pathlib.Path) -> dict:
    """Every file under d with its bytes, but .lock (it names whichever trainer last tried)."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file() and p.name != ".lock"}


def test_a_val_shard_rewritten_between_stop_and_resume_is_refused_naming_it(tmp_path, own_shards, xsagpt):
    cfg = write_run_config(tmp_path / "cfg.json", own_shards, tmp_path / "run", max_steps=4, ckpt_interval=4)
    xsagpt("train", "-c", cfg)
    val = own_shards / "val_000000.bin"
    size = val.stat().st_size
    write_shard(val, read_shard(val)[::-1])  # other tokens, the same size, the same file
    assert val.stat().st_size == size
    before = dir_snapshot(tmp_path / "run")
    proc = xsagpt("train", "-c", cfg, "--resume", "auto", "--set", "train.max_steps=8", check=False)
    # Before: accepted in silence, and the val curve switched data at step 4.
    assert proc.returncode == 1, proc.stderr
    assert f"validation shard {val} holds other tokens than when the checkpoint was saved" in proc.stderr
    assert dir_snapshot(tmp_path / "run") == before


def test_damaged_metrics_lines_are_reported_and_kept_on_resume(tmp_path, markov_shards, xsagpt):
    run = tmp_path / "run"
    cfg = write_run_config(tmp_path / "cfg.json", markov_shards, run, max_steps=8, ckpt_interval=4)
    xsagpt("train", "-c", cfg)
    path = run / "metrics.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    damaged = [b"garbage\n", b"\x00\x00\x00\n", lines[3][:9] + b"\n"]  # also a line cut by a kill
    text = lines[:2] + [damaged[0]] + lines[2:3] + [damaged[1], damaged[2]] + lines[4:]
    path.write_bytes(b"".join(text))
    proc = xsagpt("train", "-c", cfg, "--resume", "auto", "--set", "train.max_steps=12")
    # Before: the three lines vanished without a word.
    assert f"{path}: 3 damaged line(s) (line(s) 3, 5-6: cut off" in proc.stderr, proc.stderr
    assert (run / "metrics.jsonl.damaged").read_bytes() == b"".join(damaged)
    assert sorted(metrics(run)) == [s for s in range(1, 13) if s != 3]  # step 3's line was the one cut
    # A history emptied by hand: the gap is named, and the damaged lines stay kept.
    path.write_bytes(b"")
    proc = xsagpt("train", "-c", cfg, "--resume", "auto", "--set", "train.max_steps=16")
    assert f"{path}: no line is left, but the checkpoint resumed is at step 12" in proc.stderr, proc.stderr
    assert sorted(metrics(run)) == [13, 14, 15, 16]
    assert (run / "metrics.jsonl.damaged").read_bytes() == b"".join(damaged)


def resume_rules(repo_root) -> dict:
    """docs/training.md's resume table: each key named in a row -> (its first word on resume:
    refused/warns/taken, its bit-exact cell); of two rows naming a key, the last."""
    section = (repo_root / "docs" / "training.md").read_text().split("### What a resume accepts")[1]
    rules = {}
    for line in section.split("\n\n|")[1].split("\n\n")[0].splitlines():
        cells = [c.strip() for c in ("|" + line if not line.startswith("|") else line).strip("|").split("|")]
        for key in re.findall(r"`([a-z_]+(?:\.[a-z_0-9*]+)?)`", cells[0]):
            rules[key] = (cells[1].split()[0], cells[2])
    return rules


def test_the_resume_table_says_what_a_resume_does(tmp_path, markov_shards, xsagpt, repo_root):
    rules = resume_rules(repo_root)
    keys = re.findall(r"^\| `([a-z_.]+)` \|", (repo_root / "docs" / "config-reference.md").read_text(), re.M)
    assert len(keys) > 30
    missing = [k for k in keys if k not in rules and not (k.startswith("model.") and "model.*" in rules)]
    assert not missing, f"docs/training.md's resume table has no row for {missing}"
    # An uninterrupted 6-step run; each case resumes a copy of it from its checkpoint at step 4.
    full = tmp_path / "full"
    cfg = write_run_config(tmp_path / "cfg.json", markov_shards, full, max_steps=6, ckpt_interval=4, eval_interval=2)
    xsagpt("train", "-c", cfg)
    for key, value in [("model.d_model", 32), ("train.seq_len", 16), ("train.seed", 1), ("data.shuffle", False),
                       ("train.micro_batch", 2), ("train.lr", 5e-3), ("train.eval_tokens", 256),
                       ("train.log_interval", 2), ("train.eval_similarity_sequences", 0),
                       ("train.kernels", "fused,fp8_all"), ("data.train", f"{markov_shards}/train_00000*.bin"),
                       ("data.val", f"{markov_shards}/val_0*.bin"), ("out_dir", None)]:
        run = tmp_path / key
        shutil.copytree(full, run)
        (run / "checkpoints" / "step_00000006.pt").unlink()
        (run / "done.json").unlink()
        before = dir_snapshot(run)
        if key == "out_dir":  # the checkpoint into a new directory
            args = ("--resume", run / "checkpoints" / "step_00000004.pt", "--out", tmp_path / "elsewhere")
            run = tmp_path / "elsewhere"
        else:
            args = ("--out", run, "--resume", "auto", "--set", f"{key}={json.dumps(value)}")
        proc = xsagpt("train", "-c", cfg, *args, check=False)
        action, exact = rules.get(key) or rules["model.*"]
        if action == "refused":
            assert proc.returncode in (1, 2), f"{key}: {proc.stderr}"
            assert dir_snapshot(run) == before, key
            continue
        assert proc.returncode == 0, f"{key}: {proc.stderr}"
        assert (f"] {key}: " in proc.stderr) == (action == "warns"), f"{key}: {action}\n{proc.stderr}"
        # The validation set is the same 16 sequences in batches of 2 as of 4; 256 tokens make it 8, and the
        # resume says its val losses are over another set from there on.
        assert ("evaluated 16 sequences, this one evaluates 8" in proc.stderr) == (key == "train.eval_tokens"), key
        # Bit-exact: the weights at the end are those of the uninterrupted run, bit for bit (and the
        # changes the table calls not bit-exact show that this comparison sees a difference).
        ours, theirs = (torch.load(d / "checkpoints" / "step_00000006.pt", weights_only=True)["model"]
                        for d in (run, full))
        same = ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
        assert same == exact.startswith("yes"), f"{key}: {exact}"


def test_a_resume_with_other_kernels_says_so_even_when_the_config_words_match(tmp_path, markov_shards, xsagpt):
    """The checkpoint records the kernels its run computed with; a resume that computes
    with others warns, also when train.kernels reads "auto" both times (an "auto" that a
    newer version or another device resolves differently), and an older checkpoint
    without the record says that it has none. docs/training.md: allowed, warned."""
    full = tmp_path / "full"
    cfg = write_run_config(tmp_path / "cfg.json", markov_shards, full, max_steps=6, ckpt_interval=4, eval_interval=2)
    xsagpt("train", "-c", cfg)
    ckpt_path = full / "checkpoints" / "step_00000004.pt"
    ckpt = torch.load(ckpt_path, weights_only=True)
    assert ckpt["kernels"] == "loss" and ckpt["config"]["train"]["kernels"] == "auto"  # CPU: "auto" is the loss's

    def resume(name, *sets, kernels_entry=...):
        run = tmp_path / name
        shutil.copytree(full, run)
        (run / "checkpoints" / "step_00000006.pt").unlink()
        (run / "done.json").unlink()
        if kernels_entry is not ...:
            edited = torch.load(run / "checkpoints" / "step_00000004.pt", weights_only=True)
            if kernels_entry is None:
                del edited["kernels"]
            else:
                edited["kernels"] = kernels_entry
            torch.save(edited, run / "checkpoints" / "step_00000004.pt")
        return xsagpt("train", "-c", cfg, "--out", run, "--resume", "auto", *sets).stderr

    same = resume("same")
    assert "kernels:" not in same.replace("] kernels: loss", "")  # the start-up line only; no warning
    # "auto" both times, but the run so far computed with XSA's kernel (an older "auto" on CUDA).
    auto = resume("auto-differs", kernels_entry="xsa")
    assert "the checkpoint's run computed with xsa, this run computes with loss" in auto
    assert 'train.kernels "auto"' in auto and "train.kernels: " not in auto  # the config's words did not change
    # Another train.kernels: the config key's warning and the kernels' own.
    fused = resume("fused", "--set", "train.kernels=fused")
    assert "train.kernels: " in fused
    assert "computed with loss, this run computes with weights,norm_regs,rope,xsa_wide,loss" in fused
    older = resume("older", kernels_entry=None)
    assert "does not record which kernels its run computed with" in older
