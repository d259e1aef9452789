"""`xsagpt sweep --slurm --submit` against the local Slurm (the slurm_cluster fixture) where
what it submits is awkward: paths that sbatch must read quoted, a path no batch script can
carry, and an sbatch that refuses a later array after the first was queued."""
import json

from slurm_ladder import ladder_file, sbatch_lines

LOCAL = {"time": "10:00", "signal_s": 30, "extra": ["--overcommit"]}


def test_a_space_and_a_percent_in_out_dir_reach_sbatch_as_written(slurm_cluster, tmp_path, shards, xsagpt):
    """Unquoted, sbatch read `--chdir=/a b` as two directives and refused the script; a '%'
    in --output would have been read as a file name pattern."""
    d = tmp_path / "my runs 100%"
    d.mkdir()
    spec = ladder_file(d, shards, LOCAL)
    xsagpt("sweep", "-c", spec, "--slurm", cwd=d)
    slurm = d / "sweep" / "slurm"
    for script in ("array-0.sh", "array-1.sh", "summary.sh"):
        lines = sbatch_lines(slurm / script)
        assert lines["--chdir"] == str(d)
        assert lines["--output"].startswith(str(slurm / "logs").replace("%", "%%") + "/%x-")
        check = slurm_cluster.run("sbatch", "--test-only", slurm / script, check=False)
        assert check.returncode == 0, (script, check.stderr)


def test_a_newline_in_out_dir_is_refused_before_anything_is_written(tmp_path, shards, xsagpt):
    """A newline in a comment or #SBATCH line would end it, and the rest run as a command."""
    spec = ladder_file(tmp_path, shards, LOCAL)
    data = json.loads(spec.read_text())
    data["out_dir"] = str(tmp_path / "a\ntouch injected\n#")
    spec.write_text(json.dumps(data))
    proc = xsagpt("sweep", "-c", spec, "--slurm", check=False)
    assert proc.returncode == 2, proc.stderr
    assert "out_dir's log folder" in proc.stderr and "holds a control character" in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.json", "ladder.json"]


def test_sbatch_refusing_a_later_array_cancels_the_arrays_already_queued(slurm_cluster, tmp_path, shards, xsagpt):
    """The second rung's partition does not exist, which sbatch alone can tell: the first
    array, already queued, is cancelled, no summary job is submitted, and the refusal's
    exit status says that nothing of the sweep is queued."""
    spec = ladder_file(tmp_path, shards, LOCAL, rung2_slurm={"ntasks_per_node": 2, "partition": "nosuchpartition"})
    proc = xsagpt("sweep", "-c", spec, "--slurm", "--submit", env=slurm_cluster.env, check=False, timeout=120)
    assert proc.returncode == 2, proc.stderr
    first = proc.stdout.split("submitted array job ")[1].split()[0]
    assert "array-1.sh" not in proc.stdout and "summary job" not in proc.stdout, proc.stdout
    assert "array-1.sh failed" in proc.stderr and f"cancelled the 1 array job(s) submitted before it ({first})" in \
        proc.stderr, proc.stderr
    name = sbatch_lines(tmp_path / "sweep" / "slurm" / "array-0.sh")["--job-name"]
    # A cancelled job leaves squeue once it has ended; none of the sweep's waits or runs.
    states = slurm_cluster.run("squeue", "--noheader", "--array", f"--name={name}", "--states=all",
                               "--format=%i %T").stdout.split("\n")
    assert all(s.split()[1] in {"CANCELLED", "COMPLETING"} for s in states if s.strip()), states
