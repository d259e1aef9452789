"""A sweep checks each point's run when it reaches it and the summary checks each run
before it compares it: end to end with the real binary, on the CPU. A run trained by
hand into a later point's directory while the sweep runs is refused by name, never
taken as that point; a sweep moved elsewhere (only out_dir differs) continues without
training anything again; a finished run whose files were cut short or edited is left
out of every comparison with the true reason in summary.json and report.md; a
variant, the grid or "set" naming out_dir is refused."""
import json
import shutil
import signal

import pytest

from tinyrun import write_run_config

VARIANTS = {"sa": {}, "xsa": {"model.attention": "xsa"}}
SEEDS = [1, 2, 3]
STEPS = 8


def spec_file(path, base, out_dir, seeds=SEEDS, **extra):
    spec = {"base": str(base), "variants": VARIANTS, "baseline": "sa", "grid": {"train.seed": seeds},
            "out_dir": str(out_dir), **extra}
    path.write_text(json.dumps(spec))
    return path


@pytest.fixture(scope="module")
def base(tmp_path_factory, markov_shards):
    d = tmp_path_factory.mktemp("checks")
    return write_run_config(d / "base.json", markov_shards, d / "unused", model={"attention": "sa"},
                            max_steps=STEPS, eval_interval=4, ckpt_interval=0, log_interval=1)


@pytest.fixture(scope="module")
def finished(tmp_path_factory, base, xsagpt):
    """A finished two-variant, three-seed sweep, copied by each test that damages it."""
    d = tmp_path_factory.mktemp("finished")
    xsagpt("sweep", "-c", spec_file(d / "s.json", base, d / "sw"), "--no-plot")
    return d / "sw"


def moved_copy(finished, base, tmp_path):
    """The finished sweep copied to tmp_path/sw, with a sweep file naming it there."""
    shutil.copytree(finished, tmp_path / "sw")
    return spec_file(tmp_path / "s.json", base, tmp_path / "sw")


def copy_of(finished, base, tmp_path):
    """moved_copy with every out_dir in it rewritten too, as if the sweep had been run there."""
    spec = moved_copy(finished, base, tmp_path)
    sw = tmp_path / "sw"
    edit_json(sw / "sweep.json", out_dir=str(sw))
    for cfg in sw.glob("*/config.json"):
        edit_json(cfg, out_dir=str(cfg.parent))
    return spec


def summary(sw):
    return json.loads((sw / "summary.json").read_text())


def point(s, name):
    return next(p for p in s["points"] if p["name"] == name)


def comparison(s):
    (c,) = s["comparisons"]
    return c


def dropped(c):
    return {d["seed"]: d["why"] for d in c["minus_baseline"]["dropped"]}


def cut_metrics(run, last_step):
    lines = (run / "metrics.jsonl").read_text().splitlines(keepends=True)
    (run / "metrics.jsonl").write_text("".join(l for l in lines if json.loads(l)["step"] <= last_step))


def edit_json(path, **changes):
    j = json.loads(path.read_text())
    j.update(changes)
    path.write_text(json.dumps(j))


def test_a_run_trained_by_hand_into_a_later_point_is_refused_when_the_point_is_reached(tmp_path, base, xsagpt,
                                                                                        spawn):
    spec = spec_file(tmp_path / "s.json", base, tmp_path / "sw", seeds=[1])
    # The sweep is held as it is about to create its first point's directory ...
    sweep = spawn("sweep", "-c", spec, "--no-plot", stop_at="train:before-creating-out-dir")
    # ... while an SA run with another seed is trained by hand, to the end, where the xsa point goes.
    stranger = tmp_path / "sw" / "xsa,train.seed=1"
    cfg = json.loads(base.read_text())
    cfg["train"]["seed"], cfg["out_dir"] = 5, str(stranger)
    (tmp_path / "stranger.json").write_text(json.dumps(cfg))
    xsagpt("train", "-c", tmp_path / "stranger.json")
    before = (stranger / "metrics.jsonl").read_bytes()
    sweep.send_signal(signal.SIGCONT)
    _, err = sweep.communicate(timeout=300)
    # Before: "finished, skipping", exit 0, and the SA run listed as the xsa point.
    assert sweep.returncode == 1, err
    assert "[2/2] xsa,train.seed=1: refused" in err and "model.attention is \"sa\" there, \"xsa\" here" in err
    assert "finished, skipping" not in err
    assert (stranger / "metrics.jsonl").read_bytes() == before and not (stranger / "failed.json").exists()
    p = point(summary(tmp_path / "sw"), "xsa,train.seed=1")
    assert p["status"] == "invalid" and "another config than this point's" in p["error"]
    c = comparison(summary(tmp_path / "sw"))
    assert c["minus_baseline"]["n"] == 0 and "xsa invalid: its directory holds a run of another config" in dropped(c)[1]


def test_a_run_that_slips_in_after_the_point_was_checked_is_refused_under_the_lock(tmp_path, base, xsagpt, spawn):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"base": str(base), "grid": {"train.seed": [1]}, "out_dir": str(tmp_path / "sw")}))
    # The sweep has checked its only point's directory (empty) and is about to train it ...
    sweep = spawn("sweep", "-c", spec, "--no-plot", stop_at="sweep:point-checked")
    # ... when a run of another seed is trained there by hand, to the end.
    stranger = tmp_path / "sw" / "train.seed=1"
    cfg = json.loads(base.read_text())
    cfg["train"]["seed"], cfg["out_dir"] = 5, str(stranger)
    (tmp_path / "stranger.json").write_text(json.dumps(cfg))
    xsagpt("train", "-c", tmp_path / "stranger.json")
    before = (stranger / "done.json").read_bytes()
    sweep.send_signal(signal.SIGCONT)
    _, err = sweep.communicate(timeout=300)
    # Without the trainer's own check under the lock, the finished stranger was taken as the point.
    assert sweep.returncode == 1, err
    assert "[1/1] train.seed=1: refused" in err and "train.seed is 5 there, 1 here" in err
    assert (stranger / "done.json").read_bytes() == before and not (stranger / "failed.json").exists()
    assert point(summary(tmp_path / "sw"), "train.seed=1")["status"] == "invalid"


def test_a_moved_sweep_continues_without_training_again(tmp_path, finished, base, xsagpt):
    spec = moved_copy(finished, base, tmp_path)
    stamps = {p: (p / "metrics.jsonl").stat().st_mtime_ns for p in (tmp_path / "sw").iterdir() if p.is_dir() and p.name != ".locks"}
    proc = xsagpt("sweep", "-c", spec, "--no-plot", check=False)
    # Before: refused ("use another out_dir, or --force"), and --force trained every point again.
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("finished, skipping") == len(VARIANTS) * len(SEEDS)
    forced = xsagpt("sweep", "-c", spec, "--no-plot", "--force")
    assert forced.stderr.count("finished, skipping") == len(VARIANTS) * len(SEEDS)
    assert {p: (p / "metrics.jsonl").stat().st_mtime_ns for p in stamps} == stamps
    assert all(p["status"] == "done" for p in summary(tmp_path / "sw")["points"])


def test_a_baseline_whose_curve_was_cut_short_is_left_out_with_its_reason(tmp_path, finished, base, xsagpt):
    spec = copy_of(finished, base, tmp_path)
    sw = tmp_path / "sw"
    cut_metrics(sw / "sa,train.seed=1", STEPS // 2)  # done.json stays intact
    printed = xsagpt("sweep", "-c", spec, "--no-plot").stdout
    s = summary(sw)
    p = point(s, "sa,train.seed=1")
    assert f"note: sa,train.seed=1 is invalid, left out: {p['error']}" in printed
    # Before: status done, and its half curve read at equal time and tokens (differences of +0.6).
    assert p["status"] == "invalid"
    assert p["error"] == f"metrics.jsonl's val curve ends at step {STEPS // 2}, but done.json says the run reached " \
                         f"step {STEPS}"
    c = comparison(s)
    for key in ("minus_baseline", "equal_tokens"):
        assert c[key]["seeds"] == [2, 3], key
    # (Equal time may also refuse seed 2 or 3 for extrapolation: wall-clock time is the machine's.)
    assert 1 not in c["equal_time"]["seeds"] + [x["seed"] for x in c["equal_time"]["extrapolation_refused"]]
    assert dropped(c)[1] == "sa invalid: " + p["error"]
    assert "seed 1 not paired: sa invalid: metrics.jsonl's val curve ends at step 4" in (sw / "report.md").read_text()


def test_short_runs_and_missing_values_are_left_out_with_true_reasons(tmp_path, finished, base, xsagpt):
    spec = copy_of(finished, base, tmp_path)
    sw = tmp_path / "sw"
    short = sw / "xsa,train.seed=1"  # done.json and metrics.jsonl both end at step 4 of 8
    cut_metrics(short, STEPS // 2)
    val = [json.loads(l) for l in (short / "metrics.jsonl").read_text().splitlines() if "val_loss" in l][-1]
    edit_json(short / "done.json", step=STEPS // 2, final_val_loss=val["val_loss"], tokens=val["tokens"])
    nan = sw / "xsa,train.seed=2"  # its last val loss was NaN (the trainer writes null)
    lines = (nan / "metrics.jsonl").read_text().splitlines()
    last_val = max(i for i, l in enumerate(lines) if "val_loss" in l)
    lines[last_val] = json.dumps({**json.loads(lines[last_val]), "val_loss": None})
    (nan / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    edit_json(sw / "xsa,train.seed=3" / "done.json", final_val_loss=None)
    xsagpt("sweep", "-c", spec, "--no-plot")
    s = summary(sw)
    why = dropped(comparison(s))
    # Before: seed 1 paired with full-length baselines; seed 2 "saw fewer tokens"; seed 3 "xsa done".
    assert comparison(s)["minus_baseline"]["n"] == 0 and comparison(s)["final_val_loss"]["n"] == 0
    assert why[1] == f"xsa invalid: it stopped at step {STEPS // 2} of train.max_steps {STEPS} (done.json)"
    assert why[2] == f"xsa invalid: metrics.jsonl line {last_val + 1}: val_loss at step {STEPS} is null, not a " \
                     "finite number"
    assert why[3] == "xsa invalid: done.json's final_val_loss is null, not a finite number"
    report = (sw / "report.md").read_text()
    assert "saw fewer tokens" not in report and "xsa done" not in report
    assert all(f"seed {k} not paired: {w}" in report for k, w in why.items())
    rows = (sw / "summary.csv").read_text()
    assert rows.count(",invalid,") == 3


def test_a_negative_step_is_a_damaged_line_not_a_restart_that_erases_the_curve(tmp_path, finished, base, xsagpt):
    spec = copy_of(finished, base, tmp_path)
    sw = tmp_path / "sw"
    run = sw / "xsa,train.seed=1"
    lines = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    last_val = [l for l in lines if "val_loss" in l][-1]
    with (run / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({**last_val, "step": -5}) + "\n")
    xsagpt("sweep", "-c", spec, "--no-plot")
    s = summary(sw)
    # Before: read as a restart from step -5, the curve was erased and the point left out as
    # "val curve ends at step -5".
    assert point(s, "xsa,train.seed=1")["status"] == "done"
    c = comparison(s)
    for key in ("minus_baseline", "equal_tokens"):
        assert c[key]["seeds"] == SEEDS, key


def test_a_point_may_not_set_out_dir(tmp_path, base, xsagpt):
    for where, extra in (("variants.xsa", {"variants": {"sa": {}, "xsa": {"model.attention": "xsa",
                                                                        "out_dir": "elsewhere"}}}),
                         ("set", {"set": ["out_dir=elsewhere"]}),
                         ("grid", {"grid": {"out_dir": ["a", "b"]}})):
        spec = spec_file(tmp_path / "s.json", base, tmp_path / "sw", **extra)
        proc = xsagpt("sweep", "-c", spec, "--dry-run", check=False)
        # Before: accepted, and the point ran in the sweep's own directory for it regardless.
        assert proc.returncode == 2, (where, proc.stdout)
        assert f"{where}: out_dir: a point's run directory is the sweep's out_dir/<point name>" in proc.stderr
