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
under "model" (the architecture: sizes, "attention": "sa" or "xsa", ...) plus where
the weights came from. Loading them back in PyTorch, with the architecture written
out in plain PyTorch in tests/reference/model.py:

    import json, sys
    from safetensors.torch import load_file
    sys.path.insert(0, "tests")                      # the xsagpt repository's tests/ folder
    from reference.model import GPT
    model = GPT.from_checkpoint_dict({"model": load_file("share/xsa-1.4b/model.safetensors"),
                                      "config": json.load(open("share/xsa-1.4b/config.json"))})
    logits, _ = model(idx)                          # idx: int64 (B, T) GPT-2 token ids, T <= block_size

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
        tensors[name] = (t.to(dtype) if t.is_floating_point() else t).contiguous().clone()
    if "transformer.wte.weight" not in tensors:
        sys.exit(f"{ckpt_path}: checkpoint has no transformer.wte.weight")
    targets = [out / "model.safetensors", out / "config.json"]
    if not force and any(p.exists() for p in targets):
        sys.exit(f"{out}: already holds an export (model.safetensors/config.json); pass --force to replace it")
    out.mkdir(parents=True, exist_ok=True)
    config = {
        "format": "xsagpt-safetensors", "version": 1,
        "model": model_cfg,
        "dtype": str(dtype).removeprefix("torch."),
        "tokenizer": "gpt2",
        "source": str(ckpt_path), "step": int(ck.get("step", 0)), "tokens": int(ck.get("tokens", 0)),
    }
    tmp = [p.with_name(p.name + ".tmp") for p in targets]
    save_file(tensors, str(tmp[0]), metadata={"format": "pt"})
    tmp[1].write_text(json.dumps(config, indent=2) + "\n")
    for t, p in zip(tmp, targets):
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
