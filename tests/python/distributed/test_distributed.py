"""Data-parallel training with the real binary on CPU (Gloo): two processes
launched by torchrun (agent-hosted store) or as SLURM tasks (rank 0 serves the
store) against one process with the same global batch; parameters identical on
both ranks; the same with Muon; stop on one rank's signal and exact resume; a dead
rank brings the job down; a stop that a rank dies of first leaves no failed point."""
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from distrun import TIMEOUT, run, torchrun, weights, worker_env, write_config
from tinyrun import metrics


def checksum(tensors):
    """process_group.h's replica checksum: bit patterns as int64, their sum and sum of squares mod 2^64."""
    s1 = s2 = 0
    for t in tensors:
        bits = t.contiguous().view(torch.int32).numpy().astype(np.int64)
        s1 += int(bits.sum(dtype=np.uint64))
        s2 += int((bits * bits).sum(dtype=np.uint64))
    return f"{s1 % 2**64:016x}:{s2 % 2**64:016x}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, shards, build_dir):
    """The same 6 steps in one process (micro_batch 8) and in two (micro_batch 4 each)."""
    d = tmp_path_factory.mktemp("dist_runs")
    cfg = write_config(d / "cfg.json", shards)
    run([str(build_dir / "xsagpt"), "train", "-c", cfg, "--out", d / "one", "--set", "train.micro_batch=8"])
    log = run(torchrun(build_dir, "-c", cfg, "--out", d / "two"))
    return {"cfg": cfg, "one": d / "one", "two": d / "two", "log": log}


def test_two_ranks_match_one_process(runs):
    one, two = runs["one"], runs["two"]
    assert "rank 0 of 2 via torchrun" in runs["log"] and "torchrun agent's" in runs["log"]
    assert sorted(metrics(two)) == list(range(1, 7))
    for kind in ("train_loss", "val_loss"):
        a, b = metrics(one, kind), metrics(two, kind)
        assert a.keys() == b.keys()
        assert all(abs(a[s] - b[s]) < 1e-5 for s in a), (kind, a, b)
    assert metrics(one) != {s: 0.0 for s in range(1, 7)}
    wa, wb = weights(one / "checkpoints" / "step_00000006.pt"), weights(two / "checkpoints" / "step_00000006.pt")
    assert wa.keys() == wb.keys()
    worst = max((wa[k] - wb[k]).abs().max().item() for k in wa)
    assert worst < 1e-5, worst
    # The model moved (the comparison is not between two copies of the initialisation).
    init = weights(two / "checkpoints" / "step_00000003.pt")
    assert max((wb[k] - init[k]).abs().max().item() for k in wb) > 1e-3, "the weights barely moved"
    ckpt = torch.load(two / "checkpoints" / "step_00000006.pt", weights_only=True)
    assert len(ckpt["loader"]) == 2  # every rank's loader state


def test_parameters_identical_on_both_ranks(runs):
    """Each checkpoint compares both ranks' parameter checksums; the one logged is
    that of the parameters rank 0 saved, recomputed here from the file."""
    lines = re.findall(r"parameters: identical on all 2 ranks \(checksum ([0-9a-f]{16}:[0-9a-f]{16})\)", runs["log"])
    assert len(lines) == 2, runs["log"]  # steps 3 and 6
    for step, line in zip((3, 6), lines):
        w = weights(runs["two"] / "checkpoints" / f"step_{step:08d}.pt")
        # The default head is untied: every tensor saved is a parameter of its own
        # (the checksum is a sum, so the order does not matter).
        assert not torch.equal(w["lm_head.weight"], w["transformer.wte.weight"])
        assert line == checksum(w.values())


def test_muon_two_ranks_match_one_process(shards, build_dir, tmp_path):
    """Muon orthogonalises the averaged gradient the same way on every rank."""
    cfg = write_config(tmp_path / "cfg.json", shards, optimizer="muon", muon_lr=0.02)
    run([build_dir / "xsagpt", "train", "-c", cfg, "--out", tmp_path / "one", "--set", "train.micro_batch=8"])
    log = run(torchrun(build_dir, "-c", cfg, "--out", tmp_path / "two"))
    assert "Muon momentum" in log
    wa, wb = (weights(tmp_path / d / "checkpoints" / "step_00000006.pt") for d in ("one", "two"))
    init = weights(tmp_path / "two" / "checkpoints" / "step_00000003.pt")
    hidden = "transformer.h.0.mlp.c_fc.weight"
    assert (wb[hidden] - init[hidden]).abs().max().item() > 1e-3, "Muon's matrices barely moved"
    worst = max((wa[k] - wb[k]).abs().max().item() for k in wa)
    assert worst < 1e-5, worst


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_slurm_tasks_match_torchrun(runs, build_dir, tmp_path):
    """srun's variables instead of torchrun's: rank 0 serves the store; same numbers, bit for bit."""
    port = free_port()
    procs = []
    for rank in range(2):
        env = worker_env(SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank), SLURM_NTASKS="2",
                         SLURM_STEP_NUM_TASKS="2", SLURM_STEP_ID="0", SLURM_STEP_NODELIST="localhost",
                         SLURM_JOB_ID="1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([build_dir / "xsagpt", "train", "-c", runs["cfg"], "--out", tmp_path / "slurm"],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env))
    logs = [p.communicate(timeout=TIMEOUT)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], logs
    assert "rank 0 of 2 via SLURM" in logs[0] and "served by rank 0" in logs[0]
    assert metrics(tmp_path / "slurm") == metrics(runs["two"])
    assert metrics(tmp_path / "slurm", "val_loss") == metrics(runs["two"], "val_loss")


def children(pid):
    out = []
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def rank_pid(torchrun_pid, rank, timeout=60):
    t0 = time.time()
    while time.time() - t0 < timeout:
        for c in children(torchrun_pid):
            try:
                env = pathlib.Path(f"/proc/{c}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"RANK={rank}".encode() in env:
                return c
        time.sleep(0.05)
    raise AssertionError(f"rank {rank} did not start")


def wait_for_metrics(run_dir, proc, steps=1, timeout=120):
    t0 = time.time()
    while not ((run_dir / "metrics.jsonl").exists() and len(metrics(run_dir)) >= steps):
        assert proc.poll() is None, proc.communicate()[0]
        assert time.time() - t0 < timeout, "no training progress"
        time.sleep(0.01)


def test_stop_on_one_rank_and_resume_is_exact(shards, build_dir, tmp_path):
    cfg = write_config(tmp_path / "cfg.json", shards, max_steps=150, ckpt_interval=50, eval_interval=50,
                       batch_tokens=0)
    run(torchrun(build_dir, "-c", cfg, "--out", tmp_path / "straight"))
    out = tmp_path / "stopped"
    proc = subprocess.Popen(torchrun(build_dir, "-c", cfg, "--out", out), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=worker_env())
    victim = rank_pid(proc.pid, 1)
    wait_for_metrics(out, proc)
    os.kill(victim, signal.SIGTERM)  # only rank 1 sees the signal; both must stop at the same step
    log, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, log
    assert "stopped by a signal to another rank" in log  # rank 0 logs; rank 1 was signalled
    ckpts = sorted((out / "checkpoints").glob("step_*.pt"))
    stopped_at = int(ckpts[-1].stem.split("_")[1])
    assert 1 <= stopped_at < 150, log
    assert max(metrics(out)) == stopped_at

    # On one rank, batch_tokens 0 would halve the step (test_reshard.py resumes on other ranks).
    single = subprocess.run([build_dir / "xsagpt", "train", "-c", cfg, "--out", out, "--resume", "auto"],
                            capture_output=True, text=True, env=worker_env(), timeout=TIMEOUT)
    assert single.returncode == 2
    assert "saved by 2 ranks, whose optimizer steps were 256 tokens" in single.stderr, single.stderr
    assert "set train.batch_tokens=256 (micro_batch 4 x seq_len 32 x 2 accumulation x 1 rank)" in single.stderr

    run(torchrun(build_dir, "-c", cfg, "--out", out, "--resume", "auto"))
    assert metrics(out) == metrics(tmp_path / "straight")
    assert metrics(out, "val_loss") == metrics(tmp_path / "straight", "val_loss")


def test_dead_rank_brings_the_job_down(shards, build_dir, tmp_path):
    cfg = write_config(tmp_path / "cfg.json", shards, max_steps=100000, ckpt_interval=0, eval_interval=0)
    out = tmp_path / "run"
    proc = subprocess.Popen(torchrun(build_dir, "-c", cfg, "--out", out), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=worker_env())
    victim = rank_pid(proc.pid, 1)
    wait_for_metrics(out, proc)
    t0 = time.time()
    os.kill(victim, signal.SIGKILL)
    log, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode != 0
    assert time.time() - t0 < 30, "the surviving rank should fail at its next collective, not wait for the timeout"
    assert re.search(r"rank 0 of 2: .* failed", log), log  # the survivor names itself and the operation
    assert re.search(r"rank\s*:\s*1", log) and "Signal 9" in log, log  # torchrun's summary names the dead rank


def test_a_stop_that_one_rank_dies_of_first_is_not_the_points_failure(shards, build_dir, tmp_path):
    """A requeue or cancel signals every rank at once; a rank that dies first closes its
    connections, and the rank still in the all-reduce sees the collective fail. Before, that
    rank recorded failed.json, so the requeued sweep skipped the point as failed."""
    base = write_config(tmp_path / "base.json", shards, max_steps=100000, ckpt_interval=20, eval_interval=0)
    spec = tmp_path / "sweep.json"
    spec.write_text(json.dumps({"base": str(base), "variants": {"sa": {}}, "baseline": "sa",
                                "out_dir": str(tmp_path / "sw")}))
    torchrun_bin = pathlib.Path(sys.executable).parent / "torchrun"
    cmd = [str(torchrun_bin), "--standalone", "--nproc-per-node=2", "--no-python", str(build_dir / "xsagpt"),
           "sweep", "-c", str(spec), "--no-plot"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=worker_env())
    rank0, rank1 = rank_pid(proc.pid, 0), rank_pid(proc.pid, 1)
    wait_for_metrics(tmp_path / "sw" / "sa", proc, steps=2)
    os.kill(rank1, signal.SIGKILL)  # gone at once, as a rank the signal ended before its handler ran
    os.kill(rank0, signal.SIGTERM)
    log, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode != 0, log
    assert not (tmp_path / "sw" / "sa" / "failed.json").exists(), log
    assert "not recorded as failed" in log, log
