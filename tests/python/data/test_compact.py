"""data/prepare.py compact: the K-1 most frequent training tokens and one shared id,
checked against an independent count; the mapping in vocab.json and the header read
back; and the trainer's refusal of compact shards that do not fit the model."""
import collections
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from shardio import read_shard, write_shard
from tinyrun import write_run_config

ROOT = pathlib.Path(__file__).resolve().parents[3]
PREPARE = ROOT / "data" / "prepare.py"
K = 16


def compact(src, out, *extra, check=True):
    proc = subprocess.run([sys.executable, str(PREPARE), "compact", str(src), "--out-dir", str(out), *map(str, extra)],
                          capture_output=True, text=True, timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def gpt2_corpus(tmp_path_factory):
    """GPT-2 shards with a skewed id distribution over ids up to 50256 (ties included),
    and a val shard whose most frequent token never occurs in training."""
    d = tmp_path_factory.mktemp("gpt2")
    rng = np.random.default_rng(3)
    pool = rng.choice(50257, size=60, replace=False)
    weights = 1.0 / np.arange(1, 61) ** 1.1
    train = [pool[rng.choice(60, size=n, p=weights / weights.sum())] for n in (3000, 2500)]
    train[0][:40] = 50256  # the end-of-text id, as prepare.py's documents start
    only_val = int(np.setdiff1d(np.arange(50257), pool)[7])
    val = np.concatenate([np.full(500, only_val), pool[rng.integers(0, 60, size=300)]])
    write_shard(d / "val_000000.bin", val)
    write_shard(d / "train_000001.bin", train[0])
    write_shard(d / "train_000002.bin", train[1])
    return d, train, val, only_val


@pytest.fixture(scope="module")
def compacted(gpt2_corpus, tmp_path_factory):
    src = gpt2_corpus[0]
    out = tmp_path_factory.mktemp("compact") / "k16"
    compact(src, out, "--vocab-size", K)
    return out


def test_the_mapping_is_the_most_frequent_training_tokens_by_an_independent_count(gpt2_corpus, compacted):
    _, train, val, only_val = gpt2_corpus
    counts = collections.Counter(int(t) for shard in train for t in shard)
    assert len(counts) > K, "the corpus must have more distinct tokens than the vocabulary keeps"
    expect = [tok for tok, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][: K - 1]
    v = json.loads((compacted / "vocab.json").read_text())
    assert v["vocab_size"] == K and v["rest_id"] == K - 1 and v["gpt2_ids"] == expect
    assert only_val not in v["gpt2_ids"], "the val shard must not be counted"
    assert v["train_tokens"] == sum(len(s) for s in train)
    assert v["train_tokens_kept"] == sum(counts[t] for t in expect)
    index = {tok: i for i, tok in enumerate(expect)}
    for name, original in [("train_000001.bin", train[0]), ("train_000002.bin", train[1]), ("val_000000.bin", val)]:
        got = read_shard(compacted / name)
        want = [index.get(int(t), K - 1) for t in original]
        assert got.tolist() == want, name
        assert np.fromfile(compacted / name, dtype="<i4", count=4)[3] == K, "the header records K"
    assert (read_shard(compacted / "val_000000.bin")[:500] == K - 1).all()


def test_ids_decode_back_through_vocab_json(gpt2_corpus, compacted):
    sys.path.insert(0, str(ROOT / "data"))
    import compact as compact_module  # data/compact.py

    v = compact_module.read_vocab(compacted)
    ids = np.array(v["gpt2_ids"])
    train = gpt2_corpus[1][0]
    got = read_shard(compacted / "train_000001.bin")
    kept = got != K - 1
    assert kept.sum() > len(got) // 2
    assert (ids[got[kept]] == train[kept]).all()
    assert not np.isin(train[~kept], ids).any(), "the rest id stands only for tokens outside the table"


def test_a_rerun_is_a_no_op_and_a_different_size_is_refused(gpt2_corpus, compacted):
    before = {p.name: p.stat().st_mtime_ns for p in compacted.iterdir()}
    assert "already complete" in compact(gpt2_corpus[0], compacted, "--vocab-size", K).stdout
    bad = compact(gpt2_corpus[0], compacted, "--vocab-size", 32, check=False)
    assert bad.returncode == 2 and "made differently" in bad.stderr
    again = compact(compacted, compacted.parent / "twice", check=False)
    assert again.returncode == 2 and "already a compact vocabulary of 16" in again.stderr
    assert {p.name: p.stat().st_mtime_ns for p in compacted.iterdir()} == before


def test_an_out_dir_that_is_a_file_or_lies_under_one_is_refused_by_name_before_anything_is_read(gpt2_corpus,
                                                                                                    tmp_path):
    src = gpt2_corpus[0]
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine\n")
    for out in (a_file, a_file / "k16"):
        bad = compact(src, out, "--vocab-size", K, check=False)
        assert bad.returncode == 2, bad.stderr
        assert "Traceback" not in bad.stderr and f"--out-dir: {out}: " in bad.stderr and "not a folder" in bad.stderr
        # the text command's --out-dir is the same argument, refused before its inputs are looked at
        text = subprocess.run([sys.executable, str(PREPARE), "text", str(tmp_path / "absent.txt"), "--out-dir",
                               str(out)], capture_output=True, text=True, timeout=60)
        assert text.returncode == 2 and f"--out-dir: {out}: " in text.stderr and "Traceback" not in text.stderr
    assert a_file.read_text() == "mine\n" and sorted(tmp_path.iterdir()) == [a_file]


def train(xsagpt, tmp_path, shards, vocab_size, steps=1):
    cfg = write_run_config(tmp_path / f"cfg{vocab_size}.json", shards, tmp_path / f"run{vocab_size}",
                           model={"vocab_size": vocab_size}, max_steps=steps, eval_interval=steps, ckpt_interval=0,
                           seq_len=16, eval_tokens=128)
    return xsagpt("train", "-c", cfg, check=False)


def test_the_trainer_takes_compact_shards_at_their_size_and_refuses_other_sizes(xsagpt, compacted, tmp_path):
    ok = train(xsagpt, tmp_path, compacted, K)
    assert ok.returncode == 0, ok.stderr
    for wrong in (50304, 8):
        bad = train(xsagpt, tmp_path, compacted, wrong)
        assert bad.returncode != 0
        assert f"a compact vocabulary of {K} ids" in bad.stderr and f"model.vocab_size is {wrong}" in bad.stderr
        assert "val_000000.bin" in bad.stderr or "train_000001.bin" in bad.stderr
        assert not (tmp_path / f"run{wrong}" / "metrics.jsonl").exists()


def test_compact_shards_without_their_mapping_or_mixed_with_gpt2_ids_are_refused(xsagpt, gpt2_corpus, compacted,
                                                                                 tmp_path):
    lone = tmp_path / "lone"
    lone.mkdir()
    for p in compacted.glob("*.bin"):
        (lone / p.name).write_bytes(p.read_bytes())
    bad = train(xsagpt, tmp_path, lone, K)
    assert bad.returncode != 0 and "no " in bad.stderr and "vocab.json" in bad.stderr

    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "vocab.json").write_bytes((compacted / "vocab.json").read_bytes())
    (mixed / "train_000001.bin").write_bytes((compacted / "train_000001.bin").read_bytes())
    write_shard(mixed / "val_000000.bin", np.arange(200) % K)  # ids in range, but GPT-2's
    bad = train(xsagpt, tmp_path, mixed, K)
    assert bad.returncode != 0 and "GPT-2 token ids" in bad.stderr and "share one vocabulary" in bad.stderr


@pytest.fixture(scope="module")
def other_mapping(gpt2_corpus, tmp_path_factory):
    """Compact shards of the same K over another mapping: the corpus with every id moved up by one."""
    src = tmp_path_factory.mktemp("shifted")
    for p in gpt2_corpus[0].glob("*.bin"):
        write_shard(src / p.name, (read_shard(p) + 1) % 50257)
    out = tmp_path_factory.mktemp("compact-other") / "k16"
    compact(src, out, "--vocab-size", K)
    return out


def test_every_reader_of_shards_checks_the_models_vocabulary_the_same_way(xsagpt, gpt2_corpus, compacted,
                                                                         other_mapping, tmp_path):
    assert json.loads((other_mapping / "vocab.json").read_text())["gpt2_ids"] != \
        json.loads((compacted / "vocab.json").read_text())["gpt2_ids"]
    assert train(xsagpt, tmp_path, compacted, K, steps=2).returncode == 0
    assert train(xsagpt, tmp_path, gpt2_corpus[0], 50304).returncode == 0
    compact_run, gpt2_run = tmp_path / f"run{K}", tmp_path / "run50304"

    def analyze(run, shards, *extra):
        return xsagpt("analyze", run, "--val", shards / "val_*.bin", "--device", "cpu", "--threads", 1,
                      "-o", tmp_path / "out.json", *extra, check=False)

    assert analyze(compact_run, compacted).returncode == 0  # its own vocabulary
    for extra in ((), ("--positions",)):
        # Before: a GPT-2 model read compact ids and exited 0 with a loss; a compact model read
        # another mapping's ids of the same K without a word.
        for run, shards, holds, trained_on in (
                (gpt2_run, compacted, f"a compact vocabulary of {K} ids ({compacted / 'vocab.json'})",
                 "GPT-2 token ids"),
                (compact_run, gpt2_corpus[0], "GPT-2 token ids", f"a compact vocabulary of {K} ids"),
                (compact_run, other_mapping, f"a compact vocabulary of {K} ids ({other_mapping / 'vocab.json'})",
                 f"a compact vocabulary of {K} ids")):
            proc = analyze(run, shards, *extra)
            assert proc.returncode != 0, (run, shards, extra)
            assert f"holds {holds}, but " in proc.stderr and f"was trained on {trained_on}" in proc.stderr, proc.stderr
    # A resume may point data.* elsewhere, but not into another vocabulary: refused naming the
    # checkpoint, the run directory unchanged.
    def files():  # the run's files; .lock holds whoever last opened the directory
        return {p.name: p.stat().st_mtime_ns for p in compact_run.rglob("*") if p.name != ".lock"}
    before = files()
    cfg = write_run_config(tmp_path / "resume.json", other_mapping, compact_run, model={"vocab_size": K}, max_steps=4,
                           eval_interval=2, ckpt_interval=0, seq_len=16, eval_tokens=128)
    proc = xsagpt("train", "-c", cfg, "--resume", "auto", check=False)
    assert proc.returncode != 0 and "step_00000002.pt" in proc.stderr
    assert "was trained on a compact vocabulary" in proc.stderr
    assert files() == before
