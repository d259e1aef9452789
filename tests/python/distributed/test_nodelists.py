"""The table of compressed Slurm node lists (tests/fixtures/slurm_nodelists.json) against
Slurm itself: `scontrol show hostnames` expands each list the table gives hosts for to
exactly those hosts, so that the trainer's own parsing, which the C++ test
LaunchEnv.SlurmNodeListsFromTheTable holds to the same table, agrees with Slurm."""
import json
import os
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.skipif(shutil.which("scontrol") is None,
                                reason="no scontrol on the PATH (bash scripts/setup.sh --slurm installs it)")


def test_scontrol_expands_every_list_of_the_table_as_it_says(repo_root, tmp_path):
    table = json.loads((repo_root / "tests" / "fixtures" / "slurm_nodelists.json").read_text())["lists"]
    # scontrol reads a configuration before anything else; expanding a list asks no daemon.
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=lists\nSlurmctldHost=localhost\nNodeName=localhost CPUs=1\n"
                    "PartitionName=p Nodes=localhost\n")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    checked = 0
    for row in table:
        if "hosts" not in row or row.get("beyond_slurm"):
            continue
        out = subprocess.run(["scontrol", "show", "hostnames", row["list"]], env=env, capture_output=True, text=True,
                             timeout=30)
        assert out.returncode == 0 and out.stdout.split() == row["hosts"], (row, out.stdout, out.stderr)
        checked += 1
    assert checked >= 25  # the table's lists, not a handful of them
