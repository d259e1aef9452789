#!/usr/bin/env python3
"""Export a checkpoint's weights for sharing: model.safetensors + config.json.

    .venv/bin/python scripts/export.py runs/xsa-1.4b                 # newest checkpoint -> runs/xsa-1.4b/export/
    .venv/bin/python scripts/export.py runs/X/checkpoints/step_00200000.pt --out share/xsa-1.4b --dtype bfloat16

model.safetensors holds the parameters under their nanoGPT-style names
(transformer.wte.weight, transformer.h.0.attn.c_attn.weight, ...) and the LM head
as lm_head.weight; with a tied head (model.tie_embeddings true; the default is
untied) lm_head.weight is the embedding matrix and is stored once, as
transformer.wte.weight. No optimizer state, no RoPE tables (they
follow from the config). config.json holds the model section of the run config
under "model" (the architecture: sizes, "attention": "sa" or "xsa", ...), under
"conventions" everything else the forward pass depends on (RoPE layout and theta,
where the norms sit, exact GELU, the XSA epsilon and layers, padded and real
vocabulary, tied or untied head, sinks), plus where the weights came from. The same
conventions are in the safetensors metadata (xsagpt.* keys). scripts/load_export.py
rebuilds the model from these two files alone, in plain PyTorch:

    import sys; sys.path.insert(0, "scripts")
    from load_export import load_export
    model = load_export("share/xsa-1.4b")          # float32, eval mode
    logits = model(idx)                             # idx: int64 (B, T) GPT-2 token ids, T <= block_size

Weights with NaN or inf (or beyond --dtype's range) are refused. Files get the
user's umask, as any other file they write.
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

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DERIVED = ("rope_cos", "rope_sin")  # recomputed from the config
GPT2_VOCAB = 50257  # the tokenizer's real vocabulary; model.vocab_size pads it


def conventions(m: dict) -> dict:
    """Everything besides the weights that the forward pass depends on, as the C++ model
    (src/model/) implements it, so that scripts/load_export.py, or anyone, can rebuild it
    from the export alone. Defaults are src/config/model_config.h's."""
    n_layer = int(m.get("n_layer", 12))
    xl = m.get("xsa_layers")
    if m.get("attention", "sa") != "xsa":
        xsa_layers = []
    elif xl is None:
        xsa_layers = list(range(n_layer))
    elif isinstance(xl, str):
        xsa_layers = list(range(n_layer - int(xl[len("last "):]), n_layer))
    else:
        xsa_layers = sorted(int(i) for i in xl)
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
                "gate": m.get("xsa_gate", "off"), "gate_value": "g = tanh(attn.xsa_gate[h]) when gate != off, else 1"},
        "mlp": {"activation": "gelu_exact", "hidden": int(float(m.get("mlp_ratio", 4.0)) * d_model)},
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


def find_checkpoint(path: pathlib.Path) -> pathlib.Path:
    if path.is_dir():
        found = sorted((path / "checkpoints").glob("step_*.pt"))
        if not found:
            sys.exit(f"{path}: a directory without checkpoints/step_*.pt")
        return found[-1]
    if not path.is_file():
        sys.exit(f"{path}: no such checkpoint file or run directory")
    return path


def load(path: pathlib.Path) -> dict:
    try:  # memory-mapped: a 2.7B checkpoint's optimizer state is never read
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except (RuntimeError, ValueError):
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001  any unreadable file gets the same message
            sys.exit(f"{path}: not a readable checkpoint ({e})")


def export(ckpt_path: pathlib.Path, out: pathlib.Path, dtype: torch.dtype, force: bool) -> None:
    ck = load(ckpt_path)
    if not isinstance(ck, dict) or "model" not in ck or not isinstance(ck.get("config"), dict) \
            or not isinstance(ck["config"].get("model"), dict):
        sys.exit(f"{ckpt_path}: not an xsagpt checkpoint (expected 'model' weights and config.model)")
    model_cfg = ck["config"]["model"]
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
    targets = [out / "model.safetensors", out / "config.json"]
    if not force and any(p.exists() for p in targets):
        sys.exit(f"{out}: already holds an export (model.safetensors/config.json); pass --force to replace it")
    out.mkdir(parents=True, exist_ok=True)
    config = {
        "format": "xsagpt-safetensors", "version": 1,
        "model": model_cfg,
        "conventions": conventions(model_cfg),
        "dtype": str(dtype).removeprefix("torch."),
        "tokenizer": "gpt2",
        "source": str(ckpt_path), "step": int(ck.get("step", 0)), "tokens": int(ck.get("tokens", 0)),
    }
    tmp = [p.with_name(p.name + ".tmp") for p in targets]
    # The conventions travel inside the weights file too (safetensors metadata is str -> str).
    metadata = {"format": "pt", "xsagpt.format": config["format"], "xsagpt.model": json.dumps(model_cfg)}
    _flat("xsagpt", config["conventions"], metadata)
    save_file(tensors, str(tmp[0]), metadata=metadata)
    tmp[1].write_text(json.dumps(config, indent=2) + "\n")
    umask = os.umask(0)
    os.umask(umask)
    for t, p in zip(tmp, targets):
        os.chmod(t, 0o666 & ~umask)  # as any file the user writes (safetensors creates it 0600)
        os.replace(t, p)
    n = sum(t.numel() for t in tensors.values())
    print(f"{ckpt_path} (step {config['step']}) -> {targets[0]} ({n / 1e6:.2f}M parameters, {config['dtype']}), "
          f"{targets[1]}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", type=pathlib.Path, help="checkpoint file, or a run directory (its newest checkpoint)")
    ap.add_argument("--out", type=pathlib.Path, help="output folder (default: RUN/export)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float32", help="dtype of the stored weights")
    ap.add_argument("--force", action="store_true", help="replace an existing export in --out")
    args = ap.parse_args(argv)
    ckpt = find_checkpoint(args.checkpoint)
    run_dir = ckpt.parent.parent if ckpt.parent.name == "checkpoints" else ckpt.parent
    export(ckpt, args.out or run_dir / "export", DTYPES[args.dtype], args.force)


if __name__ == "__main__":
    main()
