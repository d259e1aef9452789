"""A point's own requeues on Slurm, counted in its directory (`xsagpt sweep --point K
--requeue`, which the batch scripts ask before a task requeues itself): a requeue that
finds a newer checkpoint starts the count over; past slurm.requeue_limit in a row without
one the point stops and is failed as needing attention, by name, in --status and --slurm;
retried, it is counted afresh. And --status shows, for each point waiting in Slurm, the
reason squeue gives."""
import json
import os
import re

from slurm_ladder import ladder_file, point_names

LOCAL = {"time": "10:00", "signal_s": 30}


def status_line(xsagpt, spec, index, env=None):
    out = xsagpt("sweep", "-c", spec, "--status", env=env).stdout
    return next(l for l in out.splitlines() if l.split()[:1] == [str(index)])


def test_a_point_requeued_without_progress_stops_past_the_limit(tmp_path, shards, xsagpt):
    spec = ladder_file(tmp_path, shards, {**LOCAL, "requeue_limit": 2})
    name = point_names(xsagpt("sweep", "-c", spec, "--dry-run").stdout)[0]
    run_dir = tmp_path / "sweep" / name
    env = {**os.environ, "SLURM_ARRAY_JOB_ID": "77", "SLURM_ARRAY_TASK_ID": "0"}

    def requeue():
        return xsagpt("sweep", "-c", spec, "--point-from-env", "SLURM_ARRAY_TASK_ID", "--requeue", env=env,
                      check=False)

    def checkpoint(step):  # what a requeue reads of a checkpoint: its step, from its name
        (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
        (run_dir / "checkpoints" / f"step_{step:08d}.pt").write_bytes(b"")

    first = requeue()
    assert first.returncode == 0 and "requeue 1 by job 77_0 (no checkpoint yet; 1 of slurm.requeue_limit 2 in a " \
        "row without a newer checkpoint)" in first.stderr, first.stderr
    assert "requeued itself 1 time(s), 1 in a row without a newer checkpoint" in status_line(xsagpt, spec, 0)
    checkpoint(4)  # progress: the count starts over
    assert "(the newest at step 4; 0 of slurm.requeue_limit 2" in requeue().stderr
    for k in (1, 2):
        proc = requeue()
        assert proc.returncode == 0 and f"; {k} of slurm.requeue_limit 2" in proc.stderr, proc.stderr
    stop = requeue()  # the third in a row without a newer checkpoint: past the limit
    assert stop.returncode == 1, stop.stderr
    why = ("needs attention: requeued itself 3 time(s) in a row without a newer checkpoint (the newest at step 4), "
           "past slurm.requeue_limit 2; the last by job 77_0")
    assert f"point {name}: {why}" in stop.stderr, stop.stderr
    assert json.loads((run_dir / "failed.json").read_text())["error"].startswith(why)
    assert re.match(rf"0 failed +{re.escape(name)}  {re.escape(why)}", status_line(xsagpt, spec, 0))
    record = json.loads((run_dir / "requeues.json").read_text())
    assert record["requeues"] == 5 and record["stalled"] == 3 and record["needs_attention"] is True
    # Not submitted again: a failed point waits for --retry-failed.
    assert re.search(r"\d+ failed \(--retry-failed submits them again\)",
                     xsagpt("sweep", "-c", spec, "--slurm").stdout)
    # Retried (its failure removed as a retried point's is when it trains): counted afresh.
    (run_dir / "failed.json").unlink()
    again = requeue()
    assert again.returncode == 0 and "1 of slurm.requeue_limit 2" in again.stderr, again.stderr


def test_requeue_is_refused_without_a_point_or_a_slurm_section(tmp_path, shards, xsagpt):
    spec = ladder_file(tmp_path, shards, LOCAL)
    proc = xsagpt("sweep", "-c", spec, "--requeue", check=False)
    assert proc.returncode == 2 and "--requeue: counts one point's requeue" in proc.stderr, proc.stderr
    data = json.loads(spec.read_text())
    del data["slurm"], data["ladder"]["rungs"][1]["slurm"]
    spec.write_text(json.dumps(data))
    proc = xsagpt("sweep", "-c", spec, "--point", "0", "--requeue", check=False)
    assert proc.returncode == 2 and 'the sweep file has no "slurm" section' in proc.stderr, proc.stderr
    assert not (tmp_path / "sweep").exists()


def test_status_shows_why_each_queued_point_waits(slurm_cluster, tmp_path, shards, xsagpt):
    """Submitted held (sbatch --hold): every point waits in Slurm, and --status says why."""
    spec = ladder_file(tmp_path, shards, {**LOCAL, "extra": ["--hold"]})
    submitted = xsagpt("sweep", "-c", spec, "--slurm", "--submit", env=slurm_cluster.env, timeout=120).stdout
    jobs = re.findall(r"submitted (?:array|summary) job (\d+)", submitted)
    assert len(jobs) == 3, submitted
    try:
        out = xsagpt("sweep", "-c", spec, "--status", env=slurm_cluster.env).stdout
        lines = [l for l in out.splitlines() if re.match(r"\d+ pending", l)]
        assert len(lines) == 8, out
        for line in lines:
            task = line.split()[0]
            assert re.search(rf"; in Slurm: job \d+_{task} PENDING \(JobHeldUser: held: `scontrol release` lets it "
                             r"run\)$", line), line
    finally:
        slurm_cluster.run("scancel", *jobs)
