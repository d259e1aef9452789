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
    step = data["step"]
    assert step["recompute"] == "none" and step["loss_chunk"] == 0
    for r in step["results"].values():  # throughput follows from the step time; no MFU without a GPU peak
        assert r["tokens_per_s"] == pytest.approx(2 * 16 / (r["median_ms"] / 1e3)) and r["mfu"] is None
    # The memory estimate `xsagpt info` prints bounds the measured step (CPU bytes are exact).
    assert 0.5 * step["estimated_peak_bytes"] < step["results"]["xsa"]["peak_bytes"] <= step["estimated_peak_bytes"]
    lines = proc.stdout.splitlines()
    assert any(l.split()[:2] == ["16", "32"] for l in lines) and any(l.split()[:2] == ["32", "32"] for l in lines)


def test_step_with_checkpointing_and_chunked_loss_uses_less_memory(tmp_path, xsagpt):
    model = tmp_path / "m.json"
    model.write_text(json.dumps({"vocab_size": 512, "block_size": 64, "n_layer": 3, "d_model": 64, "n_head": 2,
                                 "head_dim": 32}))
    peaks = {}
    for recompute, chunk in (("none", 0), ("block", 32)):
        out = tmp_path / f"{recompute}.json"
        xsagpt("bench", "--device", "cpu", "--no-block", "--variants", "xsa", "--warmup", 0, "--iters", 1,
               "--step-config", model, "--step-batch", 4, "--step-seq-len", 64, "--threads", 1,
               "--step-recompute", recompute, "--step-loss-chunk", chunk, "--json", out)
        step = json.loads(out.read_text())["step"]
        assert step["recompute"] == recompute and step["loss_chunk"] == chunk
        peaks[recompute] = step["results"]["xsa"]["peak_bytes"]
        assert peaks[recompute] <= step["estimated_peak_bytes"]
    assert peaks["block"] < 0.6 * peaks["none"]


@pytest.mark.parametrize("args,message", [
    (["--widths", "30", "--head-dim", "16"], "--widths"),
    (["--variants", "sa,flash"], "flash"),
    (["--seq-lens", "16,x"], "--seq-lens"),
    (["--dtype", "fp8"], "--dtype"),
    (["--step-recompute", "attn"], "--step-recompute"),
    (["--variants", "sa,xsa-fused"], "xsa-fused"),  # CUDA only, and these run with --device cpu
    (["--step-loss-chunk", "-1"], "--step-loss-chunk"),
])
def test_bad_arguments_are_named(xsagpt, args, message):
    proc = xsagpt("bench", "--device", "cpu", "--no-step", *args, check=False)
    assert proc.returncode == 2 and message in proc.stderr


def test_compare_table_matches_both_benchmarks(tmp_path, xsagpt, repo_root):
    """scripts/bench_compare.py joins xsagpt's step results with bench_pytorch.py's
    by config, batch and length, and its ratios follow from the two JSON outputs."""
    import subprocess
    import sys
    model = tmp_path / "m.json"
    model.write_text(json.dumps({"vocab_size": 256, "block_size": 32, "n_layer": 1, "d_model": 32, "n_head": 2,
                                 "head_dim": 16}))
    ours = tmp_path / "step.json"
    xsagpt("bench", "--device", "cpu", "--no-block", "--variants", "sa,xsa", "--warmup", 0, "--iters", 2,
           "--step-config", model, "--step-batch", 2, "--step-seq-len", 16, "--threads", 1, "--json", ours)
    theirs = tmp_path / "pytorch.jsonl"
    for attention in ("sa", "xsa"):
        proc = subprocess.run([sys.executable, repo_root / "scripts" / "bench_pytorch.py", "--config", str(model),
                               "-b", "2", "-t", "16", "--steps", "2", "--warmup", "1", "--attention", attention,
                               "--device", "cpu"],
                              capture_output=True, text=True, check=True)
        with theirs.open("a") as f:
            f.write(proc.stdout)
    proc = subprocess.run([sys.executable, repo_root / "scripts" / "bench_compare.py", ours, "--pytorch", theirs],
                          capture_output=True, text=True, check=True)
    rows = [[c.strip() for c in l.strip("|").split("|")] for l in proc.stdout.splitlines()[2:]]
    assert [r[2] for r in rows] == ["sa", "xsa"]
    step = json.loads(ours.read_text())["step"]["results"]
    torch_rate = {json.loads(l)["attention"]: json.loads(l)["tokens_per_s"] for l in theirs.read_text().splitlines()}
    for r in rows:
        assert r[0] == str(model) and r[1] == "2 x 16"
        assert float(r[9]) == pytest.approx(step[r[2]]["tokens_per_s"] / torch_rate[r[2]], abs=1e-3)
        assert r[10] == "-"  # no compiled run here
