"""Named variants in sweeps: a tiny four-variant sweep with three seeds on CPU writes
point directories, summary.json, the printed table and report.md by variant name, and
every figure in them (mean ± sd, the paired difference to the baseline with its 95% t
interval and the paired t-test p, at the end, at equal wall-clock time and at equal
tokens, each pair read at the earlier of its two ends, the step-time ratio) is
recomputed here from the runs' own metrics.jsonl with scipy.stats. One seed gives no
interval; an unpaired seed is dropped and said. Bad variants and baselines are refused
by name before anything runs."""
import json

import numpy as np
import pytest

stats = pytest.importorskip("scipy.stats")  # the eval extra (requirements-eval.txt); not on every GPU image

from holm_reference import holm_by_definition
from tinyrun import write_run_config

VARIANTS = {"sa": {}, "xsa": {"model.attention": "xsa"},
            "xsa-last1": {"model.attention": "xsa", "model.xsa_layers": "last 1"},
            "xsa-gated": {"model.attention": "xsa", "model.xsa_gate": "sa"}}
SEEDS = [1, 2, 3]


@pytest.fixture(scope="module")
def base(tmp_path_factory, markov_shards):
    d = tmp_path_factory.mktemp("variants")
    return write_run_config(d / "base.json", markov_shards, d / "unused", model={"attention": "sa"}, max_steps=6,
                            eval_interval=2, ckpt_interval=0, log_interval=1)


def sweep_spec(path, base, **extra):
    spec = {"base": str(base), "variants": VARIANTS, "baseline": "sa", "grid": {"train.seed": SEEDS},
            "out_dir": str(path.parent / "sw"), **extra}
    path.write_text(json.dumps(spec))
    return path


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, base, xsagpt):
    d = tmp_path_factory.mktemp("sweep")
    out = xsagpt("sweep", "-c", sweep_spec(d / "s.json", base), "--no-plot").stdout
    return d / "sw", out


def records(run_dir, kind):
    rows = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if f"{kind}_loss" in r]


def test_points_are_named_by_variant_and_paired_by_seed(sweep):
    sw, out = sweep
    s = json.loads((sw / "summary.json").read_text())
    assert s["variants"] == ["sa", "xsa", "xsa-gated", "xsa-last1"] and s["baseline"] == "sa"
    assert {p["name"] for p in s["points"]} == {f"{v},train.seed={k}" for v in VARIANTS for k in SEEDS}
    assert all((sw / p["dir"] / "done.json").exists() and p["variant"] == p["name"].split(",")[0] for p in s["points"])
    cfg = json.loads((sw / "xsa-last1,train.seed=2" / "config.json").read_text())
    assert cfg["model"]["xsa_layers"] == "last 1" and cfg["train"]["seed"] == 2
    final = {(p["variant"], p["values"]["train.seed"]): records(sw / p["dir"], "val")[-1]["val_loss"]
             for p in s["points"]}
    assert len(set(final.values())) == len(final), "every variant and seed must be its own run"
    report = (sw / "report.md").read_text()
    comps = {c["variant"]: c for c in s["comparisons"]}
    assert comps.keys() == {"xsa", "xsa-gated", "xsa-last1"}
    base = np.array([final[("sa", k)] for k in SEEDS])
    for v, c in comps.items():
        mine = np.array([final[(v, k)] for k in SEEDS])
        d = mine - base
        assert abs(d).max() > 0  # a real difference to test
        m = c["minus_baseline"]
        res = stats.ttest_rel(mine, base)
        lo, hi = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
        assert (m["n"], m["df"], m["seeds"], m["dropped"]) == (3, 2, SEEDS, [])
        assert m["mean"] == pytest.approx(d.mean(), abs=1e-12) and m["sd"] == pytest.approx(d.std(ddof=1), rel=1e-9)
        assert m["p"] == pytest.approx(res.pvalue, rel=1e-8) and m["t"] == pytest.approx(res.statistic, rel=1e-9)
        assert m["ci95"] == pytest.approx([lo, hi], rel=1e-9)
        f = c["final_val_loss"]
        assert (f["n"], f["mean"], f["std"]) == (3, pytest.approx(mine.mean()), pytest.approx(mine.std(ddof=1)))
        # The table and report.md show the same numbers, rounded.
        row = f"{mine.mean():.4f} ± {mine.std(ddof=1):.4f}"
        cells = f"{d.mean():+.4f}", f"[{lo:+.4f}, {hi:+.4f}]", f"{res.pvalue:.3g}"
        assert f"| {v} | {row} | 3 | {' | '.join(cells)} | " in report
        line = next(l for l in out.splitlines() if l.startswith(v + " ") and row in l)
        assert all(cell in line for cell in cells)
    assert f"| sa (baseline) | {base.mean():.4f} ± {base.std(ddof=1):.4f} | 3 |" in report


def test_p_values_are_holm_adjusted_across_the_variants_beside_the_noise_floor(sweep):
    sw, out = sweep
    s = json.loads((sw / "summary.json").read_text())
    report = (sw / "report.md").read_text()
    comps = sorted(s["comparisons"], key=lambda c: c["variant"])
    assert len(comps) == 3
    for path in (("minus_baseline",), ("equal_time",), ("equal_tokens",), ("iso_loss", "tokens"), ("iso_loss", "time")):
        tests = []
        for c in comps:
            for k in path:
                c = c[k]
            tests.append(c)
        raw = [t["p"] for t in tests]
        want, m = holm_by_definition(raw)
        assert m == sum(p is not None for p in raw)
        for t, w in zip(tests, want):
            assert t["holm_m"] == m
            assert t["p_holm"] == (None if w is None else pytest.approx(w, rel=1e-15))
    # The final loss's family: three p-values, at least one moved by the adjustment.
    fin = [c["minus_baseline"] for c in comps]
    assert all(f["p"] is not None for f in fin) and any(f["p_holm"] > f["p"] for f in fin)
    assert "p Holm (3 variants)" in report and "p Holm (3 variants)" in out
    assert "Holm-adjusted (Holm 1979) across the m variants" in report
    # The noise floor beside each difference: the baseline's sample sd over its 3 seeds.
    base = [p["final_val_loss"] for p in s["points"] if p["variant"] == "sa"]
    floor = f"{np.std(base, ddof=1):.4f}"
    for c in comps:
        m = c["minus_baseline"]
        cells = f"{m['p']:.3g}", f"{m['p_holm']:.3g}", "3", floor
        assert f"| {' | '.join(cells)} |" in report
    assert "noise floor: sd of sa" in out


def test_equal_time_and_equal_tokens_follow_the_logged_curves(sweep):
    sw, _ = sweep
    s = json.loads((sw / "summary.json").read_text())
    for c in s["comparisons"]:
        v = c["variant"]
        d_time, d_tok, ratios, whose = [], [], [], []
        for k in SEEDS:
            b, m = sw / f"sa,train.seed={k}", sw / f"{v},train.seed={k}"
            bv, mv = records(b, "val"), records(m, "val")
            # Each pair at the earlier of its two ends, the other curve interpolated there.
            for key, out in (("time_s", d_time), ("tokens", d_tok)):
                bx, mx = [r[key] for r in bv], [r[key] for r in mv]
                x = min(bx[-1], mx[-1])
                out.append(np.interp(x, mx, [r["val_loss"] for r in mv]) -
                           np.interp(x, bx, [r["val_loss"] for r in bv]))
                if key == "time_s":
                    whose.append("variant" if mx[-1] < bx[-1] else "baseline" if bx[-1] < mx[-1] else "both")
            step_time = [median_step_time(d) for d in (b, m)]
            ratios.append(step_time[1] / step_time[0])
        eq = c["equal_time"]
        assert eq["extrapolation_refused"] == [] and eq["n"] == 3  # no seed lost, whichever ended first
        assert [a["end_of"] for a in eq["at"]] == whose
        assert eq["mean"] == pytest.approx(np.mean(d_time), abs=1e-12)
        res = stats.ttest_1samp(d_time, 0.0)
        assert eq["p"] == pytest.approx(res.pvalue, rel=1e-8)
        # Same tokens per step: at the baseline's token count the variant is at its own end.
        assert c["equal_tokens"]["mean"] == pytest.approx(c["minus_baseline"]["mean"], abs=1e-12)
        assert c["equal_tokens"]["mean"] == pytest.approx(np.mean(d_tok), abs=1e-12)
        # One step time for every report: each run's median interval, pooled over seeds as the ladder does.
        assert c["step_time_ratio"]["mean"] == pytest.approx(np.mean(ratios), rel=1e-9)
        assert c["step_time_ratio"]["geomean"] == pytest.approx(np.exp(np.mean(np.log(ratios))), rel=1e-9)


def median_step_time(run_dir):
    """Seconds per step: the median, over the train records, of the interval from the record before
    (a train record, or an evaluation's, written once it has finished) over the steps between them."""
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    marks = [(r["step"], r["time_s"], "train_loss" in r and "val_loss" not in r) for r in lines if "time_s" in r]
    per_step = [(t1 - t0) / (s1 - s0) for (s0, t0, _), (s1, t1, train) in zip(marks, marks[1:])
                if train and s1 > s0 and t1 > t0]
    assert len(per_step) >= 2, run_dir  # a median of something
    return float(np.median(per_step))


def test_one_seed_has_no_interval_and_an_unpaired_seed_is_dropped(tmp_path, base, xsagpt):
    spec = sweep_spec(tmp_path / "s.json", base, grid={"train.seed": [5, 6]})
    failed = tmp_path / "sw" / "xsa,train.seed=6"
    failed.mkdir(parents=True)
    (failed / "failed.json").write_text(json.dumps({"error": "loss is not finite at step 3"}))
    proc = xsagpt("sweep", "-c", spec, "--no-plot", check=False)
    assert proc.returncode == 1  # the failed point is left alone and reported
    s = json.loads((tmp_path / "sw" / "summary.json").read_text())
    xsa = next(c for c in s["comparisons"] if c["variant"] == "xsa")
    assert xsa["minus_baseline"]["n"] == 1 and xsa["minus_baseline"]["ci95"] is None
    assert xsa["minus_baseline"]["dropped"] == [{"seed": 6, "why": "xsa failed"}]
    report = (tmp_path / "sw" / "report.md").read_text()
    assert "| xsa |" in report and "no interval (one seed)" in report
    assert "xsa: seed 6 not paired: xsa failed" in report and "no interval (one seed)" in proc.stdout


@pytest.mark.parametrize("change,message", [
    ({"baseline": "nope"}, "baseline: 'nope' is not a variant (variants: sa, xsa, xsa-gated, xsa-last1)"),
    ({"variants": {}}, "variants: expected an object of name -> {\"section.key\": value}, with at least one"),
    ({"variants": {"sa": {}, "x": {"model.attentoin": "xsa"}}}, "(with --set): model: unknown key 'attentoin'"),
    ({"variants": {"sa": {}, "x": {"model.attention": "both"}}}, "variants.x: "),
    ({"variants": {"sa": {}, "x": {"train.seed": 9}}}, "variants.x: train.seed is also in the grid"),
    ({"variants": {"sa": {}, "a/b": {}}}, "variants: name 'a/b': expected 1-64 letters"),
    ({"baseline": None}, "baseline: "),
])
def test_bad_variants_are_refused_by_name(tmp_path, base, xsagpt, change, message):
    spec = json.loads(sweep_spec(tmp_path / "s.json", base).read_text())
    spec.update(change)
    if change.get("baseline", "") is None:
        del spec["baseline"]
        message = "baseline: required with variants (one of: sa, xsa, xsa-gated, xsa-last1)"
    (tmp_path / "s.json").write_text(json.dumps(spec))
    proc = xsagpt("sweep", "-c", tmp_path / "s.json", "--dry-run", check=False)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "sw").exists()


def test_a_baseline_without_variants_is_refused(tmp_path, base, xsagpt):
    (tmp_path / "s.json").write_text(json.dumps({"base": str(base), "baseline": "sa", "grid": {"train.lr": [1e-3]},
                                                 "out_dir": str(tmp_path / "sw")}))
    proc = xsagpt("sweep", "-c", tmp_path / "s.json", "--dry-run", check=False)
    assert proc.returncode == 2 and "baseline: names a variant, but the sweep has no \"variants\"" in proc.stderr


def test_the_shipped_variant_sweeps(xsagpt, repo_root):
    """variants-tiny.json: six variants (the two kinds with gates read from the token among
    them) x 3 seeds on CPU; variants-124m.json: four at GPT-2 124M x 2 seeds."""
    tiny = {"sa", "xsa", "xsa-gated", "xsa-last2", "gated", "xsa_token"}
    gpt2 = {"sa", "xsa", "xsa-gated", "xsa-last3"}
    for name, seeds, variants in (("variants-tiny", 3, tiny), ("variants-124m", 2, gpt2)):
        out = xsagpt("sweep", "-c", repo_root / "configs" / "sweeps" / f"{name}.json", "--dry-run",
                     cwd=repo_root).stdout
        rows = [l.split()[0] for l in out.split("memory, as each point")[0].splitlines() if l.startswith("  ")]
        assert len(rows) == len(variants) * seeds and {r.split(",")[0] for r in rows} == variants
