"""scripts/eval/load_export.py reads an export's compact vocabulary (config.json's "vocab",
which export.py copies from the checkpoint) through one check, against itself and against the
model's embedding rows: a damaged mapping is refused by its key, from the module and from the
command line, rather than scoring other tokens than the model learned or ending in a traceback."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

pytest.importorskip("safetensors")

import export  # noqa: E402  scripts/eval/export.py
from load_export import load_export  # noqa: E402
from reference.model import GPT, GPTConfig  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
K = 128  # the compact vocabulary, and the model's rows (a multiple of 64: no padding)
CFG = dict(vocab_size=K, block_size=16, n_layer=1, d_model=16, n_head=2, head_dim=8)


def good_vocab() -> dict:
    ids = list(range(464, 464 + K - 2)) + [50256]  # distinct GPT-2 ids, " The" (464) onwards and end-of-text
    return {"format": "xsagpt compact vocabulary v1", "vocab_size": K, "rest_id": K - 1, "rest_marker": "<unk>",
            "gpt2_ids": ids}


@pytest.fixture(scope="module")
def weights_file(tmp_path_factory):
    from safetensors.torch import save_file
    torch.manual_seed(0)
    ref = GPT(GPTConfig.from_dict(CFG)).eval()
    path = tmp_path_factory.mktemp("weights") / "model.safetensors"
    save_file({k: p.detach().clone() for k, p in ref.named_parameters()}, str(path))
    return path


def write_export(folder: pathlib.Path, weights_file, vocab, tokenizer="gpt2-compact") -> pathlib.Path:
    folder.mkdir()
    (folder / "model.safetensors").symlink_to(weights_file)
    config = {"format": "xsagpt-safetensors", "conventions": export.conventions(CFG), "tokenizer": tokenizer}
    if vocab is not None:
        config["vocab"] = vocab
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def cut(v: dict, n: int) -> dict:
    """The mapping cut to its first n ids, vocab_size and rest_id made to agree with the cut."""
    return {**v, "vocab_size": n + 1, "rest_id": n, "gpt2_ids": v["gpt2_ids"][:n]}


DAMAGE = {
    "cut to 10 ids, consistently": (lambda v: cut(v, 10), "vocab.vocab_size = 11: expected the K this model was "
                                                          "trained on: its embedding has 128 rows, which fits K "
                                                          "from 65 to 128"),
    "ids cut, sizes kept": (lambda v: {**v, "gpt2_ids": v["gpt2_ids"][:10]},
                            "vocab.gpt2_ids = a list of 10: expected a list of K-1 = 127 GPT-2 token ids"),
    "an id as text": (lambda v: {**v, "gpt2_ids": ["464"] + v["gpt2_ids"][1:]},
                      "vocab.gpt2_ids = a list of 127: expected distinct GPT-2 token ids (0 to 50256)"),
    "an id twice": (lambda v: {**v, "gpt2_ids": v["gpt2_ids"][:-1] + [464]}, "expected distinct GPT-2 token ids"),
    "an id past GPT-2's": (lambda v: {**v, "gpt2_ids": v["gpt2_ids"][:-1] + [50257]},
                           "expected distinct GPT-2 token ids"),
    "rest_id wrong": (lambda v: {**v, "rest_id": 0}, "vocab.rest_id = 0: expected K-1 = 127"),
    "rest_id true": (lambda v: {**v, "rest_id": True}, "vocab.rest_id = True: expected K-1 = 127"),
    "vocab_size as text": (lambda v: {**v, "vocab_size": "128"},
                           "vocab.vocab_size = '128': expected an integer K from 2 to 50257"),
    "vocab_size missing": (lambda v: {k: x for k, x in v.items() if k != "vocab_size"},
                           "vocab.vocab_size = missing: expected an integer K"),
    "format missing": (lambda v: {k: x for k, x in v.items() if k != "format"},
                       "vocab.format = missing: expected 'xsagpt compact vocabulary v1'"),
    "not an object": (lambda v: v["gpt2_ids"], "config.json: \"vocab\" is list: expected a compact vocabulary"),
}


def test_a_whole_mapping_loads_and_maps_as_written(weights_file, tmp_path):
    model = load_export(write_export(tmp_path / "e", weights_file, good_vocab()))
    assert model.vocab == good_vocab()
    assert load_export(write_export(tmp_path / "g", weights_file, None, tokenizer="gpt2")).vocab is None


@pytest.mark.parametrize("name", DAMAGE)
def test_a_damaged_mapping_is_refused_by_its_key(name, weights_file, tmp_path):
    damage, message = DAMAGE[name]
    folder = write_export(tmp_path / "e", weights_file, damage(good_vocab()))
    # Before: the cut mapping loaded and scored other ids (exit 0); the others ended in IndexError,
    # KeyError or TypeError tracebacks, or loaded.
    with pytest.raises(ValueError) as e:
        load_export(folder)
    assert message in str(e.value), e.value


def test_a_tokenizer_that_disagrees_with_the_vocab_is_refused(weights_file, tmp_path):
    with pytest.raises(ValueError, match=r"\"tokenizer\" is 'gpt2' beside a compact \"vocab\""):
        load_export(write_export(tmp_path / "a", weights_file, good_vocab(), tokenizer="gpt2"))
    with pytest.raises(ValueError, match=r"\"tokenizer\" is 'gpt2-compact' but there is no \"vocab\""):
        load_export(write_export(tmp_path / "b", weights_file, None))


def test_the_command_refuses_a_cut_mapping_and_a_small_gpt2_model_by_name(weights_file, gpt2_vocab_dir, tmp_path):
    env = dict(os.environ, XSAGPT_GPT2_VOCAB=str(gpt2_vocab_dir))
    script = [sys.executable, str(ROOT / "scripts" / "eval" / "load_export.py")]
    good = write_export(tmp_path / "good", weights_file, good_vocab())
    ok = subprocess.run(script + [str(good), "The", " The"], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    assert float(ok.stdout) < 0
    bad = write_export(tmp_path / "cut", weights_file, cut(good_vocab(), 10))
    proc = subprocess.run(script + [str(bad), "The", " The"], capture_output=True, text=True, env=env)
    assert proc.returncode != 0 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert "vocab.vocab_size = 11" in proc.stderr
    # GPT-2 ids into a model of 128 rows: refused, not an IndexError from the embedding
    small = write_export(tmp_path / "small", weights_file, None, tokenizer="gpt2")
    proc = subprocess.run(script + [str(small), "The", " The"], capture_output=True, text=True, env=env)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "128 token rows and no compact vocabulary" in proc.stderr
