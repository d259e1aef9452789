"""scripts/eval/load_export.py reads an export's conventions through one checker that names
the key it reads, and checks every tensor's shape against them when it loads, naming the
tensor, before any forward. The exports here are made in memory, without training:
export.py's conventions for a model config, and the PyTorch reference model's parameters
for that config (randomised, under the names export.py writes), which the loader must
reproduce before any of them is damaged."""
import copy
import json

import pytest
import torch

pytest.importorskip("safetensors")

import export  # noqa: E402  scripts/eval/export.py
from load_export import ExportedGPT, load_export  # noqa: E402
from reference.model import GPT, GPTConfig  # noqa: E402

BASE = dict(vocab_size=64, block_size=16, n_layer=2, d_model=24, n_head=2, head_dim=8)
MODELS = {
    "gated-headwise": {"attention": "gated"},
    "gated-elementwise": {"attention": "gated", "out_gate": "elementwise", "n_sink": 1},
    "xsa-last1-gate": {"attention": "xsa", "xsa_layers": "last 1", "xsa_gate": "sa", "bias": True},
    "xsa_token": {"attention": "xsa_token"},
}


def made(name: str):
    """(conventions, weights, reference model) of MODELS[name]."""
    cfg = {**BASE, **MODELS[name]}
    torch.manual_seed(0)
    ref = GPT(GPTConfig.from_dict(cfg)).eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(0.3 * torch.randn_like(p))
    return export.conventions(cfg), {k: p.detach().clone() for k, p in ref.named_parameters()}, ref


@pytest.mark.parametrize("name", MODELS)
def test_an_export_made_here_loads_as_the_reference(name):
    conv, weights, ref = made(name)
    idx = torch.randint(0, BASE["vocab_size"], (2, 12))
    with torch.no_grad():
        want, _ = ref(idx)
        got = ExportedGPT(conv, weights)(idx)
    assert want.abs().max() > 0.1 and (got - want).abs().max() < 1e-4 * want.abs().max()


@pytest.mark.parametrize("section, name", [("out_gate", "gated-headwise"), ("xsa", "xsa-last1-gate")])
@pytest.mark.parametrize("layers", [[7], "all", [1, 1], [0.5], None])
def test_a_bad_layers_convention_is_refused_as_its_own_key(section, name, layers):
    conv, weights, _ = made(name)
    conv[section]["layers"] = layers
    # Before: out_gate's [7] was reported as conventions.xsa.layers, "all" ended in a
    # TypeError, and [1, 1] loaded.
    with pytest.raises(ValueError) as e:
        ExportedGPT(conv, weights)
    assert str(e.value).startswith(f"conventions.{section}.layers = {layers!r}: expected a list of distinct layer "
                                   "indices in 0..1 (the weights hold 2 layers)"), e.value


def test_a_headwise_export_relabelled_elementwise_is_refused_naming_the_tensor():
    conv, weights, _ = made("gated-headwise")
    assert conv["out_gate"]["width"] == "headwise"
    conv["out_gate"]["width"] = "elementwise"
    # Before: it loaded and scored as the headwise model it is, without a word.
    with pytest.raises(ValueError, match=r"^parameter transformer\.h\.0\.attn\.out_gate has shape \[2, 24\], the "
                                         r"model of these conventions expects \[16, 24\]"):
        ExportedGPT(conv, weights)


@pytest.mark.parametrize("name, tensor, shape", [
    ("gated-elementwise", "transformer.h.1.attn.out_gate", (2, 24)),
    ("gated-elementwise", "transformer.sink", (2, 24)),
    ("xsa-last1-gate", "transformer.h.1.attn.xsa_gate", (3,)),
    ("xsa-last1-gate", "transformer.h.0.attn.c_attn.bias", (47,)),
    ("xsa_token", "transformer.h.0.attn.xsa_token_gate", (24, 2)),
    ("xsa_token", "transformer.h.1.mlp.c_fc.weight", (24, 96)),
    ("xsa_token", "lm_head.weight", (64, 23)),
])
def test_every_tensor_shape_is_checked_when_loading(name, tensor, shape):
    conv, weights, _ = made(name)
    assert weights[tensor].shape != shape
    weights[tensor] = torch.zeros(shape)
    # Before: loaded; the first forward failed in a matmul naming no tensor, or broadcast.
    with pytest.raises(ValueError, match=rf"^parameter {tensor} has shape {list(shape)}".replace("[", r"\[")):
        ExportedGPT(conv, weights)


@pytest.mark.parametrize("damage, message", [
    (lambda c: c["rope"].pop("theta"), "conventions.rope.theta: missing (conventions.rope has no 'theta')"),
    (lambda c: c.pop("out_gate"), "weights the model of these conventions has no parameter for: "
                                      "transformer.h.0.attn.out_gate"),
    (lambda c: c["attention"].update(n_head="2"), "conventions.attention.n_head = '2': expected an integer >= 1"),
    (lambda c: c["out_gate"].update(width="channel"), "conventions.out_gate.width = 'channel': expected 'headwise' "
                                                      "or 'elementwise'"),
    (lambda c: c["xsa"].update(gate="on"), "conventions.xsa.gate = 'on': expected 'off' or 'sa' or 'xsa' or 'token'"),
])
def test_each_convention_is_read_by_its_name(damage, message):
    conv, weights, _ = made("gated-headwise")
    damage(conv)
    with pytest.raises(ValueError) as e:
        ExportedGPT(conv, weights)
    assert str(e.value).startswith(message), e.value


def test_load_export_reads_the_files_through_the_same_checks(tmp_path):
    from safetensors.torch import save_file
    conv, weights, _ = made("gated-headwise")
    conv["out_gate"]["layers"] = "all"
    save_file(weights, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(json.dumps({"format": "xsagpt-safetensors", "conventions": conv}))
    with pytest.raises(ValueError, match=r"^conventions\.out_gate\.layers = 'all': expected a list"):
        load_export(tmp_path)
    conv = copy.deepcopy(conv)
    conv["out_gate"]["layers"] = [0, 1]
    (tmp_path / "config.json").write_text(json.dumps({"format": "xsagpt-safetensors", "conventions": conv}))
    assert load_export(tmp_path).c.out_layers == [0, 1]
