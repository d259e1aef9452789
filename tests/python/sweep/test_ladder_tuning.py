"""A ladder that tunes each variant once (ladder.tune_rungs, sweep/ladder_tuning.h), end to end
on the CPU: a 3-rung ladder of 2-step runs tunes at d1-d2 only. The dry run lists the larger
rung as waiting and prices the ladder against tuning at every rung (the FLOP ratio checked
against the reference formulas of test_ladder.py); the sweep runs the tuning rungs, then each
variant's d3 at the multiplier with the lowest mean final val loss over its tuning points
(recomputed here from the points' own losses); a winner at the edge adds the tuning rungs at
one multiplier past it (tune_past_edge); the summary and report say where each rate came
from, by μP for a variant under model.parametrization "mup", by the rate rule (with a
warning) for the others."""
import json

import pytest

from test_ladder import STEP_TOKENS, flops_per_token, ladder_spec

MULTS = [0.03, 0.3]  # at 2 steps the larger wins: a winner at the edge, so the sweep tries 3 past it


def tuning_spec(tmp_path, shards, **ladder):
    spec = ladder_spec(tmp_path, shards, rungs=(1, 2, 3), seeds=(1,),
                       ladder={"lr_multipliers": MULTS, "tune_rungs": 2, **ladder})
    s = json.loads(spec.read_text())
    s["variants"]["sa-mup"] = {"model.attention": "sa", "model.parametrization": "mup", "model.mup_base_width": 32}
    spec.write_text(json.dumps(s))
    return spec


def test_the_dry_run_prices_tuning_once_against_tuning_at_every_rung(tmp_path, shards, xsagpt):
    dry = xsagpt("sweep", "-c", tuning_spec(tmp_path, shards), "--dry-run").stdout
    # 3 variants x 2 multipliers x d1-d2, then d3 once per variant, waiting for its rate.
    assert "total: 15 points (3 wait for the tuning rungs' rate)" in dry
    assert dry.count(",rung=d3,lr_mult=tuned,") == 3
    f = [2 * STEP_TOKENS * flops_per_token(L, 32 * L) for L in (1, 2, 3)]
    ratio = 2 * sum(f) / (2 * (f[0] + f[1]) + f[2])
    assert ratio > 1.2  # the case is real: tuning everywhere costs more
    line = next(l for l in dry.splitlines() if l.startswith("tuning at the 2 smallest rung(s)"))
    assert "tuning at every rung instead: 18 points" in line
    assert f"({ratio:.2g}x the FLOPs)" in line
    assert "sa-mup" in dry and "carried by μP" in dry
    assert not (tmp_path / "sweep").exists()


def test_each_variant_is_tuned_once_and_carried_with_its_origin(tmp_path, shards, xsagpt):
    spec = tuning_spec(tmp_path, shards, tune_past_edge=True)
    run = xsagpt("sweep", "-c", spec, "--no-plot")
    assert "by the ladder's rate rule" in run.stderr and "sa, xsa:" in run.stderr  # the warning, not for sa-mup
    summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    losses = {}
    for p in summary["points"]:
        assert p["status"] == "done", p
        losses.setdefault((p["variant"], p["values"]["rung"]), {})[p["values"]["lr_mult"]] = p["final_val_loss"]
    tuning = summary["ladder"]["tuning"]
    for v in ("sa", "xsa", "sa-mup"):
        t = tuning[v]
        tuned = {m: (losses[(v, "d1")][m] + losses[(v, "d2")][m]) / 2 for m in losses[(v, "d1")]}
        base = {m: tuned[m] for m in MULTS}
        assert len(set(base.values())) == 2  # the rates give different losses: a choice to make
        best = min(base, key=base.get)
        # Past the edge: the tuning rungs at one more multiplier beyond the winner, 3 or 0.003.
        past = {0.3: 3.0, 0.03: 0.003}[best]
        assert t["past_edge"] == pytest.approx(past)
        assert set(losses[(v, "d1")]) == set(losses[(v, "d2")]) == {*MULTS, t["past_edge"]}
        assert t["lr_mult"] == min(tuned, key=tuned.get)
        assert t["at_edge"] == (t["lr_mult"] == t["past_edge"])
        assert t["tuned_at"] == ["d1", "d2"]
        assert {c["lr_mult"]: c["mean_final_val_loss"] for c in t["candidates"]} == pytest.approx(tuned)
        # d3 runs once, at the tuned multiplier and the rule's rate times it.
        assert list(losses[(v, "d3")]) == [t["lr_mult"]]
        d3 = next(c for c in summary["ladder"]["lr_choice"][v] if c["rung"] == "d3")
        rule = next(r for r in summary["ladder"]["rungs"] if r["name"] == "d3")["lr"]
        assert d3["lr"] == pytest.approx(rule * t["lr_mult"]) and d3["origin"] == t["origin"]
        carried = "μP" if v == "sa-mup" else "the rate rule, which was not shown to transfer"
        assert t["carried_by"] == ("mup" if v == "sa-mup" else "rate rule")
        assert t["origin"] == f"tuned at d1-d2 (x{t['lr_mult']:g}{', at the edge of those tried' if t['at_edge'] else ''})" \
                              f", carried by {carried}"
    # The fit sees each variant at d3 once per seed.
    assert sum(o["rung"] == "d3" for o in summary["ladder"]["observations"]) == 3
    report = (tmp_path / "sweep" / "report.md").read_text()
    assert "sa-mup: the larger rungs' rate tuned at d1-d2" in report and "tuned)" in report

    # A rerun finds every point done, the carried ones included: nothing trains again.
    again = xsagpt("sweep", "-c", spec, "--no-plot")
    assert again.stderr.count("finished, skipping") == len(summary["points"]) == 21
    assert "waiting" not in xsagpt("sweep", "-c", spec, "--status").stdout
