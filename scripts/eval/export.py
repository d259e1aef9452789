#!/usr/bin/env python3
"""Export a checkpoint's weights for sharing: model.safetensors + config.json.

    .venv/bin/python scripts/eval/export.py runs/xsa-1.4b                 # newest checkpoint -> runs/xsa-1.4b/export/
    .venv/bin/python scripts/eval/export.py runs/X/checkpoints/step_00200000.pt --out share/xsa-1.4b --dtype bfloat16

model.safetensors holds the parameters under their nanoGPT-style names
(transformer.wte.weight, transformer.h.0.attn.c_attn.weight, ...) and the LM head
as lm_head.weight; with a tied head (model.tie_embeddings true; the default is
untied) lm_head.weight is the embedding matrix and is stored once, as
transformer.wte.weight. No optimizer state, no RoPE tables (they
follow from the config). config.json holds the model section of the run config
under "model" (the architecture: sizes, "attention", "xsa_layers", "xsa_gate", ...), under
"conventions" everything else the forward pass depends on (RoPE layout and theta,
where the norms sit, the GELU (exact or tanh), the XSA epsilon and layers, padded and real
vocabulary, tied or untied head, sinks), plus where the weights came from. The same
conventions are in the safetensors metadata (xsagpt.* keys). scripts/eval/load_export.py
rebuilds the model from these two files alone, in plain PyTorch:

    from load_export import load_export             # run beside it (scripts/eval/), or copy load_export.py anywhere
    model = load_export("share/xsa-1.4b")          # float32, eval mode
    logits = model(idx)                             # idx: int64 (B, T) GPT-2 token ids, T <= block_size

With --format hf the folder is a Hugging Face transformers model instead, which
`AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)` loads with no
other file (and lm-eval's `hf` model evaluates): the same model.safetensors, a
config.json transformers reads (model_type "xsagpt", auto_map, the layers with XSA
resolved, the conventions as above), configuration_xsagpt.py and modeling_xsagpt.py
(copied from scripts/eval/hf/), generation_config.json (greedy over GPT-2's 50257 real ids),
GPT-2's tokenizer from data/gpt2/ (vocab.json, merges.txt, tokenizer_config.json) and a
model card, README.md: architecture, attention, training tokens and the last val loss
in the run's metrics.jsonl, each with where it came from.

    .venv/bin/python scripts/eval/export.py runs/xsa-1.4b --format hf --out share/xsa-1.4b-hf

The checkpoint gets the verdict xsagpt's own commands give it, in their words, before
anything is written: a directory or an empty file is refused, and a zip archive is held to
src/util/zip_check.cpp's rule by its twin zip_check.py (end records that agree, a
directory where they say, every record stored, named alike in both places the zip format
names it, and matching its CRC); then the format, and every parameter the model config
needs present with its shape (and no weight it has no parameter for), by load_export.py's
rule for an export's tensors; weights with NaN or inf (or beyond --dtype's range) are
refused. An --out that cannot be written (read-only, full, a file) is a one-line error,
and leaves what was there. Files get the user's umask, as any other file they write.
Existing files are replaced only with --force, and only once the new ones are
complete (written beside them, then renamed).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

import torch
from safetensors.torch import save_file

import zip_check  # beside this file
from load_export import Conventions, expected_shapes, weight_mismatch  # the loader's rule for an export's tensors

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DERIVED = ("rope_cos", "rope_sin")  # recomputed from the config
GPT2_VOCAB = 50257  # the tokenizer's real vocabulary; model.vocab_size pads it
EOT = 50256  # GPT-2's <|endoftext|>
ROOT = pathlib.Path(__file__).resolve().parents[2]
HF_CODE = ROOT / "scripts" / "eval" / "hf"  # configuration_xsagpt.py, modeling_xsagpt.py
GPT2_DIR = ROOT / "data" / "gpt2"  # encoder.json, vocab.bpe: transformers' vocab.json and merges.txt


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


def conventions(m: dict) -> dict:
    """Everything besides the weights that the forward pass depends on, as the C++ model
    (src/model/) implements it, so that scripts/eval/load_export.py, or anyone, can rebuild it
    from the export alone. Defaults are src/config/model_config.h's."""
    xsa_layers = step_layer_indices(m, "xsa")
    kind = attention_kind(m)
    token_gate = kind in SELECTS_LAYERS and kind != "xsa"  # XSA's step gated per token
    activation = GELU_ACTIVATIONS[gelu_kind(m)][0]
    d_model = int(m.get("d_model", 768))
    return {
        "embedding": "wte(idx), n_sink learned sink vectors (transformer.sink) prepended, then LayerNorm ln_e",
        "block": "pre-norm: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))",
        "head": "logits = lm_head(ln_f(x)) at the token positions (sinks predict nothing)",
        "norm": {"type": "layernorm", "eps": float(m.get("norm_eps", 1e-5)), "bias": bool(m.get("bias", False))},
        "linear_bias": bool(m.get("bias", False)),
        "attention": {"qkv": "c_attn, one matrix, output split q|k|v along the last dim, heads contiguous",
                      "n_head": int(m.get("n_head", 12)), "head_dim": int(m.get("head_dim", 64)),
                      "scale": "1/sqrt(head_dim)", "causal": True},
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


def _flat(prefix: str, value, out: dict) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(f"{prefix}.{k}" if prefix else k, v, out)
    else:
        out[prefix] = value if isinstance(value, str) else json.dumps(value)


def checkpoint_step(path: pathlib.Path) -> int:
    """The step a checkpoint's name gives (step_XXXXXXXX.pt), or -1 for any other name:
    the names xsagpt's commands take for checkpoints (src/run/checkpoint.cpp)."""
    digits = path.name[len("step_"):-len(".pt")] if path.name.startswith("step_") and path.name.endswith(".pt") else ""
    return int(digits) if digits.isascii() and digits.isdigit() and len(digits) <= 18 else -1


def find_checkpoint(path: pathlib.Path) -> pathlib.Path:
    """A checkpoint file as given, or a run directory's newest checkpoint by step number,
    as `xsagpt sample` and the others pick it (names past step 99999999 no longer sort as text)."""
    if path.is_dir():
        found = [p for p in (path / "checkpoints").glob("step_*.pt") if checkpoint_step(p) >= 0]
        if not found:
            sys.exit(f"{path}: a directory without checkpoints/step_*.pt")
        return max(found, key=checkpoint_step)
    if not path.is_file():
        sys.exit(f"{path}: no such checkpoint file or run directory")
    return path


def check_archive(path: pathlib.Path) -> None:
    """The verdict xsagpt's own commands give a checkpoint file before reading it
    (src/run/checkpoint.cpp), in their words: a directory, an empty file, and a file
    that breaks the zip rule (zip_check.py, the twin of src/util/zip_check.cpp: end
    records that agree, a directory where they say, every record stored, named alike
    twice and matching its CRC) are refused. torch.load checks none of it and reads a
    flipped byte without a word."""
    if path.is_dir():
        sys.exit(f"{path}: is a directory, expected a checkpoint file (a run's checkpoints/step_XXXXXXXX.pt)")
    also = "; xsagpt's commands refuse it too (they check the same)"
    try:
        if path.stat().st_size == 0:  # torch.load's own word for it is an empty EOFError
            sys.exit(f"{path}: not a readable checkpoint (an empty file, 0 bytes){also}")
        damage = zip_check.zip_damage(path)
    except (zip_check.Unreadable, OSError) as e:
        sys.exit(f"{path}: not a readable checkpoint: {(e.strerror if isinstance(e, OSError) else None) or e}{also}")
    if damage:
        sys.exit(f"{path}: corrupt checkpoint, its bytes changed since it was written: {damage}{also}. Use an "
                 "earlier checkpoint")


def load(path: pathlib.Path) -> dict:
    check_archive(path)
    try:  # memory-mapped: a 2.7B checkpoint's optimizer state is never read
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except (RuntimeError, ValueError):
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001  any unreadable file gets the same message
            sys.exit(f"{path}: not a readable checkpoint ({str(e) or type(e).__name__})")


def check_weights(path: pathlib.Path, weights: dict, m: dict, conv: dict) -> None:
    """Names and shapes against the model config, before anything is written, by the
    rule load_export.py applies to what it reads (the tensors a model of these
    conventions has): a missing or misshapen weight would surface only later, as a
    KeyError or a size-mismatch report in transformers."""
    if not isinstance(weights, dict) or not all(isinstance(t, torch.Tensor) for t in weights.values()):
        sys.exit(f"{path}: not an xsagpt checkpoint ('model' is not a dict of tensors)")
    try:  # the conventions written from a config xsagpt validated hold; a hand-edited one may not
        want = expected_shapes(Conventions(conv, int(m.get("n_layer", 12))), int(m.get("d_model", 768)))
    except ValueError as e:
        sys.exit(f"{path}: its model config gives {e}: not exported")
    tied = conv["tied_embeddings"]  # the checkpoint holds the tied head under both names
    stored = {k: t for k, t in weights.items() if k not in DERIVED and not (tied and k == "lm_head.weight")}
    bad = weight_mismatch(stored, want, "the model config")
    if bad:
        sys.exit(f"{path}: {bad}: not exported")


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


def export(ckpt_path: pathlib.Path, out: pathlib.Path, dtype: torch.dtype, force: bool, fmt: str = "safetensors",
           run_dir: pathlib.Path | None = None) -> None:
    ck = load(ckpt_path)
    if not isinstance(ck, dict) or "model" not in ck or not isinstance(ck.get("config"), dict) \
            or not isinstance(ck["config"].get("model"), dict):
        sys.exit(f"{ckpt_path}: not an xsagpt checkpoint (expected 'model' weights and config.model)")
    if ck.get("format") != "xsagpt-checkpoint" or ck.get("version") != 1:
        sys.exit(f"{ckpt_path}: not an xsagpt checkpoint of version 1 (format {ck.get('format')!r}, version "
                 f"{ck.get('version')!r})")
    model_cfg = ck["config"]["model"]
    check_weights(ckpt_path, ck["model"], model_cfg, conventions(model_cfg))
    tied = model_cfg.get("tie_embeddings", False)
    tensors = {}
    for name, t in ck["model"].items():
        if name in DERIVED or (tied and name == "lm_head.weight"):
            continue
        if t.is_floating_point() and not torch.isfinite(t).all():
            sys.exit(f"{ckpt_path}: weight {name} holds non-finite values (NaN or inf): not exported")
        tensors[name] = (t.to(dtype) if t.is_floating_point() else t).contiguous().clone()
        if t.is_floating_point() and not torch.isfinite(tensors[name]).all():
            sys.exit(f"{ckpt_path}: weight {name} overflows {str(dtype).removeprefix('torch.')} (values beyond "
                     f"its range): not exported; choose another --dtype")
    if "transformer.wte.weight" not in tensors:
        sys.exit(f"{ckpt_path}: checkpoint has no transformer.wte.weight")
    config = {
        "format": "xsagpt-safetensors", "version": 1,
        "model": model_cfg,
        "conventions": conventions(model_cfg),
        "dtype": str(dtype).removeprefix("torch."),
        "tokenizer": "gpt2",
        "source": str(ckpt_path), "step": int(ck.get("step", 0)), "tokens": int(ck.get("tokens", 0)),
    }
    n = sum(t.numel() for t in tensors.values())
    # The conventions travel inside the weights file too (safetensors metadata is str -> str).
    metadata = {"format": "pt", "xsagpt.format": config["format"], "xsagpt.model": json.dumps(model_cfg)}
    _flat("xsagpt", config["conventions"], metadata)
    files = {"model.safetensors": lambda p: save_file(tensors, str(p), metadata=metadata)}
    if fmt == "safetensors":
        files["config.json"] = json.dumps(config, indent=2) + "\n"
    else:
        for f in (HF_CODE / "configuration_xsagpt.py", HF_CODE / "modeling_xsagpt.py", GPT2_DIR / "encoder.json",
                  GPT2_DIR / "vocab.bpe"):
            if not f.is_file():
                sys.exit(f"{f}: missing (part of this repository, needed for --format hf)")
        block = config["conventions"]["block_size"]
        files.update({
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
            "README.md": model_card(config, n, run_dir or ckpt_path.parent),
        })
    targets = [out / name for name in files]
    if out.exists() and not out.is_dir():
        sys.exit(f"--out {out}: is a file, expected a folder for the export")
    if not force and any(p.exists() for p in targets):
        sys.exit(f"{out}: already holds an export ({', '.join(p.name for p in targets if p.exists())}); "
                 "pass --force to replace it")
    umask = os.umask(0)
    os.umask(umask)
    tmp = [p.with_name(p.name + ".tmp") for p in targets]
    try:
        out.mkdir(parents=True, exist_ok=True)
        for t, content in zip(tmp, files.values()):
            if callable(content):
                content(t)
            else:
                t.write_text(content, encoding="utf-8")
            os.chmod(t, 0o666 & ~umask)  # as any file the user writes (safetensors creates it 0600)
    except Exception as e:  # noqa: BLE001  unwritable, read-only, full (safetensors raises its own error type)
        for t in tmp:
            try:
                t.unlink(missing_ok=True)
            except OSError:
                pass  # never made: the folder is not there to hold it
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        sys.exit(f"--out {out}: cannot write the export ({why}); nothing there was replaced")
    for t, p in zip(tmp, targets):
        os.replace(t, p)
    print(f"{ckpt_path} (step {config['step']}) -> {out}/ ({n / 1e6:.2f}M parameters, {config['dtype']}): "
          f"{', '.join(files)}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", type=pathlib.Path, help="checkpoint file, or a run directory (its newest checkpoint)")
    ap.add_argument("--out", type=pathlib.Path, help="output folder (default: RUN/export)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float32", help="dtype of the stored weights")
    ap.add_argument("--format", choices=["safetensors", "hf"], default="safetensors",
                    help="safetensors: weights + config.json; hf: a transformers model folder (trust_remote_code)")
    ap.add_argument("--force", action="store_true", help="replace an existing export in --out")
    args = ap.parse_args(argv)
    ckpt = find_checkpoint(args.checkpoint)
    run_dir = ckpt.parent.parent if ckpt.parent.name == "checkpoints" else ckpt.parent
    default = run_dir / ("export-hf" if args.format == "hf" else "export")
    export(ckpt, args.out or default, DTYPES[args.dtype], args.force, args.format, run_dir)


if __name__ == "__main__":
    main()
