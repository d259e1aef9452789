"""The iso-loss compute multiplier and the equal-time rule of sweep summaries, recomputed
here with numpy and scipy.stats from the runs' own metrics.jsonl. A three-seed sweep on
the CPU with a baseline of 6 steps, a variant that trains twice as long (to get to the
baseline's final loss), one that stops after 2 steps (to fall short of it, and to end
before the baseline in every seed) and XSA (whatever its seeds do)."""
import json
import math

import numpy as np
import pytest

stats = pytest.importorskip("scipy.stats")  # the eval extra (requirements-eval.txt); not on every GPU image

from tinyrun import write_run_config

VARIANTS = {"sa": {}, "longer": {"train.max_steps": 12}, "short": {"train.max_steps": 2},
            "xsa": {"model.attention": "xsa"}}
SEEDS = [1, 2, 3]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, markov_shards, xsagpt):
    d = tmp_path_factory.mktemp("iso")
    base = write_run_config(d / "base.json", markov_shards, d / "unused", model={"attention": "sa"}, max_steps=6,
                            eval_interval=2, ckpt_interval=0, log_interval=1)
    spec = d / "s.json"
    spec.write_text(json.dumps({"base": str(base), "variants": VARIANTS, "baseline": "sa",
                                "grid": {"train.seed": SEEDS}, "out_dir": str(d / "sw")}))
    out = xsagpt("sweep", "-c", spec, "--no-plot").stdout
    return d / "sw", json.loads((d / "sw" / "summary.json").read_text()), out


def val_curve(run_dir, x):
    rows = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "val_loss" in r]
    return np.array([r[x] for r in rows], dtype=float), np.array([r["val_loss"] for r in rows])


def first_reach(xs, ys, target):
    """The first crossing of `target`, linear between evaluations; None if the curve never gets there."""
    below = np.nonzero(ys <= target)[0]
    if not len(below):
        return None
    i = below[0]
    return xs[0] if i == 0 else float(np.interp(target, [ys[i], ys[i - 1]], [xs[i], xs[i - 1]]))


@pytest.mark.parametrize("axis,x", [("tokens", "tokens"), ("time", "time_s")])
def test_iso_loss_multiplier_and_interval_follow_the_logged_curves(sweep, axis, x):
    sw, s, _ = sweep
    report = (sw / "report.md").read_text()
    comps = {c["variant"]: c for c in s["comparisons"]}
    never = 0
    for v, c in comps.items():
        m = c["iso_loss"][axis]
        ratios, seeds, missed = [], [], []
        for k in SEEDS:
            bx, by = val_curve(sw / f"sa,train.seed={k}", x)
            vx, vy = val_curve(sw / f"{v},train.seed={k}", x)
            target = by[-1]
            b, r = first_reach(bx, by, target), first_reach(vx, vy, target)
            assert b is not None and b > 0
            if r is None:
                missed.append(k)
                assert vy.min() > target  # named, not extrapolated
                continue
            ratios.append(r / b)
            seeds.append(k)
        never += len(missed)
        assert m["seeds"] == seeds and [e["seed"] for e in m["not_reached"]] == missed
        assert [e["ratio"] for e in m["per_seed"]] == pytest.approx(ratios, rel=1e-9)
        for e in m["not_reached"]:
            k = e["seed"]
            vx, vy = val_curve(sw / f"{v},train.seed={k}", x)
            assert e["variant_best"] == pytest.approx(vy.min()) and e["variant_end"] == pytest.approx(vx[-1])
            assert f"{v}: seed {k} never reached sa's final val loss" in report
        logs = np.log(ratios)
        if len(logs) == 0:
            assert m["multiplier"] is None and m["ci95"] is None
            continue
        assert m["multiplier"] == pytest.approx(math.exp(logs.mean()), rel=1e-9)
        if len(logs) > 1 and logs.std() > 0:
            lo, hi = stats.t.interval(0.95, len(logs) - 1, loc=logs.mean(), scale=stats.sem(logs))
            assert m["ci95"] == pytest.approx([math.exp(lo), math.exp(hi)], rel=1e-8)
            assert m["p"] == pytest.approx(stats.ttest_1samp(logs, 0.0).pvalue, rel=1e-8)
            assert m["ci95"][0] < m["multiplier"] < m["ci95"][1]
    # What the sweep is built to contain, so that the checks above checked something: an interval
    # over seeds that got there, and seeds that never did.
    assert any(c["iso_loss"][axis]["n"] >= 2 and c["iso_loss"][axis]["ci95"] is not None for c in comps.values())
    assert never >= 1


def test_equal_time_reads_each_pair_at_the_earlier_end_and_keeps_every_seed(sweep):
    """The 2-step variant usually ends before the 6-step baseline, but which run ended
    first, and whether it ended before the other's first evaluation, are wall-clock facts
    (a loaded machine, or one thread per test worker, can stall either): the expected pair
    or refusal is worked out from each seed's own logged times, so the rule is checked
    whichever way the race went. A seed is refused only where one curve starts after the
    other ends; every other seed is kept."""
    sw, s, out = sweep
    short = next(c for c in s["comparisons"] if c["variant"] == "short")
    eq = short["equal_time"]
    kept, refused, diffs, whose, xs = [], [], [], [], []
    for k in SEEDS:
        bx, by = val_curve(sw / f"sa,train.seed={k}", "time_s")
        vx, vy = val_curve(sw / f"short,train.seed={k}", "time_s")
        end = min(vx[-1], bx[-1])
        if vx[0] > end or bx[0] > end:
            refused.append(k)
            continue
        kept.append(k)
        diffs.append(float(np.interp(end, vx, vy)) - float(np.interp(end, bx, by)))
        whose.append("variant" if vx[-1] < bx[-1] else "baseline" if bx[-1] < vx[-1] else "both")
        xs.append(end)
    assert len(kept) >= 2, f"seeds {refused} refused: too few pairs left to check the interval"
    assert eq["n"] == len(kept) and eq["seeds"] == kept
    assert [r["seed"] for r in eq["extrapolation_refused"]] == refused
    assert [a["end_of"] for a in eq["at"]] == whose
    assert [a["x"] for a in eq["at"]] == pytest.approx(xs, rel=1e-12)
    assert eq["mean"] == pytest.approx(np.mean(diffs), abs=1e-12)
    lo, hi = stats.t.interval(0.95, len(kept) - 1, loc=np.mean(diffs), scale=stats.sem(diffs))
    assert eq["ci95"] == pytest.approx([lo, hi], rel=1e-8)
    # The table says where each pair was read, and whose end it was.
    label = {"variant": "short", "baseline": "sa", "both": "both"}
    times = ", ".join(f"{x:.4g} s ({label[w]})" for x, w in zip(xs, whose))
    assert times in (sw / "report.md").read_text() and times in out
    # Equal tokens follows the same rule: the shorter run's token count.
    tok = short["equal_tokens"]
    assert tok["n"] == 3 and all(a["end_of"] == "variant" for a in tok["at"])
    # The longer variant is read at the baseline's end.
    longer = next(c for c in s["comparisons"] if c["variant"] == "longer")
    assert all(a["end_of"] == "baseline" for a in longer["equal_tokens"]["at"])


def test_a_flat_baseline_has_no_multiplier_in_tokens_or_time(tmp_path, markov_shards, xsagpt):
    """A baseline whose val loss never goes below its first evaluation (here flat: an lr
    too small to move a float32 weight) gave no multiplier in tokens but one in time, the
    ratio of the two runs' start-up times. Both columns now leave the seed out, and the
    notes name it once."""
    base = write_run_config(tmp_path / "base.json", markov_shards, tmp_path / "unused", model={"attention": "sa"},
                            max_steps=4, eval_interval=2, ckpt_interval=0, log_interval=1)
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"base": str(base), "variants": {"sa": {"train.lr": 1e-30}, "xsa": {"model.attention": "xsa"}},
                                "baseline": "sa", "grid": {"train.seed": [5]}, "out_dir": str(tmp_path / "sw")}))
    out = xsagpt("sweep", "-c", spec, "--no-plot").stdout
    bx, by = val_curve(tmp_path / "sw" / "sa,train.seed=5", "time_s")
    assert len(by) == 3 and by[0] <= by[-1] and bx[0] > 0  # the case: flat, its first evaluation after start-up
    (c,) = json.loads((tmp_path / "sw" / "summary.json").read_text())["comparisons"]
    for axis in ("tokens", "time"):
        m = c["iso_loss"][axis]
        assert m["n"] == 0 and m["multiplier"] is None and m["per_seed"] == []
        assert [s["seed"] for s in m["skipped"]] == [5]
    note = "xsa: seed 5: no iso-loss multiplier in tokens or time: the baseline's curve is at its final loss"
    assert note in out and note in (tmp_path / "sw" / "report.md").read_text()
