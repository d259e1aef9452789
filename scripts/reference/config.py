"""The reference model's configuration: the `model` section of a run config read and
checked as src/config/ reads it (GPTConfig), the attention kinds with the keys each owns,
and what each layer computes (LayerStep). Apart from model.py, which builds the model
from it, so that the modules there read as the architecture alone.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Mapping, Optional


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
# model.parametrization's values (src/config/model_config.h): standard, or μP (Tensor
# Programs V), whose rules the reference applies by PARAMETRIZATION's multipliers and
# the hidden matrices below.
PARAMETRIZATIONS = ("sp", "mup")
# Per kind, the parameters its step adds that μP treats as hidden matrices (their start
# over sqrt(m), their AdamW rate over m): the projections a gate reads the token through.
# Per-head gates and biases are vector-like. Spelled here from the kinds' formulas, apart
# from the C++ rows' declarations, so that a test comparing the two can fail.
MUP_HIDDEN_STEP_PARAMETERS = {
    "sa": (),
    "xsa": (),
    "gated": ("out_gate",),
    "xsa_token": ("xsa_token_gate",),
}
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
    parametrization: str = "sp"  # "sp" | "mup"
    mup_base_width: int = 256  # under mup: the d_model at which the model is its sp twin
    mup_base_head_dim: int = 0  # under mup: the base model's head size (0: head_dim)

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

    @property
    def width_multiplier(self) -> float:
        """μP's m = d_model / mup_base_width; 1 under sp."""
        return self.d_model / self.mup_base_width if self.parametrization == "mup" else 1.0

    @property
    def attention_scale(self) -> float:
        """q.k's factor: 1/sqrt(head_dim); under mup 1/head_dim times sqrt(base head size), the
        constant that makes it SP's at the base (as the mup package's 8/d is at d = 64)."""
        if self.parametrization != "mup":
            return 1.0 / math.sqrt(self.head_dim)
        return math.sqrt(self.mup_base_head_dim or self.head_dim) / self.head_dim

    def mup_hidden(self, name: str) -> bool:
        """Whether parameter `name` is a hidden matrix to μP: a block's q/k/v, attention output
        and MLP matrices, and the kind's parameters MUP_HIDDEN_STEP_PARAMETERS names."""
        m = re.fullmatch(r"transformer\.h\.\d+\.(attn|mlp)\.(\w+)(\.weight)?", name)
        if not m:
            return False  # outside the blocks, norms, biases
        module, param, weight = m.groups()
        if weight:
            return param in ("c_attn", "c_proj", "c_fc")
        return module == "attn" and param in MUP_HIDDEN_STEP_PARAMETERS[self.attention]

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
        if self.parametrization not in PARAMETRIZATIONS:
            raise ValueError(f"{where}.parametrization: expected one of {PARAMETRIZATIONS}, got {self.parametrization!r}")
        if not self.mup_base_width > 0 or self.mup_base_head_dim < 0:
            raise ValueError(f"{where}.mup_base_width/mup_base_head_dim: expected > 0 and >= 0, got "
                             f"{self.mup_base_width!r}, {self.mup_base_head_dim!r}")
        if self.xsa_gate not in XSA_GATES:
            raise ValueError(f"{where}.xsa_gate: expected one of {XSA_GATES}, got {self.xsa_gate!r}")
        if not (isinstance(self.n_sink, int) and self.n_sink >= 0):
            raise ValueError(f"{where}.n_sink: must be >= 0, got {self.n_sink!r}")
