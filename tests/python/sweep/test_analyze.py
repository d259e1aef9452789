"""`xsagpt analyze` end to end on trained checkpoints of each kind: the JSON format
plot.py reads, layer 0's numbers against an independent PyTorch computation from
the checkpoint's weights, cos(z, v) ~ 0 for XSA; and attention-sink models, which
must train and resume exactly like any other."""
import json
import math
import pathlib
import signal
import subprocess
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from shardio import write_markov_shards
from tinyrun import metrics, write_run_config

SEQ = 32


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return write_markov_shards(tmp_path_factory.mktemp("shards"), {"val_000000.bin": 4096, "train_000001.bin": 20000})


def write_config(path, shards, out_dir, model=None, **train):
    return write_run_config(path, shards, out_dir, model, **{
        "max_steps": 8, "seq_len": SEQ, "eval_interval": 0, "ckpt_interval": 0, **train})


@pytest.fixture(scope="module")
def runs(tmp_path_factory, shards, xsagpt):
    """An SA and an XSA run of 8 steps."""
    d = tmp_path_factory.mktemp("runs")
    for kind in ("sa", "xsa"):
        cfg = write_config(d / f"{kind}.json", shards, d / kind, {"attention": kind})
        xsagpt("train", "-c", cfg)
    return d


def rope(x, theta=10000.0):
    """Rotate-half RoPE over the last dim of x (B, H, L, D) at positions 0..L-1."""
    L, D = x.shape[-2], x.shape[-1]
    ang = torch.arange(L, dtype=torch.float64)[:, None] * theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    c, s = ang.cos(), ang.sin()
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def layer0_reference(ckpt, seqs):
    """The four statistics of layer 0, from the weights, in float64."""
    w, m = ckpt["model"], ckpt["config"]["model"]
    H, D, d, S = m["n_head"], m["head_dim"], m["d_model"], m.get("n_sink", 0)
    x = w["transformer.wte.weight"].double()[seqs]
    if S:
        x = torch.cat([w["transformer.sink"].double().expand(len(seqs), -1, -1), x], 1)
    ln = lambda t, name: F.layer_norm(t, (d,), w[name].double(), None, m["norm_eps"])  # noqa: E731
    h = ln(ln(x, "transformer.ln_e.weight"), "transformer.h.0.ln_1.weight")
    B, L = h.shape[:2]
    q, k, v = (h @ w["transformer.h.0.attn.c_attn.weight"].double().T).split(H * D, -1)
    q, k, v = (t.view(B, L, H, D).transpose(1, 2) for t in (q, k, v))
    q, k = rope(q, m["rope_theta"]), rope(k, m["rope_theta"])
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(D)
    a = scores.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
    y = a @ v
    z = y - (y * v).sum(-1, keepdim=True) / (v * v).sum(-1, keepdim=True) * v
    T = L - S
    vt = F.normalize(v[:, :, S:], dim=-1)
    gram = vt @ vt.transpose(-1, -2)
    return {
        "value_cos_sim": ((gram.sum((-1, -2)) - gram.diagonal(0, -2, -1).sum(-1)) / (T * (T - 1))).mean().item(),
        "attn_diag": a.diagonal(0, -2, -1)[..., S:].mean().item(),
        "cos_y_v": F.cosine_similarity(y[:, :, S:], v[:, :, S:], dim=-1).mean().item(),
        # z vanishes where y lies along v (a first token sees only itself): orthogonal by convention
        "cos_z_v": torch.where(z.norm(dim=-1) > 1e-9 * y.norm(dim=-1), F.cosine_similarity(z, v, dim=-1),
                               0.0)[:, :, S:].mean().item(),
    }


def val_sequences(shards, n):
    toks = np.fromfile(shards / "val_000000.bin", dtype="<u2", offset=1024).astype(np.int64)
    return torch.from_numpy(np.stack([toks[i * SEQ:(i + 1) * SEQ] for i in range(n)]))


# The runs train on the CPU; analyze reads their checkpoints on the CPU, and on a GPU
# where there is one (float32 matmuls there: the same figures within 1e-4).
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                reason="needs a CUDA device"))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["sa", "xsa"])
def test_analyze_matches_a_direct_computation(runs, shards, xsagpt, kind, device):
    run = runs / kind
    tol = 1e-5 if device == "cpu" else 1e-4
    proc = xsagpt("analyze", run, "--sequences", 6, "--batch", 3, "--device", device, "--threads", 1)
    data = json.loads((run / "analysis.json").read_text())
    ckpt_path = run / "checkpoints" / "step_00000008.pt"
    assert set(data) == {"attention", "variant", "description", "checkpoint", "layers"}
    # "variant" is the model's variant name, as the run's config.json names it; the words go to "description".
    assert data["variant"] == json.loads((run / "config.json").read_text())["variant"] == kind
    assert data["attention"] == kind and data["description"] == kind
    assert pathlib.Path(data["checkpoint"]) == ckpt_path
    assert [l["layer"] for l in data["layers"]] == [0, 1]
    for l in data["layers"]:
        assert set(l) == {"layer", "value_cos_sim", "attn_diag", "cos_y_v", "cos_z_v", "description"}
        assert l["description"] == kind  # every layer computes the model's attention: no xsa_layers, gate or sinks
        assert 0 < l["attn_diag"] < 1 and -1 <= l["value_cos_sim"] <= 1
        if kind == "sa":
            assert l["cos_z_v"] is None
        else:
            assert abs(l["cos_z_v"]) < tol
    ref = layer0_reference(torch.load(ckpt_path, weights_only=True), val_sequences(shards, 6))
    for key in ("value_cos_sim", "attn_diag", "cos_y_v"):
        assert data["layers"][0][key] == pytest.approx(ref[key], abs=tol), key
    if kind == "xsa":
        assert abs(ref["cos_z_v"]) < 1e-9
    # The table on stdout carries the same numbers.
    rows = [line.split() for line in proc.stdout.strip().splitlines()[1:]]
    assert [float(r[2]) for r in rows] == [round(l["attn_diag"], 4) for l in data["layers"]]


def test_analyze_output_feeds_plot(runs, xsagpt, repo_root, tmp_path):
    for kind in ("sa", "xsa"):
        xsagpt("analyze", runs / kind / "checkpoints" / "step_00000008.pt", "--sequences", 4, "--device", "cpu",
               "--threads", 1, "--out", tmp_path / f"{kind}.json")
    proc = subprocess.run([repo_root / ".venv/bin/python", repo_root / "scripts/view/plot.py", tmp_path / "sa.json",
                           tmp_path / "xsa.json", "--out", tmp_path / "plots"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "plots" / "analysis.png").stat().st_size > 0


def test_analyze_bad_input_is_named(runs, xsagpt, tmp_path):
    proc = xsagpt("analyze", runs / "sa", "--seq-len", 1000, "--device", "cpu", check=False)
    assert proc.returncode == 2 and "--seq-len" in proc.stderr
    proc = xsagpt("analyze", runs / "sa", "--device", "gpu", check=False)
    assert proc.returncode == 2 and "--device" in proc.stderr
    proc = xsagpt("analyze", tmp_path / "nothing.pt", "--device", "cpu", check=False)
    assert proc.returncode != 0 and "nothing.pt" in proc.stderr


def test_sink_model_trains_resumes_exactly_and_analyzes(tmp_path, shards, xsagpt, build_dir):
    cfg = write_config(tmp_path / "cfg.json", shards, tmp_path / "run", {"n_sink": 2}, max_steps=50,
                       ckpt_interval=20)
    xsagpt("train", "-c", cfg, "--out", tmp_path / "straight")
    losses = metrics(tmp_path / "straight")
    assert losses[50] < losses[1] - 1.0, "a sink model must learn"

    out = tmp_path / "stopped"
    proc = subprocess.Popen([build_dir / "xsagpt", "train", "-c", cfg, "--out", out], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    t0 = time.time()
    while not ((out / "metrics.jsonl").exists() and metrics(out)):
        assert proc.poll() is None, "run finished before it could be signalled"
        assert time.time() - t0 < 120
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    log, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "stopped by signal" in log, log
    assert not (out / "done.json").exists()
    xsagpt("train", "-c", cfg, "--out", out, "--resume", "auto")
    assert metrics(out) == losses

    ckpt = torch.load(out / "checkpoints" / "step_00000050.pt", weights_only=True)
    assert ckpt["model"]["transformer.sink"].shape == (2, 64)
    assert ckpt["config"]["model"]["n_sink"] == 2
    xsagpt("analyze", out, "--sequences", 4, "--device", "cpu", "--threads", 1)
    data = json.loads((out / "analysis.json").read_text())
    ref = layer0_reference(ckpt, val_sequences(shards, 4))
    for key in ("value_cos_sim", "attn_diag", "cos_y_v", "cos_z_v"):
        assert data["layers"][0][key] == pytest.approx(ref[key], abs=1e-5), key
