"""What the plot tests share: scripts/view/plot.py run as a program, checks that a PNG is a
real, non-blank figure, and a run directory's files (config.json, metrics.jsonl,
done.json) written as xsagpt writes them, with losses that follow a known curve."""
import importlib.util
import json
import math
import pathlib
import struct
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "view" / "plot.py"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def plot(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120)


def plot_ok(*args) -> list[pathlib.Path]:
    proc = plot(*args)
    assert proc.returncode == 0, proc.stderr
    written = [pathlib.Path(line) for line in proc.stdout.split()]
    assert written, "no paths printed"
    return written


def check_png(path: pathlib.Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, path
    assert len(data) > 20_000, f"{path}: {len(data)} bytes"
    width, height = struct.unpack(">II", data[16:24])  # IHDR
    assert 600 <= width <= 4000 and 400 <= height <= 4000, (path, width, height)
    import matplotlib.image
    pixels = matplotlib.image.imread(path)
    assert pixels[..., :3].std() > 0.05, f"{path} is (nearly) blank"


def write_run(d: pathlib.Path, attention: str, final: float, steps: int = 40, resume_at: int | None = 20,
              seed: int = 0) -> None:
    """A run of `steps` steps, val every 10; with resume_at, the process "crashed" at step 30 after
    a checkpoint at resume_at, and its successor logged resume_at+1.. again with other values."""
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({
        "model": {"n_layer": 2, "attention": attention}, "data": {"path": "x"},
        "train": {"lr": 6e-4, "seq_len": 64, "batch_tokens": 512}, "out_dir": str(d)}))

    def loss(step):
        return final + (10.8 - final) * math.exp(-step / 8)

    def train(step, noise):
        return {"step": step, "tokens": step * 512, "time_s": step * 0.1, "train_loss": loss(step) + noise,
                "lr": 6e-4, "grad_norm": 1.0, "tokens_per_s": 5120.0, "mfu": None}

    def val(step):
        return {"step": step, "tokens": step * 512, "time_s": step * 0.1, "val_loss": loss(step) + 0.05}

    lines = []
    first_end = 30 if resume_at is not None else steps
    for s in range(1, first_end + 1):
        lines.append(train(s, 0.5 + rng.normal(0, 0.1) if resume_at is not None and s > resume_at else rng.normal(0, 0.1)))
        if s % 10 == 0:
            lines.append(val(s) | ({"val_loss": 99.0} if resume_at is not None and s > resume_at else {}))
    if resume_at is not None:
        for s in range(resume_at + 1, steps + 1):
            lines.append(train(s, rng.normal(0, 0.1)))
            if s % 10 == 0:
                lines.append(val(s))
    (d / "metrics.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    (d / "done.json").write_text(json.dumps({"step": steps, "tokens": steps * 512, "final_train_loss": loss(steps),
                                             "final_val_loss": loss(steps) + 0.05, "wall_s": 4.0}))



def load_plot_module():
    """plot.py as a module, for the tests of its functions."""
    spec = importlib.util.spec_from_file_location("xsagpt_plot", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod
