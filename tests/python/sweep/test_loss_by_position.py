"""`xsagpt analyze --positions` end to end on tiny trained runs: with its defaults the
buckets' token-weighted mean is the val loss the run itself logged for the same
checkpoint (the trainer's evaluation, through each LM-head path: whole logits, chunks,
the fused loss's ATen twin); every bucket, the last one cut at a sequence length that
is not a power of two, against float64 cross-entropy of the PyTorch reference model
(scripts/reference) loaded with the checkpoint's weights; the flags' errors; and
scripts/view/plot_positions.py's paired differences, for variant names that are not "sa"
and "xsa". Which variant has the lower loss is never asserted."""
import json
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from shardio import read_shard, write_markov_shards
from tinyrun import metrics, write_run_config

from reference.model import GPT

ROOT = __import__("pathlib").Path(__file__).resolve().parents[3]

SEQ, STEPS = 24, 8
# name -> (model overrides, train overrides); each its own LM-head path
RUNS = {
    "sa": ({"attention": "sa"}, {}),
    "xsa-last1-gated-sink": ({"attention": "xsa", "xsa_layers": "last 1", "xsa_gate": "sa", "n_sink": 1},
                             {"loss_chunk": 20}),
    "xsa-fused-loss": ({"attention": "xsa"}, {"kernels": "loss", "loss_chunk": 7}),
}


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return write_markov_shards(tmp_path_factory.mktemp("shards"), {"val_000000.bin": 4096, "train_000001.bin": 20000})


@pytest.fixture(scope="module")
def runs(tmp_path_factory, shards, xsagpt):
    d = tmp_path_factory.mktemp("runs")
    for name, (model, train) in RUNS.items():
        cfg = write_run_config(d / f"{name}.json", shards, d / name, model, max_steps=STEPS, seq_len=SEQ,
                               eval_interval=STEPS, ckpt_interval=STEPS, eval_tokens=3 * 4 * SEQ, **train)
        xsagpt("train", "-c", cfg)
    return d


def positions(xsagpt, run, *args):
    out = run / "pos.json"
    xsagpt("analyze", run, "--positions", "--device", "cpu", "--threads", 1, "--out", out, *args)
    return json.loads(out.read_text())


@pytest.mark.parametrize("name", list(RUNS))
def test_mean_over_positions_is_the_logged_val_loss(name, runs, xsagpt):
    run = runs / name
    j = positions(xsagpt, run)
    logged = metrics(run, "val_loss")[STEPS]
    assert j["step"] == STEPS and j["seq_len"] == SEQ and j["batch"] == 4 and j["sequences"] == 12
    assert j["config"]["model"]["attention"] == RUNS[name][0]["attention"]
    assert j["variant"] == j["config"]["variant"]  # the model's variant name; the words are its description
    assert j["description"].startswith(j["attention"])
    assert 1.0 < logged < 6.0  # a real loss (ln 256 = 5.5 at the start)
    assert j["mean_loss"] == pytest.approx(logged, abs=1e-5)
    assert j["tokens"] == 12 * SEQ == sum(b["tokens"] for b in j["buckets"])
    weighted = sum(b["mean_loss"] * b["tokens"] for b in j["buckets"]) / j["tokens"]
    assert weighted == pytest.approx(j["mean_loss"], abs=1e-9)
    assert len({round(b["mean_loss"], 4) for b in j["buckets"]}) > 1  # position matters: not one number repeated


def test_buckets_against_float64_reference(runs, shards, xsagpt):
    run = runs / "xsa-last1-gated-sink"
    T, n = 20, 10  # buckets 1, 2-3, 4-7, 8-15, 16-20: the last one cut at T
    j = positions(xsagpt, run, "--seq-len", T, "--tokens", n * T + 5, "--batch", 5)
    assert [(b["first"], b["last"]) for b in j["buckets"]] == [(1, 1), (2, 3), (4, 7), (8, 15), (16, 20)]
    assert [b["tokens"] for b in j["buckets"]] == [n * (b - a + 1) for a, b in [(1, 1), (2, 3), (4, 7), (8, 15),
                                                                                (16, 20)]]
    ck = torch.load(sorted((run / "checkpoints").glob("step_*.pt"))[-1], weights_only=True)
    model = GPT.from_checkpoint_dict(ck, dtype=torch.float64).eval()
    toks = torch.from_numpy(read_shard(shards / "val_000000.bin"))
    x = torch.stack([toks[i * T:(i + 1) * T] for i in range(n)])  # the first n sequences, in order
    y = torch.stack([toks[i * T + 1:(i + 1) * T + 1] for i in range(n)])
    with torch.no_grad():
        logits, _ = model(x)
    ce = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="none").view(n, T)
    for b in j["buckets"]:
        want = ce[:, b["first"] - 1:b["last"]].mean().item()
        assert b["mean_loss"] == pytest.approx(want, abs=1e-5), b
    assert j["mean_loss"] == pytest.approx(ce.mean().item(), abs=1e-5)


@pytest.mark.parametrize("args, message", [
    (["--positions", "--tokens", "10"], "--tokens: 10 is less than one sequence"),
    (["--tokens", "100"], "--tokens: only with --positions"),
    (["--positions", "--sequences", "4"], "--sequences: not with --positions"),
    (["--positions", "--batch", "0"], "--batch: must be >= 1"),
])
def test_bad_flags_are_refused_by_name(args, message, runs, xsagpt):
    run = runs / "sa"
    proc = xsagpt("analyze", run, "--device", "cpu", "--threads", 1, "--out", run / "never.json", *args, check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
    assert not (run / "never.json").exists()


def test_plot_compares_named_variants_paired_by_seed(runs, xsagpt, tmp_path):
    files = {name: positions(xsagpt, runs / name) for name in RUNS}
    args = [f"{name}={runs / name / 'pos.json'}" for name in RUNS]
    png, out = tmp_path / "pos.png", tmp_path / "pos.json"
    proc = subprocess.run([sys.executable, ROOT / "scripts" / "view" / "plot_positions.py", *args, "--baseline",
                           "xsa-fused-loss", "--out", png, "--json", out], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert png.stat().st_size > 10_000
    rows = json.loads(out.read_text())
    assert [r["variant"] for r in rows] == ["sa", "xsa-last1-gated-sink"]
    base = files["xsa-fused-loss"]["buckets"]
    for r in rows:
        want = [a["mean_loss"] - b["mean_loss"] for a, b in zip(files[r["variant"]]["buckets"], base)]
        assert r["seeds"] == 1 and r["diff_sd"] == [None] * len(want)
        assert r["diff_mean"] == pytest.approx(want, abs=1e-12)
        assert max(abs(d) for d in want) > 0  # different models: the differences are not all zero

    bad = subprocess.run([sys.executable, ROOT / "scripts" / "view" / "plot_positions.py", *args, "--baseline", "xsa",
                          "--out", tmp_path / "x.png"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--baseline 'xsa': no file of that name" in bad.stderr


def test_plot_that_cannot_write_its_files_is_one_line_and_exit_2(tmp_path):
    # Before: a traceback (FileExistsError, NotADirectoryError). Files as analyze writes them.
    for name, shift in (("a", 0.0), ("b", 0.1)):
        (tmp_path / f"{name}.json").write_text(json.dumps({"seq_len": 4, "config": {"train": {"seed": 1}}, "buckets": [
            {"first": 1, "last": 1, "mean_loss": 3.0 + shift}, {"first": 2, "last": 3, "mean_loss": 2.5 + shift}]}))
    (tmp_path / "file").write_text("")
    for where in (["--out", tmp_path / "file" / "pos.png"],
                  ["--out", tmp_path / "pos.png", "--json", tmp_path / "file" / "pos.json"]):
        proc = subprocess.run([sys.executable, ROOT / "scripts" / "view" / "plot_positions.py", f"a={tmp_path / 'a.json'}",
                               f"b={tmp_path / 'b.json'}", "--baseline", "a", *where], capture_output=True, text=True)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith(f"plot_positions.py: cannot write {where[1]}") and f"{tmp_path / 'file'}" in proc.stderr
