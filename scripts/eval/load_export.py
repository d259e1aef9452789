#!/usr/bin/env python3
"""Rebuild an exported xsagpt model (scripts/eval/export.py: model.safetensors + config.json)
in plain PyTorch, from the export alone: the architecture is read from config.json's
"conventions", not from this repository's C++ or its tests, so the export can be used
where xsagpt is not installed (with export_vocab.py, the vocabulary's half, beside it). A
convention this loader does not implement, or one that does not hold what its key means,
is refused naming the key rather than guessed,
and every tensor's shape is checked against the conventions before the first forward,
naming the tensor.

    from load_export import load_export
    model = load_export("share/xsa-1.4b")                 # nn.Module, float32, eval mode
    logits = model(torch.tensor([[464, 3139, 286]]))      # (B, T, padded vocab)

    .venv/bin/python scripts/eval/load_export.py share/xsa-1.4b "In the beginning" " God"
    # log p(" God" | "In the beginning") with tiktoken's GPT-2 split, as `xsagpt score` computes it (compact: mapped)
    # downloads nothing: GPT-2's vocabulary from $XSAGPT_GPT2_VOCAB, else the repository's data/gpt2/
"""
from __future__ import annotations

import json
import math
import pathlib
import re
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from export_vocab import GPT2_TOKENS, compact_vocab, gpt2_encoding  # beside this file

# conventions.mlp.activation as F.gelu's `approximate`: erf's GELU or GPT-2's tanh approximation.
GELU_APPROXIMATE = {"gelu_exact": "none", "gelu_tanh": "tanh"}
# conventions.xsa.gate: no gate, the start of a learned one per head, or one per token
GATE_STARTS = ("off", "sa", "xsa", "token")
OUT_GATE_WIDTHS = ("headwise", "elementwise")  # conventions.out_gate.width


class Conventions:
    """config.json's "conventions", every one this loader uses read here once, by one
    checker that names the key it reads (conventions.out_gate.layers, ...) and what it
    expected, so that a wrong value is refused as that key rather than failing later
    under another name; the model reads them from here alone. n_layer comes from the
    weights (the conventions do not record it)."""

    def __init__(self, conv: dict, n_layer: int):
        self.raw, self.n_layer = conv, n_layer
        self.choice(("rotate_half",), "rope", "layout")
        self.choice(("layernorm",), "norm", "type")
        self.gelu = GELU_APPROXIMATE[self.choice(tuple(GELU_APPROXIMATE), "mlp", "activation")]
        self.n_head, self.head_dim = self.count("attention", "n_head"), self.count("attention", "head_dim")
        if self.head_dim % 2:
            self.refuse(("attention", "head_dim"), "an even number (RoPE turns pairs of its dimensions)")
        self.hidden, self.vocab = self.count("mlp", "hidden"), self.count("vocab", "padded")
        self.block_size, self.n_sink = self.count("block_size"), self.count("n_sink", low=0)
        self.theta, self.norm_eps = self.number("rope", "theta"), self.number("norm", "eps")
        self.norm_bias, self.linear_bias = self.flag("norm", "bias"), self.flag("linear_bias")
        self.tied = self.flag("tied_embeddings")
        # μP's multipliers; an export written before they were recorded is SP's.
        self.score_scale = self.number("attention", "score_scale") if "score_scale" in conv.get("attention", {}) \
            else 1.0 / math.sqrt(self.head_dim)
        self.logit_scale = self.number("logit_scale") if "logit_scale" in conv else 1.0
        self.xsa_layers, self.xsa_eps = self.layers("xsa"), self.number("xsa", "eps")
        self.xsa_gate = self.choice(GATE_STARTS, "xsa", "gate")
        self.out_gate = "out_gate" in conv  # the section is there only for the kind that has the gate
        self.out_layers = self.layers("out_gate") if self.out_gate else []
        self.out_width = self.choice(OUT_GATE_WIDTHS, "out_gate", "width") if self.out_gate else None

    def get(self, *path: str):
        node = self.raw
        for i, key in enumerate(path):
            if not isinstance(node, dict) or key not in node:
                where = "conventions" + "".join(f".{k}" for k in path[:i])
                raise ValueError(f"conventions.{'.'.join(path)}: missing ({where} has no {key!r}); re-export with "
                                 "scripts/eval/export.py")
            node = node[key]
        return node

    def refuse(self, path: tuple, expected: str):
        raise ValueError(f"conventions.{'.'.join(path)} = {self.get(*path)!r}: expected {expected}")

    def choice(self, known: tuple, *path: str) -> str:
        if self.get(*path) not in known:
            self.refuse(path, f"{' or '.join(map(repr, known))} (what this loader implements)")
        return self.get(*path)

    def count(self, *path: str, low: int = 1) -> int:
        v = self.get(*path)
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            self.refuse(path, f"an integer >= {low}")
        return v

    def number(self, *path: str) -> float:
        v = self.get(*path)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0 or not math.isfinite(v):
            self.refuse(path, "a finite number > 0")
        return float(v)

    def flag(self, *path: str) -> bool:
        if not isinstance(self.get(*path), bool):
            self.refuse(path, "true or false")
        return self.get(*path)

    def layers(self, section: str) -> list[int]:
        """conventions.SECTION.layers: the layers that take the section's step, a list of
        distinct indices of the weights' layers."""
        v = self.get(section, "layers")
        if not isinstance(v, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in v) \
                or len(set(v)) != len(v) or not all(0 <= i < self.n_layer for i in v):
            self.refuse((section, "layers"), f"a list of distinct layer indices in 0..{self.n_layer - 1} (the "
                                             f"weights hold {self.n_layer} layers)")
        return v


class LayerStep:
    """What one attention layer does to attention's output, from the conventions: XSA's
    step (ungated, gated per head, or per token) and the output gate."""

    def __init__(self, c: Conventions, layer: int):
        self.xsa = layer in c.xsa_layers
        self.out_gated = layer in c.out_layers
        p = f"transformer.h.{layer}.attn"
        self.gate_key, self.out_key = f"{p}.xsa_gate", f"{p}.out_gate"
        self.token_keys = (f"{p}.xsa_token_gate", f"{p}.xsa_token_gate_bias")
        self.gated = self.xsa and c.xsa_gate not in ("off", "token")
        self.token = self.xsa and c.xsa_gate == "token"

    def exclude_self(self, y: torch.Tensor, v: torch.Tensor, h: torch.Tensor, eps: float, w: dict) -> torch.Tensor:
        """XSA's step z = y - g (y . v^) v^ per head, in float32 at least (g = 1 without a gate;
        per token, g = tanh(h . w_h + b_h), h the layer's input)."""
        dt = torch.promote_types(y.dtype, torch.float32)
        v_hat = F.normalize(v.to(dt), dim=-1, eps=eps)
        proj = (y.to(dt) * v_hat).sum(-1, keepdim=True) * v_hat
        if self.gated:
            proj = torch.tanh(w[self.gate_key].double()).to(dt).view(-1, 1, 1) * proj
        if self.token:
            a = F.linear(h, w[self.token_keys[0]], w[self.token_keys[1]])  # (B, L, H)
            proj = torch.tanh(a.to(dt)).transpose(1, 2).unsqueeze(-1) * proj
        return (y.to(dt) - proj).to(y.dtype)

    def out_gate(self, y: torch.Tensor, h: torch.Tensor, w: dict) -> torch.Tensor:
        """z = y * sigmoid(h W^T), a gate per head or per channel from the layer's input h."""
        B, H, L, _ = y.shape
        dt = torch.promote_types(y.dtype, torch.float32)
        g = torch.sigmoid(F.linear(h, w[self.out_key]).to(dt)).view(B, L, H, -1).transpose(1, 2)
        return (y.to(dt) * g).to(y.dtype)


def expected_shapes(c: Conventions, d_model: int) -> dict[str, tuple]:
    """Every tensor a model of these conventions has, by its exported name, with its
    shape (the tied head is the embedding, stored once)."""
    d, inner = d_model, c.n_head * c.head_dim
    shapes = {"transformer.wte.weight": (c.vocab, d)}
    if not c.tied:
        shapes["lm_head.weight"] = (c.vocab, d)
    if c.n_sink:
        shapes["transformer.sink"] = (c.n_sink, d)

    def add(name, *shape, bias):
        shapes[f"{name}.weight"] = shape
        if bias:
            shapes[f"{name}.bias"] = shape[:1]

    for name in ("transformer.ln_e", "transformer.ln_f"):
        add(name, d, bias=c.norm_bias)
    for i in range(c.n_layer):
        p, step = f"transformer.h.{i}", LayerStep(c, i)
        add(f"{p}.ln_1", d, bias=c.norm_bias)
        add(f"{p}.ln_2", d, bias=c.norm_bias)
        add(f"{p}.attn.c_attn", 3 * inner, d, bias=c.linear_bias)
        add(f"{p}.attn.c_proj", d, inner, bias=c.linear_bias)
        add(f"{p}.mlp.c_fc", c.hidden, d, bias=c.linear_bias)
        add(f"{p}.mlp.c_proj", d, c.hidden, bias=c.linear_bias)
        if step.gated:
            shapes[step.gate_key] = (c.n_head,)
        if step.token:
            shapes.update({step.token_keys[0]: (c.n_head, d), step.token_keys[1]: (c.n_head,)})
        if step.out_gated:
            shapes[step.out_key] = (inner if c.out_width == "elementwise" else c.n_head, d)
    return shapes


def weight_mismatch(weights: dict[str, torch.Tensor], want: dict[str, tuple], by: str) -> str | None:
    """The first tensor that is missing, misshapen or not part of the model `by` (what
    gave the shapes) describes, named; None when every one is as expected."""
    for name, shape in want.items():
        if name not in weights:
            return f"no weights for parameter {name} ({by} needs it)"
        if tuple(weights[name].shape) != shape:
            return f"parameter {name} has shape {list(weights[name].shape)}, {by} expects {list(shape)}"
    extra = sorted(set(weights) - set(want))
    if extra:
        return f"weights {by} has no parameter for: {', '.join(extra[:5])}{' ...' if len(extra) > 5 else ''}"
    return None


def _linear(w: dict, name: str, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, w[f"{name}.weight"], w.get(f"{name}.bias"))


def _norm(w: dict, name: str, x: torch.Tensor, eps: float) -> torch.Tensor:
    return F.layer_norm(x, (x.size(-1),), w[f"{name}.weight"], w.get(f"{name}.bias"), eps)


class ExportedGPT(nn.Module):
    def __init__(self, conv: dict, weights: dict[str, torch.Tensor]):
        super().__init__()
        if not isinstance(conv, dict):
            raise ValueError("conventions: expected an object")
        wte = weights.get("transformer.wte.weight")
        if wte is None or wte.dim() != 2:
            raise ValueError("transformer.wte.weight: missing from the weights or not a matrix (vocab x d_model)")
        n_layer = 1 + max([int(k.split(".")[2]) for k in weights if re.match(r"transformer\.h\.\d+\.", k)],
                          default=-1)
        self.conv = conv  # as read, for callers that rebuild a variant of it
        self.c = c = Conventions(conv, n_layer)
        bad = weight_mismatch(weights, expected_shapes(c, wte.size(1)), "the model of these conventions")
        if bad:  # d_model and the layers are the weights' own: wte's width, the highest block index
            raise ValueError(f"{bad} (with d_model {wte.size(1)} and {n_layer} layers, as the weights hold)")
        self.w = dict(weights)  # by their exported names; nothing here is trained
        n = c.n_sink + c.block_size
        inv = c.theta ** (-torch.arange(0, c.head_dim, 2, dtype=torch.float64) / c.head_dim)
        ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
        ang = torch.cat([ang, ang], dim=-1)
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)
        self.layers = [LayerStep(c, i) for i in range(n_layer)]

    def _rope(self, x: torch.Tensor, T: int) -> torch.Tensor:
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        c, w = self.c, self.w
        eps = c.norm_eps
        B, T = idx.shape
        if T > c.block_size:
            raise ValueError(f"{T} tokens: the model sees at most block_size = {c.block_size}")
        S = c.n_sink
        x = F.embedding(idx, w["transformer.wte.weight"])
        if S:
            x = torch.cat([w["transformer.sink"].expand(B, S, -1), x], dim=1)
        x = _norm(w, "transformer.ln_e", x, eps)
        L, H, D = S + T, c.n_head, c.head_dim
        for i, step in enumerate(self.layers):
            p = f"transformer.h.{i}"
            h = _norm(w, f"{p}.ln_1", x, eps)
            q, k, v = (t.view(B, L, H, D).transpose(1, 2) for t in _linear(w, f"{p}.attn.c_attn", h).split(H * D, -1))
            q, k = self._rope(q, L), self._rope(k, L)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=c.score_scale)
            if step.xsa:
                y = step.exclude_self(y, v, h, c.xsa_eps, w)
            if step.out_gated:
                y = step.out_gate(y, h, w)
            x = x + _linear(w, f"{p}.attn.c_proj", y.transpose(1, 2).reshape(B, L, H * D))
            h = _norm(w, f"{p}.ln_2", x, eps)
            x = x + _linear(w, f"{p}.mlp.c_proj", F.gelu(_linear(w, f"{p}.mlp.c_fc", h), approximate=c.gelu))
        head = w["transformer.wte.weight"] if c.tied else w["lm_head.weight"]
        return c.logit_scale * F.linear(_norm(w, "transformer.ln_f", x[:, S:], eps), head)


def check_finite(weights: dict[str, torch.Tensor], where: str) -> None:
    """export.py refuses non-finite weights when it writes; a file changed since is
    refused here, naming the weight, rather than giving NaN logits without a word."""
    for name, t in weights.items():
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise ValueError(f"{where}: weight {name} holds non-finite values (NaN or inf); re-export the checkpoint")


def load_export(folder: str | pathlib.Path, dtype: torch.dtype = torch.float32) -> ExportedGPT:
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    folder = pathlib.Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such export folder (expected config.json and model.safetensors)")
    missing = [n for n in ("config.json", "model.safetensors") if not (folder / n).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder}: the export lacks {' and '.join(missing)} (scripts/eval/export.py writes "
                                "both)")
    try:
        config = json.loads((folder / "config.json").read_text())
    except ValueError as e:
        raise ValueError(f"{folder / 'config.json'}: not valid JSON ({e})") from None
    if not isinstance(config, dict) or config.get("format") != "xsagpt-safetensors" or "conventions" not in config:
        raise ValueError(f"{folder / 'config.json'}: not an xsagpt export with conventions (re-export it with "
                         "scripts/eval/export.py)")
    try:
        raw = load_file(str(folder / "model.safetensors"))
    except SafetensorError as e:  # a file cut short, or not safetensors at all
        raise ValueError(f"{folder / 'model.safetensors'}: not a whole safetensors file ({e}); re-export the "
                         "checkpoint with scripts/eval/export.py") from None
    check_finite(raw, str(folder / "model.safetensors"))
    weights = {k: v.to(dtype) for k, v in raw.items()}
    model = ExportedGPT(config["conventions"], weights).eval()
    model.vocab = compact_vocab(config, weights["transformer.wte.weight"].size(0))  # None: GPT-2 ids
    return model


@torch.no_grad()
def logprob(model: ExportedGPT, context_ids: list[int], continuation_ids: list[int]) -> float:
    """Summed log p(continuation | context), the input cut on the left to the window."""
    inp = (context_ids + continuation_ids)[-(model.conv["block_size"] + 1):][:-1]
    logits = model(torch.tensor([inp]))[0, len(inp) - len(continuation_ids):]
    lp = F.log_softmax(logits.double(), dim=-1)  # over the padded vocabulary, as xsagpt does
    return lp.gather(1, torch.tensor(continuation_ids)[:, None]).sum().item()


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit("usage: load_export.py EXPORT_DIR CONTEXT CONTINUATION")
    try:
        model = load_export(sys.argv[1])
        enc = gpt2_encoding()
    except (OSError, ValueError) as e:
        sys.exit(f"load_export.py: error: {e}")
    ctx, cont = sys.argv[2], sys.argv[3]
    cut = len(ctx.rstrip())
    ctx, cont = ctx[:cut], ctx[cut:] + cont
    c = enc.encode(ctx, allowed_special="all") if ctx else [enc.eot_token]
    whole = enc.encode(ctx + cont, allowed_special="all") if ctx else c + enc.encode(cont, allowed_special="all")
    if v := model.vocab:  # compact ids (export.py): GPT-2 tokens outside the table share rest_id
        index = {g: i for i, g in enumerate(v["gpt2_ids"])}
        c, whole = ([index.get(t, v["rest_id"]) for t in x] for x in (c, whole))
    elif model.c.vocab < GPT2_TOKENS:
        sys.exit(f"load_export.py: error: {sys.argv[1]}: the model has {model.c.vocab} token rows and no compact "
                 f"vocabulary, so it was not trained on GPT-2's {GPT2_TOKENS} ids")
    print(logprob(model, c, whole[len(c):]))


if __name__ == "__main__":
    main()
