"""scripts/bench/bench_verdict.py (`bash scripts/bench/bench_gpu.sh verdict`) rehearsed on the
CPU: what a lent GPU's 10-minute calls depend on. A stage broken on purpose leaves
the others' rows; a second call skips what is done; a call with no time left
starts nothing and says `pending`; the results bundle is text under 1 MiB, and a
binary file in it is refused by name. A few stages at tiny sizes keep it short;
every stage runs in the manual dry run (docs/gpu-machine.md)."""
import json
import subprocess
import sys
import tarfile

import pytest

STAGES = "preflight,build,parity-aten,parity-norm,parity-rope,step-124m,micro"


@pytest.fixture(scope="module")
def kjv(repo_root):
    shards = repo_root / "data/kjv/shards"
    if not (shards / "val_000000.bin").exists():
        subprocess.run(["bash", str(repo_root / "data/kjv/prepare.sh")], check=True, capture_output=True)
    return shards


def verdict(repo_root, out, *args, env_extra=None):
    env = None
    if env_extra:
        import os
        env = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, str(repo_root / "scripts/bench/bench_verdict.py"), "--cpu-dry-run", "--out",
                           str(out), *args], cwd=repo_root, capture_output=True, text=True, env=env, timeout=900)


def table_rows(text: str) -> dict:
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) > 2:
            rows.setdefault(cells[0], cells)
    return rows


@pytest.fixture(scope="module")
def broken_run(repo_root, kjv, build_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("verdict") / "gpu-dry-run"
    first = verdict(repo_root, out, "--only", STAGES, env_extra={"XSAGPT_VERDICT_BREAK": "parity-norm"})
    return out, first


def test_a_broken_stage_leaves_the_other_rows(broken_run):
    out, proc = broken_run
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a stage failed
    rows = table_rows(proc.stdout)
    assert rows["parity-norm"][1] == "failed" and "train.kernels" in rows["parity-norm"][3]
    for done in ("preflight", "build", "parity-aten", "parity-rope", "step-124m", "micro"):
        assert rows[done][1] == "done", rows[done]
    # The kernel table: norm's loss cell names the failure, rope's holds numbers.
    assert rows["norm"][2].startswith("FAILED (") and rows["rope"][2].startswith(("+", "-"))
    assert rows["rope"][4].endswith("(n=3)") and rows["rope"][5] == "dry run"
    assert rows["tests"][1] == "pending" if "tests" in rows else True
    # What the parity runs leave: JSON only, their checkpoints deleted with the run.
    summary = json.loads((out / "parity-rope.json").read_text())
    assert summary["step"] == 20 and summary["max_param_diff"] >= 0 and summary["tok_s"] > 0
    scratch = out.with_name(out.name + "-scratch")
    assert not list(scratch.glob("parity-*")) and (scratch / "aten-weights.pt").exists()


def test_the_bundle_is_text_under_one_mib(broken_run):
    out, _ = broken_run
    bundle = out.parent / f"{out.name}-results.tgz"
    assert 0 < bundle.stat().st_size < 1 << 20
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
    assert f"{out.name}/verdict.md" in names and f"{out.name}/stages.json" in names
    assert all(n.endswith((".json", ".jsonl", ".md", ".txt", ".log")) for n in names if "." in n.split("/")[-1])


def test_a_second_call_skips_what_is_done_and_retries_on_request(repo_root, broken_run):
    out, _ = broken_run
    again = verdict(repo_root, out, "--only", STAGES)
    assert again.returncode == 1
    assert "parity-aten: done earlier, skipped" in again.stdout and "step-124m: done earlier, skipped" in again.stdout
    assert "parity-norm: failed earlier" in again.stdout and "--retry-failed" in again.stdout
    retry = verdict(repo_root, out, "--only", STAGES, "--retry-failed")
    rows = table_rows(retry.stdout)
    assert retry.returncode == 0, retry.stdout + retry.stderr
    assert rows["parity-norm"][1] == "done" and rows["norm"][2].startswith(("+", "-"))


def test_no_time_left_starts_nothing(repo_root, tmp_path, kjv, build_dir):
    out = tmp_path / "gpu-dry-run"
    # Room for preflight and the (already built) build, not for a parity run (~35 s planned).
    proc = verdict(repo_root, out, "--only", "preflight,build,parity-aten,micro", "--budget", "32")
    assert proc.returncode == 3, proc.stdout + proc.stderr  # pending: call again
    rows = table_rows(proc.stdout)
    assert rows["parity-aten"][1] == "pending" and rows["micro"][1] == "pending"
    assert "parity-aten: pending (needs" in proc.stdout and rows["weights"][2] == "pending"


def test_a_binary_file_in_the_results_is_refused(repo_root, tmp_path, kjv, build_dir):
    out = tmp_path / "gpu-dry-run"
    out.mkdir()
    (out / "model.pt").write_bytes(b"\0" * 100)
    proc = verdict(repo_root, out, "--only", "preflight", "--budget", "60")
    assert proc.returncode != 0 and "model.pt" in proc.stderr and "not text or JSON" in proc.stderr
