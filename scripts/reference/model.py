"""Reference GPT in plain PyTorch: the same model as src/model/, written from its
specification rather than translated from the C++, so the two can check each other.

    x = ln_e(wte(idx))                                  post-embedding LayerNorm
    for each block:  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
    logits = lm_head(ln_f(x))                           own matrix, zero at init (or tied to wte)
                                                        (under μP: divided by m = d_model / mup_base_width)

Attention: fused q,k,v projection (`c_attn`, split q|k|v along the last dim),
n_head heads of head_dim each (n_head*head_dim need not equal d_model), RoPE
(rotate-half layout) on q and k, causal scaled_dot_product_attention (scores q.k / sqrt(head_dim), or
under μP q.k sqrt(b) / head_dim, b the base head size), then the kind's step on each head's output y
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

import math
from typing import Any, Mapping, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

# The configuration beside this module; ATTENTION_KINDS and GPTConfig are imported from
# here by the tests and bench_pytorch.py too.
from .config import ATTENTION_KINDS, GELU_KINDS, GPTConfig, LayerStep  # noqa: F401


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
        self.scale = cfg.attention_scale  # 1/sqrt(head_dim), or μP's
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
                                           is_causal=True, scale=self.scale)
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
        head N(0, min(0.02, 0.5/sqrt(width))) or zero. Under μP the hidden matrices' std is
        over sqrt(m) and the head's width is the base's."""
        cfg = self.cfg
        head_width = cfg.mup_base_width if cfg.parametrization == "mup" else cfg.d_model
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
                    p.normal_(0.0, min(0.02, 0.5 / math.sqrt(head_width)))
            else:
                p.normal_(0.0, 0.02)
            if cfg.mup_hidden(name):
                p.div_(math.sqrt(cfg.width_multiplier))

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
        if self.cfg.parametrization == "mup":
            logits = logits / self.cfg.width_multiplier  # μP's output multiplier
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
