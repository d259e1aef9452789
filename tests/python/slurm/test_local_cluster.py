"""The local Slurm cluster that the Slurm tests run on (scripts/slurm/start.sh and stop.sh):
a batch job runs, and its job steps too; a requeued job comes back; stop.sh ends the
daemons and jobs of its own cluster and leaves every other process alone."""
import pathlib
import subprocess
import tempfile
import time

from localslurm import SlurmCluster, start_cluster, stop_cluster


def poll(what, condition, timeout):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} not within {timeout} s"
        time.sleep(0.2)


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for a parent that is not ours to reap it."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def write_script(path: pathlib.Path, body: str) -> pathlib.Path:
    path.write_text("#!/bin/bash\n" + body)
    return path


def test_a_batch_job_runs_its_steps_and_writes_its_output(slurm_cluster, tmp_path):
    out = tmp_path / "out.txt"
    script = write_script(tmp_path / "job.sh", f"""
echo "job $SLURM_JOB_ID" > {out}
srun -n 2 bash -c 'echo "rank $SLURM_PROCID of $SLURM_NTASKS"' | sort >> {out}
""")
    job = slurm_cluster.sbatch("-n", "2", "--time", "1", "--output", tmp_path / "slurm.log", script)
    slurm_cluster.wait(job, {"COMPLETED"}, timeout=60)
    assert out.read_text().splitlines() == [f"job {job}", "rank 0 of 2", "rank 1 of 2"], (tmp_path / "slurm.log").read_text()


def test_a_requeued_job_starts_again(slurm_cluster, tmp_path):
    """No --requeue: the cluster makes every batch job requeueable (JobRequeue=1)."""
    runs = tmp_path / "runs.txt"
    script = write_script(tmp_path / "job.sh", f"""
echo "restart ${{SLURM_RESTART_COUNT:-0}}" >> {runs}
[ "${{SLURM_RESTART_COUNT:-0}}" -ge 1 ] || sleep 120
""")
    job = slurm_cluster.sbatch("--output", tmp_path / "slurm.log", script)
    poll("the job's first run", lambda: runs.exists(), timeout=30)
    slurm_cluster.run("scontrol", "requeue", job)
    slurm_cluster.wait(job, {"COMPLETED"}, timeout=60)
    assert runs.read_text().splitlines() == ["restart 0", "restart 1"]


def test_stop_ends_its_own_cluster_and_nothing_else(slurm_cluster, tmp_path):
    """A second cluster beside the session's: stopping it ends its daemons and its running
    job, and leaves the session's cluster and a process that only uses its slurm.conf."""
    state = pathlib.Path(tempfile.mkdtemp(prefix="xsagpt-slurm."))
    bystander = None
    try:
        second = SlurmCluster(conf=start_cluster(state), state=state, owned=True)
        daemons = {f.stem: int(f.read_text()) for f in (state / "run").glob("*.pid")}
        assert sorted(daemons) == ["munged", "slurmctld", "slurmd"]
        assert all(alive(pid) for pid in daemons.values())
        job_pid = tmp_path / "job.pid"
        script = write_script(tmp_path / "job.sh", f"echo $$ > {job_pid}.tmp; mv {job_pid}.tmp {job_pid}; sleep 120\n")
        second.sbatch("--output", tmp_path / "slurm.log", script)
        poll("the second cluster's job", job_pid.exists, timeout=30)
        job = int(job_pid.read_text())
        assert alive(job)
        bystander = subprocess.Popen(["sleep", "120"], env=second.env)

        stop = stop_cluster(state)
        assert stop.returncode == 0, stop.stderr
        poll("the second cluster's daemons and job ending",
             lambda: not any(alive(p) for p in [*daemons.values(), job]), timeout=10)
        assert bystander.poll() is None, "stop.sh killed a process that only had the cluster's SLURM_CONF"
        assert slurm_cluster.run("sinfo", "-h", "-N", "-o", "%T").stdout.strip() in {"idle", "mixed", "allocated"}
        again = stop_cluster(state)
        assert again.returncode == 0, again.stderr
    finally:
        if bystander is not None:
            bystander.kill()
            bystander.wait()
        stop_cluster(state)
        subprocess.run(["rm", "-rf", str(state)], check=False)
