"""`xsagpt bench --profile` on a CPU: the training step's CPU op self time by op and
by category, in the table and the JSON. The categories add up to the total, the
ops a model step must run are there (GEMMs, the fused AdamW), and each variant is
profiled as itself. No timing assertions: CPU timings on a shared machine are noise."""
import json
from collections import defaultdict

import pytest

CATEGORIES = {"gemm", "quantize", "attention", "norm", "elementwise", "optimizer", "copies", "other"}


def test_profile_categories_sum_to_the_total(tmp_path, xsagpt):
    out = tmp_path / "profile.json"
    proc = xsagpt("bench", "--device", "cpu", "--no-block", "--profile", "--step-config", "tiny", "--step-batch", 2,
                  "--step-seq-len", 64, "--variants", "xsa", "--json", out)
    data = json.loads(out.read_text())
    assert "step" in data  # --profile comes after the timed step unless --no-step
    profile = data["profile"]
    assert (profile["config"], profile["micro_batch"], profile["seq_len"]) == ("tiny", 2, 64)
    p = profile["results"]["xsa"]
    assert p["steps"] == 3 and p["measure"] == "self time of CPU ops"
    cats = p["categories"]
    assert set(cats) == CATEGORIES
    assert p["total_ms"] > 0 and p["wall_ms"] > 0
    assert sum(cats.values()) == pytest.approx(p["total_ms"], rel=0.01)
    assert cats["gemm"] > 0 and cats["optimizer"] > 0
    assert sum(v > 0 for v in cats.values()) >= 4
    # Every op of the step is listed once, with its category: the per-op times add up
    # to each category's and to the total.
    names = [k["name"] for k in p["kernels"]]
    assert len(names) == len(set(names))
    by_cat = defaultdict(float)
    for k in p["kernels"]:
        assert k["category"] in CATEGORIES and k["ms"] >= 0 and k["calls"] > 0
        by_cat[k["category"]] += k["ms"]
    for c in CATEGORIES:
        assert by_cat[c] == pytest.approx(cats[c], rel=1e-9, abs=1e-12)
    assert [k["ms"] for k in p["kernels"]] == sorted((k["ms"] for k in p["kernels"]), reverse=True)
    ops = {k["name"]: k for k in p["kernels"]}
    assert ops["aten::_fused_adamw_"]["category"] == "optimizer"
    assert ops["aten::addmm" if "aten::addmm" in ops else "aten::mm"]["category"] == "gemm"
    # tiny has 4 layers: each step runs at least 4 attention blocks' worth of GEMMs.
    assert sum(k["calls"] for k in p["kernels"] if k["name"] in ("aten::mm", "aten::addmm")) >= 4 * 4
    assert "profile of the training step of tiny (2x64), xsa" in proc.stdout
    assert any(line.split()[:1] == ["total"] for line in proc.stdout.splitlines())


def test_profile_without_the_timed_step_profiles_each_variant(tmp_path, xsagpt):
    model = tmp_path / "m.json"
    model.write_text(json.dumps({"vocab_size": 256, "block_size": 32, "n_layer": 2, "d_model": 32, "n_head": 2,
                                 "head_dim": 16}))
    out = tmp_path / "profile.json"
    xsagpt("bench", "--device", "cpu", "--no-block", "--no-step", "--profile", "--profile-steps", 2,
           "--variants", "sa,xsa", "--warmup", 1, "--step-config", model, "--step-batch", 2, "--step-seq-len", 32,
           "--threads", 1, "--json", out)
    data = json.loads(out.read_text())
    assert "step" not in data
    results = data["profile"]["results"]
    assert set(results) == {"sa", "xsa"}
    for p in results.values():
        assert p["steps"] == 2
        assert sum(p["categories"].values()) == pytest.approx(p["total_ms"], rel=0.01)
    # XSA's custom autograd function runs in the xsa step only; it counts as attention.
    xsa_ops = [k for k in results["xsa"]["kernels"] if "ExcludeSelfValue" in k["name"]]
    assert xsa_ops and all(k["category"] == "attention" for k in xsa_ops)
    assert not [k for k in results["sa"]["kernels"] if "ExcludeSelfValue" in k["name"]]
    # Two layers, one micro-batch: each step runs each layer's XSA backward once.
    assert max(k["calls"] for k in xsa_ops) == 2


@pytest.mark.parametrize("args,message", [
    (["--profile", "--profile-steps", "0"], "--profile-steps"),
    (["--profile", "--micro", "tiny:2x16"], "--profile"),
])
def test_bad_profile_arguments_are_named(xsagpt, args, message):
    proc = xsagpt("bench", "--device", "cpu", "--no-step", *args, check=False)
    assert proc.returncode == 2 and message in proc.stderr
