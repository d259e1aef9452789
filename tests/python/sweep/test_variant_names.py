"""scripts/view/plot.py and scripts/eval/table2.py with variants whose names are not "sa" or "xsa":
each variant is paired with the named baseline (by seed and the other settings), never
dropped or mispaired, and its figures and rows carry its name."""
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from holm_reference import holm_by_definition
from plot_inputs import load_run, load_sweep
from plotfiles import ROOT, check_png, plot_ok, write_run

stats = pytest.importorskip("scipy.stats")  # the eval extra (requirements-eval.txt)

VARIANTS = ["sa", "xsa-gated", "xsa-last3"]
LRS, SEEDS = (3e-4, 6e-4), (1, 2)


def final(variant, lr, seed):
    return 4.0 + 0.1 * VARIANTS.index(variant) * (1 if lr < 5e-4 else -1) + 0.01 * seed - 100 * lr


def write_variant_sweep(d):
    """A sweep directory as `xsagpt sweep` writes it for named variants over lr x seed."""
    d.mkdir(parents=True)
    points = []
    for lr in LRS:
        for seed in SEEDS:
            for i, v in enumerate(VARIANTS):
                name = f"{v},train.lr={lr:g},train.seed={seed}"
                write_run(d / name, "xsa" if v != "sa" else "sa", final(v, lr, seed) - 0.05, resume_at=None,
                          seed=len(points))
                points.append({"name": name, "dir": name, "variant": v, "values": {"train.lr": lr, "train.seed": seed},
                               "status": "done", "final_val_loss": final(v, lr, seed)})
    (d / "summary.json").write_text(json.dumps({"keys": ["train.lr", "train.seed"], "variants": VARIANTS,
                                                "baseline": "sa", "points": points}))


def test_plot_pairs_any_variant_names_with_the_baseline(tmp_path, plot_module):
    write_variant_sweep(tmp_path / "sw")
    written = plot_ok(tmp_path / "sw")
    assert sorted(p.name for p in written) == ["sweep_curves.png", "sweep_final.png", "sweep_variants.png"]
    for p in written:
        check_png(p)

    figures = dict(plot_module.sweep_figures(load_sweep(tmp_path / "sw"), None, False, None))
    top, bottom = figures["sweep_final.png"].axes[:2]
    lines = {l.get_label(): l for l in top.get_lines()}
    assert set(lines) == set(VARIANTS)
    for v in VARIANTS:  # the mean over seeds at each lr
        assert lines[v].get_ydata().tolist() == pytest.approx([np.mean([final(v, lr, s) for s in SEEDS]) for lr in LRS])
    diffs = {l.get_label(): l for l in bottom.get_lines() if not l.get_label().startswith("_")}
    assert set(diffs) == {"xsa-gated", "xsa-last3"}  # the baseline is not compared with itself
    for v, line in diffs.items():
        want = [np.mean([final(v, lr, s) - final("sa", lr, s) for s in SEEDS]) for lr in LRS]
        assert min(map(abs, want)) > 0.01 and line.get_ydata().tolist() == pytest.approx(want)

    # Loss against wall-clock time beside loss against tokens, a row per lr, every variant named.
    var = figures["sweep_variants.png"]
    assert len(var.axes) == 4
    assert "wall-clock time" in var.axes[0].get_xlabel() and "tokens" in var.axes[1].get_xlabel()
    for ax in var.axes:
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert [l for l in labels if "(n=" in l] == [f"{v} (n=2)" for v in VARIANTS]
        assert "sa's final time" in labels or "tokens" in ax.get_xlabel()


def test_plot_names_two_runs_by_their_variant_keys(tmp_path, plot_module):
    for name, gate in (("base", None), ("gated", "sa")):
        write_run(tmp_path / name, "xsa" if gate else "sa", 3.0 if gate else 3.1, resume_at=None)
        if gate:
            cfg = json.loads((tmp_path / name / "config.json").read_text())
            cfg["model"]["xsa_gate"] = gate
            (tmp_path / name / "config.json").write_text(json.dumps(cfg))
    runs = [load_run(tmp_path / n) for n in ("base", "gated")]
    figures = dict(plot_module.run_figures(runs, None, False, None))
    gap = figures["val_gap.png"].axes[0]
    assert gap.get_title() == "val loss: gated [xsa gate=sa] minus base [sa]"
    # write_run's loss is final + (10.8 - final) exp(-step / 8), val every 10 steps: gated minus base
    want = [-0.1 * (1 - math.exp(-s / 8)) for s in (10, 20, 30, 40)]
    assert gap.get_lines()[1].get_ydata().tolist() == pytest.approx(want, abs=1e-9)


def write_results(out, tmp_path, label, model, seed, rng):
    run = tmp_path / "runs" / f"{label}-s{seed}"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"model": model, "train": {"seed": seed}}))
    tasks = ["arc_easy", "boolq", "hellaswag", "lambada_openai", "openbookqa", "piqa", "social_iqa", "winogrande"]
    res = {t: {"acc,none": rng.uniform(0.3, 0.7), "acc_stderr,none": 0.01, "acc_norm,none": rng.uniform(0.3, 0.7),
               "acc_norm_stderr,none": 0.01} for t in tasks}
    folder = out / run.name
    folder.mkdir(parents=True)
    (folder / "results_2026-01-01T00-00-00.json").write_text(json.dumps(
        {"results": res, "config": {"model": "xsagpt", "model_args": f"checkpoint={run},device=cpu"}}))
    paper = {"boolq": "acc", "lambada_openai": "acc", "social_iqa": "acc", "winogrande": "acc"}
    return np.mean([100 * res[t][f"{paper.get(t, 'acc_norm')},none"] for t in tasks])


def test_table2_compares_every_variant_with_the_named_baseline(tmp_path):
    rng = np.random.default_rng(11)
    base = {"attention": "sa", "n_layer": 2}
    models = {"sa": base, "xsa gate=sa": {**base, "attention": "xsa", "xsa_gate": "sa"},
              "xsa layers=last 3": {**base, "attention": "xsa", "xsa_layers": "last 3"}}
    out = tmp_path / "results"
    avg = {(v, s): write_results(out, tmp_path, v.replace(" ", "_").replace("=", "-"), m, s, rng)
           for v, m in models.items() for s in (1, 2, 3)}
    proc = subprocess.run([sys.executable, ROOT / "scripts" / "eval" / "table2.py", out, "--baseline", "sa"], check=True,
                          capture_output=True, text=True)
    text = proc.stdout
    raw = {}
    for v in ("xsa gate=sa", "xsa layers=last 3"):
        block = text.split(f"{v} - sa, paired over 3 seed(s)")[1].splitlines()
        delta, ci, p = (next(l for l in block if l.startswith(k)) for k in ("delta", "95% t interval", "paired t-test p"))
        b = [avg[("sa", s)] for s in (1, 2, 3)]
        m = [avg[(v, s)] for s in (1, 2, 3)]
        d = np.subtract(m, b)
        lo, hi = stats.t.interval(0.95, 2, loc=d.mean(), scale=stats.sem(d))
        assert delta.split()[-1].startswith(f"{d.mean():+.2f}")  # the Avg column
        assert ci.split()[-1] == f"{lo:+.2f}..{hi:+.2f}"
        assert p.split()[-1] == f"{stats.ttest_rel(m, b).pvalue:.3g}"
        raw[v] = stats.ttest_rel(m, b).pvalue
        # Beside the difference, the noise floor: sa's own sample std over its 3 seeds.
        floor = next(l for l in block if l.startswith("noise floor (sa sd)"))
        assert floor.split()[-1] == f"{np.std(b, ddof=1):.2f}"
    # The two variants' p-values are one family per column, Holm-adjusted together (the Avg column here).
    want, m = holm_by_definition(list(raw.values()))
    assert m == 2 and want != list(raw.values())
    for v, w in zip(raw, want):
        block = text.split(f"{v} - sa, paired over 3 seed(s)")[1].splitlines()
        assert next(l for l in block if l.startswith("p Holm (2 variants)")).split()[-1] == f"{w:.3g}"
    # Another baseline: every other variant against it, by name.
    other = subprocess.run([sys.executable, ROOT / "scripts" / "eval" / "table2.py", out, "--baseline", "xsa gate=sa"],
                           check=True, capture_output=True, text=True).stdout
    assert "sa - xsa gate=sa, paired over 3 seed(s)" in other
    assert "xsa layers=last 3 - xsa gate=sa, paired over 3 seed(s)" in other
    bad = subprocess.run([sys.executable, ROOT / "scripts" / "eval" / "table2.py", out, "--baseline", "xsa"],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "--baseline: 'xsa' is none of the rows' variants" in bad.stderr


def test_table2_pairs_a_kind_with_options_with_the_baseline_of_its_own_size(tmp_path):
    """Two sizes of SA and of output-gated attention: the gated model's config has the
    kind's own option (out_gate), which SA's has not, and each size must still pair with
    the SA model of its size (the kinds' keys come from `xsagpt config --json`), not go
    unpaired among two baseline models."""
    rng = np.random.default_rng(12)
    models = {}
    for n_layer in (2, 4):
        models[f"sa L{n_layer}"] = ("sa", {"attention": "sa", "n_layer": n_layer})
        models[f"gated L{n_layer}"] = ("gated out_gate=headwise",
                                        {"attention": "gated", "out_gate": "headwise", "n_layer": n_layer})
    out = tmp_path / "results"
    avg = {}
    for label, (variant, model) in models.items():
        for s in (1, 2):
            avg[(label, s)] = write_results(out, tmp_path, label.replace(" ", "_"), model, s, rng)
            run = tmp_path / "runs" / f"{label.replace(' ', '_')}-s{s}"
            cfg = json.loads((run / "config.json").read_text())
            (run / "config.json").write_text(json.dumps({**cfg, "variant": variant}))
    text = subprocess.run([sys.executable, ROOT / "scripts" / "eval" / "table2.py", out, "--baseline", "sa"], check=True,
                          capture_output=True, text=True).stdout
    blocks = text.split("gated out_gate=headwise - sa, paired over 2 seed(s)")[1:]
    assert len(blocks) == 2, text
    deltas = [next(l for l in b.splitlines() if l.startswith("delta")).split()[-1] for b in blocks]
    # Each size's gated model against the SA model of that size, seed by seed (the Avg column).
    for n in (2, 4):
        want = np.mean([avg[(f"gated L{n}", s)] - avg[(f"sa L{n}", s)] for s in (1, 2)])
        assert sum(d.startswith(f"{want:+.2f}") for d in deltas) == 1, (n, want, deltas)
