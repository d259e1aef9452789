"""A ladder's data-ratio branches as Slurm jobs (sweep/branch.h, docs/cluster.md), on the
local one-node cluster: each source's branches are an array submitted with a dependency
on the source's own task, so a branch stays pending (reason Dependency) while its source
runs and while the source, requeued, waits to run again; every point then finishes and
equals the serial sweep's run bit for bit."""
import json
import os
import re
import signal
import time

import pytest

from slurm_ladder import final_losses, point_names, sbatch_lines
from test_slurm_jobs import held, queued, serial, terminate
from tinyrun import write_run_config

HOLD = "train:checkpoint-saved-3"  # the d1 source's first checkpoint (every 3 of its steps); no branch saves it


def ratio_ladder(tmp_path, shards):
    base = write_run_config(tmp_path / "base.json", shards, tmp_path / "unused", max_steps=12, warmup_steps=2,
                            eval_interval=4, ckpt_interval=4, log_interval=1, schedule="wsd", decay_fraction=0.25)
    spec = {"base": str(base), "variants": {"sa": {"model.attention": "sa"}, "xsa": {"model.attention": "xsa"}},
            "baseline": "sa", "grid": {"train.seed": [1]},
            "ladder": {"rungs": [1, 2], "aspect": 32, "head_dim": 16, "tokens": {"per_param": [0.04, 0.1]},
                       "lr": {"per_rung": [1e-2, 1e-2]}},
            "slurm": {"time": "10:00", "signal_s": 30, "extra": ["--overcommit"]},
            "out_dir": str(tmp_path / "sweep")}
    path = tmp_path / "ratios.json"
    path.write_text(json.dumps(spec))
    return path


def state_and_reason(cluster, job):
    out = cluster.run("scontrol", "show", "job", "-o", job).stdout
    return re.search(r"\bJobState=(\S+)", out).group(1), re.search(r"\bReason=(\S+)", out).group(1)


def test_branches_wait_for_their_sources_task_through_a_requeue(slurm_cluster, tmp_path, shards, xsagpt, build_dir):
    cluster = slurm_cluster
    (tmp_path / "jobs").mkdir(), (tmp_path / "ref").mkdir()
    spec, ref = ratio_ladder(tmp_path / "jobs", shards), ratio_ladder(tmp_path / "ref", shards)
    names = point_names(xsagpt("sweep", "-c", spec, "--dry-run").stdout)
    source, branch = names.index("sa,rung=d1,ratio=0.1,train.seed=1"), names.index("sa,rung=d1,ratio=0.04,train.seed=1")
    out = xsagpt("sweep", "-c", spec, "--slurm", "--submit", env={**cluster.env, "XSAGPT_TEST_STOP_AT": HOLD},
                 timeout=120).stdout
    sources_job = re.search(r"submitted array job (\d+) \(array-0\.sh\): rungs d1, d2: point\(s\) ", out).group(1)
    m = re.search(rf"submitted array job (\d+) \((array-\d+\.sh)\): the branches of sa,rung=d1,ratio=0\.1,"
                  rf"train\.seed=1: point\(s\) {branch} \(--dependency=afterany:{sources_job}_{source}\)", out)
    assert m, out
    branch_job = f"{m.group(1)}_{branch}"
    assert "--array" in sbatch_lines(spec.parent / "sweep" / "slurm" / m.group(2))
    serial(xsagpt, cluster, build_dir / "xsagpt", ref)

    deadline = time.monotonic() + 240
    requeued = False
    while queued(cluster, sbatch_lines(spec.parent / "sweep" / "slurm" / "array-0.sh")["--job-name"]):
        assert time.monotonic() < deadline, queued(cluster, "xsagpt")
        for pid, job, task, _ in held(spec):
            if task == source and not requeued:
                # Held at its first checkpoint: its branch waits on the dependency; requeued, still.
                assert state_and_reason(cluster, branch_job) == ("PENDING", "Dependency")
                terminate(spec, job, task)
                cluster.run("scontrol", "requeue", f"{job}_{task}")
                requeued = True
                time.sleep(2)
                assert state_and_reason(cluster, branch_job) == ("PENDING", "Dependency")
                continue  # requeued: that process is gone, and the task's next run resumes past the hold
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.2)
    assert requeued
    got, want = final_losses(spec.parent / "sweep"), final_losses(ref.parent / "sweep")
    assert len(want) == 8 and got == want
    assert json.loads((spec.parent / "sweep" / names[branch] / "run.json").read_text())["branched_from"]["step"] == 7
