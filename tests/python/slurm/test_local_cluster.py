"""The local Slurm cluster that the Slurm tests run on (scripts/slurm/start.sh and stop.sh):
a batch job runs, and its job steps too; a requeued job comes back; on a multi-node
cluster each node is a host of its own (name, address, namespaces) that the others
resolve, and nothing of it reaches beyond its bridge; stop.sh ends the daemons and jobs of
its own cluster, removes the namespaces and links it made, and leaves every other process,
namespace and link alone."""
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


def namespaces():
    return {l.split()[0] for l in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
            .splitlines() if l.strip()}


def links():
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {l.split(": ")[1].split("@")[0] for l in out.splitlines() if ": " in l}


def test_each_node_is_a_host_of_its_own(two_nodes, tmp_path):
    """A job step on every node: each task on its own host name and address, every node's
    name resolving to its address in every node, and no route out of the bridge."""
    cluster = two_nodes
    out = cluster.run("srun", "-N", len(cluster.nodes), "--ntasks-per-node=1", "bash", "-c",
                      'echo "$(hostname) $(hostname -I)"; getent hosts ' + " ".join(cluster.nodes) +
                      "; ip route get 192.0.2.1 2>&1 | head -n 1", timeout=60).stdout
    lines = out.splitlines()
    addresses = {l.split()[0]: l.split()[1] for l in lines if l.split()[0] in cluster.nodes and len(l.split()) == 2}
    assert sorted(addresses) == cluster.nodes and len(set(addresses.values())) == len(cluster.nodes), out
    for node, addr in addresses.items():  # every node resolves every node's name to its address
        assert sum(1 for l in lines if l.split() == [addr, node]) == len(cluster.nodes), out
    # TEST-NET-1 (192.0.2.1): no node has a route beyond its bridge.
    assert sum("unreachable" in l for l in lines) == len(cluster.nodes), out


def test_stop_ends_its_own_cluster_and_nothing_else(slurm_cluster, tmp_path):
    """A second cluster beside the session's (of two nodes where namespaces can be made):
    stopping it ends its daemons and its running job, removes its namespaces, links and
    /etc/netns entries, and leaves the session's cluster (its namespaces too) and a process
    that only uses its slurm.conf; a second stop does nothing."""
    state = pathlib.Path(tempfile.mkdtemp(prefix="xsagpt-slurm."))
    bystander = None
    before_ns, before_links = namespaces(), links()
    try:
        conf = start_cluster(state, nodes=2)
        nodes = ["n-01", "n-02"] if not isinstance(conf, str) else ["localhost"]
        second = SlurmCluster(conf=conf if not isinstance(conf, str) else start_cluster(state), state=state,
                              owned=True)
        made_ns, made_links = namespaces() - before_ns, links() - before_links
        if len(nodes) > 1:
            assert len(made_ns) == 3 and all(n.startswith("xsagpt-") for n in made_ns), made_ns
            assert len(made_links) == 4, made_links  # the bridge and a veth per namespace
        daemons = {f.stem: int(f.read_text()) for f in (state / "run").glob("*.pid")}
        assert sorted(daemons) == ["munged", "slurmctld", *(f"slurmd-{n}" for n in nodes)]
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
        assert namespaces() == before_ns and links() == before_links  # its own gone, every other one kept
        assert not any(pathlib.Path("/etc/netns", n).exists() for n in made_ns)
        states = slurm_cluster.run("sinfo", "-h", "-N", "-o", "%T").stdout.split()
        assert states and set(states) <= {"idle", "mixed", "allocated"}, states
        again = stop_cluster(state)
        assert again.returncode == 0, again.stderr
        assert namespaces() == before_ns and links() == before_links
    finally:
        if bystander is not None:
            bystander.kill()
            bystander.wait()
        stop_cluster(state)
        subprocess.run(["rm", "-rf", str(state)], check=False)
