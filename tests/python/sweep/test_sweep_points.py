"""Every sweep point as a unit any scheduler can run, end to end with the real binary on
the CPU: `--point` by index and by name and `--point-from-env`, bad choices refused by
name before anything is written; processes sharing one sweep directory (two on one
point: one trains, the other names it; two whole sweeps: each point trained once); a
lock left by a killed process taken over; `--status`; `--summarize` before and after
every point is done, equal to the serial sweep's; and the exit status of a sweep
stopped by a signal (3), also one at start-up, continued by the same command."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from tinyrun import write_run_config

VARIANTS = {"sa": {}, "xsa": {"model.attention": "xsa"}}
STEPS = 6
# Its heartbeat 1000 s before (and the test a moment later): a stale holder's line.
STALE = re.compile(r"its last heartbeat is 10\d\d s old \(stale after 60 s\)")
NAMES = ["sa,train.seed=1", "xsa,train.seed=1", "sa,train.seed=2", "xsa,train.seed=2"]  # the dry run's order


@pytest.fixture(scope="module")
def base(tmp_path_factory, markov_shards):
    d = tmp_path_factory.mktemp("points")
    return write_run_config(d / "base.json", markov_shards, d / "unused", model={"attention": "sa"},
                            max_steps=STEPS, eval_interval=3, ckpt_interval=0, log_interval=1)


def spec_file(tmp_path, base, steps=None, name="s.json"):
    spec = {"base": str(base), "variants": VARIANTS, "baseline": "sa", "grid": {"train.seed": [1, 2]},
            "out_dir": str(tmp_path / "sw")}
    if steps:
        spec["set"] = [f"train.max_steps={steps}", "train.ckpt_interval=1"]
    path = tmp_path / name
    path.write_text(json.dumps(spec))
    return path


def done(sw):
    return sorted(p.name for p in sw.iterdir() if (p / "done.json").exists())


def trained(stderr, name):
    """Whether a sweep's log says it started training point `name` (its tag line)."""
    return any(l.rstrip().endswith(f"] {name}") for l in stderr.splitlines())


def test_point_by_index_and_by_name_trains_that_point_alone(tmp_path, base, xsagpt):
    spec = spec_file(tmp_path, base)
    dry = xsagpt("sweep", "-c", spec, "--dry-run").stdout
    assert [l.split()[0] for l in dry.splitlines() if l.startswith("  ") and "attention=" in l] == NAMES
    first = xsagpt("sweep", "-c", spec, "--point", "2")
    assert done(tmp_path / "sw") == ["sa,train.seed=2"] and trained(first.stderr, "sa,train.seed=2")
    assert not (tmp_path / "sw" / "summary.json").exists()  # a point writes no summary: --summarize does
    xsagpt("sweep", "-c", spec, "--point", "xsa,train.seed=1")
    assert done(tmp_path / "sw") == ["sa,train.seed=2", "xsa,train.seed=1"]
    again = xsagpt("sweep", "-c", spec, "--point", "2")
    assert "finished, skipping" in again.stderr and not trained(again.stderr, "sa,train.seed=2")


def test_point_from_env_and_bad_choices_refused_by_name(tmp_path, base, xsagpt):
    spec = spec_file(tmp_path, base)
    env = dict(os.environ, SLURM_ARRAY_TASK_ID="3")
    xsagpt("sweep", "-c", spec, "--point-from-env", "SLURM_ARRAY_TASK_ID", env=env)
    assert done(tmp_path / "sw") == ["xsa,train.seed=2"]
    lock = json.loads(next((tmp_path / "sw" / ".locks" / "xsa,train.seed=2").glob("*.json")).read_text())
    assert lock["released"] is True and lock["pid"] > 0

    (tmp_path / "fresh").mkdir()
    fresh = spec_file(tmp_path / "fresh", base)
    cases = [
        (["--point", "4"], {}, "--point: point index 4 is out of range: the sweep has 4 point(s), 0 to 3"),
        (["--point", "sa"], {}, "--point: expected a point's index (0 to 3) or its name as --dry-run lists it, "
                                'got "sa"'),
        (["--point-from-env", "JOB_COMPLETION_INDEX"], {},
         "--point-from-env JOB_COMPLETION_INDEX: the environment variable JOB_COMPLETION_INDEX is not set"),
        (["--point-from-env", "JOB_COMPLETION_INDEX"], {"JOB_COMPLETION_INDEX": "1x"},
         '--point-from-env JOB_COMPLETION_INDEX: expected a point index (0 to 3) in JOB_COMPLETION_INDEX, got "1x"'),
        (["--point-from-env", "JOB_COMPLETION_INDEX"], {"JOB_COMPLETION_INDEX": "-1"}, 'got "-1"'),
        (["--point-from-env", "JOB_COMPLETION_INDEX"], {"JOB_COMPLETION_INDEX": "9"},
         "--point-from-env JOB_COMPLETION_INDEX (JOB_COMPLETION_INDEX=9): point index 9 is out of range"),
        (["--point", "1", "--point-from-env", "X"], {}, "--point and --point-from-env: give one, not both"),
        (["--point", "1", "--status"], {}, "give one at most"),
    ]
    env = {k: v for k, v in os.environ.items() if k != "JOB_COMPLETION_INDEX"}
    for args, extra, message in cases:
        proc = xsagpt("sweep", "-c", fresh, *args, check=False, env={**env, **extra})
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
    assert not (tmp_path / "fresh" / "sw").exists()


def test_two_processes_on_one_point_one_trains_the_other_names_it(tmp_path, base, xsagpt, spawn):
    spec = spec_file(tmp_path, base)
    # The first holds point 0's lock, stopped just after taking it ...
    first = spawn("sweep", "-c", spec, "--point", "0", stop_at="sweep:point-locked")
    # ... and --status, read-only, says who holds it.
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    status = xsagpt("sweep", "-c", spec, "--status").stdout.splitlines()
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert status[0].startswith(f"0 running sa,train.seed=1  pid {first.pid} on host {os.uname().nodename}")
    assert f"step - of {STEPS}, last heartbeat" in status[0]
    assert [l.split()[1] for l in status[1:4]] == ["pending"] * 3
    assert status[4] == "4 point(s): 0 done, 1 running, 3 pending, 0 failed, 0 invalid"

    second = xsagpt("sweep", "-c", spec, "--point", "0", check=False)
    # Before: the second process waited for nothing and trained the same point into the same directory.
    assert second.returncode == 1, second.stderr
    assert (f"skipped, not recorded as failed: point sa,train.seed=1 is held by pid {first.pid} on host "
            f"{os.uname().nodename}") in second.stderr
    assert not trained(second.stderr, "sa,train.seed=1")
    first.send_signal(signal.SIGCONT)
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0 and trained(err, "sa,train.seed=1"), err
    assert done(tmp_path / "sw") == ["sa,train.seed=1"]


def test_two_whole_sweeps_on_one_directory_train_each_point_once(tmp_path, base, xsagpt, spawn):
    spec = spec_file(tmp_path, base)
    first = spawn("sweep", "-c", spec, "--no-plot", stop_at="sweep:point-locked")  # holds point 0
    second = xsagpt("sweep", "-c", spec, "--no-plot", check=False)
    assert second.returncode == 1, second.stderr  # point 0 was held by the first
    assert "1 of 4 point(s) were in use by another process and did not run: sa,train.seed=1" in second.stderr
    first.send_signal(signal.SIGCONT)
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert done(tmp_path / "sw") == sorted(NAMES)
    # Each point's training was started by exactly one of the two.
    assert [trained(err, n) for n in NAMES] == [True, False, False, False]
    assert [trained(second.stderr, n) for n in NAMES] == [False, True, True, True]
    assert err.count("finished, skipping") == 3
    summary = json.loads((tmp_path / "sw" / "summary.json").read_text())
    assert [p["status"] for p in summary["points"]] == ["done"] * 4


def start_long_sweep(tmp_path, base, spawn, *args):
    """A whole sweep (or `args`, e.g. --point 0) whose first point trains for ever, once it has a checkpoint."""
    spec = spec_file(tmp_path, base, steps=100000)
    proc = spawn("sweep", "-c", spec, "--no-plot", *args)
    ckpts = tmp_path / "sw" / NAMES[0] / "checkpoints"
    t0 = time.time()
    while len(list(ckpts.glob("step_*.pt"))) < 2:
        assert proc.poll() is None and time.time() - t0 < 120, proc.communicate()
        time.sleep(0.01)
    return spec, proc


def test_a_lock_left_by_a_killed_point_is_taken_over_and_the_point_resumes(tmp_path, base, xsagpt, spawn):
    spec, proc = start_long_sweep(tmp_path, base, spawn, "--point", "0")
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    lock_dir = tmp_path / "sw" / ".locks" / NAMES[0]
    [left] = lock_dir.glob("*.json")
    assert json.loads(left.read_text())["released"] is False and json.loads(left.read_text())["pid"] == proc.pid
    status = xsagpt("sweep", "-c", spec, "--status").stdout.splitlines()[0]
    assert status.startswith("0 pending sa,train.seed=1  step ")
    assert f"its holder, pid {proc.pid} on host" in status and f"its process (pid {proc.pid}) is gone" in status
    # Its process is gone from this machine: the next process takes the point over at once and resumes it.
    again = spawn("sweep", "-c", spec, "--no-plot")
    t0 = time.time()
    while not any(json.loads(f.read_text())["pid"] == again.pid for f in lock_dir.glob("*.json")):
        assert again.poll() is None and time.time() - t0 < 120, again.communicate()
        time.sleep(0.01)
    again.send_signal(signal.SIGTERM)
    _, err = again.communicate(timeout=120)
    assert again.returncode == 3, err
    assert (f"taking the point over from pid {proc.pid} on host {os.uname().nodename}" in err and
            f"its process (pid {proc.pid}) is gone from this machine" in err)
    assert "resumed from " in err, err


def test_a_lock_whose_heartbeat_is_stale_is_taken_over(tmp_path, base, xsagpt):
    spec = spec_file(tmp_path, base)
    lock_dir = tmp_path / "sw" / ".locks" / NAMES[1]
    lock_dir.mkdir(parents=True)
    # A holder on another machine, beating a moment ago.
    holder = {"host": "node-b", "pid": 31337, "job": "812_1", "token": "x", "since": "2026-01-01T00:00:00Z",
              "heartbeat": time.time(), "released": False}
    (lock_dir / "000000000005.json").write_text(json.dumps(holder))
    env = dict(os.environ, XSAGPT_POINT_LOCK_STALE_S="60")
    busy = xsagpt("sweep", "-c", spec, "--point", "1", check=False, env=env)
    assert busy.returncode == 1
    assert f"point {NAMES[1]} is held by pid 31337 on host node-b (job 812_1)" in busy.stderr
    # It stopped beating (its job died): its file last written 1000 s ago, by the file system's clock.
    os.utime(lock_dir / "000000000005.json", (time.time() - 1000, time.time() - 1000))
    status = xsagpt("sweep", "-c", spec, "--status", env=env).stdout.splitlines()[1]
    assert status.startswith(f"1 pending {NAMES[1]}  not started; its holder, pid 31337 on host node-b")
    assert STALE.search(status), status
    took = xsagpt("sweep", "-c", spec, "--point", "1", env=env)
    assert "taking the point over from pid 31337 on host node-b (job 812_1), since 2026-01-01T00:00:00Z: its last " \
        "heartbeat is 1" in took.stderr and STALE.search(took.stderr), took.stderr
    assert done(tmp_path / "sw") == [NAMES[1]]
    assert [p.name for p in lock_dir.iterdir()] == ["000000000006.json"]
    bad = xsagpt("sweep", "-c", spec, "--point", "1", check=False, env=dict(env, XSAGPT_POINT_LOCK_STALE_S="soon"))
    assert bad.returncode == 2 and 'XSAGPT_POINT_LOCK_STALE_S: expected a positive number of seconds, got "soon"' \
        in bad.stderr


def held_at_checkpoint(tmp_path, base, spawn, env):
    """Point 0 of a long sweep, on a 1 s staleness threshold, stopped (SIGSTOP) just after its
    checkpoint of step 3 and held past the threshold: its lock folder and its one generation file."""
    spec = spec_file(tmp_path, base, steps=100000)
    proc = spawn("sweep", "-c", spec, "--no-plot", "--point", "0", stop_at="train:checkpoint-saved-3", env=env)
    lock_dir = tmp_path / "sw" / ".locks" / NAMES[0]
    [mine] = lock_dir.glob("*.json")
    time.sleep(1.5)
    assert time.time() - mine.stat().st_mtime > 1.2  # its heartbeat stopped with it
    return spec, proc, lock_dir, mine


def run_files(run):
    """Each file of a run directory with its size and stamp (.lock aside: whoever asks writes its holder)."""
    return {str(p.relative_to(run)): (p.stat().st_size, p.stat().st_mtime_ns) for p in run.rglob("*")
            if p.is_file() and p.name != ".lock"}


def test_a_holder_paused_past_the_threshold_keeps_its_point_while_it_holds_its_run(tmp_path, base, xsagpt, spawn):
    env = {"XSAGPT_POINT_LOCK_STALE_S": "1"}
    spec, proc, lock_dir, mine = held_at_checkpoint(tmp_path, base, spawn, env)
    before = {p.name: p.read_bytes() for p in lock_dir.iterdir()}
    taker = xsagpt("sweep", "-c", spec, "--point", "0", check=False, env=dict(os.environ, **env))
    # Before: the taker took the lock over, found the run directory busy and released the lock: the
    # paused holder then trained on with no lock, --status said pending, --submit would submit it again.
    assert taker.returncode == 1, taker.stderr
    assert f"point {NAMES[0]} is held by pid {proc.pid} on host" in taker.stderr
    assert "still holds its run directory" in taker.stderr and not trained(taker.stderr, NAMES[0])
    assert {p.name: p.read_bytes() for p in lock_dir.iterdir()} == before
    status = xsagpt("sweep", "-c", spec, "--status", env=dict(os.environ, **env)).stdout.splitlines()[0]
    assert status.startswith(f"0 running {NAMES[0]}  pid {proc.pid} on host "), status
    assert "step 3 of 100000" in status and "still holds its run directory" in status
    # Continued, it beats again and trains on, its point never lost.
    stamp = mine.stat().st_mtime_ns
    proc.send_signal(signal.SIGCONT)
    t0 = time.time()
    while mine.stat().st_mtime_ns == stamp:
        assert proc.poll() is None and time.time() - t0 < 60
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3 and "lost the point" not in err, err


def test_a_frozen_holder_whose_point_was_taken_over_writes_nothing_more_and_says_so(tmp_path, base, xsagpt, spawn):
    env = {"XSAGPT_POINT_LOCK_STALE_S": "1"}
    spec, proc, lock_dir, mine = held_at_checkpoint(tmp_path, base, spawn, env)
    # Taken over meanwhile by another machine (whose NFS mount has no locks, so the run directory
    # did not stop it): its generation above the holder's, the ones below removed, beating.
    taker = {"host": "node-b", "pid": 31337, "job": "9_0", "token": "b", "since": "2026-01-01T00:00:00Z",
             "heartbeat": time.time(), "released": False}
    theirs = lock_dir / f"{int(mine.stem) + 1:012d}.json"
    theirs.write_text(json.dumps(taker))
    mine.unlink()
    run = tmp_path / "sw" / NAMES[0]
    before = run_files(run)
    assert "checkpoints/step_00000003.pt" in before
    status = xsagpt("sweep", "-c", spec, "--status", env=dict(os.environ, **env)).stdout.splitlines()[0]
    assert status.startswith(f"0 running {NAMES[0]}  pid 31337 on host node-b (job 9_0)"), status
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=120)
    # Before: it trained on into the run, its metrics and checkpoints beside the new holder's.
    assert proc.returncode == 1, err
    assert "lost the point: its lock" in err and "now names pid 31337 on host node-b" in err
    assert "this process lost the point" in err
    assert run_files(run) == before
    assert sorted(p.name for p in lock_dir.iterdir()) == [theirs.name] and json.loads(theirs.read_text()) == taker


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR2])
def test_a_sweep_stopped_by_a_signal_exits_3_and_the_same_command_continues(tmp_path, base, xsagpt, spawn, sig):
    spec, proc = start_long_sweep(tmp_path, base, spawn)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    # Before: exit status 0, a finished sweep's, with no point done (and SIGUSR2 killed it outright).
    assert proc.returncode == 3, err
    assert "sweep interrupted; run the same command again to continue" in err and not done(tmp_path / "sw")
    status = xsagpt("sweep", "-c", spec, "--status").stdout.splitlines()[0]
    assert status.startswith("0 pending sa,train.seed=1  step ") and "resumes from its last checkpoint" in status


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR2, signal.SIGINT, signal.SIGHUP])
def test_a_signal_at_start_up_exits_3_interrupted_and_trains_nothing(tmp_path, base, spawn, sig):
    spec = spec_file(tmp_path, base)
    for args in (("--point", "0"), ()):
        # Held at main()'s start, before the handlers are installed: the signal waits for them.
        proc = spawn("sweep", "-c", spec, "--no-plot", *args, stop_at="main:stop-signals-blocked")
        proc.send_signal(sig)
        proc.send_signal(signal.SIGCONT)
        _, err = proc.communicate(timeout=120)
        # Before: the default action's exit 128 + the signal (143, 140, 130, 129), which the batch
        # script did not all requeue.
        assert proc.returncode == 3, (args, err)
        assert "sweep interrupted; run the same command again to continue" in err
        assert not any(trained(err, n) for n in NAMES) and not done(tmp_path / "sw")


def test_summarize_names_what_is_not_done_and_once_all_is_done_equals_the_serial_sweep(tmp_path, base, xsagpt):
    (tmp_path / "serial").mkdir()
    xsagpt("sweep", "-c", spec_file(tmp_path / "serial", base), "--no-plot")
    serial = json.loads((tmp_path / "serial" / "sw" / "summary.json").read_text())

    spec, sw = spec_file(tmp_path, base), tmp_path / "sw"
    for k in ("3", "0"):
        xsagpt("sweep", "-c", spec, "--point", k)
    (sw / NAMES[1]).mkdir()
    (sw / NAMES[1] / "failed.json").write_text(json.dumps({"error": "val loss is nan at step 3"}))
    partial = xsagpt("sweep", "-c", spec, "--summarize", "--no-plot", check=False)
    assert partial.returncode == 1, partial.stderr
    assert ("2 of 4 point(s) are not done and are left out of the summary: xsa,train.seed=1 (failed: val loss is nan "
            "at step 3); sa,train.seed=2 (pending: not started)") in partial.stderr
    summary = json.loads((sw / "summary.json").read_text())
    assert [p["status"] for p in summary["points"]] == ["done", "failed", "pending", "done"]
    status = xsagpt("sweep", "-c", spec, "--status").stdout.splitlines()
    assert [l.split()[:3] for l in status[:4]] == [["0", "done", NAMES[0]], ["1", "failed", NAMES[1]],
                                                   ["2", "pending", NAMES[2]], ["3", "done", NAMES[3]]]
    assert status[1].endswith("val loss is nan at step 3") and status[4] == \
        "4 point(s): 2 done, 0 running, 1 pending, 1 failed, 0 invalid"

    xsagpt("sweep", "-c", spec, "--point", "1", "--retry-failed")
    xsagpt("sweep", "-c", spec, "--point", "2")
    whole = xsagpt("sweep", "-c", spec, "--summarize")
    assert "- sa (paired)" in whole.stdout and (sw / "plots" / "sweep_variants.png").exists()
    summary = json.loads((sw / "summary.json").read_text())
    losses = {p["name"]: (p["final_train_loss"], p["final_val_loss"]) for p in summary["points"]}
    # Non-trivial: four finished points whose variants differ.
    assert all(p["status"] == "done" for p in summary["points"]) and len(set(losses.values())) == 4
    assert losses == {p["name"]: (p["final_train_loss"], p["final_val_loss"]) for p in serial["points"]}
    assert summary["differences"] == serial["differences"]
    for mine, theirs in zip(summary["comparisons"], serial["comparisons"], strict=True):
        assert mine["minus_baseline"] == theirs["minus_baseline"]
