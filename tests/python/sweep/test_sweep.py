"""`xsagpt sweep` end to end: a 2 learning rates x SA/XSA grid on CPU (a sweep file
of the older form: its attention values are its variants, "sa" the baseline) runs to
completion, summarises four points and two XSA-SA differences, is skipped on a
second invocation, survives being killed midway, and plots; seeds in the grid give
each attention's mean and spread; the gap's trend along seq_len is linregress's; the
shipped sweeps validate; a point a trainer started by hand owns is skipped, never
recorded as failed. Several sweep processes on one directory: test_sweep_points.py.
Sweeps with named variants: test_variants.py."""
import json
import math
import os
import signal
import statistics
import subprocess
import time

import pytest

from tinyrun import metrics, run_config


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
    assert len(summary["differences"]) == 2 and (summary["variants"], summary["baseline"]) == (["sa", "xsa"], "sa")
    for d in summary["differences"]:
        sa = next(p for p in summary["points"] if p["name"] == d["baseline"])
        xsa = next(p for p in summary["points"] if p["name"] == d["point"])
        assert (sa["variant"], xsa["variant"], d["variant"]) == ("sa", "xsa", "xsa")
        assert sa["values"]["train.lr"] == xsa["values"]["train.lr"] == d["values"]["train.lr"]
        assert d["val_loss_minus_baseline"] == pytest.approx(xsa["final_val_loss"] - sa["final_val_loss"])
        # the summary agrees with the point's own metrics
        assert sa["final_val_loss"] == metrics(tmp_path / "sweep" / d["baseline"], "val_loss")[8]
    csv = (tmp_path / "sweep" / "summary.csv").read_text().splitlines()
    assert len(csv) == 5 and csv[0].startswith("name,model.attention,train.lr")
    assert "- sa (paired)" in first.stdout and (tmp_path / "sweep" / "report.md").exists()
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


def test_dry_run_marks_the_points_that_cannot_fit(tmp_path, shards, xsagpt):
    """--dry-run: each point's memory estimate on the device it would use, the same
    figure `xsagpt info` gives for its settings, and a point whose weights, gradients
    and AdamW state alone exceed the device marked before anything runs."""
    base = run_config(tmp_path, shards, micro_batch=4, seq_len=16)
    shape = {"n_layer": 48, "n_head": 4, "head_dim": 16}
    spec = {"base": str(base), "grid": {"model.d_model": [64, 16384]}, "out_dir": str(tmp_path / "sw"),
            "set": [f"model.{k}={v}" for k, v in shape.items()] + ["train.device=cpu"]}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    out = xsagpt("sweep", "-c", tmp_path / "s.json", "--dry-run").stdout
    rows = {l.split()[0]: l for l in out.split("memory, as each point would start here:")[1].splitlines() if l.strip()}
    small, huge = rows["model.d_model=64"], rows["model.d_model=16384"]
    assert small.endswith("fits") and "on cpu" in small and "CANNOT FIT" in huge
    # The small point's estimate is info's for the same model and train settings (CPU: fp32, no kernels).
    model = {**json.loads(base.read_text())["model"], **shape, "d_model": 64}
    sets = [a for k, v in model.items() if k != "base" for a in ("--set", f"model.{k}={v}")]
    est = json.loads(xsagpt("info", "--json", "-c", model["base"], *sets, "-b", 4, "-t", 16, "--precision", "fp32",
                            "--kernels", "aten").stdout)["memory_bytes"]["total"]
    assert small.split()[1] == f"{est / 2**30:.2f}" and small.split()[2] == "GiB"
    assert not (tmp_path / "sw").exists()  # a dry run writes nothing


def test_a_point_train_would_refuse_stops_the_sweep_before_anything_runs(tmp_path, shards, xsagpt):
    """A point whose kernels cannot run its model (the gelu kernel computes the tanh
    approximation; one point is exact-GELU) is refused when the sweep is read, dry run
    or not, with train's own message naming the key, and nothing is written. (What only
    a GPU can refuse, fp8 on an older one, --dry-run lists point by point.)"""
    base = run_config(tmp_path, shards, micro_batch=2, seq_len=16)
    spec = {"base": str(base), "grid": {"model.gelu": ["exact", "tanh"]}, "out_dir": str(tmp_path / "sw"),
            "set": ["train.kernels=gelu", "train.device=cpu"]}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    for dry in (["--dry-run"], []):
        proc = xsagpt("sweep", "-c", tmp_path / "s.json", *dry, check=False)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "train.kernels" in proc.stderr and 'model.gelu is "exact"' in proc.stderr
    refused = xsagpt("train", "-c", base, "--set", "model.gelu=exact", "--set", "train.kernels=gelu",
                     "--set", "train.device=cpu", check=False)  # its run dir: tmp_path/run
    assert refused.returncode == 2 and 'model.gelu is "exact"' in refused.stderr
    assert not (tmp_path / "sw").exists() and not (tmp_path / "run").exists()


def test_seeds_in_the_grid_give_each_attentions_mean_and_spread(tmp_path, shards, xsagpt):
    base = run_config(tmp_path, shards, max_steps=3, eval_interval=0, ckpt_interval=0)
    spec = {"base": str(base), "grid": {"model.attention": ["sa", "xsa"], "train.seed": [1, 2, 3]},
            "out_dir": str(tmp_path / "sw")}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    out = xsagpt("sweep", "-c", tmp_path / "s.json", "--no-plot").stdout
    sw = tmp_path / "sw"
    val = {(a, s): metrics(sw / f"model.attention={a},train.seed={s}", "val_loss")[3]
           for a in ("sa", "xsa") for s in (1, 2, 3)}
    assert len(set(val.values())) == 6, "the seeds must give different runs"
    summary = json.loads((sw / "summary.json").read_text())["over_seeds"]
    groups = {g["values"]["model.attention"]: g for g in summary["groups"]}
    assert groups.keys() == {"sa", "xsa"}
    for a, g in groups.items():
        xs = [val[(a, s)] for s in (1, 2, 3)]
        assert g["seeds"] == [1, 2, 3]
        v = g["final_val_loss"]
        assert v["n"] == 3 and v["min"] == min(xs) and v["max"] == max(xs)
        assert v["mean"] == pytest.approx(statistics.mean(xs), abs=1e-12)
        assert v["std"] == pytest.approx(statistics.stdev(xs), abs=1e-12)
    (d,) = json.loads((sw / "summary.json").read_text())["comparisons"]
    paired = [val[("xsa", s)] - val[("sa", s)] for s in (1, 2, 3)]
    assert d["values"] == {} and (d["variant"], d["baseline"]) == ("xsa", "sa")
    assert d["minus_baseline"]["mean"] == pytest.approx(statistics.mean(paired), abs=1e-12)
    assert d["minus_baseline"]["sd"] == pytest.approx(statistics.stdev(paired), abs=1e-12)
    # The printed table and summary_seeds.csv carry the same figures.
    sa = groups["sa"]["final_val_loss"]
    assert f"{sa['mean']:.4f} ± {sa['std']:.4f}" in out
    assert f"{statistics.mean(paired):+.4f}" in out
    rows = (sw / "summary_seeds.csv").read_text().splitlines()
    assert rows[0] == ("model.attention,seeds,n_done,final_val_loss_mean,final_val_loss_std,"
                       "final_val_loss_min,final_val_loss_max")
    cells = rows[1].split(",")
    assert cells[:3] == ["sa", '"1 2 3"', "3"] and float(cells[3]) == pytest.approx(sa["mean"], abs=1e-12)


def test_the_gap_along_seq_len_is_the_slope_of_the_paired_differences(tmp_path, shards, xsagpt):
    """configs/sweeps/paper-seqlen-1.4b.json in miniature (the older form: model.attention's
    values are the variants): the trend in summary.json and report.md is
    scipy.stats.linregress of XSA minus SA, read from the runs' done.json, on log2 seq_len,
    its interval the slope +- t(0.975, n - 2) stderr."""
    stats = pytest.importorskip("scipy.stats")
    lens = [8, 16, 32, 64]
    base = run_config(tmp_path, shards, max_steps=4, eval_interval=4, ckpt_interval=0)
    spec = {"base": str(base), "grid": {"train.seq_len": lens, "model.attention": ["sa", "xsa"]},
            "out_dir": str(tmp_path / "sw")}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    out = xsagpt("sweep", "-c", tmp_path / "s.json", "--no-plot").stdout
    sw = tmp_path / "sw"
    final = {(a, n): json.loads((sw / f"model.attention={a},train.seq_len={n}" / "done.json").read_text())
             ["final_val_loss"] for a in ("sa", "xsa") for n in lens}
    diffs = [final[("xsa", n)] - final[("sa", n)] for n in lens]
    r = stats.linregress([math.log2(n) for n in lens], diffs)
    half = stats.t.ppf(0.975, len(lens) - 2) * r.stderr
    assert r.stderr > 0 and len(set(diffs)) == len(lens)  # a real spread about the line
    trends = json.loads((sw / "summary.json").read_text())["trends"]
    assert len(trends) == 1
    t = trends[0]
    assert (t["key"], t["variant"], t["values"], t["n"], t["df"]) == ("train.seq_len", "xsa", {}, 4, 2)
    assert t["slope"] == pytest.approx(r.slope, rel=1e-9)
    assert t["ci95"] == pytest.approx([r.slope - half, r.slope + half], rel=1e-9)
    assert [l["value"] for l in t["levels"]] == lens
    assert [l["mean"] for l in t["levels"]] == pytest.approx(diffs, abs=1e-12)
    row = f"| xsa | train.seq_len | - | {r.slope:+.4f} | [{r.slope - half:+.4f}, {r.slope + half:+.4f}] | 4 |"
    assert row in (sw / "report.md").read_text()
    assert "Trend along the grid's numeric keys" in out


def test_shipped_sweeps_validate(xsagpt, repo_root):
    """Every sweep in configs/sweeps/ expands and validates on any machine (--dry-run asks
    for no device); the GPU demo is GPT-2 124M, 400 steps of 16 x 1024, 2 seeds per attention."""
    for spec in sorted((repo_root / "configs" / "sweeps").glob("*.json")):
        proc = xsagpt("sweep", "-c", spec, "--dry-run", cwd=repo_root)
        assert proc.stdout.startswith("sweep "), (spec, proc.stdout)
    table = xsagpt("sweep", "-c", repo_root / "configs/sweeps/gpu-demo.json", "--dry-run", cwd=repo_root).stdout
    rows = [l for l in table.split("memory, as each point")[0].splitlines() if l.startswith("  ")]
    assert len(rows) == 4 and {r.split()[0] for r in rows} == {
        f"model.attention={a},train.seed={s}" for a in ("sa", "xsa") for s in (1337, 1338)}
    assert all("seq_len=1024 micro_batch=16 accumulation=1 steps=400" in r for r in rows)


def test_a_point_in_use_by_another_trainer_is_not_recorded_as_failed(tmp_path, shards, xsagpt, spawn):
    base = run_config(tmp_path, shards, max_steps=4, eval_interval=0, ckpt_interval=2)
    spec = tmp_path / "sw.json"
    spec.write_text(json.dumps({"base": str(base), "grid": {"model.attention": ["sa", "xsa"]},
                                "out_dir": str(tmp_path / "sw")}))
    sa, xsa = tmp_path / "sw" / "model.attention=sa", tmp_path / "sw" / "model.attention=xsa"
    xsa.mkdir(parents=True)
    # A trainer started by hand on the xsa point, held while it owns the directory.
    holder = spawn("train", "-c", base, "--set", "model.attention=xsa", "--out", xsa,
                   stop_at="train:before-creating-out-dir")
    proc = xsagpt("sweep", "-c", spec, "--no-plot", check=False)
    # Before: the other process's lock became the point's failed.json, parked until --retry-failed.
    assert proc.returncode == 1, proc.stderr
    assert f"model.attention=xsa: skipped, not recorded as failed: out_dir {xsa} is in use: pid {holder.pid}" \
        in proc.stderr
    assert "1 of 2 point(s) were in use by another process" in proc.stderr
    assert (sa / "done.json").exists() and not (xsa / "failed.json").exists()
    holder.send_signal(signal.SIGKILL)
    holder.communicate()
    # A record of an earlier attempt does not outlive the point's finish.
    (sa / "failed.json").write_text(json.dumps({"error": "an earlier attempt"}))
    xsagpt("sweep", "-c", spec, "--no-plot")
    assert (xsa / "done.json").exists() and not list((tmp_path / "sw").rglob("failed.json"))
    assert [p["status"] for p in json.loads((tmp_path / "sw" / "summary.json").read_text())["points"]] == ["done"] * 2
