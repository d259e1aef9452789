"""A compact vocabulary for prepared shards: `prepare.py compact SRC --out-dir DST`.

At GPT-2's 50,304 rows the embedding and the LM head are most of a small model's
parameters and much of its compute, so a 2-core CPU spends its budget there instead
of in the blocks. A compact vocabulary keeps the K-1 most frequent GPT-2 tokens of
the source's training shards, each with an id of its own (0 the most frequent; ties
by the lower GPT-2 id), and maps every other token to one shared id, K-1 ("the
rest"). The validation shard is remapped with the same table but never counted, so
the table does not depend on the text the model is scored on.

What DST holds:
  * the source's shards under the same names, every token remapped, with K in the
    llm.c header's fourth int32 (0 there means GPT-2 ids, as llm.c writes it), so a
    shard carried away from its folder is still recognised as compact;
  * vocab.json, the mapping (VOCAB_FORMAT below): "gpt2_ids"[i] is the GPT-2 token of
    compact id i, "rest_id" the shared id, "vocab_size" K, and where it came from.
    The trainer refuses compact shards whose vocab.json is missing or disagrees with
    the header, a shard set mixing vocabularies, and a model.vocab_size that does not
    fit K (src/data/vocab.h); score, sample and the exports read it to decode ids.
vocab.json is written last, so a folder without it was not finished; a rerun with
the same source and K is a no-op, and one that would change finished shards is refused.
"""
from __future__ import annotations

import hashlib
import json
import pathlib

import numpy as np

from shard_format import PrepareError, atomic_write, read_shard, shard_vocab, write_shard

VOCAB_FILE = "vocab.json"
VOCAB_FORMAT = "xsagpt compact vocabulary v1"
GPT2_TOKENS = 50257  # ids 0..50256; the trainer's 50304 is this padded
DEFAULT_SIZE = 2048
REST_MARKER = "<unk>"  # how the shared id prints where text is shown


def count_tokens(paths: list[pathlib.Path]) -> np.ndarray:
    """Occurrences of each GPT-2 id over the shards, one shard in memory at a time."""
    counts = np.zeros(GPT2_TOKENS, dtype=np.int64)
    for p in paths:
        t = read_shard(p)
        if len(t) and t.max() >= GPT2_TOKENS:
            raise PrepareError(f"{p}: token id {int(t.max())} is not a GPT-2 token (expected < {GPT2_TOKENS})")
        counts += np.bincount(t, minlength=GPT2_TOKENS)
    return counts


def compact_ids(counts: np.ndarray, size: int) -> np.ndarray:
    """The GPT-2 id of each compact id below size-1: most frequent first, ties by lower id."""
    return np.argsort(-counts, kind="stable")[: size - 1]


def remap_table(gpt2_ids: np.ndarray, size: int) -> np.ndarray:
    """GPT-2 id -> compact id, over every uint16 value (the rest: size-1)."""
    table = np.full(65536, size - 1, dtype=np.int64)
    table[gpt2_ids] = np.arange(len(gpt2_ids))
    return table


def read_vocab(folder: pathlib.Path) -> dict | None:
    """The mapping of a compact shard folder, checked; None for a folder without vocab.json (GPT-2 ids)."""
    path = pathlib.Path(folder) / VOCAB_FILE
    if not path.is_file():
        return None
    try:
        v = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(v, dict) or v.get("format") != VOCAB_FORMAT:
        raise ValueError(f"{path}: not a compact vocabulary (expected \"format\": \"{VOCAB_FORMAT}\")")
    k, ids = v.get("vocab_size"), v.get("gpt2_ids")
    if not isinstance(k, int) or not isinstance(ids, list) or len(ids) != k - 1 or v.get("rest_id") != k - 1:
        raise ValueError(f"{path}: expected vocab_size K, rest_id K-1 and K-1 gpt2_ids")
    if len(set(ids)) != len(ids) or any(not isinstance(i, int) or not 0 <= i < GPT2_TOKENS for i in ids):
        raise ValueError(f"{path}: gpt2_ids must be distinct GPT-2 token ids (0 to {GPT2_TOKENS - 1})")
    return v


def compact(src: pathlib.Path, out: pathlib.Path, size: int) -> None:
    if not 2 <= size <= GPT2_TOKENS:
        raise PrepareError(f"--vocab-size {size}: expected 2 to {GPT2_TOKENS} (K-1 kept tokens and the rest)")
    if src.resolve() == out.resolve():
        raise PrepareError(f"--out-dir {out}: the source folder itself; choose another")
    shards = sorted(src.glob("*.bin"))
    train = [p for p in shards if p.name.startswith("train_")]
    if not train:
        raise PrepareError(f"{src}: no train_*.bin shards to count the vocabulary on")
    for p in shards:
        try:
            if shard_vocab(p):
                raise PrepareError(f"{p}: already a compact vocabulary of {shard_vocab(p)} ids; "
                                           "compact the GPT-2 shards it was made from")
        except (IndexError, ValueError):
            raise PrepareError(f"{p}: not a token shard written by prepare.py") from None
    digest = hashlib.sha256()
    for p in shards:  # the source by content: names and bytes
        digest.update(p.name.encode() + b"\0" + p.read_bytes())
    source = {"dir": str(src), "shards": [p.name for p in shards], "sha256": digest.hexdigest()}

    old = out / VOCAB_FILE
    if old.exists():
        try:
            v = read_vocab(out)
        except ValueError:
            v = None
        if v and v["vocab_size"] == size and v["source"]["sha256"] == source["sha256"]:
            print(f"{out}: already complete ({size} ids from {src})")
            return
        raise PrepareError(f"{out} holds a compact vocabulary made differently (another source or size); "
                                   "delete it or choose another --out-dir")
    if out.is_dir() and any(p.name not in source["shards"] for p in out.glob("*.bin")):
        raise PrepareError(f"{out} holds other .bin files; choose an empty --out-dir")

    counts = count_tokens(train)
    gpt2_ids = compact_ids(counts, size)
    table = remap_table(gpt2_ids, size)
    out.mkdir(parents=True, exist_ok=True)
    for p in shards:
        write_shard(out / p.name, table[read_shard(p)], vocab=size)
    total = int(counts.sum())
    kept = int(counts[gpt2_ids].sum())
    vocab = {"format": VOCAB_FORMAT, "vocab_size": size, "rest_id": size - 1, "rest_marker": REST_MARKER,
             "counted_on": "train shards", "train_tokens": total, "train_tokens_kept": kept,
             "source": source, "gpt2_ids": [int(i) for i in gpt2_ids]}
    atomic_write(old, json.dumps(vocab, indent=1).encode())
    print(f"{out}: {len(shards)} shards at a vocabulary of {size}: {size - 1} GPT-2 tokens cover "
          f"{kept / max(total, 1):.2%} of the {total:,} training tokens, the rest share id {size - 1}")
