"""A training step's FLOPs per token counted by hand from each attention kind's formula
(docs/sweeps-and-plots.md#attention-kinds), independently of src/model/counts.cpp, for
tests/python/config/test_info.py to hold `xsagpt info --json`'s flops_per_token to.

The convention is the one `xsagpt info` states (PaLM, appendix B): 6 FLOPs per token for
every parameter of a matrix product, the linear layers' biases included (2 forward, 4
backward), plus attention's 12 * n_layer * inner_dim * T; elementwise work (norms,
GELU, softmax, XSA's projection onto v, a sigmoid) is not counted. A kind's own
products are its step's matrices, in each layer that takes the step.
"""
import dataclasses

@dataclasses.dataclass(frozen=True)
class Model:
    """The model keys the count reads, with src/config/model_config.h's defaults."""
    n_layer: int
    d_model: int
    n_head: int
    head_dim: int
    vocab_size: int
    mlp_ratio: float = 4.0
    bias: bool = False
    out_gate: str = "headwise"

    @classmethod
    def from_config(cls, m: dict) -> "Model":
        keys = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in m.items() if k in keys and v is not None})


def sa_flops(m: Model, seq_len: int) -> float:
    """Standard attention: every block's qkv, output and MLP products and the LM head."""
    d, inner, hidden, b = m.d_model, m.n_head * m.head_dim, int(m.mlp_ratio * m.d_model), int(m.bias)
    block = (d + b) * 3 * inner + (inner + b) * d + (d + b) * hidden + (hidden + b) * d
    return 6.0 * (m.n_layer * block + m.vocab_size * d) + 12.0 * m.n_layer * inner * seq_len


# Each kind's own matrix-product parameters per layer that takes its step (the forward's
# products x . w read from the layer's input x of width d_model).
STEP_MATMUL = {
    "sa": lambda m: 0,  # no step
    "xsa": lambda m: 0,  # z = y - g (y . v^) v^: per-head dot products and a scale, g one number per head
    # sigmoid(x . w), w a row per head (headwise) or per channel (elementwise)
    "gated": lambda m: (m.n_head * m.head_dim if m.out_gate == "elementwise" else m.n_head) * m.d_model,
    "xsa_token": lambda m: m.n_head * m.d_model + m.n_head,  # tanh(x . w_h + b_h): a linear layer with its bias
}


def flops_per_token(kind: str, config: dict, seq_len: int, step_layers: int) -> float:
    """A model of this kind and config whose step is in `step_layers` layers: SA's count
    plus the kind's own products."""
    m = Model.from_config(config)
    return sa_flops(m, seq_len) + 6.0 * STEP_MATMUL[kind](m) * step_layers
