"""The tiny CPU training run the Python tests start, in one place: its run config
(a 2-layer model over a 256-token vocabulary, 32-token sequences, one thread on the
CPU on any machine, so runs compare bit for bit) with each test's overrides, starting
it in the background, the losses its metrics.jsonl holds, its checkpoints' steps and a
hash of every file of its run directory; and train_tiny, the 1-layer model of any
vocabulary that sampling and export tests train for one step."""
import hashlib
import json
import pathlib
import subprocess
import time

import numpy as np

from shardio import write_shard

MODEL = {"base": "tiny", "vocab_size": 256, "block_size": 64, "n_layer": 2, "d_model": 64,
         "n_head": 2, "head_dim": 32, "attention": "xsa"}
TRAIN = {"lr": 1e-2, "warmup_steps": 2, "max_steps": 12, "seq_len": 32, "micro_batch": 4,
         "log_interval": 1, "eval_interval": 4, "eval_tokens": 512, "ckpt_interval": 4,
         "device": "cpu", "threads": 1}


def write_run_config(path: pathlib.Path, shards: pathlib.Path, out_dir=None, model=None, **train) -> pathlib.Path:
    """Writes the config to `path`: MODEL updated with `model`, TRAIN with `train`,
    data from shards/{train,val}_*.bin, and out_dir when given."""
    cfg = {"model": {**MODEL, **(model or {})},
           "data": {"train": str(shards / "train_*.bin"), "val": str(shards / "val_*.bin")},
           "train": {**TRAIN, **train}}
    if out_dir is not None:
        cfg["out_dir"] = str(out_dir)
    path.write_text(json.dumps(cfg))
    return path


def metrics(run_dir, kind="train_loss") -> dict:
    """step -> value of `kind` (train_loss, val_loss, grad_norm, ...) in run_dir/metrics.jsonl."""
    lines = [json.loads(l) for l in (pathlib.Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    return {l["step"]: l[kind] for l in lines if kind in l}


def wait_for(predicate, proc, timeout=120):
    """Polls predicate() until it holds (True) or the process `proc` ends first (False);
    kills proc and fails after `timeout` seconds."""
    t0 = time.time()
    while not predicate():
        if proc.poll() is not None:
            return False
        if time.time() - t0 > timeout:
            proc.kill()
            raise AssertionError("timed out waiting for the training run")
        time.sleep(0.01)
    return True


def run_config(tmp_path, shards, **train):
    """tinyrun's config into tmp_path/cfg_N.json (a new N each call), run dir tmp_path/run."""
    path = tmp_path / f"cfg_{len(list(tmp_path.glob('cfg_*.json')))}.json"
    return write_run_config(path, shards, tmp_path / "run", **train)


def cpu_config(tmp_path, shards, **train):
    """run_config's tiny run, on the CPU on any machine: runs are compared bit for bit."""
    return run_config(tmp_path, shards, device="cpu", **train)


def snapshot(d: pathlib.Path) -> dict:
    """Every file under d with a hash of its bytes, but .lock: the run directory's lock
    file names whichever trainer last held it (run/run_dir.h), refused ones included."""
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file() and p.name != ".lock"}


def ckpt_steps(run: pathlib.Path) -> list:
    return sorted(int(p.stem.split("_")[1]) for p in (run / "checkpoints").glob("step_*.pt"))


def start_training(build_dir, *args):
    return subprocess.Popen([build_dir / "xsagpt", "train", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def train_tiny(tmp_path, xsagpt, vocab, attention="xsa", n_sink=0):
    """A 1-layer model trained for one step on random ids; returns its run dir."""
    rng = np.random.default_rng(0)
    for name in ("train_000001.bin", "val_000000.bin"):
        write_shard(tmp_path / name, rng.integers(0, min(vocab, 50257), size=2048))
    cfg = {
        "model": {"base": "tiny", "vocab_size": vocab, "block_size": 32, "n_layer": 1, "d_model": 32,
                  "n_head": 2, "head_dim": 16, "attention": attention, "n_sink": n_sink},
        "data": {"train": str(tmp_path / "train_*.bin"), "val": str(tmp_path / "val_*.bin")},
        "train": {"max_steps": 1, "warmup_steps": 0, "seq_len": 16, "micro_batch": 2, "eval_interval": 0,
                  "eval_tokens": 64, "device": "cpu", "threads": 1},
        "out_dir": str(tmp_path / "run"),
    }
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    xsagpt("train", "-c", tmp_path / "cfg.json")
    return tmp_path / "run"
