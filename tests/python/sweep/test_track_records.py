"""scripts/view/track.py follows metrics.jsonl by record: a history a resumed run renames
into place (as src/run/metrics.h rewrites it) is read again from its start, so no step
is lost wherever the old byte offset falls in the new file; values that are no number
are refused and every damaged line is named; misuse is a one-line error. Its reader is
driven here directly with a sink that records what it is given, on hand-written files
that stand for a run's, so each case is exact and takes milliseconds."""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest
from track_sink import Recorder

ROOT = pathlib.Path(__file__).resolve().parents[3]
TRACK = ROOT / "scripts" / "view" / "track.py"


@pytest.fixture(scope="module")
def track():
    spec = importlib.util.spec_from_file_location("track_under_test", TRACK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def line(step, t, **values):
    return json.dumps({"step": step, "tokens": 128 * step, "time_s": t, **values}) + "\n"


def replace(path, text):
    """As the trainer rewrites a history: a new file renamed into place."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def new_run(track, tmp_path):
    run = track.Run(tmp_path, "run", None, [])
    run.sink = Recorder()
    return run


def test_a_history_renamed_into_place_is_read_again_by_record(track, tmp_path):
    f = tmp_path / "metrics.jsonl"
    kept = "".join(line(s, 0.1 * s, train_loss=5.0 - 0.1 * s) for s in (1, 2))
    f.write_text(kept + "".join(line(s, 1000.123456789 + s, train_loss=5.0 - 0.1 * s) for s in (3, 4)))
    run = new_run(track, tmp_path)
    track.mirror(run)
    offset = f.stat().st_size
    # A resume from step 2 keeps steps 1-2 and logs 3-5 again, with shorter time stamps:
    # the new file is no smaller, and the old offset falls inside step 5's line.
    again = "".join(line(s, 0.1 * s, train_loss=5.0 - 0.1 * s) for s in (3, 4)) + line(
        5, 0.5, train_loss=4.5, lr=0.01, grad_norm=0.123456789, tokens_per_s=123456.789)
    replace(f, kept + again)
    start5 = len(kept) + again.index('{"step": 5')
    assert start5 < offset < len(kept + again)
    track.mirror(run)
    with open(f, "a") as fh:
        fh.write(line(6, 0.6, train_loss=4.4))
    track.mirror(run)
    steps = [s for tag, s, _ in run.sink.logged if tag == "train/loss"]
    # Before: step 5's line was read from the middle and dropped; step 6 then made it lost for good.
    assert steps == [1, 2, 3, 4, 5, 6]


def test_values_that_are_no_number_are_refused_and_damaged_lines_named(track, tmp_path, capsys):
    f = tmp_path / "metrics.jsonl"
    f.write_text(line(1, 0.1, train_loss=5.0) + line(2, 0.2, train_loss=True) + '{"step": 3, "train_lo\n'
                 + line(4, 0.4, val_loss="4.1") + line(5, 0.5, train_loss=4.8, mfu=None) + line(6, 0.6, val_loss=4.7))
    run = new_run(track, tmp_path)
    track.mirror(run)
    # Before: true was logged as a loss of 1.0, and the broken lines went by without a word.
    assert [(tag, s) for tag, s, _ in run.sink.logged] == [("train/loss", 1), ("train/tokens", 1),
                                                           ("train/loss", 5), ("train/tokens", 5), ("val/loss", 6)]
    err = capsys.readouterr().err
    assert f"{f}:2: train_loss is true, not a number; skipped" in err
    assert f"{f}:3: not JSON" in err
    assert f"{f}:4: val_loss is \"4.1\", not a number; skipped" in err
    assert sorted(run.damaged) == [2, 3, 4]
    track.mirror(run)  # named once, not at every poll
    assert capsys.readouterr().err == ""


def test_a_negative_step_is_named_as_damage(track, tmp_path, capsys):
    f = tmp_path / "metrics.jsonl"
    f.write_text(line(1, 0.1, train_loss=5.0) + line(-5, 0.2, train_loss=4.0) + line(2, 0.3, train_loss=4.9))
    run = new_run(track, tmp_path)
    track.mirror(run)
    # Before: dropped without a word (no step mirrored is below -1).
    assert [(tag, s) for tag, s, _ in run.sink.logged if tag == "train/loss"] == [("train/loss", 1), ("train/loss", 2)]
    assert f"{f}:2: step is -5; steps count from 0" in capsys.readouterr().err
    assert sorted(run.damaged) == [2]


def test_damaged_diagnostics_are_refused_as_losses_are(track, tmp_path, capsys):
    f = tmp_path / "metrics.jsonl"
    gate = [None, {"mean": 0.5, "min": 0.25, "max": 0.75, "heads": [0.25, 0.75]}]
    f.write_text(line(1, 0.1, val_loss=5.0, cos_y_v=[0.5, None], xsa_gate=gate)
                 + line(2, 0.2, val_loss=4.9, cos_y_v=5) + line(3, 0.3, val_loss=4.8, cos_y_v=[True, 0.4])
                 + line(4, 0.4, val_loss=4.7, xsa_gate=[None, {"mean": "x"}]) + line(5, 0.5, val_loss=4.6, xsa_gate=[0.5])
                 + line(6, 0.6, val_loss=4.5, cos_y_v=[0.25, 0.125]))
    run = new_run(track, tmp_path)
    track.mirror(run)
    # Before: cos_y_v 5 ended in a traceback; true, a string and a number for a gate were dropped without a word.
    assert run.sink.logged == [("val/loss", 1, 5.0), ("similarity/cos_y_v/layer_0", 1, 0.5),
                               ("xsa_gate/layer_1/mean", 1, 0.5), ("xsa_gate/layer_1/min", 1, 0.25),
                               ("xsa_gate/layer_1/max", 1, 0.75), ("val/loss", 6, 4.5),
                               ("similarity/cos_y_v/layer_0", 6, 0.25), ("similarity/cos_y_v/layer_1", 6, 0.125)]
    err = capsys.readouterr().err
    for n, why in ((2, "cos_y_v is 5, not a list"), (3, "cos_y_v[0] is true, not a number"),
                   (4, 'xsa_gate[1].mean is "x", not a number'), (5, "xsa_gate[0] is 0.5, not null or an object")):
        assert f"{f}:{n}: {why}" in err, err
    assert sorted(run.damaged) == [2, 3, 4, 5]


def test_misuse_is_a_one_line_error(tmp_path):
    pytest.importorskip("tensorboard", reason="tensorboard is not installed (requirements-track.txt)")
    run = tmp_path / "run"
    (run / "metrics.jsonl").mkdir(parents=True)
    (run / "config.json").write_text("{}")
    proc = subprocess.run([sys.executable, TRACK, run, "--tensorboard", tmp_path / "tb", "--once"],
                          capture_output=True, text=True, timeout=120)
    # Before: a traceback (IsADirectoryError).
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"track.py: error: {run / 'metrics.jsonl'}: not a regular file" in proc.stderr
    (tmp_path / "tb-file").write_text("")
    proc = subprocess.run([sys.executable, TRACK, run, "--tensorboard", tmp_path / "tb-file", "--once"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "--tensorboard" in proc.stderr and "not a directory" in proc.stderr


@pytest.mark.parametrize("where", ["under_a_file", "under_proc", "under_sys", "run_folder_taken_by_a_file"])
def test_a_tensorboard_folder_that_cannot_be_made_is_one_line_and_exit_2(tmp_path, where):
    # As plot.py's figures folder: a folder under a file, under /proc (FileNotFoundError), under
    # /sys (PermissionError, for root too), and a run's own folder in it taken by a file.
    pytest.importorskip("tensorboard", reason="tensorboard is not installed (requirements-track.txt)")
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text(line(1, 0.1, train_loss=5.0))
    (run / "config.json").write_text("{}")
    (tmp_path / "file").write_text("")
    tb = {"under_a_file": tmp_path / "file" / "tb", "under_proc": pathlib.Path("/proc/xsagpt-tb"),
          "under_sys": pathlib.Path("/sys/xsagpt-tb"), "run_folder_taken_by_a_file": tmp_path / "tb"}[where]
    if where == "run_folder_taken_by_a_file":  # the run's events go to tb/run
        tb.mkdir()
        (tb / "run").write_text("")
    proc = subprocess.run([sys.executable, TRACK, run, "--tensorboard", tb, "--once"],
                          capture_output=True, text=True, timeout=120)
    # Before: a traceback (NotADirectoryError, FileNotFoundError, PermissionError, FileExistsError).
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    err = [l for l in proc.stderr.splitlines() if l.startswith("track.py: error: ")]
    folder = tb / "run" if where == "run_folder_taken_by_a_file" else tb
    assert len(err) == 1 and f"{folder}: cannot make the TensorBoard folder" in err[0], proc.stderr
