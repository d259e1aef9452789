"""A finished sweep's directory is read, never rewritten by what does not belong to it:
--summarize with another sweep file is refused with the summary and report untouched;
a FIFO in place of a point's done.json or config.json is refused by name, not waited
on; a finished sweep run again on a read-only file system does not try to remove a
failed.json that is not there. One finished two-point sweep, copied per test."""
import json
import os
import shutil
import stat
import subprocess

import pytest

from tinyrun import cpu_config, snapshot


@pytest.fixture(scope="module")
def finished(tmp_path_factory, shards, xsagpt):
    root = tmp_path_factory.mktemp("finished")
    base = cpu_config(root, shards, max_steps=4, ckpt_interval=0, eval_interval=4)
    spec = {"base": str(base), "variants": {"sa": {"model.attention": "sa"}, "xsa": {"model.attention": "xsa"}},
            "baseline": "sa", "out_dir": str(root / "sw")}
    (root / "sw.json").write_text(json.dumps(spec))
    xsagpt("sweep", "-c", root / "sw.json", "--no-plot")
    return root


def copy_of(finished, tmp_path):
    """The finished sweep in tmp_path, its sweep file pointing at the copy."""
    shutil.copytree(finished / "sw", tmp_path / "sw")
    spec = json.loads((finished / "sw.json").read_text())
    spec["out_dir"] = str(tmp_path / "sw")  # out_dir may differ: the same sweep, moved
    (tmp_path / "sw.json").write_text(json.dumps(spec))
    return tmp_path / "sw.json", tmp_path / "sw"


def test_summarize_with_another_sweep_file_is_refused_and_changes_nothing(finished, tmp_path, xsagpt):
    spec, sw = copy_of(finished, tmp_path)
    summary = json.loads((sw / "summary.json").read_text())
    assert [p["status"] for p in summary["points"]] == ["done", "done"]  # a real finished sweep
    other = json.loads(spec.read_text())
    other["variants"] = {"sa": {"model.attention": "sa"}, "gated": {"model.attention": "gated"}}
    (tmp_path / "other.json").write_text(json.dumps(other))
    before = snapshot(sw)
    proc = xsagpt("sweep", "-c", tmp_path / "other.json", "--summarize", "--no-plot", check=False)
    # Before: exit 1, summary.json and report.md rewritten with every point invalid.
    assert proc.returncode == 2, proc.stderr
    assert "made from a different sweep file" in proc.stderr and str(sw) in proc.stderr
    assert snapshot(sw) == before
    # The sweep's own file still summarizes it.
    xsagpt("sweep", "-c", spec, "--summarize", "--no-plot")


@pytest.mark.parametrize("state_file", ["done.json", "config.json"])
def test_a_fifo_in_place_of_a_state_file_is_refused_by_name_not_waited_on(finished, tmp_path, xsagpt, state_file):
    spec, sw = copy_of(finished, tmp_path)
    target = sw / "xsa" / state_file
    assert target.is_file()
    target.unlink()
    os.mkfifo(target)
    # Before: --status opened the FIFO and waited for a writer for ever.
    proc = xsagpt("sweep", "-c", spec, "--status", check=False, timeout=120)
    lines = {line.split()[2]: line for line in proc.stdout.splitlines() if line[:1].isdigit()}
    assert lines["sa"].split()[1] == "done", proc.stdout  # the intact point is still read
    assert lines["xsa"].split()[1] == "invalid", proc.stdout
    assert f"{target}: is a FIFO" in lines["xsa"], proc.stdout
    assert stat.S_ISFIFO(os.stat(target).st_mode)  # left as it is


def read_only_namespaces_work():
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-rm", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not read_only_namespaces_work(), reason="needs unshare -rm (user and mount namespaces)")
def test_a_finished_sweep_runs_again_on_a_read_only_file_system(finished, tmp_path, build_dir):
    spec, sw = copy_of(finished, tmp_path)
    assert not any(sw.rglob("failed.json"))  # the file the rerun tried to remove is absent
    # Once writable, so that sweep.json records the copy's place (a moved sweep rewrites it).
    subprocess.run([build_dir / "xsagpt", "sweep", "-c", spec, "--no-plot"], check=True, capture_output=True)
    before = snapshot(sw)
    # The sweep folder bound read-only onto itself in a mount namespace of the test's own.
    script = (f'mount --bind "{sw}" "{sw}" && mount -o remount,bind,ro "{sw}" && '
              f'exec "{build_dir / "xsagpt"}" sweep -c "{spec}" --no-plot')
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    # Before: "cannot remove .../failed.json: Read-only file system" for a file not there.
    assert "failed.json" not in proc.stderr, proc.stderr
    assert proc.stderr.count("finished, skipping") == 2, proc.stderr
    assert snapshot(sw) == before
