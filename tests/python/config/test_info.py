"""`xsagpt info`: parameter counts match the PyTorch reference model, FLOPs a hand count
(every attention kind's, by the kind checklist's cases), and the memory estimate responds
to the memory options the trainer runs with."""
import collections
import json
import pathlib
import re

import pytest
import torch

import kind_flops
from kind_checklist import info_cases, own_keys, row, shipped, step_layers
from reference.model import GPT, GPTConfig


def info(xsagpt, *args):
    return json.loads(xsagpt("info", "--json", *args).stdout)


def test_parameter_count_equals_reference_model(xsagpt, repo_root):
    d = json.loads((repo_root / "configs" / "model" / "gpt2-124m.json").read_text())
    with torch.device("meta"):
        ref = GPT(GPTConfig.from_dict(d, "gpt2-124m"))
    assert info(xsagpt, "-c", "gpt2-124m")["params_total"] == sum(p.numel() for p in ref.parameters())


def test_memory_options_shrink_the_estimate(xsagpt):
    base = ["-c", "paper-1.4b", "-b", "8", "-t", "2048"]
    none = info(xsagpt, *base)
    block = info(xsagpt, *base, "--recompute", "block", "--loss-chunk", "4096")
    assert block["recompute"] == "block" and block["loss_chunk"] == 4096
    n, b = none["memory_bytes"], block["memory_bytes"]
    for k in ("params", "grads", "optimizer"):
        assert n[k] == b[k]
    assert b["activations"] < n["activations"] / 8 and b["logits"] == n["logits"] / 4
    assert b["total"] < 0.5 * n["total"]
    sharded = info(xsagpt, *base, "--optimizer-shards", "8")["memory_bytes"]
    assert sharded["optimizer"] == n["optimizer"] / 8 and sharded["params"] == n["params"]


def test_muon_state_is_counted(xsagpt, repo_root):
    """Muon keeps one float32 momentum per weight of the block matrices, AdamW two moments
    for every other parameter; the block matrices counted in the PyTorch reference model."""
    d = json.loads((repo_root / "configs" / "model" / "gpt2-124m.json").read_text())
    with torch.device("meta"):
        ref = GPT(GPTConfig.from_dict(d, "gpt2-124m"))
    params = dict(ref.named_parameters())
    block = re.compile(r"transformer\.h\.\d+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight")
    muon = sum(p.numel() for n, p in params.items() if block.fullmatch(n))
    total = sum(p.numel() for p in params.values())
    assert 0 < muon < total
    got = info(xsagpt, "-c", "gpt2-124m", "--optimizer", "muon")
    assert got["optimizer"] == "muon"
    assert got["memory_bytes"]["optimizer"] == 8 * (total - muon) + 4 * muon
    assert info(xsagpt, "-c", "gpt2-124m")["memory_bytes"]["optimizer"] == 8 * total
    # The step's Newton-Schulz work, sized as on a GPU (bf16): the largest group of
    # same-shape matrices (c_attn is q, k and v to Muon), each (r, c) with r <= c,
    # held as the stack and two iterates plus two r x r products.
    groups = collections.Counter()
    for n, p in params.items():
        if block.fullmatch(n):
            rows, cols = p.shape[0] // (3 if "c_attn" in n else 1), p.shape[1]
            groups[(min(rows, cols), max(rows, cols))] += 3 if "c_attn" in n else 1
    work = max(2 * k * (3 * r * c + 2 * r * r) for (r, c), k in groups.items())
    assert len(groups) == 2 and got["memory_bytes"]["optimizer_step"] == work
    assert info(xsagpt, "-c", "gpt2-124m")["memory_bytes"]["optimizer_step"] == 0


@pytest.mark.parametrize("args,message", [
    (["--recompute", "attn"], "--recompute"),
    (["--loss-chunk", "-5"], "--loss-chunk"),
    (["--optimizer-shards", "0"], "--optimizer-shards"),
    (["--optimizer", "sgd"], "--optimizer"),
    (["--optimizer", "muon", "--optimizer-shards", "2"], "not supported with train.optimizer=muon"),
    (["--seq-len", "99999"], "--seq-len"),
])
def test_bad_options_are_named(xsagpt, args, message):
    proc = xsagpt("info", "-c", "tiny", *args, check=False)
    assert proc.returncode == 2 and message in proc.stderr


def test_set_overrides_the_model_as_train_does(xsagpt, tmp_path):
    """--set model.KEY=VALUE: what a config file with that value would give (its own
    parser, so a key means here what it means to train), e.g. the 16384-token points of
    the sequence-length sweep, which paper-1.4b's block_size of 2048 refuses."""
    assert xsagpt("info", "-c", "paper-1.4b", "-t", "16384", check=False).returncode == 2
    got = info(xsagpt, "-c", "paper-1.4b", "--set", "model.block_size=16384", "--set", "model.attention=xsa",
               "-t", "16384")
    edited = json.loads((pathlib.Path(__file__).resolve().parents[3] / "configs/model/paper-1.4b.json").read_text())
    edited.update(block_size=16384, attention="xsa")
    (tmp_path / "long.json").write_text(json.dumps(edited))
    want = info(xsagpt, "-c", tmp_path / "long.json", "-t", "16384")
    assert got == {**want, "config": got["config"]} and got["config"] == want["config"]
    assert got["config"]["block_size"] == 16384 and got["seq_len"] == 16384
    # Memory grows with the context it now allows (activations scale with T).
    short = info(xsagpt, "-c", "paper-1.4b", "-t", "2048")
    assert got["memory_bytes"]["activations"] > 4 * short["memory_bytes"]["activations"]
    for args, message in ((["--set", "model.foo=1"], "unknown key 'foo'"),
                          (["--set", "model.n_head=0"], "--set model.n_head"),
                          (["--set", "train.lr=1"], "info takes model.* keys")):
        proc = xsagpt("info", "-c", "tiny", *args, check=False)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)


@pytest.mark.parametrize("args,message", [
    (["--kernels", "gelu"], 'so it needs model.gelu="tanh", but model.gelu is "exact"; leave gelu out of --kernels'),
    (["--set", "model.gelu=tanh", "--kernels", "gelu,fp8"], "--kernels: gelu and fp8 both replace the MLP's GEMMs"),
    (["--set", "model.d_model=120", "--kernels", "fp8"],
     "--kernels: fp8 on CUDA needs the blocks' linear layers to have dimensions (d_model, inner_dim, 3 x inner_dim, "
     "the MLP's hidden size) that are multiples of 16 (cuBLASLt's FP8 GEMM), but one is 120"),
])
def test_what_train_refuses_info_refuses_in_its_words(xsagpt, args, message):
    """info estimates a run as a GPU runs it and asks train's own check (train/run_check.h)."""
    proc = xsagpt("info", "-c", "tiny", *args, check=False)
    # Before: exit 0 and an estimate for each, as if the run could start.
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert proc.stdout == ""


def test_kernels_a_model_can_run_get_an_estimate(xsagpt):
    assert info(xsagpt, "-c", "tiny", "--set", "model.gelu=tanh", "--kernels", "gelu")["kernels"] == "gelu"
    assert info(xsagpt, "-c", "tiny", "--set", "model.d_model=128", "--kernels", "fp8")["kernels"] == "fp8"


INFO_CASES = info_cases()  # every kind `xsagpt config --json` lists, by the kind checklist's cases


def info_args(sets: dict) -> list[str]:
    return [a for k, v in sets.items() for a in ("--set", f"model.{k}={v}")]


@pytest.mark.parametrize("kind, sets", INFO_CASES.values(), ids=INFO_CASES)
def test_each_kinds_parameter_count_equals_reference_model(xsagpt, kind, sets):
    """An attention kind's parameters, set with --set (its own options among them), are
    counted as the PyTorch reference model holds them; its keys on another kind are refused."""
    got = info(xsagpt, "-c", "tiny", *info_args(sets))
    assert all(got["config"][k] == v for k, v in sets.items())
    plain = info(xsagpt, "-c", "tiny", "--set", "model.attention=sa")
    with torch.device("meta"):
        ref = dict(GPT(GPTConfig.from_dict(got["config"], "tiny")).named_parameters())
        sa = dict(GPT(GPTConfig.from_dict(plain["config"], "tiny")).named_parameters())
    assert got["params_total"] == sum(p.numel() for p in ref.values())
    # The count says something where the kind has parameters of its own: more than SA's.
    assert (got["params_total"] > plain["params_total"]) == bool(set(ref) - set(sa)), kind
    own = [k for k in sets if k != "attention"]
    if own:
        other = next(r["name"] for r in shipped() if own[0] not in own_keys(r))
        proc = xsagpt("info", "-c", "tiny", *info_args({"attention": other, own[0]: sets[own[0]]}), check=False)
        assert proc.returncode != 0 and f"model.{own[0]}: a key of attention=" in proc.stderr


@pytest.mark.parametrize("kind, sets", INFO_CASES.values(), ids=INFO_CASES)
def test_each_kinds_flops_equal_the_hand_count(xsagpt, kind, sets):
    """`xsagpt info`'s FLOPs per token against kind_flops' hand count: SA's products
    plus the kind's own in each layer that takes its step (the rows' flops hooks count
    them, src/model/attention_kinds.cpp)."""
    got = info(xsagpt, "-c", "tiny", *info_args(sets), "-t", "64")
    sa = info(xsagpt, "-c", "tiny", "--set", "model.attention=sa", "-t", "64")
    assert got["seq_len"] == 64 and got["config"]["n_layer"] == 4
    assert sa["flops_per_token"] == kind_flops.sa_flops(kind_flops.Model.from_config(sa["config"]), 64) > 0
    hand = kind_flops.flops_per_token(kind, got["config"], 64, step_layers(row(kind), got["config"]))
    own = hand - sa["flops_per_token"]
    assert own >= 0 and (own > 0) == (kind_flops.STEP_MATMUL[kind](kind_flops.Model.from_config(got["config"])) > 0)
    assert got["flops_per_token"] == hand, (kind, own)
