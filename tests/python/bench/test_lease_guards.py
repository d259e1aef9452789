"""What a lease's exit code and its results folder may be trusted for, on the CPU
rehearsal of both entry points (scripts/bench/lease.py, bench_verdict.py):

- an exit code of 0 means every stage asked for is done: one that never ran (no time
  for it) is 3, and a budget of 0 or less, or an --only that names no stage, is refused
  by name before anything runs;
- a stopped lease (SIGTERM, as `timeout` sends it, or kill -9) takes its running stage's
  processes with it, and that stage is not recorded done;
- a damaged stages.json (a directory, garbage, a file cut short, the wrong shape) is
  refused by name, file untouched, instead of being read as "nothing done yet".

Only subprocesses of the scripts: the tests hold for any version of them."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import uuid

import pytest


def run(repo_root, script, out, *args):
    return subprocess.run([sys.executable, str(repo_root / "scripts/bench" / script), "--cpu-dry-run",
                           "--out", str(out), *args], cwd=repo_root, capture_output=True, text=True, timeout=600)


def status_row(text: str, stage: str) -> str:
    """The status cell of a stage in the table's Stages list."""
    rows = [l for l in text.splitlines() if l.startswith(f"| {stage} |")]
    return rows[-1].split("|")[2].strip() if rows else ""


@pytest.mark.parametrize("budget", ["0", "-5", "nan"])
@pytest.mark.parametrize("script", ["lease.py", "bench_verdict.py"])
def test_a_budget_that_leaves_no_time_is_refused_by_name(repo_root, tmp_path, script, budget):
    proc = run(repo_root, script, tmp_path / "gpu", "--only", "profile", f"--budget={budget}")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    assert "--budget" in proc.stderr and "positive number of seconds" in proc.stderr
    assert not (tmp_path / "gpu").exists()  # refused before anything ran


@pytest.mark.parametrize("only", ["", ",", "profile,,demo"])
@pytest.mark.parametrize("script", ["lease.py", "bench_verdict.py"])
def test_an_only_that_names_no_stage_is_refused(repo_root, tmp_path, script, only):
    # The budget keeps a version that takes '' for "every stage" from starting them.
    proc = run(repo_root, script, tmp_path / "gpu", f"--only={only}", "--budget", "1")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    assert "--only" in proc.stderr and "stage names" in proc.stderr


def test_a_lease_whose_asked_stage_never_ran_is_not_done(repo_root, tmp_path):
    """One second holds not even the preflight: the asked stage is pending, exit 3."""
    proc = run(repo_root, "lease.py", tmp_path / "gpu", "--only", "profile", "--budget", "1")
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr
    assert "preflight: pending (needs" in proc.stdout
    assert status_row(proc.stdout, "profile") == "pending" and "Not done: profile." in proc.stdout


def test_a_verdict_that_ran_nothing_after_an_earlier_call_is_not_done(repo_root, tmp_path):
    """An earlier call's preflight and build were done; this call has no time for even
    the preflight, so nothing of the verdict ran: exit 3, not 0."""
    out = tmp_path / "gpu"
    out.mkdir()
    earlier = {n: {"status": "done", "reason": "", "at": "2026-01-01T00:00:00", "seconds": 1.0}
               for n in ("preflight", "build")}
    (out / "stages.json").write_text(json.dumps(earlier))
    proc = run(repo_root, "bench_verdict.py", out, "--budget", "1")
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr
    assert "preflight: pending (needs" in proc.stdout


GOOD_STATE = {"preflight": {"status": "done", "reason": "", "at": "2026-01-01T00:00:00", "seconds": 4.0},
              "parity-aten": {"status": "done", "reason": "", "at": "2026-01-01T00:01:00", "seconds": 25.0}}
DAMAGE = {
    "a directory": None,
    "garbage": b"\x00\x9f garbage, not JSON",
    "cut in half": json.dumps(GOOD_STATE, indent=1).encode()[:70],
    "a list": b"[]\n",
    "a stage without a status": json.dumps({"parity-aten": {"reason": ""}}).encode(),
}


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("script", ["lease.py", "bench_verdict.py"])
def test_a_damaged_stages_json_is_refused_by_name_and_left_as_it_was(repo_root, tmp_path, script, damage):
    out = tmp_path / "gpu"
    out.mkdir()
    state = out / "stages.json"
    if DAMAGE[damage] is None:
        (state / "inner").mkdir(parents=True)
    else:
        state.write_bytes(DAMAGE[damage])
    proc = run(repo_root, script, out, "--only", "parity-aten", "--budget", "1")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{state} is damaged" in lines[0], proc.stderr
    assert "--reset" in lines[0] and "results bundle" in lines[0]  # what to do about it
    assert (state / "inner").is_dir() if DAMAGE[damage] is None else state.read_bytes() == DAMAGE[damage]
    assert not proc.stdout.strip()  # nothing ran


def test_reset_starts_afresh_from_a_damaged_state(repo_root, tmp_path):
    out = tmp_path / "gpu"
    out.mkdir()
    (out / "stages.json").write_bytes(DAMAGE["cut in half"])
    proc = run(repo_root, "lease.py", out, "--only", "parity-aten", "--budget", "1", "--reset")
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr


# ---- a stopped lease -------------------------------------------------------------

MARK = "XSAGPT_STAGE_MARK"


def marked(mark: str, but=()) -> list[tuple[int, str]]:
    """(pid, command line) of the live processes whose environment carries MARK=mark."""
    found = []
    for d in pathlib.Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) in but:
            continue
        try:
            if f"{MARK}={mark}".encode() in (d / "environ").read_bytes().split(b"\0"):
                found.append((int(d.name), (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")))
        except OSError:
            pass  # gone, or not ours
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_stopped_lease_leaves_no_stage_process_behind(repo_root, tmp_path, kjv, build_dir, sig):
    """bash execs python: the signal reaches the lease itself, as `timeout 20 bash
    scripts/bench/bench_gpu.sh lease ...` sends it. It is sent once the demo stage's
    own process (xsagpt sweep, which runs for tens of seconds here) is running, so that
    there is a process to leave behind; a lease without a handler or a watchdog leaves
    it running for the rest of its sweep."""
    out, mark = tmp_path / "gpu-dry-run", uuid.uuid4().hex
    lease = subprocess.Popen(["bash", "scripts/bench/bench_gpu.sh", "lease", "--cpu-dry-run", "--out", str(out),
                              "--only", "demo"], cwd=repo_root, env=dict(os.environ, **{MARK: mark}),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        while not [pid for pid, cmd in marked(mark, but={lease.pid}) if " sweep " in cmd]:
            assert lease.poll() is None, "the lease ended before its demo stage ran:\n" + lease.stdout.read()
            assert time.monotonic() < deadline, "no demo stage process within 300 s"
            time.sleep(0.1)
        # Past the moment between its fork and its listing with the watchdog, the one gap
        # docs/gpu-machine.md names.
        time.sleep(0.5)
        lease.send_signal(sig)
        output = lease.communicate(timeout=120)[0]
    finally:
        if lease.poll() is None:
            lease.kill()
    deadline = time.monotonic() + 3  # the watchdog's kill, and the reaping of what it killed
    while (left := marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid, _ in left:  # so that a failing test leaves nothing running either
        os.kill(pid, signal.SIGKILL)
    assert not left, f"left running after the lease ended: {left}"
    state = json.loads((out / "stages.json").read_text())
    assert state.get("demo", {}).get("status") != "done"
    if sig == signal.SIGTERM:
        assert lease.returncode == 128 + signal.SIGTERM, output[-3000:]
        assert state["demo"]["status"] == "pending" and "SIGTERM" in state["demo"]["reason"], state
        assert status_row(output, "demo") == "pending", output[-3000:]  # the table came back
