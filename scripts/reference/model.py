"""Reference GPT in plain PyTorch: the same model as src/model/, written from its
specification rather than translated from the C++, so the two can check each other.

    x = ln_e(wte(idx))                                  post-embedding LayerNorm
    for each block:  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
    logits = lm_head(ln_f(x))                           own matrix, zero at init (or tied to wte)

Attention: fused q,k,v projection (`c_attn`, split q|k|v along the last dim),
n_head heads of head_dim each (n_head*head_dim need not equal d_model), RoPE
(rotate-half layout) on q and k, causal scaled_dot_product_attention, then the kind's step on each head's output y
(model.attention; x is the layer's input, after ln_1):
  xsa        z = y - g (y . v^) v^ with v^ = v / max(||v||, xsa_eps), in float32 at least;
             g = 1, or tanh(alpha_h) with model.xsa_gate
  gated      z = y * sigmoid(x . w), one w per head (out_gate "headwise") or per channel
             ("elementwise"): output-gated attention, arXiv 2505.06708
  xsa_token  XSA's step with g = tanh(x . w_h + b_h) per token and head
XSA's step and the token gate apply in the layers xsa_layers selects.

MLP: c_fc, GELU, c_proj; the GELU exact (erf, nanoGPT's) or GPT-2's tanh
approximation, as model.gelu says.

Parameter names are nanoGPT's, the same as the C++ model's, so a state dict
moves between the two unchanged. Used by tests/python/model/test_reference_model.py
and as the "plain PyTorch" side of speed comparisons, hence torch.compile
friendly: no Python loops over heads or positions, no data-dependent control flow.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


# Accepted Python types per annotated field type (bool is an int in Python: excluded).
_JSON_KINDS = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}


# model.attention's values, each with the keys it owns and, for its own options, their
# values (the first the default): as the rows of src/config/attention_kinds.cpp. The
# reference spells them because it is the C++ model's independent twin.
ATTENTION_KINDS = {
    "sa": {},
    "xsa": {"xsa_layers": None, "xsa_gate": None},
    "gated": {"out_gate": ("headwise", "elementwise")},
    "xsa_token": {"xsa_layers": None},
}
XSA_GATES = ("off", "sa", "xsa")
# model.gelu's values as F.gelu's `approximate` (src/config/model_config.h: GeluKind):
# erf's GELU, or GPT-2's tanh approximation.
GELU_KINDS = {"exact": "none", "tanh": "tanh"}


@dataclasses.dataclass(frozen=True)
class LayerStep:
    """What one attention layer computes, resolved once from the config."""
    step: Optional[str] = None  # the kind whose step the layer applies; None: plain attention
    gated: bool = False  # XSA with a learned per-head gate tanh(alpha) on its term
    gate_width: int = 0  # the gated kind's: n_head (headwise) or n_head*head_dim (elementwise)


@dataclasses.dataclass
class GPTConfig:
    """The `model` section of a run config; keys and defaults as src/config/model_config.h
    (out_gate: the gated kind's option, absent from a config that does not set it)."""
    vocab_size: int = 50304
    block_size: int = 1024
    n_layer: int = 12
    d_model: int = 768
    n_head: int = 12
    head_dim: int = 64
    mlp_ratio: float = 4.0
    gelu: str = "exact"  # "exact" (erf) | "tanh" (GPT-2's approximation)
    attention: str = "sa"
    xsa_layers: Any = None  # None (all layers), [indices], or "last N"
    rope_theta: float = 10000.0
    bias: bool = False
    dropout: float = 0.0
    tie_embeddings: bool = False
    head_init: str = "normal"
    norm_eps: float = 1e-5
    xsa_eps: float = 1e-6
    xsa_gate: str = "off"  # "off" | "sa" | "xsa": learnable per-head tanh(alpha) on the XSA term
    n_sink: int = 0  # learned sink vectors in front of every sequence
    out_gate: Optional[str] = None  # the gated kind's option: "headwise" (its default) | "elementwise"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "model") -> "GPTConfig":
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - set(known))
        if unknown:
            raise ValueError(f"{where}: unknown key '{unknown[0]}' (known keys: {', '.join(sorted(known))})")
        for k, v in d.items():
            kinds = _JSON_KINDS.get(known[k].type)
            if kinds and (not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds)):
                raise ValueError(f"{where}.{k}: expected {known[k].type}, got {v!r}")
        cfg = cls(**dict(d))
        cfg.validate(where)
        return cfg

    @property
    def inner_dim(self) -> int:
        return self.n_head * self.head_dim

    @property
    def mlp_dim(self) -> int:
        return int(self.mlp_ratio * self.d_model)

    def xsa_layer_set(self) -> set[int]:
        """The layers that apply the kind's step."""
        if self.attention == "sa":
            return set()
        if self.xsa_layers is None:
            return set(range(self.n_layer))
        if isinstance(self.xsa_layers, str):
            return set(range(self.n_layer - int(self.xsa_layers[len("last "):]), self.n_layer))
        return set(self.xsa_layers)

    def layer_step(self, layer: int) -> LayerStep:
        if layer not in self.xsa_layer_set():
            return LayerStep()
        width = self.inner_dim if self.out_gate == "elementwise" else self.n_head
        return LayerStep(step=self.attention, gated=self.attention == "xsa" and self.xsa_gate != "off",
                            gate_width=width if self.attention == "gated" else 0)

    def validate(self, where: str = "model") -> None:
        for k in ("vocab_size", "block_size", "n_layer", "d_model", "n_head", "head_dim",
                  "mlp_ratio", "rope_theta", "norm_eps", "xsa_eps"):
            if not getattr(self, k) > 0:
                raise ValueError(f"{where}.{k}: must be > 0, got {getattr(self, k)!r}")
        if self.head_dim % 2:
            raise ValueError(f"{where}.head_dim: RoPE rotates pairs, so it must be even, got {self.head_dim}")
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(f"{where}.attention: expected {' or '.join(map(repr, ATTENTION_KINDS))}, "
                             f"got {self.attention!r}")
        owned = ATTENTION_KINDS[self.attention]
        defaults = {"xsa_layers": None, "xsa_gate": "off", "out_gate": None}
        for k, default in defaults.items():
            if getattr(self, k) != default and k not in owned:
                owners = [a for a, keys in ATTENTION_KINDS.items() if k in keys]
                raise ValueError(f"{where}.{k}: a key of attention {owners}, so it needs one of them "
                                 f"(attention is {self.attention!r})")
        if self.out_gate is not None and self.out_gate not in owned["out_gate"]:
            raise ValueError(f"{where}.out_gate: expected one of {owned['out_gate']}, got {self.out_gate!r}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"{where}.dropout: expected a probability in [0, 1), got {self.dropout!r}")
        xl, key = self.xsa_layers, f"{where}.xsa_layers"
        if isinstance(xl, str):
            n = xl[len("last "):]
            if not (xl.startswith("last ") and n.isdigit() and 1 <= int(n) <= self.n_layer):
                raise ValueError(f'{key}: expected "last N" with 1 <= N <= n_layer ({self.n_layer}), got {xl!r}')
        elif isinstance(xl, (list, tuple)):
            if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < self.n_layer for i in xl):
                raise ValueError(f"{key}: layer indices must be integers in [0, {self.n_layer}), got {xl!r}")
        elif xl is not None:
            raise ValueError(f'{key}: expected null, a list of layer indices or "last N", got {xl!r}')
        if self.gelu not in GELU_KINDS:
            raise ValueError(f"{where}.gelu: expected one of {tuple(GELU_KINDS)}, got {self.gelu!r}")
        if self.xsa_gate not in XSA_GATES:
            raise ValueError(f"{where}.xsa_gate: expected one of {XSA_GATES}, got {self.xsa_gate!r}")
        if not (isinstance(self.n_sink, int) and self.n_sink >= 0):
            raise ValueError(f"{where}.n_sink: must be >= 0, got {self.n_sink!r}")


def rope_tables(max_len: int, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin of pos * theta^(-2i/head_dim), (max_len, head_dim), each half repeated
    so that a whole head is rotated with two multiplies. Angles in float64 (long
    contexts), stored in float32."""
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # Pair (x_i, x_{i+D/2}) as a complex number x_i + j x_{i+D/2}, multiplied by e^{j angle}.
    return x * cos.to(x.dtype) + rotate_half(x) * sin.to(x.dtype)


def exclude_self_value(y: torch.Tensor, v: torch.Tensor, eps: float,
                       gate: Optional[torch.Tensor] = None) -> torch.Tensor:
    """z = y - g (y . v^) v^ per head (g = 1, or a per-head gate (H, 1, 1)); float32
    or wider, since the subtraction cancels most of y."""
    dt = torch.promote_types(y.dtype, torch.float32)
    yf, v_hat = y.to(dt), F.normalize(v.to(dt), dim=-1, eps=eps)  # v / max(||v||, eps)
    proj = (yf * v_hat).sum(-1, keepdim=True) * v_hat
    return (yf - (proj if gate is None else gate.to(dt) * proj)).to(y.dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig, variant: LayerStep):
        super().__init__()
        self.n_head, self.head_dim, self.inner = cfg.n_head, cfg.head_dim, cfg.inner_dim
        self.variant = variant
        self.c_attn = nn.Linear(cfg.d_model, 3 * self.inner, bias=cfg.bias)
        self.c_proj = nn.Linear(self.inner, cfg.d_model, bias=cfg.bias)
        self.resid_drop = nn.Dropout(cfg.dropout)
        self.dropout, self.step, self.xsa_eps = cfg.dropout, variant.step, cfg.xsa_eps
        # Gated XSA: z = y - tanh(alpha_h) (y . v^) v^; alpha is loaded from the checkpoint.
        self.xsa_gate = nn.Parameter(torch.zeros(cfg.n_head)) if variant.gated else None
        if self.step == "gated":  # z = y * sigmoid(x W^T), W (n_head or inner, d_model), no bias
            self.out_gate = nn.Parameter(torch.zeros(variant.gate_width, cfg.d_model))
        if self.step == "xsa_token":  # g = tanh(x W^T + b) per token and head
            self.xsa_token_gate = nn.Parameter(torch.zeros(cfg.n_head, cfg.d_model))
            self.xsa_token_gate_bias = nn.Parameter(torch.zeros(cfg.n_head))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = (t.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
                   for t in self.c_attn(x).split(self.inner, dim=-1))
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                           is_causal=True)
        if self.step == "xsa":
            gate = None if self.xsa_gate is None else torch.tanh(self.xsa_gate.double()).float().view(-1, 1, 1)
            y = exclude_self_value(y, v, self.xsa_eps, gate)
        elif self.step == "gated":
            dt = torch.promote_types(y.dtype, torch.float32)
            g = torch.sigmoid((x @ self.out_gate.t()).to(dt)).view(B, T, self.n_head, -1).transpose(1, 2)
            y = (y.to(dt) * g).to(y.dtype)
        elif self.step == "xsa_token":
            alpha = x @ self.xsa_token_gate.t() + self.xsa_token_gate_bias  # (B, T, H)
            g = torch.tanh(alpha.to(torch.promote_types(y.dtype, torch.float32))).transpose(1, 2).unsqueeze(-1)
            y = exclude_self_value(y, v, self.xsa_eps, g)
        return self.resid_drop(self.c_proj(y.transpose(1, 2).reshape(B, T, self.inner)))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.d_model, cfg.mlp_dim, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.mlp_dim, cfg.d_model, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)
        self.approximate = GELU_KINDS[cfg.gelu]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.c_proj(F.gelu(self.c_fc(x), approximate=self.approximate)))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig, variant: LayerStep):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg, variant)
        self.ln_2 = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), cos, sin)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    # Derived from the config: recomputed here, dropped if a checkpoint carries them.
    DERIVED_BUFFERS = ("rope_cos", "rope_sin")

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size, cfg.d_model),
            ln_e=nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias),
            drop=nn.Dropout(cfg.dropout),
            h=nn.ModuleList(Block(cfg, cfg.layer_step(i)) for i in range(cfg.n_layer)),
            ln_f=nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias),
        ))
        if cfg.n_sink:  # StreamingLLM-style learnable sinks, at RoPE positions 0..n_sink-1
            self.transformer.sink = nn.Parameter(torch.zeros(cfg.n_sink, cfg.d_model))
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.transformer.wte.weight
        cos, sin = rope_tables(cfg.n_sink + cfg.block_size, cfg.head_dim, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.register_load_state_dict_pre_hook(GPT._accept_checkpoint_layout)
        self.init_weights()

    @torch.no_grad()
    def init_weights(self) -> None:
        """nanoGPT's: N(0, 0.02), residual projections scaled by 1/sqrt(2 n_layer); an untied
        head starts at zero (uniform predictions, loss ln(vocab))."""
        for name, p in self.named_parameters():
            if name.endswith(".bias"):
                p.zero_()
            elif ".ln_" in name:
                p.fill_(1.0)
            elif name.endswith("xsa_gate"):
                p.fill_(0.0 if self.cfg.xsa_gate == "sa" else 9.25)  # tanh(9.25) == 1 in float32
            elif name.endswith(("xsa_token_gate", "xsa_token_gate_bias")):
                p.zero_()  # g = 0: starts as SA
            elif name.endswith("c_proj.weight"):
                p.normal_(0.0, 0.02 / math.sqrt(2 * self.cfg.n_layer))
            elif name == "lm_head.weight" and not self.cfg.tie_embeddings:
                if self.cfg.head_init == "zero":
                    p.zero_()
                else:  # xsagpt's untied "normal": nanoGPT's 0.02, capped at logit std 0.5
                    p.normal_(0.0, min(0.02, 0.5 / math.sqrt(self.cfg.d_model)))
            else:
                p.normal_(0.0, 0.02)

    def _accept_checkpoint_layout(self, state_dict, prefix, *args) -> None:
        # The C++ state dict may carry the RoPE tables and, with a tied head, may
        # list the shared matrix once (under wte) or twice.
        for b in self.DERIVED_BUFFERS:
            state_dict.pop(prefix + b, None)
        if self.cfg.tie_embeddings and prefix + "lm_head.weight" not in state_dict:
            if prefix + "transformer.wte.weight" in state_dict:
                state_dict[prefix + "lm_head.weight"] = state_dict[prefix + "transformer.wte.weight"]

    def forward(self, idx: torch.Tensor, targets: Optional[torch.Tensor] = None):
        """idx, targets: int64 (B, T), T <= block_size. Returns (logits, loss or None);
        loss is the mean cross-entropy over targets != -1, computed in float32 (float64 for float64)."""
        T = idx.size(1)
        assert T <= self.cfg.block_size, f"sequence length {T} exceeds model.block_size {self.cfg.block_size}"
        S = self.cfg.n_sink
        cos, sin = self.rope_cos[:S + T], self.rope_sin[:S + T]
        tr = self.transformer
        x = tr.wte(idx)
        if S:
            x = torch.cat([tr.sink.expand(idx.size(0), S, -1), x], dim=1)
        x = tr.drop(tr.ln_e(x))
        for block in tr.h:
            x = block(x, cos, sin)
        logits = self.lm_head(tr.ln_f(x[:, S:]))  # sinks predict nothing
        loss = None
        if targets is not None:
            acc = torch.promote_types(logits.dtype, torch.float32)  # float32, float64 for float64
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)).to(acc), targets.view(-1), ignore_index=-1)
        return logits, loss

    @classmethod
    def from_checkpoint_dict(cls, d: Mapping[str, Any], device=None, dtype: Optional[torch.dtype] = None) -> "GPT":
        """Builds the model from {"model": {name: tensor}, "config": model section or a
        full run config with a "model" section}. dtype defaults to the weights' dtype."""
        config = d["config"]
        if isinstance(config.get("model"), Mapping):
            config = config["model"]
        elif "model" in config:
            raise ValueError(f"config.model: expected the model section as a dict, got {config['model']!r}")
        state = dict(d["model"])
        model = cls(GPTConfig.from_dict(config))
        if dtype is None:
            dtype = state["transformer.wte.weight"].dtype
        model.to(device=device, dtype=dtype)
        model.load_state_dict(state, strict=True)
        return model
