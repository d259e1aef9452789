"""A model trained on a compact vocabulary (data/prepare.py compact): its checkpoint
records the mapping, `xsagpt sample` and `xsagpt score` encode text through it and
decode its ids back to GPT-2 tokens (the shared id as "<unk>"), checked against an
independent mapping with tiktoken; the safetensors export carries the mapping and
load_export.py scores the same text to the same log-probability; an export for
transformers and downstream evaluation refuse such a model by name."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import torch

from shardio import write_shard

ROOT = pathlib.Path(__file__).resolve().parents[3]
K = 64
TEXT = ("In the beginning God created the heaven and the earth. And the earth was without form, and void; "
        "and darkness was upon the face of the deep. And God said, Let there be light: and there was light. ")


@pytest.fixture(scope="module")
def compact_run(tmp_path_factory, gpt2_enc, xsagpt):
    d = tmp_path_factory.mktemp("compact-run")
    ids = np.array(gpt2_enc.encode_ordinary(TEXT * 40))
    write_shard(d / "val_000000.bin", ids[:600])
    write_shard(d / "train_000001.bin", ids[600:])
    subprocess.run([sys.executable, str(ROOT / "data" / "prepare.py"), "compact", str(d), "--vocab-size", str(K),
                    "--out-dir", str(d / "k")], check=True, capture_output=True, timeout=60)
    cfg = {"model": {"base": "tiny", "vocab_size": K, "block_size": 32, "n_layer": 1, "d_model": 32, "n_head": 2,
                     "head_dim": 16},
           "data": {"train": str(d / "k" / "train_*.bin"), "val": str(d / "k" / "val_*.bin")},
           "train": {"max_steps": 30, "warmup_steps": 0, "lr": 1e-2, "seq_len": 16, "micro_batch": 4,
                     "eval_interval": 0, "eval_tokens": 64, "device": "cpu", "threads": 1},
           "out_dir": str(d / "run")}
    (d / "cfg.json").write_text(json.dumps(cfg))
    xsagpt("train", "-c", d / "cfg.json")
    vocab = json.loads((d / "k" / "vocab.json").read_text())
    return d / "run", vocab


def to_compact(vocab, gpt2_ids):
    index = {g: i for i, g in enumerate(vocab["gpt2_ids"])}
    return [index.get(t, vocab["rest_id"]) for t in gpt2_ids]


def text_of(vocab, enc, ids):
    return b"".join(b"<unk>" if i == vocab["rest_id"] else enc.decode_single_token_bytes(vocab["gpt2_ids"][i])
                    for i in ids).decode("utf-8", errors="replace")


def test_the_checkpoint_records_the_mapping(compact_run):
    run, vocab = compact_run
    [ckpt] = sorted((run / "checkpoints").glob("*.pt"))[-1:]
    saved = torch.load(ckpt, weights_only=True)["vocab"]
    assert saved["vocab_size"] == K and saved["rest_id"] == K - 1 and saved["rest_marker"] == "<unk>"
    assert saved["gpt2_ids"] == vocab["gpt2_ids"]


def test_sample_reads_and_writes_compact_ids(compact_run, xsagpt, gpt2_vocab_dir, gpt2_enc):
    run, vocab = compact_run
    rest = vocab["rest_id"]
    common = vocab["gpt2_ids"].index(gpt2_enc.encode_ordinary(" God")[0])
    args = ("sample", run, "--vocab", gpt2_vocab_dir, "--device", "cpu", "--threads", 1, "-t", 0)
    shown = xsagpt(*args, "--prompt-ids", f"{common},{rest},{common}", "-n", 0).stdout
    assert shown == text_of(vocab, gpt2_enc, [common, rest, common]) + "\n" and "<unk>" in shown
    prompt = "And God said, Let there be zebras"
    new = json.loads(xsagpt(*args, "--prompt", prompt, "-n", 12, "--ids").stdout)
    assert len(new) == 12 and all(0 <= i < K for i in new)
    assert xsagpt(*args, "--prompt", prompt, "-n", 12).stdout == prompt + text_of(vocab, gpt2_enc, new) + "\n"


def test_score_export_and_load_export_agree_through_the_mapping(compact_run, xsagpt, gpt2_vocab_dir, gpt2_enc,
                                                                tmp_path):
    run, vocab = compact_run
    ctx, cont = "And the earth was without form, and", " void of zebras"
    line = json.dumps({"context": ctx, "continuation": cont}) + "\n"
    got = json.loads(xsagpt("score", run, "--vocab", gpt2_vocab_dir, "--device", "cpu", "--threads", 1, "--tokens",
                            input=line).stdout)
    want_ctx = to_compact(vocab, gpt2_enc.encode_ordinary(ctx))
    want_cont = to_compact(vocab, gpt2_enc.encode_ordinary(ctx + cont))[len(want_ctx):]
    assert got["context_ids"] == want_ctx and got["continuation_ids"] == want_cont
    assert vocab["rest_id"] in want_cont, "the continuation must hold a token outside the table"

    export = [sys.executable, str(ROOT / "scripts" / "eval" / "export.py"), str(run)]
    proc = subprocess.run(export + ["--out", str(tmp_path / "e")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    config = json.loads((tmp_path / "e" / "config.json").read_text())
    assert config["tokenizer"] == "gpt2-compact" and config["vocab"]["gpt2_ids"] == vocab["gpt2_ids"]
    cli = subprocess.run([sys.executable, str(ROOT / "scripts" / "eval" / "load_export.py"), str(tmp_path / "e"), ctx,
                          cont], capture_output=True, text=True, env=dict(os.environ, XSAGPT_GPT2_VOCAB=str(gpt2_vocab_dir)))
    assert cli.returncode == 0, cli.stderr
    assert got["logprob"] < -1 and float(cli.stdout) == pytest.approx(got["logprob"], abs=1e-4)

    hf = subprocess.run(export + ["--format", "hf", "--out", str(tmp_path / "hf")], capture_output=True, text=True)
    assert hf.returncode != 0 and f"compact vocabulary of {K} ids" in hf.stderr and not (tmp_path / "hf").exists()
