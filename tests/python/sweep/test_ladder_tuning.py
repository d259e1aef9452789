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
import os
import re
import time

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
    # Its steps are timed at the one thread its points train with (tinyrun's train.threads).
    assert re.search(r"3 training steps of each rung's sa model on [^\n]*\(1 torch threads of", dry), dry
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


RATIOS = (0.01, 0.03)  # d1: 2 and 7 steps, d2: 10 and 31 (its shorter one decays from step 10 - round(2.5) = 7)


def ratios_spec(tmp_path, shards):
    return ladder_spec(tmp_path, shards, rungs=(1, 2), seeds=(1,), set=["train.schedule=wsd", "train.decay_fraction=0.25"],
                       ladder={"lr_multipliers": MULTS, "tune_rungs": 1, "tokens": {"per_param": list(RATIOS)}})


def test_with_several_data_ratios_the_longest_ratio_tunes_and_its_branches_share_the_rate(tmp_path, shards, xsagpt):
    spec = ratios_spec(tmp_path, shards)
    dry = xsagpt("sweep", "-c", spec, "--dry-run").stdout
    # d1 at every multiplier and ratio; d2 at both ratios once per variant, its shorter ratio a branch.
    assert "total: 12 points (4 wait for the tuning rungs' rate)" in dry
    waiting = [l for l in dry.splitlines() if ",rung=d2," in l]
    assert [l.split()[0] for l in waiting] == [f"{v},rung=d2,ratio={r},lr_mult=tuned,train.seed=1"
                                               for r in (0.03, 0.01) for v in ("sa", "xsa")]
    assert [l.endswith("(a branch from step 7)") for l in waiting] == [False, False, True, True]
    xsagpt("sweep", "-c", spec, "--no-plot")
    summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    assert all(p["status"] == "done" for p in summary["points"])
    loss = {(p["variant"], p["values"]["rung"], p["values"]["ratio"], p["values"]["lr_mult"]): p["final_val_loss"]
            for p in summary["points"]}
    for v in ("sa", "xsa"):
        longest = {m: loss[(v, "d1", RATIOS[1], m)] for m in MULTS}
        assert longest[MULTS[0]] != longest[MULTS[1]]  # a choice to make
        t = summary["ladder"]["tuning"][v]
        # Chosen by the longest ratio's losses alone, not a mean over the ratios.
        assert {c["lr_mult"]: c["mean_final_val_loss"] for c in t["candidates"]} == longest
        assert t["lr_mult"] == min(longest, key=longest.get)
        # d2 runs both ratios at that multiplier, the shorter a branch of the longer at its rate.
        d2 = {r: tmp_path / "sweep" / f"{v},rung=d2,ratio={r},lr_mult={t['lr_mult']},train.seed=1" for r in RATIOS}
        assert {k[2] for k in loss if k[:2] == (v, "d2")} == set(RATIOS)
        assert {k[3] for k in loss if k[:2] == (v, "d2")} == {t["lr_mult"]}
        branched = json.loads((d2[RATIOS[0]] / "run.json").read_text())["branched_from"]
        assert branched["run"] == str(d2[RATIOS[1]]) and branched["step"] == 7
        lrs = [json.loads((d / "config.json").read_text())["train"]["lr"] for d in d2.values()]
        assert lrs[0] == lrs[1]
    for ratio in summary["ladder"]["ratios"]:
        assert {o["rung"] for o in ratio["observations"]} == {"d1", "d2"} and not ratio["left_out"]


def test_a_sweep_waits_for_a_tuning_point_that_another_process_trains(tmp_path, shards, xsagpt, spawn):
    """The process that runs out of tuning points while another still trains one waits for
    the rate it settles and goes on with the larger rung, rather than leaving it to the other."""
    spec = ladder_spec(tmp_path, shards, rungs=(1, 2), seeds=(1,), ladder={"lr_multipliers": MULTS, "tune_rungs": 1})
    held = "sa,rung=d1,lr_mult=0.3,train.seed=1"
    lock_dir = tmp_path / "sweep" / ".locks" / held
    lock_dir.mkdir(parents=True)
    # Another machine's process holds it, beating a moment ago.
    holder = {"host": "node-b", "pid": 31337, "job": "812_1", "token": "x", "since": "2026-01-01T00:00:00Z",
              "heartbeat": time.time(), "released": False}
    (lock_dir / "000000000001.json").write_text(json.dumps(holder))
    env = dict(os.environ, XSAGPT_POINT_LOCK_STALE_S="600")
    sweep = spawn("sweep", "-c", spec, "--no-plot", env=env)
    others = [tmp_path / "sweep" / f"{v},rung=d1,lr_mult={m},train.seed=1" / "done.json"
              for v in ("sa", "xsa") for m in MULTS if (v, m) != ("sa", 0.3)]
    t0 = time.time()
    while not all(f.exists() for f in others):
        assert sweep.poll() is None and time.time() - t0 < 120, sweep.communicate()
        time.sleep(0.05)
    time.sleep(1)
    assert sweep.poll() is None, sweep.communicate()  # it waits for sa's last tuning point
    (lock_dir / "000000000001.json").unlink()  # the other machine's process, here: it trains the point
    xsagpt("sweep", "-c", spec, "--point", held, env=env)
    _, err = sweep.communicate(timeout=120)
    assert "wait for its rate" not in err, err
    assert "2 point(s) held by another process" not in err
    t = json.loads((tmp_path / "sweep" / "summary.json").read_text())["ladder"]["tuning"]["sa"]
    assert (tmp_path / "sweep" / f"sa,rung=d2,lr_mult={t['lr_mult']},train.seed=1" / "done.json").exists()
    assert "6 point(s): 6 done" in xsagpt("sweep", "-c", spec, "--status").stdout
