"""The vocabulary of an exported xsagpt model, for load_export.py (which imports it from beside
itself; copy both where xsagpt is not installed): GPT-2's encoding built from local files, and
an export's compact vocabulary (config.json's "vocab", which export.py copies from the
checkpoint) checked before any text is mapped through it."""
from __future__ import annotations

import os
import pathlib

# GPT-2's vocabulary, shipped in data/gpt2/, and the sha256 tiktoken's `gpt2` encoding checks (as data/prepare.py).
GPT2_FILES = {"vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
              "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"}
SHIPPED_VOCAB = pathlib.Path(__file__).resolve().parents[2] / "data" / "gpt2"
GPT2_TOKENS = 50257
COMPACT_FORMAT = "xsagpt compact vocabulary v1"  # a compact vocabulary's "format" (data/compact.py's vocab.json)


def compact_vocab(config: dict, rows: int) -> dict | None:
    """config.json's "vocab" (export.py copies a compact model's mapping there), checked as the
    trainer checks vocab.json (src/data/vocab.h) and against the model: its format, vocab_size K,
    rest_id K-1, K-1 distinct GPT-2 ids, and an embedding of K rows up to K rounded up to a
    multiple of 64 (a mapping cut short no longer fits the model that learned the full one).
    None for an export of GPT-2 ids. ValueError naming the key otherwise: a damaged mapping
    would score other tokens than the model learned, without a word."""
    v, tokenizer = config.get("vocab"), config.get("tokenizer", "gpt2")
    if v is None:
        if tokenizer != "gpt2":
            raise ValueError(f"config.json: \"tokenizer\" is {tokenizer!r} but there is no \"vocab\" (its mapping); "
                             "re-export the checkpoint with scripts/eval/export.py")
        return None

    def refuse(key: str, expected: str):
        x = v.get(key)
        shown = "missing" if key not in v else f"a list of {len(x)}" if isinstance(x, list) and len(x) > 8 else repr(x)
        raise ValueError(f"config.json: vocab.{key} = {shown}: expected {expected}; re-export the checkpoint "
                         "with scripts/eval/export.py")

    if not isinstance(v, dict):
        raise ValueError(f"config.json: \"vocab\" is {type(v).__name__}: expected a compact vocabulary (an object)")
    if tokenizer != "gpt2-compact":
        raise ValueError(f"config.json: \"tokenizer\" is {tokenizer!r} beside a compact \"vocab\": expected "
                         "\"gpt2-compact\"")
    if v.get("format") != COMPACT_FORMAT:
        refuse("format", repr(COMPACT_FORMAT))
    k = v.get("vocab_size")
    if not isinstance(k, int) or isinstance(k, bool) or not 2 <= k <= GPT2_TOKENS:
        refuse("vocab_size", f"an integer K from 2 to {GPT2_TOKENS}")
    padded = (k + 63) // 64 * 64
    if not k <= rows <= padded:
        refuse("vocab_size", f"the K this model was trained on: its embedding has {rows} rows, which fits K from "
                             f"{max(2, (rows - 1) // 64 * 64 + 1)} to {rows}")
    if v.get("rest_id") != k - 1 or isinstance(v.get("rest_id"), bool):
        refuse("rest_id", f"K-1 = {k - 1}")
    ids = v.get("gpt2_ids")
    if not isinstance(ids, list) or len(ids) != k - 1:
        refuse("gpt2_ids", f"a list of K-1 = {k - 1} GPT-2 token ids")
    if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < GPT2_TOKENS for i in ids) \
            or len(set(ids)) != len(ids):
        refuse("gpt2_ids", f"distinct GPT-2 token ids (0 to {GPT2_TOKENS - 1})")
    return v


def gpt2_encoding():
    """tiktoken's `gpt2` encoding built from local files ($XSAGPT_GPT2_VOCAB, else the shipped
    data/gpt2/), never downloaded; ValueError naming where it looked when neither holds them."""
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    from tiktoken_ext.openai_public import ENDOFTEXT, r50k_pat_str  # tiktoken's own gpt2 definition
    env = os.environ.get("XSAGPT_GPT2_VOCAB")
    folder = pathlib.Path(env) if env else SHIPPED_VOCAB
    where = f"XSAGPT_GPT2_VOCAB={env}" if env else str(SHIPPED_VOCAB)
    if missing := [name for name in GPT2_FILES if not (folder / name).is_file()]:
        raise ValueError(f"{where}: no {' or '.join(missing)}; this command downloads nothing: point "
                         "XSAGPT_GPT2_VOCAB at a folder with GPT-2's encoder.json and vocab.bpe (the xsagpt "
                         "repository ships them in data/gpt2/)")
    try:
        ranks = data_gym_to_mergeable_bpe_ranks(
            vocab_bpe_file=str(folder / "vocab.bpe"), encoder_json_file=str(folder / "encoder.json"),
            vocab_bpe_hash=GPT2_FILES["vocab.bpe"], encoder_json_hash=GPT2_FILES["encoder.json"])
    except ValueError as e:  # tiktoken's hash check
        raise ValueError(f"{where}: not GPT-2's vocabulary files ({e})") from None
    return tiktoken.Encoding("gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks, special_tokens={ENDOFTEXT: 50256},
                             explicit_n_vocab=50257)
