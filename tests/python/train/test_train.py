"""End-to-end tests of `xsagpt train` with the real binary: determinism (also with
torch's AdamW), the attention kernel the log names, an attention kind without a fused
kernel under train.kernels=fused, OpenMP threads that sleep at once,
memory options that change nothing, a CUDA run that follows the CPU run, and learning
on the offline real-text corpus. Stopping and resuming are in run/, bad configs in
config/, bad shards in data/."""
import json
import math
import os

import pytest
import torch

from tinyrun import metrics, run_config


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


def test_a_kind_no_fused_kernel_serves_trains_under_fused_and_says_so(tmp_path, shards, xsagpt):
    """train.kernels=fused with an attention kind whose row names no kernel: not refused,
    its step runs as ATen ops and the log says so (docs/kernels.md); XSA's kernel serves XSA."""
    gated = run_config(tmp_path, shards, max_steps=1, kernels="fused", model={"attention": "gated"})
    proc = xsagpt("train", "-c", gated, "--out", tmp_path / "gated")
    assert 'kernels: attention "gated" has no fused kernel: its step runs as ATen ops' in proc.stderr
    xsa = run_config(tmp_path, shards, max_steps=1, kernels="fused")  # tinyrun's model is XSA
    assert "has no fused kernel" not in xsagpt("train", "-c", xsa, "--out", tmp_path / "xsa").stderr


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


@pytest.mark.parametrize("attention", ["sa", "xsa"])
def test_tiny_model_learns_real_text(tmp_path, kjv_shards, xsagpt, repo_root, attention):
    xsagpt("train", "-c", repo_root / "configs" / "runs" / "cpu-demo-sa.json", "--out", tmp_path / attention,
           "--set", f"model.attention={attention}", "--set", "model.d_model=64", "--set", "model.n_layer=2",
           "--set", "train.max_steps=60", "--set", "train.seq_len=64", "--set", "train.micro_batch=4", "--set", "train.eval_interval=60",
           "--set", "train.eval_tokens=4096", "--set", "train.warmup_steps=10", "--set", "train.device=cpu")
    val = metrics(tmp_path / attention, "val_loss")
    assert abs(val[0] - math.log(50304)) < 0.3  # starts at chance
    # and learns: 60 steps of 256 tokens take SA and XSA 4.3-4.4 nats down, so 3 leaves a margin
    assert val[60] < val[0] - 3.0, val


# ---- two trainers, one new run directory ----------------------------------------------


# ---- validation shards: fingerprinted, and read only within their size ------------------


# ---- damaged metrics lines are kept and reported on resume ------------------------------


# ---- what configs and options can hold --------------------------------------------------


# ---- docs/training.md's table of what a resume accepts ------------------------------------
