"""The tiny CPU training run the Python tests start, in one place: its run config
(a 2-layer model over a 256-token vocabulary, 32-token sequences, one thread on the
CPU on any machine, so runs compare bit for bit) with each test's overrides, and the
losses its metrics.jsonl holds."""
import json
import pathlib
import time

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
