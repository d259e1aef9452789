"""The local Slurm cluster as the Slurm tests see it: SlurmCluster (its slurm.conf, the
environment its commands need, its nodes, sbatch, a job's state, waiting for one) and
starting or stopping one with scripts/slurm/start.sh and stop.sh. The fixtures are in
conftest.py."""
import dataclasses
import os
import pathlib
import re
import subprocess
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
START = ROOT / "scripts" / "slurm" / "start.sh"
STOP = ROOT / "scripts" / "slurm" / "stop.sh"
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
                "BOOT_FAIL", "DEADLINE"}


@dataclasses.dataclass
class SlurmCluster:
    conf: pathlib.Path  # its slurm.conf: what SLURM_CONF must name
    state: pathlib.Path  # its state folder (logs in log/)
    owned: bool  # started by this fixture, so stopped by it

    @property
    def env(self) -> dict:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *args, timeout=30, check=True) -> subprocess.CompletedProcess:
        proc = subprocess.run(list(map(str, args)), env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(map(str, args))} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc

    @property
    def nodes(self) -> list:
        """The nodes' names, as sinfo lists them: ["localhost"], or ["n-01", "n-02"]."""
        return sorted(set(self.run("sinfo", "-h", "-N", "-o", "%N").stdout.split()))

    def namespace(self, node: str) -> str:
        """The network namespace a node of a multi-node cluster runs in (start.sh's name)."""
        for line in (self.state / "net.env").read_text().splitlines():
            what, _, name = line.partition(" ")
            if what == "netns" and name.endswith("-" + node):
                return name
        raise AssertionError(f"no namespace of node {node} in {self.state / 'net.env'}")

    def sbatch(self, *args) -> str:
        return self.run("sbatch", "--parsable", *args).stdout.strip().split(";")[0]

    def job_state(self, job) -> str:
        out = self.run("scontrol", "show", "job", "-o", job).stdout
        return re.search(r"\bJobState=(\S+)", out).group(1)

    def wait(self, job, states, timeout) -> str:
        """Polls until the job is in one of `states`; fails naming the state it is in at the
        time limit, or the final state it ended in instead."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.job_state(job)
            if state in states:
                return state
            if state in FINAL_STATES or time.monotonic() > deadline:
                raise AssertionError(f"job {job} is {state}, not {sorted(states)} (after {timeout} s at most); "
                                     f"logs in {self.state}/log")
            time.sleep(0.2)


# start.sh's exit status where network namespaces cannot be made (not root, no ip netns).
NO_NAMESPACES = 3


def start_cluster(state: pathlib.Path, nodes: int = 1):
    """Starts a cluster of `nodes` in `state` with scripts/slurm/start.sh; returns its
    slurm.conf, or, for several nodes where namespaces cannot be made, start.sh's reason."""
    proc = subprocess.run(["bash", str(START), "--nodes", str(nodes), str(state)], capture_output=True, text=True,
                          timeout=120)
    if nodes > 1 and proc.returncode == NO_NAMESPACES:
        return proc.stderr.strip()
    if proc.returncode != 0:
        pytest.fail(f"scripts/slurm/start.sh --nodes {nodes} {state} exited {proc.returncode}:\n{proc.stderr}",
                    pytrace=False)
    return state / "slurm.conf"


def stop_cluster(state: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(STOP), str(state)], capture_output=True, text=True, timeout=120)
