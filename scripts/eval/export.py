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

A model trained on a compact vocabulary (data/compact.py) reads other ids: its checkpoint's
mapping goes to config.json as "vocab" (gpt2_ids[i] is the GPT-2 token of id i; rest_id,
which every other token shares, reads as rest_marker) and "tokenizer" is "gpt2-compact";
load_export.py maps text through it. Such a model has no tokenizer for transformers, so
--format hf refuses it.

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
from export_conventions import conventions  # the forward pass's conventions, written beside the weights
from export_hf import hf_files  # --format hf's files
from load_export import Conventions, expected_shapes, weight_mismatch  # the loader's rule for an export's tensors

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DERIVED = ("rope_cos", "rope_sin")  # recomputed from the config


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
    vocab = ck.get("vocab")  # the compact vocabulary the ids index (src/data/vocab.h); absent: GPT-2 ids
    if vocab is not None and fmt == "hf":
        sys.exit(f"{ckpt_path}: trained on a compact vocabulary of {vocab['vocab_size']} ids, which GPT-2's tokenizer "
                 "files for transformers do not speak: export it with --format safetensors")
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
        "tokenizer": "gpt2" if vocab is None else "gpt2-compact",
        **({} if vocab is None else {"vocab": vocab}),
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
        files.update(hf_files(config, n, run_dir or ckpt_path.parent))
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
