"""`xsagpt sweep --slurm` without a scheduler: the batch scripts it writes (one job array
per shape, task ids the points' indices, each task its point under srun, requeueing
itself by its own id; the summary job), only the points not done in them; every
refusal by name before anything is written or submitted (no sbatch on the PATH, a bad
"slurm" key, a rank count the batch does not allow, a time limit shorter than the time
between checkpoints); and the dry run's cost on the cluster for the paper's ladder,
its side-by-side wall time checked against a schedule computed here."""
import json
import os
import re
import shutil
import subprocess

import pytest

from slurm_ladder import ladder_file, point_names, sbatch_lines

LOCAL = {"time": "10:00", "array_limit": 2, "signal_s": 30}


def no_slurm_path(tmp_path):
    """A PATH without Slurm's commands: only a folder holding bash."""
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    if not (d / "bash").exists():
        os.symlink(shutil.which("bash"), d / "bash")
    return str(d)


def test_scripts_hold_each_shapes_points_not_yet_done(tmp_path, shards, xsagpt):
    spec = ladder_file(tmp_path, shards, LOCAL)
    names = point_names(xsagpt("sweep", "-c", spec, "--dry-run").stdout)
    assert len(names) == 8 and all(n.split(",")[1] == f"rung=d{1 + i // 4}" for i, n in enumerate(names))
    # Written and printed without Slurm here: no sbatch needed to write scripts.
    env = {**os.environ, "PATH": no_slurm_path(tmp_path)}
    out = xsagpt("sweep", "-c", spec, "--slurm", env=env).stdout
    slurm = tmp_path / "sweep" / "slurm"
    assert sorted(p.name for p in slurm.glob("*.sh")) == ["array-0.sh", "array-1.sh", "summary.sh"]
    a0, a1 = sbatch_lines(slurm / "array-0.sh"), sbatch_lines(slurm / "array-1.sh")
    assert a0["--array"] == "0,1,2,3%2" and a1["--array"] == "4,5,6,7%2"
    assert a0["--ntasks-per-node"] == "1" and a1["--ntasks-per-node"] == "2"
    assert a0["--signal"] == "USR2@30" and a0["--time"] == "10:00" and a0["--job-name"] == a1["--job-name"]
    assert a0["--chdir"] == os.getcwd() and "--requeue" in a0
    text = (slurm / "array-1.sh").read_text()
    assert re.search(r"^srun .*/xsagpt sweep -c \S*ladder\.json --point-from-env SLURM_ARRAY_TASK_ID$", text, re.M)
    assert 'scontrol requeue "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"' in text
    assert "--summarize" in (slurm / "summary.sh").read_text()
    assert "8 point(s): 0 done" in out and f"sbatch --parsable {slurm}/array-0.sh" in out
    assert "sbatch --dependency=afterany:${job0%%;*}:${job1%%;*}" in out

    # Point 5 (second rung) done: the next scripts leave it out; the dry run's index is its task id.
    xsagpt("sweep", "-c", spec, "--point", "5")
    out = xsagpt("sweep", "-c", spec, "--slurm", env=env).stdout
    assert sbatch_lines(slurm / "array-1.sh")["--array"] == "4,6,7%2"
    assert sbatch_lines(slurm / "array-0.sh")["--array"] == "0,1,2,3%2"
    assert "8 point(s): 1 done" in out and "7 to submit" in out


def test_refusals_come_before_anything_is_written(tmp_path, shards, xsagpt):
    env = {**os.environ, "PATH": no_slurm_path(tmp_path)}
    cases = [
        ({}, ["--slurm", "--submit"], env, "--submit: no sbatch on the PATH"),
        ({"slurm_extra": {"gpu": 1}}, ["--slurm"], None, "slurm: unknown key 'gpu'"),
        ({"slurm_extra": {"array_limit": "2"}}, ["--slurm"], None, "slurm.array_limit: expected an integer"),
        # 3 ranks: 256 tokens per step are not a whole number of 3 x 128-token micro-batches.
        ({"rung2": {"ntasks_per_node": 3}}, ["--slurm"], None,
         "slurm: the jobs of rung d2 (1 node(s) x 3 task(s) = 3 rank(s))"),
        # 2 ranks with batch_tokens 0: steps that double with the ranks are another run than --summarize reads.
        ({"set": ["train.batch_tokens=0"]}, ["--slurm"], None,
         "resolves to another run at 2 ranks than in one process"),
        # A job of 1 min (less the signal's 30 s) against 10 min to the first checkpoint (the estimate's overhead).
        ({"slurm_extra": {"time": "1"}, "estimate": {"device": "H100", "mfu": 0.4, "overhead_s": 600}},
         ["--slurm"], None, "time 1 less signal_s 30 leaves 30.0 s per job, shorter than point"),
        ({}, ["--submit"], None, "--submit: submits what --slurm writes; give both"),
        ({}, ["--slurm", "--point", "0"], None, "give one at most"),
    ]
    for i, (change, args, run_env, message) in enumerate(cases):
        d = tmp_path / f"case{i}"
        d.mkdir()
        extra = {"set": change["set"]} if "set" in change else {}
        spec = ladder_file(d, shards, {**LOCAL, **change.get("slurm_extra", {})}, rung2_slurm=change.get("rung2"),
                           **extra)
        if "estimate" in change:
            data = json.loads(spec.read_text())
            data["ladder"]["estimate"] = change["estimate"]
            spec.write_text(json.dumps(data))
        proc = xsagpt("sweep", "-c", spec, *args, check=False, env=run_env)
        assert proc.returncode == 2 and message in proc.stderr, (change, args, proc.stderr)
        assert not (d / "sweep").exists(), change
    no_section = ladder_file(tmp_path, shards, LOCAL, rung2_slurm={}, name="plain.json")
    data = json.loads(no_section.read_text())
    del data["slurm"], data["ladder"]["rungs"][1]["slurm"]
    no_section.write_text(json.dumps(data))
    proc = xsagpt("sweep", "-c", no_section, "--slurm", check=False)
    assert proc.returncode == 2 and 'has no "slurm" section' in proc.stderr, proc.stderr


def packed(tasks, nodes, limit):
    """Wall time of (seconds, nodes, array) tasks on `nodes` nodes, longest first, each
    started as soon as it fits and its array runs fewer than `limit`: the schedule the
    dry run states, computed here independently."""
    waiting = sorted(tasks, key=lambda t: -t[0])
    running, now, free, wall = [], 0.0, nodes, 0.0
    while waiting:
        for t in list(waiting):
            if t[1] <= free and sum(1 for r in running if r[2] == t[2]) < limit:
                waiting.remove(t)
                free -= t[1]
                running.append((now + t[0], t[1], t[2]))
                wall = max(wall, now + t[0])
        if not waiting:
            break
        running.sort()
        end, n, _ = running.pop(0)
        now, free = end, free + n
    return wall


def test_dry_run_of_the_paper_ladder_prints_gpu_hours_and_side_by_side_time(repo_root, xsagpt):
    out = xsagpt("sweep", "-c", repo_root / "configs/sweeps/ladder-paper.json", "--dry-run").stdout
    # The one-H100 total the ladder's estimate prints, in days.
    one_gpu_days = float(re.search(r"^total: 18 points, \S+ training FLOPs, about ([\d.]+) days", out, re.M).group(1))
    rows = re.findall(r"^  (\S+,rung=paper-(\S+?),\S+)\s+(\d) +(\d+)\s+\S+ \S+\s+([\d.]+)$", out, re.M)
    assert len(rows) == 18, out
    ranks = {rung: int(r) for _, rung, _, r, _ in rows}
    assert ranks == {"0.7b": 8, "1.4b": 8, "2.7b": 16}  # 1 node x 8, the 2.7B rung's 2 nodes
    assert {rung: a for _, rung, a, _, _ in rows} == {"0.7b": "0", "1.4b": "0", "2.7b": "1"}  # arrays by shape
    total = float(re.search(r"^on the cluster: (\d+) GPU-hours", out, re.M).group(1))
    assert total == pytest.approx(sum(float(h) for *_, h in rows), abs=1)
    # Linear scaling: a GPU-hour is one GPU's hour, whatever the job's size (plus 10 s a point per GPU).
    assert total / 24 == pytest.approx(one_gpu_days, rel=0.01)
    wall, serial = (float(x) for x in re.search(
        r"about ([\d.]+) days with the arrays side by side on 8 node\(s\).*against ([\d.]+) days with one job",
        out).groups())
    # Each point's time: its GPU-hours over its job's GPUs (8 a node, one per rank).
    tasks = [(float(h) / int(r), 2 if rung == "2.7b" else 1, a) for _, rung, a, r, h in rows]
    assert serial == pytest.approx(sum(t for t, _, _ in tasks) / 24, abs=0.06)
    assert wall == pytest.approx(packed(tasks, 8, 6) / 24, abs=0.06)
    assert wall < serial / 4  # the arrays run side by side, not one after another


@pytest.mark.parametrize("rc, requeued", [(3, True), (129, True), (130, True), (140, True), (143, True),
                                          (0, False), (1, False), (2, False), (137, False)])
def test_a_task_requeues_itself_on_every_code_a_stop_signal_gives(tmp_path, shards, xsagpt, rc, requeued):
    """The array script as written, its srun and scontrol stand-ins on the PATH: srun ends as the
    point would (3 when it caught the signal; 128 + HUP, INT, USR2 or TERM when a signal ended
    it before its handlers or a second one did), the job still RUNNING."""
    spec = ladder_file(tmp_path, shards, LOCAL)
    xsagpt("sweep", "-c", spec, "--slurm", env={**os.environ, "PATH": no_slurm_path(tmp_path)})
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    (bin_dir / "srun").write_text(f"#!/bin/bash\nexit {rc}\n")
    (bin_dir / "scontrol").write_text(f"#!/bin/bash\necho \"$*\" >> {calls}\n"
                                      "[ \"$1\" = show ] && echo 'JobId=7 JobState=RUNNING Reason=None'\nexit 0\n")
    for tool in ("srun", "scontrol"):
        (bin_dir / tool).chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_ID": "7", "SLURM_ARRAY_JOB_ID": "6",
           "SLURM_ARRAY_TASK_ID": "2"}
    proc = subprocess.run(["bash", str(tmp_path / "sweep" / "slurm" / "array-0.sh")], env=env, capture_output=True,
                          text=True, timeout=30)
    made = calls.read_text().splitlines() if calls.exists() else []
    # Before: 129, 130 and 140 ended the task for good, its point left half done until a new --submit.
    assert ("requeue 6_2" in made) == requeued, (proc.stdout, made)
    assert proc.returncode == (0 if requeued else rc)
