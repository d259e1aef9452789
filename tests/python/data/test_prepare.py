"""data/prepare.py and data/kjv/prepare.sh: the shards hold tiktoken's GPT-2 encoding of
the input, read back identically by the C++ reader (`xsagpt data --check`), are the
same bytes for any number of processes, and a preparation resumes where it stopped."""
import hashlib
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest

from shardio import read_shard_strict, shard_files

ROOT = pathlib.Path(__file__).resolve().parents[3]
PREPARE = ROOT / "data" / "prepare.py"
EOT = 50256
VAL, SHARD = 300, 700  # small shards: documents cross shard boundaries


@pytest.fixture(scope="module")
def reference(gpt2_vocab_dir, tmp_path_factory):
    """tiktoken's own `gpt2` encoding, offline: its download cache is seeded with the
    local files under the names tiktoken gives the URLs it would fetch."""
    import tiktoken

    cache = tmp_path_factory.mktemp("tiktoken-cache")
    base = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/"
    for name in ("vocab.bpe", "encoder.json"):
        shutil.copy(gpt2_vocab_dir / name, cache / hashlib.sha1((base + name).encode()).hexdigest())
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    try:
        return tiktoken.get_encoding("gpt2")
    finally:
        if old is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = old


def run_prepare(*args, check=True):
    proc = subprocess.run([sys.executable, str(PREPARE), *map(str, args)], capture_output=True, text=True,
                          timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"prepare.py {args} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Documents in .txt and .jsonl files (order of the command line), and the files."""
    d = tmp_path_factory.mktemp("corpus")
    rng = random.Random(0)
    words = ("the of and to in that he said unto LORD God people king house day children land son hand "
             "café naïve Ünïcödé 日本語 🙂 42 3.14 don't I'm you'll , . ; : ! ?").split()
    docs_a = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 120))) for _ in range(150)]
    docs_a[3] = "a literal <|endoftext|> inside text is text, not a delimiter"
    docs_a[7] = ""
    docs_a[8] = "  \n\n\t  trailing whitespace   \n"
    long_doc = "\n".join(" ".join(rng.choice(words) for _ in range(40)) for _ in range(60))  # > several shards
    docs_b = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 80))) for _ in range(120)]
    (d / "a.jsonl").write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(docs_a)) + "\n",
                               encoding="utf-8")
    (d / "long.txt").write_text(long_doc, encoding="utf-8")
    (d / "b.jsonl").write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in docs_b),
                               encoding="utf-8")
    files = [d / "a.jsonl", d / "long.txt", d / "b.jsonl"]
    return docs_a + [long_doc] + docs_b, files


def prepare_args(files, out, workers, vocab_dir, *extra):
    return ("text", *files, "--out-dir", out, "--val-tokens", VAL, "--shard-tokens", SHARD,
            "--workers", workers, "--vocab-dir", vocab_dir, *extra)


@pytest.fixture(scope="module")
def one_process(corpus, gpt2_vocab_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("one") / "shards"
    run_prepare(*prepare_args(corpus[1], out, 1, gpt2_vocab_dir))
    return out


def test_shards_hold_tiktokens_encoding_and_round_trip_through_the_cpp_reader(corpus, one_process, reference,
                                                                               xsagpt):
    docs, _ = corpus
    expected = np.array([t for d in docs for t in [EOT, *reference.encode_ordinary(d)]], dtype=np.uint16)
    files = shard_files(one_process)
    names = [f.name for f in files]
    assert names[0] == "val_000000.bin" and names[1:] == [f"train_{i:06d}.bin" for i in range(1, len(files))]
    shards = [read_shard_strict(f) for f in files]
    assert [len(s) for s in shards[:-1]] == [VAL] + [SHARD] * (len(files) - 2)
    assert 0 < len(shards[-1]) <= SHARD
    np.testing.assert_array_equal(np.concatenate(shards), expected)

    report = json.loads(xsagpt("data", "--check", f"{one_process}/*.bin", "--dump", 10**6).stdout)
    assert report["errors"] == 0
    assert report["total_tokens"] == len(expected)
    assert report["total_documents"] == len(docs)  # the literal "<|endoftext|>" was not encoded as EOT
    by_path = {pathlib.Path(f["path"]).name: f for f in report["files"]}
    for f, s in zip(files, shards):
        r = by_path[f.name]
        assert r["format"] == "llm.c" and r["tokens"] == len(s)
        assert r["first_tokens"] == s.tolist()
        assert r["max_token"] == int(s.max())


def test_data_check_reads_headerless_shards_and_reports_each_bad_one(one_process, xsagpt, tmp_path):
    val = read_shard_strict(one_process / "val_000000.bin")
    (tmp_path / "raw.bin").write_bytes(val.astype("<u2").tobytes())  # nanoGPT's headerless format
    shutil.copy(one_process / "train_000001.bin", tmp_path / "cut.bin")
    with open(tmp_path / "cut.bin", "r+b") as f:
        f.truncate(1024 + 2 * SHARD - 2)
    proc = xsagpt("data", "--check", f"{tmp_path}/*.bin", "--dump", 10**6, check=False)
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["errors"] == 1 and report["total_tokens"] == VAL
    cut, raw = report["files"]
    assert cut["error"] == (f"{tmp_path}/cut.bin: size {1024 + 2 * SHARD - 2} bytes does not match the header's token "
                            f"count {SHARD} (expected 1024 + 2*{SHARD} = {1024 + 2 * SHARD} bytes): truncated or corrupt")
    assert raw["format"] == "raw" and raw["first_tokens"] == val.tolist()


def test_data_check_shows_a_file_name_that_is_not_utf8_escaped(one_process, xsagpt, tmp_path):
    shutil.copy(one_process / "val_000000.bin", tmp_path / "v\udcff.bin")  # the byte 0xff in the name
    (tmp_path / "c\udcfe.bin").write_bytes(b"odd")
    proc = xsagpt("data", "--check", f"{tmp_path}/*.bin", check=False)
    # Before: a bare "[json.exception.type_error.316] invalid UTF-8 byte", and no report.
    assert proc.returncode == 1, proc.stderr
    bad, good = json.loads(proc.stdout)["files"]
    assert good["path"] == f"{tmp_path}/v\\xff.bin" and good["tokens"] == VAL
    assert bad["path"] == f"{tmp_path}/c\\xfe.bin"
    assert bad["error"].startswith(f"{tmp_path}/c\\xfe.bin: not a token shard")


def test_any_number_of_processes_writes_the_same_bytes(corpus, one_process, gpt2_vocab_dir, tmp_path):
    out = tmp_path / "shards"
    run_prepare(*prepare_args(corpus[1], out, 3, gpt2_vocab_dir))
    assert [f.name for f in shard_files(out)] == [f.name for f in shard_files(one_process)]
    for f in shard_files(one_process):
        assert (out / f.name).read_bytes() == f.read_bytes(), f.name
    assert (out / "manifest.json").read_text() == (one_process / "manifest.json").read_text()


def test_an_interrupted_preparation_resumes_where_it_stopped(corpus, one_process, gpt2_vocab_dir, tmp_path):
    out = tmp_path / "shards"
    first = run_prepare(*prepare_args(corpus[1], out, 1, gpt2_vocab_dir, "--max-shards", 3))
    assert [f.name for f in shard_files(out)] == ["val_000000.bin", "train_000001.bin", "train_000002.bin"]
    assert "--max-shards 3 reached" in first.stdout
    (out / "train_000003.bin.tmp").write_bytes(b"left by a crash")

    second = run_prepare(*prepare_args(corpus[1], out, 2, gpt2_vocab_dir))
    assert "resuming after 3 shards, at document" in second.stdout
    assert "val_000000.bin" not in second.stdout  # finished shards are not rewritten
    for f in shard_files(one_process):
        assert (out / f.name).read_bytes() == f.read_bytes(), f.name
    assert not list(out.glob("*.tmp"))

    mtimes = {f.name: f.stat().st_mtime_ns for f in shard_files(out)}
    third = run_prepare(*prepare_args(corpus[1], out, 1, gpt2_vocab_dir))
    assert "already complete" in third.stdout
    assert mtimes == {f.name: f.stat().st_mtime_ns for f in shard_files(out)}

    (out / "train_000002.bin").unlink()  # a lost shard is redone, and everything after it
    fourth = run_prepare(*prepare_args(corpus[1], out, 1, gpt2_vocab_dir))
    assert "missing or incomplete; redoing from there" in fourth.stdout
    for f in shard_files(one_process):
        assert (out / f.name).read_bytes() == f.read_bytes(), f.name


def test_bad_inputs_and_mismatched_output_folders_are_named(corpus, one_process, gpt2_vocab_dir, tmp_path):
    files = corpus[1]
    proc = run_prepare(*prepare_args(files, one_process, 1, gpt2_vocab_dir)[:-2], "--shard-tokens", 800,
                       "--vocab-dir", gpt2_vocab_dir, check=False)
    assert proc.returncode == 2
    assert "prepared differently (shard_tokens: 700 there, 800 now)" in proc.stderr

    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "train.bin").write_bytes(b"\0\0")
    proc = run_prepare(*prepare_args(files, stray, 1, gpt2_vocab_dir), check=False)
    assert proc.returncode == 2 and "holds .bin files but no manifest.json" in proc.stderr

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"body": "no text field"}\n')
    proc = run_prepare(*prepare_args([bad], tmp_path / "o1", 1, gpt2_vocab_dir), check=False)
    assert proc.returncode == 2 and f"{bad}:2: no field 'text' (set --text-field)" in proc.stderr

    other = tmp_path / "doc.md"
    other.write_text("# hi")
    proc = run_prepare(*prepare_args([other], tmp_path / "o2", 1, gpt2_vocab_dir), check=False)
    assert proc.returncode == 2 and f"{other}: unsupported input" in proc.stderr


def test_text_field_selects_the_jsonl_field(gpt2_vocab_dir, reference, tmp_path):
    src = tmp_path / "c.jsonl"
    docs = ["first document", "second, with a comma", "third"]
    src.write_text("".join(json.dumps({"content": d, "text": "wrong"}) + "\n" for d in docs))
    run_prepare("text", src, "--text-field", "content", "--out-dir", tmp_path / "out", "--val-tokens", 5,
                "--shard-tokens", 100, "--workers", 1, "--vocab-dir", gpt2_vocab_dir)
    got = np.concatenate([read_shard_strict(f) for f in shard_files(tmp_path / "out")])
    assert got.tolist() == [t for d in docs for t in [EOT, *reference.encode_ordinary(d)]]


def test_parquet_rows_are_documents(gpt2_vocab_dir, reference, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    docs = ["row one", "row two is longer", ""]
    pq.write_table(pa.table({"text": docs, "n": [1, 2, 3]}), tmp_path / "d.parquet")
    run_prepare("text", tmp_path / "d.parquet", "--out-dir", tmp_path / "out", "--val-tokens", 4,
                "--shard-tokens", 100, "--workers", 1, "--vocab-dir", gpt2_vocab_dir)
    got = np.concatenate([read_shard_strict(f) for f in shard_files(tmp_path / "out")])
    assert got.tolist() == [t for d in docs for t in [EOT, *reference.encode_ordinary(d)]]


@pytest.mark.skipif(shutil.which("bible") is None, reason="Debian package bible-kjv not installed")
def test_kjv_corpus_is_prepared_once_and_reads_back(gpt2_vocab_dir, reference, xsagpt, kjv_lock):
    script = ROOT / "data" / "kjv" / "prepare.sh"
    out = ROOT / "data" / "kjv" / "shards"
    run = lambda: subprocess.run(["bash", str(script), "--vocab-dir", str(gpt2_vocab_dir)], capture_output=True,
                                 text=True, timeout=120, check=True)
    with kjv_lock():
        run()
        again = run()
    assert "already complete" in again.stdout

    report = json.loads(xsagpt("data", "--check", f"{out}/*.bin", "--dump", 20).stdout)
    files = {pathlib.Path(f["path"]).name: f for f in report["files"]}
    assert files["val_000000.bin"]["tokens"] == 100_000
    assert len(files) >= 4 and all(f["format"] == "llm.c" for f in files.values())
    assert report["total_documents"] == 1189  # one per chapter
    assert 1_000_000 < report["total_tokens"] < 1_200_000
    head = reference.decode(files["val_000000.bin"]["first_tokens"])
    assert head.startswith("<|endoftext|>Genesis 1\n\n1 In the beginning God created the heaven and the earth.\n")


def test_fineweb_command_streams_the_chosen_sample_into_the_same_shards(corpus, gpt2_vocab_dir, reference, tmp_path):
    """No network here: a stand-in `datasets` module serves the corpus and records what
    was asked of it; the tokenize/shard path after it is the one tested above."""
    docs, _ = corpus
    fake = tmp_path / "fake" / "datasets"
    fake.mkdir(parents=True)
    (tmp_path / "docs.json").write_text(json.dumps(docs))
    (fake / "__init__.py").write_text(f'''
import json, pathlib
def load_dataset(path, name=None, split=None, streaming=False):
    pathlib.Path({str(tmp_path / "asked.json")!r}).write_text(json.dumps([path, name, split, streaming]))
    return ({{"text": t, "id": i}} for i, t in enumerate(json.loads(pathlib.Path({str(tmp_path / "docs.json")!r}).read_text())))
''')
    out = tmp_path / "shards"
    proc = subprocess.run([sys.executable, str(ROOT / "data" / "fineweb" / "prepare.py"), "--dataset", "fineweb-edu",
                           "--sample", "100BT", "--out-dir", str(out), "--val-tokens", str(VAL), "--shard-tokens",
                           str(SHARD), "--workers", "2", "--vocab-dir", str(gpt2_vocab_dir)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(fake.parent)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "asked.json").read_text()) == ["HuggingFaceFW/fineweb-edu", "sample-100BT", "train",
                                                                  True]
    got = np.concatenate([read_shard_strict(f) for f in shard_files(out)])
    assert got.tolist() == [t for d in docs for t in [EOT, *reference.encode_ordinary(d)]]
