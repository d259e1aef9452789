"""Ladder sweeps end to end on the CPU (sweep/ladder.h): the dry run sizes each rung by the
stated rules, checked here against the reference formulas (a GPT's parameters and FLOPs per
token written out in ladderspec.py, not read from the program); a 2-rung ladder of 2-step runs trains,
writes summary.json's ladder section, report.md's table and the figure; a rung that fails and
a rung that diverges are named and left out of the fit; with rate multipliers every variant is
judged at its own best rate per rung, and its loss at every rate tried is reported with their
spread and LR sensitivity, a diverged rate counting as the loss at initialization; a named
GPU's estimate is the stated arithmetic; bad ladder specs are refused by name with nothing
created."""
import json
import math
import re

import numpy as np
import pytest

from ladderspec import STEP_TOKENS, VOCAB, flops_per_token, ladder_spec, params


def rung_rows(stdout: str) -> dict:
    """The dry run's rung table: name -> (n_layer, d_model, n_head, params, tokens, steps, lr),
    after checking each row's non-embedding parameters (all but the untied embedding and
    head) and its tokens per non-embedding parameter."""
    rows = {}
    for line in stdout.splitlines():
        m = re.match(r"\s+(d\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(\d+)\s+\d+\s+(\S+)"
                     r"\s+\S+$", line)
        if m:
            L, d, heads, total, blocks, tokens, ratio, steps, lr = m.groups()[1:]
            assert int(blocks) == int(total) - 2 * VOCAB * int(d), line
            assert float(ratio) == pytest.approx(int(tokens) / int(blocks), abs=0.051), line
            rows[m.group(1)] = (int(L), int(d), int(heads), int(total), int(tokens), int(steps), float(lr))
    return rows


def test_ladder_sizes_trains_and_fits(tmp_path, shards, xsagpt):
    spec = ladder_spec(tmp_path, shards)
    dry = xsagpt("sweep", "-c", spec, "--dry-run")
    assert not (tmp_path / "sweep").exists()
    rows = rung_rows(dry.stdout)
    assert set(rows) == {"d1", "d2"}
    for L in (1, 2):
        d = 32 * L
        assert rows[f"d{L}"] == (L, d, d // 16, params(L, d), 2 * STEP_TOKENS, 2, pytest.approx(1e-2 * 64 / d, rel=1e-3))
    assert dry.stdout.count(",rung=d") >= 8 and "time rests on measured here" in dry.stdout
    assert re.search(r"total: 8 points, .* about .* \(\d+ s\)", dry.stdout)

    run = xsagpt("sweep", "-c", spec)
    summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    ladder = summary["ladder"]
    assert [r["name"] for r in ladder["rungs"]] == ["d1", "d2"]
    for L, r in zip((1, 2), ladder["rungs"]):
        assert (r["params"], r["tokens"], r["steps"]) == (params(L, 32 * L), 2 * STEP_TOKENS, 2)
        assert r["flops"] == pytest.approx(flops_per_token(L, 32 * L) * 2 * STEP_TOKENS, rel=1e-12)
    # Every finished run is an observation: its own final loss, its compute from its tokens.
    finals = {p["name"]: p["final_val_loss"] for p in summary["points"]}
    assert len(ladder["observations"]) == 8 and not ladder["left_out"]
    for o in ladder["observations"]:
        L = int(o["rung"][1:])
        assert o["loss"] == finals[o["point"]]
        assert o["compute"] == pytest.approx(flops_per_token(L, 32 * L) * 2 * STEP_TOKENS, rel=1e-12)
    analysis = ladder["analysis"]
    assert analysis["baseline"] == "sa" and set(analysis["fits"]) == {"sa", "xsa"}
    assert [r["rung"] for r in analysis["rungs"]] == [0, 1]
    assert "ladder: every variant against sa" in run.stdout and "multiplier [95% CI]" in run.stdout
    assert "paper-1.4b at" in run.stdout  # the extrapolation, named as one
    assert "## Ladder" in (tmp_path / "sweep" / "report.md").read_text()
    png = tmp_path / "sweep" / "plots" / "sweep_ladder.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10000


def test_failed_and_diverged_rungs_are_named_and_left_out(tmp_path, shards, xsagpt):
    # d3 cannot read its data (fails at its start); d4 trains at a rate that blows up.
    spec = ladder_spec(tmp_path, shards, rungs=(1, 2, 3, 4), seeds=(1,),
                       lr={"per_rung": [1e-2, 1e-2, 1e-2, 1e30]})
    data = json.loads(spec.read_text())
    data["ladder"]["rungs"][2] = {"depth": 3, "set": {"data.train": str(tmp_path / "missing" / "train_*.bin")}}
    spec.write_text(json.dumps(data))
    run = xsagpt("sweep", "-c", spec, "--no-plot", check=False)
    assert run.returncode == 1  # points failed
    ladder = json.loads((tmp_path / "sweep" / "summary.json").read_text())["ladder"]
    left = {x["point"]: x["why"] for x in ladder["left_out"]}
    assert set(left) == {f"{v},rung={r},train.seed=1" for v in ("sa", "xsa") for r in ("d3", "d4")}
    assert all(w.startswith("failed: ") for w in left.values())
    assert any("not finite" in w for p, w in left.items() if "d4" in p)
    assert {o["rung"] for o in ladder["observations"]} == {"d1", "d2"}
    assert [r["rung"] for r in ladder["analysis"]["rungs"]] == [0, 1]  # the fit saw two rungs
    for p in left:
        assert f"{p} left out of the fit" in run.stdout


def test_each_variant_is_judged_at_its_own_best_rate(tmp_path, shards, xsagpt):
    spec = ladder_spec(tmp_path, shards, ladder={"lr_multipliers": [0.1, 1, 10]})
    run = xsagpt("sweep", "-c", spec, "--no-plot")
    summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    ladder = summary["ladder"]
    means = {}
    for p in summary["points"]:
        key = (p["variant"], p["values"]["rung"], p["values"]["lr_mult"])
        means.setdefault(key, []).append(p["final_val_loss"])
    picked = set()
    for v in ("sa", "xsa"):
        assert [c["rung"] for c in ladder["lr_choice"][v]] == ["d1", "d2"]
        for c in ladder["lr_choice"][v]:
            cands = {m: sum(means[(v, c["rung"], m)]) / 2 for m in (0.1, 1, 10)}
            assert len(set(cands.values())) == 3  # the rates give different losses: a choice to make
            best = min(cands, key=cands.get)
            assert c["lr_mult"] == best and c["mean_final_val_loss"] == pytest.approx(cands[best])
            assert c["at_edge"] == (best != 1)
            picked.add((v, c["rung"], best))
    # The fit sees exactly the points at each variant's own best rate.
    assert {(o["variant"], o["rung"], o["lr_mult"]) for o in ladder["observations"]} == picked
    assert len(ladder["observations"]) == 8
    assert "Rates each variant is judged at" in run.stdout
    # Each variant's loss at every rate tried, per rung, with its spread and Wortsman et al.'s LR
    # sensitivity: the mean over the rates of min(loss, l0) minus the best, l0 = ln(vocab) the loss at init.
    l0 = math.log(VOCAB)
    for v in ("sa", "xsa"):
        rows = ladder["lr_sensitivity"][v]
        assert [r["rung"] for r in rows] == ["d1", "d2"]
        for r in rows:
            capped = [float(np.mean([min(x, l0) for x in means[(v, r["rung"], m)]])) for m in (0.1, 1, 10)]
            assert r["l0"] == pytest.approx(l0, rel=1e-15) and r["values"] == {}
            assert [x["lr_mult"] for x in r["rates"]] == [0.1, 1, 10]
            assert [x["loss"] for x in r["rates"]] == pytest.approx(capped, rel=1e-12)
            assert [(x["n"], x["diverged"]) for x in r["rates"]] == [(2, 0)] * 3
            assert r["spread"] == pytest.approx(max(capped) - min(capped), rel=1e-12)
            assert r["sensitivity"] == pytest.approx(np.mean(capped) - min(capped), rel=1e-9)
            assert r["spread"] > 0
    assert "LR sensitivity (Wortsman)" in run.stdout and "LR sensitivity (Wortsman)" in (
        tmp_path / "sweep" / "report.md").read_text()


def test_a_diverged_rate_counts_as_the_loss_at_initialization(tmp_path, shards, xsagpt):
    spec = ladder_spec(tmp_path, shards, seeds=(1,), ladder={"lr_multipliers": [1, 1e30]})
    run = xsagpt("sweep", "-c", spec, "--no-plot", check=False)
    assert run.returncode == 1  # the rate that blows up fails its points
    summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    l0 = math.log(VOCAB)
    for v in ("sa", "xsa"):
        rows = summary["ladder"]["lr_sensitivity"][v]
        assert [r["rung"] for r in rows] == ["d1", "d2"]
        for row in rows:
            at = {p["values"]["lr_mult"]: p for p in summary["points"]
                  if p["variant"] == v and p["values"]["rung"] == row["rung"]}
            good, bad = at[1], at[1e30]
            assert bad["status"] == "failed" and "not finite" in bad["error"]
            assert [(x["loss"], x["n"], x["diverged"]) for x in row["rates"]] == [
                (pytest.approx(min(good["final_val_loss"], l0), rel=1e-15), 1, 0), (pytest.approx(l0, rel=1e-15), 1, 1)]
            assert row["spread"] == pytest.approx(l0 - good["final_val_loss"], rel=1e-12) and row["spread"] > 0
            assert row["sensitivity"] == pytest.approx(row["spread"] / 2, rel=1e-12)
    assert f"{l0:.4f} (n=1, 1 diverged)" in run.stdout


def test_named_gpu_estimate_is_the_stated_arithmetic(tmp_path, shards, xsagpt):
    """Preset rungs costed on an H100 at an assumed MFU, from this machine: each point's time is
    overhead + (training + evaluation FLOPs) / (989 TFLOP/s x MFU)."""
    spec = ladder_spec(tmp_path, shards, ladder={"rungs": ["gpt2-124m", "gpt2-350m"], "tokens": {"per_param": 20},
                                                 "estimate": {"device": "H100", "mfu": 0.4, "overhead_s": 5}})
    dry = xsagpt("sweep", "-c", spec, "--dry-run").stdout
    total = 0.0
    for L, d in ((12, 768), (24, 1024)):
        steps = math.floor(20 * params(L, d) / STEP_TOKENS + 0.5)  # rounded half up, as llround
        fpt = flops_per_token(L, d)
        eval_interval = max(1, math.floor(steps * 4 / 12 + 0.5))
        evals = 1 + steps // eval_interval + (steps % eval_interval != 0)
        flops = fpt * steps * STEP_TOKENS + evals * 512 * fpt / 3
        total += 4 * (5 + flops / (989e12 * 0.4))  # two variants x two seeds
    assert total > 1000  # hours of work, so the check is of the arithmetic, not of the overhead
    got = float(re.search(r"total: 8 points, .* \((\d+) s\)", dry).group(1))
    assert got == pytest.approx(total, abs=1)
    assert "assumed: one H100 at MFU 40% of its dense bf16 peak 989 TFLOP/s" in dry


BAD = [
    ({"rungs": [2]}, "ladder.rungs: expected a list of at least 2 sizes"),
    ({"rungs": [2, 3], "head_dim": 64, "tokens": {"per_param": 0.01}}, "depth 3 gives d_model 3 x 32 = 96, not a multiple of head_dim 64"),
    ({"tokens": {"per_param": 1e-5}}, "less than one step of 128 tokens"),
    ({"lr": {"width_exponent": -1}}, "ladder.lr.anchor: required with width_exponent"),
    ({"rungs": [2, 1], "tokens": {"per_param": 0.01}}, "not more than rung d2 before it"),
    ({"lr": {"per_rung": [1e-3]}}, "1 values for 2 rungs"),
    ({"estimate": {"device": "H100"}}, "ladder.estimate.mfu: required with device"),
    ({"lr_multipliers": [1, 1]}, "ladder.lr_multipliers: 1 is listed twice"),
    ({"tune_rungs": 1}, "ladder.tune_rungs: needs lr_multipliers with at least 2 multipliers to choose from (has 0)"),
    ({"tune_rungs": 2, "lr_multipliers": [0.5, 1]},
     "ladder.tune_rungs: expected a number of rungs from 1 to 1 (fewer than the 2 rungs), got 2"),
    ({"tune_past_edge": True}, "ladder.tune_past_edge: goes with tune_rungs"),
    ({"extrapolate_decades": -1}, "ladder.extrapolate_decades: expected a number of decades of compute >= 0, got -1"),
    ({"extrapolate_decade": 2}, "ladder: unknown key 'extrapolate_decade'"),
    ({"rungs": [1, {"depth": 2, "set": {"train.lr": 1}}]}, "train.lr is set by the ladder itself"),
    # A rung may not change what a variant is, nor the grid's seeds, naming who sets the key.
    ({"rungs": [1, {"depth": 2, "set": {"model.attention": "gated"}}]},
     "ladder.rungs[1].set: model.attention is set by variant sa, variant xsa; a rung's own \"set\" may not change it"),
    ({"rungs": [1, {"depth": 2, "set": {"train.seed": 7}}]}, "ladder.rungs[1].set: train.seed is set by the grid"),
    ({"rungs": [1, {"depth": 2, "set": {"model.xsa_gate": "sa"}}]},
     "model.xsa_gate is set by the variants (what each variant is)"),
    # The rules' values range-checked before they become overrides, naming the rule and the rung.
    ({"tokens": {"per_param": 1e300}}, "ladder.rungs[0] (d1): the token rule (tokens = 1e+300 x parameters (total)) "
                                       f"gives {1e300 * params(1, 32):.3g} tokens, past 2^62"),
    ({"lr": {"width_exponent": 400, "anchor": {"d_model": 1, "lr": 1}}},
     "ladder.rungs[0] (d1): the rate rule (lr = 1 x (d_model / 1)^400) gives inf at d_model 32, not a finite"),
]


@pytest.mark.parametrize("change,message", BAD, ids=[b[1][:60] for b in BAD])
def test_bad_ladder_specs_are_refused_by_name(tmp_path, shards, xsagpt, change, message):
    spec = ladder_spec(tmp_path, shards, ladder=change)
    for args in (("--dry-run",), ()):
        proc = xsagpt("sweep", "-c", spec, *args, check=False)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert not (tmp_path / "sweep").exists()


def test_a_rung_that_makes_two_points_one_run_is_named(tmp_path, shards, xsagpt):
    # "last 2" of a 2-layer rung is every layer: at d2 the two variants are one run, at d3 they differ.
    spec = ladder_spec(tmp_path, shards, rungs=(2, 3), baseline="xsa",
                       variants={"xsa": {"model.attention": "xsa"},
                                 "xsa-last2": {"model.attention": "xsa", "model.xsa_layers": "last 2"}})
    proc = xsagpt("sweep", "-c", spec, "--dry-run", check=False)
    # Before: "grid: points xsa,rung=d2,train.seed=1 and xsa-last2,... resolve to the same run config".
    assert proc.returncode == 2
    assert "ladder rung d2: points xsa,rung=d2,train.seed=1 and xsa-last2,rung=d2,train.seed=1 resolve to the same " \
           "run config at this rung, though they differ at others" in proc.stderr, proc.stderr
    assert "grid:" not in proc.stderr


def test_a_dry_run_at_an_absurd_mfu_prints_times_of_bounded_width(tmp_path, shards, xsagpt):
    spec = ladder_spec(tmp_path, shards, ladder={"estimate": {"device": "H100", "mfu": 1e-300}})
    dry = xsagpt("sweep", "-c", spec, "--dry-run").stdout
    # Before: every time in fixed point, 300-digit day counts on 650-character lines.
    assert "e+" in dry and " days" in dry
    assert max(len(line) for line in dry.splitlines()) < 300, max(dry.splitlines(), key=len)


def test_a_ladder_whose_every_point_failed_says_so_in_words(tmp_path, shards, xsagpt):
    spec = ladder_spec(tmp_path, shards, seeds=(1,))
    data = json.loads(spec.read_text())
    data["set"] = [f"data.train={tmp_path / 'missing' / 'train_*.bin'}"]
    spec.write_text(json.dumps(data))
    run = xsagpt("sweep", "-c", spec, "--no-plot", check=False)
    assert run.returncode == 1
    ladder = json.loads((tmp_path / "sweep" / "summary.json").read_text())["ladder"]
    assert len(ladder["left_out"]) == 4 and not ladder["observations"]
    assert ladder["analysis"]["bootstrap"] == {"none": "no finished point: no interval"}
    # Before: "E rule: none (...). Seeds: 0. Intervals: none, one seed: no interval." and a table of dashes.
    assert "No point of the ladder finished with a usable result: nothing to fit or compare" in run.stdout
    assert "Seeds: 0" not in run.stdout and "one seed" not in run.stdout
    report = (tmp_path / "sweep" / "report.md").read_text()
    assert "No point of the ladder finished" in report and "Seeds: 0" not in report


def test_no_extrapolation_past_a_decade_unless_asked(tmp_path, shards, xsagpt):
    spec = ladder_spec(tmp_path, shards)
    xsagpt("sweep", "-c", spec, "--no-plot")
    summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    analysis = summary["ladder"]["analysis"]
    assert analysis["extrapolate_decades"] == 1 and summary["ladder"]["rules"]["extrapolate_decades"] == 1
    report = (tmp_path / "sweep" / "report.md").read_text()
    for t in analysis["extrapolation"]["xsa"]:
        # Before: "xsa 3.19e+08x [1.07e+08, 9.54e+08] at paper-0.7b", nine decades past the ladder.
        assert t["decades_past_ladder"] > 5
        assert t["multiplier"] is None and t["trend_multiplier"] is None and t["ci95"] is None
        why = f"{t['decades_past_ladder']:.1f} decades past the ladder, beyond the 1 decade its data are taken to carry"
        assert t["why"].startswith(why) and f"xsa at {t['name']}: {why}" in report
    # Every point trained once: the time per step of each run is the median over its train records of the
    # interval from the record before (a train record, or an evaluation's, written once it has finished).
    for o in summary["ladder"]["observations"]:
        lines = [json.loads(x) for x in (tmp_path / "sweep" / o["point"] / "metrics.jsonl").read_text().splitlines()]
        marks = [(r["step"], r["time_s"], "train_loss" in r and r.get("val_loss") is None) for r in lines]
        per_step = [(t1 - t0) / (s1 - s0) for (s0, t0, _), (s1, t1, train) in zip(marks, marks[1:])
                    if train and s1 > s0 and t1 > t0]
        assert per_step and o["step_time_s"] == pytest.approx(float(np.median(per_step)), rel=1e-12)
    # The multiplier in time: the compute one times the geometric mean of xsa's step time over sa's, seed by seed.
    step = {(o["variant"], o["rung"], o["seed"]): o["step_time_s"] for o in summary["ladder"]["observations"]}
    for i, r in enumerate(analysis["rungs"]):
        x, rung = r["variants"]["xsa"], f"d{i + 1}"
        ratio = math.exp(np.mean([math.log(step["xsa", rung, s] / step["sa", rung, s]) for s in (1, 2)]))
        assert x["step_time_pairs"] == 2 and x["step_time_ratio"] == pytest.approx(ratio, rel=1e-12)
        if x["multiplier"] is not None:
            assert x["time_multiplier"] == pytest.approx(x["multiplier"] * ratio, rel=1e-12)
    # The grid's comparison at each rung gives the same step-time ratio: one step time, one pooling.
    # Before, the grid's took (last - first train record) / steps, mean over seeds.
    grid = [c for c in summary["comparisons"] if c["variant"] == "xsa"]
    assert len(grid) == len(analysis["rungs"]) == 2
    for c, r in zip(grid, analysis["rungs"]):
        assert c["step_time_ratio"]["n"] == 2
        assert c["step_time_ratio"]["geomean"] == pytest.approx(r["variants"]["xsa"]["step_time_ratio"], rel=1e-12)
    assert f"| xsa | {grid[0]['step_time_ratio']['geomean']:.3f} |" in report


def test_each_extrapolation_says_how_far_and_whether_its_fits_had_freedom(tmp_path, shards, xsagpt):
    # 2 rungs: E = 0, two parameters through two computes; the sweep asks for 20 decades.
    spec = ladder_spec(tmp_path, shards, ladder={"extrapolate_decades": 20})
    run = xsagpt("sweep", "-c", spec, "--no-plot")
    analysis = json.loads((tmp_path / "sweep" / "summary.json").read_text())["ladder"]["analysis"]
    # Two-step runs need not fall with compute, so a fit may fail; each one made says it had no freedom.
    fitted = all("alpha" in f for f in analysis["fits"].values())
    for f in analysis["fits"].values():
        if "alpha" in f:
            assert (f["computes"], f["parameters"], f["residual_freedom"]) == (2, 2, False)
    top = analysis["rungs"][1]["variants"]["xsa"]["compute"]
    targets = analysis["extrapolation"]["xsa"]
    assert [t["name"] for t in targets] == ["paper-0.7b", "paper-1.4b", "paper-2.7b"]
    for t in targets:
        # Before: neither field existed.
        assert t["decades_past_ladder"] == pytest.approx(math.log10(t["compute"] / top), rel=1e-9)
        assert t["decades_past_ladder"] > 5 and t["residual_freedom"] is (False if fitted else None)
        if t["multiplier"] is not None:
            words = f"{t['decades_past_ladder']:.1f} decades past the ladder, exact fits (no residual freedom)"
            assert words in run.stdout
            assert words in (tmp_path / "sweep" / "report.md").read_text()
            assert re.search(r"\dx\? (\(no interval\)|\[[^]]*\]); trend \S+x\? ", run.stdout)  # flagged
    if fitted:
        assert "2 - 2 = 0 (exact)" in run.stdout
