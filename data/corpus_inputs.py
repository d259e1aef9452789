"""The documents data/prepare.py tokenizes: local text files (.txt one document each,
.jsonl one per line, .parquet one per row, the text under --text-field) checked before
any is read, or FineWeb streamed from the Hugging Face Hub."""
from __future__ import annotations

import json
import pathlib
from typing import Iterator

from shard_format import PrepareError


def text_documents(paths: list[pathlib.Path], text_field: str) -> Iterator[str]:
    """Each .txt file is one document; each .jsonl line and each .parquet row is one."""
    for p in paths:
        suffix = p.suffix.lower()
        if suffix == ".txt":
            yield p.read_text(encoding="utf-8")
        elif suffix == ".jsonl":
            with p.open(encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        text = json.loads(line)[text_field]
                    except json.JSONDecodeError as e:
                        raise PrepareError(f"{p}:{n}: not JSON ({e})") from None
                    except (KeyError, TypeError):
                        raise PrepareError(f"{p}:{n}: no field {text_field!r} (set --text-field)") from None
                    if not isinstance(text, str):
                        raise PrepareError(f"{p}:{n}: field {text_field!r} is {type(text).__name__}, expected a string")
                    yield text
        else:  # .parquet, checked by text_inputs
            import pyarrow.parquet as pq

            f = pq.ParquetFile(p)
            if text_field not in f.schema_arrow.names:
                raise PrepareError(f"{p}: no column {text_field!r} (columns: {', '.join(f.schema_arrow.names)})")
            for batch in f.iter_batches(columns=[text_field], batch_size=1024):
                yield from (t or "" for t in batch.column(0).to_pylist())


def text_inputs(files: list[str]) -> list[pathlib.Path]:
    paths = [pathlib.Path(f) for f in files]
    for p in paths:
        if not p.is_file():
            raise PrepareError(f"{p}: no such file")
        if p.suffix.lower() not in (".txt", ".jsonl", ".parquet"):
            raise PrepareError(f"{p}: unsupported input; expected .txt (one document), .jsonl or .parquet")
    if any(p.suffix.lower() == ".parquet" for p in paths):
        try:
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise PrepareError("reading .parquet needs pyarrow: pip install pyarrow") from None
    return paths


def fineweb_documents(repo: str, name: str) -> Iterator[str]:
    import datasets

    for row in datasets.load_dataset(repo, name=name, split="train", streaming=True):
        yield row["text"]
