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
