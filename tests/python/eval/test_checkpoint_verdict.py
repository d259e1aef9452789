"""One verdict for one checkpoint file: xsagpt's commands (`sample`, `score`) and
scripts/eval/export.py accept the same copies of a real checkpoint and refuse the same
damaged ones, for the same reason in the same words (src/util/zip_check.cpp and its twin
scripts/eval/zip_check.py). The damage reaches each part of the zip archive torch.save
writes: the end-of-central-directory record's numbers, the zip64 end record, a central
directory entry, a local header, a record's bytes, the file cut short or grown; and files
that are no archive at all (empty, a directory). Each copy is the newest checkpoint of a
run directory, as both tools are most often given one."""
import io
import pathlib
import struct
import zipfile

import pytest

from tinyrun import train_tiny

pytest.importorskip("safetensors")

import export  # noqa: E402  scripts/eval/export.py


@pytest.fixture(scope="module")
def good(tmp_path_factory, xsagpt) -> bytes:
    run = train_tiny(tmp_path_factory.mktemp("verdict"), xsagpt, 256)
    return max((run / "checkpoints").glob("step_*.pt")).read_bytes()


def at_eocd(b: bytes, offset: int) -> int:
    return b.rindex(b"PK\x05\x06") + offset


def at_zip64_end(b: bytes, offset: int) -> int:
    return b.rindex(b"PK\x06\x06") + offset


def data_record(b: bytes) -> tuple[int, int]:
    """Where a tensor record's local header and its central directory entry start."""
    with zipfile.ZipFile(io.BytesIO(b)) as z:
        info = next(i for i in z.infolist() if "/data/" in i.filename and i.file_size >= 4)
    return info.header_offset, b.rindex(info.filename.encode()) - 46  # the entry's name is its field at 46


def record_data(b: bytes) -> int:
    """Where that record's bytes start: after its local header, name and extra field."""
    local = data_record(b)[0]
    name_len, extra_len = struct.unpack_from("<HH", b, local + 26)
    return local + 30 + name_len + extra_len


def flip(at, bit: int = 1):
    def damage(b: bytes) -> bytes:
        i = at(b)
        return b[:i] + bytes([b[i] ^ bit]) + b[i + 1:]
    return damage


def set_u16(at, value: int):
    def damage(b: bytes) -> bytes:
        i = at(b)
        return b[:i] + struct.pack("<H", value) + b[i + 2:]
    return damage


DAMAGE = {
    "intact": lambda b: b,
    "eocd-size-low-byte": flip(lambda b: at_eocd(b, 12)),
    "eocd-size-second-byte": flip(lambda b: at_eocd(b, 13)),
    "eocd-offset": flip(lambda b: at_eocd(b, 16), 4),
    "eocd-offset-high-byte": flip(lambda b: at_eocd(b, 19), 0x80),
    "eocd-record-count": flip(lambda b: at_eocd(b, 10)),
    "eocd-records-on-disk": flip(lambda b: at_eocd(b, 8)),
    "eocd-disk-number": flip(lambda b: at_eocd(b, 4)),
    "eocd-comment-length": flip(lambda b: at_eocd(b, 20)),
    "zip64-size": flip(lambda b: at_zip64_end(b, 40)),
    "zip64-offset": flip(lambda b: at_zip64_end(b, 48), 2),
    "zip64-record-count": flip(lambda b: at_zip64_end(b, 32)),
    "zip64-signature": flip(lambda b: at_zip64_end(b, 0)),
    "entry-crc": flip(lambda b: data_record(b)[1] + 16),
    "entry-method": set_u16(lambda b: data_record(b)[1] + 10, 8),
    "entry-size": flip(lambda b: data_record(b)[1] + 24),
    "entry-local-offset": flip(lambda b: data_record(b)[1] + 42),
    "entry-name": flip(lambda b: data_record(b)[1] + 46),
    "entry-signature": flip(lambda b: data_record(b)[1]),
    "local-name": flip(lambda b: data_record(b)[0] + 30 + 1),
    "local-signature": flip(lambda b: data_record(b)[0]),
    "record-byte": flip(lambda b: record_data(b)),  # the lowest mantissa bit of a float: still finite
    "truncated-half": lambda b: b[:len(b) // 2],
    "truncated-last-byte": lambda b: b[:-1],
    "a-byte-appended": lambda b: b + b"\0",
    "empty": lambda b: b"",
    "a-directory": None,
}


def reason(text: str, path: pathlib.Path) -> str:
    """What a tool says about the file: its message after the path, up to the advice."""
    line = next((ln for ln in text.splitlines() if f"{path}: " in ln), "")
    said = line.split(f"{path}: ", 1)[-1]
    for advice in ("; xsagpt's commands refuse it too", ". Use an earlier checkpoint"):
        said = said.split(advice)[0]
    return said


def export_verdict(run: pathlib.Path, out: pathlib.Path) -> str | None:
    """export.py's verdict on a run directory, run in this process (a process of its own
    per case costs seconds of imports): None when it exported, else its message."""
    try:
        export.main([str(run), "--out", str(out)])
    except SystemExit as e:
        return str(e.code)
    return None


@pytest.mark.parametrize("damage", DAMAGE)
def test_xsagpt_and_export_give_one_verdict(damage, good, tmp_path, xsagpt, gpt2_vocab_dir):
    ckpt = tmp_path / "run" / "checkpoints" / "step_00000001.pt"
    ckpt.parent.mkdir(parents=True)
    if DAMAGE[damage] is None:
        ckpt.mkdir()
    else:
        ckpt.write_bytes(DAMAGE[damage](good))
        assert (ckpt.read_bytes() == good) == (damage == "intact")  # the damage changed the file
    run = tmp_path / "run"
    sample = xsagpt("sample", run, "--prompt-ids", "1,2", "--ids", "-n", 1, "--device", "cpu", "--threads", 1,
                    check=False)
    exported = export_verdict(run, tmp_path / "out")
    # Before: export.py exported the copies with a changed number in the end-of-central-
    # directory record, which every command refuses, ended in a traceback on the directory,
    # and gave the empty file an empty reason; the end record's other numbers passed both.
    assert (exported is None) == (sample.returncode == 0) == (damage == "intact"), (sample.stderr, exported)
    assert (tmp_path / "out").exists() == (damage == "intact")
    if damage != "intact":
        said = reason(sample.stderr, ckpt)
        assert said and said == reason(exported, ckpt), (sample.stderr, exported)
        assert "\n" not in exported
        # `score` reads a checkpoint as `sample` does, to the word.
        score = xsagpt("score", run, "--vocab", gpt2_vocab_dir, "--device", "cpu", "--threads", 1, check=False,
                       input="")
        assert score.returncode == sample.returncode and reason(score.stderr, ckpt) == said, score.stderr
