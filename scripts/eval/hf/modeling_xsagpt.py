"""An xsagpt model (NanoGPT-style GPT with standard or Exclusive Self Attention) for
Hugging Face transformers: AutoModelForCausalLM, generate() with a key/value cache,
lm-eval's `hf` model. Written from the conventions scripts/eval/export.py records in
config.json; imports only torch and transformers.

    x = ln_e([sinks; wte(ids)])                          learned sinks first, then LayerNorm
    each block:  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
    logits = logit_scale * lm_head(ln_f(x)) at the tokens (sinks predict nothing; μP's 1/m, else 1)

Attention: one c_attn matrix split q|k|v, RoPE (rotate-half) on q and k with the sinks
at positions 0..n_sink-1 and the tokens after them, causal softmax attention (scores
q.k times attention_scale: 1/sqrt(head_dim), or μP's), and in
XSA layers the component of each head's output along its own value vector removed:

    z_i = y_i - g (y_i . v^_i) v^_i,   v^_i = v_i / max(||v_i||, xsa_eps),   g = 1 or tanh(alpha_h)

(arXiv 2603.09078), g per token and head as tanh(x_i . w_h + b_h) from the layer's input
x with xsa_gate "token", or in output-gated layers (arXiv 2505.06708) z_i = y_i *
sigmoid(x_i . w), a gate per head or per channel. Logits cover the padded vocabulary, as xsagpt scores them; the
padding ids are suppressed in generation by generation_config.json. The sinks' keys
and values depend on no input, so they are recomputed in every call and the cache
holds tokens only: its length is the number of tokens, as transformers expects.
"""
from __future__ import annotations

import math
import pathlib

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import GenerationMixin, PreTrainedModel
from transformers.activations import ACT2FN
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_xsagpt import XsagptConfig


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE: the pair (x_i, x_{i+D/2}) turned by the angle pos * theta^(-2i/D)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class XsagptAttention(nn.Module):
    def __init__(self, config: XsagptConfig, layer_idx: int):
        super().__init__()
        self.layer_idx, self.n_head, self.head_dim = layer_idx, config.n_head, config.head_dim
        self.scale = config.attention_scale or 1.0 / math.sqrt(config.head_dim)  # μP's, or SP's
        inner = config.n_head * config.head_dim
        self.c_attn = nn.Linear(config.d_model, 3 * inner, bias=config.bias)
        self.c_proj = nn.Linear(inner, config.d_model, bias=config.bias)
        self.xsa, self.xsa_eps = layer_idx in config.xsa_layers, config.xsa_eps
        token = self.xsa and config.xsa_gate == "token"
        gated = self.xsa and config.xsa_gate not in ("off", "token")
        self.xsa_gate = nn.Parameter(torch.zeros(config.n_head)) if gated else None
        self.xsa_token_gate = nn.Parameter(torch.zeros(config.n_head, config.d_model)) if token else None
        self.xsa_token_gate_bias = nn.Parameter(torch.zeros(config.n_head)) if token else None
        width = inner if config.out_gate == "elementwise" else config.n_head
        out_gated = layer_idx in config.out_gate_layers
        self.out_gate = nn.Parameter(torch.zeros(width, config.d_model)) if out_gated else None

    def forward(self, x, cos, sin, mask, cache: Cache | None, n_sink: int) -> torch.Tensor:
        B, L, _ = x.shape
        H, D = self.n_head, self.head_dim
        q, k, v = (t.view(B, L, H, D).transpose(1, 2) for t in self.c_attn(x).split(H * D, dim=-1))
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        keys, values = k, v
        if cache is not None:  # the sinks come first and are never cached
            past_k, past_v = cache.update(k[:, :, n_sink:], v[:, :, n_sink:], self.layer_idx)
            keys, values = torch.cat([k[:, :, :n_sink], past_k], 2), torch.cat([v[:, :, :n_sink], past_v], 2)
        y = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, is_causal=mask is None,
                                           scale=self.scale)
        if self.xsa:  # float32 at least: the subtraction cancels most of y
            dt = torch.promote_types(y.dtype, torch.float32)
            g = 1.0 if self.xsa_gate is None else torch.tanh(self.xsa_gate.double()).float().to(dt).view(H, 1, 1)
            if self.xsa_token_gate is not None:  # one gate per token and head, from the layer's input
                a = F.linear(x, self.xsa_token_gate, self.xsa_token_gate_bias)  # (B, L, H)
                g = torch.tanh(a.to(dt)).transpose(1, 2)[..., None]
            yf, v_hat = y.to(dt), F.normalize(v.to(dt), dim=-1, eps=self.xsa_eps)
            # XSA: z_i = y_i - g (y_i . v^_i) v^_i, per head
            y = (yf - g * (yf * v_hat).sum(-1, keepdim=True) * v_hat).to(y.dtype)
        if self.out_gate is not None:  # output gate: z = y * sigmoid(x W^T), per head or per channel
            dt = torch.promote_types(y.dtype, torch.float32)
            g = torch.sigmoid(F.linear(x, self.out_gate).to(dt)).view(B, L, H, -1).transpose(1, 2)
            y = (y.to(dt) * g).to(y.dtype)
        return self.c_proj(y.transpose(1, 2).reshape(B, L, H * D))


class XsagptMLP(nn.Module):
    def __init__(self, config: XsagptConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.d_model, config.mlp_hidden, bias=config.bias)
        self.c_proj = nn.Linear(config.mlp_hidden, config.d_model, bias=config.bias)
        self.act = ACT2FN[config.hidden_act]  # "gelu": erf's GELU; "gelu_pytorch_tanh": GPT-2's tanh approximation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.act(self.c_fc(x)))


class XsagptBlock(nn.Module):
    def __init__(self, config: XsagptConfig, layer_idx: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model, eps=config.norm_eps, bias=config.bias)
        self.attn = XsagptAttention(config, layer_idx)
        self.ln_2 = nn.LayerNorm(config.d_model, eps=config.norm_eps, bias=config.bias)
        self.mlp = XsagptMLP(config)

    def forward(self, x, cos, sin, mask, cache, n_sink):
        x = x + self.attn(self.ln_1(x), cos, sin, mask, cache, n_sink)
        return x + self.mlp(self.ln_2(x))


class XsagptPreTrainedModel(PreTrainedModel):
    config_class = XsagptConfig
    base_model_prefix = "transformer"
    _no_split_modules = ["XsagptBlock"]

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)  # N(0, 0.02) for Linear and Embedding, LayerNorm 1 and 0
        if isinstance(module, XsagptAttention) and module.xsa_gate is not None:
            init.constant_(module.xsa_gate, 9.25 if self.config.xsa_gate == "xsa" else 0.0)  # tanh(9.25) = 1
        if isinstance(module, XsagptAttention) and module.xsa_token_gate is not None:
            init.zeros_(module.xsa_token_gate)  # g = 0: starts as SA, as xsagpt's
            init.zeros_(module.xsa_token_gate_bias)
        if isinstance(module, XsagptAttention) and module.out_gate is not None:
            init.normal_(module.out_gate, mean=0.0, std=0.02)
        if isinstance(module, XsagptModel) and module.sink is not None:
            init.normal_(module.sink, mean=0.0, std=0.02)


class XsagptModel(XsagptPreTrainedModel):
    """The transformer without its head: the last LayerNorm's output at the tokens."""

    def __init__(self, config: XsagptConfig):
        super().__init__(config)
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        self.sink = nn.Parameter(torch.zeros(config.n_sink, config.d_model)) if config.n_sink else None
        self.ln_e = nn.LayerNorm(config.d_model, eps=config.norm_eps, bias=config.bias)
        self.h = nn.ModuleList(XsagptBlock(config, i) for i in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model, eps=config.norm_eps, bias=config.bias)
        self.post_init()

    def get_input_embeddings(self):
        return self.wte

    def set_input_embeddings(self, value):
        self.wte = value

    def rope(self, pos: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of pos * theta^(-2i/head_dim), (B, 1, L, head_dim/2): angles in float64
        and rounded to float32, as xsagpt's tables are, then to the model's dtype."""
        D = self.config.head_dim
        inv_freq = self.config.rope_theta ** (-torch.arange(0, D, 2, dtype=torch.float64, device=pos.device) / D)
        angles = pos[:, None, :, None].double() * inv_freq
        return angles.cos().float().to(dtype), angles.sin().float().to(dtype)

    def forward(self, input_ids, attention_mask=None, position_ids=None, cache=None, use_cache=None):
        B, T = input_ids.shape
        S, past = self.config.n_sink, cache.get_seq_length() if cache is not None else 0
        if past + T > self.config.block_size:
            raise ValueError(f"{past + T} tokens: this model was trained on at most block_size = "
                             f"{self.config.block_size}; cut the input on the left")
        if position_ids is None:
            position_ids = (past + torch.arange(T, device=input_ids.device)).expand(B, T)
        sink_pos = torch.arange(S, device=input_ids.device).expand(B, S)
        cos, sin = self.rope(torch.cat([sink_pos, S + position_ids], dim=1), self.wte.weight.dtype)

        # Which keys each query sees: None is plain causal attention over [sinks; tokens].
        # With a cache or padding the keys are [sinks; cached tokens; new tokens], the
        # queries [sinks; new tokens], and padding (attention_mask 0) is hidden from all
        # but itself, so that no row is empty.
        if attention_mask is not None and bool(attention_mask.all()):
            attention_mask = None
        mask = None
        if past or attention_mask is not None:
            kpos = torch.arange(S + past + T, device=input_ids.device)
            qpos = torch.cat([kpos[:S], kpos[S + past:]])
            causal = kpos[None, :] <= qpos[:, None]
            mask = causal[None, None]
            if attention_mask is not None:
                visible = torch.cat([attention_mask.new_ones(B, S), attention_mask], dim=1).bool()
                mask = (causal & visible[:, None, :] | (kpos[None, :] == qpos[:, None]))[:, None]

        x = self.wte(input_ids)
        if S:
            x = torch.cat([self.sink.to(x.dtype).expand(B, S, -1), x], dim=1)
        x = self.ln_e(x)
        for block in self.h:
            x = block(x, cos, sin, mask, cache, S)
        return self.ln_f(x[:, S:])


# What an export folder holds (scripts/eval/export.py --format hf) for the model and its
# tokenizer; transformers' own messages for a missing one name no file.
EXPORT_FILES = ("config.json", "model.safetensors", "vocab.json", "merges.txt", "tokenizer_config.json")


class XsagptForCausalLM(XsagptPreTrainedModel, GenerationMixin):
    _tied_weights_keys = {"lm_head.weight": "transformer.wte.weight"}  # only with tie_word_embeddings

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """transformers' from_pretrained, with a local folder's files checked first and
        the weights checked for NaN and inf after (export.py refuses them when it writes;
        a file changed since would give NaN logits without a word)."""
        folder = pathlib.Path(str(pretrained_model_name_or_path))
        if folder.is_dir():
            missing = [n for n in EXPORT_FILES if not (folder / n).is_file()]
            if missing:
                raise FileNotFoundError(f"{folder}: the export lacks {', '.join(missing)} (scripts/eval/export.py "
                                        "--format hf writes them); export the checkpoint again")
        model = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        for name, t in model.state_dict().items():
            if t.is_floating_point() and not torch.isfinite(t).all():
                raise ValueError(f"{folder}: weight {name} holds non-finite values (NaN or inf); export the "
                                 "checkpoint again")
        return model

    def __init__(self, config: XsagptConfig):
        super().__init__(config)
        self.transformer = XsagptModel(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.transformer.wte

    def set_input_embeddings(self, value):
        self.transformer.wte = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def forward(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None,
                position_ids: torch.LongTensor | None = None, cache: Cache | None = None,
                labels: torch.LongTensor | None = None, use_cache: bool | None = None,
                past_key_values: Cache | None = None, **kwargs) -> CausalLMOutputWithPast:
        """input_ids (B, T); attention_mask (B, past + T), 0 at padding; position_ids (B, T),
        counted from the first token (the sinks sit before it). labels are input_ids' ids
        (shifted inside, -100 ignored); the loss is the mean cross-entropy in float32."""
        cache = cache if cache is not None else past_key_values  # the older name
        if use_cache and cache is None:
            cache = DynamicCache(config=self.config)
        h = self.transformer(input_ids, attention_mask, position_ids, cache)
        logits = self.lm_head(h)
        if self.config.logit_scale != 1.0:  # μP's output multiplier
            logits = logits * self.config.logit_scale
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(), ignore_index=-100)
        return CausalLMOutputWithPast(loss=loss, logits=logits, cache=cache)


__all__ = ["XsagptConfig", "XsagptForCausalLM", "XsagptModel", "XsagptPreTrainedModel"]
