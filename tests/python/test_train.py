"""End-to-end tests of `xsagpt train` with the real binary: determinism, exact
resume after SIGTERM and after kill -9, run-directory safety, bad configs,
checkpoints readable by plain torch.load, NaN handling, and learning on the
offline real-text corpus."""
import json
import math
import os
import pathlib
import signal
import subprocess

import numpy as np
import pytest
import torch

from shardio import write_markov_shards
from tinyrun import metrics, wait_for, write_run_config


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return write_markov_shards(tmp_path_factory.mktemp("shards"), {
        "val_000000.bin": 4096, "train_000001.bin": 20000, "train_000002.bin": 15000}, seed=0)


def run_config(tmp_path, shards, **train):
    """tinyrun's config into tmp_path/cfg_N.json (a new N each call), run dir tmp_path/run."""
    path = tmp_path / f"cfg_{len(list(tmp_path.glob('cfg_*.json')))}.json"
    return write_run_config(path, shards, tmp_path / "run", **train)


def test_same_config_gives_same_losses(tmp_path, shards, xsagpt):
    cfg = run_config(tmp_path, shards)
    xsagpt("train", "-c", cfg, "--out", tmp_path / "a")
    xsagpt("train", "-c", cfg, "--out", tmp_path / "b", "--set", "train.adamw=torch")
    xsagpt("train", "-c", cfg, "--out", tmp_path / "c")
    a, b, c = metrics(tmp_path / "a"), metrics(tmp_path / "b"), metrics(tmp_path / "c")
    assert sorted(a) == list(range(1, 13))
    assert a == c  # bit-identical on CPU
    assert a.keys() == b.keys() and all(abs(a[s] - b[s]) < 1e-4 for s in a)  # fused vs torch::optim::AdamW
    assert metrics(tmp_path / "a", "val_loss").keys() == {0, 4, 8, 12}
    done = json.loads((tmp_path / "a" / "done.json").read_text())
    assert done["step"] == 12 and done["tokens"] == 12 * 4 * 32
    assert done["final_train_loss"] == a[12]


def test_log_names_the_attention_kernel_torch_picks(tmp_path, shards, xsagpt):
    cfg = run_config(tmp_path, shards, max_steps=1)
    proc = xsagpt("train", "-c", cfg)
    model = json.loads(cfg.read_text())["model"]
    q = torch.empty(1, model["n_head"], 64, model["head_dim"], requires_grad=True)
    names = {0: "math", 1: "flash_attention", 2: "efficient_attention", 3: "cudnn_attention"}
    expected = names[torch._fused_sdp_choice(q, q, q, is_causal=True)]
    assert f"attention: SDPA backend {expected}" in proc.stderr


def openmp_spin_counts(stderr):
    """GOMP_SPINCOUNT as libgomp reports it at start-up under OMP_DISPLAY_ENV=verbose, once per
    program image (xsagpt executes itself again to apply its default)."""
    return [line.split("=")[1].strip().strip("'") for line in stderr.splitlines()
            if line.strip().startswith("GOMP_SPINCOUNT =")]


def test_openmp_threads_sleep_at_once_unless_the_user_says_otherwise(tmp_path, shards, xsagpt):
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    env["OMP_DISPLAY_ENV"] = "verbose"
    cfg = run_config(tmp_path, shards, max_steps=1)
    proc = xsagpt("train", "-c", cfg, env=env)
    # OpenMP's default, then ours: passive, which libgomp reports as a spin count of 0.
    assert openmp_spin_counts(proc.stderr) == ["300000", "0"], proc.stderr
    assert "cpu: 1 torch threads of" in proc.stderr and "OMP_WAIT_POLICY=passive (xsagpt's default)" in proc.stderr
    # The user's choice stands, and commands that do no tensor work start once, as they are.
    for extra, expected in (({"GOMP_SPINCOUNT": "300000"}, ["300000"]),
                            ({"OMP_WAIT_POLICY": "active"}, ["30000000000"])):
        proc = xsagpt("train", "-c", cfg, "--overwrite", env={**env, **extra})
        assert openmp_spin_counts(proc.stderr) == expected, proc.stderr
        assert f"{next(iter(extra))}={next(iter(extra.values()))}" in proc.stderr
    assert openmp_spin_counts(xsagpt("info", "-c", "tiny", env=env).stderr) == ["300000"]


def test_memory_options_do_not_change_training(tmp_path, shards, xsagpt):
    cfg = run_config(tmp_path, shards, max_steps=6)
    xsagpt("train", "-c", cfg, "--out", tmp_path / "plain")
    xsagpt("train", "-c", cfg, "--out", tmp_path / "lean", "--set", "train.activation_checkpointing=block",
           "--set", "train.loss_chunk=48")
    plain, lean = metrics(tmp_path / "plain"), metrics(tmp_path / "lean")
    assert plain.keys() == lean.keys() and all(abs(plain[s] - lean[s]) < 1e-4 for s in plain)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_run_follows_the_cpu_run(tmp_path, shards, xsagpt):
    """The same run in float32 on the GPU (TF32 matmuls, other reduction orders) and on the
    CPU: same initial weights and data, so the losses agree to well within 1%."""
    cfg = run_config(tmp_path, shards, max_steps=6)
    xsagpt("train", "-c", cfg, "--out", tmp_path / "cpu")
    xsagpt("train", "-c", cfg, "--out", tmp_path / "gpu", "--set", "train.device=cuda",
           "--set", "train.precision=fp32")
    for kind in ("train_loss", "val_loss"):
        cpu, gpu = metrics(tmp_path / "cpu", kind), metrics(tmp_path / "gpu", kind)
        assert cpu.keys() == gpu.keys() and all(abs(cpu[s] - gpu[s]) < 0.02 for s in cpu), (kind, cpu, gpu)
    assert metrics(tmp_path / "cpu")[6] < metrics(tmp_path / "cpu")[1] - 0.1  # it learned: not two idle runs


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
    assert metrics(out) == metrics(tmp_path / "straight")
    assert metrics(out, "val_loss") == metrics(tmp_path / "straight", "val_loss")


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
    assert metrics(out) == metrics(tmp_path / "straight")


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


@pytest.mark.parametrize("override,message", [
    ("train.lr=-1", "train.lr: must be > 0"),
    ("train.seq_len=100", "train.seq_len: must be in 1..64"),
    ("train.batch_tokens=100", "train.batch_tokens: must be 0 or a multiple"),
    ("train.warmup=5", "unknown key 'warmup'"),
    ("model.attention=local", "model.attention"),
    ("train.max_steps=ten", "train.max_steps: expected an integer"),
    ("train.kernels=triton", "train.kernels"),
    ("train.kernels=rope,xla", 'unknown kernel "xla"'),
    ("train.device=gpu", 'train.device: expected "auto", "cpu", "cuda" or "cuda:N"'),
    ("train.device=cuda:99", "train.device"),  # no CUDA, or no GPU 99: refused either way
])
def test_bad_config_exits_nonzero_naming_the_key(tmp_path, shards, xsagpt, override, message):
    cfg = run_config(tmp_path, shards)
    proc = xsagpt("train", "-c", cfg, "--set", override, check=False)
    assert proc.returncode == 2
    assert message in proc.stderr + proc.stdout
    assert not (tmp_path / "run").exists(), "nothing may be created before the config is valid"


def test_bad_data_files_are_named(tmp_path, shards, xsagpt):
    cfg = run_config(tmp_path, shards)
    proc = xsagpt("train", "-c", cfg, "--set", f"data.train={tmp_path}/nothing_*.bin", check=False)
    assert proc.returncode != 0 and "nothing_*.bin" in proc.stderr + proc.stdout


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


@pytest.mark.parametrize("attention", ["sa", "xsa"])
def test_tiny_model_learns_real_text(tmp_path, kjv_shards, xsagpt, repo_root, attention):
    xsagpt("train", "-c", repo_root / "configs" / "runs" / "cpu-demo-sa.json", "--out", tmp_path / attention,
           "--set", f"model.attention={attention}", "--set", "model.d_model=64", "--set", "model.n_layer=2",
           "--set", "train.max_steps=60", "--set", "train.seq_len=64", "--set", "train.micro_batch=8", "--set", "train.eval_interval=60",
           "--set", "train.eval_tokens=4096", "--set", "train.warmup_steps=10", "--set", "train.device=cpu")
    val = metrics(tmp_path / attention, "val_loss")
    assert abs(val[0] - math.log(50304)) < 0.3  # starts at chance
    assert val[60] < val[0] - 3.0, val  # and learns
