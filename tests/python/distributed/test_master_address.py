"""A master address the ranks cannot meet at fails by name on every rank, before any
collective and long before the collective timeout: a node list whose first host does not
resolve, and, on a step that spans two nodes, one whose first host resolves to loopback.
The ranks are the real binary with srun's variables, as test_distributed.py starts them;
the lookup that fails runs in a network namespace of its own (`unshare --net`), so that
its DNS query reaches no server outside this machine."""
import subprocess
import time

import pytest

from distrun import worker_env, write_config


def start_ranks(cmd_prefix, build_dir, cfg, out, **slurm):
    procs = []
    for rank in range(2):
        env = worker_env(SLURM_PROCID=str(rank), SLURM_LOCALID="0", SLURM_NTASKS="2", SLURM_STEP_NUM_TASKS="2",
                         SLURM_STEP_ID="0", SLURM_JOB_ID="7", **slurm)
        procs.append(subprocess.Popen([*cmd_prefix, str(build_dir / "xsagpt"), "train", "-c", str(cfg), "--out",
                                       str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      env=env))
    t0 = time.monotonic()
    logs = [p.communicate(timeout=120)[0] for p in procs]
    return procs, logs, time.monotonic() - t0


def own_network():
    if subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs a network namespace of its own (unshare --net, as root) so that the failed lookup "
                    "queries no server outside this machine")
    return ["unshare", "--net"]


def test_a_master_that_does_not_resolve_fails_by_name_on_every_rank(shards, build_dir, tmp_path):
    cfg = write_config(tmp_path / "cfg.json", shards)
    procs, logs, took = start_ranks(own_network(), build_dir, cfg, tmp_path / "run",
                                    SLURM_STEP_NODELIST="xsagpt-nowhere[1-2]", SLURM_STEP_NUM_NODES="2")
    for rank, (p, log) in enumerate(zip(procs, logs)):
        assert p.returncode == 2, log
        assert (f'rank {rank} of 2: the master address "xsagpt-nowhere1" (the first host of '
                f'SLURM_STEP_NODELIST=xsagpt-nowhere[1-2]) does not resolve') in log, log
        assert "distributed:" not in log and "TCPStore" not in log, log  # no rank reached the store
    assert took < 20, took  # the collective timeout (XSAGPT_DIST_TIMEOUT) is 30 s
    assert not (tmp_path / "run").exists()


def test_a_loopback_master_on_two_nodes_fails_by_name_on_every_rank(shards, build_dir, tmp_path):
    cfg = write_config(tmp_path / "cfg.json", shards)
    procs, logs, took = start_ranks([], build_dir, cfg, tmp_path / "run", SLURM_STEP_NODELIST="localhost,node2",
                                    SLURM_STEP_NUM_NODES="2")
    for rank, (p, log) in enumerate(zip(procs, logs)):
        assert p.returncode == 2, log
        assert f'rank {rank} of 2: the master address "localhost"' in log and "a loopback address, but the job " \
            "spans 2 nodes" in log, log
    assert took < 20, took
