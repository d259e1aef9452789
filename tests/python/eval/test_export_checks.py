"""scripts/eval/export.py checks a checkpoint as xsagpt's own commands do before it writes
anything (the zip rule: every archive record's name in both headers and its CRC, and more,
in test_checkpoint_verdict.py; a directory or an empty file; every parameter of the model
config present with its shape), and an --out it cannot write is one line;
scripts/eval/load_export.py and the exported transformers model check what they read (the
folder's files, finite weights) and name what is wrong. A tiny model trained one step (tinyrun.train_tiny) stands in."""
import json
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import zipfile

import pytest
import torch

from tinyrun import train_tiny

safetensors_torch = pytest.importorskip("safetensors.torch")

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXPORT = ROOT / "scripts" / "eval" / "export.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory, xsagpt):
    return train_tiny(tmp_path_factory.mktemp("export-checks"), xsagpt, 256)


def export(*args):
    return subprocess.run([sys.executable, EXPORT, *map(str, args)], capture_output=True, text=True)


def newest(run):
    return sorted((run / "checkpoints").glob("step_*.pt"))[-1]


def one_line_error(proc):
    return proc.returncode != 0 and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_checkpoint_failing_its_crc_is_not_exported(run, tmp_path, xsagpt):
    bad = tmp_path / "step_00000001.pt"
    shutil.copy(newest(run), bad)
    with zipfile.ZipFile(bad) as z:
        info = next(i for i in z.infolist() if "/data/" in i.filename and i.file_size >= 4)
    with open(bad, "r+b") as f:  # the lowest mantissa bit of the entry's first float: still finite
        f.seek(info.header_offset)
        name_len, extra_len = struct.unpack("<HH", f.read(30)[26:30])
        at = info.header_offset + 30 + name_len + extra_len
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 1]))
    refused = xsagpt("sample", bad, "--prompt-ids", "1,2", "-n", 1, "--device", "cpu", check=False)
    assert refused.returncode != 0 and "CRC" in refused.stderr  # the binary's own verdict, the reference
    proc = export(bad, "--out", tmp_path / "out")
    # Before: exported, exit 0.
    assert one_line_error(proc), proc.stderr
    assert f"{bad}: corrupt checkpoint, its bytes changed since it was written: record '{info.filename}': " \
        "CRC-32 " in proc.stderr
    assert "xsagpt's commands refuse it too" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_record_named_differently_in_its_two_headers_is_refused_by_export_and_every_command(run, tmp_path, xsagpt):
    """A zip names each record twice, in its local header and in the central directory:
    one rule (src/util/zip_check.h) refuses a checkpoint whose two copies differ, in
    export.py and in the C++ loader alike, though every record's bytes match their CRC."""
    bad = tmp_path / "step_00000001.pt"
    shutil.copy(newest(run), bad)
    with zipfile.ZipFile(bad) as z:
        info = next(i for i in z.infolist() if "/data/" in i.filename)
    with open(bad, "r+b") as f:
        at = info.header_offset + 30  # the local header's copy of the name
        f.seek(at)
        assert f.read(len(info.filename)) == info.filename.encode()
        f.seek(at + info.filename.index("/data/") + 1)
        f.write(b"e")  # "data" -> "eata": one bit, 0x64 -> 0x65
    flipped = info.filename.replace("/data/", "/eata/")
    # Before: sample, score, eval, analyze and resume loaded it, while export.py refused it
    # saying "fails its CRC check ... every xsagpt command refuses it too".
    refused = xsagpt("sample", bad, "--prompt-ids", "1,2", "--ids", "-n", 1, "--device", "cpu", check=False)
    assert refused.returncode == 1, refused.stderr
    assert f"{bad}: corrupt checkpoint, its bytes changed since it was written: record '{info.filename}': its local " \
        f"header names it '{flipped}'" in refused.stderr
    proc = export(bad, "--out", tmp_path / "out")
    assert one_line_error(proc), proc.stderr
    assert f"{bad}: corrupt checkpoint, its bytes changed since it was written: record '{info.filename}': " \
        in proc.stderr and flipped in proc.stderr and "xsagpt's commands refuse it too" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_directory_or_an_empty_file_as_newest_checkpoint_is_one_line(run, tmp_path, xsagpt):
    """A run directory whose newest checkpoint is a directory, or an empty file: export.py
    refuses it in one line, in the words `xsagpt sample` uses."""
    copy = pathlib.Path(shutil.copytree(run, tmp_path / "run"))
    newest = copy / "checkpoints" / "step_00000009.pt"
    for make, message in ((newest.mkdir, "is a directory, expected a checkpoint file"),
                          (newest.touch, "not a readable checkpoint (an empty file, 0 bytes)")):
        make()
        refused = xsagpt("sample", copy, "--prompt-ids", "1,2", "--ids", "-n", 1, "--device", "cpu", check=False)
        assert refused.returncode == 1 and f"{newest}: {message}" in refused.stderr, refused.stderr
        proc = export(copy, "--out", tmp_path / "out")
        # Before: a traceback (IsADirectoryError), and "not a readable checkpoint ()".
        assert one_line_error(proc), proc.stderr
        assert f"{newest}: {message}" in proc.stderr
        assert not (tmp_path / "out").exists()
        newest.rmdir() if newest.is_dir() else newest.unlink()


@pytest.mark.parametrize("damage, message", [
    ("missing", "no weights for parameter transformer.ln_f.weight (the model config needs it)"),
    ("shape", "parameter transformer.h.0.mlp.c_fc.weight has shape [3, 3], the model config expects [128, 32]"),
    ("extra", "weights the model config has no parameter for: transformer.h.7.attn.c_attn.weight"),
])
def test_a_weight_missing_or_misshapen_is_not_exported(run, tmp_path, damage, message):
    ck = torch.load(newest(run), weights_only=True)
    assert tuple(ck["model"]["transformer.h.0.mlp.c_fc.weight"].shape) == (128, 32)
    if damage == "missing":
        del ck["model"]["transformer.ln_f.weight"]
    elif damage == "shape":
        ck["model"]["transformer.h.0.mlp.c_fc.weight"] = torch.zeros(3, 3)
    else:
        ck["model"]["transformer.h.7.attn.c_attn.weight"] = torch.zeros(3, 3)
    torch.save(ck, tmp_path / "bad.pt")
    proc = export(tmp_path / "bad.pt", "--out", tmp_path / "out")
    # Before: exported, exit 0; the damage showed later as a KeyError or transformers' size mismatch.
    assert one_line_error(proc), proc.stderr
    assert message in proc.stderr and "not exported" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_an_out_that_cannot_be_written_is_one_line(run, tmp_path):
    (tmp_path / "a-file").write_text("kept\n")
    for out, why in ((tmp_path / "a-file", "is a file, expected a folder"),
                     (tmp_path / "a-file" / "sub", "cannot write the export (Not a directory)")):
        proc = export(run, "--out", out)
        # Before: a Python traceback (FileExistsError, NotADirectoryError).
        assert one_line_error(proc), proc.stderr
        assert f"--out {out}: {why}" in proc.stderr
    assert (tmp_path / "a-file").read_text() == "kept\n"


def test_a_full_or_read_only_out_is_one_line_and_replaces_nothing(run, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", mnt], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (mnt / "out").mkdir()
        (mnt / "out" / "model.safetensors").write_text("the export before\n")
        proc = export(run, "--out", mnt / "out", "--force")  # the tiny model's weights need ~120 KB
        # Before: a Python traceback.
        assert one_line_error(proc), proc.stderr
        assert f"--out {mnt / 'out'}: cannot write the export (" in proc.stderr and "nothing there was replaced" \
            in proc.stderr
        assert (mnt / "out" / "model.safetensors").read_text() == "the export before\n"
        assert sorted(p.name for p in (mnt / "out").iterdir()) == ["model.safetensors"]
        subprocess.run(["mount", "-o", "remount,ro", mnt], check=True)
        proc = export(run, "--out", mnt / "other")
        assert one_line_error(proc), proc.stderr
        assert f"--out {mnt / 'other'}: cannot write the export (Read-only file system)" in proc.stderr
    finally:
        subprocess.run(["umount", "-l", mnt], check=False)


def nan_in(file: pathlib.Path, name: str):
    weights = safetensors_torch.load_file(file)
    weights[name][0] = float("nan")
    safetensors_torch.save_file(weights, file, metadata={"format": "pt"})


def test_load_export_checks_the_folder_and_finite_weights(run, tmp_path):
    from load_export import load_export
    out = tmp_path / "export"
    assert export(run, "--out", out).returncode == 0
    load_export(out)  # the good export loads
    os.rename(out / "model.safetensors", tmp_path / "kept.safetensors")
    with pytest.raises(FileNotFoundError, match="the export lacks model.safetensors"):
        load_export(out)
    os.rename(tmp_path / "kept.safetensors", out / "model.safetensors")
    nan_in(out / "model.safetensors", "transformer.ln_f.weight")
    # Before: loaded without a word, and every logit came out NaN.
    with pytest.raises(ValueError, match="weight transformer.ln_f.weight holds non-finite values"):
        load_export(out)


HF_SIDE = r"""
import json, sys
from transformers import AutoModelForCausalLM
out = {}
for folder in sys.argv[1:]:
    try:
        AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
        out[folder] = "loaded"
    except Exception as e:
        out[folder] = type(e).__name__ + ": " + str(e)
print(json.dumps(out))
"""


def test_the_transformers_model_checks_the_folder_and_finite_weights(run, tmp_path):
    pytest.importorskip("transformers", reason="transformers is not installed (requirements-eval.txt)")
    good, nan, no_vocab = tmp_path / "good", tmp_path / "nan", tmp_path / "no-vocab"
    assert export(run, "--format", "hf", "--out", good).returncode == 0
    shutil.copytree(good, nan)
    nan_in(nan / "model.safetensors", "transformer.h.0.attn.c_proj.weight")
    shutil.copytree(good, no_vocab)
    (no_vocab / "vocab.json").unlink()
    (no_vocab / "tokenizer_config.json").unlink()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf_home"), TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run([sys.executable, "-I", "-c", HF_SIDE, good, nan, no_vocab], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got[str(good)] == "loaded"
    # Before: both loaded; the NaN gave NaN logits, and the missing files surfaced later in
    # transformers' tokenizer messages, which name neither.
    assert got[str(nan)].startswith("ValueError: ") and \
        "weight transformer.h.0.attn.c_proj.weight holds non-finite values" in got[str(nan)]
    assert got[str(no_vocab)].startswith("FileNotFoundError: ") and \
        "the export lacks vocab.json, tokenizer_config.json" in got[str(no_vocab)]
