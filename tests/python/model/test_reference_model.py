"""The C++ model against the independent PyTorch reference (scripts/reference/model.py).

xsagpt_dump_model builds the C++ GPT from a config and seed and saves one
forward+backward pass on random tokens; the reference, loaded with the C++ weights,
must reproduce the logits, the loss and the gradient of every parameter. The
configs cover each switch of the architecture: every attention kind `xsagpt config
--json` lists, by the cases the kind checklist holds for it (tests/python/kind_checklist.py:
SA, XSA on every layer or some, its gate, output-gated attention headwise and
elementwise, the per-token XSA gate), biases, exact or tanh GELU, an untied head, inner
width != d_model, mlp_ratio != 4, and an xsa_eps large enough that the ||v|| floor is
active for some tokens.
"""
import json
import os
import subprocess

import pytest
import torch

from kind_checklist import named_cases, own_keys, row
from reference.model import GPT, GPTConfig, apply_rope, exclude_self_value, rope_tables

# Small enough for a fraction of a second per pass; n_head*head_dim = 60 != d_model.
BASE = dict(vocab_size=96, block_size=32, n_layer=2, d_model=48, n_head=3, head_dim=20, tie_embeddings=True)
B, T = 3, 24  # T < block_size: the RoPE tables are cut to the sequence

# The switches besides the kind, each on a kind that shows it.
SWITCH_CASES = {
    "bias": {"attention": "xsa", "bias": True},
    "untied_head": {"attention": "xsa", "tie_embeddings": False},
    "inner_wider": {"attention": "xsa", "d_model": 32, "n_head": 4, "head_dim": 16},
    "mlp_ratio_theta_eps": {"mlp_ratio": 2.5, "rope_theta": 500.0, "norm_eps": 1e-3},
    "xsa_eps_floor": {"attention": "xsa", "xsa_eps": 4.4},
    "sinks": {"attention": "xsa", "n_sink": 2},
    "gelu_tanh": {"attention": "xsa", "gelu": "tanh"},
    "gelu_tanh_bias": {"gelu": "tanh", "bias": True},
}
KIND_CASES = named_cases("reference")  # case name -> (kind, overrides), for every kind the binary lists
MUP_CASES = named_cases("mup")  # each kind under model.parametrization "mup" (width multiplier 3)
CASES = {**SWITCH_CASES, **{name: over for name, (_, over) in {**KIND_CASES, **MUP_CASES}.items()}}
DOUBLE_CASES = ["bias", "untied_head", "sinks", "gelu_tanh", "gelu_tanh_bias", *KIND_CASES, *MUP_CASES]
# Each kind with a step by its first case: the step must change the output.
FIRST_STEP_CASES = [next(name for name, (k, _) in KIND_CASES.items() if k == kind)
                    for kind in dict.fromkeys(k for k, _ in KIND_CASES.values()) if row(kind)["step"]]


@pytest.fixture(scope="module")
def dump_model(build_dir, tmp_path_factory):
    tool = build_dir / "xsagpt_dump_model"
    if not tool.exists():
        pytest.fail(f"{tool} not built: cmake --build {build_dir} --target xsagpt_dump_model")
    out_dir = tmp_path_factory.mktemp("dumps")

    def run(name: str, double: bool = False, seed: int = 1234) -> dict:
        cfg_path = out_dir / f"{name}.json"
        cfg_path.write_text(json.dumps({**BASE, **CASES[name]}))
        out = out_dir / f"{name}{'-f64' if double else ''}.pt"
        cmd = [tool, cfg_path, seed, B, T, out] + (["--double"] if double else [])
        proc = subprocess.run(list(map(str, cmd)), capture_output=True, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert proc.returncode == 0, proc.stderr
        return torch.load(out, weights_only=True)
    return run


def assert_close(actual, expected, rtol, what):
    """|actual - expected| within rtol of expected's largest magnitude."""
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    scale = expected.abs().max().item()
    err = (actual - expected).abs().max().item()
    assert scale > 0, f"{what}: all zero"
    assert err <= rtol * scale, f"{what}: max |diff| {err:.3g} > {rtol:g} * max |expected| {scale:.3g}"


def check_against_reference(dump: dict, rtol_out: float, rtol_grad: float):
    model = GPT.from_checkpoint_dict(dump)
    logits, loss = model(dump["idx"], dump["targets"])
    loss.backward()
    assert_close(logits.detach(), dump["logits"], rtol_out, "logits")
    assert abs(loss.item() - dump["loss"].item()) <= rtol_out * abs(dump["loss"].item()), \
        f"loss {loss.item()} != C++ {dump['loss'].item()}"
    params = dict(model.named_parameters(remove_duplicate=False))
    assert params.keys() == dump["grads"].keys()
    for name, p in params.items():
        assert_close(p.grad, dump["grads"][name], rtol_grad, f"grad of {name}")


@pytest.mark.parametrize("name", CASES)
def test_float32_matches_reference(dump_model, name):
    dump = dump_model(name)
    assert dump["logits"].dtype == torch.float32
    assert GPTConfig.from_dict(dump["config"]) == GPTConfig.from_dict({**BASE, **CASES[name]})
    check_against_reference(dump, rtol_out=2e-5, rtol_grad=2e-4)


@pytest.mark.parametrize("name", DOUBLE_CASES)
def test_float64_matches_reference_tightly(dump_model, name):
    dump = dump_model(name, double=True)
    assert dump["logits"].dtype == torch.float64
    check_against_reference(dump, rtol_out=1e-12, rtol_grad=1e-10)


def test_xsa_eps_case_exercises_the_floor(dump_model):
    """The xsa_eps_floor case only tests the max(||v||, eps) floor if some value
    vectors are shorter than eps and some longer."""
    dump = dump_model("xsa_eps_floor")
    model = GPT.from_checkpoint_dict(dump)
    tr, cfg = model.transformer, model.cfg
    with torch.no_grad():
        x = tr.h[0].ln_1(tr.ln_e(tr.wte(dump["idx"])))
        v = tr.h[0].attn.c_attn(x)[..., 2 * cfg.inner_dim:].unflatten(-1, (cfg.n_head, cfg.head_dim))
    below = (v.norm(dim=-1) < cfg.xsa_eps).float().mean().item()
    assert 0.1 < below < 0.9, f"fraction of ||v|| below xsa_eps: {below}"


def test_xsa_and_sa_differ(dump_model):
    """Guards the comparison itself: with the same seed, XSA must change the output."""
    sa, xsa = dump_model("sa"), dump_model("xsa")
    assert torch.equal(sa["model"]["transformer.wte.weight"], xsa["model"]["transformer.wte.weight"])
    assert (sa["logits"] - xsa["logits"]).abs().max() > 1e-3


def test_the_cases_cover_every_kind_distinctly():
    assert len(CASES) == len(SWITCH_CASES) + len(KIND_CASES) + len(MUP_CASES)  # no case shadows another
    assert FIRST_STEP_CASES and all(CASES[n]["attention"] != "sa" for n in FIRST_STEP_CASES)


@pytest.mark.parametrize("name", FIRST_STEP_CASES)
def test_each_kinds_step_changes_the_output(dump_model, name):
    """Guards the kinds' cases: the step moves the logits far beyond the comparison's
    tolerance (the same weights without it, plain attention in every layer, score
    otherwise), and the gradient of each parameter of its own (a gate) is not zero, so a
    reference or a C++ model that skipped the step, or a gate that never learns, would fail."""
    dump = dump_model(name)
    model = GPT.from_checkpoint_dict(dump)
    with torch.no_grad():
        stepped, _ = model(dump["idx"])
        for block in model.transformer.h:
            block.attn.step = None
        plain, _ = model(dump["idx"])
    assert (stepped - plain).abs().max() > 1e-3
    kind = KIND_CASES[name][0]
    sa = {k: v for k, v in dump["config"].items() if k not in own_keys(row(kind))}
    with torch.device("meta"):
        plain_model = GPT(GPTConfig.from_dict({**sa, "attention": "sa"}))
    own = sorted(set(dump["grads"]) - {n for n, _ in plain_model.named_parameters(remove_duplicate=False)})
    assert all(dump["grads"][k].abs().max() > 0 for k in own), own


@pytest.mark.parametrize("name", MUP_CASES)
def test_mup_cases_move_both_multipliers(dump_model, name):
    """Guards the μP cases: the same weights read as the "sp" model give other logits, and
    so does each multiplier alone (the attention scores' and the logits'), each by far
    more than the float32 comparison's tolerance: a reference or a C++ model that dropped
    either would fail them."""
    dump = dump_model(name)
    cfg = GPTConfig.from_dict(dump["config"])
    assert cfg.parametrization == "mup" and cfg.width_multiplier == 3.0
    scale = dump["logits"].abs().max()
    for change in ({"parametrization": "sp"}, {"mup_base_width": cfg.d_model}, {"mup_base_head_dim": 0}):
        other = {**dump["config"], **change}
        if GPTConfig.from_dict(other).attention_scale == cfg.attention_scale and \
                GPTConfig.from_dict(other).width_multiplier == cfg.width_multiplier:
            continue  # this case's base head size is its own: nothing to move
        model = GPT.from_checkpoint_dict({**dump, "config": other})
        with torch.no_grad():
            logits, _ = model(dump["idx"])
        assert (logits - dump["logits"]).abs().max() > 100 * 2e-5 * scale, change


def test_tanh_and_exact_gelu_differ(dump_model):
    """Guards the gelu cases: with the same seed (the same weights) the tanh GELU moves
    the logits by several times the float32 comparison's tolerance (and by 1e8 times
    the float64 one's), so a reference or a C++ model that ignored model.gelu would
    fail them."""
    exact, tanh = dump_model("xsa"), dump_model("gelu_tanh")
    assert exact["config"]["gelu"] == "exact" and tanh["config"]["gelu"] == "tanh"
    assert torch.equal(exact["model"]["transformer.h.0.mlp.c_fc.weight"], tanh["model"]["transformer.h.0.mlp.c_fc.weight"])
    scale = exact["logits"].abs().max()
    assert (tanh["logits"] - exact["logits"]).abs().max() > 3 * 2e-5 * scale


def test_checkpoint_layouts(dump_model):
    """A run config with a model section, no RoPE buffers and a tied head listed
    once load to the same model."""
    dump = dump_model("xsa")
    state = {k: v for k, v in dump["model"].items() if k not in ("lm_head.weight", "rope_cos", "rope_sin")}
    model = GPT.from_checkpoint_dict({"model": state, "config": {"model": dump["config"], "train": {}}})
    assert model.lm_head.weight is model.transformer.wte.weight
    logits, _ = model(dump["idx"])
    assert_close(logits.detach(), dump["logits"], 2e-5, "logits")


def test_config_errors():
    with pytest.raises(ValueError, match="unknown key 'n_heads'"):
        GPTConfig.from_dict({**BASE, "n_heads": 4})
    with pytest.raises(ValueError, match=r"model.bias: expected bool"):
        GPTConfig.from_dict({**BASE, "bias": 1})
    with pytest.raises(ValueError, match="xsa_layers"):
        GPTConfig.from_dict({**BASE, "attention": "xsa", "xsa_layers": "last 3"})
    with pytest.raises(ValueError, match="model.gelu"):
        GPTConfig.from_dict({**BASE, "gelu": "erf"})
    with pytest.raises(ValueError, match="model.out_gate: a key of attention"):
        GPTConfig.from_dict({**BASE, "attention": "xsa", "out_gate": "headwise"})
    with pytest.raises(ValueError, match="model.xsa_gate: a key of attention"):
        GPTConfig.from_dict({**BASE, "attention": "xsa_token", "xsa_gate": "sa"})


def test_reference_xsa_removes_self_value_component():
    torch.manual_seed(0)
    y, v = torch.randn(2, 3, 5, 8, dtype=torch.float64), torch.randn(2, 3, 5, 8, dtype=torch.float64)
    z = exclude_self_value(y, v, 1e-6)
    assert (z * v).sum(-1).abs().max() < 1e-12
    assert torch.allclose(y - z, (y * v).sum(-1, keepdim=True) / (v * v).sum(-1, keepdim=True) * v)


def test_reference_rope_depends_on_distance_only():
    torch.manual_seed(0)
    cos, sin = rope_tables(16, 8, 10000.0)
    q, k = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    dot = lambda i, j: (apply_rope(q.expand(16, 8), cos, sin)[i] * apply_rope(k.expand(16, 8), cos, sin)[j]).sum()
    assert abs(dot(5, 2) - dot(13, 10)) < 1e-6 and abs(dot(5, 2) - dot(4, 2)) > 1e-3


def test_reference_compiles_without_graph_breaks(dump_model):
    """The reference is also the speed baseline: it must trace as one graph."""
    dump = dump_model("xsa_layer_list")
    model = GPT.from_checkpoint_dict(dump)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    logits, loss = compiled(dump["idx"], dump["targets"])
    assert_close(logits.detach(), dump["logits"], 2e-5, "compiled logits")
