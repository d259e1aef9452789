#!/usr/bin/env python3
"""Tokenize a corpus with GPT-2's BPE into llm.c-format token shards for xsagpt.

    python data/prepare.py fineweb [--dataset fineweb|fineweb-edu] [--sample 10BT|100BT|350BT]
    python data/prepare.py text FILE... --out-dir DIR [--text-field text]
    python data/prepare.py compact SRC_DIR --out-dir DIR [--vocab-size 2048]

Shards: llm.c's format, with a compact vocabulary's size in its header (data/shard_format.py,
read by src/data/shard.h). `compact` rewrites prepared shards at the K-1 most frequent
training tokens plus one id for the rest, with the mapping in vocab.json beside them
(data/compact.py).

Every document is prefixed with <|endoftext|> (50256) and documents run on across shard
boundaries, as in llm.c. The first shard, val_000000.bin (--val-tokens tokens), is
the validation split; train_000001.bin, ... hold --shard-tokens tokens each, the
last one what remains.

Restartable: after each shard, manifest.json in the output folder records it and
where the next shard starts in the input (document index, tokens of that document
already written). A rerun checks the finished shards, skips the documents they hold
without tokenizing them again, and carries on; a finished preparation is a no-op.

Documents are tokenized by a process pool that returns them in input order, so the
shards are byte-identical for any --workers.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import multiprocessing as mp
import os
import pathlib
import sys
import time
from typing import Iterable, Iterator

import numpy as np
import tiktoken

import compact  # the compact vocabulary (data/compact.py, this folder)
from corpus_inputs import fineweb_documents, text_documents, text_inputs
from shard_format import PrepareError, atomic_write, shard_bytes, shard_name, write_shard

REPO = pathlib.Path(__file__).resolve().parents[1]
EOT = 50256  # <|endoftext|>
# sha256 of GPT-2's vocab.bpe and encoder.json, as tiktoken's own gpt2 encoding checks them.
GPT2_FILES = {
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
}
FINEWEB = {"fineweb": "HuggingFaceFW/fineweb", "fineweb-edu": "HuggingFaceFW/fineweb-edu"}
SAMPLES = ("10BT", "100BT", "350BT")


# ---- tokenizer ------------------------------------------------------------------

def find_vocab_dir(explicit: str | None) -> pathlib.Path | None:
    """GPT-2's encoder.json + vocab.bpe: --vocab-dir, $XSAGPT_GPT2_VOCAB, or the shipped data/gpt2/."""
    if explicit:
        d = pathlib.Path(explicit)
        missing = [f for f in GPT2_FILES if not (d / f).is_file()]
        if missing:
            raise PrepareError(f"--vocab-dir {d}: missing {', '.join(missing)}")
        return d
    for cand in (os.environ.get("XSAGPT_GPT2_VOCAB"), REPO / "data" / "gpt2"):
        if cand and all((pathlib.Path(cand) / f).is_file() for f in GPT2_FILES):
            return pathlib.Path(cand)
    return None


def gpt2_encoding(vocab_dir: pathlib.Path | None) -> tiktoken.Encoding:
    """tiktoken's gpt2 encoding, built from local files when there are some (no network)."""
    if vocab_dir is None:
        try:
            return tiktoken.get_encoding("gpt2")  # downloads the two files once, then caches them
        except Exception as e:  # network errors come in many types
            raise PrepareError(f"could not get GPT-2's vocabulary from tiktoken ({type(e).__name__}: {e}); offline, "
                               "point --vocab-dir or $XSAGPT_GPT2_VOCAB at a folder with encoder.json and vocab.bpe, "
                               "or restore the project's data/gpt2/, which ships them") from None
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    from tiktoken_ext.openai_public import ENDOFTEXT, r50k_pat_str  # tiktoken's own gpt2 definition

    try:
        ranks = data_gym_to_mergeable_bpe_ranks(
            vocab_bpe_file=str(vocab_dir / "vocab.bpe"), encoder_json_file=str(vocab_dir / "encoder.json"),
            vocab_bpe_hash=GPT2_FILES["vocab.bpe"], encoder_json_hash=GPT2_FILES["encoder.json"])
    except ValueError as e:  # tiktoken's hash check
        raise PrepareError(f"{vocab_dir}: not GPT-2's vocabulary files ({e})") from None
    return tiktoken.Encoding("gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={ENDOFTEXT: EOT}, explicit_n_vocab=EOT + 1)


_encoding: tiktoken.Encoding | None = None


def _init_worker(vocab_dir: pathlib.Path | None) -> None:
    global _encoding
    if _encoding is None:  # forked workers inherit the parent's
        _encoding = gpt2_encoding(vocab_dir)


def _tokenize(text: str) -> np.ndarray:
    # encode_ordinary: a literal "<|endoftext|>" inside a document is text, not a delimiter.
    ids = [EOT]
    ids.extend(_encoding.encode_ordinary(text))
    return np.array(ids, dtype=np.uint16)


def tokenized(docs: Iterable[str], workers: int, vocab_dir: pathlib.Path | None) -> Iterator[np.ndarray]:
    """Token arrays of `docs`, in order, from `workers` processes (1: this one)."""
    _init_worker(vocab_dir)  # here first: a failure is reported once, not by every worker
    if workers == 1:
        yield from map(_tokenize, docs)
        return
    with mp.Pool(workers, initializer=_init_worker, initargs=(vocab_dir,)) as pool:
        yield from pool.imap(_tokenize, docs, chunksize=16)


# ---- shards -----------------------------------------------------------------------

def load_manifest(out_dir: pathlib.Path, settings: dict) -> dict:
    """The preparation so far in `out_dir`, cut back to the shards still intact on disk."""
    path = out_dir / "manifest.json"
    if not path.exists():
        if any(out_dir.glob("*.bin")):
            raise PrepareError(f"{out_dir} holds .bin files but no manifest.json: not prepared by this script "
                               "(or the manifest was deleted); choose an empty --out-dir")
        return {"settings": settings, "shards": [], "complete": False}
    m = json.loads(path.read_text())
    if m.get("settings") != settings:
        old = m.get("settings", {})
        diff = [f"{k}: {old.get(k)!r} there, {settings[k]!r} now" for k in settings if old.get(k) != settings[k]]
        raise PrepareError(f"{out_dir} holds shards prepared differently ({'; '.join(diff)}); "
                           "delete it or choose another --out-dir")
    for i, s in enumerate(m["shards"]):
        f = out_dir / s["name"]
        if not f.is_file() or f.stat().st_size != shard_bytes(s["tokens"]):
            print(f"{f}: missing or incomplete; redoing from there", flush=True)
            m["shards"], m["complete"] = m["shards"][:i], False
            break
    return m


def prepare(docs: Iterable[str], out_dir: pathlib.Path, settings: dict, args: argparse.Namespace) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    m = load_manifest(out_dir, settings)
    if m["complete"]:
        print(f"{out_dir}: already complete ({len(m['shards'])} shards, {m['tokens']:,} tokens)")
        return
    if args.max_shards and len(m["shards"]) >= args.max_shards:
        print(f"{out_dir}: {len(m['shards'])} shards written; --max-shards {args.max_shards} reached")
        return

    doc, skip = m["shards"][-1]["next"] if m["shards"] else (0, 0)
    if m["shards"]:
        print(f"{out_dir}: resuming after {len(m['shards'])} shards, at document {doc:,}", flush=True)
    index = len(m["shards"])
    buf = np.empty(max(args.val_tokens, args.shard_tokens), dtype=np.uint16)
    fill, written, t0, last_report = 0, 0, time.time(), time.time()

    def finish_shard(nxt: tuple[int, int]) -> None:
        nonlocal index, fill
        name = shard_name(index)
        write_shard(out_dir / name, buf[:fill])
        m["shards"].append({"name": name, "tokens": fill, "next": list(nxt)})
        atomic_write(out_dir / "manifest.json", json.dumps(m, indent=1).encode())
        rate = written / max(time.time() - t0, 1e-9)
        print(f"{out_dir / name}: {fill:,} tokens (documents up to {nxt[0]:,}; {rate / 1e6:.2f}M tokens/s)",
              flush=True)
        index, fill = index + 1, 0

    stream = tokenized(itertools.islice(docs, doc, None), args.workers, args.vocab_dir)
    with contextlib.closing(stream):
        for tokens in stream:
            used = skip  # tokens of this document already in earlier shards
            skip = 0
            while used < len(tokens):
                cap = args.val_tokens if index == 0 else args.shard_tokens
                take = min(cap - fill, len(tokens) - used)
                buf[fill:fill + take] = tokens[used:used + take]
                fill, used, written = fill + take, used + take, written + take
                if fill == cap:
                    finish_shard((doc, used) if used < len(tokens) else (doc + 1, 0))
                    if args.max_shards and index >= args.max_shards:
                        print(f"{out_dir}: --max-shards {args.max_shards} reached; rerun without it to continue")
                        return
            doc += 1
            if time.time() - last_report > 10:
                last_report = time.time()
                cap = args.val_tokens if index == 0 else args.shard_tokens
                print(f"  {shard_name(index)}: {fill / cap:.0%} of {cap:,} tokens, document {doc:,}", flush=True)
    if fill:
        finish_shard((doc, 0))
    m["complete"] = True
    m["documents"] = doc
    m["tokens"] = sum(s["tokens"] for s in m["shards"])
    atomic_write(out_dir / "manifest.json", json.dumps(m, indent=1).encode())
    if len(m["shards"]) < 2:
        print("warning: the corpus filled only the validation shard; lower --val-tokens to get training data")
    print(f"{out_dir}: done, {len(m['shards'])} shards, {m['tokens']:,} tokens, {doc:,} documents "
          f"in {time.time() - t0:.1f}s")


# ---- commands ---------------------------------------------------------------------

def positive(s: str) -> int:
    try:
        v = int(s)  # also 100_000
    except ValueError:
        v = float(s)  # 1e8
        if v != int(v):
            raise argparse.ArgumentTypeError(f"expected a positive integer, got {s}") from None
        v = int(v)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s}")
    return v


def out_folder(s: str) -> pathlib.Path:
    """--out-dir: a folder, made if missing. A path that is a file, or lies under one, can never
    become a folder: refused here, before any input is read or counted."""
    path = pathlib.Path(s)
    for p in (path, *path.parents):
        if p.exists() or p.is_symlink():
            if not p.is_dir():
                what = "is" if p == path else f"lies under {p}, which is"
                raise argparse.ArgumentTypeError(f"{s}: {what} not a folder (a file or a broken link); "
                                                 "expected a folder, made if missing")
            break
    return path


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--shard-tokens", type=positive, default=10**8,
                        help="tokens per training shard (default 1e8, as the published FineWeb shards)")
    common.add_argument("--val-tokens", type=positive, help="tokens in the validation shard (default --shard-tokens)")
    common.add_argument("--workers", type=positive, default=os.cpu_count() or 1,
                        help="tokenizer processes (default: all cores); shards are the same for any number")
    common.add_argument("--max-shards", type=positive,
                        help="stop after this many shards (validation included); rerun without it to continue")
    common.add_argument("--vocab-dir",
                        help="folder with GPT-2's encoder.json and vocab.bpe (default $XSAGPT_GPT2_VOCAB, "
                             "then the project's data/gpt2/, which ships them; without either tiktoken "
                             "downloads them)")

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    fw = sub.add_parser("fineweb", parents=[common], help="stream FineWeb from Hugging Face (needs `datasets`)",
                        description="Stream a FineWeb sample from Hugging Face and shard it.")
    fw.add_argument("--dataset", choices=sorted(FINEWEB), default="fineweb")
    fw.add_argument("--sample", choices=SAMPLES, default="10BT", help="which sample-* subset (default 10BT)")
    fw.add_argument("--out-dir", type=out_folder, help="default data/<dataset>/shards/<sample>")
    tx = sub.add_parser("text", parents=[common], help="local .txt / .jsonl / .parquet files",
                        description="Shard local files: each .txt is one document, each .jsonl line or "
                                    ".parquet row one document, in the order given.")
    tx.add_argument("files", nargs="+", help=".txt, .jsonl or .parquet files")
    tx.add_argument("--text-field", default="text", help="JSON field or parquet column with the text")
    tx.add_argument("--out-dir", type=out_folder, required=True)
    cp = sub.add_parser("compact", help="remap prepared shards to a compact vocabulary (data/compact.py)",
                        description="Rewrite prepared GPT-2 shards at a compact vocabulary: the K-1 most frequent "
                                    "tokens of the train shards keep an id each, all others share id K-1; "
                                    "the mapping goes to vocab.json beside the new shards.")
    cp.add_argument("src", help="folder of prepared shards (val_000000.bin, train_*.bin), e.g. data/kjv/shards")
    cp.add_argument("--vocab-size", type=positive, default=2048, help="K, the ids in all (default 2048)")
    cp.add_argument("--out-dir", type=out_folder, required=True)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "compact":
            compact.compact(pathlib.Path(args.src), pathlib.Path(args.out_dir), args.vocab_size)
            return 0
        args.val_tokens = args.val_tokens or args.shard_tokens
        args.vocab_dir = find_vocab_dir(args.vocab_dir)
        if args.command == "fineweb":
            try:
                import datasets  # noqa: F401
            except ImportError:
                raise PrepareError("`fineweb` streams from Hugging Face with the datasets package: "
                                   "pip install datasets") from None
            repo, name = FINEWEB[args.dataset], f"sample-{args.sample}"
            out = pathlib.Path(args.out_dir or REPO / "data" / args.dataset / "shards" / args.sample)
            source = {"dataset": repo, "name": name}
            docs = fineweb_documents(repo, name)
        else:
            paths = text_inputs(args.files)
            out = pathlib.Path(args.out_dir)
            # Inputs are recognised by name and size: cheap, and catches a changed corpus.
            listing = "\n".join(f"{p.name}\t{p.stat().st_size}" for p in paths)
            source = {"files": len(paths), "bytes": sum(p.stat().st_size for p in paths),
                      "digest": hashlib.sha256(listing.encode()).hexdigest()[:16], "text_field": args.text_field}
            docs = text_documents(paths, args.text_field)
        settings = {"format": "llm.c v1 uint16", "tokenizer": "gpt2", "val_tokens": args.val_tokens,
                    "shard_tokens": args.shard_tokens, "source": source}
        prepare(docs, out, settings, args)
    except PrepareError as e:
        print(f"prepare.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
