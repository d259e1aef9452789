"""The Python readers of what xsagpt writes (metrics_record.py for plot.py and track.py,
plot_inputs.py for summary.json) hold it to one rule for numbers JSON cannot hold and check
ranges, not only types: a literal NaN, Infinity or -Infinity (which the trainer writes as
null) or a number past a double's range is a damaged line, named by file and line in the
words the C++ readers use; so is a step past the trainer's 64-bit counter or a negative
count of tokens. plot.py refuses such a line in one line (exit 2) and draws nothing;
track.py skips it and names it, mirroring the rest."""
import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

from finite_json import NON_FINITE, NotFinite, loads
from metrics_record import parse_line
from plotfiles import write_run
from track_sink import Recorder

ROOT = pathlib.Path(__file__).resolve().parents[3]
LITERALS = ("NaN", "Infinity", "-Infinity")
BIG_STEP = 10**23 + 7  # 24 digits


@pytest.mark.parametrize("text, why, lineno", [
    ('{"step": 3, "val_loss": NaN}', NON_FINITE, 1),
    ('{"a": "NaN and Infinity in a string are text",\n "b": [1,\n -Infinity]}', NON_FINITE, 3),
    ('{"a":\n 1e999}', "a number past a double's range (1e999) is not finite; the trainer writes null", 2),
])
def test_a_number_json_cannot_hold_is_named_with_its_line(text, why, lineno):
    with pytest.raises(NotFinite) as e:
        loads(text)
    assert (str(e.value), e.value.lineno) == (why, lineno)
    assert loads('{"a": "NaN", "b": 1e308, "c": null}') == {"a": "NaN", "b": 1e308, "c": None}


@pytest.mark.parametrize("line, why", [
    ('{"step": 4, "tokens": 8, "train_loss": NaN}', NON_FINITE),
    ('{"step": 4, "tokens": 8, "train_loss": 3.0, "mfu": Infinity}', NON_FINITE),
    ('{"step": 4, "tokens": 8, "val_loss": 3.0, "cos_y_v": [0.5, -Infinity]}', NON_FINITE),
    (f'{{"step": {BIG_STEP}, "tokens": 8, "train_loss": 3.0}}', f"step is {BIG_STEP}, past 2^63 - 1"),
    ('{"step": 4, "tokens": -512, "train_loss": 3.0}', "tokens is -512; a count, expected >= 0"),
    ('{"step": 4, "tokens": 8, "time_s": -0.5, "train_loss": 3.0}', "time_s is -0.5; a count, expected >= 0"),
])
def test_each_out_of_range_line_is_damaged(line, why):
    rec, got = parse_line(line)
    assert rec is None and got is not None and got.startswith(why), got
    assert parse_line(f'{{"step": {2**63 - 1}, "tokens": 0, "train_loss": 3.0}}')[1] is None  # the range's end


def damage_line(metrics: pathlib.Path, at: int, old: str, new: str) -> None:
    """Line `at` (from 1) with its first `old` replaced by `new`, as an edit would leave it."""
    lines = metrics.read_text().splitlines()
    assert old in lines[at - 1]
    lines[at - 1] = lines[at - 1].replace(old, new, 1)
    metrics.write_text("\n".join(lines) + "\n")


def val_line(metrics: pathlib.Path, nth: int = 1) -> int:
    """The line number (from 1) of the history's nth val line."""
    return [i for i, l in enumerate(metrics.read_text().splitlines(), 1) if "val_loss" in l][nth]


@pytest.mark.parametrize("key", ["val_loss", "time_s"])
@pytest.mark.parametrize("literal", LITERALS)
def test_plot_refuses_a_non_finite_literal_by_file_and_line(tmp_path, plot_module, capsys, literal, key):
    write_run(tmp_path / "r", "xsa", 3.0, resume_at=None)
    metrics = tmp_path / "r" / "metrics.jsonl"
    at = val_line(metrics)
    value = json.loads(metrics.read_text().splitlines()[at - 1])[key]
    damage_line(metrics, at, f'"{key}": {json.dumps(value)}', f'"{key}": {literal}')
    # Before: exit 0, the literal drawn (a -Infinity train loss turned the smoothed curve NaN from there on).
    assert plot_module.main([str(tmp_path / "r"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == f"plot.py: error: {metrics}:{at}: {NON_FINITE}\n", err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("old, new, why", [
    ('"step": 20,', f'"step": {BIG_STEP},', f"step is {BIG_STEP}, past 2^63 - 1"),
    ('"tokens": 10240,', '"tokens": -10240,', "tokens is -10240; a count, expected >= 0"),
])
def test_plot_refuses_a_step_or_count_out_of_range(tmp_path, plot_module, capsys, old, new, why):
    write_run(tmp_path / "r", "sa", 3.0, resume_at=None)
    metrics = tmp_path / "r" / "metrics.jsonl"
    at = val_line(metrics)
    damage_line(metrics, at, old, new)
    # Before: an OverflowError traceback for the step; the negative tokens drawn.
    assert plot_module.main([str(tmp_path / "r"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"plot.py: error: {metrics}:{at}: {why}") and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_plot_refuses_a_non_finite_literal_in_a_summary_by_line(tmp_path, plot_module, capsys):
    sweep = tmp_path / "sweep"
    write_run(sweep / "p1", "sa", 3.0, resume_at=None)
    summary = {"keys": ["model.attention"], "points": [
        {"name": "p1", "dir": "p1", "values": {"model.attention": "sa"}, "status": "done", "final_val_loss": 3.05}]}
    text = json.dumps(summary, indent=1).replace("3.05", "NaN")
    (sweep / "summary.json").write_text(text)
    at = 1 + text[:text.index("NaN")].count("\n")
    assert plot_module.main([str(sweep), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"plot.py: error: {sweep / 'summary.json'}:{at}: {NON_FINITE}\n"


@pytest.mark.parametrize("point, why", [
    (["name", "dir", "values"], 'points[0] is ["name", "dir", "values"], not an object'),
    ({"name": "p1", "dir": "p1", "values": "model.attention=sa", "status": "done", "final_val_loss": 3.0},
     'points[0].values is "model.attention=sa", not an object'),
])
def test_plot_refuses_a_summary_point_of_another_shape(tmp_path, plot_module, capsys, point, why):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "summary.json").write_text(json.dumps({"keys": ["model.attention"], "points": [point]}))
    # Before: a TypeError and an AttributeError traceback.
    assert plot_module.main([str(sweep), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"plot.py: error: {sweep / 'summary.json'}: {why}\n"


def test_plot_positions_refuses_a_non_finite_literal_by_file_and_line(tmp_path):
    for name, loss in (("a", "3.0"), ("b", "NaN")):  # as analyze --positions writes them, one loss a literal
        (tmp_path / f"{name}.json").write_text('{"seq_len": 4, "config": {"train": {"seed": 1}}, "buckets": [\n'
                                               f'{{"first": 1, "last": 1, "mean_loss": {loss}}}]}}')
    proc = subprocess.run([sys.executable, ROOT / "scripts" / "view" / "plot_positions.py", f"a={tmp_path / 'a.json'}",
                           f"b={tmp_path / 'b.json'}", "--baseline", "a", "--out", tmp_path / "pos.png"],
                          capture_output=True, text=True, timeout=120)
    # Before: exit 0, the NaN drawn and printed as the variant's difference.
    assert proc.returncode == 2 and proc.stderr == f"plot_positions.py: {tmp_path / 'b.json'}:2: {NON_FINITE}\n"
    assert not (tmp_path / "pos.png").exists()


@pytest.fixture(scope="module")
def track():
    spec = importlib.util.spec_from_file_location("track_bounds", ROOT / "scripts" / "view" / "track.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_track_skips_and_names_each_line_out_of_bounds(track, tmp_path, capsys):
    f = tmp_path / "metrics.jsonl"
    good = [json.dumps({"step": s, "tokens": 128 * s, "time_s": 0.1 * s, "train_loss": 5.0 - 0.1 * s}) for s in (1, 6)]
    bad = ['{"step": 2, "tokens": 256, "time_s": 0.2, "train_loss": NaN}',
           '{"step": 3, "tokens": 384, "time_s": 0.3, "train_loss": -Infinity}',
           '{"step": 4, "tokens": 512, "time_s": 0.4, "val_loss": 4.5, "cos_y_v": [Infinity]}',
           f'{{"step": {BIG_STEP}, "tokens": 640, "time_s": 0.5, "train_loss": 4.5}}',
           '{"step": 5, "tokens": -640, "time_s": 0.5, "train_loss": 4.5}']
    f.write_text("\n".join([good[0], *bad, good[1]]) + "\n")
    run = track.Run(tmp_path, "run", None, [])
    run.sink = Recorder()
    track.mirror(run)
    # Before: NaN and -Infinity were mirrored as losses, and so was the 24-digit step (TensorBoard's writer
    # then raised a ValueError) and the negative count of tokens.
    assert [(tag, s) for tag, s, _ in run.sink.logged] == [("train/loss", 1), ("train/tokens", 1),
                                                           ("train/loss", 6), ("train/tokens", 6)]
    err = capsys.readouterr().err
    for n in (2, 3, 4):
        assert f"[track] {f}:{n}: {NON_FINITE}; skipped" in err, err
    assert f"[track] {f}:5: step is {BIG_STEP}, past 2^63 - 1" in err
    assert f"[track] {f}:6: tokens is -640; a count, expected >= 0; skipped" in err
    assert sorted(run.damaged) == [2, 3, 4, 5, 6]


def test_track_exits_1_once_it_has_skipped_a_damaged_line(tmp_path):
    pytest.importorskip("tensorboard", reason="tensorboard is not installed (requirements-track.txt)")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{}")
    good = "".join(json.dumps({"step": s, "tokens": 128 * s, "time_s": 0.1 * s, "train_loss": 5.0 - 0.1 * s}) + "\n"
                   for s in (1, 2))
    track_cli = [sys.executable, ROOT / "scripts" / "view" / "track.py", run, "--tensorboard", tmp_path / "tb", "--once"]
    (run / "metrics.jsonl").write_text(good)
    assert subprocess.run(track_cli, capture_output=True, text=True, timeout=300).returncode == 0
    (run / "metrics.jsonl").write_text(good + '{"step": 3, "tokens": 384, "time_s": 0.3, "train_loss": -Infinity}\n')
    proc = subprocess.run(track_cli, capture_output=True, text=True, timeout=300)
    # Before: exit 0 with the -Infinity mirrored as a loss.
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"[track] {run / 'metrics.jsonl'}:3: {NON_FINITE}; skipped" in proc.stderr
    assert "skipped 1 damaged line(s)" in proc.stderr.splitlines()[-1]
