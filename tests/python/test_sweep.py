"""`xsagpt sweep` end to end: a 2 learning rates x SA/XSA grid on CPU runs to
completion, summarises four points and two XSA-SA differences, is skipped on a
second invocation, survives being killed midway, and plots."""
import json
import signal
import subprocess
import time

import pytest

from test_train import metrics, run_config, shards  # noqa: F401  (fixture re-exported)


def sweep_file(tmp_path, shards, **extra):
    base = run_config(tmp_path, shards, max_steps=8, eval_interval=4, ckpt_interval=2)
    spec = {"base": str(base), "grid": {"train.lr": [3e-3, 1e-2], "model.attention": ["sa", "xsa"]},
            "out_dir": str(tmp_path / "sweep"), **extra}
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(spec))
    return path


def point_dirs(sweep_dir):
    return sorted(p for p in sweep_dir.iterdir() if (p / "config.json").exists())


def test_sweep_runs_summarises_and_skips_finished(tmp_path, shards, xsagpt):
    spec = sweep_file(tmp_path, shards)
    dry = xsagpt("sweep", "-c", spec, "--dry-run")
    assert dry.stdout.count(" attention=") == 4 and not (tmp_path / "sweep").exists()

    first = xsagpt("sweep", "-c", spec)
    summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    assert len(summary["points"]) == 4 and all(p["status"] == "done" for p in summary["points"])
    assert len(summary["differences"]) == 2
    for d in summary["differences"]:
        sa = next(p for p in summary["points"] if p["name"] == d["sa"])
        xsa = next(p for p in summary["points"] if p["name"] == d["xsa"])
        assert sa["values"]["train.lr"] == xsa["values"]["train.lr"] == d["values"]["train.lr"]
        assert d["xsa_minus_sa_val_loss"] == pytest.approx(xsa["final_val_loss"] - sa["final_val_loss"])
        # the summary agrees with the point's own metrics
        assert sa["final_val_loss"] == metrics(tmp_path / "sweep" / d["sa"], "val_loss")[8]
    csv = (tmp_path / "sweep" / "summary.csv").read_text().splitlines()
    assert len(csv) == 5 and csv[0].startswith("name,model.attention,train.lr")
    assert "XSA - SA" in first.stdout
    png = tmp_path / "sweep" / "plots" / "sweep_final.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10000

    stamps = {p: (p / "done.json").stat().st_mtime_ns for p in point_dirs(tmp_path / "sweep")}
    t0 = time.time()
    again = xsagpt("sweep", "-c", spec, "--no-plot")
    assert again.stderr.count("finished, skipping") == 4
    assert {p: (p / "done.json").stat().st_mtime_ns for p in point_dirs(tmp_path / "sweep")} == stamps
    assert time.time() - t0 < 10


def test_killed_sweep_resumes_without_redoing_finished_points(tmp_path, shards, xsagpt, build_dir):
    spec = sweep_file(tmp_path, shards)
    sweep_dir = tmp_path / "sweep"
    proc = subprocess.Popen([build_dir / "xsagpt", "sweep", "-c", spec, "--no-plot"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    # Kill once the first point is done and the second has a checkpoint.
    deadline = time.time() + 120
    while True:
        dirs = point_dirs(sweep_dir) if sweep_dir.exists() else []
        done = [d for d in dirs if (d / "done.json").exists()]
        busy = [d for d in dirs if not (d / "done.json").exists() and list((d / "checkpoints").glob("*.pt"))]
        if done and busy:
            break
        assert proc.poll() is None, "sweep finished before it could be killed"
        assert time.time() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished_first = {d: (d / "done.json").stat().st_mtime_ns for d in done}
    xsagpt("sweep", "-c", spec, "--no-plot")
    summary = json.loads((sweep_dir / "summary.json").read_text())
    assert all(p["status"] == "done" for p in summary["points"])
    for d, stamp in finished_first.items():
        assert (d / "done.json").stat().st_mtime_ns == stamp  # not redone
    # the interrupted point resumed exactly: same losses as an uninterrupted run of it
    for d in busy:
        cfg = json.loads((d / "config.json").read_text())
        xsagpt("train", "-c", d / "config.json", "--out", tmp_path / "check")
        assert metrics(d) == metrics(tmp_path / "check")
        assert cfg["train"]["max_steps"] == 8


def test_changed_sweep_file_over_existing_sweep_is_refused(tmp_path, shards, xsagpt):
    spec = sweep_file(tmp_path, shards)
    xsagpt("sweep", "-c", spec, "--no-plot")
    data = json.loads(spec.read_text())
    data["grid"]["train.lr"] = [1e-3]
    spec.write_text(json.dumps(data))
    proc = xsagpt("sweep", "-c", spec, check=False)
    assert proc.returncode == 2 and "different sweep file" in proc.stderr


def test_constant_batch_tokens_across_sequence_lengths(tmp_path, shards, xsagpt):
    base = run_config(tmp_path, shards, micro_batch=8, seq_len=16, batch_tokens=256)
    spec = {"base": str(base), "grid": {"train.seq_len": [8, 16, 32, 64]}, "constant_batch_tokens": True,
            "out_dir": str(tmp_path / "sw")}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    out = xsagpt("sweep", "-c", tmp_path / "s.json", "--dry-run").stdout
    rows = [l for l in out.splitlines() if "seq_len=" in l and "micro_batch=" in l]
    got = {int(l.split("seq_len=")[1].split()[0]): (int(l.split("micro_batch=")[1].split()[0]),
                                                    int(l.split("accumulation=")[1].split()[0])) for l in rows}
    assert got == {8: (16, 2), 16: (8, 2), 32: (4, 2), 64: (2, 2)}  # 128 tokens per micro-batch, 256 per step
