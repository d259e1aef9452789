#!/usr/bin/env python3
"""Rebuild an exported xsagpt model (scripts/eval/export.py: model.safetensors + config.json)
in plain PyTorch, from the export alone: the architecture is read from config.json's
"conventions", not from this repository's C++ or its tests, so the export can be used
where xsagpt is not installed. A convention this loader does not implement is refused
by name rather than guessed.

    from load_export import load_export
    model = load_export("share/xsa-1.4b")                 # nn.Module, float32, eval mode
    logits = model(torch.tensor([[464, 3139, 286]]))      # (B, T, padded vocab)

    .venv/bin/python scripts/eval/load_export.py share/xsa-1.4b "In the beginning" " God"
    # log p(" God" | "In the beginning") with tiktoken's GPT-2 split, as `xsagpt score` computes it
"""
from __future__ import annotations

import json
import math
import pathlib
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

SUPPORTED = {("rope", "layout"): ("rotate_half",), ("mlp", "activation"): ("gelu_exact", "gelu_tanh"),
             ("norm", "type"): ("layernorm",)}
# conventions.mlp.activation as F.gelu's `approximate`: erf's GELU or GPT-2's tanh approximation.
GELU_APPROXIMATE = {"gelu_exact": "none", "gelu_tanh": "tanh"}
# conventions.xsa.gate: no gate, the start of a learned one per head, or one per token
GATE_STARTS = ("off", "sa", "xsa", "token")
OUT_GATE_WIDTHS = ("headwise", "elementwise")  # conventions.out_gate.width


class LayerAttention:
    """What one attention layer computes, read once from the conventions (which layers
    have XSA's step and how it is gated, which the output gate) and checked against the
    weights: a gate the conventions name must be there, and one they do not must not be."""

    def __init__(self, conv: dict, weights: dict, layer: int):
        self.xsa = layer in conv["xsa"]["layers"]
        self.out_gated = layer in conv.get("out_gate", {}).get("layers", [])
        p = f"transformer.h.{layer}.attn"
        self.gate_key, self.out_key = f"{p}.xsa_gate", f"{p}.out_gate"
        self.token_keys = (f"{p}.xsa_token_gate", f"{p}.xsa_token_gate_bias")
        self.gated = self.xsa and conv["xsa"]["gate"] not in ("off", "token")
        self.token = self.xsa and conv["xsa"]["gate"] == "token"
        gates = [((self.gate_key,), self.gated, "an XSA gate per head"),
                 (self.token_keys, self.token, "an XSA gate per token"),
                 ((self.out_key,), self.out_gated, "an output gate")]
        for keys, used, what in gates:
            for key in keys:
                if used and key not in weights:
                    raise ValueError(f"conventions: layer {layer} has {what} but the weights have no {key}")
                if not used and key in weights:
                    raise ValueError(f"{key}: in the weights, but the conventions give layer {layer} no such gate")

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


def _linear(w: dict, name: str, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, w[f"{name}.weight"], w.get(f"{name}.bias"))


def _norm(w: dict, name: str, x: torch.Tensor, eps: float) -> torch.Tensor:
    return F.layer_norm(x, (x.size(-1),), w[f"{name}.weight"], w.get(f"{name}.bias"), eps)


class ExportedGPT(nn.Module):
    def __init__(self, conv: dict, weights: dict[str, torch.Tensor]):
        super().__init__()
        for (section, key), known in SUPPORTED.items():
            if conv[section][key] not in known:
                raise ValueError(f"conventions.{section}.{key} = {conv[section][key]!r}: this loader implements "
                                 f"{' or '.join(map(repr, known))}")
        if conv["xsa"]["gate"] not in GATE_STARTS:
            raise ValueError(f"conventions.xsa.gate = {conv['xsa']['gate']!r}: this loader implements {GATE_STARTS}")
        if "out_gate" in conv and conv["out_gate"]["width"] not in OUT_GATE_WIDTHS:
            raise ValueError(f"conventions.out_gate.width = {conv['out_gate']['width']!r}: this loader implements "
                             f"{OUT_GATE_WIDTHS}")
        self.conv = conv
        self.w = dict(weights)  # by their exported names; nothing here is trained
        att, rope = conv["attention"], conv["rope"]
        self.n_head, self.head_dim = att["n_head"], att["head_dim"]
        n = conv["n_sink"] + conv["block_size"]
        inv = rope["theta"] ** (-torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim)
        ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
        ang = torch.cat([ang, ang], dim=-1)
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)
        self.n_layer = 1 + max([int(k.split(".")[2]) for k in weights if k.startswith("transformer.h.")], default=-1)
        outside = [i for i in conv["xsa"]["layers"] + conv.get("out_gate", {}).get("layers", [])
                   if not 0 <= i < self.n_layer]
        if outside:
            raise ValueError(f"conventions.xsa.layers: {outside} outside the {self.n_layer} layers of the weights")
        self.layers = [LayerAttention(conv, self.w, i) for i in range(self.n_layer)]

    def _rope(self, x: torch.Tensor, T: int) -> torch.Tensor:
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        c, w = self.conv, self.w
        eps = c["norm"]["eps"]
        B, T = idx.shape
        if T > c["block_size"]:
            raise ValueError(f"{T} tokens: the model sees at most block_size = {c['block_size']}")
        S = c["n_sink"]
        x = F.embedding(idx, w["transformer.wte.weight"])
        if S:
            x = torch.cat([w["transformer.sink"].expand(B, S, -1), x], dim=1)
        x = _norm(w, "transformer.ln_e", x, eps)
        L, H, D = S + T, self.n_head, self.head_dim
        for i in range(self.n_layer):
            p = f"transformer.h.{i}"
            h = _norm(w, f"{p}.ln_1", x, eps)
            q, k, v = (t.view(B, L, H, D).transpose(1, 2) for t in _linear(w, f"{p}.attn.c_attn", h).split(H * D, -1))
            q, k = self._rope(q, L), self._rope(k, L)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / math.sqrt(D))
            if self.layers[i].xsa:
                y = self.layers[i].exclude_self(y, v, h, c["xsa"]["eps"], w)
            if self.layers[i].out_gated:
                y = self.layers[i].out_gate(y, h, w)
            x = x + _linear(w, f"{p}.attn.c_proj", y.transpose(1, 2).reshape(B, L, H * D))
            h = _norm(w, f"{p}.ln_2", x, eps)
            gelu = GELU_APPROXIMATE[c["mlp"]["activation"]]
            x = x + _linear(w, f"{p}.mlp.c_proj", F.gelu(_linear(w, f"{p}.mlp.c_fc", h), approximate=gelu))
        head = w["transformer.wte.weight"] if c["tied_embeddings"] else w["lm_head.weight"]
        return F.linear(_norm(w, "transformer.ln_f", x[:, S:], eps), head)


def check_finite(weights: dict[str, torch.Tensor], where: str) -> None:
    """export.py refuses non-finite weights when it writes; a file changed since is
    refused here, naming the weight, rather than giving NaN logits without a word."""
    for name, t in weights.items():
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise ValueError(f"{where}: weight {name} holds non-finite values (NaN or inf); re-export the checkpoint")


def load_export(folder: str | pathlib.Path, dtype: torch.dtype = torch.float32) -> ExportedGPT:
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
    raw = load_file(str(folder / "model.safetensors"))
    check_finite(raw, str(folder / "model.safetensors"))
    weights = {k: v.to(dtype) for k, v in raw.items()}
    return ExportedGPT(config["conventions"], weights).eval()


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
    import tiktoken
    enc = tiktoken.get_encoding("gpt2")
    try:
        model = load_export(sys.argv[1])
    except (OSError, ValueError) as e:
        sys.exit(f"load_export.py: error: {e}")
    ctx, cont = sys.argv[2], sys.argv[3]
    cut = len(ctx.rstrip())
    ctx, cont = ctx[:cut], ctx[cut:] + cont
    c = enc.encode(ctx, allowed_special="all") if ctx else [enc.eot_token]
    whole = enc.encode(ctx + cont, allowed_special="all") if ctx else c + enc.encode(cont, allowed_special="all")
    print(logprob(model, c, whole[len(c):]))


if __name__ == "__main__":
    main()
