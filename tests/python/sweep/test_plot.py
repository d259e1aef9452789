"""scripts/view/plot.py on synthetic run, sweep and analysis outputs laid out as xsagpt writes them:
the expected PNGs appear, are real non-blank images, follow their data, and bad paths fail
with a message naming them."""
import json
import pathlib

import numpy as np
import pytest

from fig_similarity import layer_curves
from plot_inputs import load_run, load_sweep, read_metrics, sweep_variants
from plotfiles import check_png, plot, plot_ok, write_run
from tinyrun import cpu_config


def write_sweep(d: pathlib.Path) -> None:
    lrs = (3e-4, 6e-4)
    finals = {("sa", 3e-4): 4.20, ("xsa", 3e-4): 4.15, ("sa", 6e-4): 4.05, ("xsa", 6e-4): 4.02}
    d.mkdir(parents=True)
    (d / "sweep.json").write_text(json.dumps({"base": "tiny.json", "grid": {"model.attention": ["sa", "xsa"], "train.lr": list(lrs)}}))
    points, diffs = [], []
    for lr in lrs:
        for att in ("sa", "xsa"):
            name = f"model.attention={att},train.lr={lr:g}"
            write_run(d / name, att, finals[(att, lr)] - 0.05, resume_at=None, seed=len(points))
            points.append({"name": name, "dir": name, "values": {"model.attention": att, "train.lr": lr},
                           "status": "done", "final_train_loss": finals[(att, lr)] - 0.05,
                           "final_val_loss": finals[(att, lr)], "tokens": 40 * 512, "wall_s": 4.0})
        diffs.append({"values": {"train.lr": lr}, "sa": f"model.attention=sa,train.lr={lr:g}",
                      "xsa": f"model.attention=xsa,train.lr={lr:g}",
                      "xsa_minus_sa_val_loss": finals[("xsa", lr)] - finals[("sa", lr)]})
    (d / "summary.json").write_text(json.dumps({"keys": ["model.attention", "train.lr"], "points": points,
                                                "differences": diffs}))


def write_analysis(path: pathlib.Path, attention: str, n_layer: int = 6) -> None:
    layers = []
    for i in range(n_layer):
        layer = {"layer": i, "value_cos_sim": 0.2 + 0.1 * i, "attn_diag": 0.3 - 0.03 * i,
                 "cos_y_v": (0.5 if attention == "sa" else 0.4) + 0.04 * i, "cos_z_v": None}
        if attention == "xsa":
            layer["cos_z_v"] = 1e-7 * (i - 2)
        layers.append(layer)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"attention": attention, "checkpoint": "ckpt.pt", "layers": layers}))


def test_resumed_metrics_keep_the_successors_records(tmp_path):
    write_run(tmp_path / "r", "sa", 3.0)
    records = [json.loads(l) for l in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    train, val = read_metrics(tmp_path / "r" / "metrics.jsonl")
    assert [r["step"] for r in train] == list(range(1, 41))
    assert [r["step"] for r in val] == [10, 20, 30, 40]
    # every step the successor logged again carries its (last) values, not the crashed process's
    last = {}
    for r in records:
        last[("val" if "val_loss" in r else "train", r["step"])] = r
    assert train == [last[("train", s)] for s in range(1, 41)]
    assert val == [last[("val", s)] for s in (10, 20, 30, 40)]
    assert all(r["val_loss"] < 99 for r in val)


def test_stale_records_after_a_restart_are_dropped(tmp_path):
    # crashed at step 5 after a checkpoint at 2; the successor has only reached step 3 so far
    m = tmp_path / "metrics.jsonl"
    recs = [{"step": s, "tokens": 8 * s, "train_loss": 10.0 - s} for s in range(1, 6)]
    recs.insert(2, {"step": 2, "tokens": 16, "val_loss": 9.0})
    recs.insert(5, {"step": 4, "tokens": 32, "val_loss": 7.0})
    recs.append({"step": 3, "tokens": 24, "train_loss": 1.5})
    m.write_text("".join(json.dumps(r) + "\n" for r in recs) + '{"step": 4, "tok')  # torn last line
    train, val = read_metrics(m)
    assert [(r["step"], r["train_loss"]) for r in train] == [(1, 9.0), (2, 8.0), (3, 1.5)]
    assert [(r["step"], r["val_loss"]) for r in val] == [(2, 9.0)]


def test_runs_give_loss_figures_that_follow_the_data(tmp_path):
    write_run(tmp_path / "a" / "sa", "sa", 3.0)
    write_run(tmp_path / "a" / "xsa", "xsa", 2.9, seed=1)
    written = plot_ok(tmp_path / "a" / "sa", tmp_path / "a" / "xsa")
    out = tmp_path / "a" / "sa" / "plots"  # default: <first PATH>/plots
    assert sorted(written) == sorted(out / n for n in ("loss_vs_step.png", "loss_vs_tokens.png", "val_gap.png"))
    for p in written:
        check_png(p)

    # same data, same bytes; other data, other pictures
    again = plot_ok(tmp_path / "a" / "sa", tmp_path / "a" / "xsa", "--out", tmp_path / "again")
    assert all(p.read_bytes() == (out / p.name).read_bytes() for p in again)
    write_run(tmp_path / "b" / "sa", "sa", 3.0)
    write_run(tmp_path / "b" / "xsa", "xsa", 3.4, seed=1)
    other = plot_ok(tmp_path / "b" / "sa", tmp_path / "b" / "xsa", "--out", tmp_path / "other")
    assert {p.name for p in other} == {p.name for p in written}
    assert all(p.read_bytes() != (out / p.name).read_bytes() for p in other)

    # options change the drawing
    logx = plot_ok(tmp_path / "a" / "sa", tmp_path / "a" / "xsa", "--logx", "--smooth", "0", "--out", tmp_path / "logx")
    assert all(p.read_bytes() != (out / p.name).read_bytes() for p in logx)


def test_a_single_run_without_a_pair_has_no_gap_figure(tmp_path):
    write_run(tmp_path / "solo", "xsa", 3.0, resume_at=None)
    written = plot_ok(tmp_path / "solo", "--out", tmp_path / "o")
    assert sorted(p.name for p in written) == ["loss_vs_step.png", "loss_vs_tokens.png"]


def test_sweep_gives_final_loss_and_curve_figures(tmp_path):
    write_sweep(tmp_path / "sw")
    written = plot_ok(tmp_path / "sw")
    assert sorted(written) == sorted(tmp_path / "sw" / "plots" / n for n in ("sweep_final.png", "sweep_curves.png"))
    for p in written:
        check_png(p)
    # a different final loss changes the final-loss figure
    s = json.loads((tmp_path / "sw" / "summary.json").read_text())
    s["points"][1]["final_val_loss"] = 4.5
    s["differences"][0]["xsa_minus_sa_val_loss"] = 0.3
    (tmp_path / "sw" / "summary.json").write_text(json.dumps(s))
    moved = plot_ok(tmp_path / "sw", "--out", tmp_path / "moved")
    final = {p.name: p for p in moved}["sweep_final.png"]
    assert final.read_bytes() != (tmp_path / "sw" / "plots" / "sweep_final.png").read_bytes()


def test_a_swept_true_false_key_is_a_setting_not_a_number(tmp_path):
    """JSON's true and false are not numbers (Python's bool is an int): a sweep over
    model.bias gets no final-loss-against-value figure with false and true as 0 and 1,
    and says why; its curves are drawn, a line per setting."""
    write_sweep(tmp_path / "sw")
    s = json.loads((tmp_path / "sw" / "summary.json").read_text())
    s["keys"] = ["model.attention", "model.bias"]
    for p in s["points"]:
        p["values"] = {"model.attention": p["values"]["model.attention"], "model.bias": p["values"]["train.lr"] > 4e-4}
    for d in s["differences"]:
        d["values"] = {"model.bias": d["values"]["train.lr"] > 4e-4}
    (tmp_path / "sw" / "summary.json").write_text(json.dumps(s))
    proc = plot(tmp_path / "sw")
    assert proc.returncode == 0, proc.stderr
    written = sorted(pathlib.Path(l).name for l in proc.stdout.split())
    assert written == ["sweep_curves.png"] and "no numeric swept key" in proc.stderr


def test_sweep_in_progress_plots_what_there_is(tmp_path):
    write_sweep(tmp_path / "sw")
    s = json.loads((tmp_path / "sw" / "summary.json").read_text())
    running, pending = s["points"][2], s["points"][3]  # lr=6e-4: SA running, XSA not started
    running.update(status="running", final_val_loss=None)
    pending.update(status="pending", final_val_loss=None)
    (tmp_path / "sw" / running["dir"] / "metrics.jsonl").write_text("")
    for f in (tmp_path / "sw" / pending["dir"]).iterdir():
        f.unlink()
    (tmp_path / "sw" / pending["dir"]).rmdir()
    s["differences"] = s["differences"][:1]
    (tmp_path / "sw" / "summary.json").write_text(json.dumps(s))
    written = plot_ok(tmp_path / "sw")
    assert sorted(p.name for p in written) == ["sweep_curves.png", "sweep_final.png"]
    for p in written:
        check_png(p)

    for p in s["points"]:
        p.update(status="pending", final_val_loss=None)
        if (tmp_path / "sw" / p["dir"]).exists():
            (tmp_path / "sw" / p["dir"] / "metrics.jsonl").unlink()
    (tmp_path / "sw" / "summary.json").write_text(json.dumps(s))
    proc = plot(tmp_path / "sw", "--out", tmp_path / "out")
    assert proc.returncode == 2 and str(tmp_path / "sw") in proc.stderr and "logged anything" in proc.stderr


def test_analysis_figure_from_files_and_run_dirs(tmp_path):
    write_analysis(tmp_path / "sa_analysis.json", "sa")
    write_run(tmp_path / "xsa", "xsa", 3.0)
    write_analysis(tmp_path / "xsa" / "analysis.json", "xsa")
    written = plot_ok(tmp_path / "sa_analysis.json", tmp_path / "xsa")
    out = tmp_path / "plots"  # the first PATH is a file: plots beside it
    assert sorted(written) == sorted(out / n for n in ("analysis.png", "loss_vs_step.png", "loss_vs_tokens.png"))
    check_png(out / "analysis.png")
    write_analysis(tmp_path / "sa_analysis.json", "sa", n_layer=8)
    other = plot_ok(tmp_path / "sa_analysis.json", tmp_path / "xsa", "--out", tmp_path / "o")
    assert {p.name: p for p in other}["analysis.png"].read_bytes() != (out / "analysis.png").read_bytes()


@pytest.mark.parametrize("case", ["missing", "empty_dir", "config_only", "no_records", "bad_line", "number_line", "not_json",
                                  "bad_analysis", "analysis_true", "sweep_without_summary"])
def test_bad_paths_fail_naming_them(tmp_path, case, plot_module, capsys):
    p = tmp_path / case
    if case == "empty_dir":
        p.mkdir()
    elif case == "config_only":
        p.mkdir()
        (p / "config.json").write_text("{}")
    elif case == "no_records":
        p.mkdir()
        (p / "metrics.jsonl").write_text('{"event": "start"}\n')
    elif case == "bad_line":
        p.mkdir()
        (p / "metrics.jsonl").write_text('{"step": 1, "tokens": 8, "train_loss": 3}\nnot json\n{"step": 2, "tokens": 16, "train_loss": 2}\n')
    elif case == "number_line":  # before: a traceback (TypeError)
        p.mkdir()
        (p / "metrics.jsonl").write_text('{"step": 1, "tokens": 8, "train_loss": 3}\n5\n{"step": 2, "tokens": 16, "train_loss": 2}\n')
    elif case == "sweep_without_summary":
        p.mkdir()
        (p / "sweep.json").write_text("{}")
    elif case == "not_json":
        p = tmp_path / "notes.txt"
        p.write_text("hello")
    elif case == "bad_analysis":
        p = tmp_path / "analysis.json"
        p.write_text(json.dumps({"attention": "sa", "layers": [{"layer": 0, "value_cos_sim": 0.1}]}))
    elif case == "analysis_true":  # before: drawn as 1.0
        p = tmp_path / "analysis.json"
        p.write_text(json.dumps({"attention": "xsa", "layers": [{"layer": 0, "value_cos_sim": 0.1, "attn_diag": 0.2,
                                                                 "cos_y_v": 0.3, "cos_z_v": True}]}))
    # in-process (each interpreter start costs a second or two); the exit status is checked below
    assert plot_module.main([str(p), "--out", str(tmp_path / "out")]) == 2
    assert str(p) in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_bad_path_exits_2_naming_it(tmp_path):
    write_run(tmp_path / "good", "sa", 3.0)
    proc = plot(tmp_path / "good", tmp_path / "nowhere", "--out", tmp_path / "out")
    assert proc.returncode == 2 and f"{tmp_path / 'nowhere'}: no such file or directory" in proc.stderr
    assert not (tmp_path / "out").exists()  # nothing drawn when any input is bad


def test_a_failed_sweep_point_is_marked_as_failed(tmp_path, plot_module):
    # A diverged point (sweep.cpp records failed.json; summary.json says "failed") has no
    # final loss: the final-loss figure marks it at its value and counts it in the title.
    write_sweep(tmp_path / "sw")
    s = json.loads((tmp_path / "sw" / "summary.json").read_text())
    s["points"][3].update(status="failed", final_val_loss=None, error="loss is not finite at step 3")
    s["differences"] = s["differences"][:1]
    (tmp_path / "sw" / "summary.json").write_text(json.dumps(s))
    figures = dict(plot_module.sweep_figures(load_sweep(tmp_path / "sw"), None, False, None))
    final = figures["sweep_final.png"]
    assert "3 of 4 points finished, 1 failed" in final._suptitle.get_text()
    marks = [c for c in final.axes[0].collections if c.get_label().startswith("failed")]
    assert len(marks) == 1 and marks[0].get_offsets()[:, 0].tolist() == [6e-4]
    curves = figures["sweep_curves.png"]
    labels = [line.get_label() for ax in curves.axes for line in ax.get_lines()]
    assert any(label.endswith("(failed)") for label in labels) and any("(failed)" not in l for l in labels)


def add_diagnostics(run: pathlib.Path, gated: bool, shift: float = 0.0, n_layer: int = 2) -> None:
    """Gives every val line of a written run the similarity bias and, when gated, the gates, as the
    trainer logs them (src/train/eval_diagnostics.h)."""
    lines = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    for l in lines:
        if "val_loss" in l:
            l["cos_y_v"] = [0.6 - 0.01 * l["step"] / (i + 1) + shift for i in range(n_layer)]
            if gated:
                heads = [[0.02 * l["step"] * (i + 1), 0.01 * l["step"]] for i in range(n_layer)]
                l["xsa_gate"] = [{"mean": sum(h) / 2, "min": min(h), "max": max(h), "heads": h} for h in heads]
    (run / "metrics.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))


def test_runs_with_diagnostics_give_a_similarity_figure_that_follows_them(tmp_path):
    write_run(tmp_path / "sa", "sa", 3.0, resume_at=None)
    write_run(tmp_path / "gated", "xsa", 2.9, resume_at=None, seed=1)
    add_diagnostics(tmp_path / "sa", gated=False)
    add_diagnostics(tmp_path / "gated", gated=True)
    tokens, cos, gate, band = layer_curves(load_run(tmp_path / "gated"))
    assert list(tokens) == [s * 512 for s in (10, 20, 30, 40)]
    assert cos[:, 1].tolist() == pytest.approx([0.6 - 0.005 * s for s in (10, 20, 30, 40)])
    assert gate[:, 0].tolist() == pytest.approx([0.015 * s for s in (10, 20, 30, 40)])
    assert band[1][:, 1].tolist() == pytest.approx([0.04 * s for s in (10, 20, 30, 40)])  # max over heads
    written = plot_ok(tmp_path / "sa", tmp_path / "gated", "--out", tmp_path / "o")
    sim = {p.name: p for p in written}["similarity.png"]
    check_png(sim)
    add_diagnostics(tmp_path / "gated", gated=True, shift=0.2)
    other = {p.name: p for p in plot_ok(tmp_path / "sa", tmp_path / "gated", "--out", tmp_path / "o2")}
    assert other["similarity.png"].read_bytes() != sim.read_bytes()


def test_sweep_with_diagnostics_gives_the_variants_similarity_figure(tmp_path):
    d = tmp_path / "sw"
    d.mkdir()
    points = []
    for v, gated in (("sa", False), ("xsa-gated", True)):
        for seed in (1, 2):
            name = f"{v},train.seed={seed}"
            write_run(d / name, "xsa" if gated else "sa", 3.0, resume_at=None, seed=seed)
            add_diagnostics(d / name, gated, shift=0.01 * seed, n_layer=8)
            points.append({"name": name, "dir": name, "variant": v, "values": {"train.seed": seed}, "status": "done",
                           "final_val_loss": 3.05})
    (d / "summary.json").write_text(json.dumps({"keys": ["train.seed"], "variants": ["sa", "xsa-gated"],
                                                "baseline": "sa", "points": points, "comparisons": []}))
    written = {p.name: p for p in plot_ok(d, "--out", tmp_path / "o")}
    check_png(written["sweep_similarity.png"])


@pytest.mark.parametrize("damage", [{"cos_y_v": [True, 0.5]}, {"cos_y_v": "0.5"}, {"xsa_gate": 5},
                                    {"xsa_gate": [None, {"mean": "x", "min": 0.1, "max": 0.2}]},
                                    {"xsa_gate": [{"mean": True, "min": 0.1, "max": 0.2}, None]},
                                    {"time_s": True}, {"val_loss": True}])
def test_a_damaged_value_in_a_metrics_line_is_named(tmp_path, plot_module, capsys, damage):
    # Before: true was drawn as 1.0, a string or a number for a list went by unread, and a gate
    # that is no object or a mean that is a string ended in a traceback.
    write_run(tmp_path / "r", "xsa", 3.0, resume_at=None)
    add_diagnostics(tmp_path / "r", gated=True)
    metrics = tmp_path / "r" / "metrics.jsonl"
    lines = [json.loads(l) for l in metrics.read_text().splitlines()]
    at = [i for i, l in enumerate(lines) if "val_loss" in l][1]
    lines[at].update(damage)
    metrics.write_text("".join(json.dumps(l) + "\n" for l in lines))
    assert plot_module.main([str(tmp_path / "r"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{metrics}:{at + 1}: {next(iter(damage))}" in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()



def test_an_appended_negative_step_is_a_damaged_line_not_a_restart(tmp_path, plot_module, capsys):
    # Before: read as a restart from step -5, which erased the run's history from the figures (exit 0).
    write_run(tmp_path / "r", "sa", 3.0, resume_at=None)
    metrics = tmp_path / "r" / "metrics.jsonl"
    n = len(metrics.read_text().splitlines())
    with open(metrics, "a") as f:
        f.write(json.dumps({"step": -5, "tokens": 512, "time_s": 0.1, "train_loss": 3.5}) + "\n")
    assert plot_module.main([str(tmp_path / "r"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"plot.py: error: {metrics}:{n + 1}: step is -5; steps count from 0" in err, err
    assert not (tmp_path / "out").exists()


def test_a_diverged_point_as_the_trainer_writes_it_keeps_the_sweeps_figures(tmp_path, plot_module):
    # The history of a point that diverged after its step-20 evaluation, as the trainer ends it
    # (seen from a real run with lr 1e9): a last val line whose loss and similarity bias are
    # null (JSON has no NaN) and whose gates are null, then failed.json. Before: plot.py refused
    # the null, exit 2, and none of the sweep's figures was drawn.
    write_sweep(tmp_path / "sw")
    s = json.loads((tmp_path / "sw" / "summary.json").read_text())
    bad = s["points"][3]
    bad.update(status="failed", final_val_loss=None, final_train_loss=None,
               error="loss or gradient norm is not finite at step 22; stopping.")
    s["differences"] = s["differences"][:1]
    (tmp_path / "sw" / "summary.json").write_text(json.dumps(s))
    metrics = tmp_path / "sw" / bad["dir"] / "metrics.jsonl"
    lines = [json.loads(l) for l in metrics.read_text().splitlines()]
    lines = [l for l in lines if l["step"] <= 20] + [
        {"cos_y_v": [None, None], "step": 22, "time_s": 2.2, "tokens": 22 * 512, "val_loss": None,
         "xsa_gate": [{"heads": [None, None], "max": None, "mean": None, "min": None}, None]}]
    metrics.write_text("".join(json.dumps(l) + "\n" for l in lines))
    (tmp_path / "sw" / bad["dir"] / "done.json").unlink()
    proc = plot(tmp_path / "sw", "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert sorted(pathlib.Path(l).name for l in proc.stdout.split()) == ["sweep_curves.png", "sweep_final.png"]
    assert (f"{metrics}: val_loss is null (not finite: the run diverged) at step 22; left out of its curve, "
            "which ends at step 20") in proc.stderr
    # The diverged val curve ends at its last finite value; the others are whole.
    curves = dict(plot_module.sweep_figures(load_sweep(tmp_path / "sw"), None, False, None))["sweep_curves.png"]
    val_ends = {line.get_label(): line.get_xdata()[-1] for ax in curves.axes for line in ax.get_lines()
                if " val" in line.get_label()}
    assert val_ends == {"sa val": 40 * 512, "xsa val": 40 * 512, "xsa val (failed)": 20 * 512}, val_ends


def diverged_sweep(tmp_path, shards, xsagpt, grid: dict):
    """A real tiny sweep whose lr 1e9 point diverges in its first steps and is evaluated (every
    2 steps) before its next log (every 4) stops it, so its history ends as the trainer ends a
    diverged run: a val line with val_loss null. Drawn by the sweep itself."""
    base = cpu_config(tmp_path, shards, max_steps=8, log_interval=4, eval_interval=2, ckpt_interval=0, grad_clip=0.0)
    (tmp_path / "sw.json").write_text(json.dumps({"base": str(base), "grid": grid, "out_dir": str(tmp_path / "sw")}))
    proc = xsagpt("sweep", "-c", tmp_path / "sw.json", check=False, timeout=300)
    assert proc.returncode == 1 and "1 of " in proc.stderr and "failed" in proc.stderr, proc.stderr
    return tmp_path / "sw", proc


def test_a_sweep_with_a_diverged_point_draws_the_figures_of_the_others(tmp_path, shards, xsagpt):
    sw, proc = diverged_sweep(tmp_path, shards, xsagpt, {"train.lr": [1e9, 1e-2, 3e-3]})
    bad = sw / "train.lr=1000000000.0"
    lines = [json.loads(l) for l in (bad / "metrics.jsonl").read_text().splitlines()]
    nulls = [l["step"] for l in lines if "val_loss" in l and l["val_loss"] is None]
    assert nulls, "the case under test: the trainer logged a diverged evaluation as null"
    # Before: plot.py refused the null line, and the sweep drew no figure at all.
    assert "plotting failed" not in proc.stderr, proc.stderr
    assert f"{bad / 'metrics.jsonl'}: val_loss is null (not finite: the run diverged) at step {nulls[0]}" in proc.stderr
    for name in ("sweep_final.png", "sweep_curves.png"):
        check_png(sw / "plots" / name)
    # The diverged curve ends at its last finite value; the good points are drawn whole.
    sweep = load_sweep(sw)
    run = sweep.runs[bad.name]
    finite = [l["step"] for l in lines if "val_loss" in l and l["val_loss"] is not None]
    assert run.val.step.tolist() == finite and finite and finite[-1] < nulls[0]
    assert np.isfinite(run.val.loss).all()
    for good in ("train.lr=0.01", "train.lr=0.003"):
        assert sweep.runs[good].val.step.tolist() == [0, 2, 4, 6, 8]
    statuses = {p["name"]: p["status"] for p in sweep.summary["points"]}
    assert statuses == {bad.name: "failed", "train.lr=0.01": "done", "train.lr=0.003": "done"}


@pytest.mark.parametrize("where", ["under_a_file", "under_proc", "figure_taken_by_a_folder"])
def test_a_figures_folder_that_cannot_be_written_is_one_line_and_exit_2(tmp_path, plot_module, capsys, where):
    # Before: a traceback (NotADirectoryError, FileNotFoundError, IsADirectoryError).
    write_run(tmp_path / "r", "sa", 3.0, resume_at=None)
    (tmp_path / "file").write_text("")
    out = {"under_a_file": tmp_path / "file" / "plots", "under_proc": pathlib.Path("/proc/xsagpt-plots"),
           "figure_taken_by_a_folder": tmp_path / "out"}[where]
    if where == "figure_taken_by_a_folder":  # the folder exists; its second figure cannot be written
        (out / "loss_vs_tokens.png").mkdir(parents=True)
    assert plot_module.main([str(tmp_path / "r"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("plot.py: error: "), err
    if where == "figure_taken_by_a_folder":
        assert f"{out / 'loss_vs_tokens.png'}: cannot write the figure" in err[0]
        assert sorted(p.name for p in out.iterdir()) == ["loss_vs_step.png", "loss_vs_tokens.png"]  # no temporary left
    else:
        assert f"{out}: cannot make the figures folder" in err[0]


def test_an_older_summary_compares_with_the_baseline_its_differences_name(tmp_path, plot_module):
    # A summary.json from before sweeps named their baseline: no "variants" or "baseline", but its
    # differences pair each xsa point with the sa point ("xsa_minus_sa_val_loss"). The points
    # listed xsa first, so the first variant met is not the baseline.
    write_sweep(tmp_path / "sw")
    s = json.loads((tmp_path / "sw" / "summary.json").read_text())
    assert "baseline" not in s and "variants" not in s
    s["points"] = [p for p in s["points"] if p["values"]["model.attention"] == "xsa"] + [
        p for p in s["points"] if p["values"]["model.attention"] == "sa"]
    (tmp_path / "sw" / "summary.json").write_text(json.dumps(s))
    sweep = load_sweep(tmp_path / "sw")
    assert sweep_variants(sweep) == (["xsa", "sa"], "sa")
    bottom = dict(plot_module.sweep_figures(sweep, None, False, None))["sweep_final.png"].axes[1]
    assert bottom.get_ylabel().startswith("variant − sa val loss")
    assert [l.get_label() for l in bottom.get_lines() if not l.get_label().startswith("_")] == ["xsa"]
    # xsa minus sa at lr 3e-4 and 6e-4, from write_sweep's final losses
    assert bottom.get_lines()[-1].get_ydata().tolist() == pytest.approx([4.15 - 4.20, 4.02 - 4.05])
