"""Training across the local cluster's nodes, each a host of its own in network and UTS
namespaces (the two_nodes fixture): a job step of one task per node trains over Gloo
between them and equals the one-process run, within the tolerance of the two-rank test
(tests/python/distributed/test_distributed.py), while another job on the first node
trains beside it at a port of its own; a node cut off mid-run (its link down) fails
its point by name after the collective timeout, and no finished point or good checkpoint
is lost."""
import json
import re
import subprocess
import time

import torch

from distrun import TIMEOUT, weights, worker_env, write_config
from tinyrun import ckpt_steps, metrics, snapshot, write_run_config


def srun_env(cluster, **extra):
    return worker_env(SLURM_CONF=str(cluster.conf), **extra)


def test_a_two_node_step_trains_over_gloo_as_one_process_does(two_nodes, tmp_path, shards, build_dir):
    """Beside it, at the same time, a second job of two tasks on the first node alone: both
    serve their stores on n-01, each at the ports Slurm reserved for its step, and neither
    collides with the other."""
    cluster = two_nodes
    cfg = write_config(tmp_path / "cfg.json", shards)
    xsagpt = str(build_dir / "xsagpt")
    steps = {"two": ["-N", "2", "--ntasks-per-node=1"], "beside": ["-N", "1", "-w", "n-01", "-n", "2"]}
    procs = {name: subprocess.Popen(["srun", *how, "--time=5", xsagpt, "train", "-c", cfg, "--out", tmp_path / name],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=srun_env(cluster),
                                    cwd=tmp_path)
             for name, how in steps.items()}
    one = subprocess.run([xsagpt, "train", "-c", cfg, "--out", tmp_path / "one", "--set", "train.micro_batch=8"],
                         capture_output=True, text=True, env=worker_env(), timeout=TIMEOUT)
    assert one.returncode == 0, one.stderr
    logs = {name: p.communicate(timeout=TIMEOUT)[0] for name, p in procs.items()}
    assert [p.returncode for p in procs.values()] == [0, 0], logs
    # Rank 0 on the first node serves the store on its address there, at the port Slurm reserved for the step.
    ports = {}
    for name, log in logs.items():
        m = re.search(r"rank 0 of 2 via SLURM; .* store n-01:(\d+) \(served by rank 0\) \(host from the first host "
                      r"of SLURM_STEP_NODELIST=(\S+), port from SLURM_STEP_RESV_PORTS\)", log)
        assert m, log
        ports[name] = int(m.group(1))
        assert m.group(2) == {"two": "n-[01-02]", "beside": "n-01"}[name]
    assert ports["two"] != ports["beside"] and all(20000 <= p <= 20999 for p in ports.values()), ports
    for name in steps:
        for kind in ("train_loss", "val_loss"):
            a, b = metrics(tmp_path / "one", kind), metrics(tmp_path / name, kind)
            assert a.keys() == b.keys() and len(a) >= 2
            assert all(abs(a[s] - b[s]) < 1e-5 for s in a), (name, kind, a, b)
    wa, wb = (weights(tmp_path / d / "checkpoints" / "step_00000006.pt") for d in ("one", "two"))
    init = weights(tmp_path / "two" / "checkpoints" / "step_00000003.pt")
    assert max((wb[k] - init[k]).abs().max().item() for k in wb) > 1e-3, "the weights barely moved"
    assert max((wa[k] - wb[k]).abs().max().item() for k in wa) < 1e-5


def sweep_file(tmp_path, shards):
    """Two points: one that finishes in 6 steps, one that would run for hours, a checkpoint every 2 steps."""
    base = write_run_config(tmp_path / "base.json", shards, model={"dropout": 0.0}, batch_tokens=16 * 32,
                            ckpt_interval=2, eval_interval=1000, keep_checkpoints=2)
    spec = {"base": str(base), "grid": {"train.max_steps": [6, 1000000]}, "out_dir": str(tmp_path / "sweep")}
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(spec))
    return path


def test_a_node_cut_off_mid_run_fails_its_point_by_name_and_loses_nothing(two_nodes, tmp_path, shards, build_dir,
                                                                          xsagpt):
    cluster = two_nodes
    spec = sweep_file(tmp_path, shards)
    names = ["train.max_steps=6", "train.max_steps=1000000"]
    finished, long = (tmp_path / "sweep" / n for n in names)
    xsagpt("sweep", "-c", spec, "--point", "0", env=worker_env())
    before = snapshot(finished)
    # A 5 s collective timeout: a rank waiting for its cut-off peer gives up soon.
    proc = subprocess.Popen(["srun", "-N", "2", "--ntasks-per-node=1", "--kill-on-bad-exit=1", "--time=5",
                             str(build_dir / "xsagpt"), "sweep", "-c", str(spec), "--point", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=srun_env(cluster, XSAGPT_DIST_TIMEOUT="5"), cwd=tmp_path)
    ns = cluster.namespace("n-02")
    try:
        deadline = time.monotonic() + 120
        while not ((long / "checkpoints").is_dir() and len(ckpt_steps(long)) >= 2):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
            time.sleep(0.1)
        subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "down"], check=True)
        cut_at = max(metrics(long))
        while not (long / "failed.json").exists():
            assert time.monotonic() < deadline, "the point did not fail within 120 s of its node being cut off"
            time.sleep(0.2)
    finally:
        subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "up"], check=True)
    log = proc.communicate(timeout=120)[0]
    assert proc.returncode != 0, log
    error = json.loads((long / "failed.json").read_text())["error"]
    assert error.startswith("rank 0 of 2: ") and "failed" in error and "collective timeout" in error, error
    status = xsagpt("sweep", "-c", spec, "--status").stdout
    assert f"failed  {names[1]}  rank 0 of 2: " in status, status
    # Nothing lost: the finished point byte for byte, and the cut one's newest checkpoint whole, at or past the cut.
    assert snapshot(finished) == before
    newest = ckpt_steps(long)[-1]
    assert newest >= cut_at - 2
    state = torch.load(long / "checkpoints" / f"step_{newest:08d}.pt", weights_only=True)
    assert all(torch.isfinite(t).all() for t in state["model"].values())
    # The cut node is back in service for the tests after this one.
    deadline = time.monotonic() + 60
    while set(cluster.run("sinfo", "-h", "-N", "-o", "%T").stdout.split()) != {"idle"}:
        assert time.monotonic() < deadline, cluster.run("sinfo", "-N").stdout
        time.sleep(0.5)
