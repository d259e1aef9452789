"""A lease reads its results folder's stages.json only as a regular file of bounded size and
nesting: nested past any state the verdict writes, a symlink to /dev/zero, a FIFO with no
writer or a file of many megabytes is refused in one line naming the file and the advice
the other damage gets (the last bundle's copy, or --reset), quickly and with the file left
as it was. Each case runs the lease as a subprocess with a timeout and a memory limit, so
that a lease that reads without bounds fails the test instead of hanging it or filling
the machine's memory."""
import json
import os
import resource
import subprocess
import sys

import pytest

from verdict.state import MAX_BYTES, MAX_DEPTH, StateDamaged, read_state

MEMORY = 2 << 30  # bytes of address space for the lease: a few hundred MB is all it needs


def limited():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def lease(repo_root, out):
    return subprocess.run([sys.executable, str(repo_root / "scripts/bench/lease.py"), "--cpu-dry-run", "--out",
                           str(out), "--only", "parity-aten", "--budget", "1"], cwd=repo_root, capture_output=True,
                          text=True, timeout=120, preexec_fn=limited)


def deep(path):
    path.write_text('{"preflight": ' + "[" * 100_000 + "]" * 100_000 + "}")


def dev_zero(path):
    path.symlink_to("/dev/zero")


def fifo(path):
    os.mkfifo(path)


def too_big(path):
    entry = {"status": "done", "reason": "x" * 1000, "at": "2026-01-01T00:00:00"}
    path.write_text(json.dumps({f"stage-{i}": entry for i in range(2 * MAX_BYTES // 1000)}))


MAKE = {"nested 100000 deep": (deep, f"nested 100001 deep, more than the {MAX_DEPTH}"),
        "a symlink to /dev/zero": (dev_zero, "a character device (through a symlink), not a regular file"),
        "a FIFO": (fifo, "a FIFO, not a regular file"),
        "over a MiB": (too_big, f"bytes, more than the {MAX_BYTES} bytes a state may hold")}


@pytest.mark.parametrize("case", MAKE)
def test_a_stages_json_the_lease_cannot_bound_is_refused_in_one_line(repo_root, tmp_path, case):
    out = tmp_path / "gpu"
    out.mkdir()
    state = out / "stages.json"
    make, why = MAKE[case]
    make(state)
    before = os.lstat(state)
    proc = lease(repo_root, out)
    # Before: a RecursionError traceback, memory exhausted, a hang, and a read of the whole file.
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{state} is damaged (" in lines[0] and why in lines[0], proc.stderr[-2000:]
    assert "--reset" in lines[0] and "results bundle" in lines[0]  # what to do about it
    after = os.lstat(state)
    assert (after.st_mode, after.st_size, after.st_mtime_ns) == (before.st_mode, before.st_size, before.st_mtime_ns)
    assert not proc.stdout.strip()  # nothing ran


def test_the_bounds_hold_what_the_verdict_writes(tmp_path):
    """The limits leave room for every state: every stage there is, each with a long reason,
    nested as the verdict nests it, and through a symlink to a regular file."""
    state = {f"stage-{i}": {"status": "failed", "reason": "r" * 2000, "at": "2026-01-01T00:00:00", "seconds": 1.5}
             for i in range(100)}
    path = tmp_path / "stages.json"
    path.write_text(json.dumps(state, indent=1))
    assert 100_000 < path.stat().st_size < MAX_BYTES
    link = tmp_path / "link.json"
    link.symlink_to(path)
    assert read_state(path) == state and read_state(link) == state
    path.write_text('{"a": {"status": "done", "reason": "' + "[{" * 5000 + '"}}')  # brackets in a string are text
    assert read_state(path)["a"]["status"] == "done"
    path.write_text('{"a": {"status": "done", "x": ' + "[" * 15 + "]" * 15 + "}}")
    with pytest.raises(StateDamaged, match=f"nested 17 deep, more than the {MAX_DEPTH} levels a state may hold"):
        read_state(path)
