"""Reading and writing token shards in the llm.c format the trainer reads
(src/data/shard.h): a 256 x int32 header (magic 20240520, version 1, token count)
followed by the tokens as uint16."""
import pathlib

import numpy as np

MAGIC, VERSION = 20240520, 1


def write_shard(path: pathlib.Path, tokens: np.ndarray) -> None:
    header = np.zeros(256, dtype="<i4")
    header[:3] = (MAGIC, VERSION, len(tokens))
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype("<u2").tobytes())


def read_shard(path: pathlib.Path) -> np.ndarray:
    header = np.fromfile(path, dtype="<i4", count=256)
    assert header[0] == MAGIC and header[1] == VERSION, path
    return np.fromfile(path, dtype="<u2", offset=256 * 4, count=int(header[2])).astype(np.int64)


def write_markov_shards(d: pathlib.Path, sizes: dict, seed: int = 0, vocab: int = 256, noise: float = 0.1):
    """A learnable synthetic corpus for tiny runs: a noisy Markov chain over `vocab`
    tokens (each token is a fixed random function of the one before, or, with
    probability `noise`, random), one shard per name in `sizes` (name -> tokens),
    drawn in that order from one generator seeded `seed`. Returns d."""
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    nxt = rng.integers(0, vocab, size=vocab)
    for name, n in sizes.items():
        toks = np.empty(n, dtype=np.int64)
        toks[0] = 0
        is_noise, rand = rng.random(n) < noise, rng.integers(0, vocab, size=n)
        for i in range(1, n):
            toks[i] = rand[i] if is_noise[i] else nxt[toks[i - 1]]
        write_shard(d / name, toks)
    return d


def read_shard_strict(path: pathlib.Path) -> np.ndarray:
    """A shard as data/prepare.py must write it: every header field checked, nothing after the tokens."""
    raw = path.read_bytes()
    header = np.frombuffer(raw[:1024], dtype="<i4")
    assert tuple(header[:3]) == (20240520, 1, (len(raw) - 1024) // 2) and not header[3:].any(), path
    return np.frombuffer(raw[1024:], dtype="<u2")


def shard_files(d: pathlib.Path):
    return sorted(d.glob("*.bin"), key=lambda p: p.name.split("_")[1])  # val_000000 first
