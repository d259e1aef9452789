"""What training logs at each evaluation beside the val loss (src/train/eval_diagnostics.h):
the similarity bias cos(y_i, v_i) of every layer, recomputed here for each checkpoint with
the PyTorch reference model (scripts/bench/reference) on the same sequences and positions,
and the XSA gates, which must be the checkpoint's own tanh(alpha) at that step."""
import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from reference.model import GPT, apply_rope
from shardio import read_shard
from tinyrun import write_run_config

STEPS, EVERY, SEQ, SEQUENCES, POSITIONS = 12, 4, 32, 3, 24
MODEL = {"attention": "xsa", "xsa_gate": "sa", "n_layer": 3}


@pytest.fixture(scope="module")
def run(tmp_path_factory, shards, xsagpt):
    """A gated XSA run of 3 layers with a checkpoint at every evaluation."""
    d = tmp_path_factory.mktemp("diag")
    cfg = write_run_config(d / "cfg.json", shards, d / "run", MODEL, max_steps=STEPS, eval_interval=EVERY,
                           ckpt_interval=EVERY, keep_checkpoints=10, seq_len=SEQ,
                           eval_similarity_sequences=SEQUENCES, eval_similarity_positions=POSITIONS)
    xsagpt("train", "-c", cfg)
    return d / "run"


def val_lines(run):
    lines = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    return {l["step"]: l for l in lines if "val_loss" in l}


def checkpoint(run, step):
    return torch.load(run / "checkpoints" / f"step_{step:08d}.pt", weights_only=True)


def pre_projection(model, idx):
    """Per layer, y (the attention output before XSA's step) and v, (B, H, T, D) in float64, from
    the reference model's own q, k, v projections, captured on the way through its forward."""
    out = []

    def hook(attn):
        def f(_module, args, _output):
            x, cos, sin = args
            B, T, _ = x.shape
            q, k, v = (t.view(B, T, attn.n_head, attn.head_dim).transpose(1, 2)
                       for t in attn.c_attn(x).split(attn.inner, dim=-1))
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            out.append((y, v))
        return f

    handles = [b.attn.register_forward_hook(hook(b.attn)) for b in model.transformer.h]
    with torch.no_grad():
        model(idx)
    for h in handles:
        h.remove()
    return out


def mean_cos(y, v):
    return F.cosine_similarity(y, v, dim=-1).mean().item()


def test_logged_similarity_bias_is_the_reference_models(run, shards):
    lines = val_lines(run)
    assert sorted(lines) == list(range(0, STEPS + 1, EVERY))
    # The sequences the trainer measures: the first ones of its first val batch, cut to their first tokens.
    toks = read_shard(shards / "val_000000.bin").astype(np.int64)
    idx = torch.from_numpy(np.stack([toks[i * SEQ:i * SEQ + POSITIONS] for i in range(SEQUENCES)]))
    for step in range(EVERY, STEPS + 1, EVERY):
        logged = lines[step]["cos_y_v"]
        assert len(logged) == MODEL["n_layer"] and all(isinstance(c, float) for c in logged)
        model = GPT.from_checkpoint_dict(checkpoint(run, step), dtype=torch.float64).eval()
        yv = pre_projection(model, idx)
        ref = [mean_cos(y, v) for y, v in yv]
        assert logged == pytest.approx(ref, abs=1e-4), step
        # Non-trivial: y and v taken from any other layer (or y from one layer and v from another)
        # give figures at least twice the tolerance away, so a layer mix-up would fail the check above.
        for i in range(len(yv)):
            for j in range(len(yv)):
                for k in range(len(yv)):
                    if (j, k) != (i, i):
                        assert abs(ref[i] - mean_cos(yv[j][0], yv[k][1])) > 2e-4, (step, i, j, k)


def test_logged_gates_are_the_checkpoints(run):
    lines = val_lines(run)
    # At initialisation every head of a gate that starts as SA is 0.
    for g in lines[0]["xsa_gate"]:
        assert g["heads"] == [0.0, 0.0] and (g["mean"], g["min"], g["max"]) == (0.0, 0.0, 0.0)
    moved = 0
    for step in range(EVERY, STEPS + 1, EVERY):
        weights = checkpoint(run, step)["model"]
        gates = lines[step]["xsa_gate"]
        assert len(gates) == MODEL["n_layer"]
        for layer, g in enumerate(gates):
            want = torch.tanh(weights[f"transformer.h.{layer}.attn.xsa_gate"].double()).tolist()
            assert g["heads"] == pytest.approx(want, rel=1e-12, abs=1e-15)
            assert g["mean"] == pytest.approx(np.mean(want), rel=1e-12)
            assert (g["min"], g["max"]) == (pytest.approx(min(want)), pytest.approx(max(want)))
            moved += any(abs(x) > 1e-6 for x in want)
    assert moved, "the gates must have moved from 0 for the comparison to mean anything"


def test_off_logs_no_bias_and_an_ungated_model_no_gates(tmp_path, shards, xsagpt):
    cfg = write_run_config(tmp_path / "cfg.json", shards, tmp_path / "run", {"attention": "sa"}, max_steps=4,
                           eval_interval=4, ckpt_interval=0, eval_similarity_sequences=0)
    xsagpt("train", "-c", cfg)
    for line in val_lines(tmp_path / "run").values():
        assert "cos_y_v" not in line and "xsa_gate" not in line


@pytest.mark.parametrize("key,value,message", [
    ("eval_similarity_sequences", -1, "train.eval_similarity_sequences: must be >= 0"),
    ("eval_similarity_positions", 1, "train.eval_similarity_positions: must be >= 2"),
])
def test_bad_settings_are_named(tmp_path, shards, xsagpt, key, value, message):
    cfg = write_run_config(tmp_path / "cfg.json", shards, tmp_path / "run", max_steps=1, **{key: value})
    proc = xsagpt("train", "-c", cfg, check=False)
    assert proc.returncode == 2 and message in proc.stderr
    assert not (tmp_path / "run").exists()


def test_one_token_sequences_are_refused_while_the_bias_is_on_and_train_with_it_off(tmp_path, shards, xsagpt):
    # The bias attends over min(eval_similarity_positions, seq_len) tokens. Before: seq_len 1 passed
    # validation and, with eval_interval 0, trained every step and died at the final evaluation
    # ("analysis needs at least 2 tokens per sequence", no key) without its final checkpoint.
    cfg = write_run_config(tmp_path / "cfg.json", shards, tmp_path / "run", seq_len=1, max_steps=2, eval_interval=0,
                           ckpt_interval=0)
    proc = xsagpt("train", "-c", cfg, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "train.seq_len: 1 token per sequence" in proc.stderr
    assert "train.eval_similarity_sequences = 4" in proc.stderr and "eval_similarity_sequences=0" in proc.stderr
    assert not (tmp_path / "run").exists()
    xsagpt("train", "-c", cfg, "--set", "train.eval_similarity_sequences=0")
    assert json.loads((tmp_path / "run" / "done.json").read_text())["step"] == 2
    assert (tmp_path / "run" / "checkpoints" / "step_00000002.pt").exists()
    assert "cos_y_v" not in val_lines(tmp_path / "run")[2]


def test_a_diverged_evaluation_logs_no_similarity_rather_than_orthogonal(tmp_path, shards, xsagpt):
    # lr 1e9 without clipping: the weights go NaN within a few steps, and with a log every 4
    # steps and an evaluation every 2 the trainer evaluates the NaN model before its next log
    # stops the run. Before: val_loss was null but cos_y_v was 0.0 in every layer ("orthogonal").
    cfg = write_run_config(tmp_path / "cfg.json", shards, tmp_path / "run", MODEL, lr=1e9, grad_clip=0.0,
                           max_steps=8, log_interval=4, eval_interval=2, ckpt_interval=0, seq_len=SEQ,
                           eval_similarity_sequences=SEQUENCES, eval_similarity_positions=POSITIONS)
    proc = xsagpt("train", "-c", cfg, check=False)
    assert proc.returncode == 1 and "not finite" in proc.stderr, proc.stderr
    lines = val_lines(tmp_path / "run")
    diverged = [l for l in lines.values() if l["val_loss"] is None]
    measured = [l for l in lines.values() if l["val_loss"] is not None]
    assert diverged and measured, lines  # the case under test, and a finite one to compare with
    for l in measured:
        assert len(l["cos_y_v"]) == MODEL["n_layer"] and all(isinstance(c, float) for c in l["cos_y_v"])
    for l in diverged:
        assert l["cos_y_v"] == [None] * MODEL["n_layer"], l
