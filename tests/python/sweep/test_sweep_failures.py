"""A sweep is a queue of independent jobs, and loses nothing: end to end with the real
binary. A diverging point is recorded and the rest of the sweep runs; --force reruns
points whose resolved config changed; two spellings of one value are one point;
summary.csv quotes odd values; a point killed after its final checkpoint gets
finished; the plot step runs without a shell; grid values with slashes stay one
directory. All on the CPU, also where a GPU is present."""
import csv
import json
import shutil

from tinyrun import cpu_config, metrics


def sweep_spec(tmp_path, base, grid, name="sw.json", **extra):
    spec = {"base": str(base), "grid": grid, "out_dir": str(tmp_path / "sw"), **extra}
    (tmp_path / name).write_text(json.dumps(spec))
    return tmp_path / name


def summary_of(tmp_path):
    return json.loads((tmp_path / "sw" / "summary.json").read_text())


def test_a_diverging_point_is_recorded_and_the_rest_of_the_sweep_runs(tmp_path, shards, xsagpt):
    base = cpu_config(tmp_path, shards, max_steps=6, ckpt_interval=3, eval_interval=3, grad_clip=0.0)
    spec = sweep_spec(tmp_path, base, {"train.lr": [1e9, 1e-3]})
    proc = xsagpt("sweep", "-c", spec, "--no-plot", check=False)
    # Before: exit 1 at [1/2]; the second point never ran and no summary was written.
    assert proc.returncode == 1, proc.stderr
    bad, good = tmp_path / "sw" / "train.lr=1000000000.0", tmp_path / "sw" / "train.lr=0.001"
    assert (good / "done.json").exists() and not (bad / "done.json").exists()
    points = {p["name"]: p for p in summary_of(tmp_path)["points"]}
    assert points[good.name]["status"] == "done"
    assert points[bad.name]["status"] == "failed" and "not finite" in points[bad.name]["error"]
    failure = json.loads((bad / "failed.json").read_text())
    assert "not finite" in failure["error"] and failure["config"]["train"]["lr"] == 1e9
    assert "1 of 2 point(s) failed" in proc.stderr and "--retry-failed" in proc.stderr
    rows = list(csv.DictReader((tmp_path / "sw" / "summary.csv").open(newline="")))
    assert [r["status"] for r in rows] == ["failed", "done"] and "not finite" in rows[0]["error"]

    # A rerun leaves the failed point alone (before: it failed on it again, forever) ...
    stamp = (bad / "failed.json").stat().st_mtime_ns
    again = xsagpt("sweep", "-c", spec, "--no-plot", check=False)
    assert again.returncode == 1 and "failed before" in again.stderr and "finished, skipping" in again.stderr
    assert (bad / "failed.json").stat().st_mtime_ns == stamp
    # ... unless asked: --retry-failed runs it again (and it fails again, recorded anew).
    retry = xsagpt("sweep", "-c", spec, "--no-plot", "--retry-failed", check=False)
    assert retry.returncode == 1 and f"[1/2] {bad.name}: failed: " in retry.stderr
    assert (bad / "failed.json").stat().st_mtime_ns != stamp


def test_force_reruns_points_whose_resolved_config_changed(tmp_path, shards, xsagpt):
    base = cpu_config(tmp_path, shards, max_steps=10, ckpt_interval=0, eval_interval=0)
    spec = sweep_spec(tmp_path, base, {"model.attention": ["sa", "xsa"]}, set=["train.max_steps=6"])
    xsagpt("sweep", "-c", spec, "--no-plot")
    assert [p["step"] for p in summary_of(tmp_path)["points"]] == [6, 6]
    data = json.loads(spec.read_text())
    data["set"] = ["train.max_steps=10"]
    spec.write_text(json.dumps(data))
    xsagpt("sweep", "-c", spec, "--no-plot", "--force")
    # Before: both points were kept as finished at step 6 and the summary mixed lengths.
    assert [p["step"] for p in summary_of(tmp_path)["points"]] == [10, 10]
    for name in ("model.attention=sa", "model.attention=xsa"):
        assert sorted(metrics(tmp_path / "sw" / name)) == list(range(1, 11))
    # The same sweep file over a changed base config: refused without --force, naming the point.
    cfg = json.loads(base.read_text())
    cfg["train"]["lr"] = 3e-3
    base.write_text(json.dumps(cfg))
    proc = xsagpt("sweep", "-c", spec, "--no-plot", check=False)
    assert proc.returncode == 2 and "point model.attention=sa was run with another config" in proc.stderr


def test_two_spellings_of_one_value_are_one_point(tmp_path, shards, xsagpt):
    base = cpu_config(tmp_path, shards, max_steps=2)
    spec = sweep_spec(tmp_path, base, {"train.seed": [1, 1.0]})
    proc = xsagpt("sweep", "-c", spec, "--dry-run", check=False)
    # Before: the same run twice, reported as 2 seeds with sd 0.
    assert proc.returncode == 2
    assert "points train.seed=1 and train.seed=1.0 resolve to the same run config" in proc.stderr


def test_summary_csv_quotes_values_with_newlines_and_quotes(tmp_path, shards, xsagpt):
    odd = tmp_path / 'sh"ards\nx'  # ',' would separate two patterns
    shutil.copytree(shards, odd)
    base = cpu_config(tmp_path, shards, max_steps=2, ckpt_interval=2, eval_interval=2)
    values = [str(shards / "train_*.bin"), str(odd / "train_*.bin")]
    spec = sweep_spec(tmp_path, base, {"data.train": values})
    xsagpt("sweep", "-c", spec, "--no-plot")
    rows = list(csv.reader((tmp_path / "sw" / "summary.csv").open(newline="")))
    # Before: the newline split the row and the quote ended the field.
    assert len(rows) == 3 and all(len(r) == len(rows[0]) for r in rows)
    assert [r[1] for r in rows[1:]] == values and [r[2] for r in rows[1:]] == ["done", "done"]


def test_a_sweep_point_killed_after_its_final_checkpoint_gets_finished(tmp_path, shards, xsagpt):
    base = cpu_config(tmp_path, shards, max_steps=4, ckpt_interval=4)
    spec = {"base": str(base), "grid": {"model.attention": ["sa", "xsa"]}, "out_dir": str(tmp_path / "sw")}
    (tmp_path / "sw.json").write_text(json.dumps(spec))
    xsagpt("sweep", "-c", tmp_path / "sw.json", "--no-plot")
    (tmp_path / "sw" / "model.attention=xsa" / "done.json").unlink()
    xsagpt("sweep", "-c", tmp_path / "sw.json", "--no-plot")
    summary = json.loads((tmp_path / "sw" / "summary.json").read_text())
    # Before: that point stayed "running" forever and its XSA - SA difference "-".
    assert [p["status"] for p in summary["points"]] == ["done", "done"]
    assert isinstance(summary["differences"][0]["val_loss_minus_baseline"], float)



def test_a_begun_point_no_process_holds_is_pending_in_the_summary_as_in_status(tmp_path, shards, xsagpt):
    base = cpu_config(tmp_path, shards, max_steps=4, ckpt_interval=4)
    spec = {"base": str(base), "grid": {"model.attention": ["sa", "xsa"]}, "out_dir": str(tmp_path / "sw")}
    (tmp_path / "sw.json").write_text(json.dumps(spec))
    xsagpt("sweep", "-c", tmp_path / "sw.json", "--no-plot")
    (tmp_path / "sw" / "model.attention=xsa" / "done.json").unlink()  # as a job killed before its end
    xsagpt("sweep", "-c", tmp_path / "sw.json", "--summarize", "--no-plot", check=False)
    summary = json.loads((tmp_path / "sw" / "summary.json").read_text())
    status = xsagpt("sweep", "-c", tmp_path / "sw.json", "--status", check=False).stdout
    # Before: "running" for any point with a run directory, while --status said pending.
    assert [p["status"] for p in summary["points"]] == ["done", "pending"]
    assert "pending model.attention=xsa" in status
    assert "resumes from its last checkpoint" in summary["points"][1]["detail"]
    report = (tmp_path / "sw" / "report.md").read_text()
    assert "- model.attention=xsa: pending: step 4 of 4, resumes from its last checkpoint" in report

def test_the_plot_step_runs_without_a_shell(tmp_path, shards, xsagpt):
    base = cpu_config(tmp_path, shards, max_steps=2, ckpt_interval=2, eval_interval=2)
    out = tmp_path / "o'; touch INJECTED; echo '"
    spec = {"base": str(base), "grid": {"train.lr": [1e-2, 3e-3]}, "out_dir": str(out)}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    inside = tmp_path / "inside"
    inside.mkdir()
    proc = xsagpt("sweep", "-c", tmp_path / "s.json", cwd=inside)
    # Before: the plot command, built for `std::system`, ran the `touch` (and a plain apostrophe broke it).
    assert not list(tmp_path.rglob("INJECTED"))
    assert (out / "plots" / "sweep_final.png").exists()
    assert f"figures: {out}/plots" in proc.stdout
    quiet = xsagpt("sweep", "-c", tmp_path / "s.json", "--no-plot", cwd=inside)
    assert "summary:" in quiet.stdout and "figures:" not in quiet.stdout  # before: printed, nothing drawn


def test_grid_values_with_slashes_stay_one_directory_inside_the_sweep(tmp_path, shards, xsagpt):
    base = cpu_config(tmp_path, shards, max_steps=2, ckpt_interval=2, eval_interval=2)
    out = tmp_path / "sweep"
    same = f"{shards}/../{shards.name}/train_000001.bin"  # '/' and '..': the same shard by another path
    spec = {"base": str(base), "grid": {"data.train": [str(shards / "train_000001.bin"), same]}, "out_dir": str(out)}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    xsagpt("sweep", "-c", tmp_path / "s.json", "--no-plot")
    # Before: the first nested directories under the sweep's, the second created them outside it.
    points = sorted(p for p in out.iterdir() if p.is_dir() and p.name != ".locks")  # .locks: the points' locks
    assert len(points) == 2 and all((p / "done.json").exists() for p in points)
    assert sorted(p.name for p in shards.iterdir()) == ["train_000001.bin", "train_000002.bin", "val_000000.bin"]
    summary = json.loads((out / "summary.json").read_text())
    assert [p["values"]["data.train"] for p in summary["points"]] == spec["grid"]["data.train"]
    assert [(out / p["dir"]).exists() for p in summary["points"]] == [True, True]
