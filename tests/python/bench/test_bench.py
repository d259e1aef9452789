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
        assert 0 < r["cpu"]["min_ms"] <= r["cpu"]["median_ms"]  # on a CPU also the process's CPU time a step
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


def test_repeated_rounds_give_paired_ratios(tmp_path, xsagpt):
    """--repeat N: each variant's median per round, and each round's ratio to the
    first variant from that round's own medians (drift between rounds cancels)."""
    model = tmp_path / "m.json"
    model.write_text(json.dumps({"vocab_size": 256, "block_size": 32, "n_layer": 1, "d_model": 32, "n_head": 2,
                                 "head_dim": 16}))
    out = tmp_path / "step.json"
    proc = xsagpt("bench", "--device", "cpu", "--no-block", "--variants", "xsa@aten,xsa@norm", "--warmup", 0,
                  "--iters", 2, "--repeat", 3, "--step-config", model, "--step-batch", 2, "--step-seq-len", 16,
                  "--threads", 1, "--json", out)
    assert "block forward+backward" not in proc.stdout  # --no-block: not even the grid's header
    assert json.loads(out.read_text())["block"] == []
    step = json.loads(out.read_text())["step"]
    base, norm = step["results"]["xsa@aten"], step["results"]["xsa@norm"]
    assert len(base["round_ms"]) == len(norm["round_ms"]) == 3 and min(base["round_ms"] + norm["round_ms"]) > 0
    rounds = step["ratios"]["xsa@norm"]["time_rounds"]
    assert rounds == pytest.approx([n / b for n, b in zip(norm["round_ms"], base["round_ms"])])
    for r in (base, norm):  # the overall median and minimum are over every round's iterations
        assert r["min_ms"] <= min(r["round_ms"]) and r["min_ms"] <= r["median_ms"] <= max(r["round_ms"]) * 2


def test_micro_counts_each_kernels_bytes(tmp_path, xsagpt):
    """--micro: each kernel's row moves the bytes its inputs and outputs hold (counted
    here independently, float32 on a CPU), and GB/s and the share of the copy follow
    from the row's own time."""
    model = tmp_path / "m.json"
    V, d, H, D = 300, 32, 2, 16
    model.write_text(json.dumps({"vocab_size": V, "block_size": 64, "n_layer": 1, "d_model": d, "n_head": H,
                                 "head_dim": D}))
    out = tmp_path / "micro.json"
    xsagpt("bench", "--device", "cpu", "--micro", f"{model}:2x16", "--iters", 2, "--threads", 1, "--json", out)
    micro = json.loads(out.read_text())["micro"]
    assert micro["implementation"] == "aten twin" and micro["copy_gb_per_s"] > 0
    N, T, f = 2 * 16, 16, 4
    expect = {
        "norm forward": N * d * f * 4 + 2 * d * f + 2 * N * f,         # x, branch, w, b; x_out, h, mean, rstd
        "norm backward": N * d * f * 5 + 2 * N * f + 3 * d * f,        # dh, dx_out, x_out, dx, dbranch; stats; w, dw, db
        "rope forward": 2 * N * 3 * H * D * f + 2 * T * (D // 2) * 4,  # qkv in, q k v out; cos, sin
        "rope backward": 2 * N * 3 * H * D * f + 2 * T * (D // 2) * 4,
        "loss rows": 2 * N * V * f + N * 8 + N * 4,                    # logits read and overwritten; targets, losses
        "xsa forward": 3 * N * H * D * f,
        "xsa backward": 5 * N * H * D * f,
    }
    rows = {r["kernel"]: r for r in micro["rows"]}
    assert set(rows) == set(expect)
    for k, b in expect.items():
        r = rows[k]
        assert r["bytes"] == b, k
        assert r["ms"] > 0 and r["gb_per_s"] == pytest.approx(b / (r["ms"] * 1e6))
        assert r["of_copy"] == pytest.approx(r["gb_per_s"] / micro["copy_gb_per_s"])
        assert r["shape"].startswith(f"{model} 2x16")


@pytest.mark.parametrize("args,message", [
    (["--widths", "30", "--head-dim", "16"], "--widths"),
    (["--variants", "sa,flash"], "flash"),
    (["--seq-lens", "16,x"], "--seq-lens"),
    (["--dtype", "fp8"], "--dtype"),
    (["--step-recompute", "attn"], "--step-recompute"),
    (["--variants", "sa,xsa-fused"], "xsa-fused"),  # CUDA only, and these run with --device cpu
    (["--step-loss-chunk", "-1"], "--step-loss-chunk"),
    (["--repeat", "0"], "--repeat"),
    (["--micro", "tiny:2by64"], "--micro"),
    (["--micro", "no-such-config:2x64"], "no-such-config"),
])
def test_bad_arguments_are_named(xsagpt, args, message):
    proc = xsagpt("bench", "--device", "cpu", "--no-step", *args, check=False)
    assert proc.returncode == 2 and message in proc.stderr


def test_compare_table_matches_both_benchmarks(tmp_path, xsagpt, repo_root):
    """scripts/bench/bench_compare.py joins xsagpt's step results with bench_pytorch.py's
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
        proc = subprocess.run([sys.executable, repo_root / "scripts" / "bench" / "bench_pytorch.py", "--config", str(model),
                               "-b", "2", "-t", "16", "--steps", "2", "--warmup", "1", "--attention", attention,
                               "--device", "cpu"],
                              capture_output=True, text=True, check=True)
        with theirs.open("a") as f:
            f.write(proc.stdout)
    proc = subprocess.run([sys.executable, repo_root / "scripts" / "bench" / "bench_compare.py", ours, "--pytorch", theirs],
                          capture_output=True, text=True, check=True)
    rows = [[c.strip() for c in l.strip("|").split("|")] for l in proc.stdout.splitlines()[2:]]
    assert [r[2] for r in rows] == ["sa", "xsa"]
    step = json.loads(ours.read_text())["step"]["results"]
    torch_rate = {json.loads(l)["attention"]: json.loads(l)["tokens_per_s"] for l in theirs.read_text().splitlines()}
    for r in rows:
        assert r[0] == str(model) and r[1] == "2 x 16"
        assert float(r[9]) == pytest.approx(step[r[2]]["tokens_per_s"] / torch_rate[r[2]], abs=1e-3)
        assert r[10] == "-"  # no compiled run here


def test_cpu_step_comparison_runs_both_sides_alternated(tmp_path, build_dir, repo_root):
    """scripts/bench/bench_cpu_step.py: per rung, each round's xsagpt and PyTorch step
    times (wall and CPU) from fresh processes of the two benchmarks, and speed-ups that
    follow from them; the rung's model is the ladder's shape (d_model = aspect x depth)."""
    import subprocess
    import sys
    out = tmp_path / "cmp.json"
    proc = subprocess.run([sys.executable, repo_root / "scripts" / "bench" / "bench_cpu_step.py", "--rungs", "1,2",
                           "--aspect", "16", "--vocab", "64", "-b", "2", "-t", "16", "--rounds", "2", "--steps", "2",
                           "--warmup", "0", "--xsagpt", build_dir / "xsagpt", "--json", out],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert set(data["results"]) == {"d1", "d2"} and data["rounds"] == 2 and "load average" in data["load_start"]
    for depth, res in ((1, data["results"]["d1"]), (2, data["results"]["d2"])):
        m = res["model"]
        assert (m["n_layer"], m["d_model"], m["n_head"], m["head_dim"], m["vocab_size"]) == (depth, 16 * depth,
                                                                                            2 * depth, 8, 64)
        for clock in ("wall", "cpu"):
            r = res[clock]
            xs, ts = r["xsagpt_ms"]["rounds"], r["pytorch_ms"]["rounds"]
            assert len(xs) == len(ts) == 2 and min(xs + ts) > 0
            assert r["speedup"]["best"] == pytest.approx(min(ts) / min(xs))
            assert r["speedup"]["median"] == pytest.approx(r["pytorch_ms"]["median"] / r["xsagpt_ms"]["median"])
    rows = [l for l in proc.stdout.splitlines() if l.startswith("| d")]
    assert [r.split("|")[1].strip() for r in rows] == ["d1", "d2"]


def test_pytorch_step_takes_a_thread_count_and_times_each_cpu_step(tmp_path, repo_root):
    import subprocess
    import sys
    model = tmp_path / "m.json"
    model.write_text(json.dumps({"vocab_size": 64, "block_size": 16, "n_layer": 1, "d_model": 16, "n_head": 2,
                                 "head_dim": 8}))
    run = [sys.executable, repo_root / "scripts" / "bench" / "bench_pytorch.py", "--config", model, "-b", "2", "-t",
           "16", "--steps", "3", "--warmup", "0", "--device", "cpu"]
    r = json.loads(subprocess.run(run + ["--threads", "1"], capture_output=True, text=True, check=True).stdout)
    assert r["threads"] == 1 and 0 < r["min_ms"] <= r["median_ms"] and 0 < r["cpu"]["min_ms"] <= r["cpu"]["median_ms"]
    bad = subprocess.run(run + ["--threads", "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--threads" in bad.stderr
