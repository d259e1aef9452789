"""The token shard format, written by prepare.py and compact.py beside it and read by
src/data/shard.h: a header of 256 little-endian int32 (magic 20240520, version 1, the
token count, then 0 for GPT-2 ids or K for a compact vocabulary of K ids), then the
tokens as little-endian uint16. Shards are named val_000000.bin (the validation split)
and train_000001.bin, ...; each is written under a temporary name, flushed and renamed,
so an interrupted run never leaves a partial shard under a real name.

Its own module so that both scripts read and write shards one way without importing
each other (data/ is no package: a script imports the modules beside it by name)."""
from __future__ import annotations

import os
import pathlib

import numpy as np

MAGIC, VERSION, HEADER_INTS = 20240520, 1, 256


class PrepareError(Exception):
    """Bad input or arguments; the scripts' main() prints the message and exits 2."""


def shard_name(index: int) -> str:
    return f"{'val' if index == 0 else 'train'}_{index:06d}.bin"


def atomic_write(path: pathlib.Path, *chunks: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        for c in chunks:
            f.write(c)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_shard(path: pathlib.Path, tokens: np.ndarray, vocab: int = 0) -> None:
    """`vocab`: 0 for GPT-2 ids, else the size of the compact vocabulary the ids index."""
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[:4] = (MAGIC, VERSION, len(tokens), vocab)
    atomic_write(path, header.tobytes(), tokens.astype("<u2", copy=False).tobytes())


def read_shard(path: pathlib.Path) -> np.ndarray:
    """A shard's tokens (int64), checking the header write_shard wrote."""
    header = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    if len(header) != HEADER_INTS or header[0] != MAGIC or header[1] != VERSION:
        raise ValueError(f"{path}: not a token shard (expected magic {MAGIC}, version {VERSION})")
    return np.fromfile(path, dtype="<u2", offset=HEADER_INTS * 4, count=int(header[2])).astype(np.int64)


def shard_vocab(path: pathlib.Path) -> int:
    """The compact vocabulary size a shard's header records (0: GPT-2 ids)."""
    return int(np.fromfile(path, dtype="<i4", count=4)[3])


def shard_bytes(tokens: int) -> int:
    """The size of a whole shard of `tokens` tokens."""
    return 4 * HEADER_INTS + 2 * tokens
