"""An export's conventions: everything besides the weights that the forward pass of a
model config depends on, as the C++ model (src/model/) implements it, written into
config.json and the safetensors metadata by export.py, so that load_export.py (or anyone)
can rebuild the model from the export alone. Apart from export.py because the
transformers folder (export_hf.py) reads them too.
"""
from __future__ import annotations

import math
import sys

GPT2_VOCAB = 50257  # the tokenizer's real vocabulary; model.vocab_size pads it


# model.attention's values (the rows of src/config/attention_kinds.cpp; `xsagpt config
# --json` lists them) by the conventions section that describes their step: XSA's step
# (conventions.xsa, its gate per head or per token) or the output gate
# (conventions.out_gate). The exporter writes down each kind's formula, so it names the
# kinds it can describe; one the C++ model gains later is refused by name until then.
ATTENTION_KINDS = {"sa": None, "xsa": "xsa", "xsa_token": "xsa", "gated": "out_gate"}
# Whether a kind's layers are the ones model.xsa_layers selects (the kinds that own the key).
SELECTS_LAYERS = {"xsa", "xsa_token"}
# model.gelu's values (src/config/model_config.h, GeluKind) as conventions.mlp.activation,
# and as the name transformers' ACT2FN gives the same function (config.json's hidden_act):
# erf's GELU is "gelu"; GPT-2's tanh approximation is "gelu_pytorch_tanh" (F.gelu with
# approximate="tanh"; "gelu_new" writes the same formula out in Python).
GELU_ACTIVATIONS = {"exact": ("gelu_exact", "gelu"), "tanh": ("gelu_tanh", "gelu_pytorch_tanh")}


def attention_kind(m: dict) -> str:
    """model.attention; a config without the key has the default kind (the table's first)."""
    kind = m.get("attention", next(iter(ATTENTION_KINDS)))
    if kind not in ATTENTION_KINDS:
        sys.exit(f"model.attention = {kind!r}: this exporter knows {sorted(ATTENTION_KINDS)}")
    return kind


def step_layer_indices(m: dict, section: str) -> list[int]:
    """The layers whose step conventions[section] describes, resolved once from the model
    config as AttentionSpec::uses_step does: model.attention, then, for a kind that owns it,
    model.xsa_layers (null: every layer; "last N"; or a list of indices)."""
    kind = attention_kind(m)
    n_layer = int(m.get("n_layer", 12))
    xl = m.get("xsa_layers") if kind in SELECTS_LAYERS else None
    if ATTENTION_KINDS[kind] != section:
        return []
    if xl is None:
        return list(range(n_layer))
    if isinstance(xl, str):
        return list(range(n_layer - int(xl[len("last "):]), n_layer))
    return sorted(int(i) for i in xl)


def gelu_kind(m: dict) -> str:
    """model.gelu, "exact" for configs written before the key existed."""
    kind = m.get("gelu", "exact")
    if kind not in GELU_ACTIVATIONS:
        sys.exit(f"model.gelu = {kind!r}: this exporter knows {sorted(GELU_ACTIVATIONS)}")
    return kind


def scales(m: dict) -> tuple[float, float]:
    """The forward pass's two μP multipliers (src/config/model_config.h: attention_scale,
    logit_scale): what q.k is multiplied by, and what the LM head's logits are; SP's
    1/sqrt(head_dim) and 1 for a config without model.parametrization or with "sp"."""
    head_dim = int(m.get("head_dim", 64))
    parametrization = m.get("parametrization", "sp")
    if parametrization not in ("sp", "mup"):
        sys.exit(f"model.parametrization = {parametrization!r}: this exporter knows 'sp' and 'mup'")
    if parametrization == "sp":
        return 1.0 / math.sqrt(head_dim), 1.0
    base_head = int(m.get("mup_base_head_dim", 0)) or head_dim
    return math.sqrt(base_head) / head_dim, int(m.get("mup_base_width", 256)) / int(m.get("d_model", 768))


def conventions(m: dict) -> dict:
    """Everything besides the weights that the forward pass depends on, as the C++ model
    (src/model/) implements it, so that scripts/eval/load_export.py, or anyone, can rebuild it
    from the export alone. Defaults are src/config/model_config.h's."""
    xsa_layers = step_layer_indices(m, "xsa")
    kind = attention_kind(m)
    token_gate = kind in SELECTS_LAYERS and kind != "xsa"  # XSA's step gated per token
    activation = GELU_ACTIVATIONS[gelu_kind(m)][0]
    d_model = int(m.get("d_model", 768))
    score_scale, logit_scale = scales(m)
    return {
        "embedding": "wte(idx), n_sink learned sink vectors (transformer.sink) prepended, then LayerNorm ln_e",
        "block": "pre-norm: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))",
        "head": "logits = logit_scale * lm_head(ln_f(x)) at the token positions (sinks predict nothing)",
        "logit_scale": logit_scale,
        "norm": {"type": "layernorm", "eps": float(m.get("norm_eps", 1e-5)), "bias": bool(m.get("bias", False))},
        "linear_bias": bool(m.get("bias", False)),
        "attention": {"qkv": "c_attn, one matrix, output split q|k|v along the last dim, heads contiguous",
                      "n_head": int(m.get("n_head", 12)), "head_dim": int(m.get("head_dim", 64)),
                      "scale": "score_scale: 1/sqrt(head_dim), or under μP sqrt(base head size)/head_dim",
                      "score_scale": score_scale, "causal": True},
        "rope": {"layout": "rotate_half", "theta": float(m.get("rope_theta", 10000.0)),
                 "pairs": "(x_i, x_{i+head_dim/2}), angle pos * theta^(-2i/head_dim)", "applied_to": "q,k",
                 "positions": "sinks at 0..n_sink-1, tokens from n_sink"},
        "xsa": {"layers": xsa_layers, "eps": float(m.get("xsa_eps", 1e-6)),
                "formula": "z = y - g (y . v_hat) v_hat per head, v_hat = v / max(||v||, eps), in float32",
                "gate": "token" if token_gate else m.get("xsa_gate", "off"),
                "gate_value": "g = tanh(attn.xsa_gate[h]) when gate is sa or xsa; when gate is token, per token t "
                              "g = tanh(x_t . attn.xsa_token_gate[h] + attn.xsa_token_gate_bias[h]), x = ln_1's "
                              "output; else 1"},
        **({"out_gate": {"layers": step_layer_indices(m, "out_gate"), "width": m.get("out_gate", "headwise"),
                         "formula": "z = y * sigmoid(x . attn.out_gate[r]) before c_proj, x = ln_1's output, r the "
                                    "head (width headwise) or the channel h*head_dim+d (width elementwise)"}}
           if ATTENTION_KINDS[kind] == "out_gate" else {}),
        "mlp": {"activation": activation, "hidden": int(float(m.get("mlp_ratio", 4.0)) * d_model)},
        "vocab": {"padded": int(m.get("vocab_size", 50304)), "real": GPT2_VOCAB, "tokenizer": "gpt2",
                  "softmax_over": "padded"},
        "tied_embeddings": bool(m.get("tie_embeddings", False)),
        "n_sink": int(m.get("n_sink", 0)),
        "block_size": int(m.get("block_size", 1024)),
    }
