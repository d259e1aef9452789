"""scripts/eval/load_export.py as a command, where the network is cut off: it tokenizes with
GPT-2's vocabulary as the repository ships it (data/gpt2/), never downloading it, and a
vocabulary it cannot find, or a model.safetensors cut short, is one line naming the file,
not a traceback. The export is made here without training: export.py's conventions for a
tiny model over GPT-2's padded vocabulary, with random weights."""
import json
import math
import pathlib
import subprocess
import sys

import pytest
import torch

pytest.importorskip("safetensors")
pytest.importorskip("tiktoken")

from safetensors.torch import save_file  # noqa: E402

import export  # noqa: E402  scripts/eval/export.py
from gpt2_tiktoken import gpt2_encoding, offline_env  # noqa: E402  the tests' own tokenizer reference
from load_export import Conventions, expected_shapes, load_export, logprob  # noqa: E402

LOAD_EXPORT = pathlib.Path(__file__).resolve().parents[3] / "scripts" / "eval" / "load_export.py"
CONTEXT, CONTINUATION = "In the beginning", " God created"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """An export of a one-layer XSA model over the padded 50304 ids, its weights random."""
    cfg = {"vocab_size": 50304, "block_size": 32, "n_layer": 1, "d_model": 8, "n_head": 2, "head_dim": 4,
           "attention": "xsa"}
    conv = export.conventions(cfg)
    shapes = expected_shapes(Conventions(conv, 1), cfg["d_model"])
    g = torch.Generator().manual_seed(0)
    weights = {name: 0.5 * torch.randn(shape, generator=g) for name, shape in shapes.items()}
    d = tmp_path_factory.mktemp("export")
    save_file(weights, str(d / "model.safetensors"))
    (d / "config.json").write_text(json.dumps({"format": "xsagpt-safetensors", "conventions": conv}))
    return d


def load_export_cli(*args, env):
    return subprocess.run([sys.executable, str(LOAD_EXPORT), *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


def test_a_good_export_is_scored_offline_with_the_shipped_vocabulary(folder, tmp_path, repo_root):
    proc = load_export_cli(folder, CONTEXT, CONTINUATION, env=offline_env(tmp_path))
    # Before: tiktoken.get_encoding("gpt2") downloaded the vocabulary: a ConnectionError traceback.
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    # The same log-probability from the tests' own tokenizer over the shipped files.
    enc = gpt2_encoding(repo_root / "data" / "gpt2")
    ctx, whole = enc.encode(CONTEXT), enc.encode(CONTEXT + CONTINUATION)
    assert len(whole) > len(ctx) >= 2 and max(whole) > 1000  # real GPT-2 ids, not bytes
    want = logprob(load_export(folder), ctx, whole[len(ctx):])
    assert want < -1 and math.isclose(float(proc.stdout.strip()), want, rel_tol=1e-9), (proc.stdout, want)


def test_a_vocabulary_it_cannot_find_is_one_line_naming_where_it_looked(folder, tmp_path):
    empty = tmp_path / "no-vocab"
    empty.mkdir()
    proc = load_export_cli(folder, CONTEXT, CONTINUATION, env=offline_env(tmp_path, XSAGPT_GPT2_VOCAB=str(empty)))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"load_export.py: error: XSAGPT_GPT2_VOCAB={empty}: no "), lines
    assert "downloads nothing" in lines[0]


def test_a_vocabulary_that_is_not_gpt2s_is_refused(folder, tmp_path, repo_root):
    fake = tmp_path / "fake-vocab"
    fake.mkdir()
    (fake / "encoder.json").write_bytes((repo_root / "data" / "gpt2" / "encoder.json").read_bytes())
    (fake / "vocab.bpe").write_bytes((repo_root / "data" / "gpt2" / "vocab.bpe").read_bytes()[:-10])
    proc = load_export_cli(folder, CONTEXT, CONTINUATION, env=offline_env(tmp_path, XSAGPT_GPT2_VOCAB=str(fake)))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert f"XSAGPT_GPT2_VOCAB={fake}: not GPT-2's vocabulary files" in proc.stderr


@pytest.mark.parametrize("keep", [0.5, 0.999])
def test_a_weights_file_cut_short_is_one_line_naming_it(folder, tmp_path, keep):
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "config.json").write_bytes((folder / "config.json").read_bytes())
    data = (folder / "model.safetensors").read_bytes()
    (cut / "model.safetensors").write_bytes(data[:int(len(data) * keep)])
    with pytest.raises(ValueError, match=f"^{cut / 'model.safetensors'}: not a whole safetensors file"):
        load_export(cut)
    proc = load_export_cli(cut, CONTEXT, CONTINUATION, env=offline_env(tmp_path))
    # Before: the SafetensorError went past the handler: a traceback.
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"load_export.py: error: {cut / 'model.safetensors'}: not a whole safetensors file"), lines
