"""A ladder's several data ratios per rung (sweep/ladder_budgets.h, sweep/branch.h), end to
end on the CPU: each rung trains one wsd run at its longest budget, and each shorter budget
is a branch of it that starts from its checkpoint at the branch's decay start. A branch's
final loss (and every line of its history) equals, bit for bit, a standalone run of the
config its config.json records; branches are points in the summary, --point, --status, the
dry run (priced beside each ratio as its own run) and with two processes on one sweep
directory; a source that failed leaves its branches pending, named with what they wait for."""
import json
import re
import subprocess

import pytest

from ladderspec import STEP_TOKENS, flops_per_token, ladder_spec, params
from tinyrun import metrics, snapshot

RATIOS = (0.04, 0.1)
DECAY = 0.25
LOGGED = ("train_loss", "val_loss", "grad_norm", "lr", "tokens")
# Each rung's budgets (llround(ratio x params / 128 tokens per step)) and where each decays:
# step - round(0.25 x steps); the shorter budget branches off the longer's run there.
STEPS = {"d1": (9, 23), "d2": (41, 103)}
BRANCH = {"d1": (7, 17), "d2": (31, 77)}


def ratio_spec(tmp_path, shards, lr=None, out="sweep"):
    spec = ladder_spec(tmp_path, shards, seeds=(1,), lr=lr, ladder={"tokens": {"per_param": list(RATIOS)}},
                       set=["train.schedule=wsd", f"train.decay_fraction={DECAY}"])
    data = json.loads(spec.read_text())
    data["out_dir"] = str(tmp_path / out)
    spec.write_text(json.dumps(data))
    return spec


def name(variant, rung, ratio):
    return f"{variant},rung={rung},ratio={float(ratio)},train.seed=1"


@pytest.fixture(scope="module")
def ladder(tmp_path_factory, shards, xsagpt):
    tmp = tmp_path_factory.mktemp("ratios")
    spec = ratio_spec(tmp, shards)
    run = xsagpt("sweep", "-c", spec, "--no-plot")
    return tmp, spec, run


def test_the_steps_and_branch_points_are_the_stated_rules(ladder):
    for L, d in ((1, 32), (2, 64)):
        steps = tuple(int(r * params(L, d) / STEP_TOKENS + 0.5) for r in RATIOS)
        assert steps == STEPS[f"d{L}"]
        assert tuple(s - int(DECAY * s + 0.5) for s in steps) == BRANCH[f"d{L}"]


def test_a_branch_ends_bit_for_bit_where_its_recorded_run_from_scratch_ends(ladder, xsagpt):
    tmp, _, _ = ladder
    sweep = tmp / "sweep"
    for variant in ("sa", "xsa"):
        for rung in ("d1", "d2"):
            branch, source = sweep / name(variant, rung, RATIOS[0]), sweep / name(variant, rung, RATIOS[1])
            config = json.loads((branch / "config.json").read_text())
            t = config["train"]
            # The run it equals, recorded: its steps, warmup, decay and rate.
            assert (t["max_steps"], t["schedule"], t["decay_fraction"]) == (STEPS[rung][0], "wsd", DECAY)
            assert t["warmup_steps"] == json.loads((source / "config.json").read_text())["train"]["warmup_steps"]
            assert t["lr"] == json.loads((source / "config.json").read_text())["train"]["lr"]
            assert t["ckpt_steps"] == [] and json.loads((source / "config.json").read_text())["train"]["ckpt_steps"] \
                == [BRANCH[rung][0]]
            record = json.loads((branch / "run.json").read_text())["branched_from"]
            assert record["step"] == BRANCH[rung][0] and record["run"] == str(source)
            assert (source / "checkpoints" / f"step_{BRANCH[rung][0]:08d}.pt").exists()  # kept past keep_checkpoints
            alone = tmp / f"alone-{variant}-{rung}"
            xsagpt("train", "-c", branch / "config.json", "--out", alone)
            for logged in LOGGED:
                assert metrics(branch, logged) == metrics(alone, logged), (variant, rung, logged)
            done, done_alone = (json.loads((d / "done.json").read_text()) for d in (branch, alone))
            assert (done["final_train_loss"], done["final_val_loss"]) == (
                done_alone["final_train_loss"], done_alone["final_val_loss"])
            # Non-trivial: the branch decayed where its source kept the peak rate (and d2's 10 steps
            # of decay moved its loss off the source's).
            end = STEPS[rung][0]
            assert metrics(branch, "lr")[end] < metrics(source, "lr")[end]
            assert (metrics(branch)[end] != metrics(source)[end]) == (rung == "d2")


def test_each_ratio_is_a_point_and_a_fit_across_rungs(ladder):
    tmp, _, run = ladder
    summary = json.loads((tmp / "sweep" / "summary.json").read_text())
    assert {p["name"] for p in summary["points"]} == {
        name(v, r, x) for v in ("sa", "xsa") for r in ("d1", "d2") for x in RATIOS}
    assert all(p["status"] == "done" for p in summary["points"])
    assert {c["values"]["ratio"] for c in summary["comparisons"]} == set(RATIOS)  # compared per ratio
    ladder_section = summary["ladder"]
    assert [r["ratio"] for r in ladder_section["ratios"]] == list(RATIOS)
    for ratio in ladder_section["ratios"]:
        k = RATIOS.index(ratio["ratio"])
        obs = ratio["observations"]
        assert len(obs) == 4 and not ratio["left_out"]
        for o in obs:
            L = int(o["rung"][1:])
            assert o["compute"] == pytest.approx(flops_per_token(L, 32 * L) * STEPS[o["rung"]][k] * STEP_TOKENS)
        assert set(ratio["analysis"]["fits"]) == {"sa", "xsa"}
    assert ladder_section["ratio"] == RATIOS[-1] and ladder_section["analysis"] == ladder_section["ratios"][-1]["analysis"]
    assert [b["branch_step"] for b in ladder_section["rungs"][1]["budgets"]] == list(BRANCH["d2"])
    assert "Multiplier at each data ratio" in run.stdout


def test_the_dry_run_prices_branches_beside_each_ratio_from_scratch(tmp_path, shards, xsagpt):
    dry = xsagpt("sweep", "-c", ratio_spec(tmp_path, shards), "--dry-run").stdout
    branched = scratch = 0.0
    for L in (1, 2):
        fpt = flops_per_token(L, 32 * L) * STEP_TOKENS
        (short, long), (start, _) = STEPS[f"d{L}"], BRANCH[f"d{L}"]
        branched += 2 * fpt * (long + short - start)  # two variants: the longest run and the short one's decay
        scratch += 2 * fpt * (long + short)
    total = float(re.search(r"total: 8 points, (\S+) training FLOPs", dry).group(1))
    alone = float(re.search(r"each data ratio its own run from scratch instead of a branch: (\S+) training FLOPs",
                            dry).group(1))
    assert total == pytest.approx(branched, rel=5e-3) and alone == pytest.approx(scratch, rel=5e-3)
    assert f"the branches save {100 * (1 - branched / scratch):.0f}%" in dry
    assert "(a branch from step 31)" in dry and "ratio 0.04: 1152 tokens, 9 steps, decay from step 7" in dry


def test_a_branch_waits_for_its_checkpoint_by_name_then_runs_as_a_point(tmp_path, shards, xsagpt, ladder):
    spec = ratio_spec(tmp_path, shards)
    order = [line.split()[0] for line in xsagpt("sweep", "-c", spec, "--dry-run").stdout.splitlines()
             if line.startswith("  ") and ",rung=" in line.split()[0]][:8]
    branch, source = order.index(name("sa", "d1", RATIOS[0])), order.index(name("sa", "d1", RATIOS[1]))
    assert source < branch  # the run its branches start from comes first
    ckpt = tmp_path / "sweep" / name("sa", "d1", RATIOS[1]) / "checkpoints" / "step_00000007.pt"
    first = xsagpt("sweep", "-c", spec, "--point", branch, check=False)
    assert first.returncode == 1 and f"waits for {ckpt}" in first.stderr, first.stderr
    assert not (tmp_path / "sweep" / name("sa", "d1", RATIOS[0])).exists()
    status = xsagpt("sweep", "-c", spec, "--status").stdout
    assert re.search(rf"{branch} pending +{re.escape(name('sa', 'd1', RATIOS[0]))}  waits for {re.escape(str(ckpt))}",
                     status), status
    xsagpt("sweep", "-c", spec, "--point", source)
    assert "not started; branches from " + str(ckpt) in xsagpt("sweep", "-c", spec, "--status").stdout
    before = snapshot(ckpt.parent.parent)
    xsagpt("sweep", "-c", spec, "--point", branch)
    assert snapshot(ckpt.parent.parent) == before  # the branch only read its source's files
    done = json.loads((tmp_path / "sweep" / name("sa", "d1", RATIOS[0]) / "done.json").read_text())
    serial = json.loads((ladder[0] / "sweep" / name("sa", "d1", RATIOS[0]) / "done.json").read_text())
    assert done["final_val_loss"] == serial["final_val_loss"]


def test_two_processes_on_one_sweep_directory_finish_every_branch(tmp_path, shards, xsagpt, build_dir, ladder):
    spec = ratio_spec(tmp_path, shards)
    procs = [subprocess.Popen([build_dir / "xsagpt", "sweep", "-c", spec, "--no-plot"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        p.communicate(timeout=500)
    status = xsagpt("sweep", "-c", spec, "--status").stdout
    assert "8 point(s): 8 done" in status, status + "".join(p.stderr for p in procs)
    for v in ("sa", "xsa"):
        for r in ("d1", "d2"):
            for x in RATIOS:
                ours, serial = (json.loads((d / name(v, r, x) / "done.json").read_text())["final_val_loss"]
                                for d in (tmp_path / "sweep", ladder[0] / "sweep"))
                assert ours == serial


def test_a_failed_source_leaves_its_branches_pending_by_name(tmp_path, shards, xsagpt):
    spec = ratio_spec(tmp_path, shards, lr={"per_rung": [1e-2, 1e30]})  # d2's runs diverge
    run = xsagpt("sweep", "-c", spec, "--no-plot", check=False)
    assert run.returncode == 1
    assert "are branches that did not start" in run.stderr and name("sa", "d2", RATIOS[0]) in run.stderr
    status = xsagpt("sweep", "-c", spec, "--status").stdout
    for v in ("sa", "xsa"):
        line = next(l for l in status.splitlines() if name(v, "d2", RATIOS[0]) in l)
        assert " pending " in line and f"of {name(v, 'd2', RATIOS[1])} (failed: " in line, line
        assert not (tmp_path / "sweep" / name(v, "d2", RATIOS[0])).exists()
    left = json.loads((tmp_path / "sweep" / "summary.json").read_text())["ladder"]["ratios"][0]["left_out"]
    assert {x["point"] for x in left} == {name(v, "d2", RATIOS[0]) for v in ("sa", "xsa")}
    assert all(x["why"].startswith("pending") for x in left)
