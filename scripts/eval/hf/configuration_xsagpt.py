"""Configuration of an xsagpt model for Hugging Face transformers (remote code).

scripts/eval/export.py --format hf copies this file and modeling_xsagpt.py into the export
folder, so that AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
needs nothing but transformers and torch. The keys are xsagpt's own (the `model`
section of a run config, src/config/model_config.h) with the layer list resolved;
attribute_map gives transformers' usual names for the ones generation and lm-eval read.
A convention this code does not implement is refused by name rather than guessed.
"""
from __future__ import annotations

from typing import Any

from transformers import PreTrainedConfig

# What modeling_xsagpt.py implements, as config.json's "conventions" names it.
IMPLEMENTED = {("rope", "layout"): ("rotate_half",), ("mlp", "activation"): ("gelu_exact", "gelu_tanh"),
               ("norm", "type"): ("layernorm",)}
# model.attention's values this code implements (the rows of src/config/attention_kinds.cpp
# it has the formula of), and the gates of XSA's step: none, per head (as it starts), per token.
ATTENTION_KINDS = ("sa", "xsa", "gated", "xsa_token")
XSA_GATES = ("off", "sa", "xsa", "token")
# The MLP's GELU as transformers' ACT2FN names it (hidden_act), by conventions.mlp.activation.
HIDDEN_ACT = {"gelu_exact": "gelu", "gelu_tanh": "gelu_pytorch_tanh"}


class XsagptConfig(PreTrainedConfig):
    model_type = "xsagpt"
    attribute_map = {"hidden_size": "d_model", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
                     "max_position_embeddings": "block_size", "intermediate_size": "mlp_hidden"}

    vocab_size: int = 50304  # padded; the GPT-2 tokenizer has 50257 (the rest never occur as inputs)
    block_size: int = 1024  # the longest sequence the model saw in training
    n_layer: int = 12
    d_model: int = 768
    n_head: int = 12
    head_dim: int = 64  # n_head * head_dim need not equal d_model
    mlp_hidden: int = 3072
    hidden_act: str = "gelu"  # the MLP's GELU in ACT2FN's names: "gelu" (erf) or "gelu_pytorch_tanh" (tanh)
    bias: bool = False  # in every Linear and LayerNorm
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    attention: str = "sa"  # one of ATTENTION_KINDS; xsa_layers and out_gate_layers say where its step applies
    xsa_layers: list[int] | None = None  # the layers with XSA's step (gated or not)
    xsa_eps: float = 1e-6
    xsa_gate: str = "off"  # "off", a learned per-head tanh(alpha) ("sa"/"xsa": its start), or "token"
    out_gate_layers: list[int] | None = None  # the layers with the output gate (attention "gated")
    out_gate: str = "headwise"  # the output gate's width: "headwise" or "elementwise"
    n_sink: int = 0  # learned sink vectors in front of every sequence
    attention_scale: float | None = None  # q.k's factor; None: 1/sqrt(head_dim) (μP's differs)
    logit_scale: float = 1.0  # the logits' factor (μP's 1/m)
    tie_word_embeddings: bool = False
    use_cache: bool = True
    bos_token_id: int | None = 50256
    eos_token_id: int | None = 50256
    pad_token_id: int | None = None
    conventions: dict[str, Any] | None = None  # scripts/eval/export.py's record of the forward pass
    xsagpt: dict[str, Any] | None = None  # provenance: the run config's model section, checkpoint, step, tokens

    def __post_init__(self, **kwargs):
        self.xsa_layers = sorted(self.xsa_layers or [])
        self.out_gate_layers = sorted(self.out_gate_layers or [])
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(f"attention: expected one of {ATTENTION_KINDS}, got {self.attention!r}")
        if self.xsa_gate not in XSA_GATES:
            raise ValueError(f"xsa_gate: expected one of {XSA_GATES}, got {self.xsa_gate!r}")
        if self.out_gate not in ("headwise", "elementwise"):
            raise ValueError(f'out_gate: expected "headwise" or "elementwise", got {self.out_gate!r}')
        for key in ("attention_scale", "logit_scale"):
            v = getattr(self, key)
            if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < float("inf")):
                raise ValueError(f"{key}: expected a finite number > 0, got {v!r}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim: RoPE rotates pairs, so it must be even, got {self.head_dim}")
        if self.attention in ("sa", "gated") and self.xsa_layers:
            raise ValueError(f"xsa_layers: {self.xsa_layers} with attention {self.attention!r}")
        if self.attention != "gated" and self.out_gate_layers:
            raise ValueError(f"out_gate_layers: {self.out_gate_layers} with attention {self.attention!r}")
        for key in ("xsa_layers", "out_gate_layers"):
            if not all(0 <= i < self.n_layer for i in getattr(self, key)):
                raise ValueError(f"{key}: layer indices must be in [0, {self.n_layer}), got {getattr(self, key)}")
        for (section, key), known in IMPLEMENTED.items():
            got = (self.conventions or {}).get(section, {}).get(key, known[0])
            if got not in known:
                raise ValueError(f"conventions.{section}.{key} = {got!r}: modeling_xsagpt.py implements "
                                 f"{' or '.join(map(repr, known))}")
        if self.hidden_act not in HIDDEN_ACT.values():
            raise ValueError(f"hidden_act: expected one of {sorted(HIDDEN_ACT.values())}, got {self.hidden_act!r}")
        if self.conventions is not None:  # the two records of the GELU agree
            want = HIDDEN_ACT[self.conventions.get("mlp", {}).get("activation", "gelu_exact")]
            if self.hidden_act != want:
                raise ValueError(f"hidden_act = {self.hidden_act!r}, but conventions.mlp.activation is "
                                 f"{self.conventions['mlp']['activation']!r} ({want!r})")
        super().__post_init__(**kwargs)


__all__ = ["XsagptConfig"]
