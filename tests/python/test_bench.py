"""`xsagpt bench` on a tiny CPU grid: it runs every variant at every grid point and
the training step, writes JSON whose ratios follow from its own timings, and names
bad arguments. No timing assertions: CPU timings on a shared machine are noise."""
import json

import pytest


def test_tiny_grid_writes_json(tmp_path, xsagpt):
    model = tmp_path / "m.json"
    model.write_text(json.dumps({"vocab_size": 256, "block_size": 32, "n_layer": 1, "d_model": 32, "n_head": 2,
                                 "head_dim": 16}))
    out = tmp_path / "bench.json"
    proc = xsagpt("bench", "--device", "cpu", "--seq-lens", "16,32", "--widths", "32", "--head-dim", 16,
                  "--batch", 2, "--warmup", 0, "--iters", 2, "--step-config", model, "--step-batch", 2,
                  "--step-seq-len", 16, "--threads", 1, "--json", out)
    data = json.loads(out.read_text())
    assert data["device"] == "cpu" and data["dtype"] == "fp32" and data["batch"] == 2
    assert data["variants"] == ["sa", "xsa", "xsa-autograd"]
    assert [(b["seq_len"], b["d_model"], b["n_head"]) for b in data["block"]] == [(16, 32, 2), (32, 32, 2)]
    for point in data["block"] + [data["step"]]:
        res = point["results"]
        assert set(res) == {"sa", "xsa", "xsa-autograd"}
        for r in res.values():
            assert r["median_ms"] >= r["min_ms"] > 0 and r["peak_bytes"] > 0
        for v in ("xsa", "xsa-autograd"):
            assert point["ratios"][v]["time"] == pytest.approx(res[v]["median_ms"] / res["sa"]["median_ms"])
            assert point["ratios"][v]["memory"] == pytest.approx(res[v]["peak_bytes"] / res["sa"]["peak_bytes"])
        # CPU byte counts are exact: the custom XSA function keeps less than ordinary ops.
        assert res["xsa"]["peak_bytes"] < res["xsa-autograd"]["peak_bytes"]
    assert data["step"]["micro_batch"] == 2 and data["step"]["model"]["n_layer"] == 1
    lines = proc.stdout.splitlines()
    assert any(l.split()[:2] == ["16", "32"] for l in lines) and any(l.split()[:2] == ["32", "32"] for l in lines)


@pytest.mark.parametrize("args,message", [
    (["--widths", "30", "--head-dim", "16"], "--widths"),
    (["--variants", "sa,flash"], "flash"),
    (["--seq-lens", "16,x"], "--seq-lens"),
    (["--dtype", "fp8"], "--dtype"),
])
def test_bad_arguments_are_named(xsagpt, args, message):
    proc = xsagpt("bench", "--device", "cpu", "--no-step", *args, check=False)
    assert proc.returncode == 2 and message in proc.stderr
