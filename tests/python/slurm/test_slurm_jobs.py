"""A sweep's points as Slurm jobs on a real local Slurm (the slurm_cluster fixture), not a
mock. One module-wide scenario, two sweeps submitted side by side so that their waits
overlap (this suite's time budget):
- the ladder (2 variants x 2 rungs x 2 seeds, its second rung at 2 Gloo ranks: one task
  on each of two nodes where the cluster has them, else both on its one) with
  `--slurm --submit`, 2 tasks at a time. Every task is held just after its step-2
  checkpoint (util/test_stop.h); the first held task of the second rung is requeued with
  `scontrol requeue`, the first other held task cancelled and then submitted again by the
  same `--slurm --submit`, the others let go. Its final losses equal the serial run's
  (each point in one process or 2 ranks, as its job) bit for bit;
- a sweep whose jobs have a 1-minute limit: a held task is let go only once the
  limit's USR2 is pending for it, so it checkpoints, requeues itself and finishes; its
  other point diverges, and the summary job's report names it.
Each wait has its own time limit."""
import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from slurm_ladder import final_losses, ladder_file, point_names, sbatch_lines

HOLD = "train:checkpoint-saved-2"  # every point checkpoints at step 2 of 6
USR2 = 1 << (signal.SIGUSR2 - 1)


def held(sweep_file):
    """This sweep's xsagpt processes held at the stop point: [(pid, array job, task, pending signals)]."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if state != "T":
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if str(sweep_file).encode() not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            with open(f"/proc/{pid}/status") as f:
                pending = 0
                for line in f:
                    if line.startswith(("SigPnd:", "ShdPnd:")):
                        pending |= int(line.split()[1], 16)
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        out.append((int(pid), env[b"SLURM_ARRAY_JOB_ID"].decode(), int(env[b"SLURM_ARRAY_TASK_ID"]), pending))
    return out


def terminate(sweep_file, job, task):
    """SIGTERM to every held rank of one array task (pending until it is continued)."""
    for pid, j, t, _ in held(sweep_file):
        if (j, t) == (job, task):
            os.kill(pid, signal.SIGTERM)


def queued(cluster, job_name):
    """This sweep's jobs still in the queue (arrays' tasks and the summary job)."""
    out = cluster.run("squeue", "--noheader", "--array", "--format=%j %i %T").stdout.split("\n")
    return [l for l in out if l.startswith(job_name)]


def job_name(sweep_dir):
    return sbatch_lines(sweep_dir / "slurm" / "array-0.sh")["--job-name"]


def task_log(sweep_dir, task):
    return "".join(p.read_text() for p in sorted((sweep_dir / "slurm" / "logs").glob(f"*_{task}.out")))


def serial(xsagpt, cluster, binary, spec, points_at_2_ranks=(), failing=(), nodes=1):
    """The serial reference: each point in one process, or under `srun -n 2` (on `nodes`
    nodes) where its job has 2 ranks; the points in `failing` must fail."""
    n = len([l for l in xsagpt("sweep", "-c", spec, "--dry-run").stdout.splitlines()
             if l.startswith("  ") and "attention=" in l])
    for k in range(n):
        if k in points_at_2_ranks:
            cluster.run("srun", "-N", nodes, "-n", "2", "--overcommit", "--time=5", binary, "sweep", "-c", spec,
                        "--point", k, timeout=120)
        else:
            proc = xsagpt("sweep", "-c", spec, "--point", k, check=False)
            assert proc.returncode == (1 if k in failing else 0), proc.stderr


def release_on_usr2(sweep_file, released, stop):
    """Lets each held run of the sweep go on once its time limit's USR2 is pending (it then
    checkpoints and exits 3), until `stop`; `released` holds the pids let go."""
    while not stop.is_set():
        for pid, job, task, pending in held(sweep_file):
            if pending & USR2 and pid not in released:
                released.add(pid)
                os.kill(pid, signal.SIGCONT)
        stop.wait(0.2)


def poll_status(xsagpt, spec, index, env, timeout=60):
    """Waits until --status no longer calls point `index` running."""
    deadline = time.monotonic() + timeout
    while True:
        line = next(l for l in xsagpt("sweep", "-c", spec, "--status", env=env).stdout.splitlines()
                    if l.split()[:1] == [str(index)])
        if line.split()[1] != "running":
            return
        assert time.monotonic() < deadline, line
        time.sleep(0.5)


@pytest.fixture(scope="module")
def scenario(slurm_cluster, tmp_path_factory, shards, xsagpt, build_dir):
    cluster = slurm_cluster
    d = tmp_path_factory.mktemp("slurmjobs")
    local = {"time": "10:00", "array_limit": 2, "signal_s": 30, "extra": ["--overcommit"]}
    (d / "ladder").mkdir(), (d / "ref").mkdir(), (d / "limit").mkdir(), (d / "limitref").mkdir()
    nodes = min(2, len(cluster.nodes))
    rung2 = {"nodes": 2, "ntasks_per_node": 1} if nodes == 2 else None
    ladder = ladder_file(d / "ladder", shards, local, rung2_slurm=rung2)
    ladder_ref = ladder_file(d / "ref", shards, local, rung2_slurm=rung2)
    # One minute, the signal asked 50 s before the limit; one point at a rate that diverges.
    short = {"time": "1", "signal_s": 50, "extra": ["--overcommit"]}
    limit = ladder_file(d / "limit", shards, short, name="limit-lr.json")
    limit_ref = ladder_file(d / "limitref", shards, short, name="limit-lr.json")
    for f in (limit, limit_ref):
        data = json.loads(f.read_text())
        del data["ladder"]
        data["variants"] = {"sa": {"model.attention": "sa"}}
        data["grid"] = {"train.lr": [1e-2, 1e9]}
        # Held at step 2, as the ladder's points, then 28 steps more: the limit's USR2, which comes
        # as Slurm lets it go on, lands long before its end.
        data["set"] = ["train.max_steps=30", "train.ckpt_interval=2", "train.keep_checkpoints=2"]
        f.write_text(json.dumps(data))

    env = {**cluster.env, "XSAGPT_TEST_STOP_AT": HOLD}
    submitted = {}
    for name, spec in (("limit", limit), ("ladder", ladder)):
        submitted[name] = xsagpt("sweep", "-c", spec, "--slurm", "--submit", env=env, timeout=120).stdout
    names = {"ladder": job_name(d / "ladder" / "sweep"), "limit": job_name(d / "limit" / "sweep")}
    # The limit's held task is let go once its USR2 is pending, from a thread: the serial
    # references below may outlast the signal's lead on a loaded machine.
    released, stop = set(), threading.Event()
    watcher = threading.Thread(target=release_on_usr2, args=(limit, released, stop), daemon=True)
    watcher.start()
    # The serial references while the jobs wait for their signal or their requeue.
    binary = build_dir / "xsagpt"
    serial(xsagpt, cluster, binary, ladder_ref, points_at_2_ranks=(4, 5, 6, 7), nodes=nodes)
    serial(xsagpt, cluster, binary, limit_ref, failing=(1,))

    acted = {"requeued": None, "cancelled": None}
    done_pids = set()
    resubmitted = None
    deadline = time.monotonic() + 240
    while True:
        assert time.monotonic() < deadline, (queued(cluster, names["ladder"]), queued(cluster, names["limit"]))
        for pid, job, task, pending in held(ladder):
            if pid in done_pids:
                continue
            # Slurm's SIGCONT may let a held run go on before its SIGTERM lands (and finish, 6
            # steps being milliseconds): the SIGTERM is made pending first, so the run stops at
            # its next step as a requeued or cancelled run on a cluster does, mid-way.
            if acted["requeued"] is None and task >= 4:  # a task of the second rung, on 2 ranks
                acted["requeued"] = (job, task)
                terminate(ladder, job, task)
                cluster.run("scontrol", "requeue", f"{job}_{task}")
            elif acted["cancelled"] is None and (job, task) != acted["requeued"] and task < 4:
                acted["cancelled"] = (job, task)
                terminate(ladder, job, task)
                cluster.run("scancel", f"{job}_{task}")
            elif (job, task) not in (acted["requeued"], acted["cancelled"]):
                os.kill(pid, signal.SIGCONT)
            done_pids.add(pid)
        if not queued(cluster, names["ladder"]) and resubmitted is None:
            report_before = (d / "ladder" / "sweep" / "report.md").read_text()
            # The cancelled run, stopped by its second SIGTERM, left its point's lock behind. On
            # two nodes its holder ran on another host (n-01, not this one), whose pid no process
            # here may judge: the lock is free once its heartbeat is stale, as on a cluster. A
            # 5 s threshold for the resubmission and the job it submits.
            stale = {**cluster.env, "XSAGPT_POINT_LOCK_STALE_S": "5"}
            poll_status(xsagpt, ladder, acted["cancelled"][1], stale)
            resubmitted = xsagpt("sweep", "-c", ladder, "--slurm", "--submit", env=stale, timeout=120).stdout
        elif resubmitted is not None and not queued(cluster, names["ladder"]) and not queued(cluster, names["limit"]):
            break
        time.sleep(0.2)
    stop.set()
    watcher.join()
    again = xsagpt("sweep", "-c", ladder, "--slurm", "--submit", env=cluster.env, timeout=120).stdout
    order = point_names(xsagpt("sweep", "-c", ladder, "--dry-run").stdout)
    return {"d": d, "cluster": cluster, "nodes": nodes, "names": order, "ladder": ladder, "ladder_ref": ladder_ref,
            "limit": limit,
            "limit_ref": limit_ref, "submitted": submitted, "resubmitted": resubmitted, "again": again,
            "acted": acted, "report_before": report_before}


def test_ladder_as_slurm_jobs_equals_the_serial_run(scenario):
    s = scenario
    first = s["submitted"]["ladder"]
    assert "8 point(s): 0 done" in first and "8 to submit" in first
    assert re.search(r"submitted array job \d+ \(array-0\.sh\): rung d1: point\(s\) 0,1,2,3", first)
    assert re.search(r"submitted array job \d+ \(array-1\.sh\): rung d2: point\(s\) 4,5,6,7", first)
    assert re.search(r"submitted summary job \d+", first)
    got, want = final_losses(s["d"] / "ladder" / "sweep"), final_losses(s["d"] / "ref" / "sweep")
    assert len(want) == 8 and len(set(want.values())) == 8  # eight distinct runs to compare
    assert got == want  # bit for bit: the requeued and the cancelled point resumed exactly
    summary = json.loads((s["d"] / "ladder" / "sweep" / "summary.json").read_text())
    assert summary["points"] and all(p["status"] == "done" for p in summary["points"])
    # Each point trained by its job at its rank count: the second rung's on 2 ranks, the first's on one.
    assert "accumulation x 2 rank(s)" in task_log(s["d"] / "ladder" / "sweep", 5)
    assert "accumulation x 1 rank(s)" in task_log(s["d"] / "ladder" / "sweep", 2)
    if s["nodes"] == 2:  # one rank on each node, meeting at the first
        assert "host from the first host of SLURM_STEP_NODELIST=n-[01-02]" in task_log(s["d"] / "ladder" / "sweep", 5)


def test_a_requeued_and_a_cancelled_task_resume_from_their_checkpoints(scenario):
    s = scenario
    sweep = s["d"] / "ladder" / "sweep"
    (job, requeued), (_, cancelled) = s["acted"]["requeued"], s["acted"]["cancelled"]
    show = s["cluster"].run("scontrol", "show", "job", "-o", f"{job}_{requeued}").stdout
    assert re.search(r"\bRestarts=1\b", show) and "JobState=COMPLETED" in show, show
    assert re.search(r"resumed from \S+ at step [2-5]\b", task_log(sweep, requeued))
    # The cancel stays a cancel (the task did not requeue itself); the summary job, after
    # the arrays whatever their end, named the point as not done; the same command then
    # submitted it alone, and it resumed.
    name = s["names"][cancelled]
    assert re.search(r"ended by Slurm \(JobState=\w+, exit (3|143)\); not requeued", task_log(sweep, cancelled))
    assert f"- {name}: " in s["report_before"].split("## Points not done")[1]
    assert f"1 to submit" in s["resubmitted"] and re.search(rf"point\(s\) {cancelled}\n", s["resubmitted"])
    assert re.search(r"resumed from \S+ at step [2-5]\b", task_log(sweep, cancelled))
    # Everything done: the same command submits nothing, and says so.
    assert "8 point(s): 8 done" in s["again"] and "nothing to submit" in s["again"]


def test_a_time_limit_signal_checkpoints_requeues_and_finishes(scenario):
    s = scenario
    sweep = s["d"] / "limit" / "sweep"
    log = task_log(sweep, 0)
    assert re.search(r"stopped by signal 12 after step \d", log), log  # SIGUSR2, before the limit
    assert "interrupted (exit 3); requeueing" in log and re.search(r"resumed from \S+ at step \d", log)
    got, want = final_losses(sweep), final_losses(s["d"] / "limitref" / "sweep")
    assert list(want) == ["sa,train.lr=0.01"] and got == want


def test_the_summary_job_names_the_point_that_failed(scenario):
    sweep = scenario["d"] / "limit" / "sweep"
    summary = json.loads((sweep / "summary.json").read_text())
    status = {p["name"]: p["status"] for p in summary["points"]}
    failed = next(n for n in status if n != "sa,train.lr=0.01")
    assert status == {"sa,train.lr=0.01": "done", failed: "failed"}
    # Written by the summary job, which ran although a point had failed, and whose report names it, with why.
    logs = list((sweep / "slurm" / "logs").glob("*-summary-*.out"))
    assert len(logs) == 1, logs
    report = logs[0].read_text()
    assert re.search(rf"1 of 2 point\(s\) are not done and are left out of the summary: {re.escape(failed)} "
                     rf"\(failed: loss or gradient norm is not finite", report), report
    assert f"summary: {sweep / 'summary.json'}" in report
