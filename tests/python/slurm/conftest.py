"""The `slurm_cluster` fixture: a real local Slurm cluster (scripts/slurm/start.sh) for the
tests of the sweep's Slurm jobs, so that they run against the scheduler itself, not a mock;
and `two_nodes`, the same cluster where it has two nodes or more, for the tests that need
ranks on separate hosts.

Where it comes from, in this order:
- XSAGPT_SLURM_CONF: the slurm.conf of a cluster that is already running. The test command
  (scripts/test.sh) starts one before pytest (two nodes in network namespaces where it can
  make them, else one), exports XSAGPT_SLURM_CONF and SLURM_CONF (the same path), and
  stops it when it ends; the fixture uses it and leaves it running.
- otherwise the fixture starts its own with scripts/slurm/start.sh in a folder under /tmp,
  once per pytest process (each xdist worker its own, on addresses of its own): two nodes
  where network namespaces can be made (root), else one; and stops it with
  scripts/slurm/stop.sh after the session's last test;
- where slurmctld, slurmd, munged or sbatch is not on the PATH, every test that asks for
  the fixture skips, saying so (`bash scripts/setup.sh --slurm` installs them); a test that
  asks for `two_nodes` on a cluster of one skips, saying why.

Use (SlurmCluster, start_cluster and stop_cluster are in localslurm.py beside this file;
`from localslurm import ...` in a test of this folder):
    def test_something(slurm_cluster, tmp_path):
        env = slurm_cluster.env            # os.environ with SLURM_CONF: give it to every
        subprocess.run([..., "sbatch", ...], env=env)   # process that calls a Slurm command
        job = slurm_cluster.sbatch("-n", "2", "--output", out, script)   # the job id
        slurm_cluster.wait(job, {"COMPLETED"}, timeout=60)  # its final state, or fails
        slurm_cluster.run("scontrol", "requeue", job)       # any client command, checked

Each node advertises 8 CPUs (XSAGPT_SLURM_CPUS when the fixture starts it) whatever the
machine has, with OverSubscribe=YES and JobRequeue=1 (a job is requeueable without
--requeue); a requeued job starts again about 11 s later. A batch job gets one CPU
unless it asks for more (-n, --ntasks-per-node): an srun inside it that asks for more
tasks than its allocation is refused at once ("More processors requested than
permitted"), and an srun outside a job that asks for more CPUs than a node has waits
forever; `srun --overcommit` runs either, and a test puts a timeout around it. The one
node of a one-node cluster is called localhost, so a step's node list resolves anywhere;
the nodes of a multi-node cluster are n-01, n-02, ..., each a host of its own whose name
resolves inside the jobs (docs/cluster.md). There is no accounting (no sacct): a
finished job's state stays in `scontrol show job` for 300 s (MinJobAge).
"""
import os
import pathlib
import shutil
import tempfile

import pytest

from localslurm import SlurmCluster, start_cluster, stop_cluster

PROGRAMS = ("slurmctld", "slurmd", "munged", "sbatch")


@pytest.fixture(scope="session")
def slurm_cluster():
    given = os.environ.get("XSAGPT_SLURM_CONF")
    if given:
        conf = pathlib.Path(given)
        if not conf.is_file():
            pytest.fail(f"XSAGPT_SLURM_CONF={given}: no such file (expected a running cluster's slurm.conf)")
        yield SlurmCluster(conf=conf, state=conf.parent, owned=False)
        return
    missing = [p for p in PROGRAMS if shutil.which(p) is None]
    if missing:
        pytest.skip(f"no Slurm here ({', '.join(missing)} not on the PATH): bash scripts/setup.sh --slurm installs it")
    # Under /tmp rather than pytest's tmp_path: socket paths must stay short.
    state = pathlib.Path(tempfile.mkdtemp(prefix="xsagpt-slurm."))
    try:
        conf = start_cluster(state, nodes=2)
        if isinstance(conf, str):  # no namespaces here: the one-node cluster, and the reason kept
            ONE_NODE_WHY.append(conf)
            conf = start_cluster(state)
        yield SlurmCluster(conf=conf, state=state, owned=True)
    finally:
        stop_cluster(state)
        shutil.rmtree(state, ignore_errors=True)


ONE_NODE_WHY = []  # why the fixture's own cluster has one node


@pytest.fixture(scope="session")
def two_nodes(slurm_cluster):
    """The session's cluster where it has two nodes or more (each in its own namespaces)."""
    nodes = slurm_cluster.nodes
    if len(nodes) < 2:
        why = ONE_NODE_WHY[0] if ONE_NODE_WHY else "the test command could not make network namespaces (see its log)"
        pytest.skip(f"the local Slurm cluster has one node ({nodes[0]}): {why}")
    return slurm_cluster
