"""The two-rank CPU runs of this folder's tests: their run config, the environment and
the torchrun command line of a Gloo worker, running a command to completion, and a
checkpoint's weights."""
import os
import pathlib
import subprocess
import sys

import torch

from tinyrun import write_run_config

TIMEOUT = 180


def write_config(path, shards, **train):
    # 16 sequences per optimizer step: 2 ranks x 4 x 2 micro-batches, or 1 x 8 x 2.
    # Float32 sums in another order differ in the last bits, and Adam turns that
    # into a difference of up to ~lr/500 where a gradient element is near zero:
    # lr 1e-3 keeps one process and two within 1e-5.
    return write_run_config(path, shards, model={"dropout": 0.0}, **{
        "lr": 1e-3, "max_steps": 6, "batch_tokens": 16 * 32, "eval_interval": 3, "ckpt_interval": 3, **train})


def weights(ckpt):
    return torch.load(ckpt, weights_only=True)["model"]


def worker_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "TORCHELASTIC_")) and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE",
                                                                          "MASTER_ADDR", "MASTER_PORT")}
    # CPU ranks on Gloo also where there are GPUs (NCCL would want one GPU per rank).
    env.update({"OMP_NUM_THREADS": "1", "XSAGPT_DIST_TIMEOUT": "30", "XSAGPT_DIST_BACKEND": "gloo", **extra})
    return env


def torchrun(build_dir, *args, nproc=2):
    torchrun_bin = pathlib.Path(sys.executable).parent / "torchrun"
    return [str(torchrun_bin), "--standalone", f"--nproc-per-node={nproc}", "--no-python",
            str(build_dir / "xsagpt"), "train", *map(str, args)]


def run(cmd, env=None, **kw):
    """Runs cmd in worker_env, updated with `env`; returns its output, failing on a non-zero exit."""
    cmd = [str(c) for c in cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=worker_env(**(env or {})), timeout=TIMEOUT, **kw)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr
