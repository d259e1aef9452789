"""train.optimizer=muon against torch.optim: the C++ steps (xsagpt_muon_steps, float64)
replayed by torch.optim.Muon on the block matrices and torch.optim.AdamW on the rest,
from the same weights with the same gradients, must land on the same weights; the
split between the two is checked against the names the model gives its matrices.
Then through the binary: both rates logged, the momentum in the checkpoint, and a
checkpoint of the other optimizer refused by name (exact resume after kill -9 with Muon
is in run/test_resume.py)."""
import json
import re
import subprocess
from unittest import mock

import pytest
import torch

from shardio import write_markov_shards
from tinyrun import write_run_config

# Every kind of parameter AdamW keeps: biases, an untied head, sinks, XSA gates.
MODEL = dict(vocab_size=96, block_size=32, n_layer=2, d_model=48, n_head=3, head_dim=20, attention="xsa",
             xsa_gate="sa", bias=True, tie_embeddings=False, n_sink=2)
CASES = {
    "original": ({}, dict(muon_lr=0.05, muon_weight_decay=0.1)),
    # A tied head, torch's other rate adjustment, fewer iterations, no momentum.
    "match_rms_adamw": (dict(tie_embeddings=True, n_sink=0, bias=False),
                        dict(muon_lr=0.01, muon_adjust_lr="match_rms_adamw", muon_ns_steps=3, muon_momentum=0.0)),
}
TRAIN = dict(optimizer="muon", lr=1e-2, warmup_steps=2, max_steps=5, min_lr_ratio=0.1, weight_decay=0.1,
             beta1=0.9, beta2=0.95, eps=1e-8, muon_momentum=0.95, muon_ns_steps=5, seed=7)

# Independent of src/: the block matrices as the model names them.
BLOCK_MATRIX = re.compile(r"transformer\.h\.\d+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight")


@pytest.fixture(scope="module")
def muon_steps(build_dir, tmp_path_factory):
    """case -> the dump of xsagpt_muon_steps (run once per case)."""
    tool = build_dir / "xsagpt_muon_steps"
    if not tool.exists():
        pytest.fail(f"{tool} not built: cmake --build {build_dir} --target xsagpt_muon_steps")
    cache = {}

    def get(case):
        if case not in cache:
            cache[case] = run_muon_steps(tool, tmp_path_factory.mktemp(case), case)
        return cache[case]
    return get


def run_muon_steps(tool, tmp_path, case):
    model, train = CASES[case]
    (tmp_path / "model.json").write_text(json.dumps({**MODEL, **model}))
    (tmp_path / "train.json").write_text(json.dumps({**TRAIN, **train}))
    out = tmp_path / "steps.pt"
    proc = subprocess.run([str(tool), str(tmp_path / "model.json"), str(tmp_path / "train.json"), str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return torch.load(out, weights_only=True)


def replay_with_torch_optim(dump):
    """The same steps with torch.optim.Muon + torch.optim.AdamW; returns the final weights."""
    t = dump["train"]
    init = dump["initial"]
    muon_names = [n for n in init if BLOCK_MATRIX.fullmatch(n)]
    # The fused q/k/v matrix is three matrices to Muon, as separate projections would be.
    pieces = {n: (3 if n.endswith("c_attn.weight") else 1) for n in muon_names}
    muon_params = {n: [w.clone().requires_grad_() for w in init[n].chunk(k, 0)] for n, k in pieces.items()}
    adamw_params = {n: w.clone().requires_grad_() for n, w in init.items() if n not in pieces}
    muon = torch.optim.Muon([p for ps in muon_params.values() for p in ps], lr=t["muon_lr"],
                            weight_decay=t["muon_weight_decay"], momentum=t["muon_momentum"], nesterov=True,
                            ns_steps=t["muon_ns_steps"], adjust_lr_fn=t["muon_adjust_lr"])
    decay = [p for p in adamw_params.values() if p.dim() >= 2]
    no_decay = [p for p in adamw_params.values() if p.dim() < 2]
    adamw = torch.optim.AdamW([{"params": decay, "weight_decay": t["weight_decay"]},
                               {"params": no_decay, "weight_decay": 0.0}],
                              lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"])
    casts = []

    def no_bf16(self):  # torch's Newton-Schulz casts to bf16; the comparison runs it in float64
        casts.append(self.dtype)
        return self.clone()

    for step, lr in enumerate(dump["lrs"]):
        for n, ps in muon_params.items():
            for p, g in zip(ps, dump["grads"][f"{step}/{n}"].chunk(len(ps), 0)):
                p.grad = g.clone()
        for n, p in adamw_params.items():
            p.grad = dump["grads"][f"{step}/{n}"].clone()
        for g in adamw.param_groups:
            g["lr"] = lr
        for g in muon.param_groups:
            g["lr"] = lr * t["muon_lr"] / t["lr"]
        with mock.patch.object(torch.Tensor, "bfloat16", no_bf16):
            muon.step()
        adamw.step()
    assert casts and set(casts) == {torch.float64}, "torch.optim.Muon did not run its Newton-Schulz step"
    final = {n: p.detach() for n, p in adamw_params.items()}
    final.update({n: torch.cat([p.detach() for p in ps]) for n, ps in muon_params.items()})
    return final


@pytest.mark.parametrize("case", list(CASES))
def test_cpp_muon_and_adamw_match_torch_optim(muon_steps, case):
    dump = muon_steps(case)
    assert len(dump["lrs"]) == 5 and dump["initial"]["transformer.wte.weight"].dtype == torch.float64
    expected = dump["final"]
    reference = replay_with_torch_optim(dump)
    assert reference.keys() == expected.keys() == dump["initial"].keys()
    for name, w in expected.items():
        moved = (w - dump["initial"][name]).abs().max().item()
        assert moved > 1e-4, f"{name} barely moved ({moved:.2e}): the comparison would be trivial"
        err = (w - reference[name]).abs().max().item()
        assert err <= 1e-6, f"{name}: C++ and torch.optim differ by {err:.3g} after 5 steps"


@pytest.mark.parametrize("case", list(CASES))
def test_muon_takes_exactly_the_block_matrices(muon_steps, case):
    """Every attention q/k/v/o and MLP matrix goes to Muon; the embedding, the head,
    sinks, gates, norms and biases stay with AdamW."""
    dump = muon_steps(case)
    names = set(dump["initial"])
    expected = {n for n in names if BLOCK_MATRIX.fullmatch(n)}
    assert len(expected) == 4 * MODEL["n_layer"]
    assert set(dump["muon"]) == expected
    assert "transformer.wte.weight" in names and not expected & {"transformer.wte.weight", "lm_head.weight"}


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return write_markov_shards(tmp_path_factory.mktemp("muon_shards"), {
        "val_000000.bin": 4096, "train_000001.bin": 20000, "train_000002.bin": 15000}, seed=3)


def test_muon_run_logs_both_rates_and_saves_its_momentum(tmp_path, shards, xsagpt):
    """Exact resume after kill -9 with Muon: run/test_resume.py::test_resume_after_kill9_is_exact."""
    cfg = write_run_config(tmp_path / "cfg.json", shards, max_steps=8, optimizer="muon", muon_lr=0.02)
    run = xsagpt("train", "-c", cfg, "--out", tmp_path / "run")
    assert "Muon momentum" in run.stderr and "muon lr 2.00e-02" in run.stderr
    lines = [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train_lines = [l for l in lines if "train_loss" in l]
    assert len(train_lines) == 8
    assert all(abs(l["muon_lr"] - l["lr"] * 0.02 / 1e-2) < 1e-12 for l in train_lines)
    ckpt = torch.load(tmp_path / "run" / "checkpoints" / "step_00000008.pt", weights_only=True)
    assert ckpt["optimizer"]["name"] == "muon"
    momentum = ckpt["optimizer"]["momentum_buffer"]
    assert set(momentum) == {n for n in ckpt["model"] if BLOCK_MATRIX.fullmatch(n)}
    assert set(ckpt["optimizer"]["exp_avg"]) == set(ckpt["model"]) - set(momentum)
    assert all(m.abs().max() > 0 for m in momentum.values())


@pytest.mark.parametrize("saved,resumed", [("adamw", "muon"), ("muon", "adamw")])
def test_checkpoint_of_the_other_optimizer_is_refused_by_name(tmp_path, shards, xsagpt, saved, resumed):
    cfg = write_run_config(tmp_path / "cfg.json", shards, max_steps=4, optimizer=saved)
    xsagpt("train", "-c", cfg, "--out", tmp_path / "run")
    before = (tmp_path / "run" / "metrics.jsonl").read_text()
    proc = xsagpt("train", "-c", cfg, "--out", tmp_path / "run", "--resume", "auto", "--set", "train.max_steps=8",
                  "--set", f"train.optimizer={resumed}", check=False)
    assert proc.returncode == 2, proc.stderr
    assert (f"holds the state of train.optimizer={saved} but this run has train.optimizer={resumed}"
            in proc.stderr), proc.stderr
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == before  # nothing lost
