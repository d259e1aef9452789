"""export.py --format hf: the files of a Hugging Face transformers model folder besides
the weights: config.json as transformers reads it (XsagptConfig's keys), the generation
config, the modeling code copied from scripts/eval/hf/, GPT-2's tokenizer from data/gpt2/
and a model card whose numbers each say where they came from.
"""
from __future__ import annotations

import json
import pathlib
import sys

from export_conventions import GELU_ACTIVATIONS, GPT2_VOCAB, attention_kind  # beside this file

EOT = 50256  # GPT-2's <|endoftext|>
ROOT = pathlib.Path(__file__).resolve().parents[2]
HF_CODE = ROOT / "scripts" / "eval" / "hf"  # configuration_xsagpt.py, modeling_xsagpt.py
GPT2_DIR = ROOT / "data" / "gpt2"  # encoder.json, vocab.bpe: transformers' vocab.json and merges.txt


def hf_config(config: dict) -> dict:
    """config.json for transformers: XsagptConfig's keys (scripts/eval/hf/configuration_xsagpt.py)
    from the model config and its conventions, which travel along as recorded."""
    m, conv = config["model"], config["conventions"]
    return {
        "architectures": ["XsagptForCausalLM"], "model_type": "xsagpt",
        "auto_map": {"AutoConfig": "configuration_xsagpt.XsagptConfig",
                     "AutoModelForCausalLM": "modeling_xsagpt.XsagptForCausalLM"},
        "vocab_size": conv["vocab"]["padded"], "block_size": conv["block_size"],
        "n_layer": int(m.get("n_layer", 12)), "d_model": int(m.get("d_model", 768)),
        "n_head": conv["attention"]["n_head"], "head_dim": conv["attention"]["head_dim"],
        "mlp_hidden": conv["mlp"]["hidden"],
        "hidden_act": {a: hf for a, hf in GELU_ACTIVATIONS.values()}[conv["mlp"]["activation"]],
        "bias": conv["linear_bias"], "norm_eps": conv["norm"]["eps"],
        "rope_theta": conv["rope"]["theta"], "attention": attention_kind(m),
        "xsa_layers": conv["xsa"]["layers"], "xsa_eps": conv["xsa"]["eps"], "xsa_gate": conv["xsa"]["gate"],
        "out_gate_layers": conv.get("out_gate", {}).get("layers", []),
        "out_gate": conv.get("out_gate", {}).get("width", "headwise"),
        "attention_scale": conv["attention"]["score_scale"], "logit_scale": conv["logit_scale"],
        "n_sink": conv["n_sink"], "tie_word_embeddings": conv["tied_embeddings"], "use_cache": True,
        "bos_token_id": EOT, "eos_token_id": EOT, "dtype": config["dtype"],
        "conventions": conv,
        "xsagpt": {k: config[k] for k in ("model", "source", "step", "tokens")},
    }


def last_val_loss(run_dir: pathlib.Path, step: int) -> tuple[float, int] | None:
    """The last val_loss the run logged at or before `step`, with its step."""
    found = None
    try:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        try:
            j = json.loads(line)
        except ValueError:
            continue  # a line cut off by a kill
        if isinstance(j, dict) and isinstance(j.get("val_loss"), (int, float)) and j.get("step", step + 1) <= step:
            found = (float(j["val_loss"]), int(j["step"]))
    return found


def model_card(config: dict, n_params: int, run_dir: pathlib.Path) -> str:
    m, conv = config["model"], config["conventions"]
    layers = conv["xsa"]["layers"]
    n_layer = int(m.get("n_layer", 12))

    def where(ls: list[int]) -> str:
        return "every layer" if len(ls) == n_layer else f"layers {', '.join(map(str, ls))} of {n_layer}"

    if conv.get("out_gate", {}).get("layers"):
        variant = (f"output-gated attention (a sigmoid gate {conv['out_gate']['width']} from the layer's input "
                   f"before the output projection, arXiv 2505.06708) in {where(conv['out_gate']['layers'])}")
    elif not layers:
        variant = "standard causal self attention (SA) in every layer"
    else:
        variant = f"Exclusive Self Attention (XSA) in {where(layers)}"
        if conv["xsa"]["gate"] == "token":
            variant += ", gated per token and head by tanh of a learned linear map of the layer's input"
        elif conv["xsa"]["gate"] != "off":
            variant += f", gated per head by a learned tanh(alpha) (initialised as {conv['xsa']['gate'].upper()})"
    val = last_val_loss(run_dir, config["step"])
    metrics = run_dir / "metrics.jsonl"
    val_line = (f"{val[0]:.4f} nats/token at step {val[1]} (`val_loss` in `{metrics}`)" if val else
                f"not logged (no `val_loss` at or before step {config['step']} in `{metrics}`)")
    head = "tied to the token embedding" if conv["tied_embeddings"] else "its own matrix (untied)"
    return f"""---
library_name: transformers
tags: [xsagpt, exclusive-self-attention, custom_code]
---
# {run_dir.name}

A NanoGPT-style GPT trained with [xsagpt](https://arxiv.org/abs/2603.09078)'s trainer:
{variant}. XSA removes from each head's attention output its component along the
token's own value vector, z_i = y_i - (y_i . v_i) v_i / ||v_i||^2, before the output
projection; it adds no parameters (the gate adds one per head).

```python
from transformers import AutoModelForCausalLM, AutoTokenizer
model = AutoModelForCausalLM.from_pretrained(FOLDER, trust_remote_code=True)
tok = AutoTokenizer.from_pretrained(FOLDER)
```

## Architecture

| | |
|---|---|
| parameters | {n_params / 1e6:.2f}M (stored in {config['dtype']}) |
| layers, width | {n_layer} blocks, d_model {m.get('d_model', 768)}, {conv['attention']['n_head']} heads of {conv['attention']['head_dim']} |
| attention | {variant} |
| positions | RoPE (rotate-half, theta {conv['rope']['theta']:g}) on q and k |
| norms | LayerNorm after the embedding, pre-norm blocks, final LayerNorm (eps {conv['norm']['eps']:g}, bias {str(conv['norm']['bias']).lower()}) |
| MLP | {'exact (erf) GELU' if conv['mlp']['activation'] == 'gelu_exact' else "GELU, GPT-2's tanh approximation"}, hidden {conv['mlp']['hidden']} |
| sinks | {conv['n_sink']} learned sink vectors in front of every sequence |
| LM head | {head}; softmax over the padded vocabulary of {conv['vocab']['padded']} |
| context | {conv['block_size']} tokens |
| tokenizer | GPT-2 (50257 tokens) |

## Training

| | |
|---|---|
| training tokens | {config['tokens']:,} (step {config['step']}) |
| final validation loss | {val_line} |

Where the numbers come from: the checkpoint `{config['source']}` records the step and
the tokens trained on; the validation loss is the run's own `metrics.jsonl`, on its
validation shards (data.val in the run's config.json), as `xsagpt train` measured it.
The exact forward-pass conventions are in config.json under "conventions".
"""


def hf_files(config: dict, n_params: int, run_dir: pathlib.Path) -> dict:
    """The files of a transformers folder besides model.safetensors, by name: each one's
    text. The code and tokenizer files are this repository's own."""
    for f in (HF_CODE / "configuration_xsagpt.py", HF_CODE / "modeling_xsagpt.py", GPT2_DIR / "encoder.json",
              GPT2_DIR / "vocab.bpe"):
        if not f.is_file():
            sys.exit(f"{f}: missing (part of this repository, needed for --format hf)")
    block = config["conventions"]["block_size"]
    return {
        "config.json": json.dumps(hf_config(config), indent=2) + "\n",
        # Greedy and sampled text never holds the padding ids, as in `xsagpt sample`.
        "generation_config.json": json.dumps({"bos_token_id": EOT, "eos_token_id": EOT, "suppress_tokens": list(
            range(GPT2_VOCAB, config["conventions"]["vocab"]["padded"]))}) + "\n",
        "configuration_xsagpt.py": (HF_CODE / "configuration_xsagpt.py").read_text(),
        "modeling_xsagpt.py": (HF_CODE / "modeling_xsagpt.py").read_text(),
        "vocab.json": (GPT2_DIR / "encoder.json").read_text(encoding="utf-8"),
        "merges.txt": (GPT2_DIR / "vocab.bpe").read_text(encoding="utf-8"),
        "tokenizer_config.json": json.dumps({
            "tokenizer_class": "GPT2Tokenizer", "model_max_length": block, "add_prefix_space": False,
            "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}) + "\n",
        "README.md": model_card(config, n_params, run_dir),
    }
